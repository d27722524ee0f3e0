"""第 4 章：多头注意力（multi-head attention）。

MultiHead(Q, K, V) = Concat(head_1, ..., head_H) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Shape legend: B batch, Lq query length, Lk key length, D d_model, H heads, Dh = D / H.
"""
from __future__ import annotations

import torch
from torch import nn

from tf_tutorial.attention import check_mask, fused_attention, scaled_dot_product_attention


class MultiHeadAttention(nn.Module):
    """H heads computed at once: one big (D, D) projection is H small (D, Dh) ones side by side.

    Args:
        d_model: D, the width of the inputs and of the output.
        n_heads: H; must divide d_model.
        dropout: dropout on the attention weights (training only).
        bias: biases in the four projections.
        fused: use ``F.scaled_dot_product_attention`` (fast) unless weights are requested.
    Shape:
        query (B, Lq, D); key, value (B, Lk, D); mask boolean, broadcastable to (B, Lq, Lk),
        True = may attend, shared by every head.
    Returns:
        (B, Lq, D); with ``return_weights=True`` also the weights (B, H, Lq, Lk).
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True,
                 fused: bool = True):
        super().__init__()
        if n_heads < 1 or d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), but got {dropout}")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.dropout, self.fused = dropout, fused
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, L, _ = x.shape
        return x.view(B, L, self.n_heads, self.d_head).transpose(1, 2)       # (B, H, L, Dh)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, _, L, _ = x.shape
        return x.transpose(1, 2).reshape(B, L, self.d_model)                # (B, L, D)

    def forward(self, query, key, value, mask=None, return_weights: bool = False):
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.dim() != 3 or t.shape[-1] != self.d_model:
                raise ValueError(f"{name}: expected shape (B, L, {self.d_model}), "
                                 f"but got {tuple(t.shape)}")
        k, v = self.project_kv(key, value)                                   # (B, H, Lk, Dh)
        return self.attend(query, k, v, mask, return_weights)

    def project_kv(self, key, value):
        """Keys and values, split into heads: (B, Lk, D) → two (B, H, Lk, Dh).

        Separate from :meth:`attend` so that a decoder can keep them (the KV cache, chapter 10).
        """
        return self.split_heads(self.w_k(key)), self.split_heads(self.w_v(value))

    def attend(self, query, k, v, mask=None, return_weights: bool = False):
        """query (B, Lq, D) against projected k, v (B, H, Lk, Dh) → (B, Lq, D)."""
        if mask is not None:
            check_mask(mask, (query.shape[0], query.shape[1], k.shape[2]))  # (B, Lq, Lk)
            if mask.dim() == 3:
                mask = mask[:, None]  # (B, 1, Lq, Lk): the same mask for every head
        q = self.split_heads(self.w_q(query))                                # (B, H, Lq, Dh)
        p = self.dropout if self.training else 0.0
        if self.fused and not return_weights:
            out, weights = fused_attention(q, k, v, mask, dropout_p=p), None
        else:
            out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p=p)
        out = self.w_o(self.merge_heads(out))                                # (B, Lq, D)
        return (out, weights) if return_weights else out
