"""第 6 章：深层 Post-LN 需要学习率预热，Pre-LN 不需要（Xiong et al., 2020）。

The task: read 8 random tokens and output them reversed, one prediction per
position, with a stack of encoder layers. Small enough to train on a CPU in
seconds. ``first_updates`` measures how far Adam's first steps move each
layer's weights and the model's output.

Shape legend: B batch, L sequence length, D d_model, V vocabulary size,
N layers.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from tf_tutorial._checks import require_sizes
from tf_tutorial.embedding import SinusoidalPositionalEncoding, TokenEmbedding
from tf_tutorial.encoder import Encoder


class ReverseModel(nn.Module):
    """倒序任务的模型：词向量加正弦位置编码，经若干编码器层，再在每个位置读出。

    Token embedding + sinusoidal PE → ``n_layers`` encoder layers →
    per-position read-out.
    """

    def __init__(self, n_layers: int, norm_first: bool, vocab_size: int = 16,
                 d_model: int = 32, n_heads: int = 2):
        super().__init__()
        self.embed = TokenEmbedding(vocab_size, d_model)
        self.positions = SinusoidalPositionalEncoding(d_model, max_len=64)
        self.encoder = Encoder(d_model, n_heads, 4 * d_model, n_layers,
                               dropout=0.0, norm_first=norm_first)
        self.out = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """对每个位置给出词表上的分数（logits）。"""
        return self.out(
            self.encoder(self.positions(self.embed(tokens))))      # (B, L, V)


def warmup_schedule(optimizer: torch.optim.Optimizer, warmup_steps: int):
    """学习率预热：在 ``warmup_steps`` 步里线性升到 lr，之后保持不变。

    Linear warmup from lr/warmup_steps to lr over ``warmup_steps`` steps, then
    constant.
    """
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, but got {warmup_steps}")
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: (min(1.0, (step + 1) / warmup_steps)
                                 if warmup_steps else 1.0))


def train_reverse(
        model: ReverseModel, lr: float, warmup_steps: int,
        steps: int = 200, length: int = 8, seed: int = 0,
        on_step: Callable[[ReverseModel], None] | None = None) -> list[float]:
    """用 Adam 在新生成的批次上训练倒序任务，返回每一步的损失。

    Adam (β₂ = 0.98, as in the paper) on fresh batches of 32; return the loss
    of every step.

    ``on_step(model)``, if given, is called after every optimizer step.
    """
    require_sizes(steps=steps, length=length)
    vocab = model.out.out_features
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98))
    schedule = warmup_schedule(opt, warmup_steps)
    losses = []
    model.train()
    for _ in range(steps):
        tokens = torch.randint(vocab, (32, length), generator=g)
        logits = model(tokens)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1),
                                           tokens.flip(1).flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        schedule.step()
        losses.append(loss.item())
        if on_step is not None:
            on_step(model)
    return losses


def first_updates(model: ReverseModel, lr: float, warmup_steps: int,
                  steps: int = 3, seed: int = 0) -> dict[str, torch.Tensor]:
    """测量 Adam 最初几步把各层权重和模型输出改变了多少。

    How far the first ``steps`` Adam steps of :func:`train_reverse` move the
    model.

    Returns:
        "weights": (steps, N), ‖ΔW₂‖ / ‖W₂‖ of each layer's second FFN matrix
            per step;
        "output": (steps,), ‖Δlogits‖ / ‖logits‖ on a fixed probe batch per
            step.
    """
    probe = torch.randint(
        model.out.out_features, (32, 8),
        generator=torch.Generator().manual_seed(seed + 10_000))
    mats = [layer.ffn.w2.weight for layer in model.encoder.layers]
    with torch.no_grad():
        last = {"w": [w.detach().clone() for w in mats], "out": model(probe)}
    sizes, changes = [], []

    def record(m: ReverseModel) -> None:
        with torch.no_grad():
            sizes.append([((w - w0).norm() / w0.norm()).item()
                          for w, w0 in zip(mats, last["w"])])
            out = m(probe)
            changes.append(((out - last["out"]).norm()
                            / last["out"].norm()).item())
            last["w"], last["out"] = [w.detach().clone() for w in mats], out

    train_reverse(model, lr, warmup_steps, steps=steps, seed=seed,
                  on_step=record)
    return {"weights": torch.tensor(sizes), "output": torch.tensor(changes)}


PLACEMENTS = {"Post-LN": False, "Pre-LN": True}   # name -> norm_first


def plateau_exit(losses: list[float], level: float = 1.0,
                 window: int = 10) -> int | None:
    """损失的滑动平均第一次降到 ``level`` 以下的步数；一直没有降下来时返回 None。

    The first step (counted from 1) at which the ``window``-step moving average
    of ``losses`` is below ``level``: when a run dropped off the plateau its
    loss first eases along (near 2 for chapter 6's task). None if it never
    did.
    """
    require_sizes(window=window)
    for end in range(window, len(losses) + 1):
        if sum(losses[end - window:end]) / window < level:
            return end
    return None


def warmup_grid(seeds, warmups=(0, 60), n_layers: int = 12, lr: float = 3e-3,
                steps: int = 200, placements=tuple(PLACEMENTS)
                ) -> dict[tuple[str, int], list[list[float]]]:
    """把两种放法、有无预热的每一种组合，在每个种子下各训练一次。

    Train :class:`ReverseModel` for every placement (names from
    :data:`PLACEMENTS`), warmup length and seed (the seed sets both the initial weights and the
    batches). Returns ``{(placement, warmup): [losses of each seed]}``, the
    seeds in the order given. Chapter 6 runs seed 0 and renders the other seeds
    from the record of ``python -m scripts.ch06_seeds``.
    """
    curves = {}
    unknown = [name for name in placements if name not in PLACEMENTS]
    if unknown:
        raise ValueError(f"placements must be names from {', '.join(PLACEMENTS)}, "
                         f"but got {unknown[0]!r}")
    for name in placements:
        norm_first = PLACEMENTS[name]
        for warmup in warmups:
            curves[name, warmup] = []
            for seed in seeds:
                torch.manual_seed(seed)
                model = ReverseModel(n_layers, norm_first)
                curves[name, warmup].append(train_reverse(
                    model, lr=lr, warmup_steps=warmup, steps=steps,
                    seed=seed))
    return curves
