"""第 10 章：训练——Adam、预热学习率、标签平滑、梯度裁剪、混合精度、检查点、DDP。

Shape legend: B batch, S source length (with <eos>), T target length as in
chapter 10 (y₁ … y_T, the last is <eos>; a target batch holds <bos> too:
T + 1), V target vocabulary size.

Usage:
    python -m tf_tutorial.train --config cpu --out runs/cpu
    torchrun --nproc_per_node=2 -m tf_tutorial.train --config gpu --out runs/gpu
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import shutil
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.utils.rnn import pad_sequence

from tf_tutorial._checks import (WrongTypeError, require_choice,
                                 require_config, require_counts,
                                 require_dropout, require_finite_positive,
                                 require_flags, require_integers,
                                 require_positive, require_sizes,
                                 require_token_id)
from tf_tutorial.corpus.data import (CORPUS_VERSION, Corpus, batch_indices,
                                     batches, encode_pairs, make_corpus)
from tf_tutorial.model import (Transformer, TransformerConfig,
                               count_parameters, plain_numbers,
                               require_positive_ints)


@dataclass(frozen=True)
class TrainConfig:
    """一次训练的全部设置：模型的形状、数据的多少和优化的日程。

    One training run. The model's shape, the data's size and the optimisation
    schedule. A batch is ``batch_tokens`` padded tokens when that is set, and
    then ``batch_size`` is not used (the ``cpu`` and ``gpu`` presets count in
    tokens; ``cfg.with_changes(batch_size=N)``, or ``--batch-size N`` on the
    command line, counts sentences instead). ``seed`` seeds the weights and
    the batch order, and also the corpus when :func:`train` draws it (no
    ``corpus`` given): another seed is then another train/test split too.
    """

    name: str = "cpu"
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 512
    dropout: float = 0.1
    norm_first: bool = False
    n_train: int = 60_000
    batch_size: int = 64             # sentences per batch
                                     # (when batch_tokens is None)
    batch_tokens: int | None = None  # padded tokens per batch instead
                                     # (the paper: about 25000)
    steps: int = 2000
    warmup: int = 400
    lr_scale: float = 1.0
    label_smoothing: float = 0.1
    clip: float = 1.0
    eval_every: int = 250
    seed: int = 0

    def __post_init__(self):
        if not isinstance(self.name, str):      # printed, saved, compared
            raise WrongTypeError(f"name must be a str, but got {self.name!r}")
        require_positive_ints(self, ("d_model", "n_heads", "n_layers", "d_ff",
                                     "n_train", "batch_size", "steps",
                                     "warmup", "eval_every"))
        if self.batch_tokens is not None:
            require_positive_ints(self, ("batch_tokens",))
        if self.d_model % self.n_heads:  # now, not when the model is built
            raise ValueError(f"d_model={self.d_model} is not divisible by "
                             f"n_heads={self.n_heads}")
        # NaN and inf refused too
        require_finite_positive(lr_scale=self.lr_scale, clip=self.clip)
        require_dropout(self.label_smoothing, "label_smoothing")   # [0, 1)
        require_dropout(self.dropout)
        require_flags(norm_first=self.norm_first)
        require_integers(seed=self.seed)
        if not -2**63 <= self.seed < 2**64:   # what torch.manual_seed takes
            raise ValueError(f"seed must be in [-2**63, 2**64), but got "
                             f"{self.seed}")
        # NumPy numbers are accepted; kept as Python's, the config saves in
        # a checkpoint and a JSON record like one written by hand
        plain_numbers(self)

    def with_changes(self, **changes) -> "TrainConfig":
        """改几处之后的副本；只给 batch_size 时改按句子数组批。

        ``dataclasses.replace`` with one rule: ``batch_size`` given without
        ``batch_tokens`` counts batches in sentences, so a token budget
        (which would otherwise win, as in the presets) is dropped.
        """
        if "batch_size" in changes and "batch_tokens" not in changes:
            changes = {**changes, "batch_tokens": None}
        return dataclasses.replace(self, **changes)

    def model_config(self, corpus: Corpus) -> TransformerConfig:
        """按这次训练的设置和语料的词表，生成模型的配置。"""
        return TransformerConfig(
            len(corpus.src_vocab), len(corpus.tgt_vocab), self.d_model,
            self.n_heads, self.n_layers, self.d_ff, self.dropout, max_len=160,
            pad_id=corpus.src_vocab.pad_id, bos_id=corpus.tgt_vocab.bos_id,
            eos_id=corpus.tgt_vocab.eos_id, norm_first=self.norm_first)


CONFIGS = {
    # the book build and nbval on a 2-core CPU: under 3 minutes of training
    # (chosen by scripts/calibrate_cpu.py; the record is
    # book/records/cpu_calibration.json)
    "cpu": TrainConfig("cpu", d_model=128, n_heads=4, n_layers=2, d_ff=256,
                       dropout=0.0, n_train=100_000, batch_tokens=2000,
                       steps=2000, warmup=300, lr_scale=0.6, eval_every=300),
    # the chapter's real run, on one GPU
    # (not yet calibrated on a GPU: about 8000 padded tokens a batch,
    # like 512 sentences). steps is only a cap: a time budget (5 minutes in
    # chapter 10, --seconds in scripts/gpu_run.py) ends the run first, and
    # the schedule does not depend on steps
    "gpu": TrainConfig("gpu", d_model=256, n_heads=8, n_layers=4, d_ff=1024,
                       dropout=0.1, n_train=300_000, batch_tokens=8000,
                       steps=20_000, warmup=1000, lr_scale=1.0,
                       eval_every=500),
    # tests: seconds
    "tiny": TrainConfig("tiny", d_model=32, n_heads=2, n_layers=1, d_ff=64,
                        n_train=2000, batch_size=32, steps=30, warmup=10,
                        eval_every=15),
}

GPU_SECONDS = 290.0
"""The ``gpu`` configuration's training time on one GPU (under 5 minutes):
chapter 10 trains it this long, and ``scripts/gpu_run.py`` by default."""

GPU_TARGET = 0.99
"""The ``gpu`` configuration's target: this greedy exact match on the test
split within :data:`GPU_SECONDS` of training (chapter 10 reads the GPU
record against it)."""


def noam_lr(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """论文的学习率日程：先线性预热，再按步数的平方根倒数衰减。

    The paper's schedule: lr = D^-0.5 · min(step^-0.5, step · warmup^-1.5),
    step from 1 (step 0 counts as 1).
    """
    require_counts(step=step)
    require_sizes(d_model=d_model, warmup=warmup)
    require_finite_positive(scale=scale)
    step = max(step, 1)
    return scale * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def smoothed_target(n_vocab: int, eps: float) -> tuple[float, float]:
    """标签平滑后的目标分布：正确词元和其余每个词元各得的概率。

    The label-smoothed target of ``nn.CrossEntropyLoss(label_smoothing=eps)``
    over ``n_vocab`` tokens: (the right token's probability 1 - eps +
    eps/n_vocab, each other token's eps/n_vocab).
    """
    require_sizes(n_vocab=n_vocab)
    require_dropout(eps, "eps")                  # a share of the mass: [0, 1)
    return 1 - eps + eps / n_vocab, eps / n_vocab


def smoothing_floor(n_vocab: int, eps: float) -> float:
    """标签平滑下训练损失的下限：平滑目标分布的熵（nat）。

    The lowest value the label-smoothed cross-entropy can take, reached when
    the model's distribution equals the smoothed target: that target's
    entropy, in nats (0 without smoothing).
    """
    right, other = smoothed_target(n_vocab, eps)
    if eps == 0:
        return 0.0
    # + 0.0: one token (V = 1) has entropy 0, not -0.0
    return -(right * math.log(right)
             + (n_vocab - 1) * other * math.log(other)) + 0.0


def optimizer_and_schedule(model: nn.Module, cfg: TrainConfig,
                           d_model: int | None = None):
    """论文的优化器：Adam(0.9, 0.98, 1e-9)，学习率按 :func:`noam_lr` 逐步设定。

    Returns (optimizer, scheduler); ``scheduler.step()`` after each step moves
    to the next rate. ``d_model`` defaults to ``cfg.d_model``. Chapters 10 and
    11 train with exactly this.
    """
    d = cfg.d_model if d_model is None else d_model
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98),
                           eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: noam_lr(s + 1, d, cfg.warmup, cfg.lr_scale))
    return opt, sched


def pick_device(name: str = "auto") -> torch.device:
    """选择训练设备：``auto`` 时有 GPU 就用 GPU，否则用 CPU。"""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda', 'cuda:N' or "
                         f"another torch device, but got {name!r}") from None
    if dev.type == "meta":
        raise ValueError("device 'meta' holds shapes but no data: training "
                         "needs 'cpu' or 'cuda'")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError("device 'mps' was asked for, but this machine (or "
                         "this PyTorch) has no Apple GPU support")
    if dev.type == "cuda":        # say so here, not deep inside .to(device)
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"device {str(dev)!r} was asked for, but no CUDA "
                             "GPU is available")
        if dev.index is not None and dev.index >= count:
            raise ValueError(f"device {str(dev)!r} was asked for, but this "
                             f"machine has {count} CUDA GPU(s): cuda:0 to "
                             f"cuda:{count - 1}")
    return dev


PRECISIONS = ("auto", "fp32", "bf16", "fp16")
PRECISION_NAMES = {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
"""What :func:`autocast_dtype` returned, by its ``--precision`` name (saved in
a checkpoint and in results.json)."""


def autocast_dtype(device: torch.device | str, precision: str = "auto"):
    """选择混合精度用的 16 位类型；用纯 float32 时返回 ``None``。

    The 16-bit type for mixed precision, or ``None`` for plain float32.

    ``auto``: bf16 on GPUs that have it (A100, H100, ...), fp16 with a loss
    scaler on older GPUs (a T4 has no fast bf16), float32 on a CPU. ``bf16`` and
    ``fp16`` also work on a CPU (slowly): that is how the tests run the GPU's
    code path without a GPU.
    """
    require_choice("precision", precision, PRECISIONS)
    device = torch.device(device)           # "cuda" works as well
    if precision == "fp32" or (precision == "auto" and device.type != "cuda"):
        return None
    if precision == "auto":
        return (torch.bfloat16
                if torch.cuda.is_bf16_supported(including_emulation=False)
                else torch.float16)
    return torch.bfloat16 if precision == "bf16" else torch.float16


class CheckpointError(ValueError):
    """检查点不能用于这次训练（文件损坏，或者来自别的配置）。

    A checkpoint that cannot be used by this run (corrupt, or from another
    configuration).
    """


def state_dict_problem(error: Exception, limit: int = 300) -> str:
    """把 ``load_state_dict`` 的报错压成一行，留下出问题的张量名和形状。

    PyTorch's ``load_state_dict`` error in one line: the keys and shapes. Its
    first line ("Error(s) in loading state_dict for Transformer:") says
    only that something is wrong; the lines after it name the missing,
    unexpected or mis-shaped tensors. They are joined by "; " and cut to
    ``limit`` characters.
    """
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = "; ".join(lines[1:] or lines) or type(error).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """检查点文件不存在：``except FileNotFoundError`` 和 ``except CheckpointError`` 都能接住。

    A missing checkpoint file: both a :class:`CheckpointError` (a ValueError)
    and a FileNotFoundError, whichever the caller expects.
    """


def prepare_out_dir(out_dir, name: str = "out_dir=") -> Path:
    """准备检查点的目录：不存在就创建，是文件或不可写就立刻报错。

    Create ``out_dir`` (with its parents) and check that a file can be written
    there, before any training time is spent; otherwise raise a ValueError
    that names ``name`` and the path.
    """
    if not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"{name}{out_dir!r}: expected a directory name (str "
                        f"or Path), but got {type(out_dir).__name__}")
    if not str(out_dir).strip():           # Path("") would be the cwd
        raise ValueError(f"{name}{out_dir!r}: expected a directory, "
                         "but got an empty path")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{name}{out}: not a directory")
    for folder in out.parents:                 # mkdir would say only that
        if folder.exists():
            if not folder.is_dir():
                raise ValueError(f"{name}{out}: {folder} is a file, "
                                 "not a directory")
            break
    try:
        out.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=out).close()
    except OSError as e:
        raise ValueError(f"{name}{out}: directory is not writable "
                         f"({e.strerror or type(e).__name__})") from None
    for kept in ("checkpoint.pt", "results.json"):  # now, not after training
        if (out / kept).exists() and not (out / kept).is_file():
            raise ValueError(f"{name}{out}: {out / kept} is not a file, so "
                             "the run could not be saved there")
    return out


def save_checkpoint(path, **state) -> None:
    """保存检查点：先写临时文件再改名，保存失败时旧的检查点仍然完好。

    Write to a temporary file next to ``path``, then rename: a failed save
    leaves the old one.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def checkpoint_path(path, name: str = "path") -> Path:
    """检查点文件的路径：给的是一次运行的文件夹（``--out``）时，取其中的 ``checkpoint.pt``。

    ``name``: the argument's name in the error for a path that is not a str
    or a Path.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name}: expected a file or folder name (str or "
                        f"Path), but got {type(path).__name__}")
    if isinstance(path, str) and not path.strip():   # Path("") is "."
        raise ValueError(f"{name}: expected a file or folder name, but got "
                         f"{path!r}")
    path = Path(path)
    return path / "checkpoint.pt" if path.is_dir() else path


def _load_failure(e: Exception) -> str:
    """Why torch.load refused a file, in one line: the weights-only
    unpickler's own reason (not its page of advice to turn the check off),
    or the first line of any other error, cut at a word."""
    text = str(e).strip()
    marker = "WeightsUnpickler error:"
    if marker in text:
        detail = text.split(marker, 1)[1].strip().splitlines()[0]
        detail = detail.split(". ")[0].strip()   # not the advice that follows
        return ("not a file torch.save wrote, or one holding objects other "
                "than tensors, numbers, strings, lists and dicts; "
                f"torch.load(weights_only=True): {detail}")
    if isinstance(e, EOFError):
        return "the file ends too early: empty or cut short"
    first = (text.splitlines() or [""])[0]
    if len(first) > 120:
        cut = first.rfind(" ", 0, 120)
        first = first[:cut if cut > 0 else 120] + " …"
    return f"torch.load: {type(e).__name__}" + (f": {first}" if first else "")


def load_checkpoint(path, cfg: TrainConfig | None = None) -> dict:
    """读取训练检查点；给出 ``cfg`` 时还检查它与这次训练的配置一致。

    ``path``: the checkpoint file, or the folder a run wrote it to. The file
    is read with ``weights_only=True``: a checkpoint holds only tensors,
    numbers, strings, lists and dicts, so a file from someone else cannot run
    code while it is being read.
    """
    path = checkpoint_path(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise CheckpointNotFoundError(
            f"checkpoint {path} does not exist") from None
    except Exception as e:  # noqa: BLE001 - any unpickling failure means
        # the file is unusable
        raise CheckpointError(f"checkpoint {path} is not a readable checkpoint "
                              f"({_load_failure(e)})") from None
    if (not isinstance(state, dict) or "train_config" not in state
            or "model" not in state):
        raise CheckpointError(
            f"checkpoint {path} is not a tf_tutorial training checkpoint")
    if cfg is not None:
        saved = state["train_config"]
        keys = ("d_model", "n_heads", "n_layers", "d_ff", "norm_first",
                "n_train", "seed")
        diff = [f"{k}={saved.get(k)!r} (this run: {getattr(cfg, k)!r})"
                for k in keys if saved.get(k) != getattr(cfg, k)]
        if diff:
            raise CheckpointError(
                f"checkpoint {path} is from another configuration: "
                + ", ".join(diff))
    return state


def _world_size() -> int:
    """How many processes ``torchrun`` started (1 without it)."""
    text = os.environ.get("WORLD_SIZE", "1").strip()
    return int(text) if text.isdigit() else 1


def _distributed(dev: torch.device) -> tuple[int, int, torch.device]:
    """(rank, world size, this process's device); under ``torchrun`` it joins
    the process group: NCCL for GPUs, gloo for CPUs. Each GPU process makes
    its own GPU (``LOCAL_RANK``) the current one, so NCCL's collectives do not
    all land on GPU 0."""
    if _world_size() > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    if not dist.is_initialized():
        return 0, 1, dev
    rank, world = dist.get_rank(), dist.get_world_size()
    if dev.type == "cuda" and world > 1:
        local = int(os.environ.get("LOCAL_RANK", rank))
        dev = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    return rank, world, dev


def _rng_state(dev: torch.device) -> dict:
    """The random state a resumed run needs: the CPU generator's, and on a
    GPU also the GPU's (dropout on a GPU draws from the GPU's generator)."""
    state = {"rng": torch.get_rng_state()}
    if dev.type == "cuda":
        state["cuda_rng"] = torch.cuda.get_rng_state(dev)
    return state


def _restore_rng(state: dict, dev: torch.device) -> None:
    torch.set_rng_state(state["rng"])
    if dev.type == "cuda" and state.get("cuda_rng") is not None:
        torch.cuda.set_rng_state(state["cuda_rng"], dev)


def _checksum(model: nn.Module) -> float:
    return float(sum(p.detach().double().sum() for p in model.parameters()))


@dataclass
class TrainResult:
    """一次训练的结果：模型、语料、记录下的曲线、配置和设备。"""
    model: Transformer
    corpus: Corpus
    history: dict
    config: TrainConfig
    device: torch.device


def train_step(model, src, tgt, opt, sched, loss_fn, scaler, amp=None,
               clip: float = 1.0, forward=None):
    """在一批词元编号上做一步优化，返回这一步的损失。

    One optimisation step on a batch of token ids; returns the loss (detached).

    Teacher forcing: tgt (B, T + 1) holds <bos> y₁ … y_(T−1) <eos> (then
    <pad>); the decoder reads tgt[:, :-1] = <bos> y₁ … y_(T−1) and learns to
    predict tgt[:, 1:] = y₁ … y_(T−1) <eos>, both (B, T). ``loss_fn`` ignores
    <pad> and smooths the labels. src is (B, S). ``forward`` is what to call
    instead of ``model`` (its DDP or compiled wrapper).
    """
    tgt_in, gold = tgt[:, :-1], tgt[:, 1:]        # (B, T) each
    net = model if forward is None else forward
    net.train()
    with (torch.autocast(src.device.type, dtype=amp) if amp
          else contextlib.nullcontext()):
        logits = net(src, tgt_in)                 # (B, T, V)
    # a half-precision logit goes up to float32; a float64 one stays
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    loss = loss_fn(logits.flatten(0, 1), gold.flatten())  # mean, real tokens
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()   # fp16: scaled up so that small gradients
                                    # do not flush to 0
    scaler.unscale_(opt)            # the true gradients again, before they
                                    # are clipped
    nn.utils.clip_grad_norm_(model.parameters(), clip)
    scaler.step(opt)                # skipped if a gradient overflowed (the
                                    # scale then shrinks)
    scaler.update()
    sched.step()                    # the learning rate of the next step
    return loss.detach()


def check_limits(max_steps=None, max_seconds=None, progress=True) -> None:
    """检查训练的步数上限、时间上限和进度条开关（train 与 train_continuation 共用）。

    ``max_steps`` a positive integer and ``max_seconds`` a positive number
    (NaN is refused too), each or None; ``progress`` True or False.
    """
    if max_steps is not None:
        require_sizes(max_steps=max_steps)
    if max_seconds is not None:
        require_positive(max_seconds=max_seconds)
    require_flags(progress=progress)


def batch_stream(encoded, cfg: TrainConfig, pad_id: int, skip: int = 0,
                 world: int = 1):
    """无穷无尽地产生训练批次，一个轮次接一个轮次，每个轮次的顺序由种子决定。

    Training batches forever, epoch after epoch, each epoch in its own seeded
    order.

    The first ``skip`` batches are passed over without being built (resuming at
    a step), and a batch with fewer sentences than processes is left out (it
    cannot be split over them). The sentences become tensors here, once, before
    the first batch is asked for.
    """
    require_token_id(pad_id=pad_id)
    require_counts(skip=skip)        # -1 would never reach 0: no batch, ever
    require_sizes(world=world)
    lengths = [(len(src), len(tgt)) for src, tgt in encoded]
    src_t, tgt_t = ([torch.tensor(s) for s, _ in encoded],
                    [torch.tensor(t) for _, t in encoded])
    size = None if cfg.batch_tokens else cfg.batch_size

    def stream(skip: int):
        epoch = 0
        while True:
            usable = 0
            for chunk in batch_indices(lengths, size, cfg.batch_tokens,
                                       seed=cfg.seed * 1000 + epoch):
                if len(chunk) < world:
                    continue
                usable += 1
                if skip:
                    skip -= 1
                    continue
                yield (pad_sequence([src_t[i] for i in chunk], batch_first=True,
                                    padding_value=pad_id),           # (B, S)
                       pad_sequence([tgt_t[i] for i in chunk], batch_first=True,
                                    padding_value=pad_id))       # (B, T + 1)
            if not usable:   # every epoch would be the same: it would hang
                raise ValueError(
                    f"no training batch holds {world} or more sentences (one "
                    f"per process): {len(encoded)} sentences, batch_size="
                    f"{cfg.batch_size}, batch_tokens={cfg.batch_tokens}")
            epoch += 1

    return stream(skip)


CUDNN_ATTENTION = False
"""Whether training may use cuDNN's attention kernel (see
:func:`varying_shapes`). ``scripts/gpu_run.py`` sets it to measure both."""


@contextlib.contextmanager
def varying_shapes():
    """训练时批次的形状种类很多：在训练循环里不用 cuDNN 的注意力内核。

    Turn PyTorch's cuDNN attention backend off for the duration (unless
    :data:`CUDNN_ATTENTION` is True), then restore the setting.

    Recent PyTorch builds with a new enough cuDNN try cuDNN first for
    ``F.scaled_dot_product_attention`` on Hopper GPUs (sm90; the source's
    ``check_prefer_cudnn_attention``; whether the first record's torch 2.11
    did is not checked, as that record lacks the cuDNN version), and cuDNN
    builds an execution plan for every new (batch, heads, lengths) shape,
    forward and backward, and caches it. Batches grouped by length come
    in many shapes, so early in training most of them are new. The first H200
    record (book/records/gpu.json) trained at 5.5 steps/s, while a model of the
    same size (Pre-LN instead of Post-LN) a minute later in the same process,
    on the same batches, made 20.4. We think the plans, not the arithmetic, set
    the first run's pace; this is not yet measured (``scripts/gpu_run.py``'s
    ``sdpa`` stage measures it). Without cuDNN the next backend in PyTorch's
    order runs (the memory-efficient kernel here: flash attention takes no
    mask), with no plan to build. Only CUDA reads this flag; on a CPU nothing
    changes.
    """
    was = torch.backends.cuda.cudnn_sdp_enabled()
    if not CUDNN_ATTENTION:
        torch.backends.cuda.enable_cudnn_sdp(False)
    try:
        yield
    finally:
        torch.backends.cuda.enable_cudnn_sdp(was)


def train(cfg: TrainConfig, out_dir=None, resume=None, device: str = "auto",
          corpus: Corpus | None = None, compile: bool | str = False,
          progress: bool = True, max_steps: int | None = None,
          precision: str = "auto",
          max_seconds: float | None = None, on_eval=None) -> TrainResult:
    """按 ``cfg`` 训练模型，返回模型、语料和记录下的曲线。

    Train ``cfg`` and return the model, the corpus and the recorded curves.

    ``out_dir``: where the checkpoint (``checkpoint.pt``) is written, after
    every evaluation and at the end; created if missing, checked before the
    first step. ``resume``: a checkpoint path; training continues from its
    step with the same data order, random state and (fp16) loss scale, so
    the loss curve carries on as if never stopped; a checkpoint already past
    the steps asked for is refused. ``max_steps`` stops early (the learning
    rate of a step does not depend on where training stops); used to show
    resuming.
    ``max_seconds`` stops once this call has trained that long (a time
    budget; a resumed run counts from zero, not from the checkpoint's
    time). ``compile``: True for
    ``torch.compile`` (inductor), or the name of another backend (the tests
    use "aot_eager"). ``on_eval(step, model, seconds)`` is called after every
    evaluation, ``seconds`` being the training time so far (``scripts/gpu_run.py``
    scores the test split there); the time it takes is left out of the training
    time and of ``max_seconds``.
    ``history["seconds"]``, the training time, includes the validation passes
    and the checkpoint saves; ``history["eval_seconds"]`` is the part spent
    validating, for timings that want the steps alone.
    """
    if on_eval is not None and not callable(on_eval):
        raise TypeError(f"on_eval must be a function (step, model, seconds), "
                        f"but got {type(on_eval).__name__}")
    check_limits(max_steps=max_steps, max_seconds=max_seconds,
                 progress=progress)
    if not isinstance(compile, (bool, np.bool_, str)):   # 5 would compile
        raise WrongTypeError(f"compile must be True, False or the name of a "
                             f"torch.compile backend, but got {compile!r}")
    require_config(cfg, TrainConfig, "cfg")
    if corpus is not None and not isinstance(corpus, Corpus):
        raise TypeError(f"corpus must be a Corpus (from make_corpus) or None, "
                        f"but got {type(corpus).__name__}")
    rank, world, dev = _distributed(pick_device(device))
    if max_seconds is not None and world > 1:
        raise ValueError("max_seconds cannot be used with several processes: "
                         "each would stop at a different step; use --steps")
    if out_dir is not None and rank == 0:    # fail now, not after training
        out_dir = prepare_out_dir(out_dir)
    if resume is not None:
        checkpoint_path(resume, "resume")     # 5 (or 0) is not a file
    state = load_checkpoint(resume, cfg) if resume is not None else None
    torch.manual_seed(cfg.seed)
    corpus, corpus_id = _run_corpus(cfg, state, resume, corpus)
    mcfg = cfg.model_config(corpus)
    model = Transformer(mcfg).to(dev)
    opt, sched = optimizer_and_schedule(model, cfg)
    history = {"step": [], "loss": [], "lr": [], "eval_step": [],
               "valid_loss": [], "valid_acc": [], "seconds": 0.0,
               "eval_seconds": 0.0, "tokens": 0}
    step = 0
    amp = autocast_dtype(dev, precision)
    if state:
        try:
            model.load_state_dict(state["model"])
        except RuntimeError as e:
            raise CheckpointError(
                f"checkpoint {resume} does not fit this model: "
                f"{state_dict_problem(e)}") from None
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        # the next step's rate from this run's schedule, not the saved rate
        # (lr_scale or warmup may have changed)
        for group, base, rate in zip(opt.param_groups, sched.base_lrs,
                                     sched.lr_lambdas):
            group["lr"] = base * rate(sched.last_epoch)
        history, step = state["history"], state["step"]
        history.setdefault("eval_seconds", 0.0)   # checkpoints before it
        _restore_rng(state, dev)
        changed = [f"{k}={v!r} (this run: {getattr(cfg, k)!r})"
                   for k, v in state["train_config"].items()
                   if k not in ("name", "steps", "eval_every")
                   and getattr(cfg, k, v) != v]
        saved = state.get("precision")        # checkpoints before it: None
        if saved not in (None, PRECISION_NAMES[amp]):
            changed.append(f"precision={saved!r} (this run: "
                           f"{PRECISION_NAMES[amp]!r})")
        if changed:
            warnings.warn(f"resuming {resume} with another configuration: "
                          + ", ".join(changed) + "; the run does not carry "
                          "on as if it had never stopped", stacklevel=2)
    scaler = torch.amp.GradScaler(dev.type, enabled=amp is torch.float16)
    if state and scaler.is_enabled() and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])  # fp16: the scale it reached
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    fwd = (torch.compile(net, backend=(compile if isinstance(compile, str)
                                       else "inductor"))
           if compile else net)
    loss_fn = nn.CrossEntropyLoss(ignore_index=mcfg.pad_id,
                                  label_smoothing=cfg.label_smoothing)
    train_enc = encode_pairs(corpus.train, corpus.src_vocab, corpus.tgt_vocab)
    valid_enc = encode_pairs(corpus.valid, corpus.src_vocab, corpus.tgt_vocab)
    longest = max(max(len(s), len(t)) for s, t in train_enc)
    if cfg.batch_tokens is not None and cfg.batch_tokens < longest:
        raise ValueError(f"batch_tokens={cfg.batch_tokens} (--batch-tokens) "
                         f"cannot hold the longest training sentence "
                         f"({longest} tokens)")
    stop = cfg.steps if max_steps is None else min(cfg.steps, max_steps)
    if step > stop:   # equal: already done, returned as saved
        raise ValueError(f"resume: checkpoint {resume} has already trained "
                         f"{step} steps, past the {stop} asked for (steps="
                         f"{cfg.steps}, max_steps={max_steps})")
    bar = _progress(progress and rank == 0, initial=step, total=stop,
                    desc=f"train[{cfg.name}]")
    losses = []  # on the device; copied to the host in groups (one sync each)
    paused = 0.0  # seconds spent in on_eval: not training time

    def this_run() -> float:  # this call's training time so far
        return time.perf_counter() - start - paused

    def evaluate_now():
        nonlocal paused
        if losses:                    # one copy to the host, one sync
            history["loss"] += torch.stack(losses).tolist()
        losses.clear()
        began = time.perf_counter()
        vl, va = validate(model, valid_enc, mcfg.pad_id, dev, amp)
        history["eval_seconds"] += time.perf_counter() - began
        history["eval_step"].append(step)
        history["valid_loss"].append(vl)
        history["valid_acc"].append(va)
        if on_eval is not None:
            began = time.perf_counter()
            on_eval(step, model, history["seconds"] + this_run())
            paused += time.perf_counter() - began

    stream = batch_stream(train_enc, cfg, mcfg.pad_id, skip=step, world=world)
    start = time.perf_counter()
    # batches of many shapes: no cuDNN attention; Ctrl-C closes the bar too
    with varying_shapes(), contextlib.closing(bar):
        for src, tgt in stream:
            if step >= stop or (max_seconds is not None
                                and this_run() > max_seconds):
                break
            # counted on the host: no sync
            history["tokens"] += int((tgt[:, 1:] != mcfg.pad_id).sum())
            src, tgt = (src[rank::world].to(dev, non_blocking=True),
                        tgt[rank::world].to(dev, non_blocking=True))
            # the rate this step uses
            history["lr"].append(opt.param_groups[0]["lr"])
            losses.append(train_step(model, src, tgt, opt, sched, loss_fn,
                                     scaler, amp, cfg.clip, fwd))
            step += 1
            history["step"].append(step)
            bar.update(1)
            if step % 50 == 0 and not isinstance(bar, _Quiet):  # a sync
                bar.set_postfix(loss=f"{losses[-1].item():.3f}",
                                refresh=False)
            if step % cfg.eval_every == 0 or step == stop:
                evaluate_now()
                if out_dir is not None and rank == 0 and step < stop:
                    so_far = history["seconds"] + this_run()
                    _save(out_dir, model, opt, sched,
                          {**history, "seconds": so_far}, step, cfg, mcfg,
                          corpus, dev, scaler, amp, corpus_id)
        bar.close()
        # stopped by the time budget
        if not history["eval_step"] or history["eval_step"][-1] != step:
            evaluate_now()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    history["seconds"] += this_run()
    if world > 1:
        sums = [None] * world
        dist.all_gather_object(sums, _checksum(model))
        history["rank_checksums"] = sums
    if out_dir is not None and rank == 0:
        _save(out_dir, model, opt, sched, history, step, cfg, mcfg, corpus,
              dev, scaler, amp, corpus_id)
    return TrainResult(model, corpus, history, cfg, dev)


def _run_corpus(cfg: TrainConfig, state, resume,
                corpus: Corpus | None) -> tuple[Corpus, dict]:
    """The corpus a run trains on, and its identity (saved in checkpoints):
    the one given, else, when resuming, the one the checkpoint's record names,
    else ``make_corpus(cfg.n_train, seed=cfg.seed)``. A resumed run's corpus
    must have the record's sentences and the checkpoint's vocabularies; a
    CheckpointError says what differs."""
    saved = state.get("corpus") if state else None
    given = corpus is not None
    if not given:     # the generalisation splits' sizes too, for the scores
        corpus = (make_corpus(saved["n_train"], saved["n_valid"],
                              saved["n_test"], saved["n_longer"],
                              saved["n_deeper"], seed=saved["seed"])
                  if saved else make_corpus(cfg.n_train, seed=cfg.seed))
    now = corpus.identity()
    # the sentences decide; the version only words the message, and the
    # generalisation splits' sizes do not change what is trained on
    if saved and any(now[k] != saved[k] for k in ("seed", "n_train",
                                                  "n_valid", "n_test",
                                                  "sha256")):
        def show(c):
            return (f"seed {c['seed']}, {c['n_train']}/{c['n_valid']}/"
                    f"{c['n_test']} train/valid/test pairs, corpus "
                    f"version {c['version']}")
        why = (f"the one given ({show(now)})" if given
               else f"the one this package draws from that record "
                    f"today (corpus version {CORPUS_VERSION}: its "
                    f"sentences differ)"
               if saved["version"] != CORPUS_VERSION
               else "the one make_corpus draws from that record: a "
                    "corpus built by hand? Pass it as corpus=")
        raise CheckpointError(f"resume: checkpoint {resume} was trained "
                              f"on another corpus ({show(saved)}) than "
                              + why)
    if state and (state["src_itos"] != corpus.src_vocab.itos
                  or state["tgt_itos"] != corpus.tgt_vocab.itos):
        raise CheckpointError(
            f"resume: checkpoint {resume} was trained with other "
            "vocabularies than " + ("the corpus given" if given else
                                    "the corpus rebuilt for it"))
    return corpus, now


def _save(out_dir, model, opt, sched, history, step, cfg, mcfg, corpus,
          dev, scaler, amp, corpus_id: dict) -> None:
    save_checkpoint(
        Path(out_dir) / "checkpoint.pt", model=model.state_dict(),
        optimizer=opt.state_dict(), scheduler=sched.state_dict(),
        scaler=scaler.state_dict(),   # {} unless fp16
        precision=PRECISION_NAMES[amp],
        history=history, step=step, **_rng_state(dev),
        train_config=dataclasses.asdict(cfg), model_config=mcfg.to_dict(),
        src_itos=corpus.src_vocab.itos, tgt_itos=corpus.tgt_vocab.itos,
        corpus=corpus_id)


@torch.no_grad()
def validate(model: Transformer, encoded, pad_id: int, device, amp=None,
             batch_size: int = 200):
    """教师强制下的验证：平均每个词元的交叉熵和词元准确率。

    Teacher-forced validation: mean token cross-entropy (no smoothing) and
    token accuracy. ``device``: a torch.device or a name ("cpu", "cuda").
    """
    if not len(encoded):
        raise ValueError("encoded: expected at least one (source, target) "
                         "pair of ids, but got none")
    device = pick_device(device) if isinstance(device, str) else device
    model.eval()
    total, correct, loss_sum = 0, 0, 0.0
    for src, tgt in batches(encoded, batch_size, pad_id, shuffle=False):
        src, tgt = src.to(device), tgt.to(device)
        with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
            logits = model(src, tgt[:, :-1]).float()
        gold, keep = tgt[:, 1:], tgt[:, 1:] != pad_id
        loss_sum += nn.functional.cross_entropy(logits[keep], gold[keep],
                                                reduction="sum").item()
        correct += (logits.argmax(-1)[keep] == gold[keep]).sum().item()
        total += keep.sum().item()
    return loss_sum / total, correct / total


def _progress(enabled: bool, **kw):
    if not enabled:
        return _Quiet()
    try:  # a widget in Jupyter/Colab when ipywidgets is there
        import ipywidgets  # noqa: F401
        from tqdm.auto import tqdm
    except ImportError:
        from tqdm import tqdm
    return tqdm(mininterval=2.0, **kw)


class _Quiet:
    def update(self, n):
        pass

    def set_postfix(self, *args, **kw):
        pass

    def close(self):
        pass


# --- command line -------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit code 2, no usage dump
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m tf_tutorial.train",
                description="Train the chapter-10 Transformer on the toy "
                            "English→Chinese corpus.",
                epilog="example: python -m tf_tutorial.train --config cpu "
                       "--out runs/cpu")
    p.add_argument("--config", choices=sorted(CONFIGS), default=None,
                   help="preset (default: gpu when CUDA is available, else "
                        "cpu; with --resume, the checkpoint's)")
    p.add_argument("--out", type=_path, default=None,
                   help="directory for checkpoint.pt and results.json "
                        "(created if missing; with --resume, the "
                        "checkpoint's own directory by default)")
    p.add_argument("--resume", type=_path, default=None,
                   help="checkpoint to continue from, up to its total --steps "
                        "(or a larger --steps)")
    p.add_argument("--overwrite", action="store_true",
                   help="start afresh even if --out already holds a "
                        "checkpoint (it is replaced)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="where to train (default auto: cuda when available, "
                        "else cpu)")
    p.add_argument("--steps", type=int, default=None,
                   help="total number of steps (overrides the preset)")
    batch = p.add_mutually_exclusive_group()
    batch.add_argument("--batch-size", type=int, default=None,
                       help="sentences per batch (overrides the preset)")
    batch.add_argument("--batch-tokens", type=int, default=None,
                       help="padded tokens per batch instead of a sentence "
                            "count (overrides the preset)")
    p.add_argument("--max-seconds", type=float, default=None,
                   help="stop after this much training time in this run "
                        "(a resumed run counts from zero)")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the model")
    p.add_argument("--precision", choices=PRECISIONS, default="auto",
                   help="auto: bf16 on GPUs that have it, else fp16 with a "
                        "loss scaler; fp32 on a CPU")
    p.add_argument("--beam", type=int, default=1,
                   help="beam size for the test-set evaluation (1 = greedy)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (for logs)")
    return p


def _path(text: str) -> Path:
    """An argparse type: a path, never empty ("" would mean the cwd)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a path, but got an empty "
                                         "string")
    return Path(text)


def _prepare_out(parser, out: Path) -> Path | None:
    """Create ``--out``; return the outermost folder this created (None if
    it existed), for :func:`_remove_if_empty` when the run fails."""
    created = None
    for folder in (out, *out.parents):
        if folder.exists():
            break
        created = folder
    try:
        prepare_out_dir(out, name="--out ")
    except ValueError as e:
        _remove_if_empty(created)
        parser.error(str(e))
    return created


def _remove_if_empty(folder: Path | None) -> None:
    """A failed run leaves no empty folders behind (files are kept)."""
    if folder is not None and folder.is_dir() and not any(
            p.is_file() for p in folder.rglob("*")):
        shutil.rmtree(folder, ignore_errors=True)


def _config(parser, args) -> TrainConfig:
    """The preset, or the checkpoint's own configuration when resuming, with
    the overrides."""
    overrides = {k: v for k, v in (("steps", args.steps),
                                   ("batch_size", args.batch_size),
                                   ("batch_tokens", args.batch_tokens))
                 if v is not None}
    if args.resume is None:
        name = args.config or ("gpu" if torch.cuda.is_available()
                               and args.device != "cpu" else "cpu")
        return CONFIGS[name].with_changes(**overrides)
    try:
        state = load_checkpoint(args.resume)
    except CheckpointError as e:
        parser.error(str(e))
    saved = TrainConfig(**state["train_config"])
    if args.config is not None and args.config != saved.name:
        parser.error(
            f"--config {args.config} does not match checkpoint {args.resume}, "
            f"which was trained with --config {saved.name}")
    cfg = saved.with_changes(**overrides)
    if cfg.steps <= state["step"]:
        hint = ("a larger --steps" if args.steps is None
                else f"--steps larger than {state['step']}")
        parser.error(
            f"checkpoint {args.resume} has already trained {state['step']} "
            f"steps, and {cfg.steps} steps in all were asked for; give {hint} "
            "to train further")
    return cfg


def _one_line_warning(prog: str):
    """A ``warnings.showwarning`` for the command line: one line, no source."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"{prog}: warning: {message}", file=sys.stderr)
    return show


def main(argv=None) -> int:
    """命令行入口：``python -m tf_tutorial.train``。"""
    parser = _parser()
    args = parser.parse_args(argv)
    for flag, value in (("--steps", args.steps),
                        ("--batch-size", args.batch_size),
                        ("--batch-tokens", args.batch_tokens),
                        ("--beam", args.beam)):
        if value is not None and value < 1:
            parser.error(f"{flag} must be a positive integer, but got {value}")
    if args.max_seconds is not None and not args.max_seconds > 0:   # NaN too
        parser.error(
            f"--max-seconds must be positive, but got {args.max_seconds}")
    if args.max_seconds is not None and _world_size() > 1:
        parser.error("--max-seconds cannot be used with several processes "
                     "(torchrun): each would stop at a different step; "
                     "use --steps")
    if args.resume is not None:
        args.resume = checkpoint_path(args.resume)   # a file, or the run's folder
    if args.out is None and args.resume is not None:
        args.out = args.resume.parent      # go on saving where the run saved
    cfg = _config(parser, args)
    if args.out is not None and not args.overwrite:
        old = args.out / "checkpoint.pt"
        if old.is_file() and (args.resume is None
                              or old.resolve() != args.resume.resolve()):
            parser.error(
                f"--out {args.out} already holds a checkpoint; continue it "
                f"with --resume {args.out}, or add --overwrite to replace it")
    try:
        device = pick_device(args.device)     # --device cuda without a GPU
    except ValueError as e:
        parser.error(str(e))
    created = None if args.out is None else _prepare_out(parser, args.out)
    if cfg.name == "gpu" and device.type == "cpu":
        print(f"{parser.prog}: note: --config gpu is sized for a GPU "
              f"({cfg.steps} steps); on a CPU it takes many hours "
              "(--config cpu trains in about 3 minutes)", file=sys.stderr)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning(parser.prog)
            result = train(
                cfg, out_dir=args.out, resume=args.resume, device=args.device,
                compile=args.compile, progress=not args.no_progress,
                precision=args.precision, max_seconds=args.max_seconds)
    except (CheckpointError, ValueError) as e:
        _remove_if_empty(created)
        parser.error(str(e))
    except OSError as e:       # a save failed: the disk, or a path in the way
        parser.exit(1, f"{parser.prog}: error: could not write "
                       f"{e.filename or args.out}: {e.strerror or e}; the "
                       "trained model was not saved\n")
    except KeyboardInterrupt:                     # Ctrl-C: say what is kept
        saved = None if args.out is None else args.out / "checkpoint.pt"
        if saved is not None and saved.is_file():
            step = load_checkpoint(saved)["step"]
            note = (f"{saved} holds step {step}; continue with "
                    f"--resume {args.out}")
        else:
            note = "no checkpoint was saved"
            _remove_if_empty(created)
        print(f"\n{parser.prog}: interrupted; {note}", file=sys.stderr)
        return 130
    rank = dist.get_rank() if dist.is_initialized() else 0
    if rank == 0:
        from tf_tutorial.metrics import bleu_signature, evaluate
        c = result.corpus
        test = evaluate(result.model, c.test, c.src_vocab, c.tgt_vocab,
                        beam_size=args.beam)
        amp = autocast_dtype(result.device, args.precision)
        summary = {"config": cfg.name, "device": str(result.device),
                   "precision": PRECISION_NAMES[amp],
                   "steps": (result.history["step"] or [0])[-1],
                   "planned_steps": cfg.steps,   # more: the time ran out
                   "train_seconds": round(result.history["seconds"], 1),
                   "parameters": count_parameters(result.model),
                   "test_exact_match": round(test["exact_match"], 4),
                   "test_bleu": round(test["bleu"], 2),
                   # how the BLEU was computed (Post 2018: report it)
                   "bleu_signature": bleu_signature()}
        print(json.dumps(summary, ensure_ascii=False))
        if summary["steps"] == 0 and args.max_seconds is not None:
            # the time ran out at once: the scores are the initial weights'
            print(f"{parser.prog}: note: no training step ran (--max-seconds "
                  f"{args.max_seconds:g} ended before the first step); the "
                  "scores are an untrained model's", file=sys.stderr)
        if args.out is None:
            print(f"{parser.prog}: note: no --out was given, so the trained "
                  "model was not saved (add --out DIR to keep it)",
                  file=sys.stderr)
        else:
            results = args.out / "results.json"
            try:
                results.write_text(json.dumps(summary, ensure_ascii=False,
                                              indent=1))
            except OSError as e:
                parser.exit(1, f"{parser.prog}: error: could not write "
                               f"{results}: {e.strerror or e}; the "
                               f"checkpoint in {args.out} is saved\n")
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
