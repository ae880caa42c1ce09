"""Exercises a learner answers in a named variable and checks without seeing the answer
(`helpers.exercises`): the comparison against hand-worked cases and properties, and every notebook's
exercises wired the same way (an answer cell that sets the variable to None, a check cell that passes it,
the twin's committed checks all *right*)."""
from __future__ import annotations

import ast
import re

import nbformat
import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.build import twins
from helpers.build.cli import notebook_paths
from helpers.exercises import NOT_YET, RIGHT, UNANSWERED, matches, verdict

TWINS = notebook_paths()


def test_an_unanswered_exercise_says_where_the_answer_goes():
    status, line = verdict("Exercise 2", "pooled_auc", None, 0.8123)
    assert status == UNANSWERED and "`pooled_auc`" in line and "0.81" not in line


def test_a_wrong_answer_shows_the_learners_value_never_the_reference():
    status, line = verdict("Exercise 2", "pooled_auc", 0.75, 0.8123, tol=1e-3, hint="pool the rows.")
    assert status == NOT_YET and "0.75" in line and "0.812" not in line and "Hint: pool the rows." in line


@pytest.mark.parametrize("answer, expected, tol, right", [
    (0.8125, 0.8123, 1e-3, True), (0.8140, 0.8123, 1e-3, False), (1, 1.0004, 1e-3, True),
    (True, 1.0, 1e-3, False), ("0.81", 0.81, 1e-3, False), (float("nan"), 0.5, 1e-3, False),
    ([0.1, 0.2], np.array([0.1, 0.2]), 1e-9, True), ([0.1], np.array([0.1, 0.2]), 1e-9, False),
    (pd.Series([1.0, 2.0]), [1.0, 2.0005], 1e-3, True), (["a", "b"], [1.0, 2.0], 1e-3, False),
    ({"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 2.0}, 0.0, True), ({"a": 1.0}, {"a": 1.0, "b": 2.0}, 0.0, False),
    (" Reproduced ", "reproduced", 0.0, True), ("contradicted", "reproduced", 0.0, False),
    (np.bool_(True), True, 0.0, True), (1, True, 0.0, False),
    # an AUC of one class is NaN: only NaN matches it, in its place (notebook 05's exercise 3 in fast mode)
    (float("nan"), float("nan"), 1e-3, True), (0.5, float("nan"), 1e-3, False),
    ([np.nan, 0.5], [np.nan, 0.5], 1e-3, True), ([0.5, np.nan], [np.nan, 0.5], 1e-3, False)])
def test_matches_hand_worked_cases(answer, expected, tol, right):
    assert matches(answer, expected, tol) is right


finite = st.floats(-1e6, 1e6, allow_nan=False)


@given(expected=finite, offset=st.floats(0.0, 1.0), tol=st.floats(1e-6, 1e-1))
def test_within_the_tolerance_is_right_and_beyond_it_is_not(expected, offset, tol):
    assert verdict("E", "x", expected + offset * tol * 0.99, expected, tol=tol)[0] == RIGHT
    assert verdict("E", "x", expected + tol * (1.01 + offset), expected, tol=tol)[0] == NOT_YET
    assert verdict("E", "x", expected - tol * (1.01 + offset), expected, tol=tol)[0] == NOT_YET


def _exercise_cells(twin):
    cells = nbformat.read(twin, as_version=4).cells
    return [(tag, cell) for cell in cells for tag in twins.EXERCISE_TAGS if tag in cell.metadata.get("tags", [])
            and cell.get("id") != "student-id"]  # the student id that draws a variant is no exercise's answer


def _exercise_count(twin) -> int:
    cell = next(c for c in nbformat.read(twin, as_version=4).cells
                if c.cell_type == "markdown" and c.source.lstrip().startswith("## Exercises"))
    return len(re.findall(r"^\d+\.\s", cell.source, re.MULTILINE))


@pytest.mark.parametrize("twin", TWINS, ids=[p.stem for p in TWINS])
def test_every_exercise_has_an_answer_cell_and_a_check_cell_that_passes_its_variable(twin):
    found = _exercise_cells(twin)
    assert [tag for tag, _ in found] == ["answer", "check"] * _exercise_count(twin), \
        f"{twin.name}: each numbered exercise needs an answer cell, then (after its solution) a check cell"
    for (_, answer), (_, check) in zip(found[::2], found[1::2]):
        assigned = [node for node in ast.parse(answer.source).body if isinstance(node, ast.Assign)]
        assert len(assigned) == 1 and isinstance(assigned[0].value, ast.Constant) \
            and assigned[0].value.value is None, f"{twin.name}: an answer cell sets one variable to None"
        variable = assigned[0].targets[0].id
        call = ast.parse(check.source).body[-1].value
        assert isinstance(call, ast.Call) and isinstance(call.args[0], ast.Name) \
            and call.args[0].id == variable, f"{twin.name}: the check after `{variable} = None` passes it"


@pytest.mark.parametrize("twin", TWINS, ids=[p.stem for p in TWINS])
def test_the_twins_committed_checks_are_all_right(twin):
    """The solutions, run in full mode (tests/test_outputs.py reruns them), pass their own checks, whose
    references recompute each answer by another route; the learner's copy carries no check output."""
    for tag, cell in _exercise_cells(twin):
        if tag == "check":
            text = "".join(out.get("text", "") for out in cell.outputs)
            assert f": {RIGHT}:" in text, f"{twin.name}: {cell.source!r} says {text!r}"
    learner = nbformat.read(twins.student_path(twin), as_version=4).cells
    assert all(not c.get("outputs") for c in learner if set(c.metadata.get("tags", [])) & set(twins.EXERCISE_TAGS))
