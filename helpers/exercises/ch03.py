"""The checks of chapter 03's exercises (verbalized confidence; notebooks 03.1 to 03.3): each recomputes
the answer from the inputs its check cell passes and calls `helpers.exercises.check`."""
from __future__ import annotations

import copy
import math

import numpy as np
import pandas as pd

from helpers.evaluation import metrics
from helpers.exercises import check, uncheckable
from helpers.world import lora


def _checkpoints(df: pd.DataFrame):
    """Each checkpoint's rows, where they hold both right and wrong answers (an AUC needs both)."""
    return [part for _, part in df.groupby("checkpoint") if 0 < part["correct"].sum() < len(part)]


def _mean_auc(df: pd.DataFrame, column: str) -> float:
    """The mean over checkpoints of one AUC per checkpoint."""
    aucs = [metrics.auroc(part[column], part["correct"]) for part in _checkpoints(df)]
    return float(np.mean(aucs)) if aucs else math.nan


def exercise_1(gap_rho, targets: pd.DataFrame) -> None:
    """The Spearman correlation, over checkpoints, of (1 - mean target on right greedy answers) with greedy accuracy."""
    right = targets[targets["correct"].astype(bool)]
    shortfall = 1 - right.groupby("checkpoint")["target"].sum() / right.groupby("checkpoint").size()
    accuracy = targets.groupby("checkpoint")["correct"].mean().loc[shortfall.index]
    expected = float(np.corrcoef(shortfall.rank(), accuracy.rank())[0, 1])  # Pearson on ranks
    return check("Exercise 1", "gap_rho", gap_rho, expected, tol=1e-3,
                 hint="one shortfall per checkpoint (1 minus the mean target where `correct`), then a rank "
                      "(Spearman) correlation with the greedy accuracy.")


ATTENTION = r".*\.attn\.(c_attn|c_proj)$"  # exercise 2's adapted modules: the attention layers only


def exercise_2(n_attention_rank8, model) -> None:
    """The LoRA parameters (A and B) of a rank-8 adapter on the attention layers only, counted by peft."""
    config = lora.build_config(8, 16, ATTENTION)  # alpha does not change the count
    wrapped = lora.wrap(copy.deepcopy(model), config)
    expected = sum(p.numel() for p in wrapped.parameters() if p.requires_grad)
    return check("Exercise 2", "n_attention_rank8", n_attention_rank8, expected, tol=0,
                 hint="for each adapted Conv1D weight of shape (d_in, d_out), A holds r x d_in numbers "
                      "and B d_out x r; sum them over the attention layers' c_attn and c_proj.")


def exercise_3(iso_smooth_ece, train_expected, train_correct, test_expected, test_correct) -> None:
    """SmoothECE on the test answers of the expected readout, recalibrated by an isotonic map fitted on the
    adapter's training answers."""
    from sklearn.isotonic import IsotonicRegression  # local: only this exercise fits a map

    train_correct = np.asarray(train_correct, dtype=float)
    if len(np.unique(train_correct)) < 2:
        return uncheckable("Exercise 3", "the training answers are all right or all wrong in this world")
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
    iso.fit(np.asarray(train_expected, dtype=float), train_correct)
    mapped = iso.predict(np.asarray(test_expected, dtype=float))
    expected = metrics.smooth_ece(mapped, np.asarray(test_correct, dtype=float))
    return check("Exercise 3", "iso_smooth_ece", iso_smooth_ece, expected, tol=1e-3,
                 hint="fit the map on the training answers' expected readout and correctness only; "
                      "apply it to the test answers' expected readout; one SmoothECE.")


def exercise_4(decoded_auc, oracle: pd.DataFrame, moved: pd.DataFrame) -> None:
    """The mean per-checkpoint AUC of the decoded readout (parsed rows only), oracle and non-oracle."""
    expected = {name: _mean_auc(df[df["parsed"].astype(bool)], "stated")
                for name, df in [("oracle", oracle), ("non-oracle", moved)]}
    if any(math.isnan(value) for value in expected.values()):
        return uncheckable("Exercise 4", "an adapter's decoded readout gives no AUC in this world (too few "
                                          "parsed answers, or all right or all wrong)")
    return check("Exercise 4", "decoded_auc", decoded_auc, expected, tol=1e-3,
                 hint='a dict {"oracle": ..., "non-oracle": ...}: one AUC of `stated` per checkpoint on the '
                      "parsed rows, then their mean.")


def exercise_5(wins_per_seed, oracle_seeds: pd.DataFrame, evaluation: list[str]) -> None:
    """Per seed, the evaluation checkpoints where the oracle's expected readout has a higher AUC than token
    probability's."""
    rows = oracle_seeds[oracle_seeds["checkpoint"].isin(evaluation)]
    expected = {seed: sum(metrics.auroc(part["expected"], part["correct"])
                          > metrics.auroc(part["token_probability"], part["correct"])
                          for part in _checkpoints(frame))
                for seed, frame in rows.groupby("seed")}
    return check("Exercise 5", "wins_per_seed", wins_per_seed, expected, tol=0,
                 hint="a dict from seed to a count of checkpoints; compare AUCs within each checkpoint.")
