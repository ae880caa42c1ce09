"""The checks of chapter 05's exercises (confidence adapters): exercise 1 in notebook 05.1, exercise 2 (Holm's
correction over a smaller family, and the verdicts it leaves) in notebook 05.2, exercise 3 (each method's AURC
on every evaluation checkpoint) and exercise 4 (the GCM's between-question share where correctness changes) in
notebook 05.3. Each recomputes the answer from
the inputs its check cell passes and calls `helpers.exercises.check`. Exercise 1's adapters take minutes to
train, so its check reads the results its solution cached and loads nothing while the answer is None."""
from __future__ import annotations

import numpy as np
import pandas as pd

from helpers.evaluation import contrast, findings, metrics
from helpers.exercises import check, pair_aucs, uncheckable
from helpers.pipeline.adapters import seeded_results
from helpers.pipeline.comparison import method_results


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


def exercise_2(verdicts_05, decided: pd.DataFrame, mine) -> None:
    """Verdicts after Holm of the counted claims decided in notebook 05.2 (`mine`), paper and control p-values in
    one family adjusted by the series' tested `findings.holm` (the notebook builds Holm by hand): a metric's
    verdict at 5% where its adjusted p is below 0.05, otherwise inconclusive; keyed (metric, claim)."""
    here = decided[decided["counted"].astype(bool) & decided.index.isin(list(mine))]
    family = pd.concat([here["p"], here["control: p"]], keys=["paper", "control"]).dropna()
    if family.empty:
        return uncheckable("Exercise 2", "no counted claim of this notebook has a p-value in this world")
    at_5 = {"paper": here["paper verdict at 5%"], "control": here["control verdict at 5%"]}
    expected = {(side, claim): "inconclusive" if adjusted >= 0.05 else str(at_5[side][claim])
                for (side, claim), adjusted in zip(family.index, findings.holm(family.to_numpy()))}
    answer = dict(verdicts_05.items()) if isinstance(verdicts_05, (pd.Series, dict)) else verdicts_05
    return check("Exercise 2", "verdicts_05", answer, expected,
                 hint="one family: this notebook's counted claims, paper and control p-values; Holm by "
                      "hand (sort, multiply the k-th smallest by m - k, cap at 1, running maximum); then "
                      "the 5% verdict where the adjusted p is below 0.05, else inconclusive; keys "
                      "(metric, claim).")


def exercise_3(aurc_by_checkpoint, methods, evaluation) -> None:
    """AURC (`metrics.aurc`) of each method in `methods` on each checkpoint of `evaluation`, a seeded method's the
    mean over its seeds: a frame with one row per checkpoint (in order) and one column per method. An answer with
    the same labels in another order is put in this order first."""
    if aurc_by_checkpoint is None:
        return check("Exercise 3", "aurc_by_checkpoint", None, [])

    def aurc(frame):
        return metrics.aurc(frame["confidence"], frame["correct"])

    expected = pd.DataFrame({method: [metrics.seed_average(aurc, frame[frame["checkpoint"] == c])
                                      for c in evaluation]
                             for method, frame in ((m, method_results(m)) for m in methods)},
                            index=list(evaluation))
    answer = aurc_by_checkpoint
    if isinstance(answer, pd.DataFrame) and set(answer.index) == set(expected.index) \
            and set(answer.columns) == set(expected.columns):
        answer = answer.loc[expected.index, expected.columns]
    return check("Exercise 3", "aurc_by_checkpoint", answer, expected, tol=1e-3,
                 hint="one row per evaluation checkpoint, one column per method; on each checkpoint's "
                      "answers, sort by confidence (highest first), take the running error rate, and "
                      "average it; a seeded method's AURC is the mean over its seeds.")


def exercise_4(share_where_correctness_changes, frames: dict) -> None:
    """Per method of `frames` (name -> every seed's results), the share of its confidence's variance that lies
    between questions, on the questions whose correctness changes across the checkpoints (right at one, wrong
    at another), the mean over seeds. Another route than a groupby: the law of total variance, with each
    question's mean confidence from `np.bincount`."""
    def share(frame):
        where = np.unique(frame["question_id"].to_numpy(), return_inverse=True)[1]
        confidence = frame["confidence"].to_numpy(float)
        means = np.bincount(where, weights=confidence) / np.bincount(where)
        return float(np.var(means[where]) / np.var(confidence))

    expected = {}
    for name, frame in frames.items():
        correct = frame["correct"].to_numpy(int)
        where = np.unique(frame["question_id"].to_numpy(), return_inverse=True)[1]
        changes = (np.bincount(where, weights=correct) % np.bincount(where)) > 0  # some right, not all
        expected[name] = metrics.seed_average(share, frame[changes[where]])
    return check("Exercise 4", "share_where_correctness_changes", share_where_correctness_changes, expected,
                 tol=1e-3, hint="keep the questions that are right at some evaluation checkpoint and wrong at "
                                "another, then split each seed's confidence variance as section 2 does.")
