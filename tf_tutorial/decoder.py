"""第 9 章：解码器层与解码器栈。

DecoderLayer:  y → masked self-attention → cross-attention (Q from y, K/V from the encoder
memory) → FFN, each inside a residual connection with LayerNorm (Post-LN or Pre-LN).

Shape legend: B batch, T target length, S source length, D d_model, H heads, F d_ff.
"""
from __future__ import annotations

import torch
from torch import nn

from tf_tutorial.ffn import PositionwiseFeedForward
from tf_tutorial.multihead import MultiHeadAttention
from tf_tutorial.residual import SublayerConnection, stack_norm


def _check_pair(x: torch.Tensor, memory: torch.Tensor, d_model: int) -> None:
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"x: expected shape (B, T, {d_model}), but got {tuple(x.shape)}")
    if memory.dim() != 3 or memory.shape[0] != x.shape[0] or memory.shape[-1] != d_model:
        raise ValueError(f"memory: expected shape ({x.shape[0]}, S, {d_model}) to match x "
                         f"{tuple(x.shape)}, but got {tuple(memory.shape)}")


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder output, then a position-wise FFN.

    Args:
        d_model, n_heads, d_ff, dropout: as in the paper (512, 8, 2048, 0.1).
        norm_first: False = Post-LN (2017 paper), True = Pre-LN.
    Shape:
        x (B, T, D); memory (B, S, D); self_mask broadcastable to (B, T, T) (causal and target
        padding); memory_mask broadcastable to (B, T, S) (source padding); True = may attend.
        Returns (B, T, D).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, activation: str = "relu", eps: float = 1e-5):
        super().__init__()
        self.d_model = d_model
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout=dropout, activation=activation)
        self.self_block, self.cross_block, self.ffn_block = (
            SublayerConnection(d_model, dropout, norm_first, eps) for _ in range(3))

    def forward(self, x, memory, self_mask=None, memory_mask=None):
        _check_pair(x, memory, self.d_model)
        x = self.self_block(x, lambda y: self.self_attn(y, y, y, self_mask))             # (B, T, D)
        x = self.cross_block(x, lambda y: self.cross_attn(y, memory, memory, memory_mask))
        return self.ffn_block(x, self.ffn)                                               # (B, T, D)


class Decoder(nn.Module):
    """N decoder layers and an optional final LayerNorm (on by default with Pre-LN).

    Shape: as :class:`DecoderLayer`.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, n_layers: int, dropout: float = 0.1,
                 norm_first: bool = False, activation: str = "relu", eps: float = 1e-5,
                 final_norm: bool | None = None):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout, norm_first,
                                                 activation, eps) for _ in range(n_layers))
        self.norm = stack_norm(d_model, norm_first, final_norm, eps)

    def forward(self, x, memory, self_mask=None, memory_mask=None):
        for layer in self.layers:
            x = layer(x, memory, self_mask, memory_mask)
        return self.norm(x)
