"""Check the course website and the notebook explorer in a real browser (`make check-site`).

    .venv-site/bin/python tools/check_site.py [--site build/site] [--screenshots build/screenshots]
        [--lab-python .venv/bin/python] [--notebook notebooks/01_2_what_ece_can_tell.ipynb]
        [--chromium /usr/bin/chromium] [--widths 390,1366] [--fast] [--skip-lab] [--skip-pages]

Part 1, the site: serves build/site on 127.0.0.1 and opens every page in headless Chromium (Debian's
`chromium`, driven by Playwright through `executable_path`; Playwright's own browser download is never
used), once in a phone's viewport (390 px wide) and once in a laptop's (1366 px; --widths changes them).
At each width a page fails when it does not load (HTTP status other than 200), when an image has no pixels
(naturalWidth 0) or is not rendered (zero size while visible), when the page logs a console error or
throws, when it requests anything outside the site (the site must work offline), when a printed output
is cut off (a `pre` of an output area wider than its box: scrollWidth > clientWidth), when maths on it is
not typeset by MathJax, or, where the navigation sits beside the article, when its search box is not in
view on arrival. The front page must show its "Start here" block on the first screen. Once, at the widest
width, every internal link and anchor must resolve (an existing page and an element with that id). On the
front page and the first notebook, at each width, the ☰ button must fold and open the navigation and the
"Contents" button must open the page's table of contents (or that table must be in view already). A
screenshot of each page at each width (and of the first figures of each page) goes to build/screenshots/,
with the navigation open in nav-*.png.

What the readers of issue 53 found, checked at each width:
- Getting the code: no page says REPOSITORY-URL. With an address (book/website.py's repository_url:
  `[tool.course] repository` in pyproject.toml, else the `origin` remote), the front page's and the README
  page's `git clone` name it and every page's header links it, in view on arrival; without one, the front
  page says where to set it and the header has no repository link (repo-*.png).
- Copy buttons: every code cell and code block has one (printed outputs none), visible on a touch screen,
  and a click puts exactly the code on the clipboard (copy-*.png).
- Figures: each is shown at 90% of its drawn width or more, or is marked to enlarge; a click on the first
  such figure of a notebook opens it on the same page (the URL unchanged) at its drawn size, and its ×
  button closes it (zoom-*.png).
- Tables: a table that scrolls sideways keeps its row labels in view and gives them at most 45% of its
  box; where the navigation sits beside the article no table of 8 data columns or fewer scrolls sideways
  (notebook 05's verdict column was out of view at 1366 px; table-*.png).
- Search: a word's results list every lesson before any answer twin, and each twin's result is titled
  "Answers: …" and marked "answers"; no two results have one title (search-results-*.png).
- A favicon: every page names one, and it loads as an image.

Part 2, the explorer: starts JupyterLab from .venv on 127.0.0.1 with a token, on a temporary copy of the
notebook (the committed file is never touched), runs all cells from the Run menu, finds the cell tagged
`explorer`, moves one of its controls (a dropdown, a slider, a toggle or a checkbox) and checks that the
output area changes, by comparing screenshots taken before and after (saved as lab-explorer-*.png).

Exits 1 with one line per failure; every line says what to look at.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "book"))
from check_links import pages  # noqa: E402
from website import NO_ADDRESS, README_PLACEHOLDER, repository_url  # noqa: E402  (book/website.py: stdlib only)

from playwright.sync_api import Error as PlaywrightError  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# A phone (an iPhone 12 to 15 is 390 × 844 CSS px) and a laptop; a width at or above NARROW_MAX + 1 is a laptop's.
WIDTHS = (390, 1366)
NARROW_MAX = 991  # the themes show the navigation beside the article from 992 px on
SEARCH_WORD = "calibration"
# A table of more data columns than this may scroll sideways on a laptop (its row labels stay in view); one of
# this many or fewer fits the article's column there (notebook 05's claims table, 6 columns, did not).
WIDE_TABLE = 8


def viewport(width: int) -> dict:
    return {"width": width, "height": 844 if width <= NARROW_MAX else 900}


def log(message: str) -> None:
    print(message, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(folder: Path):
    """A static file server for `folder` on 127.0.0.1, in a thread; yields its base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):
            if not isinstance(sys.exc_info()[1], ConnectionError):  # the browser left a page early
                super().handle_error(request, client_address)

    handler = functools.partial(Quiet, directory=str(folder))
    server = Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


# ----------------------------------------------------------------------------------------------------------
# Part 1: every page of the site
# ----------------------------------------------------------------------------------------------------------

_PAGE_FACTS = """() => {
  for (const d of document.querySelectorAll('details')) d.open = true;   // folded cells: show their images
  const ids = [...document.querySelectorAll('[id]')].map(e => e.id)
      .concat([...document.querySelectorAll('a[name]')].map(e => e.name));
  const links = [...document.querySelectorAll('a[href]')]
      .map(a => ({href: a.href, raw: a.getAttribute('href'), text: a.textContent.trim().slice(0, 60)}));
  const images = [...document.querySelectorAll('img')].map(img => {
    const r = img.getBoundingClientRect();
    const visible = img.checkVisibility ? img.checkVisibility({checkOpacity: false, checkVisibilityCSS: true}) : true;
    return {src: img.getAttribute('src').slice(0, 100), complete: img.complete, natural: img.naturalWidth,
            width: r.width, height: r.height, visible: visible};
  });
  const icon = document.querySelector('link[rel~="icon"]');
  return {ids, links, images, title: document.title, icon: icon ? icon.href : null,
          placeholder: document.body.innerText.includes('REPOSITORY-URL')};
}"""

# Figures (notebook outputs): how large each is shown against how it was drawn, and whether it is marked to
# enlarge (course.js). Folded cells were opened by _PAGE_FACTS.
_FIGURES = """() => [...document.querySelectorAll('div.cell_output img')].filter(img => img.checkVisibility())
  .map(img => ({src: img.getAttribute('src').split('/').pop(), natural: img.naturalWidth,
                shown: img.getBoundingClientRect().width,
                zoomable: !!img.closest('a.course-zoom.course-zoomable')}))"""

# Tables (pandas): the widest row-label column against its box, and whether the table scrolls sideways (and
# which of its header cells are then out of view).
_TABLES = """() => [...document.querySelectorAll('div.cell_output table.dataframe')].filter(t => t.checkVisibility())
  .map(table => {
    const box = table.closest('.output') || table.parentElement;
    const b = box.getBoundingClientRect();
    const labels = [...table.querySelectorAll('tbody th')].map(th => th.getBoundingClientRect().width);
    const hidden = [...table.querySelectorAll('thead th')]
      .filter(th => th.textContent.trim() && th.getBoundingClientRect().right > b.right + 1)
      .map(th => th.textContent.trim());
    // Scrolled to its right end, the row labels stay in view (sticky), so a reader knows which row is which.
    const first = table.querySelector('tbody th');
    let sticky = true;
    if (first && box.scrollWidth > box.clientWidth + 1) {
      const before = box.scrollLeft;
      box.scrollLeft = box.scrollWidth;
      sticky = first.getBoundingClientRect().left >= b.left - 1;
      box.scrollLeft = before;
    }
    const row = table.querySelector('tbody tr');
    return {box: box.clientWidth, scroll: box.scrollWidth, label: Math.max(0, ...labels), hidden, sticky,
            columns: row ? row.querySelectorAll('td').length : 0,
            headers: [...table.querySelectorAll('thead th')].map(th => th.textContent.trim()).filter(Boolean)};
  })"""

# Printed outputs (stream and plain-text results, in notebook pages): every `pre` of an output area, how many
# lines it prints, and those wider than their box (cut off: the reader must scroll sideways to see the end).
_OUTPUT_TEXT = """() => {
  const out = {blocks: 0, lines: 0, cut: []};
  for (const pre of document.querySelectorAll('div.cell_output pre')) {
    if (!pre.checkVisibility()) continue;
    out.blocks += 1;
    const lines = pre.textContent.split('\\n').filter(line => line.trim());
    out.lines += lines.length;
    if (pre.scrollWidth > pre.clientWidth + 1) {
      const longest = lines.reduce((a, b) => (b.length > a.length ? b : a), '');
      out.cut.push({scroll: pre.scrollWidth, client: pre.clientWidth, line: longest.slice(0, 90)});
    }
  }
  return out;
}"""

# Whether a selector has an element that a reader sees: rendered, not transparent, inside the viewport, and
# on top at its centre (not under another box).
_IN_VIEW = """(selector) => [...document.querySelectorAll(selector)].some(e => {
  if (!e.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})) return false;
  const r = e.getBoundingClientRect();
  if (r.width < 1 || r.height < 1 || r.top < 0 || r.left < 0 || r.bottom > innerHeight || r.right > innerWidth)
    return false;
  const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  return !!top && (e.contains(top) || top.contains(e));
})"""

# Maths: the elements MyST marks as maths, and the ones MathJax has typeset (after its startup promise).
_MATHS = """async () => {
  const maths = document.querySelectorAll('.math').length;
  if (maths && window.MathJax?.startup?.promise) await window.MathJax.startup.promise;
  return {maths, typeset: document.querySelectorAll('mjx-container').length,
          errors: document.querySelectorAll('mjx-merror').length, loaded: !!window.MathJax?.startup};
}"""

NAV_LINKS = ".bd-docs-nav a.reference"  # the navigation's entries (the site's pages)
TOC_LINKS = ".bd-toc-nav a, #pst-page-toc-nav a"  # the page's table of contents ("Contents")
SIDEBAR_SEARCH = ".bd-sidebar-primary .search-button-field"


def _site_context(browser, base: str, width: int):
    """A browser context with the viewport of `width` (a phone's below 992 px) that lets no request leave the
    site; returns (context, page, errors, external): the lists fill as pages log errors and ask for URLs."""
    narrow = width <= NARROW_MAX
    context = browser.new_context(viewport=viewport(width), is_mobile=narrow, has_touch=narrow)
    external: list[str] = []

    def route(route_):
        url = route_.request.url
        if url.startswith(base):
            route_.continue_()
        else:
            external.append(url)
            route_.abort()

    context.route("**/*", route)
    # Every page as a reader arriving from outside sees it: the theme restores the sidebar's scroll position
    # from the previous page (sessionStorage), and with none scrolls it to the page's own entry.
    context.add_init_script("try { sessionStorage.removeItem('sidebar-scroll-top'); } catch (e) {}")
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught exception: {e}"))
    return context, page, errors, external


def check_pages(browser, site: Path, base: str, shots: Path, width: int, links: bool) -> list[str]:
    """Every page at one width; with `links`, every internal link and anchor too, and the search page."""
    failures: list[str] = []
    context, page, errors, external = _site_context(browser, base, width)
    narrow = width <= NARROW_MAX
    at = f"at {width} px"
    printed = {"blocks": 0, "lines": 0, "cut": 0}

    facts: dict[str, dict] = {}
    for path in pages(site):
        rel = path.relative_to(site).as_posix()
        url = f"{base}/{rel}"
        errors.clear()
        external.clear()
        try:
            response = page.goto(url, wait_until="load", timeout=60_000)
            page.wait_for_load_state("networkidle", timeout=30_000)
        except PlaywrightError as error:
            failures.append(f"{rel} {at}: the page did not load: {error.message.splitlines()[0]}")
            continue
        final = page.url.split("#")[0]
        if response is None or response.status != 200:
            failures.append(f"{rel} {at}: the page did not load (HTTP {response.status if response else 'none'})")
            continue
        # On arrival, before anything scrolls: the sidebar's search box is in view (where the sidebar is shown
        # beside the article; the theme scrolls the sidebar to the page's entry as it loads).
        name = rel.replace("/", "__").removesuffix(".html")
        if not narrow and page.locator(SIDEBAR_SEARCH).count() and not page.evaluate(_IN_VIEW, SIDEBAR_SEARCH):
            page.screenshot(path=str(shots / f"{name}-{width}-arrival.png"))
            failures.append(f"{rel} {at}: the sidebar's search box is not in view on arrival "
                            f"(see {name}-{width}-arrival.png)")
        info = page.evaluate(_PAGE_FACTS)
        # A redirect page (the site's index.html) is checked as the page it lands on.
        landed = final[len(base) + 1:] if final.startswith(base) else final
        facts[rel] = info
        facts.setdefault(landed, info)
        if rel == "docs/guide.html":  # the front page: what to do first, first
            start = page.locator(".admonition.course-start")
            box = start.bounding_box() if start.count() else None
            if box is None or box["y"] > viewport(width)["height"] - 60:
                failures.append(f"{rel} {at}: the front page does not show its \"Start here\" block on the "
                                f"first screen (see {name}-{width}.png)")
        text = page.evaluate(_OUTPUT_TEXT)
        printed["blocks"] += text["blocks"]
        printed["lines"] += text["lines"]
        printed["cut"] += len(text["cut"])
        if text["cut"]:
            first = text["cut"][0]
            failures.append(f"{rel} {at}: {len(text['cut'])} of {text['blocks']} printed outputs are cut off "
                            f"(wider than their box, {first['scroll']} px in {first['client']} px), e.g. "
                            f"{first['line']!r}; see {name}-{width}.png")
        maths = page.evaluate(_MATHS)
        if maths["maths"] and (maths["typeset"] < maths["maths"] or maths["errors"]):
            failures.append(f"{rel} {at}: {maths['maths']} maths elements, {maths['typeset']} typeset by MathJax, "
                            f"{maths['errors']} with errors (MathJax {'loaded' if maths['loaded'] else 'not loaded'})")
        failures += _check_figures_and_tables(page, rel, name, width)
        if not info["icon"]:
            failures.append(f"{rel}: the page names no favicon (no <link rel=icon>)")
        if info["placeholder"]:
            failures.append(f"{rel} {at}: the page says REPOSITORY-URL, an address that does not exist")
        # Show each page from its top (the sidebar too: the theme scrolled it to the page's entry).
        page.evaluate("document.querySelector('.bd-sidebar-primary')?.scrollTo(0, 0); window.scrollTo(0, 0)")
        page.screenshot(path=str(shots / f"{name}-{width}.png"))
        if links:  # the figures once, at the laptop's width
            for k, figure in enumerate(page.locator("div.cell_output img").all()[:2]):
                figure.scroll_into_view_if_needed()
                figure.locator("xpath=ancestor::div[contains(@class,'cell_output')][1]").screenshot(
                    path=str(shots / f"{name}--figure-{k + 1}.png"))
        if not info["title"].strip():
            failures.append(f"{rel}: the page has no title")
        for img in info["images"]:
            if not img["complete"] or img["natural"] == 0:
                failures.append(f"{rel} {at}: image {img['src']!r} has no pixels "
                                "(naturalWidth 0: missing or broken file)")
            elif img["visible"] and (img["width"] == 0 or img["height"] == 0):
                failures.append(f"{rel} {at}: image {img['src']!r} is not rendered "
                                f"(shown {img['width']}×{img['height']} px)")
        for error in dict.fromkeys(errors):
            failures.append(f"{rel} {at}: {error}")
        for url_ in dict.fromkeys(external):
            failures.append(f"{rel} {at}: requests {url_} from outside the site (it must work offline)")
        log(f"  {rel} {at}: {len(info['images'])} images, {len(info['links'])} links, {text['blocks']} printed "
            f"outputs ({len(text['cut'])} cut off), {len(errors)} console errors")
    log(f"  {at}: {printed['blocks']} printed outputs with {printed['lines']} lines, {printed['cut']} cut off")

    if links:
        failures += _check_links(facts, base)
    failures += _check_search(page, base, shots, errors, width)
    context.close()
    return failures


def _check_figures_and_tables(page, rel: str, name: str, width: int) -> list[str]:
    """A page's figures are legible (shown at 90% of their drawn width or more, or marked to enlarge), its
    row-label columns are no wider than 45% of their box, and where the navigation sits beside the article
    (a laptop) no table scrolls sideways."""
    failures: list[str] = []
    at = f"at {width} px"
    small = [f for f in page.evaluate(_FIGURES) if f["natural"] and f["shown"] < 0.9 * f["natural"]
             and not f["zoomable"]]
    if small:
        f = small[0]
        failures.append(f"{rel} {at}: {len(small)} figures are shown smaller than drawn with no way to enlarge "
                        f"them, e.g. {f['src']} ({f['shown']:.0f} of {f['natural']} px; see {name}-{width}.png)")
    for k, table in enumerate(page.evaluate(_TABLES)):
        scrolls = table["scroll"] > table["box"] + 1
        if scrolls and table["label"] > 0.45 * table["box"]:
            failures.append(f"{rel} {at}: table {k + 1} scrolls sideways and its row labels take "
                            f"{table['label']:.0f} of {table['box']} px (over 45%; headers {table['headers'][:4]})")
        if scrolls and not table["sticky"]:
            failures.append(f"{rel} {at}: table {k + 1}'s row labels scroll out of view with its columns")
        if width > NARROW_MAX and scrolls and table["columns"] <= WIDE_TABLE:
            failures.append(f"{rel} {at}: table {k + 1} ({table['columns']} columns) scrolls sideways "
                            f"({table['scroll']} px in {table['box']} px); out of view: "
                            f"{table['hidden'] or table['headers'][-1:]}")
    return failures


def _check_links(facts: dict[str, dict], base: str) -> list[str]:
    """Every internal link of the pages opened: an existing file, and an element with the anchor's id."""
    failures: list[str] = []
    statuses: dict[str, int] = {}
    for rel, info in facts.items():
        for link in info["links"]:
            href = link["href"]
            if not href.startswith(base + "/"):
                continue
            target, _, fragment = href[len(base) + 1:].partition("#")
            target = target.split("?")[0]
            if target == "" or target.endswith("/"):
                target += "index.html"
            if target not in facts:
                if target not in statuses:
                    statuses[target] = _status(f"{base}/{target}")
                if statuses[target] != 200:
                    failures.append(f"{rel}: link {link['raw']!r} ({link['text']!r}) -> {target}: "
                                    f"HTTP {statuses[target]}, no such page")
                    continue
            if fragment and target in facts and urllib.request.unquote(fragment) not in facts[target]["ids"]:
                failures.append(f"{rel}: link {link['raw']!r} ({link['text']!r}) -> no element "
                                f"id={fragment!r} on {target}")
    return failures


_SEARCH_RESULTS = """() => [...document.querySelectorAll('#search-results ul.search li > a')].map(a => ({
  href: a.getAttribute('href'), title: a.textContent.trim(),
  mark: getComputedStyle(a, '::before').content.replace(/"/g, '')}))"""


def _check_search(page, base: str, shots: Path, errors: list[str], width: int) -> list[str]:
    """The theme's search page finds a word of the course; every lesson comes before any answer twin
    (book/search_scorer.js), each twin's result is titled "Answers: …" (book/website.py) and marked
    "answers" (course.css), and no two results have one title."""
    failures: list[str] = []
    at = f"at {width} px"
    errors.clear()
    page.goto(f"{base}/search.html?q={SEARCH_WORD}", wait_until="load")
    try:
        page.wait_for_selector("#search-results ul.search li", timeout=30_000)
        page.wait_for_selector("#search-results .search-summary", timeout=60_000)  # the search has finished
        results = page.evaluate(_SEARCH_RESULTS)
        titles = [r["title"] for r in results]
        twin = [r["href"].startswith("notebooks/solutions/") for r in results]
        log(f"  search for {SEARCH_WORD!r} {at}: {len(results)} results, {sum(twin)} of them answer twins")
        twice = sorted({t for t in titles if titles.count(t) > 1})
        if twice:
            failures.append(f"search.html?q={SEARCH_WORD} {at}: {len(twice)} titles are listed more than once, "
                            f"e.g. {twice[0]!r} (a lesson and its answer twin under one title?)")
        if True in twin and False in twin[twin.index(True):]:
            late = results[twin.index(True) + twin[twin.index(True):].index(False)]
            failures.append(f"search.html?q={SEARCH_WORD} {at}: a lesson's result ({late['title']!r}) comes after "
                            f"an answer twin's ({results[twin.index(True)]['title']!r}): lessons first")
        for result, is_twin in zip(results, twin):
            if is_twin and not (result["title"].startswith("Answers: ") and "answers" in result["mark"]):
                failures.append(f"search.html?q={SEARCH_WORD} {at}: the answer twin's result "
                                f"{result['title']!r} is not titled \"Answers: …\" and marked \"answers\"")
                break
    except PlaywrightError:
        failures.append(f"search.html {at}: searching for {SEARCH_WORD!r} found nothing (is searchindex.js built?)")
    page.screenshot(path=str(shots / f"search-results-{width}.png"), full_page=True)
    for error in dict.fromkeys(errors):
        failures.append(f"search.html?q={SEARCH_WORD} {at}: {error}")
    return failures


def check_reader_items(browser, site: Path, base: str, shots: Path, width: int) -> list[str]:
    """At one width, what the readers of issue 53 could not do: get the code (a `git clone` with the
    repository's address, or a page that says where it is set, and the header's link to it), copy a code
    cell (its copy button), read a figure on a phone (the figure viewer) and see the favicon."""
    failures: list[str] = []
    context, page, errors, external = _site_context(browser, base, width)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    at = f"at {width} px"
    address = repository_url(ROOT)
    notebooks = sorted((site / "notebooks").glob("*.html"))

    # Getting the code: the front page's "Start here" block, the README's page and every header.
    for rel in ["docs/guide.html", "README.html"]:
        page.goto(f"{base}/{rel}", wait_until="networkidle")
        clone = [t for t in page.locator("div.highlight pre").all_inner_texts() if "git clone" in t]
        header = page.locator("a.btn-course-repository")
        where = "the \"Start here\" block" if rel == "docs/guide.html" else "the README's page"
        if not clone:
            failures.append(f"{rel} {at}: {where} shows no `git clone` command")
        elif address and f"git clone --depth 1 {address} " not in clone[0]:
            failures.append(f"{rel} {at}: {where}'s `git clone` does not name the repository {address}: "
                            f"{clone[0].splitlines()[0]!r}")
        elif not address and README_PLACEHOLDER not in clone[0]:
            failures.append(f"{rel} {at}: with no repository address set, {where}'s `git clone` names "
                            f"{clone[0].splitlines()[0]!r}, which is no address of this repository")
        if address:
            if not header.count() or header.first.get_attribute("href") != address:
                failures.append(f"{rel} {at}: the header does not link the repository {address}")
            elif not page.evaluate(_IN_VIEW, "a.btn-course-repository"):
                failures.append(f"{rel} {at}: the header's repository link is not in view on arrival")
        elif header.count():
            failures.append(f"{rel} {at}: the header links a repository, but none is set")
        if rel == "docs/guide.html" and not address:
            text = page.locator(".admonition.course-start").inner_text()
            if "[tool.course]" not in text or "built without the repository" not in text:
                failures.append(f"{rel} {at}: no repository address is set, and the \"Start here\" block does "
                                f"not say so (expected: {NO_ADDRESS[:60]}…)")
        page.screenshot(path=str(shots / f"repo-{rel.split('/')[-1].removesuffix('.html')}-{width}.png"))
    log(f"  repository {at}: {address or 'no address set ([tool.course] empty, no public origin remote)'}")

    # The favicon loads as an image.
    icon = page.evaluate("""() => new Promise(done => {
      const link = document.querySelector('link[rel~="icon"]');
      if (!link) return done(0);
      const img = new Image(); img.onload = () => done(img.naturalWidth || 1); img.onerror = () => done(0);
      img.src = link.href; })""")
    if not icon:
        failures.append(f"README.html {at}: the favicon does not load as an image")

    if notebooks:
        rel = f"notebooks/{notebooks[0].name}"
        page.goto(f"{base}/{rel}", wait_until="networkidle")
        # Copy buttons: every code cell's and code block's, none on an output; a click copies the code.
        blocks = page.evaluate("""() => [...document.querySelectorAll('div.highlight pre')].map(pre => ({
          output: !!pre.closest('.cell_output'),
          button: !!pre.parentElement.querySelector(':scope > button.copybtn')}))""")
        inputs = [b for b in blocks if not b["output"]]
        missing = sum(not b["button"] for b in inputs)
        on_outputs = sum(b["button"] for b in blocks if b["output"])
        if not inputs or missing:
            failures.append(f"{rel} {at}: {missing} of {len(inputs)} code cells have no copy button")
        if on_outputs:
            failures.append(f"{rel} {at}: {on_outputs} printed outputs have a copy button (code cells only)")
        cell = page.locator("div.cell_input div.highlight").first
        if cell.count():
            cell.scroll_into_view_if_needed()
            button = cell.locator("button.copybtn")
            if width <= NARROW_MAX and float(button.evaluate("b => getComputedStyle(b).opacity")) < 0.5:
                failures.append(f"{rel} {at}: the copy button is not shown on a touch screen (no hover there)")
            code = cell.locator("pre").inner_text()
            page.evaluate("navigator.clipboard.writeText('')")
            button.click()
            page.wait_for_timeout(300)
            cell.screenshot(path=str(shots / f"copy-{width}.png"))
            copied = page.evaluate("navigator.clipboard.readText()")
            log(f"  copy button {at}: {len(inputs)} code blocks with a button, {on_outputs} outputs with one; "
                f"the first copied {len(copied)} characters")
            if copied.strip() != code.strip():
                failures.append(f"{rel} {at}: the copy button put {copied[:60]!r} on the clipboard, not the cell's "
                                f"code {code[:60]!r}")
        # The figure viewer: the first figure marked to enlarge opens on this page at its drawn size.
        zoomable = page.locator("div.cell_output a.course-zoom.course-zoomable img")
        if zoomable.count():
            figure = zoomable.first
            figure.scroll_into_view_if_needed()
            before = page.evaluate("[location.href, scrollY]")
            natural = figure.evaluate("img => img.naturalWidth")
            shown = figure.bounding_box()["width"]
            figure.click()
            page.wait_for_timeout(400)
            viewer = page.locator(".course-lightbox")
            big = viewer.locator("img")
            if not viewer.count() or not viewer.first.is_visible():
                failures.append(f"{rel} {at}: a click on a figure marked to enlarge opened no viewer "
                                f"(url {page.url})")
            else:
                size = big.first.bounding_box()["width"]
                page.screenshot(path=str(shots / f"zoom-{width}.png"))
                if page.url != before[0]:
                    failures.append(f"{rel} {at}: enlarging a figure left the page (now {page.url})")
                if size < 0.95 * natural:
                    failures.append(f"{rel} {at}: the enlarged figure is {size:.0f} px wide, drawn {natural} px")
                viewer.locator(".course-lightbox-close").click()
                page.wait_for_timeout(200)
                if viewer.count():
                    failures.append(f"{rel} {at}: the figure viewer's × button did not close it")
                elif abs(page.evaluate("scrollY") - before[1]) > 2:
                    failures.append(f"{rel} {at}: closing the figure viewer moved the page")
                log(f"  figure viewer {at}: shown {shown:.0f} px, enlarged {size:.0f} px (drawn {natural} px)")
        elif width <= NARROW_MAX:
            failures.append(f"{rel} {at}: no figure is marked to enlarge on a phone (course.js)")
    # Notebook 05's claims table (its verdict column), as a reader sees it.
    for nb in notebooks:
        if nb.name.startswith("05"):
            page.goto(f"{base}/notebooks/{nb.name}", wait_until="networkidle")
            page.evaluate("for (const d of document.querySelectorAll('details')) d.open = true")
            table = page.locator("div.cell_output table.dataframe", has=page.locator("th", has_text="verdict"))
            if table.count():
                table.first.evaluate("t => t.scrollIntoView({block: 'start'})")
                page.wait_for_timeout(200)
                page.screenshot(path=str(shots / f"table-05-{width}.png"))
    for error in dict.fromkeys(errors):
        failures.append(f"reader checks {at}: {error}")
    for url_ in dict.fromkeys(external):
        failures.append(f"reader checks {at}: requests {url_} from outside the site")
    context.close()
    return failures


def check_navigation(browser, site: Path, base: str, shots: Path, width: int) -> list[str]:
    """The ☰ and "Contents" buttons, clicked as a reader would, on the front page and the first notebook: ☰
    opens the navigation where it is folded away (a phone) and folds and reopens it where it is shown (a
    laptop); "Contents" opens the page's table of contents where that is not already in view. Each state
    is screenshot as nav-<page>-<width>-<state>.png."""
    failures: list[str] = []
    context, page, errors, external = _site_context(browser, base, width)
    notebooks = sorted((site / "notebooks").glob("*.html"))
    targets = ["docs/guide.html"] + [f"notebooks/{notebooks[0].name}"] * bool(notebooks)
    at = f"at {width} px"

    def shot(rel: str, state: str) -> str:
        name = f"nav-{rel.rsplit('/', 1)[-1].removesuffix('.html')}-{width}-{state}.png"
        page.screenshot(path=str(shots / name))
        return name

    def seen(selector: str) -> bool:
        return page.evaluate(_IN_VIEW, selector)

    def settle() -> None:
        page.wait_for_timeout(400)  # the sidebar's slide and the dialog's opening

    for rel in targets:
        errors.clear()
        page.goto(f"{base}/{rel}", wait_until="networkidle")
        # ☰: the site's navigation
        button = page.locator(".primary-toggle:visible")
        if not button.count():
            failures.append(f"{rel} {at}: no ☰ button in view (see {shot(rel, 'no-button')})")
            continue
        if seen(NAV_LINKS):  # shown beside the article: ☰ folds it away, and a second click opens it again
            button.first.click()
            settle()
            if seen(NAV_LINKS):
                failures.append(f"{rel} {at}: clicking ☰ did not fold the navigation away "
                                f"(see {shot(rel, 'folded')})")
            else:
                shot(rel, "folded")
            button.first.click()
            settle()
            if not seen(NAV_LINKS):
                failures.append(f"{rel} {at}: clicking ☰ again did not open the navigation "
                                f"(see {shot(rel, 'reopened')})")
            else:
                shot(rel, "reopened")
        else:  # folded away (a phone): ☰ opens it over the page, and Escape closes it
            button.first.click()
            settle()
            name = shot(rel, "open")
            if not seen(NAV_LINKS):
                failures.append(f"{rel} {at}: clicking ☰ did not open the navigation (see {name})")
            else:
                page.keyboard.press("Escape")
                settle()
                if seen(NAV_LINKS):
                    failures.append(f"{rel} {at}: Escape did not close the navigation (see {shot(rel, 'closed')})")
        # "Contents": the page's own table of contents
        if page.locator(TOC_LINKS).count():
            contents = page.locator(".secondary-toggle:visible")
            if seen(TOC_LINKS):
                pass  # shown beside the article already
            elif not contents.count():
                failures.append(f"{rel} {at}: the page's table of contents is not in view and no \"Contents\" "
                                f"button is (see {shot(rel, 'no-contents')})")
            else:
                contents.first.click()
                settle()
                name = shot(rel, "contents")
                if not seen(TOC_LINKS):
                    failures.append(f"{rel} {at}: clicking \"Contents\" did not open the page's table of contents "
                                    f"(see {name})")
                page.keyboard.press("Escape")
                settle()
        for error in dict.fromkeys(errors):
            failures.append(f"{rel} {at} (navigation): {error}")
        for url_ in dict.fromkeys(external):
            failures.append(f"{rel} {at} (navigation): requests {url_} from outside the site")
        log(f"  navigation of {rel} {at}: checked")
    context.close()
    return failures


# ----------------------------------------------------------------------------------------------------------
# Part 2: the explorer in JupyterLab
# ----------------------------------------------------------------------------------------------------------

LAB_SETTINGS = {
    # Every cell in the page (no virtual scrolling), so the n-th cell of the file is the n-th in the DOM.
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                          "checkForUpdates": False},
}


@contextlib.contextmanager
def jupyterlab(python: Path, workdir: Path, env_extra: dict[str, str], log_path: Path):
    """JupyterLab from `python`'s environment on 127.0.0.1 with a token, serving workdir/notebooks, its log
    in log_path; yields (base URL, token, log path)."""
    for name, settings in LAB_SETTINGS.items():
        target = workdir / "settings" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(settings))
    for sub in ("config", "runtime", "workspaces"):
        (workdir / sub).mkdir(exist_ok=True)
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(workdir / "config"),
               JUPYTER_RUNTIME_DIR=str(workdir / "runtime"), **env_extra)
    env.pop("JUPYTER_TOKEN", None)
    command = [os.path.abspath(python), "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={workdir / 'notebooks'}",
               f"--LabApp.user_settings_dir={workdir / 'settings'}",
               f"--LabApp.workspaces_dir={workdir / 'workspaces'}", "--LabApp.extension_manager=readonly"]
    if os.geteuid() == 0:  # CI and these machines run as root
        command.append("--allow-root")
    with open(log_path, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=workdir,
                                   start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {process.returncode} at start; see {log_path}:\n"
                                   + log_path.read_text()[-2000:])
            try:
                if _status(f"{base}/api/status?token={token}") == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab did not answer on {base} within 120 s; see {log_path}")
            time.sleep(0.5)
        yield base, token, log_path
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)  # the server we started, and its kernels
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _kernel_idle(base: str, token: str, name: str, timeout: float) -> bool:
    """Whether the notebook's kernel has started and is idle (the server's sessions API), within timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/api/sessions?token={token}", timeout=10) as response:
                sessions = json.load(response)
            states = [s["kernel"]["execution_state"] for s in sessions if s.get("path", "").endswith(name)]
            if states and all(state == "idle" for state in states):
                return True
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.5)
    return False


def explorer_index(notebook: Path) -> int | None:
    cells = json.loads(notebook.read_text())["cells"]
    for i, cell in enumerate(cells):
        if "explorer" in cell.get("metadata", {}).get("tags", []):
            return i
    return None


def _figure_area(output):
    """The part of the explorer's output that shows its figure, without the controls: the widget's
    Output area (what `interact` draws into), else its first image, else the whole output area."""
    widget_output = output.locator(".widget-output")
    if widget_output.count():
        return widget_output.last, "the widget's output (its figure)"
    image = output.locator("img, canvas")
    if image.count():
        return image.first, "the figure"
    return output, "the output area"


def _move_a_control(output) -> str:
    """Change one control of the explorer's output area; returns what was done (or raises LookupError)."""
    for select in output.locator("select").all():
        options = select.locator("option").all_inner_texts()
        current = select.evaluate("s => s.selectedIndex")
        if len(options) > 1:
            choice = options[(current + 1) % len(options)]
            select.select_option(label=choice)
            was, now = (text.replace("\xa0", " ") for text in (options[current], choice))
            return f"dropdown {was!r} -> {now!r}"
    handle = output.locator(".noUi-handle, .widget-slider [role=slider]")
    if handle.count():
        handle.first.focus()
        before = handle.first.get_attribute("aria-valuenow")
        for _ in range(3):
            handle.first.press("ArrowRight")
        after = handle.first.get_attribute("aria-valuenow")
        if after == before:  # at the right end already
            for _ in range(6):
                handle.first.press("ArrowLeft")
            after = handle.first.get_attribute("aria-valuenow")
        return f"slider {before} -> {after}"
    slider = output.locator("input[type=range]")
    if slider.count():
        slider.first.focus()
        slider.first.press("ArrowRight")
        return "range input moved right"
    toggles = output.locator(".widget-toggle-button button, .widget-toggle-buttons button, .widget-radio-box input")
    if toggles.count() > 1:
        target = toggles.nth(1)
        target.click()
        return "second toggle clicked"
    checkbox = output.locator("input[type=checkbox]")
    if checkbox.count():
        checkbox.first.click()
        return "checkbox clicked"
    raise LookupError("no dropdown, slider, toggle or checkbox in the explorer's output")


def check_explorer(browser, python: Path, notebook: Path, shots: Path, fast: bool) -> list[str]:
    index = explorer_index(notebook)
    if index is None:
        return [f"{notebook}: no cell is tagged `explorer` (the ipywidgets explorer this check moves); "
                "tag the explorer cell, or pass --notebook with a notebook that has one"]
    n_cells = len(json.loads(notebook.read_text())["cells"])
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="check-site-lab-") as tmp:
        workdir = Path(tmp)
        (workdir / "notebooks").mkdir()
        copy = workdir / "notebooks" / notebook.name
        # The copy shows every input, so that every code cell shows its execution count when it has run.
        content = json.loads(notebook.read_text())
        for cell in content["cells"]:
            cell.get("metadata", {}).pop("jupyter", None)
        copy.write_text(json.dumps(content, indent=1))
        env_extra = {"HELPERS_FAST": "1"} if fast else {}
        started = time.monotonic()
        with jupyterlab(python, workdir, env_extra, shots / "jupyterlab.log") as (base, token, log_path):
            log(f"  JupyterLab up on {base} in {time.monotonic() - started:.0f} s (log: {log_path})")
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            page = context.new_page()
            console = []
            page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
            page.goto(f"{base}/lab/tree/{copy.name}?token={token}", wait_until="load", timeout=120_000)
            page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=120_000)
            cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
            deadline = time.monotonic() + 60
            while cells.count() < n_cells and time.monotonic() < deadline:
                time.sleep(0.5)
            if cells.count() != n_cells:
                return [f"JupyterLab shows {cells.count()} cells of {copy.name}, the file has {n_cells}"]
            try:  # the page connected to its kernel (the status bar says so) and the server says it is idle
                page.locator(".jp-StatusBar-Item", has_text="| Idle").first.wait_for(timeout=120_000)
            except PlaywrightError:
                pass
            if not _kernel_idle(base, token, copy.name, timeout=120):
                page.screenshot(path=str(shots / "lab-no-kernel.png"))
                return [f"{copy.name}: its kernel did not start within 120 s (see lab-no-kernel.png, {log_path})"]
            # Run > Run All Cells, then wait until every code cell has its execution count.
            page.locator(".lm-MenuBar-itemLabel").get_by_text("Run", exact=True).click()
            page.locator(".lm-Menu-itemLabel").get_by_text("Run All Cells", exact=True).click()
            code_cells = sum(c["cell_type"] == "code" for c in json.loads(notebook.read_text())["cells"])
            prompts = page.locator(".jp-NotebookPanel .jp-Notebook .jp-CodeCell .jp-InputArea-prompt")
            started = time.monotonic()
            quiet_since = None
            while True:
                texts = prompts.all_text_contents()  # a folded input hides its prompt: its text remains
                counted = sum(t.strip().strip("[]:").strip().isdigit() for t in texts)
                busy = sum("*" in t for t in texts)
                if counted == code_cells:
                    break
                now = time.monotonic()
                if busy:
                    quiet_since = None
                elif quiet_since is None:
                    quiet_since = now
                elif now - quiet_since > 15:  # nothing running and nothing queued: the run stopped
                    break
                if now - started > 600:
                    page.screenshot(path=str(shots / "lab-timeout.png"))
                    return [f"running all cells of {copy.name} did not finish within 600 s "
                            f"({busy} cells still busy; see lab-timeout.png, {log_path})"]
                time.sleep(1)
            errors = page.locator(".jp-Notebook .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
            tracebacks = [t for t in errors.all_inner_texts() if "Traceback" in t]
            if tracebacks:
                failures.append(f"{copy.name}: a cell raised when run in JupyterLab:\n{tracebacks[0][-1500:]}")
            if counted != code_cells:
                page.screenshot(path=str(shots / "lab-not-run.png"))
                return failures + [f"{copy.name}: after Run All Cells only {counted} of {code_cells} code cells "
                                   f"ran (see lab-not-run.png, {log_path})"]
            log(f"  ran all {code_cells} code cells in {time.monotonic() - started:.0f} s")
            cell = cells.nth(index)
            cell.scroll_into_view_if_needed()
            output = cell.locator(".jp-Cell-outputArea")
            try:
                output.locator(".jupyter-widgets").first.wait_for(timeout=30_000)
            except PlaywrightError:
                text = output.inner_text()[:300]
                page.screenshot(path=str(shots / "lab-explorer-missing.png"))
                return failures + [f"{copy.name}: cell {index} (tagged explorer) shows no widget after running "
                                   f"(output: {text!r}); is jupyterlab_widgets installed in .venv? "
                                   "See lab-explorer-missing.png"]
            time.sleep(1.5)  # let the first figure draw
            output.scroll_into_view_if_needed()
            figure, what = _figure_area(output)
            output.screenshot(path=str(shots / "lab-explorer-before.png"))
            before = figure.screenshot(path=str(shots / "lab-explorer-figure-before.png"))
            try:
                action = _move_a_control(output)
            except LookupError as error:
                return failures + [f"{copy.name}: cell {index}: {error}"]
            log(f"  explorer: {action}")
            after = before
            deadline = time.monotonic() + 60
            while after == before and time.monotonic() < deadline:
                time.sleep(1)
                after = figure.screenshot()
            time.sleep(1.5)  # the redraw may clear the figure first: compare the settled picture
            after = figure.screenshot(path=str(shots / "lab-explorer-figure-after.png"))
            output.screenshot(path=str(shots / "lab-explorer-after.png"))
            drawn = figure.locator("img, canvas").count() > 0 or what == "the output area"
            if after == before:
                failures.append(f"{copy.name}: cell {index} (explorer): after {action}, {what} did not change "
                                "within 60 s (lab-explorer-figure-before.png and -after.png are identical)")
            elif not drawn:
                failures.append(f"{copy.name}: cell {index} (explorer): after {action}, {what} holds no figure "
                                "(see lab-explorer-after.png)")
            else:
                log(f"  explorer: {what} changed (lab-explorer-figure-before.png, -after.png)")
            page.screenshot(path=str(shots / "lab-notebook.png"))
            for text in dict.fromkeys(console):
                log(f"  (JupyterLab console error, not a failure: {text[:200]})")
            context.close()
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, default=ROOT / "build/site")
    parser.add_argument("--screenshots", type=Path, default=ROOT / "build/screenshots")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--lab-python", type=Path, default=ROOT / ".venv/bin/python")
    parser.add_argument("--notebook", type=Path, default=ROOT / "notebooks/01_2_what_ece_can_tell.ipynb")
    parser.add_argument("--widths", default=",".join(map(str, WIDTHS)),
                        help="viewport widths in CSS px, comma-separated (default: %(default)s)")
    parser.add_argument("--fast", action="store_true", help="HELPERS_FAST=1 for the notebook's kernel")
    parser.add_argument("--skip-lab", action="store_true", help="check the site only")
    parser.add_argument("--skip-pages", action="store_true", help="check the explorer only")
    args = parser.parse_args()

    if not (args.site / "index.html").is_file():
        print(f"check_site: no site at {args.site}: run `make book` first", file=sys.stderr)
        return 1
    if not Path(args.chromium).exists():
        print(f"check_site: no Chromium at {args.chromium}: `apt-get install -y chromium`", file=sys.stderr)
        return 1
    shutil.rmtree(args.screenshots, ignore_errors=True)
    args.screenshots.mkdir(parents=True)
    failures: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, headless=True)
        if not args.skip_pages:
            started = time.monotonic()
            log(f"part 1: every page of {args.site} in Chromium {browser.version}, headless")
            widths = sorted({int(w) for w in args.widths.split(",") if w.strip()})
            with serve(args.site.resolve()) as base:
                for width in widths:
                    log(f" at {width} px wide")
                    failures += check_pages(browser, args.site.resolve(), base, args.screenshots, width,
                                            links=width == widths[-1])
                    failures += check_navigation(browser, args.site.resolve(), base, args.screenshots, width)
                    failures += check_reader_items(browser, args.site.resolve(), base, args.screenshots, width)
            log(f"part 1 done in {time.monotonic() - started:.0f} s")
        if not args.skip_lab:
            started = time.monotonic()
            log(f"part 2: the explorer of {args.notebook} in JupyterLab")
            try:
                failures += check_explorer(browser, args.lab_python, args.notebook.resolve(), args.screenshots,
                                           args.fast)
            except (RuntimeError, PlaywrightError) as error:
                failures.append(f"JupyterLab check: {error}")
            log(f"part 2 done in {time.monotonic() - started:.0f} s")
        browser.close()
    for failure in failures:
        print(f"FAIL {failure}", file=sys.stderr)
    print(f"check_site: {len(failures)} failures; screenshots in {args.screenshots}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
