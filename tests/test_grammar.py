"""The toy grammar: numbers, hand-written sentences, one translation per English sentence."""
import random

import pytest

from tf_tutorial.corpus import grammar as g
from tf_tutorial.corpus.grammar import (ADJECTIVES, NOUNS, PLACES, TIMES, TOPICS, VERBS, Grammar, Phrase,
                                 add_relative, find, number_en, number_zh, place_phrase, pronoun,
                                 render_clause, render_np)


@pytest.mark.parametrize("n, en, zh", [
    (1, "one", "一"), (2, "two", "二"), (10, "ten", "十"), (15, "fifteen", "十五"),
    (110, "one hundred and ten", "一百一十"), (1005, "one thousand five", "一千零五"),
    (10050, "ten thousand fifty", "一万零五十"), (100000, "one hundred thousand", "十万"),
    (305000, "three hundred and five thousand", "三十万五千"),
    (1150000, "one million one hundred and fifty thousand", "一百一十五万"),
    (100000005, "one hundred million five", "一亿零五"),
    (100100000, "one hundred million one hundred thousand", "一亿零一十万"),
    (120000000, "one hundred and twenty million", "一亿二千万"),
])
def test_numbers_are_regrouped_into_wan_and_yi(n, en, zh):
    assert " ".join(number_en(n)) == en
    assert "".join(number_zh(n)) == zh


def test_numbers_reject_out_of_range():
    for bad in (0, 10**9):
        with pytest.raises(ValueError, match=r"n must be in \[1, 10\^9\), but got"):
            number_zh(bad)


def noun(en):
    return find(NOUNS, en)


def city(en):
    zh = dict(PLACES)[en]
    return Phrase([en], [zh], cls="C")


def time(en):
    e, z, _ = find(TIMES, en)
    return Phrase(list(e), list(z))


def check(phrase, en, zh):
    assert " ".join(phrase.en) == en
    assert " ".join(phrase.zh) == zh


def test_seed_sentences():
    check(render_clause(pronoun("I"), find(VERBS, "love"), city("China")), "I love China", "我 爱 中国")
    dog, man = render_np(noun("dog")), render_np(noun("man"))
    bite = find(VERBS, "bite")
    check(render_clause(dog, bite, man), "the dog bites the man", "狗 咬 人")
    check(render_clause(man, bite, dog), "the man bites the dog", "人 咬 狗")
    book = render_np(noun("book"), "a", topic=find(TOPICS, "quantum physics"))
    library = place_phrase(render_np(noun("library")))
    check(render_clause(pronoun("I"), find(VERBS, "borrow"), book, "past", time=time("yesterday"), place=library),
          "I borrowed a book about quantum physics at the library yesterday",
          "我 昨天 在 图书馆 借 了 一 本 关于 量子 物理 的 书")


def test_relative_clause_moves_before_the_noun():
    bought = Phrase(["that"] + ["I", "bought"] + ["yesterday"], ["我", "昨天", "买"])
    check(add_relative(render_np(noun("book")), bought), "the book that I bought yesterday", "我 昨天 买 的 书")
    # through the generator's own clause builder: the verb carries no 了 inside a relative clause
    en_v, aux, v = g.verb_group(find(VERBS, "buy"), "past", False, pronoun("I"), rel=True)
    assert (en_v, aux, v) == (["bought"], [], ["买"])


def test_measure_words_follow_the_noun_and_numbers_regroup():
    check(render_np(noun("dog"), "num", n=3), "three dogs", "三 只 狗")
    check(render_np(noun("book"), "num", n=2), "two books", "两 本 书")
    check(render_np(noun("book"), "num", n=305000), "three hundred and five thousand books",
          "三 十 万 五 千 本 书")
    check(render_np(noun("car"), "a", adj=find(ADJECTIVES, "red")), "a red car", "一 辆 红色 的 汽车")
    check(render_np(noun("umbrella"), "a"), "an umbrella", "一 把 雨伞")
    check(render_np(noun("dog"), "poss", owner="she"), "her dog", "她 的 狗")


def test_aspect_and_negation():
    tom, read, books = Phrase(["Tom"], ["汤姆"], cls="P"), find(VERBS, "read"), render_np(noun("book"), plural=True)
    check(render_clause(tom, read, books, "present"), "Tom reads the books", "汤姆 读 书")
    check(render_clause(tom, read, books, "past", neg=True), "Tom did not read the books", "汤姆 没有 读 书")
    check(render_clause(tom, read, books, "future", neg=True), "Tom will not read the books", "汤姆 不 会 读 书")
    check(render_clause(pronoun("I"), read, books, "progressive"), "I am reading the books", "我 正在 读 书")


def test_time_moves_to_the_front_when_the_object_ends_in_a_relative_clause():
    rel = add_relative(render_np(noun("book")), Phrase(["that", "he", "wrote"], ["他", "写"]))
    out = render_clause(pronoun("I"), find(VERBS, "buy"), rel, "past", time=time("yesterday"))
    check(out, "yesterday , I bought the book that he wrote", "我 昨天 买 了 他 写 的 书")


def test_lexicon_is_rich_enough():
    en, zh = set(), set()
    gr = Grammar(random.Random(3))
    for _ in range(30_000):
        e, z, _ = gr.sentence()
        en.update(e)
        zh.update(z)
    assert len(en) >= 1000 and len(zh) >= 1000, (len(en), len(zh))


def test_each_english_sentence_has_exactly_one_translation():
    seen = {}
    for depth, seed in ((2, 11), (3, 12)):
        gr = Grammar(random.Random(seed), max_depth=depth, rel_p=0.7)
        for _ in range(60_000):
            en, zh, _ = gr.sentence()
            key = " ".join(en)
            assert seen.setdefault(key, zh) == zh, f"{key!r} → {seen[key]} and {zh}"


def test_generator_is_deterministic_from_its_seed():
    runs = [[gr.sentence() for _ in range(200)] for gr in (Grammar(random.Random(5)), Grammar(random.Random(5)))]
    assert runs[0] == runs[1]
    assert runs[0] != [Grammar(random.Random(6)).sentence() for _ in range(200)]


def test_render_np_rejects_unknown_determiner():
    with pytest.raises(ValueError, match="det must be one of"):
        render_np(noun("dog"), "those")
    with pytest.raises(KeyError, match="'unicorn' is not in"):
        noun("unicorn")
