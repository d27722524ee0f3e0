"""Chapter 1's sentence about the GPU, with and without the recurrence rows in the GPU record.

The committed record has no such rows yet (nbval renders that branch); the branch the next GPU
record will take runs here, through the chapter's own cell, on a copy with rows added.
"""
import copy

import pytest

from conftest import chapter_cell_runner, committed_record
from tf_tutorial.timing.compare import RECURRENCE, SDPA, SIZES, _recurrence_rows, attention_vs_rnn


@pytest.fixture(scope="module")
def render():
    cell = chapter_cell_runner("ch01_rnn", "from tf_tutorial.book.records import",
                               "# the GPU record's recurrence rows")

    def run(gpu):
        shown, glued = cell(load_record=lambda name: gpu)
        assert ("还没有这项对照" in glued["gpu_rnn_intro"]) == ("还没有" in glued["gpu_rnn"])
        return glued["gpu_rnn"], shown
    return run, committed_record("gpu.json")


def test_without_rows_the_sentence_says_the_gpu_has_not_measured_it(render):
    run, committed = render
    assert not any(r["benchmark"] == RECURRENCE for r in committed.get("benchmarks", {}).get("rows", []))
    for gpu in (committed, None):                 # no rows, or no record at all (Colab)
        text, shown = run(gpu)
        assert "还没有这三者的计时" in text and not shown


def test_with_rows_the_sentence_reads_the_ratios_off_the_record(render):
    run, committed = render
    gpu = copy.deepcopy(committed)
    rows = _recurrence_rows(SIZES["quick"]["recurrence"], "cpu")   # real rows, two lengths
    for r, ratio in zip([r for r in rows if r["impl"] == "F.scaled_dot_product_attention"], (0.5, 3.0)):
        r["ratio"] = ratio                        # fixed, so that the sentence is known
    gpu["benchmarks"]["rows"] += rows
    text, shown = run(gpu)
    assert "还没有" not in text
    assert "L=16 到 L=32，自注意力的用时依次是 nn.RNN 的 0.50、3.00 倍：它在 L=16 时比 nn.RNN 快" in text
    assert gpu["benchmarks"]["machine"]["date"][:10] in text and gpu["benchmarks"]["machine"]["label"] in text
    assert len(shown) == 1 and "本书的 ElmanRNN（Python 循环）" in shown[0]
    assert "逐步递推与一次算完的注意力（前向）" in shown[0]


def test_the_recurrence_rows_time_attention_on_four_dimensional_input(monkeypatch):
    """PyTorch's fused kernels take (B, H, L, d) only; a 3-D call would time its math path,
    which is what the first record did (3x slower at L=256 on this CPU)."""
    import torch.nn.functional as F
    real, dims = F.scaled_dot_product_attention, []

    def spy(q, k, v, *args, **kwargs):
        dims.append((q.dim(), k.dim(), v.dim()))
        return real(q, k, v, *args, **kwargs)
    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    _recurrence_rows(SIZES["quick"]["recurrence"], "cpu")
    assert dims and set(dims) == {(4, 4, 4)}


def test_attention_vs_rnn_reads_ratios_in_the_records_order():
    rows = [{"size": size, "impl": impl, "ratio": ratio} for size, impl, ratio in (
        ("L=64", "nn.RNN", 1.0), ("L=64", SDPA, 0.2), ("L=64", "ours, ElmanRNN", 1.5),
        ("L=1024", "nn.RNN", 1.0), ("L=1024", SDPA, 2.5), ("L=1024", "ours, ElmanRNN", 1.7))]
    by, sizes, ratios, faster = attention_vs_rnn(rows)
    assert sizes == ["L=64", "L=1024"] and ratios == [0.2, 2.5] and faster == ["L=64"]
    assert by["L=1024", "ours, ElmanRNN"] == 1.7
    assert attention_vs_rnn(rows[3:])[3] == []      # never faster: no size
