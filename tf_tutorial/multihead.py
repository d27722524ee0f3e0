"""第 4 章：多头注意力（multi-head attention）。

MultiHead(Q, K, V) = Concat(head_1, ..., head_H) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Shape legend (book/appendix_notation.md): B batch, T query length, S key and
value length (in self-attention S = T = L), D d_model, H heads, d_k = D / H the
width of one head, t positions already in a cache, H_kv key/value heads of
:class:`GroupedQueryAttention` (chapter 12; H_kv = H is multi-head attention,
H_kv = 1 multi-query attention).
"""
from __future__ import annotations

import torch
from torch import nn

from tf_tutorial._checks import (require_dropout, require_flags,
                                 require_groups, require_instance,
                                 require_sizes, require_width)
from tf_tutorial.attention import (check_mask, fused_attention,
                                   scaled_dot_product_attention)


def check_inputs(query, key, value, d_model: int, weight=None,
                 cache=None, return_weights: bool = False) -> None:
    """检查注意力层的三个输入：形状 (B, L, D)、同一个批、键和值一样长。

    Raise ValueError naming the argument: query (B, T, D), key and value
    (B, S, D) with the same B and S; with ``weight`` (a projection's), a
    ``DtypeMismatchError`` for an input its matrix product would refuse;
    TypeError for a ``cache`` that is not a :class:`KVCache`, and for a
    ``return_weights`` that is not True or False ("no" would mean True).
    """
    require_flags(return_weights=return_weights)
    if cache is not None:
        require_instance(cache, KVCache, "cache")
    for name, t in (("query", query), ("key", key), ("value", value)):
        require_width(t, d_model, name, lead="B, L", weight=weight)
    if not query.shape[0] == key.shape[0] == value.shape[0]:
        raise ValueError(f"query, key and value must have the same batch size "
                         f"B, but got {query.shape[0]}, {key.shape[0]} and "
                         f"{value.shape[0]}")
    if key.shape[1] != value.shape[1]:
        raise ValueError(f"key and value must have the same length S, but "
                         f"got key {tuple(key.shape)} and value "
                         f"{tuple(value.shape)}")


def heads_mask(mask, batch: int, queries: int, keys: int):
    """检查一个各头共用的掩码，并找出一个键都不许看的查询。

    Check that ``mask`` broadcasts to (B, T, S) = (batch, queries, keys) and
    return it shaped for the heads ((B, 1, T, S) from a 3-D mask; fewer
    dimensions broadcast as they are) with ``has_key``, broadcastable to
    (B, T, 1): False for a query that may attend to no key, whose output an
    attention module then sets to 0 after W^O (otherwise W^O's bias).
    A mask that already has a head axis of size 1, (B, 1, T, S) as many
    codebases write it, is the same mask.
    """
    four = isinstance(mask, torch.Tensor) and mask.dim() == 4
    if four and mask.shape[1] == 1:
        mask, four = mask[:, 0], False        # (B, 1, T, S) → (B, T, S)
    if four or isinstance(mask, torch.Tensor) and mask.dim() > 4:
        raise ValueError(f"mask: one (B, T, S) or (B, 1, T, S) mask serves "
                         f"every head, but got shape {tuple(mask.shape)}")
    if (isinstance(mask, torch.Tensor) and mask.dim() == 2 and batch > 1
            and mask.shape == (batch, keys) and batch != queries):
        # one row per sentence, like nn.MultiheadAttention's key_padding_mask
        raise ValueError(f"mask of shape {tuple(mask.shape)}: a 2-D mask is "
                         f"read as (T, S), one row per query. A mask with one "
                         f"row per sentence needs a query axis: mask[:, None] "
                         f"has shape ({batch}, 1, {keys})")
    check_mask(mask, (batch, queries, keys))
    has_key = mask.any(dim=-1, keepdim=True)
    return (mask[:, None] if mask.dim() == 3 else mask), has_key


def zero_keyless(out: torch.Tensor, has_key, keys: int) -> torch.Tensor:
    """一个键都不许看（或根本没有键）的查询输出 0，而不是 W^O 的偏置。

    ``out`` (B, T, D) after W^O; ``has_key`` from :func:`heads_mask`, or None
    without a mask; ``keys`` = S. With S = 0 no query has a key.
    """
    if has_key is not None:
        return out.masked_fill(~has_key, 0.0)
    return out if keys else out * 0          # * 0 keeps the autograd graph


class KVCache:
    """一个注意力层在解码的各步之间保存的键和值（KV 缓存，第 10 章）。

    The projected keys and values one attention layer keeps between decoding
    steps (chapter 10).

    ``static=False`` (self-attention): each call appends the new positions' keys
    and values, so a query sees every earlier position without recomputing it.
    ``static=True`` (cross-attention): it holds the projected encoder memory,
    stored by the first step; ``MultiHeadAttention.forward`` then reads it
    from the cache instead of projecting the memory again (the source does
    not change while the target grows). ``update`` on a static cache
    replaces what it holds.
    """

    def __init__(self, static: bool = False):
        require_flags(static=static)
        self.static = static
        self.k: torch.Tensor | None = None  # (B, H, t, d_k)
        self.v: torch.Tensor | None = None

    @property
    def length(self) -> int:
        """缓存里已有的位置数 t；第一步之前为 0。

        Positions held (t); 0 before the first step.
        """
        return 0 if self.k is None else self.k.shape[2]

    def update(self, k: torch.Tensor, v: torch.Tensor):
        """存入新的键和值，返回查询可以看到的全部键和值。

        Store new keys and values (B, H, L, d_k); return everything the query
        may attend to.
        """
        self._require_batch(k.shape[0])
        if self.k is not None and not self.static:
            k, v = (torch.cat([self.k, k], dim=2),
                    torch.cat([self.v, v], dim=2))  # (B, H, t + L, d_k)
        self.k, self.v = k, v
        return k, v

    def stored(self, batch: int):
        """取出静态缓存存着的键和值（交叉注意力从第二步起直接读它们）。

        The projected memory of a static cache, for a query batch of
        ``batch`` rows (it must be the batch the cache was filled with).
        """
        self._require_batch(batch)
        return self.k, self.v

    def _require_batch(self, batch: int) -> None:
        if self.k is not None and batch != self.k.shape[0]:
            raise ValueError(f"cache: it holds a batch of {self.k.shape[0]}, "
                             f"but got {batch} rows")

    def reorder(self, index: torch.Tensor) -> None:
        """按 ``index`` 的顺序保留批里的这些行（束搜索里是存活下来的候选）。

        Keep the batch rows ``index`` in that order (beam search: the surviving
        beams).
        """
        if self.k is not None:
            self.k, self.v = self.k[index], self.v[index]


class MultiHeadAttention(nn.Module):
    """多头注意力：H 个头一起算，一个 (D, D) 投影就是 H 个 (D, d_k) 小投影并排。

    H heads computed at once: one big (D, D) projection is H small (D, d_k) ones
    side by side.

    Args:
        d_model: D, the width of the inputs and of the output.
        n_heads: H; must divide d_model.
        dropout: dropout on the attention weights (training only; PyTorch and
            the Annotated Transformer do this too, the paper does not mention
            it).
        bias: biases in the four projections.
        fused: use ``F.scaled_dot_product_attention`` (fast) unless weights are
            requested.
    Shape:
        query (B, T, D); key, value (B, S, D); mask boolean, broadcastable to
        (B, T, S), True = may attend, shared by every head.
        cache: a :class:`KVCache` to read past keys and values from and add
            these to (decoding); the mask then covers every key the cache
            holds, (B, T, t + S).
    Returns:
        (B, T, D); with ``return_weights=True`` also the weights (B, H, T, S).
        A query whose mask row is all False outputs zeros (its weights too),
        never NaN and not W^O's bias.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0,
                 bias: bool = True, fused: bool = True):
        super().__init__()
        require_sizes(d_model=d_model, n_heads=n_heads)
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by "
                             f"n_heads={n_heads}")
        require_dropout(dropout)
        require_flags(bias=bias, fused=fused)
        self.d_model, self.n_heads, self.d_k = (
            d_model, n_heads, d_model // n_heads)
        self.dropout, self.fused = dropout, fused
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """把 (B, L, D) 拆成 H 个头：(B, H, L, d_k)。"""
        B, L, _ = x.shape
        return (x.view(B, L, self.n_heads, self.d_k)
                .transpose(1, 2))  # (B, H, L, d_k)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """把 H 个头拼回去：(B, H, L, d_k) → (B, L, D)。"""
        B, _, L, _ = x.shape
        return x.transpose(1, 2).reshape(B, L, self.d_model)  # (B, L, D)

    def forward(self, query, key, value, mask=None,
                return_weights: bool = False, cache: KVCache | None = None):
        """投影出键和值（或从缓存里取），再让查询对它们做注意力。"""
        check_inputs(query, key, value, self.d_model, self.w_q.weight,
                     cache, return_weights)
        if cache is not None and cache.static and cache.k is not None:
            # cross-attention: the memory was projected at step 1
            k, v = cache.stored(query.shape[0])
        else:
            k, v = self.project_kv(key, value)  # (B, H, S, d_k)
            if cache is not None:
                if mask is not None:  # a bad mask: refused before it grows
                    heads_mask(mask, *query.shape[:2],
                               cache.length + k.shape[2])
                k, v = cache.update(k, v)       # (B, H, t + S, d_k)
        return self.attend(query, k, v, mask, return_weights)

    def project_kv(self, key, value):
        """投影出键和值，并拆成 H 个头。

        Keys and values, split into heads: (B, S, D) → two (B, H, S, d_k).

        Separate from :meth:`attend` so that a decoder can keep them (the KV
        cache, chapter 10).
        """
        return (self.split_heads(self.w_k(key)),
                self.split_heads(self.w_v(value)))

    def attend(self, query, k, v, mask=None, return_weights: bool = False):
        """投影查询，对已拆好头的键和值做注意力，再拼接各头并做输出投影。

        query (B, T, D) against projected k, v (B, H, S, d_k) → (B, T, D).
        """
        has_key = None
        if mask is not None:  # (B, T, S) → (B, 1, T, S), one for every head
            mask, has_key = heads_mask(mask, query.shape[0], query.shape[1],
                                       k.shape[2])
        q = self.split_heads(self.w_q(query))  # (B, H, T, d_k)
        p = self.dropout if self.training else 0.0
        if self.fused and not return_weights:
            out, weights = fused_attention(q, k, v, mask, dropout_p=p), None
        else:
            out, weights = scaled_dot_product_attention(q, k, v, mask,
                                                        dropout_p=p)
        out = self.w_o(self.merge_heads(out))  # (B, T, D)
        out = zero_keyless(out, has_key, k.shape[2])
        return (out, weights) if return_weights else out


class GroupedQueryAttention(nn.Module):
    """分组查询注意力（GQA）：H 个查询头、H_kv 个键值头，KV 缓存小 H / H_kv 倍。

    Multi-head attention whose keys and values have only H_kv heads (Ainslie et
    al., 2023): each group of H / H_kv consecutive query heads shares one, as in
    :func:`~tf_tutorial.attention.grouped_query_attention`. W^K and W^V map
    D → H_kv·d_k, so a :class:`KVCache` holds (B, H_kv, t, d_k), H / H_kv times
    less than for :class:`MultiHeadAttention`. H_kv = H is multi-head
    attention, H_kv = 1 multi-query attention.

    Args:
        d_model: D. n_heads: H, must divide D. n_kv_heads: H_kv >= 1, must
            divide H.
        dropout: dropout on the attention weights, training only (default 0.0).
        bias: biases in the four projections (default True).
        rotary: None (default) or a position rotation with
            ``forward(x, start)``, e.g.
            ``tf_tutorial.rope.RotaryEmbedding(d_k)``: q and k are rotated
            after the split into heads and before the cache update, the new
            positions starting at ``cache.length`` (0 without a cache).
            Self-attention only: with a static cache it raises.
        kernel: None (default: the fused kernel) or another attention
            function ``kernel(q, k, v, mask) -> out`` on heads, with the
            key/value heads repeated for their groups: q, k, v (B, H, ·, d_k),
            mask None or (B, 1, T, S). E.g.
            ``functools.partial(tf_tutorial.flash.flash_attention,
            block_size=64)`` (chapter 12). It gets no dropout: with dropout
            > 0 it runs in eval mode only.
    Shape:
        As :class:`MultiHeadAttention`: query (B, T, D); key, value (B, S, D);
        mask boolean, broadcastable to (B, T, S), with a cache (B, T, t + S);
        True = may attend, every head; a query with no key to attend to
        outputs zeros, as in :class:`MultiHeadAttention`.
    Returns:
        (B, T, D); with ``return_weights=True`` also the weights (B, H, T, S),
        from the readable path; otherwise
        ``F.scaled_dot_product_attention(..., enable_gqa=True)`` (torch >= 2.5).
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int,
                 dropout: float = 0.0, bias: bool = True, rotary=None,
                 kernel=None):
        super().__init__()
        require_sizes(d_model=d_model, n_heads=n_heads)
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by "
                             f"n_heads={n_heads}")
        require_sizes(n_kv_heads=n_kv_heads)
        require_groups(n_heads, n_kv_heads)
        require_dropout(dropout)
        require_flags(bias=bias)
        self.d_model, self.n_heads, self.n_kv_heads = (
            d_model, n_heads, n_kv_heads)
        self.d_k, self.dropout = d_model // n_heads, dropout
        for name, f in (("rotary", rotary), ("kernel", kernel)):
            if f is not None and not callable(f):
                raise TypeError(f"{name} must be None or callable, "
                                f"but got {type(f).__name__}")
        if getattr(rotary, "head_dim", self.d_k) != self.d_k:
            raise ValueError(f"rotary: expected head_dim {self.d_k} "
                             f"(d_model / n_heads), but got {rotary.head_dim}")
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.rotary, self.kernel = rotary, kernel

    def split_heads(self, x: torch.Tensor, n_heads: int) -> torch.Tensor:
        """把 (B, L, n·d_k) 拆成 n 个头：(B, n, L, d_k)。"""
        B, L, _ = x.shape
        return x.view(B, L, n_heads, self.d_k).transpose(1, 2)  # (B, n, L, d_k)

    def forward(self, query, key=None, value=None, mask=None,
                return_weights: bool = False, cache: KVCache | None = None):
        """投影并拆头，（可选）旋转 q 和 k，更新缓存，再做注意力。

        ``attn(x)`` is self-attention, as LLaMA-style code calls it: a missing
        key is the query, a missing value the key.
        """
        key = query if key is None else key
        value = key if value is None else value
        check_inputs(query, key, value, self.d_model, self.w_q.weight,
                     cache, return_weights)
        if self.rotary is not None and cache is not None and cache.static:
            raise ValueError("cache: rotary positions need a self-attention "
                             "cache (static=False), but got static=True")
        q = self.split_heads(self.w_q(query), self.n_heads)  # (B, H, T, d_k)
        if cache is not None and cache.static and cache.k is not None:
            # cross-attention: the memory was projected at step 1
            k, v = cache.stored(query.shape[0])
        else:
            k = self.split_heads(self.w_k(key),
                                 self.n_kv_heads)    # (B, H_kv, S, d_k)
            v = self.split_heads(self.w_v(value),
                                 self.n_kv_heads)    # (B, H_kv, S, d_k)
            # the new positions start where the cache ends
            if self.rotary is not None:
                start = 0 if cache is None else cache.length
                q, k = self.rotary(q, start), self.rotary(k, start)
            if cache is not None:
                if mask is not None:  # a bad mask: refused before it grows
                    heads_mask(mask, *query.shape[:2],
                               cache.length + k.shape[2])
                k, v = cache.update(k, v)            # (B, H_kv, t + S, d_k)
        return self.attend(q, k, v, mask, return_weights)

    def attend(self, q, k, v, mask=None, return_weights: bool = False):
        """H 个查询头对 H_kv 个键值头做注意力，再拼接各头并做输出投影。

        q (B, H, T, d_k) against k, v (B, H_kv, S, d_k) → (B, T, D).
        """
        has_key = None
        if mask is not None:  # (B, T, S) → (B, 1, T, S), one for every head
            mask, has_key = heads_mask(mask, q.shape[0], q.shape[2],
                                       k.shape[2])
        p = self.dropout if self.training else 0.0
        if return_weights or self.kernel is not None:
            # each key/value head repeated for its group
            group = self.n_heads // self.n_kv_heads
            k, v = (k.repeat_interleave(group, dim=1),
                    v.repeat_interleave(group, dim=1))  # (B, H, S, d_k)
        if return_weights:    # the readable path
            out, weights = scaled_dot_product_attention(q, k, v, mask,
                                                        dropout_p=p)
        elif self.kernel is not None:
            if p:
                raise ValueError(f"kernel: {self.kernel!r} has no dropout, "
                                 f"but dropout={self.dropout} in training "
                                 "mode; use it in eval mode or with "
                                 "dropout=0")
            if mask is not None:   # as documented, whatever shape it came in
                mask = mask.expand(q.shape[0], 1, q.shape[2], k.shape[2])
            out, weights = self.kernel(q, k, v, mask), None
        else:
            out, weights = fused_attention(q, k, v, mask, dropout_p=p,
                                           enable_gqa=True), None
        B, _, T, _ = out.shape
        out = self.w_o(
            out.transpose(1, 2).reshape(B, T, self.d_model))  # (B, T, D)
        out = zero_keyless(out, has_key, k.shape[2])
        return (out, weights) if return_weights else out
