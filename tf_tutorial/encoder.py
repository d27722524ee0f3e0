"""编码器层与编码器栈（第 8 章详述；第 6 章用它比较 Post-LN 与 Pre-LN）。

EncoderLayer:  x → SublayerConnection(self-attention) → SublayerConnection(FFN)

Shape legend: B batch, S source length, D d_model, H heads, d_ff FFN hidden
width, N layers.
"""
from __future__ import annotations

import torch
from torch import nn

from tf_tutorial._checks import first_weight, require_sizes, require_width
from tf_tutorial.ffn import PositionwiseFeedForward
from tf_tutorial.multihead import MultiHeadAttention
from tf_tutorial.residual import (SublayerConnection, given_settings,
                                  norm_after, require_stack_sizes,
                                  stack_from_layer)


class EncoderLayer(nn.Module):
    """编码器层：自注意力，再接逐位置前馈网络，各自包在残差连接和层归一化里。

    Self-attention then a position-wise FFN, each inside a residual connection
    with LayerNorm.

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
        x (B, S, D); mask boolean, broadcastable to (B, S, S), True = may
        attend → (B, S, D).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int,
                 dropout: float = 0.1, norm_first: bool = False,
                 activation: str = "relu", eps: float = 1e-5):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout=dropout,
                                           activation=activation)
        self.attn_block = SublayerConnection(d_model, dropout, norm_first, eps)
        self.ffn_block = SublayerConnection(d_model, dropout, norm_first, eps)

    def forward(self, x: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """让每个源位置先看整个源序列（自注意力），再各自经过前馈网络。"""
        require_width(x, self.self_attn.d_model, lead="B, S",
                      weight=first_weight(self.self_attn))
        x = self.attn_block(
            x, lambda y: self.self_attn(y, y, y, mask))  # (B, S, D)
        return self.ffn_block(x, self.ffn)               # (B, S, D)


class Encoder(nn.Module):
    """编码器：N 个编码器层，末尾可选层归一化（按尺寸构造的 Pre-LN 默认加）。

    N encoder layers and an optional final LayerNorm (on by default with Pre-LN,
    where no sublayer normalises the stack's output).

    Built from sizes, ``Encoder(d_model, n_heads, d_ff, n_layers, ...)``
    (unless given: dropout 0.1, Post-LN, ReLU, eps 1e-5, as
    :class:`EncoderLayer`), or from one layer, ``Encoder(layer, n_layers)``,
    as ``nn.TransformerEncoder(layer, num_layers)`` is: N deep copies of it,
    and no final norm unless ``final_norm=True``. The copies keep the layer's
    dropout, norm_first, activation and eps; a different value given here
    is refused, not ignored.

    Shape: x (B, S, D), mask as in :class:`EncoderLayer` → (B, S, D).
    """

    def __init__(self, d_model: int | EncoderLayer, n_heads: int | None = None,
                 d_ff: int | None = None, n_layers: int | None = None,
                 dropout: float | None = None, norm_first: bool | None = None,
                 activation: str | None = None, eps: float | None = None,
                 final_norm: bool | None = None):
        super().__init__()
        given = given_settings(dropout=dropout, norm_first=norm_first,
                               activation=activation, eps=eps)
        if isinstance(d_model, nn.Module):           # Encoder(layer, N)
            self.layers, self.norm = stack_from_layer(
                EncoderLayer, d_model, n_heads, d_ff, n_layers, final_norm,
                given)
            return
        require_stack_sizes(EncoderLayer, n_heads, d_ff, n_layers)
        self.layers = nn.ModuleList(   # not given: EncoderLayer's defaults
            EncoderLayer(d_model, n_heads, d_ff, **given)
            for _ in range(n_layers))
        self.norm = norm_after(self.layers[0], final_norm)

    def forward(self, x: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """依次通过每个编码器层，输出记忆。"""
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)
