"""书里的测量记录：读写 ``book/records/`` 下提交的 JSON（GPU 运行、配置校准、基准测试）。

Figures that depend on hardware come from committed records, never from a timing taken while
the book builds (DESIGN.md, "Records"). A chapter runs in ``book/``, so its records are in
``records/``; scripts and tests run from the repository root, where they are in ``book/records/``.
A record is never a dry run (``scripts.gpu_run --dry-run``) or a quick run
(``python -m benchmarks --quick``): writing one is refused, and so is reading one.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from tf_tutorial.train import GPU_TARGET


def records_folder() -> Path:
    """记录所在的文件夹：在 ``book/`` 里运行（各章）时是 ``records/``，否则是 ``book/records/``。"""
    for folder in (Path("records"), Path("book") / "records"):
        if folder.is_dir():
            return folder
    return Path("records")


def _not_a_measurement(record: dict) -> str | None:
    if record.get("dry_run"):
        return "comes from a dry run (scripts.gpu_run --dry-run): it is not a measurement"
    if record.get("quick"):
        return "comes from a quick run (python -m benchmarks --quick): it is not a measurement"
    return None


def load_record(name: str, folder=None) -> dict | None:
    """读出记录 ``name``（例如 ``"gpu.json"``）；还没有测量、文件不存在时返回 ``None``。

    Raises:
        ValueError: the file exists but is not a JSON object, or is a dry or quick run.
    """
    path = Path(folder) / name if folder is not None else records_folder() / name
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"record {path} is not valid JSON: {e}") from None
    if not isinstance(record, dict):
        raise ValueError(f"record {path} should hold a JSON object, but holds {type(record).__name__}")
    problem = _not_a_measurement(record)
    if problem:
        raise ValueError(f"record {path} {problem}")
    return record


def corpus_version(record: dict) -> int:
    """记录里的模型训练在语料的第几版上（``tf_tutorial.corpus.data.CORPUS_VERSION``）。

    Records trained on the toy corpus name the grammar's version; one from before versions were
    named is from version 1.

    Raises:
        ValueError: the record names something other than a whole number ≥ 1.
    """
    version = record.get("corpus_version", 1)
    if type(version) is not int or version < 1:
        raise ValueError("corpus_version: expected a whole number >= 1, "
                         f"but the record holds {version!r}")
    return version


def _finite(value):
    """``value`` with every NaN or infinity as None: strict JSON has no token for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def record_json(record: dict) -> str:
    """一份记录的 JSON 文本：严格的 JSON，NaN 和无穷写成 null（例如一次发散了的训练的损失）。

    Python's ``json`` would write them as ``NaN`` and ``Infinity``, which other JSON readers refuse.
    """
    return json.dumps(_finite(record), ensure_ascii=False, indent=1, allow_nan=False) + "\n"


def save_record(name: str, record: dict, folder=None) -> Path:
    """把一份记录写成 ``folder/name``（默认是 :func:`records_folder`），返回路径。

    Written by :func:`record_json`: strict JSON, NaN and infinities as null.

    Raises:
        TypeError: ``record`` is not a dict.
        ValueError: ``record`` is a dry or quick run (it would not load back).
    """
    if not isinstance(record, dict):
        raise TypeError(f"record {name} must be a dict (a JSON object), "
                        f"but got {type(record).__name__}")
    problem = _not_a_measurement(record)
    if problem:
        raise ValueError(f"refusing to write record {name}: it {problem}")
    out = Path(folder) if folder is not None else records_folder()
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    path.write_text(record_json(record), encoding="utf-8")
    return path


def load_benchmarks(folder=None) -> dict[str, dict]:
    """所有提交的基准测试记录：每个 ``bench-*.json``，以及 ``gpu.json`` 里的 ``benchmarks``。

    Returns ``{file name: result of run_all}``, sorted by name; empty when none was taken.

    Raises:
        ValueError: two records of one device type (``cpu``, ``cuda``): the pages render one
            record per device, and would silently take the first by name.
    """
    out = Path(folder) if folder is not None else records_folder()
    found = {p.name: load_record(p.name, out) for p in sorted(out.glob("bench-*.json"))}
    gpu = load_record("gpu.json", out)
    if gpu is not None and "benchmarks" in gpu:
        found["gpu.json"] = gpu["benchmarks"]
    by_device: dict[str, list[str]] = {}
    for name, record in found.items():
        by_device.setdefault(record["machine"]["device"], []).append(name)
    twice = {device: names for device, names in by_device.items() if len(names) > 1}
    if twice:
        device, names = next(iter(twice.items()))
        raise ValueError(f"{out} holds {len(names)} benchmark records for device "
                         f"{device!r} ({', '.join(names)}): the pages render one per device; "
                         "keep the newest (git rm the others)")
    return found


def benchmark_record(device: str, folder=None) -> dict | None:
    """提交的、在某一种设备上测的那份基准记录（``cpu`` 或 ``cuda``）；没有时为 None。

    The one record of :func:`load_benchmarks` taken on ``device`` (there is at most one).
    """
    return next((r for r in load_benchmarks(folder).values()
                 if r["machine"]["device"] == device), None)


def progress_within(during: list[dict], seconds: float | None = None,
                    target: float = GPU_TARGET) -> dict | None:
    """训练中逐次评分的记录（``test_during_training``）到第 ``seconds`` 秒为止：最好的一次，第一次达到 ``target`` 的一次。

    ``during`` holds ``{step, train_seconds, exact_match, bleu}`` per evaluation, as
    ``scripts.gpu_run`` records it. With ``seconds``, only the evaluations made within that much
    training time count: two runs compared this way are compared at equal time.

    Returns ``{"best": entry, "first_hit": entry or None}``, or None when no evaluation came
    within ``seconds``. The best is the earliest of equal scores.
    """
    if not 0 < target <= 1:
        raise ValueError(f"target={target!r} must be in (0, 1]")
    within = [d for d in during if seconds is None or d["train_seconds"] <= seconds]
    if not within:
        return None
    return {"best": max(within, key=lambda d: d["exact_match"]),   # max keeps the first of ties
            "first_hit": next((d for d in within if d["exact_match"] >= target), None)}


def sync_text(record: dict | None) -> str:
    """第 11 章的半句话：两个训练循环每步等 GPU 几次；记录里有在 GPU 上数出的次数就引用，没有就说没量过。

    ``record``: ``gpu.json`` as :func:`load_record` returns it (None when there is none). Only
    counts taken with PyTorch's sync debug mode are quoted (a dry run counts optimiser steps); counts
    that did not grow by the same amount at each length are called unclear, not divided.
    """
    check = None if record is None else record.get("sync_check")
    if (not check or record.get("dry_run") or "train_continuation" not in check
            or not check.get("counted_by", "").startswith("torch.cuda.set_sync_debug_mode")):
        return "都是按 PyTorch 和 CUDA 的文档推断的，还没有在 GPU 上量过"
    where = f"在 {record['machine']['name']} 上（{check['precision']}）用 PyTorch 的同步调试模式数过"
    if not all(check[loop].get("linear") for loop in ("train", "train_continuation")):
        return (f"是按 PyTorch 和 CUDA 的文档推断的；{where}，但次数没有随步数均匀增长，"
                "每步几次说不清（原始计数在记录的 sync_check 里）")

    def waits(loop: str) -> str:
        n = check[loop]["per_step"]
        return "一次也不等" if n == 0 else f"等 {n:g} 次"

    return (f"是按 PyTorch 和 CUDA 的文档推断的；{where}，第 10 章的训练循环每步"
            f"{waits('train')}，本章的每步{waits('train_continuation')}（不算训练中的验证和进度条；"
            "这个模式数不到从非锁页内存的复制）")
