"""KV-cached decoding against recomputing the whole prefix at every step, side by side.

Greedy and beam search (size 4), 64 generated tokens, on chapter 10's CPU-sized model
(d_model 128, 2 + 2 layers), median of repeated runs in one process. Prints the times and the
speed-up of the cache. Run from the repository root:

    python benchmarks/bench_decode.py [--tokens 64] [--repeat 3] [--device cpu]
"""
from __future__ import annotations

import argparse

from tf_tutorial.timing.clock import machine_label
from tf_tutorial.timing.compare import compare_decoding


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    print(f"decode {args.tokens} tokens, batch {args.batch}, d_model {args.d_model}, "
          f"{args.layers}+{args.layers} layers, median of {args.repeat}; {machine_label()}")
    r = compare_decoding(d_model=args.d_model, n_heads=4, n_layers=args.layers, d_ff=4 * args.d_model,
                         batch=args.batch, tokens=args.tokens, beam_size=args.beam, repeat=args.repeat,
                         device=args.device)
    print(f"{'':24s}{'ms':>10s}")
    for name, t in r.items():
        if name != "same_tokens":
            print(f"{name:24s}{1e3 * t:10.1f}")
    for kind in ("greedy", f"beam {args.beam}"):
        speedup = r[f"{kind}, recompute"] / r[f"{kind}, KV cache"]
        print(f"{kind}: KV cache {speedup:.1f}× faster than recomputation")
    print(f"same tokens with and without the cache: {r['same_tokens']}")
    return r


if __name__ == "__main__":
    main()
