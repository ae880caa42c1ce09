"""Tests for helpers.pipeline.comparison.marked: the † markers of the method-comparison tables (notebooks 05, 06),
on hand-built tables and on tables whose markers come from hand-worked paired bootstraps.

Nothing here needs the trained world or the artifact cache.
"""
import numpy as np
import pandas as pd
import pytest

from helpers.evaluation import stats
from helpers.pipeline.comparison import marked

FULL_LABELS = ["AUC", "Brier", "ECE", "SmoothECE"]
CONTRAST_LABELS = ["AUC", "Brier", "ECE", "Δ", "AUC class-balanced", "Brier class-balanced", "Δ class-balanced"]
KEYS = [("full set", label) for label in FULL_LABELS] + [("contrast set", label) for label in CONTRAST_LABELS]


def make_table(scores: dict[str, dict], same: dict[str, dict], reference: str) -> dict:
    """A table shaped as `_build_comparison` returns it: values built the same way (a frame of per-method
    dicts keyed by (set, metric) tuples, transposed), and a same-shaped bool frame, False by default."""
    values = pd.DataFrame(scores).T
    indistinguishable = pd.DataFrame(False, index=values.index, columns=values.columns)
    for name, cells in same.items():
        for key, flag in cells.items():
            indistinguishable.loc[name, key] = flag
    return {"values": values, "indistinguishable": indistinguishable, "reference": reference}


def random_scores(names, seed=0):
    rng = np.random.default_rng(seed)
    return {name: {key: float(v) for key, v in zip(KEYS, rng.uniform(0, 1, len(KEYS)))} for name in names}


# --------------------------------------------------------------------------- marked, on hand-built tables


def test_marked_adds_dagger_exactly_where_indistinguishable():
    names = ["non-oracle adapter", "oracle adapter", "self-consistency", "token probability"]
    reference = "oracle adapter"  # not the first row: the reference is found by name, not position
    rng = np.random.default_rng(1)
    pattern = rng.uniform(size=(len(names), len(KEYS))) < 0.5
    same = {name: dict(zip(KEYS, row)) for name, row in zip(names, pattern)}
    same[reference] = {key: True for key in KEYS}  # even if the frame says so, the reference is never marked
    table = make_table(random_scores(names), same, reference)

    out = marked(table)
    assert list(out.index) == names
    assert list(out.columns) == list(table["values"].columns)
    assert isinstance(out.columns, pd.MultiIndex)
    n_marks = 0
    for i, name in enumerate(names):
        for j, key in enumerate(KEYS):
            value = table["values"].loc[name, key]
            dagger = bool(pattern[i, j]) and name != reference
            n_marks += dagger
            assert out.loc[name, key] == f"{value:.3f}" + (" †" if dagger else ""), (name, key)
    assert n_marks > 0 and n_marks < (len(names) - 1) * len(KEYS)  # the pattern mixes both cases
    assert not out.loc[reference].str.contains("†").any()


def test_marked_formats_to_the_requested_digits():
    scores = {"ref": {key: 0.8766 for key in KEYS}, "other": {key: 0.04321 for key in KEYS}}
    same = {"other": {("full set", "AUC"): True}}
    table = make_table(scores, same, "ref")
    assert marked(table).loc["other", ("full set", "AUC")] == "0.043 †"
    assert marked(table).loc["ref", ("full set", "AUC")] == "0.877"
    assert marked(table, digits=2).loc["ref", ("full set", "AUC")] == "0.88"
    assert marked(table, digits=2).loc["other", ("full set", "AUC")] == "0.04 †"
    assert marked(table, digits=2).loc["other", ("full set", "Brier")] == "0.04"
    assert marked(table, digits=5).loc["other", ("contrast set", "Δ")] == "0.04321"
    assert marked(table, digits=0).loc["ref", ("full set", "ECE")] == "1"


def test_marked_shows_missing_values_as_text():
    scores = random_scores(["ref", "a", "b"], seed=2)
    scores["a"][("contrast set", "Δ class-balanced")] = np.nan  # e.g. no contrast pair large enough
    scores["b"][("contrast set", "Δ class-balanced")] = np.nan
    scores["b"][("contrast set", "AUC")] = np.nan
    scores["ref"][("contrast set", "Δ")] = np.inf
    same = {"a": {("contrast set", "Δ class-balanced"): True}}
    table = make_table(scores, same, "ref")
    assert table["values"].dtypes.eq(float).all()  # NaN sits in an ordinary float column
    out = marked(table, digits=2)
    assert out.loc["a", ("contrast set", "Δ class-balanced")] == "nan †"
    assert out.loc["b", ("contrast set", "Δ class-balanced")] == "nan"
    assert out.loc["b", ("contrast set", "AUC")] == "nan"
    assert out.loc["ref", ("contrast set", "Δ")] == "inf"
    assert out.loc["b", ("full set", "AUC")] == f"{scores['b'][('full set', 'AUC')]:.2f}"


def test_marked_leaves_its_input_alone():
    table = make_table(random_scores(["ref", "a"]), {"a": {("full set", "Brier"): True}}, "ref")
    values, same = table["values"].copy(), table["indistinguishable"].copy()
    marked(table)
    pd.testing.assert_frame_equal(table["values"], values)
    pd.testing.assert_frame_equal(table["indistinguishable"], same)


# --------------------------------------------------------------------------- markers from hand-worked bootstraps

CHECKPOINTS = ["step-00100", "step-00200"]
N_QUESTIONS = 40
TESTED_FULL = [("AUC", "auc"), ("Brier", "brier"), ("ECE", "ece")]  # SmoothECE is not bootstrapped in the tables


def standard_frame(confidence_of) -> pd.DataFrame:
    """40 questions on two checkpoints. Checkpoint 1 gets the even questions right, checkpoint 2 the first
    half: each checkpoint is right on exactly half, and the four correctness patterns (the bootstrap's strata)
    have ten questions each, so every resample keeps each checkpoint's accuracy at 1/2."""
    rows = []
    for q in range(N_QUESTIONS):
        for c, checkpoint in enumerate(CHECKPOINTS):
            correct = q % 2 == 0 if c == 0 else q < N_QUESTIONS // 2
            rows.append({"checkpoint": checkpoint, "question_id": 1000 + q, "correct": correct,
                         "confidence": confidence_of(correct)})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def frames():
    reference = standard_frame(lambda right: 0.9 if right else 0.1)  # separates perfectly, ECE 0.1
    return {
        "reference": reference,
        # the same confidences, rows in another order: every resampled difference is exactly 0
        "copy": reference.sample(frac=1.0, random_state=0).reset_index(drop=True),
        # the same ranking (AUC 1) but further from the truth: Brier 0.04, ECE 0.2
        "less sure": standard_frame(lambda right: 0.8 if right else 0.2),
        # no information: AUC 1/2, Brier 1/4, but perfectly calibrated at accuracy 1/2 (ECE 0)
        "constant": standard_frame(lambda right: 0.5),
    }


@pytest.fixture(scope="module")
def runs(frames):
    return {
        (name, label): stats.full_set_bootstrap(key, frames[name], frames["reference"], CHECKPOINTS, n=200)
        for name in ("copy", "less sure", "constant")
        for label, key in TESTED_FULL
    }


def test_hand_worked_bootstraps(runs):
    expected = {  # (value_a, value_b) worked out by hand; every resample gives the same values
        ("copy", "AUC"): (1.0, 1.0), ("copy", "Brier"): (0.01, 0.01), ("copy", "ECE"): (0.1, 0.1),
        ("less sure", "AUC"): (1.0, 1.0), ("less sure", "Brier"): (0.04, 0.01), ("less sure", "ECE"): (0.2, 0.1),
        ("constant", "AUC"): (0.5, 1.0), ("constant", "Brier"): (0.25, 0.01), ("constant", "ECE"): (0.0, 0.1),
    }
    for cell, (a, b) in expected.items():
        run = runs[cell]
        assert run["value_a"] == pytest.approx(a, abs=1e-12), cell
        assert run["value_b"] == pytest.approx(b, abs=1e-12), cell
        assert run["difference"] == pytest.approx(a - b, abs=1e-12), cell
        assert run["n_questions"] == N_QUESTIONS and run["n_resamples"] == 200
        if a - b == 0:  # all resampled differences are 0: the interval is [0, +inf) and holds 0
            assert run["lower"] == pytest.approx(0.0, abs=1e-12) and run["upper"] == np.inf
            assert run["contains_zero"], cell
        elif a - b > 0:  # all resampled differences equal the observed one
            assert run["lower"] == pytest.approx(a - b, abs=1e-12) and run["upper"] == np.inf
            assert not run["contains_zero"], cell
        else:
            assert run["lower"] == -np.inf and run["upper"] == pytest.approx(a - b, abs=1e-12)
            assert not run["contains_zero"], cell


def test_bootstrap_results_give_the_expected_marks(runs):
    """The composition `_build_comparison` performs: each cell's `contains_zero` vs the reference → `marked`."""
    names = ["reference", "copy", "less sure", "constant"]
    scores = {name: {("full set", label): np.nan for label in FULL_LABELS} for name in names}
    same = {}
    for (name, label), run in runs.items():
        scores[name][("full set", label)] = run["value_a"]
        scores["reference"][("full set", label)] = run["value_b"]
        same.setdefault(name, {})[("full set", label)] = run["contains_zero"]
    table = make_table(scores, same, "reference")
    out = marked(table, digits=2)
    expected = pd.DataFrame(
        [
            ["1.00", "0.01", "0.10", "nan"],
            ["1.00 †", "0.01 †", "0.10 †", "nan"],  # identical to the reference: † on every tested cell
            ["1.00 †", "0.04", "0.20", "nan"],  # same ranking, so AUC cannot be told apart; the rest can
            ["0.50", "0.25", "0.00", "nan"],  # clearly different everywhere, better on ECE included
        ],
        index=names,
        columns=pd.MultiIndex.from_tuples([("full set", label) for label in FULL_LABELS]),
    )
    pd.testing.assert_frame_equal(out, expected)
