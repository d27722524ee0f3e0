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

from tf_tutorial.book.notebook import RUN_NOTE

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
            # the page's own run bears out every claim about it (check_run)
            assert RUN_NOTE not in out.get("text", ""), f"code cell {i}: {out.text[:200]!r}"
            if out.output_type == "stream" and out.name == "stderr":
                assert "remove-stderr" in tags, f"code cell {i} stored stderr: {out.text[:200]!r}"
                assert "Glyph" not in out.text and "Traceback" not in out.text


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.name)
def test_no_name_is_glued_twice(md):
    """A name glued twice: the prose quotes only the later value, wherever it stands
    (chapter 12 once glued ``rms_gap`` for RMSNorm's float64 gap and again for a cosine gap)."""
    nb = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    cells_of = {}      # every glue is one output: a name glued twice in one cell counts too
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        for out in cell.get("outputs", []):
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                cells_of.setdefault(name, []).append(i)
    twice = {name: cells for name, cells in cells_of.items() if len(cells) > 1}
    assert not twice, f"glued more than once (name: code cells): {twice}"


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
    from jupytext.compare import NotebookDifference
    with pytest.raises(NotebookDifference, match="differ"):
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


@pytest.mark.slow
@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.name)
def test_no_emphasis_marker_is_left_as_text(built_book, md):
    """``**…：**测试`` is not bold in CommonMark: a closing ``**`` after full-width punctuation
    must be followed by a space or punctuation, or the reader sees the asterisks."""
    _, html = built_book
    page = (html / md.relative_to(ROOT)).with_suffix(".html").read_text(encoding="utf-8")
    body = re.sub(r"<(pre|code|script|style)\b.*?</\1>", "", page, flags=re.S)
    text = re.sub(r"<[^>]+>", "", body)
    left = [text[max(0, m.start() - 30):m.end() + 30].replace("\n", " ")
            for m in re.finditer(r"\*\*", text)]
    assert not left, left[:5]


def _tiny_book(root: Path, cells: list[str]) -> Path:
    (root / "book").mkdir(parents=True)
    shutil.copy(ROOT / "_config.yml", root / "_config.yml")
    shutil.copytree(ROOT / "_ext", root / "_ext", ignore=shutil.ignore_patterns("__pycache__"))  # local_extensions
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
        cited |= {key.strip() for keys in re.findall(r"\{cite:[pt]\}`([^`]+)`", md.read_text(encoding="utf-8"))
                  for key in keys.split(",")}
    assert cited - bib == set(), f"cited but not in references.bib: {cited - bib}"
    assert bib - cited == set(), f"in references.bib but never cited: {bib - cited}"


def test_no_two_references_would_be_cited_alike():
    """Two works whose author-year citation reads alike need 2023a / 2023b in their year fields."""
    from pybtex.database import parse_file

    sys.path.insert(0, str(ROOT / "_ext"))
    from bib_labels import citation_label

    seen = {}
    for key, entry in parse_file(str(ROOT / "references.bib")).entries.items():
        seen.setdefault(citation_label(entry), []).append(key)
    alike = {label: keys for label, keys in seen.items() if len(keys) > 1}
    assert not alike, f"these entries would be cited alike (give their years letters): {alike}"


def test_the_reference_list_labels_each_entry_as_the_text_cites_it(built_book):
    """Appendix D's labels are the citations' own words, in the order a reader looks them up."""
    _, html = built_book
    page = (html / "book" / "appendix_references.html").read_text(encoding="utf-8")
    labels = re.findall(r'<span class="label"><span class="fn-bracket">\[</span>([^<]*)<', page)
    assert len(labels) == len(re.findall(r"^@\w+\{", (ROOT / "references.bib").read_text(encoding="utf-8"),
                                         flags=re.M))
    first = [label.split(",")[0].split(" and ")[0].split(" et al.")[0].lower() for label in labels]
    assert first == sorted(first), "appendix D is not sorted by first author"
    assert labels.index("Vaswani et al., 2017") < labels.index("Vaswani et al., 2018")
    cited = set()
    for chapter in (html / "book").glob("ch*.html"):
        # a parenthetical citation's link text is its label: [Kingma and Ba, 2015]
        cited |= set(re.findall(r'href="appendix_references\.html#[^"]+" title="[^"]*">([^<]+, \d{4}[a-z]?)</a>',
                                chapter.read_text(encoding="utf-8")))
    assert len(cited) > 15 and cited <= set(labels), f"cited as, but not listed as: {cited - set(labels)}"


CODE_COLUMNS = 80  # what a code block shows at a 1280-pixel window (_static/book.css; a CJK character is two)


def _display_width(line: str) -> int:
    from tf_tutorial.book.notebook import display_width
    return display_width(line)


def _wide_code_lines(text: str) -> list[str]:
    """Code lines wider than the column: in code cells, and in the prose's plain fenced blocks
    (```bash ...; chapter 10's shell commands ran past the column). A directive's block
    (```{note}) holds prose, which wraps."""
    wide, fence, shown = [], None, True
    for n, line in enumerate(text.splitlines(), 1):
        if fence is None:
            if line.startswith("```{code-cell}"):
                fence, shown = "code", True
            elif re.match(r"^```[\w+-]*\s*$", line):
                fence, shown = "code", True
            elif line.startswith("```"):
                fence = "directive"
        elif line.startswith("```"):
            fence = None
        elif fence == "code" and line.startswith(":tags:") and "remove-cell" in line:
            shown = False      # not on the page (the Colab install cell): the column does not apply
        elif fence == "code" and shown and _display_width(line) > CODE_COLUMNS:
            wide.append(f"line {n} ({_display_width(line)} columns): {line.strip()[:60]}")
    return wide


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.name)
def test_code_cells_fit_the_content_column(md):
    wide = _wide_code_lines(md.read_text(encoding="utf-8"))
    assert not wide, (f"{md.name}: {len(wide)} code lines are wider than {CODE_COLUMNS} columns "
                      f"and run past the page's content column:\n" + "\n".join(wide[:10]))


def _wide_output_lines(ipynb: Path) -> list[str]:
    """Stored text outputs (printed lines, ``show(...)`` listings) wider than the code column."""
    wide = []
    cells = [c for c in nbformat.read(ipynb, as_version=4).cells if c.cell_type == "code"]
    for n, cell in enumerate(cells, 1):
        if "remove-output" in cell.metadata.get("tags", []):
            continue
        hidden_stderr = "remove-stderr" in cell.metadata.get("tags", [])
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "image/png" in data or (hidden_stderr and out.get("name") == "stderr"):
                continue        # a figure, or a progress bar: not on the page as text
            text = out.get("text") or data.get("text/plain", "")
            for line in "".join(text).splitlines():
                if _display_width(line) > CODE_COLUMNS:
                    wide.append(f"code cell {n} ({_display_width(line)} columns): {line.strip()[:60]}")
    return wide


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.name)
def test_printed_output_and_shown_code_fit_the_content_column(md):
    """What a cell prints, and the package code ``show(...)`` lists, is read without sideways scrolling."""
    ipynb = md.with_suffix(".ipynb")
    if not ipynb.exists():
        pytest.skip(f"{md.name} has no code")
    wide = _wide_output_lines(ipynb)
    assert not wide, (f"{md.name}: {len(wide)} output lines are wider than {CODE_COLUMNS} columns "
                      f"(wrap the printed text, or the package line that show() lists):\n"
                      + "\n".join(wide[:10]))


def test_a_wide_output_line_is_caught(tmp_path):
    def notebook(text, tags=()):
        cell = nbformat.v4.new_code_cell("print(x)", metadata={"tags": list(tags)},
                                         outputs=[nbformat.v4.new_output("stream", name="stdout", text=text)])
        path = tmp_path / "nb.ipynb"
        nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
        return path
    assert not _wide_output_lines(notebook("x" * 80 + "\n" + "中" * 40))
    assert _wide_output_lines(notebook("short\n" + "x" * 81))
    assert _wide_output_lines(notebook("中" * 41))
    assert not _wide_output_lines(notebook("x" * 81, tags=["remove-output"]))
    listing = nbformat.v4.new_output("execute_result", execution_count=1, data={
        "text/plain": "def f():\n    return " + "x" * 80, "text/html": "<pre>...</pre>"})
    cell = nbformat.v4.new_code_cell("show(f)", outputs=[listing])
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), tmp_path / "show.ipynb")
    assert _wide_output_lines(tmp_path / "show.ipynb")        # a show() listing is checked too


def test_a_wide_code_line_is_caught():
    ok = "```{code-cell} ipython3\nx = 1\n```\n"
    assert not _wide_code_lines(ok)
    assert _wide_code_lines("```{code-cell} ipython3\n" + "x" * 81 + "\n```\n")
    assert _wide_code_lines("```{code-cell} ipython3\n# " + "中" * 40 + "\n```\n")   # 82 columns
    assert not _wide_code_lines("some prose " + "x" * 100 + "\n")
    hidden = "```{code-cell} ipython3\n:tags: [remove-cell]\n" + "x" * 81 + "\n```\n"
    assert not _wide_code_lines(hidden)
    assert _wide_code_lines(hidden.replace("remove-cell", "hide-input"))


# --- one vocabulary, one notation, one citation style (issue 12) ---------------------------

from conftest import prose_lines  # noqa: E402

GLOSSARY = ROOT / "book" / "appendix_glossary.md"
PAGES = sorted((ROOT / "book").glob("*.md"))
# English phrases that contain a banned word and are allowed: LSTM's own name
ALLOWED_CONTEXTS = {"memory": ("short-term memory",)}


def _vocabulary_table(text: str) -> tuple[list[tuple[str, list[str], str]], set[int]]:
    """Rows ``(chosen term, [banned variants], note)`` of the glossary's 统一用词 table, and the
    line numbers the table occupies (the one place where the banned variants may appear)."""
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("## 统一用词"))
    rows, where = [], set()
    for n in range(head + 1, len(lines)):
        line = lines[n]
        if not line.startswith("|"):
            if rows or where:
                break
            continue
        where.add(n + 1)
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] in ("用词", "") or set(cells[0]) <= set("-: "):
            continue
        banned = [v.strip().strip("`") for v in re.split(r"、", cells[1]) if v.strip() not in ("", "—")]
        rows.append((cells[0], banned, cells[2]))
    return rows, where


def _uses_of(variant: str, text: str, skip: set[int] = frozenset()) -> list[str]:
    """``file:line`` style hits of ``variant`` in the prose of ``text`` (code and backticks excluded)."""
    ascii_word = variant.isascii()
    pattern = re.compile(rf"\b{re.escape(variant)}\b" if ascii_word else re.escape(variant),
                         re.IGNORECASE if ascii_word else 0)
    hits = []
    for n, line in prose_lines(text):
        if n in skip:
            continue
        clean = line
        for allowed in ALLOWED_CONTEXTS.get(variant, ()):
            clean = re.sub(re.escape(allowed), " ", clean, flags=re.IGNORECASE)
        if pattern.search(clean):
            hits.append(f"{n}: {line.strip()[:70]}")
    return hits


VOCABULARY, _VOCABULARY_LINES = _vocabulary_table(GLOSSARY.read_text(encoding="utf-8"))
BANNED = [(chosen, variant) for chosen, variants, _ in VOCABULARY for variant in variants]


def test_the_glossary_lists_the_chosen_terms():
    chosen = {row[0] for row in VOCABULARY}
    assert {"词向量", "前馈网络", "填充", "词元", "记忆"} <= chosen, chosen
    assert {"词嵌入", "前馈神经网络", "补齐", "memory"} <= {v for _, v in BANNED}


@pytest.mark.parametrize("chosen, variant", BANNED, ids=[v for _, v in BANNED])
def test_the_book_uses_the_chosen_term_not_its_variant(chosen, variant):
    """Every page of the book (prose only: code, inline code and math are not prose)."""
    found = []
    for md in PAGES:
        skip = _VOCABULARY_LINES if md == GLOSSARY else set()
        found += [f"{md.relative_to(ROOT)}:{hit}" for hit in _uses_of(variant, md.read_text(encoding="utf-8"), skip)]
    assert not found, (f"write {chosen!r}, not {variant!r} (book/appendix_glossary.md, 统一用词); "
                       f"{len(found)} lines:\n" + "\n".join(found))


def test_bare_memory_is_caught_and_code_is_not():
    text = HEADER + ("解码器读编码器的 memory。\n\n解码器读 `memory`。\n\n"
                     "长短期记忆（long short-term memory, LSTM）\n\n```{code-cell} ipython3\nmemory = enc(x)\n```\n"
                     "\n```{note}\n注释里的 Memory 也算。\n```\n")
    hits = _uses_of("memory", text)
    assert [h.split(":")[0] for h in hits] == ["11", "22"], hits
    assert _uses_of("补齐", HEADER + "\n把序列补齐到同一长度。\n")
    assert not _uses_of("补齐", HEADER + "\n$$\n\\text{补齐}\n$$\n")


def test_notation_page_is_in_the_table_of_contents():
    docs = [str(p.relative_to(ROOT)) for p in sync_book.toc_files()]
    assert "book/appendix_notation" in docs


def test_appendix_letters_follow_the_table_of_contents():
    appendices = [p for p in sync_book.toc_files() if p.name.startswith("appendix_")]
    titles = [p.with_suffix(".md").read_text(encoding="utf-8") for p in appendices]
    titles = [re.search(r"^# (附录 [A-Z]) (.+)$", t, flags=re.M) for t in titles]
    assert all(titles), [p.name for p, t in zip(appendices, titles) if not t]
    letters = [t.group(1) for t in titles]
    assert letters == [f"附录 {chr(ord('A') + i)}" for i in range(len(letters))], letters
    assert [t.group(2).split()[0] for t in titles][1:4] == ["符号表", "术语表", "参考文献"]
    # every "附录 X 名字" in the book names the appendix that really has that letter
    names = {t.group(1): t.group(2) for t in titles}
    wrong = []
    for md in PAGES:
        for n, line in enumerate(md.read_text(encoding="utf-8").splitlines(), 1):
            for letter, name in re.findall(r"(附录 [A-Z]) ?(符号表|术语表|参考文献|性能)", line):
                if not names.get(letter, "").startswith(name):
                    wrong.append(f"{md.name}:{n}: {letter} {name} (it is {names.get(letter)!r})")
    assert not wrong, wrong


def test_bibliography_holds_no_latex_the_html_would_print_literally():
    """The references page showed "\\texttt tensor2tensor/..." and "$o(n^2)$": the bibliography
    style renders neither LaTeX commands nor math."""
    bib = (ROOT / "references.bib").read_text(encoding="utf-8")
    commands = set(re.findall(r"\\([a-zA-Z]{2,})", bib)) - {"url"}   # one-letter accents ({\L}) render
    assert not commands, f"LaTeX commands in references.bib: {commands}"
    fields = re.findall(r"^\s*\w+\s*=\s*\{(.*)\},?\s*$", bib, flags=re.M)
    assert fields and not [f for f in fields if "$" in f]


def _bib_surnames() -> dict[str, set[str]]:
    bib = (ROOT / "references.bib").read_text(encoding="utf-8")
    names = {}
    for entry in re.split(r"(?m)^@", bib)[1:]:
        key = re.match(r"\w+\{([^,]+),", entry)
        authors = re.search(r"\bauthor\s*=\s*[{\"](.+?)[}\"]\s*,?\s*$", entry, flags=re.M | re.I)
        if not key or not authors:
            continue
        surnames = set()
        for person in re.split(r"\s+and\s+", authors.group(1)):
            person = person.replace("{", "").replace("}", "").strip()
            surname = person.split(",")[0] if "," in person else person.split()[-1]
            if len(surname) > 2 and surname.lower() != "others":
                surnames.add(surname)
        names[key.group(1)] = surnames
    return names


_NAMED_BEFORE = re.compile(r"(等人?|et al\.?|[A-Z][\w-]+\s*(和|与|and|&)\s*[A-Z][\w-]+)\s*[（(]?\s*$")


def _citation_style_problems(text: str, surnames: dict[str, set[str]]) -> list[str]:
    problems = []
    for n, line in enumerate(text.splitlines(), 1):
        for m in re.finditer(r"\{cite:([pt])\}`([^`]+)`", line):
            before = line[max(0, m.start() - 40):m.start()]
            keys = [k.strip() for k in m.group(2).split(",")]
            tail = before[-25:]
            named = bool(_NAMED_BEFORE.search(before)) or any(
                re.search(rf"\b{re.escape(s)}\b", tail) for k in keys for s in surnames.get(k, ()))
            if named and m.group(1) == "p":
                problems.append(f"{n}: the author is named before {{cite:p}}: write {{cite:t}} in "
                                f"place of the name: …{before[-25:]}{m.group(0)}")
            elif named:
                problems.append(f"{n}: {{cite:t}} prints the author's name, which the text already "
                                f"gives: …{before[-25:]}{m.group(0)}")
    return problems


def test_a_named_author_is_cited_with_cite_t():
    surnames = _bib_surnames()
    problems = [f"{md.relative_to(ROOT)}:{p}" for md in PAGES
                for p in _citation_style_problems(md.read_text(encoding="utf-8"), surnames)]
    assert not problems, f"{len(problems)} citations:\n" + "\n".join(problems)


def test_citation_style_check_catches_named_authors():
    names = {"xiong2020layer": {"Xiong"}, "vaswani2017attention": {"Vaswani"}}
    assert _citation_style_problems("Xiong 等 {cite:p}`xiong2020layer` 发现", names)
    assert _citation_style_problems("Clark 和 Manning {cite:p}`clark2019what`", names)
    assert _citation_style_problems("Xiong et al. {cite:p}`xiong2020layer`", names)
    assert _citation_style_problems("Xiong 等 {cite:t}`xiong2020layer` 发现", names)
    assert _citation_style_problems("Vaswani（{cite:p}`vaswani2017attention`）", names)
    assert not _citation_style_problems("{cite:t}`xiong2020layer` 发现", names)
    assert not _citation_style_problems("Transformer {cite:p}`vaswani2017attention` 用了它", names)


# --- the reader's tools: search, interface, typography ------------------------------------

def test_search_indexes_chinese_with_jieba():
    config = _config()["sphinx"]
    assert config["config"]["html_search_language"] == "zh"
    assert "reader_tools" in config["local_extensions"]
    pins = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    assert re.search(r"^jieba==[\d.]+", pins, flags=re.M), "jieba must be pinned in requirements.txt"
    pytest.importorskip("jieba")
    sys.path.insert(0, str(ROOT / config["local_extensions"]["reader_tools"]))
    import jieba
    import reader_tools

    terms = reader_tools.glossary_terms(GLOSSARY.read_text(encoding="utf-8"))
    assert {"层归一化", "束搜索", "词向量", "多头注意力", "查询"} <= set(terms)
    for term in terms:
        jieba.add_word(term)
    # what the search index stores for a sentence: the whole terms, not only their pieces
    words = set(jieba.cut_for_search("我们用层归一化稳定训练，再用束搜索解码。"))
    assert {"层归一化", "束搜索"} <= words, words


def test_punctuation_is_bound_to_the_inline_formula_it_touches():
    from docutils import nodes

    sys.path.insert(0, str(ROOT / _config()["sphinx"]["local_extensions"]["reader_tools"]))
    import reader_tools

    para = nodes.paragraph()
    para += [nodes.Text("矩阵（"), nodes.math(text="W^O"), nodes.Text("），再乘 "),
             nodes.math(text="x"), nodes.Text(" 得到 "), nodes.math(text="y"), nodes.Text("。")]
    assert reader_tools.bind_punctuation(para) == 2          # x touches no punctuation
    assert para.astext() == "矩阵（W^O），再乘 x 得到 y。"   # nothing lost, nothing moved
    boxes = list(para.findall(nodes.inline))
    assert [b.astext() for b in boxes] == ["（W^O），", "y。"]
    assert all(b["classes"] == ["nobr"] for b in boxes)
    # the text outside the boxes keeps its other characters
    assert [type(n).__name__ for n in para] == ["Text", "inline", "Text", "math", "Text", "inline"]
    assert [str(n) for n in para if isinstance(n, nodes.Text)] == ["矩阵", "再乘 ", " 得到 "]
    # two text nodes with the same characters: the one after the formula is the one bound
    para = nodes.paragraph()
    para += [nodes.Text("，"), nodes.math(text="a"), nodes.Text("，")]
    reader_tools.bind_punctuation(para)
    assert [n.astext() for n in para] == ["，", "a，"] and para[1]["classes"] == ["nobr"]
    css = (ROOT / "_static" / "book.css").read_text(encoding="utf-8")
    assert re.search(r"span\.nobr\s*\{\s*white-space:\s*nowrap", css)


def test_interface_strings_are_chinese_and_quotes_stay_straight():
    config = _config()["sphinx"]["config"]
    assert config["smartquotes"] is False, "smart quotes turn the corpus's \"Bai 's\" into \"Bai ‘s\""
    for key in ("togglebutton_hint", "togglebutton_hint_hide", "nb_code_prompt_show", "nb_code_prompt_hide"):
        assert re.search(r"[\u4e00-\u9fff]", config[key]), f"{key} = {config[key]!r} is not Chinese"


@pytest.mark.slow
def test_built_pages_keep_straight_quotes_and_a_chinese_interface(built_book):
    _, html = built_book
    ch10 = (html / "book" / "ch10_translation.html").read_text(encoding="utf-8")
    assert "‘s" not in ch10, "smart quotes: the corpus's 's became ‘s"
    assert re.search(r"\w (&#39;|')s\b", ch10), "the corpus's tokenised possessive ('s) is missing"
    english = {}
    for page in sorted(html.glob("**/*.html")):
        text = page.read_text(encoding="utf-8")
        hits = [s for s in ("Click to", "Search this book", "Launch on", "Toggle primary sidebar",
                            "Color mode") if s in text]
        if hits:
            english[str(page.relative_to(html))] = hits
    assert not english, english


def test_every_figure_in_the_book_is_described_not_named_by_its_hash(built_book):
    """A screen reader reads an image's alt text: it must be the figure's title, not a file name."""
    _, html = built_book
    bad = {}
    for page in sorted((html / "book").glob("*.html")):
        alts = re.findall(r'<img alt="([^"]*)"', page.read_text(encoding="utf-8"))
        unnamed = [a for a in alts if not a.strip() or "_images/" in a or a.endswith(".png")]
        if unnamed:
            bad[page.name] = unnamed[:3]
    assert not bad, f"figures whose alt text is empty or a file name (give them a title): {bad}"


def test_figure_descriptions_are_read_from_the_stored_outputs(tmp_path):
    import base64
    import hashlib

    sys.path.insert(0, str(ROOT / "_ext"))
    from reader_tools import figure_descriptions

    png = b"\x89PNG\r\n\x1a\n not really an image"
    described = nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(png).decode()},
                                       metadata={"image/png": {"width": 10, "alt": "图：注意力权重"}})
    bare = nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(b"other").decode()})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("plot()", outputs=[described, bare])])
    nbformat.write(nb, tmp_path / "figures.ipynb")
    assert figure_descriptions(tmp_path / "figures.ipynb") == {hashlib.sha256(png).hexdigest(): "图：注意力权重"}


def _shown_sources(ipynb: Path):
    """Every ``show(...)`` cell of a stored notebook: (cell source, the code it stored, its namespace).

    The namespace holds what the chapter's imports bind, so ``show``'s arguments can be evaluated
    again against today's package without running the chapter.
    """
    import ast

    nb = nbformat.read(ipynb, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    namespace = {}
    for cell in code:
        tree = ast.parse(cell.source.replace("%", "#"))
        imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        exec(compile(ast.Module(body=imports, type_ignores=[]), str(ipynb), "exec"), namespace)
    for cell in code:
        last = cell.source.strip().splitlines()[-1] if cell.source.strip() else ""
        stored = [o for o in cell.outputs if o.output_type == "execute_result"]
        if last.startswith("show(") and stored:
            yield last, stored[0]["data"]["text/plain"], namespace


def stale_listings(ipynb: Path) -> tuple[list[str], int]:
    """The ``show(...)`` calls whose stored listing differs from today's package, and how many were checked."""
    stale, checked = [], 0
    for call, stored, namespace in _shown_sources(ipynb):
        try:
            today = eval(call, namespace).data
        except NameError:      # an argument the chapter itself defines: not package code
            continue
        checked += 1
        if today.rstrip("\n") != stored.rstrip("\n"):   # the stored text loses its last newline
            stale.append(call)
    return stale, checked


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.name)
def test_code_a_chapter_shows_is_todays_package_code(md):
    """The book renders stored outputs: a package change must be re-synced into the page that shows it."""
    stale, checked = stale_listings(md.with_suffix(".ipynb"))
    assert not stale, (f"{md.name} shows code that has changed since it was executed: {stale}; "
                       f"run python -m scripts.sync_book {md.relative_to(ROOT)}")
    if re.search(r"^\s*show\(", md.read_text(encoding="utf-8"), re.M):
        assert checked, f"{md.name} calls show() but no shown source could be checked"


def test_stale_shown_code_is_caught(tmp_path):
    from tf_tutorial.book.source import source_of
    from tf_tutorial.norm import LayerNorm

    def notebook(listing):
        return nbformat.v4.new_notebook(cells=[
            nbformat.v4.new_code_cell("from tf_tutorial.norm import LayerNorm\nfrom tf_tutorial import show"),
            nbformat.v4.new_code_cell("show(LayerNorm)", outputs=[nbformat.v4.new_output(
                "execute_result", data={"text/plain": listing}, execution_count=1)])])
    nbformat.write(notebook(source_of(LayerNorm).rstrip("\n")), tmp_path / "today.ipynb")
    nbformat.write(notebook("class LayerNorm:  # an older version\n"), tmp_path / "old.ipynb")
    assert stale_listings(tmp_path / "today.ipynb") == ([], 1)
    assert stale_listings(tmp_path / "old.ipynb") == (["show(LayerNorm)"], 1)


def stored_training_seconds(nb_path) -> list:
    """Seconds of training that a stored chapter-10 notebook printed ("1500 步，训练 178 秒")."""
    nb = nbformat.read(nb_path, as_version=4)
    texts = [out.text for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs
             if out.output_type == "stream" and out.name == "stdout"]
    return [int(s) for t in texts for s in re.findall(r"\d+ 步，训练 (\d+) 秒", t)]


def test_chapter_10_was_stored_from_a_run_on_a_quiet_machine():
    """The page shows the stored run, and its prose says the CPU training takes two to three minutes.

    A sync on a busy machine once stored 1137 s (same steps, six times slower), which the page
    then showed to every reader. Timing is not tested live (a busy machine must not fail the
    tests); this checks the run that was committed. 200 s leaves a slower machine 10% over the
    180 s budget of issue 11.
    """
    seconds = stored_training_seconds(ROOT / "book" / "ch10_translation.ipynb")
    assert len(seconds) == 1, f"the training cell's printout was not found: {seconds}"
    assert seconds[0] <= 200, (f"chapter 10 stored a training run of {seconds[0]} s: re-run "
                               f"python -m scripts.sync_book book/ch10_translation.md on a quiet machine")


def test_a_stored_slow_run_is_caught(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("train()", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="1500 步，训练 1137 秒（含其间的验证）\n")])])
    nbformat.write(nb, tmp_path / "slow.ipynb")
    assert stored_training_seconds(tmp_path / "slow.ipynb") == [1137]


@pytest.mark.parametrize("name, missing", [("book/nonexist.md", True), ("README.md", False),
                                           ("book/intro.md", False)])
def test_sync_book_names_what_is_not_a_notebook_chapter_and_writes_nothing(name, missing, capsys, monkeypatch):
    """A mistyped path was a FileNotFoundError traceback; README.md (it holds the install marker)
    was turned into a README.ipynb."""
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as info:
        sync_book.main([name, "--no-execute"])
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.endswith(f"error: {name}: expected a notebook chapter listed in _toc.yml (book/*.md with a "
                        f"jupytext header){'; no such file' if missing else ''}\n")
    assert not (ROOT / name).with_suffix(".ipynb").exists()
