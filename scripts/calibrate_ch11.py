"""Chapter 11's equal training time: how many steps the encoder–decoder takes in the time
the decoder-only model needs for its steps.

    python -m scripts.calibrate_ch11              # about 7 minutes on 2 cores
    python -m scripts.calibrate_ch11 --rounds 5
    python -m scripts.calibrate_ch11 --runs-only  # keep the timing, redo the three seeds' runs

Chapter 11 trains chapter 10's encoder–decoder and a decoder-only model of the same size for
the same time. A time limit inside the chapter would make its numbers depend on how busy the
machine is while the book builds, so the chapter trains each model for a fixed number of
steps, and this script finds the numbers that take equal time on a quiet machine:

1. the decoder-only model trains for ``DECODER_ONLY_STEPS`` steps (the budget: about a minute
   here; chapter 12's record trains its variants for the same steps);
2. the encoder–decoder trains for the same steps, on the same batches;
3. both are repeated ``--rounds`` times, interleaved, so that a slow spell of the machine
   slows both; the medians give the seconds per step, and their ratio the encoder–decoder's
   steps in the same time;
4. the encoder–decoder is trained for those steps with seeds 0, 1 and 2 (other initial
   weights and batch orders), each scored on the test split at the decoder-only model's last
   step and on the three splits at its own last step. The chapter trains only the decoder-only
   model live and reads the encoder–decoder's runs (seed 0's loss curve included) from here;
   it re-runs seed 0's first steps to prove the record is this code's run.

``--runs-only`` keeps the committed record's timing (its step counts) and redoes step 4 only:
a few minutes, and the machine need not be quiet.

It writes book/records/ch11_budget.json; the chapter shows the record.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import statistics
import tempfile
from pathlib import Path

import torch

from tf_tutorial.book.records import load_record, save_record
from tf_tutorial.corpus.data import CORPUS_VERSION, make_corpus
from tf_tutorial.gpt import GPT, continuation_vocab, train_continuation
from tf_tutorial.metrics import evaluate
from tf_tutorial.timing.clock import machine_label
from tf_tutorial.train import CONFIGS, train

NAME = "ch11_budget.json"
DECODER_ONLY_STEPS = 336          # about a minute on the book's 2-core machine
SEEDS = (0, 1, 2)                 # the chapter's seed and two more
SPLITS = ("test", "longer", "deeper")


def chapter_setup():
    """The chapter's training settings, corpus, joint vocabulary and decoder-only configuration."""
    from tf_tutorial.gpt import GPTConfig

    cfg = dataclasses.replace(CONFIGS["cpu"], norm_first=True, warmup=100)
    corpus = make_corpus(n_train=cfg.n_train, seed=cfg.seed)
    vocab = continuation_vocab(corpus.src_vocab, corpus.tgt_vocab)
    gpt_cfg = GPTConfig(len(vocab), d_model=cfg.d_model, n_heads=cfg.n_heads, n_layers=5,
                        d_ff=cfg.d_ff, dropout=cfg.dropout, max_len=256, pad_id=vocab.pad_id,
                        eos_id=vocab.eos_id, norm_first=True, positions="sinusoidal",
                        activation="relu")
    return cfg, corpus, vocab, gpt_cfg


def scores(model, pairs, corpus) -> dict:
    ev = evaluate(model, pairs, corpus.src_vocab, corpus.tgt_vocab)
    return {"exact_match": ev["exact_match"], "bleu": ev["bleu"]}


def encoder_decoder_run(cfg, corpus, steps: int, same: int, seed: int) -> dict:
    """The encoder–decoder trained for ``steps`` steps with ``seed`` on the CPU, as chapter 11 shows it.

    It stops at step ``same`` (the decoder-only model's last) to be scored on the test split,
    then resumes from its checkpoint to ``steps`` (chapter 10: the same run as one without the
    stop) and is scored on every split. The loss of every step is kept for the chapter's curves.
    """
    run_cfg = dataclasses.replace(cfg, steps=steps, seed=seed)
    with tempfile.TemporaryDirectory() as tmp:
        early = train(run_cfg, corpus=corpus, device="cpu", out_dir=tmp, max_steps=same,
                      progress=False)
        at_same = scores(early.model, corpus.test, corpus)
        run = train(run_cfg, corpus=corpus, device="cpu", out_dir=tmp, progress=False,
                    resume=str(Path(tmp) / "checkpoint.pt"))
    splits = {k: scores(run.model, getattr(corpus, k), corpus) for k in SPLITS}
    h = run.history
    return {**splits["test"], "splits": splits,
            "at_same_step": {"step": early.history["step"][-1], **at_same},
            "seconds": round(h["seconds"], 1), "loss": [round(x, 5) for x in h["loss"]]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.calibrate_ch11",
                                description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=None,
                   help="interleaved timing rounds (odd: a median; default 3)")
    p.add_argument("--runs-only", action="store_true",
                   help="keep the committed record's timing and step counts; redo the seeds' runs")
    args = p.parse_args(argv)
    if args.runs_only and args.rounds is not None:
        p.error("--rounds times the models; --runs-only keeps the record's timing: give one of them")
    args.rounds = 3 if args.rounds is None else args.rounds
    if args.rounds < 1:
        p.error(f"--rounds must be at least 1, but got {args.rounds}")
    cfg, corpus, vocab, gpt_cfg = chapter_setup()
    steps = DECODER_ONLY_STEPS
    if args.runs_only:
        record = load_record(NAME)
        if record is None:
            raise SystemExit(f"--runs-only needs book/records/{NAME}: run without it first")
        if (record["train_config"] != dataclasses.asdict(cfg)
                or {k: gpt_cfg.to_dict().get(k) for k in record["gpt_config"]}
                != record["gpt_config"]      # fields added later (chapter 12) keep defaults
                or record["steps"]["decoder_only"] != steps):
            raise SystemExit(f"book/records/{NAME} is from other settings: run without --runs-only")
        record["encoder_decoder_seeds"] = seed_runs(cfg, corpus, record["steps"]["encoder_decoder"],
                                                    steps)
        record.update(runs_date=_now(), runs_machine=machine_label(), runs_torch=torch.__version__,
                      corpus_version=CORPUS_VERSION)
        path = save_record(NAME, record)
        print(f"wrote {path}: the seeds' runs, with the timing of {record['date'][:10]}")
        return 0
    # no validation inside the run but the one train() makes at its last step, whose time
    # (eval_seconds) is taken out below: the records before 2026-12-06 still counted it
    ed_cfg = dataclasses.replace(cfg, eval_every=10**6)

    rounds = []
    for r in range(args.rounds):
        torch.manual_seed(cfg.seed)
        gpt = train_continuation(GPT(gpt_cfg), vocab, corpus.train,
                                 dataclasses.replace(cfg, steps=steps), progress=False).history
        ed = train(ed_cfg, corpus=corpus, device="cpu", progress=False, max_steps=steps).history
        rounds.append({"decoder_only": round(gpt["seconds"], 2),
                       "encoder_decoder": round(ed["seconds"] - ed["eval_seconds"], 2)})
        print(f"round {r + 1}: {rounds[-1]} s for {steps} steps", flush=True)
    per_step = {k: statistics.median(x[k] for x in rounds) / steps for k in rounds[0]}
    ratios = [x["decoder_only"] / x["encoder_decoder"] for x in rounds]
    # at least one step: a toy run on a busy machine can measure a ratio that rounds to 0
    ed_steps = max(1, round(steps * per_step["decoder_only"] / per_step["encoder_decoder"]))

    seeds = seed_runs(cfg, corpus, ed_steps, steps)
    now = _now()
    record = {"machine": machine_label(), "torch": torch.__version__, "date": now,
              "runs_machine": machine_label(), "runs_torch": torch.__version__, "runs_date": now,
              "corpus_version": CORPUS_VERSION,
              "method": (f"the decoder-only model and the encoder–decoder each trained for {steps} "
                         f"steps on the same batches, {args.rounds} interleaved rounds, "
                         f"{torch.get_num_threads()} threads, nothing else running; the median "
                         f"seconds per step give the encoder–decoder's steps in the decoder-only "
                         f"model's time; the encoder–decoder's seconds without its validation pass "
                         f"at the last step"),
              "budget_seconds": round(per_step["decoder_only"] * steps, 1),
              "steps": {"encoder_decoder": ed_steps, "decoder_only": steps},
              "rounds": rounds,
              "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
              "seconds_per_step": {k: round(v, 4) for k, v in per_step.items()},
              "encoder_decoder_seeds": seeds,
              "train_config": dataclasses.asdict(cfg), "gpt_config": gpt_cfg.to_dict()}
    path = save_record(NAME, record)
    print(f"wrote {path}: {record['steps']} ({record['seconds_per_step']} s per step)")
    return 0


def seed_runs(cfg, corpus, ed_steps: int, same: int) -> dict:
    runs = {}
    for s in SEEDS:
        runs[f"seed{s}"] = run = encoder_decoder_run(cfg, corpus, ed_steps, same, s)
        print(f"encoder–decoder, seed {s}, {ed_steps} steps: test {run['exact_match']:.3f} / "
              f"{run['bleu']:.1f}, at step {same} {run['at_same_step']['exact_match']:.3f}",
              flush=True)
    return runs


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


if __name__ == "__main__":
    raise SystemExit(main())
