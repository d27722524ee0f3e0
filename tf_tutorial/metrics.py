"""第 10 章：评测——完全匹配率、BLEU（sacrebleu，中文分词）与按现象的错误分析。

BLEU = BP · exp(¼ Σₙ log pₙ), n = 1..4: pₙ is the share of the output's n-grams
that also occur in the reference (each counted at most as often as it occurs
there), and the brevity penalty BP = min(1, exp(1 − r/c)) punishes an output of
c tokens shorter than the reference's r.
"""
from __future__ import annotations

import difflib
import math
import warnings
from collections import Counter

import sacrebleu
import torch
from sacrebleu.tokenizers.tokenizer_zh import TokenizerZh

from tf_tutorial._checks import require_counts, require_sizes
from tf_tutorial.corpus.data import encode_pairs, pad
from tf_tutorial.corpus.grammar import ONES, SCALES, TENS
from tf_tutorial.decode import beam_search, greedy_decode

# the grammar's number words from two up; a lone "one" counts with the articles below
NUMBER_WORDS = set(ONES[2:]) | set(TENS[2:]) | set(SCALES)
TIME_PLACE = {"yesterday", "tomorrow", "last", "next", "every", "ago", "at",
              "in", "on", "tonight"}


def _require_pairs(hyps, refs) -> None:
    """Two lists of sentences (str), as long as each other and not empty."""
    for name, seq in (("hyps", hyps), ("refs", refs)):
        if not (isinstance(seq, (list, tuple))
                and all(isinstance(x, str) for x in seq)):
            got = ("one str (put it in a list)" if isinstance(seq, str)
                   else type(seq).__name__ if not isinstance(seq, (list, tuple))
                   else "a list holding " + next(type(x).__name__ for x in seq
                                                  if not isinstance(x, str)))
            raise TypeError(f"{name} must be a list of sentences (str), "
                            f"but got {got}")
    if len(hyps) != len(refs) or not refs:
        raise ValueError(
            f"need as many outputs as references (and at least one), "
            f"got {len(hyps)} and {len(refs)}")


def exact_match(hyps: list[str], refs: list[str]) -> float:
    """完全匹配率：输出与参考译文逐个词元都相同的句子所占的比例。

    Share of outputs equal to the reference, token for token: the tokens are
    the text split at whitespace, so extra spaces do not count. An output
    that is its reference's text split into other tokens (我爱中国 for
    我 爱 中国: a translator's output without ``tokens=True``) is a miss,
    with a warning that says so.
    """
    _require_pairs(hyps, refs)
    other_split = [i for i, (h, r) in enumerate(zip(hyps, refs))
                   if "".join(h.split()) == "".join(r.split())
                   and not same_tokens(h, r)]
    if other_split:
        i = other_split[0]
        warnings.warn(
            f"exact_match: {len(other_split)} of {len(refs)} outputs are "
            f"their reference's text split into other tokens (hyps[{i}]="
            f"{hyps[i]!r}, refs[{i}]={refs[i]!r}) and count as misses: exact "
            "match compares tokens (a Translator gives them spaced with "
            "tokens=True)", stacklevel=2)
    return sum(map(same_tokens, hyps, refs)) / len(refs)


def same_tokens(hyp: str, ref: str) -> bool:
    """一句译文与参考译文逐个词元都相同吗（多余的空格不算）？

    The test of :func:`exact_match` for one sentence: the texts split at
    whitespace are equal.
    """
    return hyp.split() == ref.split()


# the one place bleu() and bleu_signature() take their sacrebleu settings from
_BLEU_SETTINGS = {"tokenize": "zh"}


def bleu(hyps: list[str], refs: list[str]) -> float:
    """语料级 BLEU，用 sacrebleu 的中文切分（每个汉字算一个词元）。

    Corpus BLEU with sacrebleu's Chinese tokenisation (one token per Chinese
    character).
    """
    _require_pairs(hyps, refs)
    join = lambda s: s.replace(" ", "")  # noqa: E731 - text as a reader
                                         # writes it
    return sacrebleu.metrics.BLEU(**_BLEU_SETTINGS).corpus_score(
        [join(h) for h in hyps], [[join(r) for r in refs]]).score


def bleu_signature() -> str:
    """:func:`bleu` 的 sacrebleu 签名：参考译文数、大小写、切分、平滑和版本。

    sacrebleu's signature of :func:`bleu`'s settings (Post, 2018, asks that it
    be reported with every score), e.g. ``nrefs:1|case:mixed|eff:no|tok:zh|
    smooth:exp|version:2.4.3``.
    """
    metric = sacrebleu.metrics.BLEU(**_BLEU_SETTINGS)
    metric.corpus_score(["一"], [["一"]])      # it knows nrefs once it scored
    return str(metric.get_signature())


_ZH = TokenizerZh()


def zh_tokens(text: str) -> list[str]:
    """按 sacrebleu 的 "zh" 切分：每个汉字一个词元，连续的字母、数字算一个。

    The tokens :func:`bleu` scores: the spaces dropped (text as a reader
    writes it), then sacrebleu's "zh" tokeniser: one token per Chinese
    character or punctuation mark; a run of Latin letters or digits stays one
    token ("305", "China"), and ``<unk>`` becomes ``<``, ``unk``, ``>``. With
    the spaces gone, Latin tokens side by side join ("305 China" is one
    token, "305China"); the corpus's Chinese side writes numbers in Chinese.
    """
    return _ZH(text.replace(" ", "")).split()


def sentence_bleu(hyp: str, ref: str, max_n: int = 4) -> dict:
    """逐步算出一句输出对一句参考译文的 BLEU（按 sacrebleu 的 "zh" 切分）。

    BLEU of one output against one reference, step by step, on the tokens of
    :func:`zh_tokens` (as :func:`bleu` and sacrebleu's "zh": one per Chinese
    character).

    Returns the clipped n-gram ``matches`` and ``totals``, the
    ``precisions`` (%), the brevity penalty ``bp``, the lengths and the
    ``score`` (0–100). Like ``sacrebleu.sentence_bleu``, an order with no match
    gets the "exp" smoothing (1 / 2ᵏ matches, k counting such orders), and
    orders longer than the output are left out. An empty output (an untrained
    model writes them) scores 0, as in sacrebleu.
    """
    for name, text in (("hyp", hyp), ("ref", ref)):
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a sentence (str), but got "
                            f"{type(text).__name__}")
    require_sizes(max_n=max_n)
    h, r = zh_tokens(hyp), zh_tokens(ref)
    matches, totals = [], []
    for n in range(1, max_n + 1):
        grams_h = Counter(tuple(h[i:i + n]) for i in range(len(h) - n + 1))
        grams_r = Counter(tuple(r[i:i + n]) for i in range(len(r) - n + 1))
        matches.append(sum(min(c, grams_r[g])    # clipped by the reference
                           for g, c in grams_h.items()))
        totals.append(max(len(h) - n + 1, 0))
    logs, k = [], 1
    for m, t in (zip(matches, totals) if any(matches)
                 else ()):                        # no match at all: BLEU is 0
        if t == 0:
            continue                              # the output is shorter than n
        if m == 0:
            k *= 2
        logs.append(math.log(m / t if m else 1 / (k * t)))
    bp = (1.0 if len(h) >= len(r) else 0.0 if not h
          else math.exp(1 - len(r) / len(h)))
    return {"matches": matches, "totals": totals,
            "precisions": [100 * m / t if t else 0.0
                           for m, t in zip(matches, totals)],
            "bp": bp, "hyp_len": len(h), "ref_len": len(r),
            "score": (100 * bp * math.exp(sum(logs) / len(logs))
                      if logs else 0.0)}


def error_kind(ref: str, hyp: str) -> str:
    """对齐输出和参考译文，判断错误属于哪一类（漏词、多词、重复、错词、混合）。

    How an output differs from its reference, read off a token alignment
    (difflib).

    "漏词" (tokens missing, nothing else wrong), "多词" (tokens added; "重复"
    when the added tokens repeat the ones before them), "错词" (tokens
    replaced, nothing added or missing), "混合".
    """
    r, h = ref.split(), hyp.split()
    ops = [op for op in
           difflib.SequenceMatcher(a=r, b=h, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    kinds = {op[0] for op in ops}
    if not ops:
        return "无误"
    if kinds == {"delete"}:
        return "漏词"
    if kinds == {"insert"}:
        for _, _, _, j1, j2 in ops:
            added = h[j1:j2]
            if (h[max(j1 - len(added), 0):j1] != added
                    and h[j2:j2 + len(added)] != added):
                return "多词"
        return "重复"
    if kinds == {"replace"} and all(i2 - i1 == j2 - j1
                                    for _, i1, i2, j1, j2 in ops):
        return "错词"
    return "混合"


def phenomena(english: list[str]) -> list[str]:
    """列出一个英文句子用到了文法里的哪些现象（供错误分析）。

    Which of the grammar's phenomena an English sentence exercises
    (for error analysis).
    """
    if isinstance(english, str) or not english:
        raise ValueError("english: expected the tokens of a sentence (a "
                         f"non-empty list), but got {english!r}")
    words = set(english)
    tags = []
    if words & NUMBER_WORDS:
        tags.append("数字 (numbers)")
    if words & {"a", "an", "this", "one"} or words & NUMBER_WORDS:
        tags.append("量词 (measure words)")
    if words & TIME_PLACE:
        tags.append("时间/地点前移 (reordering)")
    if words & {"that", "who"} and english[0] != "who":
        tags.append("关系从句 (relative clauses)")
    if english[-1] == "?":
        tags.append("疑问句 (questions)")
    if words & {"because", "but", ","}:
        tags.append("并列/因果 (coordination)")
    return tags or ["简单句 (simple)"]


@torch.no_grad()
def translate_pairs(model, pairs, src_vocab, tgt_vocab, beam_size: int = 1,
                    batch_size: int = 200, slack: int | None = 10):
    """解码 ``pairs`` 里的每个英文句子，返回以空格连接词元的译文。

    Decode every English sentence of ``pairs``; returns the outputs as
    space-joined strings. Each output has at most its reference's length
    plus ``slack`` tokens (and the model's max_len - 1): a limit of its own,
    so scoring a sentence alone or among others gives the same output.
    ``slack=None``: no limit from the reference, only the model's max_len
    (chapter 10 checks that the reference's limit changes no exact match;
    BLEU does move with it).
    """
    require_sizes(beam_size=beam_size, batch_size=batch_size)
    if slack is not None:
        require_counts(slack=slack)
    device = next(model.parameters()).device
    encoded = encode_pairs(pairs, src_vocab, tgt_vocab)
    order = sorted(range(len(pairs)),
                   key=lambda i: len(encoded[i][0]))       # little padding
    out = [None] * len(pairs)
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        src = pad([encoded[i][0] for i in idx], src_vocab.pad_id).to(device)
        most = model.config.max_len - 1
        limit = [most if slack is None else min(len(pairs[i][1]) + slack, most)
                 for i in idx]                      # one per sentence
        if beam_size == 1:
            ids = greedy_decode(model, src, max_len=limit,
                                bos_id=tgt_vocab.bos_id,
                                eos_id=tgt_vocab.eos_id)
        else:
            ids = beam_search(model, src, beam_size, bos_id=tgt_vocab.bos_id,
                              eos_id=tgt_vocab.eos_id, max_len=limit)
        for i, row in zip(idx, ids.cpu()):
            out[i] = " ".join(tgt_vocab.decode(row))
    return out


def score(pairs, hyps: list[str]) -> dict:
    """给一组译文打分：完全匹配率、BLEU 和按现象分开的完全匹配率。

    Exact match, BLEU and exact match per phenomenon of outputs ``hyps``
    (space-joined tokens) for ``pairs`` of (English tokens, Chinese tokens); the
    outputs are returned too.
    """
    refs = [" ".join(zh) for _, zh in pairs]
    by_tag: dict = {}
    for (en, _), h, r in zip(pairs, hyps, refs):
        for tag in phenomena(en):
            by_tag.setdefault(tag, []).append(same_tokens(h, r))
    return {"exact_match": exact_match(hyps, refs), "bleu": bleu(hyps, refs),
            "hyps": hyps, "refs": refs,
            "by_phenomenon": {t: (sum(v) / len(v), len(v))
                              for t, v in sorted(by_tag.items())}}


def evaluate(model, pairs, src_vocab, tgt_vocab, beam_size: int = 1) -> dict:
    """在 ``pairs`` 上算完全匹配率、BLEU 和按现象分开的完全匹配率，并返回译文。

    Exact match, BLEU and exact match per phenomenon on ``pairs`` (see
    :func:`score`); also returns the outputs.
    """
    if not len(pairs):         # score's own message would name hyps and refs
        raise ValueError("pairs: expected at least one (English, Chinese) "
                         "pair, but got none")
    return score(pairs, translate_pairs(model, pairs, src_vocab, tgt_vocab,
                                        beam_size))
