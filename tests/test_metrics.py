"""Tests for helpers.evaluation.metrics: hand-worked values, independent references, properties, bad input."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import relplot
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss, roc_auc_score

from helpers.evaluation.metrics import (
    auroc, bin_indices, bootstrap_ci, brier_score, expected_calibration_error, full_set_metrics,
    overconfidence, reliability_table, smooth_ece, summary_metrics,
)

ece = expected_calibration_error


def reference_ece(conf, correct, n_bins):
    """Textbook loop over equal-width bins [k/n, (k+1)/n), the last closed at 1."""
    total = 0.0
    for k in range(n_bins):
        lo, hi = k / n_bins, (k + 1) / n_bins
        members = [
            (c, y) for c, y in zip(conf, correct)
            if lo <= c < hi or (k == n_bins - 1 and c == 1.0)
        ]
        if not members:
            continue
        mean_conf = sum(c for c, _ in members) / len(members)
        acc = sum(y for _, y in members) / len(members)
        total += len(members) / len(conf) * abs(acc - mean_conf)
    return total


def near_an_edge(conf, n_bins, tol=1e-7):
    """True if a value is within tol/n_bins of an edge k/n_bins without being that float exactly.

    Only there do the tolerant binning and the exact comparisons of `reference_ece` differ.
    """
    conf = np.asarray(conf)
    k = np.round(conf * n_bins)
    return bool(np.any((np.abs(conf * n_bins - k) < tol) & (conf != k / n_bins)))


def paired_with_labels(values):
    """Strategy for (confidence list, correct list) of equal length 1..60."""
    return st.integers(1, 60).flatmap(
        lambda n: st.tuples(st.lists(values, min_size=n, max_size=n), st.lists(st.booleans(), min_size=n, max_size=n))
    )


probabilities = st.floats(0.0, 1.0, allow_nan=False)
samples = paired_with_labels(probabilities)
# For comparing with the exact-comparison loop: values exactly on an edge, or (k + 0.5) / 1e6,
# which is never within 1e-7 of an edge j/n for n in 1, 2, 5, 10, 15. Arbitrary floats hit
# the tolerance zone just below an edge too often to filter them out.
edge_safe_samples = paired_with_labels(
    st.one_of(
        st.integers(0, 10**6 - 1).map(lambda k: (k + 0.5) / 10**6),
        st.sampled_from([k / n for n in (2, 5, 10, 15) for k in range(n + 1)]),
    )
)


# --------------------------------------------------------------------------- hand-worked ECE


def test_ece_two_bins_by_hand():
    # Bin [0, .5): 0.25, 0.25, both wrong -> weight 2/5, |0 - 0.25| = 0.25 -> 0.10
    # Bin [.5, 1]: 0.55, 0.75, 0.75, all right -> weight 3/5, |1 - 0.6833| = 0.3167 -> 0.19
    assert ece([0.25, 0.25, 0.55, 0.75, 0.75], [0, 0, 1, 1, 1], n_bins=2) == pytest.approx(0.29)


def test_ece_one_bin_is_mean_gap():
    # One bin: mean confidence 0.9, accuracy 3/4 -> |0.75 - 0.9| = 0.15
    assert ece([0.9, 0.9, 0.9, 0.9], [1, 1, 1, 0], n_bins=1) == pytest.approx(0.15)


def test_ece_omits_empty_bins():
    # 10 bins, only bins 0 and 9 used. Bin 0: 1/3 * |0 - 0.05| = 0.016667.
    # Bin 9: 2/3 * |0.5 - 0.95| = 0.3. Total 0.316667; the 8 empty bins add nothing.
    assert ece([0.05, 0.95, 0.95], [0, 1, 0], n_bins=10) == pytest.approx(1 / 60 + 0.3)


def test_ece_edge_value_in_its_own_bin():
    # 0.3 must start bin 3 (10 bins), apart from 0.25 in bin 2:
    # 1/2 * |1 - 0.3| + 1/2 * |0 - 0.25| = 0.35 + 0.125 = 0.475.
    # Had 0.3 slipped into bin 2: |0.5 - 0.275| = 0.225.
    assert ece([0.3, 0.25], [1, 0], n_bins=10) == pytest.approx(0.475)


def test_ece_perfect_and_worst():
    assert ece([1.0, 0.0], [1, 0]) == 0.0
    assert ece([1.0, 0.0], [0, 1]) == 1.0


def test_correct_accepts_bool_int_float():
    conf = [0.2, 0.6, 0.9]
    values = {ece(conf, c) for c in ([False, True, True], [0, 1, 1], [0.0, 1.0, 1.0])}
    assert len(values) == 1


@settings(max_examples=60, deadline=None)
@given(edge_safe_samples, st.sampled_from([1, 2, 5, 10, 15]))
def test_ece_matches_reference_loop(sample, n_bins):
    conf, correct = sample
    assume(not near_an_edge(conf, n_bins))  # a safeguard: the edge tests below pin these down
    assert ece(conf, correct, n_bins) == pytest.approx(reference_ece(conf, correct, n_bins), abs=1e-12)


# --------------------------------------------------------------------------- reliability table


def test_table_matches_sklearn_calibration_curve_uniform():
    # sklearn's bins are right-closed, ours left-closed: the data avoid edges so both agree.
    rng = np.random.default_rng(1)
    conf = rng.uniform(size=2000)
    assume_off_edges = np.abs(conf * 10 - np.round(conf * 10)) > 1e-6
    conf = conf[assume_off_edges]
    correct = rng.uniform(size=conf.size) < conf**1.5
    prob_true, prob_pred = calibration_curve(correct, conf, n_bins=10, strategy="uniform")
    table = reliability_table(conf, correct, n_bins=10)
    np.testing.assert_allclose(table["accuracy"], prob_true)
    np.testing.assert_allclose(table["confidence"], prob_pred)


def test_table_matches_sklearn_calibration_curve_quantile():
    # 1000 distinct values, 10 bins: quantile positions 99.9 k fall between data points,
    # so no value sits on an edge and the left/right-closed conventions agree.
    rng = np.random.default_rng(2)
    conf = rng.beta(4, 2, size=1000)
    correct = rng.uniform(size=conf.size) < conf
    prob_true, prob_pred = calibration_curve(correct, conf, n_bins=10, strategy="quantile")
    table = reliability_table(conf, correct, n_bins=10, strategy="quantile")
    np.testing.assert_allclose(table["accuracy"], prob_true)
    np.testing.assert_allclose(table["confidence"], prob_pred)
    assert ece(conf, correct, 10, "quantile") == pytest.approx(
        np.sum(table["count"] / conf.size * np.abs(table["gap"]))
    )


def test_table_rows_and_columns():
    table = reliability_table([0.05, 0.95, 0.95], [0, 1, 0], n_bins=10)
    assert list(table.columns) == ["lower", "upper", "count", "confidence", "accuracy", "gap"]
    assert table["count"].tolist() == [1, 2]  # empty bins are not rows
    np.testing.assert_allclose(table["lower"], [0.0, 0.9])
    np.testing.assert_allclose(table["upper"], [0.1, 1.0])
    np.testing.assert_allclose(table["gap"], [0.05, 0.45])


@settings(max_examples=40, deadline=None)
@given(samples, st.sampled_from([1, 3, 5, 15]), st.sampled_from(["uniform", "quantile"]))
def test_table_is_consistent_with_ece(sample, n_bins, strategy):
    conf, correct = sample
    table = reliability_table(conf, correct, n_bins, strategy)
    assert table["count"].sum() == len(conf)
    weighted = float(np.sum(table["count"] / len(conf) * np.abs(table["gap"])))
    assert ece(conf, correct, n_bins, strategy) == pytest.approx(weighted, abs=1e-12)


# --------------------------------------------------------------------------- other metrics


def test_smooth_ece_matches_relplot():
    rng = np.random.default_rng(3)
    conf = rng.uniform(size=3000)
    correct = rng.uniform(size=conf.size) < conf**2
    assert smooth_ece(conf, correct) == pytest.approx(relplot.smECE(conf, correct.astype(float)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auroc_and_brier_match_sklearn(seed):
    rng = np.random.default_rng(seed)
    conf = np.round(rng.uniform(size=500), 2)  # rounding creates ties, which AUROC must handle
    correct = rng.uniform(size=500) < conf
    assert auroc(conf, correct) == pytest.approx(roc_auc_score(correct, conf))
    assert brier_score(conf, correct) == pytest.approx(brier_score_loss(correct, conf))


def test_overconfidence_by_hand():
    # Mean confidence 0.8, accuracy 0.5 -> +0.3 (overconfident)
    assert overconfidence([0.9, 0.7, 0.8, 0.8], [1, 0, 1, 0]) == pytest.approx(0.3)


def test_summary_metrics():
    rng = np.random.default_rng(4)
    conf = rng.uniform(size=400)
    correct = rng.uniform(size=400) < conf
    s = summary_metrics(conf, correct)
    assert list(s.index) == ["n", "accuracy", "mean_confidence", "ece", "smooth_ece", "brier", "auroc",
                             "overconfidence"]
    assert s["n"] == 400
    assert s["ece"] == pytest.approx(ece(conf, correct))
    assert s["auroc"] == pytest.approx(auroc(conf, correct))
    assert np.isnan(summary_metrics([0.3, 0.9], [1, 1])["auroc"])  # one class: NaN, not an error


def test_bootstrap_ci():
    rng = np.random.default_rng(5)
    conf = rng.uniform(size=300)
    correct = rng.uniform(size=300) < conf
    point, lo, hi = bootstrap_ci("brier", conf, correct, n=200, seed=1)
    assert point == pytest.approx(brier_score(conf, correct))
    assert lo < point < hi
    assert bootstrap_ci("brier", conf, correct, n=200, seed=1) == (point, lo, hi)  # seeded
    by_callable = bootstrap_ci(brier_score, conf, correct, n=200, seed=1)
    assert by_callable == (point, lo, hi)
    narrow = bootstrap_ci("brier", conf, correct, n=200, seed=1, level=0.5)
    assert lo < narrow[1] <= narrow[2] < hi


def test_bootstrap_skips_one_class_resamples():
    # With one wrong answer in 8, some resamples have no wrong answer: AUROC is undefined there.
    point, lo, hi = bootstrap_ci("auroc", [0.9] * 7 + [0.2], [1] * 7 + [0], n=100)
    assert point == lo == hi == 1.0


# --------------------------------------------------------------------------- properties


@settings(max_examples=60, deadline=None)
@given(samples, st.sampled_from([1, 5, 15, 40]), st.sampled_from(["uniform", "quantile"]))
def test_ece_in_unit_interval(sample, n_bins, strategy):
    assert 0.0 <= ece(*sample, n_bins=n_bins, strategy=strategy) <= 1.0


@settings(max_examples=40, deadline=None)
@given(samples, st.integers(0, 2**32 - 1), st.sampled_from(["uniform", "quantile"]))
def test_ece_permutation_invariant(sample, seed, strategy):
    conf, correct = map(np.asarray, sample)
    order = np.random.default_rng(seed).permutation(conf.size)
    assert ece(conf[order], correct[order], 10, strategy) == pytest.approx(ece(conf, correct, 10, strategy), abs=1e-12)


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.5, 5.0), st.floats(0.5, 5.0))
def test_ece_small_when_labels_are_bernoulli_confidence(seed, a, b):
    rng = np.random.default_rng(seed)
    conf = rng.beta(a, b, size=200_000)
    correct = rng.uniform(size=conf.size) < conf
    assert ece(conf, correct) < 0.01
    assert ece(conf, correct, strategy="quantile") < 0.01


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(20, 3000), st.sampled_from([2, 5, 10, 15]))
def test_quantile_bins_have_equal_counts(seed, n, n_bins):
    conf = np.random.default_rng(seed).beta(2, 5, size=n)  # continuous: no ties
    counts = np.bincount(bin_indices(conf, n_bins, "quantile"))
    assert counts.size == n_bins
    assert counts.max() - counts.min() <= 2


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 10), min_size=1, max_size=200), st.sampled_from([2, 5, 10, 15]))
def test_quantile_never_splits_ties(votes, n_bins):
    conf = np.asarray(votes) / 10  # vote shares: heavily tied
    idx = bin_indices(conf, n_bins, "quantile")
    for value in np.unique(conf):
        assert np.unique(idx[conf == value]).size == 1
    assert np.all(np.diff(idx[np.argsort(conf, kind="stable")]) >= 0)  # monotone in confidence
    assert idx.max() < n_bins


def test_quantile_gives_heavy_ties_their_own_bin():
    # Half the answers at 0.5, half at 0.8: quantile edges coincide, yet the two values
    # must not be merged into one bin [0.5, 0.8].
    table = reliability_table(np.repeat([0.5, 0.8], 50), np.tile([0, 1], 50), n_bins=5, strategy="quantile")
    assert table["count"].tolist() == [50, 50]
    np.testing.assert_allclose(table["confidence"], [0.5, 0.8])
    assert reliability_table([0.4] * 7, [1] * 7, n_bins=3, strategy="quantile")["count"].tolist() == [7]


# --------------------------------------------------------------------------- edge values


def test_edges_named_in_design():
    assert bin_indices([0.3, 0.7], 10).tolist() == [3, 7]
    assert bin_indices([0.0, 1.0], 10).tolist() == [0, 9]


@pytest.mark.parametrize("n_bins", [5, 10, 15])
def test_vote_shares_land_by_exact_arithmetic(n_bins):
    # m/10 lies exactly in bin floor(m * n_bins / 10) (integer arithmetic), capped at the last bin.
    expected = [min(m * n_bins // 10, n_bins - 1) for m in range(11)]
    assert bin_indices([m / 10 for m in range(11)], n_bins).tolist() == expected
    assert bin_indices(np.linspace(0, 1, 11), n_bins).tolist() == expected
    assert bin_indices([m * 0.1 for m in range(11)], n_bins).tolist() == expected  # 0.1 * 3 = 0.30000000000000004


@pytest.mark.parametrize("n_bins", [5, 10, 15])
def test_bin_edges_start_their_bin(n_bins):
    edges = [k / n_bins for k in range(n_bins + 1)]
    assert bin_indices(edges, n_bins).tolist() == list(range(n_bins)) + [n_bins - 1]
    assert bin_indices([0.0], n_bins).tolist() == [0]
    assert bin_indices([1.0], n_bins).tolist() == [n_bins - 1]


def test_values_just_inside_a_bin_stay_there():
    assert bin_indices([0.3 - 1e-6, 0.3 + 1e-6, 1 - 1e-12], 10).tolist() == [2, 3, 9]


# --------------------------------------------------------------------------- bad input


def _full_frame():
    return pd.DataFrame(
        {"checkpoint": ["a", "a", "b", "b"], "question_id": [0, 1, 0, 1], "correct": [1, 0, 1, 1],
         "confidence": [0.9, 0.4, 0.7, 0.8]}
    )


BAD_INPUTS = {
    "nan confidence": (lambda: ece([0.5, np.nan], [1, 0]), "NaN"),
    "inf confidence": (lambda: ece([0.5, np.inf], [1, 0]), "NaN or inf"),
    "confidence above 1": (lambda: ece([0.5, 1.2], [1, 0]), r"\[0, 1\]"),
    "confidence below 0": (lambda: brier_score([-0.1, 0.5], [1, 0]), r"\[0, 1\]"),
    "percentages": (lambda: ece([50, 80], [1, 0]), "not logits or percentages"),
    "correct not binary": (lambda: ece([0.5, 0.6], [1, 2]), "only 0/1"),
    "correct nan": (lambda: auroc([0.5, 0.6], [1, np.nan]), r"right \(1\) or wrong \(0\)"),
    "correct strings": (lambda: ece([0.5, 0.6], ["yes", "no"]), "0/1 or True/False"),
    "length mismatch": (lambda: ece([0.5, 0.6, 0.7], [1, 0]), "3 values but correct has 2"),
    "empty": (lambda: ece([], []), "empty"),
    "2-D confidence": (lambda: smooth_ece([[0.5, 0.6]], [[1, 0]]), "1-D"),
    "zero bins": (lambda: ece([0.5], [1], n_bins=0), "at least 1"),
    "fractional bins": (lambda: ece([0.5], [1], n_bins=2.5), "whole number"),
    "string bins": (lambda: reliability_table([0.5], [1], n_bins="10"), "whole number"),
    "bool bins": (lambda: bin_indices([0.5], True), "whole number"),
    "unknown strategy": (lambda: ece([0.5], [1], strategy="equal-width"), "strategy must be one of"),
    "auroc all right": (lambda: auroc([0.5, 0.9], [1, 1]), "needs both right and wrong.*all 2 answers are right"),
    "auroc all wrong": (lambda: auroc([0.5, 0.9], [0, 0]), "all 2 answers are wrong"),
    "bootstrap n": (lambda: bootstrap_ci("ece", [0.5], [1], n=0), r"n \(number of bootstrap resamples\)"),
    "bootstrap level": (lambda: bootstrap_ci("ece", [0.5], [1], level=95), "level must lie strictly between 0 and 1"),
    "bootstrap metric": (lambda: bootstrap_ci("f1", [0.5], [1]), "metric must be a callable or one of"),
    "unknown checkpoint": (lambda: full_set_metrics(_full_frame(), ["a", "z"]),
                           r"unknown checkpoints \['z'\]; available: \['a', 'b'\]"),
    "missing column": (lambda: full_set_metrics(_full_frame().drop(columns="confidence")),
                       r"lacks columns \['confidence'\]"),
    "duplicate rows": (lambda: full_set_metrics(pd.concat([_full_frame()] * 2)), "one row per question per checkpoint"),
    "no checkpoints": (lambda: full_set_metrics(_full_frame(), []), "checkpoints is empty"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS), ids=list(BAD_INPUTS))
def test_bad_input_raises_helpful_value_error(case):
    call, message = BAD_INPUTS[case]
    with pytest.raises(ValueError, match=message):
        call()


# --------------------------------------------------------------------------- full-set metrics


def _opposite_checkpoints():
    # Checkpoint "over": mean confidence 0.7, accuracy 0.4 (gap +0.3).
    # Checkpoint "under": mean confidence 0.3, accuracy 0.6 (gap -0.3).
    # Pooled with one bin the gaps cancel (mean confidence 0.5, accuracy 0.5 -> ECE 0);
    # averaged per checkpoint, ECE = (0.3 + 0.3) / 2 = 0.3.
    return pd.DataFrame(
        {
            "checkpoint": ["over"] * 5 + ["under"] * 5,
            "question_id": list(range(5)) * 2,
            "confidence": [0.9, 0.9, 0.7, 0.7, 0.3] + [0.1, 0.3, 0.5, 0.3, 0.3],
            "correct": [1, 0, 1, 0, 0] + [1, 1, 0, 1, 0],
        }
    )


def test_full_set_ece_averaged_not_pooled():
    df = _opposite_checkpoints()
    result = full_set_metrics(df, n_bins=1)
    assert ece(df["confidence"], df["correct"], n_bins=1) == pytest.approx(0.0)  # pooling would hide it
    assert result["ece"] == pytest.approx(0.3)
    per_ckpt_smooth = [smooth_ece(g["confidence"], g["correct"]) for _, g in df.groupby("checkpoint")]
    assert result["smooth_ece"] == pytest.approx(np.mean(per_ckpt_smooth))
    assert result["smooth_ece"] > smooth_ece(df["confidence"], df["correct"])


def test_full_set_auc_and_brier_pooled():
    df = _opposite_checkpoints()
    result = full_set_metrics(df)
    pooled_auc = roc_auc_score(df["correct"], df["confidence"])
    per_ckpt_auc = np.mean([roc_auc_score(g["correct"], g["confidence"]) for _, g in df.groupby("checkpoint")])
    assert result["auc"] == pytest.approx(pooled_auc)
    assert result["auc"] != pytest.approx(per_ckpt_auc)  # the frame tells pooling and averaging apart
    assert result["brier"] == pytest.approx(brier_score_loss(df["correct"], df["confidence"]))
    assert result["accuracy"] == pytest.approx(0.5)
    assert (result["n_checkpoints"], result["n"]) == (2, 10)
    per_ckpt_ece = np.mean([ece(g["confidence"], g["correct"]) for _, g in df.groupby("checkpoint")])
    assert result["ece"] == pytest.approx(per_ckpt_ece)


def test_full_set_selects_checkpoints():
    df = _opposite_checkpoints()
    only_over = full_set_metrics(df, checkpoints=["over"], n_bins=1)
    assert only_over["ece"] == pytest.approx(0.3)
    assert (only_over["n_checkpoints"], only_over["n"]) == (1, 5)
    assert full_set_metrics(df, checkpoints="over", n_bins=1).equals(only_over)


from helpers.evaluation import metrics  # noqa: E402  # noqa: E402


def test_risk_coverage_without_ties_matches_a_loop():
    rng = np.random.default_rng(0)
    conf, corr = rng.random(300), rng.random(300) < 0.7
    curve = metrics.risk_coverage(conf, corr)
    order = np.argsort(-conf)
    for k in (1, 10, 150, 300):
        assert curve["risk"].iloc[k - 1] == pytest.approx(1 - corr[order][:k].mean())
    assert curve["coverage"].iloc[-1] == 1.0


def test_risk_coverage_averages_over_tie_orders():
    rng = np.random.default_rng(1)
    conf = rng.integers(0, 4, 60) / 3  # heavy ties, like vote shares
    corr = rng.random(60) < conf * 0.8 + 0.1
    exact = metrics.risk_coverage(conf, corr)["risk"].to_numpy()
    sims = []
    for _ in range(4000):  # break ties at random, many times
        order = np.lexsort((rng.random(60), -conf))
        sims.append(np.cumsum(1 - corr[order]) / np.arange(1, 61))
    np.testing.assert_allclose(np.mean(sims, axis=0), exact, atol=0.02)
    constant = metrics.risk_coverage(np.full(50, 0.5), corr[:50])["risk"]
    assert np.allclose(constant, 1 - corr[:50].mean())  # one tie block: the risk never changes
    assert metrics.aurc(conf, corr) == pytest.approx(exact.mean())
