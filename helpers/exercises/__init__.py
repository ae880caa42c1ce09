"""Exercise checks: each exercise puts its answer in a named variable, and a check cell says whether it is
right without printing the expected value.

`check` compares an answer with the value a reference computes from the notebook's own inputs (numbers
within an absolute tolerance; arrays, lists, dicts and pandas objects element by element; anything else by
equality) and prints one line (`verdict`): *not answered yet* while the variable is ``None``, *not yet*
(with the learner's value and a hint) when it is wrong, *right* when it matches. The references are in one module
per notebook (``ch00`` to ``ch07``), each function named after its exercise; they recompute the answer
from the inputs the check cell passes, so the checks hold on any world, the fast one included.

The references are readable code, as the answer twins are: a learner who opens them sees how the answer
is computed. They are checks to learn with, not an examination.

Used by the notebooks' check cells; tested by tests/test_exercises.py. Imports numpy and pandas only.
"""
from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from helpers.evaluation import contrast, metrics

RIGHT, NOT_YET, UNANSWERED, UNCHECKABLE = "right", "not yet", "not answered yet", "cannot be checked here"


def matches(answer, expected, tol: float) -> bool:
    """Whether `answer` equals `expected`: numbers within `tol` (absolute; NaN matches only NaN), arrays, lists
    and pandas objects of the same shape element by element, dicts with the same keys value by value, strings
    ignoring case and surrounding spaces, anything else by ==. An answer of another kind (a string for
    a number, a list of another length) is wrong."""
    if isinstance(expected, Mapping):
        return isinstance(answer, Mapping) and set(answer) == set(expected) \
            and all(matches(answer[key], expected[key], tol) for key in expected)
    if isinstance(expected, (bool, np.bool_)):
        return isinstance(answer, (bool, np.bool_)) and bool(answer) == bool(expected)
    if isinstance(expected, str):
        return isinstance(answer, str) and answer.strip().lower() == expected.strip().lower()
    if isinstance(expected, (int, float, np.integer, np.floating)):
        if isinstance(answer, (bool, np.bool_)) or not isinstance(answer, (int, float, np.integer,
                                                                           np.floating)):
            return False
        if math.isnan(float(expected)):  # undefined here (an AUC with one class): the answer must be NaN too
            return math.isnan(float(answer))
        return math.isfinite(answer) and abs(float(answer) - float(expected)) <= tol
    if isinstance(expected, (list, tuple, np.ndarray, pd.Series, pd.DataFrame)):
        try:
            got, want = np.asarray(answer, dtype=float), np.asarray(expected, dtype=float)
        except (TypeError, ValueError):
            return False
        same = (np.abs(got - want) <= tol) | (np.isnan(got) & np.isnan(want))  # NaN where undefined, both
        return got.shape == want.shape and bool(np.all(same))
    return answer == expected


def verdict(exercise: str, variable: str, answer, expected, *, tol: float = 1e-3,
            hint: str = "") -> tuple[str, str]:
    """(RIGHT, NOT_YET or UNANSWERED, the line `check` prints) for the learner's variable `variable`
    holding `answer`; the line never shows `expected`."""
    if answer is None:
        return UNANSWERED, f"{exercise}: {UNANSWERED}: put your answer in `{variable}`."
    if matches(answer, expected, tol):
        within = "" if isinstance(expected, (str, bool, np.bool_)) else f" (within {tol:g})"
        return RIGHT, f"{exercise}: {RIGHT}: `{variable}` matches the reference{within}."
    shown = repr(answer) if len(repr(answer)) <= 80 else repr(answer)[:77] + "..."
    return NOT_YET, (f"{exercise}: {NOT_YET}: `{variable}` is {shown}, which does not match the reference "
                     f"(within {tol:g})." + (f" Hint: {hint}" if hint else ""))


def check(exercise: str, variable: str, answer, expected, *, tol: float = 1e-3, hint: str = "") -> None:
    """Print `verdict`'s line (a check cell shows only that line)."""
    print(verdict(exercise, variable, answer, expected, tol=tol, hint=hint)[1])


def uncheckable(exercise: str, why: str) -> None:
    """Say that this world cannot check `exercise` (for example: no pair reaches the contrast-set size)."""
    print(f"{exercise}: {UNCHECKABLE}: {why}")


def graded(check_cell: str, namespace: dict) -> bool:
    """Whether a check cell's code `check_cell`, run in the notebook's `namespace` without printing, says
    *right* for every exercise it checks: the hidden test of a graded assignment (helpers.build.assignments).
    A world that cannot check the exercise counts as right (the grader cannot take the point away)."""
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        exec(check_cell, namespace)
    statuses = [line.split(": ")[1] for line in said.getvalue().splitlines() if line.count(": ") >= 2]
    return bool(statuses) and all(status in (RIGHT, UNCHECKABLE) for status in statuses)


def pair_aucs(frame: pd.DataFrame, i: str, j: str) -> tuple[float, float]:
    """One seed's (plain, class-balanced) contrast AUC of the pair (i, j), from its normalized rows: scored
    as a whole, then per kind (improvements, regressions) and averaged (NaN where one kind is missing).
    The shared reference of notebooks 05 and 06's checks."""
    rows = contrast.contrast_rows(frame, i, j)
    kinds = [part for _, part in rows.groupby("kind")]
    balanced = np.mean([metrics.auroc(k["confidence"], k["correct"]) for k in kinds]) if len(kinds) == 2 \
        else np.nan
    return metrics.auroc(rows["confidence"], rows["correct"]), float(balanced)
