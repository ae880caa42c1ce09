"""The checks of chapter 01's exercises (reliability diagrams and ECE: exercise 1 in notebook 01.1, exercise 2
in notebook 01.2): each recomputes the answer from the inputs its check cell passes and calls
`helpers.exercises.check`."""
from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from helpers.evaluation import metrics
from helpers.exercises import check


def _n_moved(confidence, n_bins: int) -> int:
    """How many values lie a tolerance or less below an edge that is not the top: plain flooring puts
    them one bin lower than the tolerance does."""
    scaled = np.asarray(confidence, dtype=float) * n_bins
    edge = np.ceil(scaled)  # the next edge up
    return int(((edge > scaled) & (edge - scaled <= 1e-9) & (edge < n_bins)).sum())


def exercise_1(moved, test_answers: dict[str, pd.DataFrame]) -> None:
    """How many values plain flooring and the tolerance bin differently: the hundredths in 100 bins, and
    each model's test confidences in 5 bins."""
    expected = {"hundredths": _n_moved(np.arange(1, 100) / 100, 100),
                **{label: _n_moved(df["confidence"], 5) for label, df in test_answers.items()}}
    return check("Exercise 1", "moved", moved, expected, tol=0,
                 hint="a dict of counts, keyed \"hundredths\" and like test_answers; compare "
                      "metrics.bin_indices(conf, n_bins) with plain flooring, capped at the last bin.")


def exercise_2(binned_scores, rl_answers: pd.DataFrame) -> None:
    """(AUROC, Brier) of the RL test confidences replaced by their 5-bin bin's accuracy."""
    correct = rl_answers["correct"].astype(float)
    bins = metrics.bin_indices(rl_answers["confidence"], 5)
    binned = correct.groupby(bins).transform("mean")
    expected = [roc_auc_score(correct, binned), float(((binned - correct) ** 2).mean())]
    return check("Exercise 2", "binned_scores", binned_scores, expected, tol=1e-3,
                 hint="(AUROC, Brier) of the binned confidences, in that order, both scored against "
                      "the RL model's correctness.")
