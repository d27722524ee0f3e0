"""Run every benchmark once and write the table: ``python -m benchmarks [--quick] [--out DIR]``.

Multi-head attention (reference and fused paths vs ``nn.MultiheadAttention``) at several lengths,
a full training step of our ``Transformer`` vs the same model on ``nn.Transformer``, and greedy
and beam decoding with and without the KV cache; on a GPU also bf16 autocast and torch.compile.
Medians of repeated runs in one process; ratios to PyTorch; nothing is asserted.
"""
from __future__ import annotations

import argparse
import sys

import torch

from tf_tutorial.perf import run_all, to_markdown, write


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes (seconds), as in the test suite")
    p.add_argument("--out", default="benchmark-results", help="directory for benchmarks.json and benchmarks.md")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--repeat", type=int, default=None)
    args = p.parse_args(argv)
    result = run_all(quick=args.quick, device=args.device, repeat=args.repeat)
    print(to_markdown(result))
    json_path, md_path = write(result, args.out)
    print(f"\nwritten: {json_path}, {md_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
