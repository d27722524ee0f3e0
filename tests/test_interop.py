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



@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_a_stack_without_biases_computes_and_trains_as_torchs(kind, norm_first):
    """bias=False: our layers hold biases of 0 that do not train, so outputs and weight gradients agree."""
    torch.manual_seed(0)
    if kind == "encoder":
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, bias=False,
                                           norm_first=norm_first)
        ref = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8, bias=False), enable_nested_tensor=False)
    else:
        layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True, bias=False,
                                           norm_first=norm_first)
        ref = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(8, bias=False))
    ref = ref.double()
    with torch.no_grad():                              # norms that are not the identity
        for m in ref.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
    ours = from_torch(ref)
    frozen = [n for n, p in ours.named_parameters() if not p.requires_grad]
    assert frozen and all(n.endswith("bias") for n in frozen)
    assert all((p == 0).all() for n, p in ours.named_parameters() if n in frozen)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    args = (x,) if kind == "encoder" else (x, torch.randn(2, 3, 8, dtype=torch.float64))
    torch.testing.assert_close(ours(*args), ref(*args), rtol=0, atol=1e-12)
    ours(*args).square().sum().backward()
    ref(*args).square().sum().backward()
    grads = {n: p.grad for n, p in ours.named_parameters() if p.requires_grad}
    assert all(p.grad is None for n, p in ours.named_parameters() if n in frozen)
    assert sum(g.norm() for g in grads.values()) > 0
    torch.testing.assert_close(sum(g.square().sum() for g in grads.values()),
                               sum(p.grad.square().sum() for p in ref.parameters()), rtol=1e-10, atol=0)
    # each weight's own gradient, not only their total: one gradient step on each side, and the
    # two stacks still agree (a gradient given to the wrong weight would move them apart)
    before = ours(*args).detach()
    with torch.no_grad():
        for model in (ours, ref):
            for p in model.parameters():
                if p.grad is not None:
                    p -= 0.5 * p.grad
        after = ours(*args)
        assert not torch.allclose(after, before, atol=1e-3)          # the step moved the outputs
        torch.testing.assert_close(after, ref(*args), rtol=0, atol=1e-10)


@pytest.mark.parametrize("options", [dict(bias=False), dict(elementwise_affine=False)])
def test_a_layer_norm_without_bias_or_weight(options):
    ref = nn.LayerNorm(4, eps=1e-3, **options)
    ours = from_torch(ref)
    x = torch.randn(3, 4) * 5 + 2
    torch.testing.assert_close(ours(x), ref(x), rtol=0, atol=1e-6)
    assert ours.eps == 1e-3 and not ours.bias.requires_grad
    assert ours.weight.requires_grad == options.get("elementwise_affine", True)


def test_a_layer_norm_over_two_dimensions_is_refused_by_name():
    with pytest.raises(ValueError, match=r"expected one normalised dimension, but got "
                                         r"normalized_shape=\(3, 4\)"):
        from_torch(nn.LayerNorm((3, 4)))


def test_converting_leaves_the_callers_random_stream_alone():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
    state = torch.random.get_rng_state()
    expected = torch.rand(3)
    torch.random.set_rng_state(state)
    from_torch(layer)                                   # builds, then copies
    torch.testing.assert_close(torch.rand(3), expected, rtol=0, atol=0)


def _stack(kind, norm):
    if kind == "encoder":
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        return nn.TransformerEncoder(layer, 2, norm=norm, enable_nested_tensor=False).eval()
    layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    return nn.TransformerDecoder(layer, 2, norm=norm).eval()


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
@pytest.mark.parametrize("norm", [None, "identity", "rms"])
def test_a_stacks_final_norm_may_be_none_identity_or_rms(kind, norm):
    final = {None: None, "identity": nn.Identity(), "rms": nn.RMSNorm(8, eps=1e-3)}[norm]
    ref = _stack(kind, final)
    ours = from_torch(ref)
    x = torch.randn(2, 3, 8)
    args = (x,) if kind == "encoder" else (x, x)
    torch.testing.assert_close(ours(*args), ref(*args))


def test_a_stacks_final_norm_of_another_kind_is_refused_by_name():
    with pytest.raises(ValueError, match="expected a final norm that is None, nn.LayerNorm or "
                                         "nn.RMSNorm, but got BatchNorm1d"):
        from_torch(_stack("encoder", nn.BatchNorm1d(8)))


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_each_norm_keeps_its_own_eps(kind):
    ref = (nn.TransformerEncoderLayer if kind == "encoder" else nn.TransformerDecoderLayer)(
        8, 2, 16, dropout=0.0, batch_first=True).eval()
    ref.norm2.eps = 0.5                                   # set after construction
    x = torch.randn(2, 3, 8)
    args = (x,) if kind == "encoder" else (x, x)
    torch.testing.assert_close(from_torch(ref)(*args), ref(*args))


@pytest.mark.parametrize("kind, site", [("encoder", "dropout"), ("encoder", "dropout1"), ("encoder", "dropout2"),
                                        ("decoder", "dropout"), ("decoder", "dropout1"), ("decoder", "dropout2"),
                                        ("decoder", "dropout3")])
def test_each_dropout_site_keeps_its_own_p(kind, site):
    """p = 1 at one site and 0 elsewhere drops exactly that sub-layer (or the FFN's hidden layer): deterministic
    in training mode, so ours must compute torch's output, which it can only do by dropping the same site."""
    ref = (nn.TransformerEncoderLayer if kind == "encoder" else nn.TransformerDecoderLayer)(
        8, 2, 16, dropout=0.0, batch_first=True).train()
    getattr(ref, site).p = 1.0                            # set after construction
    x, memory = torch.randn(2, 3, 8), torch.randn(2, 4, 8)
    args = (x,) if kind == "encoder" else (x, memory)
    ours = from_torch(ref)
    assert sorted(mod.p for mod in ours.modules() if isinstance(mod, nn.Dropout)) == [0.0] * (
        2 if kind == "encoder" else 3) + [1.0]
    torch.testing.assert_close(ours(*args), ref(*args))
    assert not torch.allclose(ours(*args), from_torch(ref.eval())(*args))   # the dropped site mattered


@pytest.mark.parametrize("relu", [torch.relu, torch.nn.functional.relu, nn.ReLU(), "relu"])
def test_every_way_of_writing_relu_converts(relu):
    torch.manual_seed(5)
    ref = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, activation=relu).double().eval()
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    torch.testing.assert_close(from_torch(ref)(x), ref(x))


def test_a_layer_norm_without_weights_takes_float64_inputs_as_torchs_does():
    ref = nn.LayerNorm(8, elementwise_affine=False)
    x = torch.randn(3, 8, dtype=torch.float64)
    got = from_torch(ref)(x)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, ref(x), atol=1e-12, rtol=0)


@pytest.mark.parametrize("convert", ["torch_attn_mask", "torch_key_padding_mask"])
def test_the_mask_converters_refuse_what_is_not_a_boolean_mask(convert):
    import tf_tutorial.interop as interop
    fn = getattr(interop, convert)
    # ~ on an integer mask flips bits (1 -> -2), it does not negate: refused
    for bad in (torch.ones(2, 1, 3, dtype=torch.long), torch.ones(2, 1, 3, dtype=torch.uint8),
                torch.ones(2, 1, 3)):
        with pytest.raises(ValueError, match=rf"^allowed must be boolean \(True = may attend\), "
                                             rf"but got dtype {bad.dtype}$"):
            fn(bad)
    with pytest.raises(TypeError, match="^allowed must be a boolean torch.Tensor .* but got list$"):
        fn([[[True]]])
    keep = torch.tensor([[[True, True, False]], [[True, False, False]]])
    flipped = fn(keep)
    assert flipped.dtype == torch.bool and torch.equal(flipped.reshape(keep.shape), ~keep)


def test_a_padding_mask_of_the_wrong_shape_is_named():
    from tf_tutorial.interop import torch_key_padding_mask
    with pytest.raises(ValueError, match=r"^allowed: expected a padding mask of shape \(B, 1, S\), "
                                         r"but got \(2, 3, 3\)$"):
        torch_key_padding_mask(torch.ones(2, 3, 3, dtype=torch.bool))
