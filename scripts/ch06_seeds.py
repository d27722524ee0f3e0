"""Chapter 6's warmup experiment with more seeds than the chapter trains live.

    python -m scripts.ch06_seeds              # about 5 minutes on 2 cores
    python -m scripts.ch06_seeds --seeds 5    # seeds 0..4 (the default)

Chapter 6 trains the 12-layer reversal model once per placement (Post-LN, Pre-LN) and warmup
(none, 60 steps), at seed 0, and draws those four curves. Whether "Post-LN without warmup did not
learn" is that seed's luck is a question for more seeds, and whether it never learns or only
learns later is a question for more steps: this script trains the same grid
(``tf_tutorial.experiments.warmup.warmup_grid``) at seeds 0..N-1, then Post-LN without warmup
for ``long_steps`` at the same seeds, and writes every loss curve to
book/records/ch06_warmup.json, which the chapter renders (and compares with its own seed-0 run).
"""
from __future__ import annotations

import argparse
import datetime

import torch

from tf_tutorial.book.records import save_record
from tf_tutorial.experiments.warmup import plateau_exit, warmup_grid
from tf_tutorial.timing.clock import machine_label

NAME = "ch06_warmup.json"
SETTINGS = {"n_layers": 12, "lr": 3e-3, "steps": 200, "warmups": [0, 60],   # the chapter's
            "long_steps": 600,   # Post-LN without warmup again, for longer: stuck, or late?
            "low_lr": 1e-3, "low_lr_steps": 400}   # chapter 6's exercise 3: no warmup, lower lr


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.ch06_seeds",
                                description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5, help="train seeds 0..N-1 (default 5)")
    args = p.parse_args(argv)
    if args.seeds < 1:
        p.error(f"--seeds must be a positive integer, but got {args.seeds}")
    seeds = list(range(args.seeds))
    s = SETTINGS

    def entries(curves):
        """{"Post-LN/0": {placement, warmup, loss per seed, plateau_exit per seed}, ...}"""
        out = {}
        for (name, warmup), per_seed in curves.items():
            out[f"{name}/{warmup}"] = {
                "placement": name, "warmup": warmup,
                "loss": [[round(x, 5) for x in losses] for losses in per_seed],
                "plateau_exit": [plateau_exit(losses) for losses in per_seed]}
            print(f"{name}/{warmup}, {len(per_seed[0])} steps:",
                  out[f"{name}/{warmup}"]["plateau_exit"], flush=True)
        return out

    grid = dict(n_layers=s["n_layers"], lr=s["lr"])
    runs = entries(warmup_grid(seeds, warmups=s["warmups"], steps=s["steps"], **grid))
    # the same Post-LN runs without warmup, trained further (their first steps are the runs
    # above again: same weights, batches and constant rate; tests/test_scripts.py checks it)
    long = entries(warmup_grid(seeds, warmups=[0], steps=s["long_steps"],
                               placements=["Post-LN"], **grid))
    runs["Post-LN/0"]["long"] = {k: long["Post-LN/0"][k] for k in ("loss", "plateau_exit")}
    low = entries(warmup_grid(seeds, warmups=[0], steps=s["low_lr_steps"],
                              **dict(grid, lr=s["low_lr"])))
    record = {"machine": machine_label(), "torch": torch.__version__,
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "method": (f"ReverseModel({s['n_layers']} layers), Adam lr {s['lr']}, "
                         f"{s['steps']} steps, batches of 32; each seed sets the initial "
                         "weights and the batches; plateau_exit: first step whose 10-step "
                         f"mean loss is below 1.0; Post-LN without warmup also for "
                         f"{s['long_steps']} steps; both placements without warmup also at "
                         f"lr {s['low_lr']} for {s['low_lr_steps']} steps"),
              "settings": s, "seeds": seeds, "runs": runs, "low_lr_runs": low}
    print(save_record(NAME, record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
