"""Calibration and discrimination metrics over plain numpy arrays.

Everything here compares `confidence` (the probability that an answer is correct) with
`correct` (1 if it was, 0 if not): binary calibration, not top-label calibration.
Bad input raises ValueError saying what to fix (see helpers/evaluation/validation.py).
"""
from __future__ import annotations

from numbers import Integral
from typing import Callable

import numpy as np
import pandas as pd
import relplot
import sklearn
from sklearn.metrics import brier_score_loss, roc_auc_score

from helpers.evaluation.validation import as_binary, as_probabilities, confidence_and_correct

STRATEGIES = ("uniform", "quantile")
# The arrays reaching scikit-learn are already checked (`helpers.evaluation.validation`): skip its second check of the
# arguments, the same computation, about a quarter of the time of an AUC (notebooks 04-06 take thousands).
_CHECKED_INPUT = dict(skip_parameter_validation=True, assume_finite=True)

# A confidence this close below a uniform bin edge counts as lying on the edge. It absorbs
# float error such as 0.3 * 10 == 2.9999999999999996, which would otherwise put 0.3 in bin 2.
EDGE_TOLERANCE = 1e-9


# ---------------------------------------------------------------------------- binning


def _check_n_bins(n_bins) -> int:
    if isinstance(n_bins, bool) or not isinstance(n_bins, Integral):
        raise ValueError(f"n_bins must be a whole number such as 10, got {n_bins!r}")
    if n_bins < 1:
        raise ValueError(f"n_bins must be at least 1, got {n_bins}")
    return int(n_bins)


def _check_strategy(strategy) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    return strategy


def _uniform_indices(conf: np.ndarray, n_bins: int) -> np.ndarray:
    # floor(conf * n_bins + tolerance), computed in place to keep large inputs fast;
    # truncation equals floor because conf >= 0. 1.0 would land in bin n_bins: clip it back.
    scaled = np.multiply(conf, n_bins)
    scaled += EDGE_TOLERANCE
    idx = scaled.astype(np.intp)
    np.minimum(idx, n_bins - 1, out=idx)
    return idx


def _bins(conf: np.ndarray, n_bins: int, strategy: str) -> tuple[np.ndarray, np.ndarray]:
    """Bin index of every value and the bin edges (len(edges) == number of bins + 1)."""
    if strategy == "uniform":
        return _uniform_indices(conf, n_bins), np.linspace(0.0, 1.0, n_bins + 1)
    # Equal-mass edges. A value repeated often enough to fill a whole bin makes quantiles
    # coincide; it then gets a bin of its own, [v, next float after v), and the duplicate
    # edges are merged, so heavy ties give fewer than n_bins bins but never a split tie.
    quantiles = np.quantile(conf, np.linspace(0.0, 1.0, n_bins + 1))
    repeated = quantiles[1:][quantiles[1:] == quantiles[:-1]]
    edges = np.unique(np.concatenate([quantiles, np.nextafter(repeated, np.inf)]))
    # side="right" makes bins left-closed: a value equal to an inner edge starts the next bin.
    # The last bin ends at the largest value, so it is closed there.
    return np.searchsorted(edges[1:-1], conf, side="right"), edges


def bin_indices(confidence, n_bins: int, strategy: str = "uniform") -> np.ndarray:
    """Bin index (0 .. n_bins-1) of each confidence. Used in notebooks 01, 02, 03.

    Bins are left-closed [lo, hi) and the last one is closed at its top.

    - "uniform": edges k/n_bins. Index = floor(confidence * n_bins + 1e-9), capped at n_bins - 1,
      so a value on an edge (0.3 and 0.7 with 10 bins, vote shares m/10, 0.0) starts the bin
      above it whatever the float error, and 1.0 goes in the last bin.
    - "quantile": equal-mass edges from np.quantile (lowest to highest value). Identical values
      always share a bin. A value tied often enough to make quantiles coincide (vote shares
      m/10, say) gets a bin to itself and the duplicate edges are merged, so fewer than
      n_bins bins may be used (indices then stop below n_bins).
    """
    n_bins = _check_n_bins(n_bins)
    strategy = _check_strategy(strategy)
    return _bins(as_probabilities(confidence, "confidence"), n_bins, strategy)[0]


# ---------------------------------------------------------------------------- binned ECE


def expected_calibration_error(confidence, correct, n_bins: int = 15, strategy: str = "uniform") -> float:
    """Binned ECE: sum over non-empty bins of (n_b / N) |accuracy_b - confidence_b|. Used in notebooks 01-06.

    Binary calibration of P(correct); bins as in `bin_indices`. Empty bins contribute nothing.
    """
    n_bins = _check_n_bins(n_bins)
    strategy = _check_strategy(strategy)
    conf, corr = confidence_and_correct(confidence, correct)
    idx = _bins(conf, n_bins, strategy)[0]
    # (n_b / N) |acc_b - conf_b| == |sum_b(conf - correct)| / N: one weighted bincount does it all.
    per_bin = np.bincount(idx, weights=conf - corr, minlength=n_bins)
    return float(np.abs(per_bin).sum() / conf.size)


def reliability_table(confidence, correct, n_bins: int = 15, strategy: str = "uniform") -> pd.DataFrame:
    """One row per non-empty bin: lower, upper, count, confidence, accuracy, gap. Used in notebooks 01, 02.

    `confidence` and `accuracy` are the bin means; gap = confidence - accuracy (> 0: overconfident).
    """
    n_bins = _check_n_bins(n_bins)
    strategy = _check_strategy(strategy)
    conf, corr = confidence_and_correct(confidence, correct)
    idx, edges = _bins(conf, n_bins, strategy)
    n_used = edges.size - 1
    count = np.bincount(idx, minlength=n_used)
    keep = count > 0
    mean_conf = np.bincount(idx, weights=conf, minlength=n_used)[keep] / count[keep]
    mean_acc = np.bincount(idx, weights=corr, minlength=n_used)[keep] / count[keep]
    return pd.DataFrame(
        {
            "lower": edges[:-1][keep],
            "upper": np.minimum(edges[1:], 1.0)[keep],  # a quantile bin [1.0, 1.0+) shows as 1.0
            "count": count[keep],
            "confidence": mean_conf,
            "accuracy": mean_acc,
            "gap": mean_conf - mean_acc,
        }
    )


# ---------------------------------------------------------------------------- other metrics


def smooth_ece(confidence, correct) -> float:
    """SmoothECE (Błasiok & Nakkiran), the paper's ECE, via relplot.smECE. Used in notebooks 01-06."""
    conf, corr = confidence_and_correct(confidence, correct)
    return float(relplot.smECE(conf, corr))


def brier_score(confidence, correct) -> float:
    """Mean squared error between confidence and correctness. Used in notebooks 01, 04, 05, 06."""
    conf, corr = confidence_and_correct(confidence, correct)
    with sklearn.config_context(**_CHECKED_INPUT):
        return float(brier_score_loss(corr, conf))


def _check_both_classes(corr: np.ndarray) -> None:
    n_right = int(corr.sum())
    if n_right in (0, corr.size):
        kind = "right" if n_right else "wrong"
        raise ValueError(
            f"AUROC needs both right and wrong answers, but all {corr.size} answers are {kind}; "
            "use a larger or more varied set of questions"
        )


def auroc(confidence, correct) -> float:
    """Area under the ROC curve of confidence as a predictor of correctness. Used in notebooks 01, 04, 05, 06."""
    conf, corr = confidence_and_correct(confidence, correct)
    _check_both_classes(corr)
    with sklearn.config_context(**_CHECKED_INPUT):
        return float(roc_auc_score(corr, conf))


def overconfidence(confidence, correct) -> float:
    """Mean confidence minus accuracy (> 0: overconfident, < 0: underconfident). Used in notebooks 01, 02, 03."""
    conf, corr = confidence_and_correct(confidence, correct)
    return float(conf.mean() - corr.mean())


# ---------------------------------------------------------------------------- summaries


METRICS: dict[str, Callable[..., float]] = {
    "ece": expected_calibration_error,
    "smooth_ece": smooth_ece,
    "brier": brier_score,
    "auroc": auroc,
}


def _resolve_metric(metric) -> Callable[..., float]:
    if callable(metric):
        return metric
    if metric not in METRICS:
        raise ValueError(f"metric must be a callable or one of {sorted(METRICS)}, got {metric!r}")
    return METRICS[metric]


def bootstrap_ci(metric, confidence, correct, n: int = 1000, seed: int = 0,
                 level: float = 0.95) -> tuple[float, float, float]:
    """(point, lower, upper): metric on all data and its percentile bootstrap interval. Used in notebooks 01, 05.

    `metric` is a callable (confidence, correct) -> float or one of "ece", "smooth_ece", "brier",
    "auroc". Resamples on which the metric is undefined (AUROC of a one-class resample) are dropped.
    """
    fn = _resolve_metric(metric)
    if isinstance(n, bool) or not isinstance(n, Integral) or n < 1:
        raise ValueError(f"n (number of bootstrap resamples) must be a whole number >= 1, got {n!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1 (e.g. 0.95), got {level!r}")
    conf, corr = confidence_and_correct(confidence, correct)
    point = float(fn(conf, corr))
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n):
        take = rng.integers(0, conf.size, conf.size)
        try:
            values.append(float(fn(conf[take], corr[take])))
        except ValueError:
            continue
    if not values:
        raise ValueError("the metric failed on every bootstrap resample; check that it is defined on this data")
    alpha = (1.0 - level) / 2.0
    lower, upper = np.quantile(values, [alpha, 1.0 - alpha])
    return point, float(lower), float(upper)


def summary_metrics(confidence, correct, n_bins: int = 15) -> pd.Series:
    """n, accuracy, mean_confidence, ece, smooth_ece, brier, auroc, overconfidence. Used in notebooks 01-06.

    auroc is NaN (not an error) when every answer is right or every answer is wrong, so that
    summary tables still fill in.
    """
    conf, corr = confidence_and_correct(confidence, correct)
    both = 0 < corr.sum() < corr.size
    return pd.Series(
        {
            "n": conf.size,
            "accuracy": float(corr.mean()),
            "mean_confidence": float(conf.mean()),
            "ece": expected_calibration_error(conf, corr, n_bins),
            "smooth_ece": smooth_ece(conf, corr),
            "brier": brier_score(conf, corr),
            "auroc": auroc(conf, corr) if both else float("nan"),
            "overconfidence": float(conf.mean() - corr.mean()),
        }
    )


FULL_SET_COLUMNS = ("checkpoint", "question_id", "correct", "confidence")


def _select_checkpoints(df: pd.DataFrame, checkpoints) -> list:
    available = list(pd.unique(df["checkpoint"]))
    if checkpoints is None:
        return available
    if isinstance(checkpoints, str):
        checkpoints = [checkpoints]
    checkpoints = list(checkpoints)
    if not checkpoints:
        raise ValueError(f"checkpoints is empty; pass None for all, or some of {available}")
    unknown = [c for c in checkpoints if c not in available]
    if unknown:
        raise ValueError(f"unknown checkpoints {unknown}; available: {available}")
    return checkpoints


def full_set_metrics(df: pd.DataFrame, checkpoints=None, n_bins: int = 15) -> pd.Series:
    """Full-set metrics over several checkpoints, as in paper appendix A.3. Used in notebooks 04, 05, 06.

    `df` has one row per (checkpoint, question) with columns checkpoint, question_id, correct,
    confidence. AUC, Brier and accuracy are computed on the pooled rows of `checkpoints` (default:
    all). Binned ECE and SmoothECE are computed per checkpoint and averaged, because pooling lets
    one checkpoint's overconfidence cancel another's underconfidence. auc is NaN if the pooled
    rows are all right or all wrong.
    """
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"df must be a pandas DataFrame with columns {FULL_SET_COLUMNS}, got {type(df).__name__}")
    missing = [c for c in FULL_SET_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"df lacks columns {missing}; it needs {list(FULL_SET_COLUMNS)}")
    if df.empty:
        raise ValueError("df is empty; pass at least one (checkpoint, question) row")
    n_bins = _check_n_bins(n_bins)
    chosen = _select_checkpoints(df, checkpoints)
    rows = df[df["checkpoint"].isin(chosen)]
    if rows.duplicated(["checkpoint", "question_id"]).any():
        raise ValueError("df has repeated (checkpoint, question_id) rows; keep one row per question per checkpoint")

    conf, corr = confidence_and_correct(rows["confidence"].to_numpy(), rows["correct"].to_numpy())
    eces, smooth = [], []
    for _, group in rows.groupby("checkpoint", sort=False):
        c, y = group["confidence"].to_numpy(dtype=float), as_binary(group["correct"].to_numpy())
        eces.append(expected_calibration_error(c, y, n_bins))
        smooth.append(smooth_ece(c, y))
    both = 0 < corr.sum() < corr.size
    return pd.Series(
        {
            "auc": auroc(conf, corr) if both else float("nan"),
            "brier": brier_score(conf, corr),
            "ece": float(np.mean(eces)),
            "smooth_ece": float(np.mean(smooth)),
            "accuracy": float(corr.mean()),
            "n_checkpoints": len(chosen),
            "n": conf.size,
        }
    )


def per_checkpoint(df: pd.DataFrame, column: str = "confidence", columns=None) -> pd.DataFrame:
    """`summary_metrics` of each checkpoint's rows (one row per checkpoint, in order of appearance).

    `column` names the confidence to score (default "confidence"); `columns` picks columns of
    `summary_metrics` (default: all). A frame with no rows gives a table with no rows (a checkpoint
    with no usable answers, say). Used in notebooks 02, 03, 05 and 06.
    """
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"df must be a results frame (a pandas DataFrame), got {type(df).__name__}")
    missing = [c for c in ("checkpoint", "correct", column) if c not in df.columns]
    if missing:
        raise ValueError(f"df lacks columns {missing}")
    names = ["n", "accuracy", "mean_confidence", "ece", "smooth_ece", "brier", "auroc", "overconfidence"]
    out = pd.DataFrame({name: summary_metrics(g[column], g["correct"])
                        for name, g in df.groupby("checkpoint", sort=False)}, index=names).T
    out.index.name = "checkpoint"
    return out if columns is None else out[list(columns)]


# --------------------------------------------------------------------------- selective prediction


def risk_coverage(confidence, correct) -> pd.DataFrame:
    """Risk (error rate among answered) against coverage (share answered), abstaining on low confidence.

    Answers are kept from the most confident down. Tied confidences cannot be ordered, so within a
    block of ties the risk is its expectation over random orders: exactly the errors before the
    block plus the block's error rate times the answers taken from it, over the answers kept.
    Discrete confidences (vote shares) have large ties, so this matters. Used in notebooks 02 and 05.
    Returns one row per number kept (1..n): coverage, risk.
    """
    conf, corr = confidence_and_correct(confidence, correct)
    order = np.argsort(-conf, kind="stable")
    conf, wrong = conf[order], 1.0 - corr[order]
    n = conf.size
    # Tie blocks: starts where the confidence changes.
    starts = np.flatnonzero(np.r_[True, conf[1:] != conf[:-1]])
    sizes = np.diff(np.r_[starts, n])
    block_errors = np.add.reduceat(wrong, starts)
    errors_before = np.r_[0.0, np.cumsum(block_errors)[:-1]]
    block = np.repeat(np.arange(starts.size), sizes)
    taken = np.arange(1, n + 1) - starts[block]  # answers taken from the current block
    expected_errors = errors_before[block] + taken * (block_errors / sizes)[block]
    kept = np.arange(1, n + 1)
    return pd.DataFrame({"coverage": kept / n, "risk": expected_errors / kept})


def aurc(confidence, correct) -> float:
    """Area under the risk-coverage curve (mean risk over all coverages; lower is better). Notebooks 02, 05."""
    return float(risk_coverage(confidence, correct)["risk"].mean())


# --------------------------------------------------------------------------- seeds


def stack_seeds(make: Callable[[int], pd.DataFrame], seeds) -> pd.DataFrame:
    """make(seed) for every seed, stacked with a ``seed`` column: one frame holding a trained method's
    result per seed (the inverse of `seed_frames`). Used by `pipeline.adapters.seeded_results`,
    `verbalized.seeded_results` and `comparison`."""
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds is empty; pass at least one seed")
    return pd.concat([make(s).assign(seed=int(s)) for s in seeds], ignore_index=True)


def seed_frames(df: pd.DataFrame) -> list[pd.DataFrame]:
    """A results frame split by its ``seed`` column (one frame per seed), or [df] when it has none.

    Trained methods (the adapters) stack one result per seed; deterministic ones have no seed column."""
    if "seed" not in df.columns:
        return [df]
    if df["seed"].isna().any():
        raise ValueError("df.seed has missing values; give every row the seed of the run that produced it")
    return [part.drop(columns="seed") for _, part in df.groupby("seed", sort=True)]


def seed_average(fn: Callable, df: pd.DataFrame, *args, **kwargs):
    """fn(df, ...) averaged over the seeds of `df` (paper A.8.1: reported values average over seeds).

    `fn` returns a number, a Series/dict of numbers or a frame (averaged cell by cell, rows matched by
    index); a frame without a ``seed`` column is passed through unchanged."""
    values = [fn(part, *args, **kwargs) for part in seed_frames(df)]
    if len(values) == 1:
        return values[0]
    if isinstance(values[0], pd.DataFrame):  # e.g. one row per checkpoint: the mean of each cell
        return pd.concat(values).groupby(level=0, sort=False).mean(numeric_only=True)
    if isinstance(values[0], (pd.Series, dict)):
        return pd.DataFrame([pd.Series(v) for v in values]).mean(numeric_only=True, skipna=False)
    return float(np.mean(values))
