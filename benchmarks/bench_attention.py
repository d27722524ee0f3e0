"""Multi-head attention: this package's two paths against nn.MultiheadAttention, side by side.

Forward + backward at B=32, L=128, D=256, H=8 (float32, CPU unless --device cuda), median of
repeated runs in one process. Prints times, ratios to PyTorch, and the activation memory each
keeps for backward. Run from the repository root:

    python benchmarks/bench_attention.py [--repeat 20] [--device cpu]
"""
from __future__ import annotations

import argparse

import torch
from torch import nn

from tf_tutorial.bench import machine_label, median_time, saved_activation_bytes
from tf_tutorial.interop import from_torch


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    ref = nn.MultiheadAttention(args.d_model, args.heads, batch_first=True).to(args.device)
    ours_fused = from_torch(ref)
    ours_reference = from_torch(ref)
    ours_reference.fused = False
    x = torch.randn(args.batch, args.length, args.d_model, device=args.device, requires_grad=True)

    runs = {
        "nn.MultiheadAttention": lambda: ref(x, x, x, need_weights=False)[0],
        "ours, fused path": lambda: ours_fused(x, x, x),
        "ours, reference path": lambda: ours_reference(x, x, x),
    }
    print(f"forward+backward, B={args.batch} L={args.length} D={args.d_model} H={args.heads}, "
          f"median of {args.repeat}; {machine_label()}")
    results = {}
    for name, fn in runs.items():
        seconds = median_time(lambda: fn().sum().backward(), repeat=args.repeat, warmup=3)
        results[name] = (seconds, saved_activation_bytes(fn))
    base_t, base_m = results["nn.MultiheadAttention"]
    print(f"{'':24s}{'ms':>9s}{'× torch':>9s}{'act. MB':>9s}{'× torch':>9s}")
    for name, (t, m) in results.items():
        print(f"{name:24s}{1e3 * t:9.2f}{t / base_t:9.2f}{m / 2**20:9.1f}{m / base_m:9.2f}")
    return results


if __name__ == "__main__":
    main()
