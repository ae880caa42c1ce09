"""Tests for helpers.evaluation.stats: the batched metric kernels and the paired bootstrap."""
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import brier_score_loss, roc_auc_score

from helpers.evaluation import metrics
from helpers.evaluation.contrast import contrast_rows, contrast_set, pair_metrics
from helpers.evaluation.stats import (
    _metric_of_resamples, batched_auc, batched_brier, batched_delta, batched_ece, paired_bootstrap,
    resample_indices,
)


@pytest.fixture
def tied_rows():
    """20 rows of 300 confidences on a 0.1 grid: many ties and values on bin edges."""
    rng = np.random.default_rng(0)
    conf = rng.integers(0, 11, size=(20, 300)) / 10
    correct = (rng.uniform(size=conf.shape) < conf).astype(float)
    return conf, correct


def frame(conf, correct, **extra):
    return pd.DataFrame({"question_id": np.arange(len(conf)), "confidence": conf, "correct": correct, **extra})


def calibrated_pair(n_questions, seed):
    """p ~ U(0, 1), correct ~ Bernoulli(p); method a says p (calibrated), method b says p**2."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(size=n_questions)
    correct = (rng.uniform(size=n_questions) < p).astype(float)
    return frame(p, correct), frame(p**2, correct)


# --------------------------------------------------------------------------- kernels


def test_batched_auc_matches_sklearn_with_ties(tied_rows):
    conf, correct = tied_rows
    expected = [roc_auc_score(y, c) for c, y in zip(conf, correct)]
    np.testing.assert_allclose(batched_auc(conf, correct), expected, rtol=0, atol=1e-12)


def test_batched_auc_is_nan_for_one_class():
    assert np.isnan(batched_auc(np.array([[0.2, 0.4]]), np.array([[1.0, 1.0]])))[0]


def test_batched_brier_matches_sklearn(tied_rows):
    conf, correct = tied_rows
    expected = [brier_score_loss(y, c) for c, y in zip(conf, correct)]
    np.testing.assert_allclose(batched_brier(conf, correct), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("n_bins", [1, 5, 10, 15])
def test_batched_ece_matches_metrics(tied_rows, n_bins):
    conf, correct = tied_rows
    expected = [metrics.expected_calibration_error(c, y, n_bins=n_bins) for c, y in zip(conf, correct)]
    np.testing.assert_allclose(batched_ece(conf, correct, n_bins), expected, rtol=0, atol=1e-12)


def test_batched_delta_pairs_consecutive_columns():
    conf = np.array([[0.7, 0.3, 0.4, 0.6]])
    correct = np.array([[1.0, 0.0, 1.0, 0.0]])
    assert batched_delta(conf, correct)[0] == pytest.approx(((0.7 - 0.3) + (0.4 - 0.6)) / 2)


@pytest.mark.parametrize("metric, kernel", [("auc", batched_auc), ("brier", batched_brier), ("ece", batched_ece)])
def test_bootstrap_path_matches_kernels(tied_rows, metric, kernel):
    """The bootstrap precomputes AUC levels and ECE bins once and gathers them; same numbers."""
    conf, correct = tied_rows[0][:2].T, tied_rows[1][:2].T  # 300 questions, k = 2 rows each
    idx = np.random.default_rng(1).integers(0, 300, size=(7, 300))
    expected = kernel(conf[idx].reshape(7, -1), correct[idx].reshape(7, -1))
    np.testing.assert_allclose(_metric_of_resamples(metric, conf, correct, idx, 15, False), expected, atol=1e-12)


def test_kernels_reject_mismatched_shapes():
    with pytest.raises(ValueError, match="same shape"):
        batched_brier(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="2-D"):
        batched_auc(np.zeros(3), np.zeros(3))


# --------------------------------------------------------------------------- resampling


def test_stratified_resampling_keeps_stratum_sizes():
    strata = np.array(["improvement"] * 7 + ["regression"] * 3 + ["improvement"] * 5)
    idx = resample_indices(strata, n=200, seed=1)
    assert idx.shape == (200, 15)
    drawn = strata[idx]
    assert ((drawn == "improvement").sum(axis=1) == 12).all()
    assert ((drawn == "regression").sum(axis=1) == 3).all()
    # Every regression is drawn somewhere: the draws cover the stratum, not just one member.
    assert set(idx[drawn == "regression"]) == set(np.flatnonzero(strata == "regression"))


def test_unstratified_resampling_needs_a_size():
    assert resample_indices(None, n=3, seed=0, size=10).shape == (3, 10)
    with pytest.raises(ValueError, match="size"):
        resample_indices(None, n=3)


# --------------------------------------------------------------------------- paired_bootstrap


def test_bootstrap_values_match_metrics_and_are_reproducible():
    a, b = calibrated_pair(500, seed=0)
    first = paired_bootstrap("auc", a, b, strata="correct", n=300, seed=7)
    assert first["value_a"] == pytest.approx(metrics.auroc(a["confidence"], a["correct"]))
    assert first["difference"] == pytest.approx(first["value_a"] - first["value_b"])
    # p and p**2 rank the questions identically: the AUC difference is exactly 0, in every resample.
    assert first["difference"] == 0 and first["lower"] == 0 and first["contains_zero"]
    brier = paired_bootstrap("brier", a, b, strata="correct", n=300, seed=7)
    assert brier == paired_bootstrap("brier", a, b, strata="correct", n=300, seed=7)
    assert brier != paired_bootstrap("brier", a, b, strata="correct", n=300, seed=8)


def test_bootstrap_interval_is_one_sided():
    a, b = calibrated_pair(2000, seed=1)
    worse = paired_bootstrap("brier", a, b, n=300)  # a is better: lower Brier, negative difference
    assert worse["difference"] < 0 and worse["lower"] == -np.inf and worse["upper"] < 0
    assert not worse["contains_zero"]
    better = paired_bootstrap("brier", b, a, n=300)
    assert better["upper"] == np.inf and better["lower"] > 0
    same = paired_bootstrap("ece", a, a, n=50)
    assert same["difference"] == 0 and same["contains_zero"]


def test_bootstrap_averages_ece_over_checkpoints():
    rng = np.random.default_rng(2)
    n = 400
    p = rng.uniform(size=(2, n))
    correct = (rng.uniform(size=p.shape) < p ** 1.5).astype(float)
    long = pd.DataFrame({
        "checkpoint": np.repeat(["step-1", "step-2"], n), "question_id": np.tile(np.arange(n), 2),
        "confidence": p.ravel(), "correct": correct.ravel(),
    })
    out = paired_bootstrap("ece", long, long.assign(confidence=0.5), n=20, average_over="checkpoint", strata="correct")
    per_checkpoint = [metrics.expected_calibration_error(p[t], correct[t]) for t in range(2)]
    assert out["value_a"] == pytest.approx(np.mean(per_checkpoint))


def test_bootstrap_delta_on_contrast_rows():
    rng = np.random.default_rng(3)
    n = 600
    conf = rng.uniform(size=(2, n))
    correct = rng.uniform(size=conf.shape) < conf
    df = pd.DataFrame({
        "checkpoint": np.repeat(["a", "b"], n), "question_id": np.tile(np.arange(n), 2),
        "confidence": conf.ravel(), "correct": correct.ravel(),
    })
    rows = contrast_rows(df, "a", "b")
    flat = rows.assign(confidence=0.5)
    out = paired_bootstrap("delta", rows, flat, strata="kind", n=200)
    assert out["value_a"] == pytest.approx(pair_metrics(contrast_set(df, "a", "b"))["delta"])
    assert out["value_b"] == 0 and out["lower"] > 0
    with pytest.raises(ValueError, match="two rows per question"):
        paired_bootstrap("delta", df, df, n=10)


def test_bootstrap_smooth_ece_runs():
    a, b = calibrated_pair(300, seed=4)
    out = paired_bootstrap("smooth_ece", a, b, n=5)
    assert out["n_resamples"] == 5
    assert out["value_a"] == pytest.approx(metrics.smooth_ece(a["confidence"], a["correct"]))


def test_one_sided_interval_covers_the_true_brier_difference():
    """Coverage on data with a known population difference.

    With p ~ U(0, 1) and correct ~ Bernoulli(p): E[(p - c)^2 | p] = p - p^2, so method a's
    Brier has mean 1/2 - 1/3 = 1/6; E[(p^2 - c)^2 | p] = p^4 - 2p^3 + p, so method b's has
    mean 1/5 - 1/2 + 1/2 = 1/5. The true difference a - b is -1/30.
    """
    truth = 1 / 6 - 1 / 5
    covered = []
    for seed in range(200):
        a, b = calibrated_pair(400, seed=1000 + seed)
        out = paired_bootstrap("brier", a, b, n=200, seed=seed)
        covered.append(out["lower"] <= truth <= out["upper"])
    assert 0.88 <= np.mean(covered) <= 0.99


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a, b: ("auroc", a, b, {}), "unknown metric"),
        (lambda a, b: ("auc", a, b, {"n": 0}), "positive integer"),
        (lambda a, b: ("auc", a.drop(columns="correct"), b, {}), "missing columns"),
        (lambda a, b: ("auc", a, b, {"strata": "kind"}), "missing columns"),
        (lambda a, b: ("auc", a.assign(confidence=np.where(a.index == 3, np.nan, a["confidence"])), b, {}), "NaN"),
        (lambda a, b: ("auc", a.iloc[5:], b, {}), "5 only in df_b"),
        (lambda a, b: ("auc", a, b.assign(question_id=b["question_id"] + 1000), {}), "same questions"),
        (lambda a, b: ("auc", pd.concat([a, a]), pd.concat([b, b, b]), {}), "rows per question"),
        (lambda a, b: ("auc", pd.concat([a, a.iloc[:3]]), b, {}), "same number of rows"),
    ],
)
def test_bootstrap_rejects_bad_input(change, message):
    a, b = calibrated_pair(50, seed=5)
    metric, df_a, df_b, kwargs = change(a, b)
    with pytest.raises(ValueError, match=message):
        paired_bootstrap(metric, df_a, df_b, **kwargs)


def _method_frame(seed, checkpoints=("a", "b", "c"), n=300, signal=2.0):
    rng = np.random.default_rng(seed)
    rows = []
    for k, name in enumerate(checkpoints):
        skill = rng.normal(size=n)
        correct = rng.random(n) < 1 / (1 + np.exp(-(skill + 0.3 * k)))
        conf = 1 / (1 + np.exp(-(signal * skill + rng.normal(size=n))))
        rows.append(pd.DataFrame({"checkpoint": name, "question_id": np.arange(n), "correct": correct,
                                  "confidence": conf}))
    return pd.concat(rows, ignore_index=True)


def test_full_set_and_contrast_bootstrap_wrappers():
    from helpers.evaluation import stats

    a, b = _method_frame(0), _method_frame(0, signal=0.2)
    b["correct"] = a["correct"]  # same answers, a weaker confidence
    full = stats.full_set_bootstrap("auc", a, b, ["a", "b", "c"], n=200)
    assert full["difference"] > 0 and not full["contains_zero"]
    ece = stats.full_set_bootstrap("ece", a, b, ["a", "b", "c"], n=100)
    assert np.isfinite(ece["difference"])
    con = stats.contrast_bootstrap("auc", a, b, "a", "c", n=200)
    assert con["ckpt_i"] == "a" and con["n_questions"] > 0
    same = stats.contrast_bootstrap("brier", a, a, "a", "c", n=50)
    assert same["difference"] == 0 and same["contains_zero"]
    with pytest.raises(ValueError, match="lacks checkpoints"):
        stats.full_set_bootstrap("auc", a, b, ["a", "zz"])
    with pytest.raises(ValueError, match="share no questions"):
        stats.full_set_bootstrap("auc", a, b.assign(question_id=b["question_id"] + 10_000), ["a"])
