"""The checks of chapter 02's exercises (self-consistency): exercise 1 in notebook 02.1, exercise 2
(temperature scaling of the greedy token probability) in notebook 02.2. Each recomputes the answer from
the inputs its check cell passes and calls `helpers.exercises.check`."""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar
from scipy.special import expit

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


def _fit_temperature(confidence, correct) -> float:
    """T by log-loss: the best point of a fine grid over log T in [-5, 5], refined within a step either side
    (a global search: the log-loss over T can have a second, shallower dip where nearly all answers are wrong)."""
    p = np.clip(np.asarray(confidence, dtype=float), 1e-6, 1 - 1e-6)
    z, y = np.log(p) - np.log1p(-p), np.asarray(correct, dtype=float)

    def loss(log_t: float) -> float:
        q = np.clip(expit(z / np.exp(log_t)), 1e-6, 1 - 1e-6)
        return float(-np.mean(y * np.log(q) + (1 - y) * np.log1p(-q)))

    grid = np.linspace(-5, 5, 2001)
    best = grid[int(np.argmin([loss(s) for s in grid]))]
    return float(np.exp(minimize_scalar(loss, bounds=(best - 0.005, best + 0.005), method="bounded").x))


def exercise_2(greedy_scaled, fit_on: pd.DataFrame, test: pd.DataFrame) -> None:
    """Per checkpoint, the test SmoothECE of the greedy token probability after temperature scaling fitted
    by log-loss on the same checkpoint's `fit_on` answers; a checkpoint whose fitting answers are all right
    or all wrong keeps its confidences."""
    expected = {}
    for checkpoint, rows in test.groupby("checkpoint", sort=False):
        fit = fit_on[fit_on["checkpoint"] == checkpoint]
        confidence = rows["confidence"].to_numpy(dtype=float)
        if fit["correct"].nunique() == 2:
            p = np.clip(confidence, 1e-6, 1 - 1e-6)
            confidence = expit((np.log(p) - np.log1p(-p)) / _fit_temperature(fit["confidence"], fit["correct"]))
        expected[str(checkpoint)] = float(metrics.smooth_ece(confidence, rows["correct"]))
    return check("Exercise 2", "greedy_scaled", greedy_scaled, expected, tol=1e-3,
                 hint="per checkpoint, fit T on that checkpoint's adapter_train answers by log-loss, apply "
                      "sigmoid(logit(p) / T) to its test answers, then take their SmoothECE.")
