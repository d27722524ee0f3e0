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
