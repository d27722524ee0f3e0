"""第 3 章：缩放点积注意力（scaled dot-product attention）与掩码。

Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Shape legend (book/appendix_notation.md): B batch, H heads, T query length,
S key and value length (in self-attention S = T = L), d_k query/key width, d_v
value width. ``...`` stands for any leading batch dimensions, e.g. (B,) or
(B, H). H_kv: key/value heads of grouped-query attention (chapter 12), a
divisor of H.
Masks are boolean and True means "may attend", as in
``F.scaled_dot_product_attention``.
"""
from __future__ import annotations

import contextlib
import math
import operator
import warnings

import torch
import torch.nn.functional as F

from tf_tutorial._checks import (bad_value, broadcast_shape,
                                 require_bool_mask, require_counts,
                                 require_dropout, require_flags,
                                 require_groups, require_ids,
                                 require_tensors, require_token_id)


def _check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  mask, grouped: bool = False, dropout_p: float = 0.0) -> None:
    require_tensors(q=q, k=k, v=v)
    require_dropout(dropout_p, name="dropout_p")
    require_flags(enable_gqa=grouped)     # fused_attention's argument
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise ValueError(
            f"q, k, v: expected at least 2 dimensions (..., L, d), but got "
            f"shapes {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    dtypes = (q.dtype, k.dtype, v.dtype)
    if not all(d.is_floating_point for d in dtypes) or len(set(dtypes)) > 1:
        raise ValueError(f"q, k, v must be floating point of one dtype, but "
                         f"got {', '.join(str(d) for d in dtypes)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension d_k, "
                         f"but got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same length S, but got "
                         f"k {tuple(k.shape)} and v {tuple(v.shape)}")
    # the batch dimensions (...) must broadcast; grouped: the heads differ
    lead = 3 if grouped else 2
    ok = (broadcast_shape(q.shape[:-lead], k.shape[:-lead], v.shape[:-lead])
          is not None and (not grouped or (min(q.dim(), k.dim(), v.dim()) >= 3
                                           and k.shape[-3] == v.shape[-3])))
    if not ok:
        raise ValueError(f"q, k, v: the leading dimensions (...) must "
                         f"broadcast, but got shapes {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    if mask is not None:       # grouped: H_kv key heads serve H query heads
        lead = ((*broadcast_shape(q.shape[:-3], k.shape[:-3]), q.shape[-3])
                if grouped else broadcast_shape(q.shape[:-2], k.shape[:-2]))
        check_mask(mask, (*lead, q.shape[-2], k.shape[-2]))


def check_mask(mask: torch.Tensor, target: tuple) -> None:
    """检查掩码是布尔型，并且能广播到注意力分数的形状，否则报错。

    Raise ValueError unless ``mask`` is boolean and broadcasts to ``target``
    (..., T, S); TypeError if it is not a tensor.
    """
    require_bool_mask(mask)
    # a mask per sentence, (B, 1, S) or (B, T, S), against scores with heads
    # (B, H, T, S): broadcasting aligns from the right, so its B meets the
    # heads. When B != H that fails; when B == H it is legal broadcasting
    # (an (H, T, S) mask per head looks the same) but silently wrong for a
    # mask per sentence, so it warns
    gap = len(target) - mask.dim()
    if gap > 0 and mask.dim() >= 3 and mask.shape[0] == target[0] > 1:
        legal = mask.shape[0] == target[gap]      # B == H: it broadcasts
        why = (f"mask of shape {tuple(mask.shape)} against scores of shape "
               f"{tuple(target)}: broadcasting lines shapes up from the right, "
               f"so the mask's first dimension ({mask.shape[0]}) "
               f"{'meets' if legal else 'would meet'} "
               f"dimension {gap} of the scores (the heads), not the batch. A "
               f"mask per sentence needs the head dimension: mask[:, None] "
               f"has shape {(mask.shape[0], 1, *mask.shape[1:])}; a mask per "
               f"head takes a leading 1, mask[None]")
        if not legal:
            raise ValueError(why)
        warnings.warn(why, UserWarning, stacklevel=4)  # the caller's line
    if broadcast_shape(mask.shape, target) != tuple(target):
        raise ValueError(f"mask of shape {tuple(mask.shape)} does not "
                         f"broadcast to the scores' shape {tuple(target)}")


def without_autocast(device: torch.device):
    """在这段代码里关掉 autocast（它会把矩阵乘法拉回 16 位）；没开 autocast 时什么也不做。

    A context in which autocast is off for ``device``'s type: the operations
    inside run in their inputs' dtype. A no-op where autocast is not on, or
    cannot run at all (the 'meta' device).
    """
    try:
        on = torch.is_autocast_enabled(device.type)
    except RuntimeError:             # 'meta': no autocast for this device
        on = False
    return (torch.autocast(device.type, enabled=False) if on
            else contextlib.nullcontext())


def scaled_dot_product_attention(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
        mask: torch.Tensor | None = None, dropout_p: float = 0.0):
    """缩放点积注意力的可读版本：缩放、相乘、掩码、softmax、再相乘。

    The readable reference path: scale → matmul → mask → softmax → matmul.

    Args:
        q: (..., T, d_k); k: (..., S, d_k); v: (..., S, d_v).
        mask: boolean, broadcastable to (..., T, S); True = may attend. A query
            whose keys are all masked gets zero weights and a zero output, never
            NaN.
        dropout_p: dropout on the attention weights (pass 0.0 in eval mode).
    Returns:
        (out (..., T, d_v), weights (..., T, S)); each unmasked row of weights
        sums to 1. out has v's dtype; the weights stay in at least float32.
    """
    _check_inputs(q, k, v, mask, dropout_p=dropout_p)
    # the scores, and the softmax, in at least float32 (float64 stays), as
    # fused kernels keep them: in float16, q·k can pass 65504 and become
    # inf, then NaN; autocast is off here, or fp16 autocast would run this
    # matmul in float16. q is scaled first: in 16 bits, √d_k times later
    hi = torch.promote_types(q.dtype, torch.float32)
    with without_autocast(q.device):
        scores = (q.to(hi) / math.sqrt(q.shape[-1])
                  @ k.to(hi).transpose(-2, -1))              # (..., T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)                    # (..., T, S)
    # a fully masked row had a uniform softmax: make it exactly zero
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights.to(v.dtype) @ v, weights                    # (..., T, d_v)


def fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    mask: torch.Tensor | None = None,
                    dropout_p: float = 0.0,
                    enable_gqa: bool = False) -> torch.Tensor:
    """缩放点积注意力的快速版本：调用 PyTorch 的融合内核，数学相同，不返回权重。

    The fast path: ``F.scaled_dot_product_attention`` (fused kernels), same
    maths, no weights.

    Same arguments as :func:`scaled_dot_product_attention`; returns only ``out``
    (..., T, d_v), with fully masked query rows set to zero (older PyTorch
    versions gave NaN there, pytorch/pytorch#103963; the guard keeps them
    right). ``enable_gqa=True``: k, v have H_kv heads, each shared by H / H_kv
    query heads (chapter 12; torch >= 2.5).
    """
    _check_inputs(q, k, v, mask, grouped=enable_gqa, dropout_p=dropout_p)
    gqa = {"enable_gqa": True} if enable_gqa else {}
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p,
                                              **gqa)
    if mask.dim() < 2:                 # the fused kernel wants (..., T, S)
        mask = mask.expand(q.shape[-2], k.shape[-2])
    has_key = mask.any(dim=-1, keepdim=True)                   # (..., T, 1)
    # let empty rows attend anywhere, then zero them below
    safe = mask | ~has_key
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=safe,
                                         dropout_p=dropout_p, **gqa)
    return out.masked_fill(~has_key, 0.0)


def causal_mask(length: int, device=None) -> torch.Tensor:
    """因果掩码：位置 i 只能看位置 j ≤ i（对角线及其下方为 True）。

    (L, L) boolean, True on and below the diagonal: position i may attend to
    j <= i. For T new queries after S - T cached keys, the (T, S) mask is
    ``causal_mask(S)[S - T:]``.
    """
    if device is not None and not isinstance(device, (str, torch.device)):
        raise TypeError(                    # causal_mask(3, 5) is not (3, 5)
            f"device must be a torch.device or a name such as 'cpu', but got "
            f"{device!r}; causal_mask takes one length, and the (T, S) mask "
            f"for T queries after S - T cached keys is causal_mask(S)[S - T:]")
    if torch.compiler.is_compiling():       # a compiled length stays
        n = length                          # symbolic: no graph per value
    else:
        try:
            n = operator.index(length)      # an int, or a NumPy / 0-d integer
        except TypeError:
            n = None
    if isinstance(length, bool) or n is None or n < 1:
        raise bad_value(n is not None and not isinstance(length, bool),
                        f"length must be a positive integer, but got {length!r}")
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """由词元编号得到填充掩码：键是真实词元的地方为 True。

    (B, 1, S) boolean, True where the key is a real token, from token ids
    (B, S).
    """
    require_ids(tokens, lead="B, S")
    require_token_id(pad_id=pad_id)
    require_counts(pad_id=pad_id)    # -1 would match nothing: no mask at all
    return (tokens != pad_id)[:, None, :]


def grouped_query_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                            mask: torch.Tensor | None = None) -> torch.Tensor:
    """分组查询注意力（GQA）：每 H / H_kv 个相邻的查询头共用一个键值头。

    Grouped-query attention (Ainslie et al., 2023): query head h uses key/value
    head h // (H / H_kv), the grouping of
    ``F.scaled_dot_product_attention(..., enable_gqa=True)``.
    H_kv = H is multi-head attention; H_kv = 1 is multi-query attention
    (Shazeer, 2019).
    The readable path: repeat each key/value head H / H_kv times, then
    chapter 3's function.

    Args:
        q: (..., H, T, d_k); k: (..., H_kv, S, d_k); v: (..., H_kv, S, d_v);
            H_kv divides H.
        mask: boolean, broadcastable to (..., H, T, S), True = may attend
            (default None).
    Returns:
        out (..., H, T, d_v) only, like ``F.scaled_dot_product_attention``; a
        query whose keys are all masked gets zeros.
    Raises:
        ValueError: fewer than 3 dimensions, k and v with different numbers of
            heads (or none), H_kv larger than H or not dividing it, or a mask
            that is not boolean or does not broadcast.
    """
    require_tensors(q=q, k=k, v=v)
    if q.dim() < 3 or k.dim() < 3 or v.dim() < 3:
        raise ValueError(
            f"q, k, v: expected at least 3 dimensions (..., heads, L, d), but "
            f"got shapes {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    n_heads, n_kv_heads = q.shape[-3], k.shape[-3]
    if v.shape[-3] != n_kv_heads:
        raise ValueError(f"k and v must have the same number of heads H_kv, "
                         f"but got k {tuple(k.shape)} and v {tuple(v.shape)}")
    if n_kv_heads < 1:
        raise ValueError(f"k and v: expected at least one head, but got "
                         f"k {tuple(k.shape)} and v {tuple(v.shape)}")
    require_groups(n_heads, n_kv_heads, f"q has {n_heads} heads, k and v "
                   f"have {n_kv_heads}")
    _check_inputs(q, k, v, mask, grouped=True)
    group = n_heads // n_kv_heads  # query heads per key/value head
    k = k.repeat_interleave(group, dim=-3)                 # (..., H, S, d_k)
    v = v.repeat_interleave(group, dim=-3)                 # (..., H, S, d_v)
    return scaled_dot_product_attention(q, k, v, mask)[0]  # (..., H, T, d_v)
