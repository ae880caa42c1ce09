"""Paired bootstrap comparison of two confidence methods on the same questions (paper A.8.2).

Both methods are scored on the same questions, so their metrics are correlated; resampling
questions (not rows) and recomputing both metrics on each resample keeps that pairing. The
resampling is stratified, by correctness class for full-set metrics and by improvement /
regression for contrast sets, so every resample has the class mix of the data.

The metric kernels are vectorized over a 2-D array with one resample per row, which makes
1,000 resamples of 5,000 questions take well under a second (see tests/benchmarks/bench_stats.py).
The default numbers of resamples come from `config.bootstrap()`; the bootstrap of a contrast metric averaged
over pairs is `shared_bootstrap`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from helpers import config
from helpers.evaluation import metrics
from helpers.evaluation.contrast import contrast_rows
from helpers.evaluation.validation import as_binary, as_probabilities

METRICS = ("auc", "brier", "ece", "smooth_ece", "delta")
CHUNK_VALUES = 2_000_000  # values per chunk of resamples, to bound memory (~16 MB per float array)


# --------------------------------------------------------------------------- batched kernels


def batched_auc(conf, correct) -> np.ndarray:
    """AUROC of each row (Mann-Whitney U, ties count one half); NaN for a row with one class."""
    conf, correct = _two_d(conf, correct)
    order = np.argsort(conf, axis=1)
    conf, correct = np.take_along_axis(conf, order, axis=1), np.take_along_axis(correct, order, axis=1)
    # Within a sorted row, a value's level is the number of distinct values below it.
    new_value = np.ones(conf.shape, dtype=bool)
    new_value[:, 1:] = conf[:, 1:] != conf[:, :-1]
    return _auc_from_levels(np.cumsum(new_value, axis=1) - 1, correct, conf.shape[1])


def _auc_from_levels(levels, correct, n_levels) -> np.ndarray:
    """AUROC per row from each value's rank among the distinct values (0 .. n_levels-1).

    Counting right and wrong answers per level replaces a sort per row: U sums, over levels,
    right answers x (wrong answers on lower levels + half the wrong answers on the same level).
    The bootstrap computes the levels once on the original data and gathers them.
    """
    rows = levels.shape[0]
    ids = (levels + n_levels * np.arange(rows)[:, None]).ravel()
    right = np.bincount(ids, weights=correct.ravel(), minlength=rows * n_levels).reshape(rows, n_levels)
    wrong = np.bincount(ids, minlength=rows * n_levels).reshape(rows, n_levels) - right
    wrong_below = np.cumsum(wrong, axis=1) - wrong
    u = (right * (wrong_below + 0.5 * wrong)).sum(axis=1)
    n_pos, n_neg = right.sum(axis=1), wrong.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        auc = u / (n_pos * n_neg)
    return np.where((n_pos > 0) & (n_neg > 0), auc, np.nan)


def batched_brier(conf, correct) -> np.ndarray:
    """Brier score (mean squared error of confidence against 0/1 correctness) of each row."""
    conf, correct = _two_d(conf, correct)
    return np.mean((conf - correct) ** 2, axis=1)


def batched_ece(conf, correct, n_bins: int = 15) -> np.ndarray:
    """Binned ECE of each row, with the equal-width bins of `helpers.evaluation.metrics.bin_indices`."""
    conf, correct = _two_d(conf, correct)
    bins = np.asarray(metrics.bin_indices(conf.ravel(), n_bins, "uniform")).reshape(conf.shape)
    return _ece_from_bins(bins, conf, correct, n_bins)


def _ece_from_bins(bins, conf, correct, n_bins) -> np.ndarray:
    """Count-weighted mean of |mean confidence - accuracy| over non-empty bins, per row.

    That equals the sum over bins of |sum(conf) - sum(correct)| / n; empty bins add nothing.
    """
    rows, width = conf.shape
    # Offset each row's bin ids so one bincount fills a (rows, n_bins) table.
    ids = (bins + n_bins * np.arange(rows)[:, None]).ravel()
    gap = np.bincount(ids, weights=(conf - correct).ravel(), minlength=rows * n_bins)
    return np.abs(gap.reshape(rows, n_bins)).sum(axis=1) / width


def batched_delta(conf, correct) -> np.ndarray:
    """Mean of q_correct - q_wrong per row, for rows laid out as [q, q', q, q', ...] pairs.

    Each consecutive pair of columns is one contrast question with exactly one right member.
    """
    conf, correct = _two_d(conf, correct)
    if conf.shape[1] % 2:
        raise ValueError("delta needs two values per question (the two members of a contrast pair)")
    signed = conf * (2 * correct - 1)  # +q for the right member, -q for the wrong one
    return signed.sum(axis=1) / (conf.shape[1] // 2)


def _two_d(conf, correct) -> tuple[np.ndarray, np.ndarray]:
    conf = np.asarray(conf, dtype=float)
    correct = np.asarray(correct, dtype=float)
    if conf.ndim != 2 or conf.shape != correct.shape:
        raise ValueError(
            "batched kernels need two 2-D arrays of the same shape (one resample per row), "
            f"got {conf.shape} and {correct.shape}"
        )
    return conf, correct


# --------------------------------------------------------------------------- resampling


def resample_indices(strata=None, n: int | None = None, seed: int = 0, size: int | None = None) -> np.ndarray:
    """An (n, size) array of question indices drawn with replacement, within each stratum.

    `strata` gives each question's stratum (any hashable labels); every row then holds
    exactly as many draws from each stratum as the stratum has questions. With strata=None,
    pass `size` and all questions form one stratum. `n` defaults to `config.bootstrap().n_resamples`.
    """
    n = resample_count("auc", n)
    if strata is None:
        if size is None or size < 1:
            raise ValueError("pass strata, or size (the number of questions) when there are no strata")
        codes = np.zeros(size, dtype=int)
    else:
        codes = pd.factorize(np.asarray(strata), use_na_sentinel=False)[0]
    rng = np.random.default_rng(seed)
    columns = []
    for code in np.unique(codes):
        members = np.flatnonzero(codes == code)
        columns.append(members[rng.integers(0, members.size, size=(n, members.size))])
    return np.concatenate(columns, axis=1)


# --------------------------------------------------------------------------- the test


def paired_bootstrap(
    metric: str,
    df_a: pd.DataFrame,
    df_b: pd.DataFrame,
    strata: str | None = None,
    n: int | None = None,
    seed: int = 0,
    n_bins: int = 15,
    average_over: str | None = None,
    return_diffs: bool = False,
) -> dict:
    """Paired, stratified bootstrap of metric(a) - metric(b) on the same questions.

    `df_a` and `df_b` have columns ``question_id, confidence, correct`` (others are ignored)
    and k rows per question, the same k for every question in both (k = 1 for one checkpoint,
    the number of checkpoints when pooled, 2 for the two members of a contrast pair). Both must
    cover the same questions. `metric` is "auc", "brier", "ece" (binned, `n_bins` equal-width
    bins), "smooth_ece" or "delta" (contrast rows from `helpers.evaluation.contrast.contrast_rows`, k = 2).
    The metric is computed on all rows of a resample pooled, unless `average_over` names a
    column (e.g. "checkpoint", each question having one row per value): then it is computed
    per value and averaged, as full-set ECE is (paper A.3).

    `strata` names a column of `df_a` (e.g. "kind" for contrast sets, "correct" for full-set
    metrics); a question whose k rows carry different values is stratified by their
    combination (e.g. its correctness pattern across checkpoints). Question ids are redrawn
    with replacement within each stratum, keeping stratum sizes.

    `n` resamples: 1,000 by default, 200 for "smooth_ece", which is not vectorized (~15 ms a
    call, so about 6 s for 200 resamples of both methods).

    Returns a dict: ``metric``, ``value_a``, ``value_b``, ``difference`` (a - b on the original
    data), ``lower``, ``upper`` (one-sided 95% percentile interval: (5th percentile, +inf) if the
    difference is >= 0, else (-inf, 95th percentile)), ``contains_zero``, ``n_resamples``
    (resamples where both metrics are defined) and ``n_questions``. The sign is not
    interpreted: higher AUC and delta are better, lower Brier and ECE are better.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {list(METRICS)}")
    n = resample_count(metric, n)
    if n_bins < 1:
        raise ValueError(f"n_bins must be at least 1, got {n_bins}")
    ids, conf_a, correct_a, strata_a = _question_matrix(df_a, "df_a", strata, average_over)
    ids_b, conf_b, correct_b, _ = _question_matrix(df_b, "df_b", None, average_over)
    _check_same_questions(ids, ids_b, conf_a.shape[1], conf_b.shape[1])
    if metric == "delta":
        for name, conf, correct in (("df_a", conf_a, correct_a), ("df_b", conf_b, correct_b)):
            _check_contrast_layout(name, correct, average_over)

    def statistic(conf, correct, idx):
        return _metric_of_resamples(metric, conf, correct, idx, n_bins, average_over is not None)

    original = np.arange(len(ids))[None, :]
    value_a, value_b = statistic(conf_a, correct_a, original)[0], statistic(conf_b, correct_b, original)[0]
    idx = resample_indices(strata_a, n, seed, size=len(ids))
    all_diffs = statistic(conf_a, correct_a, idx) - statistic(conf_b, correct_b, idx)
    difference = float(value_a - value_b)
    lower, upper, diffs = one_sided_interval(all_diffs, difference, metric)
    out = {
        "metric": metric,
        "value_a": float(value_a),
        "value_b": float(value_b),
        "difference": difference,
        "lower": lower,
        "upper": upper,
        "contains_zero": bool(lower <= 0 <= upper),
        "n_resamples": int(diffs.size),
        "n_questions": len(ids),
    }
    if return_diffs:
        out["diffs"] = all_diffs  # one per resample, NaN where the metric is undefined
    return out


def one_sided_interval(all_diffs: np.ndarray, difference: float, metric: str):
    """The one-sided 95% percentile interval of resampled differences, on the side of the observed one."""
    diffs = all_diffs[np.isfinite(all_diffs)]
    if diffs.size == 0:
        raise ValueError(f"{metric} is undefined on every resample (one class only?); pass strata so both classes stay")
    if difference >= 0:
        return float(np.percentile(diffs, 5)), np.inf, diffs
    return -np.inf, float(np.percentile(diffs, 95)), diffs


def resample_count(metric: str, n) -> int:
    if n is None:
        b = config.bootstrap()
        return b.n_resamples_smooth_ece if metric == "smooth_ece" else b.n_resamples
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n (the number of resamples) must be a positive integer, got {n!r}")
    return int(n)


def _question_matrix(df, name, strata, average_over):
    """Sorted question ids, (questions, k) arrays of confidence and correctness, and per-question strata."""
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{name} must be a pandas DataFrame, got {type(df).__name__}")
    needed = ["question_id", "confidence", "correct"] + [c for c in (strata, average_over) if c is not None]
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise ValueError(f"{name} is missing columns {missing}; it has {list(df.columns)}")
    order = ["question_id"] + ([average_over] if average_over else [])
    df = df.sort_values(order, kind="stable")
    conf = as_probabilities(df["confidence"], f"{name}.confidence")
    correct = as_binary(df["correct"], f"{name}.correct")
    ids, counts = np.unique(df["question_id"].to_numpy(), return_counts=True)
    if counts.min() != counts.max():
        raise ValueError(
            f"{name} has between {counts.min()} and {counts.max()} rows per question_id; "
            "every question needs the same number of rows (one per checkpoint, or two per contrast pair)"
        )
    k = int(counts[0])
    if average_over:
        groups = df[average_over].to_numpy().reshape(len(ids), k)
        if not (groups == groups[0]).all() or pd.Series(groups[0]).duplicated().any():
            raise ValueError(
                f"with average_over={average_over!r}, every question in {name} needs exactly one row per {average_over}"
            )
    codes = None
    if strata is not None:
        labels = df[strata]
        if labels.isna().any():
            raise ValueError(f"{name}.{strata} has missing values; give every row a stratum")
        per_row = pd.factorize(labels)[0].reshape(len(ids), k)
        codes = np.unique(per_row, axis=0, return_inverse=True)[1].ravel()  # a question's combination of labels
    return ids, conf.reshape(len(ids), k), correct.reshape(len(ids), k), codes


def _check_same_questions(ids_a, ids_b, k_a, k_b) -> None:
    only_a = np.setdiff1d(ids_a, ids_b).size
    only_b = np.setdiff1d(ids_b, ids_a).size
    if only_a or only_b:
        raise ValueError(
            f"df_a and df_b must cover the same questions: {only_a} question ids are only in df_a and "
            f"{only_b} only in df_b; restrict both to the shared questions"
        )
    if k_a != k_b:
        raise ValueError(f"df_a has {k_a} rows per question but df_b has {k_b}; pair the same rows in both")


def _check_contrast_layout(name, correct, average_over) -> None:
    if average_over is not None:
        raise ValueError("delta is a per-question quantity of a contrast pair; leave average_over unset")
    if correct.shape[1] != 2 or not np.all(correct.sum(axis=1) == 1):
        raise ValueError(
            f"delta needs two rows per question in {name}, exactly one of them correct; "
            "pass helpers.evaluation.contrast.contrast_rows(...)"
        )


def _metric_of_resamples(metric, conf, correct, idx, n_bins, per_column) -> np.ndarray:
    """The metric on each row of `idx` (resampled question indices), in memory-bounded chunks."""
    n_questions, k = conf.shape
    codes, n_codes = _codes(metric, conf, n_bins)
    groups = [[g] for g in range(k)] if per_column else [list(range(k))]
    chunk = max(1, CHUNK_VALUES // (n_questions * k))
    out = np.empty(len(idx))
    for start in range(0, len(idx), chunk):
        rows = idx[start:start + chunk]
        values = []
        for columns in groups:
            def take(table):  # (chunk, questions * len(columns)), a question's rows side by side
                return table[rows][:, :, columns].reshape(len(rows), -1)
            gathered_codes = None if codes is None else take(codes)
            values.append(_metric_2d(metric, take(conf), take(correct), gathered_codes, n_codes, n_bins))
        out[start:start + len(rows)] = np.mean(values, axis=0)
    return out


def _codes(metric, conf, n_bins):
    """Per-value integer codes computed once on the original data: AUC levels or ECE bins."""
    if metric == "auc":
        levels, inverse = np.unique(conf, return_inverse=True)
        return inverse.reshape(conf.shape), levels.size
    if metric == "ece":
        return np.asarray(metrics.bin_indices(conf.ravel(), n_bins, "uniform")).reshape(conf.shape), n_bins
    return None, 0


def _metric_2d(metric, conf, correct, codes, n_codes, n_bins) -> np.ndarray:
    if metric == "auc":
        return _auc_from_levels(codes, correct, n_codes)
    if metric == "ece":
        return _ece_from_bins(codes, conf, correct, n_bins)
    if metric == "brier":
        return batched_brier(conf, correct)
    if metric == "delta":
        return batched_delta(conf, correct)
    return np.array([metrics.smooth_ece(c, y) for c, y in zip(conf, correct)])


# --------------------------------------------------------------------------- two methods, the paper's way


def _shared(df_a: pd.DataFrame, df_b: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both frames restricted to the question ids they share (methods may differ in their contrast sets)."""
    shared = np.intersect1d(df_a["question_id"].unique(), df_b["question_id"].unique())
    if shared.size == 0:
        raise ValueError("the two methods share no questions; compare them on the same checkpoints and split")
    return df_a[df_a["question_id"].isin(shared)], df_b[df_b["question_id"].isin(shared)]


def full_set_bootstrap(metric: str, df_a: pd.DataFrame, df_b: pd.DataFrame, checkpoints, n: int | None = None,
                       seed: int = 0, return_diffs: bool = False) -> dict:
    """Paired bootstrap of a full-set metric over several checkpoints, stratified by correctness.

    AUC and Brier are pooled over the checkpoints; ECE is averaged per checkpoint (paper A.3).
    """
    checkpoints = list(checkpoints)
    a, b = (df[df["checkpoint"].isin(checkpoints)] for df in (df_a, df_b))
    for name, df in (("df_a", a), ("df_b", b)):
        if set(df["checkpoint"]) != set(checkpoints):
            raise ValueError(f"{name} lacks checkpoints {sorted(set(checkpoints) - set(df['checkpoint']))}")
    a, b = _shared(a, b)
    average = "checkpoint" if metric in ("ece", "smooth_ece") else None
    return paired_bootstrap(metric, a, b, strata="correct", n=n, seed=seed, average_over=average,
                            return_diffs=return_diffs)


def contrast_bootstrap(metric: str, df_a: pd.DataFrame, df_b: pd.DataFrame, ckpt_i: str, ckpt_j: str,
                       n: int | None = None, seed: int = 0, return_diffs: bool = False) -> dict:
    """Paired bootstrap of a contrast-set metric on one pair of checkpoints, stratified by improvement/regression.

    Each method's contrast set follows its own answers' correctness, so the comparison uses the
    questions in both. ECE uses the later checkpoint's normalized confidences only, as in
    `contrast.pair_metrics`.
    """
    a, b = _shared(contrast_rows(df_a, ckpt_i, ckpt_j), contrast_rows(df_b, ckpt_i, ckpt_j))
    if metric in ("ece", "smooth_ece"):
        a, b = a[a["checkpoint"] == ckpt_j], b[b["checkpoint"] == ckpt_j]
    out = paired_bootstrap(metric, a, b, strata="kind", n=n, seed=seed, return_diffs=return_diffs)
    return {"ckpt_i": ckpt_i, "ckpt_j": ckpt_j, **out}
