"""Sphinx configuration of the course website (`make book`, tests/test_book.py).

The source folder is the repository root and this folder holds only the configuration, so that the links
the docs and notebooks already use (`../notebooks/01_….ipynb`, `glossary.md#…`, `../README.md#…`) resolve
on the site exactly as they do on GitHub. Build:

    sphinx-build -b html -c book -W --keep-going . build/site

The committed notebooks are rendered with their saved outputs; nothing is executed. The table of contents
(the parts of the navigation) is `PARTS` below; it is added to the front page (docs/guide.md) while Sphinx
reads it, so no course file carries site markup; so are the front page's "Start here" block and the answer
twins' titles ("Answers: 05 · …", book/website.py).
"""
from __future__ import annotations

import sys
from pathlib import Path

BOOK = Path(__file__).resolve().parent
ROOT = BOOK.parent
sys.path.insert(0, str(BOOK))

import website  # noqa: E402

project = "Confidence calibration of language models"
author = "the series' authors"
html_show_copyright = False

extensions = ["myst_nb", "sphinx_copybutton"]

# A copy button on every code cell and code block, not on printed outputs (sphinx-copybutton).
copybutton_selector = "div.highlight:not(.cell_output *) pre"
copybutton_exclude = ".linenos, .gp, .go"

# Only the course's own files are pages: not .venv, data/, tests/ or build outputs.
root_doc = "docs/guide"
include_patterns = [
    "docs/*.md",
    "docs/instructors/*.md",
    "notebooks/*.ipynb",
    "notebooks/solutions/*.ipynb",
    "README.md",
    "book/solutions.md",
]
exclude_patterns = ["build", ".venv*", "**/.ipynb_checkpoints"]

# --- notebooks: show the committed outputs, never execute ---------------------------------------------
nb_execution_mode = "off"
nb_merge_streams = True
myst_heading_anchors = 4
# $…$ and $$…$$ (and amsmath environments) are maths, typeset by MathJax, as Jupyter shows them.
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath", "amsmath"]
# MathJax 3.2.2 from book/_static/mathjax (its SOURCE.txt), not a CDN: the site works offline. Loaded only by
# the pages that have maths.
mathjax_path = "mathjax/tex-chtml.js"

# --- the navigation -------------------------------------------------------------------------------------
# (caption, [patterns relative to the repository root, or "Title <path>"]); a part whose patterns match
# nothing is left out.
# The answer twins live in their own part, last, as one entry ("Exercise solutions") whose page lists them,
# so that they stay folded away in the sidebar until a learner opens that part, and no "next" button of a
# lesson leads into them.
PARTS = [
    ("Notebooks", ["notebooks/*.ipynb"]),
    ("Reference", ["docs/troubleshooting.md", "docs/glossary.md", "docs/references.md", "docs/settings.md",
                   "docs/api.md", "docs/platforms.md", "The repository (README) <README.md>"]),
    ("Instructors", ["docs/instructors/index.md", "docs/instructors/*.md"]),
    ("Maintainers", ["docs/maintainers.md", "docs/performance.md"]),
    ("Solutions", ["book/solutions.md"]),
]
SOLUTIONS = "notebooks/solutions/*.ipynb"

# Where a learner gets the code: the front page's "Start here" block and the README's page show
# `git clone <this>`, and every page's header links it. One setting: `repository` under [tool.course] in
# pyproject.toml; empty, the address of this checkout's `origin` remote (credentials dropped); with neither,
# the pages say so and name no address (website.repository_url).
REPOSITORY_URL = website.repository_url(ROOT)

# --- theme ------------------------------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_title = "Confidence calibration of language models"
html_static_path = [str(BOOK / "_static")]
html_css_files = ["course.css"]
html_js_files = ["course.js"]
html_extra_path = [str(BOOK / "_extra")]
html_last_updated_fmt = None
# No general index: the course defines no index entries, so genindex.html would be an empty page.
html_use_index = False
html_show_sourcelink = False
html_copy_source = True
html_theme_options = {
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "show_navbar_depth": 1,
    "collapse_navbar": False,
    "navigation_with_keys": False,
}
# (The repository's button in every page's header, on any host, is added by book/website.py.)
html_favicon = str(BOOK / "_static" / "favicon.svg")
# Search: the lessons before their answer twins (which are titled "Answers: …", book/website.py).
html_search_scorer = str(BOOK / "search_scorer.js")
# Light unless the reader switches (the figures are drawn on white); an unset mode logs a console error.
html_context = {"default_mode": "light"}
pygments_style = "default"


def setup(app):
    website.setup(app, ROOT, PARTS, SOLUTIONS, REPOSITORY_URL)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
