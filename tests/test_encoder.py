import pytest
import torch
from torch import nn

from tf_tutorial.attention import padding_mask
from tf_tutorial.encoder import Encoder, EncoderLayer
from tf_tutorial.interop import from_torch, torch_key_padding_mask

B, S, D, H, FF = 2, 7, 12, 3, 48
SRC = torch.tensor([[3, 4, 5, 6, 7, 0, 0], [3, 4, 5, 0, 0, 0, 0]])


@pytest.fixture(autouse=True)
def no_fast_path():
    torch.backends.mha.set_fastpath_enabled(False)  # PyTorch's reference maths, not its fast kernel
    yield
    torch.backends.mha.set_fastpath_enabled(True)


def jitter(module):
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return module.double().eval()


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("final_norm", [False, True])
def test_encoder_stack_equals_torch(norm_first, final_norm):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    ref = jitter(nn.TransformerEncoder(layer, num_layers=3, norm=nn.LayerNorm(D) if final_norm else None,
                                       enable_nested_tensor=False))
    ours = from_torch(ref)
    x = torch.randn(B, S, D, dtype=torch.float64)
    keep = padding_mask(SRC, 0)
    expected = ref(x, src_key_padding_mask=torch_key_padding_mask(keep))
    real = keep[:, 0]                                          # compare non-padded positions
    torch.testing.assert_close(ours(x, keep)[real], expected[real])


def test_padding_does_not_change_real_positions():
    torch.manual_seed(1)
    enc = Encoder(D, H, FF, n_layers=2, dropout=0.0).eval()
    x = torch.randn(1, 4, D)
    short = enc(x, padding_mask(torch.ones(1, 4, dtype=torch.long), 0))
    padded_x = torch.cat([x, torch.randn(1, 3, D)], dim=1)     # 3 pad positions with junk in them
    tokens = torch.tensor([[1, 1, 1, 1, 0, 0, 0]])
    long = enc(padded_x, padding_mask(tokens, 0))
    torch.testing.assert_close(long[:, :4], short)


def test_bidirectional_context():
    torch.manual_seed(2)
    enc = Encoder(D, H, FF, n_layers=2, dropout=0.0).eval()
    word = torch.randn(D)
    a = torch.stack([word, torch.randn(D), torch.randn(D)])[None]
    b = torch.stack([word, torch.randn(D), torch.randn(D)])[None]
    assert not torch.allclose(enc(a)[0, 0], enc(b)[0, 0])       # later words change the first


def test_bad_input():
    with pytest.raises(ValueError, match=r"x: expected shape \(B, S, 12\), but got \(2, 7, 10\)"):
        EncoderLayer(D, H, FF)(torch.randn(B, S, 10))
    with pytest.raises(ValueError, match="expected batch_first=True, but got False"):
        from_torch(nn.TransformerEncoderLayer(D, H, FF))
    weird = nn.TransformerEncoderLayer(D, H, FF, batch_first=True, activation=torch.tanh)
    with pytest.raises(ValueError, match="expected a relu or gelu activation"):
        from_torch(weird)
    with pytest.raises(ValueError, match=r"mask of shape \(2, 1, 5\) does not broadcast"):
        EncoderLayer(D, H, FF)(torch.randn(B, S, D), torch.ones(B, 1, 5, dtype=torch.bool))


def test_dropout_reaches_every_attention_of_a_layer():
    from tf_tutorial.decoder import DecoderLayer
    enc = EncoderLayer(8, 2, 16, dropout=0.3)
    dec = DecoderLayer(8, 2, 16, dropout=0.3)
    assert enc.self_attn.dropout == dec.self_attn.dropout == dec.cross_attn.dropout == 0.3
    assert enc.ffn.dropout.p == enc.attn_block.dropout.p == 0.3


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_from_one_layer_like_torch(norm_first):
    """Encoder(layer, N) copies the layer N times, as nn.TransformerEncoder(layer, N) does: no final norm."""
    torch.manual_seed(3)
    torch_layer = jitter(nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True,
                                                    norm_first=norm_first))
    layer = from_torch(torch_layer)
    ours = Encoder(layer, 3).eval()
    ref = nn.TransformerEncoder(torch_layer, 3, enable_nested_tensor=False).eval()
    assert len(ours.layers) == 3 and type(ours.norm) is nn.Identity
    assert all(a is not layer for a in ours.layers)                       # copies, not the layer itself
    x = torch.randn(B, S, D, dtype=torch.float64)
    torch.testing.assert_close(ours(x), ref(x))
    with torch.no_grad():
        ours.layers[0].self_attn.w_o.weight.zero_()                       # the copies are independent
    assert ours.layers[1].self_attn.w_o.weight.abs().sum() > 0
    assert layer.self_attn.w_o.weight.abs().sum() > 0
    normed = Encoder(layer, n_layers=2, final_norm=True)                  # torch's norm=LayerNorm(D)
    ref = nn.TransformerEncoder(torch_layer, 2, norm=nn.LayerNorm(D).double(), enable_nested_tensor=False)
    torch.testing.assert_close(normed.eval()(x), ref.eval()(x))


def test_encoder_from_one_layer_refuses_what_the_layer_already_fixes():
    layer = EncoderLayer(D, H, FF)
    # dropout, norm_first, activation and eps come from the layer too: a different value is
    # refused, not silently ignored; the layer's own value is accepted
    with pytest.raises(ValueError, match=r"^Encoder\(layer, n_layers\) copies the layer, whose "
                                         r"dropout=0.1, but also got dropout=0.3"):
        Encoder(layer, 2, dropout=0.3)
    with pytest.raises(ValueError, match=r"norm_first=False, activation='relu', but also got "
                                         r"norm_first=True, activation='gelu'"):
        Encoder(layer, 2, norm_first=True, activation="gelu")
    with pytest.raises(ValueError, match=r"eps=1e-05, but also got eps=1e-06"):
        Encoder(layer, 2, eps=1e-6)
    same = Encoder(layer, 2, dropout=0.1, norm_first=False, activation="relu", eps=1e-5)
    assert len(same.layers) == 2 and same.layers[1].ffn_block.dropout.p == 0.1
    assert Encoder(EncoderLayer(D, H, FF, 0.0, True, "gelu", 1e-6), 2,
                   dropout=0.0, norm_first=True).layers[0].ffn_block.norm.eps == 1e-6
    # built from sizes, the defaults are still the paper's: dropout 0.1, Post-LN, ReLU, 1e-5
    built = Encoder(D, H, FF, 1).layers[0]
    assert (built.ffn_block.dropout.p, built.ffn_block.norm_first, built.ffn_block.norm.eps) == \
        (0.1, False, 1e-5)
    with pytest.raises(TypeError, match=r"Encoder\(layer, n_layers\) takes no other size, but also got d_ff=48"):
        Encoder(layer, 2, FF)
    with pytest.raises(TypeError, match="takes no other size, but also got n_heads=2"):
        Encoder(layer, 2, n_layers=3)
    with pytest.raises(ValueError, match="n_layers must be a positive integer, but got None"):
        Encoder(layer)
    # from sizes, every size left out is named at once, with the other way to build it
    with pytest.raises(TypeError, match=r"^Encoder\(d_model, n_heads, d_ff, n_layers\) is missing "
                                        r"d_ff and n_layers \(or build it from one layer: "
                                        r"Encoder\(layer, n_layers\)\)$"):
        Encoder(D, H)
    with pytest.raises(TypeError, match=r"is missing n_heads, d_ff and n_layers \("):
        Encoder(D)
    with pytest.raises(ValueError, match="^n_layers must be a positive integer, but got 0$"):
        Encoder(D, H, FF, 0)
    with pytest.raises(TypeError, match=r"d_model: expected an int or EncoderLayer, but got "
                                        r"TransformerEncoderLayer \(tf_tutorial.interop.from_torch"):
        Encoder(nn.TransformerEncoderLayer(D, H, FF, batch_first=True), 2)
