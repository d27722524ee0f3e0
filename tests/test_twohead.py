import pytest
import torch

from tf_tutorial.experiments.twohead import FirstLastModel, first_last_batch, train_first_last


def test_batch_layout():
    tokens, first, last = first_last_batch(3, 5, n_symbols=10, generator=torch.Generator().manual_seed(0))
    assert tokens.shape == (3, 6) and (tokens[:, -1] == 10).all()
    assert torch.equal(first, tokens[:, 0]) and torch.equal(last, tokens[:, -2])
    with pytest.raises(ValueError, match="length must be >= 2.*but got 1"):
        first_last_batch(3, 1)


def test_two_heads_learn_and_divide_the_work():
    torch.manual_seed(0)
    model = FirstLastModel()
    acc_first, acc_last = train_first_last(model, steps=800)
    assert acc_first > 0.95 and acc_last > 0.8
    tokens, _, _ = first_last_batch(200, 12, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        weights = model(tokens)[2].mean(0)[:, 0]                          # (H, L+1)
    on_first, on_last = weights[:, 0], weights[:, -2]
    assert on_first.max() > 0.9 and on_last.max() > 0.6
    assert on_first.argmax() != on_last.argmax()  # a different head for each question


@pytest.mark.parametrize("lengths", [(9, 5), (1, 4), (6,), 7.5, "6-16", (6, 16.0), (True, 4)])
def test_train_first_last_refuses_a_length_range_it_cannot_draw_from(lengths):
    # a reversed range used to reach torch.randint's own error ("random_ expects 'from' to be less
    # than 'to'"); a length of 1 has its first token as its last
    model = FirstLastModel()
    with pytest.raises(ValueError, match=r"lengths must be an integer or a pair \(low, high\) "
                                         r"with 2 <= low <= high, but got"):
        train_first_last(model, steps=1, lengths=lengths)


def test_train_first_last_takes_one_length_too(monkeypatch):
    """lengths=12 trains on length 12 only (the final evaluation is at 12 too)."""
    import tf_tutorial.experiments.twohead as T
    drawn = []

    def spy(batch, length, *a, **kw):
        drawn.append(length)
        return first_last_batch(batch, length, *a, **kw)
    monkeypatch.setattr(T, "first_last_batch", spy)
    first, last = train_first_last(FirstLastModel(), steps=5, lengths=12)
    assert drawn == [12] * 6 and 0 <= first <= 1 and 0 <= last <= 1
    drawn.clear()
    train_first_last(FirstLastModel(), steps=40, lengths=(6, 8))
    assert set(drawn[:-1]) == {6, 7, 8} and drawn[-1] == 12
