"""The checks of chapter 04's exercises (contrast sets; exercise 1 in notebook 04.1, exercise 2 in 04.2):
each recomputes the answer from the inputs its check cell passes and calls `helpers.exercises.check`."""
from __future__ import annotations

import pandas as pd

from helpers.evaluation import metrics
from helpers.exercises import check


def exercise_1(better_share, accuracy_better: float = 0.9, accuracy_worse: float = 0.6) -> None:
    """The share of two independent checkpoints' contrast set on which the better one is right."""
    right_wrong = accuracy_better * (1 - accuracy_worse)
    expected = right_wrong / (right_wrong + accuracy_worse * (1 - accuracy_better))
    return check("Exercise 1", "better_share", better_share, expected, tol=1e-3,
                 hint="condition on exactly one of the two checkpoints being right.")


def exercise_2(static_full_auc, greedy: pd.DataFrame, evaluation: list[str]) -> None:
    """The full-set AUC of a confidence of 0.95 where the last evaluation checkpoint is right, else 0.05."""
    last = greedy[greedy["checkpoint"] == evaluation[-1]].set_index("question_id")["correct"]
    static = greedy.assign(confidence=greedy["question_id"].map(last.astype(float) * 0.9 + 0.05))
    expected = metrics.full_set_metrics(static, evaluation)["auc"]
    return check("Exercise 2", "static_full_auc", static_full_auc, expected, tol=1e-3,
                 hint="give every row the last checkpoint's correctness on its question, then "
                      "metrics.full_set_metrics.")
