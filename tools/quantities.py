"""Every labelled number the series prints in a table, and the labels printed with two values.

A table cell's quantity is named by its labels: the table's row labels (index levels, with their names) and
its column labels (every header level). The same names printed with two different values, in one notebook or
across the series, are one quantity with two values (a reader cannot tell which to keep) unless a label says
what differs ("first seed", "20 pairs both methods share"). `python tools/quantities.py` lists them;
tests/test_quantities.py checks there are none.
"""
from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"^[−-]?\d[\d,]*(\.\d+)?%?$")


class _Grid(HTMLParser):
    """The tables of an HTML fragment as grids of (tag, text), with rowspan and colspan filled in."""

    def __init__(self):
        super().__init__()
        self.tables, self.cell, self.row, self.spans = [], None, None, {}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.tables.append({"head": [], "body": []})
            self.part, self.spans = "head", {}
        elif tag == "tbody":
            self.part, self.spans = "body", {}
        elif tag == "tr":
            self.row = []
        elif tag in ("th", "td"):
            self.cell = [tag, "", int(attrs.get("rowspan", 1)), int(attrs.get("colspan", 1))]

    def handle_endtag(self, tag):
        if tag in ("th", "td") and self.cell is not None:
            self.row.append(self.cell)
            self.cell = None
        elif tag == "tr" and self.row is not None:
            grid, col = [], 0
            cells = iter(self.row)
            while True:
                if col in self.spans and self.spans[col][0] > 0:
                    left, value = self.spans[col]
                    self.spans[col] = (left - 1, value)
                    grid.append(value)
                    col += 1
                    continue
                cell = next(cells, None)
                if cell is None:
                    break
                tag_, text, rowspan, colspan = cell
                for _ in range(colspan):
                    if rowspan > 1:
                        self.spans[col] = (rowspan - 1, (tag_, text.strip()))
                    grid.append((tag_, text.strip()))
                    col += 1
            self.tables[-1][self.part].append(grid)
            self.row = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[1] += data


def table_quantities(html: str):
    """(row labels, column labels, value) of every numeric cell of every table in `html`."""
    parser = _Grid()
    parser.feed(html)
    for table in parser.tables:
        head, body = table["head"], table["body"]
        if not body:
            continue
        n_index = sum(1 for tag, _ in body[0] if tag == "th")
        # a header row whose data columns are all empty names the index levels (pandas' index-name row)
        names_rows = [r for r in head if all(not t for _, t in r[n_index:])]
        column_rows = [r for r in head if r not in names_rows]
        index_names = [t for r in names_rows for _, t in r[:n_index] if t]
        for row in body:
            labels = tuple(index_names) + tuple(t for _, t in row[:n_index])
            if all(t.isdigit() for t in labels):
                continue  # a row number (an unnamed RangeIndex) labels no quantity
            for j, (tag, text) in enumerate(row[n_index:], start=n_index):
                if tag == "td" and NUMBER.match(text):
                    columns = tuple(r[j][1] for r in column_rows if j < len(r) and r[j][1])
                    yield labels, columns, text


def quantities(paths=None) -> dict:
    """{(row labels, column labels): {value: [where, ...]}} over every table output of the notebooks."""
    paths = paths or sorted((REPO / "notebooks").glob("[0-9]*.ipynb"))
    found: dict = defaultdict(lambda: defaultdict(list))
    for path in paths:
        for i, cell in enumerate(json.loads(Path(path).read_text())["cells"]):
            for output in cell.get("outputs", []):
                html = "".join(output.get("data", {}).get("text/html", ""))
                for labels, columns, value in table_quantities(html):
                    found[(labels, columns)][value].append(f"{Path(path).stem[:2]} cell {i}")
    return found


def _parse(text: str) -> tuple[float, int]:
    """(value, decimals) of a printed number; a share in percent is read as the fraction it is."""
    plain = text.replace(",", "").replace("−", "-")
    scale = 100 if plain.endswith("%") else 1
    plain = plain.rstrip("%")
    decimals = len(plain.split(".")[1]) if "." in plain else 0
    return float(plain) / scale, decimals + (2 if scale == 100 else 0)


def _differ(a: str, b: str) -> bool:
    """Whether two printed numbers are two values, not one value printed to two precisions (0.82, 0.820)."""
    (x, dx), (y, dy) = _parse(a), _parse(b)
    return abs(x - y) > 0.5 * 10 ** -min(dx, dy) + 1e-12


def two_valued(paths=None) -> dict:
    """The labels printed with two values: {(row labels, column labels): {value: [where, ...]}}."""
    return {key: dict(values) for key, values in quantities(paths).items()
            if any(_differ(a, b) for a in values for b in values)}


if __name__ == "__main__":
    clashes = two_valued(sys.argv[1:] or None)
    for (labels, columns), values in sorted(clashes.items()):
        print(" / ".join(labels), "|", " / ".join(columns), "->", values)
    print(f"{len(clashes)} labelled quantities printed with two values")
