"""The course website (`make book`, book/conf.py) builds from the committed notebooks without executing
them, with no Sphinx warning (-W: a broken cross-reference, a missing anchor or bad markup fails) and no
broken internal link in the HTML (tools/check_links.py); and the build really fails on such a link. The
front page opens with "Start here"; answer twins are titled "Answers: …", so search never lists two pages
under one title; maths is typeset by the site's own MathJax; there is no empty general index.

No browser here: `make check-site` opens the pages in Chromium (at a phone's and a laptop's width)."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from helpers.cache.artifacts import lock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from check_links import broken_links  # noqa: E402

# a 1×1 PNG
TINY_PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TWINS = sorted((ROOT / "notebooks" / "solutions").glob("*.ipynb"))


def build(src: Path, out: Path) -> subprocess.CompletedProcess:
    """sphinx-build as `make book` runs it, sources in `src` (the repository root or a copy of it)."""
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-c", str(src / "book"), "-d", str(out / "doctrees"),
         "-W", "--keep-going", "-q", str(src), str(out / "site")],
        capture_output=True, text=True, timeout=300)


def copy_sources(dest: Path) -> Path:
    """The files the site is built from, copied, so that a test can add or break some."""
    for name in ("docs", "book"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "notebooks").mkdir()
    for nb in NOTEBOOKS:
        shutil.copyfile(nb, dest / "notebooks" / nb.name)
    if TWINS:
        shutil.copytree(ROOT / "notebooks" / "solutions", dest / "notebooks" / "solutions")
    shutil.copyfile(ROOT / "README.md", dest / "README.md")
    return dest


def images_in(nb_path: Path) -> int:
    nb = nbformat.read(nb_path, as_version=4)
    return sum(1 for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
               if any(key.startswith("image/") for key in out.get("data", {})))


@pytest.fixture(scope="module")
def site(run_folder) -> Path:
    """The site, built once per test run: the first worker to ask builds it, the other reads it (a second
    build cost ~30 s)."""
    out = run_folder("book")
    with lock(out):
        if not (out / "built").exists():
            result = build(ROOT, out)
            assert result.returncode == 0, f"make book fails:\n{result.stdout}\n{result.stderr}"
            (out / "built").touch()
    return out / "site"


def test_the_site_builds_without_warnings_or_broken_links(site):
    assert broken_links(site) == []
    assert (site / "search.html").is_file() and (site / "searchindex.js").is_file()


def test_the_guide_is_the_front_page_and_every_page_is_there(site):
    assert "docs/guide.html" in (site / "index.html").read_text()
    for page in ["docs/guide", "docs/glossary", "docs/references", "README"]:
        assert (site / f"{page}.html").is_file(), page
    guide = (site / "docs" / "guide.html").read_text()
    for nb in NOTEBOOKS:
        assert f'href="../notebooks/{nb.stem}.html"' in guide, f"the navigation lacks {nb.name}"
    for caption in ["Notebooks", "Reference", "Maintainers"] + (["Solutions"] if TWINS else []):
        assert f'<span class="caption-text">{caption}</span>' in guide, f"the navigation lacks the part {caption}"


def test_the_front_page_starts_with_what_to_do_first(site):
    """The "Start here" block comes right under the guide's title, before its first section: how to get the
    code (git clone, make notebooks) and which notebook to read first."""
    guide = (site / "docs" / "guide.html").read_text()
    article = guide[guide.index('<article class="bd-article"'):]
    start = article.index("Start here")
    assert start < article.index("<section", article.index("<h1") + 1), "Start here is not before the first section"
    block = article[start:article.index("Look up a word", start)]
    text = re.sub(r"<[^>]+>", "", block)  # without the code block's highlighting
    assert "git clone" in text and "make notebooks" in text and "make lab" in text
    if NOTEBOOKS:
        assert f'href="../notebooks/{NOTEBOOKS[0].stem}.html"' in block


def test_twins_have_their_own_titles_and_search_lists_each_title_once(site):
    for twin in TWINS:
        html = (site / twin.relative_to(ROOT).with_suffix(".html")).read_text()
        assert re.search(r"<title>Answers: ", html), f"{twin.name}: the twin's page is not titled Answers: …"
    index = (site / "searchindex.js").read_text()
    titles = json.loads(index[index.index("(") + 1:index.rindex(")")])["titles"]
    assert len(titles) == len(set(titles)), sorted(t for t in titles if titles.count(t) > 1)


def test_no_empty_general_index(site):
    assert not (site / "genindex.html").exists()
    assert "genindex.html" not in (site / "docs" / "guide.html").read_text()


@pytest.mark.parametrize("nb", NOTEBOOKS + TWINS, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_each_notebook_page_shows_its_saved_figures(site, nb):
    page = site / nb.relative_to(ROOT).with_suffix(".html")
    html = page.read_text()
    # every saved figure, as a file of the site (not re-executed: the committed outputs)
    assert html.count('<img alt="../') == images_in(nb), f"{page.name}: not every saved figure is shown"
    assert "jupyter_execute" not in html and "cdn.jsdelivr" not in html


def test_solution_cells_are_folded_in_lessons_and_open_in_twins(site):
    for nb in NOTEBOOKS:
        tagged = sum("solution" in c.metadata.get("tags", []) for c in nbformat.read(nb, as_version=4).cells)
        html = (site / "notebooks" / f"{nb.stem}.html").read_text()
        assert html.count("tag_solution tag_hide-cell") == tagged, nb.name
    for twin in TWINS:
        assert "tag_hide-cell" not in (site / twin.relative_to(ROOT).with_suffix(".html")).read_text()


def test_twins_widgets_and_broken_links(tmp_path):
    """With answer twins and an explorer, the site gets a Solutions part and a note instead of the widget;
    a broken link, anchor or directive in a doc or a notebook fails the build, naming each one (one build:
    --keep-going still writes every page)."""
    src = copy_sources(tmp_path / "src")
    twins = src / "notebooks" / "solutions"
    twins.mkdir(exist_ok=True)
    twin = nbformat.v4.new_notebook()  # an answer twin, with a solution and an explorer
    twin.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    twin.cells = [
        nbformat.v4.new_markdown_cell(f"# {NOTEBOOKS[0].stem}, solved\n\nThe lesson: [{NOTEBOOKS[0].stem}]"
                                      f"(../{NOTEBOOKS[0].name}); the [glossary](../../docs/glossary.md). "
                                      "Maths: $q_i = p_i(1-p_j)/Z$."),
        nbformat.v4.new_code_cell("print(1 + 1)", metadata={"tags": ["solution"]}, outputs=[
            nbformat.v4.new_output("stream", name="stdout", text="2\n")]),
        nbformat.v4.new_code_cell("interact(f, x=3)", metadata={"tags": ["explorer"]}, outputs=[
            nbformat.v4.new_output("display_data", data={
                "application/vnd.jupyter.widget-view+json": {"model_id": "abc", "version_major": 2, "version_minor": 0},
                "text/plain": "interactive(children=(IntSlider(value=3),))"}),
            nbformat.v4.new_output("display_data", data={  # an Explorer: its widget and its static figure
                "application/vnd.jupyter.widget-view+json": {"model_id": "def", "version_major": 2, "version_minor": 0},
                "image/png": TINY_PNG, "text/plain": "reliability (bins); run the notebook to use the controls"})])]
    twin.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {"abc": {}}}}
    nbformat.write(twin, twins / NOTEBOOKS[0].name)
    # broken: a missing page, a missing anchor, an unknown directive, a notebook's link to a missing notebook
    guide_md = src / "docs" / "guide.md"
    guide_md.write_text(guide_md.read_text() + "\n\nSee [nothing](no_such_page.md), "
                        "[no term](glossary.md#no-such-term)."
                        "\n\n```{no-such-directive}\n```\n")
    nb = nbformat.read(src / "notebooks" / NOTEBOOKS[1].name, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("Back to [notebook 99](99_missing.ipynb)."))
    nbformat.write(nb, src / "notebooks" / NOTEBOOKS[1].name)

    result = build(src, tmp_path)
    assert result.returncode != 0
    for culprit in ["no_such_page.md", "no-such-term", "no-such-directive", "99_missing.ipynb"]:
        assert culprit in result.stderr, f"the build does not report {culprit}:\n{result.stderr}"
    assert result.stderr.count("WARNING") == 4, result.stderr  # and nothing else: the twin builds cleanly

    site = tmp_path / "site"
    guide = (site / "docs" / "guide.html").read_text()
    assert '<span class="caption-text">Solutions</span>' in guide
    solutions = (site / "book" / "solutions.html").read_text()
    assert f"notebooks/solutions/{NOTEBOOKS[0].stem}.html" in solutions
    assert f"Answers: {NOTEBOOKS[0].stem}, solved" in solutions
    twin_page = (site / "notebooks" / "solutions" / f"{NOTEBOOKS[0].stem}.html").read_text()
    assert f"<title>Answers: {NOTEBOOKS[0].stem}, solved" in twin_page
    # maths: marked for MathJax, which the page loads from the site itself (offline), not from a CDN
    assert '<span class="math notranslate nohighlight">\\(q_i = p_i(1-p_j)/Z\\)</span>' in twin_page
    assert 'src="../../_static/mathjax/tex-chtml.js' in twin_page and "cdn." not in twin_page
    assert (site / "_static/mathjax/output/chtml/fonts/woff-v2/MathJax_Main-Regular.woff").is_file()
    assert "Interactive explorer." in twin_page and "interactive(children" not in twin_page
    assert twin_page.count('<img alt="../../') == 1  # the explorer's saved figure
    assert "tag_hide-cell" not in twin_page  # a twin shows its solutions
    assert "embed-amd" not in twin_page and "require.min.js" not in twin_page


def test_the_link_checker_finds_a_broken_link_in_the_html(site, tmp_path):
    copy = shutil.copytree(site, tmp_path / "site")
    page = copy / "docs" / "glossary.html"
    page.write_text(page.read_text().replace("</body>", '<a href="guide.html#nowhere">x</a>'
                                             '<a href="../missing.html">y</a></body>'))
    found = broken_links(copy)
    assert len(found) == 2 and "no anchor #nowhere" in found[0] + found[1]
