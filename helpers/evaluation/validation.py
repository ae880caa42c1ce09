"""Argument checks shared by every helper: bad input raises ValueError saying what to fix."""
from __future__ import annotations

import numpy as np


def as_probabilities(values, name: str = "confidence") -> np.ndarray:
    """Return `values` as a 1-D float array, checked to be finite and in [0, 1]."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}; pass a flat array")
    if arr.size == 0:
        raise ValueError(f"{name} is empty; pass at least one value")
    if not np.all(np.isfinite(arr)):
        bad = int(np.sum(~np.isfinite(arr)))
        raise ValueError(f"{name} contains {bad} NaN or inf values; drop or fill them first")
    if arr.min() < 0.0 or arr.max() > 1.0:
        raise ValueError(
            f"{name} must lie in [0, 1], got min {arr.min():.4g} and max {arr.max():.4g}; "
            "pass probabilities, not logits or percentages"
        )
    return arr


def as_binary(values, name: str = "correct") -> np.ndarray:
    """Return `values` as a 1-D float array of 0s and 1s (bools accepted)."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}; pass a flat array")
    if arr.size == 0:
        raise ValueError(f"{name} is empty; pass at least one value")
    try:
        arr = arr.astype(float)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must hold 0/1 or True/False values") from err
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf; every answer must be marked right (1) or wrong (0)")
    if not np.all((arr == 0) | (arr == 1)):
        raise ValueError(f"{name} must hold only 0/1 or True/False, got values like {np.unique(arr)[:5]}")
    return arr


def confidence_and_correct(confidence, correct) -> tuple[np.ndarray, np.ndarray]:
    """Validate a (confidence, correct) pair of equal length."""
    conf = as_probabilities(confidence, "confidence")
    corr = as_binary(correct, "correct")
    if conf.shape != corr.shape:
        raise ValueError(
            f"confidence has {conf.size} values but correct has {corr.size}; pass one of each per answer"
        )
    return conf, corr
