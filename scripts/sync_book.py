"""Keep the book's notebooks in step with their Markdown sources.

The MyST Markdown chapter (``book/*.md``) is the source of truth. This script
  1. writes the repository URL from ``_config.yml`` into every chapter's install cell,
  2. regenerates the paired ``.ipynb`` (for Colab and nbval) from the ``.md``,
  3. executes it, so the committed notebook carries outputs that nbval can compare;
     with ``TF_TUTORIAL_STRICT=1`` and ``TF_TUTORIAL_STRICT_TIMING=1``, so that every claim
     about the page's own training run (``check_run``) or its own timings (``check_timing``)
     must hold in the run that is committed.

Without executing (``--no-execute``), a cell's outputs are kept, except in the cells that only
show the package's source (``show(...)``): those are re-rendered from the package as it is now,
in a kernel that runs nothing else but the chapter's imports. A change to shown code then needs
no full run (chapter 10 cannot be re-executed on a slower host: its stored training time is
part of what the page claims). A new ``show(...)`` cell is rendered the same way, and a cell
that only gained imports keeps its outputs, when the names come from modules it already imported
from and no other code of the chapter reads or binds them (only ``show(...)`` cells may): that
kernel ran the imports. Any other changed cell loses its outputs (the book's tests then ask for
a run).

Usage (from the repository root):
    python -m scripts.sync_book            # all chapters listed in _toc.yml
    python -m scripts.sync_book book/ch01_rnn.md --no-execute   # inputs only, keep outputs
"""
from __future__ import annotations

import argparse
import ast
import copy
import os
import re
import sys
from pathlib import Path
from unittest import mock

import jupytext
import nbformat
import yaml

from tf_tutorial.book.notebook import STRICT, TIMING_STRICT

ROOT = Path(__file__).resolve().parent.parent
INSTALL_MARKER = "TF_TUTORIAL_SOURCE"
_URL_IN_INSTALL = re.compile(r'(os\.environ\.get\("TF_TUTORIAL_SOURCE", ")([^"]*)("\))')


def repo_url() -> str:
    """The one repository setting: ``repository.url`` in ``_config.yml``."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return config["repository"]["url"].rstrip("/")


def install_source(url: str | None = None) -> str:
    """What pip installs in Colab: the package straight from the repository."""
    return f"git+{url or repo_url()}"


def toc_files() -> list[Path]:
    """Every document named in ``_toc.yml`` (root first), as paths without suffix."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    names = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                names.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc.get("parts", []))
    walk(toc.get("chapters", []))
    return [ROOT / name for name in names]


def is_notebook(md: Path) -> bool:
    """A chapter is a notebook when its Markdown carries a jupytext header."""
    head = md.read_text(encoding="utf-8")[:400]
    return head.startswith("---") and "jupytext:" in head


def chapter_notebooks() -> list[Path]:
    """The ``.md`` sources of every notebook chapter in the table of contents."""
    return [p.with_suffix(".md") for p in toc_files()
            if p.with_suffix(".md").exists() and is_notebook(p.with_suffix(".md"))]


def require_install_cell(text: str, md: Path) -> None:
    """ValueError unless the chapter ``md`` (its ``text``) has the install cell."""
    if INSTALL_MARKER not in text:
        raise ValueError(f"{md}: no install cell (expected a first code cell that reads "
                         f"{INSTALL_MARKER}); copy it from book/ch01_rnn.md")


def set_install_url(md: Path, url: str) -> bool:
    """Write ``git+url`` into the install cell of ``md``; return True if the file changed."""
    text = md.read_text(encoding="utf-8")
    require_install_cell(text, md)
    new = _URL_IN_INSTALL.sub(lambda m: m.group(1) + install_source(url) + m.group(3), text)
    if new != text:
        md.write_text(new, encoding="utf-8")
    return new != text


def _only_shows(source: str) -> bool:
    """A cell that is one ``show(...)`` call: its output is the package's source, nothing run."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    return (len(body) == 1 and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Call)
            and isinstance(body[0].value.func, ast.Name) and body[0].value.func.id == "show")


def _imports(cells) -> str:
    """Every top-level import statement of the chapter's code cells, in order."""
    lines = []
    for cell in cells:
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        lines += [ast.get_source_segment(cell.source, node) for node in tree.body
                  if isinstance(node, (ast.Import, ast.ImportFrom))]
    return "\n".join(lines)


def _split_imports(source: str):
    """(the top-level imports, in order, as (module, name, as-name) triples; the rest of the code
    as an AST dump; every name the rest reads or binds); None if the source does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    imported, rest = [], []
    for node in tree.body:
        if isinstance(node, ast.Import):
            imported += [(None, a.name, a.asname) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            imported += [(node.module, a.name, a.asname) for a in node.names]
        else:
            rest.append(node)
    return imported, ast.dump(ast.Module(body=rest, type_ignores=[])), _names(rest)


def _names(nodes) -> set[str]:
    """Every identifier the code reads or binds: variables, functions, classes, arguments,
    imports."""
    out = set()
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                out.add(n.id)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(n.name)
            elif isinstance(n, ast.arg):
                out.add(n.arg)
            elif isinstance(n, ast.alias):
                out.add((n.asname or n.name).split(".")[0])
    return out


def _bound(triple) -> str:
    module, name, asname = triple
    return (asname or name).split(".")[0]


def _cell_names(source: str) -> set[str] | None:
    """:func:`_names` of a whole cell; None if it does not parse."""
    try:
        return _names(ast.parse(source).body)
    except SyntaxError:
        return None


def _only_gained_imports(old: str, new: str, elsewhere: set[str]) -> bool:
    """``new`` is ``old`` with imports added and nothing else: the added names come from modules
    ``old`` already imported from (no new module, so no new import-time side effect), none is
    ``*``, and no code reads or binds them, neither the cell's own nor the chapter's other code
    (``elsewhere``: the names it uses): what any cell computed cannot have changed."""
    a, b = _split_imports(old), _split_imports(new)
    if a is None or b is None or a[1] != b[1]:
        return False
    it = iter(b[0])
    if not all(t in it for t in a[0]):          # the old imports, in order, within the new
        return False
    added = [t for t in b[0] if t not in a[0]]
    modules = {module for module, _, _ in a[0]}
    if not added or any(name == "*" or module not in modules or module is None
                        for module, name, _ in added):
        return False
    return not {_bound(t) for t in added} & (elsewhere | a[2])


def refresh_shown(nb, folder: Path, imports_changed: bool = False) -> int:
    """Re-render the outputs of ``nb``'s ``show(...)`` cells from the package as it is now.

    They run in a fresh kernel after the chapter's imports and nothing else; each keeps its
    execution count (a new cell takes the one that kernel gave it). An import that fails is an
    error here. With ``imports_changed`` (a cell kept its outputs after gaining imports) the
    imports run even without a ``show(...)`` cell. Returns how many cells were re-rendered."""
    from nbclient import NotebookClient

    shown = [c for c in nb.cells if c.cell_type == "code" and _only_shows(c.source)]
    if not shown and not imports_changed:
        return 0
    code = [c for c in nb.cells if c.cell_type == "code"]
    # a copy: the kernel writes its language_info there, and the page keeps its own run's
    run = nbformat.v4.new_notebook(metadata=copy.deepcopy(nb.metadata), cells=[
        nbformat.v4.new_code_cell(_imports(code)),
        *[nbformat.v4.new_code_cell(c.source) for c in shown]])
    NotebookClient(run, timeout=600, kernel_name="python3", record_timing=False,
                   allow_errors=True,     # reported below, with the cell's source
                   resources={"metadata": {"path": str(folder)}}).execute()
    failed = [o for o in run.cells[0].outputs if o.output_type == "error"]
    if failed:
        raise RuntimeError(f"the chapter's imports failed: {failed[0].ename}: {failed[0].evalue}")
    for cell, fresh in zip(shown, run.cells[1:]):
        errors = [o for o in fresh.outputs if o.output_type == "error"]
        if errors:
            raise RuntimeError(f"{cell.source!r} failed after the chapter's imports: "
                               f"{errors[0].ename}: {errors[0].evalue}")
        if cell.execution_count is None:      # a new cell: the count of the kernel that ran it
            cell.execution_count = fresh.execution_count
        for out in fresh.outputs:
            if "execution_count" in out:
                out.execution_count = cell.execution_count
        cell.outputs = fresh.outputs
    return len(shown)


def build_notebook(md: Path, execute: bool = True) -> Path:
    """Regenerate ``md``'s paired ``.ipynb``; execute it (outputs) or keep the old outputs
    (but re-render the ``show(...)`` cells, see :func:`refresh_shown`)."""
    nb = jupytext.read(md)
    ipynb = md.with_suffix(".ipynb")
    if execute:
        from nbclient import NotebookClient

        # the committed page's own run must bear out every claim about it
        # (tf_tutorial.book.notebook.check_run, check_timing): strict here,
        # lenient for readers (and for the tests' timings)
        with mock.patch.dict(os.environ, {STRICT: "1", TIMING_STRICT: "1"}):  # the kernel inherits it
            NotebookClient(nb, timeout=1800, kernel_name="python3", record_timing=False,
                           resources={"metadata": {"path": str(md.parent)}}).execute()
    elif ipynb.exists():
        old = nbformat.read(ipynb, as_version=4)
        if "language_info" in old.metadata:   # the kernel wrote it when it ran
            nb.metadata["language_info"] = old.metadata["language_info"]
        old_code = [c for c in old.cells if c.cell_type == "code"]
        by_source = {c.source: c for c in old_code}
        code = [c for c in nb.cells if c.cell_type == "code"]
        # the names each cell uses (show cells are re-rendered: theirs do not count)
        used = {id(c): _cell_names(c.source) for c in code if not _only_shows(c.source)}
        imports_changed = False
        for cell in code:
            same = by_source.get(cell.source)
            others = [n for key, n in used.items() if key != id(cell)]
            if same is None and None not in others:   # one that only gained imports?
                elsewhere = set().union(*others)
                gained = [c for c in old_code
                          if _only_gained_imports(c.source, cell.source, elsewhere)]
                same = gained[0] if len(gained) == 1 else None
                imports_changed |= same is not None     # refresh_shown runs them
            if same is not None:
                cell.outputs = same.outputs
                cell.execution_count = same.execution_count
        refresh_shown(nb, md.parent, imports_changed)   # the shown source as it is now
    for i, cell in enumerate(nb.cells):  # stable ids: no churn in git when nothing changed
        cell["id"] = f"cell-{i:02d}"
    nbformat.write(nb, ipynb, version=4)
    return ipynb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.sync_book",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=Path, help="book/*.md (default: all in _toc.yml)")
    parser.add_argument("--no-execute", action="store_true",
                        help="keep existing outputs (show(...) cells are re-rendered)")
    args = parser.parse_args(argv)
    known = {p.resolve() for p in chapter_notebooks()}
    for md in args.chapters:             # all checked before any is rewritten
        if md.resolve() not in known:
            parser.error(f"{md}: expected a notebook chapter listed in _toc.yml "
                         "(book/*.md with a jupytext header)"
                         + ("" if md.exists() else "; no such file"))
    targets = [p.resolve() for p in args.chapters] or chapter_notebooks()
    for md in targets:                   # each has its install cell
        try:
            require_install_cell(md.read_text(encoding="utf-8"), md)
        except ValueError as e:
            parser.error(str(e))
    url = repo_url()
    for md in targets:
        set_install_url(md, url)
        out = build_notebook(md, execute=not args.no_execute)
        print(f"{md.relative_to(ROOT)} -> {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
