"""第 5、6 章的实验：一摞相同的小块，用来测量深度对梯度的影响。

Shape legend: B batch, D d_model (the width of every block), N layers
(``n_layers``).
"""
from __future__ import annotations

import torch
from torch import nn

from tf_tutorial._checks import require_flags, require_sizes
from tf_tutorial.norm import LayerNorm


class DeepStack(nn.Module):
    """测量深度用的一摞相同小块：可选残差连接，可选 Post-LN 或 Pre-LN 层归一化。

    A stack of identical blocks for measuring depth: each block is one MLP
    sublayer (Linear → tanh → Linear) with or without a residual connection,
    and optionally a LayerNorm in the Post-LN or Pre-LN place. Used by chapters
    5 and 6; not part of the Transformer itself.

    Args:
        d_model: D. n_layers: N, the depth.
        residual: add the block's input to its output.
        norm: None, "post" or "pre".
    """

    def __init__(self, d_model: int, n_layers: int, residual: bool = True,
                 norm: str | None = None):
        super().__init__()
        require_sizes(d_model=d_model, n_layers=n_layers)
        require_flags(residual=residual)
        if norm not in (None, "post", "pre"):
            raise ValueError(f"norm must be None, 'post' or 'pre', "
                             f"but got {norm!r}")
        self.residual, self.norm = residual, norm
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(d_model, d_model), nn.Tanh(),
                          nn.Linear(d_model, d_model))
            for _ in range(n_layers))
        self.norms = nn.ModuleList(LayerNorm(d_model)
                                   for _ in range(n_layers if norm else 0))

    def forward(self, x: torch.Tensor,
                keep: list | None = None) -> torch.Tensor:
        """逐块运行这摞小块；``keep`` 是列表时，把每一块的输出依次存进去。

        Run the stack; if ``keep`` is a list, append every block's output to it.
        """
        for i, block in enumerate(self.blocks):
            if self.norm == "pre":
                x = (x + block(self.norms[i](x)) if self.residual
                     else block(self.norms[i](x)))
            else:
                x = x + block(x) if self.residual else block(x)
                if self.norm == "post":
                    x = self.norms[i](x)
            if keep is not None:
                keep.append(x.detach())
        return x


def gradient_norms(stack: DeepStack, x: torch.Tensor) -> torch.Tensor:
    """每一块第一个权重矩阵上的梯度范数，从输入一侧排到输出一侧。

    ‖∂loss/∂W‖ of each block's first weight matrix, for loss = mean of the
    output squared.

    Returns (n_layers,), from the input side (layer 1) to the output side.
    """
    stack.zero_grad(set_to_none=True)
    stack(x).pow(2).mean().backward()
    return torch.stack([block[0].weight.grad.norm() for block in stack.blocks])
