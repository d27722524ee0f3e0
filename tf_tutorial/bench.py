"""Small, honest timing helpers: warm up, repeat, take the median, say which machine."""
from __future__ import annotations

import os
import platform
import statistics
import time
from typing import Callable

import torch


def median_time(fn: Callable[[], object], repeat: int = 5, warmup: int = 1) -> float:
    """Median wall-clock seconds of ``fn()`` over ``repeat`` runs, after ``warmup`` runs.

    CUDA work is synchronised before each clock read, so GPU timings are not just launch times.
    """
    if repeat < 1 or warmup < 0:
        raise ValueError(f"expected repeat >= 1 and warmup >= 0, but got repeat={repeat}, "
                         f"warmup={warmup}")
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_medians(fns: dict[str, Callable[[], object]], repeat: int = 5, warmup: int = 2) -> dict:
    """Median seconds of each function, timed in turns (A, B, A, B, ...) rather than one after
    the other, so that a drift in the machine's speed (clock, caches, other load) hits all alike."""
    if repeat < 1 or warmup < 0:
        raise ValueError(f"expected repeat >= 1 and warmup >= 0, but got repeat={repeat}, warmup={warmup}")
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            sync()
            start = time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def machine_label() -> str:
    """One line naming the hardware a measurement ran on, for figure captions and tables."""
    if torch.cuda.is_available():
        return f"GPU {torch.cuda.get_device_name(0)}，torch {torch.__version__}"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"CPU {cpu}，{os.cpu_count()} 核，torch {torch.__version__}，"
            f"{torch.get_num_threads()} 线程")


def saved_activation_bytes(fn: Callable[[], torch.Tensor]) -> int:
    """Bytes of the tensors autograd keeps for the backward pass of ``fn()``'s output.

    This is the memory a training step holds between forward and backward, the part that grows
    with batch and length. Storage shared by several saved tensors is counted once.
    """
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor):
        s = t.untyped_storage()
        storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    del out
    return sum(storages.values())


def compare_attention(batch: int = 32, length: int = 128, d_model: int = 256, n_heads: int = 8,
                      repeat: int = 20, device: str = "cpu") -> dict[str, tuple[float, int]]:
    """Forward + backward of our multi-head attention (fused and reference paths) beside
    ``nn.MultiheadAttention(need_weights=False)`` holding the same weights.

    Returns ``{name: (median seconds, activation bytes kept for backward)}``, PyTorch first.
    """
    from torch import nn

    from tf_tutorial.interop import from_torch

    torch.manual_seed(0)
    ref = nn.MultiheadAttention(d_model, n_heads, batch_first=True).to(device)
    fused, reference = from_torch(ref), from_torch(ref)
    reference.fused = False
    x = torch.randn(batch, length, d_model, device=device, requires_grad=True)
    runs = {"nn.MultiheadAttention": lambda: ref(x, x, x, need_weights=False)[0],
            "ours, fused path": lambda: fused(x, x, x),
            "ours, reference path": lambda: reference(x, x, x)}
    times = interleaved_medians({name: (lambda fn=fn: fn().sum().backward()) for name, fn in runs.items()},
                                repeat=repeat, warmup=3)
    return {name: (times[name], saved_activation_bytes(fn)) for name, fn in runs.items()}


def ratio_table(results: dict[str, tuple[float, int]]) -> str:
    """Format :func:`compare_attention`'s results as a table of times, memory and ratios."""
    base_t, base_m = next(iter(results.values()))
    lines = [f"{'':24s}{'ms':>9s}{'× torch':>9s}{'act. MB':>9s}{'× torch':>9s}"]
    for name, (t, m) in results.items():
        lines.append(f"{name:24s}{1e3 * t:9.2f}{t / base_t:9.2f}{m / 2**20:9.1f}{m / base_m:9.2f}")
    return "\n".join(lines)


def compare_decoding(d_model: int = 128, n_heads: int = 4, n_layers: int = 2, d_ff: int = 512,
                     vocab: int = 1000, batch: int = 8, src_len: int = 20, tokens: int = 64,
                     beam_size: int = 4, repeat: int = 3, device: str = "cpu") -> dict:
    """Greedy and beam search with and without the KV cache, on an untrained model that is made
    to run all ``tokens`` steps (no EOS), so both sides do the same number of steps.

    Returns ``{name: seconds}`` plus ``"same_tokens"``: whether cached and recomputed decoding
    produced identical outputs (they must).
    """
    from tf_tutorial.decode import beam_search, greedy_decode
    from tf_tutorial.model import Transformer, TransformerConfig

    torch.manual_seed(0)
    cfg = TransformerConfig(vocab, vocab, d_model, n_heads, n_layers, d_ff, dropout=0.0,
                            max_len=max(tokens + 1, src_len) + 1)
    model = Transformer(cfg).to(device).eval()
    src = torch.randint(4, vocab, (batch, src_len), device=device)
    out, tokens_seen = {}, {}
    for name, fn in (("greedy", lambda c: greedy_decode(model, src, eos_id=-1, max_len=tokens, use_cache=c)),
                     (f"beam {beam_size}", lambda c: beam_search(model, src, beam_size, eos_id=-1,
                                                                 max_len=tokens, use_cache=c))):
        for cached in (True, False):
            label = f"{name}, {'KV cache' if cached else 'recompute'}"
            tokens_seen[label] = fn(cached)
            out[label] = median_time(lambda: fn(cached), repeat=repeat, warmup=0)
    pairs = list(tokens_seen.values())
    out["same_tokens"] = torch.equal(pairs[0], pairs[1]) and torch.equal(pairs[2], pairs[3])
    return out
