"""The Colab path, proved on this machine.

A fresh virtual environment stands in for a Colab runtime: it has torch and a Jupyter kernel,
but not ``tf_tutorial`` nor the book's other dependencies. Colab's torch comes preinstalled, so
the runtime's torch and kernel (with everything they require) are this environment's, linked
in read-only through a ``.pth`` file instead of being installed again (a 190 MB wheel that
unpacks to 750 MB: about half a minute here). A chapter's first cell must install
the package (here from a copy of this checkout, through ``TF_TUTORIAL_SOURCE``) together with
what it needs, and then the chapter must run top to bottom. Every chapter opens with the same
install cell (``tests/test_book.py`` checks it), so two quick chapters stand for all, while
nbval runs every chapter in this environment anyway.

The two are the pages that render records. Colab lacks ``book/records/``: the pip-installed
package does not carry the repository's committed measurements, so chapter 12 and appendix A
(seconds each) must say so and still run. Chapter 12 also checks its new parts live
(RMSNorm's values and gradients, grouped-query attention against PyTorch's).
"""
import os
import re
import shutil
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import nbformat
import pytest
from packaging.requirements import Requirement

from conftest import ROOT

CHAPTERS = {   # notebook -> what its outputs must say when it ran in a Colab-like runtime
    "ch12_modern_parts": ["尚未测量", "附录 A 的记录里还没有归一化的计时", "值和梯度的最大差",
                          "与 PyTorch 的最大差"],
    "appendix_performance": ["没有找到提交的记录", "GPU：没有找到记录"],
}
PREINSTALLED = ("torch", "ipykernel", "nbclient", "nbformat")   # what a Colab runtime has


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


def requirement_closure(names) -> list:
    """The installed distributions ``names`` need, directly or not (no extras)."""
    todo, found = list(names), {}
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name not in found:
            found[name] = dist = metadata.distribution(name)
            todo += [r.name for r in map(Requirement, dist.requires or [])
                     if r.marker is None or r.marker.evaluate({"extra": ""})]
    return list(found.values())


def link_preinstalled(folder: Path, venv: Path) -> list:
    """Link PREINSTALLED and what they require into ``folder``; the venv reads it (a .pth file)."""
    folder.mkdir()
    dists = requirement_closure(PREINSTALLED)
    tops = {Path(d.locate_file(f.parts[0])) for d in dists for f in d.files or []
            if f.parts[0] not in ("..", "__pycache__") and not f.name.endswith(".pth")}
    for source in sorted(tops):
        if source.exists():
            (folder / source.name).symlink_to(source)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "preinstalled.pth").write_text(f"{folder}\n")
    return [d.metadata["Name"] for d in dists]


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
    preinstalled = link_preinstalled(tmp_path / "preinstalled", venv)  # what Colab already has
    assert "torch" in preinstalled and "matplotlib" not in preinstalled
    run([python, "-c", "import torch, ipykernel, nbclient"], workdir)
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
