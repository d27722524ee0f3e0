"""Multi-head attention: this package's two paths against nn.MultiheadAttention, side by side.

Forward + backward at B=32, L=128, D=256, H=8 (float32, CPU unless --device cuda), median of
repeated runs in one process. Prints times, ratios to PyTorch, and the activation memory each
keeps for backward. Run from the repository root:

    python benchmarks/bench_attention.py [--repeat 20] [--device cpu]
"""
from __future__ import annotations

import argparse

from tf_tutorial.timing.clock import machine_label
from tf_tutorial.timing.compare import compare_attention, ratio_table


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    print(f"forward+backward, B={args.batch} L={args.length} D={args.d_model} H={args.heads}, "
          f"median of {args.repeat}; {machine_label()}")
    results = compare_attention(args.batch, args.length, args.d_model, args.heads,
                                args.repeat, args.device)
    print(ratio_table(results))
    return results


if __name__ == "__main__":
    main()
