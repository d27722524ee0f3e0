import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # so tests can import scripts.sync_book

from tf_tutorial.book.notebook import STRICT  # noqa: E402

# Claims about a chapter's own training run (check_run) are strict under the tests, as when
# scripts.sync_book stores a page: nbval trains with 1 thread, another model than the stored
# 2-thread run, and a claim that holds for only one of them fails here. A reader (Colab,
# Jupyter) gets a printed note instead. The notebook kernels inherit the variable.
os.environ.setdefault(STRICT, "1")

# The README's test command runs two workers (pytest-xdist, --dist loadfile: one file is one
# unit of work). The units are handed out in collection order, the longest first: chapter 10's
# notebook alone takes 6 to 8 minutes on one thread, so the worker that takes it must start it
# at once, while the other works through everything else. xdist's own order (most tests first)
# started it a minute or two late, and the whole run waited for it.
LONGEST_FIRST = ("book/ch10_translation.ipynb", "book/ch11_decoder_only.ipynb",
                 "book/ch12_modern_parts.ipynb")
# The browser test reads the book that test_book.py builds (built_book: one build per run,
# under a lock). Handed out last, it finds the build done instead of waiting for it.
LAST = ("tests/test_browser.py",)


def _distributed(config) -> bool:
    """The controller of a pytest-xdist run (-n N) or one of its workers (whose collection
    order is what the controller hands out; xdist sets a worker's own ``dist`` to "no")."""
    return hasattr(config, "workerinput") or getattr(config.option, "dist", "no") != "no"


def pytest_configure(config):
    if _distributed(config):    # hand the files out in collection order (see above)
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(session, config, items):
    if not _distributed(config):    # one process: the quick unit tests report first
        return
    middle = len(LONGEST_FIRST)                 # every other file's rank
    rank = {ROOT / name: i for i, name in enumerate(LONGEST_FIRST)}
    rank.update({ROOT / name: middle + 1 for name in LAST})
    assert all(path.exists() for path in rank), \
        f"LONGEST_FIRST or LAST names a missing file: {LONGEST_FIRST + LAST}"
    # stable: every file's own order (a notebook's cells) is kept
    items.sort(key=lambda item: rank.get(Path(item.path).resolve(), middle))


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
    """The whole book built once per run, shared by xdist workers: (process, html folder).

    ``TF_BOOK_BUILT=DIR`` reuses a book already built with ``--path-output DIR`` (its log, if
    any, read from ``DIR/build.log``) instead of building it again: for checking the slow
    tests against a build you just made. CI never sets it.
    """
    prebuilt = os.environ.get("TF_BOOK_BUILT")
    if prebuilt:
        out = Path(prebuilt)
        log = out / "build.log"
        stdout = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        return subprocess.CompletedProcess(["prebuilt", str(out)], 0, stdout, ""), out / "_build" / "html"
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        out = tmp_path_factory.mktemp("book")
        return build_book(ROOT, out), out / "_build" / "html"
    # under pytest-xdist the workers share one build (about half a minute of
    # CPU each otherwise): the first to ask builds it, under a lock, into the
    # run's own temporary folder, and a later worker reads it there
    from filelock import FileLock       # installed with torch

    out = tmp_path_factory.getbasetemp().parent / "book"   # this run's
    with FileLock(str(out) + ".lock"):
        saved = out / "build-result.json"
        if not saved.exists():
            out.mkdir(exist_ok=True)
            result = build_book(ROOT, out)
            saved.write_text(json.dumps(
                {"args": result.args, "returncode": result.returncode,
                 "stdout": result.stdout, "stderr": result.stderr}),
                encoding="utf-8")
        done = json.loads(saved.read_text(encoding="utf-8"))
    return (subprocess.CompletedProcess(done["args"], done["returncode"],
                                        done["stdout"], done["stderr"]),
            out / "_build" / "html")


# --- the prose of a MyST page (for the vocabulary and search checks) -----------------------

# fenced blocks whose content is prose (admonitions, dropdowns, figures' captions ...)
_CODE_FENCES = {"code-cell", "code-block", "code", "sourcecode", "math", "literalinclude",
                "bibliography", "glue:figure", "raw", "mermaid", "csv-table"}
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*(\{([^}]*)\})?\s*(\S*)")
_INLINE_CODE = re.compile(r"(\{[^}]+\})?(`+)(.+?)\2")
_INLINE_MATH = re.compile(r"(?<!\\)\$[^$\n]+?\$")
_LINK_TARGET = re.compile(r"\]\([^)]*\)")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """``(line number, text)`` for the prose of a MyST Markdown page.

    Left out: the YAML front matter, code cells and other code or math blocks, ``$$`` blocks,
    inline code and roles (`` `x` ``, ``{cite:p}`key` ``), inline math and link targets.
    Admonitions and other directives whose body is prose are kept.
    """
    lines = text.splitlines()
    out, skip_until, open_fences, in_math = [], None, [], False
    start = 0
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), 0)
        start = end + 1
    for n in range(start, len(lines)):
        line = lines[n]
        m = _FENCE.match(line)
        if skip_until is not None:
            if m and m.group(1)[0] == skip_until[0] and len(m.group(1)) >= len(skip_until) \
                    and not m.group(2) and not m.group(4):
                skip_until = None
            continue
        stripped = line.strip()
        if in_math:                          # inside a $$ ... $$ block
            in_math = "$$" not in stripped
            continue
        if stripped.startswith("$$"):        # "$$", "$$\\begin{aligned}" or "$$ x $$ (label)"
            in_math = stripped.count("$$") == 1
            continue
        if m:
            fence, directive, lang = m.group(1), m.group(3), m.group(4)
            if directive is None and not lang and open_fences and open_fences[-1][0] == fence[0] \
                    and len(fence) >= len(open_fences[-1]):
                open_fences.pop()            # the end of a prose directive
                continue
            if directive is None or directive.strip() in _CODE_FENCES:
                skip_until = fence           # code (```python, ```{code-cell} ...) or math
                continue
            open_fences.append(fence)        # ```{note}: its body is prose
            continue
        if line.lstrip().startswith(":") and re.match(r"^\s*:[\w-]+:", line):
            continue                         # a directive option such as :tags: [...]
        clean = _INLINE_CODE.sub(" ", line)
        clean = _INLINE_MATH.sub(" ", clean)
        clean = _LINK_TARGET.sub("]", clean)
        out.append((n + 1, clean))
    return out


def chapter_cells(chapter: str, markers: dict[str, str]) -> dict[str, str]:
    """``{name: source}`` of the one code cell of ``book/<chapter>.md`` that holds each marker.

    For tests that run a branch of a chapter's own cell which nbval, on the committed records,
    does not reach. A marker found in no cell, or in several, fails the test.
    """
    import jupytext

    cells = [c.source for c in jupytext.read(ROOT / "book" / f"{chapter}.md").cells
             if c.cell_type == "code"]
    found = {}
    for name, marker in markers.items():
        hits = [src for src in cells if marker in src]
        assert len(hits) == 1, f"{chapter}: {len(hits)} code cells contain {marker!r}, expected 1"
        found[name] = hits[0]
    return found


def chapter_cell_runner(chapter: str, imports: str, cell: str):
    """A function that runs one code cell of a chapter after its imports cell, with names replaced.

    ``run(**names)`` puts ``names`` (e.g. a record in place of ``load_record``) into the cell's
    namespace, catches what the cell shows and glues, and returns ``(shown, glued)``: the
    Markdown texts it displayed and ``{name: value}``. ``imports`` and ``cell`` are markers, as
    for :func:`chapter_cells`.
    """
    cells = chapter_cells(chapter, {"imports": imports, "cell": cell})
    ns: dict = {}
    exec(cells["imports"], ns)

    def run(**names):
        shown, glued = [], {}
        ns.update(display=lambda md: shown.append(md.data),
                  glue=lambda name, value: glued.__setitem__(name, value), **names)
        exec(cells["cell"], ns)
        return shown, glued
    return run


def committed_record(name: str) -> dict:
    """A record as committed in ``book/records/`` (tests copy it before changing it)."""
    return json.loads((ROOT / "book" / "records" / name).read_text(encoding="utf-8"))
