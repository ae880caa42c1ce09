"""The checks of notebook 04's exercises (contrast sets): each recomputes the answer from the inputs its
check cell passes and calls `helpers.exercises.check`."""
from __future__ import annotations

import pandas as pd

from helpers.evaluation import contrast, metrics
from helpers.exercises import check, uncheckable

def exercise_1(better_share, accuracy_better: float = 0.9, accuracy_worse: float = 0.6) -> None:
    """The share of two independent checkpoints' contrast set on which the better one is right."""
    right_wrong = accuracy_better * (1 - accuracy_worse)
    expected = right_wrong / (right_wrong + accuracy_worse * (1 - accuracy_better))
    return check("Exercise 1", "better_share", better_share, expected, tol=1e-3,
                 hint="condition on exactly one of the two checkpoints being right.")


def exercise_2(pooled_auc, frame: pd.DataFrame, pairs, min_size: int) -> None:
    """One AUC over the normalized rows of every pair whose contrast set reaches `min_size`."""
    counted = [(i, j) for i, j in pairs if len(contrast.contrast_set(frame, i, j)) >= min_size]
    if not counted:
        return uncheckable("Exercise 2", f"no pair reaches the contrast-set size {min_size} in this world")
    rows = pd.concat([contrast.contrast_rows(frame, i, j) for i, j in counted])
    return check("Exercise 2", "pooled_auc", pooled_auc, metrics.auroc(rows["confidence"], rows["correct"]),
                 tol=1e-3, hint="concatenate contrast.contrast_rows of every counted pair, then one AUC.")


def exercise_3(static_full_auc, greedy: pd.DataFrame, evaluation: list[str]) -> None:
    """The full-set AUC of a confidence of 0.95 where the last evaluation checkpoint is right, else 0.05."""
    last = greedy[greedy["checkpoint"] == evaluation[-1]].set_index("question_id")["correct"]
    static = greedy.assign(confidence=greedy["question_id"].map(last.astype(float) * 0.9 + 0.05))
    expected = metrics.full_set_metrics(static, evaluation)["auc"]
    return check("Exercise 3", "static_full_auc", static_full_auc, expected, tol=1e-3,
                 hint="give every row the last checkpoint's correctness on its question, then "
                      "metrics.full_set_metrics.")
