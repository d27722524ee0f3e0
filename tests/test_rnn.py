import pytest
import torch
from torch import nn

from tf_tutorial.interop import from_torch
from tf_tutorial.rnn import ElmanRNN, jacobian_norms, scaled_recurrence

B, L, d_in, D = 2, 7, 5, 12  # all different, so a transposition cannot hide


@pytest.mark.parametrize("bias", [True, False])
def test_equals_nn_rnn_with_copied_weights(bias):
    torch.manual_seed(0)
    ref = nn.RNN(d_in, D, bias=bias, batch_first=True).double()
    with torch.no_grad():  # values a float32 copy would round: catches precision lost on the way
        for p in ref.parameters():
            p.add_(1e-10 * torch.randn_like(p))
    ours = from_torch(ref)
    assert isinstance(ours, ElmanRNN) and ours.weight_hh.dtype == torch.float64
    x = torch.randn(B, L, d_in, dtype=torch.float64)
    h0 = torch.randn(B, D, dtype=torch.float64)
    for init in (None, h0):
        out, h_last = ours(x, init)
        ref_out, ref_h = ref(x, None if init is None else init[None])
        torch.testing.assert_close(out, ref_out, rtol=0, atol=1e-12)
        torch.testing.assert_close(h_last, ref_h[0], rtol=0, atol=1e-12)
    assert out.shape == (B, L, D)


def test_gradients_equal_nn_rnn():
    torch.manual_seed(1)
    ref = nn.RNN(d_in, D, batch_first=True).double()
    ours = from_torch(ref)
    x = torch.randn(B, L, d_in, dtype=torch.float64)
    ours(x)[0].square().sum().backward()
    ref(x)[0].square().sum().backward()
    torch.testing.assert_close(ours.weight_hh.grad, ref.weight_hh_l0.grad)
    torch.testing.assert_close(ours.weight_ih.grad, ref.weight_ih_l0.grad)


def test_gradcheck_float64():
    torch.manual_seed(2)
    rnn = ElmanRNN(3, 4).double()
    x = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda inp: rnn(inp)[0], (x,))


def test_same_initialisation_scale_as_nn_rnn():
    torch.manual_seed(3)
    ours = ElmanRNN(d_in, 400)
    bound = 400 ** -0.5
    assert ours.weight_hh.abs().max() <= bound
    assert ours.weight_hh.abs().max() > 0.9 * bound  # uniform over the whole interval


def test_jacobian_norms_match_autograd_jacobian():
    torch.manual_seed(4)
    rnn = ElmanRNN(d_in, D).double()
    x = torch.randn(1, L, d_in, dtype=torch.float64)
    full = torch.autograd.functional.jacobian(lambda inp: rnn(inp)[1][0], x)  # (D, 1, L, d_in)
    expected = full[:, 0].pow(2).sum(dim=(0, 2)).sqrt()
    torch.testing.assert_close(jacobian_norms(rnn, x), expected)


def test_gradient_vanishes_below_one_and_grows_above():
    torch.manual_seed(5)
    x = torch.randn(1, 40, d_in)
    small = jacobian_norms(scaled_recurrence(ElmanRNN(d_in, D), 0.5), x)
    large = jacobian_norms(scaled_recurrence(ElmanRNN(d_in, D), 3.0), x)
    assert small[0] < 1e-6 * small[-1]      # 39 steps back: vanished
    assert large[0] > 10 * large[-1]        # exploded


def test_scaled_recurrence_sets_every_singular_value():
    rnn = scaled_recurrence(ElmanRNN(d_in, D), 0.7)
    s = torch.linalg.svdvals(rnn.weight_hh.detach())
    torch.testing.assert_close(s, torch.full((D,), 0.7), atol=1e-5, rtol=0)


@pytest.mark.parametrize("shape, pattern", [((B, L), r"x: expected shape \(B, L, 5\) with L >= 1, but got \(2, 7\)"),
                                            ((B, L, 4), r"but got \(2, 7, 4\)")])
def test_bad_input_shape(shape, pattern):
    with pytest.raises(ValueError, match=pattern):
        ElmanRNN(d_in, D)(torch.randn(*shape))


def test_bad_h0_and_sizes():
    with pytest.raises(ValueError, match=r"h0: expected shape \(2, 12\), but got \(12,\)"):
        ElmanRNN(d_in, D)(torch.randn(B, L, d_in), torch.randn(D))
    with pytest.raises(ValueError, match="hidden_size must be a positive integer, but got 0"):
        ElmanRNN(d_in, 0)
    with pytest.raises(ValueError, match=r"one sequence of shape \(1, L, d_in\), but got \(2, 7, 5\)"):
        jacobian_norms(ElmanRNN(d_in, D), torch.randn(B, L, d_in))
    with pytest.raises(ValueError, match="gain must be positive, but got -1"):
        scaled_recurrence(ElmanRNN(d_in, D), -1)


def test_arguments_it_would_misread_are_refused_by_name():
    import numpy as np
    with pytest.raises(ValueError, match="^input_size must be a positive integer, but got True$"):
        ElmanRNN(True, D)                                      # a bool once counted as 1
    with pytest.raises(TypeError, match="^bias must be True or False, but got 'no'$"):
        ElmanRNN(d_in, D, bias="no")                           # once built the biases anyway
    assert ElmanRNN(np.int64(d_in), D).input_size == d_in      # a NumPy int is an int
    with pytest.raises(TypeError, match="^x must be a torch.Tensor, but got list$"):
        ElmanRNN(d_in, D)([[[1.0] * d_in]])
    with pytest.raises(TypeError, match="^h0 must be a torch.Tensor, but got list$"):
        ElmanRNN(d_in, D)(torch.randn(1, L, d_in), [[0.0] * D])
    with pytest.raises(ValueError, match=r"with L >= 1, but got \(1, 0, 5\)$"):
        ElmanRNN(d_in, D)(torch.randn(1, 0, d_in))             # once torch.stack's error
    with pytest.raises(TypeError, match="^x must be a torch.Tensor, but got list$"):
        jacobian_norms(ElmanRNN(d_in, D), [[[1.0] * d_in]])
    for bad in (float("nan"), "1"):                            # NaN once filled W_hh with NaN
        with pytest.raises(ValueError, match=f"^gain must be positive, but got {bad!r}$"):
            scaled_recurrence(ElmanRNN(d_in, D), bad)


def test_scaled_recurrence_refuses_an_infinite_gain():
    with pytest.raises(ValueError, match=r"^gain must be finite, but got inf"):
        scaled_recurrence(ElmanRNN(4, 4), gain=float("inf"))
