"""Sphinx extension for the reader's tools of the HTML book: Chinese search and a Chinese interface.

- **Search.** Sphinx indexes Chinese only through jieba (``html_search_language: zh``). jieba
  alone cuts the book's terms apart (层归一化 → 层 / 归一化; 束搜索 → 束 / 搜索), and the
  browser looks a query up as one whole word, so a reader who types 层归一化 would find
  nothing. Every Chinese term of the glossary (``book/appendix_glossary.md``) is therefore
  added to jieba's dictionary before the index is built.
- **Interface strings** that the themes leave in English under ``language: zh_CN`` (tooltips,
  the search box) get Chinese text: missing catalogue entries through a fallback translation,
  two hard-coded tooltips through template overrides in ``templates/``.
- **Figure descriptions.** MyST-NB names a notebook's figure by the SHA-256 of its PNG and
  gives the ``<img>`` that file name as its alt text. The book's figures carry a description in
  their output metadata (``tf_tutorial.book.plotting.describe_figure``: the titles); it
  replaces the file name, so a screen reader reads the figure's title, not a hash.
- **Punctuation beside inline math.** MathJax draws a formula as one inline box, and the browser
  may break the line on either side of it, so a line could begin with the comma or full stop
  that follows a formula (or end with the bracket that opens before one). Chinese typesetting
  forbids both. The punctuation that touches an inline formula is bound to it in a
  ``<span class="nobr">`` (``_static/book.css`` keeps it on one line).
"""
from __future__ import annotations

import base64
import gettext
import hashlib
import logging
import re
from pathlib import Path

GLOSSARY = Path("book") / "appendix_glossary.md"
SEARCH_BAR_TEXT = "搜索本书……"

# msgid -> Chinese, for strings that have no (or an empty) zh_CN entry in the themes' catalogues
INTERFACE_ZH = {
    "sphinx": {
        "Color mode": "颜色模式",
        "System Settings": "跟随系统",
        "Collapse Sidebar": "收起侧栏",
        "Expand Sidebar": "展开侧栏",
        "Link to this heading": "链接到此标题",
        "Link to this definition": "链接到此定义",
        "Link to this equation": "链接到此公式",
        "Link to this table": "链接到此表格",
        "Link to this image": "链接到此图片",
        "Link to this code": "链接到此代码",
        "Link to this term": "链接到此术语",
    },
    "booktheme": {
        "Launch on": "打开于",
        "Launch interactive content": "在线运行本页",
        "Download this page": "下载本页",
        "Download source file": "下载源文件",
        "Download notebook file": "下载笔记本文件",
        "Fullscreen mode": "全屏",
        "Source repository": "源代码仓库",
        "Source repositories": "源代码仓库",
        "Repository": "仓库",
        "Open issue": "提交问题",
        "Open an issue": "提交问题",
        "Suggest edit": "建议修改",
        "Show source": "显示源文件",
        "Print to PDF": "打印为 PDF",
        "Search": "搜索",
        "Live Code": "在线代码",
        "Launch Thebe": "启动 Thebe",
    },
}

_CJK = re.compile(r"[\u4e00-\u9fff]")


def glossary_terms(text: str) -> list[str]:
    """The Chinese terms in the first column of every table of the glossary page."""
    terms = []
    for line in text.splitlines():
        if not line.startswith("| ") or line.startswith("|---"):
            continue
        first = line.split("|")[1].strip()
        for term in re.split(r"[、，,/]", first):
            term = term.strip().strip("`*")
            if _CJK.search(term) and len(term) >= 2 and " " not in term:
                terms.append(term)
    return list(dict.fromkeys(terms))


class _Fallback(gettext.NullTranslations):
    def __init__(self, table: dict[str, str]):
        super().__init__()
        self.table = table

    def gettext(self, message):
        return self.table.get(message, message)

    def ngettext(self, singular, plural, n):
        return self.gettext(singular if n == 1 else plural)


def _config_inited(app, config):
    config.html_theme_options = dict(config.html_theme_options or {}, search_bar_text=SEARCH_BAR_TEXT)
    config.templates_path = [str(Path(__file__).parent / "templates"), *config.templates_path]


def _builder_inited(app):
    from sphinx import locale

    for catalog, table in INTERFACE_ZH.items():
        translator = locale.translators.get(("general", catalog))
        if translator is not None:
            translator.add_fallback(_Fallback(table))

    glossary = Path(app.srcdir) / GLOSSARY
    try:
        import jieba
    except ImportError:
        return  # html_search_language zh without jieba indexes only Latin words
    jieba.setLogLevel(logging.WARNING)
    if glossary.is_file():
        for term in glossary_terms(glossary.read_text(encoding="utf-8")):
            jieba.add_word(term)


def figure_descriptions(notebook: Path) -> dict[str, str]:
    """``{SHA-256 of a PNG: its alt text}`` for every described figure stored in ``notebook``."""
    import nbformat

    found = {}
    for cell in nbformat.read(notebook, as_version=4).cells:
        for output in cell.get("outputs", []):
            png, alt = output.get("data", {}).get("image/png"), \
                output.get("metadata", {}).get("image/png", {}).get("alt")
            if png and alt:
                found[hashlib.sha256(base64.b64decode(png)).hexdigest()] = alt
    return found


def _describe_figures(app, doctree):
    from docutils import nodes

    source = Path(app.env.doc2path(app.env.docname))
    if source.suffix != ".ipynb":
        return
    alts = figure_descriptions(source)
    for image in doctree.findall(nodes.image):
        alt = alts.get(Path(image["uri"]).stem)
        if alt:
            image["alt"] = alt


# Chinese and Latin punctuation that may not begin a line (after a formula) or end one (before it)
CLOSING = "，。、；：？！）》」』”’,.;:?!)]"
OPENING = "（《「『“‘(["


def bind_punctuation(doctree) -> int:
    """Put each inline formula and the punctuation touching it into one unbreakable ``inline``.

    Returns how many formulas were bound. The text before and after keeps its other characters.
    Children are found by identity: a text node equals any other holding the same characters.
    """
    from docutils import nodes

    bound = 0
    for math in list(doctree.findall(nodes.math)):
        parent = math.parent
        if parent is None:
            continue
        kids = parent.children
        at = next(i for i, kid in enumerate(kids) if kid is math)
        before = kids[at - 1] if at > 0 and isinstance(kids[at - 1], nodes.Text) else None
        after = kids[at + 1] if at + 1 < len(kids) and isinstance(kids[at + 1], nodes.Text) else None
        tail = str(after)[:len(after) - len(str(after).lstrip(CLOSING))] if after else ""
        head = str(before)[len(str(before).rstrip(OPENING)):] if before else ""
        if not (head or tail):
            continue
        box = nodes.inline(classes=["nobr"])
        if head:
            box += nodes.Text(head)
        box += math
        if tail:
            box += nodes.Text(tail)
        # the new run: what stays of the text before, the box, what stays of the text after
        run = [nodes.Text(str(before)[:len(before) - len(head)])] if before else []
        run += [box]
        run += [nodes.Text(str(after)[len(tail):])] if after else []
        run = [n for n in run if not isinstance(n, nodes.Text) or str(n)]
        first = at - 1 if before else at
        last = at + 1 if after else at
        for n in run:
            n.parent = parent
        kids[first:last + 1] = run
        bound += 1
    return bound


def _bind_punctuation(app, doctree, docname):
    bind_punctuation(doctree)


def setup(app):
    app.connect("config-inited", _config_inited)
    app.connect("builder-inited", _builder_inited)
    app.connect("doctree-read", _describe_figures)
    app.connect("doctree-resolved", _bind_punctuation)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
