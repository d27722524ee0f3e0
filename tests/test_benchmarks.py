"""The benchmarks run and report; their timings are printed and recorded, never asserted.

What is asserted is what they measure: the compared implementations compute the same thing,
and a record holds what appendix A reads (machine, date, method, medians and ratios).
"""
import json
import statistics
import runpy
import subprocess
import sys

import pytest
import torch

from conftest import ROOT
from tf_tutorial.book.records import benchmark_record, load_benchmarks, load_record
from tf_tutorial.timing.clock import saved_activation_bytes
from tf_tutorial.timing.compare import (PackedQKVAttention, to_markdown, TorchCoreTransformer, compare_training_step,
                                        pack_self_attention, ratio_table, run_all, write_record, zh)


@pytest.fixture(scope="module")
def quick():
    """One quick run of every comparison (a few seconds)."""
    return run_all(quick=True, repeat=1)


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
    for row in ("nn.MultiheadAttention", "本书实现（融合路径）", "本书实现（参考路径）"):
        assert row in out
    assert "相对 PyTorch" in out


def test_bench_decode_runs_and_cached_equals_recomputed(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench_decode.py", "--d-model", "16", "--layers", "1", "--batch", "2",
                                      "--tokens", "6", "--beam", "2", "--repeat", "1"])
    runpy.run_path(str(ROOT / "benchmarks" / "bench_decode.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "greedy: KV cache" in out and "beam 2: KV cache" in out
    assert "same tokens with and without the cache: True" in out
    assert "d_model 16, d_ff 32," in out          # the cpu configuration's d_ff = 2 × d_model


def test_quick_run_has_every_comparison_and_what_it_measures_agrees(quick):
    kinds = {row["benchmark"] for row in quick["rows"]}
    assert {"attention fwd+bwd", "training step (float32)", "decode greedy", "decode beam 2"} <= kinds
    assert all(row["same_tokens"] for row in quick["rows"] if row["benchmark"].startswith("decode"))
    assert all(row["loss_gap"] < 1e-4 for row in quick["rows"] if row["benchmark"].startswith("training"))
    attn = [row for row in quick["rows"] if row["benchmark"] == "attention fwd+bwd"]
    assert {row["size"] for row in attn} == {"L=32", "L=64", "L=128"}
    assert {row["impl"] for row in attn} == {"nn.MultiheadAttention", "ours, fused path",
                                             "ours, packed QKV", "ours, reference path"}
    steps = {row["impl"] for row in quick["rows"] if row["benchmark"] == "training step (float32)"}
    assert steps == {"nn.Transformer", "ours", "ours, packed QKV"}
    assert {row["size"] for row in quick["rows"] if row["benchmark"] == "decode greedy"} == {"8 tokens",
                                                                                          "16 tokens"}


def test_a_result_names_machine_date_method_and_medians(quick):
    m = quick["machine"]
    assert m["label"].startswith(("CPU", "GPU")) and m["torch"] == torch.__version__
    assert m["slug"].startswith(("cpu-", "gpu-")) and m["date"][:2] == "20"
    assert "interleaved" in quick["method"]["timing"] and quick["method"]["repeat"] == 1
    assert quick["method"]["attention"]["lengths"] == [32, 64, 128]
    assert quick["wall_seconds"] > 0 and set(quick["load_average_1min"]) == {"before", "after"}
    for row in quick["rows"]:
        assert row["seconds"] > 0 and row["ratio"] > 0
        q1, q3 = row["ratio_quartiles"]                 # the spread of the ratio, round by round
        assert 0 < q1 <= q3
        assert len(row["round_seconds"]) >= 1 and row["seconds"] == statistics.median(row["round_seconds"])


def test_a_quick_run_is_never_a_record(quick, tmp_path):
    with pytest.raises(ValueError, match="refusing to write record .*quick run"):
        write_record(quick, tmp_path)
    assert not list(tmp_path.iterdir())
    (tmp_path / "bench-x.json").write_text(json.dumps(quick))           # written by hand: still refused
    with pytest.raises(ValueError, match="comes from a quick run"):
        load_record("bench-x.json", tmp_path)
    r = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--record"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "a quick run is not a record" in r.stderr


def test_a_full_result_round_trips_through_load_record(quick, tmp_path):
    full = {**quick, "quick": False}                                    # the shape of a full run
    path = write_record(full, tmp_path)
    assert path.name == f"bench-{quick['machine']['slug']}.json"
    assert load_record(path.name, tmp_path) == json.loads(json.dumps(full))
    assert load_benchmarks(tmp_path) == {path.name: load_record(path.name, tmp_path)}
    on_gpu = {**full, "machine": {**full["machine"], "device": "cuda"}}
    (tmp_path / "gpu.json").write_text(json.dumps({"run": {}, "benchmarks": on_gpu}))
    assert list(load_benchmarks(tmp_path)) == [path.name, "gpu.json"]
    assert benchmark_record("cpu", tmp_path) == load_record(path.name, tmp_path)
    assert benchmark_record("cuda", tmp_path) == json.loads(json.dumps(on_gpu))
    assert benchmark_record("mps", tmp_path) is None
    # a second record for one device would be silently ignored (the pages take the first)
    (tmp_path / "bench-another-cpu.json").write_text(json.dumps(full))
    with pytest.raises(ValueError, match=r"holds 2 benchmark records for device 'cpu' "
                                         r"\(bench-another-cpu.json, bench-.*\.json\)"):
        load_benchmarks(tmp_path)


def test_committed_benchmark_records_are_full_runs_with_every_field():
    records = load_benchmarks(ROOT / "book" / "records")
    assert any(r["machine"]["device"] == "cpu" for r in records.values()), "no CPU record committed"
    for name, r in records.items():
        assert r["quick"] is False and r["method"]["attention"]["lengths"] == [64, 256, 1024], name
        assert {"label", "torch", "date", "threads"} <= set(r["machine"]), name
        assert all(row["same_tokens"] for row in r["rows"] if row["benchmark"].startswith("decode")), name


def test_python_m_benchmarks_quick_writes_json_and_markdown(tmp_path):
    r = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--repeat", "1", "--out", str(tmp_path)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads((tmp_path / "benchmarks.json").read_text(encoding="utf-8"))
    assert result["quick"] is True and result["rows"]
    md = (tmp_path / "benchmarks.md").read_text(encoding="utf-8")
    assert md.startswith("机器：") and "\n**注意力（前向 + 反向）**\n" in md
    assert "| L=128 | 本书实现（参考路径） |" in md
    # one table per benchmark; a memory column only where its rows have one
    tables = md.split("\n\n**")[1:]
    assert len(tables) == len({r["benchmark"] for r in result["rows"]})
    attention = next(t for t in tables if t.startswith("注意力（前向 + 反向）"))
    decoding = next(t for t in tables if t.startswith("贪心解码"))
    assert "保存的激活（MiB）" in attention and "MiB" not in decoding
    paths = next(t for t in tables if t.startswith("注意力的三条路径"))   # 2 rounds in a quick run
    assert "逐轮比值的最小–最大" in paths and "四分位" not in paths
    old = {**result, "rows": [{k: v for k, v in r.items() if k != "ratio_quartiles"}
                              for r in result["rows"]]}           # a record from before the spread
    assert "四分位" not in to_markdown(old) and "| L=128 | 本书实现（参考路径） |" in to_markdown(old)
    row = next(r for r in result["rows"] if r["impl"] == "ours, reference path")
    q1, q3 = row["ratio_quartiles"]
    assert f"| {row['ratio']:.2f}× | {q1:.2f}–{q3:.2f} |" in md   # the spread beside the ratio


@pytest.mark.parametrize("args, message", [
    (["--repeat", "0"], "argument --repeat: expected a positive integer, but got '0'"),   # 0 meant the default
    (["--threads", "-1"], "argument --threads: expected a positive integer, but got '-1'"),
    (["--device", "bogus"], "--device 'bogus': expected cpu, cuda, cuda:N or another torch device"),
])
def test_python_m_benchmarks_refuses_bad_flags_before_measuring(args, message, capsys, monkeypatch):
    import benchmarks.__main__ as cli
    monkeypatch.setattr(cli, "run_all", lambda **kw: pytest.fail("measured"))
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--quick", *args])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and message in err and "Traceback" not in err


def test_python_m_benchmarks_checks_out_before_measuring(tmp_path, capsys, monkeypatch):
    import benchmarks.__main__ as cli
    monkeypatch.setattr(cli, "run_all", lambda **kw: pytest.fail("measured"))
    afile = tmp_path / "a-file"
    afile.write_text("")
    with pytest.raises(SystemExit) as exit_info:     # once: minutes of measuring, then FileExistsError
        cli.main(["--quick", "--out", str(afile)])
    assert exit_info.value.code == 2 and f"--out {afile}: not a directory" in capsys.readouterr().err
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            cli.main(["--quick", "--device", "cuda"])
        assert "--device cuda: no CUDA GPU is available" in capsys.readouterr().err


def test_a_table_of_eight_rounds_or_more_gives_quartiles_and_fewer_the_range():
    """Between the quartiles of 6 rounds lie only the middle 2: the book shows the range below 8."""
    from tf_tutorial.timing.compare import round_ratios

    def result(rounds):
        base = [1.0] * len(rounds)
        rows = [{"benchmark": "norm fwd+bwd", "size": "(1, 2, 3)", "impl": impl, "seconds": statistics.median(t),
                 "ratio": statistics.median(t) / 1.0, "round_seconds": t,
                 "ratio_quartiles": tuple(statistics.quantiles(t, n=4, method="inclusive")[::2])}
                for impl, t in (("nn.LayerNorm", base), ("nn.RMSNorm", rounds))]
        return {"machine": {"label": "x"}, "rows": rows}
    eight = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]              # quartiles 2.75-6.25: half inside
    assert "| 逐轮比值的四分位 |" in to_markdown(result(eight)) and "| 2.75–6.25 |" in to_markdown(result(eight))
    for fewer in (eight[:6], eight[:7]):                            # 2 of 6, 3 of 7 inside: the range
        table = to_markdown(result(fewer))
        assert "| 逐轮比值的最小–最大 |" in table and f"| 1.00–{fewer[-1]:.2f} |" in table
    three = to_markdown(result([1.0, 2.0, 9.0]))
    assert "| 逐轮比值的最小–最大 |" in three and "| 1.00–9.00 |" in three
    rows = result([2.0, 4.0])["rows"]
    assert round_ratios(rows[1], rows[0]) == [2.0, 4.0]
    with pytest.raises(ValueError, match="'nn.RMSNorm' has 2 rounds but its base 'nn.LayerNorm' has 3"):
        round_ratios(rows[1], {**rows[0], "round_seconds": [1.0] * 3})


def test_labels_are_chinese_and_identifiers_stay():
    assert zh("ours, fused path") == "本书实现（融合路径）"
    assert zh("nn.MultiheadAttention") == "nn.MultiheadAttention"
    assert zh("training step (bf16 autocast)") == "训练步（bf16 自动混合精度）"
    assert zh("decode beam 4") == "束搜索解码（k = 4）" and zh("64 tokens") == "64 个词元"
    table = ratio_table({"nn.MultiheadAttention": (0.002, 2**20), "ours, fused path": (0.001, 2**20)})
    assert "本书实现（融合路径）：1.00，0.50×" in table


def test_packed_qkv_computes_what_our_attention_computes():
    from tf_tutorial.multihead import MultiHeadAttention
    torch.manual_seed(0)
    ours = MultiHeadAttention(12, 3).double()
    packed = PackedQKVAttention(ours)
    assert not hasattr(packed, "w_q") and packed.w_qkv.weight.shape == (36, 12)
    x = torch.randn(2, 7, 12, dtype=torch.double)
    allowed = torch.rand(2, 7, 7) > 0.3
    assert torch.allclose(packed(x, x, x, allowed), ours(x, x, x, allowed), atol=1e-12)
    with pytest.raises(ValueError, match="self-attention"):
        packed(x, x.clone(), x)


def test_pack_self_attention_keeps_the_model_function():
    from tf_tutorial.model import Transformer, TransformerConfig
    torch.manual_seed(0)
    ours = Transformer(TransformerConfig(31, 31, 12, 3, 2, 20, dropout=0.0)).double().eval()
    src, tgt = torch.randint(4, 31, (3, 7)), torch.randint(4, 31, (3, 5))
    src[1, 4:] = 0
    import copy
    packed = pack_self_attention(copy.deepcopy(ours))
    n_packed = sum(isinstance(m, PackedQKVAttention) for m in packed.modules())
    assert n_packed == 4                                   # 2 encoder + 2 decoder self-attentions
    with torch.no_grad():
        assert torch.allclose(packed(src, tgt), ours(src, tgt), atol=1e-10)
    r = compare_training_step(d_model=12, n_heads=3, n_layers=1, d_ff=20, vocab=31, batch=4, length=6,
                              repeat=1, packed=True)
    assert r["loss_gap"] < 1e-5 and set(r) == {"nn.Transformer", "ours", "ours, packed QKV", "loss_gap"}


def test_torch_core_baseline_computes_what_our_model_computes():
    from tf_tutorial.interop import from_torch
    from tf_tutorial.model import Transformer, TransformerConfig
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


def test_quick_run_has_chapter_12s_rows_and_the_tiled_path_is_small(quick):
    norms = {row["impl"] for row in quick["rows"] if row["benchmark"] == "norm fwd+bwd"}
    assert norms == {"nn.LayerNorm", "ours, LayerNorm", "nn.RMSNorm", "ours, RMSNorm"}
    paths = [row for row in quick["rows"] if row["benchmark"] == "attention paths (forward)"]
    by = {(row["size"], row["impl"]): row["largest_tensor_bytes"] for row in paths}
    for L in (32, 64):
        # the reference path holds the (H, L, L) scores; the tiled path never more than L×d_k or a tile
        assert by[f"L={L}", "ours, reference path"] >= 2 * L * L * 4
        assert by[f"L={L}", "ours, tiled (flash)"] <= max(2 * L * 16, 2 * 16 * 16) * 4


def test_quick_run_has_chapter_1s_recurrence_rows(quick):
    from tf_tutorial.timing.compare import RECURRENCE, zh

    rows = [row for row in quick["rows"] if row["benchmark"] == RECURRENCE]
    assert {(row["size"], row["impl"]) for row in rows} == {
        (f"L={L}", impl) for L in (16, 32)
        for impl in ("nn.RNN", "ours, ElmanRNN", "F.scaled_dot_product_attention")}
    for row in rows:   # nn.RNN is each length's base
        assert row["seconds"] > 0 and len(row["round_seconds"]) == 2
        if row["impl"] == "nn.RNN":
            assert row["ratio"] == 1.0
    assert zh(RECURRENCE) != RECURRENCE and zh("ours, ElmanRNN") != "ours, ElmanRNN"


def test_largest_tensor_bytes_sees_the_biggest_intermediate():
    from tf_tutorial.timing.clock import largest_tensor_bytes
    x = torch.randn(10, 3)
    assert largest_tensor_bytes(lambda: x @ x.T) == 10 * 10 * 4           # the (10, 10) product
    assert largest_tensor_bytes(lambda: (x @ x.T).sum()) == 10 * 10 * 4   # gone by the end, still seen


def test_operation_names_counts_a_fused_kernel_once():
    from tf_tutorial.timing.clock import operation_names
    x = torch.randn(3, 4)
    assert operation_names(lambda: torch.nn.functional.layer_norm(x, (4,))) == ["native_layer_norm.default"]
    assert len(operation_names(lambda: (x * 2).sum())) == 2


def test_tensor_traffic_bytes_counts_what_each_operation_reads_and_writes_but_not_views():
    from tf_tutorial.timing.clock import operation_names, tensor_traffic_bytes
    x, y = torch.randn(10, 3), torch.randn(10, 3)
    b = 10 * 3 * 4
    assert tensor_traffic_bytes(lambda: x + y) == 3 * b                   # reads two, writes one
    assert tensor_traffic_bytes(lambda: (x + y) * 2) == 3 * b + 2 * b     # the sum goes through memory
    assert tensor_traffic_bytes(lambda: x.view(30).t()) == 0              # views move no data
    assert tensor_traffic_bytes(lambda: (x * 2).sum()) == 2 * b + b + 4   # mul, then sum to one float
    batched = torch.randn(2, 10, 3)                      # @ on 3-D: a bmm, then an _unsafe_view of its output
    w = torch.randn(3, 5)
    assert "_unsafe_view.default" in operation_names(lambda: batched @ w)
    assert tensor_traffic_bytes(lambda: batched @ w) == (2 * 10 * 3 + 3 * 5 + 2 * 10 * 5) * 4
    z = torch.zeros(10, 3)
    assert tensor_traffic_bytes(lambda: z.add_(x)) == 3 * b                # in place: reads z and x, writes z


def test_compare_attention_and_ratio_table_refuse_bad_input_by_name():
    from tf_tutorial.timing.compare import compare_attention, ratio_table
    with pytest.raises(ValueError, match=r"d_model=10 is not divisible by n_heads=3"):
        compare_attention(batch=2, length=4, d_model=10, n_heads=3, repeat=1)   # was an AssertionError
    with pytest.raises(ValueError, match=r"repeat must be a positive integer, but got 0"):
        compare_attention(batch=2, length=4, d_model=8, n_heads=2, repeat=0)
    with pytest.raises(ValueError, match=r"ratio_table needs .* but got an empty dict"):
        ratio_table({})                                                         # was StopIteration
    table = ratio_table(compare_attention(batch=2, length=4, d_model=8, n_heads=2, repeat=1))
    assert table.count("\n") == 3 and "1.00×" in table


def test_the_full_sizes_time_whole_williams_blocks(quick):
    """Every group of the full record runs a whole number of Williams blocks (n rounds, 2n for odd n)."""
    from tf_tutorial.timing.clock import williams_orders
    from tf_tutorial.timing.compare import SIZES
    full = SIZES["full"]
    own = {"attention paths (forward)": "attention_paths", "recurrence and attention (forward)": "recurrence"}
    groups = {}
    for row in quick["rows"]:
        groups.setdefault((row["benchmark"], row["size"]), set()).add(row["impl"])
    assert len(groups) >= 8
    for (benchmark, _), impls in groups.items():
        key = own.get(benchmark)
        rounds = full[key]["repeat"] if key else full["repeat"]
        block = len(williams_orders(len(impls)))
        assert block == (len(impls) if len(impls) % 2 == 0 else 2 * len(impls))
        assert rounds % block == 0, (benchmark, len(impls), rounds)
