import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tf_tutorial.interop import from_torch
from tf_tutorial.norm import LayerNorm, RMSNorm, layer_norm_common_slip

B, L, D = 2, 7, 12


def test_equals_pytorch_layer_norm_float64():
    torch.manual_seed(0)
    ref = nn.LayerNorm(D, eps=1e-5).double()
    with torch.no_grad():
        ref.weight.add_(torch.randn(D, dtype=torch.float64))
        ref.bias.add_(torch.randn(D, dtype=torch.float64))
    ours = from_torch(ref)
    x = 3 + 2 * torch.randn(B, L, D, dtype=torch.float64)
    torch.testing.assert_close(ours(x), ref(x))
    ours.fused = False                                      # the formula, not F.layer_norm
    torch.testing.assert_close(ours(x), ref(x))
    torch.testing.assert_close(LayerNorm(D, fused=False).double()(x), F.layer_norm(x, (D,)))


def test_gradcheck_float64():
    ln = LayerNorm(5, fused=False).double()
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5)
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(ln, (x,))
    # and the gradients of gamma and beta, on both paths
    for fused in (False, True):
        ln.fused = fused
        params = (ln.weight.detach().clone().requires_grad_(),
                  torch.randn(5, dtype=torch.float64, requires_grad=True))
        with_params = lambda x, w, b: torch.func.functional_call(ln, {"weight": w, "bias": b}, (x,))
        assert torch.autograd.gradcheck(with_params, (x, *params))


def test_output_statistics_and_eps_inside_the_root():
    x = torch.randn(B, L, D, dtype=torch.float64) * 5 + 1
    y = LayerNorm(D, fused=False).double()(x)
    torch.testing.assert_close(y.mean(-1), torch.zeros(B, L, dtype=torch.float64))
    torch.testing.assert_close(y.var(-1, unbiased=False), torch.full((B, L), 1.0, dtype=torch.float64),
                               atol=1e-4, rtol=0)
    constant = torch.full((1, D), 7.0)
    assert (LayerNorm(D, fused=False)(constant) == 0).all() and (LayerNorm(D)(constant) == 0).all()  # σ² = 0: ε keeps it finite, no NaN
    # a variance near ε tells (x - μ)/√(σ² + ε) from (x - μ)/(√σ² + ε): an outside audit found
    # that the values above (σ² ≈ 25) could not
    small = torch.randn(B, L, D, dtype=torch.float64) * 3e-3
    mu, var = small.mean(-1, keepdim=True), small.var(-1, unbiased=False, keepdim=True)
    for fused in (False, True):
        got = LayerNorm(D, eps=1e-5, fused=fused).double()(small)
        torch.testing.assert_close(got, (small - mu) / torch.sqrt(var + 1e-5), atol=1e-12, rtol=1e-10)
        assert not torch.allclose(got, (small - mu) / (var.sqrt() + 1e-5), atol=1e-3)


def test_the_common_slip_is_not_pytorch_layer_norm():
    torch.manual_seed(0)      # its own inputs: the tolerance below once depended on earlier tests
    x = torch.randn(B, L, D, dtype=torch.float64)
    slip = layer_norm_common_slip(x)
    ref = F.layer_norm(x, (D,))
    assert not torch.allclose(slip, ref, atol=1e-3)
    # the factor √((D − 1)/D), once neither ε blurs it (each ε shifts a row by about ε/σ or ε/2σ²)
    no_eps = F.layer_norm(x, (D,), eps=0.0)
    torch.testing.assert_close(layer_norm_common_slip(x, eps=0.0), no_eps * ((D - 1) / D) ** 0.5,
                               atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(slip, ref * ((D - 1) / D) ** 0.5, atol=1e-4, rtol=1e-4)


def test_bad_input():
    with pytest.raises(ValueError, match=r"expected last dimension 12, but got shape \(2, 7, 10\)"):
        LayerNorm(D)(torch.randn(B, L, 10))
    with pytest.raises(ValueError, match="eps must be positive, but got 0"):
        LayerNorm(D, eps=0)
    from tf_tutorial.gpt import GPTConfig
    for make in (lambda e: LayerNorm(D, eps=e), lambda e: RMSNorm(D, eps=e),
                 lambda e: GPTConfig(vocab_size=9, eps=e)):
        with pytest.raises(ValueError, match="^eps must be finite, but got inf$"):
            make(float("inf"))                        # would squash every output to β


@pytest.mark.parametrize("fused", [True, False])
def test_both_paths_return_the_input_dtype(fused):
    """F.layer_norm returns bfloat16 for a bfloat16 input with float32 γ, β; the written-out path
    used to promote to float32."""
    x = torch.randn(2, 8, dtype=torch.bfloat16)
    ln = LayerNorm(8, fused=fused)
    out = ln(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), nn.functional.layer_norm(x.float(), (8,)), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("affine", [True, False])
def test_a_float64_input_under_autocast_is_normalised_in_float64_on_both_paths(affine):
    """Autocast leaves float64 alone, so F.layer_norm met float64 x with float32 γ, β and raised
    'mixed dtype' on the fused path only (the written-out path promoted); an outside probe."""
    x = torch.randn(2, 8, dtype=torch.float64) * 3 + 1
    layers = ([LayerNorm(8), LayerNorm(8, fused=False)] if affine
              else [from_torch(nn.LayerNorm(8, elementwise_affine=False))])
    if affine:
        with torch.no_grad():
            for ln in layers:
                ln.weight.copy_(torch.linspace(0.5, 1.5, 8))
    for ln in layers:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = ln(x)
        assert out.dtype == torch.float64
        torch.testing.assert_close(out, ln(x), atol=1e-12, rtol=0)     # as outside autocast
    # a bfloat16 input under autocast still goes to F.layer_norm as it is, as nn.LayerNorm's does
    xb = x.to(torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert layers[0](xb).dtype == nn.LayerNorm(8)(xb).dtype


def test_on_meta_a_float64_input_gets_a_float64_shape_without_asking_autocast():
    """'meta' has no autocast: asking whether autocast was on there raised RuntimeError ("unknown
    device type for autocast") for an input whose dtype differs from γ's; found rereading the
    change. Shapes and dtypes come out as on a real device."""
    ln = LayerNorm(8).to("meta")
    x = torch.ones(2, 8, dtype=torch.float64, device="meta")
    out = ln(x)
    assert out.is_meta and out.shape == (2, 8) and out.dtype == torch.float64


def test_fused_and_written_out_paths_agree_in_value_and_gradient():
    x = torch.randn(3, 4, 6, dtype=torch.float64, requires_grad=True)
    fused, plain = LayerNorm(6).double(), LayerNorm(6, fused=False).double()
    with torch.no_grad():
        for m in (fused, plain):
            m.weight.copy_(torch.linspace(0.5, 1.5, 6))
            m.bias.copy_(torch.linspace(-1, 1, 6))
    assert fused.fused and not plain.fused
    a, b = fused(x), plain(x)
    torch.testing.assert_close(a, b)
    ga = torch.autograd.grad(a.pow(3).sum(), (x, fused.weight))
    gb = torch.autograd.grad(b.pow(3).sum(), (x, plain.weight))
    for u, v in zip(ga, gb):
        torch.testing.assert_close(u, v)


@pytest.mark.parametrize("d_model", [0, -3, 2.0])
def test_norms_need_a_positive_width(d_model):
    from tf_tutorial.norm import RMSNorm
    for norm, name in ((LayerNorm, "d_model"), (RMSNorm, "d")):   # each names its own argument
        with pytest.raises(ValueError, match=f"^{name} must be a positive integer, but got {d_model!r}"):
            norm(d_model)


@pytest.mark.parametrize("fused", [True, False])
def test_eps_is_used_on_both_paths(fused):
    torch.manual_seed(0)
    x = torch.randn(3, 8, dtype=torch.float64) * 0.3      # variance near eps: eps matters
    ours = LayerNorm(8, eps=0.5, fused=fused).double()
    torch.testing.assert_close(ours(x), nn.LayerNorm(8, eps=0.5).double()(x))


def test_fused_and_written_out_paths_agree_on_a_wider_input():
    # F.layer_norm refused float64 x with float32 weights ("mixed dtype"),
    # while the written-out path promoted: the two paths now agree
    x = torch.randn(3, 8, dtype=torch.float64)
    fused, formula = LayerNorm(8), LayerNorm(8, fused=False)
    with torch.no_grad():
        for ln in (fused, formula):
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-1, 1)
        formula.load_state_dict(fused.state_dict())
    got, want = fused(x), formula(x)
    assert got.dtype == want.dtype == torch.float64
    torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    narrow = LayerNorm(8).double()                       # float32 x, float64 γ, β
    assert narrow(x.float()).dtype == torch.float32


def test_layer_norm_fused_must_be_a_bool():
    with pytest.raises(TypeError, match="fused must be True or False, but got 'no'"):
        LayerNorm(8, fused="no")


def test_in_float16_the_written_out_path_zeroes_a_row_whose_squares_overflow_as_documented():
    # the docstring and chapter 5 say so: (x - mu)^2 above 65504 is inf in float16, so the
    # variance is inf and the row comes out as zeros; F.layer_norm keeps float32 statistics
    x = torch.zeros(2, 16)
    x[0, 0] = 300.0                                   # (300 - 18.75)^2 > 65504
    x[1] = torch.linspace(-3, 3, 16)                  # an ordinary row
    exact = nn.functional.layer_norm(x, (16,))
    plain = LayerNorm(16, fused=False).half()(x.half())
    fused = LayerNorm(16).half()(x.half())
    assert plain[0].abs().max() == 0 and exact[0].abs().max() > 3
    torch.testing.assert_close(plain[1].float(), exact[1], atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(fused.float(), exact, atol=1e-2, rtol=1e-2)


def test_in_float32_both_paths_overflow_only_near_1e19_as_documented():
    """Past 1e19 the written-out path gives β; PyTorch's gives β for some rows, NaN for others."""
    x = torch.zeros(4, 64)
    x[0, 0], x[1, 0], x[2, 0], x[3, 0] = 1e18, 2e19, 1e25, 1e30
    plain, fused, torch_ln = LayerNorm(64, fused=False)(x), LayerNorm(64)(x), nn.LayerNorm(64)(x)
    torch.testing.assert_close(plain[0], torch_ln[0])          # 1e18 is still fine on both
    torch.testing.assert_close(fused[0], torch_ln[0])
    assert (plain[1:] == 0).all()                              # β (0 here) on every row past 1e19
    assert (fused[1] == 0).all() and (torch_ln[1] == 0).all()
    assert fused[2:].isnan().all() and torch_ln[2:].isnan().all()


def test_a_printed_layer_norm_shows_its_width_and_eps():
    """Printed inside an encoder layer, LayerNorm() told nothing; nn.LayerNorm shows both."""
    assert repr(LayerNorm(8)) == "LayerNorm(8, eps=1e-05)"
    assert repr(LayerNorm(8, eps=1e-6, fused=False)) == "LayerNorm(8, eps=1e-06, fused=False)"
