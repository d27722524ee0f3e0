"""第 12 章（续篇）：FlashAttention 的分块注意力与在线 softmax，不存分数矩阵。

out = softmax(Q K^T / sqrt(d_k)) V, computed one (query block, key block) tile
at a time.

Online softmax. For one query row, keep a running max m, a running denominator l
and a running numerator acc (a d_v vector), starting at m = −∞, l = 0, acc = 0.
For each key block j:

    s_j   = q K_j^T / sqrt(d_k)  (masked keys get −∞)
    m'    = max(m, max(s_j))
    c     = exp(m − m')          (rescales what was summed against the old max)
    l'    = c · l   + Σ exp(s_j − m')
    acc'  = c · acc + exp(s_j − m') V_j
and at the end out = acc / l.

Why it is exact: by induction, after the blocks seen so far,
l = Σ_k exp(s_k − m) and acc = Σ_k exp(s_k − m) v_k over all keys k seen, with m
their max; multiplying by c moves both sums from the old shift to the new one,
since exp(s − m) · exp(m − m') = exp(s − m'). At the end
acc / l = Σ_k exp(s_k − m) v_k / Σ_k exp(s_k − m) = softmax(s) V: the shift m
cancels, it only keeps exp(·) ≤ 1 so nothing overflows. A row with every key
masked keeps l = 0 and gets zeros.

Shape legend: B batch, H heads, L query length, S key length, d_k query/key
width, d_v value width, L_b and S_b one tile's rows and columns (≤ block_size);
``...`` any leading batch dimensions, e.g. (B, H). Masks are boolean, True = may
attend.
"""
from __future__ import annotations

import math

import torch

from tf_tutorial._checks import require_counts, require_flags, require_sizes
from tf_tutorial.attention import _check_inputs


def online_softmax_step(m: torch.Tensor, l: torch.Tensor, acc: torch.Tensor,
                        scores: torch.Tensor, v_block: torch.Tensor):
    """在线 softmax 的一步：把一块分数并入运行中的最大值 m、分母 l 和分子 acc。

    One step of the recurrence in the module docstring, for a block of keys.

    Args:
        m: running row max (..., L_b, 1), −∞ before the first key.
        l: running denominator Σ exp(s − m) (..., L_b, 1), 0 at the start.
        acc: running numerator Σ exp(s − m) v (..., L_b, d_v), 0 at the start.
        scores: this block's scaled scores (..., L_b, S_b), −∞ where a key is
            masked.
        v_block: this block's values (..., S_b, d_v).
    Returns:
        (m', l', acc'), the same shapes; the output so far is acc' / l'
        wherever l' > 0.
    """
    # m only shifts the exponents and cancels in acc / l: no gradient needs to
    # flow through it
    m_new = torch.maximum(
        m, scores.detach().amax(dim=-1, keepdim=True))    # (..., L_b, 1)
    # a row with no visible key yet has m' = −∞; shift it by 0 instead so exp
    # gives 0, not NaN
    shift = torch.where(m_new == -math.inf, 0.0, m_new)
    c = torch.exp(m - shift)                              # (..., L_b, 1)
    p = torch.exp(scores - shift)                         # (..., L_b, S_b)
    return (m_new, c * l + p.sum(dim=-1, keepdim=True),
            c * acc + p @ v_block.to(p.dtype))


def causal_tiles(length: int, block_size: int) -> int:
    """因果的 :func:`flash_attention` 在 L = S 时实际算的格数。

    n(n + 1)/2 with n = ⌈L / block_size⌉: query block i meets key blocks
    0 … i; the blocks wholly in its future are skipped. (Without the causal
    mask all n² tiles are computed.)
    """
    require_counts(length=length)
    require_sizes(block_size=block_size)
    n = -(-length // block_size)
    return n * (n + 1) // 2


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    mask: torch.Tensor | None = None, causal: bool = False,
                    block_size: int = 64) -> torch.Tensor:
    """分块的缩放点积注意力：等于 softmax(QKᵀ/√d_k)V，每步 block_size² 个分数。

    FlashAttention's algorithm in plain PyTorch: loop over query blocks and key
    blocks, fold each tile into the online softmax, never form the (L, S) score
    matrix. Same result as ``F.scaled_dot_product_attention`` (and chapter 3's
    reference), fully masked rows → zeros.

    Args:
        q: (..., L, d_k); k: (..., S, d_k); v: (..., S, d_v).
        mask: boolean, broadcastable to (..., L, S), True = may attend
            (default None).
        causal: query i sees keys j ≤ i, top-left aligned as
            ``F.scaled_dot_product_attention(is_causal=True)`` (tril of an
            (L, S) ones matrix); key blocks entirely in the future are skipped.
            ANDed with ``mask`` (default False). With fewer queries than keys
            (a KV cache) this is not the package's decoding mask, which is
            bottom-right aligned (``causal_mask(S)[S - L:]``): pass that as
            ``mask`` there.
        block_size: rows and columns of one tile (default 64).
    Returns:
        out (..., L, d_v) in q's dtype; sums run in float32 (float64 for
        float64 inputs).
    Raises:
        ValueError: block_size not a positive integer; shapes or mask as
            chapter 3's checks.

    Memory: each step holds O(block_size²) scores. Autograd keeps the tiles for
    the backward pass; the real kernel recomputes them there instead, which is
    what makes its backward small.
    """
    require_sizes(block_size=block_size)
    require_flags(causal=causal)
    _check_inputs(q, k, v, mask)
    L, S, in_dtype = q.shape[-2], k.shape[-2], q.dtype
    # float32, or float64 for float64
    dtype = torch.promote_types(in_dtype, torch.float32)
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if mask is not None:
        mask = mask.expand(*batch, L, S)  # a view: (..., L, S) costs no memory
    q = q.to(dtype) / math.sqrt(q.shape[-1])  # fold the scale into q once
    # starts with an empty (..., 0, d_v) block, so L = 0 gives an empty out
    out = [torch.zeros((*batch, 0, v.shape[-1]), dtype=dtype,
                       device=q.device)]
    for i0 in range(0, L, block_size):
        i1 = min(i0 + block_size, L)
        m = torch.full((*batch, i1 - i0, 1), -math.inf, dtype=dtype,
                       device=q.device)
        l = torch.zeros_like(m)                                 # (..., L_b, 1)
        acc = torch.zeros((*batch, i1 - i0, v.shape[-1]), dtype=dtype,
                          device=q.device)
        # later blocks: all future
        for j0 in range(0, min(S, i1) if causal else S, block_size):
            j1 = min(j0 + block_size, S)
            scores = (
                q[..., i0:i1, :] @ k[..., j0:j1, :].to(dtype).mT
            ).to(dtype)                                         # (.., L_b, S_b)
            keep = None if mask is None else mask[..., i0:i1, j0:j1]
            if causal:
                rows = torch.arange(i0, i1, device=q.device)[:, None]
                past = rows >= torch.arange(j0, j1,
                                            device=q.device)  # (L_b, S_b)
                keep = past if keep is None else keep & past
            if keep is not None:
                scores = scores.masked_fill(~keep, -math.inf)
            m, l, acc = online_softmax_step(m, l, acc, scores, v[..., j0:j1, :])
        # l = 0: no visible key, acc = 0
        out.append(acc / torch.where(l > 0, l, 1.0))
    return torch.cat(out, dim=-2).to(in_dtype)                  # (..., L, d_v)
