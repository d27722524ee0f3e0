import pytest
import torch
from torch import nn

from tf_tutorial.interop import from_torch


def test_keeps_training_mode_and_dtype():
    ref = nn.RNN(3, 4, batch_first=True).double().eval()
    ours = from_torch(ref)
    assert not ours.training
    assert all(p.dtype == torch.float64 for p in ours.parameters())


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(num_layers=2), "expected num_layers=1, but got 2"),
    (dict(nonlinearity="relu"), "expected nonlinearity='tanh', but got 'relu'"),
    (dict(bidirectional=True), "expected bidirectional=False, but got True"),
    (dict(batch_first=False), "expected batch_first=True, but got False"),
])
def test_rnn_options_we_do_not_model_are_refused(kwargs, pattern):
    options = dict(batch_first=True) | kwargs
    with pytest.raises(ValueError, match=pattern):
        from_torch(nn.RNN(3, 4, **options))


def test_unsupported_module_names_what_is_supported():
    with pytest.raises(TypeError, match=r"supports nn\.LayerNorm, nn\.MultiheadAttention, nn\.RMSNorm, nn\.RNN, .*but got GRU"):
        from_torch(nn.GRU(3, 4))



@pytest.mark.parametrize("layer", [nn.TransformerEncoderLayer, nn.TransformerDecoderLayer])
def test_a_layer_without_biases_is_refused_by_name(layer):
    with pytest.raises(ValueError, match=r"expected a layer with biases .* but got bias=False"):
        from_torch(layer(16, 4, 32, batch_first=True, bias=False))


def test_a_layer_norm_without_bias_says_so():
    with pytest.raises(ValueError, match="bias=False"):
        from_torch(nn.LayerNorm(4, bias=False))


def test_converting_leaves_the_callers_random_stream_alone():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
    state = torch.random.get_rng_state()
    expected = torch.rand(3)
    torch.random.set_rng_state(state)
    from_torch(layer)                                   # builds, then copies
    torch.testing.assert_close(torch.rand(3), expected, rtol=0, atol=0)
