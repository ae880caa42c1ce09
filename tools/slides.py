"""A reveal.js lecture deck from each learner notebook, made from its saved outputs (nothing is executed).

The deck keeps the notebook's spine: the title and each numbered section's heading (`## 1. ...`) start a
slide; below each, one subslide per figure (its code hidden), per takeaway, and the Summary. A cell an
instructor tags `slide` is always shown (as a subslide); every other cell is left out.

    python tools/slides.py [notebooks...] [--out dist/slides] [--reveal-prefix URL]

writes dist/slides/NN_name.slides.html for each learner notebook (notebooks/NN_*.ipynb by default). Open it in
a browser; the arrow keys move right through the sections and down through a section's subslides. The page
loads reveal.js (and jQuery, RequireJS) from their CDNs: in a room without the internet, pass
`--reveal-prefix` the path of a local copy of reveal.js 4.
"""
from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

import nbformat
from nbconvert import SlidesExporter

REPO = Path(__file__).resolve().parents[1]
SECTION = re.compile(r"^## \d+\.", re.MULTILINE)  # a numbered section's heading: "## 3. Reliability diagrams"
# A tall figure (07's is 9 inches square) would run off the foot of reveal's 960 x 700 slide.
STYLE = ("<style>.reveal .jp-OutputArea-output img"
         " { max-height: 600px; width: auto; display: block; margin: 0 auto; }</style>\n")


def _is_figure(cell) -> bool:
    """Whether a code cell drew a figure (it has an image/png output)."""
    return cell.cell_type == "code" and any("image/png" in out.get("data", {}) for out in cell.get("outputs", []))


def _slide_type(cell, is_title: bool) -> str:
    """The reveal.js slide_type of one cell: "slide", "subslide" or "skip"."""
    text = cell.source if cell.cell_type == "markdown" else ""
    if is_title or SECTION.search(text):
        return "slide"
    if _is_figure(cell) or "slide" in cell.metadata.get("tags", []):
        return "subslide"
    if "**Takeaway" in text or text.startswith("## Summary"):
        return "subslide"
    return "skip"


def slide_deck(nb):
    """A copy of a notebook with `metadata.slideshow.slide_type` set on every cell, for SlidesExporter.

    The title cell (the first markdown cell that starts with "# ") and the numbered sections' headings are
    slides; figures, takeaways (markdown with "**Takeaway"), the Summary and cells tagged `slide` are subslides;
    everything else is skipped. A figure's code is hidden with `metadata.transient.remove_source`, the flag
    nbconvert's templates honour (and its TagRemovePreprocessor sets); a tagged code cell keeps its code.
    """
    deck = copy.deepcopy(nb)
    title = next((cell for cell in deck.cells if cell.cell_type == "markdown" and cell.source.startswith("# ")), None)
    for cell in deck.cells:
        cell.metadata["slideshow"] = {"slide_type": _slide_type(cell, cell is title)}
        if _is_figure(cell):
            cell.metadata["transient"] = {"remove_source": True}
    return deck


def build(notebook_path, out_dir, reveal_prefix: str | None = None) -> Path:
    """Write out_dir/NN_name.slides.html, the deck of one notebook, and return its path.

    reveal.js is loaded from its CDN (unpkg) unless `reveal_prefix` names another copy, e.g. "reveal.js" for a
    folder beside the HTML file (reveal.js 4's layout: dist/reveal.js, plugin/notes/notes.js).
    """
    notebook_path, out_dir = Path(notebook_path), Path(out_dir)
    exporter = SlidesExporter(exclude_input_prompt=True, exclude_output_prompt=True)
    if reveal_prefix:
        exporter.reveal_url_prefix = reveal_prefix
    html, _ = exporter.from_notebook_node(slide_deck(nbformat.read(notebook_path, as_version=4)),
                                          resources={"metadata": {"name": notebook_path.stem}})
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{notebook_path.stem}.slides.html"
    out.write_text(html.replace("</head>", STYLE + "</head>", 1), encoding="utf-8")
    return out


def main(argv=None) -> int:
    """The command line: build the decks of the notebooks named (default: every learner notebook)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to convert (default: notebooks/NN_*.ipynb, not the solutions)")
    parser.add_argument("--out", type=Path, default=Path("dist/slides"), help="output folder (dist/slides)")
    parser.add_argument("--reveal-prefix", help="URL or relative path of a local reveal.js 4 (default: its CDN)")
    args = parser.parse_args(argv)
    for path in args.notebooks or sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        print(build(path, args.out, args.reveal_prefix))
    return 0


if __name__ == "__main__":
    sys.exit(main())
