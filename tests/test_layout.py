"""The package's layout: its top level is the book's table of contents, and CONTRIBUTING.md maps
every module to its chapter and tests."""
import pkgutil
import re

import tf_tutorial
from conftest import ROOT

CHAPTER_MODULES = {"rnn", "embedding", "attention", "multihead", "norm", "residual", "ffn",
                   "encoder", "decoder", "model", "train", "decode", "metrics", "translate", "interop",
                   "gpt", "rope", "flash"}
SUBPACKAGES = {"experiments", "corpus", "timing", "book"}


def _all_modules() -> set[str]:
    return {m.name.removeprefix("tf_tutorial.")
            for m in pkgutil.walk_packages(tf_tutorial.__path__, "tf_tutorial.") if not m.ispkg}


def test_top_level_holds_only_chapter_modules_and_named_subpackages():
    top = {m.name for m in pkgutil.iter_modules(tf_tutorial.__path__)}
    private = {name for name in top if name.startswith("_")}   # helpers, not chapters
    stray = sorted(top - CHAPTER_MODULES - SUBPACKAGES - private)
    assert not stray, (f"tf_tutorial/ top level should read as the table of contents; {stray} belong in a "
                       f"subpackage ({sorted(SUBPACKAGES)}) or in CHAPTER_MODULES if a chapter teaches them")
    assert SUBPACKAGES <= top


def test_contributing_maps_every_module_to_a_chapter_and_existing_tests():
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    mapped = {name for row in rows for name in re.findall(r"`([a-z_.]+)`", row.split("|")[1])}
    missing = sorted(_all_modules() - mapped)
    assert not missing, f"CONTRIBUTING.md's module map lacks {missing}"
    gone = sorted(mapped - _all_modules())
    assert not gone, f"CONTRIBUTING.md maps modules that no longer exist: {gone}"
    for row in rows:
        for test in re.findall(r"`(tests/[\w./]+)`", row):
            assert (ROOT / test).exists(), f"CONTRIBUTING.md names {test}, which does not exist"


def test_every_top_level_module_is_reachable_from_the_package_itself():
    """import tf_tutorial; tf_tutorial.attention... works, loading each module on first use."""
    import subprocess
    import sys
    top = sorted(m.name for m in pkgutil.iter_modules(tf_tutorial.__path__) if not m.name.startswith("_"))
    code = ("import sys, tf_tutorial; assert 'tf_tutorial.attention' not in sys.modules; "
            "m = tf_tutorial.attention.causal_mask(3); print(m.shape, tf_tutorial.gpt.GPTConfig.__name__); "
            f"print(all(getattr(tf_tutorial, n).__name__ == 'tf_tutorial.' + n for n in {top!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["torch.Size([3, 3]) GPTConfig", "True"]
    try:
        tf_tutorial.not_a_chapter
    except AttributeError as error:
        assert str(error) == "module 'tf_tutorial' has no attribute 'not_a_chapter'"
    else:
        raise AssertionError("a missing name must raise AttributeError")


def test_a_python_without_torch_is_told_to_use_the_venv():
    # the system Python gave a bare "No module named 'torch'" from deep in an import
    import subprocess
    import sys
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); import tf_tutorial"
    r = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == (
        "ModuleNotFoundError: tf_tutorial needs PyTorch, which this Python does not have: use the environment "
        "the README creates (.venv/bin/python, or run 'source .venv/bin/activate' first)")
