"""The checks of chapter 04's exercises (contrast sets; exercise 1 in notebook 04.1, exercise 2 in 04.2):
each recomputes the answer from the inputs its check cell passes and calls `helpers.exercises.check`."""
from __future__ import annotations

import pandas as pd

from helpers.evaluation import contrast
from helpers.exercises import check, uncheckable


def exercise_1(better_share, accuracy_better: float = 0.9, accuracy_worse: float = 0.6) -> None:
    """The share of two independent checkpoints' contrast set on which the better one is right."""
    right_wrong = accuracy_better * (1 - accuracy_worse)
    expected = right_wrong / (right_wrong + accuracy_worse * (1 - accuracy_better))
    return check("Exercise 1", "better_share", better_share, expected, tol=1e-3,
                 hint="condition on exactly one of the two checkpoints being right.")


def exercise_2(sc_fitted_auc_cb, self_consistency: pd.DataFrame, pairs, min_size: int,
               pair: tuple[str, str]) -> None:
    """Self-consistency's class-balanced contrast AUC on `pair` under the fitted normalization: the
    helper's logistic fit on the counted contrast sets pooled, then its per-pair metrics."""
    fit = contrast.pooled_normalizer("fitted", self_consistency, pairs, min_size)
    if fit is None:
        return uncheckable("Exercise 2", f"no pair reaches {min_size} contrast questions here: "
                                         "nothing to fit")
    row = contrast.contrast_metrics_per_pair(self_consistency, [pair], min_size, normalizer=fit)
    return check("Exercise 2", "sc_fitted_auc_cb", sc_fitted_auc_cb, float(row["auc_cb"].iloc[0]),
                 tol=1e-3, hint="fit on every counted pair's contrast questions pooled, with target "
                                "1 where i is right, then score the pair's two halves separately.")
