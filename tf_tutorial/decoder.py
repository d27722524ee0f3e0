"""第 9 章：解码器层与解码器栈。

DecoderLayer:  y → masked self-attention
               → cross-attention (Q from y, K/V from the encoder memory)
               → FFN, each inside a residual connection with LayerNorm
                 (Post-LN or Pre-LN).

Shape legend: B batch, T target length, S source length, D d_model, H heads,
d_ff FFN hidden width, N layers, t target positions already in a cache.
"""
from __future__ import annotations

import torch
from torch import nn

from tf_tutorial._checks import (first_weight, require_dtype_of,
                                 require_instance, require_sizes,
                                 require_tensors, require_width)
from tf_tutorial.attention import check_mask
from tf_tutorial.ffn import PositionwiseFeedForward
from tf_tutorial.multihead import KVCache, MultiHeadAttention
from tf_tutorial.residual import (SublayerConnection, given_settings,
                                  norm_after, require_stack_sizes,
                                  stack_from_layer)


def _check_inputs(x: torch.Tensor, memory: torch.Tensor, layer,
                  self_mask, memory_mask, cache) -> None:
    """x (B, T, D), memory (B, S, D), each of the dtype of the weights it
    meets first; each mask checked under its own name; ``cache`` one layer's
    (self, cross) pair of a :class:`DecoderCache`."""
    if cache is not None and not (
            isinstance(cache, (tuple, list)) and len(cache) == 2
            and all(isinstance(c, KVCache) for c in cache)
            and not cache[0].static and cache[1].static):
        raise TypeError("cache: expected one layer's (self, cross) pair of "
                        "KVCaches, as DecoderCache(n_layers).layers[i] holds "
                        f"them, but got {_describe(cache)}")
    d_model = layer.d_model
    require_width(x, d_model, lead="B, T",
                  weight=first_weight(layer.self_attn))
    require_tensors(memory=memory)
    if (memory.dim() != 3 or memory.shape[0] != x.shape[0]
            or memory.shape[-1] != d_model):
        raise ValueError(f"memory: expected shape ({x.shape[0]}, S, {d_model}) "
                         f"to match x {tuple(x.shape)}, "
                         f"but got {tuple(memory.shape)}")
    if not memory.is_floating_point():
        raise ValueError(f"memory must be floating point (the encoder's "
                         f"output), but got dtype {memory.dtype}")
    require_dtype_of(memory, first_weight(layer.cross_attn), "memory")
    B, T, S = x.shape[0], x.shape[1], memory.shape[1]
    t = 0 if cache is None else cache[0].length
    for name, mask, keys in (("self_mask", self_mask, t + T),
                             ("memory_mask", memory_mask, S)):
        if mask is not None:
            try:
                check_mask(mask, (B, T, keys))
            except ValueError as err:
                raise ValueError(f"{name}: {err}") from None


def _describe(cache) -> str:
    """What a refused cache was: its type, and for a pair its items' types
    (a swapped pair reads as the static one first)."""
    if isinstance(cache, (tuple, list)):
        items = ", ".join(
            f"KVCache(static={c.static})" if isinstance(c, KVCache)
            else type(c).__name__ for c in cache)
        return f"{type(cache).__name__} ({items})"
    return type(cache).__name__


class DecoderCache:
    """解码器在解码步之间保存的东西：每层一个自注意力缓存和一个交叉注意力缓存。

    What a decoder keeps between decoding steps: per layer, a growing
    :class:`KVCache` for the self-attention and a fixed one for the
    cross-attention (the memory, projected once)."""

    def __init__(self, n_layers: int):
        require_sizes(n_layers=n_layers)
        self.layers = [(KVCache(), KVCache(static=True))
                       for _ in range(n_layers)]

    @property
    def length(self) -> int:
        """已经解码的目标位置数 t，也就是下一个词元的位置。

        Target positions already decoded (t): the next token's position.
        """
        return self.layers[0][0].length

    def reorder(self, index: torch.Tensor) -> None:
        """按 ``index`` 保留批里的这些行（束搜索里是存活下来的候选，按新顺序）。

        Keep the batch rows ``index`` (beam search: the surviving beams, in
        their new order).
        """
        for self_cache, cross_cache in self.layers:
            self_cache.reorder(index)
            cross_cache.reorder(index)


class DecoderLayer(nn.Module):
    """解码器层：带掩码的自注意力、对记忆的交叉注意力，再接逐位置前馈网络。

    Masked self-attention, cross-attention over the encoder output, then a
    position-wise FFN.

    Args:
        d_model: D (the paper: 512).
        n_heads: H (8).
        d_ff: the FFN's hidden width d_ff (2048).
        dropout: on each sub-layer's output before the residual add, as in the
            paper; also on the attention weights and the FFN's hidden layer,
            as in PyTorch (default 0.1, the paper's).
        norm_first: False (default) = Post-LN, the 2017 paper; True = Pre-LN.
        activation: "relu" (default, the paper) or "gelu".
        eps: LayerNorm's ε (default 1e-5).
    Shape:
        x (B, T, D); memory (B, S, D); self_mask broadcastable to (B, T, T)
        (causal and target padding); memory_mask broadcastable to (B, T, S)
        (source padding); True = may attend.
        With a ``cache`` (one layer's pair from :class:`DecoderCache`), x holds
        only the new positions and self_mask covers the cached ones too,
        (B, T, t + T).
    Returns:
        (B, T, D); with ``return_weights=True`` also
        {"self": (B, H, T, T), "cross": (B, H, T, S)}.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int,
                 dropout: float = 0.1, norm_first: bool = False,
                 activation: str = "relu", eps: float = 1e-5):
        super().__init__()
        self.d_model = d_model
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout=dropout,
                                           activation=activation)
        self.self_block, self.cross_block, self.ffn_block = (
            SublayerConnection(d_model, dropout, norm_first, eps)
            for _ in range(3))

    def forward(self, x, memory, self_mask=None, memory_mask=None, cache=None,
                return_weights: bool = False):
        """带掩码的自注意力 → 交叉注意力 → 前馈网络，各带残差连接和层归一化。"""
        _check_inputs(x, memory, self, self_mask, memory_mask, cache)
        self_cache, cross_cache = cache if cache is not None else (None, None)
        weights = {} if return_weights else None

        def attend(attn, kind, y, kv, mask, kv_cache):
            out = attn(y, kv, kv, mask, return_weights=return_weights,
                       cache=kv_cache)
            if return_weights:
                out, weights[kind] = out
            return out

        x = self.self_block(x, lambda y: attend(
            self.self_attn, "self", y, y, self_mask, self_cache))  # (B, T, D)
        x = self.cross_block(x, lambda y: attend(
            self.cross_attn, "cross", y, memory, memory_mask, cross_cache))
        x = self.ffn_block(x, self.ffn)                            # (B, T, D)
        return (x, weights) if return_weights else x


class Decoder(nn.Module):
    """解码器：N 个解码器层，末尾可选层归一化（按尺寸构造的 Pre-LN 默认加）。

    N decoder layers and an optional final LayerNorm (on by default when built
    from sizes with Pre-LN; off by default for ``Decoder(layer, n_layers)``,
    as in torch). Built from sizes, or from one layer, like
    :class:`~tf_tutorial.encoder.Encoder`.

    Shape: as :class:`DecoderLayer`; ``cache`` is a :class:`DecoderCache`, and
    with ``return_weights=True`` the weights come back as
    {"self": [...], "cross": [...]}, one per layer.
    """

    def __init__(self, d_model: int | DecoderLayer, n_heads: int | None = None,
                 d_ff: int | None = None, n_layers: int | None = None,
                 dropout: float | None = None, norm_first: bool | None = None,
                 activation: str | None = None, eps: float | None = None,
                 final_norm: bool | None = None):
        super().__init__()
        given = given_settings(dropout=dropout, norm_first=norm_first,
                               activation=activation, eps=eps)
        if isinstance(d_model, nn.Module):           # Decoder(layer, N)
            self.layers, self.norm = stack_from_layer(
                DecoderLayer, d_model, n_heads, d_ff, n_layers, final_norm,
                given)
            return
        require_stack_sizes(DecoderLayer, n_heads, d_ff, n_layers)
        self.layers = nn.ModuleList(   # not given: DecoderLayer's defaults
            DecoderLayer(d_model, n_heads, d_ff, **given)
            for _ in range(n_layers))
        self.norm = norm_after(self.layers[0], final_norm)

    def forward(self, x, memory, self_mask=None, memory_mask=None,
                cache: DecoderCache | None = None,
                return_weights: bool = False):
        """依次通过每个解码器层；需要时收集每层的注意力权重。"""
        if cache is not None:
            require_instance(cache, DecoderCache, "cache")
        if cache is not None and len(cache.layers) != len(self.layers):
            raise ValueError(f"cache: expected a DecoderCache for "
                             f"{len(self.layers)} layers, "
                             f"but got one for {len(cache.layers)}")
        maps = {"self": [], "cross": []}
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, self_mask, memory_mask,
                      None if cache is None else cache.layers[i],
                      return_weights)
            if return_weights:
                x, w = x
                maps["self"].append(w["self"])
                maps["cross"].append(w["cross"])
        x = self.norm(x)
        return (x, maps) if return_weights else x
