"""Every number a notebook's prose states is one its outputs print: a rebuild that moves a result fails
here until the sentence that states it follows.

A number in a markdown cell passes when some output of the code cells right around it (of the whole
notebook for the introduction and the Summary; streams, `text/plain`,
`text/markdown`, `text/html` with its tags removed) prints it to the prose's digits: 0.94 matches a printed
0.9412, 73.5% matches a printed 73.5% or 0.735, and a drop of 0.126 matches a printed -0.126. Numbers that
are not results are left out, by rule or by marking (docs/maintainers.md, "Numbers in prose"):

- by rule: numbers in headings, inline code and link targets; years (1900-2099); notebook numbers
  written with a leading zero (00 to 09); numbers right after a word that cites (§, Section, Table, Figure,
  Appendix, Exercise, step, notebook, arXiv);
- by marking: a markdown cell's metadata `given` lists the numbers it states that are not this notebook's
  results (settings, a hand-worked example, figures quoted from the paper next to their citation).
"""
from __future__ import annotations

import bisect
import re

import nbformat
import pytest

from helpers.build.cli import notebook_paths
from helpers.build.twins import student_path

_NUMBER = re.compile(r"(?<![\w.])[-−+]?\d[\d,]*(?:\.\d+)?%?(?![\w])")
_CITES = re.compile(r"(?:§|\b(?:[Ss]ections?|[Tt]ables?|[Ff]igures?|[Aa]ppendix|[Ee]xercises?|[Ss]teps?|"
                    r"[Nn]otebooks?|arXiv:?|[Cc]laims?|[Cc]hapters?))\s*$")
_DROP = [re.compile(r"`[^`]*`"), re.compile(r"\]\([^)]*\)"), re.compile(r"<!--.*?-->", re.S),
         re.compile(r"^#.*$", re.M), re.compile(r"https?://\S+")]
_TAGS = re.compile(r"</?[A-Za-z][^>]*>")


def prose_numbers(markdown: str) -> list[str]:
    """The numbers a markdown text states as results, as written (the rules of the module docstring)."""
    for pattern in _DROP:
        markdown = pattern.sub(" ", markdown)
    found = []
    for match in _NUMBER.finditer(markdown):
        text = match.group().rstrip(",")
        digits = text.lstrip("-−+").rstrip("%")
        if _CITES.search(markdown[max(0, match.start() - 12): match.start()]):
            continue
        if re.fullmatch(r"0\d", digits) or (re.fullmatch(r"(19|20)\d\d", digits) and not text.endswith("%")):
            continue
        found.append(text)
    return found


def value(text: str) -> tuple[float, int, bool]:
    """(value, decimals, is a percentage) of a number as prose or an output writes it."""
    plain = text.replace(",", "").replace("−", "-").lstrip("+")
    percent = plain.endswith("%")
    plain = plain.rstrip("%")
    decimals = len(plain.split(".")[1]) if "." in plain else 0
    return float(plain), decimals, percent


def printed_values(cells) -> list[float]:
    """Every number the cells' outputs print, sorted, with its absolute value and, for a share, the
    percentage it is (0.735 -> 73.5)."""
    values = set()
    for cell in cells:
        for output in cell.get("outputs", []):
            texts = [output.get("text", "")] + [output.get("data", {}).get(kind, "")
                                                 for kind in ("text/plain", "text/markdown", "text/html")]
            for text in texts:
                text = _TAGS.sub(" ", "".join(text) if isinstance(text, list) else text)
                for match in _NUMBER.finditer(text):
                    number, _, _ = value(match.group().rstrip(","))
                    values.update({number, abs(number), abs(number) * 100})
    return sorted(values)


def sections(nb) -> list[int]:
    """The section of every cell: the number of `## ` headings before it (or at it)."""
    count, out = 0, []
    for cell in nb.cells:
        count += cell.cell_type == "markdown" and cell.source.startswith("## ")
        out.append(count)
    return out


def scope(nb, index: int, section: list[int], headings: dict) -> list:
    """The cells whose outputs may print what markdown cell `index` states: the code cells right before and
    right after it (up to the neighbouring markdown cells); every cell for the introduction (before the
    first `## ` heading) and the Summary, which gather results from the whole notebook."""
    if section[index] == 0 or headings.get(section[index], "").startswith("## Summary"):
        return nb.cells
    low, high = index, index + 1
    while low > 0 and nb.cells[low - 1].cell_type == "code":
        low -= 1
    while high < len(nb.cells) and nb.cells[high].cell_type == "code":
        high += 1
    return nb.cells[low:high]


def unmatched(nb) -> list[tuple[int, str]]:
    """(cell index, number) of every prose number that no output in its `scope` prints and no `given`
    lists."""
    section, missing = sections(nb), []
    headings = {section[i]: cell.source for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
                and cell.source.startswith("## ")}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        printed = printed_values(scope(nb, index, section, headings))
        given = {value(g)[0] for g in cell.metadata.get("given", [])}
        for text in prose_numbers(cell.source):
            number, decimals, _ = value(text)
            if number in given or abs(number) in given:
                continue
            half = 0.5 * 10 ** -decimals + 1e-9
            low = bisect.bisect_left(printed, abs(number) - half)
            if low == len(printed) or printed[low] > abs(number) + half:
                missing.append((index, text))
    return missing


PATHS = sorted({*notebook_paths(), *(student_path(p) for p in notebook_paths() if "solutions" in p.parts)})


@pytest.mark.parametrize("path", PATHS, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_every_prose_number_is_printed(path):
    missing = unmatched(nbformat.read(path, as_version=4))
    assert not missing, (f"{path.name}: these numbers in the prose are printed by no output of the notebook "
                         f"(cell index, number): {missing}. Update the sentence to the output, or list a number "
                         "that is not a result in the cell's metadata `given` (docs/maintainers.md)")


def test_a_number_changed_by_hand_fails():
    """The check can fail: in every notebook that states a result with two or more decimals, the first such
    result changed by hand (97 added, keeping its digits) is caught. How often a small change is caught
    depends on the digits (docs/maintainers.md, "Numbers in prose")."""
    tried = 0
    for path in PATHS:
        nb = nbformat.read(path, as_version=4)
        for cell in (c for c in nb.cells if c.cell_type == "markdown"):
            given = {value(g)[0] for g in cell.metadata.get("given", [])}
            results = [t for t in prose_numbers(cell.source) if value(t)[1] >= 2 and value(t)[0] not in given]
            if results:
                number, decimals, _ = value(results[0])
                cell.source = cell.source.replace(results[0], f"{number + 97:.{decimals}f}", 1)
                assert unmatched(nb), f"{path.name}: a changed result was not caught"
                tried += 1
                break
    assert tried >= 3, f"only {tried} notebooks state a result with two decimals"


def test_rules_on_a_hand_written_text():
    text = ("## 3. Results of 2024\nAccuracy is 0.94 (Table 1, §4.2) at `step 3000`, 73.5% of pairs; "
            "see notebook 04 and [this](https://x.org/2609.38797) by Guo et al. (2017). A drop of −0.126.")
    assert prose_numbers(text) == ["0.94", "73.5%", "−0.126"]
    assert value("−0.126") == (-0.126, 3, False) and value("5,000") == (5000.0, 0, False)
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("It answers 0.94 of them and 73.5% of pairs; a drop of −0.126, 12 beams."),
        nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("stream", text="0.9412 0.735 -0.1258\n")])])
    assert unmatched(nb) == [(0, "12")]
    nb.cells[0].metadata["given"] = ["12"]
    assert unmatched(nb) == []
