"""第 1 章的长距离依赖实验：隔着 L 个干扰词，回忆序列开头的那个词。

A sequence is ``[key, d_1, ..., d_L, ?]``: one of ``n_keys`` key tokens, L
distractor tokens drawn from a separate set, then a query token. The answer is
the key. An RNN must carry the key through L recurrent steps; an attention
layer reaches back to it in one step, whatever L is.

Shape legend: B batch, L number of distractors (sequence length L + 2), D model
width, n_keys number of key tokens (the classes), V vocabulary size |𝒱|.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from tf_tutorial._checks import require_counts, require_flags, require_range


@dataclass(frozen=True)
class RecallTask:
    """回忆任务的词表与数据：开头一个关键词，中间 L 个干扰词，最后一个问号。

    Vocabulary layout, with n = ``n_keys`` and m = ``n_distractors``: keys are
    ids 0..n-1, distractors n..n+m-1, the query token n+m.

    With ``shared=True`` the distractors are drawn from the keys themselves, so
    the first token can only be told apart by its position (chapter 2).
    """

    n_keys: int = 8
    n_distractors: int = 16
    shared: bool = False

    def __post_init__(self):
        require_counts(n_keys=self.n_keys, n_distractors=self.n_distractors)
        require_flags(shared=self.shared)
        if self.n_keys < 2 or self.n_distractors < (0 if self.shared else 1):
            raise ValueError(
                f"expected n_keys >= 2 and n_distractors >= 1 "
                f"(>= 0 when shared), but got n_keys={self.n_keys}, "
                f"n_distractors={self.n_distractors}")

    @property
    def vocab_size(self) -> int:
        """词表大小：关键词、干扰词，再加一个问号。"""
        return self.n_keys + self.n_distractors + 1

    def batch(self, batch_size: int, n_between: int,
              generator: torch.Generator | None = None):
        """生成一批序列，以及每个序列开头的关键词（即正确答案）。

        Return ``(tokens (B, L+2), keys (B,))`` with L = ``n_between``
        distractors.
        """
        if n_between < 0 or batch_size < 1:
            raise ValueError(
                f"expected batch_size >= 1 and n_between >= 0, but got "
                f"batch_size={batch_size}, n_between={n_between}")
        keys = torch.randint(self.n_keys, (batch_size,),
                             generator=generator)                     # (B,)
        low = 0 if self.shared else self.n_keys
        noise = torch.randint(
            low, self.n_keys + self.n_distractors * (not self.shared),
            (batch_size, n_between), generator=generator)             # (B, L)
        query = torch.full((batch_size, 1), self.vocab_size - 1)      # (B, 1)
        return torch.cat([keys[:, None], noise, query], dim=1), keys  # (B, L+2)

    def to_text(self, tokens: torch.Tensor) -> str:
        """把一个序列写成字母：关键词用大写，干扰词用小写，问号写作 ?。

        Spell one sequence: keys as A, B, ...; distractors as a, b, ...; the
        query as ?.
        """
        def spell(i: int) -> str:
            if i < self.n_keys:
                return chr(ord("A") + i) if i < 26 else f"K{i}"
            if i < self.n_keys + self.n_distractors:
                j = i - self.n_keys
                return chr(ord("a") + j) if j < 26 else f"d{j}"
            return "?"
        return " ".join(spell(int(i)) for i in tokens)


class RNNRecaller(nn.Module):
    """循环网络做回忆：词向量 → 一层 RNN 或 LSTM → 用最后的隐状态分类。

    Embedding → one recurrent layer → linear read-out of the last hidden state.

    ``cell="rnn"`` is the plain tanh RNN of this chapter (``nn.RNN`` computes
    exactly what :class:`tf_tutorial.rnn.ElmanRNN` computes, tested, only
    faster); ``cell="lstm"`` is the gated LSTM, built to let gradients travel
    further.
    """

    def __init__(self, vocab_size: int, n_keys: int, d: int = 32,
                 cell: str = "rnn"):
        super().__init__()
        cells = {"rnn": nn.RNN, "lstm": nn.LSTM}
        if cell not in cells:
            raise ValueError(f"cell must be one of {sorted(cells)}, "
                             f"but got {cell!r}")
        self.embed = nn.Embedding(vocab_size, d)
        self.rnn = cells[cell](d, d, batch_first=True)
        self.out = nn.Linear(d, n_keys)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """读完整个序列，用最后的隐状态给每个关键词打分。"""
        _, state = self.rnn(self.embed(tokens))
        h_last = state[0] if isinstance(state, tuple) else state  # (1, B, D)
        return self.out(h_last[0])                                # (B, n_keys)


class AttentionRecaller(nn.Module):
    """注意力做回忆：词向量 → 一层单头注意力 → 在问号处分类。

    Embedding → one single-head self-attention layer → read-out at the query
    position.

    ``positions`` adds position information to the embeddings (chapter 2):
    ``None`` (none at all, as in chapter 1), ``"sinusoidal"`` or ``"learned"``
    (a table of ``max_len`` rows).
    """

    def __init__(self, vocab_size: int, n_keys: int, d: int = 32,
                 positions: str | None = None, max_len: int = 4096):
        super().__init__()
        from tf_tutorial.embedding import (LearnedPositionalEncoding,
                                           SinusoidalPositionalEncoding)

        kinds = {None: None, "sinusoidal": SinusoidalPositionalEncoding,
                 "learned": LearnedPositionalEncoding}
        if positions not in kinds:
            raise ValueError(f"positions must be one of None, 'sinusoidal', "
                             f"'learned', but got {positions!r}")
        self.positions = kinds[positions](d, max_len) if positions else None
        self.embed = nn.Embedding(vocab_size, d)
        self.attn = nn.MultiheadAttention(d, num_heads=1, batch_first=True)
        self.out = nn.Linear(d, n_keys)
        self.last_weights: torch.Tensor | None = None

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """让问号处的查询对整个序列做一次注意力，再给每个关键词打分。"""
        x = self.embed(tokens)                                    # (B, L+2, D)
        if self.positions is not None:
            x = self.positions(x)
        q = x[:, -1:]                                             # (B, 1, D)
        ctx, weights = self.attn(q, x, x, need_weights=True)      # (B, 1, D)
        self.last_weights = weights[:, 0].detach()                # (B, L+2)
        return self.out(ctx[:, 0])                                # (B, n_keys)


def train_recall(model: nn.Module, task: RecallTask,
                 n_between: int | tuple[int, int],
                 steps: int = 400, batch_size: int = 64, lr: float = 5e-3,
                 seed: int = 0) -> float:
    """用 Adam 在每步新生成的数据上训练，再返回在 1000 条新序列上的准确率。

    Train ``model`` on fresh batches, then return its accuracy on 1000 new ones.

    ``n_between`` is a fixed L, or a range ``(low, high)`` from which each batch
    draws its L (and the final accuracy is measured at ``high``).
    """
    low, high = require_range("n_between", n_between, least=0)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for _ in range(steps):
        L = (low if low == high
             else int(torch.randint(low, high + 1, (1,), generator=g)))
        tokens, keys = task.batch(batch_size, L, generator=g)
        loss = loss_fn(model(tokens), keys)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return recall_accuracy(model, task, high, seed=seed + 1)


@torch.no_grad()
def recall_accuracy(model: nn.Module, task: RecallTask, n_between: int,
                    n: int = 1000, seed: int = 1) -> float:
    """准确率：``n`` 条新序列里模型答对关键词的比例。"""
    model.eval()
    tokens, keys = task.batch(n, n_between,
                              generator=torch.Generator().manual_seed(seed))
    return (model(tokens).argmax(-1) == keys).float().mean().item()
