"""第 5 章：层归一化（Layer Normalization）。

LayerNorm(x) = (x − μ) / sqrt(σ² + ε) · γ + β,
    μ and σ² over the last dimension (biased σ²).
RMSNorm(x) = x / sqrt(mean(x²) + ε) · γ (chapter 12): no mean subtracted, no β.

Shape legend: B batch, L sequence length, D d_model (the normalised dimension).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tf_tutorial._checks import (refuses_dtype, require_eps, require_flags,
                                 require_sizes, require_width)


class LayerNorm(nn.Module):
    """层归一化：把每个位置的 D 个特征化成均值 0、方差 1，再缩放和平移。

    Normalise each position's D features to mean 0 and variance 1, then scale
    and shift.

    Equal to ``nn.LayerNorm(D, eps)``: σ² is the biased variance (divide by D,
    not D − 1) and ε sits inside the square root. γ (``weight``) starts at 1 and
    β (``bias``) at 0.

    Args:
        d_model: D, the size of the last dimension.
        eps: ε, added to σ² for numerical safety (default 1e-5, as
            ``nn.LayerNorm``).
        fused: compute with ``F.layer_norm`` (default True; one kernel, same
            maths, the appendix measures the difference) instead of the formula
            written out below. Tests check the two agree. The written-out path
            computes in the input's dtype: in float16, an ε below about 3e-8
            rounds to 0 there, and a feature more than about 256 from its
            row's mean overflows (x − μ)² to inf, so the whole row normalises
            to 0 and comes out as β (chapter 5); ``F.layer_norm`` keeps its
            statistics in float32 and has neither problem. In float32 both
            overflow only near 1e19 and beyond (the square root of float32's
            largest number is 1.8e19): the written-out path then gives β;
            ``F.layer_norm``, like ``nn.LayerNorm``, gives β for some such
            rows and NaN for others.
    Shape:
        x (..., D) → (..., D).
    """

    def __init__(self, d_model: int, eps: float = 1e-5, fused: bool = True):
        super().__init__()
        require_sizes(d_model=d_model)
        require_eps(eps)
        require_flags(fused=fused)
        self.d_model, self.eps, self.fused = d_model, eps, fused
        self.weight = nn.Parameter(torch.ones(d_model))   # γ
        self.bias = nn.Parameter(torch.zeros(d_model))    # β

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """对最后一维做层归一化；``fused=False`` 时按公式一步步算。"""
        require_width(x, self.d_model)
        if self.fused:   # F.layer_norm, in the dtype the lines below use
            return _fused_layer_norm(x, self.weight, self.bias, self.eps)
        mu = x.mean(dim=-1, keepdim=True)                     # (..., 1)
        var = (x - mu).pow(2).mean(dim=-1, keepdim=True)      # (..., 1), biased
        out = (x - mu) / torch.sqrt(var + self.eps) * self.weight + self.bias
        return out.to(x.dtype)  # as F.layer_norm: float32 γ, β do not promote

    def extra_repr(self) -> str:
        """打印模块时显示的参数，例如 LayerNorm(512, eps=1e-05)。"""
        return f"{self.d_model}, eps={self.eps}" + ("" if self.fused else
                                                      ", fused=False")


def _fused_layer_norm(x, weight, bias, eps):
    """``F.layer_norm`` over the last dimension, in the dtype the written-out
    path computes in.

    F.layer_norm refuses float64 x with float32 γ and β ("mixed dtype"), where
    the formula promotes to float64; both then return x's dtype. The dtypes it
    refuses are those a matrix product refuses (:func:`refuses_dtype`: under
    autocast only a float64 side, which autocast leaves alone; never on
    'meta', which computes no numbers).
    """
    D = weight.shape
    if not refuses_dtype(x, weight):
        return F.layer_norm(x, D, weight, bias, eps)
    work = torch.promote_types(x.dtype, weight.dtype)
    return F.layer_norm(x.to(work), D, weight.to(work), bias.to(work),
                        eps).to(x.dtype)


def layer_norm_common_slip(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """教程里常见的写法（用于对比）：无偏标准差，ε 放在根号外面。

    A version often seen in tutorials: unbiased std and ε outside the root (for
    comparison).

    (x − μ) / (std_unbiased(x) + ε). It differs from ``nn.LayerNorm`` by the
    factor sqrt((D − 1) / D) and in how ε enters, so weights trained with one do
    not fit the other.
    """
    mu = x.mean(dim=-1, keepdim=True)
    return (x - mu) / (x.std(dim=-1, keepdim=True) + eps)


class RMSNorm(nn.Module):
    """均方根归一化（RMSNorm）：只按均方根缩放，不减均值，也没有偏置 β。

    RMSNorm(x) = x / sqrt(mean(x²) + ε) · γ,  mean(x²) over the last dimension.

    Zhang & Sennrich (2019, ``zhang2019root``) drop the subtraction of the
    mean μ from :class:`LayerNorm` (so RMSNorm(x + c) ≠ RMSNorm(x): no shift
    invariance); their formula keeps a bias after the normalisation. Like T5,
    LLaMA and ``nn.RMSNorm``, this one has no bias β. What stays is the
    re-scaling: RMSNorm(c·x) = RMSNorm(x) for c > 0, up to ε.

    Equal to ``nn.RMSNorm(D, eps)``; in float16 to within one float16 step,
    because this divides by the root where PyTorch multiplies by its
    reciprocal. As PyTorch does, mean(x²), the root and the product with γ
    are computed in float32 (float64 stays float64) and the result is cast
    back to x's dtype.

    Args:
        d: D, the size of the last dimension.
        eps: ε, added to mean(x²) inside the root (default 1e-6).
            ``nn.RMSNorm``'s default ``eps=None`` means
            ``torch.finfo(torch.float32).eps`` (float64: its own eps).
    Shape:
        x (..., D) → (..., D), in x's dtype.
    Raises:
        ValueError: eps <= 0, or x whose last dimension is not D.
    """

    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        require_sizes(d=d)
        require_eps(eps)
        self.d_model, self.eps = d, eps
        self.weight = nn.Parameter(torch.ones(d))         # γ; no β

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """把每个位置的 D 个特征除以它们的均方根，再乘 γ。"""
        require_width(x, self.d_model)
        # at least float32, as nn.RMSNorm
        work = torch.promote_types(x.dtype, torch.float32)
        xw = x.to(work)
        rms = torch.sqrt(
            xw.pow(2).mean(dim=-1, keepdim=True) + self.eps)    # (..., 1)
        return (xw / rms * self.weight.to(work)).to(x.dtype)    # (..., D)

    def extra_repr(self) -> str:
        """打印模块时显示的参数。"""
        return f"{self.d_model}, eps={self.eps}"
