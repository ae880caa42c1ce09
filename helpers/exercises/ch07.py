"""The checks of notebook 07's exercises (what the series found): each recomputes the answer from what its
check cell passes (the adapters' results, the worlds' claims tables) and calls `helpers.exercises.check`."""
from __future__ import annotations

import numpy as np
import pandas as pd

from helpers.evaluation import contrast, metrics
from helpers.exercises import check, uncheckable

HABIT = ["non-oracle adapter", "multi-checkpoint adapter", "multi-answer adapter"]  # exercise 1's adapters


def exercise_1(habit_auc, results, pairs, min_size: int) -> None:
    """Per adapter of `HABIT` (`results(name)`: every seed's results), the plain contrast AUC of its habit
    alone: each confidence replaced by its checkpoint's mean (within a seed), averaged over the pairs with at
    least `min_size` contrast questions, then over the seeds. Another route than the table's: such a confidence
    ties each checkpoint's answers, so on a pair it puts all of j's answers above i's (or below), and its
    AUC is the pair's share of improvements where j's mean is higher, one minus it where lower."""
    expected = {}
    for name in HABIT:
        per_seed = []
        for part in metrics.seed_frames(results(name)):
            mean = part.groupby("checkpoint")["confidence"].mean()
            aucs = []
            for i, j in pairs:
                kinds = contrast.contrast_set(part, i, j)["kind"]
                if len(kinds) >= min_size:
                    share = float((kinds == "improvement").mean())
                    aucs.append(share if mean[j] > mean[i] else 1 - share if mean[j] < mean[i] else 0.5)
            per_seed.append(np.mean(aucs) if aucs else np.nan)
        expected[name] = float(np.mean(per_seed))
    if np.isnan(list(expected.values())).all():
        return uncheckable("Exercise 1", f"no pair of checkpoints reaches {min_size} contrast questions here")
    answer = habit_auc.to_dict() if isinstance(habit_auc, pd.Series) else habit_auc
    return check("Exercise 1", "habit_auc", answer, expected, tol=0.005,
                 hint="replace each confidence by the mean of its checkpoint within its seed, then average "
                      "the plain contrast AUC over the counted pairs, and over the seeds.")


def exercise_2(control_one_sign, worlds: dict, claims, chosen=(0, 1, 2)) -> None:
    """How many of `claims` have a control difference of one sign (all above 0 or all below) in every world
    of `chosen` (world seeds, keys of `worlds`)."""
    if not set(chosen) <= set(worlds):
        return uncheckable("Exercise 2", f"worlds {sorted(set(chosen) - set(worlds))} are not in this series' results")
    differences = np.array([worlds[seed]["control: difference"].reindex(claims).to_numpy(float)
                            for seed in chosen])
    expected = int(((differences > 0).all(axis=0) | (differences < 0).all(axis=0)).sum())
    return check("Exercise 2", "control_one_sign", control_one_sign, expected, tol=0,
                 hint="take the sign of `control: difference` in each of your worlds only, not the paper "
                      "metric's; a claim without a control does not count.")
