"""Chapter 12's table: chapter 11's decoder-only model with one of today's parts switched on at a time.

    python -m scripts.ch12_variants              # 21 runs: about 25 minutes on 2 cores, scoring included
    python -m scripts.ch12_variants --only base rope

Every variant is chapter 11's decoder-only model (book/records/ch11_budget.json: the same settings,
the same batches, the same number of steps) with one switch of ``GPTConfig`` changed: RMSNorm,
RoPE, SwiGLU at a parameter-matched width, GQA with 2 key/value heads, MQA, and the first four
together (GQA, not MQA); each with seeds 0, 1 and 2 (one seed gives every variant the same
batches, so two variants can be compared seed by seed). Each is scored on the
test and longer splits (greedy decoding). The results go to book/records/ch12_variants.json
(merged by variant name), which chapter 12 renders.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime

import numpy as np
import torch

from scripts.calibrate_ch11 import chapter_setup
from tf_tutorial.book.records import load_record, save_record
from tf_tutorial.corpus.data import CORPUS_VERSION
from tf_tutorial.gpt import GPT, evaluate_continuation, train_continuation
from tf_tutorial.model import count_parameters
from tf_tutorial.timing.clock import machine_label

NAME = "ch12_variants.json"

# name: (what changes, in Chinese for the chapter's table; GPTConfig overrides)
VARIANTS = {
    "base": ("第 11 章的模型（LayerNorm、正弦位置编码、ReLU、多头注意力）", {}),
    "rmsnorm": ("LayerNorm → RMSNorm", {"norm": "rms"}),
    "rope": ("正弦位置编码 → RoPE", {"positions": "rope"}),
    "swiglu": ("ReLU 前馈网络 → SwiGLU（参数相同的宽度）", {"activation": "swiglu", "d_ff": 172}),
    "gqa2": ("多头注意力 → GQA（4 个查询头，2 组键值）", {"n_kv_heads": 2}),
    "mqa": ("多头注意力 → MQA（4 个查询头，1 组键值）", {"n_kv_heads": 1}),
    "all": ("四项一起：RMSNorm + RoPE + SwiGLU + GQA", {"norm": "rms", "positions": "rope",
                                                    "activation": "swiglu", "d_ff": 172, "n_kv_heads": 2}),
}
# every variant again with two more seeds (other initial weights and batch orders): how far runs
# that differ only by chance lie apart, and whether a difference holds seed by seed. Ordered seed
# by seed, so that a machine slowing down during the record does not fall on one variant only
SEEDS = {f"{name}_seed{s}": (name, s) for s in (1, 2) for name in VARIANTS}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.ch12_variants", description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="+", choices=sorted(VARIANTS) + sorted(SEEDS), default=None)
    args = p.parse_args(argv)
    budget = load_record("ch11_budget.json")
    if budget is None:
        raise SystemExit("needs book/records/ch11_budget.json (python -m scripts.calibrate_ch11)")
    cfg, corpus, vocab, gpt_cfg = chapter_setup()
    now = gpt_cfg.to_dict()     # fields added since the record was taken keep their defaults
    if {k: now.get(k) for k in budget["gpt_config"]} != budget["gpt_config"] \
            or budget["train_config"] != dataclasses.asdict(cfg):
        raise SystemExit("book/records/ch11_budget.json is from other settings: run scripts.calibrate_ch11 again")
    steps = budget["steps"]["decoder_only"]
    train_cfg = dataclasses.replace(cfg, steps=steps)
    record = load_record(NAME) or {}
    record.update({"machine": machine_label(), "torch": torch.__version__,
                   "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   "method": (f"chapter 11's decoder-only model and training ({steps} steps, the same batches), "
                              f"one GPTConfig switch changed per variant; seeds 0, 1 and 2, every variant of "
                              f"one seed before the next seed; greedy decoding"),
                   "steps": steps, "corpus_version": CORPUS_VERSION})
    results = record.setdefault("variants", {})
    for name in args.only or [*VARIANTS, *SEEDS]:
        variant, seed = SEEDS.get(name, (name, cfg.seed))
        label, overrides = VARIANTS[variant]
        vcfg = dataclasses.replace(gpt_cfg, **overrides)
        seed_cfg = dataclasses.replace(train_cfg, seed=seed)
        torch.manual_seed(seed)
        run = train_continuation(GPT(vcfg), vocab, corpus.train, seed_cfg, progress=False)
        h = run.history
        row = {"label": label, "variant": variant, "seed": seed, "config": vcfg.to_dict(),
               "parameters": count_parameters(run.model),
               "train_seconds": round(h["seconds"], 1), "final_loss": float(np.mean(h["loss"][-20:])),
               "loss_curve": h["loss"][::4]}
        for split in ("test", "longer"):
            ev = evaluate_continuation(run.model, vocab, getattr(corpus, split))
            row[split] = {"exact_match": ev["exact_match"], "bleu": ev["bleu"]}
        results[name] = row
        print(name, {k: row[k] for k in ("parameters", "train_seconds", "final_loss", "test", "longer")},
              flush=True)
        save_record(NAME, record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
