"""Chapter 10's GPU record: train the ``gpu`` configuration once and record what the chapter shows.

    python -m scripts.gpu_run OUT_DIR [--seconds S] [--deadline 520]
                                                                # on a machine with a CUDA GPU
    python -m scripts.gpu_run OUT_DIR --stages benchmarks,compile --merge book/records/gpu.json
                                                                # finish what a first call left
    python -m scripts.gpu_run OUT_DIR --dry-run                 # the same code path on a CPU, in seconds

Writes OUT_DIR/gpu.json (rewritten after every stage, so a run cut short still leaves what it
measured): the machine (GPU, torch, CUDA, date), the run (steps, seconds, tokens/s, peak
memory, the curves, the test split's exact match at every evaluation: when the run reached it),
test / longer / deeper scores with greedy and beam search, the KV cache's speed-up (and the sizes
it was timed at), four checks of the other GPU code paths: fp16 with the loss scaler (what a T4
uses), how often each training loop waits for the GPU in a step (``syncs``), resuming from a
checkpoint (the GPU's random state) and ``torch.compile``, the training
loop's speed with PyTorch's cuDNN attention off and on (``sdpa``: why training turns it off), every
benchmark of ``python -m benchmarks`` on the GPU (its rows join the CPU record on appendix A),
and chapter 11's comparison at the GPU configuration's size: the encoder–decoder against a
decoder-only model with as many parameters, the same time each (``--ch11-seconds``). With
``--variant batch_tokens=25000`` (any fields of the configuration), the ``variant`` stage also trains
the recipe with that change for ``--variant-seconds``, scoring the test split as it goes, to set beside
the main run at equal time (``variants`` in the record). Commit the
file as book/records/gpu.json; chapters 1, 10, 11 and 12 and appendix A
render it. The stages run in
the order of ``STAGES``, what the book needs most first,
and the record keeps each one's seconds (``stage_seconds``): a device call cut short by its time
limit loses only the last stages, and ``--stages ... --merge`` adds them in a second call. A stage
that raises (a device bug) is written under ``stage_errors`` and the stages after it still run.
``--deadline`` (the device call's time limit, less a margin) skips, under ``stages_skipped``, a
stage whose usual time no longer fits, so the call ends on its own instead of being killed.
Timing and the machine's description come from
``tf_tutorial.timing``. A dry run on a CPU trains the ``tiny`` configuration in bf16, runs the
quick benchmarks, and is never a record.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import time
import traceback
from pathlib import Path

import torch

from tf_tutorial._checks import require_finite_positive
from tf_tutorial.book.records import corpus_version, record_json
from tf_tutorial.timing.clock import describe_machine, timed
from tf_tutorial.timing.compare import compare_decoding, run_all
from tf_tutorial.corpus.data import CORPUS_VERSION, make_corpus
from tf_tutorial.decode import translate
from tf_tutorial.metrics import evaluate
from tf_tutorial.model import count_parameters
import tf_tutorial.train as train_module
from tf_tutorial.train import CONFIGS, GPU_SECONDS, autocast_dtype, prepare_out_dir, train

SENTENCES = ["I love China .", "the dog bites the man .", "the man bites the dog .",
             "I borrowed a book about quantum physics at the library yesterday .",
             "the library bought three hundred and five thousand books last year ."]


def curves(history: dict, points: int = 400) -> dict:
    every = max(1, len(history["loss"]) // points)
    return {"step": history["step"][::every], "loss": history["loss"][::every], "lr": history["lr"][::every],
            "eval_step": history["eval_step"], "valid_loss": history["valid_loss"],
            "valid_acc": history["valid_acc"]}


def scores(model, corpus, beam_sizes=(1, 4)) -> dict:
    out = {}
    for split in ("test", "longer", "deeper"):
        pairs = getattr(corpus, split)
        for beam in beam_sizes:
            ev, seconds = timed(lambda: evaluate(model, pairs, corpus.src_vocab, corpus.tgt_vocab,
                                                 beam_size=beam))
            wrong = [(" ".join(en), r, h) for (en, _), r, h in zip(pairs, ev["refs"], ev["hyps"]) if r != h]
            out[f"{split}_{'greedy' if beam == 1 else f'beam{beam}'}"] = {
                "n": len(pairs), "exact_match": ev["exact_match"], "bleu": ev["bleu"],
                "seconds": seconds, "by_phenomenon": ev["by_phenomenon"], "errors": wrong[:12]}
            print(split, beam, f"{ev['exact_match']:.4f}", f"{ev['bleu']:.2f}", flush=True)
    return out


def pace(history: dict) -> dict:
    """A run's steps, training seconds, target tokens, and both rates, from ``train``'s history."""
    steps, seconds = history["step"][-1], history["seconds"]
    return {"steps": steps, "train_seconds": seconds, "tokens": history["tokens"],
            "tokens_per_s": history["tokens"] / seconds, "steps_per_s": steps / seconds,
            # the part of train_seconds spent validating (the rates above include it)
            "eval_seconds": history.get("eval_seconds", 0.0)}


def test_scorer(corpus, during: list):
    """An ``on_eval`` for ``train``: scores the test split (greedy) after every evaluation and appends
    {step, train_seconds, exact_match, bleu} to ``during``: when a run reached its score."""
    def score_test(step, model, seconds):
        ev = evaluate(model, corpus.test, corpus.src_vocab, corpus.tgt_vocab)
        during.append({"step": step, "train_seconds": seconds, "exact_match": ev["exact_match"],
                       "bleu": ev["bleu"]})
        print(f"step {step}, {seconds:.0f} s: test exact match {ev['exact_match']:.4f}", flush=True)
    return score_test


def overrides(text: str) -> dict:
    """``--variant``: ``batch_tokens=25000,dropout=0`` → fields of the ``gpu`` configuration, typed as
    the configuration types them."""
    # not name, seed or n_train: the variant trains on the main run's corpus
    fields = [f.name for f in dataclasses.fields(CONFIGS["gpu"]) if f.name not in ("name", "seed", "n_train")]
    out = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, eq, value = item.partition("=")
        if not eq or name not in fields:
            raise argparse.ArgumentTypeError(f"--variant {text!r}: expected NAME=VALUE pairs, NAME one of "
                                             f"{', '.join(fields)}; got {item!r}")
        if name in out:
            raise argparse.ArgumentTypeError(f"--variant {text!r}: {name} is given twice; give each NAME once")
        now = getattr(CONFIGS["gpu"], name)
        kind = int if now is None else type(now)                # batch_tokens may be None: an int
        try:
            if kind is bool and value.lower() not in ("true", "false"):
                raise ValueError
            out[name] = (value.lower() == "true" if kind is bool
                         else None if value == "None" else kind(value))
        except ValueError:
            what = {bool: "true or false", int: "an integer", float: "a number"}[kind]
            raise argparse.ArgumentTypeError(f"--variant: {name}={value!r} is not {what}") from None
    if not out:
        raise argparse.ArgumentTypeError(f"--variant {text!r}: expected at least one NAME=VALUE")
    try:                             # refused now, not after the main run's minutes
        CONFIGS["gpu"].with_changes(**out)
    except (ValueError, TypeError) as err:
        raise argparse.ArgumentTypeError(f"--variant {text!r}: {err}") from None
    return out


def variant_run(cfg, corpus, device: str, precision: str, seconds: float, changes: dict) -> dict:
    """The ``gpu`` configuration with ``changes``, trained for ``seconds`` on the same corpus, the test
    split scored after every evaluation: set beside the main run's ``test_during_training`` at equal
    time, it says whether the change reaches a score sooner."""
    vcfg = cfg.with_changes(**changes)       # batch_size alone drops batch_tokens; TrainConfig checks
    during = []
    h = train(vcfg, corpus=corpus, device=device, precision=precision, max_seconds=seconds,
              progress=False, on_eval=test_scorer(corpus, during)).history
    return {"changes": changes, "budget_seconds": seconds, "cudnn_attention": train_module.CUDNN_ATTENTION,
            **pace(h), "test_during_training": during}


def fp16_check(cfg, device: str, corpus, steps: int = 200) -> dict:
    """The T4's path: fp16 autocast with a gradient scaler; the loss must stay finite and fall."""
    r = train(cfg, corpus=corpus, device=device, precision="fp16", max_steps=min(steps, cfg.steps), progress=False)
    loss = r.history["loss"]
    return {"steps": len(loss), "first_loss": loss[0], "last_loss": loss[-1],
            "all_finite": all(math.isfinite(x) for x in loss), "seconds": r.history["seconds"]}


def resume_check(cfg, device: str, corpus, steps: int = 40) -> dict:
    """A run stopped halfway and resumed from its checkpoint against one that never stopped: with
    dropout on, the losses agree only if the checkpoint restored the GPU's random state too."""
    import tempfile

    half = steps // 2
    straight = train(cfg, corpus=corpus, device=device, max_steps=steps, progress=False).history["loss"]
    with tempfile.TemporaryDirectory() as out:
        train(cfg, out_dir=out, corpus=corpus, device=device, max_steps=half, progress=False)
        resumed = train(cfg, out_dir=out, resume=Path(out) / "checkpoint.pt", corpus=corpus,
                        device=device, max_steps=steps, progress=False).history["loss"]
    return {"steps": steps, "resumed_at": half, "dropout": cfg.dropout,
            "max_rel_loss_gap_after_resume": max(abs(a - b) / abs(a)
                                                 for a, b in zip(straight[half:], resumed[half:]))}


def sdpa_choice(device: str, cfg, precision: str) -> str | None:
    """The backend ``F.scaled_dot_product_attention`` picks for a training-shaped call (a padding
    mask, dropout, gradients), with the flags as they are now; None where PyTorch cannot say."""
    dev = torch.device(device)
    dtype = autocast_dtype(dev, precision) or torch.float32
    d_k = cfg.d_model // cfg.n_heads
    q, k, v = (torch.randn(32, cfg.n_heads, 23, d_k, device=dev, dtype=dtype).transpose(1, 2)
               .contiguous().transpose(1, 2).requires_grad_() for _ in range(3))   # MHA's layout
    mask = torch.ones(32, 1, 1, 23, dtype=torch.bool, device=dev)
    try:
        from torch.nn.attention import SDPBackend
        return SDPBackend(torch._fused_sdp_choice(q, k, v, mask, cfg.dropout)).name
    except Exception:                # a private function: its absence is not a device bug
        return None


def sdpa_check(cfg, device: str, corpus, precision: str, steps: int = 100) -> dict:
    """Training speed with PyTorch's cuDNN attention off (what ``train`` does, see
    ``tf_tutorial.train.varying_shapes``) and on, on the same batches: on, the first time cuDNN
    meets these shapes and again once it has planned for them. The backend each run would pick
    for a training-shaped call is recorded beside it."""
    out = {"steps": steps}
    for name, allow in (("without_cudnn", False), ("cudnn_new_shapes", True),
                        ("cudnn_seen_shapes", True)):
        train_module.CUDNN_ATTENTION = allow
        backend = None
        try:
            with train_module.varying_shapes():
                backend = sdpa_choice(device, cfg, precision)
            h = train(cfg, corpus=corpus, device=device, precision=precision, max_steps=steps,
                      progress=False).history
            out[name] = {"backend": backend, "seconds": h["seconds"],
                         "steps_per_s": h["step"][-1] / h["seconds"]}
        except Exception as e:  # noqa: BLE001 - cuDNN failing is a finding; keep the other runs
            if not allow:           # without cuDNN it is what train() runs: a bug, the stage's
                raise
            out[name] = {"backend": backend, "error": f"{type(e).__name__}: {e}"[:500]}
        finally:
            train_module.CUDNN_ATTENTION = False
        print("sdpa", name, out[name], flush=True)
    return out


def compile_check(cfg, device: str, corpus, steps: int, backend: str = "inductor") -> dict:
    """``torch.compile`` against eager on the same batches: the same losses, and how long each took.

    ``compiled_seconds_with_compiling`` includes the compiling (variable batch shapes: the first
    graph, then one with symbolic lengths). Inductor draws dropout from eager's random stream
    here (``fallback_random``), so the two runs see the same masks and their losses compare.
    """
    import torch._inductor.config as inductor_config

    runs = {}
    for compiled in (False, backend):
        torch._dynamo.reset()
        with inductor_config.patch(fallback_random=True):
            r = train(cfg, corpus=corpus, device=device, compile=compiled, max_steps=steps, progress=False)
        runs[compiled] = r.history
    eager, comp = runs[False]["loss"], runs[backend]["loss"]
    return {"steps": steps, "backend": backend, "eager_seconds": runs[False]["seconds"],
            "compiled_seconds_with_compiling": runs[backend]["seconds"],
            "max_rel_loss_gap_first_20": max(abs(a - b) / abs(a) for a, b in zip(eager[:20], comp[:20])),
            "last_loss_eager": eager[-1], "last_loss_compiled": comp[-1]}


def ch11_comparison(cfg, corpus, device: str, precision: str, seconds: float) -> dict:
    """Chapter 11 at this size: the encoder–decoder (Pre-LN) and a decoder-only model whose layers hold as
    many parameters, each trained for ``seconds`` on the same batches, scored with greedy decoding."""
    from tf_tutorial.gpt import GPT, GPTConfig, GPTBlock, continuation_vocab, evaluate_continuation
    from tf_tutorial.gpt import train_continuation
    from tf_tutorial.model import Transformer

    cfg = dataclasses.replace(cfg, norm_first=True)
    ed_layers = Transformer(cfg.model_config(corpus))
    per_block = count_parameters(GPTBlock(cfg.d_model, cfg.n_heads, cfg.d_ff))
    n_layers = round((count_parameters(ed_layers.encoder) + count_parameters(ed_layers.decoder)) / per_block)
    vocab = continuation_vocab(corpus.src_vocab, corpus.tgt_vocab)
    gpt_cfg = GPTConfig(len(vocab), cfg.d_model, cfg.n_heads, n_layers, cfg.d_ff, cfg.dropout, max_len=256,
                        pad_id=vocab.pad_id, eos_id=vocab.eos_id, norm_first=True, activation="relu")
    out = {"budget_seconds": seconds, "cudnn_attention": train_module.CUDNN_ATTENTION,
           "train_config": dataclasses.asdict(cfg), "gpt_config": gpt_cfg.to_dict()}
    ed = train(cfg, corpus=corpus, device=device, precision=precision, max_seconds=seconds, progress=False)
    torch.manual_seed(cfg.seed)
    gpt = train_continuation(GPT(gpt_cfg), vocab, corpus.train, cfg, device=device, max_seconds=seconds,
                             progress=False, precision=precision)
    for name, model, hist, score in (
            ("encoder_decoder", ed.model, ed.history,
             lambda m, pairs: evaluate(m, pairs, corpus.src_vocab, corpus.tgt_vocab)),
            ("decoder_only", gpt.model, gpt.history, lambda m, pairs: evaluate_continuation(m, vocab, pairs))):
        out[name] = {"parameters": count_parameters(model), "steps": hist["step"][-1],
                     "train_seconds": hist["seconds"]}
        for split in ("test", "longer", "deeper"):
            ev = score(model, getattr(corpus, split))
            out[name][split] = {"exact_match": ev["exact_match"], "bleu": ev["bleu"]}
        print("ch11", name, out[name], flush=True)
    return out


def sync_count(run) -> int:
    """How many times ``run()`` made the host wait for the GPU, as PyTorch's sync debug mode counts them
    (each wait it knows of warns once; its documentation says not every kind is covered, and a
    non-blocking copy from pageable memory, which may still wait, is not flagged)."""
    import warnings

    before = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            run()
        finally:
            torch.cuda.set_sync_debug_mode(before)      # as it was
    return sum("synchronizing" in str(w.message) for w in caught)


def steps_run(run) -> int:
    """A stand-in for :func:`sync_count` on a CPU, where PyTorch cannot count waits: the optimiser
    steps ``run()`` took (each loop clips its gradients once a step), so a dry run checks
    :func:`sync_check`'s code path and arithmetic (1 per step)."""
    calls = 0
    clip = torch.nn.utils.clip_grad_norm_

    def counted(*args, **kwargs):
        nonlocal calls
        calls += 1
        return clip(*args, **kwargs)

    torch.nn.utils.clip_grad_norm_ = counted
    try:
        run()
    finally:
        torch.nn.utils.clip_grad_norm_ = clip
    return calls


def sync_check(cfg, device: str, corpus, precision: str, steps: tuple[int, ...] = (10, 20, 30),
               count=sync_count) -> dict:
    """Waits per training step, in chapter 10's loop (``train``) and chapter 11's
    (``train_continuation``): each loop runs each of ``steps`` (three lengths, evenly spaced) on the
    same batches, after an uncounted warm-up. With counts growing by the same amount from length to
    length (``linear``), that amount over the step difference is what a step costs, the set-up and
    the end (the losses read once, one validation) left out; a wait every few steps would break the
    line, and is then left for the raw counts to show. Not counted: the validations during training
    and the progress bar's loss (every 50 steps), which both loops run with ``progress=False``
    leaves out. 0 backs the chapters' "no wait mid-step"."""
    from tf_tutorial.gpt import GPT, GPTConfig, continuation_vocab, train_continuation

    if len(steps) != 3 or not 0 < steps[0] < steps[1] < steps[2] or 2 * steps[1] != steps[0] + steps[2]:
        raise ValueError(f"steps must be three evenly spaced step counts, smallest first, but got {steps}")
    a, b, c = steps
    cfg = dataclasses.replace(cfg, eval_every=max(cfg.eval_every, c))   # one evaluation, at the end
    vocab = continuation_vocab(corpus.src_vocab, corpus.tgt_vocab)
    gpt_cfg = GPTConfig(len(vocab), cfg.d_model, cfg.n_heads, 2, cfg.d_ff, cfg.dropout, max_len=256,
                        pad_id=vocab.pad_id, eos_id=vocab.eos_id, norm_first=True)

    def encoder_decoder(n: int) -> None:
        train(cfg, corpus=corpus, device=device, precision=precision, max_steps=n, progress=False)

    def decoder_only(n: int) -> None:
        torch.manual_seed(cfg.seed)
        train_continuation(GPT(gpt_cfg), vocab, corpus.train, dataclasses.replace(cfg, steps=n),
                           device=device, progress=False, precision=precision)

    amp = autocast_dtype(torch.device(device), precision)
    out = {"steps": [a, b, c], "precision": str(amp or torch.float32).replace("torch.", ""),
           "counted_by": ("torch.cuda.set_sync_debug_mode('warn')" if count is sync_count
                          else f"{count.__name__} (not waits: a dry run checks the code path)"),
           "not_counted": "validation during training; the progress bar's loss"}
    for name, loop in (("train", encoder_decoder), ("train_continuation", decoder_only)):
        loop(2)                                          # warm-up: the first kernels, cuBLAS
        counts = [count(lambda n=n: loop(n)) for n in (a, b, c)]
        linear = counts[1] - counts[0] == counts[2] - counts[1]
        out[name] = {"syncs": counts, "linear": linear,
                     "per_step": (counts[2] - counts[0]) / (c - a) if linear else None}
        print("syncs", name, out[name], flush=True)
    return out


STAGES = ("train", "scores", "sdpa", "variant", "kv_cache", "fp16", "syncs", "ch11", "resume", "benchmarks",
          "compile")
"""In the order they run: what the book needs most comes first, so a run cut short by the device's
time limit still leaves chapter 10's row, then whether cuDNN's attention is what slowed the first
record's training (``sdpa``), and a change of the recipe when one is asked for (``variant``);
``compile`` (minutes of compiling) comes last."""


def stage_list(text: str) -> list[str]:
    """``--stages``: a comma-separated subset of :data:`STAGES`, run in their fixed order."""
    asked = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in asked if s not in STAGES]
    if unknown or not asked:
        raise argparse.ArgumentTypeError(f"--stages {text!r}: expected names from {', '.join(STAGES)}"
                                         + (f", got {', '.join(unknown)}" if unknown else ""))
    if "scores" in asked and "train" not in asked:
        raise argparse.ArgumentTypeError("--stages: 'scores' scores the model that 'train' trains in the "
                                         "same run; ask for both")
    return [s for s in STAGES if s in asked]


def start_record(merge: Path | None, dry_run: bool, machine: dict, precision: str) -> dict:
    """A new record, or the one in ``merge`` (an earlier run on the same machine) to add stages to."""
    if merge is None:
        return {"what": "chapter 10, the gpu configuration trained once with a time budget",
                "dry_run": dry_run, "machine": machine, "precision": precision}
    if not Path(merge).is_file():
        raise SystemExit(f"--merge {merge}: no such file (the record of an earlier run, e.g. "
                         "book/records/gpu.json)")
    record = json.loads(Path(merge).read_text(encoding="utf-8"))
    if bool(record.get("dry_run")) != dry_run or record["machine"]["name"] != machine["name"]:
        raise SystemExit(f"--merge {merge}: it was measured on {record['machine']['name']!r}"
                         f"{' (dry run)' if record.get('dry_run') else ''}, this run is on {machine['name']!r}"
                         f"{' (dry run)' if dry_run else ''}; a record holds one machine")
    version = corpus_version(record)
    if "corpus" in record and version != CORPUS_VERSION:
        raise SystemExit(f"--merge {merge}: its model was trained on corpus version {version}, and this "
                         f"code generates version {CORPUS_VERSION}; a record holds one corpus: run "
                         "every stage afresh, without --merge")
    return record


def write_record(path: Path, record: dict) -> None:
    """Write the record whole or not at all: a call killed by its time limit mid-write keeps the last
    complete record (a temporary file, then an atomic rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(record_json(record), encoding="utf-8")
    os.replace(tmp, path)


def time_budget(flag: str, zero: bool = False):
    """An argparse type: a finite number of seconds, checked as the package checks its arguments
    (``require_finite_positive``); ``zero``: 0 is allowed too, and leaves its stage out."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be a number of seconds, but got {text!r}") from None
        if not (zero and value == 0):
            try:
                require_finite_positive(**{flag: value})
            except ValueError as err:
                raise argparse.ArgumentTypeError(str(err) + (" (0 leaves the stage out)" if zero else "")) from None
        return value
    return parse


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m scripts.gpu_run", description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--seconds", type=time_budget("--seconds"), default=GPU_SECONDS,
                   help=f"training time budget of the main run (default {GPU_SECONDS:g}, chapter 10's)")
    p.add_argument("--compile-steps", type=int, default=300,
                   help="steps of the compile stage, compiled and eager each (default 300)")
    p.add_argument("--ch11-seconds", type=time_budget("--ch11-seconds", zero=True), default=60.0,
                   help="training time of each model in chapter 11's comparison (0 leaves it out)")
    p.add_argument("--variant", type=overrides, default=None, metavar="NAME=VALUE,...",
                   help="the variant stage: train the gpu configuration with these changes (e.g. "
                        "batch_tokens=25000) for --variant-seconds, scoring the test split as it goes; "
                        "batch_size=N alone counts sentences (it drops the preset's batch_tokens)")
    p.add_argument("--variant-seconds", type=time_budget("--variant-seconds"), default=120.0)
    p.add_argument("--stages", type=stage_list, default=None,
                   help=f"comma-separated, from {','.join(STAGES)} (default: all, in that order; "
                        "variant only with --variant)")
    p.add_argument("--merge", type=Path, default=None,
                   help="add this run's stages to an earlier record of the same machine (e.g. "
                        "book/records/gpu.json), so a second device call can finish what the first left")
    p.add_argument("--deadline", type=time_budget("--deadline"), default=None,
                   help="seconds of wall time this call may use (the device's limit, less a margin): a stage "
                        "whose usual time no longer fits is skipped, listed under stages_skipped")
    p.add_argument("--dry-run", action="store_true", help="tiny configuration on the CPU (bf16): checks the script")
    args = p.parse_args(argv)
    began = time.monotonic()        # the device call's wall clock, not a measurement
    if args.stages is None:          # by default every stage, the variant only with --variant
        args.stages = list(STAGES)
    elif "variant" in args.stages and args.variant is None:
        p.error("--stages variant: say which change to try with --variant NAME=VALUE,...")
    stages = [s for s in args.stages if (s != "ch11" or args.ch11_seconds > 0)
              and (s != "variant" or args.variant is not None)]
    if not stages:
        p.error(f"--stages {','.join(args.stages)}: nothing left to run (--ch11-seconds 0 leaves ch11 out)")
    try:                             # a file, or a folder that cannot be written: refused before any work
        prepare_out_dir(args.out, name="out ")
    except (TypeError, ValueError) as err:
        p.error(str(err))
    if args.dry_run:
        device, name, precision = "cpu", "tiny", "bf16"
        cfg = dataclasses.replace(CONFIGS["tiny"], n_train=1500, steps=12, eval_every=6)
        corpus = make_corpus(cfg.n_train, n_valid=20, n_test=12, n_longer=4, n_deeper=4, seed=cfg.seed)
        small = corpus
        args.compile_steps = 2            # the first shape, then one recompile for the next
    else:
        if not torch.cuda.is_available():
            raise SystemExit("scripts.gpu_run needs a CUDA GPU (or --dry-run on a CPU)")
        device, name, precision, cfg = "cuda", "gpu", "auto", CONFIGS["gpu"]
        corpus = make_corpus(cfg.n_train, seed=cfg.seed) if {"train", "ch11", "variant"} & set(stages) else None
        small = make_corpus(20_000, n_valid=200, n_test=10, n_longer=5, n_deeper=5, seed=cfg.seed)
    dev = torch.device(device)
    small_cfg = dataclasses.replace(cfg, n_train=len(small.train))
    path = args.out / ("gpu.json" if not args.dry_run else "gpu-dry-run.json")
    record = start_record(args.merge, args.dry_run, describe_machine(dev),
                          str(autocast_dtype(dev, precision)).replace("torch.", ""))
    trained = {}

    def run_stage(stage: str) -> None:
        if stage == "train":         # 1. the chapter's run
            if dev.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            during = []              # the test split's score at every evaluation, greedy
            r, wall = timed(lambda: train(cfg, corpus=corpus, device=device, precision=precision,
                                          max_seconds=args.seconds, progress=False,
                                          on_eval=test_scorer(corpus, during)))
            trained["model"], h = r.model, r.history
            for stale in ("scores", "translations"):     # a merged record's, of an earlier model
                record.pop(stale, None)
            record["stages_done"] = [s for s in record.get("stages_done", []) if s != "scores"]
            record["run"] = {
                "config": dataclasses.asdict(r.config), "parameters": count_parameters(r.model),
                "budget_seconds": args.seconds, "cudnn_attention": train_module.CUDNN_ATTENTION,
                **pace(h), "wall_seconds_with_data": wall,
                "peak_memory_gb": (torch.cuda.max_memory_allocated() / 2**30 if dev.type == "cuda" else None),
                "curves": curves(h), "test_during_training": during}
            record["corpus"] = {**corpus.summary(), "src_vocab": len(corpus.src_vocab),
                                "tgt_vocab": len(corpus.tgt_vocab)}
            record["corpus_version"] = CORPUS_VERSION
        elif stage == "scores":      # 2. scores and translations of the model just trained
            if "model" not in trained:
                raise RuntimeError("no model to score: the train stage did not finish")
            model = trained["model"]
            record["scores"] = scores(model, corpus)
            record["translations"] = dict(zip(SENTENCES, translate(model, SENTENCES, corpus.src_vocab,
                                                                   corpus.tgt_vocab)))
        elif stage == "sdpa":        # 3. cuDNN's attention off and on: the training loop's speed
            record["sdpa_check"] = sdpa_check(small_cfg, device, small, precision,
                                              steps=100 if not args.dry_run else 3)
        elif stage == "variant":     # 4. the recipe with --variant's changes, the same corpus
            name = ",".join(f"{k}={v}" for k, v in args.variant.items())
            record.setdefault("variants", {})[name] = variant_run(cfg, corpus, device, precision,
                                                                  args.variant_seconds, args.variant)
        elif stage == "kv_cache":    # 5. an untrained model of the same shape, 64 tokens, no early stop
            # (a dry run checks the code path, not the speed: 16 tokens, one timing)
            sizes = {"batch": 4 if args.dry_run else 32, "tokens": 16 if args.dry_run else 64,
                     "beam_size": 4, "src_len": 20, "vocab": 1000}     # recorded: the book states them
            record["kv_cache"] = {**compare_decoding(d_model=cfg.d_model, n_heads=cfg.n_heads,
                                                     n_layers=cfg.n_layers, d_ff=cfg.d_ff, **sizes,
                                                     repeat=1 if args.dry_run else 3, device=device),
                                  "sizes": sizes}
        elif stage == "fp16":        # 6. the T4's path
            record["fp16_check"] = fp16_check(small_cfg, device, small, steps=200 if not args.dry_run else 4)
        elif stage == "syncs":       # 7. waits per training step, both loops (CUDA only)
            record["sync_check"] = (sync_check(small_cfg, device, small, precision) if not args.dry_run
                                    else sync_check(small_cfg, device, small, precision, (2, 3, 4), steps_run))
        elif stage == "ch11":        # 8. decoder-only against encoder–decoder, same parameters, same time
            record["ch11"] = ch11_comparison(cfg, corpus, device, precision, args.ch11_seconds)
        elif stage == "resume":      # 9. a checkpoint carries the GPU's random state
            record["resume_check"] = resume_check(small_cfg, device, small, steps=40 if not args.dry_run else 4)
        elif stage == "benchmarks":  # 10. every benchmark of python -m benchmarks (appendix A's GPU rows)
            record["benchmarks"] = run_all(quick=args.dry_run, device=device,
                                           repeat=1 if args.dry_run else None)
        elif stage == "compile":     # 11. torch.compile against eager on the same batches
            record["compile_check"] = compile_check(small_cfg, device, small,
                                                    min(args.compile_steps, small_cfg.steps),
                                                    backend="aot_eager" if args.dry_run else "inductor")

    # what a stage usually takes on one GPU (seconds, generous): the first H200 record
    # (2026-12-04, stage_seconds) took train: its budget + 19, scores 7, kv_cache 6, fp16 39,
    # ch11: its two budgets + 16, resume 10, benchmarks 75, compile 253; sdpa, variant and syncs
    # are not yet measured (variant: its budget, plus scoring and data, as train; syncs: eight
    # short runs of fp16's size, a warm-up and three lengths for each loop)
    needs = {"train": args.seconds + 40, "scores": 30, "kv_cache": 20, "fp16": 45, "resume": 20, "syncs": 60,
             "ch11": 2 * args.ch11_seconds + 40, "variant": args.variant_seconds + 40, "sdpa": 90,
             "benchmarks": 120, "compile": 280}
    write_record(path, record)       # the machine at least, should the first stage die hard
    for stage in stages:             # each stage is written as soon as it is done
        left = None if args.deadline is None else args.deadline - (time.monotonic() - began)
        if left is not None and needs[stage] > left:
            record.setdefault("stages_skipped", {})[stage] = (f"needs about {needs[stage]:.0f} s, "
                                                              f"{left:.0f} s were left")
            write_record(path, record)
            print(f"[{stage}] skipped: {record['stages_skipped'][stage]}", flush=True)
            continue
        record.get("stages_skipped", {}).pop(stage, None)
        try:
            _, seconds = timed(lambda: run_stage(stage))
        except Exception as err:     # one device call is precious: record the bug, run the rest
            traceback.print_exc()
            record.setdefault("stage_errors", {})[stage] = f"{type(err).__name__}: {err}"[:2000]
            said = "FAILED"
        else:
            record.get("stage_errors", {}).pop(stage, None)
            record["stages_done"] = [s for s in STAGES if s in record.get("stages_done", []) or s == stage]
            record.setdefault("stage_seconds", {})[stage] = round(seconds, 1)
            said = f"{seconds:.0f} s"
        write_record(path, record)
        print(f"[{stage}] {said}, written {path}", flush=True)
    print(json.dumps({k: v for k, v in record.items() if k not in ("run", "scores")}, ensure_ascii=False)[:3000])
    return record


if __name__ == "__main__":
    raise SystemExit(1 if main().get("stage_errors") else 0)   # a failed stage shows in the exit status
