"""Chapter 12's sentence about the attention paths on a GPU, for the committed record and the next one.

Records before 2026-12-06 do not say which kernel ``F.scaled_dot_product_attention`` ran, and have
no 16-bit row; the chapter then says it does not know. ``python -m benchmarks`` now records both
(``operators``, and on a GPU a bfloat16 row). The branch the next GPU record will take runs here,
through the chapter's own cell, on rows measured on this CPU with GPU operator names put in.
"""
import copy

import pytest
import torch

from conftest import chapter_cell_runner, committed_record
from tf_tutorial.timing.compare import SDPA, SIZES, _attention_path_rows, zh

PATHS = "attention paths (forward)"


@pytest.fixture(scope="module")
def render():
    cell = chapter_cell_runner("ch12_modern_parts", "from tf_tutorial.book.records import",
                               "# the GPU record's attention paths")

    def run(gpu, cpu=None):
        shown, glued = cell(gpu_bench=gpu, PATHS=PATHS, bench=cpu)
        return glued["gpu_paths_text"]
    return run, committed_record("gpu.json").get("benchmarks")


def test_without_a_record_the_sentence_says_so(render):
    run, _ = render
    assert run(None) == "GPU 上的计时还没有记录。"


def test_the_committed_record_says_whether_it_names_the_kernel(render):
    run, committed = render
    if committed is None:
        pytest.skip("no GPU benchmarks in the committed record")
    text = run(committed)
    fused = [r for r in committed["rows"] if r["benchmark"] == PATHS and r["impl"] == SDPA]
    assert fused and committed["machine"]["label"].removeprefix("GPU ") in text
    assert "GPU 记录（GPU " not in text                       # the label's own "GPU" is not repeated
    assert committed["machine"]["date"][:10] in text          # and when it was measured
    assert ("记录没有写下是哪一个" in text) == ("operators" not in fused[-1])


def synthetic(rows):
    """A GPU record holding ``rows``, timed with the quick sizes' blocks of 16."""
    return {"machine": {"label": "一块 GPU", "date": "2026-12-08T00:00:00+00:00"}, "rows": copy.deepcopy(rows),
            "method": {"attention_paths": SIZES["quick"]["attention_paths"]}}


@pytest.fixture(scope="module")
def measured():
    """Real rows from this CPU with a bfloat16 row, as a GPU run writes them."""
    return _attention_path_rows(SIZES["quick"]["attention_paths"], "cpu", torch.bfloat16)


def test_the_rows_name_the_operators_of_the_fused_kernel_and_time_it_in_bfloat16(measured):
    impls = {r["impl"] for r in measured}
    assert impls == {SDPA, "ours, reference path", "ours, tiled (flash)", f"{SDPA}, bfloat16"}
    for r in measured:
        if r["impl"].startswith(SDPA):
            assert r["operators"] == ["_scaled_dot_product_flash_attention_for_cpu.default"], r
        else:
            assert "operators" not in r
    half = [r for r in measured if r["impl"] == f"{SDPA}, bfloat16"]
    full = [r for r in measured if r["impl"] == SDPA]
    for h, f in zip(half, full):                        # half the bytes for the same output
        assert h["size"] == f["size"] and 2 * h["largest_tensor_bytes"] == f["largest_tensor_bytes"]
    assert zh(f"{SDPA}, bfloat16") == f"{SDPA}（bfloat16 输入）"
    assert {len(r["round_seconds"]) for r in measured} == {4}    # repeat 2, rounded up to a block of 4


@pytest.mark.parametrize("fp32_op, half_op, fp32_words, half_words", [
    ("_scaled_dot_product_efficient_attention.default", "_scaled_dot_product_flash_attention.default",
     "选的是 memory-efficient 内核（PyTorch 称为 EFFICIENT_ATTENTION，算子 _scaled_dot_product_efficient_attention），不是 "
     "FlashAttention 本身",
     "选的是 FlashAttention 内核（算子 _scaled_dot_product_flash_attention），"),
    ("_scaled_dot_product_efficient_attention.default", "_scaled_dot_product_cudnn_attention.default",
     "选的是 memory-efficient 内核（PyTorch 称为 EFFICIENT_ATTENTION，算子 _scaled_dot_product_efficient_attention），不是 "
     "FlashAttention 本身",
     "选的是 cuDNN 的注意力内核（算子 _scaled_dot_product_cudnn_attention），"),
])
def test_a_record_with_operators_names_both_kernels(render, measured, fp32_op, half_op, fp32_words,
                                                    half_words):
    run, committed = render
    gpu = copy.deepcopy(committed) if committed else synthetic([])
    gpu["rows"] = [r for r in gpu["rows"] if r["benchmark"] != PATHS] + copy.deepcopy(measured)
    for r in gpu["rows"]:
        if r["impl"] == SDPA and r["benchmark"] == PATHS:
            r["operators"] = [fp32_op]
        elif r["impl"] == f"{SDPA}, bfloat16":
            r["operators"], r["ratio"], r["seconds"] = [half_op], 0.25, 0.000125
    text = run(gpu)
    assert "记录没有写下" not in text
    assert f"这份计时的输入是 float32，PyTorch 为它{fp32_words}" in text
    assert (f"同一长度换成 bfloat16 输入，PyTorch {half_words}用时 0.12 毫秒，是 float32 那一行的 0.25 倍"
            "（换的不只是内核，还有数据类型" in text)
    assert "L = 64 时融合内核用" in text                # the longest length of the quick sizes


def test_a_fused_row_that_ran_several_operators_is_called_the_math_path(render, measured):
    run, _ = render
    gpu = synthetic(measured)
    for r in gpu["rows"]:
        if r["impl"] == SDPA:
            r["operators"] = ["matmul.default", "_softmax.default", "matmul.default"]
    text = run(gpu)
    assert "PyTorch 为它选的是数学实现（没有融合内核，3 个算子），不是 FlashAttention 本身" in text
    assert "L = 64 时 F.scaled_dot_product_attention 用 " in text and "融合内核用" not in text


def test_a_kernel_with_padding_around_it_is_still_named(render, measured):
    """CUDA's FlashAttention pads a head width that is not a multiple of 8: extra operators around
    the kernel must not turn it into the math path."""
    run, _ = render
    gpu = synthetic(measured)
    for r in gpu["rows"]:
        if r["impl"] == SDPA:
            r["operators"] = ["constant_pad_nd.default", "_scaled_dot_product_flash_attention.default",
                              "slice.Tensor"]
    text = run(gpu)
    assert "PyTorch 为它选的是 FlashAttention 内核（算子 _scaled_dot_product_flash_attention）。" in text
    assert "数学实现" not in text and "不是 FlashAttention 本身" not in text


def test_a_gpu_whose_16_bit_row_runs_the_same_kernel_says_only_the_dtype_changed(render, measured):
    """A T4 has no fast bfloat16: the 16-bit row is float16 and may run the same kernel as float32."""
    run, _ = render
    gpu = synthetic(measured)
    for r in gpu["rows"]:
        if r["impl"].startswith(SDPA):
            r["operators"] = ["_scaled_dot_product_efficient_attention.default"]
    text = run(gpu)
    assert "同一长度换成 bfloat16 输入，还是同一个内核，用时" in text
    assert "（换的只是数据类型：每个数的字节减半）。" in text and "换的不只是内核" not in text
    assert "这个 Python 循环要算 10 格" in text              # L = 64, blocks of 16: 4 · 5 / 2


@pytest.mark.parametrize("cpu_seconds, slower", [(0.0005, True), (0.005, False), (None, False)])
def test_the_gpu_time_per_tile_is_compared_with_the_cpu_record_at_the_same_length(render, measured,
                                                                                 cpu_seconds, slower):
    run, _ = render
    gpu = synthetic(measured)
    for r in gpu["rows"]:
        if r["impl"] == "ours, tiled (flash)" and r["size"] == "L=64":
            r["seconds"] = 0.0026                  # 10 causal tiles of 16 at L = 64: 0.26 ms a tile
    cpu = None if cpu_seconds is None else synthetic(
        [dict(r, seconds=cpu_seconds) for r in measured if r["impl"] == "ours, tiled (flash)"])
    text = run(gpu, cpu)
    assert "这个 Python 循环要算 10 格，每格约 0.26 毫秒" in text
    if slower:
        assert "每格约 0.26 毫秒，比 CPU 记录里同一长度的一格（0.05 毫秒）还慢。" in text
    else:
        assert "每格约 0.26 毫秒。每格都要发起一串小内核" in text and "CPU 记录里" not in text
