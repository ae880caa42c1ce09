"""Each learner's notebook keeps the reading path of the course (issue 43; README, "How a notebook reads").

Measured on the learner's copy `notebooks/NN_*.ipynb` (its twin adds only the solutions):

- **prose on the main path**: at most `MAIN_PATH_WORDS` words of markdown outside the *Under the hood*
  section (a `## Under the hood` heading up to the next `## ` heading), which holds the mechanics and has
  at most `UNDER_THE_HOOD_WORDS`;
- **no wall of text**: no markdown cell over `CELL_WORDS` words;
- **short code**: no code cell over `CODE_LINES` non-blank lines, no code line over `LINE_CHARS`
  characters;
- **takeaways**: every numbered section (`## 1. ...`) has a `**Takeaway` paragraph before the next `## `
  heading; the notebook ends with `## Summary` and `## Exercises`.

Words are runs of non-space characters after HTML tags are removed, as `wc -w` counts them.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.build.twins import label

ROOT = Path(__file__).resolve().parents[1]
LEARNER = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MAIN_PATH_WORDS = 2_600  # "at most about 2,500"
UNDER_THE_HOOD_WORDS = 700
CELL_WORDS = 260  # "no cell over about 250 words"
CODE_LINES = 15
LINE_CHARS = 100
_TAG = re.compile(r"</?[A-Za-z][^>]*>")


def words(markdown: str) -> int:
    return len(_TAG.sub(" ", markdown).split())


def cells(path: Path) -> list[tuple[str, str]]:
    notebook = json.loads(path.read_text())
    return [(c["cell_type"], "".join(c["source"])) for c in notebook["cells"]]


def sections(path: Path) -> list[tuple[str, list[str]]]:
    """The notebook's markdown by `## ` section: (heading, markdown cells), the title's part first."""
    out: list[tuple[str, list[str]]] = [("", [])]
    for kind, source in cells(path):
        if kind != "markdown":
            continue
        heading = next((line for line in source.splitlines() if line.startswith("## ")), None)
        if heading:
            out.append((heading[3:].strip(), []))
        out[-1][1].append(source)
    return out


def test_there_are_learner_notebooks():
    assert len(LEARNER) >= 7


@pytest.mark.parametrize("path", LEARNER, ids=lambda p: p.stem)
def test_prose_fits_the_reading_path(path):
    by_section = sections(path)
    hood = sum(words(s) for heading, cell in by_section if heading.startswith("Under the hood") for s in cell)
    main = sum(words(s) for heading, cell in by_section if not heading.startswith("Under the hood") for s in cell)
    assert main <= MAIN_PATH_WORDS, f"{path.name}: {main} words of prose on the main path (at most {MAIN_PATH_WORDS})"
    assert hood <= UNDER_THE_HOOD_WORDS, (
        f"{path.name}: Under the hood has {hood} words (at most {UNDER_THE_HOOD_WORDS})"
    )
    markdown = [(i, words(s)) for i, (kind, s) in enumerate(cells(path)) if kind == "markdown"]
    long_cells = [(i, n) for i, n in markdown if n > CELL_WORDS]
    assert not long_cells, f"{path.name}: markdown cells over {CELL_WORDS} words (cell index, words): {long_cells}"


@pytest.mark.parametrize("path", LEARNER, ids=lambda p: p.stem)
def test_code_cells_are_short(path):
    long_cells, long_lines = [], []
    for i, (kind, source) in enumerate(cells(path)):
        if kind != "code":
            continue
        lines = source.splitlines()
        if sum(bool(line.strip()) for line in lines) > CODE_LINES:
            long_cells.append(i)
        long_lines += [(i, len(line)) for line in lines if len(line) > LINE_CHARS]
    assert not long_cells, f"{path.name}: code cells over {CODE_LINES} non-blank lines (cell index): {long_cells}"
    assert not long_lines, f"{path.name}: code lines over {LINE_CHARS} characters (cell, length): {long_lines}"


@pytest.mark.parametrize("path", LEARNER, ids=lambda p: p.stem)
def test_every_numbered_section_ends_with_a_takeaway(path):
    by_section = sections(path)
    numbered = [(heading, cell) for heading, cell in by_section if re.match(r"\d+\.", heading)]
    assert numbered, f"{path.name}: no numbered section"
    missing = [heading for heading, cell in numbered if not any("**Takeaway" in s for s in cell)]
    assert not missing, f"{path.name}: sections without a **Takeaway** paragraph: {missing}"
    headings = [heading for heading, _ in by_section]
    assert "Summary" in headings and "Exercises" in headings, f"{path.name}: needs ## Summary and ## Exercises"


def test_the_rules_on_a_hand_written_notebook(tmp_path):
    notebook = {"cells": [
        {"cell_type": "markdown", "source": ["# Title\n", "one <b>two</b> three"], "metadata": {}},
        {"cell_type": "markdown", "source": ["## 1. First\n", "**Takeaway:** four five"], "metadata": {}},
        {"cell_type": "markdown", "source": ["## Under the hood\n", "six seven"], "metadata": {}},
        {"cell_type": "markdown", "source": ["## Summary\n", "eight"], "metadata": {}},
    ]}
    path = tmp_path / "99_x.ipynb"
    path.write_text(json.dumps(notebook))
    by_section = dict(sections(path))
    assert words(by_section["Under the hood"][0]) == 6  # "## Under the hood six seven"
    assert sum(words(s) for s in by_section[""]) == 5  # tags removed: "# Title one two three"
    assert list(by_section) == ["", "1. First", "Under the hood", "Summary"]


# Study time (issue 43, item 9): the rule that docs/guide.md states and follows.
# Issue 54, item 5: displayed tables count, and exercises take a student's time.
READING_WPM = 120  # words of prose per minute: half of silent reading's 238 (Brysbaert 2019), for technical prose
CODE_LINES_PER_MINUTE = 10
MINUTES_PER_FIGURE = 1
MINUTES_PER_TABLE = 1  # a displayed table (an HTML table output) is read like a figure
MINUTES_PER_EXERCISE = 25  # an instructor's timing of a master's student's pace, not a reader's


def exercises(path: Path) -> int:
    """The numbered items of the notebook's `## Exercises` cell."""
    source = next(s for kind, s in cells(path) if kind == "markdown" and s.lstrip().startswith("## Exercises"))
    return len(re.findall(r"^\d+\.\s", source, re.MULTILINE))


def study_minutes(path: Path) -> int:
    """Prose, code, figures and displayed tables read at the rates above, plus the exercises, rounded to 5
    minutes."""
    notebook = json.loads(path.read_text())
    prose = sum(words(s) for heading, cell in sections(path) for s in cell)
    code = sum(bool(line.strip()) for kind, s in cells(path) if kind == "code" for line in s.splitlines())
    figures = sum("image/png" in out.get("data", {}) for c in notebook["cells"] for out in c.get("outputs", []))
    tables = sum("<table" in "".join(out.get("data", {}).get("text/html", "")) for c in notebook["cells"]
                 for out in c.get("outputs", []))
    minutes = (prose / READING_WPM + code / CODE_LINES_PER_MINUTE + figures * MINUTES_PER_FIGURE
               + tables * MINUTES_PER_TABLE + exercises(path) * MINUTES_PER_EXERCISE)
    return int(5 * round(minutes / 5))


@pytest.mark.parametrize("path", LEARNER, ids=lambda p: p.stem)
def test_the_guide_and_the_notebook_state_the_rules_study_time(path):
    minutes = study_minutes(path)
    guide = (ROOT / "docs" / "guide.md").read_text()
    row = next(line for line in guide.splitlines() if line.startswith("| [") and f"notebooks/{path.name})" in line)
    stated = [int(m) for m in re.findall(r"about (\d+) min\b", row)]
    assert stated == [minutes], f"docs/guide.md's table row for {path.name} must say 'about {minutes} min': {row}"
    block = guide.split(f"\n### {label(path)} · ", 1)[-1].split("\n### ")[0]  # the notebook's section
    assert f"**Study time:** about {minutes} min" in block, f"docs/guide.md's section on {path.name}"
    schedule = (ROOT / "docs" / "instructors" / "schedule.md").read_text()
    assert re.search(rf"\| {re.escape(label(path))} · [^|]+\| about {minutes} min \|", schedule), \
        f"docs/instructors/schedule.md's table must say 'about {minutes} min' for {path.name}"
    notebook = "\n".join(s for kind, s in cells(path) if kind == "markdown")
    assert f"about {minutes} minutes to study" in notebook, f"{path.name} must say 'about {minutes} minutes to study'"


def test_the_guide_states_the_series_total():
    hours = round(sum(study_minutes(p) for p in LEARNER) / 60)
    guide = (ROOT / "docs" / "guide.md").read_text()
    assert f"The whole series takes about {hours} hours of study" in guide, f"docs/guide.md: about {hours} hours"
