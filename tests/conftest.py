import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # so tests can import scripts.sync_book


def jupyter_book_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("jupyter-book")
    return [str(exe)] if exe.exists() else [shutil.which("jupyter-book") or "jupyter-book"]


def build_book(source: Path, out: Path) -> subprocess.CompletedProcess:
    """``jupyter-book build`` with warnings as errors, output under ``out``."""
    env = dict(os.environ, PYTHONWARNINGS="ignore::DeprecationWarning")
    return subprocess.run(jupyter_book_cmd() + ["build", str(source), "--path-output", str(out),
                                                "-nW", "--keep-going"],
                          capture_output=True, text=True, env=env, timeout=1800)


@pytest.fixture(scope="session")
def built_book(tmp_path_factory):
    """The whole book built once per test session: (completed process, html folder)."""
    out = tmp_path_factory.mktemp("book")
    result = build_book(ROOT, out)
    return result, out / "_build" / "html"
