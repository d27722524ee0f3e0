"""A real browser opens the built book: typeset math, loaded figures, the Colab link, Chinese
search, display equations that fit the content column at a 1400-pixel window, no inline formula
cut off, and pages whose width and inline formulas fit a phone.

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them). Without them
the test skips with the reason, except under CI (``CI`` set), where it fails instead.
"""
import functools
import http.server
import os
import re
import shutil
import threading
import time
import urllib.parse

import pytest

from conftest import ROOT, prose_lines
from scripts import sync_book

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and CHROMEDRIVER):
        reason = "headless Chromium not installed (apt-get install chromium chromium-driver)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run the browser test")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                 "--disable-dev-shm-usage", "--window-size=1280,1600"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def served_book(built_book):
    result, html = built_book
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def wait_for(driver, script, timeout=20.0):
    deadline = time.monotonic() + timeout
    value = driver.execute_script(script)
    while not value and time.monotonic() < deadline:
        time.sleep(0.25)
        value = driver.execute_script(script)
    return value


@pytest.mark.slow
def test_chapter_1_in_a_real_browser(browser, served_book):
    browser.get(f"{served_book}/book/ch01_rnn.html")
    # MathJax replaces every TeX span with an <mjx-container>; raw "\frac" or "\lVert" means it did not run
    typeset = wait_for(browser, """
        const maths = document.querySelectorAll('.math');
        const done = document.querySelectorAll('mjx-container').length;
        return maths.length > 0 && [...maths].every(m => m.querySelector('mjx-container')) ? done : 0;""")
    assert typeset >= 20, "formulas were not typeset by MathJax"
    visible = browser.execute_script("return document.querySelector('main').innerText")
    assert "\\frac" not in visible and "\\lVert" not in visible

    images = browser.execute_script("""
        return [...document.querySelectorAll('main img')].map(
            i => ({src: i.src, ok: i.complete && i.naturalWidth > 0}));""")
    figures = [i for i in images if "_images/" in i["src"]]
    assert len(figures) >= 5, images
    assert all(i["ok"] for i in images), [i["src"] for i in images if not i["ok"]]

    hrefs = browser.execute_script(
        "return [...document.querySelectorAll('a')].map(a => a.href).filter(h => h.includes('colab'))")
    org_repo = sync_book.repo_url().removeprefix("https://github.com/")
    assert hrefs == [f"https://colab.research.google.com/github/{org_repo}/blob/main/book/ch01_rnn.ipynb"]


@pytest.mark.slow
@pytest.mark.parametrize("page", ["ch01_rnn", "ch03_attention", "ch11_decoder_only"])
def test_figures_keep_their_shape_when_shrunk_to_the_column(browser, served_book, page):
    """A figure wider than the column was shrunk in width only (its PNG's display height stayed):
    chapter 11's sampling figure was drawn 1.9 times too narrow for its height."""
    browser.get(f"{served_book}/book/{page}.html")
    wait_for(browser, "return [...document.querySelectorAll('main img')].every(i => i.complete)")
    figures = browser.execute_script("""
        return [...document.querySelectorAll('main img')].filter(i => i.src.includes('_images/'))
            .map(i => ({src: i.src, w: i.clientWidth, h: i.clientHeight,
                        nw: i.naturalWidth, nh: i.naturalHeight,
                        column: i.closest('main').clientWidth}));""")
    assert len(figures) >= 3, figures
    assert any(f["nw"] / 2 > f["w"] for f in figures), "no figure was shrunk: the test shows nothing"
    for f in figures:
        drawn, true = f["w"] / f["h"], f["nw"] / f["nh"]
        assert abs(drawn / true - 1) < 0.02, f
        assert f["w"] <= f["column"], f


TYPESET = """
    const maths = document.querySelectorAll('.math');
    const done = document.querySelectorAll('mjx-container').length;
    return maths.length > 0 && [...maths].every(m => m.querySelector('mjx-container')) ? done : 0;"""


def _pages_with_prose(term: str) -> set[str]:
    """The pages (``book/x.html``) whose prose, not only their code, contains ``term``."""
    pages = set()
    for doc in sync_book.toc_files():
        md = doc.with_suffix(".md")
        if any(term in line for _, line in prose_lines(md.read_text(encoding="utf-8"))):
            pages.add(str(doc.relative_to(ROOT)) + ".html")
    return pages


def search(browser, served_book, query: str) -> set[str]:
    """The pages the book's own search page lists for ``query``."""
    browser.get(f"{served_book}/search.html?q={urllib.parse.quote(query)}")
    # the summary line ("搜索完成……") appears once every result is listed
    done = wait_for(browser, """
        const status = document.querySelector('#search-results p.search-summary');
        return status && status.innerText.trim();""", timeout=30)
    assert done, f"the search page never finished searching for {query!r}"
    hrefs = browser.execute_script(
        "return [...document.querySelectorAll('#search-results ul.search li a')].map(a => a.href)")
    return {urllib.parse.urlsplit(h).path.lstrip("/") for h in hrefs}


@pytest.mark.slow
@pytest.mark.parametrize("query", ["注意力", "层归一化", "束搜索"])
def test_chinese_search_finds_the_chapters_that_use_the_word(browser, served_book, query):
    """Sphinx indexes Chinese only through jieba; 层归一化 and 束搜索 stay whole thanks to the glossary."""
    expected = _pages_with_prose(query)
    assert expected, f"no page uses {query!r}: choose another query"
    found = search(browser, served_book, query)
    assert expected <= found, f"searching {query!r} misses {sorted(expected - found)} (found {sorted(found)})"


@pytest.mark.slow
def test_english_search_still_works(browser, served_book):
    assert "book/ch03_attention.html" in search(browser, served_book, "attention")


WIDE_EQUATIONS = """
    const wide = [];
    for (const c of document.querySelectorAll('mjx-container[display="true"]')) {
      const math = c.querySelector('mjx-math');
      const column = c.closest('article') || document.querySelector('main');
      const box = math.getBoundingClientRect(), own = c.getBoundingClientRect();
      const right = column.getBoundingClientRect().right;
      if (box.width > c.clientWidth + 1 || own.right > right + 1) {
        const tex = (c.parentElement.innerText || '').slice(0, 60);
        const section = c.closest('section');
        const title = section ? section.querySelector('h1, h2, h3').innerText : '';
        wide.push(`${Math.round(box.width)} px > ${c.clientWidth} px in "${title}"`);
      }
    }
    return wide;"""


@pytest.mark.slow
def test_every_symbol_of_the_notation_page_is_typeset(browser, served_book):
    source = (ROOT / "book" / "appendix_notation.md").read_text(encoding="utf-8")
    in_tables = sum(len(re.findall(r"(?<!\\)\$[^$]+\$", line)) for line in source.splitlines()
                    if line.startswith("|"))
    browser.get(f"{served_book}/book/appendix_notation.html")
    typeset = wait_for(browser, TYPESET)
    assert typeset >= in_tables > 20, (typeset, in_tables)
    errors = browser.execute_script("return [...document.querySelectorAll('mjx-merror')].map(e => e.innerText)")
    assert not errors, f"MathJax could not typeset: {errors}"
    visible = browser.execute_script("return document.querySelector('main').innerText")
    assert "\\lvert" not in visible and "\\operatorname" not in visible


SCROLLING_CODE = """
    const wide = [];
    for (const pre of document.querySelectorAll('main div.cell_input pre, main div.cell_output pre, main article div.highlight pre')) {
      if (pre.scrollWidth > pre.clientWidth + 1) {
        const line = pre.innerText.split('\\n').reduce((a, b) => (b.length > a.length ? b : a), '');
        wide.push(`${pre.scrollWidth} px > ${pre.clientWidth} px: ${line.trim().slice(0, 50)}`);
      }
    }
    return wide;"""


WIDE_TABLES = """
    // a table is cut off at its scrolling container's edge (which shows no scrollbar), so it
    // must fit the container, not only the wider article around it
    return [...document.querySelectorAll('main table')].filter(
        t => t.getBoundingClientRect().width > t.parentElement.clientWidth + 1).map(
        t => `${Math.round(t.getBoundingClientRect().width)} px > ${t.parentElement.clientWidth} px: `
             + t.innerText.slice(0, 40).replace(/\\s+/g, ' '));"""

PUNCTUATION_AFTER_MATH = """
    // a comma, full stop or closing bracket right after an inline formula, drawn on the next line
    const found = [];
    for (const m of document.querySelectorAll('main span.math')) {
      const box = m.querySelector('mjx-container'), next = m.nextSibling;
      if (!box || !next || next.nodeType !== Node.TEXT_NODE) continue;
      if (!/^[\uff0c\u3002\u3001\uff1b\uff1a\uff1f\uff01\uff09,.;:?!)]/.test(next.textContent)) continue;
      const range = document.createRange();
      range.setStart(next, 0);
      range.setEnd(next, 1);
      if (range.getBoundingClientRect().top >= box.getBoundingClientRect().bottom - 2) {
        found.push(m.textContent.slice(0, 30) + ' | ' + next.textContent.slice(0, 8));
      }
    }
    return found;"""


OPEN_ANSWERS = """
    // the exercises' answers are folded away (sphinx-togglebutton); measure them open
    document.querySelectorAll('.toggle-hidden').forEach(x => x.classList.remove('toggle-hidden'));
    document.querySelectorAll('details').forEach(x => x.open = true);"""

CUT_INLINE_FORMULAS = """
    // the theme clips an inline formula to its column (overflow: hidden): what would be cut off
    return [...document.querySelectorAll('main span.math')].filter(m => {
        const math = m.querySelector('mjx-math');
        return math && math.getBoundingClientRect().width > m.clientWidth + 2;
      }).map(m => `${Math.round(m.querySelector('mjx-math').getBoundingClientRect().width)} px > `
                  + `${m.clientWidth} px: ` + m.textContent.slice(0, 40));"""

SIDEWAYS_PAGE = """
    // the whole page wider than the screen, and the elements that stick out past its edge
    const width = document.documentElement.clientWidth;
    if (document.documentElement.scrollWidth <= width) return [];
    const scrolls = e => ['auto', 'scroll', 'hidden'].includes(getComputedStyle(e).overflowX);
    const out = [`page ${document.documentElement.scrollWidth} px > ${width} px`];
    for (const e of document.querySelectorAll('main *')) {
      if (e.getBoundingClientRect().right <= width + 1 || e.children.length) continue;
      let p = e.parentElement;
      while (p && !scrolls(p)) p = p.parentElement;
      if (!p || p.getBoundingClientRect().right > width + 1) out.push(e.textContent.slice(0, 40));
    }
    return out.slice(0, 6);"""

SCROLLING_INLINE_FORMULAS = """
    // an inline formula wider than its line: on a phone it scrolls inside its own box
    return [...document.querySelectorAll('main span.math')].filter(
        m => m.scrollWidth > m.clientWidth + 2).map(
        m => `${m.scrollWidth} px > ${m.clientWidth} px: ` + m.textContent.slice(0, 40));"""


def settled(driver, script, tries: int = 4):
    """What ``script`` finds once the layout has settled.

    A busy machine can measure while a resized page is still settling (under CI load, once,
    every formula of a page read ~20% too wide at 360 pixels): a real problem is still there
    when measured again a moment later, after the fonts have loaded; a transient one is not.
    """
    found = driver.execute_script(script)
    for _ in range(tries):
        if not found:
            break
        wait_for(driver, "return document.fonts.status === 'loaded'", timeout=5.0)
        time.sleep(0.5)
        found = driver.execute_script(script)
    return found


@pytest.fixture(scope="module")
def every_page(browser, served_book):
    """One visit to every page, measured at the widths the layout tests need.

    Each page is loaded (and its formulas typeset) once: its code blocks are measured at a
    1280-pixel window, then its display equations at 1400 pixels (the reviewer's). Then its
    exercises' answers are opened, its inline formulas measured at 1280 pixels again, and the
    page's width and its inline formulas at a phone's 360 pixels. The resizes need no reload.
    """
    seen = {"equations": {}, "code": {}, "tables": {}, "punctuation": {}, "blocks": 0,
            "untypeset": [], "inline": 0, "cut": {}, "sideways": {}, "scrolling": {},
            "pages": 0, "formulas": 0}
    try:
        for doc in sync_book.toc_files():
            browser.set_window_size(1280, 1000)
            browser.get(f"{served_book}/{doc.relative_to(ROOT)}.html")
            seen["pages"] += 1
            seen["blocks"] += browser.execute_script(
                "return document.querySelectorAll('main div.cell_input pre').length")
            found = browser.execute_script(SCROLLING_CODE)
            if found:
                seen["code"][doc.name] = found
            found = browser.execute_script(WIDE_TABLES)
            if found:
                seen["tables"][doc.name] = found
            has_math = browser.execute_script("return document.querySelectorAll('.math').length")
            if has_math and not wait_for(browser, TYPESET):
                seen["untypeset"].append(doc.name)
            elif has_math:
                seen["inline"] += browser.execute_script(
                    "return document.querySelectorAll('main span.nobr span.math').length")
                found = browser.execute_script(PUNCTUATION_AFTER_MATH)
                browser.set_window_size(1400, 1000)
                found += browser.execute_script(PUNCTUATION_AFTER_MATH)
                if found:
                    seen["punctuation"][doc.name] = found
                found = browser.execute_script(WIDE_EQUATIONS)
                if found:
                    seen["equations"][doc.name] = found
                browser.set_window_size(1280, 1000)
            browser.execute_script(OPEN_ANSWERS)
            seen["formulas"] += browser.execute_script(
                "return document.querySelectorAll('main span.math mjx-math').length")
            found = settled(browser, CUT_INLINE_FORMULAS)
            if found:
                seen["cut"][doc.name] = found
            browser.set_window_size(360, 800)
            found = settled(browser, SIDEWAYS_PAGE)
            if found:
                seen["sideways"][doc.name] = found
            found = settled(browser, SCROLLING_INLINE_FORMULAS)
            if found:
                seen["scrolling"][doc.name] = found
        # the measurement itself: an 80-column line fits, an 86-column one does not
        browser.set_window_size(1280, 1000)
        browser.get(f"{served_book}/book/ch01_rnn.html")
        seen["fits"] = browser.execute_script("""
            const pre = document.querySelector('main div.cell_input pre');
            const keep = pre.innerHTML, out = [];
            for (const n of [80, 86]) {
              pre.textContent = 'x'.repeat(n); out.push(pre.scrollWidth <= pre.clientWidth + 1);
            }
            pre.innerHTML = keep;
            return out;""")
    finally:
        browser.set_window_size(1280, 1600)
    return seen


@pytest.mark.slow
def test_no_display_equation_is_wider_than_its_column(every_page):
    """At a 1400-pixel window (the reviewer's), every display equation fits its content column."""
    assert not every_page["untypeset"], f"formulas were not typeset: {every_page['untypeset']}"
    wide = every_page["equations"]
    assert not wide, f"display equations wider than the content column (split them with aligned): {wide}"


@pytest.mark.slow
def test_no_code_block_scrolls_sideways_at_1280_pixels(every_page):
    """Every code cell, printed output and show() listing fits its column at a 1280-pixel window.

    The 80-column limit of tests/test_book.py is only worth something if 80 columns fit:
    _static/book.css sizes the code font so that they do.
    """
    blocks, fits, wide = every_page["blocks"], every_page["fits"], every_page["code"]
    assert blocks > 100, f"only {blocks} code cells found: the selector no longer matches the theme"
    assert fits == [True, False], f"80 columns fit, 86 do not: got {fits}"
    assert not wide, f"code blocks that scroll sideways at 1280 pixels: {wide}"


@pytest.mark.slow
def test_every_table_fits_its_container_at_1280_pixels(every_page):
    """Appendix A's six-column table ran 18 px past its container at 1280 pixels and was cut off
    at the edge; record tables are set at 0.9 em (_static/book.css) so that it fits."""
    assert not every_page["tables"], f"tables cut off at their container: {every_page['tables']}"


@pytest.mark.slow
def test_no_line_begins_with_the_punctuation_after_a_formula(every_page):
    """Chinese typesetting keeps a comma or full stop on the line of the word before it. At 1280
    and 1400 pixels, 19 lines began with the punctuation after an inline formula before
    _ext/reader_tools.py bound the two together."""
    assert every_page["inline"] > 200, "few formulas are bound to their punctuation"
    assert not every_page["punctuation"], every_page["punctuation"]


@pytest.mark.slow
def test_no_inline_formula_is_cut_off_at_1280_pixels(every_page):
    """An inline formula cannot break across lines, and the theme cuts off what does not fit its
    column: chapter 12's exercise 2 answer lost the result matrix at the right of its equation.
    Such a formula belongs in a display equation (split with aligned where it is long)."""
    assert every_page["pages"] == len(sync_book.toc_files())
    assert every_page["formulas"] > 2000, "few inline formulas found: the selector no longer matches"
    assert not every_page["cut"], f"inline formulas cut off at their column: {every_page['cut']}"


@pytest.mark.slow
def test_no_page_scrolls_sideways_on_a_phone(every_page):
    """Before _static/book.css handled narrow screens, eight pages scrolled sideways at 360
    pixels: long inline code in headings and prose, a glued BLEU signature, a reference's
    address, chapter 12's title. Now they break where they must, and an inline formula too wide
    for a phone scrolls inside its own box while the page stays put."""
    assert not every_page["sideways"], f"pages wider than a 360-pixel screen: {every_page['sideways']}"


@pytest.mark.slow
def test_no_inline_formula_scrolls_on_a_phone(every_page):
    """At 360 pixels, 18 inline formulas were wider than their line and had to be scrolled
    inside their own box (an answer's ‖Λ_m W_hh‖₂ = ‖Λ_m‖₂ = max_i(1 − h²), chapter 12's
    a/ℓ identity). A formula that long is a display equation now; the phone stylesheet's
    scrolling box stays as the fallback."""
    assert every_page["formulas"] > 2000, "few inline formulas found: the selector no longer matches"
    assert not every_page["scrolling"], f"inline formulas that scroll at 360 px: {every_page['scrolling']}"
