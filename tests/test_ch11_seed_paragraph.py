"""Chapter 11's conclusion from three seeds, on records that reach the branches nbval does not.

Section 11.3 compares the encoder–decoder and the decoder-only model at equal training time, seed
by seed, from two records (``ch11_budget.json`` and chapter 12's ``ch12_variants.json``), and
writes its verdict in words: which model leads on every seed, or that the seeds disagree; whether
the seeds' own spread is smaller than the gaps; whether the uncertain step count could change the
verdict. nbval renders only the branch the committed records take. Here the chapter's own cell runs
on copies of those records with the scores moved, and the text it glues is read back. The cell's
``check``s run as on the page: a record that breaks one of its claims would stop this test.
"""
import copy

import pytest

from conftest import chapter_cell_runner, committed_record

GPT_STEPS = 336          # the chapter's decoder-only step count (its cell says so)
GPT_SEEDS = ("base", "base_seed1", "base_seed2")


@pytest.fixture(scope="module")
def cell():
    return chapter_cell_runner("ch11_decoder_only",
                               "from tf_tutorial.book.records import corpus_version, load_record",
                               'variants = load_record("ch12_variants.json")')


@pytest.fixture(scope="module")
def render(cell):
    committed = {name: committed_record(name) for name in
                 ("ch11_budget.json", "ch12_variants.json", "ch12_variants_v2.json")}

    def run(ed=(0.600, 0.597, 0.603), gpt=(0.552, 0.541, 0.535),
            ed_same=(0.191, 0.314, 0.270), live=None, hardware=None, prev=True,
            ratio_range=(1.719, 1.784)):
        """The glued texts, from the committed records with every number the cell reads
        replaced (the defaults are the records of corpus version 3), so that a re-measured
        record does not change what is tested.

        ``ed``, ``gpt``: the three seeds' exact match at equal time; ``ed_same``: the
        encoder–decoder's at the decoder-only model's last step; ``live``: this page's own
        decoder-only score (seed 0's by default); ``hardware``: this page's machine."""
        budget = copy.deepcopy(committed["ch11_budget.json"])
        variants = copy.deepcopy(committed["ch12_variants.json"])
        seeds = [budget["encoder_decoder_seeds"][f"seed{s}"] for s in range(3)]
        for s, rec in enumerate(seeds):
            rec["exact_match"] = rec["splits"]["test"]["exact_match"] = ed[s]
            rec["at_same_step"]["exact_match"] = ed_same[s]
        for k, em in zip(GPT_SEEDS, gpt):
            variants["variants"][k]["test"]["exact_match"] = em
        budget["ratio_range"] = list(ratio_range)
        budget["steps"]["encoder_decoder"] = 595          # 336 steps × the median ratio
        previous = copy.deepcopy(committed["ch12_variants_v2.json"])
        for k, em in zip(GPT_SEEDS, (0.466, 0.591, 0.554)):  # spread 12.5 points
            previous["variants"][k]["test"]["exact_match"] = em
        records = {"ch12_variants.json": variants,
                   "ch12_variants_v2.json": previous if prev else None}
        base = variants["variants"]["base"]
        low = {"exact_match": 0.0, "bleu": 5.0}               # the longer and deeper splits
        gpt_ev = {"test": {"exact_match": base["test"]["exact_match"] if live is None else live,
                           "bleu": base["test"]["bleu"]},
                  "longer": low, "deeper": low}
        # the live run's loss: the record keeps every 4th step of the same run
        loss = [x for x in base["loss_curve"] for _ in range(4)][:GPT_STEPS]
        _, glued = cell(
            load_record=records.get, budget=budget, GPT_STEPS=GPT_STEPS,
            ed_ev=seeds[0]["splits"], ed_at_same=seeds[0]["at_same_step"],
            ed_hist={"step": list(range(1, len(seeds[0]["loss"]) + 1))},
            gpt_ev=gpt_ev, gpt_hist={"step": list(range(1, GPT_STEPS + 1)), "loss": loss},
            hardware=budget["runs_machine"] if hardware is None else hardware,
            gpt_at=1.0, ed_at=1.5, cross=20, same=GPT_STEPS)
        return glued
    return run


def test_todays_records_give_the_page_s_verdict(render):
    glued = render()
    # 60.0 - 55.2, 59.7 - 54.1, 60.3 - 53.5 percentage points
    assert glued["seed_diffs"] == "+4.8、+5.6、+6.8"
    assert ("三次都是编码器–解码器更好，平均 5.7 ± 0.6 个百分点（均值 ± 标准误；"
            in glued["equal_time_verdict"])
    assert glued["equal_time_gap"] == "编码器–解码器高 4.8 个百分点"
    assert glued["seed_spread"] == "1.7"          # the decoder-only seeds: 55.2 - 53.5
    assert glued["seed_spread_vs"].startswith("比上表两个模型逐个种子的差距都小")
    assert "三个种子就相差 12.5 个百分点" in glued["seed_spread_vs"]   # 59.1 - 46.6
    assert glued["rec0_vs_live"] == "两者相同"
    assert glued["step_swing_reading"].startswith("小于按种子相减的最小差距 4.8 个百分点")


def test_a_decoder_only_lead_on_every_seed_is_named(render):
    glued = render(ed=(0.50, 0.51, 0.52))
    assert glued["seed_diffs"] == "-5.2、-3.1、-1.5"
    assert "三次都是只用解码器的模型更好，平均 3.3 ± 1.1 个百分点" in glued["equal_time_verdict"]
    assert "在这个规模、这样的训练时间上，只用解码器的模型占上风" in glued["equal_time_verdict"]
    assert glued["equal_time_gap"] == "只用解码器的模型高 5.2 个百分点"


def test_seeds_that_disagree_give_no_winner(render):
    glued = render(ed=(0.56, 0.53, 0.60))
    assert glued["seed_diffs"] == "+0.8、-1.1、+6.5"
    assert glued["equal_time_verdict"].endswith("有正有负：凭三个种子分不出谁在同样的时间里占上风")
    assert "上风；" not in glued["equal_time_verdict"] and "标准误" not in glued["equal_time_verdict"]
    # the encoder–decoder's own seeds now spread 7.0 points, more than the smallest gap (0.8)
    assert glued["seed_spread"] == "7.0"
    assert glued["seed_spread_vs"] == "不比上表两个模型逐个种子的差距小"
    assert glued["step_swing_reading"].startswith("不小于按种子相减的最小差距 0.8 个百分点")


def test_an_almost_equal_seed_0_is_called_a_tie(render):
    assert render(ed=(0.555, 0.597, 0.603))["equal_time_gap"] == "两者几乎相同"


def test_without_the_previous_corpus_record_the_spread_needs_no_caveat(render):
    assert render(prev=False)["seed_spread_vs"] == "比上表两个模型逐个种子的差距都小"


def test_a_wide_step_uncertainty_is_said_to_be_able_to_change_the_verdict(render):
    glued = render(ratio_range=(1.5, 1.9))       # round(336 * 0.4) = 134 steps
    assert glued["spread_steps"] == 134
    assert float(glued["step_swing"]) > 4.8
    assert glued["step_swing_reading"].startswith("不小于按种子相减的最小差距 4.8 个百分点")
    assert "结论就可能改变" in glued["step_swing_reading"]


def test_a_live_run_unlike_its_record_is_explained_by_the_machine_when_it_differs(render):
    elsewhere = render(live=0.545, hardware="CPU AMD EPYC，2 核")
    assert "记录是在另一台机器（CPU Intel Xeon" in elsewhere["rec0_vs_live"]
    assert "本页在 CPU AMD EPYC，2 核 上" in elsewhere["rec0_vs_live"]
    same_machine = render(live=0.545)
    assert same_machine["rec0_vs_live"].endswith("两者标注的机器相同，差别从哪里来，本页没有查明")


def test_the_widest_seed_gap_is_qualified_when_the_encoder_decoder_had_hardly_begun(render):
    plain = render()
    assert plain["widest_note"] == "差距最大的是种子 0：只用解码器 55.2% 对编码器–解码器 19.1%"
    early = render(ed_same=(0.03, 0.314, 0.27))
    assert early["widest_note"].startswith("差距最大的是种子 0：只用解码器 55.2% 对编码器–解码器 3.0%；")
    assert early["widest_note"].endswith("差距主要说的是它起步晚")
