"""第 7 章：逐位置前馈网络（position-wise feed-forward network）。

FFN(x) = act(x W₁ + b₁) W₂ + b₂,  W₁ (D, d_ff), W₂ (d_ff, D), usually d_ff = 4D.
SwiGLU(x) = (SiLU(x W_gate) ⊙ x W_up) W_down (Shazeer, 2020), with
d_ff ≈ 2/3 · 4D to keep the parameter count.

Shape legend: B batch, L sequence length, D d_model, d_ff the hidden width.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tf_tutorial._checks import (require_choice, require_dropout,
                                 require_sizes, require_width)

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class PositionwiseFeedForward(nn.Module):
    """逐位置前馈网络：两个线性变换夹一个非线性，对每个位置分别作用。

    Two linear maps with a non-linearity between, applied to every position
    independently.

    Args:
        d_model: D.
        d_ff: the hidden width d_ff (4·D in the paper).
        dropout: after the activation, training only (default 0.0). The
            paper has none here; PyTorch's ``nn.TransformerEncoderLayer`` and
            the Annotated Transformer do.
        activation: "relu" (default, the paper) or "gelu".
    Shape:
        x (B, L, D) → (B, L, D).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0,
                 activation: str = "relu"):
        super().__init__()
        require_choice("activation", activation, sorted(ACTIVATIONS))
        require_sizes(d_model=d_model, d_ff=d_ff)
        require_dropout(dropout)
        self.d_model, self.act = d_model, ACTIVATIONS[activation]
        self.w1, self.w2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """先升宽到 d_ff、经过激活函数，再降回 D。"""
        require_width(x, self.d_model, weight=self.w1.weight)
        return self.w2(
            self.dropout(self.act(self.w1(x))))  # (B, L, d_ff) -> (B, L, D)


def swiglu_hidden(d_model: int, multiple_of: int = 8) -> int:
    """SwiGLU 与 4D 宽的 ReLU 前馈网络参数一样多的中间宽度：2/3 · 4D，向上取整。

    Hidden width that gives SwiGLU the parameters of a 4·D ReLU FFN: 2/3 · 4D,
    rounded up.
    """
    require_sizes(d_model=d_model, multiple_of=multiple_of)
    hidden = -(-8 * d_model // 3)      # ⌈8D/3⌉ in integers (int() would round down)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


class SwiGLUFeedForward(nn.Module):
    """带门控的前馈网络变体 SwiGLU（Shazeer 2020；PaLM、LLaMA 使用），没有偏置。

    The gated variant of Shazeer (2020), used by PaLM and LLaMA:
    (SiLU(x W_gate) ⊙ (x W_up)) W_down, no biases.

    Three matrices instead of two (two D × d_ff, one d_ff × D), so d_ff =
    2/3 · 4D (the default) keeps the parameter count of the ReLU FFN, as in
    Shazeer's comparison and LLaMA; PaLM keeps d_ff = 4D.
    Shape: x (B, L, D) → (B, L, D).
    """

    def __init__(self, d_model: int, d_ff: int | None = None,
                 dropout: float = 0.0):
        super().__init__()
        require_sizes(d_model=d_model)
        require_dropout(dropout)
        d_ff = swiglu_hidden(d_model) if d_ff is None else d_ff
        require_sizes(d_ff=d_ff)
        self.d_model = d_model
        self.w_gate = nn.Linear(d_model, d_ff, bias=False)
        self.w_up = nn.Linear(d_model, d_ff, bias=False)
        self.w_down = nn.Linear(d_ff, d_model, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """门控分支经过 SiLU 后与另一分支逐元素相乘，再投影回 D。"""
        require_width(x, self.d_model, weight=self.w_up.weight)
        return self.w_down(
            self.dropout(F.silu(self.w_gate(x)) * self.w_up(x)))  # (B, L, D)
