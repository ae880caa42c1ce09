"""The checks of chapter 01's exercises (reliability diagrams and ECE: exercise 1 in notebook 01.1, equal-mass
bins on the test sums; exercise 2 in notebook 01.2): each recomputes the answer from the inputs its check cell
passes and calls `helpers.exercises.check`."""
from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from helpers.evaluation import metrics
from helpers.exercises import check


def _ece_equal_mass(confidence, correct, n_bins: int) -> float:
    """Binned ECE with equal-mass bins, by a direct sum over the bins: edges at the quantiles, a value
    on an inner edge in the bin above, share x |accuracy - confidence| per non-empty bin."""
    conf, corr = np.asarray(confidence, dtype=float), np.asarray(correct, dtype=float)
    edges = np.quantile(conf, np.linspace(0.0, 1.0, n_bins + 1))
    bin_of = np.digitize(conf, edges[1:-1])  # bins[i-1] <= x < bins[i]: left-closed, as in the notebook
    total = 0.0
    for b in np.unique(bin_of):
        in_bin = bin_of == b
        total += in_bin.mean() * abs(corr[in_bin].mean() - conf[in_bin].mean())
    return float(total)


def exercise_1(ece_equal_mass, test_answers: dict[str, pd.DataFrame]) -> None:
    """Each model's ECE on its test answers with 10 equal-mass bins."""
    expected = {label: _ece_equal_mass(df["confidence"], df["correct"], 10)
                for label, df in test_answers.items()}
    return check("Exercise 1", "ece_equal_mass", ece_equal_mass, expected, tol=1e-3,
                 hint="a dict keyed like test_answers; cut each model's confidences at their deciles "
                      "(10 bins of about equal counts) and sum share x |accuracy - confidence|.")


def exercise_2(binned_scores, rl_answers: pd.DataFrame) -> None:
    """(AUROC, Brier) of the RL test confidences replaced by their 5-bin bin's accuracy."""
    correct = rl_answers["correct"].astype(float)
    bins = metrics.bin_indices(rl_answers["confidence"], 5)
    binned = correct.groupby(bins).transform("mean")
    expected = [roc_auc_score(correct, binned), float(((binned - correct) ** 2).mean())]
    return check("Exercise 2", "binned_scores", binned_scores, expected, tol=1e-3,
                 hint="(AUROC, Brier) of the binned confidences, in that order, both scored against "
                      "the RL model's correctness.")
