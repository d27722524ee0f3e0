"""The book as a whole: table of contents, notebook pairs, install cells, the build itself."""
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import jupytext
import nbformat
import pytest
from jupytext.compare import compare_notebooks

from conftest import ROOT, build_book
from scripts import sync_book

CHAPTERS = sync_book.chapter_notebooks()
HEADER = textwrap.dedent("""\
    ---
    jupytext:
      text_representation:
        extension: .md
        format_name: myst
    kernelspec:
      display_name: Python 3
      language: python
      name: python3
    ---
    """)


def test_toc_and_book_folder_agree():
    listed = {p.with_suffix(".md") for p in sync_book.toc_files()}
    missing = sorted(str(p.relative_to(ROOT)) for p in listed if not p.exists())
    assert not missing, f"_toc.yml lists files that do not exist: {missing}"
    on_disk = set((ROOT / "book").glob("*.md"))
    unlisted = sorted(str(p.relative_to(ROOT)) for p in on_disk - listed)
    assert not unlisted, f"book/ has chapters that _toc.yml does not list: {unlisted}"
    assert len(CHAPTERS) >= 1


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.name)
def test_markdown_and_notebook_are_in_sync(md):
    ipynb = md.with_suffix(".ipynb")
    assert ipynb.exists(), f"{ipynb.name} is missing: run python -m scripts.sync_book {md.relative_to(ROOT)}"
    try:
        compare_notebooks(nbformat.read(ipynb, as_version=4), jupytext.read(md), fmt="md:myst")
    except Exception as err:  # NotebookDifference, with the cells that differ
        pytest.fail(f"{ipynb.name} differs from {md.name} ({err}); the .md is the source: "
                    f"run python -m scripts.sync_book {md.relative_to(ROOT)}")


def _config():
    import yaml
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def _stored_output_chapters():
    """Chapters the build renders from their committed outputs instead of running them again."""
    import fnmatch
    patterns = _config()["execute"].get("exclude_patterns", [])
    return [md for md in CHAPTERS if any(fnmatch.fnmatch(md.with_suffix(".ipynb").name, p) for p in patterns)]


def test_each_chapter_is_built_from_exactly_one_of_its_two_files():
    import fnmatch
    excluded = _config()["exclude_patterns"]
    stored = _stored_output_chapters()
    assert stored, "chapter 10 should be rendered from its stored outputs"
    for md in CHAPTERS:
        rel_md, rel_nb = (str(p.relative_to(ROOT)) for p in (md, md.with_suffix(".ipynb")))
        md_in = not any(fnmatch.fnmatch(rel_md, p) for p in excluded)
        nb_in = not any(fnmatch.fnmatch(rel_nb, p) for p in excluded)
        assert md_in != nb_in, f"{md.name}: exactly one of .md/.ipynb must be built (md {md_in}, ipynb {nb_in})"
        assert nb_in == (md in stored), f"{md.name}: built from the .ipynb only if the build does not execute it"


@pytest.mark.parametrize("md", _stored_output_chapters(), ids=lambda p: p.name)
def test_a_chapter_shown_from_stored_outputs_was_fully_executed_cleanly(md):
    nb = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        tags = cell.metadata.get("tags", [])
        if "remove-cell" in tags:
            continue
        assert cell.execution_count is not None, f"code cell {i} was not executed: run python -m scripts.sync_book"
        for out in cell.outputs:
            assert out.output_type != "error", f"code cell {i} stored an error"
            if out.output_type == "stream" and out.name == "stderr":
                assert "remove-stderr" in tags, f"code cell {i} stored stderr: {out.text[:200]!r}"
                assert "Glyph" not in out.text and "Traceback" not in out.text


def _code_cells_in(text: str) -> int:
    return sum(c.cell_type == "code" for c in jupytext.reads(text, fmt="md:myst").cells)


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.name)
def test_every_code_cell_in_the_source_is_a_code_cell(md):
    """A stray ``` fence turns the cells after it into literal text that never runs."""
    text = md.read_text(encoding="utf-8")
    assert _code_cells_in(text) == text.count("```{code-cell}"), f"{md.name}: a code cell is swallowed by a stray fence"


def test_a_stray_fence_is_caught():
    text = HEADER + "```{code-cell} ipython3\nx = 1\n```\n\nprose\n```\n\n```{code-cell} ipython3\ny = 2\n```\n"
    assert _code_cells_in(text) != text.count("```{code-cell}")


def test_cell_timeouts_catch_hangs_not_a_busy_machine():
    """A chapter-1 cell that takes seconds once timed out at 300 s with three heavy jobs on 2 cores."""
    import re
    assert _config()["execute"]["timeout"] >= 1200
    sync = (ROOT / "scripts" / "sync_book.py").read_text(encoding="utf-8")
    assert int(re.search(r"NotebookClient\(nb, timeout=(\d+)", sync).group(1)) >= 1200


def test_sync_check_catches_a_drifted_pair(tmp_path):
    md = CHAPTERS[0]
    drifted = jupytext.read(md)
    drifted.cells[3].source += "\nprint('edited only in the notebook')"
    with pytest.raises(Exception, match="differ"):
        compare_notebooks(drifted, jupytext.read(md), fmt="md:myst")


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.name)
def test_first_cell_installs_the_package_from_the_one_repository_setting(md):
    nb = jupytext.read(md)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert "remove-cell" in first.metadata.get("tags", []), "the HTML reader must not see it"
    assert 'find_spec("tf_tutorial") is None' in first.source
    assert f'os.environ.get("TF_TUTORIAL_SOURCE", "{sync_book.install_source()}")' in first.source, \
        "install URL differs from _config.yml repository.url: run python -m scripts.sync_book"


def test_install_url_is_rewritten_from_the_config(tmp_path):
    md = tmp_path / "chapter.md"
    shutil.copy(CHAPTERS[0], md)
    assert sync_book.set_install_url(md, "https://github.com/someone/fork")
    assert '"git+https://github.com/someone/fork")' in md.read_text(encoding="utf-8")
    (tmp_path / "plain.md").write_text("# no install cell\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no install cell"):
        sync_book.set_install_url(tmp_path / "plain.md", "https://x")


# --- the build ---------------------------------------------------------------------------

@pytest.mark.slow
def test_book_builds_without_warnings(built_book):
    result, html = built_book
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-5000:]
    warnings = re.findall(r"^.*\bWARNING: .*$", log, flags=re.M)  # Sphinx's form, not the kernel's
    assert not warnings, warnings
    for doc in sync_book.toc_files():
        assert (html / doc.relative_to(ROOT)).with_suffix(".html").exists()


@pytest.mark.slow
def test_math_is_served_offline(built_book):
    _, html = built_book
    assert (html / "_static" / "mathjax" / "tex-chtml.js").exists()
    page = (html / "book" / "ch01_rnn.html").read_text(encoding="utf-8")
    assert "_static/mathjax/tex-chtml.js" in page
    assert "cdn.jsdelivr" not in page and "cdnjs" not in page


@pytest.mark.slow
@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.name)
def test_colab_button_opens_the_committed_notebook(built_book, md):
    _, html = built_book
    rel = md.relative_to(ROOT).with_suffix("")
    page = (html / rel).with_suffix(".html").read_text(encoding="utf-8")
    org_repo = sync_book.repo_url().removeprefix("https://github.com/")
    expected = f"https://colab.research.google.com/github/{org_repo}/blob/main/{rel}.ipynb"
    assert expected in page
    assert "{glue:" not in page, "a glued number was not rendered"


def _tiny_book(root: Path, cells: list[str]) -> Path:
    (root / "book").mkdir(parents=True)
    shutil.copy(ROOT / "_config.yml", root / "_config.yml")
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/bad\n", encoding="utf-8")
    body = "".join(f"\n```{{code-cell}} ipython3\n{c}\n```\n" for c in cells)
    (root / "book" / "bad.md").write_text(HEADER + "\n# 坏章节\n" + body, encoding="utf-8")
    return root


@pytest.mark.slow
def test_a_failing_cell_fails_the_build_and_names_the_cell(tmp_path):
    src = _tiny_book(tmp_path / "src", ["x = 2", "answer = x / 0"])
    result = build_book(src, tmp_path / "out")
    log = result.stdout + result.stderr
    assert result.returncode != 0
    assert "answer = x / 0" in log and "ZeroDivisionError" in log and "bad.md" in log


@pytest.mark.slow
def test_stray_stderr_fails_the_build(tmp_path):
    src = _tiny_book(tmp_path / "src", ["import sys\nprint('Glyph 25105 missing', file=sys.stderr)"])
    result = build_book(src, tmp_path / "out")
    assert result.returncode != 0
    assert re.search(r"bad\.md:\d+: WARNING: stderr was found in the cell outputs of cell 2",
                     result.stdout + result.stderr)


@pytest.mark.slow
def test_nbval_fails_on_a_broken_chapter_and_names_the_cell(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"),
                                         nbformat.v4.new_code_cell("y = x / 0  # broken")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "broken.ipynb")
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--nbval-lax",
                             "--nbval-current-env", str(tmp_path / "broken.ipynb"), "-o", "addopts="],
                            capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "broken.ipynb::Cell 1" in result.stdout and "y = x / 0  # broken" in result.stdout


def test_glossary_terms_appear_in_the_chapter_they_link_to():
    rows = re.findall(r"^\| ([^|]+?) \| ([^|]+?) \| \[[^]]+\]\(([^)]+)\) \|$",
                      (ROOT / "book" / "appendix_glossary.md").read_text(encoding="utf-8"), flags=re.M)
    assert len(rows) >= 30
    for zh, en, target in rows:
        text = (ROOT / "book" / target).read_text(encoding="utf-8")
        for term in re.split(r"、", zh):
            assert term.strip() in text, f"glossary: {term!r} ({en}) does not appear in {target}"


def test_every_bibliography_entry_is_cited_and_every_citation_exists():
    bib = set(re.findall(r"^@\w+\{([^,]+),", (ROOT / "references.bib").read_text(encoding="utf-8"), flags=re.M))
    cited = set()
    for md in (ROOT / "book").glob("*.md"):
        cited |= set(re.findall(r"\{cite:[pt]\}`([^`]+)`", md.read_text(encoding="utf-8")))
    assert cited - bib == set(), f"cited but not in references.bib: {cited - bib}"
    assert bib - cited == set(), f"in references.bib but never cited: {bib - cited}"
