"""The findings module: verdicts from the paired bootstrap (never from cut-offs), claims decided on hand-built
worlds whose answer is known on the paper's metric and its control, the combined, Holm and replication rules by
hand, and the per-checkpoint and full score dicts."""
import numpy as np
from scipy.stats import norm
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.pipeline import claims

from helpers.pipeline import comparison
from helpers.evaluation import claim_forms, contrast, findings, metrics
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
        # the paper's claims: on the paper's own metric (plain contrast AUC, SmoothECE), with a control beside
        assert claim.part != "paper" or claim.parts[1] in ("auc", "smooth_ece")
        assert findings.CONTROL[claim.parts[0]][claim.parts[1]]
    groups = {c.group for c in claims.CLAIMS if c.group}
    assert groups <= {c.claim for c in claims.CLAIMS if c.part == "paper"}  # a group is named by its counted row


def test_decide_reproduces_contradicts_or_cannot_tell():
    names, good, noise = world()
    frames = {"good": good, "noise": noise, "same": good.copy()}
    pairs = contrast.all_pairs(names)

    def run(metric, a, b, direction, min_size=1):
        claim = findings.Claim(f"{a} {direction} {b}", metric, a, b, direction)
        return findings.decide(claim, frames, names, pairs, min_size, n=300)

    row = run("contrast set AUC", "good", "noise", "higher")
    assert row["verdict at 5%"] == row["paper verdict at 5%"] == row["control verdict at 5%"] == "reproduced"
    assert row["control"] == "auc_cb" and row["p"] < 0.05 and row["control: p"] < 0.05
    assert run("contrast set AUC", "good", "noise", "lower")["verdict at 5%"] == "contradicted"
    assert run("contrast set AUC", "good", "same", "higher")["verdict at 5%"] == "inconclusive"
    assert run("full set Brier", "good", "noise", "lower")["verdict at 5%"] == "reproduced"
    assert run("full set Brier", "good", "noise", "lower")["control"] == ""  # no control: the paper metric alone
    row = run("contrast set AUC", "good", "noise", "higher", min_size=10_000)
    assert row["verdict at 5%"].startswith("not testable here") and np.isnan(row["difference"])
    table = findings.findings_table([run("contrast set AUC", "good", "noise", "higher"),
                                     run("contrast set AUC", "good", "same", "higher")])
    assert table.attrs["counts"] == {"reproduced": 1, "contradicted": 0, "inconclusive": 1, "metric-dependent": 0,
                                     "not testable here": 0}
    assert table.attrs["family"] == 4 and table.attrs["claims"] == 2  # both metrics of both claims
    with pytest.raises(ValueError, match="not in frames"):
        findings.decide(findings.Claim("x", "contrast set AUC", "good", "absent", "higher"), frames, names, pairs, 1)


def test_copy_checks_are_machinery_not_findings():
    columns = pd.MultiIndex.from_tuples([("contrast set", "AUC"), ("contrast set", "AUC class-balanced")])
    values = pd.DataFrame([[0.5, 0.5], [0.5000001, 0.5], [0.71, 0.5]],
                          index=["copy (SC)", "copy (non-oracle adapter)", "checkpoint index"], columns=columns)
    assert [c.holds for c in claims.checks(values)] == [True, True, False, True, True]
    counted = [c.claim for c in claims.CLAIMS if c.part == "paper" and not c.group]
    assert not [c for c in counted if "copy" in c or "checkpoint index" in c]  # by construction: never counted


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
        return claim_forms.auc_claim(cells, lambda aucs: aucs[a] - aucs[b], direction, n=300)

    row = run("good", "noise", "higher")
    want = (roc_auc_score(cells["good"]["correct"], cells["good"]["confidence"])
            - roc_auc_score(cells["noise"]["correct"], cells["noise"]["confidence"]))
    assert row["difference"] == pytest.approx(want) and row["verdict"] == "reproduced" and row["seeds"] == 1
    assert run("good", "noise", "lower")["verdict"] == "contradicted"
    same = run("good", "same", "higher")
    assert same["difference"] == 0 and same["verdict"] == "inconclusive"
    seeded = pd.concat([cells["good"].assign(seed=0), cells["noise"].assign(seed=1)])  # two "seeds" of one method
    row = claim_forms.auc_claim({"m": seeded, "noise": cells["noise"]}, lambda a: a["m"] - a["noise"], "higher", n=300)
    assert row["seeds"] == 2 and row["difference"] == pytest.approx(want / 2)  # the mean over the seeds
    with pytest.raises(ValueError, match="one checkpoint"):
        claim_forms.auc_claim({"all": good}, lambda a: a["all"], "higher")
    with pytest.raises(ValueError, match="empty"):
        claim_forms.auc_claim({}, lambda a: 0, "higher")


def test_combined_verdicts_by_hand():
    assert findings.combined("reproduced", "reproduced") == "reproduced"
    assert findings.combined("contradicted", "contradicted") == "contradicted"
    assert findings.combined("inconclusive", "inconclusive") == "inconclusive"
    assert findings.combined("reproduced", "inconclusive") == "metric-dependent"
    assert findings.combined("reproduced", "contradicted") == "metric-dependent"
    assert findings.combined("inconclusive", "") == findings.combined("inconclusive") == "inconclusive"


def test_replication_by_hand():
    assert findings.replication(["reproduced"] * 3) == "replicated: reproduced"
    assert findings.replication(["reproduced", "inconclusive", "reproduced"]) == \
        "world-dependent: 2 reproduced, 1 inconclusive"
    assert findings.replication(["not testable here (no pair)", "not testable here (x)"]) == \
        "replicated: not testable here"
    with pytest.raises(ValueError, match="no verdicts"):
        findings.replication([])


def test_two_sided_p_says_below_one_over_r_where_no_replicate_crosses():
    p, shown = findings.two_sided(np.r_[np.full(30, 1.0), np.full(70, -1.0)])
    assert p == pytest.approx(0.6) and shown == "0.600"
    rng = np.random.default_rng(0)
    p, shown = findings.two_sided(rng.normal(1.0, 0.1, 1000))  # every replicate above 0
    assert shown == "< 1/1000" and 0 < p <= 1 / 1000
    wide = np.linspace(0.01, 2.0, 1000)  # none crosses 0, yet the spread allows it: never capped at 1/R
    p, shown = findings.two_sided(wide)
    assert shown == "< 1/1000" and p == pytest.approx(2 * norm.sf(wide.mean() / wide.std(ddof=1)))
    assert p > 0.05


def test_one_holm_family_over_both_metrics_of_the_counted_claims():
    def row(claim, p, control_p, verdict="reproduced", **kw):
        return {"claim": claim, "p": p, "control: p": control_p, "paper verdict at 5%": verdict,
                "control verdict at 5%": verdict, "verdict at 5%": verdict, **kw}
    rows = [row("a", 0.001, 0.001), row("b", 0.03, 0.001), row("c", 0.001, 0.04),
            row("beside a", 0.001, 0.001, group="a"), row("ext", 0.02, 0.02, part="extension")]
    table = findings.findings_table(rows)
    want = findings.holm([0.001, 0.001, 0.03, 0.001, 0.001, 0.04])  # a, b, c; paper then control
    assert table.loc[["a", "b", "c"], "Holm p"].tolist() == pytest.approx(want[::2])
    assert table.loc[["a", "b", "c"], "control: Holm p"].tolist() == pytest.approx(want[1::2])
    assert table.loc["a", "verdict"] == "reproduced"
    # 0.03 x 2 = 0.06: b's paper metric is inconclusive after Holm; c's control keeps the running maximum 0.06
    assert table.loc["b", "verdict"] == table.loc["c", "verdict"] == "metric-dependent"
    assert table.loc["b", "paper verdict"] == table.loc["c", "control verdict"] == "inconclusive"
    assert table.attrs["family"] == 6 and table.attrs["claims"] == 3
    assert table.loc["beside a", "verdict"] == table.loc["ext", "verdict"] == "reproduced"  # at 5%, uncounted


def test_drops_compare_like_with_like():
    """The plain drop keeps the between-checkpoint credit on both sides, the class-balanced drop removes it from
    both: a rule "the later checkpoint is right" (confidence = the checkpoint's position) shows no drop on the
    class-balanced side, where the old comparison with the pooled AUC built one in."""
    from sklearn.metrics import roc_auc_score
    rng = np.random.default_rng(3)
    names = ["c1", "c2", "c3", "c4"]
    rows = []
    for k, name in enumerate(names):
        correct = rng.uniform(size=400) < 0.3 + 0.15 * k
        rows.append(pd.DataFrame({"checkpoint": name, "question_id": np.arange(400), "correct": correct,
                                  "confidence": 0.2 + 0.1 * k + 0.001 * rng.uniform(size=400)}))
    df = pd.concat(rows, ignore_index=True)
    pairs = contrast.all_pairs(names)
    cb = findings.contrast_minus_full("auc_cb", df, names, pairs, 1, n=100)
    within = np.mean([roc_auc_score(g["correct"], g["confidence"]) for _, g in df.groupby("checkpoint")])
    assert cb["value_b"] == pytest.approx(within)
    plain = findings.contrast_minus_full("auc", df, names, pairs, 1, n=100)
    assert plain["value_b"] == pytest.approx(roc_auc_score(df["correct"], df["confidence"]))
    assert set(cb["loo"]) == set(names) and all(v.shape == (101,) for v in cb["loo"].values())


def _pair_world(carrier: str | None, names, n=300, seed=0):
    """Two methods on `names`: "a" beats "b" on contrast sets only in the pairs that `carrier` is in (everywhere
    when None)."""
    rng = np.random.default_rng(seed)
    rows = {"a": [], "b": []}
    for k, name in enumerate(names):
        correct = rng.uniform(size=n) < 0.5
        informed = carrier is None or name == carrier
        for method, good in (("a", informed), ("b", False)):
            conf = np.where(correct, 0.7, 0.3) if good else rng.uniform(size=n)
            rows[method].append(pd.DataFrame({"checkpoint": name, "question_id": np.arange(n), "correct": correct,
                                              "confidence": conf}))
    return {m: pd.concat(r, ignore_index=True) for m, r in rows.items()}


def test_leave_one_checkpoint_out_names_the_checkpoint_that_carries_the_effect():
    names = ["c1", "c2", "c3", "c4", "c5"]
    pairs = contrast.all_pairs(names)
    claim = findings.Claim("a beats b", "contrast set AUC", "a", "b", "higher")
    carried = findings.decide(claim, _pair_world("c3", names), names, pairs, 1, n=300)
    assert carried["verdict at 5%"] == "reproduced" and carried["hinges on"].startswith("c3 (")
    assert carried["hinges on"].count("(") == 1  # only c3
    spread = findings.decide(claim, _pair_world(None, names), names, pairs, 1, n=300)
    assert spread["verdict at 5%"] == "reproduced" and spread["hinges on"] == ""
    assert carried["jackknife SE"] > 3 * spread["jackknife SE"]


def test_leave_one_out_matches_brute_force():
    """Each left-out value equals the same test run without that checkpoint's pairs."""
    names = ["c1", "c2", "c3", "c4"]
    frames = _pair_world("c2", names, seed=5)
    pairs = contrast.all_pairs(names)
    from helpers.evaluation import shared_bootstrap
    out = shared_bootstrap.contrast_bootstrap_over_pairs("auc", frames["a"], frames["b"], pairs, 1, n=50)
    for c in names:
        kept = [p for p in pairs if c not in p]
        one = [shared_bootstrap.contrast_bootstrap_over_pairs("auc", frames["a"], frames["b"], [p], 1, n=50)
               for p in kept]
        assert out["loo"][c][0] == pytest.approx(np.mean([r["difference"] for r in one]))


def test_permutation_trend_matches_brute_force():
    from itertools import permutations
    from scipy.stats import spearmanr
    rng = np.random.default_rng(2)
    values = rng.normal(size=(2, 30, 4)) + np.arange(4) * 0.3  # (layers, questions, checkpoints): a rising trend
    out = claim_forms.permutation_trend(values)

    def statistic(order):
        return np.mean([np.mean([spearmanr(order, values[layer, q])[0] for q in range(30)]) for layer in range(2)])
    every = np.array([statistic(list(p)) for p in permutations(range(4))])
    assert out["mean"] == pytest.approx(statistic([0, 1, 2, 3]))
    assert out["orders"] == 24 and out["p for"] == pytest.approx(np.mean(every >= every[0] - 1e-12))
    assert out["verdict"] in findings.VERDICTS and 0 < out["p for"] <= 1
    with pytest.raises(ValueError, match="checkpoints >= 3"):
        claim_forms.permutation_trend(values[:, :, :2])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.1, 3.0))
def test_a_logit_additive_checkpoint_index_is_constant_within_a_pair(seed, beta):
    """Why the checkpoint index is a check of the machinery, never a finding: its confidence is
    sigma(f(question) + beta * index), so the normalized pair sigma(logit c_j - logit c_i) = sigma(beta (j - i))
    is one value for every question of the pair, and its class-balanced contrast AUC is exactly 0.5 by algebra
    (the improvements' AUC is 1 and the regressions' 0, or the reverse)."""
    rng = np.random.default_rng(seed)
    names, n = ["c0", "c1", "c2", "c3"], 200
    features = rng.normal(0, 2, n)
    rows = [pd.DataFrame({"checkpoint": name, "question_id": np.arange(n),
                          "correct": rng.uniform(size=n) < 0.3 + 0.15 * k,
                          "confidence": 1 / (1 + np.exp(-(features + beta * k)))})
            for k, name in enumerate(names)]
    df = pd.concat(rows, ignore_index=True)
    pairs = contrast.all_pairs(names)
    for i, j in pairs:
        part = contrast.contrast_rows(df, i, j)
        for name in (i, j):
            values = part.loc[part["checkpoint"] == name, "confidence"]
            assert values.max() - values.min() < 1e-9  # one value per member of the pair
    assert contrast.contrast_metrics(df, pairs, min_size=1)["auc_cb"] == 0.5
