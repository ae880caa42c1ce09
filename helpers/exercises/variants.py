"""Per-student variants: the numbers some exercises use, drawn from a student id, so that answers copied
from the worked example or from another student do not pass the check.

Each function takes the learner's `student_id` (None: the worked example the answer twin solves) and
returns that exercise's parameters. The draws are public (a student needs them to solve the exercise);
the references that check the answers are not (helpers/exercises/chNN.py, left out of the student release).

Used by notebooks 00.2, 04.1 and 07's exercises and their checks; tested by tests/test_assignments.py.
"""
from __future__ import annotations

import hashlib

# The choices of each exercise: the example first, then the draws of student ids.
ACCURACIES_04 = [(0.9, 0.6), (0.8, 0.5), (0.85, 0.55), (0.95, 0.65), (0.8, 0.7), (0.9, 0.5), (0.75, 0.6),
                 (0.95, 0.8)]
WORLDS_07 = [(0, 1, 2), (0, 1), (0, 2), (1, 2)]


def draw(student_id, exercise: str, choices: list):
    """The choice `student_id` draws for `exercise` (the same id, the same draw, on every machine): None
    gives ``choices[0]``, the worked example, and a student id one of the others, never the example."""
    if student_id is None or len(choices) == 1:
        return choices[0]
    if not str(student_id).strip():
        raise ValueError("student_id is empty: set it to your student id, as your instructor lists it, "
                         "or to None for the worked example's numbers")
    digest = hashlib.sha256(f"{exercise}:{str(student_id).strip()}".encode()).digest()
    return choices[1 + int.from_bytes(digest[:4], "big") % (len(choices) - 1)]


def checkpoint_pair_00(student_id, checkpoints: list[str]) -> tuple[str, str]:
    """Notebook 00.2, exercise 2: two neighbouring checkpoints of `checkpoints` (None: the last two)."""
    pairs = list(zip(checkpoints[:-1], checkpoints[1:]))
    return draw(student_id, "00-3", pairs[::-1])


def accuracies_04(student_id) -> tuple[float, float]:
    """Notebook 04.1, exercise 1: the better and the worse checkpoint's accuracies (None: 0.9 and 0.6)."""
    return draw(student_id, "04-1", ACCURACIES_04)


def worlds_07(student_id) -> tuple[int, ...]:
    """Notebook 07, exercise 2: the world seeds whose control signs are compared (None: all three)."""
    return draw(student_id, "07-2", WORLDS_07)
