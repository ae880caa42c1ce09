"""Post-hoc recalibration fitted per checkpoint on adapter_train and applied to test.

Isotonic regression (scikit-learn) learns a monotone map from confidence to accuracy: it can fix
full-set calibration, but being monotone per checkpoint it cannot reorder answers, so AUC within a
checkpoint cannot rise (ties can lower it slightly). Used by notebooks 02 and 05.
"""
from __future__ import annotations

import pandas as pd
from sklearn.isotonic import IsotonicRegression

from ..validation import confidence_and_correct


def fit_isotonic(confidence, correct) -> IsotonicRegression:
    """A monotone map from confidence to the probability of being right."""
    conf, corr = confidence_and_correct(confidence, correct)
    return IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(conf, corr)


def isotonic_per_checkpoint(fit_on: pd.DataFrame, apply_to: pd.DataFrame) -> pd.DataFrame:
    """`apply_to` with confidence replaced by an isotonic map fitted on the same checkpoint in `fit_on`."""
    missing = sorted(set(apply_to["checkpoint"]) - set(fit_on["checkpoint"]))
    if missing:
        raise ValueError(f"no fitting data for checkpoints {missing}; fit_on must cover every checkpoint of apply_to")
    out = apply_to.copy()
    for name, rows in apply_to.groupby("checkpoint", sort=False):
        train = fit_on[fit_on["checkpoint"] == name]
        out.loc[rows.index, "confidence"] = fit_isotonic(train["confidence"], train["correct"]).predict(rows["confidence"])
    return out
