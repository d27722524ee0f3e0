"""第 3 章：缩放点积注意力（scaled dot-product attention）与掩码。

Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Shape legend: B batch, H heads, Lq query length, Lk key length, Dk query/key width,
Dv value width. ``...`` stands for any leading batch dimensions, e.g. (B,) or (B, H).
Masks are boolean and True means "may attend", as in ``F.scaled_dot_product_attention``.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask) -> None:
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise ValueError(f"q, k, v: expected at least 2 dimensions (..., L, d), but got shapes "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension d_k, but got "
                         f"q {tuple(q.shape)} and k {tuple(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same length Lk, but got k {tuple(k.shape)} "
                         f"and v {tuple(v.shape)}")
    if mask is not None:
        check_mask(mask, (*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]),
                          q.shape[-2], k.shape[-2]))


def check_mask(mask: torch.Tensor, target: tuple) -> None:
    """Raise ValueError unless ``mask`` is boolean and broadcasts to ``target`` (..., Lq, Lk)."""
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be boolean (True = may attend), but got dtype {mask.dtype}")
    try:
        ok = torch.broadcast_shapes(mask.shape, target) == torch.Size(target)
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' "
                         f"shape {tuple(target)}")


def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                 mask: torch.Tensor | None = None, dropout_p: float = 0.0):
    """The readable reference path: matmul → scale → mask → softmax → matmul.

    Args:
        q: (..., Lq, Dk); k: (..., Lk, Dk); v: (..., Lk, Dv).
        mask: boolean, broadcastable to (..., Lq, Lk); True = may attend. A query whose keys
            are all masked gets zero weights and a zero output, never NaN.
        dropout_p: dropout on the attention weights (pass 0.0 in eval mode).
    Returns:
        (out (..., Lq, Dv), weights (..., Lq, Lk)); each unmasked row of weights sums to 1.
    """
    _check_inputs(q, k, v, mask)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])              # (..., Lq, Lk)
    # softmax in at least float32, also under bf16/fp16 autocast (float64 stays float64)
    scores = scores.to(torch.promote_types(scores.dtype, torch.float32))
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)                                  # (..., Lq, Lk)
    if mask is not None:  # a fully masked row had a uniform softmax: make it exactly zero
        weights = weights.masked_fill(~mask, 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights.to(v.dtype) @ v, weights                                  # (..., Lq, Dv)


def fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    mask: torch.Tensor | None = None, dropout_p: float = 0.0) -> torch.Tensor:
    """The fast path: ``F.scaled_dot_product_attention`` (fused kernels), same maths, no weights.

    Same arguments as :func:`scaled_dot_product_attention`; returns only ``out`` (..., Lq, Dv),
    with fully masked query rows set to zero (the fused kernel alone would give NaN there).
    """
    _check_inputs(q, k, v, mask)
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    has_key = mask.any(dim=-1, keepdim=True)                                 # (..., Lq, 1)
    safe = mask | ~has_key  # let empty rows attend anywhere, then zero them below
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=safe, dropout_p=dropout_p)
    return out.masked_fill(~has_key, 0.0)


def causal_mask(length: int, device=None) -> torch.Tensor:
    """(L, L) boolean, True on and below the diagonal: position i may attend to j <= i."""
    if length < 1:
        raise ValueError(f"length must be >= 1, but got {length}")
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """(B, 1, S) boolean, True where the key is a real token, from token ids (B, S)."""
    if tokens.dim() != 2:
        raise ValueError(f"tokens: expected shape (B, S), but got {tuple(tokens.shape)}")
    return (tokens != pad_id)[:, None, :]
