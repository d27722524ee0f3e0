"""The scripts that write the book's committed records, run end to end at toy size.

``scripts/calibrate_cpu.py`` (chapter 10's calibration table), ``scripts/calibrate_ch11.py``
(chapter 11's equal time), ``scripts/ch12_variants.py`` (chapter 12's table) and
``scripts/ch06_seeds.py`` (chapter 6's warmup runs at more seeds) take minutes
to an hour, so nobody runs them in passing, and a change to ``train`` or ``gpt`` could break
them unseen. Here each runs with a tiny model on a tiny corpus, writes into a temporary folder,
and its record must have the shape of the committed one, which the chapters render (nbval
proves that): a script that drifted from its chapter fails here, not at the next calibration.
"""
import dataclasses
import inspect
import json

import pytest

from conftest import ROOT
from scripts import calibrate_ch11, calibrate_cpu, ch06_seeds, ch12_variants
from tf_tutorial.book import records
from tf_tutorial.corpus.data import make_corpus
from tf_tutorial.experiments.warmup import plateau_exit, warmup_grid
from tf_tutorial.gpt import GPTConfig, continuation_vocab
from tf_tutorial.train import CONFIGS, train

COMMITTED = ROOT / "book" / "records"


def tiny_corpus(n_train=300, seed=0):
    return make_corpus(n_train, n_valid=20, n_test=20, n_longer=10, n_deeper=10, seed=seed)


def shape(value):
    """A record's structure: the keys of every object, the kind of every leaf."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return "list"
    if value is None:
        return None                     # an optional setting: matches any leaf
    if isinstance(value, bool):
        return "bool"
    return "number" if isinstance(value, (int, float)) else type(value).__name__


def assert_same_shape(got, want, where="record"):
    if isinstance(want, dict) or isinstance(got, dict):
        assert isinstance(got, dict) and isinstance(want, dict), f"{where}: {got!r} vs {want!r}"
        assert got.keys() == want.keys(), (
            f"{where}: keys {sorted(got.keys() - want.keys())} only in the script's record, "
            f"{sorted(want.keys() - got.keys())} only in the committed one")
        for key in want:
            assert_same_shape(got[key], want[key], f"{where}[{key!r}]")
    elif got is not None and want is not None:
        assert got == want, f"{where}: {got} vs {want}"


def committed(name):
    return json.loads((COMMITTED / name).read_text(encoding="utf-8"))


@pytest.fixture
def tiny_ch11(monkeypatch, tmp_path):
    """Chapter 11's setup at toy size; records are written to and read from ``tmp_path``."""
    def setup():
        cfg = dataclasses.replace(CONFIGS["tiny"], norm_first=True, warmup=2, steps=4)
        corpus = tiny_corpus()
        vocab = continuation_vocab(corpus.src_vocab, corpus.tgt_vocab)
        gpt_cfg = GPTConfig(len(vocab), d_model=16, n_heads=2, n_layers=1, d_ff=32,
                            max_len=256, pad_id=vocab.pad_id, eos_id=vocab.eos_id,
                            norm_first=True, positions="sinusoidal", activation="relu")
        return cfg, corpus, vocab, gpt_cfg

    def save(name, record, folder=None):
        return records.save_record(name, record, tmp_path)

    def load(name, folder=None):
        return records.load_record(name, tmp_path)

    for module in (calibrate_ch11, ch12_variants):
        monkeypatch.setattr(module, "chapter_setup", setup)
        monkeypatch.setattr(module, "save_record", save)
    for module in (calibrate_ch11, ch12_variants):
        monkeypatch.setattr(module, "load_record", load)
    monkeypatch.setattr(calibrate_ch11, "DECODER_ONLY_STEPS", 3)
    monkeypatch.setattr(calibrate_ch11, "SEEDS", (0,))
    return tmp_path


def test_calibrate_ch11_writes_the_record_chapter_11_reads(tiny_ch11, capsys):
    assert calibrate_ch11.main(["--rounds", "1"]) == 0
    record = json.loads((tiny_ch11 / calibrate_ch11.NAME).read_text(encoding="utf-8"))
    want = shape(committed(calibrate_ch11.NAME))
    # the committed record has seeds 0, 1 and 2; this run trained seed 0 only
    want["encoder_decoder_seeds"] = {"seed0": want["encoder_decoder_seeds"]["seed0"]}
    assert_same_shape(shape(record), want)
    assert record["steps"]["decoder_only"] == 3 and len(record["rounds"]) == 1
    # the seed's run: every step's loss, and its score at the decoder-only model's last step
    run = record["encoder_decoder_seeds"]["seed0"]
    assert len(run["loss"]) == record["steps"]["encoder_decoder"]
    assert run["at_same_step"]["step"] == min(3, record["steps"]["encoder_decoder"])
    assert run["splits"]["test"]["exact_match"] == run["exact_match"]
    # the encoder-decoder's steps are the decoder-only model's, scaled by the speed ratio
    per = record["seconds_per_step"]
    expected = round(3 * per["decoder_only"] / per["encoder_decoder"])
    assert abs(record["steps"]["encoder_decoder"] - expected) <= 1
    assert "round 1:" in capsys.readouterr().out


def test_the_committed_record_holds_every_seed_the_script_trains():
    seeds = committed(calibrate_ch11.NAME)["encoder_decoder_seeds"]
    assert set(seeds) == {f"seed{s}" for s in calibrate_ch11.SEEDS} and "seed0" in seeds


def test_a_seed_run_with_its_stop_and_resume_is_one_straight_run():
    """What the chapter shows from the record is the run it would have trained itself."""
    cfg = dataclasses.replace(CONFIGS["tiny"], norm_first=True, warmup=2, steps=6)
    corpus = tiny_corpus()
    run = calibrate_ch11.encoder_decoder_run(cfg, corpus, steps=6, same=3, seed=1)
    straight = train(dataclasses.replace(cfg, seed=1), corpus=corpus, device="cpu", progress=False)
    assert run["loss"] == [round(x, 5) for x in straight.history["loss"]]
    assert run["splits"]["test"] == calibrate_ch11.scores(straight.model, corpus.test, corpus)
    early = train(dataclasses.replace(cfg, seed=1), corpus=corpus, device="cpu", max_steps=3,
                  progress=False)
    assert run["at_same_step"] == {"step": 3, **calibrate_ch11.scores(early.model, corpus.test, corpus)}


def test_calibrate_ch11_runs_only_keeps_the_timing_and_redoes_the_seeds(tiny_ch11, monkeypatch, capsys):
    with pytest.raises(SystemExit, match="needs book/records/ch11_budget.json"):
        calibrate_ch11.main(["--runs-only"])
    assert calibrate_ch11.main(["--rounds", "1"]) == 0
    path = tiny_ch11 / calibrate_ch11.NAME
    first = json.loads(path.read_text(encoding="utf-8"))
    first["steps"]["encoder_decoder"] = 5           # a timing that differs from a fresh one
    path.write_text(json.dumps(first), encoding="utf-8")
    monkeypatch.setattr(calibrate_ch11, "SEEDS", (0, 1))
    assert calibrate_ch11.main(["--runs-only"]) == 0
    again = json.loads(path.read_text(encoding="utf-8"))
    for key in ("rounds", "date", "machine", "torch", "seconds_per_step"):
        assert again[key] == first[key], key                  # the timing is kept
    assert again["runs_date"] >= first["runs_date"] and again["runs_machine"]
    assert set(again["encoder_decoder_seeds"]) == {"seed0", "seed1"}
    assert all(len(r["loss"]) == 5 for r in again["encoder_decoder_seeds"].values())
    with pytest.raises(SystemExit) as stop:                  # timing and no timing at once
        calibrate_ch11.main(["--runs-only", "--rounds", "3"])
    assert stop.value.code == 2 and "--rounds times the models; --runs-only keeps the record's timing: " \
        "give one of them" in capsys.readouterr().err


@pytest.mark.parametrize("change", [
    lambda r: r["gpt_config"].update(d_model=99),
    lambda r: r["train_config"].update(lr_scale=0.5),
    lambda r: r["steps"].update(decoder_only=4),
], ids=["gpt_config", "train_config", "decoder_only_steps"])
def test_calibrate_ch11_runs_only_refuses_a_record_from_other_settings(tiny_ch11, change):
    assert calibrate_ch11.main(["--rounds", "1"]) == 0
    path = tiny_ch11 / calibrate_ch11.NAME
    record = json.loads(path.read_text(encoding="utf-8"))
    change(record)
    path.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(SystemExit, match="from other settings"):
        calibrate_ch11.main(["--runs-only"])


def test_calibrate_ch11_refuses_zero_rounds(tiny_ch11, capsys):
    with pytest.raises(SystemExit) as stop:
        calibrate_ch11.main(["--rounds", "0"])
    assert stop.value.code == 2 and "--rounds must be at least 1, but got 0" in capsys.readouterr().err
    assert not (tiny_ch11 / calibrate_ch11.NAME).exists()


def test_ch12_variants_needs_a_matching_budget_and_writes_chapter_12s_record(tiny_ch11):
    with pytest.raises(SystemExit, match="needs book/records/ch11_budget.json"):
        ch12_variants.main(["--only", "base"])
    assert calibrate_ch11.main(["--rounds", "1"]) == 0
    assert ch12_variants.main(["--only", "base", "gqa2", "base_seed1"]) == 0
    record = json.loads((tiny_ch11 / ch12_variants.NAME).read_text(encoding="utf-8"))
    want = shape(committed(ch12_variants.NAME))
    got = shape(record)
    assert got.keys() == want.keys()
    assert set(record["variants"]) == {"base", "gqa2", "base_seed1"}
    # rows written before the script recorded each row's variant and seed lack those two keys;
    # the seed rows have today's shape
    today = want["variants"]["base_seed1"]
    for name, row in got["variants"].items():
        assert_same_shape(row, today, f"variants[{name!r}]")
        assert want["variants"][name].keys() <= row.keys()    # what the chapter reads
    assert record["variants"]["gqa2"]["config"]["n_kv_heads"] == 2
    assert record["variants"]["base_seed1"]["seed"] == 1
    assert record["steps"] == 3

    # a budget from other settings is refused, not silently reused
    budget = json.loads((tiny_ch11 / calibrate_ch11.NAME).read_text(encoding="utf-8"))
    budget["gpt_config"]["d_model"] = 99
    (tiny_ch11 / calibrate_ch11.NAME).write_text(json.dumps(budget), encoding="utf-8")
    with pytest.raises(SystemExit, match="from other settings"):
        ch12_variants.main(["--only", "base"])


def test_calibrate_cpu_writes_chapter_10s_table_row_by_row(monkeypatch, tmp_path):
    tiny = dataclasses.replace(CONFIGS["tiny"], n_train=300, steps=4, warmup=2,
                               batch_size=16, batch_tokens=None, eval_every=10**6)
    monkeypatch.setattr(calibrate_cpu, "BASE", tiny)
    # every variant as it is, but 4 steps (the variants set their own step counts)
    monkeypatch.setattr(calibrate_cpu, "VARIANTS", {
        name: (label, {**overrides, "steps": 4, "warmup": 2})
        for name, (label, overrides) in calibrate_cpu.VARIANTS.items()})
    monkeypatch.setattr(calibrate_cpu, "make_corpus", lambda n, seed: tiny_corpus(n, seed))
    out = tmp_path / "cpu_calibration.json"
    assert calibrate_cpu.main(["--only", "base", "tok2000", "--out", str(out)]) == 0
    assert calibrate_cpu.main(["--only", "ls0", "--out", str(out)]) == 0   # merges
    record = json.loads(out.read_text(encoding="utf-8"))
    want = shape(committed("cpu_calibration.json"))
    # written by hand, not by the script: the runs a later step count replaced
    want.pop("superseded", None)
    got = shape(record)
    assert got.keys() == want.keys()
    assert list(record["runs"]) == ["base", "tok2000", "ls0"]          # the table's order
    assert_same_shape(got["base"], want["base"], "base")
    for name, row in got["runs"].items():
        expected_row = dict(want["runs"][name], overrides=row["overrides"])  # its own overrides
        assert_same_shape(row, expected_row, f"runs[{name!r}]")
    assert record["runs"]["tok2000"]["overrides"]["batch_tokens"] == 2000
    assert record["base"]["steps"] == 4


def test_ch06_seeds_writes_chapter_6s_record(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(ch06_seeds, "SETTINGS", {"n_layers": 2, "lr": 3e-3, "steps": 12,
                                                 "warmups": [0, 60], "long_steps": 20,
                                                 "low_lr": 1e-3, "low_lr_steps": 15})
    monkeypatch.setattr(ch06_seeds, "save_record",
                        lambda name, record: records.save_record(name, record, tmp_path))
    assert ch06_seeds.main(["--seeds", "2"]) == 0
    record = json.loads((tmp_path / ch06_seeds.NAME).read_text(encoding="utf-8"))
    want = committed(ch06_seeds.NAME)
    assert_same_shape(shape(record), shape(want))
    assert record["seeds"] == [0, 1] and list(record["runs"]) == list(want["runs"])
    for run in record["runs"].values():
        assert [len(c) for c in run["loss"]] == [12, 12]
        assert run["plateau_exit"] == [plateau_exit(c) for c in run["loss"]]
    post = record["runs"]["Post-LN/0"]
    assert [len(c) for c in post["long"]["loss"]] == [20, 20]
    # the long run is the same run, trained further: same start, same batches, no schedule
    assert [c[:12] for c in post["long"]["loss"]] == post["loss"]
    assert list(record["low_lr_runs"]) == ["Post-LN/0", "Pre-LN/0"]
    for run in record["low_lr_runs"].values():
        assert [len(c) for c in run["loss"]] == [15, 15]
        assert run["plateau_exit"] == [plateau_exit(c) for c in run["loss"]]
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        ch06_seeds.main(["--seeds", "0"])
    assert stop.value.code == 2 and "--seeds must be a positive integer, but got 0" in capsys.readouterr().err


def test_the_committed_ch06_record_is_the_chapters_experiment():
    record = committed(ch06_seeds.NAME)
    defaults = {k: v.default for k, v in inspect.signature(warmup_grid).parameters.items()
                if k != "seeds"}
    settings = record["settings"]
    assert settings == ch06_seeds.SETTINGS
    assert {k: settings[k] for k in ("n_layers", "lr", "steps")} == \
        {k: defaults[k] for k in ("n_layers", "lr", "steps")}
    assert settings["warmups"] == list(defaults["warmups"])
    assert record["seeds"] == list(range(5))
    for run in record["runs"].values():
        assert [len(c) for c in run["loss"]] == [settings["steps"]] * 5
        assert run["plateau_exit"] == [plateau_exit(c) for c in run["loss"]]
    long = record["runs"]["Post-LN/0"]["long"]
    assert [len(c) for c in long["loss"]] == [settings["long_steps"]] * 5
    for run in record["low_lr_runs"].values():
        assert [len(c) for c in run["loss"]] == [settings["low_lr_steps"]] * 5


def test_calibrate_ch11_trains_the_encoder_decoder_at_least_one_step(tiny_ch11, monkeypatch):
    """A busy machine can time the toy encoder–decoder as over six times slower per step than the
    decoder-only model: 3 steps scaled by that ratio round to 0, which train() refuses."""
    real = calibrate_ch11.train

    def slow_train(*args, **kwargs):          # the timing rounds, not the seed runs
        run = real(*args, **kwargs)
        if kwargs.get("max_steps") == 3 and "out_dir" not in kwargs:
            run.history["seconds"] *= 100
        return run
    monkeypatch.setattr(calibrate_ch11, "train", slow_train)
    assert calibrate_ch11.main(["--rounds", "1"]) == 0
    record = json.loads((tiny_ch11 / calibrate_ch11.NAME).read_text(encoding="utf-8"))
    assert record["steps"]["encoder_decoder"] == 1
    assert len(record["encoder_decoder_seeds"]["seed0"]["loss"]) == 1
