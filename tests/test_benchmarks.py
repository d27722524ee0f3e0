"""The benchmark scripts run and report; their timings are printed, never asserted."""
import runpy
import sys

import torch

from conftest import ROOT
from tf_tutorial.bench import saved_activation_bytes


def test_saved_activation_bytes_counts_what_autograd_keeps():
    x = torch.randn(1000, requires_grad=True)
    assert saved_activation_bytes(lambda: torch.exp(x)) == 4000        # exp saves its output
    assert saved_activation_bytes(lambda: (x * 2).sum()) == 0           # scaling by a number saves nothing
    with torch.no_grad():
        assert saved_activation_bytes(lambda: torch.exp(x)) == 0


def test_bench_attention_runs_and_prints_ratios(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench_attention.py", "--batch", "2", "--length", "6",
                                      "--d-model", "12", "--heads", "3", "--repeat", "1"])
    runpy.run_path(str(ROOT / "benchmarks" / "bench_attention.py"), run_name="__main__")
    out = capsys.readouterr().out
    for row in ("nn.MultiheadAttention", "ours, fused path", "ours, reference path"):
        assert row in out
    assert "× torch" in out


def test_bench_decode_runs_and_cached_equals_recomputed(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench_decode.py", "--d-model", "16", "--layers", "1", "--batch", "2",
                                      "--tokens", "6", "--beam", "2", "--repeat", "1"])
    runpy.run_path(str(ROOT / "benchmarks" / "bench_decode.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "greedy: KV cache" in out and "beam 2: KV cache" in out
    assert "same tokens with and without the cache: True" in out
