"""Tests of chapter 12's RMSNorm (tf_tutorial/norm.py) and its converter in tf_tutorial/interop.py."""
import pytest
import torch
from torch import nn

from tf_tutorial.interop import from_torch
from tf_tutorial.norm import LayerNorm, RMSNorm

B, L, D = 2, 5, 12
F64 = torch.float64


def random_weight(module, seed=0):
    """Give ``module.weight`` values away from 1, so a forgotten γ cannot pass."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        module.weight.copy_(1 + 0.5 * torch.randn(module.weight.shape, generator=g, dtype=F64))
    return module


def test_equals_torch_rms_norm_in_values_and_gradients_float64():
    ref = random_weight(nn.RMSNorm(D, eps=1e-6).double())
    ours = RMSNorm(D, eps=1e-6).double()
    with torch.no_grad():
        ours.weight.copy_(ref.weight)
    x = (1 + 2 * torch.randn(B, L, D, dtype=F64)).requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    y, y_ref = ours(x), ref(x_ref)
    torch.testing.assert_close(y, y_ref, atol=1e-12, rtol=0)
    upstream = torch.randn(B, L, D, dtype=F64)
    (y * upstream).sum().backward()
    (y_ref * upstream).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, atol=1e-12, rtol=0)
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad, atol=1e-12, rtol=0)
    assert y.dtype == F64 and ours.weight.grad.abs().sum() > 0


def test_from_torch_copies_weight_and_eps():
    ref = random_weight(nn.RMSNorm(D, eps=1e-5).double(), seed=1)
    ours = from_torch(ref)
    assert isinstance(ours, RMSNorm) and ours.eps == 1e-5 and ours.weight.dtype == F64
    x = torch.randn(B, L, D, dtype=F64)
    torch.testing.assert_close(ours(x), ref(x), atol=1e-12, rtol=0)
    assert ours.weight.data_ptr() != ref.weight.data_ptr()  # a copy, not a shared tensor


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_from_torch_eps_none_is_the_machine_epsilon(dtype):
    ref = nn.RMSNorm(D).to(dtype)                        # eps=None
    ours = from_torch(ref)
    assert ours.eps == torch.finfo(dtype).eps
    # inputs so small that mean(x²) is comparable to ε: a wrong ε would show here
    x = 3e-4 * torch.randn(B, L, D, dtype=dtype)
    torch.testing.assert_close(ours(x), ref(x))
    assert not torch.allclose(RMSNorm(D, eps=1e-6).to(dtype)(x), ref(x), rtol=1e-3, atol=0)


def test_from_torch_bfloat16_module_uses_float32_epsilon():
    assert from_torch(nn.RMSNorm(D).to(torch.bfloat16)).eps == torch.finfo(torch.float32).eps


def test_from_torch_without_a_weight_gets_a_frozen_weight_of_one():
    for eps in (1e-6, None):
        ref = nn.RMSNorm(D, eps=eps, elementwise_affine=False)
        ours = from_torch(ref)
        assert torch.equal(ours.weight, torch.ones(D)) and not ours.weight.requires_grad
        assert ours.eps == (eps or torch.finfo(torch.float32).eps)
        x = torch.randn(3, D)
        torch.testing.assert_close(ours(x), ref(x))


def test_from_torch_rejects_options_we_do_not_model():
    with pytest.raises(ValueError, match=r"normalized_shape=\(5, 12\)"):
        from_torch(nn.RMSNorm((5, D)))


def test_gradcheck_float64():
    norm = random_weight(RMSNorm(5).double(), seed=2)
    x = torch.randn(3, 5, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(norm, (x,))
    with_weight = lambda x, w: torch.func.functional_call(norm, {"weight": w}, (x,))
    assert torch.autograd.gradcheck(with_weight, (x, norm.weight.detach().clone().requires_grad_()))


def test_output_has_unit_root_mean_square_with_unit_weight():
    gen = torch.Generator().manual_seed(0)     # unseeded, one draw in ~20 had a row mean < 0.5
    x = 4 + 3 * torch.randn(B, L, D, dtype=F64, generator=gen)
    y = RMSNorm(D, eps=1e-12).double()(x)
    torch.testing.assert_close(y.pow(2).mean(-1).sqrt(), torch.ones(B, L, dtype=F64))
    assert (y.mean(-1).abs() > 0.5).all()           # the mean is not removed (LayerNorm's would be 0)
    zeros = torch.zeros(1, D)
    assert (RMSNorm(D)(zeros) == 0).all()           # mean(x²) = 0: ε keeps it finite, no NaN


def test_bfloat16_in_bfloat16_out_close_to_float32_and_to_torch():
    ref = random_weight(nn.RMSNorm(D, eps=1e-6), seed=3)
    with torch.no_grad():                            # γ that bf16 holds exactly: x is the only rounding
        ref.weight.copy_(ref.weight.to(torch.bfloat16))
    ours = from_torch(ref)
    x = (5 * torch.randn(B, L, D, generator=torch.Generator().manual_seed(3))).to(torch.bfloat16)
    y32 = ours(x.float())                            # the same bf16 numbers, computed in float32
    ours_bf16, ref_bf16 = ours.to(torch.bfloat16), ref.to(torch.bfloat16)
    y = ours_bf16(x)
    assert y.dtype == torch.bfloat16
    # bf16 keeps 8 significant bits: one rounding of each output, relative error <= 2^-8
    torch.testing.assert_close(y.float(), y32, rtol=2 ** -8, atol=1e-6)
    torch.testing.assert_close(y, ref_bf16(x))       # PyTorch also computes in float32 inside
    # computing in bf16 throughout (x², the mean, the root) is further from float32
    naive = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * ours_bf16.weight
    assert (naive.float() - y32).abs().max() > (y.float() - y32).abs().max()


@pytest.mark.parametrize("c", [0.5, 3.0, 100.0])
def test_scale_invariant_but_not_shift_invariant(c):
    x = torch.randn(B, L, D, dtype=F64)
    rms = random_weight(RMSNorm(D).double(), seed=4)
    ln = LayerNorm(D).double()
    torch.testing.assert_close(rms(c * x), rms(x), rtol=1e-5, atol=1e-5)     # up to ε
    torch.testing.assert_close(rms(-c * x), -rms(x), rtol=1e-5, atol=1e-5)
    # a shift: LayerNorm subtracts the mean and does not see it; RMSNorm does
    torch.testing.assert_close(ln(x + c), ln(x), rtol=1e-4, atol=1e-4)
    assert (rms(x + c) - rms(x)).abs().max() > 0.1


def test_bad_input():
    with pytest.raises(ValueError, match=r"x: expected last dimension 12, but got shape \(2, 5, 7\)"):
        RMSNorm(D)(torch.randn(B, L, 7))
    with pytest.raises(ValueError, match="eps must be positive, but got 0"):
        RMSNorm(D, eps=0)


def test_has_weight_only():
    norm = RMSNorm(D)
    assert [name for name, _ in norm.named_parameters()] == ["weight"]
    assert (norm.weight == 1).all() and norm.weight.shape == (D,)


@pytest.mark.parametrize("norm", [RMSNorm(3), LayerNorm(3)])
def test_integer_vectors_are_refused_by_name(norm):
    """RMSNorm computed in float32 and cast back: [[1, 2, 3]] became [[0, 0, 1]]."""
    with pytest.raises(ValueError, match="^x must be floating point, but got dtype torch.int64$"):
        norm(torch.tensor([[1, 2, 3]]))
