"""The checks of chapter 02's exercises (self-consistency): exercise 1 in notebook 02.1, exercise 2 in
notebook 02.2. Each recomputes the answer from the inputs its check cell passes and calls
`helpers.exercises.check`."""
from __future__ import annotations

import numpy as np
import pandas as pd

from helpers.evaluation import metrics
from helpers.exercises import check, uncheckable


def exercise_1(ungrouped, beams: pd.DataFrame, questions: pd.DataFrame) -> None:
    """AUC and SmoothECE of the top beam's share of its question's beam probability, with no grouping: right
    when the top beam ended and states the target; confidence 0 when it states nothing."""
    probability = np.exp(beams["logprob"])
    share = probability / probability.groupby(beams["question_id"]).transform("sum")
    top = beams.assign(share=share)[beams["beam"] == 0]
    stated = top["ended"].astype(bool) & top["answer"].notna()
    target = top["question_id"].map(questions.set_index("question_id")["target"])
    correct = (stated & (top["answer"] == target).fillna(False)).to_numpy(dtype=bool)
    confidence = np.where(stated, top["share"], 0.0)
    if correct.all() or not correct.any():
        return uncheckable("Exercise 1", "the top beams are all right or all wrong here: no AUC")
    expected = {"auroc": metrics.auroc(confidence, correct), "smooth_ece": metrics.smooth_ece(confidence, correct)}
    return check("Exercise 1", "ungrouped", ungrouped, expected, tol=1e-3,
                 hint="keep only beam 0 of each question; its confidence is its probability over the sum of its "
                      "question's ten; a dict with the keys 'auroc' and 'smooth_ece'.")


def exercise_2(auc_change, sc_results: pd.DataFrame) -> None:
    """Per checkpoint, the AUC of SC's confidence times the beams' coverage (the winning group's undivided
    probability) minus the AUC of SC's confidence."""
    undivided = sc_results.assign(confidence=sc_results["confidence"] * sc_results["coverage"])
    change = (metrics.per_checkpoint(undivided, columns=["auroc"])["auroc"]
              - metrics.per_checkpoint(sc_results, columns=["auroc"])["auroc"])
    if not np.isfinite(change.to_numpy(dtype=float)).all():
        return uncheckable("Exercise 2", "a checkpoint has only right or only wrong answers here: no AUC")
    expected = {str(checkpoint): float(value) for checkpoint, value in change.items()}
    return check("Exercise 2", "auc_change", auc_change, expected, tol=1e-3,
                 hint="per question, sum the probability of the beams in each group of one number and keep the "
                      "largest (0 if no beam states a number); per checkpoint, its AUC minus that of SC's confidence.")
