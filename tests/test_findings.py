"""The claim checks shared by notebooks 05 and 06, per-checkpoint summaries and the full score dict,
on hand-built tables."""
import numpy as np
import pandas as pd
import pytest

from helpers import comparison, contrast, findings, metrics

METHODS = ["oracle adapter", "self-consistency", "copy (SC)", "copy (non-oracle adapter)", "non-oracle adapter",
           "SC + isotonic", "SC + temperature", "SC + Platt", "surrogate (SC)"]


def _table(full_auc, con_auc, ece, apart=True):
    columns = pd.MultiIndex.from_tuples([("full set", "AUC"), ("full set", "ECE"), ("contrast set", "AUC")])
    values = pd.DataFrame([[full_auc[m], ece[m], con_auc[m]] for m in METHODS], index=METHODS, columns=columns)
    same = pd.DataFrame(False, index=METHODS, columns=columns)
    same.loc["non-oracle adapter", ("contrast set", "AUC")] = not apart
    return {"values": values, "indistinguishable": same, "reference": "oracle adapter"}


def _paper_like():
    full = dict.fromkeys(METHODS, 0.80) | {"self-consistency": 0.81, "copy (SC)": 0.70, "copy (non-oracle adapter)": 0.72}
    con = {"oracle adapter": 0.90, "self-consistency": 0.70, "copy (SC)": 0.5, "copy (non-oracle adapter)": 0.5,
           "non-oracle adapter": 0.65, "SC + isotonic": 0.70, "SC + temperature": 0.70, "SC + Platt": 0.69,
           "surrogate (SC)": 0.60}
    ece = dict.fromkeys(METHODS, 0.10) | {"SC + isotonic": 0.02}
    return full, con, ece


def test_every_claim_holds_on_a_table_shaped_like_the_papers():
    claims = findings.table_claims(_table(*_paper_like()))
    assert [c.holds for c in claims] == [True] * 6
    assert claims[0].detail == "full 0.810 vs 0.800; contrast 0.700 vs 0.900"
    assert claims[0].line().startswith("[reproduced] SC's full-set AUC")


def test_each_claim_fails_when_its_numbers_say_otherwise():
    full, con, ece = _paper_like()
    cases = [
        (0, {"full": {"self-consistency": 0.85}}),   # full-set gap of 0.05: not close
        (1, {"con": {"copy (SC)": 0.51}}),
        (2, {"apart": False}),                       # lower, but the bootstrap cannot tell them apart
        (3, {"ece": {"SC + isotonic": 0.2}}),        # isotonic does not fix ECE
        (4, {"con": {"SC + Platt": 0.75}}),          # Platt raises contrast AUC by more than 0.005
        (5, {"con": {"surrogate (SC)": 0.72}}),
    ]
    for index, change in cases:
        table = _table(full | change.get("full", {}), con | change.get("con", {}), ece | change.get("ece", {}),
                       apart=change.get("apart", True))
        holds = [c.holds for c in findings.table_claims(table)]
        assert holds[index] is False and sum(holds) == 5, (index, holds)


def test_claims_table_and_untestable_claims():
    claims = [findings.Claim("a", True, "1"), findings.Claim("b", False, "2"), findings.Claim("c", None, "too small")]
    table = findings.claims_table(claims)
    assert table["this world"].tolist() == ["reproduced", "NOT reproduced", "cannot be tested here"]
    assert claims[2].line() == "[cannot be tested here] c\n    too small"


def _frame(rows):
    return pd.DataFrame(rows, columns=["checkpoint", "question_id", "correct", "confidence"])


def test_gcm_gap_and_slope_by_hand():
    oracle = _frame([("a", 1, 1, 0.9), ("a", 2, 0, 0.1), ("a", 3, 1, 0.8), ("b", 1, 1, 0.9), ("b", 2, 1, 0.6), ("b", 3, 0, 0.7)])
    gcm = _frame([("a", 1, 1, 0.2), ("a", 2, 0, 0.9), ("a", 3, 1, 0.5), ("b", 1, 1, 0.5), ("b", 2, 1, 0.5), ("b", 3, 0, 0.5)])
    gap = findings.gcm_gap(oracle, gcm, ["a", "b"])
    # a: accuracy 2/3, oracle AUC 1, GCM AUC 0.5 (0.2 and 0.5 both below 0.9); b: accuracy 2/3, oracle 0.5, GCM 0.5
    assert gap.loc["a"].tolist() == pytest.approx([2 / 3, 1.0, 0.0, -1.0])
    assert gap.loc["b"].tolist() == pytest.approx([2 / 3, 0.5, 0.5, 0.0])
    assert findings.slope([0.5, 0.7, 0.9], [0.1, 0.0, -0.1]) == pytest.approx(-0.5)
    with pytest.raises(ValueError, match="missing"):
        findings.gcm_gap(oracle, gcm, ["c"])
    with pytest.raises(ValueError, match="two equal-length"):
        findings.slope([1.0], [2.0])


def test_per_checkpoint_matches_summary_metrics():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"checkpoint": np.repeat(["x", "y"], 50), "correct": rng.integers(0, 2, 100),
                       "confidence": rng.random(100), "other": rng.random(100)})
    table = metrics.per_checkpoint(df, "other", columns=["auroc", "brier"])
    assert list(table.index) == ["x", "y"] and list(table.columns) == ["auroc", "brier"]
    for name, group in df.groupby("checkpoint"):
        expected = metrics.summary_metrics(group["other"], group["correct"])
        assert table.loc[name, "auroc"] == expected["auroc"] and table.loc[name, "brier"] == expected["brier"]
    assert metrics.per_checkpoint(df.iloc[:0], columns=["auroc"]).empty
    with pytest.raises(ValueError, match="lacks columns"):
        metrics.per_checkpoint(df, "missing")


def test_scores_are_the_full_set_and_contrast_metrics():
    rng = np.random.default_rng(1)
    names = ["c1", "c2", "c3"]
    df = pd.DataFrame({"checkpoint": np.repeat(names, 300), "question_id": np.tile(np.arange(300), 3),
                       "correct": rng.integers(0, 2, 900).astype(bool), "confidence": rng.random(900)})
    pairs = contrast.all_pairs(names)
    got = comparison.scores(df, pairs, min_size=50, checkpoints=names)
    full = metrics.full_set_metrics(df, names)
    cont = contrast.contrast_metrics(df, pairs, min_size=50)
    assert got[("full set", "AUC")] == full["auc"] and got[("full set", "SmoothECE")] == full["smooth_ece"]
    assert got[("contrast set", "Δ class-balanced")] == cont["delta_cb"]
    assert got[("contrast set", "pairs")] == int(cont["n_pairs"]) == 3
    assert {k for k, _ in got} == {"full set", "contrast set"} and len(got) == 4 + 7


def test_claims_on_a_world_without_large_enough_contrast_sets_are_untestable():
    full, con, ece = _paper_like()
    claims = findings.table_claims(_table(full, dict.fromkeys(con, float("nan")), ece))
    assert [c.holds for c in claims] == [None] * 6
    assert all("not measurable in this world" in c.detail for c in claims)
