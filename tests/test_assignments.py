"""Graded assignments (helpers/build/assignments.py, otter-grader) and per-student variants
(helpers/exercises/variants.py): every twin becomes an Otter master notebook with one question per exercise;
the autograder gives the answer twin full marks, the untouched student version none, and takes away exactly
the point of a wrong answer; two student ids draw different numbers, and one's answer fails the other's check."""
from __future__ import annotations

import copy
import json
import re

import nbformat
import numpy as np
import pandas as pd
import pytest

from helpers import config
from helpers.build import assignments, cli, twins
from helpers.exercises import ch04, ch07, graded, variants

TWINS = sorted((cli.NOTEBOOK_DIR / twins.SOLUTIONS).glob("[0-9][0-9]_*.ipynb"))
# Two student ids whose draws differ from each other (and, by construction, from the example) in every variant.
IDS = ("s1", "s5")


def _answers(nb) -> list:
    return [c for c in nb.cells if "answer" in c.metadata.get("tags", []) and "student_id =" not in c.source]


@pytest.mark.parametrize("twin", TWINS, ids=lambda p: p.stem)
def test_every_exercise_becomes_a_question_with_a_public_and_a_hidden_test(twin):
    nb = nbformat.read(twin, as_version=4)
    master = assignments.master_notebook(nb, twin.stem)
    raw = [c.source for c in master.cells if c.cell_type == "raw"]
    assert raw[0].startswith("# ASSIGNMENT CONFIG") and f"name: {twin.stem}" in raw[0]
    questions = [s for s in raw if s.startswith("# BEGIN QUESTION")]
    assert len(questions) == len(_answers(nb)) >= 1
    assert not any("check" in c.metadata.get("tags", []) for c in master.cells)
    hidden = [c.source for c in master.cells if c.cell_type == "code" and "hidden: true" in c.source]
    assert len(hidden) == len(questions) and all(f"import graded, ch{twin.stem[:2]}" in s for s in hidden)
    exercises = [c.source for c in master.cells if c.cell_type == "markdown" and c.source.startswith("## Exercises")]
    assert exercises[0].endswith(assignments.GRADED_LINE) and "twin" not in exercises[0]
    assert nb == nbformat.read(twin, as_version=4)  # the twin is not modified


def _answer_names(nb) -> list[str]:
    return [re.findall(r"^(\w+) = ", c.source, re.M)[-1] for c in _answers(nb)]


def test_the_guide_and_the_rubric_name_each_notebooks_exercise_variables():
    """docs/guide.md lists each notebook's exercises by their answer variables, in order, and the
    instructors' rubric grades only variables that exist: an exercise replaced in a twin must be
    replaced in both documents."""
    guide = (config.REPO_ROOT / "docs" / "guide.md").read_text()
    listed = [re.findall(r"\(\d+\) `(\w+)`", line) for line in guide.splitlines()
              if line.startswith("**Exercises:**")]
    names = {re.match(r"\d\d(_\d)?", t.stem)[0]: _answer_names(nbformat.read(t, as_version=4)) for t in TWINS}
    assert listed == list(names.values())
    rubric = (config.REPO_ROOT / "docs" / "instructors" / "rubric.md").read_text()
    rows = re.findall(r"^\| (\d\d(?:\.\d)?) \| \d+ \(`(\w+)`\)", rubric, re.M)
    assert len(rows) >= 10
    for notebook, variable in rows:
        assert variable in names[notebook.replace(".", "_")], (notebook, variable)


def test_a_malformed_answer_cell_is_refused_with_its_id():
    nb = nbformat.read(TWINS[0], as_version=4)
    cell = _answers(nb)[0]
    cell.source = "answer = 3"
    with pytest.raises(ValueError, match="does not end with `name = None`"):
        assignments.master_notebook(nb, TWINS[0].stem)


def test_graded_runs_a_check_silently_and_says_whether_it_is_right(capsys):
    namespace = {"better_share": 0.9 * 0.4 / (0.9 * 0.4 + 0.6 * 0.1)}
    assert graded("from helpers.exercises import ch04\nch04.exercise_1(better_share)", namespace)
    assert not graded("ch04.exercise_1(0.5)", namespace)
    assert not graded("ch04.exercise_1(None)", namespace)
    assert not graded("x = 1", namespace)  # a check that says nothing gives no point
    assert capsys.readouterr().out == ""


def test_an_unanswered_exercise_earns_no_point_even_where_the_world_cannot_check_it():
    """The hidden test as the master notebook writes it: a world without the chosen seeds makes the check
    say it cannot check (which counts as right for an answer), but a blank answer still gets nothing."""
    check = "from helpers.exercises import ch07\nch07.exercise_2(control_one_sign, worlds, ['a'], (0, 1))"
    hidden = assignments.HIDDEN.format(chapter="07", variable="control_one_sign", check=check)
    worlds = {0: pd.DataFrame({"control: difference": [0.1]}, index=["a"])}  # world 1 is missing
    assert not eval(hidden.splitlines()[-1], {"control_one_sign": None, "worlds": worlds, "graded": graded})
    assert eval(hidden.splitlines()[-1], {"control_one_sign": 3, "worlds": worlds, "graded": graded})


def _pair_00(student_id):
    return variants.checkpoint_pair_00(student_id, ["step-01", "step-02", "step-03", "step-04", "step-05"])


@pytest.mark.parametrize("draw", [_pair_00, variants.accuracies_04, variants.worlds_07], ids=["00", "04", "07"])
def test_a_student_draws_the_same_numbers_every_time_and_never_the_example(draw):
    example = draw(None)
    drawn = {draw(f"student-{k}") for k in range(40)}
    assert example not in drawn and len(drawn) >= 3
    assert _pair_00(None) == ("step-04", "step-05") and variants.checkpoint_pair_00("s1", ["a", "b"]) == ("a", "b")
    assert draw(IDS[0]) == draw(" s1 ")
    assert draw(IDS[0]) != draw(IDS[1])
    with pytest.raises(ValueError, match="student_id is empty"):
        draw("  ")


def test_one_students_answer_fails_anothers_check(capsys):
    def share(better, worse):
        return better * (1 - worse) / (better * (1 - worse) + worse * (1 - better))

    first, second = (variants.accuracies_04(i) for i in IDS)
    ch04.exercise_1(share(*first), *first)
    ch04.exercise_1(share(*first), *second)
    assert [line.split(": ")[1] for line in capsys.readouterr().out.splitlines()] == ["right", "not yet"]
    claims = ["a", "b", "c"]
    worlds = {seed: pd.DataFrame({"control: difference": diff}, index=claims)
              for seed, diff in [(0, [0.1, 0.2, 0.3]), (1, [0.1, -0.2, 0.3]), (2, [-0.1, 0.2, 0.3])]}
    counts = {chosen: int((np.sign(pd.DataFrame({s: worlds[s]["control: difference"] for s in chosen}))
                           .nunique(axis=1) == 1).sum()) for chosen in variants.WORLDS_07}
    assert counts == {(0, 1, 2): 1, (0, 1): 2, (0, 2): 2, (1, 2): 1}  # by hand from the table above
    ch07.exercise_2(counts[(0, 1)], worlds, claims, (0, 1))
    ch07.exercise_2(counts[(0, 1)], worlds, claims, (1, 2))
    assert [line.split(": ")[1] for line in capsys.readouterr().out.splitlines()] == ["right", "not yet"]


@pytest.fixture(scope="module")
def notebook_07(tmp_path_factory):
    """Notebook 07's assignment (the quickest notebook to grade), written once by otter assign."""
    pytest.importorskip("otter", reason="otter-grader is the instructors' tool: `make test-instructor` installs it "
                                          "and runs this test")
    twin = cli.NOTEBOOK_DIR / twins.SOLUTIONS / "07_what_the_series_found.ipynb"
    out = assignments.assign(twin, tmp_path_factory.mktemp("assignments"))
    return twin, out, next((out / "autograder").glob("*.zip"))


def _with(twin_nb, student_nb, student_id, wrong: str | None = None):
    """The twin as a submission: the assignment's metadata, `student_id` set, and `wrong` (a variable) set
    to a wrong value at the end of its solution."""
    nb = copy.deepcopy(twin_nb)
    nb.metadata["otter"] = student_nb.metadata["otter"]
    for cell in nb.cells:
        if cell.get("id") == "student-id":
            cell.source = cell.source.replace("student_id = None", f"student_id = {student_id!r}")
    if wrong:
        cell = next(c for c in nb.cells if twins.TAG in c.metadata.get("tags", []) and f"{wrong} =" in c.source)
        cell.source += f"\n{wrong} = 'copied'"
    return nb


def test_the_autograder_gives_full_marks_none_and_takes_a_wrong_answers_point(notebook_07, tmp_path):
    twin, out, autograder = notebook_07
    student = nbformat.read(out / "student" / twin.name, as_version=4)
    assert json.dumps(student.metadata["otter"]).count('"hidden": true') == 0  # hidden tests stay in the zip
    twin_nb = nbformat.read(twin, as_version=4)
    submissions = {"blank": student, IDS[0]: _with(twin_nb, student, IDS[0]),
                   IDS[1]: _with(twin_nb, student, IDS[1], wrong="habit_auc")}
    scores = {}
    for name, nb in submissions.items():
        path = tmp_path / name / twin.name
        path.parent.mkdir()
        nbformat.write(nb, path)
        scores[name] = assignments.grade(path, autograder, tmp_path / name)
    assert scores["blank"] == {"exercise_1": 0, "exercise_2": 0}
    assert scores[IDS[0]] == {"exercise_1": 1, "exercise_2": 1}  # the twin's solutions, the first student's draw
    assert scores[IDS[1]] == {"exercise_1": 0, "exercise_2": 1}  # another draw still right; the wrong one loses
    assert variants.worlds_07(IDS[0]) != variants.worlds_07(IDS[1])
