"""The Colab path, proved on this machine.

A fresh virtual environment stands in for a Colab runtime: it has torch and a Jupyter kernel,
but not ``tf_tutorial`` nor the book's other dependencies. A chapter's first cell must install
the package (here from a copy of this checkout, through ``TF_TUTORIAL_SOURCE``) together with
what it needs, and then the chapter must run top to bottom. Every chapter opens with the same
install cell (``tests/test_book.py`` checks it), so one quick chapter stands for all: chapter 5
runs in seconds, while nbval runs every chapter in this environment anyway.

Colab also lacks ``book/records/``: the pip-installed package does not carry the repository's
committed measurements. The pages that render records must then say so and still run, so
chapter 12 and appendix A (seconds each) run here too, away from the records.
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

CHAPTERS = {   # notebook -> what its outputs must say when it ran in a Colab-like runtime
    "ch05_layernorm": ["与 nn.LayerNorm 一致: True", "gradcheck: True"],
    "ch12_modern_parts": ["尚未测量", "附录 A 的记录里还没有归一化的计时"],
    "appendix_performance": ["没有找到提交的记录", "GPU：尚未测量"],
}
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

    runner = textwrap.dedent(f"""
        import sys, nbformat
        from nbclient import NotebookClient
        for name in sys.argv[1:]:
            nb = nbformat.read(f"{ROOT / 'book'}/{{name}}.ipynb", as_version=4)
            NotebookClient(nb, timeout=900, kernel_name="python3",
                           resources={{"metadata": {{"path": {str(workdir)!r}}}}}).execute()
            nbformat.write(nb, f"{tmp_path}/{{name}}.executed.ipynb")
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(TF_TUTORIAL_SOURCE=str(source), PATH=f"{venv / 'bin'}:{env.get('PATH', '')}",
               MPLBACKEND="module://matplotlib_inline.backend_inline")
    run([python, "-c", runner, *CHAPTERS], workdir, env=env, timeout=1200)
    assert not (workdir / "records").exists()                # nothing to render from

    run([python, "-c", "import tf_tutorial, matplotlib, tqdm"], workdir)  # installed by the first cell
    shown = run([python, "-m", "pip", "show", "tf-tutorial"], workdir).stdout
    assert "Location: " + str(venv) in shown
    for name, expected in CHAPTERS.items():
        cells = nbformat.read(tmp_path / f"{name}.executed.ipynb", as_version=4).cells
        outputs = "".join(o.get("text", "") + o.get("data", {}).get("text/markdown", "")
                          for c in cells if c.cell_type == "code" for o in c.outputs)
        missing = [text for text in expected if text not in outputs]
        assert not missing, f"{name}: its outputs lack {missing}"
