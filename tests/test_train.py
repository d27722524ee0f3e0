"""Training: schedule, a run that learns, resume, checkpoints, the command line, DDP on CPU."""
import dataclasses
import json
import os
import subprocess
import sys
import tempfile

import pytest
import torch

from tf_tutorial.data import make_corpus
from tf_tutorial.train import (CONFIGS, CheckpointError, autocast_dtype, load_checkpoint, noam_lr,
                               pick_device, save_checkpoint, train)

TINY = dataclasses.replace(CONFIGS["tiny"], steps=40, warmup=10, eval_every=20, n_train=1500)


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(n_train=1500, n_valid=100, n_test=50, n_general=5, seed=0)


def test_noam_schedule_peaks_at_warmup():
    lrs = [noam_lr(s, 512, 4000) for s in range(1, 20001)]
    assert max(range(len(lrs)), key=lrs.__getitem__) + 1 == 4000
    assert lrs[3999] == pytest.approx(512 ** -0.5 * 4000 ** -0.5)
    assert lrs[15999] == pytest.approx(lrs[3999] / 2)        # 1/sqrt(step) decay: 4x steps, half the lr


def test_device_and_precision_choice():
    assert pick_device("cpu").type == "cpu"
    assert autocast_dtype(torch.device("cpu")) is None
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA GPU is available"):
            pick_device("cuda")


def test_a_tiny_run_learns_and_records_curves(corpus):
    r = train(TINY, corpus=corpus, progress=False)
    h = r.history
    assert h["step"] == list(range(1, 41)) and h["eval_step"] == [20, 40]
    assert sum(h["loss"][-5:]) / 5 < sum(h["loss"][:5]) / 5 - 1.0
    assert h["valid_loss"][-1] < h["valid_loss"][0]
    assert h["lr"][9] == pytest.approx(noam_lr(10, TINY.d_model, TINY.warmup))


def test_resume_continues_the_same_loss_curve(corpus, tmp_path):
    straight = train(TINY, corpus=corpus, progress=False).history["loss"]
    train(TINY, out_dir=tmp_path, corpus=corpus, progress=False, max_steps=23)
    assert load_checkpoint(tmp_path / "checkpoint.pt")["step"] == 23
    resumed = train(TINY, out_dir=tmp_path, resume=tmp_path / "checkpoint.pt", corpus=corpus, progress=False)
    assert len(resumed.history["loss"]) == 40
    assert resumed.history["loss"] == pytest.approx(straight, rel=1e-5)


def test_checkpoint_errors(corpus, tmp_path):
    train(TINY, out_dir=tmp_path, corpus=corpus, progress=False, max_steps=2)
    other = dataclasses.replace(TINY, d_model=48)
    with pytest.raises(CheckpointError, match=r"from another configuration: d_model=32 \(this run: 48\)"):
        train(other, resume=tmp_path / "checkpoint.pt", corpus=corpus, progress=False)
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(bad)
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")


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
    assert torch.load(path)["step"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tf_tutorial.train", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


@pytest.mark.parametrize("args, message", [
    (["--config", "huge"], "argument --config: invalid choice: 'huge'"),
    (["--out", "/no/such/dir"], "--out /no/such/dir: no such directory"),
    (["--steps", "0"], "--steps must be a positive integer, but got 0"),
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
    assert capsys.readouterr().err.strip() == "python -m tf_tutorial.train: error: --out /sys: directory is not writable"


def test_cli_trains_saves_and_rejects_a_wrong_checkpoint(tmp_path):
    r = _cli("--config", "tiny", "--steps", "5", "--out", str(tmp_path), "--no-progress")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 5 and summary["config"] == "tiny" and 0 <= summary["test_exact_match"] <= 1
    assert json.loads((tmp_path / "results.json").read_text()) == summary
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    state["model"]["src_embed.table.weight"] = torch.zeros(3, 3)
    state["train_config"]["d_model"] = 32
    torch.save(state, tmp_path / "wrong.pt")
    r = _cli("--config", "tiny", "--resume", str(tmp_path / "wrong.pt"), "--no-progress")
    assert r.returncode == 2 and "does not fit this model" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_ddp_two_cpu_processes_end_with_identical_weights(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                        "-m", "tf_tutorial.train", "--config", "tiny", "--steps", "6", "--device", "cpu",
                        "--out", str(tmp_path), "--no-progress"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    history = torch.load(tmp_path / "checkpoint.pt", weights_only=False)["history"]
    a, b = history["rank_checksums"]
    assert a == b and history["step"][-1] == 6
