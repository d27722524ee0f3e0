"""scripts/gpu_run.py on the CPU (--dry-run): the GPU record's code path, minus the GPU; and reading records."""
import dataclasses
import json
import re

import pytest
import torch

from tf_tutorial.book.records import load_record


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    from scripts.gpu_run import main
    out = tmp_path_factory.mktemp("gpu")
    return main([str(out), "--dry-run"]), out


def test_dry_run_writes_every_stage_of_the_record(dry_run):
    record, out = dry_run
    saved = json.loads((out / "gpu-dry-run.json").read_text(encoding="utf-8"))
    assert saved["stages_done"] == ["train", "scores", "sdpa", "kv_cache", "fp16", "syncs", "ch11",
                                   "resume", "benchmarks", "compile"]
    times = saved["stage_seconds"]                             # to plan the device's 15 minutes
    assert list(times) == saved["stages_done"] and min(times.values()) >= 0 and sum(times.values()) > 0
    assert saved["dry_run"] is True and saved["precision"] == "bfloat16"
    assert not (out / "gpu.json").exists()                     # a dry run is never written as the record
    run = saved["run"]
    assert run["steps"] == 12 and run["tokens_per_s"] > 0 and run["curves"]["eval_step"] == [6, 12]
    assert 0 < run["eval_seconds"] < run["train_seconds"]      # two validations, inside the rate
    # what the book needs to tell this run from one measured before training turned cuDNN off
    from tf_tutorial.train import GPU_SECONDS                 # chapter 10's budget is the default
    assert run["budget_seconds"] == GPU_SECONDS and run["cudnn_attention"] is False
    assert saved["ch11"]["cudnn_attention"] is False
    assert len(run["curves"]["loss"]) == 12 and saved["machine"]["torch"]
    during = run["test_during_training"]                       # when the run reached its score
    assert [d["step"] for d in during] == [6, 12]
    assert 0 < during[0]["train_seconds"] < during[1]["train_seconds"] <= run["train_seconds"]
    assert during[-1]["exact_match"] == saved["scores"]["test_greedy"]["exact_match"]
    for split in ("test", "longer", "deeper"):
        for decoder in ("greedy", "beam4"):
            assert 0 <= saved["scores"][f"{split}_{decoder}"]["exact_match"] <= 1
    assert saved["kv_cache"]["same_tokens"] is True
    assert saved["kv_cache"]["sizes"] == {"batch": 4, "tokens": 16, "beam_size": 4, "src_len": 20,
                                          "vocab": 1000}     # the sizes the book states, recorded
    assert saved["fp16_check"]["all_finite"] and saved["fp16_check"]["steps"] == 4
    syncs = saved["sync_check"]           # on a CPU it counts optimiser steps: one per step, both loops
    assert syncs["steps"] == [2, 3, 4] and syncs["counted_by"].startswith("steps_run")
    for loop in ("train", "train_continuation"):
        assert syncs[loop] == {"syncs": [2, 3, 4], "linear": True, "per_step": 1.0}
    resume = saved["resume_check"]                             # stopped after 2 of 4 steps, with dropout
    assert resume["resumed_at"] == 2 and resume["dropout"] > 0
    assert resume["max_rel_loss_gap_after_resume"] < 1e-5
    assert saved["compile_check"]["max_rel_loss_gap_first_20"] < 1e-5
    sdpa = saved["sdpa_check"]                                 # cuDNN's attention off, then on twice
    assert list(sdpa) == ["steps", "without_cudnn", "cudnn_new_shapes", "cudnn_seen_shapes"]
    assert all(sdpa[k]["steps_per_s"] > 0 and sdpa[k]["backend"] == "MATH" for k in list(sdpa)[1:])
    bench = saved["benchmarks"]                                # appendix A's rows, from run_all
    assert bench["quick"] is True and bench["machine"] == {**saved["machine"], "date": bench["machine"]["date"]}
    assert {"attention fwd+bwd", "training step (float32)", "decode greedy"} <= {r["benchmark"] for r in bench["rows"]}


def test_dry_run_compares_the_two_architectures_of_chapter_11(dry_run):
    record, _ = dry_run
    ch11 = record["ch11"]
    ed, gpt = ch11["encoder_decoder"], ch11["decoder_only"]
    assert ch11["train_config"]["norm_first"] is True and ch11["gpt_config"]["norm_first"] is True
    assert abs(gpt["parameters"] - ed["parameters"]) / ed["parameters"] < 0.15     # as many parameters
    assert ch11["gpt_config"]["n_layers"] > ch11["train_config"]["n_layers"]      # in more layers
    for model in (ed, gpt):
        assert model["steps"] >= 1 and model["train_seconds"] > 0
        for split in ("test", "longer", "deeper"):
            assert 0 <= model[split]["exact_match"] <= 1 and model[split]["bleu"] >= 0


def test_the_record_describes_the_machine_with_the_package_function(dry_run):
    record, _ = dry_run
    m = record["machine"]
    assert {"name", "torch", "python", "date", "label", "slug", "threads"} <= set(m)
    assert m["device"] == "cpu" and m["slug"].startswith("cpu-")
    import scripts.gpu_run as g
    from pathlib import Path
    assert not hasattr(g, "machine") and "perf_counter" not in Path(g.__file__).read_text(encoding="utf-8")


def test_a_second_call_adds_the_stages_the_first_left(tmp_path):
    from scripts.gpu_run import main
    main([str(tmp_path / "a"), "--dry-run", "--stages", "train,scores,kv_cache"])
    first = json.loads((tmp_path / "a" / "gpu-dry-run.json").read_text(encoding="utf-8"))
    assert first["stages_done"] == ["train", "scores", "kv_cache"] and "fp16_check" not in first
    merged = main([str(tmp_path / "b"), "--dry-run", "--stages", "fp16,kv_cache",
                   "--merge", str(tmp_path / "a" / "gpu-dry-run.json")])
    assert merged["stages_done"] == ["train", "scores", "kv_cache", "fp16"]       # kv_cache taken again
    assert merged["run"] == first["run"] and merged["scores"] == first["scores"]   # kept from the first
    assert merged["fp16_check"]["steps"] == 4 and set(merged["stage_seconds"]) == set(merged["stages_done"])
    retrained = main([str(tmp_path / "c"), "--dry-run", "--stages", "train",
                      "--merge", str(tmp_path / "a" / "gpu-dry-run.json")])
    assert "scores" not in retrained and retrained["stages_done"] == ["train", "kv_cache"]   # not a stale score


def test_a_failing_stage_is_recorded_and_the_rest_still_run(tmp_path, monkeypatch):
    import scripts.gpu_run as g

    def broken(*args, **kwargs):
        raise RuntimeError("CUDA error: an illegal memory access")
    monkeypatch.setattr(g, "train", broken)
    record = g.main([str(tmp_path), "--dry-run", "--stages", "train,scores,kv_cache"])
    assert record["stages_done"] == ["kv_cache"]                            # still measured
    last = g.main([str(tmp_path / "last"), "--dry-run", "--stages", "train"])  # the last stage fails
    assert "train" in json.loads((tmp_path / "last" / "gpu-dry-run.json").read_text())["stage_errors"]
    assert "stages_done" not in last
    assert record["stage_errors"] == {"train": "RuntimeError: CUDA error: an illegal memory access",
                                      "scores": "RuntimeError: no model to score: the train stage "
                                                "did not finish"}
    saved = json.loads((tmp_path / "gpu-dry-run.json").read_text(encoding="utf-8"))
    assert saved["stage_errors"] == record["stage_errors"]


def test_the_machine_is_written_before_the_first_stage_in_case_it_dies_hard(tmp_path, monkeypatch):
    import scripts.gpu_run as g

    def killed(*args, **kwargs):        # what no except clause catches (a kill, an interrupt)
        raise KeyboardInterrupt
    monkeypatch.setattr(g, "train", killed)
    with pytest.raises(KeyboardInterrupt):
        g.main([str(tmp_path), "--dry-run", "--stages", "train"])
    saved = json.loads((tmp_path / "gpu-dry-run.json").read_text(encoding="utf-8"))
    assert saved["machine"]["device"] and "stages_done" not in saved


@pytest.mark.parametrize("stages, message", [
    ("train,warp", "expected names from train, scores, .* got warp"),
    ("scores", "'scores' scores the model that 'train' trains in the same run"),
    (",", "expected names from"),
])
def test_bad_stages_are_refused_by_name(stages, message, capsys):
    from scripts.gpu_run import main
    with pytest.raises(SystemExit):
        main(["out", "--dry-run", "--stages", stages])
    assert re.search(message, capsys.readouterr().err)


def test_a_merge_keeps_one_machine(tmp_path):
    from scripts.gpu_run import main
    other = tmp_path / "gpu.json"
    other.write_text(json.dumps({"dry_run": False, "machine": {"name": "NVIDIA H200"}, "stages_done": []}))
    with pytest.raises(SystemExit, match="measured on 'NVIDIA H200', this run is on .* \\(dry run\\)"):
        main([str(tmp_path / "out"), "--dry-run", "--stages", "kv_cache", "--merge", str(other)])
    with pytest.raises(SystemExit, match="--merge .*missing.json: no such file"):
        main([str(tmp_path / "out"), "--dry-run", "--stages", "kv_cache", "--merge", str(tmp_path / "missing.json")])


def test_a_merge_keeps_one_corpus(dry_run, tmp_path):
    from scripts.gpu_run import main
    from tf_tutorial.corpus.data import CORPUS_VERSION
    _, out = dry_run
    record = json.loads((out / "gpu-dry-run.json").read_text(encoding="utf-8"))
    assert record["corpus_version"] == CORPUS_VERSION
    older = tmp_path / "older.json"
    older.write_text(json.dumps({**record, "corpus_version": CORPUS_VERSION - 1}))
    with pytest.raises(SystemExit, match=f"trained on corpus version {CORPUS_VERSION - 1}, and this code "
                                         f"generates version {CORPUS_VERSION}"):
        main([str(tmp_path / "out"), "--dry-run", "--stages", "kv_cache", "--merge", str(older)])
    unnamed = tmp_path / "unnamed.json"            # taken before the version was written: version 1
    unnamed.write_text(json.dumps({k: v for k, v in record.items() if k != "corpus_version"}))
    assert CORPUS_VERSION > 1                     # so a version-1 record is an older one
    with pytest.raises(SystemExit, match="trained on corpus version 1,"):
        main([str(tmp_path / "out"), "--dry-run", "--stages", "kv_cache", "--merge", str(unnamed)])


def test_load_record(dry_run, tmp_path):
    _, out = dry_run
    assert load_record("gpu.json", tmp_path) is None                      # not taken yet
    with pytest.raises(ValueError, match="comes from a dry run"):
        load_record("gpu-dry-run.json", out)
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="should hold a JSON object, but holds list"):
        load_record("bad.json", tmp_path)
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ValueError, match="is not valid JSON"):
        load_record("broken.json", tmp_path)
    (tmp_path / "latin1.json").write_bytes(b'{"a": "\xff"}')       # not UTF-8: the error names the file
    with pytest.raises(ValueError, match=r"record .*latin1\.json is not valid JSON"):
        load_record("latin1.json", tmp_path)
    from tf_tutorial.book.records import save_record
    with pytest.raises(TypeError, match="^record x.json must be a dict \\(a JSON object\\), but got list$"):
        save_record("x.json", [1, 2], tmp_path)
    (tmp_path / "gpu.json").write_text(json.dumps({"run": {"steps": 3}}))
    assert load_record("gpu.json", tmp_path) == {"run": {"steps": 3}}


def test_a_deadline_skips_the_stages_that_no_longer_fit(tmp_path, monkeypatch):
    import types

    import scripts.gpu_run as gpu_run
    from scripts.gpu_run import main
    # the script's wall clock, faked: 6 s pass between one reading and the next, however busy
    # the machine is (the usual needs: kv_cache about 20 s, fp16 about 45 s)
    readings = iter(range(0, 1000, 6))
    monkeypatch.setattr(gpu_run, "time", types.SimpleNamespace(monotonic=lambda: float(next(readings))))
    record = main([str(tmp_path), "--dry-run", "--stages", "kv_cache,fp16", "--deadline", "50"])
    assert record["stages_done"] == ["kv_cache"]        # 44 s left: it fits; then 38 s: fp16 does not
    assert record["stages_skipped"] == {"fp16": "needs about 45 s, 38 s were left"}
    saved = json.loads((tmp_path / "gpu-dry-run.json").read_text(encoding="utf-8"))
    assert saved["stages_skipped"] == record["stages_skipped"]
    # given time, a later call takes the stage and forgets the skip
    merged = main([str(tmp_path / "b"), "--dry-run", "--stages", "fp16", "--deadline", "100",
                   "--merge", str(tmp_path / "gpu-dry-run.json")])
    assert merged["stages_done"] == ["kv_cache", "fp16"] and merged["stages_skipped"] == {}


def test_the_record_is_strict_json_written_whole(tmp_path):
    from scripts.gpu_run import write_record
    path = tmp_path / "gpu.json"
    write_record(path, {"loss": [1.5, float("nan"), float("inf")], "gap": {"x": float("-inf")}, "n": 3})
    text = path.read_text(encoding="utf-8")
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} is not strict JSON")) == {
        "loss": [1.5, None, None], "gap": {"x": None}, "n": 3}
    assert [p.name for p in tmp_path.iterdir()] == ["gpu.json"]        # no temporary file left


def test_every_record_is_strict_json(tmp_path):
    """save_record (the calibration scripts, the benchmarks) writes NaN and infinities as null too."""
    from tf_tutorial.book.records import save_record
    path = save_record("x.json", {"runs": {"diverged": {"valid_loss": float("nan"), "gap": float("inf")}}},
                       tmp_path)
    strict = json.loads(path.read_text(encoding="utf-8"),
                        parse_constant=lambda c: pytest.fail(f"{c} is not strict JSON"))
    assert strict == {"runs": {"diverged": {"valid_loss": None, "gap": None}}}
    assert load_record("x.json", tmp_path) == strict


def test_the_sdpa_stage_measures_cudnn_on_and_leaves_training_with_it_off(monkeypatch):
    """The stage lets train() use cuDNN's attention for its two 'cudnn' runs only, and puts the
    switch back even when a run fails."""
    import dataclasses

    import torch

    import scripts.gpu_run as G
    import tf_tutorial.train as T
    from tf_tutorial.corpus.data import make_corpus

    seen = []
    real = G.train

    def spy(*args, **kwargs):           # the flag as train() will set it
        with T.varying_shapes():
            seen.append(torch.backends.cuda.cudnn_sdp_enabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(G, "train", spy)
    corpus = make_corpus(300, n_valid=10, n_test=5, n_longer=1, n_deeper=1, seed=0)
    cfg = dataclasses.replace(T.CONFIGS["tiny"], n_train=300, eval_every=2)
    out = G.sdpa_check(cfg, "cpu", corpus, "auto", steps=2)
    assert seen == [False, True, True] and T.CUDNN_ATTENTION is False
    assert [out[k]["backend"] for k in ("without_cudnn", "cudnn_new_shapes")] == ["MATH", "MATH"]

    def cudnn_fails(*args, **kwargs):  # cuDNN's attention failing is a finding, not a lost stage
        if T.CUDNN_ATTENTION:
            raise RuntimeError("cuDNN plan failed")
        return real(*args, **kwargs)
    monkeypatch.setattr(G, "train", cudnn_fails)
    out = G.sdpa_check(cfg, "cpu", corpus, "auto", steps=2)
    assert out["without_cudnn"]["steps_per_s"] > 0                          # the run that worked is kept
    assert out["cudnn_new_shapes"] == out["cudnn_seen_shapes"] == {
        "backend": "MATH", "error": "RuntimeError: cuDNN plan failed"}
    assert T.CUDNN_ATTENTION is False

    def broken(*args, **kwargs):
        raise RuntimeError("device bug")
    monkeypatch.setattr(G, "train", broken)
    with pytest.raises(RuntimeError, match="^device bug$"):   # without cuDNN, train()'s own path: it comes out
        G.sdpa_check(cfg, "cpu", corpus, "auto", steps=2)
    assert T.CUDNN_ATTENTION is False


def test_a_variant_of_the_recipe_is_trained_and_scored_as_it_goes(tmp_path):
    from scripts.gpu_run import main
    record = main([str(tmp_path), "--dry-run", "--stages", "train,variant", "--variant",
                   "dropout=0,batch_size=16,norm_first=true"])
    assert record["stages_done"] == ["train", "variant"]
    v = record["variants"]["dropout=0.0,batch_size=16,norm_first=True"]
    assert v["changes"] == {"dropout": 0.0, "batch_size": 16, "norm_first": True}
    assert v["steps"] == 12 and [d["step"] for d in v["test_during_training"]] == [6, 12]
    assert v["budget_seconds"] == 120.0 and v["cudnn_attention"] is False
    # the main run is untouched by the variant: a different recipe, a different run
    assert record["run"]["config"]["dropout"] > 0 and record["run"]["config"]["norm_first"] is False
    assert "variants" not in main([str(tmp_path / "plain"), "--dry-run", "--stages", "train"])


@pytest.mark.parametrize("args, message", [
    (["--stages", "variant"], "--stages variant: say which change to try with --variant"),
    (["--variant", "colour=red"], "expected NAME=VALUE pairs, NAME one of d_model, .*; got 'colour=red'"),
    (["--variant", "n_train=5"], "got 'n_train=5'"),             # the variant shares the main corpus
    (["--variant", "dropout"], "got 'dropout'"),
    (["--variant", "d_model=wide"], "d_model='wide' is not an integer"),
    (["--variant", "norm_first=yes"], "norm_first='yes' is not true or false"),
    (["--variant", ","], "expected at least one NAME=VALUE"),
    (["--variant", "lr_scale=-1"], "lr_scale must be positive, but got -1.0"),  # TrainConfig's
    (["--variant", "dropout=1.5"], r"dropout must be in \[0, 1\), but got 1.5"),
    (["--variant", "dropout=0", "--variant-seconds", "0"], "--variant-seconds must be positive, but got 0.0"),
    (["--variant", "dropout=0.1,dropout=0.2"], "dropout is given twice"),
])
def test_bad_variants_are_refused_by_name(args, message, capsys):
    from scripts.gpu_run import main
    with pytest.raises(SystemExit):
        main(["out", "--dry-run", *args])
    assert re.search(message, capsys.readouterr().err)


def test_a_variant_in_sentences_drops_the_gpu_presets_token_budget(monkeypatch):
    """batch_tokens wins whenever it is set: a batch_size variant of the gpu preset (8000 tokens)
    trained the main recipe unchanged, under another name. The variant stage trains
    cfg.with_changes(**changes), which drops the token budget."""
    from scripts import gpu_run
    from tf_tutorial.train import CONFIGS
    assert CONFIGS["gpu"].batch_tokens is not None
    trained = []
    def fake_train(cfg, **kw):
        trained.append(cfg)
        raise RuntimeError("stop here")
    monkeypatch.setattr(gpu_run, "train", fake_train)
    with pytest.raises(RuntimeError, match="stop here"):
        gpu_run.variant_run(CONFIGS["gpu"], None, "cpu", "fp32", 1.0, gpu_run.overrides("batch_size=512"))
    assert trained[0].batch_size == 512 and trained[0].batch_tokens is None


@pytest.mark.parametrize("args, message", [
    (["--seconds", "0"], "--seconds must be positive, but got 0.0"),
    (["--seconds", "nan"], "--seconds must be positive, but got nan"),
    (["--seconds", "inf"], "--seconds must be finite, but got inf"),
    (["--seconds", "soon"], "--seconds must be a number of seconds, but got 'soon'"),
    (["--deadline", "-1"], "--deadline must be positive, but got -1.0"),
    (["--ch11-seconds", "-5"], r"--ch11-seconds must be positive, but got -5.0 \(0 leaves the stage out\)"),
    (["--stages", "ch11", "--ch11-seconds", "0"], "--stages ch11: nothing left to run"),
])
def test_bad_budgets_are_refused_before_anything_runs(args, message, capsys):
    from scripts.gpu_run import main
    with pytest.raises(SystemExit):
        main(["out", "--dry-run", *args])
    assert re.search(message, capsys.readouterr().err)


def test_an_out_that_is_a_file_is_refused_before_anything_runs(tmp_path, capsys):
    from scripts.gpu_run import main
    afile = tmp_path / "record.json"
    afile.write_text("{}")
    with pytest.raises(SystemExit):
        main([str(afile), "--dry-run"])
    assert f"out {afile}: not a directory" in capsys.readouterr().err


def test_progress_within_compares_two_runs_at_equal_time():
    from tf_tutorial.book.records import progress_within
    during = [{"step": s, "train_seconds": t, "exact_match": em, "bleu": 0.0}
              for s, t, em in [(500, 30.0, 0.90), (1000, 60.0, 0.985), (1500, 90.0, 0.992),
                               (2000, 120.0, 0.992), (2500, 150.0, 0.99)]]
    whole = progress_within(during)
    assert whole["best"]["step"] == 1500 and whole["first_hit"]["step"] == 1500   # the first of a tie
    early = progress_within(during, seconds=89.0)           # the 90 s evaluation came too late
    assert early["best"]["step"] == 1000 and early["first_hit"] is None
    assert progress_within(during, seconds=90.0)["first_hit"]["step"] == 1500
    assert progress_within(during, target=0.95)["first_hit"]["step"] == 1000
    assert progress_within(during, seconds=10.0) is None and progress_within([]) is None
    with pytest.raises(ValueError, match=r"target=99 must be in \(0, 1\]"):
        progress_within(during, target=99)


def test_sync_count_counts_the_warnings_of_the_sync_debug_mode(monkeypatch):
    """On a GPU each wait warns once in 'warn' mode; the count keeps those and only those, and the
    mode is set back even when the run raises."""
    import warnings

    from scripts.gpu_run import sync_count

    modes = []
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", modes.append)
    monkeypatch.setattr(torch.cuda, "get_sync_debug_mode", lambda: 2)     # "error", set by someone

    def run():
        for _ in range(3):
            warnings.warn("called a synchronizing CUDA operation")
        warnings.warn("something else")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # seen once before: counted all the same
        warnings.warn("called a synchronizing CUDA operation")
        assert sync_count(run) == 3
    assert modes == ["warn", 2]                    # the mode it found, set back
    with pytest.raises(ZeroDivisionError):
        sync_count(lambda: 1 / 0)
    assert modes[-1] == 2


def test_sync_check_takes_the_per_step_difference(monkeypatch):
    """Set-up and end cost the same at both lengths, so they cancel: a loop with 5 waits of set-up
    and 2 a step gives 2 per step. Bad step counts are refused by name."""
    from scripts.gpu_run import steps_run, sync_check
    from tf_tutorial.corpus.data import make_corpus
    from tf_tutorial.train import CONFIGS

    cfg = dataclasses.replace(CONFIGS["tiny"], n_train=300, steps=12, eval_every=6)
    corpus = make_corpus(cfg.n_train, n_valid=8, n_test=4, n_longer=2, n_deeper=2, seed=cfg.seed)

    def fake(run):
        return 5 + 2 * steps_run(run)

    fake.__name__ = "fake"
    out = sync_check(cfg, "cpu", corpus, "fp32", (1, 2, 3), fake)
    assert out["train"] == {"syncs": [7, 9, 11], "linear": True, "per_step": 2.0}
    assert out["train_continuation"] == {"syncs": [7, 9, 11], "linear": True, "per_step": 2.0}

    def every_other(run):                       # a wait every second step: no steady rate
        return steps_run(run) // 2

    every_other.__name__ = "every_other"
    out = sync_check(cfg, "cpu", corpus, "fp32", (1, 2, 3), every_other)
    assert out["train"] == {"syncs": [0, 1, 1], "linear": False, "per_step": None}
    for bad in ((3, 3, 3), (0, 1, 2), (4, 2, 0), (1, 2, 4), (1, 2)):
        with pytest.raises(ValueError, match=r"steps must be three evenly spaced step counts"):
            sync_check(cfg, "cpu", corpus, "fp32", bad, fake)


def test_chapter_11_says_whether_the_waits_were_counted(dry_run):
    """Without a GPU record (or one from before the syncs stage, or a dry run, whose counts are
    optimiser steps) the chapter says the waits are inferred; with GPU counts it quotes them, the
    machine and the precision, and counts that do not grow evenly are called unclear."""
    from tf_tutorial.book.records import sync_text

    record, _ = dry_run
    gpu = {**record, "dry_run": False,
           "sync_check": {**record["sync_check"], "counted_by": "torch.cuda.set_sync_debug_mode('warn')",
                          "train": {"syncs": [4, 4, 4], "linear": True, "per_step": 0.0}}}
    for missing in (None, {k: v for k, v in gpu.items() if k != "sync_check"}, record,
                    {**gpu, "dry_run": True}):
        assert sync_text(missing).endswith("还没有在 GPU 上量过")
    text = sync_text(gpu)
    assert gpu["machine"]["name"] in text and "bfloat16" in text
    assert "训练循环每步一次也不等，本章的每步等 1 次（不算训练中的验证和进度条" in text
    uneven = {**gpu, "sync_check": {**gpu["sync_check"],
                                    "train": {"syncs": [4, 5, 5], "linear": False, "per_step": None}}}
    assert "每步几次说不清" in sync_text(uneven)
