import pytest

from tf_tutorial.book.notebook import check, glue, sci


def test_sci():
    assert sci(2.94e8) == "2.9×10⁸"
    assert sci(3.5e-9, digits=2) == "3.50×10⁻⁹"
    assert sci(7000) == "7.0×10³"


def test_check_fails_loudly_with_the_claim():
    check(True, "fine")
    with pytest.raises(AssertionError, match="the chapter claims: x < 1"):
        check(False, "x < 1")


def test_glue_hands_the_value_to_myst_nb_without_displaying_it(monkeypatch):
    import sys
    import types

    calls = []
    fake = types.ModuleType("myst_nb")
    fake.glue = lambda name, value, display=True: calls.append((name, value, display))
    monkeypatch.setitem(sys.modules, "myst_nb", fake)
    assert glue("speedup", "3.2") is None  # nothing returned, so nothing echoed by the cell
    assert calls == [("speedup", "3.2", False)]


def test_glue_without_myst_nb_is_a_silent_no_op(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "myst_nb", None)  # as in Colab: importing it fails
    assert glue("speedup", "3.2") is None


def test_pad_aligns_columns_of_mixed_chinese_and_latin_text():
    from tf_tutorial.book.notebook import display_width, pad
    rows = [("位置", "解码器输入"), (0, "<bos>"), (3, "中国")]
    lines = [pad(a, 6) + pad(b, 12) + "|" for a, b in rows]
    assert {display_width(line) for line in lines} == {19}
    assert [display_width(line.split("|")[0]) for line in lines] == [18] * 3
    assert pad("太长的一段文字", 4) == "太长的一段文字"


def test_display_width_counts_cjk_as_two():
    from tf_tutorial.book.notebook import display_width
    assert display_width("abc") == 3
    assert display_width("我爱中国。") == 10
    assert display_width("BLEU 是 46.5") == 12


def test_wrap_keeps_every_line_within_the_width_and_loses_no_word():
    from tf_tutorial.book.notebook import display_width, wrap
    english = " ".join(["the photographers who drew the noisy blade"] * 8)
    chinese = " ".join(["画 汤姆 画 的 吵闹 的 刀片 的 摄影师"] * 8)
    solid = "测" * 100                                   # no space to break at
    for text in (english, chinese, solid, "short"):
        out = wrap(text, width=40, indent="  ")
        lines = out.split("\n")
        assert all(display_width(line) <= 40 for line in lines), out
        assert all(line.startswith("  ") for line in lines[1:])
        assert out.replace("\n  ", " ").split() == text.split() or text == solid
    assert wrap(solid, 40).replace("\n  ", "") == solid
    assert wrap("short") == "short"
    with pytest.raises(ValueError, match="width=3"):
        wrap("x", width=3, indent="  ")


def test_check_takes_only_true_or_false():
    import numpy as np
    import torch
    check(np.bool_(True), "a NumPy bool")
    check(torch.tensor(True), "a 0-dim bool tensor")
    with pytest.raises(AssertionError, match="^the chapter claims: a 0-dim bool tensor that is False; "
                                             "the numbers just computed disagree$"):
        check(torch.tensor(False), "a 0-dim bool tensor that is False")
    for truthy in ("no", [0], lambda: False, 1):            # once all passed silently
        with pytest.raises(TypeError, match="^check\\(\\) expected the claim to be True or False, but got"):
            check(truthy, "a claim")


def test_sci_refuses_what_it_cannot_write():
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match=f"^sci\\(\\) expected a finite number, but got {bad!r}$"):
            sci(bad)


def test_check_run_is_strict_for_the_committed_page_and_a_note_for_readers(monkeypatch, capsys):
    from tf_tutorial.book.notebook import STRICT, check_run

    monkeypatch.delenv(STRICT, raising=False)
    assert check_run(True, "held") is None     # nothing for a cell to show
    assert capsys.readouterr().out == ""
    # a reader's machine trains another model: the chapter says so and goes on
    check_run(False, "accuracy still rising", note="验证集还在上升")
    out = capsys.readouterr().out
    assert "验证集还在上升" in out and "不符" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    with pytest.raises(TypeError, match=r"^check\(\) expected the claim to be True or False, but got str"):
        check_run("yes", "a string is not a claim")   # not a claim at all: an error anywhere
    # scripts.sync_book executes the committed page with STRICT set
    monkeypatch.setenv(STRICT, "1")
    with pytest.raises(AssertionError, match="accuracy still rising"):
        check_run(False, "accuracy still rising")


def test_check_timing_is_strict_only_where_a_page_is_stored(monkeypatch, capsys):
    """A live timing on a busy machine must not fail the tests, which set STRICT (conftest)."""
    from tf_tutorial.book.notebook import RUN_NOTE, STRICT, TIMING_STRICT, check_timing

    monkeypatch.setenv(STRICT, "1")
    monkeypatch.delenv(TIMING_STRICT, raising=False)
    assert check_timing(True, "held") is None and capsys.readouterr().out == ""
    check_timing(False, "the fixed cost is half a tile", note="固定开销约占一半")
    out = capsys.readouterr().out
    assert RUN_NOTE in out and "固定开销约占一半" in out and "计时" in out and "训练" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    monkeypatch.setenv(TIMING_STRICT, "1")           # scripts.sync_book stores a page
    with pytest.raises(AssertionError, match="the fixed cost is half a tile"):
        check_timing(False, "the fixed cost is half a tile")


def test_sync_book_executes_the_page_strictly(monkeypatch, tmp_path):
    import os

    import nbclient
    from scripts import sync_book
    from tf_tutorial.book.notebook import STRICT, TIMING_STRICT

    seen = {}

    class Client:
        def __init__(self, nb, **kw):
            pass

        def execute(self):
            seen["strict"] = os.environ.get(STRICT), os.environ.get(TIMING_STRICT)

    monkeypatch.setattr(nbclient, "NotebookClient", Client)
    monkeypatch.delenv(STRICT, raising=False)
    monkeypatch.delenv(TIMING_STRICT, raising=False)
    md = tmp_path / "page.md"
    md.write_text("---\njupytext:\n  text_representation:\n    extension: .md\n"
                  "    format_name: myst\nkernelspec:\n  name: python3\n"
                  "  display_name: Python 3\n---\n\n# t\n\n```{code-cell} ipython3\n1\n```\n")
    sync_book.build_notebook(md)
    assert seen["strict"] == ("1", "1") and STRICT not in os.environ and TIMING_STRICT not in os.environ


def test_syncing_inputs_only_keeps_outputs_and_the_kernels_language_info(tmp_path):
    # --no-execute used to drop the language_info the executing kernel had written
    import nbformat
    from scripts import sync_book
    md = tmp_path / "page.md"
    md.write_text("---\njupytext:\n  text_representation:\n    extension: .md\n"
                  "    format_name: myst\nkernelspec:\n  name: python3\n"
                  "  display_name: Python 3\n---\n\n# t\n\n```{code-cell} ipython3\n1\n```\n")
    old = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "1", outputs=[nbformat.v4.new_output("execute_result", {"text/plain": "1"}, execution_count=1)])])
    old.metadata["language_info"] = {"name": "python", "version": "3.11"}
    nbformat.write(old, tmp_path / "page.ipynb")
    md.write_text(md.read_text().replace("# t", "# a new title"))
    nb = nbformat.read(sync_book.build_notebook(md, execute=False), as_version=4)
    assert nb.metadata["language_info"] == {"name": "python", "version": "3.11"}
    assert nb.cells[0].source == "# a new title" and nb.cells[1].outputs[0]["data"] == {"text/plain": "1"}


def test_syncing_inputs_only_re_renders_the_cells_that_show_source(tmp_path):
    """--no-execute keeps what code computed, but a show(...) cell is the package's source as it
    is now (a chapter that cannot be re-executed, like chapter 10 on a slow host, stays true)."""
    import nbformat
    import pytest
    from scripts import sync_book
    head = ("---\njupytext:\n  text_representation:\n    extension: .md\n"
            "    format_name: myst\nkernelspec:\n  name: python3\n  display_name: Python 3\n---\n\n")
    cells = ["from tf_tutorial import show\nfrom tf_tutorial.residual import layer_settings\nx = 1",
             "show(layer_settings)", "x + 1"]
    md = tmp_path / "page.md"
    md.write_text(head + "".join(f"```{{code-cell}} ipython3\n{c}\n```\n\n" for c in cells))
    stale = [nbformat.v4.new_output("execute_result", {"text/plain": text}, execution_count=n)
             for n, text in ((2, "def layer_settings(old source)"), (3, "99"))]
    old = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cells[0], execution_count=1),
        *[nbformat.v4.new_code_cell(c, outputs=[o], execution_count=o["execution_count"])
          for c, o in zip(cells[1:], stale)]])
    nbformat.write(old, tmp_path / "page.ipynb")
    nb = nbformat.read(sync_book.build_notebook(md, execute=False), as_version=4)
    shown, kept = nb.cells[1], nb.cells[2]
    assert shown.outputs[0]["data"]["text/plain"].startswith("def layer_settings(")
    assert "old source" not in shown.outputs[0]["data"]["text/plain"]
    assert shown.execution_count == 2 and shown.outputs[0]["execution_count"] == 2
    assert kept.outputs[0]["data"] == {"text/plain": "99"}         # computed: kept, not re-run
    # a show() whose name the imports do not provide is an error, not a silent stale output
    md.write_text(md.read_text().replace("show(layer_settings)", "show(not_imported)"))
    with pytest.raises(RuntimeError, match=r"'show\(not_imported\)' failed after the chapter's "
                                           r"imports: NameError"):
        sync_book.build_notebook(md, execute=False)


def test_syncing_inputs_only_keeps_a_cell_that_only_gained_imports_and_renders_a_new_show(tmp_path):
    """Chapter 10 (not re-executable on a slow host) gained show(noam_lr, optimizer_and_schedule):
    its import cell gained a name and a show cell was new. Neither may lose its run; a cell
    whose new import could change what it computed must."""
    import nbformat
    from scripts import sync_book
    head = ("---\njupytext:\n  text_representation:\n    extension: .md\n"
            "    format_name: myst\nkernelspec:\n  name: python3\n  display_name: Python 3\n---\n\n")

    def page(cells):
        return head + "".join(f"```{{code-cell}} ipython3\n{c}\n```\n\n" for c in cells)

    before = ["from tf_tutorial import show\nfrom tf_tutorial.train import noam_lr\nprint(noam_lr(1, 4, 1))",
              "from math import pi\nprint(round(pi, 2))"]
    old = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(src, execution_count=n, outputs=[
            nbformat.v4.new_output("stream", name="stdout", text=f"stored {n}\n")])
        for n, src in enumerate(before, 1)])
    nbformat.write(old, tmp_path / "page.ipynb")
    after = [before[0].replace("import noam_lr", "import noam_lr, optimizer_and_schedule"),
             "show(noam_lr, optimizer_and_schedule)",
             before[1].replace("from math import pi", "from math import pi, e as round")]
    md = tmp_path / "page.md"
    md.write_text(page(after))
    nb = nbformat.read(sync_book.build_notebook(md, execute=False), as_version=4)
    gained, new, shadowed = nb.cells
    assert gained.execution_count == 1 and gained.outputs[0]["text"] == "stored 1\n"
    text = new.outputs[0]["data"]["text/plain"]
    assert "def noam_lr(" in text and "def optimizer_and_schedule(" in text
    assert new.execution_count is not None and new.outputs[0]["execution_count"] == new.execution_count
    # `round` now names math.e: what the cell printed may have changed, so it is not kept
    assert shadowed.execution_count is None and shadowed.outputs == []
    # an import that fails is an error, not a kept output
    md.write_text(page([after[0].replace("optimizer_and_schedule", "no_such_name")] + after[1:2]))
    import pytest
    with pytest.raises(RuntimeError, match=r"the chapter's imports failed: ImportError"):
        sync_book.build_notebook(md, execute=False)
    # what an added import could change elsewhere drops the cell's run too: a name another cell
    # defines or reads, a module not imported before (its import-time code), a star import
    for gain, later, kept in (("from math import pi, tau", "print(1)", True),
                              ("from math import pi, sqrt", "def sqrt(x):\n    return x\nprint(sqrt(4))", False),
                              ("from math import pi, sqrt", "print(sqrt(4))", False),
                              ("from math import pi\nfrom statistics import mean", "print(1)", False),
                              ("from math import pi\nfrom math import *", "print(1)", False)):
        first = "print('first')"
        old = nbformat.v4.new_notebook(cells=[
            nbformat.v4.new_code_cell(src, execution_count=n, outputs=[
                nbformat.v4.new_output("stream", name="stdout", text=f"stored {n}\n")])
            for n, src in enumerate([first, before[1], later], 1)])
        nbformat.write(old, tmp_path / "page.ipynb")
        md.write_text(page([first, before[1].replace("from math import pi", gain), later]))
        nb = nbformat.read(sync_book.build_notebook(md, execute=False), as_version=4)
        assert (nb.cells[1].execution_count == 2) == kept and (nb.cells[1].outputs != []) == kept, gain
        assert nb.cells[2].execution_count == 3       # unchanged cells keep their run
