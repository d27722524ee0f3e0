"""第 6 章：残差连接（residual connection）与层归一化的两种放法。

Post-LN (2017 paper):  y = LayerNorm(x + Dropout(F(x)))
Pre-LN (most models now): y = x + Dropout(F(LayerNorm(x)))

Shape legend: B batch, L sequence length, D d_model.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from tf_tutorial.norm import LayerNorm


class SublayerConnection(nn.Module):
    """Wrap a sublayer F (attention or FFN) with a residual connection and a LayerNorm.

    Args:
        d_model: D.
        dropout: on F's output before the residual add (training only), as in the paper (§5.4).
        norm_first: False = Post-LN, True = Pre-LN.
        eps: LayerNorm's ε.
    Shape:
        x (B, L, D); ``sublayer`` maps (B, L, D) → (B, L, D).
    """

    def __init__(self, d_model: int, dropout: float = 0.0, norm_first: bool = False,
                 eps: float = 1e-5):
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), but got {dropout}")
        self.norm, self.dropout, self.norm_first = LayerNorm(d_model, eps), nn.Dropout(dropout), norm_first

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class DeepStack(nn.Module):
    """A stack of identical blocks for measuring depth: each block is one MLP sublayer
    (Linear → tanh → Linear) with or without a residual connection, and optionally a LayerNorm
    in the Post-LN or Pre-LN place. Used by chapters 5 and 6; not part of the Transformer itself.

    Args:
        d_model: D. n_layers: depth.
        residual: add the block's input to its output.
        norm: None, "post" or "pre".
    """

    def __init__(self, d_model: int, n_layers: int, residual: bool = True, norm: str | None = None):
        super().__init__()
        if norm not in (None, "post", "pre"):
            raise ValueError(f"norm must be None, 'post' or 'pre', but got {norm!r}")
        self.residual, self.norm = residual, norm
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(d_model, d_model), nn.Tanh(), nn.Linear(d_model, d_model))
            for _ in range(n_layers))
        self.norms = nn.ModuleList(LayerNorm(d_model) for _ in range(n_layers if norm else 0))

    def forward(self, x: torch.Tensor, keep: list | None = None) -> torch.Tensor:
        """Run the stack; if ``keep`` is a list, append every block's output to it."""
        for i, block in enumerate(self.blocks):
            if self.norm == "pre":
                x = x + block(self.norms[i](x)) if self.residual else block(self.norms[i](x))
            else:
                x = x + block(x) if self.residual else block(x)
                if self.norm == "post":
                    x = self.norms[i](x)
            if keep is not None:
                keep.append(x.detach())
        return x


def gradient_norms(stack: DeepStack, x: torch.Tensor) -> torch.Tensor:
    """‖∂loss/∂W‖ of each block's first weight matrix, for loss = mean of the output squared.

    Returns (n_layers,), from the input side (layer 1) to the output side.
    """
    stack.zero_grad(set_to_none=True)
    stack(x).pow(2).mean().backward()
    return torch.stack([block[0].weight.grad.norm() for block in stack.blocks])


def stack_norm(d_model: int, norm_first: bool, enabled: bool | None = None,
               eps: float = 1e-5) -> nn.Module:
    """The norm after a stack of layers: a LayerNorm, or the identity.

    ``enabled=None`` follows the placement: on for Pre-LN (no sublayer normalises the stack's
    output there), off for Post-LN (the last sublayer already did).
    """
    use = norm_first if enabled is None else enabled
    return LayerNorm(d_model, eps) if use else nn.Identity()
