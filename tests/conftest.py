import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
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


# --- background jobs ---------------------------------------------------------------------------
# Two slow checks spend their time in subprocesses: building the whole book (Sphinx) and running
# chapters in a fresh Colab-like environment (pip, a kernel). When a selected test needs one, it
# starts right after collection, in a thread, while the other unit tests run; the tests that wait
# for it are moved to the end of tests/, just before the notebooks (``book/``, whose order is
# kept). Each job runs once; a job that raises fails every test that waits for it, with its
# traceback. Nothing is timed: a busy machine only makes the wait longer.

_JOB_FACTORIES = {}      # name -> function(folder) -> result
_JOBS = {}               # name -> concurrent.futures.Future
_JOB_FOLDERS = []


def background_job(name: str):
    """Register ``fn(folder)`` as the background job ``name`` (``folder``: a fresh temporary one)."""
    def register(fn):
        _JOB_FACTORIES[name] = fn
        return fn
    return register


def _start(name: str) -> concurrent.futures.Future:
    if name not in _JOBS:
        future = _JOBS[name] = concurrent.futures.Future()
        folder = Path(tempfile.mkdtemp(prefix=f"tf-tutorial-{name}-"))
        _JOB_FOLDERS.append(folder)

        def work():
            try:
                future.set_result(_JOB_FACTORIES[name](folder))
            except BaseException as err:   # handed to the tests that wait for it
                future.set_exception(err)
        threading.Thread(target=work, name=f"background-{name}", daemon=True).start()
    return _JOBS[name]


def background_result(name: str):
    """The result of job ``name``: started after collection if a selected test needed it, else now."""
    return _start(name).result()


def _jobs_of(item) -> set:
    """The background jobs a collected test waits for."""
    jobs = {m.args[0] for m in item.iter_markers("background")}
    if "built_book" in getattr(item, "fixturenames", ()) and not os.environ.get("TF_BOOK_BUILT"):
        jobs.add("book")
    return jobs


def pytest_collection_modifyitems(config, items):
    def place(item):      # tests/ first, those that wait for a job after them, then book/
        notebook = item.nodeid.startswith("book/")
        return 2 if notebook else 1 if _jobs_of(item) else 0
    items.sort(key=place)  # stable: each group keeps its order, a notebook's cells too


def pytest_collection_finish(session):
    if session.config.option.collectonly:
        return
    for name in sorted(set().union(*map(_jobs_of, session.items))):
        _start(name)


def pytest_sessionfinish(session, exitstatus):
    # a session cut short (-x, a selection) still lets its jobs end: no build or pip left behind
    concurrent.futures.wait(list(_JOBS.values()))
    for folder in _JOB_FOLDERS:
        shutil.rmtree(folder, ignore_errors=True)


@background_job("book")
def _build_whole_book(folder: Path):
    return build_book(ROOT, folder), folder / "_build" / "html"


@pytest.fixture(scope="session")
def built_book():
    """The whole book built once per test session: (completed process, html folder).

    The build is a background job (above). ``TF_BOOK_BUILT=DIR`` reuses a book already built
    with ``--path-output DIR`` (its log, if any, read from ``DIR/build.log``) instead of building
    it again: for checking the slow tests against a build you just made. CI never sets it.
    """
    prebuilt = os.environ.get("TF_BOOK_BUILT")
    if prebuilt:
        out = Path(prebuilt)
        log = out / "build.log"
        stdout = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        return subprocess.CompletedProcess(["prebuilt", str(out)], 0, stdout, ""), out / "_build" / "html"
    return background_result("book")


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
