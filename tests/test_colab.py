"""The Colab path, proved on this machine.

A fresh virtual environment stands in for a Colab runtime: it has torch and a Jupyter kernel,
but not ``tf_tutorial`` nor the book's other dependencies. A chapter's first cell must install
the package (here from a copy of this checkout, through ``TF_TUTORIAL_SOURCE``) together with
what it needs, and then the chapter must run top to bottom. Every chapter opens with the same
install cell (``tests/test_book.py`` checks it), so one quick chapter stands for all: chapter 5
runs in seconds, while nbval runs every chapter in this environment anyway.
"""
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT

CHAPTER = ROOT / "book" / "ch05_layernorm.ipynb"
TORCH = next(line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
             if line.startswith("torch=="))


def run(cmd, cwd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, **kwargs)
    assert result.returncode == 0, f"{cmd} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def registry_reachable(tmp_path) -> bool:
    """Colab installs from the package registry; so does this test. Can pip reach it?"""
    probe = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                            "--disable-pip-version-check", "-d", str(tmp_path), "six"],
                           capture_output=True, text=True, timeout=120)
    return probe.returncode == 0


@pytest.mark.slow
def test_chapter_installs_what_it_needs_and_runs_in_a_fresh_environment(tmp_path):
    if not registry_reachable(tmp_path / "probe"):
        reason = "the package registry is not reachable, and the Colab path installs from it"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    workdir = tmp_path / "content"  # Colab runs notebooks from /content, away from the repo
    workdir.mkdir()
    venv = tmp_path / "colab"
    run([sys.executable, "-m", "venv", str(venv)], workdir)
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    run(pip + [TORCH, "ipykernel", "nbclient", "nbformat"], workdir, timeout=900)  # what Colab already has
    missing = "import importlib.util, sys; sys.exit(importlib.util.find_spec('{}') is not None)"
    for module in ("tf_tutorial", "matplotlib", "tqdm"):
        run([python, "-c", missing.format(module)], workdir)  # really absent before the chapter runs

    # What a git clone of the repository holds for pip: the package and its metadata.
    source = tmp_path / "checkout"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "tf_tutorial", source / "tf_tutorial",
                    ignore=shutil.ignore_patterns("__pycache__"))

    executed = tmp_path / "executed.ipynb"
    runner = textwrap.dedent(f"""
        import nbformat
        from nbclient import NotebookClient
        nb = nbformat.read({str(CHAPTER)!r}, as_version=4)
        NotebookClient(nb, timeout=900, kernel_name="python3",
                       resources={{"metadata": {{"path": {str(workdir)!r}}}}}).execute()
        nbformat.write(nb, {str(executed)!r})
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(TF_TUTORIAL_SOURCE=str(source), PATH=f"{venv / 'bin'}:{env.get('PATH', '')}",
               MPLBACKEND="module://matplotlib_inline.backend_inline")
    run([python, "-c", runner], workdir, env=env, timeout=1200)

    run([python, "-c", "import tf_tutorial, matplotlib, tqdm"], workdir)  # installed by the first cell
    shown = run([python, "-m", "pip", "show", "tf-tutorial"], workdir).stdout
    assert "Location: " + str(venv) in shown
    outputs = "".join(o.get("text", "") for c in nbformat.read(executed, as_version=4).cells
                      if c.cell_type == "code" for o in c.outputs)
    assert "与 nn.LayerNorm 一致: True" in outputs
    assert "gradcheck: True" in outputs
