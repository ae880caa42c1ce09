"""The paired bootstrap of a contrast metric averaged over checkpoint pairs, with shared questions.

A question sits in the contrast sets of many pairs (a sum flipped between steps 2100 and 2200 is
usually also in the pair 2100-2300), so the pairs' metrics are correlated. Resampling each pair on
its own treats them as independent and makes the interval of their average too narrow. The paper
(A.8.2) accounts for that shared-question dependence; here every replicate draws **one weight per
question**, used by every pair and by both methods:

- the weight is Poisson(1), the large-sample form of "how many times the question is drawn with
  replacement" (Hanley and MacGibbon 2006), so a question counts the same in every pair it is in;
- inside each pair the weights are rescaled per stratum (improvements, regressions) to the stratum's
  size, so every replicate keeps each pair's class mix, as the stratified bootstrap does.

Metrics are the weighted forms of `contrast.pair_metrics` (AUC, Brier and Δ on both members of the
pair, binned ECE on the later one), checked against scikit-learn's `sample_weight` in the tests.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import sparse

from helpers.evaluation import metrics, stats
from helpers.evaluation.contrast import contrast_rows, pooled_normalizer

CONTRAST_METRICS = ("auc", "brier", "ece", "delta", "auc_cb", "brier_cb", "delta_cb")


def question_weights(question_ids, n: int | None = None, seed: int = 0) -> pd.DataFrame:
    """(n, questions) Poisson(1) weights, one column per question id, one row per replicate."""
    ids = np.unique(np.asarray(question_ids))
    if ids.size == 0:
        raise ValueError("no questions to resample; pass the ids of the contrast questions")
    n = stats.resample_count("auc", n)
    rng = np.random.default_rng(seed)
    return pd.DataFrame(rng.poisson(1.0, size=(n, ids.size)).astype(float), columns=ids)


def stratified(weights: np.ndarray, strata) -> np.ndarray:
    """`weights` (replicates, questions) rescaled so that each stratum's weights sum to its size in
    every replicate (NaN in a replicate where a stratum drew nothing)."""
    weights = np.asarray(weights, dtype=float)
    strata = np.asarray(strata)
    if weights.ndim != 2 or weights.shape[1] != strata.size:
        raise ValueError(f"weights must be (replicates, {strata.size}) for {strata.size} questions, "
                         f"got {weights.shape}")
    out = np.empty_like(weights)
    for label in np.unique(strata):
        cols = strata == label
        total = weights[:, cols].sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, cols] = np.where(total > 0, weights[:, cols] * cols.sum() / total, np.nan)
    return out


# --------------------------------------------------------------------------- weighted metrics, one row per replicate


def weighted_auc(conf, correct, weights) -> np.ndarray:
    """AUROC of `conf` for `correct`, ties counted half, under each row of `weights` (replicates, values)."""
    conf, correct, weights = _check(conf, correct, weights)
    levels, code = np.unique(conf, return_inverse=True)
    pos, neg = correct == 1, correct == 0
    # (replicates, levels): the negatives' weight at each confidence level, by one sparse product
    one_hot = sparse.csr_matrix((np.ones(neg.sum()), (code[neg], np.arange(neg.sum()))), shape=(levels.size, neg.sum()))
    neg_per_level = np.asarray(one_hot @ weights[:, neg].T).T
    below = np.cumsum(neg_per_level, axis=1) - neg_per_level
    score = below[:, code[pos]] + 0.5 * neg_per_level[:, code[pos]]
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weights[:, pos] * score).sum(axis=1) / (weights[:, pos].sum(axis=1) * weights[:, neg].sum(axis=1))


def weighted_brier(conf, correct, weights) -> np.ndarray:
    conf, correct, weights = _check(conf, correct, weights)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weights * (conf - correct) ** 2).sum(axis=1) / weights.sum(axis=1)


def weighted_ece(conf, correct, weights, n_bins: int = 15) -> np.ndarray:
    """Binned ECE (equal-width bins, as `metrics.expected_calibration_error`) under each row of weights."""
    conf, correct, weights = _check(conf, correct, weights)
    bins = np.asarray(metrics.bin_indices(conf, n_bins, "uniform"))
    gap = np.zeros(weights.shape[0])
    for b in np.unique(bins):
        cols = bins == b
        gap += np.abs((weights[:, cols] * (conf[cols] - correct[cols])).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return gap / weights.sum(axis=1)


def _check(conf, correct, weights):
    conf, correct = np.asarray(conf, dtype=float), np.asarray(correct, dtype=float)
    weights = np.atleast_2d(np.asarray(weights, dtype=float))
    if conf.shape != correct.shape or conf.ndim != 1 or weights.shape[1] != conf.size:
        raise ValueError(f"conf {conf.shape}, correct {correct.shape} and weights {weights.shape} do not match: "
                         "pass one confidence and one label per value and one weight column per value")
    return conf, correct, weights


# --------------------------------------------------------------------------- the test over pairs


# --------------------------------------------------------------------------- every pair at once

CHUNK_VALUES = 2_000_000  # replicates x stacked rows per chunk, to bound memory (~16 MB per float array)


def pairs_values(metric: str, used, w: pd.DataFrame, n_bins: int = 15) -> np.ndarray:
    """(pairs, replicates): the metric of every pair (ckpt_j, rows) in `used` under every row of `w`, with no
    Python loop over pairs. The pairs' rows are stacked into one long array (a pair is a segment of it), each
    replicate's weights are gathered for all of them at once, and every per-pair sum is one product with a sparse
    (segments, rows) indicator; the AUC's "negatives below" comes from one running sum along the stacked rows,
    each pair sorted by confidence. Checked against a pair-by-pair reference on the same weights, to float rounding (the
    AUC's differences of a long running sum agree to about 1e-12; the tests hold it to that)."""
    if metric.endswith("_cb"):  # class-balanced: the mean of the metric on improvements and on regressions
        halves = [pairs_values(metric[:-3], [(j, rows[rows["kind"].to_numpy() == k]) for j, rows in used], w, n_bins)
                  for k in ("improvement", "regression")]
        return np.mean(halves, axis=0)
    if metric not in ("auc", "brier", "ece", "delta"):
        raise ValueError(f"unknown contrast metric {metric!r}; choose one of {list(CONTRAST_METRICS)}")
    s = _stack(metric, used, w.columns.to_numpy(), n_bins)
    weights = w.to_numpy(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        # as `stratified`: a question's weight times its stratum's size over the stratum's resampled weight
        # (distinct questions), one factor per replicate and (pair, stratum); NaN where the stratum drew nothing
        totals = weights @ s["questions"]
        factor = np.where(totals > 0, s["size"] / totals, np.nan)
    empty = s["group_pairs"] @ np.isnan(factor).T > 0  # (pairs, replicates): a stratum of the pair drew nothing
    # Replicates run along the last axis: gathering a row's weights is then a copy of one contiguous row.
    weights, factor = weights.T, np.nan_to_num(factor).T
    out = np.empty((len(used), weights.shape[1]))
    chunk = max(1, CHUNK_VALUES // max(s["n_rows"], 1))
    for start in range(0, weights.shape[1], chunk):
        part = slice(start, min(start + chunk, weights.shape[1]))
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, part] = _segment_metric(metric, s, np.ascontiguousarray(weights[:, part]),
                                           np.ascontiguousarray(factor[:, part]))
    out[empty] = np.nan
    return out


def _stack(metric: str, used, ids: np.ndarray, n_bins: int) -> dict:
    """The fixed (replicate-free) layout of `pairs_values`: every pair's rows one after the other (sorted by
    confidence inside a pair for the AUC), the weight column and stratum group of each row, and the sparse
    indicators that sum rows per pair."""
    parts = []
    for p, (ckpt_j, rows) in enumerate(used):
        if metric == "ece":  # the later member's confidences only, as `contrast.pair_metrics`
            rows = rows[(rows["checkpoint"] == ckpt_j).to_numpy()]
        parts.append(pd.DataFrame({"pair": p, "question_id": rows["question_id"].to_numpy(),
                                   "confidence": rows["confidence"].to_numpy(float),
                                   "correct": rows["correct"].to_numpy(float), "kind": rows["kind"].to_numpy()}))
    rows = pd.concat(parts, ignore_index=True)
    if metric == "auc":
        rows = rows.sort_values(["pair", "confidence"], kind="stable", ignore_index=True)
    pair, conf, correct = rows["pair"].to_numpy(), rows["confidence"].to_numpy(), rows["correct"].to_numpy()
    # A stratum group is (pair, kind); its size counts distinct questions, as `stratified` does.
    kind, kinds = pd.factorize(rows["kind"].to_numpy())
    group = pd.factorize(pair * max(len(kinds), 1) + kind)[0]
    first = ~pd.DataFrame({"g": group, "q": rows["question_id"].to_numpy()}).duplicated().to_numpy()
    col = np.searchsorted(ids, rows["question_id"].to_numpy())
    if n_rows_missing := int((ids[np.minimum(col, ids.size - 1)] != rows["question_id"].to_numpy()).sum()):
        raise ValueError(f"{n_rows_missing} contrast rows have question ids without a weight column; "
                         "draw the weights over every question of the pairs")
    n_rows, n_groups, n_pairs = len(rows), group.max() + 1 if len(rows) else 0, len(used)
    group_pair = np.zeros(n_groups, dtype=int)
    group_pair[group] = pair
    s = {"n_rows": n_rows, "col": col, "group": group, "size": np.bincount(group[first], minlength=n_groups),
         "conf": conf, "correct": correct, "group_pairs": _indicator(group_pair, n_pairs),
         "first": first.astype(float),
         "questions": sparse.csr_matrix((np.ones(first.sum()), (col[first], group[first])),
                                        shape=(ids.size, n_groups)),
         "pairs": _indicator(pair, n_pairs)}
    if metric == "ece":
        bins = np.asarray(metrics.bin_indices(conf, n_bins, "uniform")) if n_rows else np.zeros(0, int)
        s["bins"] = _indicator(pair * n_bins + bins, n_pairs * n_bins)
        s["bin_pair"] = _indicator(np.repeat(np.arange(n_pairs), n_bins), n_pairs)
    if metric == "auc":
        # Ties count one half: for each row, where its level (equal confidences within its pair) starts and ends
        # and where its pair starts, as positions in the stacked order.
        new_level = np.ones(n_rows, dtype=bool)
        new_level[1:] = (pair[1:] != pair[:-1]) | (conf[1:] != conf[:-1])
        starts = np.flatnonzero(new_level)
        level = np.cumsum(new_level) - 1
        ends = np.append(starts[1:], n_rows)
        pair_start = np.searchsorted(pair, pair)  # `pair` is sorted here
        # Only negatives enter the running sum and only positives read it: as positions among the negatives.
        pos, neg = correct == 1, correct == 0
        negatives_before = np.concatenate([[0], np.cumsum(neg)])
        s.update(pos=pos, neg=neg, level_start=negatives_before[starts[level][pos]],
                 level_end=negatives_before[ends[level][pos]], pair_start=negatives_before[pair_start[pos]],
                 pos_pairs=_indicator(pair[pos], n_pairs), neg_pairs=_indicator(pair[neg], n_pairs))
    return s


def _indicator(segment: np.ndarray, n_segments: int) -> sparse.csr_matrix:
    """(segments, values) 0/1 matrix: it times a dense (values, replicates) array sums every segment."""
    return sparse.csr_matrix((np.ones(segment.size), (segment, np.arange(segment.size))),
                             shape=(n_segments, segment.size))


def _segment_metric(metric: str, s: dict, weights: np.ndarray, factor: np.ndarray) -> np.ndarray:
    """(pairs, replicates) metric from the question weights (questions, replicates) and the stratum factors
    (pair x stratum, replicates); NaN where a pair has no rows."""
    conf, correct = s["conf"][:, None], s["correct"][:, None]
    if metric == "auc":  # sum over positives of w_p (negative weight below p + half the negative weight tied with p)
        w_neg = weights[s["col"][s["neg"]]] * factor[s["group"][s["neg"]]]
        below = np.zeros((w_neg.shape[0] + 1, w_neg.shape[1]))
        np.cumsum(w_neg, axis=0, out=below[1:])  # running negative weight, every pair sorted by confidence
        at_start = below[s["level_start"]]
        score = at_start - below[s["pair_start"]] + 0.5 * (below[s["level_end"]] - at_start)
        w_pos = weights[s["col"][s["pos"]]] * factor[s["group"][s["pos"]]]
        return (s["pos_pairs"] @ (w_pos * score)) / ((s["pos_pairs"] @ w_pos) * (s["neg_pairs"] @ w_neg))
    wr = weights[s["col"]] * factor[s["group"]]
    if metric == "brier":
        return s["pairs"] @ (wr * (conf - correct) ** 2) / (s["pairs"] @ wr)
    if metric == "ece":
        gap = np.abs(s["bins"] @ (wr * (conf - correct)))  # (pair x bin, replicates)
        return s["bin_pair"] @ gap / (s["pairs"] @ wr)
    # delta: both members share the question's weight, so the sum of ±q over its rows is its delta
    sign = np.where(correct == 1, 1.0, -1.0)
    return s["pairs"] @ (wr * (sign * conf)) / (s["pairs"] @ (wr * s["first"][:, None]))


def contrast_bootstrap_over_pairs(metric: str, df_a: pd.DataFrame, df_b: pd.DataFrame, pairs, min_size: int = 500,
                                  n: int | None = None, seed: int = 0, n_bins: int = 15, normalizer=None) -> dict:
    """Paired bootstrap of a contrast metric averaged over the pairs, one question resample shared by
    every pair and both methods.

    Each pair uses the contrast questions both methods share and counts when they are at least
    `min_size`. Returns the keys of `stats.paired_bootstrap` (``value_a``, ``value_b``,
    ``difference``, the one-sided 95% ``lower``/``upper``, ``contains_zero``, ``n_resamples``),
    ``n_pairs``, ``n_questions`` (distinct questions over the pairs), ``diffs`` (one per replicate) and ``loo``
    (`leave_one_out`: per checkpoint, the difference without the pairs it is in; entry 0 the data).
    The ``_cb`` metrics are class-balanced (`contrast.pair_metrics`). `normalizer`: None (independence,
    A.1) or "fitted" (B.1, fitted once per method on its pooled pairs and held fixed across replicates).
    """
    if metric not in CONTRAST_METRICS:
        raise ValueError(f"unknown contrast metric {metric!r}; choose one of {list(CONTRAST_METRICS)}")
    norm_a, norm_b = (pooled_normalizer(normalizer, df, pairs, min_size) for df in (df_a, df_b))
    used = []
    for ckpt_i, ckpt_j in pairs:
        a, b = contrast_rows(df_a, ckpt_i, ckpt_j, norm_a), contrast_rows(df_b, ckpt_i, ckpt_j, norm_b)
        shared = np.intersect1d(a["question_id"], b["question_id"])
        if shared.size >= max(min_size, 1):
            used.append((ckpt_i, ckpt_j, a[a["question_id"].isin(shared)], b[b["question_id"].isin(shared)]))
    if not used:
        raise ValueError(f"no pair has at least {min_size} contrast questions shared by both methods; lower min_size")
    ids = np.unique(np.concatenate([rows["question_id"].to_numpy() for _, _, rows, _ in used]))
    resampled = question_weights(ids, n, seed)
    w = pd.concat([pd.DataFrame(np.ones((1, ids.size)), columns=ids), resampled], ignore_index=True)  # row 0: the data
    per_pair = {side: pairs_values(metric, [(j, rows[k]) for _, j, *rows in used], w, n_bins)
                for k, side in ((0, "a"), (1, "b"))}
    per_rep = {side: np.mean(v, axis=0) for side, v in per_pair.items()}
    value = {side: float(v[0]) for side, v in per_rep.items()}
    all_diffs = per_rep["a"][1:] - per_rep["b"][1:]
    difference = value["a"] - value["b"]
    lower, upper, diffs = stats.one_sided_interval(all_diffs, difference, metric)
    return {"metric": metric, "value_a": value["a"], "value_b": value["b"], "difference": difference,
            "lower": lower, "upper": upper, "contains_zero": bool(lower <= 0 <= upper), "n_resamples": int(diffs.size),
            "n_pairs": len(used), "n_questions": int(ids.size), "diffs": all_diffs,
            "loo": leave_one_out(per_pair["a"] - per_pair["b"], [(i, j) for i, j, *_ in used])}


def leave_one_out(per_pair: np.ndarray, names) -> dict:
    """{checkpoint: (1 + replicates,) mean over the pairs that leave it out} from per-pair values (pairs,
    1 + replicates) and the pairs' (earlier, later) names; NaN where no pair is left."""
    names = list(names)
    out = {}
    for checkpoint in dict.fromkeys(c for pair in names for c in pair):
        keep = np.array([checkpoint not in pair for pair in names])
        out[checkpoint] = (per_pair[keep].mean(axis=0) if keep.any()
                           else np.full(per_pair.shape[1], np.nan))
    return out


# --------------------------------------------------------------------------- seeds


def over_seeds(run, df_a: pd.DataFrame, df_b: pd.DataFrame, seed: int = 0) -> dict:
    """A paired bootstrap of a trained method, averaged over its seeds, with an interval that covers them.

    `run(a, b)` is a bootstrap of two frames returning ``value_a``, ``value_b``, ``difference`` and
    ``diffs`` (one per replicate, NaN where undefined), e.g. `contrast_bootstrap_over_pairs` or
    `stats.full_set_bootstrap(..., return_diffs=True)` with a fixed seed. A frame with a ``seed`` column
    holds one result per seed (`metrics.seed_frames`); a method with seeds on both sides pairs seed k
    with seed k. `run` is called once per seed with the same bootstrap seed, so every seed sees the
    same question resamples (the seeds score the same answers, so strata and contrast sets agree).

    Values and the difference are the means over seeds (paper A.8.1). Each replicate also redraws the
    seeds with replacement and averages the drawn seeds' differences, so the interval covers the
    question resampling and the seed-to-seed spread together (a two-level bootstrap). Returns the
    keys of `run` with these means, the one-sided 95% interval and ``n_seeds``.
    """
    parts_a, parts_b = metrics.seed_frames(df_a), metrics.seed_frames(df_b)
    if len(parts_a) > 1 and len(parts_b) > 1 and len(parts_a) != len(parts_b):
        raise ValueError(f"df_a has {len(parts_a)} seeds and df_b {len(parts_b)}; compare the same seeds")
    k = max(len(parts_a), len(parts_b))
    runs = [run(parts_a[s % len(parts_a)], parts_b[s % len(parts_b)]) for s in range(k)]
    if k == 1:
        return {**runs[0], "n_seeds": 1}
    all_diffs = seed_resampled_mean(np.vstack([np.asarray(r["diffs"], dtype=float) for r in runs]), seed)
    out = {**runs[0], **{key: float(np.mean([r[key] for r in runs])) for key in ("value_a", "value_b", "difference")}}
    lower, upper, diffs = stats.one_sided_interval(all_diffs, out["difference"], out.get("metric", "metric"))
    out.update(lower=lower, upper=upper, contains_zero=bool(lower <= 0 <= upper), n_resamples=int(diffs.size),
               diffs=all_diffs, n_seeds=k)
    if all("loo" in r for r in runs):  # each left-out checkpoint: the seeds averaged as the main difference
        out["loo"] = {c: np.concatenate([[np.mean([r["loo"][c][0] for r in runs])],
                                         seed_resampled_mean(np.vstack([r["loo"][c][1:] for r in runs]), seed)])
                      for c in runs[0]["loo"]}
    return out


def seed_resampled_mean(per_seed, seed: int = 0) -> np.ndarray:
    """(seeds, replicates) values -> (replicates,): each replicate averages seeds drawn with replacement
    (the outer level of a two-level bootstrap over seeds and questions). Used by `over_seeds` and
    `claim_forms.auc_claim`."""
    per_seed = np.atleast_2d(np.asarray(per_seed, dtype=float))
    k, n = per_seed.shape
    if k == 1:
        return per_seed[0]
    drawn = np.random.default_rng([seed, 11]).integers(0, k, size=(n, k))  # (replicates, seeds)
    return per_seed[drawn, np.arange(n)[:, None]].mean(axis=1)
