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


def test_python_m_benchmarks_quick_writes_json_and_markdown(tmp_path):
    import json
    import subprocess
    r = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--repeat", "1", "--out", str(tmp_path)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads((tmp_path / "benchmarks.json").read_text(encoding="utf-8"))
    kinds = {row["benchmark"] for row in result["rows"]}
    assert {"attention fwd+bwd", "training step (float32)", "decode greedy", "decode beam 2"} <= kinds
    assert all(row["same_tokens"] for row in result["rows"] if row["benchmark"].startswith("decode"))
    assert all(row["loss_gap"] < 1e-4 for row in result["rows"] if row["benchmark"].startswith("training"))
    attn = [row for row in result["rows"] if row["benchmark"] == "attention fwd+bwd"]
    assert {row["size"] for row in attn} == {"L=32", "L=64", "L=128"}
    md = (tmp_path / "benchmarks.md").read_text(encoding="utf-8")
    assert "| attention fwd+bwd | L=128 | ours, reference path |" in md and md.startswith("机器：")


def test_torch_core_baseline_computes_what_our_model_computes():
    from tf_tutorial.interop import from_torch
    from tf_tutorial.model import Transformer, TransformerConfig
    from tf_tutorial.perf import TorchCoreTransformer
    for norm_first in (False, True):
        torch.manual_seed(0)
        ours = Transformer(TransformerConfig(31, 31, 12, 3, 2, 20, dropout=0.0, norm_first=norm_first)).double().eval()
        ref = TorchCoreTransformer(ours).double().eval()
        ours.encoder.load_state_dict(from_torch(ref.core.encoder).state_dict())
        ours.decoder.load_state_dict(from_torch(ref.core.decoder).state_dict())
        src, tgt = torch.randint(4, 31, (3, 7)), torch.randint(4, 31, (3, 5))
        src[1, 4:] = 0
        with torch.no_grad():
            assert torch.allclose(ours(src, tgt), ref(src, tgt), atol=1e-10)
