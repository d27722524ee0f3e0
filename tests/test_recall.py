import pytest
import torch

from tf_tutorial.experiments.recall import AttentionRecaller, RecallTask, RNNRecaller, train_recall

TASK = RecallTask(n_keys=8, n_distractors=16)


def test_batch_layout():
    tokens, keys = TASK.batch(5, n_between=9, generator=torch.Generator().manual_seed(0))
    assert tokens.shape == (5, 11) and keys.shape == (5,)
    assert torch.equal(tokens[:, 0], keys)
    assert ((tokens[:, 1:-1] >= 8) & (tokens[:, 1:-1] < 24)).all()
    assert (tokens[:, -1] == TASK.vocab_size - 1).all()
    assert (keys < 8).all()


def test_batches_are_seeded():
    a = TASK.batch(4, 6, generator=torch.Generator().manual_seed(3))[0]
    b = TASK.batch(4, 6, generator=torch.Generator().manual_seed(3))[0]
    c = TASK.batch(4, 6, generator=torch.Generator().manual_seed(4))[0]
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_to_text():
    assert TASK.to_text(torch.tensor([0, 8, 9, 23, 24])) == "A a b p ?"


def test_bad_arguments():
    with pytest.raises(ValueError, match="n_keys >= 2.*n_keys=1"):
        RecallTask(n_keys=1)
    with pytest.raises(ValueError, match="n_between >= 0.*n_between=-1"):
        TASK.batch(2, -1)


def test_attention_learns_long_range_recall_and_rnn_does_not():
    # a seeded tiny training run that must learn: the chapter's claim in miniature
    torch.manual_seed(0)
    attention = AttentionRecaller(TASK.vocab_size, TASK.n_keys)
    assert train_recall(attention, TASK, n_between=32, steps=150) > 0.9
    torch.manual_seed(0)
    rnn = RNNRecaller(TASK.vocab_size, TASK.n_keys)
    assert train_recall(rnn, TASK, n_between=32, steps=150) < 0.3
    w = attention.last_weights
    assert w.shape == (1000, 34)
    torch.testing.assert_close(w.sum(-1), torch.ones(1000))


def test_lstm_option_and_bad_cell():
    lstm = RNNRecaller(TASK.vocab_size, TASK.n_keys, cell="lstm")
    assert isinstance(lstm.rnn, torch.nn.LSTM)
    assert lstm(TASK.batch(3, 5)[0]).shape == (3, TASK.n_keys)
    with pytest.raises(ValueError, match="cell must be one of \\['lstm', 'rnn'\\], but got 'gru'"):
        RNNRecaller(TASK.vocab_size, TASK.n_keys, cell="gru")


def test_rnn_learns_short_range_recall():
    torch.manual_seed(0)
    rnn = RNNRecaller(TASK.vocab_size, TASK.n_keys)
    assert train_recall(rnn, TASK, n_between=2, steps=150) > 0.9


def test_lstm_layer_has_four_rnn_sized_weight_blocks():
    # three gates (input, forget, output) and the candidate: chapter 1 says four blocks
    count = lambda m: sum(p.numel() for p in m.parameters())
    rnn = RNNRecaller(TASK.vocab_size, TASK.n_keys).rnn
    lstm = RNNRecaller(TASK.vocab_size, TASK.n_keys, cell="lstm").rnn
    assert count(lstm) == 4 * count(rnn)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(n_keys=2.5), ValueError, "^n_keys must be an integer >= 0, but got 2.5$"),
    (dict(n_keys=4, n_distractors=0, shared="no"), TypeError, "^shared must be True or False, but got 'no'$"),
])
def test_recall_task_refuses_what_it_would_misread(kwargs, error, message):
    with pytest.raises(error, match=message):          # 2.5 gave a vocabulary of 19.5
        RecallTask(**kwargs)


@pytest.mark.parametrize("n_between", [(4, 2), (-1, 3), (2,), 3.0, "2-4"])
def test_train_recall_refuses_a_range_it_cannot_draw_from(n_between):
    model = AttentionRecaller(TASK.vocab_size, TASK.n_keys)
    with pytest.raises(ValueError, match=r"n_between must be an integer or a pair \(low, high\) "
                                         r"with 0 <= low <= high, but got"):
        train_recall(model, TASK, n_between, steps=1)
