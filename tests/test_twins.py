"""The learner's notebooks show no solution: each is derived from its answer twin (notebooks/solutions/)
by `helpers.build.twins.student_copy`, and the committed copy is exactly that derivation."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from helpers.build import twins
from helpers.build.cli import NOTEBOOK_DIR, notebook_paths

new_code, new_md, new_output = nbformat.v4.new_code_cell, nbformat.v4.new_markdown_cell, nbformat.v4.new_output
TWIN_DIR = NOTEBOOK_DIR / twins.SOLUTIONS
TWINS = sorted(TWIN_DIR.glob("*.ipynb"))
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)|(?:src|href)=\"([^\"]+)\"")


def solution(cell):
    cell.metadata.update({"tags": ["solution"], "jupyter": {"source_hidden": True}})
    return cell


def chapter(*extra):
    """A small executed notebook: a title, two code cells with outputs, the exercises, then `extra`."""
    cells = [new_md("# 07 · A chapter", id="title"),
             new_code("print(1)", id="code-1", execution_count=1,
                      outputs=[new_output("stream", name="stdout", text="1\n")]),
             new_code("2", id="code-2", execution_count=2,
                      outputs=[new_output("execute_result", data={"text/plain": "2"}, execution_count=2)]),
             new_md("## Exercises\n\n1. Print 3.", id="exercises")]
    return nbformat.v4.new_notebook(cells=cells + list(extra),
                                    metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                             "language": "python"}})


def twin_chapter():
    return chapter(solution(new_code("print(3)", id="sol-1",
                                     outputs=[new_output("stream", name="stdout", text="3\n")])),
                   solution(new_md("It prints 3.", id="answer-1")),
                   solution(new_code("print(4)", id="sol-2")))


def test_student_copy_removes_the_solutions_and_links_to_the_twin():
    twin = twin_chapter()
    before = nbformat.writes(twin)
    student = twins.student_copy(twin, "07_a_chapter.ipynb")
    assert nbformat.writes(twin) == before  # the twin is left as it was
    assert [c.id for c in student.cells] == ["title", "code-1", "code-2", "exercises", twins.LINK_ID]
    assert student.cells[:4] == twin.cells[:4]  # outputs, counts and metadata of the other cells untouched
    assert student.metadata == twin.metadata
    link = student.cells[-1]
    assert link.cell_type == "markdown" and "](solutions/07_a_chapter.ipynb)" in link.source
    assert not any(twins.is_solution(c) for c in student.cells)
    assert "print(3)" not in nbformat.writes(student) and "It prints 3." not in nbformat.writes(student)
    nbformat.validate(student)


def test_answer_and_check_cells_stay_in_the_learners_copy_unrun():
    ran = [new_output("stream", name="stdout", text="Exercise 1: right\n")]
    answer = new_code("x = None", id="answer-1", execution_count=5, metadata={"tags": ["answer"]})
    check = new_code("check(x)", id="check-1", execution_count=7, outputs=ran, metadata={"tags": ["check"]})
    twin = chapter(answer, solution(new_code("x = 3", id="sol-1")), check)
    student = twins.student_copy(twin, "07_a_chapter.ipynb")
    assert [c.id for c in student.cells][-3:] == ["answer-1", "check-1", twins.LINK_ID]
    assert all(c.outputs == [] and c.execution_count is None for c in student.cells[-3:-1])
    assert twin.cells[-1].outputs == ran  # the twin keeps its output


def test_student_copy_is_deterministic():
    one = twins.notebook_text(twins.student_copy(twin_chapter(), "07_a_chapter.ipynb"))
    two = twins.notebook_text(twins.student_copy(twin_chapter(), "07_a_chapter.ipynb"))
    assert one == two and one.endswith("}\n")


def test_a_notebook_without_solutions_is_copied_unchanged():
    nb = chapter()
    assert twins.student_copy(nb, "07_a_chapter.ipynb") == nb


@pytest.mark.parametrize("after", [new_code("x = 1", id="late"), new_md("### An untagged answer", id="late")])
def test_a_cell_after_a_solution_must_be_a_solution(after):
    nb = chapter(solution(new_code("print(3)", id="sol-1")), after)
    with pytest.raises(ValueError, match="cell 5"):
        twins.student_copy(nb, "07_a_chapter.ipynb")


def test_paths():
    student = Path("notebooks/01_x.ipynb")
    assert twins.twin_path(student) == Path("notebooks/solutions/01_x.ipynb")
    assert twins.student_path(twins.twin_path(student)) == student
    assert twins.is_twin(twins.twin_path(student)) and not twins.is_twin(student)
    with pytest.raises(ValueError):
        twins.student_path(student)


def test_migrate_moves_the_chapter_into_its_twin(tmp_path):
    nbformat.write(twin_chapter(), tmp_path / "07_a_chapter.ipynb")
    original = (tmp_path / "07_a_chapter.ipynb").read_text(encoding="utf-8")
    assert twins.migrate(tmp_path) == [tmp_path / "solutions" / "07_a_chapter.ipynb"]
    assert (tmp_path / "solutions" / "07_a_chapter.ipynb").read_text(encoding="utf-8") == original
    student = (tmp_path / "07_a_chapter.ipynb").read_text(encoding="utf-8")
    assert student == twins.student_text(tmp_path / "solutions" / "07_a_chapter.ipynb")
    assert twins.write_student_copies(tmp_path) == []  # already derived: nothing rewritten
    with pytest.raises(FileExistsError):
        twins.migrate(tmp_path)
    assert missing_links(tmp_path / "07_a_chapter.ipynb") == []


def relative_links(path: Path, cells=None) -> list[str]:
    """The relative link targets (no URL, no in-page anchor) of a notebook's markdown cells (or of `cells`)."""
    cells = nbformat.read(path, as_version=4).cells if cells is None else cells
    found = [a or b for c in cells if c.cell_type == "markdown" for a, b in _LINK.findall(c.source)]
    return [t for t in found if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]


def missing_links(path: Path, cells=None) -> list[str]:
    """The relative links of `path` (or of its `cells`) whose target does not exist, seen from its folder."""
    return [t for t in relative_links(path, cells) if not (path.parent / t.split("#")[0]).exists()]


@pytest.mark.skipif(not TWINS, reason="no answer twins in notebooks/solutions/ yet")
def test_every_notebook_has_its_twin_and_the_tests_run_the_twins():
    students = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
    assert [p.name for p in students] == [p.name for p in TWINS], \
        "every notebooks/NN_*.ipynb needs its twin in notebooks/solutions/ (and every twin its learner's copy)"
    assert notebook_paths() == TWINS


@pytest.mark.skipif(not TWINS, reason="no answer twins in notebooks/solutions/ yet")
@pytest.mark.parametrize("twin", TWINS, ids=[p.stem for p in TWINS])
def test_the_committed_notebook_is_derived_from_its_twin(twin: Path):
    student = twins.student_path(twin)
    assert student.exists(), f"{student.name} is missing; run `python -m helpers twins`"
    assert student.read_text(encoding="utf-8") == twins.student_text(twin), (
        f"notebooks/{student.name} is not the learner's copy of notebooks/solutions/{twin.name}: edit the twin "
        "(never the learner's copy), then run `make notebooks` or `python -m helpers twins`")
    assert missing_links(student) == [], f"{student.name}: links to missing files"
    assert f"{twins.SOLUTIONS}/{twin.name}" in relative_links(student), f"{student.name} does not link to its twin"


@pytest.mark.skipif(not TWINS, reason="no answer twins in notebooks/solutions/ yet")
@pytest.mark.parametrize("twin", TWINS, ids=[p.stem for p in TWINS])
def test_the_twin_has_executed_solutions(twin: Path):
    solutions = [c for c in nbformat.read(twin, as_version=4).cells if twins.is_solution(c)]
    code = [c for c in solutions if c.cell_type == "code"]
    assert code, f"{twin.name} has no solution cell"
    assert all(c.execution_count is not None for c in code), f"{twin.name}: commit it executed (`make notebooks`)"
    # A solution's own links resolve from notebooks/solutions/ (the chapter's links are checked in the learner's copy).
    assert missing_links(twin, solutions) == [], f"{twin.name}: a solution links to missing files"


def test_links_are_rewritten_for_the_twins_folder_and_back():
    import nbformat

    from helpers.build import twins

    text = ("See [the glossary](../docs/glossary.md#ece), [notebook 02](02_self_consistency.ipynb), "
            "[a page](https://example.org/a), [a section](#top) and ![a figure](fig.png).")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text),
                                         nbformat.v4.new_code_cell("x = '](a.md)'")])
    twin = twins.relink(nbformat.from_dict(nb), to_twin=True)
    assert twin.cells[0].source == ("See [the glossary](../../docs/glossary.md#ece), "
                                    "[notebook 02](../02_self_consistency.ipynb), "
                                    "[a page](https://example.org/a), [a section](#top) and ![a figure](../fig.png).")
    assert twin.cells[1].source == "x = '](a.md)'"  # code is never touched
    assert twins.student_copy(twin, "00_x.ipynb").cells[0].source == text
