"""计时的基本工具：预热、重复、轮流计时取中位数，并写明是在哪台机器上测的。

Everything that times something in this project goes through here: the chapters' live
demonstrations, :mod:`tf_tutorial.timing.compare` (``python -m benchmarks``) and
``scripts/gpu_run.py``. CUDA work is synchronised before every clock read, so a GPU timing is
the work itself, not its launch.
"""
from __future__ import annotations

import datetime
import os
import platform
import random
import re
import statistics
import time
from typing import Callable, TypeVar

import torch

from tf_tutorial._checks import require_counts, require_sizes

R = TypeVar("R")


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn: Callable[[], R]) -> tuple[R, float]:
    """运行一次 ``fn()``，返回它的结果和所用的秒数（一次性的长任务用它，例如一整次训练）。"""
    _sync()
    start = time.perf_counter()
    out = fn()
    _sync()
    return out, time.perf_counter() - start


def interleaved_times(fns: dict[str, Callable[[], object]], repeat: int = 5,
                      warmup: int = 2) -> dict[str, list[float]]:
    """几个函数轮流计时，各轮的先后次序按 Williams 设计排；返回每一轮的秒数。

    Timed in turns rather than one after the other, so that a drift in the machine's speed
    (clock, caches, other load) hits all of them alike. In one fixed order A, B, C, … a function
    always ran in the same place and after the same one, and inherited what that one left behind
    (the cache's contents, memory to free), a bias that repeating the rounds does not average
    out (no record here measures its size: appendix A). So the orders follow a
    Williams design, as in crossover trials: in each block of n rounds (n functions; 2n when n
    is odd) every function is timed once in every place and directly after every other function
    equally often. Each block relabels the functions by an order drawn from a fixed seed.
    (Independent random orders did neither for sure: with three functions the seed drew the
    same order in all three rounds.) Each function first runs ``warmup`` times untimed.

    Returns ``{name: [seconds of round 1, round 2, …]}``: entry i of every list was timed in
    the same round, so ratios can be taken round by round (:func:`ratio_quartiles`).
    """
    require_sizes(repeat=repeat)
    require_counts(warmup=warmup)
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    names, rng = list(fns), random.Random(0)
    orders: list[list[str]] = []
    while len(orders) < repeat:
        label = rng.sample(names, len(names))
        orders += [[label[i] for i in row] for row in williams_orders(len(names))]
    times: dict[str, list[float]] = {name: [] for name in names}
    for order in orders[:repeat]:
        for name in order:
            times[name].append(timed(fns[name])[1])
    return times


def williams_orders(n: int) -> list[list[int]]:
    """n 个对象的 Williams 次序：每个位置、每个“紧跟在谁后面”都一样多。

    The rows of a Williams Latin square on 0..n-1: the first is 0, 1, n-1, 2, n-2, …, each
    next one adds 1 (mod n). Every object is in every place once, and for even n every ordered
    pair (a right before b) occurs exactly once; for odd n the reversed rows are appended
    (2n rows) and every pair occurs twice.
    """
    require_sizes(n=n)
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        if len(first) % 2:
            first, lo = first + [lo], lo + 1
        else:
            first, hi = first + [hi], hi - 1
    rows = [[(x + i) % n for x in first] for i in range(n)]
    return rows + [r[::-1] for r in rows] if n % 2 and n > 1 else rows


def interleaved_medians(fns: dict[str, Callable[[], object]], repeat: int = 5,
                        warmup: int = 2) -> dict[str, float]:
    """几个函数轮流计时（:func:`interleaved_times`），各取中位数秒数。"""
    return {name: statistics.median(t)
            for name, t in interleaved_times(fns, repeat, warmup).items()}


def ratio_quartiles(times: dict[str, list[float]], base: str) -> dict[str, tuple[float, float]]:
    """逐轮的比值（每个函数对 ``base``，同一轮里相除）的下、上四分位数。

    The spread of a ratio, from :func:`interleaved_times`: a function and ``base`` timed in
    the same round met the same state of the machine, so their ratio round by round shows how
    far one round's verdict can wander. About half of the rounds' ratios lie between the two
    numbers returned: half of 8 or of 24 rounds, but only the middle 2 of 6 (the book shows the
    smallest and largest instead below ``compare.SHORT`` rounds). With one round both are that
    round's ratio.
    """
    if base not in times:
        raise KeyError(f"base={base!r} is not one of the timed names {list(times)}")
    out = {}
    for name, t in times.items():
        if len(t) != len(times[base]):
            raise ValueError(f"{name!r} has {len(t)} rounds but base={base!r} has "
                             f"{len(times[base])}: not timed in the same rounds")
        ratios = [a / b for a, b in zip(t, times[base])]
        if len(ratios) < 2:
            out[name] = (ratios[0], ratios[0])
        else:
            q1, _, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
            out[name] = (q1, q3)
    return out


def median_time(fn: Callable[[], object], repeat: int = 5, warmup: int = 1) -> float:
    """``fn()`` 的中位数秒数：先不计时地运行 ``warmup`` 次，再计时 ``repeat`` 次。"""
    return interleaved_medians({"fn": fn}, repeat=repeat, warmup=warmup)["fn"]


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next(line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def _short_cpu_name(name: str) -> str:
    """The model name without trademarks, clock and filler words, for a label that fits a line:
    ``Intel(R) Xeon(R) Processor`` → ``Intel Xeon``."""
    short = re.sub(r"\((R|TM)\)|@.*$|\b(CPU|Processor)\b", " ", name, flags=re.IGNORECASE)
    return " ".join(short.split()) or name


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", _short_cpu_name(text).lower()).strip("-")


def describe_machine(device: str | torch.device | None = None) -> dict:
    """测量所在的机器：名称、一行标签、文件名用的简称、torch 和 Python 版本、线程数、日期。

    ``device``: the device the measurement runs on (default: CUDA when available). A GPU adds
    its memory, CUDA and cuDNN versions and compute capability. ``slug`` names the machine in a record's
    file name: ``cpu-<model>-<n>core`` or ``gpu-<name>``.
    """
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    info = {"device": dev.type, "torch": torch.__version__,
            "python": platform.python_version(), "threads": torch.get_num_threads(),
            "cpus": os.cpu_count(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        info.update(name=p.name, memory_gb=round(p.total_memory / 2**30, 1),
                    cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                    capability=f"{p.major}.{p.minor}",
                    slug=f"gpu-{_slug(p.name)}",
                    label=f"GPU {p.name}，torch {torch.__version__}")
    else:
        name = _cpu_name()
        info.update(name=name, slug=f"cpu-{_slug(name)}-{os.cpu_count()}core",
                    label=(f"CPU {_short_cpu_name(name)}，{os.cpu_count()} 核，torch {torch.__version__}，"
                           f"{torch.get_num_threads()} 线程"))
    return info


def machine_label(device: str | torch.device | None = None) -> str:
    """一行文字写明测量所在的硬件和 torch 版本，用在图注和表格里。"""
    return describe_machine(device)["label"]


def saved_activation_bytes(fn: Callable[[], torch.Tensor]) -> int:
    """``fn()`` 的输出在反向传播前由 autograd 保存的张量占多少字节。

    This is the memory a training step holds between forward and backward, the part that grows
    with batch and length. Storage shared by several saved tensors is counted once.
    """
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor):
        s = t.untyped_storage()
        storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    del out
    return sum(storages.values())


def _recording(fn: Callable[[], object], record: Callable[..., None]) -> None:
    """Run ``fn()`` without gradients, calling ``record(func, outputs, inputs)`` for every aten
    operation; ``outputs`` and ``inputs`` (its arguments) are flattened to lists."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            record(func, tree_flatten(out)[0], tree_flatten((args, kwargs or {}))[0])
            return out

    with torch.no_grad(), Recorder():
        fn()


def operation_names(fn: Callable[[], object]) -> list[str]:
    """``fn()`` 依次调用了哪些底层（aten）算子：一个融合内核只算一个。"""
    names: list[str] = []
    _recording(fn, lambda func, outs, inputs: names.append(func.__name__))
    return names


def largest_tensor_bytes(fn: Callable[[], object]) -> int:
    """``fn()`` 运行时任何一个算子产生的最大张量占多少字节（不求梯度）。

    Every operation's outputs are recorded through a ``TorchDispatchMode``; the result is the
    size of the largest one. For attention it tells an (L, S) score matrix from a block-sized
    tile, independent of the allocator and of the machine.
    """
    biggest = [0]

    def record(func, outs, inputs):
        for t in outs:
            if isinstance(t, torch.Tensor):
                biggest[0] = max(biggest[0], t.numel() * t.element_size())

    _recording(fn, record)
    return biggest[0]


def tensor_traffic_bytes(fn: Callable[[], object]) -> int:
    """``fn()`` 的每个算子读入和写出的张量字节数之和（不求梯度）：内存读写的粗略计数。

    For every aten operation, the bytes of its tensor arguments plus those of its outputs.
    A fused kernel reads its input and writes its output once; the same formula written as
    several operations passes each intermediate tensor through memory. Operations that move
    no data count 0: views, and operations whose every output is an input's storage without
    a write (``_unsafe_view``, which follows a batched ``@``).

    A rough count, neither a bound nor a measurement: caches keep some of it from main
    memory, a kernel may read its input more than once, a broadcast (expanded) tensor is
    counted at its full size, and an ``out=`` or ``copy_`` destination counts as read too.
    """
    total = [0]

    def nbytes(ts):
        return sum(t.numel() * t.element_size() for t in ts)

    def record(func, outs, inputs):
        if func.is_view:
            return
        ins = [t for t in inputs if isinstance(t, torch.Tensor)]
        outs = [t for t in outs if isinstance(t, torch.Tensor)]
        stored = {t.untyped_storage().data_ptr() for t in ins if t.numel()}
        writes = any(a.alias_info is not None and a.alias_info.is_write
                     for a in func._schema.arguments)
        if (not writes and outs and all(
                t.untyped_storage().data_ptr() in stored for t in outs)):
            return                       # a view in all but name
        total[0] += nbytes(ins) + nbytes(outs)

    _recording(fn, record)
    return total[0]
