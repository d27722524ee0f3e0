"""第 4 章：多头注意力（multi-head attention）。

MultiHead(Q, K, V) = Concat(head_1, ..., head_H) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Shape legend: B batch, Lq query length, Lk key length, D d_model, H heads, Dh = D / H,
t positions already in a cache.
"""
from __future__ import annotations

import torch
from torch import nn

from tf_tutorial.attention import check_mask, fused_attention, scaled_dot_product_attention


class KVCache:
    """The projected keys and values one attention layer keeps between decoding steps (chapter 10).

    ``static=False`` (self-attention): each call appends the new positions' keys and values,
    so a query sees every earlier position without recomputing it.
    ``static=True`` (cross-attention): the first call stores the projected encoder memory; later
    calls reuse it, because the source does not change while the target grows.
    """

    def __init__(self, static: bool = False):
        self.static = static
        self.k: torch.Tensor | None = None                                   # (B, H, t, Dh)
        self.v: torch.Tensor | None = None

    @property
    def length(self) -> int:
        """Positions held (t); 0 before the first step."""
        return 0 if self.k is None else self.k.shape[2]

    def update(self, k: torch.Tensor, v: torch.Tensor):
        """Store new keys and values (B, H, L, Dh); return everything the query may attend to."""
        if self.k is not None and not self.static:
            k, v = torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)   # (B, H, t + L, Dh)
        self.k, self.v = k, v
        return k, v

    def reorder(self, index: torch.Tensor) -> None:
        """Keep the batch rows ``index`` in that order (beam search: the surviving beams)."""
        if self.k is not None:
            self.k, self.v = self.k[index], self.v[index]


class MultiHeadAttention(nn.Module):
    """H heads computed at once: one big (D, D) projection is H small (D, Dh) ones side by side.

    Args:
        d_model: D, the width of the inputs and of the output.
        n_heads: H; must divide d_model.
        dropout: dropout on the attention weights (training only; PyTorch and the Annotated
            Transformer do this too, the paper does not mention it).
        bias: biases in the four projections.
        fused: use ``F.scaled_dot_product_attention`` (fast) unless weights are requested.
    Shape:
        query (B, Lq, D); key, value (B, Lk, D); mask boolean, broadcastable to (B, Lq, Lk),
        True = may attend, shared by every head.
        cache: a :class:`KVCache` to read past keys and values from and add these to (decoding);
            the mask then covers every key the cache holds, (B, Lq, t + Lk).
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

    def forward(self, query, key, value, mask=None, return_weights: bool = False, cache: KVCache | None = None):
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.dim() != 3 or t.shape[-1] != self.d_model:
                raise ValueError(f"{name}: expected shape (B, L, {self.d_model}), "
                                 f"but got {tuple(t.shape)}")
        if cache is not None and cache.static and cache.k is not None:
            k, v = cache.k, cache.v              # cross-attention: the memory was projected at step 1
        else:
            k, v = self.project_kv(key, value)                               # (B, H, Lk, Dh)
            if cache is not None:
                k, v = cache.update(k, v)                                    # (B, H, t + Lk, Dh)
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
