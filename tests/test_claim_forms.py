"""The forms of the findings' tests (issue: findings a calibration researcher would sign): class-balanced
metrics under resampling weights against a reference, Holm's correction by hand, an equivalence test that a
reversal cannot pass with an absolute margin and a level, B.7's permutation test, Table 1's drop like for like,
and the table's parts and tally."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from helpers.evaluation import claim_forms, contrast, findings
from helpers.evaluation.shared_bootstrap import question_weights
from test_shared_bootstrap import pair_values, world


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_weighted_class_balanced_auc_is_the_mean_of_sklearns_per_kind(seed):
    """Under non-unit (Poisson) question weights, the class-balanced AUC of a pair is the mean of scikit-learn's
    weighted AUC on the improvements and on the regressions (the stratified bootstrap rescales each kind's weights
    to its size, which leaves an AUC inside one kind unchanged)."""
    names, good, _ = world(n=300, seed=seed % 50)
    rows = contrast.contrast_rows(good, names[0], names[-1])
    ids = np.unique(rows["question_id"])
    w = question_weights(ids, n=3, seed=seed)
    got = pair_values("auc_cb", rows, names[-1], w)
    for r in range(3):
        per_kind = []
        for kind in ("improvement", "regression"):
            part = rows[rows["kind"] == kind]
            weight = w.iloc[r][part["question_id"]].to_numpy()
            if weight.sum() == 0:
                per_kind.append(np.nan)
                continue
            per_kind.append(roc_auc_score(part["correct"], part["confidence"], sample_weight=weight))
        assert got[r] == pytest.approx(np.mean(per_kind), nan_ok=True)


def test_a_pair_without_regressions_has_no_class_balanced_metric():
    """Every question right only at the later checkpoint: the class-balanced AUC needs both kinds, so it is
    undefined (NaN), and a later-is-right rule's plain AUC there is 1."""
    ids = np.arange(20)
    early = pd.DataFrame({"checkpoint": "a", "question_id": ids, "correct": False, "confidence": 0.4})
    late = pd.DataFrame({"checkpoint": "b", "question_id": ids, "correct": True, "confidence": 0.6})
    rows = contrast.contrast_rows(pd.concat([early, late]), "a", "b")
    assert set(rows["kind"]) == {"improvement"}
    w = pd.DataFrame(np.ones((1, ids.size)), columns=ids)
    assert pair_values("auc", rows, "b", w)[0] == 1.0
    assert np.isnan(pair_values("auc_cb", rows, "b", w)[0])


def test_a_later_is_right_rule_scores_one_half_class_balanced():
    """A rule that gives the later checkpoint of every pair the higher confidence: on the plain contrast AUC it
    profits from improvements outnumbering regressions; class-balanced it scores exactly 0.5."""
    names, good, _ = world(n=600)
    rule = good.assign(confidence=good["checkpoint"].map({n: 0.3 + 0.1 * k for k, n in enumerate(names)}))
    cont = contrast.contrast_metrics(rule, contrast.all_pairs(names), min_size=1)
    assert cont["auc_cb"] == pytest.approx(0.5) and cont["auc"] > 0.55


def test_holm_by_hand_and_its_properties():
    # sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> running max 0.06
    assert findings.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert findings.holm([0.2]) == pytest.approx([0.2])
    assert findings.holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])
    with pytest.raises(ValueError, match="NaN"):
        findings.holm([0.1, np.nan])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_holm_never_lowers_a_p_value_and_keeps_their_order(p):
    adjusted = findings.holm(p)
    assert (adjusted >= np.array(p) - 1e-12).all() and (adjusted <= 1).all()
    order = np.argsort(p, kind="stable")
    assert (np.diff(adjusted[order]) >= -1e-12).all()


def test_the_table_corrects_the_papers_claims_only():
    rows = [{"claim": f"paper {k}", "part": "paper", "verdict": "reproduced", "p": p}
            for k, p in enumerate([0.001, 0.02, 0.03])]
    rows.append({"claim": "extension", "part": "extension", "verdict": "reproduced", "p": 0.03})
    rows.append({"claim": "GCM", "part": "paper", "verdict": "not testable here (out of range)"})
    table = findings.findings_table(rows)
    # Holm over the 3 testable paper claims: 0.003, 0.04, 0.04 -> all below 0.05; the extension keeps its own
    assert list(table["verdict"]) == ["reproduced"] * 4 + ["not testable here (out of range)"]
    assert table.attrs["family"] == 3
    assert table.attrs["counts"] == {"reproduced": 3, "contradicted": 0, "inconclusive": 0, "metric-dependent": 0,
                                     "not testable here": 1}
    rows[1]["p"], rows[2]["p"] = 0.03, 0.03  # 0.003, 0.06, 0.06: two fall to inconclusive
    table = findings.findings_table(rows)
    assert list(table["verdict"][:3]) == ["reproduced", "inconclusive", "inconclusive"]
    assert list(table["verdict at 5%"][:3]) == ["reproduced"] * 3


def test_similar_out_of_domain_is_not_reproduced_by_a_reversal():
    """The domain claim is an equivalence test with an absolute margin and a level: an advantage that vanishes out
    of domain, both methods near chance there, is reproduced; one that reverses (the other method far ahead
    there) or stays is contradicted, never reproduced as "shrinks" would be."""
    names, good, noise = world()
    pairs = contrast.all_pairs(names)
    _, good_out, noise_out = world(seed=5)
    _, noise_b, _ = world(seed=6)
    poor = noise_out, noise_out.assign(confidence=noise_out["confidence"][::-1].to_numpy())
    vanishes = claim_forms.gap_claim((good, noise), poor, pairs, (1, 1), 0.1, 0.6, n=300)
    assert abs(vanishes["outside"]) < 0.05 and vanishes["verdict"] == "reproduced", vanishes
    assert vanishes["margin"] == 0.1 and vanishes["outside a: 95%"] < 0.6
    good_both = claim_forms.gap_claim((good, noise), (good_out, good_out.copy()), pairs, (1, 1), 0.1, 0.6, n=300)
    assert good_both["outside"] == 0 and good_both["verdict"] == "contradicted"  # similar, but not poor
    reverses = claim_forms.gap_claim((good, noise), (noise_out, good_out), pairs, (1, 1), 0.1, 0.6, n=300)
    assert reverses["outside"] < -reverses["margin"] and reverses["verdict"] == "contradicted"
    assert reverses["p"] < 0.05 and vanishes["p"] < 0.05  # two-sided: twice the smaller direction's p
    stays = claim_forms.gap_claim((good, noise), (good_out, noise_out), pairs, (1, 1), 0.1, 0.6, n=300)
    assert stays["verdict"] == "contradicted"
    with pytest.raises(ValueError):
        claim_forms.gap_claim((good, noise), (good_out, noise_out), pairs, (1, 10_000), 0.1, 0.6, n=50)


def _variance(trend: float, n_ckpt=7, questions=300, seed=0) -> pd.DataFrame:
    """Cross-seed variance whose share of the spread grows by `trend` per checkpoint, with noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(n_ckpt):
        for layer in (1, 2):
            spread = rng.uniform(0.5, 5)
            share = np.exp(trend * c + rng.normal(0, 0.3, questions))
            rows.append(pd.DataFrame({"checkpoint": f"c{c}", "question_id": np.arange(questions), "layer": layer,
                                      "variance": share * spread, "spread": spread}))
    return pd.concat(rows, ignore_index=True)


@pytest.mark.parametrize("trend, expected", [(0.3, "reproduced"), (-0.3, "contradicted"), (0.0, "inconclusive")])
def test_b7_permutation_verdicts(trend, expected):
    names = [f"c{c}" for c in range(7)]
    cube = claim_forms.trend_cube(_variance(trend), "variance", names, by="layer")
    assert cube.shape == (2, 300, 7)
    out = claim_forms.permutation_trend(cube)
    assert out["verdict"] == expected and out["orders"] == 5040 and out["p"] >= 1 / 5040
    assert out["median"] == pytest.approx(np.median(out["per layer"]))


def test_contrast_minus_full_is_the_contrast_auc_minus_the_full_set_auc():
    names, good, _ = world()
    pairs = contrast.all_pairs(names)
    out = findings.contrast_minus_full("auc", good, names, pairs, 1, n=100)
    full = roc_auc_score(good["correct"], good["confidence"])
    cont = contrast.contrast_metrics(good, pairs, min_size=1)["auc"]
    assert out["value_b"] == pytest.approx(full) and out["value_a"] == pytest.approx(cont)
    assert out["difference"] == pytest.approx(cont - full) and out["diffs"].shape == (100,)
    with pytest.raises(ValueError, match="compares AUCs"):
        findings.contrast_minus_full("brier", good, names, pairs, 1)
