"""Run every benchmark once and write the table: ``python -m benchmarks [--quick] [--out DIR] [--record]``.

Multi-head attention (reference and fused paths, and the packed-QKV ablation, vs
``nn.MultiheadAttention``) at several lengths, a full training step of our ``Transformer`` vs the
same model on ``nn.Transformer`` (and the ablation), and greedy and beam decoding with and without
the KV cache; chapter 12's norms and attention paths; chapter 1's step-by-step RNNs (``nn.RNN``,
the book's ``ElmanRNN``) against fused self-attention; on a GPU also bf16 autocast and
torch.compile. Interleaved medians in one process;
ratios to PyTorch; nothing is asserted.

By default the result goes to ``--out`` (benchmarks.json and benchmarks.md). ``--record`` writes it
instead as ``book/records/bench-<machine>.json``, the record appendix A renders; a quick run is
not a record and is refused.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from tf_tutorial.timing.compare import run_all, to_markdown, write, write_record

RECORDS = Path(__file__).resolve().parent.parent / "book" / "records"


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, but got {text!r}")
    return value


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks",
                                description=__doc__.splitlines()[0].replace("``", ""))
    p.add_argument("--quick", action="store_true", help="small sizes (seconds), as in the test suite")
    p.add_argument("--out", default="benchmark-results", help="directory for benchmarks.json and benchmarks.md")
    p.add_argument("--record", action="store_true",
                   help=f"write the record {RECORDS}/bench-<machine>.json (not with --quick)")
    p.add_argument("--records-dir", default=str(RECORDS), help=argparse.SUPPRESS)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--repeat", type=_positive_int, default=None,
                   help="timed runs per measurement (default: 2 with --quick, else more)")
    p.add_argument("--threads", type=_positive_int, default=None,
                   help="CPU threads for torch (1 keeps timings steady on a machine shared with other work)")
    args = p.parse_args(argv)
    if args.record and args.quick:
        p.error("--record takes the full sizes: a quick run is not a record (drop --quick)")
    try:                                   # before minutes of measuring, not after
        device = torch.device(args.device)
    except RuntimeError:
        p.error(f"--device {args.device!r}: expected cpu, cuda, cuda:N or another torch device")
    if device.type == "cuda" and not torch.cuda.is_available():
        p.error(f"--device {args.device}: no CUDA GPU is available")
    if not args.record and Path(args.out).exists() and not Path(args.out).is_dir():
        p.error(f"--out {args.out}: not a directory")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    result = run_all(quick=args.quick, device=args.device, repeat=args.repeat)
    print(to_markdown(result))
    if args.record:
        print(f"\nwritten: {write_record(result, args.records_dir)} ({result['wall_seconds']} s)")
    else:
        json_path, md_path = write(result, args.out)
        print(f"\nwritten: {json_path}, {md_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
