"""Corpus splits, vocabulary and batching."""
import hashlib
import json
import re

import pytest
import torch

from conftest import committed_record
from tf_tutorial.book.records import corpus_version
from tf_tutorial.corpus.data import (CORPUS_VERSION, MAX_TRAIN_LEN, Vocab, batch_indices, batches, encode_pairs,
                                     make_corpus, same_sentences, pad, tokenize_en)
from tf_tutorial.corpus.grammar import Grammar


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(n_train=3000, n_valid=200, n_test=200, n_longer=60, n_deeper=50, seed=4)


def test_splits_share_no_sentence(corpus):
    keys = [{" ".join(en) for en, _ in split} for split in corpus.splits().values()]
    assert [len(k) for k in keys] == [3000, 200, 200, 60, 50]
    for i in range(5):
        for j in range(i + 1, 5):
            assert not keys[i] & keys[j]


def test_longer_split_is_longer_but_not_deeper(corpus):
    train_max = max(len(en) for en, _ in corpus.train)
    assert train_max <= MAX_TRAIN_LEN
    assert min(len(en) for en, _ in corpus.longer) > MAX_TRAIN_LEN >= train_max
    relatives = lambda en: sum(w in ("that", "who") for w in en[1:])          # noqa: E731
    # two coordinated clauses from the training grammar (depth <= 2, see test_grammar_depth_matches_generator_flag)
    assert any(relatives(en) >= 2 for en, _ in corpus.longer)
    assert all(("," in en) or ("because" in en) for en, _ in corpus.longer)


def test_deeper_split_is_deeper_but_not_longer(corpus):
    relatives = lambda en: sum(w in ("that", "who") for w in en[1:])          # noqa: E731
    assert min(relatives(en) for en, _ in corpus.deeper) >= 3
    small = make_corpus(n_train=1000, n_valid=50, n_test=50, n_longer=10, n_deeper=10, seed=4)
    for c in (corpus, small):
        train_max = max(len(en) for en, _ in c.train)
        assert max(len(en) for en, _ in c.deeper) <= train_max
        assert max(len(zh) for _, zh in c.deeper) <= max(len(zh) for _, zh in c.train)
    assert train_max < MAX_TRAIN_LEN        # the small one stops short of the limit, and its deeper split with it
    s = corpus.summary()
    assert s["deeper"]["mean_en_len"] > s["train"]["mean_en_len"]        # deeper sentences are not short


def test_same_sentences_says_which_versions_draw_alike():
    # version 2 changed only some Chinese words; version 3 changed what the grammar draws
    assert same_sentences(1, 2) and same_sentences(2, 1) and same_sentences(3, 3)
    assert not same_sentences(2, 3) and not same_sentences(1, CORPUS_VERSION) and not same_sentences(3, 1)


def test_corpus_is_deterministic_from_seed(corpus):
    again = make_corpus(n_train=3000, n_valid=200, n_test=200, n_longer=60, n_deeper=50, seed=4)
    assert again.train == corpus.train and again.longer == corpus.longer and again.deeper == corpus.deeper
    assert make_corpus(n_train=3000, n_valid=200, n_test=200, n_longer=60, n_deeper=50, seed=5).test != corpus.test


def test_the_sentences_are_those_the_records_were_measured_on(corpus):
    # book/records/ (chapters 10-12) were measured on this grammar's sentences; the digest was taken
    # from the generator as it stood when they were written. A change that draws other sentences
    # (another random draw, another order of draws) must be deliberate: re-run the records too.
    # (2026-12-05: the deeper split's English limit became the training split's own longest; this
    # small split's changed, while the records' corpora, 100,000 and 300,000 pairs, reach 40 and
    # keep theirs. On 2026-12-05, CORPUS_VERSION 2 corrected the Chinese of some words and phrases:
    # the records were taken again, apart from the GPU record, which chapters 10 and 11 label.
    # On 2026-12-07, CORPUS_VERSION 3 corrected words, counts and numbers; its draws differ.)
    text = json.dumps(list(corpus.splits().values()), ensure_ascii=False)
    assert hashlib.sha256(text.encode()).hexdigest() == (
        "931c34c310fbe5bd924977bf4693bb24e457a1d4dbfca3415479051069fa5dcd")


def test_the_records_name_the_corpus_they_were_trained_on():
    # a change of the grammar bumps CORPUS_VERSION and takes these records again; the GPU record
    # waits for a GPU, and chapters 10 and 11 say which version it used (test_ch10_gpu_paragraph)
    for name in ("cpu_calibration.json", "ch11_budget.json", "ch12_variants.json"):
        assert corpus_version(committed_record(name)) == CORPUS_VERSION, name


def test_the_generalisation_splits_are_drawn_when_first_read():
    sizes = dict(n_train=300, n_valid=20, n_test=20, n_longer=15, n_deeper=10, seed=2)
    a, b = make_corpus(**sizes), make_corpus(**sizes)
    assert "longer" not in vars(a) and "deeper" not in vars(a)     # a run that only trains never pays
    b_deeper = b.deeper                          # read first: it draws longer first (its no-repeat rule)
    assert (a.longer, a.deeper) == (b.longer, b_deeper)
    assert [len(a.longer), len(a.deeper)] == [15, 10] and a.longer is a.longer   # drawn once


def test_vocab_round_trip(corpus):
    v = corpus.tgt_vocab
    assert v.itos[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    for _, zh in corpus.valid[:50]:
        ids = v.encode(zh, bos=True, eos=True)
        assert ids[0] == v.bos_id and ids[-1] == v.eos_id
        if all(t in v for t in zh):
            assert v.decode(ids) == zh
    assert Vocab(["b", "a"]).encode(["a", "zzz"]) == [4, 3]          # unknown → UNK
    # words: the ordinary tokens, specials left out even when passed in
    assert Vocab(["b", "<eos>", "a"]).words == ["a", "b"]
    assert v.words == v.itos[4:] and not set(v.words) & {"<pad>", "<unk>"}
    assert v.decode(torch.tensor([v.bos_id, 5, v.eos_id, 6])) == [v.itos[5]]   # stops at EOS


def test_every_train_word_is_in_the_vocab_and_sizes_reach_1000():
    c = make_corpus(n_train=40_000, n_valid=10, n_test=10, n_longer=1, n_deeper=1, seed=0)
    assert len(c.src_vocab) > 1000 and len(c.tgt_vocab) > 1000
    assert {t for en, _ in c.train for t in en} <= set(c.src_vocab.itos)
    assert {t for _, zh in c.train for t in zh} <= set(c.tgt_vocab.itos)


def test_batches_bucket_by_length_and_cover_everything(corpus):
    enc = encode_pairs(corpus.train, corpus.src_vocab, corpus.tgt_vocab)
    seen, pad_fraction = 0, []
    for src, tgt in batches(enc, 32, seed=1):
        assert src.dtype == torch.long and src.shape[0] == tgt.shape[0] <= 32
        assert (tgt[:, 0] == corpus.tgt_vocab.bos_id).all()
        seen += src.shape[0]
        pad_fraction.append((src == 0).float().mean().item())
    assert seen == len(enc)
    assert sum(pad_fraction) / len(pad_fraction) < 0.1     # random batches pad far more
    order1 = [s[0].tolist() for s, _ in batches(enc, 32, seed=1)]
    assert order1 == [s[0].tolist() for s, _ in batches(enc, 32, seed=1)]
    assert order1 != [s[0].tolist() for s, _ in batches(enc, 32, seed=2)]


def test_pad_and_tokenize():
    assert pad([[5, 6, 7], [8]], 0).tolist() == [[5, 6, 7], [8, 0, 0]]
    assert tokenize_en("I love China.") == ["I", "love", "China", "."]
    assert tokenize_en("did Tom's dog bite you?") == ["did", "Tom", "'s", "dog", "bite", "you", "?"]


def test_pad_of_nothing_and_ids_outside_the_vocabulary_are_refused():
    with pytest.raises(ValueError, match="^seqs is empty: expected at least one list of ids$"):
        pad([], 0)
    with pytest.raises(ValueError, match=r"^pad_id must be an integer >= 0, but got -1$"):
        pad([[4, 5]], -1)                                          # ids start at 0
    v = Vocab(["a", "b"])
    assert v.decode([4, 5, v.eos_id, 99]) == ["a", "b"]            # nothing after EOS is read
    for bad in (-1, len(v.itos)):                                  # -1 would read the last word
        with pytest.raises(ValueError, match=f"^token id {bad} is out of range for a vocabulary of 6$"):
            v.decode([4, bad])


def test_bad_sizes_are_rejected():
    with pytest.raises(ValueError, match="n_train must be a positive integer, but got 0"):
        make_corpus(n_train=0)
    for seed in (None, 1.5, "0", True):             # None would seed from the clock: not deterministic
        with pytest.raises(ValueError, match=f"^seed must be an integer, but got {re.escape(repr(seed))}$"):
            make_corpus(n_train=10, seed=seed)
    with pytest.raises(ValueError, match="^batch_size must be a positive integer, but got 0$"):
        next(batches([([1], [1, 2])], 0))
    with pytest.raises(ValueError, match="give exactly one of batch_size and max_tokens"):
        batch_indices([(1, 2)], batch_size=4, max_tokens=100)
    with pytest.raises(ValueError, match=r"max_tokens=3 is smaller than the longest sentence \(5 tokens\)"):
        batch_indices([(1, 2), (5, 4)], batch_size=None, max_tokens=3)


def test_token_batches_hold_about_max_tokens_and_cover_everything(corpus):
    enc = encode_pairs(corpus.train, corpus.src_vocab, corpus.tgt_vocab)
    lengths = [(len(s), len(t)) for s, t in enc]
    chunks = batch_indices(lengths, batch_size=None, max_tokens=600, seed=3)
    assert sorted(i for c in chunks for i in c) == list(range(len(enc)))
    padded = [len(c) * max(max(lengths[i]) for i in c) for c in chunks]
    assert max(padded) <= 600
    assert sum(padded) / len(padded) > 450                # batches are filled, not cut short
    sizes = {len(c) for c in chunks}
    assert max(sizes) > 2 * min(s for s in sizes if s > 1)   # short sentences come in bigger batches
    src, tgt = next(batches(enc, None, max_tokens=600, seed=3))
    assert src.shape[0] * max(src.shape[1], tgt.shape[1]) <= 600


def test_token_batches_are_cut_greedily_and_sorted_within_pools_of_fifty_batches():
    """The packing, worked by hand (shuffle=False keeps the order): a new batch starts from its own
    first sentence's length, not the last batch's longest; sentences are sorted only within pools
    of 50 batches, as the docstring says (an outside audit found neither was tested)."""
    lengths = [(1, 6), (2, 2), (2, 2), (2, 2), (2, 2)]   # sorted as pairs, (1, 6) comes first
    assert batch_indices(lengths, max_tokens=12, shuffle=False) == [[0, 1], [2, 3, 4]]
    falling = [(100 - i, 100 - i) for i in range(100)]    # batch_size 1: pools of 50 sentences
    assert batch_indices(falling, batch_size=1, shuffle=False) == \
        [[i] for i in [*range(49, -1, -1), *range(99, 49, -1)]]


def test_the_third_calibration_beat_every_single_change_only_after_its_extra_steps():
    """10.8: at 1700 steps the final recipe's three seeds averaged below the best single change of
    the same calibration; at its present steps above every one (the page checks the latter)."""
    calib = committed_record("cpu_calibration.json")
    runs = calib["runs"]
    singles = [r["test_exact_match"] for n, r in runs.items() if n != "base" and not n.startswith("final")]
    finals = ("final", "final_seed1", "final_seed2")
    mean = lambda rows: sum(r["test_exact_match"] for r in rows) / 3          # noqa: E731
    assert mean([calib["superseded"]["runs"][n] for n in finals]) < max(singles)
    assert mean([runs[n] for n in finals]) > max(singles)


def test_grammar_depth_matches_generator_flag():
    gr = Grammar(max_depth=0)
    assert all(gr.sentence()[2] == 0 for _ in range(300))


def test_corpus_version_reads_a_records_grammar_version():
    assert corpus_version({"corpus_version": 3}) == 3
    assert corpus_version({}) == 1          # a record from before versions were named
    for bad in (0, "2", 2.0, None, True):
        with pytest.raises(ValueError, match=f"corpus_version: .* {re.escape(repr(bad))}"):
            corpus_version({"corpus_version": bad})


def test_a_deeper_split_too_large_for_a_small_corpus_says_why():
    # the error named only the count; the cause is the training split's short maximum length
    corpus = make_corpus(n_train=20, n_valid=5, n_test=5, n_longer=10, n_deeper=10)
    with pytest.raises(ValueError, match=r"asked for 10 \(the deeper split stays within the training split's "
                                         r"lengths, \d+ English and \d+ Chinese tokens here: a larger n_train"):
        corpus.deeper


@pytest.mark.parametrize("size", [True, 2.0, "2"])
def test_batch_indices_wants_a_positive_integer(size):
    # True was taken as 1, and 2.0 was told only that it "must be positive"
    with pytest.raises(ValueError, match=f"^batch_size must be a positive integer, but got {re.escape(repr(size))}$"):
        batch_indices([(1, 2), (2, 3)], batch_size=size)


def test_numpy_integers_are_integers_for_the_corpus_and_its_batches():
    np = pytest.importorskip("numpy")
    a = make_corpus(n_train=20, n_valid=3, n_test=3, n_longer=2, n_deeper=2, seed=np.int64(1))
    b = make_corpus(n_train=20, n_valid=3, n_test=3, n_longer=2, n_deeper=2, seed=1)
    assert a.train == b.train and len(a.train) == 20
    lengths = [(2, 3)] * 5
    assert batch_indices(lengths, batch_size=np.int64(2), seed=0) == batch_indices(lengths, batch_size=2, seed=0)


def test_max_tokens_alone_is_enough_and_neither_means_64_sentences():
    # max_tokens alone used to clash with batch_size's default of 64 ("give exactly one of ...")
    lengths = [(3 + i % 7, 4 + i % 5) for i in range(300)]
    assert batch_indices(lengths, max_tokens=40, seed=1) == batch_indices(lengths, None, 40, seed=1)
    assert sorted(map(len, batch_indices(lengths, seed=1)))[-1] == 64
    assert [len(s) for s, _ in batches([([1], [1, 2])] * 70, shuffle=False)] == [64, 6]


@pytest.mark.parametrize("lengths, bad", [([3, 5], "3 at index 0"), ([(1, 2), (3,)], r"\(3,\) at index 1")])
def test_lengths_must_be_pairs(lengths, bad):
    # a list of numbers used to fail with "'int' object is not iterable"
    with pytest.raises(ValueError, match=rf"^lengths: expected one \(source length, target length\) pair per "
                                         rf"sentence, but got {bad}$"):
        batch_indices(lengths, batch_size=4)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(seed=None), ValueError, "^seed must be an integer, but got None$"),     # would shuffle by the clock
    (dict(seed=1.5), ValueError, "^seed must be an integer, but got 1.5$"),
    (dict(shuffle="no"), TypeError, "^shuffle must be True or False, but got 'no'$"),   # 'no' meant True
])
def test_batch_indices_checks_its_seed_and_shuffle_flag(kwargs, error, message):
    with pytest.raises(error, match=message):
        batch_indices([(1, 2), (2, 3)], batch_size=1, **kwargs)
    with pytest.raises(error, match=message):
        next(batches([([1], [1, 2])] * 3, batch_size=1, **kwargs))


def test_vocab_refuses_a_string_to_encode_and_ids_that_are_not_integers():
    v = Vocab(["a", "b", "dog"])
    # a string is a sequence of letters: "dog" was encoded as d, o, g (three UNKs)
    with pytest.raises(TypeError, match=r"^tokens must be a list of tokens \(e\.g\. 'dog'\.split\(\)\), "
                                        r"but got the string 'dog'$"):
        v.encode("dog")
    assert v.encode("dog".split()) == [v.stoi["dog"]]
    for bad, where in ((True, 1), (4.0, 1), ([4, 5], 0)):
        ids = [4, bad] if where else [bad]
        with pytest.raises(TypeError, match=rf"^ids: expected one sentence's integer token ids, but got "
                                            rf"{re.escape(repr(bad))} at position {where}$"):
            v.decode(ids)
    with pytest.raises(TypeError, match=r"but got \[4, 5\] at position 0$"):
        v.decode(torch.tensor([[4, 5]]))                                 # a batch, not a sentence
    np = pytest.importorskip("numpy")
    assert v.decode(np.array([4, 5])) == v.decode(torch.tensor([4, 5])) == ["a", "b"]


def test_vocab_refuses_tokens_that_are_not_strings():
    # None became a word of the vocabulary, and encode mapped None and 1 to <unk> silently
    for bad in ([None], ["a", 1], [("a",)]):
        with pytest.raises(TypeError, match=rf"^tokens: every token must be a str, but got "
                                            rf"{re.escape(repr(bad[-1]))}$"):
            Vocab(bad)
    v = Vocab(["a"])
    for bad in (["a", None], [1]):
        with pytest.raises(TypeError, match=rf"^tokens: every token must be a str, but got "
                                            rf"{re.escape(repr(bad[-1]))}$"):
            v.encode(bad)
    assert v.encode(iter(["a", "zz"])) == [v.stoi["a"], v.unk_id]      # any iterable of str


def test_pad_refuses_ids_that_are_not_integers():
    # a float id was cut to an integer without a word (1.7 -> 1)
    for bad, dtype in (([[5, 6], [1.7, 2.2]], "torch.float32"), ([[True, False]], "torch.bool")):
        with pytest.raises(TypeError, match=rf"^seqs\[{len(bad) - 1}\]: expected integer token ids, but got "
                                            rf"{dtype} values$"):
            pad(bad, 0)
    assert pad([[5, 6], []], 0).tolist() == [[5, 6], [0, 0]]         # an empty row is all padding
    assert pad([torch.tensor([3, 4])], 0).tolist() == [[3, 4]]


def test_chapter_10s_man_is_bitten_in_only_a_few_training_sentences():
    """10.5: in the cpu configuration's training set 人 is 咬's object in a handful of sentences
    (the one the page quotes among them), always with words between them; never its subject."""
    from tf_tutorial.train import CONFIGS
    cfg = CONFIGS["cpu"]
    train = make_corpus(n_train=cfg.n_train, seed=cfg.seed).train

    def clauses(zh):
        clause = []
        for w in zh:
            if w in "，。？":
                yield clause
                clause = []
            else:
                clause.append(w)

    bitten = [zh for _, zh in train if any("咬" in c and "人" in c[c.index("咬"):] for c in clauses(zh))]
    assert 0 < len(bitten) <= 6, [" ".join(zh) for zh in bitten]
    assert "三 只 轻 鸭子 三 年 前 咬 了 一 个 人 。".split() in bitten
    pairs = {p for _, zh in train for p in zip(zh, zh[1:])}
    assert ("咬", "人") not in pairs and ("人", "咬") not in pairs
