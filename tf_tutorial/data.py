"""第 10 章：玩具英译中语料——切分、词表、按长度分桶的批次。

The sentences come from :mod:`tf_tutorial.grammar`; this module turns them into the splits a
translation model trains and is judged on, and into padded tensors.

Shape legend: B batch, S source length, T target length (with BOS and EOS).
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

import torch

from tf_tutorial.grammar import Grammar

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
MAX_TRAIN_LEN = 40          # English tokens; longer sentences only appear in the generalisation split


class Vocab:
    """Token ↔ id. Ids 0-3 are PAD, BOS, EOS, UNK; the rest are sorted for reproducibility."""

    def __init__(self, tokens):
        self.itos = list(SPECIALS) + sorted(set(tokens) - set(SPECIALS))
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = range(4)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def encode(self, tokens, bos: bool = False, eos: bool = False) -> list[int]:
        ids = [self.stoi.get(t, self.unk_id) for t in tokens]
        return [self.bos_id] * bos + ids + [self.eos_id] * eos

    def decode(self, ids) -> list[str]:
        """Ids back to tokens, stopping at EOS and leaving out PAD and BOS."""
        out = []
        for i in (ids.tolist() if torch.is_tensor(ids) else ids):
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.bos_id):
                out.append(self.itos[i])
        return out


def tokenize_en(text: str) -> list[str]:
    """Split a typed English sentence the way the corpus is split: words, "'s", and , . ?"""
    return re.findall(r"'s\b|[,.?]|[^\s,.?']+", text)


@dataclass
class Corpus:
    """The four splits as lists of (English tokens, Chinese tokens), and the two vocabularies."""

    train: list
    valid: list
    test: list
    general: list
    src_vocab: Vocab
    tgt_vocab: Vocab
    seed: int

    def summary(self) -> dict:
        def lengths(split):
            return [len(en) for en, _ in split]
        return {name: {"pairs": len(split), "max_en_len": max(lengths(split)),
                       "mean_en_len": round(sum(lengths(split)) / len(split), 1)}
                for name, split in (("train", self.train), ("valid", self.valid),
                                    ("test", self.test), ("general", self.general))}


def make_corpus(n_train: int = 100_000, n_valid: int = 1000, n_test: int = 1000,
                n_general: int = 500, seed: int = 0) -> Corpus:
    """Deterministic from ``seed``; no English sentence is in two splits.

    train / valid / test: nesting depth ≤ 2 and at most ``MAX_TRAIN_LEN`` English tokens.
    general: every sentence nests relative clauses 3 deep, deeper than anything in training
    (and many are longer), to see whether the model learned the rules or the lengths.
    """
    for name, n in (("n_train", n_train), ("n_valid", n_valid), ("n_test", n_test), ("n_general", n_general)):
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"{name} must be a positive integer, but got {n!r}")
    grammar, seen, pairs = Grammar(random.Random(seed), max_depth=2), set(), []
    need = n_test + n_valid + n_train
    for _ in range(50 * need):
        en, zh, _ = grammar.sentence()
        key = " ".join(en)
        if len(en) <= MAX_TRAIN_LEN and key not in seen:
            seen.add(key)
            pairs.append((en, zh))
            if len(pairs) == need:
                break
    else:
        raise ValueError(f"the grammar produced only {len(pairs)} distinct sentences; asked for {need}")
    test, valid, train = pairs[:n_test], pairs[n_test:n_test + n_valid], pairs[n_test + n_valid:]
    deep, general = Grammar(random.Random(seed + 1), max_depth=3, rel_p=0.9, deep=True), []
    while len(general) < n_general:
        en, zh, depth = deep.sentence()
        if depth == 3 and " ".join(en) not in seen:
            seen.add(" ".join(en))
            general.append((en, zh))
    src = Vocab(t for en, _ in train for t in en)
    tgt = Vocab(t for _, zh in train for t in zh)
    return Corpus(train, valid, test, general, src, tgt, seed)


def encode_pairs(pairs, src_vocab: Vocab, tgt_vocab: Vocab):
    """(English, Chinese) tokens → (source ids + EOS, BOS + target ids + EOS)."""
    return [(src_vocab.encode(en, eos=True), tgt_vocab.encode(zh, bos=True, eos=True)) for en, zh in pairs]


def pad(seqs, pad_id: int) -> torch.Tensor:
    """Lists of ids → (B, L) LongTensor, right-padded with ``pad_id``."""
    out = torch.full((len(seqs), max(len(s) for s in seqs)), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = torch.tensor(s, dtype=torch.long)
    return out


def batches(encoded, batch_size: int, pad_id: int = 0, shuffle: bool = True, seed: int = 0):
    """Bucket by length so that a batch holds sentences of similar length (little padding).

    Sentences are sorted by source length within pools of 50 batches, cut into batches, and
    the batches shuffled. Yields ``(src (B, S), tgt (B, T))``.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, but got {batch_size}")
    rng = random.Random(seed)
    order = list(range(len(encoded)))
    if shuffle:
        rng.shuffle(order)
    pool = 50 * batch_size
    chunks = []
    for start in range(0, len(order), pool):
        idx = sorted(order[start:start + pool], key=lambda i: (len(encoded[i][0]), len(encoded[i][1])))
        chunks += [idx[j:j + batch_size] for j in range(0, len(idx), batch_size)]
    if shuffle:
        rng.shuffle(chunks)
    for chunk in chunks:
        yield pad([encoded[i][0] for i in chunk], pad_id), pad([encoded[i][1] for i in chunk], pad_id)
