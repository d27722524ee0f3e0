"""第 1 章：手写的 Elman RNN，以及测量梯度如何随距离衰减的工具。

Shape legend: B batch, L sequence length, E input width, N hidden width.
"""
from __future__ import annotations

import math

import torch
from torch import nn


class ElmanRNN(nn.Module):
    """The plain (Elman) recurrent network, one time step after another.

    h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh),  h_0 = 0 unless given.
    Parameter names and initialisation match ``nn.RNN`` (one layer, tanh), so weights can be
    copied across and the outputs compared.

    Args:
        input_size: E, the width of each input vector x_t.
        hidden_size: N, the width of the hidden state h_t.
        bias: add b_ih and b_hh.
    Shape:
        x: (B, L, E); h0: (B, N) or None.
    Returns:
        (outputs, h_last): every hidden state (B, L, N), and the last one (B, N).
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__()
        for arg, value in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{arg} must be a positive int, but got {value!r}")
        self.input_size, self.hidden_size = input_size, hidden_size
        self.weight_ih = nn.Parameter(torch.empty(hidden_size, input_size))   # (N, E)
        self.weight_hh = nn.Parameter(torch.empty(hidden_size, hidden_size))  # (N, N)
        self.bias_ih = nn.Parameter(torch.empty(hidden_size)) if bias else None
        self.bias_hh = nn.Parameter(torch.empty(hidden_size)) if bias else None
        bound = 1.0 / math.sqrt(hidden_size)  # nn.RNN's U(-1/sqrt(N), 1/sqrt(N))
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(self, x: torch.Tensor, h0: torch.Tensor | None = None):
        if x.dim() != 3 or x.shape[-1] != self.input_size:
            raise ValueError(f"x: expected shape (B, L, {self.input_size}), "
                             f"but got {tuple(x.shape)}")
        B, L, _ = x.shape
        if h0 is None:
            h = x.new_zeros(B, self.hidden_size)                          # (B, N)
        elif h0.shape != (B, self.hidden_size):
            raise ValueError(f"h0: expected shape ({B}, {self.hidden_size}), "
                             f"but got {tuple(h0.shape)}")
        else:
            h = h0
        xw = x @ self.weight_ih.T                                          # (B, L, N), all steps at once
        if self.bias_ih is not None:
            xw = xw + self.bias_ih + self.bias_hh
        outputs = []
        for t in range(L):  # the recurrence: step t needs h from step t-1, so no parallelism
            h = torch.tanh(xw[:, t] + h @ self.weight_hh.T)                # (B, N)
            outputs.append(h)
        return torch.stack(outputs, dim=1), h                              # (B, L, N), (B, N)


def jacobian_norms(rnn: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """‖∂h_L/∂x_t‖_F for every step t: how much the last state still feels each input.

    Args:
        rnn: a module returning ``(outputs, h_last)`` batch-first, e.g. :class:`ElmanRNN`.
        x: one sequence, shape (1, L, E).
    Returns:
        (L,) tensor; entry t is the Frobenius norm of the (N, E) Jacobian ∂h_L/∂x_t.
    """
    if x.dim() != 3 or x.shape[0] != 1:
        raise ValueError(f"x: expected one sequence of shape (1, L, E), but got {tuple(x.shape)}")
    x = x.detach().requires_grad_(True)
    _, h_last = rnn(x)
    h_last = h_last.reshape(-1)                                            # (N,)
    basis = torch.eye(h_last.numel(), dtype=x.dtype, device=x.device)     # (N, N)
    # One batched backward pass gives every row of the Jacobian: grads[n] = ∂h_L[n]/∂x.
    (grads,) = torch.autograd.grad(h_last, x, grad_outputs=basis, is_grads_batched=True)
    return grads[:, 0].pow(2).sum(dim=(0, 2)).sqrt()                       # (N, L, E) -> (L,)


def scaled_recurrence(rnn: ElmanRNN, gain: float, seed: int = 0) -> ElmanRNN:
    """Set W_hh to ``gain`` times a random orthogonal matrix, so that every singular value of
    W_hh equals ``gain``: below 1 the signal shrinks at each step, above 1 it may grow."""
    if gain <= 0:
        raise ValueError(f"gain must be positive, but got {gain}")
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(rnn.hidden_size, rnn.hidden_size, generator=g))
    with torch.no_grad():
        rnn.weight_hh.copy_(gain * q)
    return rnn
