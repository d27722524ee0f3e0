"""附录：本书的实现与 ``torch.nn`` 并排测速——注意力、完整训练步、解码。

Everything here runs in one process, takes medians of repeated runs, and reports ratios to
PyTorch's own modules holding the same weights; ``run_all`` is what ``python -m benchmarks``
and the appendix page call. Timings are printed, never asserted.

Shape legend: B batch, L length, D d_model, H heads, V vocabulary.
"""
from __future__ import annotations

import copy
import json
import platform
from pathlib import Path

import torch
from torch import nn

from tf_tutorial.bench import compare_attention, compare_decoding, interleaved_medians, machine_label
from tf_tutorial.interop import from_torch
from tf_tutorial.model import Transformer, TransformerConfig


class TorchCoreTransformer(nn.Module):
    """Our embeddings, positions and output layer around ``nn.Transformer``: the fair baseline
    for a training step (only the encoder–decoder core differs)."""

    def __init__(self, ours: Transformer):
        super().__init__()
        c = ours.config
        twin = copy.deepcopy(ours)                     # same weights, but trained separately
        self.config, self.src_embed, self.tgt_embed = c, twin.src_embed, twin.tgt_embed
        self.positions, self.out = twin.positions, twin.out
        norm = (lambda: nn.LayerNorm(c.d_model)) if c.norm_first else (lambda: None)
        enc = nn.TransformerEncoderLayer(c.d_model, c.n_heads, c.d_ff, c.dropout, batch_first=True,
                                         norm_first=c.norm_first)
        dec = nn.TransformerDecoderLayer(c.d_model, c.n_heads, c.d_ff, c.dropout, batch_first=True,
                                         norm_first=c.norm_first)
        self.core = nn.Transformer(c.d_model, c.n_heads, batch_first=True,
                                   custom_encoder=nn.TransformerEncoder(enc, c.n_layers, norm(),
                                                                        enable_nested_tensor=False),
                                   custom_decoder=nn.TransformerDecoder(dec, c.n_layers, norm()))

    def forward(self, src, tgt_in):
        pad, T = self.config.pad_id, tgt_in.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=tgt_in.device).triu(1)  # True = blocked
        y = self.core(self.positions(self.src_embed(src)), self.positions(self.tgt_embed(tgt_in)),
                      tgt_mask=causal, src_key_padding_mask=src == pad, tgt_key_padding_mask=tgt_in == pad,
                      memory_key_padding_mask=src == pad, tgt_is_causal=True)
        return self.out(y)


def compare_training_step(d_model: int = 128, n_heads: int = 4, n_layers: int = 2, d_ff: int = 512,
                          vocab: int = 1000, batch: int = 64, length: int = 24, repeat: int = 5,
                          device: str = "cpu", amp_dtype=None, compile: bool = False) -> dict:
    """One Adam step (forward, cross-entropy, backward, update) of our ``Transformer`` and of the
    same model built on ``nn.Transformer``, with identical weights and batch.

    Returns seconds per step for each, and ``loss_gap``: the difference of their first losses
    (≈ 0 in float32: the two compute the same function).
    """
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab, vocab, d_model, n_heads, n_layers, d_ff, dropout=0.0, max_len=length + 1)
    ours = Transformer(cfg).to(device)
    ref = TorchCoreTransformer(ours).to(device)
    ours.encoder.load_state_dict(from_torch(ref.core.encoder).state_dict())
    ours.decoder.load_state_dict(from_torch(ref.core.decoder).state_dict())
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, vocab, (batch, length), generator=g).to(device)
    tgt = torch.randint(4, vocab, (batch, length + 1), generator=g).to(device)
    src[: batch // 4, length // 2:] = 0                                   # some padding, as in real batches
    losses, steps = {}, {}
    for name, model in (("nn.Transformer", ref), ("ours", ours)):
        with torch.no_grad(), torch.autocast(torch.device(device).type, dtype=amp_dtype, enabled=amp_dtype is not None):
            losses[name] = nn.functional.cross_entropy(model(src, tgt[:, :-1]).float().flatten(0, 1),
                                                       tgt[:, 1:].flatten()).item()
        steps[name] = _adam_step(model, src, tgt, device, amp_dtype, compile)
    results = interleaved_medians(steps, repeat=repeat, warmup=2)
    results["loss_gap"] = abs(losses["ours"] - losses["nn.Transformer"])
    return results


def _adam_step(model, src, tgt, device, amp_dtype, compile):
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    fwd = torch.compile(model) if compile else model

    def step():
        with torch.autocast(torch.device(device).type, dtype=amp_dtype, enabled=amp_dtype is not None):
            logits = fwd(src, tgt[:, :-1])
            loss = nn.functional.cross_entropy(logits.float().flatten(0, 1), tgt[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def attention_rows(lengths=(64, 256, 1024), batch: int = 8, d_model: int = 256, n_heads: int = 8,
                   repeat: int = 5, device: str = "cpu") -> list[dict]:
    """Multi-head attention forward+backward at several lengths (see ``bench.compare_attention``)."""
    rows = []
    for L in lengths:
        r = compare_attention(batch, L, d_model, n_heads, repeat, device)
        base_t, base_m = r["nn.MultiheadAttention"]
        for name, (t, m) in r.items():
            rows.append({"benchmark": "attention fwd+bwd", "size": f"L={L}", "impl": name, "seconds": t,
                         "ratio": t / base_t, "memory_bytes": m, "memory_ratio": m / base_m})
    return rows


def run_all(quick: bool = False, device: str = "cpu", repeat: int | None = None) -> dict:
    """Every comparison, as rows of one table plus a description of the machine.

    ``quick``: small sizes (the test suite and the book build); the default sizes are those of
    the appendix's discussion (L up to 1024, chapter 10's CPU model).
    """
    rep = repeat or (2 if quick else 5)
    lengths = (32, 64, 128) if quick else (64, 256, 1024)
    rows = attention_rows(lengths, batch=4 if quick else 8, d_model=64 if quick else 256,
                          n_heads=4 if quick else 8, repeat=rep, device=device)
    variants = [("float32", None, False)]
    if torch.device(device).type == "cuda":
        variants += [("bf16 autocast", torch.bfloat16, False), ("bf16 + torch.compile", torch.bfloat16, True)]
    size = dict(d_model=32, n_heads=2, n_layers=1, d_ff=64, batch=8, length=12) if quick else {}
    for label, dtype, comp in variants:
        r = compare_training_step(repeat=rep, device=device, amp_dtype=dtype, compile=comp, **size)
        for name in ("nn.Transformer", "ours"):
            rows.append({"benchmark": f"training step ({label})", "size": "chapter-10 model" if not quick else "tiny",
                         "impl": name, "seconds": r[name], "ratio": r[name] / r["nn.Transformer"],
                         "loss_gap": r["loss_gap"]})
    dec = compare_decoding(**(dict(d_model=32, n_heads=2, n_layers=1, d_ff=64, batch=2, tokens=16, beam_size=2)
                              if quick else dict(tokens=64)), repeat=rep, device=device)
    for kind in [k.split(",")[0] for k in dec if k.endswith("recompute")]:
        base = dec[f"{kind}, recompute"]
        for how in ("recompute", "KV cache"):
            rows.append({"benchmark": f"decode {kind}", "size": "16 tokens" if quick else "64 tokens",
                         "impl": how, "seconds": dec[f"{kind}, {how}"], "ratio": dec[f"{kind}, {how}"] / base,
                         "same_tokens": dec["same_tokens"]})
    machine = {"label": machine_label(), "torch": torch.__version__, "python": platform.python_version(),
               "threads": torch.get_num_threads(), "device": device}
    return {"machine": machine, "quick": quick, "rows": rows}


def to_markdown(result: dict) -> str:
    """The rows of :func:`run_all` as a Markdown table (ratios to the baseline of each group)."""
    lines = [f"机器：{result['machine']['label']}", "",
             "| 测试 | 规模 | 实现 | 毫秒 | 相对基准 | 保存的激活（MB） |", "|---|---|---|---:|---:|---:|"]
    for r in result["rows"]:
        mem = f"{r['memory_bytes'] / 2**20:.1f}" if "memory_bytes" in r else ""
        lines.append(f"| {r['benchmark']} | {r['size']} | {r['impl']} | {1e3 * r['seconds']:.2f} | "
                     f"{r['ratio']:.2f}× | {mem} |")
    return "\n".join(lines)


def write(result: dict, out_dir) -> tuple[Path, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "benchmarks.json").write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
    (out / "benchmarks.md").write_text(to_markdown(result) + "\n", encoding="utf-8")
    return out / "benchmarks.json", out / "benchmarks.md"
