"""Post-hoc recalibration fitted per checkpoint on adapter_train and applied to test.

Three maps from a confidence to the probability of being right, all monotone: isotonic regression
(scikit-learn, a step function), temperature scaling (one parameter, logit(p) / T) and Platt
scaling (logistic regression on logit(p)). Being monotone within a checkpoint, none of them can
reorder that checkpoint's answers: they can fix full-set calibration, and they cannot raise AUC
(isotonic's flat steps can lower it slightly through ties).
"""
from __future__ import annotations

import warnings
from typing import Callable

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

from helpers.evaluation.validation import confidence_and_correct

_EPS = 1e-6  # keeps logits finite for confidences of exactly 0 or 1


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, _EPS, 1 - _EPS)
    return np.log(p) - np.log1p(-p)


def fit_isotonic(confidence, correct) -> Callable[[np.ndarray], np.ndarray]:
    """A monotone step map from confidence to the probability of being right."""
    conf, corr = confidence_and_correct(confidence, correct)
    return IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(conf, corr).predict


def fit_temperature(confidence, correct) -> Callable[[np.ndarray], np.ndarray]:
    """Temperature scaling: sigmoid(logit(p) / T), with T fitted by log-loss.

    The search runs over log T, so T stays positive and the objective is well scaled whether the
    model is over- (T > 1) or underconfident (T < 1). The fitted T is the map's `temperature`.
    """
    conf, corr = confidence_and_correct(confidence, correct)
    z = _logit(conf)

    def nll(log_t: float) -> float:
        q = np.clip(1 / (1 + np.exp(-z / np.exp(log_t))), _EPS, 1 - _EPS)
        return -np.mean(corr * np.log(q) + (1 - corr) * np.log1p(-q))

    temperature = float(np.exp(minimize_scalar(nll, bounds=(-5, 5), method="bounded").x))

    def apply(p):
        return 1 / (1 + np.exp(-_logit(np.asarray(p, dtype=float)) / temperature))

    apply.temperature = temperature
    return apply


def fit_platt(confidence, correct) -> Callable[[np.ndarray], np.ndarray]:
    """Platt scaling: sigmoid(a·logit(p) + b), a logistic regression on the logit (scikit-learn)."""
    conf, corr = confidence_and_correct(confidence, correct)
    if len(np.unique(corr)) < 2:
        raise ValueError("Platt scaling needs both right and wrong answers in the fitting data")
    model = LogisticRegression(C=1e6).fit(_logit(conf)[:, None], corr.astype(int))

    def apply(p):
        return model.predict_proba(_logit(np.asarray(p, dtype=float))[:, None])[:, 1]

    return apply


FITTERS = {"isotonic": fit_isotonic, "temperature": fit_temperature, "platt": fit_platt}


def recalibrate_per_checkpoint(fit_on: pd.DataFrame, apply_to: pd.DataFrame, method: str = "isotonic",
                               fit_checkpoint: str | None = None) -> pd.DataFrame:
    """`apply_to` with confidence replaced by a map fitted on the same checkpoint's rows of `fit_on`,
    or, with `fit_checkpoint`, on that one checkpoint's rows for every checkpoint (a non-oracle
    recalibration: fitted where labels exist, applied to checkpoints whose labels it never saw).

    A checkpoint whose fitting rows are all right or all wrong gives nothing to fit: its confidences
    are left as they are, with a warning that names it (a world can hold such a checkpoint)."""
    if method not in FITTERS:
        raise ValueError(f"unknown recalibration {method!r}; choose one of {sorted(FITTERS)}")
    needed = set(apply_to["checkpoint"]) if fit_checkpoint is None else {fit_checkpoint}
    missing = sorted(needed - set(fit_on["checkpoint"]))
    if missing:
        raise ValueError(f"no fitting data for checkpoints {missing}; fit_on must cover every checkpoint of apply_to")
    out = apply_to.copy()
    for name, rows in apply_to.groupby("checkpoint", sort=False):
        train = fit_on[fit_on["checkpoint"] == (name if fit_checkpoint is None else fit_checkpoint)]
        if train["correct"].nunique() < 2:
            warnings.warn(f"{name}: its fitting answers are all {'right' if train['correct'].all() else 'wrong'}; "
                          f"its confidences are left without {method} recalibration", stacklevel=2)
            continue
        mapping = FITTERS[method](train["confidence"], train["correct"])
        out.loc[rows.index, "confidence"] = np.clip(mapping(rows["confidence"].to_numpy(dtype=float)), 0.0, 1.0)
    return out


def isotonic_per_checkpoint(fit_on: pd.DataFrame, apply_to: pd.DataFrame) -> pd.DataFrame:
    """Isotonic regression per checkpoint (the paper's post-hoc calibration)."""
    return recalibrate_per_checkpoint(fit_on, apply_to, "isotonic")
