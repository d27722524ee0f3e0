"""Chapter 11's equal training time: how many steps each model takes in the same CPU time.

    python -m scripts.calibrate_ch11              # about 2 minutes on 2 cores
    python -m scripts.calibrate_ch11 --budget 55

Chapter 11 trains chapter 10's encoder–decoder and a decoder-only model of the same size for
the same time. A time budget inside the chapter would make its numbers depend on how busy the
machine is while the book builds; so this script trains each model for the budget on a quiet
machine, counts the steps it reached, and writes book/records/ch11_budget.json. The chapter
trains each model for exactly those steps (so its numbers repeat run after run) and shows the
record.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime

import torch

from tf_tutorial.book.records import save_record
from tf_tutorial.corpus.data import make_corpus
from tf_tutorial.gpt import GPT, continuation_vocab, train_continuation
from tf_tutorial.timing.clock import machine_label
from tf_tutorial.train import CONFIGS, train

NAME = "ch11_budget.json"


def chapter_setup():
    """The chapter's training settings, corpus, joint vocabulary and decoder-only configuration."""
    from tf_tutorial.gpt import GPTConfig

    cfg = dataclasses.replace(CONFIGS["cpu"], norm_first=True, warmup=100)
    corpus = make_corpus(n_train=cfg.n_train, seed=cfg.seed)
    vocab = continuation_vocab(corpus.src_vocab, corpus.tgt_vocab)
    gpt_cfg = GPTConfig(len(vocab), d_model=cfg.d_model, n_heads=cfg.n_heads, n_layers=5, d_ff=cfg.d_ff,
                        dropout=cfg.dropout, max_len=256, pad_id=vocab.pad_id, eos_id=vocab.eos_id,
                        norm_first=True, positions="sinusoidal", activation="relu")
    return cfg, corpus, vocab, gpt_cfg


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.calibrate_ch11", description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=55.0, help="training seconds for each model")
    args = p.parse_args(argv)
    cfg, corpus, vocab, gpt_cfg = chapter_setup()

    # each model trains from step 0 for the budget, as the chapter would with a time limit
    ed = train(dataclasses.replace(cfg, eval_every=10**6), corpus=corpus, progress=False,
               max_seconds=args.budget).history
    torch.manual_seed(cfg.seed)
    gpt = train_continuation(GPT(gpt_cfg), vocab, corpus.train, cfg, max_seconds=args.budget,
                             progress=False).history
    steps = {"encoder_decoder": ed["step"][-1], "decoder_only": gpt["step"][-1]}
    record = {"machine": machine_label(), "torch": torch.__version__,
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "method": (f"each model trained from step 0 with a {args.budget:g} s limit on its training "
                         f"loop, {torch.get_num_threads()} threads, nothing else running; the steps it "
                         f"reached are the steps chapter 11 trains it for"),
              "budget_seconds": args.budget, "steps": steps,
              "train_config": dataclasses.asdict(cfg), "gpt_config": gpt_cfg.to_dict(),
              "seconds_per_step": {"encoder_decoder": round(args.budget / steps["encoder_decoder"], 4),
                                   "decoder_only": round(args.budget / steps["decoder_only"], 4)}}
    path = save_record(NAME, record)
    print(f"wrote {path}: {record['steps']} ({record['seconds_per_step']} s per step)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
