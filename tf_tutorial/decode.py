"""第 10 章：解码——贪心搜索与束搜索（beam search），都带 KV 缓存。

At step t the decoder needs the keys and values of every earlier target position. Without a
cache they are recomputed from scratch each step (O(t) work per step, O(T²) in all); with
the cache each layer appends one new key/value row per step, and the cross-attention keys and
values, which depend only on the source, are computed once.

Shape legend: B batch, K beam size, S source length, T target length, D d_model, H heads,
Dh head width, V target vocabulary.
"""
from __future__ import annotations

import torch

from tf_tutorial.attention import causal_mask, padding_mask
from tf_tutorial.data import pad, tokenize_en
from tf_tutorial.model import Transformer


class KVCache:
    """Per decoder layer: self-attention keys/values so far, and the fixed cross-attention ones."""

    def __init__(self, model: Transformer, memory: torch.Tensor, src_mask: torch.Tensor):
        self.src_mask = src_mask                                           # (B, 1, S)
        self.cross = [layer.cross_attn.project_kv(memory, memory) for layer in model.decoder.layers]
        self.self_kv = [None] * len(model.decoder.layers)                  # (B, H, t, Dh) each

    def reorder(self, index: torch.Tensor) -> None:
        """Keep the rows ``index`` (beam search: the surviving beams, in their new order)."""
        self.src_mask = self.src_mask[index]
        self.cross = [(k[index], v[index]) for k, v in self.cross]
        self.self_kv = [(k[index], v[index]) for k, v in self.self_kv]


def decode_step(model: Transformer, tokens: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Feed only the newest token (B,) through the decoder; returns logits (B, V)."""
    pos = 0 if cache.self_kv[0] is None else cache.self_kv[0][0].shape[2]
    x = model.tgt_embed(tokens[:, None]) + model.positions.pe[pos].to(model.out.weight.dtype)  # (B, 1, D)
    for i, layer in enumerate(model.decoder.layers):
        def self_attn(y, i=i, attn=layer.self_attn):
            k, v = attn.project_kv(y, y)                                   # (B, H, 1, Dh)
            if cache.self_kv[i] is not None:
                k = torch.cat([cache.self_kv[i][0], k], dim=2)             # (B, H, t+1, Dh)
                v = torch.cat([cache.self_kv[i][1], v], dim=2)
            cache.self_kv[i] = (k, v)
            return attn.attend(y, k, v)            # only past keys are cached: causal by construction
        x = layer.self_block(x, self_attn)
        x = layer.cross_block(x, lambda y, i=i, attn=layer.cross_attn:
                              attn.attend(y, *cache.cross[i], cache.src_mask))
        x = layer.ffn_block(x, layer.ffn)
    return model.out(model.decoder.norm(x))[:, -1]                         # (B, V)


def _never_emit(logits: torch.Tensor, *ids: int) -> torch.Tensor:
    """PAD and BOS are never outputs: a PAD inside a prefix would be masked out as a key."""
    logits[:, list(ids)] = float("-inf")
    return logits


def _max_len(model: Transformer, src: torch.Tensor, max_len: int | None) -> int:
    limit = model.config.max_len - 1
    n = min(src.shape[1] + 20, limit) if max_len is None else max_len
    if not 1 <= n <= limit:
        raise ValueError(f"max_len must be in [1, {limit}] (the model's max_len - 1), but got {n}")
    return n


@torch.no_grad()
def greedy_decode(model: Transformer, src: torch.Tensor, bos_id: int = 1, eos_id: int = 2,
                  max_len: int | None = None, use_cache: bool = True) -> torch.Tensor:
    """Pick the most likely token at each step until every sentence has produced EOS.

    Args:
        src: (B, S) source ids, padded with the model's ``pad_id``.
        max_len: most tokens to generate (default S + 20).
        use_cache: False recomputes the whole prefix each step (slow; for comparison).
    Returns:
        (B, L) generated ids without BOS, EOS included, ``pad_id`` after it; L ≤ max_len.
    """
    model.eval()
    n, pad = _max_len(model, src, max_len), model.config.pad_id
    memory, src_mask = model.encode(src)
    cache = KVCache(model, memory, src_mask) if use_cache else None
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(n):
        logits = (decode_step(model, ys[:, -1], cache) if use_cache
                  else model.decode(ys, memory, src_mask)[:, -1])           # (B, V)
        nxt = _never_emit(logits, pad, bos_id).argmax(-1).masked_fill(done, pad)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        done |= nxt == eos_id
        if done.all():
            break
    return ys[:, 1:]


def length_penalty(length: torch.Tensor, alpha: float) -> torch.Tensor:
    """GNMT's lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016), used by the paper with α = 0.6."""
    return ((5.0 + length.float()) / 6.0) ** alpha


@torch.no_grad()
def beam_search(model: Transformer, src: torch.Tensor, beam_size: int = 4, alpha: float = 0.6,
                bos_id: int = 1, eos_id: int = 2, max_len: int | None = None,
                use_cache: bool = True) -> torch.Tensor:
    """Keep the ``beam_size`` most likely prefixes; at the end pick the best by log p / lp(Y).

    A finished hypothesis stays in the beam with its score frozen (it can only emit pad, at no
    cost), so it competes with the unfinished ones until the search stops.
    Returns (B, L) like :func:`greedy_decode`.
    """
    if not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_size must be a positive integer, but got {beam_size!r}")
    model.eval()
    n, pad, K = _max_len(model, src, max_len), model.config.pad_id, beam_size
    B, dev = src.shape[0], src.device
    memory, src_mask = model.encode(src.repeat_interleave(K, dim=0))     # (B·K, S, D)
    cache = KVCache(model, memory, src_mask) if use_cache else None
    ys = torch.full((B * K, 1), bos_id, dtype=torch.long, device=dev)
    scores = torch.full((B, K), float("-inf"), device=dev)
    scores[:, 0] = 0.0                                   # all beams start equal: expand one only
    done = torch.zeros(B * K, dtype=torch.bool, device=dev)
    lengths = torch.zeros(B * K, dtype=torch.long, device=dev)
    for _ in range(n):
        logits = (decode_step(model, ys[:, -1], cache) if use_cache
                  else model.decode(ys, memory, src_mask)[:, -1])
        logp = torch.log_softmax(_never_emit(logits.float(), pad, bos_id), dim=-1)  # (B·K, V)
        V = logp.shape[-1]
        logp[done] = float("-inf")
        logp[done, pad] = 0.0                            # a finished beam carries on unchanged
        cand = (scores.view(B * K, 1) + logp).view(B, K * V)
        scores, idx = cand.topk(K, dim=-1)                                  # (B, K)
        beam = (idx // V + torch.arange(B, device=dev)[:, None] * K).view(-1)  # rows of ys
        tok = (idx % V).view(-1)
        ys = torch.cat([ys[beam], tok[:, None]], dim=1)
        memory, src_mask = memory[beam], src_mask[beam]
        if cache is not None:
            cache.reorder(beam)
        lengths = lengths[beam] + (~done[beam]).long()
        done = done[beam] | (tok == eos_id)
        if done.all():
            break
    final = scores.view(-1) / length_penalty(lengths, alpha)
    best = final.view(B, K).argmax(-1) + torch.arange(B, device=dev) * K
    return ys[best, 1:]


def strip(ids: torch.Tensor, eos_id: int = 2) -> list[list[int]]:
    """(B, L) generated ids → one list per sentence, cut before EOS."""
    out = []
    for row in ids.tolist():
        out.append(row[:row.index(eos_id)] if eos_id in row else row)
    return out


def translate(model: Transformer, sentences, src_vocab, tgt_vocab, beam_size: int = 1,
              warn: bool = True) -> list[str]:
    """English strings → Chinese strings (tokens joined by spaces).

    Words the model never saw become UNK; with ``warn=True`` that is reported, naming them.
    """
    if isinstance(sentences, str):
        sentences = [sentences]
    rows = []
    for text in sentences:
        tokens = [t if t in src_vocab or t.lower() not in src_vocab else t.lower() for t in tokenize_en(text)]
        unknown = [t for t in tokens if t not in src_vocab]
        if unknown and warn:
            print(f"注意：{unknown} 不在词表中，按 <unk> 处理 (unknown words mapped to <unk>): {text!r}")
        rows.append(src_vocab.encode(tokens, eos=True))
    device = next(model.parameters()).device
    src = pad(rows, src_vocab.pad_id).to(device)
    decode = greedy_decode if beam_size == 1 else (
        lambda m, s, **kw: beam_search(m, s, beam_size=beam_size, **kw))
    out = decode(model, src, bos_id=tgt_vocab.bos_id, eos_id=tgt_vocab.eos_id)
    return [" ".join(tgt_vocab.decode(row)) for row in out.cpu()]


@torch.no_grad()
def attention_maps(model: Transformer, src: torch.Tensor, tgt_in: torch.Tensor) -> dict:
    """Teacher-forced pass that keeps every layer's attention weights, for pictures.

    Returns {"self": [(B, H, T, T)] * N, "cross": [(B, H, T, S)] * N}.
    """
    model.eval()
    memory, src_mask = model.encode(src)
    T = tgt_in.shape[1]
    self_mask = causal_mask(T, src.device) & padding_mask(tgt_in, model.config.pad_id)
    x, maps = model.positions(model.tgt_embed(tgt_in)), {"self": [], "cross": []}

    def keep(kind, attn, kv, mask):
        def run(y):
            out, w = attn(y, kv, kv, mask, return_weights=True)
            maps[kind].append(w)
            return out
        return run

    for layer in model.decoder.layers:
        x = layer.self_block(x, lambda y, a=layer.self_attn: keep("self", a, y, self_mask)(y))
        x = layer.cross_block(x, keep("cross", layer.cross_attn, memory, src_mask))
        x = layer.ffn_block(x, layer.ffn)
    return maps
