"""Exact match, BLEU (sacrebleu, Chinese tokenisation) and the phenomenon tags."""
import pytest
import torch

from tf_tutorial.data import make_corpus
from tf_tutorial.metrics import bleu, evaluate, exact_match, phenomena
from tf_tutorial.model import Transformer, TransformerConfig


def test_exact_match_and_bleu():
    refs = ["我 昨天 买 了 一 本 书", "狗 咬 人"]
    assert exact_match(refs, refs) == 1.0 and bleu(refs, refs) == pytest.approx(100.0)
    hyps = ["我 昨天 买 了 一 本 杂志", "人 咬 狗"]
    assert exact_match(hyps, refs) == 0.0
    assert 0 < bleu(hyps, refs) < 100
    # characters, not our word tokens, are what BLEU counts: spacing does not matter
    assert bleu(["我昨天 买了 一本书", "狗咬人"], refs) == pytest.approx(100.0)
    with pytest.raises(ValueError, match="need as many outputs as references"):
        exact_match(["a"], refs)


def test_phenomena_tags():
    assert phenomena("three hundred dogs bite the man .".split()) == ["数字 (numbers)", "量词 (measure words)"]
    assert "关系从句 (relative clauses)" in phenomena("I like the book that he wrote .".split())
    assert "关系从句 (relative clauses)" not in phenomena("who bought the car ?".split())
    assert phenomena("I love China .".split()) == ["简单句 (simple)"]
    assert "时间/地点前移 (reordering)" in phenomena("he swam yesterday .".split())


def test_evaluate_returns_outputs_for_every_sentence():
    c = make_corpus(n_train=500, n_valid=5, n_test=30, n_general=1)
    torch.manual_seed(0)
    m = Transformer(TransformerConfig(len(c.src_vocab), len(c.tgt_vocab), d_model=16, n_heads=2, n_layers=1,
                                      d_ff=32, dropout=0.0, max_len=128))
    out = evaluate(m, c.test, c.src_vocab, c.tgt_vocab)
    assert len(out["hyps"]) == len(out["refs"]) == 30
    assert out["refs"][0] == " ".join(c.test[0][1])
    assert 0.0 <= out["exact_match"] <= 1.0 and sum(n for _, n in out["by_phenomenon"].values()) >= 30
    beam = evaluate(m, c.test[:10], c.src_vocab, c.tgt_vocab, beam_size=2)
    assert len(beam["hyps"]) == 10
