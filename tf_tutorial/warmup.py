"""第 6 章的实验：深层 Post-LN 需要学习率预热（warmup），Pre-LN 不需要（Xiong et al., 2020）。

The task: read 8 random tokens and output them reversed, one prediction per position, with a
stack of encoder layers. Small enough to train on a CPU in seconds.

Shape legend: B batch, L sequence length, D d_model, V vocabulary size.
"""
from __future__ import annotations

import torch
from torch import nn

from tf_tutorial.embedding import SinusoidalPositionalEncoding, TokenEmbedding
from tf_tutorial.encoder import Encoder


class ReverseModel(nn.Module):
    """Token embedding + sinusoidal PE → ``n_layers`` encoder layers → per-position read-out."""

    def __init__(self, n_layers: int, norm_first: bool, vocab_size: int = 16, d_model: int = 32,
                 n_heads: int = 2):
        super().__init__()
        self.embed = TokenEmbedding(vocab_size, d_model)
        self.positions = SinusoidalPositionalEncoding(d_model, max_len=64)
        self.encoder = Encoder(d_model, n_heads, 4 * d_model, n_layers, dropout=0.0,
                               norm_first=norm_first)
        self.out = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.encoder(self.positions(self.embed(tokens))))              # (B, L, V)


def warmup_schedule(optimizer: torch.optim.Optimizer, warmup_steps: int):
    """Linear warmup from lr/warmup_steps to lr over ``warmup_steps`` steps, then constant."""
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, but got {warmup_steps}")
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0)


def train_reverse(model: ReverseModel, lr: float, warmup_steps: int, steps: int = 200,
                  length: int = 8, seed: int = 0) -> list[float]:
    """Adam (β₂ = 0.98, as in the paper) on fresh batches of 32; return the loss of every step."""
    vocab = model.out.out_features
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98))
    schedule = warmup_schedule(opt, warmup_steps)
    losses = []
    model.train()
    for _ in range(steps):
        tokens = torch.randint(vocab, (32, length), generator=g)
        logits = model(tokens)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flip(1).flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        schedule.step()
        losses.append(loss.item())
    return losses
