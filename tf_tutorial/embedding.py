"""第 2 章：词向量（token embedding）与位置编码（positional encoding）。

P[pos, 2i] = sin(pos / 10000^(2i/D)),  P[pos, 2i+1] = cos(pos / 10000^(2i/D))
(P is the positional-encoding table; the paper writes PE.)

Shape legend: B batch, L sequence length, D d_model, V vocabulary size |𝒱|.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from tf_tutorial._checks import (require_counts, require_dropout,
                                 require_finite, require_float_dtype,
                                 require_sizes, require_tensors,
                                 require_width)


def _frequencies(d_model: int) -> torch.Tensor:
    """ω_i = 10000^(−2i/D) for i = 0 .. ⌈D/2⌉ − 1, shape (⌈D/2⌉,)."""
    require_sizes(d_model=d_model)
    return torch.exp(
        -math.log(10000.0)
        * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def positional_encoding(max_len: int, d_model: int,
                        dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """正弦位置编码表 P。

    The sinusoidal table of the 2017 paper, shape (max_len, D), values in
    [−1, 1], computed in float64 and returned as ``dtype``. Even columns hold
    sines, odd columns cosines; an odd D ends with a sine that has no cosine
    partner.
    """
    require_sizes(max_len=max_len)
    require_float_dtype(dtype=dtype)
    angles = (torch.arange(max_len, dtype=torch.float64)[:, None]
              * _frequencies(d_model))                            # (L, ⌈D/2⌉)
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = angles.sin()
    pe[:, 1::2] = angles[:, :d_model // 2].cos()
    return pe.to(dtype)


def shift_matrix(k: float, d_model: int) -> torch.Tensor:
    """平移 k 个位置的矩阵 R(k)：恒有 P[pos + k] = R(k) P[pos]，形状 (D, D)。

    Block diagonal: for each frequency ω_i the 2×2 rotation
    [[cos ωk, sin ωk], [−sin ωk, cos ωk]] acting on the pair
    (sin ω pos, cos ω pos). It depends on k only, never on pos. D must be even:
    every sine needs its cosine. ``k``: any finite number of positions (a
    0-d tensor too).
    """
    if isinstance(k, torch.Tensor) and k.dim() == 0:
        k = k.item()
    require_finite(k=k)
    k = float(k)                              # Fraction(1, 2) too
    if isinstance(d_model, int) and d_model % 2:
        raise ValueError(f"d_model must be even for the shift matrix "
                         f"(sin/cos pairs), but got {d_model}")
    w = k * _frequencies(d_model)                                     # (D/2,)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    even, odd = torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)
    m[even, even], m[even, odd] = w.cos(), w.sin()
    m[odd, even], m[odd, odd] = -w.sin(), w.cos()
    return m


class TokenEmbedding(nn.Module):
    """词向量：按词元编号查表，再乘以 sqrt(D)（论文 §3.4 的做法）。

    The table starts at N(0, 1/D), not at ``nn.Embedding``'s default N(0, 1): a
    row then has norm ≈ 1, and the sqrt(D) factor brings it to ≈ sqrt(D), the
    size of the positional encoding (norm sqrt(D/2)) it is added to. The paper
    states the factor without a reason; chapter 2 measures what it does.

    Args:
        vocab_size: |𝒱|, the number of token ids.
        d_model: D, the width of each vector.
    Shape: tokens (B, L) int → (B, L, D).

    Ids out of range get a clear ``ValueError`` on the CPU. On a GPU, and
    inside ``torch.compile``, the check is skipped (it would stop the GPU to
    read the ids back at every step, and break the compiled graph); call
    :meth:`check_ids` there.
    """

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        require_sizes(vocab_size=vocab_size, d_model=d_model)
        self.vocab_size, self.d_model = vocab_size, d_model
        self.table = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.table.weight, std=d_model ** -0.5)

    @property
    def weight(self) -> nn.Parameter:
        """词向量表 (|𝒱|, D)，乘 √D 之前的，即 ``table.weight``。"""
        return self.table.weight

    def check_ids(self, tokens: torch.Tensor) -> None:
        """检查词元编号。

        Raise ValueError naming the first id outside [0, vocab_size).
        """
        bad = tokens[(tokens < 0) | (tokens >= self.vocab_size)]
        if bad.numel():
            raise ValueError(f"token id {bad[0].item()} is out of range "
                             f"for vocab_size={self.vocab_size}")

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """查出每个词元编号的词向量，再乘以 √D。"""
        require_tensors(tokens=tokens)
        if tokens.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"tokens must be int64 or int32 ids, "
                             f"but got dtype {tokens.dtype}")
        if tokens.device.type == "cpu" and not torch.compiler.is_compiling():
            self.check_ids(tokens)
        return self.table(tokens) * math.sqrt(self.d_model)       # (B, L, D)


class _PositionalBase(nn.Module):
    def __init__(self, d_model: int, max_len: int, dropout: float):
        super().__init__()
        require_sizes(d_model=d_model, max_len=max_len)
        require_dropout(dropout)
        self.d_model, self.max_len = d_model, max_len
        self.dropout = nn.Dropout(dropout)

    def _check(self, x: torch.Tensor, start: int) -> int:
        if isinstance(x, torch.Tensor) and not x.is_floating_point():
            raise ValueError(f"x must be floating-point vectors (B, L, D), "
                             f"but got dtype {x.dtype}: embed the ids first")
        one = isinstance(x, torch.Tensor) and x.dim() == 2   # (L, D): unbatched
        require_width(x, self.d_model, lead="L" if one else "B, L")
        require_counts(start=start)
        L = x.shape[-2]
        if start + L > self.max_len:
            where = (f"positions {start}..{start + L - 1} go past the last "
                     f"position {self.max_len - 1} for" if start
                     else f"sequence length {L} exceeds")
            raise ValueError(f"{where} max_len={self.max_len} "
                             f"of {type(self).__name__}")
        return L


class SinusoidalPositionalEncoding(_PositionalBase):
    """加上正弦位置编码：x + P[start : start + L]，再 dropout；P 固定，不学习。

    ``start`` is the position of x's first row (0, or the length of a decoder's
    cache). The dropout on this sum is the paper's (§5.4).
    Shape: x (B, L, D) → (B, L, D), or one unbatched sequence (L, D) →
    (L, D); start + L <= max_len.
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0):
        super().__init__(d_model, max_len, dropout)
        self.register_buffer("pe", positional_encoding(max_len, d_model),
                             persistent=False)

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """把从 ``start`` 开始的 L 行位置编码加到 x 上，再做 dropout。"""
        L = self._check(x, start)
        return self.dropout(
            x + self.pe[start:start + L].to(x.dtype))             # (B, L, D)

    def _apply(self, fn, *args, **kwargs):
        # after .double(), .half(), .to(device): the table computed again in
        # its new dtype, not the float32 one cast (that is exact only to 1e-8)
        super()._apply(fn, *args, **kwargs)
        self.pe = positional_encoding(self.max_len, self.d_model,
                                      self.pe.dtype).to(self.pe.device)
        return self


class LearnedPositionalEncoding(_PositionalBase):
    """加上可学习位置编码：x + P[start : start + L]，P 是 (max_len, D) 参数表。

    As in BERT and GPT-2; there is no position beyond max_len.

    Shape: x (B, L, D) → (B, L, D), start + L <= max_len.
    """

    def __init__(self, d_model: int, max_len: int, dropout: float = 0.0):
        super().__init__(d_model, max_len, dropout)
        self.table = nn.Parameter(torch.randn(max_len, d_model) * 0.02)

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """把学到的位置表中从 ``start`` 开始的 L 行加到 x 上，再做 dropout。"""
        L = self._check(x, start)
        return self.dropout(x + self.table[start:start + L])      # (B, L, D)
