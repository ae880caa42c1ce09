"""The lecture decks of tools/slides.py: one slide per numbered section, figures without their code, no exercise."""
import html
import re
from pathlib import Path

import pytest

pytest.importorskip("nbconvert", reason="nbconvert comes with the instructors' tools: `make test-instructor` "
                                        "installs it and runs this test")

import nbformat  # noqa: E402
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output  # noqa: E402

from tools.slides import SECTION, build, slide_deck  # noqa: E402

NOTEBOOKS = sorted(Path(__file__).resolve().parents[1].glob("notebooks/[0-9][0-9]_*.ipynb"))


def _top_level_sections(page: str) -> int:
    """How many <section>s sit directly in reveal's slides (a slide's subslides are sections inside it)."""
    depth = count = 0
    for tag in re.findall(r"</?section\b", page):
        if tag == "<section":
            count += depth == 0
            depth += 1
        else:
            depth -= 1
    return count


def test_slide_types_of_a_small_notebook():
    png = new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})
    nb = new_notebook(cells=[
        new_markdown_cell("# 09 · A title\n\nWhat this notebook does."),
        new_markdown_cell("## 1. A section\n\n*A question?*"),
        new_code_cell("plt.plot([1, 2])", outputs=[png]),
        new_markdown_cell("**Takeaway:** the line rises."),
        new_code_cell("x = 1"),
        new_markdown_cell("An instructor's aside.", metadata={"tags": ["slide"]}),
        new_markdown_cell("## Summary\n\n- it rises"),
    ])
    deck = slide_deck(nb)
    kinds = [cell.metadata["slideshow"]["slide_type"] for cell in deck.cells]
    assert kinds == ["slide", "slide", "subslide", "subslide", "skip", "subslide", "subslide"]
    assert deck.cells[2].metadata["transient"] == {"remove_source": True}  # the figure's code is hidden
    assert "slideshow" not in nb.cells[0].metadata  # the notebook itself is left as it was


@pytest.mark.skipif(not NOTEBOOKS, reason="no learner notebooks")
def test_deck_of_the_smallest_notebook(tmp_path):
    path = min((p for p in NOTEBOOKS if "image/png" in p.read_text(encoding="utf-8")), key=lambda p: p.stat().st_size)
    nb = nbformat.read(path, as_version=4)
    out = build(path, tmp_path)
    assert out == tmp_path / f"{path.stem}.slides.html"
    page = out.read_text(encoding="utf-8")
    assert "<section" in page
    headings = sum(cell.cell_type == "markdown" and bool(SECTION.search(cell.source)) for cell in nb.cells)
    assert headings and _top_level_sections(page) == 1 + headings  # the title, then one slide per section
    assert re.search(r'<img[^>]+src="data:image/png;base64,', page)  # a figure
    # the exercises' code (answer and check cells) is nowhere in the page's text
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    exercise = [cell for cell in nb.cells if {"answer", "check"} & set(cell.metadata.get("tags", []))]
    lines = [line.strip() for cell in exercise for line in cell.source.splitlines() if len(line.strip()) > 15]
    assert lines and not [line for line in lines if line in text]
