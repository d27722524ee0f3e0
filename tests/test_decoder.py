import pytest
import torch
from torch import nn

from tf_tutorial.attention import causal_mask, padding_mask
from tf_tutorial.decoder import Decoder, DecoderLayer
from tf_tutorial.interop import from_torch, torch_attn_mask, torch_key_padding_mask

B, S, T, D, H, FF = 2, 7, 5, 12, 3, 48
SRC = torch.tensor([[3, 4, 5, 6, 7, 0, 0], [3, 4, 5, 0, 0, 0, 0]])
TGT = torch.tensor([[1, 8, 9, 10, 11], [1, 8, 9, 0, 0]])


@pytest.fixture(autouse=True)
def no_fast_path():
    torch.backends.mha.set_fastpath_enabled(False)
    yield
    torch.backends.mha.set_fastpath_enabled(True)


def masks():
    self_mask = causal_mask(T) & padding_mask(TGT, 0)                     # (B, T, T)
    return self_mask, padding_mask(SRC, 0)                               # (B, 1, S)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("final_norm", [False, True])
def test_decoder_stack_equals_torch(norm_first, final_norm):
    torch.manual_seed(0)
    layer = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    ref = nn.TransformerDecoder(layer, num_layers=2, norm=nn.LayerNorm(D) if final_norm else None)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.05 * torch.randn_like(p))
    ref = ref.double().eval()
    ours = from_torch(ref)
    x, memory = torch.randn(B, T, D, dtype=torch.float64), torch.randn(B, S, D, dtype=torch.float64)
    self_mask, memory_mask = masks()
    expected = ref(x, memory, tgt_mask=torch_attn_mask(causal_mask(T)),
                   tgt_key_padding_mask=torch_key_padding_mask(padding_mask(TGT, 0)),
                   memory_key_padding_mask=torch_key_padding_mask(memory_mask))
    real = TGT != 0
    torch.testing.assert_close(ours(x, memory, self_mask, memory_mask)[real], expected[real])


def test_no_peeking_changing_a_future_token_leaves_earlier_outputs_exactly():
    torch.manual_seed(1)
    dec = Decoder(D, H, FF, n_layers=2, dropout=0.0).eval()
    x, memory = torch.randn(1, T, D), torch.randn(1, S, D)
    changed = x.clone()
    changed[0, 3] = torch.randn(D)                                        # edit position 3
    a = dec(x, memory, causal_mask(T))
    b = dec(changed, memory, causal_mask(T))
    assert torch.equal(a[:, :3], b[:, :3])                                # positions 0..2: identical
    assert not torch.allclose(a[:, 3:], b[:, 3:])


def test_bad_input():
    layer = DecoderLayer(D, H, FF)
    with pytest.raises(ValueError, match=r"memory: expected shape \(2, S, 12\) to match x \(2, 5, 12\), but got \(3, 7, 12\)"):
        layer(torch.randn(B, T, D), torch.randn(3, S, D))
    with pytest.raises(ValueError, match=r"memory: expected shape \(2, S, 12\).*but got \(2, 7, 10\)"):
        layer(torch.randn(B, T, D), torch.randn(B, S, 10))
    with pytest.raises(ValueError, match="^memory must be floating point .*got dtype torch.int64$"):
        layer(torch.randn(B, T, D), torch.ones(B, S, D, dtype=torch.long))
    with pytest.raises(ValueError, match=r"mask of shape \(4, 4\) does not broadcast"):
        layer(torch.randn(B, T, D), torch.randn(B, S, D), causal_mask(4))
    with pytest.raises(ValueError, match="expected batch_first=True, but got False"):
        from_torch(nn.TransformerDecoderLayer(D, H, FF))
    with pytest.raises(TypeError, match="but got Transformer"):
        from_torch(nn.Transformer(8, 2, 1, 1, 16, batch_first=True))   # 2 heads: no nested-tensor warning


def test_a_bad_mask_is_named():
    layer = DecoderLayer(12, 3, 20, dropout=0.0)
    x, memory = torch.randn(2, 5, 12), torch.randn(2, 7, 12)
    with pytest.raises(ValueError, match=r"self_mask: mask of shape \(5, 6\) does not broadcast"):
        layer(x, memory, self_mask=torch.ones(5, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"memory_mask: mask of shape \(2, 1, 6\) does not broadcast"):
        layer(x, memory, memory_mask=torch.ones(2, 1, 6, dtype=torch.bool))


@pytest.mark.parametrize("n_layers", [0, -1, 2.0])
def test_stacks_need_a_positive_number_of_layers(n_layers):
    from tf_tutorial.encoder import Encoder
    for stack in (Encoder, Decoder):
        with pytest.raises(ValueError, match=f"n_layers must be a positive integer, but got {n_layers!r}"):
            stack(12, 3, 20, n_layers)


def test_a_stack_built_from_sizes_names_every_size_left_out():
    from tf_tutorial.encoder import Encoder
    for stack in (Encoder, Decoder):
        name = stack.__name__
        with pytest.raises(TypeError, match=(rf"^{name}\(d_model, n_heads, d_ff, n_layers\) is missing "
                                             rf"n_layers \(or build it from one layer: "
                                             rf"{name}\(layer, n_layers\)\)$")):
            stack(12, 3, 20)
        with pytest.raises(TypeError, match="is missing d_ff and n_layers "):
            stack(12, 3)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_from_one_layer_like_torch(norm_first):
    """Decoder(layer, N) copies the layer N times, as nn.TransformerDecoder(layer, N) does."""
    torch.manual_seed(4)
    torch_layer = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    with torch.no_grad():
        for p in torch_layer.parameters():
            p.add_(0.05 * torch.randn_like(p))
    torch_layer = torch_layer.double().eval()
    layer = from_torch(torch_layer)
    ours = Decoder(layer, 2, final_norm=norm_first).eval()                  # torch's norm=: off by default
    ref = nn.TransformerDecoder(torch_layer, 2, norm=nn.LayerNorm(D).double() if norm_first else None).eval()
    assert len(ours.layers) == 2 and all(a is not layer for a in ours.layers)
    assert type(ours.norm).__name__ == ("LayerNorm" if norm_first else "Identity")
    assert type(Decoder(layer, 2).norm) is nn.Identity
    x, memory = torch.randn(B, T, D, dtype=torch.float64), torch.randn(B, S, D, dtype=torch.float64)
    expected = ref(x, memory, tgt_mask=torch_attn_mask(causal_mask(T)))
    torch.testing.assert_close(ours(x, memory, causal_mask(T)), expected)
    with pytest.raises(TypeError, match=r"Decoder\(layer, n_layers\) takes no other size, but also got d_ff=48"):
        Decoder(layer, 2, FF)
    from tf_tutorial.encoder import EncoderLayer
    with pytest.raises(TypeError, match="d_model: expected an int or DecoderLayer, but got EncoderLayer$"):
        Decoder(EncoderLayer(D, H, FF), 2)
    with pytest.raises(ValueError, match=rf"^Decoder\(layer, n_layers\) copies the layer, whose "
                                         rf"norm_first={norm_first}, but also got "
                                         rf"norm_first={not norm_first}"):
        Decoder(layer, 2, norm_first=not norm_first)       # the layer's own value would be kept
    assert len(Decoder(layer, 2, norm_first=norm_first, eps=1e-5).layers) == 2


def test_a_cache_for_another_number_of_layers_is_refused():
    from tf_tutorial.decoder import DecoderCache
    dec = Decoder(D, H, FF, n_layers=2, dropout=0.0)
    with pytest.raises(ValueError, match="^cache: expected a DecoderCache for 2 layers, but got one for 3$"):
        dec(torch.randn(B, 1, D), torch.randn(B, S, D), cache=DecoderCache(3))
    # not a cache at all: a TypeError that says what was expected, not an AttributeError
    with pytest.raises(TypeError, match="^cache must be a DecoderCache, but got int$"):
        dec(torch.randn(B, 1, D), torch.randn(B, S, D), cache=5)


def test_a_decoder_layer_refuses_what_is_not_one_layers_cache_pair():
    from tf_tutorial.decoder import DecoderCache
    from tf_tutorial.multihead import KVCache
    layer = DecoderLayer(D, H, FF, dropout=0.0)
    x, memory = torch.randn(B, 1, D), torch.randn(B, S, D)
    expected = r"^cache: expected one layer's \(self, cross\) pair of KVCaches, as DecoderCache\(n_layers\)\.layers\[i\] holds them, but got "
    for cache, got in ((5, "int"),                      # was a tuple-unpacking TypeError
                       (DecoderCache(1), "DecoderCache"),  # the whole cache, not a layer's pair
                       ((KVCache(),), r"tuple \(KVCache\(static=False\)\)"),
                       # swapped: the static cross cache would be grown as self-attention's
                       ((KVCache(static=True), KVCache()),
                        r"tuple \(KVCache\(static=True\), KVCache\(static=False\)\)")):
        with pytest.raises(TypeError, match=expected + got + "$"):
            layer(x, memory, cache=cache)
    pair = DecoderCache(1).layers[0]
    assert layer(x, memory, cache=pair).shape == (B, 1, D)
    assert pair[0].length == 1 and pair[1].length == S   # grown, and the memory kept
