import math
import pytest
import torch
import torch.nn.functional as F

from tf_tutorial.ffn import PositionwiseFeedForward, SwiGLUFeedForward, swiglu_hidden
from tf_tutorial.decoder import DecoderLayer
from tf_tutorial.encoder import EncoderLayer

B, L, D, FF = 2, 7, 12, 48


def test_equals_the_two_linear_formula():
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(D, FF).double()
    x = torch.randn(B, L, D, dtype=torch.float64)
    expected = F.relu(x @ ffn.w1.weight.T + ffn.w1.bias) @ ffn.w2.weight.T + ffn.w2.bias
    torch.testing.assert_close(ffn(x), expected)


@pytest.mark.parametrize("module", [PositionwiseFeedForward(D, FF), SwiGLUFeedForward(D)])
def test_position_wise_row_by_row_equals_whole_matrix(module):
    x = torch.randn(B, L, D)
    rows = torch.stack([torch.stack([module(x[b, t][None, None])[0, 0] for t in range(L)])
                        for b in range(B)])
    torch.testing.assert_close(rows, module(x))


def test_swiglu_shapes_and_parameter_count():
    d = 512
    assert swiglu_hidden(d) == 1368  # 2/3 · 4 · 512 = 1365.3, rounded up to a multiple of 8
    # the smallest multiple at or above 2/3 · 4D, in exact arithmetic: when D is divisible by 3 it
    # is 8D/3 itself (768 → 2048, not 2056), whatever the multiple
    from fractions import Fraction
    for width in (96, 100, 768, 4096, 5120):
        for multiple in (1, 8, 64, 256):
            exact = Fraction(8 * width, 3)
            assert swiglu_hidden(width, multiple_of=multiple) == multiple * math.ceil(exact / multiple)
    glu = SwiGLUFeedForward(d)
    relu = PositionwiseFeedForward(d, 4 * d)
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(glu) == 3 * d * 1368
    assert abs(count(glu) - count(relu)) / count(relu) < 0.01
    assert glu(torch.randn(2, 3, d)).shape == (2, 3, d)


@pytest.mark.parametrize("layer_class, expected", [(EncoderLayer, 2 / 3), (DecoderLayer, 1 / 2)])
def test_ffn_share_is_two_thirds_of_an_encoder_layer_and_half_a_decoder_layer(layer_class, expected):
    # encoder layer: 4D² attention + 8D² FFN; decoder layer: 8D² attention (self + cross) + 8D²
    count = lambda m: sum(p.numel() for p in m.parameters())
    layer = layer_class(512, 8, 2048)
    assert count(layer.ffn) / count(layer) == pytest.approx(expected, abs=0.005)


def test_the_ffn_widens_then_narrows():
    ffn = PositionwiseFeedForward(512, 2048)     # an inverted bottleneck: D -> 4D -> D
    seen = []
    ffn.w2.register_forward_pre_hook(lambda module, inputs: seen.append(inputs[0].shape))
    out = ffn(torch.randn(2, 3, 512))
    assert seen == [torch.Size([2, 3, 2048])] and out.shape == (2, 3, 512)   # the hidden layer is 4D wide


def test_gelu_option_and_dropout_in_training_only():
    torch.manual_seed(1)
    ffn = PositionwiseFeedForward(D, FF, dropout=0.5, activation="gelu").double()
    x = torch.randn(B, L, D, dtype=torch.float64)
    ffn.eval()                                               # no dropout: the formula with GELU
    expected = F.gelu(x @ ffn.w1.weight.T + ffn.w1.bias) @ ffn.w2.weight.T + ffn.w2.bias
    torch.testing.assert_close(ffn(x), expected)
    assert not torch.allclose(expected, F.relu(x @ ffn.w1.weight.T + ffn.w1.bias) @ ffn.w2.weight.T
                              + ffn.w2.bias)                 # GELU and ReLU really differ here
    ffn.train()
    assert not torch.allclose(ffn(x), ffn(x))


def test_swiglu_drops_its_hidden_layer_in_training_only():
    torch.manual_seed(2)
    ffn = SwiGLUFeedForward(D, dropout=0.5).double()
    x = torch.randn(B, L, D, dtype=torch.float64)
    hidden = F.silu(x @ ffn.w_gate.weight.T) * (x @ ffn.w_up.weight.T)
    torch.testing.assert_close(ffn.eval()(x), hidden @ ffn.w_down.weight.T)
    seen = []
    ffn.w_down.register_forward_pre_hook(lambda module, inputs: seen.append(inputs[0]))
    ffn.train()(x)
    dropped = seen[0] == 0
    assert 0.3 < dropped.float().mean() < 0.7                # about half the hidden units are zeroed
    torch.testing.assert_close(seen[0][~dropped], 2 * hidden[~dropped])   # the rest scaled by 1/(1-p)


def test_bad_input():
    with pytest.raises(ValueError, match="activation must be one of \\['gelu', 'relu'\\], but got 'swish'"):
        PositionwiseFeedForward(D, FF, activation="swish")
    with pytest.raises(ValueError, match="dropout must be in \\[0, 1\\), but got 1.0"):
        PositionwiseFeedForward(D, FF, dropout=1.0)
    with pytest.raises(ValueError, match="dropout must be in \\[0, 1\\), but got -0.1"):
        SwiGLUFeedForward(D, dropout=-0.1)
    with pytest.raises(ValueError, match=r"expected last dimension 12, but got shape \(2, 7, 5\)"):
        PositionwiseFeedForward(D, FF)(torch.randn(B, L, 5))


@pytest.mark.parametrize("args, pattern", [
    ((0, 4), "d_model must be a positive integer, but got 0"),
    ((8, -1), "d_ff must be a positive integer, but got -1"),
    ((8, 0), "d_ff must be a positive integer, but got 0"),
])
def test_feed_forward_sizes_are_named(args, pattern):
    for ffn in (PositionwiseFeedForward, SwiGLUFeedForward):
        with pytest.raises(ValueError, match=pattern):
            ffn(*args)


def test_swiglu_is_its_formula():
    torch.manual_seed(0)
    g = SwiGLUFeedForward(6, 10).double()
    x = torch.randn(2, 3, 6, dtype=torch.float64)
    Wg, Wu, Wd = g.w_gate.weight, g.w_up.weight, g.w_down.weight
    torch.testing.assert_close(g(x), (F.silu(x @ Wg.T) * (x @ Wu.T)) @ Wd.T)


def test_dropout_sits_on_the_hidden_layer():
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(6, 10, dropout=0.5).double().train()
    x = torch.randn(2, 3, 6, dtype=torch.float64)
    torch.manual_seed(1)
    y = ffn(x)
    torch.manual_seed(1)
    torch.testing.assert_close(y, ffn.w2(F.dropout(F.relu(ffn.w1(x)), 0.5, True)))
