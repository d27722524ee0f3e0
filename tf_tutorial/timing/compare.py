"""附录 A 的测量：本书的实现与 ``torch.nn`` 并排测速——注意力、完整训练步、解码。

Each comparison runs its implementations in one process, with the same weights
and inputs, in turns (:func:`~tf_tutorial.timing.clock.interleaved_times`),
and reports medians and ratios to a baseline; a record's rows also keep every
round's seconds and the quartiles of the ratio taken round by round
(:func:`~tf_tutorial.timing.clock.ratio_quartiles`), the spread of the
verdict. :func:`run_all` runs them all at the sizes of :data:`SIZES`; that is
what ``python -m benchmarks`` calls, and
``--record`` commits its result under ``book/records/`` for the appendix to
render. Timings are printed and recorded, never asserted.

Shape legend: B batch, L length, D d_model, H heads, d_k = D / H, V vocabulary
size.
"""
from __future__ import annotations

import copy
import json
import os
import re
import statistics
import time
from pathlib import Path

import torch
from torch import nn

from tf_tutorial._checks import require_sizes
from tf_tutorial.attention import check_mask, fused_attention
from tf_tutorial.book.records import save_record
from tf_tutorial.decode import beam_search, greedy_decode
from tf_tutorial.interop import from_torch
from tf_tutorial.model import Transformer, TransformerConfig
from tf_tutorial.multihead import MultiHeadAttention
from tf_tutorial.timing.clock import (
    describe_machine, interleaved_times, largest_tensor_bytes, operation_names,
    ratio_quartiles, saved_activation_bytes, williams_orders)


class PackedQKVAttention(MultiHeadAttention):
    """消融实验：本书的多头注意力，只把自注意力的 Q、K、V 投影合成一次矩阵乘法。

    ``nn.MultiheadAttention`` packs the three (D, D) projections into one
    (3D, D) weight and multiplies once; this class does the same with our
    weights, so that a benchmark can measure what the packing alone changes.
    Self-attention only (query is key is value), no cache.
    """

    def __init__(self, ours: MultiHeadAttention):
        super().__init__(ours.d_model, ours.n_heads, ours.dropout,
                         bias=ours.w_q.bias is not None, fused=ours.fused)
        D, bias = ours.d_model, ours.w_q.bias is not None
        self.w_qkv = nn.Linear(D, 3 * D, bias=bias).to(ours.w_q.weight)
        with torch.no_grad():
            parts = (ours.w_q, ours.w_k, ours.w_v)
            self.w_qkv.weight.copy_(
                torch.cat([p.weight for p in parts]))  # (3D, D)
            if bias:
                self.w_qkv.bias.copy_(torch.cat([p.bias for p in parts]))
        self.w_o = copy.deepcopy(ours.w_o)
        del self.w_q, self.w_k, self.w_v

    def forward(self, query, key, value, mask=None,
                return_weights: bool = False, cache=None):
        """自注意力，一次矩阵乘法得到 Q、K、V。

        其余与 :class:`MultiHeadAttention` 相同。
        """
        if not (query is key is value) or cache is not None or return_weights:
            raise ValueError("PackedQKVAttention: expected self-attention "
                             "(query is key is value) without cache or weights")
        qkv = self.w_qkv(query).chunk(3, dim=-1)      # 3 × (B, L, D)
        q, k, v = (self.split_heads(t) for t in qkv)  # (B, H, L, d_k)
        if mask is not None:
            check_mask(mask, (query.shape[0], query.shape[1], query.shape[1]))
            mask = mask[:, None] if mask.dim() == 3 else mask  # (B, 1, L, L)
        p = self.dropout if self.training else 0.0
        return self.w_o(self.merge_heads(
            fused_attention(q, k, v, mask, dropout_p=p)))


def pack_self_attention(model: nn.Module) -> nn.Module:
    """把模型每一层的自注意力换成 :class:`PackedQKVAttention`（同样的权重）。

    返回模型本身。
    """
    for layer in model.modules():
        attn = getattr(layer, "self_attn", None)
        if type(attn) is MultiHeadAttention:
            layer.self_attn = PackedQKVAttention(attn)
    return model


def compare_attention(batch: int = 32, length: int = 128, d_model: int = 256,
                      n_heads: int = 8, repeat: int = 20, device: str = "cpu",
                      packed: bool = False) -> dict[str, tuple[float, int]]:
    """多头注意力前向 + 反向：本书的融合、参考路径与同样权重的 PyTorch 并排。

    ``need_weights=False`` for PyTorch. ``packed=True`` adds the ablation
    "ours, packed QKV" (:class:`PackedQKVAttention`). Returns
    ``{name: (median seconds, activation bytes kept for backward)}``, PyTorch
    first.
    """
    return _attention_rounds(batch, length, d_model, n_heads, repeat, device,
                             packed)[0]


def _attention_rounds(batch, length, d_model, n_heads, repeat, device, packed):
    """:func:`compare_attention`, and the seconds of every round."""
    require_sizes(batch=batch, length=length, d_model=d_model,
                  n_heads=n_heads, repeat=repeat)
    if d_model % n_heads:      # nn.MultiheadAttention would only assert
        raise ValueError(f"d_model={d_model} is not divisible by "
                         f"n_heads={n_heads}")
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(d_model, n_heads, batch_first=True).to(device)
    fused, reference = from_torch(ref), from_torch(ref)
    reference.fused = False
    x = torch.randn(batch, length, d_model, device=device, requires_grad=True)
    runs = {"nn.MultiheadAttention":
                lambda: ref(x, x, x, need_weights=False)[0],
            "ours, fused path": lambda: fused(x, x, x)}
    if packed:
        runs["ours, packed QKV"] = (
            lambda m=PackedQKVAttention(fused): m(x, x, x))
    runs["ours, reference path"] = lambda: reference(x, x, x)
    steps = {name: (lambda fn=fn: fn().sum().backward())
             for name, fn in runs.items()}
    rounds = interleaved_times(steps, repeat=repeat, warmup=3)
    return {name: (statistics.median(rounds[name]), saved_activation_bytes(fn))
            for name, fn in runs.items()}, rounds


# chapter 1's comparison (its rows: :func:`_recurrence_rows`)
RECURRENCE = "recurrence and attention (forward)"
SDPA = "F.scaled_dot_product_attention"   # the fused kernel, a baseline


def attention_vs_rnn(rows: list[dict]):
    """第 1 章的对照：自注意力在每个长度上是 nn.RNN 的几倍时间，哪些长度上更快。

    ``rows``: a record's rows of :data:`RECURRENCE` (ratios to ``nn.RNN``).
    Returns ``(by, sizes, ratios, faster)``: every ratio by ``(size, impl)``,
    the sizes in the record's order, attention's ratio at each size, and the
    sizes where attention took less time than ``nn.RNN``.
    """
    by = {(r["size"], r["impl"]): r["ratio"] for r in rows}
    sizes = list(dict.fromkeys(r["size"] for r in rows))
    ratios = [by[size, SDPA] for size in sizes]
    return by, sizes, ratios, [size for size, x in zip(sizes, ratios) if x < 1]

_ZH_NAMES = {"nn.MultiheadAttention": "nn.MultiheadAttention",
             "nn.Transformer": "nn.Transformer",
             "ours": "本书实现", "ours, fused path": "本书实现（融合路径）",
             "ours, reference path": "本书实现（参考路径）",
             "ours, packed QKV": "本书实现（融合路径，QKV 合成一次投影）",
             "KV cache": "KV 缓存", "recompute": "每步重算前缀",
             "attention fwd+bwd": "注意力（前向 + 反向）",
             "decode greedy": "贪心解码",
             "chapter-10 model": "第 10 章 CPU 模型的形状", "tiny": "极小模型",
             "norm fwd+bwd": "归一化（前向 + 反向）",
             "ours, LayerNorm": "本书的 LayerNorm",
             "ours, RMSNorm": "本书的 RMSNorm", "nn.LayerNorm": "nn.LayerNorm",
             "nn.RMSNorm": "nn.RMSNorm",
             "attention paths (forward)": "注意力的三条路径（前向，因果）",
             "ours, tiled (flash)": "本书的分块实现（FlashAttention 的算法）",
             RECURRENCE: "逐步递推与一次算完的注意力（前向）",
             "nn.RNN": "nn.RNN（C++ 循环）",
             "ours, ElmanRNN": "本书的 ElmanRNN（Python 循环）"}
_ZH_PATTERNS = [(r"^training step \((.+)\)$", r"训练步（\1）"),
                (r"bf16 autocast", "bf16 自动混合精度"),
                (r"^decode beam (\d+)$", r"束搜索解码（k = \1）"),
                (r"^(\d+) tokens$", r"\1 个词元"),
                (r"^(.+), (bfloat16|float16)$", r"\1（\2 输入）")]


def zh(name: str) -> str:
    """测量记录里的英文名称（实现、测试、规模）在书中显示的中文标签。

    标识符保持原样。
    """
    if name in _ZH_NAMES:
        return _ZH_NAMES[name]
    for pattern, repl in _ZH_PATTERNS:
        name = re.sub(pattern, repl, name)
    return name


def ratio_table(results: dict[str, tuple[float, int]]) -> str:
    """把 :func:`compare_attention` 排成表：时间、内存及相对 PyTorch 的比值。"""
    if not results:
        raise ValueError("ratio_table needs the results of compare_attention "
                         "({name: (seconds, bytes)}), but got an empty dict")
    base_t, base_m = next(iter(results.values()))
    lines = ["实现：毫秒，相对 PyTorch 的时间；"
             "保存的激活（MiB），相对 PyTorch 的内存"]
    for name, (t, m) in results.items():
        lines.append(f"{zh(name)}：{1e3 * t:.2f}，{t / base_t:.2f}×；"
                     f"{m / 2**20:.1f}，{m / base_m:.2f}×")
    return "\n".join(lines)


def compare_decoding(d_model: int = 128, n_heads: int = 4, n_layers: int = 2,
                     d_ff: int = 256, vocab: int = 1000, batch: int = 8,
                     src_len: int = 20, tokens: int = 64, beam_size: int = 4,
                     repeat: int = 3, device: str = "cpu") -> dict:
    """贪心解码和束搜索，带与不带 KV 缓存，轮流计时。

    未训练的模型一直写满 ``tokens`` 个词元。

    No EOS stops a sequence, so both sides do the same number of steps. Returns
    ``{name: median seconds}`` plus ``"same_tokens"``: whether cached and
    recomputed decoding produced identical outputs (they must).
    """
    return _decoding_rounds(d_model, n_heads, n_layers, d_ff, vocab, batch,
                            src_len, tokens, beam_size, repeat, device)[0]


def _decoding_rounds(d_model, n_heads, n_layers, d_ff, vocab, batch, src_len,
                     tokens, beam_size, repeat, device):
    """:func:`compare_decoding`, and the seconds of every round."""
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab, vocab, d_model, n_heads, n_layers, d_ff,
                            dropout=0.0, max_len=max(tokens + 1, src_len) + 1)
    model = Transformer(cfg).to(device).eval()
    src = torch.randint(4, vocab, (batch, src_len), device=device)
    kinds = {"greedy": lambda c: greedy_decode(model, src, eos_id=-1,
                                               max_len=tokens, use_cache=c),
             f"beam {beam_size}":
                 lambda c: beam_search(model, src, beam_size, eos_id=-1,
                                       max_len=tokens, use_cache=c)}
    runs = {f"{kind}, {'KV cache' if cached else 'recompute'}":
                (lambda fn=fn, c=cached: fn(c))
            for kind, fn in kinds.items() for cached in (True, False)}
    outputs = {name: fn() for name, fn in runs.items()}  # also the warm-up
    rounds = interleaved_times(runs, repeat=repeat, warmup=0)
    out: dict = {name: statistics.median(t) for name, t in rounds.items()}
    out["same_tokens"] = all(torch.equal(outputs[f"{kind}, KV cache"],
                                         outputs[f"{kind}, recompute"])
                             for kind in kinds)
    return out, rounds


class TorchCoreTransformer(nn.Module):
    """训练步的公平基准：``nn.Transformer`` 加上本书的词向量、位置编码和输出层。

    Only the encoder–decoder core differs from our
    :class:`~tf_tutorial.model.Transformer`.
    """

    def __init__(self, ours: Transformer):
        super().__init__()
        c = ours.config
        twin = copy.deepcopy(ours)  # same weights, but trained separately
        self.config, self.src_embed, self.tgt_embed = (
            c, twin.src_embed, twin.tgt_embed)
        self.positions, self.out = twin.positions, twin.out
        norm = ((lambda: nn.LayerNorm(c.d_model)) if c.norm_first
                else (lambda: None))
        layer = dict(d_model=c.d_model, nhead=c.n_heads,
                     dim_feedforward=c.d_ff, dropout=c.dropout,
                     batch_first=True, norm_first=c.norm_first)
        enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(**layer),
                                    c.n_layers, norm(),
                                    enable_nested_tensor=False)
        dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(**layer),
                                    c.n_layers, norm())
        self.core = nn.Transformer(c.d_model, c.n_heads, batch_first=True,
                                   custom_encoder=enc, custom_decoder=dec)

    def forward(self, src, tgt_in):
        """词元 (B, S)、(B, T) → 分数 logits (B, T, V)，接口同本书的模型。"""
        pad, T = self.config.pad_id, tgt_in.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool,
                            device=tgt_in.device).triu(1)  # True = blocked
        y = self.core(self.positions(self.src_embed(src)),
                      self.positions(self.tgt_embed(tgt_in)),
                      tgt_mask=causal, src_key_padding_mask=src == pad,
                      tgt_key_padding_mask=tgt_in == pad,
                      memory_key_padding_mask=src == pad, tgt_is_causal=True)
        return self.out(y)


def compare_training_step(d_model: int = 128, n_heads: int = 4,
                          n_layers: int = 2, d_ff: int = 256, vocab: int = 1000,
                          batch: int = 64, length: int = 24, repeat: int = 5,
                          device: str = "cpu", amp_dtype=None,
                          compile: bool = False, packed: bool = False) -> dict:
    """一步 Adam 训练（前向、交叉熵、反向、更新）：本书与 ``nn.Transformer``。

    Identical weights and batch. ``packed=True`` adds the ablation
    "ours, packed QKV": our model with every self-attention's projections
    packed (:func:`pack_self_attention`). Returns median seconds per step for
    each, and ``loss_gap``: the largest difference of a first loss from
    PyTorch's (≈ 0 in float32: all compute the same function).
    """
    return _training_rounds(d_model, n_heads, n_layers, d_ff, vocab, batch,
                            length, repeat, device, amp_dtype, compile,
                            packed)[0]


def _training_rounds(d_model, n_heads, n_layers, d_ff, vocab, batch, length,
                     repeat, device, amp_dtype, compile, packed):
    """:func:`compare_training_step`, and the seconds of every round."""
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab, vocab, d_model, n_heads, n_layers, d_ff,
                            dropout=0.0, max_len=length + 1)
    ours = Transformer(cfg).to(device)
    ref = TorchCoreTransformer(ours).to(device)
    ours.encoder.load_state_dict(from_torch(ref.core.encoder).state_dict())
    ours.decoder.load_state_dict(from_torch(ref.core.decoder).state_dict())
    models = {"nn.Transformer": ref, "ours": ours}
    if packed:
        models["ours, packed QKV"] = pack_self_attention(copy.deepcopy(ours))
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, vocab, (batch, length), generator=g).to(device)
    tgt = torch.randint(4, vocab, (batch, length + 1), generator=g).to(device)
    src[: batch // 4, length // 2:] = 0  # some padding, as in real batches
    autocast = dict(device_type=torch.device(device).type, dtype=amp_dtype,
                    enabled=amp_dtype is not None)
    losses, steps = {}, {}
    for name, model in models.items():
        with torch.no_grad(), torch.autocast(**autocast):
            logits = model(src, tgt[:, :-1]).float()
            losses[name] = nn.functional.cross_entropy(
                logits.flatten(0, 1), tgt[:, 1:].flatten()).item()
        steps[name] = _adam_step(model, src, tgt, autocast, compile)
    rounds = interleaved_times(steps, repeat=repeat, warmup=2)
    results: dict = {name: statistics.median(t) for name, t in rounds.items()}
    results["loss_gap"] = max(abs(v - losses["nn.Transformer"])
                              for v in losses.values())
    return results, rounds


def _adam_step(model, src, tgt, autocast: dict, compile: bool):
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    fwd = torch.compile(model) if compile else model

    def step():
        with torch.autocast(**autocast):
            logits = fwd(src, tgt[:, :-1])
            loss = nn.functional.cross_entropy(logits.float().flatten(0, 1),
                                               tgt[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


# The sizes of every comparison: "full" for the records and the appendix's
# discussion (attention up to L = 1024; chapter 10's CPU model, about 2000
# tokens a batch), "quick" for the tests.
_CH10_MODEL = dict(d_model=128, n_heads=4, n_layers=2, d_ff=256, vocab=1000)
_TINY_MODEL = dict(d_model=32, n_heads=2, n_layers=1, d_ff=64, vocab=1000)
SIZES = {
    # 24 rounds: whole Williams blocks for groups of 2, 3, 4 or 6 implementations
    "full": {"repeat": 24,
             "attention": dict(lengths=[64, 256, 1024], batch=8, d_model=256,
                               n_heads=8),
             "norm": dict(batch=32, length=256, d_model=512),
             # chapter 12: forward only, one sequence; the tiled loop is slow in
             # Python, so fewer repeats (6: one whole block for 3 paths)
             "attention_paths": dict(lengths=[256, 1024, 4096], n_heads=4,
                                     d_k=32, block_size=64, repeat=6),
             "training_step": dict(_CH10_MODEL, batch=80, length=24),
             "decoding": dict(_CH10_MODEL, tokens=[16, 64], batch=8,
                              src_len=20, beam_size=4),
             # chapter 1: B = 8, width 64, as its live demonstration
             "recurrence": dict(lengths=[64, 256, 1024, 4096], batch=8,
                                width=64, repeat=6)},
    "quick": {"repeat": 2,
              "attention": dict(lengths=[32, 64, 128], batch=4, d_model=64,
                                n_heads=4),
              "norm": dict(batch=4, length=16, d_model=64),
              "attention_paths": dict(lengths=[32, 64], n_heads=2, d_k=16,
                                      block_size=16, repeat=2),
              "training_step": dict(_TINY_MODEL, batch=8, length=12),
              "decoding": dict(_TINY_MODEL, tokens=[8, 16], batch=2,
                               src_len=20, beam_size=2),
              "recurrence": dict(lengths=[16, 32], batch=2, width=16,
                                 repeat=2)},
}

METHOD = ("interleaved medians: within one comparison the implementations "
          "run in turns after untimed warm-up runs, with the same weights and "
          "inputs; the rounds follow a Williams design (in each block of n "
          "rounds, 2n for odd n, every implementation runs in every place "
          "equally often, once or twice, and right after every other one "
          "equally often; the full sizes' round counts are whole blocks); "
          "each row is the median of `repeat` "
          "timed runs (round_seconds keeps them all), its ratio is the ratio "
          "of its median to the median of the first implementation of its "
          "group; ratio_quartiles are the lower and upper quartiles of the "
          "ratio taken round by round")


SHORT = 8
"""Fewer rounds than this and quartiles mean little: the book shows the
smallest and largest round-by-round ratio instead (:func:`round_ratios`).
Between the quartiles (``statistics.quantiles``, inclusive) lie half of 24
rounds or of 8, but only the middle 2 of 6 and 3 of 7."""


def round_ratios(row: dict, base: dict) -> list[float]:
    """一行与它的基准逐轮相除的比值（同一轮里测的两次）。"""
    a, b = row["round_seconds"], base["round_seconds"]
    if len(a) != len(b):
        raise ValueError(f"{row['impl']!r} has {len(a)} rounds but its base "
                         f"{base['impl']!r} has {len(b)}")
    return [x / y for x, y in zip(a, b)]


def _group_rows(benchmark: str, size: str, rounds: dict[str, list[float]],
                base: str) -> list[dict]:
    """一组轮流计时的结果排成表的各行：中位数、对基准的比值、逐轮比值的四分位。

    ``rounds`` as :func:`~tf_tutorial.timing.clock.interleaved_times` returns
    them; one row per implementation, in its order.
    """
    t = {k: statistics.median(v) for k, v in rounds.items()}
    spread = ratio_quartiles(rounds, base)
    return [{"benchmark": benchmark, "size": size, "impl": k,
             "seconds": t[k], "ratio": t[k] / t[base],
             "ratio_quartiles": spread[k], "round_seconds": rounds[k]}
            for k in rounds]


def _attention_rows(s: dict, repeat: int, device: str) -> list[dict]:
    rows = []
    for L in s["lengths"]:
        r, rounds = _attention_rounds(s["batch"], L, s["d_model"],
                                      s["n_heads"], repeat, device, True)
        base_t, base_m = r["nn.MultiheadAttention"]
        spread = ratio_quartiles(rounds, "nn.MultiheadAttention")
        for name, (t, m) in r.items():
            rows.append({"benchmark": "attention fwd+bwd", "size": f"L={L}",
                         "impl": name, "seconds": t, "ratio": t / base_t,
                         "ratio_quartiles": spread[name],
                         "round_seconds": rounds[name],
                         "memory_bytes": m, "memory_ratio": m / base_m})
    return rows


def _training_rows(s: dict, repeat: int, device: str,
                   quick: bool) -> list[dict]:
    variants = [("float32", None, False)]
    if torch.device(device).type == "cuda":
        variants += [("bf16 autocast", torch.bfloat16, False),
                     ("bf16 + torch.compile", torch.bfloat16, True)]
    rows = []
    for label, dtype, comp in variants:
        r, rounds = _training_rounds(
            s["d_model"], s["n_heads"], s["n_layers"], s["d_ff"], s["vocab"],
            s["batch"], s["length"], repeat, device, dtype, comp, not comp)
        spread = ratio_quartiles(rounds, "nn.Transformer")
        for name in rounds:
            rows.append({"benchmark": f"training step ({label})",
                         "size": "tiny" if quick else "chapter-10 model",
                         "impl": name, "seconds": r[name],
                         "ratio": r[name] / r["nn.Transformer"],
                         "ratio_quartiles": spread[name],
                         "round_seconds": rounds[name],
                         "loss_gap": r["loss_gap"]})
    return rows


def _decoding_rows(s: dict, repeat: int, device: str) -> list[dict]:
    rows = []
    for n in s["tokens"]:
        dec, rounds = _decoding_rounds(
            s["d_model"], s["n_heads"], s["n_layers"], s["d_ff"], s["vocab"],
            s["batch"], s["src_len"], n, s["beam_size"], repeat, device)
        for kind in ("greedy", f"beam {s['beam_size']}"):
            base = dec[f"{kind}, recompute"]
            spread = ratio_quartiles(rounds, f"{kind}, recompute")
            for how in ("recompute", "KV cache"):
                rows.append({"benchmark": f"decode {kind}",
                             "size": f"{n} tokens", "impl": how,
                             "seconds": dec[f"{kind}, {how}"],
                             "ratio": dec[f"{kind}, {how}"] / base,
                             "ratio_quartiles": spread[f"{kind}, {how}"],
                             "round_seconds": rounds[f"{kind}, {how}"],
                             "same_tokens": dec["same_tokens"]})
    return rows


def _norm_rows(s: dict, repeat: int, device: str) -> list[dict]:
    """Chapter 12: RMSNorm beside LayerNorm (ours and torch.nn),
    forward + backward."""
    from tf_tutorial.norm import LayerNorm, RMSNorm

    D = s["d_model"]
    x = torch.randn(s["batch"], s["length"], D, device=device,
                    requires_grad=True)
    mods = {"nn.LayerNorm": nn.LayerNorm(D), "ours, LayerNorm": LayerNorm(D),
            "nn.RMSNorm": nn.RMSNorm(D, eps=1e-6), "ours, RMSNorm": RMSNorm(D)}

    def step(m):
        return lambda: m(x).sum().backward()

    rounds = interleaved_times({k: step(m.to(device))
                                for k, m in mods.items()}, repeat=repeat)
    return _group_rows("norm fwd+bwd", f"({s['batch']}, {s['length']}, {D})",
                       rounds, "nn.LayerNorm")


def _attention_path_rows(s: dict, device: str,
                         half: torch.dtype | None = None) -> list[dict]:
    """Chapter 12: the three attention paths, forward only, causal: time and
    the largest tensor.

    The fused kernel's row also names the operators PyTorch dispatched to
    (``"operators"``: one fused kernel is one name). ``half``: also time the
    fused kernel on 16-bit inputs (its own row, ``"<impl>, bfloat16"``); on a
    GPU that is the dtype PyTorch's FlashAttention kernel takes, so the
    float32 row and this one can run different kernels, and the rounds are
    rounded up to whole Williams blocks of four (6 → 8 at the full sizes).
    :func:`run_all` passes it on a GPU only.
    """
    from tf_tutorial.attention import causal_mask, scaled_dot_product_attention
    from tf_tutorial.flash import flash_attention

    sdpa = torch.nn.functional.scaled_dot_product_attention
    rows = []
    for L in s["lengths"]:
        q = torch.randn(1, s["n_heads"], L, s["d_k"], device=device)
        mask = causal_mask(L, device)
        fns = {SDPA: lambda: sdpa(q, q, q, is_causal=True),
               "ours, reference path":
                   lambda: scaled_dot_product_attention(q, q, q, mask),
               "ours, tiled (flash)":
                   lambda: flash_attention(q, q, q, causal=True,
                                           block_size=s["block_size"])}
        repeat = s["repeat"]
        if half is not None:
            qh = q.to(half)
            fns[f"{SDPA}, {str(half).removeprefix('torch.')}"] = (
                lambda: sdpa(qh, qh, qh, is_causal=True))
            block = len(williams_orders(len(fns)))   # 4 paths: blocks of 4
            repeat = -(-repeat // block) * block
        with torch.no_grad():
            rounds = interleaved_times(fns, repeat=repeat, warmup=1)
        for row in _group_rows("attention paths (forward)", f"L={L}", rounds,
                               SDPA):
            fn = fns[row["impl"]]
            row["largest_tensor_bytes"] = largest_tensor_bytes(fn)
            if row["impl"].startswith(SDPA):
                row["operators"] = operation_names(fn)
            rows.append(row)
    return rows


def _recurrence_rows(s: dict, device: str) -> list[dict]:
    """Chapter 1: a batch read step by step (nn.RNN, this book's ElmanRNN) or
    all at once (fused self-attention), forward only; nn.RNN is the base.
    Attention gets the batch as one head, (B, 1, L, width): PyTorch's fused
    kernels take 4-D input only, and a 3-D call runs its math path."""
    from tf_tutorial.rnn import ElmanRNN

    torch.manual_seed(0)
    width = s["width"]
    ours = ElmanRNN(width, width).to(device)
    ref = nn.RNN(width, width, batch_first=True).to(device)
    rows = []
    for L in s["lengths"]:
        x = torch.randn(s["batch"], L, width, device=device)
        heads = x[:, None]                              # (B, 1, L, width)
        fns = {"nn.RNN": lambda: ref(x),
               "ours, ElmanRNN": lambda: ours(x),
               SDPA: lambda: torch.nn.functional.scaled_dot_product_attention(
                   heads, heads, heads)}
        with torch.no_grad():
            rounds = interleaved_times(fns, repeat=s["repeat"], warmup=1)
        rows += _group_rows(RECURRENCE, f"L={L}", rounds, "nn.RNN")
    return rows


def _fused_half(device) -> torch.dtype | None:
    """The 16-bit dtype to time the fused kernel in: on a GPU, what mixed
    precision would use there (bfloat16 where the GPU has it); None on a
    CPU, where the question (which kernel a GPU picks) does not arise."""
    from tf_tutorial.train import autocast_dtype
    return autocast_dtype(torch.device(device))


def run_all(quick: bool = False, device: str = "cpu",
            repeat: int | None = None) -> dict:
    """所有比较，排成一张表的各行，连同机器、日期、方法和所用时间。

    ``quick``: the small sizes of :data:`SIZES` (seconds; the test suite). A
    quick result is marked ``"quick": True`` and may not be recorded
    (:func:`write_record`).
    """
    sizes = SIZES["quick" if quick else "full"]
    if repeat is not None:
        require_sizes(repeat=repeat)
    rep = sizes["repeat"] if repeat is None else repeat
    machine, start, load = (describe_machine(device), time.perf_counter(),
                            os.getloadavg()[0])
    rows = (_attention_rows(sizes["attention"], rep, device)
            + _training_rows(sizes["training_step"], rep, device, quick)
            + _decoding_rows(sizes["decoding"], rep, device)
            + _norm_rows(sizes["norm"], rep, device)
            + _attention_path_rows(sizes["attention_paths"], device,
                                   _fused_half(device))
            + _recurrence_rows(sizes["recurrence"], device))
    return {"what": ("python -m benchmarks: this package beside torch.nn, "
                     "side by side"),
            "machine": machine, "quick": quick,
            "method": {"timing": METHOD, "repeat": rep,
                       **{k: v for k, v in sizes.items() if k != "repeat"}},
            "load_average_1min": {"before": load, "after": os.getloadavg()[0]},
            "wall_seconds": round(time.perf_counter() - start, 1), "rows": rows}


def to_markdown(result: dict) -> str:
    """:func:`run_all` 的各行排成 Markdown：每项测试一张表（比值相对这张表的基准）。

    标签用中文。 A memory column appears only in a table whose rows have it,
    so that no table is wider than the book's column needs.
    """
    groups: dict[str, list[dict]] = {}
    for r in result["rows"]:
        groups.setdefault(r["benchmark"], []).append(r)
    lines = [f"机器：{result['machine']['label']}"]
    for benchmark, rows in groups.items():
        extra = [(key, head, digits) for key, head, digits in (
            ("memory_bytes", "保存的激活（MiB）", 1),
            ("largest_tensor_bytes", "最大的中间张量（MiB）", 2))
            if any(key in r for r in rows)]
        spread_col = any("ratio_quartiles" in r for r in rows)  # older records lack it
        short = spread_col and any(len(r.get("round_seconds", ())) < SHORT
                                   for r in rows)
        heads = ["规模", "实现", "毫秒", "相对基准",
                 *([f"逐轮比值的{'最小–最大' if short else '四分位'}"]
                   if spread_col else []),
                 *(head for _, head, _ in extra)]
        lines += ["", f"**{zh(benchmark)}**", "",
                  "| " + " | ".join(heads) + " |",
                  "|---|---|" + "---:|" * (len(heads) - 2)]
        base = None
        for r in rows:
            if base is None or r["size"] != base["size"]:
                base = r                     # each size's first row
            q1, q3 = r.get("ratio_quartiles", (None, None))
            if short:
                ratios = round_ratios(r, base)
                q1, q3 = min(ratios), max(ratios)
            # the baseline's own row is 1 in every round
            spread = ("" if q1 is None or r is base else f"{q1:.2f}–{q3:.2f}")
            cells = [zh(r["size"]), zh(r["impl"]), f"{1e3 * r['seconds']:.2f}",
                     f"{r['ratio']:.2f}×", *([spread] if spread_col else []),
                     *(f"{r[key] / 2**20:.{d}f}" if key in r else ""
                       for key, _, d in extra)]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write(result: dict, out_dir) -> tuple[Path, Path]:
    """把结果写成 ``out_dir`` 下的 ``benchmarks.json`` 和 ``benchmarks.md``。"""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "benchmarks.json").write_text(
        json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
    (out / "benchmarks.md").write_text(to_markdown(result) + "\n",
                                       encoding="utf-8")
    return out / "benchmarks.json", out / "benchmarks.md"


def write_record(result: dict, folder=None) -> Path:
    """把完整尺寸的结果提交为书的记录 ``bench-<机器简称>.json``（附录 A 渲染）。

    Raises:
        ValueError: the result is a quick run
        (:func:`~tf_tutorial.book.records.save_record` refuses it: its sizes
        are not those the appendix discusses).
    """
    return save_record(f"bench-{result['machine']['slug']}.json", result,
                       folder)
