"""Knowledge contrast sets: questions that one checkpoint gets right and another gets wrong.

A confidence method's results are a long DataFrame with one row per (checkpoint, question):
``checkpoint``, ``question_id``, ``answer``, ``correct``, ``confidence``.

On a contrast set exactly one of the two checkpoints is right, so raw confidences are
conditioned away from what they were calibrated for: two independent, calibrated,
80%-accurate checkpoints are each only 50% accurate on their contrast set (paper A.1).
`normalize_pair` turns a pair of confidences into the probability that each member is the
right one, and the metrics here are computed on those normalized pairs, per checkpoint pair,
then averaged across pairs, never pooled (paper A.3).
"""
from __future__ import annotations

import warnings
from itertools import combinations
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression

from helpers.evaluation import metrics
from helpers.evaluation.validation import as_binary, as_probabilities

REQUIRED_COLUMNS = ("checkpoint", "question_id", "correct", "confidence")
METRIC_COLUMNS = ("auc", "brier", "ece", "smooth_ece", "delta", "auc_cb", "brier_cb", "delta_cb")

Normalizer = Callable[[np.ndarray, np.ndarray], "tuple[np.ndarray, np.ndarray]"]


# --------------------------------------------------------------------------- pairs of checkpoints


def consecutive_pairs(checkpoints: Sequence[str]) -> list[tuple[str, str]]:
    """Neighbouring (earlier, later) pairs in the given order."""
    names = _checkpoint_list(checkpoints)
    return list(zip(names[:-1], names[1:]))


def all_pairs(checkpoints: Sequence[str]) -> list[tuple[str, str]]:
    """Every (earlier, later) pair, keeping the given order."""
    return list(combinations(_checkpoint_list(checkpoints), 2))


def _checkpoint_list(checkpoints: Sequence[str]) -> list[str]:
    names = [checkpoints] if isinstance(checkpoints, str) else list(checkpoints)
    if len(names) < 2:
        raise ValueError(f"need at least two checkpoints to form a pair, got {names}")
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise ValueError(f"checkpoints are listed more than once: {duplicated}; list each once, in order")
    return names


# --------------------------------------------------------------------------- the contrast set


def contrast_set(df: pd.DataFrame, ckpt_i: str, ckpt_j: str) -> pd.DataFrame:
    """Questions answered by both checkpoints whose correctness differs.

    ``ckpt_i`` should be the earlier checkpoint: ``kind`` is "improvement" where i is wrong and
    j right, "regression" where i is right and j wrong. Returns columns ``question_id,
    confidence_i, confidence_j, correct_i, correct_j, kind`` (possibly no rows: an empty
    contrast set is a finding, not an error), sorted by question_id.
    """
    _check_results_frame(df)
    if ckpt_i == ckpt_j:
        raise ValueError(f"ckpt_i and ckpt_j are both {ckpt_i!r}; a contrast set needs two different checkpoints")
    names = df["checkpoint"].to_numpy(dtype=object)  # compared as plain objects: several times faster than a str column
    (q_i, p_i, c_i), (q_j, p_j, c_j) = (_one_checkpoint(df, names, name) for name in (ckpt_i, ckpt_j))
    ids, a, b = np.intersect1d(q_i, q_j, assume_unique=True, return_indices=True)  # sorted by question_id
    differs = c_i[a] != c_j[b]
    a, b = a[differs], b[differs]
    return pd.DataFrame({"question_id": ids[differs], "confidence_i": p_i[a], "confidence_j": p_j[b],
                         "correct_i": c_i[a], "correct_j": c_j[b],
                         "kind": np.where(c_j[b], "improvement", "regression")})


def _check_results_frame(df: pd.DataFrame) -> None:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"expected a pandas DataFrame of results, got {type(df).__name__}")
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(
            f"results are missing columns {missing}; need {list(REQUIRED_COLUMNS)}, one row per (checkpoint, question)"
        )


def _one_checkpoint(df: pd.DataFrame, names: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(question ids, checked confidences, correct as bool) of checkpoint `name`'s rows."""
    rows = names == name
    if not rows.any():
        raise ValueError(f"checkpoint {name!r} is not in the results; available: {list(pd.unique(df['checkpoint']))}")
    ids = df["question_id"].to_numpy()[rows]
    repeated = len(ids) - len(np.unique(ids))
    if repeated:
        raise ValueError(f"checkpoint {name!r} has {repeated} repeated question_ids; "
                         "keep one row per (checkpoint, question)")
    return (ids, as_probabilities(df["confidence"].to_numpy()[rows], f"confidence of {name}"),
            as_binary(df["correct"].to_numpy()[rows], f"correct of {name}").astype(bool))


# --------------------------------------------------------------------------- normalization


def normalize_pair(p_i, p_j):
    """Probability that each member of a contrast pair is the right one.

    q_i = p_i(1-p_j) / Z and q_j = p_j(1-p_i) / Z with Z = p_i(1-p_j) + p_j(1-p_i): the chance
    that only i is right, among the two ways exactly one is right, if the two were independent
    (paper A.1). Equivalently q_i = sigmoid(logit p_i - logit p_j), a Bradley-Terry model with
    unit weights. (0.8, 0.8) maps to (0.5, 0.5); equal inputs always map to exactly 0.5 each.

    Z = 0 only when p_i = p_j = 0 or p_i = p_j = 1: both are certain and agree, which says
    nothing about which one is right, so the rule is (0.5, 0.5).

    Accepts scalars or equal-length 1-D arrays; returns the same kind.
    """
    scalar = np.ndim(p_i) == 0 and np.ndim(p_j) == 0
    pi = as_probabilities(np.atleast_1d(p_i), "p_i")
    pj = as_probabilities(np.atleast_1d(p_j), "p_j")
    if pi.shape != pj.shape:
        raise ValueError(f"p_i has {pi.size} values but p_j has {pj.size}; pass one of each per question")
    only_i = pi * (1.0 - pj)
    only_j = pj * (1.0 - pi)
    # 1 / (1 + b/a) rather than a / (a + b): it is exactly symmetric and exactly monotone in floats.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q_i = 1.0 / (1.0 + only_j / only_i)
        q_j = 1.0 / (1.0 + only_i / only_j)
    undecided = (only_i == 0) & (only_j == 0)
    q_i[undecided] = 0.5
    q_j[undecided] = 0.5
    if scalar:
        return float(q_i[0]), float(q_j[0])
    return q_i, q_j


class FittedNormalization:
    """P(i is the right one | p_i, p_j) from a logistic model on (logit p_i, logit p_j) (paper B.1)."""

    CLIP = 1e-6

    def __init__(self, model: LogisticRegression):
        self.model = model

    @property
    def coef_(self) -> np.ndarray:
        """Weights on (logit p_i, logit p_j); the fixed rule `normalize_pair` is (1, -1), intercept 0."""
        return self.model.coef_[0]

    @property
    def intercept_(self) -> float:
        return float(self.model.intercept_[0])

    def __call__(self, p_i, p_j):
        """Return (q_i, q_j) with q_i + q_j = 1."""
        q_i = self.model.predict_proba(_logit_features(p_i, p_j))[:, 1]
        return q_i, 1.0 - q_i

    def __repr__(self) -> str:
        w_i, w_j = self.coef_
        return f"FittedNormalization(w_i={w_i:.3f}, w_j={w_j:.3f}, intercept={self.intercept_:.3f})"


def fitted_normalization(p_i, p_j, correct_i, C: float = 1.0) -> FittedNormalization:
    """Fit the paper's B.1 alternative to `normalize_pair` on contrast-set data.

    A logistic regression on (logit p_i, logit p_j), with p clipped to [1e-6, 1 - 1e-6],
    predicts whether checkpoint i is the right one. It is fitted on the evaluation data it
    will then score, so it is generous to every method, as in the paper; use it to check that
    a conclusion does not hinge on the fixed normalization, not as a method in its own right.
    `C` is scikit-learn's inverse L2 strength; with thousands of questions the default barely
    regularizes. Returns a callable ``f(p_i, p_j) -> (q_i, q_j)``.
    """
    features = _logit_features(p_i, p_j)
    target = as_binary(correct_i, "correct_i")
    if target.size != features.shape[0]:
        raise ValueError(f"correct_i has {target.size} values but p_i has {features.shape[0]}; pass one per question")
    if target.min() == target.max():
        raise ValueError(
            "correct_i holds only one class; fitting needs contrast questions where i is right and where j is right"
        )
    return FittedNormalization(LogisticRegression(C=C).fit(features, target.astype(int)))


def _logit_features(p_i, p_j) -> np.ndarray:
    pi = as_probabilities(np.atleast_1d(p_i), "p_i")
    pj = as_probabilities(np.atleast_1d(p_j), "p_j")
    if pi.shape != pj.shape:
        raise ValueError(f"p_i has {pi.size} values but p_j has {pj.size}; pass one of each per question")
    clip = FittedNormalization.CLIP
    both = np.clip(np.column_stack([pi, pj]), clip, 1.0 - clip)
    return np.log(both) - np.log1p(-both)


# --------------------------------------------------------------------------- metrics on contrast sets


def contrast_rows(df: pd.DataFrame, ckpt_i: str, ckpt_j: str, normalizer: Normalizer | None = None) -> pd.DataFrame:
    """The normalized contrast set in long form, two rows per question.

    Columns ``question_id, checkpoint, confidence, correct, kind``: ``confidence`` is the
    normalized q of that checkpoint. This is the layout `helpers.evaluation.stats.paired_bootstrap` takes
    (``strata="kind"``); for the contrast ECE keep only the rows of ``ckpt_j``.
    """
    contrast = contrast_set(df, ckpt_i, ckpt_j)
    q_i, q_j = _normalized(contrast, normalizer)
    n = len(contrast)
    return pd.DataFrame({
        "question_id": np.concatenate([contrast["question_id"]] * 2),
        "checkpoint": [ckpt_i] * n + [ckpt_j] * n,
        "confidence": np.concatenate([q_i, q_j]),
        "correct": np.concatenate([contrast["correct_i"], contrast["correct_j"]]),
        "kind": np.concatenate([contrast["kind"]] * 2),
    }).sort_values(["question_id", "checkpoint"], kind="stable").reset_index(drop=True)


def pair_metrics(contrast: pd.DataFrame, n_bins: int = 15, normalizer: Normalizer | None = None) -> dict:
    """Metrics of one contrast set (the output of `contrast_set`).

    - ``auc``, ``brier``: on the 2n normalized values [q_i, q_j] with labels [c_i, c_j].
    - ``ece`` (binned, `n_bins` equal-width bins) and ``smooth_ece``: on the later checkpoint's
      q_j against c_j only. Pooling both members would put each q next to its mirror 1 - q,
      and near 0.5 (same bin, or same kernel window) their errors cancel.
    - ``delta``: mean of q_correct - q_wrong, in [-1, 1]; random scores 0, perfect scores 1.
    - ``auc_cb``, ``brier_cb``, ``delta_cb``: class-balanced, the mean of the metric on the
      improvements and on the regressions (NaN if either subset is empty).
    """
    if len(contrast) == 0:
        raise ValueError("the contrast set is empty: the two checkpoints agree on every question; pick another pair")
    q_i, q_j = _normalized(contrast, normalizer)
    c_i = contrast["correct_i"].to_numpy(dtype=float)
    c_j = contrast["correct_j"].to_numpy(dtype=float)
    out = _discrimination(q_i, q_j, c_i, c_j)
    out["ece"] = metrics.expected_calibration_error(q_j, c_j, n_bins=n_bins)
    out["smooth_ece"] = metrics.smooth_ece(q_j, c_j)
    improvement = (contrast["kind"] == "improvement").to_numpy()
    subsets = [
        _discrimination(q_i[m], q_j[m], c_i[m], c_j[m]) if m.any() else None for m in (improvement, ~improvement)
    ]
    for name in ("auc", "brier", "delta"):
        out[f"{name}_cb"] = np.nan if None in subsets else (subsets[0][name] + subsets[1][name]) / 2
    return {name: out[name] for name in METRIC_COLUMNS}


def _discrimination(q_i, q_j, c_i, c_j) -> dict:
    """AUC, Brier and delta of normalized pairs; each pair has exactly one right member."""
    scores, labels = np.concatenate([q_i, q_j]), np.concatenate([c_i, c_j])
    q_right = np.where(c_i == 1, q_i, q_j)
    q_wrong = np.where(c_i == 1, q_j, q_i)
    return {
        "auc": metrics.auroc(scores, labels),
        "brier": metrics.brier_score(scores, labels),
        "delta": float(np.mean(q_right - q_wrong)),
    }


def _normalized(contrast: pd.DataFrame, normalizer: Normalizer | None):
    p_i = contrast["confidence_i"].to_numpy(dtype=float)
    p_j = contrast["confidence_j"].to_numpy(dtype=float)
    if len(contrast) == 0:
        return p_i, p_j
    q_i, q_j = (normalizer or normalize_pair)(p_i, p_j)
    return as_probabilities(q_i, "normalized q_i"), as_probabilities(q_j, "normalized q_j")


def contrast_metrics_per_pair(
    df: pd.DataFrame,
    pairs: Sequence[tuple[str, str]],
    min_size: int = 500,
    n_bins: int = 15,
    normalizer: Normalizer | str | None = None,
) -> pd.DataFrame:
    """One row per (ckpt_i, ckpt_j) pair: sizes, ``included`` and the `pair_metrics`.

    Columns ``ckpt_i, ckpt_j, n, n_improvement, n_regression, included`` and the metric columns
    (see `pair_metrics`). ``included`` is n >= `min_size` (the paper uses 500, 300 for its
    transfer domain). Metrics are computed for every non-empty pair, included or not, so
    small pairs can be looked at; only `contrast_metrics` leaves them out. An empty pair has
    NaN metrics. `normalizer`: None for `normalize_pair`, "fitted" for `fitted_normalization`
    fitted once on the pooled contrast sets of the included pairs (with no included pair, the small
    pairs' metrics use `normalize_pair`), or any callable ``f(p_i, p_j) -> (q_i, q_j)``.
    """
    pairs = _pair_list(pairs)
    if min_size < 1:
        raise ValueError(f"min_size must be at least 1, got {min_size}")
    contrasts = {pair: contrast_set(df, *pair) for pair in pairs}
    sizes = {pair: len(c) for pair, c in contrasts.items()}
    normalizer = _resolve_normalizer(normalizer, contrasts, sizes, min_size)
    rows = []
    for (ckpt_i, ckpt_j), contrast in contrasts.items():
        n_improvement = int((contrast["kind"] == "improvement").sum())
        row = {
            "ckpt_i": ckpt_i, "ckpt_j": ckpt_j, "n": len(contrast),
            "n_improvement": n_improvement, "n_regression": len(contrast) - n_improvement,
            "included": len(contrast) >= min_size,
        }
        empty = dict.fromkeys(METRIC_COLUMNS, np.nan)
        row.update(pair_metrics(contrast, n_bins, normalizer) if len(contrast) else empty)
        rows.append(row)
    return pd.DataFrame(rows)


def contrast_metrics(
    df: pd.DataFrame,
    pairs: Sequence[tuple[str, str]],
    min_size: int = 500,
    n_bins: int = 15,
    normalizer: Normalizer | str | None = None,
    if_none: str = "warn",
) -> pd.Series:
    """Contrast-set metrics averaged across the pairs with at least `min_size` questions.

    Averaged, never pooled: the normalization assumes exactly one right answer per pair of
    answers, which pooling several pairs' rows would blur (paper A.3). Class-balanced metrics
    average over the included pairs where they are defined. Adds ``n_pairs`` (included),
    ``n_skipped`` (too small) and ``n_questions`` (summed over included pairs). If no pair is large
    enough (a world that misses the threshold), the metrics are NaN with n_pairs 0 and a warning says
    so (`if_none="warn"`, the default, so a notebook says so and goes on); "nan" returns the same
    without the warning, "raise" raises ValueError.
    """
    if if_none not in ("raise", "warn", "nan"):
        raise ValueError(f"if_none must be 'raise', 'warn' or 'nan', got {if_none!r}")
    table = contrast_metrics_per_pair(df, pairs, min_size, n_bins, normalizer)
    kept = table[table["included"]]
    if kept.empty and if_none != "raise":
        if if_none == "warn":
            warnings.warn(f"no pair has a contrast set of at least {min_size} questions (the largest has "
                          f"{int(table['n'].max())}); the contrast metrics are NaN", stacklevel=2)
        summary = pd.Series(dict.fromkeys(METRIC_COLUMNS, np.nan))
        summary["n_pairs"], summary["n_skipped"], summary["n_questions"] = 0, len(table), 0
        return summary
    if kept.empty:
        found = ", ".join(f"{r.ckpt_i}->{r.ckpt_j}: {r.n}" for r in table.itertuples())
        raise ValueError(
            f"no pair has a contrast set of at least min_size={min_size} questions (sizes: {found}); lower min_size"
        )
    summary = kept[list(METRIC_COLUMNS)].mean()
    summary["n_pairs"] = len(kept)
    summary["n_skipped"] = len(table) - len(kept)
    summary["n_questions"] = int(kept["n"].sum())
    return summary


def _pair_list(pairs) -> list[tuple[str, str]]:
    pairs = [tuple(pair) for pair in pairs]
    if not pairs:
        raise ValueError("pairs is empty; pass e.g. consecutive_pairs(checkpoints)")
    bad = [pair for pair in pairs if len(pair) != 2]
    if bad:
        raise ValueError(f"each pair must be (earlier, later), got {bad[:3]}")
    return pairs


def pooled_normalizer(normalizer, df: pd.DataFrame, pairs, min_size: int = 500) -> Normalizer | None:
    """`normalizer` made callable for one method's frame: "fitted" is fitted on its pooled included pairs,
    as `contrast_metrics_per_pair` does (used by `shared_bootstrap`, so findings can use it too)."""
    contrasts = {pair: contrast_set(df, *pair) for pair in _pair_list(pairs)}
    return _resolve_normalizer(normalizer, contrasts, {p: len(c) for p, c in contrasts.items()}, min_size)


def _resolve_normalizer(normalizer, contrasts, sizes, min_size) -> Normalizer | None:
    if normalizer is None or callable(normalizer):
        return normalizer
    if normalizer != "fitted":
        raise ValueError(f"normalizer must be None, 'fitted' or a callable, got {normalizer!r}")
    kept = [contrasts[pair] for pair, n in sizes.items() if n >= min_size]
    if not kept:  # nothing to fit on; no pair is included either, so no reported metric uses the fallback
        return None
    pooled = pd.concat(kept)
    return fitted_normalization(pooled["confidence_i"], pooled["confidence_j"], pooled["correct_i"])


# --------------------------------------------------------------------------- ablation


def copy_confidences(df: pd.DataFrame, source_ckpt: str, target_ckpts: Sequence[str]) -> pd.DataFrame:
    """The copy ablation: targets get the source checkpoint's confidence per question.

    Answers and correctness stay the target's own; only ``confidence`` is replaced by what the
    source (training) checkpoint gave its own answer to the same question. Both members of any
    pair of targets then carry the same number, so their normalized pair is (0.5, 0.5) and the
    contrast AUC is exactly 0.5. Returns the targets' rows only.
    """
    _check_results_frame(df)
    targets = [target_ckpts] if isinstance(target_ckpts, str) else list(target_ckpts)
    available = list(pd.unique(df["checkpoint"]))
    unknown = [name for name in [source_ckpt, *targets] if name not in available]
    if unknown:
        raise ValueError(f"checkpoints {unknown} are not in the results; available: {available}")
    ids, confidences, _ = _one_checkpoint(df, df["checkpoint"].to_numpy(dtype=object), source_ckpt)
    source = pd.Series(confidences, index=ids)
    copied = df[df["checkpoint"].isin(targets)].copy()
    missing = ~copied["question_id"].isin(source.index)
    if missing.any():
        raise ValueError(
            f"{int(missing.sum())} target rows ask questions that {source_ckpt!r} has no confidence for; "
            "restrict the targets to the source's questions first"
        )
    copied["confidence"] = copied["question_id"].map(source).to_numpy(dtype=float)
    return copied.reset_index(drop=True)


# --------------------------------------------------------------------------- how knowledge moves


def flip_counts(df: pd.DataFrame, checkpoints: Sequence[str] | None = None) -> pd.DataFrame:
    """Improvements and regressions for every (earlier, later) pair of checkpoints.

    Returns one row per pair: ``ckpt_i, ckpt_j, improvements, regressions, contrast`` (their sum).
    """
    _check_results_frame(df)
    names = list(pd.unique(df["checkpoint"])) if checkpoints is None else list(checkpoints)
    wide = df.pivot(index="question_id", columns="checkpoint", values="correct")
    missing = [n for n in names if n not in wide.columns]
    if missing:
        raise ValueError(f"checkpoints {missing} are not in the results; available: {list(wide.columns)}")
    wide = wide[names].dropna().astype(bool)
    rows = []
    for ckpt_i, ckpt_j in all_pairs(names):
        gained = int((~wide[ckpt_i] & wide[ckpt_j]).sum())
        lost = int((wide[ckpt_i] & ~wide[ckpt_j]).sum())
        rows.append({"ckpt_i": ckpt_i, "ckpt_j": ckpt_j, "improvements": gained, "regressions": lost,
                     "contrast": gained + lost})
    return pd.DataFrame(rows)
