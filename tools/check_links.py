"""Every internal link of a built site resolves: the file exists and so does the anchor.

    python tools/check_links.py build/site

Reads the HTML files only (no browser, standard library only): every `href` and `src` that is not an
external URL must name an existing file under the site folder, and a `#fragment` must be the `id` (or
`name`) of an element of the page it points to. Used by `make book`, tests/test_book.py and, with
a browser, tools/check_site.py. Exits 1 and prints one line per broken link.
"""
from __future__ import annotations

import sys
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

# Theme pages a learner does not navigate to, and copies of the sources.
SKIP_DIRS = {"_static", "_sources", "_images", "_downloads"}


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[str, str, int]] = []  # (attribute, url, line)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if attrs.get(key):
                self.ids.add(attrs[key])
        for key in ("href", "src"):
            if attrs.get(key) is not None and not (tag == "link" and attrs.get("rel") == "canonical"):
                self.links.append((f"<{tag} {key}>", attrs[key], self.getpos()[0]))


@lru_cache(maxsize=None)
def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    return page


def pages(site: Path) -> list[Path]:
    """The site's HTML pages (theme and source copies left out)."""
    return sorted(p for p in site.rglob("*.html") if not SKIP_DIRS & set(p.relative_to(site).parts[:-1]))


def internal_target(site: Path, page: Path, url: str) -> tuple[Path, str] | None:
    """(file, fragment) an internal URL of `page` points to, or None for an external one."""
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or url.startswith(("mailto:", "javascript:", "data:")):
        return None
    path = unquote(parts.path)
    if not path:
        target = page
    elif path.startswith("/"):
        target = site / path.lstrip("/")
    else:
        target = (page.parent / path).resolve()
    if target.is_dir():
        target = target / "index.html"
    return target, unquote(parts.fragment)


def broken_links(site: Path) -> list[str]:
    site = Path(site).resolve()
    _parse.cache_clear()
    problems = []
    for page in pages(site):
        rel = page.relative_to(site)
        for what, url, line in _parse(page).links:
            found = internal_target(site, page, url)
            if found is None:
                continue
            target, fragment = found
            if site not in target.parents and target != site:
                problems.append(f"{rel}:{line}: {what} {url!r} leaves the site")
            elif not target.is_file():
                problems.append(f"{rel}:{line}: {what} {url!r}: no file {target.relative_to(site)}")
            elif fragment and target.suffix == ".html" and fragment not in _parse(target).ids:
                problems.append(f"{rel}:{line}: {what} {url!r}: no anchor #{fragment} in {target.relative_to(site)}")
    return problems


def main(argv: list[str]) -> int:
    site = Path(argv[1] if len(argv) > 1 else "build/site")
    if not (site / "index.html").is_file():
        print(f"check_links: no site at {site} (run `make book`)", file=sys.stderr)
        return 1
    problems = broken_links(site)
    for problem in problems:
        print(f"broken link: {problem}", file=sys.stderr)
    n = len(pages(site))
    print(f"check_links: {n} pages, {len(problems)} broken internal links")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
