"""The findings module: verdicts from the paired bootstrap (never from cut-offs), claims decided on hand-built
worlds whose answer is known, the GCM headroom test (tests/test_seeds.py), and the per-checkpoint and full score
dicts."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.pipeline import claims

from helpers.pipeline import comparison
from helpers.evaluation import contrast, findings, metrics
from test_shared_bootstrap import world


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=1, max_size=200))
def test_verdicts_mirror_and_follow_the_one_sided_intervals(diffs):
    d = np.array(diffs)
    higher, low, high = findings.verdict(d, "higher")
    lower = findings.verdict(-d, "lower")[0]
    assert higher == lower  # a claim and its mirror image get the same verdict
    assert higher == ("reproduced" if np.percentile(d, 5) > 0 else "contradicted" if np.percentile(d, 95) < 0
                      else "inconclusive")
    assert low <= high


def test_verdict_by_hand():
    assert findings.verdict([0.1, 0.2, 0.3], "higher")[0] == "reproduced"
    assert findings.verdict([0.1, 0.2, 0.3], "lower")[0] == "contradicted"
    assert findings.verdict([-0.1, 0.2, 0.3] * 10, "higher")[0] == "inconclusive"
    assert findings.verdict([np.nan, -0.2, -0.3], "lower")[0] == "reproduced"  # NaN resamples are dropped
    with pytest.raises(ValueError, match="no finite"):
        findings.verdict([np.nan], "higher")
    with pytest.raises(ValueError, match="direction"):
        findings.verdict([0.1], "better")


def test_claims_name_a_set_a_metric_and_a_direction():
    with pytest.raises(ValueError, match="direction"):
        findings.Claim("x", "contrast set AUC", "a", "b", "bigger")
    with pytest.raises(ValueError, match="metric must be"):
        findings.Claim("x", "contrast AUC", "a", "b", "higher")
    with pytest.raises(ValueError, match="part"):
        findings.Claim("x", "contrast set AUC", "a", "b", "higher", part="appendix")
    for claim in claims.CLAIMS:
        assert {claim.a, claim.b} <= set(comparison.METHODS) and claim.source
        assert claim.part == "extension" or claim.parts[1] in ("auc_cb", "smooth_ece")  # the paper's: the right metric


def test_decide_reproduces_contradicts_or_cannot_tell():
    names, good, noise = world()
    frames = {"good": good, "noise": noise, "same": good.copy()}
    pairs = contrast.all_pairs(names)

    def run(metric, a, b, direction, min_size=1):
        claim = findings.Claim(f"{a} {direction} {b}", metric, a, b, direction)
        return findings.decide(claim, frames, names, pairs, min_size, n=300)

    assert run("contrast set AUC", "good", "noise", "higher")["verdict"] == "reproduced"
    assert run("contrast set AUC", "good", "noise", "lower")["verdict"] == "contradicted"
    assert run("contrast set AUC", "good", "same", "higher")["verdict"] == "inconclusive"
    assert run("full set Brier", "good", "noise", "lower")["verdict"] == "reproduced"
    row = run("contrast set AUC", "good", "noise", "higher", min_size=10_000)
    assert row["verdict"].startswith("not testable here") and np.isnan(row["difference"])
    table = findings.findings_table([run("contrast set AUC", "good", "noise", "higher"),
                                     run("contrast set AUC", "good", "same", "higher")])
    assert table.attrs["counts"] == {"reproduced": 1, "contradicted": 0, "inconclusive": 1, "not testable here": 0}
    row = run("contrast set auc_cb", "good", "noise", "higher")  # the plain AUC beside, and the fitted normalization
    assert row["beside"] == "auc" and row["beside: verdict"] == "reproduced"
    assert row["fitted normalization: verdict"] == "reproduced" and row["p for"] < 0.05 < row["p against"]
    with pytest.raises(ValueError, match="not in frames"):
        findings.decide(findings.Claim("x", "contrast set AUC", "good", "absent", "higher"), frames, names, pairs, 1)


def test_copy_checks_are_machinery_not_findings():
    columns = pd.MultiIndex.from_tuples([("contrast set", "AUC"), ("contrast set", "AUC class-balanced")])
    values = pd.DataFrame([[0.5, 0.5], [0.5000001, 0.5]], index=["copy (SC)", "copy (non-oracle adapter)"],
                          columns=columns)
    assert [c.holds for c in claims.checks(values)] == [True, True, False, True]


def _frame(rows):
    return pd.DataFrame(rows, columns=["checkpoint", "question_id", "correct", "confidence"])


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
    assert {k for k, _ in got} == {"full set", "contrast set"} and len(got) == 4 + 9


def test_post_training_claims_are_paired_over_questions():
    rng = np.random.default_rng(4)
    n = 400
    correct_ft = rng.uniform(size=n) < 0.6
    correct_rl = correct_ft | (rng.uniform(size=n) < 0.3)  # RL keeps what SFT knew and learns more
    ft = pd.DataFrame({"question_id": np.arange(n), "correct": correct_ft, "confidence": np.full(n, 0.95)})
    rl = pd.DataFrame({"question_id": np.arange(n)[::-1], "correct": correct_rl[::-1],
                       "confidence": np.where(correct_rl, 0.9, 0.5)[::-1]})  # another row order: merged by id
    table = findings.post_training_claims(ft, rl, n=300)
    assert table.loc["RL raises accuracy", "difference"] == pytest.approx(correct_rl.mean() - correct_ft.mean())
    assert table.loc["RL raises accuracy", "verdict"] == "reproduced"
    assert table.loc["the fine-tuned model is overconfident (mean confidence above accuracy)",
                     "verdict"] == "reproduced"
    assert table.loc["RL raises mean confidence", "verdict"] == "contradicted"
    expected_ece = (metrics.expected_calibration_error(np.where(correct_rl, 0.9, 0.5), correct_rl, n_bins=5)
                    - metrics.expected_calibration_error(np.full(n, 0.95), correct_ft, n_bins=5))
    assert table.loc["RL lowers ECE (5 bins)", "difference"] == pytest.approx(expected_ece)
    with pytest.raises(ValueError, match="same questions"):
        findings.post_training_claims(ft, rl.iloc[:10])


def test_auc_claim_decides_a_difference_of_aucs_inside_checkpoints():
    """Notebook 06's transfer and random-label claims: cells are one checkpoint's answers each."""
    from sklearn.metrics import roc_auc_score
    names, good, noise = world()
    def one(df, name):
        return df[df["checkpoint"] == name]
    cells = {"good": one(good, names[0]), "noise": one(noise, names[0]), "same": one(good, names[0]).copy()}

    def run(a, b, direction):
        return findings.auc_claim(cells, lambda aucs: aucs[a] - aucs[b], direction, n=300)

    row = run("good", "noise", "higher")
    want = (roc_auc_score(cells["good"]["correct"], cells["good"]["confidence"])
            - roc_auc_score(cells["noise"]["correct"], cells["noise"]["confidence"]))
    assert row["difference"] == pytest.approx(want) and row["verdict"] == "reproduced" and row["seeds"] == 1
    assert run("good", "noise", "lower")["verdict"] == "contradicted"
    same = run("good", "same", "higher")
    assert same["difference"] == 0 and same["verdict"] == "inconclusive"
    seeded = pd.concat([cells["good"].assign(seed=0), cells["noise"].assign(seed=1)])  # two "seeds" of one method
    row = findings.auc_claim({"m": seeded, "noise": cells["noise"]}, lambda a: a["m"] - a["noise"], "higher", n=300)
    assert row["seeds"] == 2 and row["difference"] == pytest.approx(want / 2)  # the mean over the seeds
    with pytest.raises(ValueError, match="one checkpoint"):
        findings.auc_claim({"all": good}, lambda a: a["all"], "higher")
    with pytest.raises(ValueError, match="empty"):
        findings.auc_claim({}, lambda a: 0, "higher")
