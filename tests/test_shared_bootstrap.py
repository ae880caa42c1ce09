"""The shared-question bootstrap over contrast pairs: weighted metrics against scikit-learn, the original
values against `contrast.pair_metrics`, and the dependence between pairs that share questions."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import brier_score_loss, roc_auc_score

from helpers.evaluation import contrast, metrics, stats
from helpers.evaluation.shared_bootstrap import (
    CONTRAST_METRICS, contrast_bootstrap_over_pairs, pairs_values, question_weights, stratified,
    weighted_auc, weighted_brier, weighted_ece,
)


def pair_values(metric: str, rows: pd.DataFrame, ckpt_j: str, w: pd.DataFrame, n_bins: int = 15) -> np.ndarray:
    """The metric of one pair's contrast rows under every replicate's question weights (NaN for no rows: a
    class-balanced metric of a pair without regressions, or without improvements, is undefined). One pair at a
    time, written out: the independent reference that `shared_bootstrap.pairs_values` (every pair at once, the
    one the bootstraps use) is checked against."""
    if rows.empty:
        return np.full(len(w), np.nan)
    first = rows.drop_duplicates("question_id")  # one row per question: its id and its kind in this pair
    per_question = stratified(w[first["question_id"]].to_numpy(), first["kind"].to_numpy())
    index = {q: k for k, q in enumerate(first["question_id"])}
    cols = rows["question_id"].map(index).to_numpy()
    conf, correct = rows["confidence"].to_numpy(float), rows["correct"].to_numpy(float)
    if metric.endswith("_cb"):  # class-balanced: the mean of the metric on improvements and on regressions
        kinds = rows["kind"].to_numpy()
        return np.mean([pair_values(metric[:-3], rows[kinds == k], ckpt_j, w, n_bins)
                        for k in ("improvement", "regression")],
                       axis=0)
    if metric == "auc":
        return weighted_auc(conf, correct, per_question[:, cols])
    if metric == "brier":
        return weighted_brier(conf, correct, per_question[:, cols])
    if metric == "ece":
        later = (rows["checkpoint"] == ckpt_j).to_numpy()
        return weighted_ece(conf[later], correct[later], per_question[:, cols[later]], n_bins)
    # delta: per question, the correct member's q minus the wrong member's
    sign = np.where(correct == 1, 1.0, -1.0)
    delta = np.zeros(len(index))
    np.add.at(delta, cols, sign * conf)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (per_question * delta).sum(axis=1) / per_question.sum(axis=1)



def results(names, ids, correct, conf):
    return pd.concat([pd.DataFrame({"checkpoint": name, "question_id": ids, "correct": correct[k],
                                    "confidence": conf[k]})
                      for k, name in enumerate(names)], ignore_index=True)


def world(n=800, n_ckpt=4, seed=0, signal=1.0):
    """Checkpoints whose correctness drifts, and a method whose confidence follows it with noise."""
    rng = np.random.default_rng(seed)
    ids = np.arange(n)
    correct = rng.uniform(size=(n_ckpt, n)) < np.linspace(0.4, 0.8, n_ckpt)[:, None]
    good = np.clip(0.5 + signal * 0.3 * (correct - 0.5) + rng.normal(0, 0.15, correct.shape), 0.01, 0.99)
    noise = np.clip(rng.uniform(0.2, 0.8, correct.shape), 0.01, 0.99)
    names = [f"c{k}" for k in range(n_ckpt)]
    return names, results(names, ids, correct, np.round(good, 2)), results(names, ids, correct, np.round(noise, 2))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000))
def test_weighted_metrics_match_sklearn_sample_weight(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(5, 60))
    conf = np.round(rng.uniform(size=m), 1)  # ties
    correct = (rng.uniform(size=m) < conf).astype(float)
    correct[:2] = [0, 1]
    weights = rng.poisson(1.0, size=(3, m)).astype(float)
    for row, w in zip(weighted_auc(conf, correct, weights), weights):
        if w[correct == 1].sum() and w[correct == 0].sum():
            assert row == pytest.approx(roc_auc_score(correct, conf, sample_weight=w))
    for row, w in zip(weighted_brier(conf, correct, weights), weights):
        if w.sum():
            assert row == pytest.approx(brier_score_loss(correct, conf, sample_weight=w))


def test_weighted_ece_with_integer_weights_is_ece_of_repeated_rows():
    rng = np.random.default_rng(3)
    conf, correct = rng.uniform(size=200), (rng.uniform(size=200) < 0.6).astype(float)
    w = rng.poisson(1.0, size=200).astype(float)
    repeated = np.repeat(np.arange(200), w.astype(int))
    assert weighted_ece(conf, correct, w[None])[0] == pytest.approx(
        metrics.expected_calibration_error(conf[repeated], correct[repeated], n_bins=15))


def test_stratified_weights_keep_every_stratum_size():
    w = question_weights(np.arange(50), n=200, seed=1).to_numpy()
    strata = np.array(["improvement"] * 10 + ["regression"] * 40)
    out = stratified(w, strata)
    ok = np.isfinite(out).all(axis=1)
    assert ok.mean() > 0.99
    assert np.allclose(out[ok][:, :10].sum(axis=1), 10) and np.allclose(out[ok][:, 10:].sum(axis=1), 40)
    with pytest.raises(ValueError, match="replicates"):
        stratified(w[:, :5], strata)


def test_unit_weights_give_the_contrast_metrics_of_each_pair():
    names, good, noise = world()
    pairs = contrast.all_pairs(names)
    for key in ("auc", "brier", "ece", "delta"):
        run = contrast_bootstrap_over_pairs(key, good, noise, pairs, min_size=1, n=20)
        expected = contrast.contrast_metrics(good, pairs, min_size=1)[key]
        assert run["value_a"] == pytest.approx(expected), key
        assert run["n_pairs"] == len(pairs)


def test_a_better_method_is_told_apart_and_an_identical_one_is_not():
    names, good, noise = world()
    pairs = contrast.all_pairs(names)
    run = contrast_bootstrap_over_pairs("auc", good, noise, pairs, min_size=1, n=300)
    assert run["difference"] > 0 and run["lower"] > 0 and not run["contains_zero"]
    same = contrast_bootstrap_over_pairs("auc", good, good, pairs, min_size=1, n=300)
    assert same["difference"] == 0 and same["contains_zero"]


def test_pairs_that_share_their_questions_do_not_narrow_the_interval():
    """The same pair listed twice is no new evidence: with one resample of questions shared by the pairs,
    the interval of the average is the interval of the single pair. Resampling each pair on its own
    (the old `stats.contrast_bootstrap_over_pairs`) narrows it by about 1/sqrt(2)."""
    names, good, noise = world(n=1500, n_ckpt=2, signal=0.4)
    one = [("c0", "c1")]
    width = {}
    for label, pairs in (("one", one), ("twice", one * 2)):
        run = contrast_bootstrap_over_pairs("auc", good, noise, pairs, min_size=1, n=400, seed=5)
        width[label] = np.percentile(run["diffs"], 95) - np.percentile(run["diffs"], 5)
    assert width["twice"] == pytest.approx(width["one"], rel=1e-9)
    # independent resamples of the two copies (different seeds) average to a narrower spread
    runs = [stats.contrast_bootstrap(
        "auc", good, noise, "c0", "c1", n=400, seed=s, return_diffs=True)["diffs"] for s in (5, 6)]
    independent = np.mean(runs, axis=0)
    assert np.percentile(independent, 95) - np.percentile(independent, 5) < 0.85 * width["one"]


def test_single_pair_interval_matches_the_stratified_multinomial_bootstrap():
    names, good, noise = world(n=2000, n_ckpt=2, signal=0.5)
    shared = contrast_bootstrap_over_pairs("brier", good, noise, [("c0", "c1")], min_size=1, n=1000, seed=2)
    multinomial = stats.contrast_bootstrap("brier", good, noise, "c0", "c1", n=1000, seed=2, return_diffs=True)
    sd_shared, sd_multi = np.nanstd(shared["diffs"]), np.nanstd(multinomial["diffs"])
    assert sd_shared == pytest.approx(sd_multi, rel=0.15)
    assert shared["difference"] == pytest.approx(multinomial["difference"])


@pytest.mark.parametrize("n_questions", [12, 800])
def test_every_pair_at_once_matches_the_pair_by_pair_reference(n_questions):
    """`pairs_values` (all pairs stacked, no loop over pairs) gives `pair_values` pair by pair (the reference)
    on the same resample weights: ties, class-balanced metrics, pairs of one kind only, and small pairs whose
    stratum draws nothing in some replicates (NaN) included."""
    names, good, _ = world(n=n_questions, n_ckpt=4, seed=1)
    used = [(j, contrast.contrast_rows(good, i, j)) for i, j in contrast.all_pairs(names)]
    used.append(("c1", used[0][1][used[0][1]["kind"] == "improvement"]))  # no regressions: NaN for _cb
    ids = np.unique(np.concatenate([rows["question_id"].to_numpy() for _, rows in used]))
    w = pd.concat([pd.DataFrame(np.ones((1, ids.size)), columns=ids), question_weights(ids, 300, seed=4)],
                  ignore_index=True)
    for metric in CONTRAST_METRICS:
        reference = np.array([pair_values(metric, rows, j, w) for j, rows in used])
        fast = pairs_values(metric, used, w)
        assert np.array_equal(np.isnan(reference), np.isnan(fast)), metric
        np.testing.assert_allclose(fast, reference, rtol=0, atol=1e-12, err_msg=metric)


def test_bad_input():
    names, good, noise = world(n=100)
    with pytest.raises(ValueError, match="unknown contrast metric"):
        contrast_bootstrap_over_pairs("smooth_ece", good, noise, [("c0", "c1")], min_size=1)
    with pytest.raises(ValueError, match="no pair has at least"):
        contrast_bootstrap_over_pairs("auc", good, noise, [("c0", "c1")], min_size=10_000)
    with pytest.raises(ValueError, match="do not match"):
        weighted_auc([0.1, 0.2], [0, 1, 1], np.ones((2, 2)))
    with pytest.raises(ValueError, match="no questions"):
        question_weights([])
