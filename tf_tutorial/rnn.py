"""第 1 章：手写的 Elman RNN，以及测量梯度如何随距离衰减的工具。

Shape legend: B batch, L sequence length, d_in input width, D hidden width
(the width of h_t).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from tf_tutorial._checks import (require_dtype_of, require_finite_positive,
                                 require_flags, require_sizes,
                                 require_tensors)


class ElmanRNN(nn.Module):
    """最简单的（Elman）循环网络，一步接一步地更新隐状态。

    h_t = tanh(W_xh x_t + b_ih + W_hh h_{t-1} + b_hh),  h_0 = 0 unless given.
    W_xh (the book's name) is ``weight_ih``: parameter names and initialisation
    match ``nn.RNN`` (one layer, tanh), so weights can be copied across and
    outputs compared.

    Args:
        input_size: d_in, the width of each input vector x_t.
        hidden_size: D, the width of the hidden state h_t.
        bias: add b_ih and b_hh (default True).
    Shape:
        x: (B, L, d_in); h0: (B, D) or None.
    Returns:
        (outputs, h_last): every hidden state (B, L, D), and the last one
        (B, D).
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__()
        require_sizes(input_size=input_size, hidden_size=hidden_size)
        require_flags(bias=bias)
        self.input_size, self.hidden_size = input_size, hidden_size
        self.weight_ih = nn.Parameter(
            torch.empty(hidden_size, input_size))                  # (D, d_in)
        self.weight_hh = nn.Parameter(
            torch.empty(hidden_size, hidden_size))                 # (D, D)
        self.bias_ih = nn.Parameter(torch.empty(hidden_size)) if bias else None
        self.bias_hh = nn.Parameter(torch.empty(hidden_size)) if bias else None
        # nn.RNN's U(-1/sqrt(D), 1/sqrt(D))
        bound = 1.0 / math.sqrt(hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(self, x: torch.Tensor, h0: torch.Tensor | None = None):
        """按时间一步步更新隐状态，返回所有隐状态和最后一个。"""
        require_tensors(x=x)
        if x.dim() != 3 or x.shape[-1] != self.input_size or x.shape[1] == 0:
            raise ValueError(f"x: expected shape (B, L, {self.input_size}) "
                             f"with L >= 1, but got {tuple(x.shape)}")
        require_dtype_of(x, self.weight_ih)    # float64 x, float32 layer
        B, L, _ = x.shape
        if h0 is None:
            h = x.new_zeros(B, self.hidden_size)                   # (B, D)
        else:
            require_tensors(h0=h0)
            require_dtype_of(h0, self.weight_hh, "h0")
            if h0.shape != (B, self.hidden_size):
                raise ValueError(f"h0: expected shape ({B}, {self.hidden_size})"
                                 f", but got {tuple(h0.shape)}")
            h = h0
        xw = x @ self.weight_ih.T              # (B, L, D), all steps at once
        if self.bias_ih is not None:
            xw = xw + self.bias_ih + self.bias_hh
        outputs = []
        # the recurrence: step t needs h from step t-1, so no parallelism
        for t in range(L):
            h = torch.tanh(xw[:, t] + h @ self.weight_hh.T)        # (B, D)
            outputs.append(h)
        return torch.stack(outputs, dim=1), h  # (B, L, D), (B, D)


def jacobian_norms(rnn: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """每一步 t 的 ‖∂h_L/∂x_t‖_F：最后的状态对每个输入还有多敏感。

    Args:
        rnn: a module returning ``(outputs, h_last)`` batch-first, e.g.
            :class:`ElmanRNN`.
        x: one sequence, shape (1, L, d_in).
    Returns:
        (L,) tensor; entry t is the Frobenius norm of the (D, d_in) Jacobian
        ∂h_L/∂x_t.
    """
    require_tensors(x=x)
    if x.dim() != 3 or x.shape[0] != 1:
        raise ValueError(f"x: expected one sequence of shape (1, L, d_in), "
                         f"but got {tuple(x.shape)}")
    x = x.detach().requires_grad_(True)
    _, h_last = rnn(x)
    h_last = h_last.reshape(-1)                                        # (D,)
    basis = torch.eye(h_last.numel(), dtype=x.dtype, device=x.device)  # (D, D)
    # One batched backward pass gives every row of the Jacobian:
    # grads[n] = ∂h_L[n]/∂x.
    (grads,) = torch.autograd.grad(h_last, x, grad_outputs=basis,
                                   is_grads_batched=True)
    return grads[:, 0].pow(2).sum(dim=(0, 2)).sqrt()   # (D, L, d_in) -> (L,)


def scaled_recurrence(rnn: ElmanRNN, gain: float, seed: int = 0) -> ElmanRNN:
    """把 W_hh 换成 ``gain`` 乘一个随机正交矩阵，使每个奇异值都等于 ``gain``。

    Then ‖W_hh‖₂ = gain: below 1 the signal shrinks at each step, above 1 it may
    grow.
    """
    require_finite_positive(gain=gain)            # NaN and inf are refused
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(
        torch.randn(rnn.hidden_size, rnn.hidden_size, generator=g))
    with torch.no_grad():
        rnn.weight_hh.copy_(gain * q)
    return rnn
