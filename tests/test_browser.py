"""A real browser opens the built chapter 1: typeset math, loaded figures, the Colab link.

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them). Without them
the test skips with the reason, except under CI (``CI`` set), where it fails instead.
"""
import functools
import http.server
import os
import shutil
import threading
import time

import pytest

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
