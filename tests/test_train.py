"""Training: schedule, a run that learns, resume, checkpoints, the command line, DDP on CPU."""
import dataclasses
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from tf_tutorial.corpus.data import make_corpus
from torch import nn

from tf_tutorial.model import Transformer, TransformerConfig
from tf_tutorial.train import (CONFIGS, CheckpointError, autocast_dtype, load_checkpoint, noam_lr,
                               pick_device, save_checkpoint, smoothed_target, smoothing_floor,
                               train, train_step)

TINY = dataclasses.replace(CONFIGS["tiny"], steps=40, warmup=10, eval_every=20, n_train=1500)


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(n_train=1500, n_valid=100, n_test=50, n_longer=5, n_deeper=5, seed=0)


def test_noam_schedule_peaks_at_warmup():
    lrs = [noam_lr(s, 512, 4000) for s in range(1, 20001)]
    assert max(range(len(lrs)), key=lrs.__getitem__) + 1 == 4000
    assert lrs[3999] == pytest.approx(512 ** -0.5 * 4000 ** -0.5)
    assert lrs[15999] == pytest.approx(lrs[3999] / 2)        # 1/sqrt(step) decay: 4x steps, half the lr


def test_device_and_precision_choice():
    assert pick_device("cpu").type == "cpu"
    assert autocast_dtype(torch.device("cpu")) is None
    assert autocast_dtype(torch.device("cpu"), "bf16") is torch.bfloat16      # asked for: the GPU path on a CPU
    assert autocast_dtype(torch.device("cpu"), "fp16") is torch.float16
    assert autocast_dtype("cpu", "bf16") is torch.bfloat16    # a device name
    assert autocast_dtype("cpu") is None
    with pytest.raises(ValueError, match="precision must be one of"):
        autocast_dtype(torch.device("cpu"), "fp8")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA GPU is available"):
            pick_device("cuda")
    assert pick_device(torch.device("cpu")) == torch.device("cpu")
    for bad in ("tpu", "gpu", 3.5):      # torch's own message lists 20-odd backends
        with pytest.raises(ValueError, match=f"^device must be 'auto', 'cpu', 'cuda', 'cuda:N' or another torch "
                                             f"device, but got {bad!r}$"):
            pick_device(bad)


def test_a_cuda_device_that_is_not_there_is_named(monkeypatch):
    """'cuda:0' without a GPU, or 'cuda:1' on a one-GPU machine, used to pass pick_device and fail
    later inside .to() with torch's 'Torch not compiled with CUDA enabled'."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for asked in ("cuda", "cuda:0", torch.device("cuda", 1)):
        with pytest.raises(ValueError, match=r"^device 'cuda(:\d)?' was asked for, but no CUDA GPU is available$"):
            pick_device(asked)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert pick_device("cuda:0") == torch.device("cuda", 0)
    assert pick_device("cuda") == torch.device("cuda")
    with pytest.raises(ValueError, match=r"^device 'cuda:1' was asked for, but this machine has 1 CUDA GPU\(s\): "
                                         r"cuda:0 to cuda:0$"):
        pick_device("cuda:1")


def test_a_tiny_run_learns_and_records_curves(corpus):
    r = train(TINY, corpus=corpus, progress=False)
    h = r.history
    assert h["step"] == list(range(1, 41)) and h["eval_step"] == [20, 40]
    assert sum(h["loss"][-5:]) / 5 < sum(h["loss"][:5]) / 5 - 1.0
    assert h["valid_loss"][-1] < h["valid_loss"][0]
    assert h["lr"][9] == pytest.approx(noam_lr(10, TINY.d_model, TINY.warmup))


def test_resume_continues_the_same_loss_curve(corpus, tmp_path):
    whole = train(TINY, corpus=corpus, progress=False).history
    straight = whole["loss"]
    train(TINY, out_dir=tmp_path, corpus=corpus, progress=False, max_steps=23)
    assert load_checkpoint(tmp_path / "checkpoint.pt")["step"] == 23
    resumed = train(TINY, out_dir=tmp_path, resume=tmp_path / "checkpoint.pt", corpus=corpus, progress=False)
    assert len(resumed.history["loss"]) == 40
    assert resumed.history["loss"] == pytest.approx(straight, rel=1e-5)
    assert resumed.history["lr"] == whole["lr"]          # the same schedule: the very same rates


def test_resume_trains_on_the_checkpoints_corpus_and_refuses_another(corpus, tmp_path):
    """The fixture's corpus has seed 0 and TINY a seed of its own: resuming without a corpus rebuilt
    make_corpus(n_train, seed=cfg.seed), another train/test split with the same words, silently."""
    cfg = TINY.with_changes(seed=5, steps=4, eval_every=2)
    train(cfg, out_dir=tmp_path, corpus=corpus, progress=False, max_steps=2)
    saved = load_checkpoint(tmp_path)["corpus"]
    assert {k: saved[k] for k in corpus.identity()} == corpus.identity()
    assert (saved["seed"], saved["n_train"], saved["n_longer"], saved["n_deeper"]) == (0, 1500, 5, 5)
    resumed = train(cfg, out_dir=tmp_path, resume=tmp_path, progress=False)   # no corpus given
    assert resumed.corpus.train == corpus.train and resumed.corpus.test == corpus.test
    other = make_corpus(n_train=1500, n_valid=100, n_test=50, n_longer=5, n_deeper=5, seed=5)
    train(cfg.with_changes(steps=2), out_dir=tmp_path / "b", corpus=corpus, progress=False)
    with pytest.raises(CheckpointError, match=r"^resume: checkpoint .* was trained on another corpus \(seed 0, "
                                              r"1500/100/50 train/valid/test pairs, corpus version \d+\) than the "
                                              r"one given \(seed 5, 1500/100/50 "):
        train(cfg, resume=tmp_path / "b", corpus=other, progress=False)
    # sentences make_corpus does not draw from the record: a hand-built corpus, or another version
    state = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)
    state["corpus"]["sha256"] = "0" * 64
    torch.save(state, tmp_path / "b" / "checkpoint.pt")
    with pytest.raises(CheckpointError, match=r"than the one make_corpus draws from that record: a corpus "
                                              r"built by hand\? Pass it as corpus=$"):
        train(cfg, resume=tmp_path / "b", progress=False)
    state["corpus"]["version"] -= 1
    torch.save(state, tmp_path / "b" / "checkpoint.pt")
    with pytest.raises(CheckpointError, match=r"than the one this package draws from that record today "
                                              r"\(corpus version \d+: its sentences differ\)$"):
        train(cfg, resume=tmp_path / "b", progress=False)
    # a checkpoint from before the record: its vocabularies are compared, given or rebuilt
    del state["corpus"]
    state["src_itos"] = state["src_itos"][:-1]
    torch.save(state, tmp_path / "b" / "checkpoint.pt")
    with pytest.raises(CheckpointError, match=r"was trained with other vocabularies than the corpus given$"):
        train(cfg, resume=tmp_path / "b", corpus=corpus, progress=False)
    with pytest.raises(CheckpointError, match=r"other vocabularies than the corpus rebuilt for it$"):
        train(cfg, resume=tmp_path / "b", progress=False)
    # the record's sentences, but vocabularies from more of them (a split cut by hand): refused by name,
    # not by the embedding's size mismatch
    cut = dataclasses.replace(corpus, train=corpus.train[:500])      # vocabulary of all 1500
    train(cfg.with_changes(steps=2, n_train=500), out_dir=tmp_path / "c", corpus=cut, progress=False)
    with pytest.raises(CheckpointError, match=r"other vocabularies than the corpus rebuilt for it$"):
        train(cfg.with_changes(steps=4, n_train=500), resume=tmp_path / "c", progress=False)


def test_on_eval_sees_every_evaluation_and_its_time_is_not_training_time(corpus, monkeypatch):
    import tf_tutorial.train as train_module
    clock = [0.0]                      # a clock that only on_eval moves: training takes no time
    monkeypatch.setattr(train_module.time, "perf_counter", lambda: clock[0])
    calls = []

    def on_eval(step, model, seconds):
        assert isinstance(model, Transformer) and not model.training   # right after validation
        calls.append((step, seconds))
        clock[0] += 100.0              # scoring the test split takes 100 s
    cfg = dataclasses.replace(TINY, eval_every=5)
    h = train(cfg, corpus=corpus, progress=False, max_seconds=50, on_eval=on_eval).history
    # the 100 s after each evaluation neither ends the 50 s budget nor counts as training
    assert calls == [(s, 0.0) for s in range(5, 41, 5)] and h["step"][-1] == 40
    assert h["seconds"] == 0.0
    with pytest.raises(TypeError, match="^on_eval must be a function .* but got int$"):
        train(cfg, corpus=corpus, progress=False, on_eval=3)


def test_the_time_spent_validating_is_counted_apart(corpus, monkeypatch):
    """seconds includes the validation passes; eval_seconds says how much of it they took, so a
    timing of the steps alone (scripts/calibrate_ch11.py) can take them out."""
    import tf_tutorial.train as train_module
    clock = [0.0]                      # a clock that only validation moves
    monkeypatch.setattr(train_module.time, "perf_counter", lambda: clock[0])
    real_validate = train_module.validate

    def slow_validate(*args, **kwargs):
        clock[0] += 7.0
        return real_validate(*args, **kwargs)
    monkeypatch.setattr(train_module, "validate", slow_validate)
    h = train(dataclasses.replace(TINY, eval_every=10**6), corpus=corpus, progress=False,
              max_steps=6).history
    assert h["eval_step"] == [6]                            # the one pass at the last step
    assert h["eval_seconds"] == 7.0 and h["seconds"] == 7.0


def test_on_a_gpu_the_checkpoint_also_keeps_the_gpus_random_state(monkeypatch):
    # dropout on a GPU draws from the GPU's generator: without its state a resumed run
    # would reuse the dropout masks of steps 1, 2, 3, ... (no GPU here: the calls are spied)
    import tf_tutorial.train as train_module
    gpu = torch.device("cuda", 1)
    saved_gpu_state = torch.tensor([7, 7, 7], dtype=torch.uint8)
    calls = []
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda d: calls.append(("get", d)) or saved_gpu_state)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda s, d: calls.append(("set", s, d)))
    state = train_module._rng_state(gpu)
    assert set(state) == {"rng", "cuda_rng"} and state["cuda_rng"] is saved_gpu_state
    torch.manual_seed(1)
    train_module._restore_rng(state, gpu)
    assert torch.equal(torch.get_rng_state(), state["rng"])          # the CPU's, restored too
    assert calls == [("get", gpu), ("set", saved_gpu_state, gpu)]
    calls.clear()
    cpu_state = train_module._rng_state(torch.device("cpu"))
    assert set(cpu_state) == {"rng"} and calls == []
    train_module._restore_rng(cpu_state, gpu)        # a CPU checkpoint resumed on a GPU
    assert calls == []


@pytest.mark.parametrize("device, backend", [("cpu", "gloo"), ("cuda", "nccl")])
def test_under_torchrun_each_gpu_process_uses_its_own_gpu(monkeypatch, device, backend):
    # NCCL puts a collective's buffers on the current GPU: it must be this process's
    import tf_tutorial.train as train_module
    dist = train_module.dist
    joined, current = [], []
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(dist, "is_initialized", lambda: bool(joined))
    monkeypatch.setattr(dist, "init_process_group", joined.append)
    monkeypatch.setattr(dist, "get_rank", lambda: 1)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", current.append)
    rank, world, dev = train_module._distributed(torch.device(device))
    assert joined == [backend] and (rank, world) == (1, 2)
    want = torch.device("cuda", 1) if device == "cuda" else torch.device("cpu")
    assert dev == want and current == ([want] if device == "cuda" else [])


@pytest.mark.parametrize("limits, message", [
    (dict(max_steps=0), "^max_steps must be a positive integer, but got 0$"),       # 0 once meant no limit
    (dict(max_steps=-1), "^max_steps must be a positive integer, but got -1$"),
    (dict(max_steps=2.5), "^max_steps must be a positive integer, but got 2.5$"),
    (dict(max_seconds=0), "^max_seconds must be positive, but got 0$"),
    (dict(max_seconds=float("nan")), "but got nan$"),
    (dict(max_seconds="60"), "but got '60'$"),
])
def test_train_refuses_limits_it_would_ignore(corpus, limits, message, monkeypatch):
    import tf_tutorial.train as train_module
    monkeypatch.setattr(train_module, "train_step", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(ValueError, match=message):
        train(TINY, corpus=corpus, progress=False, **limits)


@pytest.mark.parametrize("bad, message", [
    (dict(lr_scale=0), "^lr_scale must be positive, but got 0$"),
    (dict(lr_scale=float("nan")), "^lr_scale must be positive, but got nan$"),
    (dict(lr_scale=float("inf")), "^lr_scale must be finite, but got inf$"),
    (dict(clip=float("nan")), "^clip must be positive, but got nan$"),
    (dict(clip=-1.0), "^clip must be positive, but got -1.0$"),
    (dict(label_smoothing=1.0), r"^label_smoothing must be in \[0, 1\), but got 1.0$"),
    (dict(label_smoothing=float("nan")), r"^label_smoothing must be in \[0, 1\), but got nan$"),
    (dict(d_model=30, n_heads=4), "^d_model=30 is not divisible by n_heads=4$"),
    (dict(dropout=1.5), r"^dropout must be in \[0, 1\), but got 1.5$"),     # when configured, not at the model
    (dict(d_model=0), "d_model"),
    # these two used to pass here and fail only inside train()
    (dict(seed=1.5), "^seed must be an integer, but got 1.5$"),
    (dict(seed="0"), "^seed must be an integer, but got '0'$"),
    # torch.manual_seed's range: 2**70 used to fail inside train() naming no argument
    (dict(seed=2**70), r"^seed must be in \[-2\*\*63, 2\*\*64\), but got 1180591620717411303424$"),
])
def test_a_bad_training_configuration_is_refused_when_made(bad, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(TINY, **bad)


def test_numpy_integers_in_a_training_configuration_are_kept_as_plain_ints():
    # they are accepted; kept as np.int64 they made the config fail to save
    # as JSON (the records) and print unlike one written by hand
    import numpy as np
    cfg = dataclasses.replace(TINY, seed=np.int64(3), steps=np.int32(4), batch_tokens=np.int64(500))
    assert [type(v) for v in (cfg.seed, cfg.steps, cfg.batch_tokens)] == [int, int, int]
    assert json.loads(json.dumps(dataclasses.asdict(cfg)))["seed"] == 3
    assert cfg == dataclasses.replace(TINY, seed=3, steps=4, batch_tokens=500)


def test_numpy_floats_and_bools_in_any_configuration_save_in_a_readable_checkpoint(corpus, tmp_path):
    """A grid over np.linspace trained and saved, but the checkpoint held NumPy scalars, which
    load_checkpoint (weights_only=True) refused: --resume and load_translator could not use it."""
    import numpy as np
    from tf_tutorial.gpt import GPTConfig
    cfg = TINY.with_changes(lr_scale=np.float64(0.5), clip=np.float32(2.0), dropout=np.float64(0.1),
                            label_smoothing=np.float64(0.05), norm_first=np.bool_(True), steps=2)
    values = dataclasses.astuple(cfg)
    assert not any(isinstance(v, np.generic) for v in values)
    assert (cfg.lr_scale, cfg.clip, cfg.norm_first) == (0.5, 2.0, True)
    json.dumps(dataclasses.asdict(cfg))                      # np.float32 was not JSON serialisable
    train(cfg, out_dir=tmp_path, corpus=corpus, progress=False)
    state = load_checkpoint(tmp_path, cfg)                    # was: Unsupported global numpy...scalar
    assert state["train_config"]["lr_scale"] == 0.5 and type(state["model_config"]["dropout"]) is float
    for config in (TransformerConfig(9, 9, dropout=np.float64(0.2), tie_output=np.bool_(False)),
                   GPTConfig(vocab_size=9, dropout=np.float64(0.2), eps=np.float32(1e-5),
                             rope_base=np.float64(500.0))):
        assert not any(isinstance(v, np.generic) for v in dataclasses.astuple(config)), config


def test_fractions_in_a_configuration_save_in_a_readable_checkpoint(corpus, tmp_path):
    """Fraction(1, 2) passed every check and trained, but the checkpoint held it, and load_checkpoint
    (weights_only=True) refused it: stored as a float, like a NumPy number."""
    from fractions import Fraction

    from tf_tutorial.gpt import GPTConfig
    cfg = TINY.with_changes(lr_scale=Fraction(1, 2), clip=Fraction(3, 2), steps=2)
    assert (cfg.lr_scale, cfg.clip) == (0.5, 1.5) and type(cfg.lr_scale) is float
    train(cfg, out_dir=tmp_path, corpus=corpus, progress=False)
    assert load_checkpoint(tmp_path, cfg)["train_config"]["lr_scale"] == 0.5
    assert type(TransformerConfig(9, 9, dropout=Fraction(1, 5)).dropout) is float
    assert type(GPTConfig(vocab_size=9, rope_base=Fraction(500)).rope_base) is float
    assert TINY.with_changes(norm_first=True).norm_first is True          # bools stay bools


def test_norm_first_must_be_a_flag_when_the_configuration_is_made():
    # "no" is a non-empty string: it used to reach the model and mean True
    with pytest.raises(TypeError, match="^norm_first must be True or False, but got 'no'$"):
        dataclasses.replace(TINY, norm_first="no")


def test_a_token_budget_too_small_for_a_sentence_is_refused_before_training(corpus, monkeypatch):
    import tf_tutorial.train as train_module
    monkeypatch.setattr(train_module, "train_step", lambda *a, **k: pytest.fail("trained"))
    longest = max(max(len(en) + 1, len(zh) + 2) for en, zh in corpus.train)     # <eos>; <bos> and <eos>
    with pytest.raises(ValueError, match=rf"^batch_tokens=10 \(--batch-tokens\) cannot hold the longest "
                                         rf"training sentence \({longest} tokens\)$"):
        train(dataclasses.replace(TINY, batch_tokens=10), corpus=corpus, progress=False)


def test_resume_takes_the_runs_folder_as_well_as_the_file(corpus, tmp_path):
    train(TINY, out_dir=tmp_path, corpus=corpus, progress=False, max_steps=3)
    assert load_checkpoint(tmp_path)["step"] == 3
    r = train(TINY, resume=tmp_path, corpus=corpus, progress=False, max_steps=5)
    assert r.history["step"] == [1, 2, 3, 4, 5]


def test_a_resumed_runs_time_budget_counts_from_zero(corpus, tmp_path, monkeypatch):
    """max_seconds limits this call's training time, not the checkpoint's total."""
    import tf_tutorial.train as train_module
    clock = [0.0]                                    # each reading of the clock is 1 s later
    monkeypatch.setattr(train_module.time, "perf_counter", lambda: clock.__setitem__(0, clock[0] + 1) or clock[0])
    # a budget is read once a step: 10 steps take at least 10 "seconds"
    train(TINY, out_dir=tmp_path, corpus=corpus, progress=False, max_steps=10, max_seconds=1e9)
    first = load_checkpoint(tmp_path)["history"]["seconds"]
    r = train(TINY, resume=tmp_path, corpus=corpus, progress=False, max_seconds=first / 2)
    # already past first / 2 in total, yet the resumed run trains: its own budget starts at 0
    assert first >= 10 and 10 < r.history["step"][-1] < 40
    assert r.history["seconds"] > first


def test_with_changes_counts_sentences_when_only_batch_size_is_given():
    gpu = CONFIGS["gpu"]
    assert gpu.batch_tokens is not None                   # the preset counts tokens
    assert gpu.with_changes(batch_size=512).batch_tokens is None
    assert gpu.with_changes(batch_size=512, batch_tokens=3000).batch_tokens == 3000
    assert gpu.with_changes(steps=5) == dataclasses.replace(gpu, steps=5)
    with pytest.raises(ValueError, match="^batch_size must be a positive integer"):
        gpu.with_changes(batch_size=0)


def test_train_creates_a_missing_out_dir(corpus, tmp_path):
    out = tmp_path / "runs" / "tiny"                 # neither folder exists yet
    train(TINY, out_dir=out, corpus=corpus, progress=False, max_steps=2)
    assert load_checkpoint(out / "checkpoint.pt")["step"] == 2


def test_train_refuses_a_bad_out_dir_before_the_first_step(corpus, tmp_path, monkeypatch):
    import tf_tutorial.train as train_module
    steps = []
    monkeypatch.setattr(train_module, "train_step", lambda *a, **k: steps.append(1))
    afile = tmp_path / "a-file"
    afile.write_text("")
    with pytest.raises(ValueError, match=f"^out_dir={re.escape(str(afile))}: not a directory$"):
        train(TINY, out_dir=afile, corpus=corpus, progress=False, max_steps=2)
    with pytest.raises(ValueError, match="^out_dir='': expected a directory, but got an empty path$"):
        train(TINY, out_dir="", corpus=corpus, progress=False, max_steps=2)      # was the cwd
    with pytest.raises(ValueError,       # names the file in the way (mkdir said "Not a directory")
                       match=f"^out_dir={re.escape(str(afile / 'sub'))}: {re.escape(str(afile))} is a file, "
                             "not a directory$"):
        train(TINY, out_dir=afile / "sub", corpus=corpus, progress=False, max_steps=2)
    assert steps == []                               # no training time was spent


def test_checkpoint_errors(corpus, tmp_path):
    train(TINY, out_dir=tmp_path, corpus=corpus, progress=False, max_steps=2)
    other = dataclasses.replace(TINY, d_model=48)
    with pytest.raises(CheckpointError, match=r"from another configuration: d_model=32 \(this run: 48\)"):
        train(other, resume=tmp_path / "checkpoint.pt", corpus=corpus, progress=False)
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(bad)
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"empty\.pt is not a readable checkpoint \(the file ends too "
                                              r"early: empty or cut short\)$"):
        load_checkpoint(tmp_path / "empty.pt")
    with pytest.raises(FileNotFoundError, match="does not exist"):   # a CheckpointError too
        load_checkpoint(tmp_path / "nowhere.pt")
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")


def test_a_long_load_error_is_cut_at_a_word(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise RuntimeError("word " * 40 + "\nsecond line")
    monkeypatch.setattr(torch, "load", refuse)
    (tmp_path / "x.pt").write_bytes(b"x")
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(tmp_path / "x.pt")
    reason = str(info.value).split("(torch.load: RuntimeError: ", 1)[1]
    assert reason.endswith("word …)") and len(reason) <= 125 and "second" not in reason


class _RunsCodeWhenUnpickled:
    """Unpickling it calls ``Path.touch``: what a malicious checkpoint could do."""
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (self.marker,)


def test_reading_a_checkpoint_runs_no_code_from_the_file(corpus, tmp_path):
    train(TINY, out_dir=tmp_path, corpus=corpus, progress=False, max_steps=1)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)  # what training wrote
    marker = tmp_path / "code-ran"
    state["history"]["note"] = _RunsCodeWhenUnpickled(marker)
    torch.save(state, tmp_path / "tampered.pt")
    with pytest.raises(CheckpointError, match=r"not a readable checkpoint \(.*torch\.load\(weights_only=True\): "
                                              r"Unsupported global: GLOBAL \S+ was not an allowed "
                                              r"global by default\)$"):
        load_checkpoint(tmp_path / "tampered.pt")
    assert not marker.exists()
    torch.load(tmp_path / "tampered.pt", weights_only=False)  # the danger is real: the test can fail
    assert marker.exists()


def test_a_failed_save_keeps_the_old_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, step=1)

    def broken_save(obj, f):
        with open(f, "wb") as fh:
            fh.write(b"half")
        raise OSError("disk full")
    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, step=2)
    monkeypatch.undo()
    assert torch.load(path, weights_only=True)["step"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tf_tutorial.train", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


@pytest.mark.parametrize("args, message", [
    (["--config", "huge"], "argument --config: invalid choice: 'huge'"),
    (["--out", "/etc/hostname"], "--out /etc/hostname: not a directory"),
    (["--max-seconds", "0"], "--max-seconds must be positive, but got 0.0"),
    (["--max-seconds", "nan"], "--max-seconds must be positive, but got nan"),   # nan <= 0 is False
    (["--steps", "0"], "--steps must be a positive integer, but got 0"),
    (["--out", ""], "argument --out: expected a path, but got an empty string"),    # was the cwd
    (["--resume", " "], "argument --resume: expected a path, but got an empty string"),
])
def test_cli_user_errors_are_one_line_exit_2(args, message, capsys):
    from tf_tutorial.train import main
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_cli_unwritable_out_dir(capsys):
    from tf_tutorial.train import main
    try:
        tempfile.TemporaryFile(dir="/sys").close()
        pytest.skip("/sys is writable here")
    except OSError:
        pass
    with pytest.raises(SystemExit) as exit_info:
        main(["--out", "/sys"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().startswith(
        "python -m tf_tutorial.train: error: --out /sys: directory is not writable")


def test_cli_a_failed_run_leaves_no_folder_it_created(tmp_path, capsys):
    from tf_tutorial.train import main
    if torch.cuda.is_available():
        pytest.skip("the failure used here is asking for a GPU on a machine without one")
    kept = tmp_path / "kept"
    kept.mkdir()
    for out in (tmp_path / "new" / "run", kept / "run"):
        with pytest.raises(SystemExit) as exit_info:
            main(["--config", "tiny", "--device", "cuda", "--out", str(out), "--no-progress"])
        assert exit_info.value.code == 2 and "no CUDA GPU" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"] and not any(kept.iterdir())
    (kept / "notes.txt").write_text("mine")                 # files in the folder are never removed
    with pytest.raises(SystemExit):
        main(["--config", "tiny", "--device", "cuda", "--out", str(kept), "--no-progress"])
    assert (kept / "notes.txt").read_text() == "mine"


def test_cli_trains_saves_and_rejects_a_wrong_checkpoint(tmp_path):
    r = _cli("--config", "tiny", "--steps", "5", "--out", str(tmp_path), "--no-progress")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 5 and summary["config"] == "tiny" and 0 <= summary["test_exact_match"] <= 1
    assert summary["precision"] == "fp32"                      # what the run used, recorded
    assert summary["planned_steps"] == 5                       # a time budget would show as fewer steps
    assert summary["bleu_signature"].startswith("nrefs:1|") and "tok:zh" in summary["bleu_signature"]
    assert json.loads((tmp_path / "results.json").read_text()) == summary
    r = _cli("--resume", str(tmp_path), "--steps", "6", "--no-progress")    # the run's folder
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["steps"] == 6
    assert load_checkpoint(tmp_path / "checkpoint.pt")["step"] == 6
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    state["model"]["src_embed.table.weight"] = torch.zeros(3, 3)
    state["train_config"]["d_model"] = 32
    torch.save(state, tmp_path / "wrong.pt")
    # resumed without --out, it would save as checkpoint.pt beside itself: over the good one
    r = _cli("--config", "tiny", "--resume", str(tmp_path / "wrong.pt"), "--steps", "7", "--no-progress")
    assert r.returncode == 2 and "already holds a checkpoint" in r.stderr
    r = _cli("--config", "tiny", "--resume", str(tmp_path / "wrong.pt"), "--steps", "7", "--no-progress",
             "--out", str(tmp_path / "elsewhere"))
    assert r.returncode == 2 and "does not fit this model" in r.stderr and "Traceback" not in r.stderr
    assert "size mismatch for src_embed.table.weight" in r.stderr     # not only PyTorch's header line
    assert len(r.stderr.strip().splitlines()) == 1
    assert load_checkpoint(tmp_path / "checkpoint.pt")["step"] == 6


def test_ddp_two_cpu_processes_end_with_identical_weights(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                        "-m", "tf_tutorial.train", "--config", "tiny", "--steps", "6", "--device", "cpu",
                        "--out", str(tmp_path), "--no-progress"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    history = torch.load(tmp_path / "checkpoint.pt", weights_only=False)["history"]
    a, b = history["rank_checksums"]
    assert a == b and history["step"][-1] == 6


# --- the training step, and the GPU's code paths exercised on the CPU ---------------------------

TINY_MODEL = TransformerConfig(30, 25, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0, max_len=32)


def _setup(device="cpu", seed=0):
    torch.manual_seed(seed)
    model = Transformer(TINY_MODEL).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: noam_lr(s + 1, 16, 10))
    return model, opt, sched


def _batch(device="cpu"):
    torch.manual_seed(1)
    src, tgt = torch.randint(4, 30, (3, 7)), torch.randint(4, 25, (3, 6))
    tgt[:, 0] = 1
    src[1, 5:] = 0
    tgt[2, 4:] = 0
    return src.to(device), tgt.to(device)


LOSS = nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1)


def test_train_step_is_teacher_forcing_with_a_smoothed_loss_that_ignores_padding():
    model, opt, sched = _setup()
    src, tgt = _batch()
    with torch.no_grad():
        logits = model.train()(src, tgt[:, :-1])
    keep = tgt[:, 1:] != 0
    V, eps = logits.shape[-1], 0.1
    logp = logits.log_softmax(-1)[keep]                                   # real target positions only
    q = torch.full_like(logp, eps / V).scatter(1, tgt[:, 1:][keep][:, None], 1 - eps + eps / V)
    by_hand = -(q * logp).sum(-1).mean()
    before = [p.detach().clone() for p in model.parameters()]
    lr0 = opt.param_groups[0]["lr"]
    loss = train_step(model, src, tgt, opt, sched, LOSS, torch.amp.GradScaler("cpu", enabled=False))
    assert loss.item() == pytest.approx(by_hand.item(), rel=1e-5)
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert opt.param_groups[0]["lr"] == pytest.approx(noam_lr(2, 16, 10)) != lr0


def test_a_float64_model_gets_a_float64_loss():
    """The loss went through logits.float(): a float64 model (gradchecks, exact comparisons)
    got a float32 loss and float32-rounded gradients."""
    model, opt, sched = _setup()
    model.double()
    src, tgt = _batch()
    with torch.no_grad():
        exact = LOSS(model.train()(src, tgt[:, :-1]).flatten(0, 1), tgt[:, 1:].flatten())
    loss = train_step(model, src, tgt, opt, sched, LOSS, torch.amp.GradScaler("cpu", enabled=False))
    assert loss.dtype == torch.float64 and abs(loss.item() - exact.item()) < 1e-12


def test_train_step_clips_the_gradient_norm():
    model, opt, sched = _setup()
    src, tgt = _batch()
    norms = []
    original = nn.utils.clip_grad_norm_

    def spy(params, max_norm):
        params = list(params)
        total = original(params, max_norm)
        norms.append((total.item(), torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params])).item()))
        return total
    nn.utils.clip_grad_norm_, saved = spy, nn.utils.clip_grad_norm_
    try:
        train_step(model, src, tgt, opt, sched, LOSS, torch.amp.GradScaler("cpu", enabled=False), clip=0.01)
    finally:
        nn.utils.clip_grad_norm_ = saved
    before, after = norms[0]
    assert before > 0.01 and after == pytest.approx(0.01, rel=1e-4)


def test_bf16_autocast_step_on_the_cpu():
    model, opt, sched = _setup()
    src, tgt = _batch()
    seen = []
    handle = model.out.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    loss = train_step(model, src, tgt, opt, sched, LOSS, torch.amp.GradScaler("cpu", enabled=False),
                      amp=torch.bfloat16)
    handle.remove()
    assert seen == [torch.bfloat16] and loss.dtype == torch.float32 and torch.isfinite(loss)
    assert all(p.dtype == torch.float32 for p in model.parameters())       # master weights stay fp32
    ref_model, ref_opt, ref_sched = _setup()
    ref = train_step(ref_model, src, tgt, ref_opt, ref_sched, LOSS, torch.amp.GradScaler("cpu", enabled=False))
    assert loss.item() == pytest.approx(ref.item(), rel=2e-2) and loss.item() != ref.item()


def test_fp16_step_with_the_loss_scaler_on_the_cpu():
    model, opt, sched = _setup()
    src, tgt = _batch()
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10)
    seen = []
    handle = model.out.weight.register_hook(lambda g: seen.append(g.abs().max().item()))
    losses = [train_step(model, src, tgt, opt, sched, LOSS, scaler, amp=torch.float16, clip=1e9).item()]
    handle.remove()
    # backward saw the gradient scaled up; the optimizer got it divided back down
    assert seen[0] / model.out.weight.grad.abs().max().item() == pytest.approx(2.0 ** 10, rel=1e-3)
    losses += [train_step(model, src, tgt, opt, sched, LOSS, scaler, amp=torch.float16).item() for _ in range(4)]
    assert all(map(math.isfinite, losses)) and losses[-1] < losses[0]
    assert scaler.get_scale() == 2.0 ** 10                                 # no overflow: the scale held


def test_a_compiled_step_has_no_graph_break_and_the_same_loss():
    model, opt, sched = _setup()
    src, tgt = _batch()
    eager = train_step(model, src, tgt, opt, sched, LOSS, torch.amp.GradScaler("cpu", enabled=False))
    torch._dynamo.reset()
    model2, opt2, sched2 = _setup()
    compiled = torch.compile(model2, backend="aot_eager", fullgraph=True)     # fullgraph: a graph break fails
    loss = train_step(model2, src, tgt, opt2, sched2, LOSS, torch.amp.GradScaler("cpu", enabled=False),
                      forward=compiled)
    assert loss.item() == pytest.approx(eager.item(), rel=1e-6)
    for a, b in zip(model.parameters(), model2.parameters()):
        assert torch.allclose(a, b, atol=1e-6)


def test_no_tensor_is_made_on_the_wrong_device():
    """On the meta device any tensor created on the CPU by mistake (a mask, a position index)
    raises "Tensor on device cpu is not on the expected device meta": the GPU's failure, caught here."""
    model, opt, sched = _setup("meta")
    src, tgt = _batch("meta")
    loss = train_step(model, src, tgt, opt, sched, LOSS, torch.amp.GradScaler("cpu", enabled=False))
    assert loss.device.type == "meta"
    model.eval()
    memory, src_mask = model.encode(src)
    cache = model.new_cache()
    for _ in range(3):
        logits = model.decode(torch.ones(3, 1, dtype=torch.long, device="meta"), memory, src_mask, cache=cache)
    cache.reorder(torch.tensor([2, 0, 0], device="meta"))
    logits = model.decode(tgt[:, :2], memory, src_mask, cache=cache)
    assert logits.device.type == "meta" and logits.shape == (3, 2, 25) and cache.length == 5
    _, maps = model.decode(tgt, memory, src_mask, return_weights=True)
    assert maps["cross"][0].device.type == "meta"


def test_a_run_in_bf16_learns(corpus):
    r = train(TINY, corpus=corpus, progress=False, precision="bf16")
    h = r.history
    assert sum(h["loss"][-5:]) / 5 < sum(h["loss"][:5]) / 5 - 1.0


def test_token_batches_train_and_count_tokens(corpus):
    cfg = dataclasses.replace(TINY, batch_tokens=400, steps=10, eval_every=10)
    h = train(cfg, corpus=corpus, progress=False).history
    assert h["step"] == list(range(1, 11)) and h["tokens"] > 10 * 100


def test_cli_batch_flags_override_the_preset(monkeypatch, capsys):
    """The cpu preset counts tokens; --batch-size must replace that, not be silently ignored."""
    import tf_tutorial.train as tr
    seen = {}

    def record_and_stop(cfg, **kw):                    # the configuration is all this test needs
        seen["cfg"] = cfg
        raise ValueError("stop here")
    monkeypatch.setattr(tr, "train", record_and_stop)
    for argv, want in ((["--batch-size", "32"], (32, None)), (["--batch-tokens", "900"], (64, 900))):
        seen.clear()
        with pytest.raises(SystemExit):
            tr.main(["--config", "cpu", "--device", "cpu"] + argv)
        assert (seen["cfg"].batch_size, seen["cfg"].batch_tokens) == want
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        tr.main(["--batch-size", "32", "--batch-tokens", "900"])
    assert exit_info.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_cli_resume_honours_steps_and_creates_out(tmp_path, capsys):
    from tf_tutorial.train import main
    out = tmp_path / "new" / "run"                                          # created, parents too
    assert main(["--config", "tiny", "--steps", "4", "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    ckpt = str(out / "checkpoint.pt")
    for steps, message in ((None, "has already trained 4 steps, and 4 steps in all were asked for; "
                                  "give a larger --steps"),
                           ("3", "has already trained 4 steps, and 3 steps in all were asked for; "
                                 "give --steps larger than 4")):
        with pytest.raises(SystemExit) as exit_info:
            main(["--resume", ckpt, "--no-progress"] + (["--steps", steps] if steps else []))
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and message in err and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit):
        main(["--resume", ckpt, "--config", "cpu", "--steps", "9"])
    assert "does not match checkpoint" in capsys.readouterr().err
    assert main(["--resume", ckpt, "--steps", "6", "--out", str(out), "--no-progress"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["steps"] == 6 and load_checkpoint(ckpt)["step"] == 6
    # without --out, a resumed run goes on saving next to its checkpoint
    assert main(["--resume", ckpt, "--steps", "8", "--no-progress"]) == 0
    assert load_checkpoint(ckpt)["step"] == 8
    assert json.loads((out / "results.json").read_text())["steps"] == 8
    # a fresh run into the same folder would silently replace the 8-step checkpoint
    with pytest.raises(SystemExit) as exit_info:
        main(["--config", "tiny", "--steps", "2", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.strip().splitlines()) == 1
    assert f"--out {out} already holds a checkpoint; continue it with --resume {out}" in err
    assert load_checkpoint(ckpt)["step"] == 8
    assert main(["--config", "tiny", "--steps", "2", "--out", str(out), "--overwrite",
                 "--no-progress"]) == 0
    assert load_checkpoint(ckpt)["step"] == 2


def test_cli_summary_names_the_precision_it_trained_in(capsys):
    """--precision bf16 on a CPU trains under bf16 autocast (the GPU's path, slowly); the summary
    and results.json said nothing about it."""
    from tf_tutorial.train import main
    assert main(["--config", "tiny", "--steps", "2", "--device", "cpu", "--precision", "bf16",
                 "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out.strip().splitlines()[-1])["precision"] == "bf16"
    # without --out nothing is kept: said, not left for translate to find out
    assert err.strip() == ("python -m tf_tutorial.train: note: no --out was given, so the trained model "
                           "was not saved (add --out DIR to keep it)")


@pytest.mark.parametrize("in_the_way", ["checkpoint.pt", "results.json"])
def test_cli_a_folder_where_the_run_is_saved_is_refused_before_training(tmp_path, in_the_way, capsys):
    """It was found by the last save, after the whole run: a traceback, and the model lost."""
    from tf_tutorial.train import main
    (tmp_path / in_the_way).mkdir()
    with pytest.raises(SystemExit) as exit_info:
        main(["--config", "tiny", "--out", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.strip().splitlines()) == 1
    assert f"--out {tmp_path}: {tmp_path / in_the_way} is not a file" in err


def test_cli_out_below_a_file_names_the_file(tmp_path, capsys):
    from tf_tutorial.train import main
    (tmp_path / "afile").write_text("")
    with pytest.raises(SystemExit) as exit_info:
        main(["--out", str(tmp_path / "afile" / "run")])
    assert exit_info.value.code == 2
    assert f"{tmp_path / 'afile'} is a file, not a directory" in capsys.readouterr().err   # was "not writable"


def test_cli_a_save_that_fails_is_one_line_that_says_the_model_is_lost(tmp_path, monkeypatch, capsys):
    import tf_tutorial.train as tr

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device", str(tmp_path / "checkpoint.pt"))
    monkeypatch.setattr(tr, "train", full_disk)
    with pytest.raises(SystemExit) as exit_info:
        tr.main(["--config", "tiny", "--out", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1 and "Traceback" not in err
    assert err == (f"python -m tf_tutorial.train: error: could not write {tmp_path / 'checkpoint.pt'}: "
                   "No space left on device; the trained model was not saved\n")


def test_cli_results_json_that_cannot_be_written_keeps_the_checkpoint(tmp_path, monkeypatch, capsys):
    from tf_tutorial.train import main
    real = Path.write_text

    def full_disk(self, *args, **kwargs):
        if self.name == "results.json":
            raise OSError(28, "No space left on device")
        return real(self, *args, **kwargs)
    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(SystemExit) as exit_info:
        main(["--config", "tiny", "--steps", "1", "--out", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1 and "Traceback" not in err
    assert f"could not write {tmp_path / 'results.json'}: No space left on device" in err
    assert load_checkpoint(tmp_path / "checkpoint.pt")["step"] == 1


def test_cli_max_seconds_under_torchrun_is_refused_by_its_flag_before_setup(monkeypatch, capsys):
    """The Python API's refusal named max_seconds, once per process, after the data was built."""
    import tf_tutorial.train as tr
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(tr, "train", lambda *a, **k: pytest.fail("train() was reached"))
    with pytest.raises(SystemExit) as exit_info:
        tr.main(["--config", "tiny", "--max-seconds", "10"])
    assert exit_info.value.code == 2
    assert "error: --max-seconds cannot be used with several processes (torchrun)" in capsys.readouterr().err


def test_cli_the_gpu_preset_on_a_cpu_says_how_long_it_would_take(monkeypatch, capsys):
    import tf_tutorial.train as tr
    if torch.cuda.is_available():
        pytest.skip("the note is for a machine without a GPU")

    def stop(*args, **kwargs):
        raise ValueError("stopped before training")
    monkeypatch.setattr(tr, "train", stop)
    with pytest.raises(SystemExit):
        tr.main(["--config", "gpu", "--no-progress"])
    err = capsys.readouterr().err
    assert "note: --config gpu is sized for a GPU" in err and "many hours" in err
    with pytest.raises(SystemExit):
        tr.main(["--config", "cpu", "--no-progress"])
    assert "sized for a GPU" not in capsys.readouterr().err


def test_train_passes_its_settings_to_every_step(corpus, monkeypatch):
    """train() gives train_step the configuration's loss (padding ignored, its label
    smoothing) and clip value, and counts the real target tokens of the batches it sends."""
    import tf_tutorial.train as T
    seen = []
    original = T.train_step

    def spy(model, src, tgt, opt, sched, loss_fn, scaler, amp=None, clip=1.0, forward=None):
        seen.append((loss_fn, clip, int((tgt[:, 1:] != 0).sum())))
        return original(model, src, tgt, opt, sched, loss_fn, scaler, amp, clip, forward)
    monkeypatch.setattr(T, "train_step", spy)
    cfg = dataclasses.replace(TINY, steps=3, label_smoothing=0.3, clip=0.25, eval_every=10**6)
    history = train(cfg, corpus=corpus, progress=False).history
    assert len(seen) == 3
    for loss_fn, clip, _ in seen:
        assert isinstance(loss_fn, nn.CrossEntropyLoss)
        assert loss_fn.ignore_index == corpus.tgt_vocab.pad_id == 0
        assert loss_fn.label_smoothing == 0.3 and clip == 0.25
    assert history["tokens"] == sum(n for *_, n in seen)


def test_the_optimizer_is_the_papers_and_the_schedule_scales():
    from tf_tutorial.train import optimizer_and_schedule
    cfg = CONFIGS["cpu"]
    assert cfg.lr_scale != 1.0
    opt, sched = optimizer_and_schedule(nn.Linear(2, 2), cfg)
    assert opt.defaults["betas"] == (0.9, 0.98) and opt.defaults["eps"] == 1e-9
    # written out, not through noam_lr: lr_scale × D^-0.5 × s × warmup^-1.5 during warmup
    first = cfg.lr_scale * cfg.d_model ** -0.5 * 1 * cfg.warmup ** -1.5
    assert opt.param_groups[0]["lr"] == pytest.approx(first, rel=1e-12)
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(2 * first, rel=1e-12)
    # the width it is given, not the configuration's (chapter 11's GPT passes its own)
    opt, _ = optimizer_and_schedule(nn.Linear(2, 2), cfg, d_model=2 * cfg.d_model)
    assert opt.param_groups[0]["lr"] == pytest.approx(first / 2 ** 0.5, rel=1e-12)


def test_noam_lr_scales_and_decays_as_written():
    """After warmup: scale × D^-0.5 × s^-0.5; the scale multiplies the whole rate."""
    for s in (4000, 10_000, 100_000):
        assert noam_lr(s, 512, 4000, 0.5) == pytest.approx(0.5 * 512 ** -0.5 * s ** -0.5, rel=1e-12)
    assert noam_lr(100, 128, 300, 0.6) == pytest.approx(0.6 * 128 ** -0.5 * 100 * 300 ** -1.5, rel=1e-12)


def test_clipping_sees_unscaled_gradients_under_the_fp16_loss_scaler():
    """With a GradScaler the gradients are scaled by 1024 until unscale_: clipping before it
    would clip the scaled norm."""
    norms = {}
    original = nn.utils.clip_grad_norm_
    for enabled in (False, True):
        model, opt, sched = _setup()
        src, tgt = _batch()

        def spy(params, max_norm):
            params = list(params)
            norms[enabled] = torch.linalg.vector_norm(
                torch.stack([p.grad.norm() for p in params])).item()
            return original(params, max_norm)
        nn.utils.clip_grad_norm_ = spy
        try:
            scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, enabled=enabled)
            train_step(model, src, tgt, opt, sched, LOSS, scaler, clip=0.01)
        finally:
            nn.utils.clip_grad_norm_ = original
    assert norms[True] == pytest.approx(norms[False], rel=1e-4)


def test_varying_shapes_turns_cudnn_attention_off_and_restores_it(monkeypatch):
    """cuDNN's attention builds a plan for every new shape (the first H200 record trained at a
    quarter of its speed): training turns it off for its loop, and only for its loop."""
    import tf_tutorial.train as T
    assert torch.backends.cuda.cudnn_sdp_enabled()
    with T.varying_shapes():
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.mem_efficient_sdp_enabled()     # the others are left alone
        assert torch.backends.cuda.flash_sdp_enabled()
    assert torch.backends.cuda.cudnn_sdp_enabled()
    with pytest.raises(KeyError):                                    # restored on an error too
        with T.varying_shapes():
            raise KeyError
    assert torch.backends.cuda.cudnn_sdp_enabled()
    torch.backends.cuda.enable_cudnn_sdp(False)                      # a user's own choice stays
    try:
        with T.varying_shapes():
            pass
        assert not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(True)
    monkeypatch.setattr(T, "CUDNN_ATTENTION", True)                  # scripts.gpu_run measures both
    with T.varying_shapes():
        assert torch.backends.cuda.cudnn_sdp_enabled()


def test_every_training_step_runs_without_cudnn_attention(corpus, monkeypatch):
    import tf_tutorial.train as T
    seen = []
    original = T.train_step

    def spy(*args, **kwargs):
        seen.append(torch.backends.cuda.cudnn_sdp_enabled())
        return original(*args, **kwargs)
    monkeypatch.setattr(T, "train_step", spy)
    train(dataclasses.replace(TINY, steps=3, eval_every=2), corpus=corpus, progress=False)
    assert seen == [False] * 3
    assert torch.backends.cuda.cudnn_sdp_enabled()


def test_a_checkpoint_saved_mid_run_holds_the_training_time_so_far(corpus, monkeypatch, tmp_path):
    """Resuming from a mid-run checkpoint must not lose the time trained before it."""
    import tf_tutorial.train as T
    clock, real_step, saved = [0.0], T.train_step, []
    monkeypatch.setattr(T.time, "perf_counter", lambda: clock[0])

    def one_second_step(*args, **kwargs):                     # each step takes 1 s of the fake clock
        clock[0] += 1.0
        return real_step(*args, **kwargs)

    monkeypatch.setattr(T, "train_step", one_second_step)
    real_save = T._save
    monkeypatch.setattr(T, "_save", lambda out, m, o, s, history, step, *rest:
                        (saved.append((step, history["seconds"])), real_save(out, m, o, s, history, step, *rest)))
    train(TINY, out_dir=tmp_path, corpus=corpus, progress=False)
    assert saved == [(20, 20.0), (40, 40.0)]                  # TINY evaluates every 20 of 40 steps


def test_resuming_warns_of_a_changed_configuration(corpus, tmp_path, recwarn):
    train(TINY, out_dir=tmp_path, corpus=corpus, progress=False, max_steps=5)
    changed = dataclasses.replace(TINY, lr_scale=5.0, dropout=0.0)
    with pytest.warns(UserWarning, match=r"with another configuration: dropout=0.1 \(this run: 0.0\), "
                                         r"lr_scale=1.0 \(this run: 5.0\); the run does not carry on"):
        train(changed, resume=tmp_path, corpus=corpus, progress=False, max_steps=6)
    more = dataclasses.replace(TINY, steps=80, eval_every=7)      # more steps is the usual resume
    train(more, resume=tmp_path, corpus=corpus, progress=False, max_steps=6)
    assert not [w for w in recwarn if "another configuration" in str(w.message)]
    # a checkpoint already at its stop: nothing is trained, the run is returned as saved
    done = train(TINY, resume=tmp_path, corpus=corpus, progress=False, max_steps=5)
    assert done.history["step"] == [1, 2, 3, 4, 5]


def test_a_resumed_run_with_another_schedule_follows_it_from_its_first_step(corpus, tmp_path):
    """The first resumed step ran at the saved (old) rate: the optimizer's restored lr, which the
    scheduler only moves after a step."""
    train(TINY, out_dir=tmp_path, corpus=corpus, progress=False, max_steps=5)
    changed = TINY.with_changes(lr_scale=0.5, warmup=7)
    with pytest.warns(UserWarning, match="another configuration"):
        lr = train(changed, resume=tmp_path, corpus=corpus, progress=False, max_steps=8).history["lr"]
    assert lr[:5] == pytest.approx([noam_lr(s, TINY.d_model, TINY.warmup, 1.0) for s in range(1, 6)])
    assert lr[5:] == pytest.approx([noam_lr(s, TINY.d_model, 7, 0.5) for s in (6, 7, 8)], rel=1e-12)


def test_resuming_in_another_precision_is_warned_about(corpus, tmp_path, recwarn):
    """The checkpoint names the precision it trained in; bf16 on, float32 after, is not one run."""
    train(TINY, out_dir=tmp_path, corpus=corpus, progress=False, max_steps=3, precision="bf16")
    assert torch.load(tmp_path / "checkpoint.pt", weights_only=False)["precision"] == "bf16"
    with pytest.warns(UserWarning, match=r"with another configuration: precision='bf16' \(this run: 'fp32'\); "
                                         "the run does not carry on"):
        train(TINY, resume=tmp_path, out_dir=tmp_path, corpus=corpus, progress=False, max_steps=4,
              precision="fp32")                         # "auto" would be bf16 on a GPU
    assert torch.load(tmp_path / "checkpoint.pt", weights_only=False)["precision"] == "fp32"
    train(TINY, resume=tmp_path, corpus=corpus, progress=False, max_steps=5, precision="fp32")
    assert not [w for w in recwarn if "another configuration" in str(w.message)]


def test_cli_a_time_budget_that_ends_before_the_first_step_reports_0_steps(tmp_path, capsys):
    from tf_tutorial.train import main
    assert main(["--config", "tiny", "--max-seconds", "1e-9", "--out", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr()
    summary = json.loads(out.out.strip().splitlines()[-1])
    assert summary["steps"] == 0 and json.loads((tmp_path / "results.json").read_text())["steps"] == 0
    assert "note: no training step ran (--max-seconds 1e-09 ended before the first step)" in out.err


def test_validate_scores_every_real_token_and_no_padding(corpus):
    """validate's loss and accuracy equal the same sums taken one sentence at a time (no padding)."""
    from tf_tutorial.corpus.data import encode_pairs
    from tf_tutorial.train import validate
    torch.manual_seed(0)
    m = Transformer(TransformerConfig(len(corpus.src_vocab), len(corpus.tgt_vocab), d_model=16, n_heads=2,
                                      n_layers=1, d_ff=32, dropout=0.0, max_len=128))
    eos = corpus.tgt_vocab.eos_id                # make <eos> the argmax: right once per sentence
    m.out.register_forward_hook(lambda mod, inp, out: out + 20.0 * nn.functional.one_hot(
        torch.tensor(eos), out.shape[-1]))
    encoded = encode_pairs(corpus.valid[:40], corpus.src_vocab, corpus.tgt_vocab)
    assert len({len(t) for _, t in encoded}) > 3                 # batches really hold padding
    loss_sum = correct = total = 0
    with torch.no_grad():
        for src, tgt in encoded:
            logits = m(torch.tensor([src]), torch.tensor([tgt[:-1]]))[0]
            gold = torch.tensor(tgt[1:])
            loss_sum += nn.functional.cross_entropy(logits, gold, reduction="sum").item()
            correct += int((logits.argmax(-1) == gold).sum())
            total += len(gold)
    loss, acc = validate(m, encoded, corpus.tgt_vocab.pad_id, torch.device("cpu"), batch_size=16)
    assert correct == len(encoded) < total                       # the <eos> positions, and no others
    assert acc == correct / total
    assert loss == pytest.approx(loss_sum / total, rel=1e-5)
    assert validate(m, encoded, corpus.tgt_vocab.pad_id, "cpu", batch_size=16) == (loss, acc)  # a name too
    with pytest.raises(ValueError, match=r"^encoded: expected at least one \(source, target\) pair of ids, "
                                         r"but got none$"):       # was a ZeroDivisionError
        validate(m, [], corpus.tgt_vocab.pad_id, "cpu")


def test_a_time_limit_is_refused_with_several_processes(corpus, monkeypatch):
    """Each process would stop at its own step; DDP needs them in step (checked before training)."""
    import tf_tutorial.train as train_module
    monkeypatch.setattr(train_module, "_distributed", lambda dev: (0, 2, dev))
    monkeypatch.setattr(train_module, "train_step", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(ValueError, match="^max_seconds cannot be used with several processes: each would "
                                         "stop at a different step; use --steps$"):
        train(TINY, corpus=corpus, progress=False, max_seconds=60)


@pytest.mark.parametrize("bf16, expected", [(True, torch.bfloat16), (False, torch.float16)])
def test_auto_precision_on_a_gpu_takes_bf16_where_the_gpu_has_it(monkeypatch, bf16, expected):
    """An A100/H100 gets bf16; a T4 (no fast bf16) gets fp16 with the loss scaler; no GPU is needed."""
    asked = []

    def supported(including_emulation=True):
        asked.append(including_emulation)
        return bf16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", supported)
    assert autocast_dtype(torch.device("cuda"), "auto") is expected
    assert asked == [False]                        # emulated bf16 (slow on a T4) does not count
    assert autocast_dtype("cuda", "auto") is expected          # a device name
    assert autocast_dtype(torch.device("cpu"), "auto") is None
    assert autocast_dtype(torch.device("cuda"), "fp32") is None


def test_smoothing_floor_is_the_least_label_smoothed_loss():
    # the floor is q's entropy: PyTorch's loss at logits log q, and no
    # other logits get lower
    for n, eps in ((5, 0.1), (40, 0.25), (3, 0.0)):
        right, other = smoothed_target(n, eps)
        q = torch.full((n,), other, dtype=torch.float64)
        q[1] = right
        ce = nn.CrossEntropyLoss(label_smoothing=eps)
        at_q = ce(q.log()[None], torch.tensor([1])).item()
        assert abs(q.sum().item() - 1) < 1e-12
        assert abs(at_q - smoothing_floor(n, eps)) < 1e-9
        torch.manual_seed(n)
        for _ in range(20):
            z = q.log() + 0.3 * torch.randn(n, dtype=torch.float64)
            assert ce(z[None], torch.tensor([1])).item() >= at_q - 1e-12
    assert smoothing_floor(3, 0.0) == 0.0
    assert math.copysign(1.0, smoothing_floor(1, 0.5)) == 1.0      # one token: 0, not -0.0
    assert smoothed_target(5, 0.1) == pytest.approx((0.92, 0.02))
    for bad, words in (((0, 0.1), "n_vocab"), ((5, 1.0), "eps"),
                       ((5, -0.1), "eps"), ((2.5, 0.1), "n_vocab")):
        with pytest.raises(ValueError, match=words):
            smoothing_floor(*bad)


@pytest.mark.parametrize("args, message", [
    ((1, 0, 10), "^d_model must be a positive integer, but got 0$"),
    ((1, 16, 0), "^warmup must be a positive integer, but got 0$"),
    ((1, -16, 10), "^d_model must be a positive integer, but got -16$"),
    ((1, 16, 10, -1), "^scale must be positive, but got -1$"),
    ((1, 16, 10, float("inf")), "^scale must be finite, but got inf$"),
    ((-3, 16, 10), "^step must be an integer >= 0, but got -3$"),
])
def test_noam_lr_refuses_what_has_no_schedule(args, message):
    # d_model=0 or warmup=0 divided by zero; d_model=-16 gave a complex number, scale=-1 a negative rate
    with pytest.raises(ValueError, match=message):
        noam_lr(*args)


def test_noam_lr_still_treats_step_0_as_step_1():
    assert noam_lr(0, 16, 10) == noam_lr(1, 16, 10) > 0


# the forced overflow skips the very first optimizer step, which PyTorch's scheduler remarks on
@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before `optimizer.step\\(\\)`")
def test_resuming_an_fp16_run_keeps_the_loss_scalers_state(corpus, tmp_path, monkeypatch):
    # the checkpoint had no scaler: after a resume the scale started again from its initial value,
    # the overflowing steps were skipped a second time, and the curve left the uninterrupted one
    import functools
    import tf_tutorial.train as T
    monkeypatch.setattr(T.torch.amp, "GradScaler", functools.partial(torch.amp.GradScaler, init_scale=2.0**40))
    run = functools.partial(train, TINY, corpus=corpus, progress=False, precision="fp16")
    straight = run(max_steps=30).history["loss"]
    run(out_dir=tmp_path, max_steps=15)
    scale = load_checkpoint(tmp_path)["scaler"]["scale"]
    assert scale < 2.0**40                                  # it came down, overflowing
    resumed = run(resume=tmp_path, max_steps=30).history["loss"]
    assert resumed == straight


def test_resuming_past_the_steps_asked_for_is_refused(corpus, tmp_path):
    # it used to return the checkpoint's 5-step model for a request of 3 steps, without a word
    train(TINY, out_dir=tmp_path, corpus=corpus, progress=False, max_steps=5)
    with pytest.raises(ValueError, match=r"^resume: checkpoint .* has already trained 5 steps, past the 3 "
                                         r"asked for \(steps=40, max_steps=3\)$"):
        train(TINY, resume=tmp_path, corpus=corpus, progress=False, max_steps=3)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(corpus="abc"), TypeError, "^corpus must be a Corpus \\(from make_corpus\\) or None, but got str$"),
    (dict(out_dir=5), TypeError, r"^out_dir=5: expected a directory name \(str or Path\), but got int$"),
    (dict(device="meta"), ValueError, "^device 'meta' holds shapes but no data"),
])
def test_train_names_a_bad_argument_before_it_starts(kwargs, error, message):
    with pytest.raises(error, match=message):
        train(TINY, progress=False, **kwargs)
    # a preset's name, or its fields as a dict, instead of the config (it failed at cfg.seed)
    with pytest.raises(TypeError, match=r"^cfg must be a TrainConfig, but got str$"):
        train("tiny", progress=False)
    with pytest.raises(TypeError, match=r"^cfg must be a TrainConfig, but got dict \(TrainConfig\(\*\*d\) builds"):
        train(dataclasses.asdict(TINY), progress=False)


def test_cli_ctrl_c_says_which_checkpoint_is_kept(corpus, tmp_path, capsys, monkeypatch):
    import tf_tutorial.train as T
    real = T.train

    def interrupted(cfg, **kwargs):                 # Ctrl-C after the checkpoint of step 20
        real(cfg, **{**kwargs, "corpus": corpus}, max_steps=20)
        raise KeyboardInterrupt

    monkeypatch.setattr(T, "train", interrupted)
    out = tmp_path / "run"
    assert T.main(["--config", "tiny", "--out", str(out), "--no-progress"]) == 130
    assert capsys.readouterr().err == (f"\npython -m tf_tutorial.train: interrupted; {out / 'checkpoint.pt'} "
                                       f"holds step 20; continue with --resume {out}\n")

    def at_once(cfg, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(T, "train", at_once)
    fresh = tmp_path / "fresh"
    assert T.main(["--config", "tiny", "--out", str(fresh), "--no-progress"]) == 130
    assert capsys.readouterr().err.endswith("interrupted; no checkpoint was saved\n")
    assert not fresh.exists()                       # the folder it made is gone again


def test_cli_a_changed_configuration_is_one_warning_line(corpus, tmp_path, capsys, monkeypatch):
    import tf_tutorial.train as T
    real = T.train
    monkeypatch.setattr(T, "train", lambda cfg, **kw: real(cfg, **{**kw, "corpus": corpus}))
    assert T.main(["--config", "tiny", "--out", str(tmp_path), "--steps", "4", "--no-progress"]) == 0
    capsys.readouterr()
    assert T.main(["--resume", str(tmp_path), "--steps", "6", "--batch-size", "8", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("python -m tf_tutorial.train: warning: resuming ") and err.count("\n") == 1
    assert "batch_size=32 (this run: 8)" in err


@pytest.mark.parametrize("n_sentences, world", [(0, 1), (5, 2)])
def test_a_stream_with_no_usable_batch_is_refused_instead_of_hanging(n_sentences, world):
    # one-sentence batches over two processes (or no sentences at all): every epoch was skipped
    # whole, and the stream looked for a batch for ever
    from tf_tutorial.train import batch_stream
    encoded = [([4, 5, 2], [1, 6, 2])] * n_sentences
    cfg = dataclasses.replace(TINY, batch_size=1)
    with pytest.raises(ValueError, match=rf"^no training batch holds {world} or more sentences \(one per "
                                         rf"process\): {n_sentences} sentences, batch_size=1, batch_tokens=None$"):
        next(batch_stream(encoded, cfg, pad_id=0, world=world))
    assert len(next(batch_stream(encoded or [([4, 2], [1, 2])], cfg, pad_id=0, world=1))[0]) == 1


def test_ctrl_c_closes_the_progress_bar_before_the_message(corpus, capsys, monkeypatch):
    """The open bar was drawn once more when Python collected it: after the CLI's 'interrupted' line."""
    import gc

    import tf_tutorial.train as T
    real_step = T.train_step

    def ctrl_c_at_step_3(*args, **kwargs):
        if ctrl_c_at_step_3.calls == 3:
            raise KeyboardInterrupt
        ctrl_c_at_step_3.calls += 1
        return real_step(*args, **kwargs)

    ctrl_c_at_step_3.calls = 0
    monkeypatch.setattr(T, "train_step", ctrl_c_at_step_3)
    try:
        train(TINY, corpus=corpus, progress=True)
    except KeyboardInterrupt:                       # the CLI prints its message here
        closed = capsys.readouterr().err            # while the traceback still holds the bar
    else:
        pytest.fail("the fake Ctrl-C did not stop the training")
    assert "train[tiny]" in closed and closed.endswith("\n")
    gc.collect()
    assert capsys.readouterr().err == ""
