"""第 10 章：生成英中句对的文法（确定、可复现、一句一译）。

Every sentence is built as a small tree and rendered twice, once in English word
order and once in Chinese word order. The tree is what makes each English
sentence have exactly one Chinese translation; the phenomena are the ones a
translation model needs attention for: time and place phrases move before the
verb, measure words (and 老 or 旧 for "old") are chosen by the noun, English
number words are regrouped into 万 and 亿, relative clauses and "about" phrases
move before the noun, 了 / 没有 / 不 / 会 / 正在 mark aspect and negation,
是 … 的 frames a colour, 因为 … 所以 reorders clauses.
"""
from __future__ import annotations

import functools
import itertools
import random
from dataclasses import dataclass, field

from tf_tutorial._checks import _require_ints
from tf_tutorial.corpus import lexicon

DIGITS = "零 一 二 三 四 五 六 七 八 九".split()
ONES = ("zero one two three four five six seven eight nine ten eleven twelve "
        "thirteen fourteen fifteen sixteen seventeen eighteen nineteen").split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
SCALES = {"hundred": 100, "thousand": 10**3, "million": 10**6}   # the scale words number_en writes


def _require_number(n) -> None:
    """1 ≤ n < 10⁹, an integer (True is not one, 2.0 not two)."""
    _require_ints({"n": n}, 1, "an integer in [1, 10^9)")
    if n >= 10**9:
        raise ValueError(f"n must be an integer in [1, 10^9), but got {n!r}")


def number_en(n: int) -> list[str]:
    """把 1 到 10⁹ − 1 之间的整数写成英文数词，按千分组。

    1 ≤ n < 10⁹ in English words, grouped by thousands, with the British
    "and" before a last part below a hundred: 305000 → three hundred and
    five thousand; 1005 → one thousand and five.
    """
    _require_number(n)

    def below_1000(v: int) -> list[str]:
        words = [ONES[v // 100], "hundred"] if v >= 100 else []
        v %= 100
        if v and words:
            words.append("and")
        if v >= 20:
            words += [TENS[v // 10]] + ([ONES[v % 10]] if v % 10 else [])
        elif v:
            words.append(ONES[v])
        return words

    out = []
    for scale, name in ((10**6, "million"), (10**3, "thousand"), (1, None)):
        group = n // scale % 1000
        if group:
            out += below_1000(group) + ([name] if name else [])
    if n >= 1000 and 0 < n % 1000 < 100:
        out.insert(len(out) - len(below_1000(n % 1000)), "and")
    return out


def number_zh(n: int) -> list[str]:
    """把 1 ≤ n < 10⁹ 写成中文数字：按万、亿分节，按规则补“零”。

    1 ≤ n < 10⁹ in Chinese numerals, grouped by 万 and 亿 with the 零 rules.
    One token per character: 305000 → 三 十 万 五 千;  1005 → 一 千 零 五;
    100000005 → 一 亿 零 五;  15 → 十 五;  2500 → 两 千 五 百 (a leading 2
    reads 两 before 千, 万 and 亿, and 二 elsewhere: 二 百, 一 万 二 千).
    """
    _require_number(n)

    def section(v: int) -> list[str]:  # 1 ≤ v ≤ 9999, with zeros inside it
        out, zero, started = [], False, False
        for d, unit in ((v // 1000, "千"), (v // 100 % 10, "百"),
                        (v // 10 % 10, "十"), (v % 10, "")):
            if d == 0:
                zero = zero or started
                continue
            out += ((["零"] if zero else []) + [DIGITS[d]]
                    + ([unit] if unit else []))
            zero, started = False, True
        return out

    out, gap = [], False
    for value, unit in ((n // 10**8, "亿"), (n // 10**4 % 10**4, "万"),
                        (n % 10**4, "")):
        if value == 0:
            gap = gap or bool(out)
            continue
        if out and (gap or value < 1000):
            out.append("零")  # a missing 千 or a whole empty section reads 零
        out += section(value) + ([unit] if unit else [])
        gap = False
    if out[:2] == ["一", "十"]:          # 十五, not 一十五, at the front
        return out[1:]
    if out[0] == "二" and out[1:2] in (["千"], ["万"], ["亿"]):
        out[0] = "两"                  # 两千, 两万, 两亿 at the front
    return out


# --- the lexicon, parsed once -------------------------------------------------

@dataclass(frozen=True)
class Noun:
    """词典里的一个名词：英文单复数、中文、量词和语义类别。"""
    en: str
    en_plural: str
    zh: tuple
    measure: str
    cls: str
    number: str = ""      # "m" mass (rice), "p" plural only (scissors): no
                          # "a", no number in front


@dataclass(frozen=True)
class Verb:
    """词典里的一个动词：英文原形和过去式、中文，以及它能带的主语和宾语类别。"""
    base: str
    past: str
    zh: str
    subjects: str
    objects: str
    stative: bool
    punctual: bool = False        # 看见, 找到: 了 yes, 正在 no


    @property
    def third(self) -> str:
        """第三人称单数形式（loves、watches）。"""
        return _third_person(self.base)

    @property
    def ing(self) -> str:
        """现在分词形式（loving、running）。"""
        b = self.base
        if b in ("run", "swim", "forget", "shop"):
            return b + b[-1] + "ing"
        if b.endswith("e") and not b.endswith("ee"):
            return b[:-1] + "ing"
        return b + "ing"


def _third_person(base: str) -> str:
    if base.endswith(("s", "sh", "ch", "x", "o")):
        return base + "es"
    if base.endswith("y") and base[-2] not in "aeiou":
        return base[:-1] + "ies"
    return base + "s"


def _plural(word: str) -> str:
    if word.endswith(("s", "sh", "ch", "x")):
        return word + "es"
    if word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def _entries(text: str, sep: str = "|"):
    return [e.strip() for line in text.strip().splitlines()
            for e in line.split(sep) if e.strip()]


def _nouns() -> list[Noun]:
    nouns = []
    for e in _entries(lexicon.NOUNS):
        en, zh, mw, cls, *number = e.split()
        sg, _, pl = en.partition("/")
        sg = sg.replace("_", " ")
        nouns.append(Noun(sg, pl.replace("_", " ") or _plural(sg), (zh,),
                          mw, cls, "".join(number)))
    return nouns


NOUNS = _nouns()
NOUNS_BY_CLASS = {c: [n for n in NOUNS if n.cls == c] for c in "PARFDVWTB"}
# the nouns "a" and a number may count (there is a …, how many …)
COUNTABLE_BY_CLASS = {c: [n for n in nouns if not n.number]
                      for c, nouns in NOUNS_BY_CLASS.items()}
PLACES = [tuple(e.split()) for e in _entries(lexicon.PLACES)]
GIVEN = [tuple(e.split()) for e in _entries(lexicon.GIVEN_NAMES)]
SURNAMES = [tuple(e.split()) for e in _entries(lexicon.SURNAMES)]
TITLES = [tuple(e.split()) for e in _entries(lexicon.TITLES)]
TOPICS = [(en.split(), zh.split()) for en, zh in
          (e.split("|") for e in _entries(lexicon.TOPICS, ";"))]
VERBS = [Verb(*e.split()[:5], stative="s" in e.split()[5:],
              punctual="a" in e.split()[5:])
         for e in _entries(lexicon.VERBS)]
INTRANSITIVE = [Verb(*e.split(), objects="", stative=False)
                for e in _entries(lexicon.INTRANSITIVE)]
ADJECTIVES = [(en, None if comp == "-" else comp,
               [zh] if "b" in flags else [zh, "的"])
              for en, comp, zh, *flags in
              (e.split() for e in _entries(lexicon.ADJECTIVES))]
COLOURS = {en for en, _, _, *flags in
           (e.split() for e in _entries(lexicon.ADJECTIVES)) if "c" in flags}
ANIMATE_ADJECTIVES = dict(e.split() for e in
                          _entries(lexicon.ANIMATE_ADJECTIVES))
PLACE_WORDS = {en: (prep, zh) for en, prep, zh in
               (e.split() for e in _entries(lexicon.PLACE_WORDS))}
TIMES = [(en.split(), zh.split(), tenses) for en, zh, tenses in
         (e.split("|") for e in _entries(lexicon.TIMES, ";"))]
PRONOUNS = {  # subject, object, possessive, Chinese, third person singular
    "I": ("I", "me", "my", "我", False),
    "you": ("you", "you", "your", "你", False),
    "he": ("he", "him", "his", "他", True),
    "she": ("she", "her", "her", "她", True),
    "we": ("we", "us", "our", "我们", False),
    "they": ("they", "them", "their", "他们", False),
}
GIVE = Verb("give", "gave", "给", "P", "RFDTA", stative=False)
LIVE = Verb("live", "lived", "住", "P", "", stative=False)

# Lists drawn from again and again, built once: the generator draws hundreds of
# thousands of sentences, and rebuilding them at every draw cost about a tenth
# of its time. Drawing from a list built once gives exactly the same sentences
# (tests/test_data.py holds a digest of them).
PRONOUN_KEYS = list(PRONOUNS)
TIMES_BY_TENSE = {code: [t for t in TIMES if code in t[2]] for code in "pnf"}
WANT_VERBS = [v for v in VERBS if not v.stative and "P" in v.subjects]
QUESTION_VERBS = {True: [v for v in VERBS if "P" in v.subjects],  # "where"
                  False: VERBS}
LIVE_OR_INTRANSITIVE = INTRANSITIVE + [LIVE] * 4
DET_WEIGHTS = {"the": 5, "a": 3, "num": 2, "this": 1, "poss": 2}


@functools.cache
def gap_verbs(cls: str) -> tuple[list, list]:
    """能让 ``cls`` 类的名词做主语（并带宾语）或做宾语的动词。

    The verbs a relative clause on a noun of class ``cls`` can use: with the
    noun as their subject (and an object), or as their object.
    """
    return ([v for v in VERBS if cls in v.subjects and v.objects],
            [v for v in VERBS if cls in v.objects])


@functools.cache
def _det_cum_weights(dets: tuple) -> list:
    """Running sums of the weights of ``dets``, as
    ``random.choices(cum_weights=...)`` takes them (the same draw as passing
    the weights themselves)."""
    return list(itertools.accumulate(DET_WEIGHTS[d] for d in dets))


@dataclass
class Phrase:
    """句子里渲染好的一段：英文词元、中文词元，以及主谓一致需要的信息。

    A rendered piece of a sentence: its English and Chinese tokens and what
    agreement needs.
    """

    en: list
    zh: list
    plural: bool = False
    third: bool = True            # takes "reads", not "read", in the present
    depth: int = 0                # relative clauses nested inside
    has_rel: bool = False         # ends in a relative clause (nothing may
                                  # follow it in English)
    cls: str = ""
    noun: Noun | None = None


def _article(word: str) -> str:
    vowel = (word[0] in "aeio"
             or (word[0] == "u" and not word.startswith(("us", "uni")))
             or word.startswith(("honest", "hour", "honour", "heir")))
    return "an" if vowel else "a"


def adjective_zh(adj, cls: str) -> list[str]:
    """形容词在 ``cls`` 类名词前的中文：old 修饰人和动物是“老”，修饰东西是“旧”（short 是“矮”和“短”）。

    The Chinese of lexicon entry ``adj`` before a noun of class ``cls``
    (with 的 where the adjective needs it).
    """
    en, _, zh = adj
    if cls in ("P", "A") and en in ANIMATE_ADJECTIVES:
        return [ANIMATE_ADJECTIVES[en]] + zh[1:]
    return list(zh)


# --- rendering: a choice of words → English and Chinese, no randomness --------

def find(table, en: str):
    """在词典的一张表里找出英文为 ``en`` 的条目。

    The lexicon entry whose English is ``en`` (tests and the chapter build
    sentences by hand).
    """
    for entry in table:
        key = (entry.en if isinstance(entry, Noun)
               else entry.base if isinstance(entry, Verb) else entry[0])
        if key == en or (isinstance(key, list) and " ".join(key) == en):
            return entry
    raise KeyError(f"{en!r} is not in this table of the lexicon")


def render_np(noun: Noun, det: str = "the", plural: bool = False, adj=None,
              topic=None, n: int | None = None, owner=None) -> Phrase:
    """把名词短语按英文和中文各自的词序渲染出来。

    English: det adj noun [about topic];
    Chinese: [owner 的] [一/这/数 量词] [关于 topic 的] adj noun.

    det: "the" (no Chinese word), "a", "num" (with ``n``), "this"
    ("these" when plural), "poss" (with ``owner``: a pronoun key such as
    "I", or a name Phrase).
    """
    if det == "num":
        plural = n > 1
    en_head = (([adj[0]] if adj else [])
               + [noun.en_plural if plural else noun.en])
    zh_head = ((["关于"] + topic[1] + ["的"] if topic else [])
               + (adjective_zh(adj, noun.cls) if adj else []) + list(noun.zh))
    if det == "num":
        en_det, zh_det = (number_en(n),
                          (["两"] if n == 2 else number_zh(n)) + [noun.measure])
    elif det == "a":
        en_det, zh_det = [_article(en_head[0])], ["一", noun.measure]
    elif det == "this":
        en_det, zh_det = ((["these"], ["这些"]) if plural
                          else (["this"], ["这", noun.measure]))
    elif det == "poss" and isinstance(owner, Phrase):
        en_det, zh_det = owner.en + ["'s"], owner.zh + ["的"]
    elif det == "poss":
        en_det, zh_det = [PRONOUNS[owner][2]], [PRONOUNS[owner][3], "的"]
    elif det == "the":
        en_det, zh_det = ["the"], []
    else:
        raise ValueError(
            f"det must be one of the, a, num, this, poss, but got {det!r}")
    en = en_det + en_head + (["about"] + topic[0] if topic else [])
    return Phrase(en, zh_det + zh_head, plural=plural, third=not plural,
                  cls=noun.cls, noun=noun)


def add_relative(head: Phrase, clause: Phrase) -> Phrase:
    """给名词短语加上关系从句：中文里从句移到名词前面。

    'the book' + 'that I bought yesterday' → 我 昨天 买 的 书.
    """
    return Phrase(head.en + clause.en, clause.zh + ["的"] + head.zh,
                  plural=head.plural, third=head.third, depth=clause.depth + 1,
                  has_rel=True, cls=head.cls, noun=head.noun)


def render_clause(subj: Phrase, verb: Verb, obj: Phrase,
                  tense: str = "present", neg: bool = False,
                  time: Phrase | None = None,
                  place: Phrase | None = None) -> Phrase:
    """把主谓宾和地点、时间排成一个小句：中文里时间、地点放在动词前面。

    S V O [place] [time] → S [time] [在 place] V [了] O.

    If O ends in a relative clause, a time phrase goes to the front of the
    English sentence and the place phrase is dropped: after the clause they
    could be read as part of it.
    """
    none = Phrase([], [])
    time, place = time or none, place or none
    en_v, aux, v = verb_group(verb, tense, neg, subj)
    if obj.has_rel and (time.en or place.en):
        place = none
        en = time.en + ([","] if time.en else []) + subj.en + en_v + obj.en
    else:
        en = subj.en + en_v + obj.en + place.en + time.en
    zh = subj.zh + time.zh + aux + place.zh + v + obj.zh
    return Phrase(en, zh, depth=max(subj.depth, obj.depth))


def same_person(a: Phrase, b: Phrase) -> bool:
    """主语和宾语是否包含同一个人（文法里没有 myself 这样的反身代词）。

    ``a`` and ``b`` include the same person: I … me, I … us, we … me,
    you … you, or one name twice. English says "myself" or "ourselves"
    there, and the grammar has no reflexives, so such an object is drawn
    again (he … him may be two people, and stays; my book is a noun)."""
    if a.cls != "P" or b.cls != "P" or a.noun or b.noun:
        return False                    # a noun phrase: the teacher, my book
    if {a.zh[0], b.zh[0]} <= {"我", "我们"}:
        return True                     # the speaker on both sides
    # you … you, or a name twice (汤姆, or 王 先生)
    return a.zh == b.zh and a.zh[0] not in ("他", "她", "他们")


def pronoun(key: str, role: str = "subj") -> Phrase:
    """人称代词的短语：按 ``role`` 取主格或宾格。"""
    subj, obj, _, zh, third = PRONOUNS[key]
    return Phrase([subj if role == "subj" else obj], [zh],
                  plural=key in ("we", "they", "you"), third=third, cls="P")


def place_phrase(where: Phrase) -> Phrase:
    """地点短语：英文的介词短语，中文的“在 …（方位词）”。

    at the library → 在 图书馆;  in Beijing → 在 北京;  at the lake →
    在 湖 边, on the island → 在 岛 上 (``lexicon.PLACE_WORDS``)."""
    prep, after = ("in" if where.cls == "C" else "at"), []
    if where.noun is not None and where.noun.en in PLACE_WORDS:
        prep, zh = PLACE_WORDS[where.noun.en]
        after = [zh]
    return Phrase([prep] + where.en, ["在"] + where.zh + after)


def verb_group(verb: Verb, tense: str, neg: bool, subj: Phrase,
               rel: bool = False):
    """动词组：英文的助动词和动词形式；中文的时体、否定词和动词。

    English verb group; Chinese aspect/negation words and the verb (with 了
    after a past verb in a main clause). A 在-phrase goes between the two
    Chinese parts."""
    third = subj.third and not subj.plural
    if tense == "past":
        en = ["did", "not", verb.base] if neg else [verb.past]
        aux = ["没有"] if neg else []
        v = [verb.zh] if neg or rel or verb is LIVE else [verb.zh, "了"]
    elif tense == "present":
        do = "does" if third else "do"
        en = ([do, "not", verb.base] if neg
              else [verb.third if third else verb.base])
        aux, v = (["不"] if neg else []), [verb.zh]
    elif tense == "future":
        en = ["will", "not", verb.base] if neg else ["will", verb.base]
        aux, v = (["不", "会"] if neg else ["会"]), [verb.zh]
    else:                                              # progressive
        be = "am" if subj.en == ["I"] else "is" if third else "are"
        en, aux, v = [be, verb.ing], ["正在"], [verb.zh]
    return en, aux, v


@dataclass
class Grammar:
    """句对生成器：``rng`` 决定随机性，``max_depth`` 限制嵌套深度。

    Sentence generator; ``rng`` makes it deterministic, ``max_depth`` bounds
    the nesting.

    ``sentence()`` returns ``(english_tokens, chinese_tokens, depth)``.
    ``deep=True`` makes nesting likely (for the deeper split); ``question_p``
    and ``coord_p`` set how often a sentence is a question or two coordinated
    clauses (``coord_p=1`` for the longer split).
    """

    rng: random.Random = field(default_factory=lambda: random.Random(0))
    max_depth: int = 2
    rel_p: float = 0.5
    deep: bool = False            # every noun phrase that may take a relative
                                  # clause takes "the"
    question_p: float = 0.15
    coord_p: float = 0.15

    # --- noun phrases ---------------------------------------------------------
    def name(self) -> Phrase:
        """随机的人名：一个名字，或“称谓 + 姓”（中文里是“姓 + 称谓”）。"""
        if self.rng.random() < 0.5:
            en, zh = self.rng.choice(GIVEN)
            return Phrase([en], [zh], cls="P")
        (sen, szh), (ten, tzh) = (self.rng.choice(SURNAMES),
                                  self.rng.choice(TITLES))
        return Phrase([ten, sen], [szh, tzh], cls="P")

    def pronoun(self, role: str) -> Phrase:
        """随机的人称代词，按 ``role`` 取主格或宾格。"""
        return pronoun(self.rng.choice(PRONOUN_KEYS), role)

    def city(self) -> Phrase:
        """随机的城市或国家名。"""
        en, zh = self.rng.choice(PLACES)
        return Phrase([en], [zh], cls="C")

    def argument(self, classes: str, role: str, depth: int,
                 rel: bool = True) -> Phrase:
        """能充当主语或宾语的随机成分：城市、代词、人名或名词短语。

        Anything that can fill a subject or object slot of a verb taking
        ``classes``.
        """
        r = self.rng.random()
        if "C" in classes and (r < 0.3 or classes == "C"):
            return self.city()
        if "P" in classes and r < 0.55:
            return self.pronoun(role) if r < 0.35 else self.name()
        return self.noun_phrase(classes.replace("C", ""), depth, rel)

    def quantity(self) -> int:
        """随机的数量：多半是小数目，否则是 1 到 9 位数，常是整数（如 305000）。

        Small counts often; otherwise 1 to 9 digits, often round (305000).
        """
        rng = self.rng
        if rng.random() < 0.4:
            return rng.randint(1, 20)
        digits = rng.randint(2, 9)
        n = rng.randrange(10 ** (digits - 1), 10 ** digits)
        if rng.random() < 0.6:  # keep 1-3 significant digits
            unit = 10 ** max(digits - rng.randint(1, 3), 0)
            n = max(n // unit * unit, 1)
        return n

    def noun_phrase(
            self, classes: str, depth: int, rel: bool = True,
            dets: tuple = ("the", "a", "num", "this", "poss")) -> Phrase:
        """随机的名词短语：限定词、可选的形容词和话题，可能带一个关系从句。"""
        rng = self.rng
        counted = not {"the", "this", "poss"} & set(dets)
        noun = rng.choice((COUNTABLE_BY_CLASS if counted
                           else NOUNS_BY_CLASS)[rng.choice(classes)])
        det = rng.choices(dets, cum_weights=_det_cum_weights(dets))[0]
        if (self.deep and rel and depth > 0 and "the" in dets
                or noun.number and det in ("a", "num")
                or noun.number == "m" and det == "this"):  # not 这 碗 米饭
            det = "the"
        plural = rng.random() < 0.4 if det in ("the", "this", "poss") else False
        plural = {"m": False, "p": True}.get(noun.number, plural)
        # 大 人, 小 人, 高 人 are other words (adult, villain, master)
        adj = (rng.choice(ADJECTIVES) if rng.random() < 0.2
               and noun.en != "man" else None)
        topic = (rng.choice(TOPICS) if noun.cls == "R" and rng.random() < 0.3
                 else None)
        n = self.quantity() if det == "num" else None
        owner = None
        if det == "poss":
            owner = (self.name() if rng.random() < 0.4
                     else rng.choice(PRONOUN_KEYS))
        phrase = render_np(noun, det, plural, adj, topic, n, owner)
        if det == "the" and rel and depth > 0 and rng.random() < self.rel_p:
            return add_relative(phrase, self.relative(phrase, depth - 1))
        return phrase

    # --- clauses --------------------------------------------------------------
    def relative(self, head: Phrase, depth: int) -> Phrase:
        """一个关系从句：中文以“的”结尾，后面跟它修饰的名词。

        'that I bought yesterday' → 我 昨天 买 的.
        """
        rng = self.rng
        who = "who" if head.cls == "P" else "that"
        tense = rng.choice(["past", "present"])
        neg = rng.random() < 0.15
        subject_gap, object_gap = gap_verbs(head.cls)
        if rng.random() < 0.5 and subject_gap:
            verb = rng.choice(subject_gap)
            tense = "present" if verb.stative else tense
            obj = self.argument(verb.objects, "obj", depth)
            en_v, aux, v = verb_group(verb, tense, neg, head, rel=True)
            en = [who] + en_v + obj.en
            time, place = self.adjuncts(tense, not obj.has_rel, head.cls)
            zh = time.zh + aux + place.zh + v + obj.zh
            return Phrase(en + place.en + time.en, zh, depth=obj.depth)
        verb = rng.choice(object_gap)
        tense = "present" if verb.stative else tense
        subj = self.argument(verb.subjects, "subj", depth, rel=False)
        en_v, aux, v = verb_group(verb, tense, neg, subj, rel=True)
        time, place = self.adjuncts(tense, True, subj.cls)
        zh = subj.zh + time.zh + aux + place.zh + v
        return Phrase([who] + subj.en + en_v + place.en + time.en, zh,
                      depth=subj.depth)

    def adjuncts(self, tense: str, allowed: bool, subj_cls: str):
        """可选的时间和地点状语：英文放在句末，中文放在动词前。

        Optional time and place phrases: English puts them last, Chinese before
        the verb.
        """
        rng, none = self.rng, Phrase([], [])
        if not allowed or tense == "progressive":
            return none, none
        time = none
        if rng.random() < 0.35:
            code = {"past": "p", "present": "n", "future": "f"}[tense]
            en, zh, _ = rng.choice(TIMES_BY_TENSE[code])
            time = Phrase(list(en), list(zh))
        place = none
        if subj_cls in "PA" and rng.random() < 0.3:
            where = (self.city() if rng.random() < 0.3
                     else self.noun_phrase("B", 0, rel=False))
            place = place_phrase(where)
        return time, place
    def subject(self, classes: str, depth: int) -> Phrase:
        """随机的主语（见 :meth:`argument`）。"""
        return self.argument(classes, "subj", depth)

    def object(self, classes: str, depth: int, subj: Phrase,
               rel: bool = True) -> Phrase:
        """随机的宾语，不和主语是同一个人（没有 myself 这样的反身代词）。"""
        obj = self.argument(classes, "obj", depth, rel)
        while same_person(subj, obj):
            obj = self.argument(classes, "obj", depth, rel)
        return obj

    def transitive(self, depth: int, tense: str | None = None,
                   neg: bool | None = None) -> Phrase:
        """及物动词的句子，可带地点、时间和关系从句。

        S V O [place] [time] → S [time] [在 place] V [了] O; a relative
        clause on O sends the English time phrase to the front (so that it
        cannot be read as part of the clause)."""
        rng = self.rng
        verb = rng.choice(VERBS)
        tense = tense or rng.choices(
            ["past", "present", "future", "progressive"], [4, 3, 2, 1])[0]
        tense = "present" if verb.stative else tense
        if tense == "past" and verb.past == verb.base:
            # 'I read' could be either
            tense = "present" if rng.random() < 0.5 else "future"
        neg = ((rng.random() < 0.2 and tense != "progressive")
               if neg is None else neg)
        subj = self.subject(verb.subjects, depth)
        obj = self.object(verb.objects, depth, subj)
        time, place = self.adjuncts(tense, True, subj.cls)
        if verb.punctual and tense == "progressive":
            # 正在 看见 is not Chinese. Decided after the draws (a progressive
            # clause draws no time or place), so no other sentence changes.
            tense = "present"
        return render_clause(subj, verb, obj, tense, neg, time, place)

    def intransitive(self, depth: int) -> Phrase:
        """不及物动词的小句，带可选的时间和地点状语。"""
        rng = self.rng
        verb = rng.choice(LIVE_OR_INTRANSITIVE)
        tense = rng.choices(["past", "present", "future", "progressive"],
                            [4, 3, 2, 1])[0]
        if verb is LIVE and tense == "progressive":
            tense = "present"
        neg = rng.random() < 0.2 and tense != "progressive"
        subj = self.subject(verb.subjects, depth)
        en_v, aux, v = verb_group(verb, tense, neg, subj)
        time, place = self.adjuncts(tense, True, subj.cls)
        if verb is LIVE:  # 住 在 北京: the place follows the verb
            c = self.city()
            return Phrase(subj.en + en_v + ["in"] + c.en + time.en,
                          subj.zh + time.zh + aux + v + ["在"] + c.zh,
                          depth=subj.depth)
        return Phrase(subj.en + en_v + place.en + time.en,
                      subj.zh + time.zh + aux + place.zh + v, depth=subj.depth)

    def give(self, depth: int) -> Phrase:
        """“给”字句：谁给谁什么（过去、现在或将来）。

        S gave P X → S 给 了 P X."""
        tense = self.rng.choice(["past", "present", "future"])
        neg = self.rng.random() < 0.2
        subj = self.subject("P", depth)
        to = self.object("P", 0, subj, rel=False)
        thing = self.argument(GIVE.objects, "obj", depth)
        en_v, aux, v = verb_group(GIVE, tense, neg, subj)
        time, _ = self.adjuncts(tense, not thing.has_rel, "")
        return Phrase(subj.en + en_v + to.en + thing.en + time.en,
                      subj.zh + time.zh + aux + v + to.zh + thing.zh,
                      depth=max(subj.depth, thing.depth))

    def describe(self, depth: int) -> Phrase:
        """形容词谓语句：描述、比较，或说颜色。

        X is (very / not) ADJ → X 很 / 非常 / 不 ADJ.
        X is ADJer than Y → X 比 Y ADJ.  A colour takes 是 … 的 and no
        degree: X is (not) red → X (不) 是 红色 的.
        """
        rng = self.rng
        cls = rng.choice("PATRVB")
        subj = (self.noun_phrase(cls, depth)
                if cls != "P" or rng.random() < 0.6 else self.name())
        be = ["are"] if subj.plural else ["is"]
        adj = rng.choice(ADJECTIVES)
        en_adj, comp, zh_adj = adj[0], adj[1], adjective_zh(adj, cls)
        if comp and rng.random() < 0.5:
            other = (self.noun_phrase(cls, 0, rel=False) if cls != "P"
                     else self.name())
            return Phrase(subj.en + be + [comp, "than"] + other.en,
                          subj.zh + ["比"] + other.zh + zh_adj[:1],
                          depth=subj.depth)
        adv_en, adv_zh = rng.choice([([], "很"), (["very"], "非常"),
                                     (["not"], "不")])
        if en_adj in COLOURS:      # drawn like the others, so no other
            neg = adv_en == ["not"]  # sentence changes
            return Phrase(subj.en + be + adv_en[:neg] + [en_adj],
                          subj.zh + ["不"] * neg + ["是"] + zh_adj,
                          depth=subj.depth)
        return Phrase(subj.en + be + adv_en + [en_adj],
                      subj.zh + [adv_zh] + zh_adj[:1], depth=subj.depth)

    def there_is(self, depth: int) -> Phrase:
        """存在句：某处有几个什么，中文用“里 有”“上 有”和量词。

        there are N X in the B → B 里 有 N 量词 X;  on the island → 岛 上
        (the places that ``lexicon.PLACE_WORDS`` puts "on")."""
        where = self.noun_phrase("B", 0, rel=False,
                                 dets=("the", "this", "poss"))
        thing = self.noun_phrase(self.rng.choice("PATRF"), depth, rel=False,
                                 dets=("a", "num"))
        be = "are" if thing.plural else "is"
        # the lexicon's place word (in the square → 广场 上), but what is at
        # the lake is in it: 湖 里 有
        prep, zh = PLACE_WORDS.get(where.noun.en, ("in", "里"))
        if prep == "at":
            prep, zh = "in", "里"
        return Phrase(["there", be] + thing.en + [prep] + where.en,
                      where.zh + [zh, "有"] + thing.zh)

    def want(self, depth: int) -> Phrase:
        """“想”字句：某人想做某事。

        S wants to V O → S 想 V O."""
        verb = self.rng.choice(WANT_VERBS)
        subj = self.subject("P", depth)
        obj = self.object(verb.objects, depth, subj)
        third = subj.third and not subj.plural
        neg = self.rng.random() < 0.2
        en_w = (["does" if third else "do", "not", "want"] if neg
                else ["wants" if third else "want"])
        return Phrase(subj.en + en_w + ["to", verb.base] + obj.en,
                      subj.zh + (["不"] if neg else [])
                      + ["想", verb.zh] + obj.zh,
                      depth=max(subj.depth, obj.depth))

    # --- questions ------------------------------------------------------------
    def _question_verb(self, verb: Verb, tense: str, subj: Phrase):
        third = subj.third and not subj.plural
        if tense == "past":
            return ["did"], [verb.base], [], [verb.zh, "了"]
        if tense == "future":
            return ["will"], [verb.base], ["会"], [verb.zh]
        return ["does" if third else "do"], [verb.base], [], [verb.zh]

    def question(self, depth: int) -> Phrase:
        """疑问句：是非问和特指问，中文保持陈述句的语序。

        Yes/no (… 吗), what/who as object or subject, where, how many: the
        Chinese keeps the statement's word order and puts
        什么 / 谁 / 哪里 / 多少 where the answer would go."""
        rng = self.rng
        kind = rng.choice(["yesno", "yesno", "what", "who", "where", "howmany"])
        verb = rng.choice(QUESTION_VERBS[kind == "where"])
        tense = ("present" if verb.stative
                 else rng.choice(["past", "present", "future"]))
        if tense == "past" and verb.past == verb.base:
            tense = "future"
        if kind == "who":  # who bought the car ?
            obj = self.argument(verb.objects, "obj", depth)
            en_v, aux, v = verb_group(verb, tense, False,
                                      Phrase(["who"], ["谁"]))
            return Phrase(["who"] + en_v + obj.en, ["谁"] + aux + v + obj.zh,
                          depth=obj.depth)
        subj = self.subject(verb.subjects if kind != "where" else "P", depth)
        en_aux, en_v, aux, v = self._question_verb(verb, tense, subj)
        if kind == "howmany":
            cls = rng.choice([c for c in verb.objects if c in "ARFDVWT"]
                             or ["T"])
            noun = rng.choice(COUNTABLE_BY_CLASS[cls])
            return Phrase(
                ["how", "many", noun.en_plural] + en_aux + subj.en + en_v,
                subj.zh + aux + v + ["多少", noun.measure] + list(noun.zh),
                depth=subj.depth)
        if kind == "what":
            wh = ((["who"], ["谁"]) if verb.objects.strip("C") == "P"
                  else (["what"], ["什么"]))
            time, place = self.adjuncts(tense, True, subj.cls)
            return Phrase(wh[0] + en_aux + subj.en + en_v + place.en + time.en,
                          subj.zh + time.zh + aux + place.zh + v + wh[1],
                          depth=subj.depth)
        obj = self.object(verb.objects, depth, subj, rel=kind == "yesno")
        if kind == "where":
            return Phrase(["where"] + en_aux + subj.en + en_v + obj.en,
                          subj.zh + aux + ["在", "哪里"] + v + obj.zh,
                          depth=max(subj.depth, obj.depth))
        time, place = self.adjuncts(tense, not obj.has_rel, subj.cls)
        return Phrase(en_aux + subj.en + en_v + obj.en + place.en + time.en,
                      subj.zh + time.zh + aux + place.zh + v + obj.zh + ["吗"],
                      depth=max(subj.depth, obj.depth))

    # --- sentences ------------------------------------------------------------
    def clause(self, depth: int) -> Phrase:
        """按权重随机选一种句型，生成一个小句。"""
        frames = [self.transitive, self.intransitive, self.give, self.describe,
                  self.there_is, self.want]
        return self.rng.choices(frames, [10, 3, 1, 2, 1, 1])[0](depth)

    def sentence(self):
        """生成一个句对：``(英文词元, 中文词元, 嵌套深度)``。

        One sentence pair: ``(english_tokens, chinese_tokens, depth)``.
        """
        rng, depth = self.rng, self.max_depth
        r = rng.random()
        if r < self.question_p:
            p, end = self.question(depth), ("?", "？")
        elif r < self.question_p + self.coord_p:
            a, b = self.clause(depth), self.clause(depth)
            kind = rng.choice(["but", "and", "because"])
            if kind == "because":  # A because B → 因为 B ， 所以 A
                en, zh = (a.en + ["because"] + b.en,
                          ["因为"] + b.zh + ["，", "所以"] + a.zh)
            else:
                # "and" between two unrelated clauses is a comma in
                # Chinese (而且 would say "what is more")
                en = a.en + [",", kind] + b.en
                zh = a.zh + ["，"] + ["但是"] * (kind == "but") + b.zh
            p, end = Phrase(en, zh, depth=max(a.depth, b.depth)), (".", "。")
        else:
            p, end = self.clause(depth), (".", "。")
        return p.en + [end[0]], p.zh + [end[1]], p.depth
