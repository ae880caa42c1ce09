"""Tests for helpers.evaluation.contrast: contrast sets, the pair normalization and the contrast metrics."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.evaluation import metrics
from helpers.evaluation.contrast import (
    all_pairs, consecutive_pairs, contrast_metrics, contrast_metrics_per_pair, contrast_rows,
    contrast_set, copy_confidences, fitted_normalization, normalize_pair, pair_metrics,
)


def results(checkpoints, question_ids, correct, confidence):
    """A long results frame from per-checkpoint lists."""
    rows = []
    for ckpt, corr, conf in zip(checkpoints, correct, confidence):
        for qid, c, p in zip(question_ids, corr, conf):
            rows.append({"checkpoint": ckpt, "question_id": qid, "answer": 0, "correct": bool(c), "confidence": p})
    return pd.DataFrame(rows)


def independent_checkpoints(n_questions, n_checkpoints, seed, low=0.0):
    """Calibrated, independent checkpoints: p ~ U(low, 1), correct ~ Bernoulli(p)."""
    rng = np.random.default_rng(seed)
    names = [f"step-{1000 * (t + 1):05d}" for t in range(n_checkpoints)]
    conf = rng.uniform(low, 1.0, size=(n_checkpoints, n_questions))
    correct = rng.uniform(size=conf.shape) < conf
    return results(names, range(n_questions), correct, conf), names


@pytest.fixture
def tiny():
    # q0: both right; q1: improvement; q2: regression; q3: both wrong; q4: improvement.
    return results(
        ["step-00100", "step-00200"],
        [0, 1, 2, 3, 4],
        [[1, 0, 1, 0, 0], [1, 1, 0, 0, 1]],
        [[0.9, 0.2, 0.7, 0.1, 0.5], [0.95, 0.6, 0.3, 0.2, 0.5]],
    )


# --------------------------------------------------------------------------- normalize_pair


def test_normalize_pair_worked_values():
    assert normalize_pair(0.8, 0.8) == (0.5, 0.5)
    q_i, q_j = normalize_pair(0.9, 0.6)
    # 0.9*0.4 = 0.36 and 0.6*0.1 = 0.06, so q_i = 0.36 / 0.42.
    assert q_i == pytest.approx(0.36 / 0.42)
    assert q_j == pytest.approx(0.06 / 0.42)


def test_normalize_pair_sums_to_one_and_is_symmetric():
    rng = np.random.default_rng(0)
    p_i, p_j = rng.uniform(size=1000), rng.uniform(size=1000)
    q_i, q_j = normalize_pair(p_i, p_j)
    np.testing.assert_allclose(q_i + q_j, 1.0, atol=1e-12)
    r_i, r_j = normalize_pair(p_j, p_i)
    np.testing.assert_array_equal(r_i, q_j)
    np.testing.assert_array_equal(r_j, q_i)


def test_normalize_pair_zero_denominator_rule():
    q_i, q_j = normalize_pair(np.array([0.0, 1.0, 1.0, 0.0]), np.array([0.0, 1.0, 0.0, 0.3]))
    np.testing.assert_array_equal(q_i, [0.5, 0.5, 1.0, 0.0])
    np.testing.assert_array_equal(q_j, [0.5, 0.5, 0.0, 1.0])


def test_normalize_pair_equal_inputs_give_exactly_one_half():
    p = np.linspace(0, 1, 101)
    q_i, q_j = normalize_pair(p, p)
    assert np.all(q_i == 0.5) and np.all(q_j == 0.5)


unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(unit, unit, unit)
def test_normalize_pair_properties(p_i, p_j, p_i_higher):
    q_i, q_j = normalize_pair(p_i, p_j)
    assert 0.0 <= q_i <= 1.0 and 0.0 <= q_j <= 1.0
    assert q_i + q_j == pytest.approx(1.0, abs=1e-12)
    lo, hi = sorted([p_i, p_i_higher])
    assert normalize_pair(lo, p_j)[0] <= normalize_pair(hi, p_j)[0]


@pytest.mark.parametrize(
    "p_i, p_j",
    [([0.2, 0.3], [0.5]), ([0.2, np.nan], [0.5, 0.5]), ([1.2], [0.5]), ([], [])],
)
def test_normalize_pair_rejects_bad_input(p_i, p_j):
    with pytest.raises(ValueError):
        normalize_pair(np.array(p_i), np.array(p_j))


# --------------------------------------------------------------------------- contrast_set


def test_contrast_set_tags_improvements_and_regressions(tiny):
    contrast = contrast_set(tiny, "step-00100", "step-00200")
    assert list(contrast.columns) == ["question_id", "confidence_i", "confidence_j", "correct_i", "correct_j", "kind"]
    assert contrast["question_id"].tolist() == [1, 2, 4]
    assert contrast["kind"].tolist() == ["improvement", "regression", "improvement"]
    assert contrast["confidence_j"].tolist() == [0.6, 0.3, 0.5]
    # Swapping the order swaps the roles.
    swapped = contrast_set(tiny, "step-00200", "step-00100")
    assert swapped["kind"].tolist() == ["regression", "improvement", "regression"]


def test_contrast_set_uses_only_shared_questions(tiny):
    partial = tiny.drop(tiny.index[(tiny["checkpoint"] == "step-00200") & (tiny["question_id"] == 1)])
    assert contrast_set(partial, "step-00100", "step-00200")["question_id"].tolist() == [2, 4]


def test_contrast_set_bad_checkpoints(tiny):
    with pytest.raises(ValueError, match="step-00100"):  # the message lists what is available
        contrast_set(tiny, "step-00100", "step-99999")
    with pytest.raises(ValueError, match="two different"):
        contrast_set(tiny, "step-00100", "step-00100")


def test_contrast_set_rejects_nan_and_duplicates(tiny):
    with_nan = tiny.copy()
    with_nan.loc[0, "confidence"] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        contrast_set(with_nan, "step-00100", "step-00200")
    with pytest.raises(ValueError, match="repeated"):
        contrast_set(pd.concat([tiny, tiny.iloc[:1]]), "step-00100", "step-00200")
    with pytest.raises(ValueError, match="missing columns"):
        contrast_set(tiny.drop(columns="correct"), "step-00100", "step-00200")


def test_pair_helpers():
    names = ["a", "b", "c"]
    assert consecutive_pairs(names) == [("a", "b"), ("b", "c")]
    assert all_pairs(names) == [("a", "b"), ("a", "c"), ("b", "c")]
    with pytest.raises(ValueError):
        consecutive_pairs(["a"])
    with pytest.raises(ValueError):
        all_pairs(["a", "b", "a"])


# --------------------------------------------------------------------------- metrics


def test_delta_and_metrics_on_hand_worked_example(tiny):
    contrast = contrast_set(tiny, "step-00100", "step-00200")
    out = pair_metrics(contrast)
    # q1: (0.2, 0.6) -> q_j = 0.48/0.56 = 6/7, j right: +5/7.
    # q2: (0.7, 0.3) -> q_i = 0.49/0.58, i right: 2*0.49/0.58 - 1 = 0.40/0.58.
    # q4: (0.5, 0.5) -> 0.5 each: 0.
    delta_1, delta_2 = 5 / 7, 0.40 / 0.58
    assert out["delta"] == pytest.approx((delta_1 + delta_2 + 0.0) / 3)
    assert out["delta_cb"] == pytest.approx(((delta_1 + 0.0) / 2 + delta_2) / 2)
    # Improvements: wrong-member scores 1/7 and 0.5, right-member scores 6/7 and 0.5 -> AUC (1 + 1 + 1 + 0.5) / 4.
    assert out["auc_cb"] == pytest.approx((0.875 + 1.0) / 2)
    q_j = np.array([6 / 7, 0.09 / 0.58, 0.5])
    assert out["ece"] == pytest.approx(metrics.expected_calibration_error(q_j, [1, 0, 1]))


def test_pair_metrics_rejects_empty_contrast_set():
    same = results(["a", "b"], [0, 1], [[1, 0], [1, 0]], [[0.7, 0.2], [0.6, 0.3]])
    contrast = contrast_set(same, "a", "b")
    assert contrast.empty
    with pytest.raises(ValueError, match="empty"):
        pair_metrics(contrast)


def test_normalization_repairs_contrast_calibration():
    """Appendix A.1: calibrated, independent checkpoints look miscalibrated on their contrast set until normalized.

    The checkpoints must be accurate on average (p ~ U(0.5, 1)) for the effect to show: with
    p ~ U(0, 1), E[1 - p_i] = E[p_i] and conditioning on membership leaves p_j calibrated on average.
    """
    df, names = independent_checkpoints(20_000, 2, seed=1, low=0.5)
    contrast = contrast_set(df, *names)
    raw = metrics.expected_calibration_error(contrast["confidence_j"], contrast["correct_j"])
    normalized = pair_metrics(contrast)["ece"]
    assert raw > 0.15
    assert normalized < 0.03


def test_eighty_percent_checkpoints_are_fifty_percent_on_their_contrast_set():
    rng = np.random.default_rng(2)
    n = 20_000
    df = results(["a", "b"], range(n), rng.uniform(size=(2, n)) < 0.8, np.full((2, n), 0.8))
    contrast = contrast_set(df, "a", "b")
    assert contrast["correct_j"].mean() == pytest.approx(0.5, abs=0.03)
    out = pair_metrics(contrast)
    assert out["ece"] == pytest.approx(0.0, abs=0.03)
    assert out["auc"] == 0.5 and out["delta"] == 0.0


def test_pairs_below_min_size_are_excluded():
    df, names = independent_checkpoints(400, 3, seed=3)
    table = contrast_metrics_per_pair(df, all_pairs(names), min_size=150)
    assert (table["n"] == table["n_improvement"] + table["n_regression"]).all()
    assert table["included"].tolist() == (table["n"] >= 150).tolist()
    cutoff = int(table["n"].sort_values().iloc[1])  # keep the two largest pairs only
    summary = contrast_metrics(df, all_pairs(names), min_size=cutoff)
    kept = table[table["n"] >= cutoff]
    assert summary["n_pairs"] == len(kept) and summary["n_skipped"] == 3 - len(kept)
    assert summary["auc"] == pytest.approx(kept["auc"].mean())  # averaged, not pooled
    with pytest.raises(ValueError, match="lower min_size"):
        contrast_metrics(df, all_pairs(names), min_size=10_000, if_none="raise")
    with pytest.warns(UserWarning, match="no pair has a contrast set of at least 10000"):
        warned = contrast_metrics(df, all_pairs(names), min_size=10_000)  # the default: say so, go on
    assert warned["n_pairs"] == 0 and np.isnan(warned["auc"])
    none = contrast_metrics(df, all_pairs(names), min_size=10_000, if_none="nan")  # a world too small: NaN, no crash
    assert none["n_pairs"] == 0 and none["n_skipped"] == 3 and np.isnan(none["auc"]) and np.isnan(none["delta_cb"])
    with pytest.raises(ValueError, match="if_none"):
        contrast_metrics(df, all_pairs(names), min_size=1, if_none="skip")
    with pytest.raises(ValueError, match="empty"):
        contrast_metrics(df, [], min_size=1)


def test_copy_ablation_has_exactly_half_contrast_auc():
    df, names = independent_checkpoints(3000, 3, seed=4)
    copied = copy_confidences(df, names[0], names[1:])
    assert set(copied["checkpoint"]) == set(names[1:])
    target = df[df["checkpoint"] == names[2]].reset_index(drop=True)
    np.testing.assert_array_equal(copied[copied["checkpoint"] == names[2]]["correct"], target["correct"])
    summary = contrast_metrics(copied, [(names[1], names[2])], min_size=100)
    assert summary["auc"] == 0.5
    assert summary["delta"] == 0.0 and summary["brier"] == 0.25
    with pytest.raises(ValueError, match="not in the results"):
        copy_confidences(df, "step-nope", names[1:])


def test_fitted_normalization_recovers_the_independent_rule():
    df, names = independent_checkpoints(40_000, 2, seed=5)
    contrast = contrast_set(df, *names)
    fitted = fitted_normalization(contrast["confidence_i"], contrast["confidence_j"], contrast["correct_i"])
    # For independent checkpoints the truth is sigmoid(logit p_i - logit p_j): weights (1, -1), intercept 0.
    np.testing.assert_allclose(fitted.coef_, [1.0, -1.0], atol=0.1)
    q_i, q_j = fitted(np.array([0.3, 0.9]), np.array([0.6, 0.2]))
    np.testing.assert_allclose(q_i + q_j, 1.0)
    fixed = contrast_metrics(df, [tuple(names)], min_size=100)
    refit = contrast_metrics(df, [tuple(names)], min_size=100, normalizer="fitted")
    assert refit["auc"] == pytest.approx(fixed["auc"], abs=0.01)
    with pytest.raises(ValueError, match="one class"):
        fitted_normalization([0.2, 0.3], [0.5, 0.5], [1, 1])


def test_contrast_rows_long_layout(tiny):
    rows = contrast_rows(tiny, "step-00100", "step-00200")
    assert len(rows) == 6
    assert rows.groupby("question_id")["correct"].sum().tolist() == [1, 1, 1]
    assert rows.groupby("question_id")["confidence"].sum().to_numpy() == pytest.approx(1.0)


def test_window_changes_counts_flips_and_moves_by_hand():
    from helpers.world.checkpoints import window_changes

    # Three checkpoints, four questions; group "a" = questions 1, 2, group "b" = questions 3, 4.
    correct = {"c1": [1, 0, 1, 1], "c2": [0, 1, 1, 0], "c3": [1, 1, 0, 0]}
    rows = [{"checkpoint": c, "question_id": q, "correct": bool(v)}
            for c, values in correct.items() for q, v in zip([1, 2, 3, 4], values)]
    table = window_changes(pd.DataFrame(rows), {"w": ["c1", "c2", "c3"]}, {"a": [1, 2], "b": [3, 4]})
    a, b = table.loc[("w", "a")], table.loc[("w", "b")]
    # group a: accuracy 0.5, 0.5, 1.0; q1 regresses then improves, q2 improves
    assert a["accuracy"] == "0.50 0.50 1.00" and (a["improvements"], a["regressions"]) == (2, 1)
    assert (a["largest rise"], a["largest fall"], a["both ways"]) == (0.5, 0.0, False)
    # group b: accuracy 1.0, 0.5, 0.0; only regressions
    assert (b["improvements"], b["regressions"], b["largest fall"], b["both ways"]) == (0, 2, 0.5, False)
    # q1 alone: accuracy 1, 0, 1 moves both ways, by a full point each way
    alone = window_changes(pd.DataFrame(rows), {"w": ["c1", "c2", "c3"]}, {"q1": [1]}, at_least=0.5)
    assert bool(alone.loc[("w", "q1"), "both ways"])
    assert not window_changes(pd.DataFrame(rows), {"w": ["c1", "c2", "c3"]}, {"q1": [1]},
                              at_least=1.0).loc[("w", "q1"), "both ways"]
    # a threshold per group: q1 moves by a full point, which is more than 0.5 but not more than 1.0
    per_group = window_changes(pd.DataFrame(rows), {"w": ["c1", "c2", "c3"]}, {"q1": [1], "q2": [2]},
                               at_least={"q1": 0.5, "q2": 1.0})
    assert list(per_group["both ways"]) == [True, False]
    with pytest.raises(ValueError, match="no threshold"):
        window_changes(pd.DataFrame(rows), {"w": ["c1", "c2", "c3"]}, {"q1": [1]}, at_least={"q2": 0.5})
    with pytest.raises(ValueError, match="at least two"):
        window_changes(pd.DataFrame(rows), {"w": ["c1"]}, {"a": [1]})
    with pytest.raises(ValueError, match="no answers from"):
        window_changes(pd.DataFrame(rows), {"w": ["c1", "c9"]}, {"a": [1]})
    with pytest.raises(ValueError, match="no question"):
        window_changes(pd.DataFrame(rows), {"w": ["c1", "c2"]}, {"a": [99]})
