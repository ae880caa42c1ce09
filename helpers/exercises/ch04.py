"""The checks of chapter 04's exercises (contrast sets; exercise 1 in notebook 04.1, exercise 2 in 04.2):
each recomputes the answer from the inputs its check cell passes and calls `helpers.exercises.check`."""
from __future__ import annotations

import pandas as pd
from sklearn.linear_model import LogisticRegression

from helpers.evaluation import contrast
from helpers.exercises import check, uncheckable


def exercise_1(better_share, accuracy_better: float = 0.9, accuracy_worse: float = 0.6) -> None:
    """The share of two independent checkpoints' contrast set on which the better one is right."""
    right_wrong = accuracy_better * (1 - accuracy_worse)
    expected = right_wrong / (right_wrong + accuracy_worse * (1 - accuracy_better))
    return check("Exercise 1", "better_share", better_share, expected, tol=1e-3,
                 hint="condition on exactly one of the two checkpoints being right.")


def exercise_2(sc_no_intercept_cb, self_consistency: pd.DataFrame, pairs, min_size: int) -> None:
    """Self-consistency's class-balanced contrast AUC, mean over the counted pairs, under a normalization
    fitted without an intercept: a logistic fit on the pooled counted contrast sets (the helper's contrast
    sets and logit features), scored by the helper's per-pair metrics."""
    sets = [contrast.contrast_set(self_consistency, *pair) for pair in pairs]
    kept = [rows for rows in sets if len(rows) >= min_size]
    if not kept:
        return uncheckable("Exercise 2", f"no pair reaches {min_size} contrast questions here: "
                                         "nothing to fit")
    pooled = pd.concat(kept)
    features = contrast._logit_features(pooled["confidence_i"], pooled["confidence_j"])  # the fit's own
    model = LogisticRegression(fit_intercept=False).fit(features, pooled["correct_i"].astype(int))
    table = contrast.contrast_metrics(self_consistency, pairs, min_size,
                                      normalizer=contrast.FittedNormalization(model))
    return check("Exercise 2", "sc_no_intercept_cb", sc_no_intercept_cb, float(table["auc_cb"]),
                 tol=1e-3, hint="fit with fit_intercept=False on every counted pair's contrast "
                                "questions pooled (target 1 where i is right), then average each "
                                "pair's class-balanced AUC.")
