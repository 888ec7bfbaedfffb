"""The built documentation site in a real browser, opened from disk (as the README says) and served over HTTP: every
link of every page, followed from the home page, reaches a page (not a folder's file listing, not a missing file)
that logs no console error; search finds a page both ways."""

from __future__ import annotations

import functools
import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urldefrag

import pytest

from tests.docs.browser import Browser, Page
from tests.docs.pages import REPO

SEARCH = """(() => {
  const input = document.querySelector('.md-search__input');
  input.focus();
  input.value = %s;
  input.dispatchEvent(new Event('input', {bubbles: true}));
  input.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true}));
  return true;
})()"""


# A minute of page loads: the core lane runs it, `make unit` leaves it out.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    assert build.returncode == 0, build.stderr
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with Browser() as opened:
        yield opened


@pytest.fixture(scope="module")
def served(site) -> Iterator[str]:
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def crawl(browser: Browser, root: str) -> dict[str, Page]:
    """Every page reachable by links from ``root + 'index.html'`` without leaving ``root``."""
    pages: dict[str, Page] = {}
    waiting = [root + "index.html"]
    while waiting:
        url = waiting.pop()
        if url in pages:
            continue
        page = pages[url] = browser.open(url)
        for link in page.links:
            target, _ = urldefrag(link)
            if target.startswith(root) and target not in pages and not target.endswith((".png", ".xml", ".gz")):
                waiting.append(target)
    return pages


def problems(pages: dict[str, Page]) -> list[str]:
    found = []
    for url, page in pages.items():
        if page.load_error:
            found.append(f"{url}: {page.load_error}")
        elif not page.title.endswith("mds-streaming"):
            # A folder's file listing ("Index of /…"), a server's 404 or another error page.
            found.append(f"{url}: not a page of the site ({page.title!r})")
        found += [f"{url}: {error}" for error in page.errors]
    return found


def nav_pages() -> int:
    """How many pages mkdocs.yml's navigation names."""
    return sum(1 for line in (REPO / "mkdocs.yml").read_text().splitlines() if line.rstrip().endswith(".md"))


@pytest.mark.parametrize("where", ["disk", "served"])
def test_every_link_reaches_a_page_without_errors(site, browser, served, where):
    root = site.as_uri() + "/" if where == "disk" else served
    pages = crawl(browser, root)
    assert problems(pages) == []
    assert len(pages) >= nav_pages(), sorted(pages)


@pytest.mark.parametrize("where", ["disk", "served"])
def test_search_finds_a_page(site, browser, served, where):
    root = site.as_uri() + "/" if where == "disk" else served
    page = browser.open(root + "index.html")
    assert page.errors == []
    browser.evaluate(SEARCH % '"dataframe_to_mds"')
    found = browser.wait_for("document.querySelectorAll('.md-search-result__item').length")
    assert found and found > 0, browser.evaluate("document.querySelector('.md-search-result__meta').innerText")
    assert browser.errors() == []


CLIPPED = """[...document.querySelectorAll('.md-typeset pre > code')]
  .filter(code => code.scrollWidth > code.clientWidth + 1).map(code => code.innerText.split('\\n')[0])"""


def test_no_code_line_is_clipped_at_a_laptops_width(site, browser):
    # 1280 px wide, as a laptop shows the site: every code block's lines wrap within it (docs/assets/stylesheets).
    browser.call(
        "Emulation.setDeviceMetricsOverride",
        session=browser.session,
        width=1280,
        height=900,
        deviceScaleFactor=1,
        mobile=False,
    )
    try:
        for page in ("spark.html", "table-to-training.html", "cli.html", "incremental-job.html"):
            browser.open(site.as_uri() + "/" + page)
            assert browser.evaluate(CLIPPED) == [], page
            assert browser.evaluate("document.querySelectorAll('.md-typeset pre > code').length") > 0, page
    finally:
        browser.call("Emulation.clearDeviceMetricsOverride", session=browser.session)
