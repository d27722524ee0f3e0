"""Chapter 11's GPU comparison, on the record the next GPU run will write.

The committed ``book/records/gpu.json`` compared the two architectures before training turned
cuDNN's attention off, so 11.3 shows only their steps and seconds, with a paragraph on why the
comparison was unfair. nbval renders that branch only. A record from ``scripts.gpu_run`` today
says ``cudnn_attention: false``: the page must then show both models' scores on the three splits
and drop the paragraph. This test runs the chapter's own cell on a copy of the committed record
with that key set, and on a copy made to look like the committed one.
"""
import copy

import pytest

from conftest import chapter_cell_runner, committed_record


@pytest.fixture(scope="module")
def render():
    cell = chapter_cell_runner("ch11_decoder_only",
                               "from tf_tutorial.book.records import corpus_version, load_record",
                               'gpu = load_record("gpu.json")')
    committed = committed_record("gpu.json")

    def run(change):
        gpu = copy.deepcopy(committed)
        change(gpu["ch11"])
        # the CPU run of this page: its steps give the CPU ratio the paragraph quotes
        shown, glued = cell(load_record=lambda name: gpu,
                            splits={"test": [], "longer": [], "deeper": []},
                            ed_hist={"step": list(range(1, 596))},
                            gpt_hist={"step": list(range(1, 337))})
        return gpu["ch11"], shown, glued
    return run


def test_a_record_measured_without_cudnn_shows_both_models_scores(render):
    ch11, shown, glued = render(change=lambda ch11: ch11.update(cudnn_attention=False))
    assert len(shown) == 1                                  # the table, no paragraph
    header, rule, *rows = shown[0].splitlines()
    assert header.endswith("| 测试集 | 更长集 | 更深集 |") and len(rows) == 2
    ed = ch11["encoder_decoder"]
    assert rows[0].startswith("| 编码器–解码器 |")
    assert f"{ed['test']['exact_match']:.1%} / {ed['test']['bleu']:.1f}" in rows[0]
    assert glued["gpu11_lead"] == "点开“显示 GPU 上的记录”看结果"


def test_a_record_from_before_cudnn_was_turned_off_shows_steps_only_and_says_why(render):
    def stale(ch11):        # like the committed record: no key, both models inside warmup
        ch11.pop("cudnn_attention", None)
        ch11["train_config"]["warmup"] = 4000
        ch11["encoder_decoder"]["steps"], ch11["decoder_only"]["steps"] = 1000, 400
    _, shown, glued = render(change=stale)
    assert len(shown) == 2
    header = shown[0].splitlines()[0]
    assert header.endswith("| 训练时间 |") and "测试集" not in header
    assert shown[1].startswith("**这一次比较对只用解码器的模型不公平。**")
    assert "编码器–解码器走了 1000 步，只用解码器的模型只走了 400 步，是 2.5 倍" in shown[1]
    assert "上面 CPU 上的比较里，这个倍数是 1.8" in shown[1]      # 595 / 336 steps
    assert "最后一步的学习率只有对方的 40%" in shown[1]            # linear in warmup
    assert glued["gpu11_lead"].startswith("现有的记录还说明不了什么")
