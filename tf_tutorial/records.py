"""书里的测量记录：读取 ``book/records/`` 下提交的 JSON（GPU 运行、配置校准），供章节成表成图。

Figures that depend on hardware come from committed records, never from a timing taken while
the book builds (DESIGN.md, "Records"). A chapter runs in ``book/``, so its records are in
``records/``; scripts and tests run from the repository root, where they are in ``book/records/``.
"""
from __future__ import annotations

import json
from pathlib import Path


def records_folder() -> Path:
    """``records/`` when run from ``book/`` (the chapters), else ``book/records/`` (the repository root)."""
    for folder in (Path("records"), Path("book") / "records"):
        if folder.is_dir():
            return folder
    return Path("records")


def load_record(name: str, folder=None) -> dict | None:
    """The record ``name`` (e.g. ``"gpu.json"``) as a dict, or ``None`` when it has not been taken yet.

    Raises:
        ValueError: the file exists but is not a JSON object, or is a dry run (not a measurement).
    """
    path = Path(folder) / name if folder is not None else records_folder() / name
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"record {path} is not valid JSON: {e}") from None
    if not isinstance(record, dict):
        raise ValueError(f"record {path} should hold a JSON object, but holds {type(record).__name__}")
    if record.get("dry_run"):
        raise ValueError(f"record {path} comes from a dry run (scripts.gpu_run --dry-run): it is not a measurement")
    return record
