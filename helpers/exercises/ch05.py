"""The checks of chapter 05's exercises (confidence adapters): exercise 1 in notebook 05.1, exercise 2 in
notebook 05.2. Each recomputes the answer from the inputs its check cell passes and calls
`helpers.exercises.check`. Exercise 1's adapters take minutes to train, so its check reads the results its
solution cached and loads nothing while the answer is None."""
from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from helpers.evaluation import contrast, metrics
from helpers.exercises import check, pair_aucs, uncheckable
from helpers.pipeline.adapters import seeded_results


def _plain_and_balanced(frame: pd.DataFrame, pairs, min_size: int) -> list[float]:
    """One seed's [plain, class-balanced] contrast AUC: each pair that reaches `min_size`, its normalized rows
    scored as a whole and per kind (improvements, regressions), then the mean over pairs."""
    counted = [(i, j) for i, j in pairs if len(contrast.contrast_set(frame, i, j)) >= min_size]
    plain, balanced = zip(*(pair_aucs(frame, i, j) for i, j in counted)) if counted else ((), ())
    balanced = [b for b in balanced if not np.isnan(b)]
    return [float(np.mean(plain)), float(np.mean(balanced))] if plain else []


def exercise_1(far_contrast_aucs, training: str, evaluation, pairs, min_size: int) -> None:
    """[plain, class-balanced] contrast AUC, averaged over seeds, of the non-oracle adapter trained on
    `training` and moved onto the `evaluation` checkpoints."""
    if far_contrast_aucs is None:  # nothing trained yet: say so without training
        return check("Exercise 1", "far_contrast_aucs", None, [])
    frame = seeded_results(  # the cache the solution filled
        "test", evaluation, source=training)
    per_seed = [_plain_and_balanced(part, pairs, min_size) for part in metrics.seed_frames(frame)]
    if not per_seed[0]:
        return uncheckable("Exercise 1", f"no pair reaches the contrast-set size {min_size} in this world")
    return check("Exercise 1", "far_contrast_aucs", far_contrast_aucs, np.mean(per_seed, axis=0), tol=1e-3,
                 hint="two numbers, plain then class-balanced, each averaged over the pairs and then the seeds.")


def exercise_2(surrogate_aucs, surrogate: pd.DataFrame, source_right: pd.Series, pairs, min_size: int) -> None:
    """The surrogate's plain contrast AUC on the contrast questions the source answers right, then wrong:
    per pair that reaches `min_size`, those questions' normalized pairs, then the mean over pairs."""
    sets = [s for s in (contrast.contrast_set(surrogate, i, j) for i, j in pairs) if len(s) >= min_size]
    if not sets:
        return uncheckable("Exercise 2", f"no pair reaches the contrast-set size {min_size} in this world")
    expected = []
    for known in (1, 0):
        aucs = []
        for s in (s[s["question_id"].map(source_right) == known] for s in sets):
            if len(s):
                q_i, q_j = contrast.normalize_pair(s["confidence_i"].to_numpy(), s["confidence_j"].to_numpy())
                aucs.append(roc_auc_score(np.r_[s["correct_i"], s["correct_j"]], np.r_[q_i, q_j]))
        expected.append(float(np.mean(aucs)) if aucs else np.nan)
    return check("Exercise 2", "surrogate_aucs", surrogate_aucs, expected, tol=1e-3,
                 hint="filter each pair's contrast rows to the questions, then average the pairs' AUCs.")
