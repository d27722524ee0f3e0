"""第 10 章：评测——完全匹配率、BLEU（sacrebleu，中文分词）与按现象的错误分析。"""
from __future__ import annotations

import sacrebleu
import torch

from tf_tutorial.data import encode_pairs, pad
from tf_tutorial.decode import beam_search, greedy_decode

NUMBER_WORDS = {"hundred", "thousand", "million"} | set(
    "two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety".split())
TIME_PLACE = {"yesterday", "tomorrow", "last", "next", "every", "ago", "at", "in", "on", "tonight"}


def exact_match(hyps: list[str], refs: list[str]) -> float:
    """Share of outputs equal to the reference, token for token."""
    if len(hyps) != len(refs) or not refs:
        raise ValueError(f"need as many outputs as references (and at least one), got {len(hyps)} and {len(refs)}")
    return sum(h == r for h, r in zip(hyps, refs)) / len(refs)


def bleu(hyps: list[str], refs: list[str]) -> float:
    """Corpus BLEU with sacrebleu's Chinese tokenisation (one token per Chinese character)."""
    if len(hyps) != len(refs) or not refs:
        raise ValueError(f"need as many outputs as references (and at least one), got {len(hyps)} and {len(refs)}")
    join = lambda s: s.replace(" ", "")                       # noqa: E731 - text as a reader writes it
    return sacrebleu.corpus_bleu([join(h) for h in hyps], [[join(r) for r in refs]], tokenize="zh").score


def phenomena(english: list[str]) -> list[str]:
    """Which of the grammar's phenomena an English sentence exercises (for error analysis)."""
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
def translate_pairs(model, pairs, src_vocab, tgt_vocab, beam_size: int = 1, batch_size: int = 200):
    """Decode every English sentence of ``pairs``; returns the outputs as space-joined strings."""
    device = next(model.parameters()).device
    encoded = encode_pairs(pairs, src_vocab, tgt_vocab)
    order = sorted(range(len(pairs)), key=lambda i: len(encoded[i][0]))   # little padding
    out = [None] * len(pairs)
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        src = pad([encoded[i][0] for i in idx], src_vocab.pad_id).to(device)
        limit = min(max(len(pairs[i][1]) for i in idx) + 10, model.config.max_len - 1)
        if beam_size == 1:
            ids = greedy_decode(model, src, tgt_vocab.bos_id, tgt_vocab.eos_id, max_len=limit)
        else:
            ids = beam_search(model, src, beam_size, bos_id=tgt_vocab.bos_id,
                              eos_id=tgt_vocab.eos_id, max_len=limit)
        for i, row in zip(idx, ids.cpu()):
            out[i] = " ".join(tgt_vocab.decode(row))
    return out


def evaluate(model, pairs, src_vocab, tgt_vocab, beam_size: int = 1) -> dict:
    """Exact match, BLEU and exact match per phenomenon on ``pairs``; also returns the outputs."""
    hyps = translate_pairs(model, pairs, src_vocab, tgt_vocab, beam_size)
    refs = [" ".join(zh) for _, zh in pairs]
    by_tag: dict = {}
    for (en, _), h, r in zip(pairs, hyps, refs):
        for tag in phenomena(en):
            by_tag.setdefault(tag, []).append(h == r)
    return {"exact_match": exact_match(hyps, refs), "bleu": bleu(hyps, refs), "hyps": hyps, "refs": refs,
            "by_phenomenon": {t: (sum(v) / len(v), len(v)) for t, v in sorted(by_tag.items())}}
