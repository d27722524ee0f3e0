"""第 4 章：需要两个头分工的任务——同时说出序列的第一个和问号前的最后一个词元。

A sequence is L tokens drawn from V symbols followed by a query token ``?``.
The model answers two questions at the query position: which token came first,
and which came last. One attention layer with two heads can give each question
its own head.

Shape legend: B batch, L sequence length (before ``?``), D d_model, H heads,
V symbols (``n_symbols``; the query token ``?`` is one more).
"""
from __future__ import annotations

import torch
from torch import nn

from tf_tutorial._checks import require_range
from tf_tutorial.embedding import SinusoidalPositionalEncoding, TokenEmbedding
from tf_tutorial.multihead import MultiHeadAttention


def first_last_batch(batch_size: int, length: int, n_symbols: int = 16,
                     generator: torch.Generator | None = None):
    """生成一批随机序列，末尾是查询词元 ``?``，并给出每个序列的首、尾词元。

    Return ``(tokens (B, L+1), first (B,), last (B,))``; the query token is
    ``n_symbols``.
    """
    if length < 2:
        raise ValueError(f"length must be >= 2 so that first and last differ, "
                         f"but got {length}")
    body = torch.randint(n_symbols, (batch_size, length),
                         generator=generator)                          # (B, L)
    query = torch.full((batch_size, 1), n_symbols)
    return torch.cat([body, query], dim=1), body[:, 0], body[:, -1]


class FirstLastModel(nn.Module):
    """词向量加正弦位置编码，在 ``?`` 处读一次多头注意力，再分别读出首、尾词元。

    Token embedding + sinusoidal PE → one multi-head attention read at ``?`` →
    two read-outs.
    """

    def __init__(self, n_symbols: int = 16, d_model: int = 32,
                 n_heads: int = 2):
        super().__init__()
        self.embed = TokenEmbedding(n_symbols + 1, d_model)
        self.positions = SinusoidalPositionalEncoding(d_model, max_len=512)
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.first, self.last = (nn.Linear(d_model, n_symbols),
                                 nn.Linear(d_model, n_symbols))

    def forward(self, tokens: torch.Tensor):
        """返回首词元和尾词元的分数，以及 ``?`` 处各头的注意力权重。

        Return ``(first_logits (B, V), last_logits (B, V),
        weights (B, H, 1, L+1))``.
        """
        x = self.positions(self.embed(tokens))                    # (B, L+1, D)
        out, weights = self.attn(x[:, -1:], x, x,
                                 return_weights=True)             # (B, 1, D)
        return self.first(out[:, 0]), self.last(out[:, 0]), weights


def train_first_last(model: FirstLastModel, steps: int = 800, lengths=(6, 16),
                     seed: int = 0, lr: float = 3e-3) -> tuple[float, float]:
    """在随机长度的序列上训练，返回长度 12 时首、尾词元各自的准确率。

    Train on random lengths in ``lengths``; return (first, last) accuracy at
    length 12.
    """
    low, high = require_range("lengths", lengths, least=2)  # first != last
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    n_symbols = model.first.out_features
    model.train()
    for _ in range(steps):
        L = int(torch.randint(low, high + 1, (1,), generator=g))
        tokens, first, last = first_last_batch(64, L, n_symbols, generator=g)
        f, l, _ = model(tokens)
        loss = (nn.functional.cross_entropy(f, first)
                + nn.functional.cross_entropy(l, last))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        tokens, first, last = first_last_batch(
            1000, 12, n_symbols, torch.Generator().manual_seed(seed + 1))
        f, l, _ = model(tokens)
    return ((f.argmax(-1) == first).float().mean().item(),
            (l.argmax(-1) == last).float().mean().item())
