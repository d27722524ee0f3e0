"""KV-cached decoding against recomputing the whole prefix at every step, side by side.

Greedy and beam search (size 4), 64 generated tokens, on chapter 10's CPU-sized model
(its ``cpu`` configuration: d_model 128, 2 + 2 layers, d_ff 256), median of repeated runs in one process. Prints the times and the
speed-up of the cache. Run from the repository root:

    python benchmarks/bench_decode.py [--tokens 64] [--repeat 3] [--device cpu]
"""
from __future__ import annotations

import argparse

from tf_tutorial.timing.clock import machine_label
from tf_tutorial.timing.compare import compare_decoding
from tf_tutorial.train import CONFIGS


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cpu = CONFIGS["cpu"]                      # chapter 10's CPU model
    parser.add_argument("--d-model", type=int, default=cpu.d_model)
    parser.add_argument("--layers", type=int, default=cpu.n_layers)
    parser.add_argument("--d-ff", type=int, default=None,
                        help=f"default {cpu.d_ff // cpu.d_model} × d_model, as in the cpu configuration")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    d_ff = args.d_ff or args.d_model * cpu.d_ff // cpu.d_model
    print(f"decode {args.tokens} tokens, batch {args.batch}, d_model {args.d_model}, d_ff {d_ff}, "
          f"{args.layers}+{args.layers} layers, median of {args.repeat}; {machine_label()}")
    r = compare_decoding(d_model=args.d_model, n_heads=cpu.n_heads, n_layers=args.layers, d_ff=d_ff,
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
