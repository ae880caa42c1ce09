"""Trained methods over seeds (paper A.8.1): values average over seeds, and the bootstrap's interval covers
the seed-to-seed spread as well as the question resampling. Hand-worked cases and the findings module."""
import numpy as np
import pandas as pd
import pytest

from helpers.evaluation import contrast, findings, metrics, shared_bootstrap
from helpers import pipeline
from test_shared_bootstrap import world


def _fake_run(diffs_by_seed):
    """A stand-in bootstrap whose frames carry their seed in `tag`: fixed values and per-replicate diffs."""
    def run(a, b):
        d = np.asarray(diffs_by_seed[int(a["tag"].iloc[0])], dtype=float)
        return {"metric": "auc", "value_a": 0.5 + d[0], "value_b": 0.5, "difference": float(d[0]), "diffs": d}
    return run


def _seeded(k):
    return pd.DataFrame({"seed": np.repeat(np.arange(k), 2), "tag": np.repeat(np.arange(k), 2)})


def test_values_are_the_means_over_seeds_by_hand():
    run = _fake_run({0: [0.1] * 50, 1: [0.3] * 50, 2: [0.2] * 50})
    out = shared_bootstrap.over_seeds(run, _seeded(3), pd.DataFrame({"x": [0]}))
    assert out["n_seeds"] == 3
    assert out["difference"] == pytest.approx(0.2) and out["value_a"] == pytest.approx(0.7)
    assert 0.1 <= out["lower"] <= 0.2 and out["upper"] == np.inf  # the interval sits among the seeds' values


def test_the_interval_covers_disagreeing_seeds():
    """Each seed alone is certain (every replicate agrees) but the two seeds disagree in sign: the
    interval over seeds must contain 0, where a question-only bootstrap of the mean would not."""
    run = _fake_run({0: [1.0] * 400, 1: [-0.8] * 400})
    out = shared_bootstrap.over_seeds(run, _seeded(2), pd.DataFrame({"x": [0]}))
    assert out["difference"] == pytest.approx(0.1)
    assert out["contains_zero"]  # the seed draws reach both 1.0 and -0.8
    assert set(np.round(out["diffs"], 6)) == {1.0, 0.1, -0.8}


def test_one_seed_passes_through_and_mismatched_seeds_fail():
    run = _fake_run({0: [0.1, 0.2]})
    assert shared_bootstrap.over_seeds(run, _seeded(1), _seeded(1))["n_seeds"] == 1
    with pytest.raises(ValueError, match="same seeds"):
        shared_bootstrap.over_seeds(run, _seeded(3), _seeded(2))


def test_seed_average_by_hand_and_bad_seeds():
    df = pd.DataFrame({"seed": [0, 0, 1, 1], "confidence": [0.2, 0.4, 0.6, 0.8]})
    assert metrics.seed_average(lambda d: d["confidence"].mean(), df) == pytest.approx(0.5)
    out = metrics.seed_average(lambda d: {"lo": d["confidence"].min(), "hi": d["confidence"].max()}, df)
    assert out["lo"] == pytest.approx(0.4) and out["hi"] == pytest.approx(0.6)
    assert metrics.seed_average(lambda d: len(d), df.drop(columns="seed")) == 4  # no seeds: as it is
    with pytest.raises(ValueError, match="seed has missing"):
        metrics.seed_frames(df.assign(seed=[0, None, 1, 1]))


def test_stack_seeds_is_the_inverse_of_seed_frames():
    make = lambda s: pd.DataFrame({"confidence": [0.1 * s, 0.1 * s + 0.05]})  # noqa: E731
    stacked = metrics.stack_seeds(make, (2, 0, 1))
    assert stacked["seed"].tolist() == [2, 2, 0, 0, 1, 1]
    parts = metrics.seed_frames(stacked)  # sorted by seed
    for s, part in zip((0, 1, 2), parts):
        pd.testing.assert_frame_equal(part.reset_index(drop=True), make(s))
    with pytest.raises(ValueError, match="seeds is empty"):
        metrics.stack_seeds(make, ())


def test_decide_averages_a_seeded_method_and_says_how_many_seeds():
    names, good, noise = world()
    rng = np.random.default_rng(3)
    jittered = [good.assign(confidence=np.clip(good["confidence"] + rng.normal(0, 0.05, len(good)), 0, 1), seed=s)
                for s in range(3)]
    frames = {"good": pd.concat(jittered, ignore_index=True), "noise": noise}
    pairs = contrast.all_pairs(names)
    claim = findings.Claim("good beats noise", "contrast set AUC", "good", "noise", "higher")
    row = findings.decide(claim, frames, names, pairs, 1, n=200)
    assert row["seeds"] == 3 and row["verdict at 5%"] == "reproduced"
    each = [findings.decide(claim, {"good": j.drop(columns="seed"), "noise": noise}, names, pairs, 1, n=200)
            for j in jittered]
    assert row["value a"] == pytest.approx(np.mean([e["value a"] for e in each]))
    assert all(e["seeds"] == 1 for e in each)
    full = findings.Claim("good beats noise", "full set AUC", "good", "noise", "higher")
    assert findings.decide(full, frames, names, pairs, 1, n=200)["seeds"] == 3


def test_class_balanced_and_fitted_normalization_claims():
    """A class-balanced contrast AUC resampled with shared questions equals the mean of the improvements' and
    the regressions' AUC (contrast.pair_metrics) on the data; the fitted normalization is the notebook 04 one."""
    names, good, noise = world()
    pairs = contrast.all_pairs(names)
    run = shared_bootstrap.contrast_bootstrap_over_pairs("auc_cb", good, noise, pairs, 1, n=50)
    per_pair = contrast.contrast_metrics_per_pair(good, pairs, min_size=1)
    assert run["value_a"] == pytest.approx(per_pair["auc_cb"].mean())
    fitted = shared_bootstrap.contrast_bootstrap_over_pairs("auc", good, noise, pairs, 1, n=50, normalizer="fitted")
    expected = contrast.contrast_metrics_per_pair(good, pairs, min_size=1, normalizer="fitted")["auc"].mean()
    assert fitted["value_a"] == pytest.approx(expected)
    claim = findings.Claim("good beats noise, class-balanced", "contrast set auc_cb", "good", "noise", "higher")
    row = findings.decide(claim, {"good": good, "noise": noise}, names, pairs, 1, n=200)
    assert row["verdict at 5%"] == "reproduced"
    claim = findings.Claim("good beats noise, fitted", "contrast set AUC", "good", "noise", "higher",
                           normalizer="fitted")
    row = findings.decide(claim, {"good": good, "noise": noise}, names, pairs, 1, n=200)
    assert row["verdict at 5%"] == "reproduced" and "fitted" in row["metric"]
    with pytest.raises(ValueError, match="metric must be"):
        findings.Claim("x", "full set auc_cb", "a", "b", "higher")


@pytest.mark.slow
def test_seeded_adapter_results_stack_one_frame_per_seed():
    from helpers import config

    ck = pipeline.checkpoints.get_checkpoints()
    name = ck.evaluation[-1]
    stacked = pipeline.adapters.seeded_results("test", [name], source="oracle")
    seeds = list(config.adapters().seeds)
    assert len(seeds) >= 2 and sorted(stacked["seed"].unique()) == seeds
    first = pipeline.adapters.adapter_results("test", [name], source="oracle", seed=seeds[0])
    pd.testing.assert_frame_equal(metrics.seed_frames(stacked)[0].reset_index(drop=True), first)
    assert not np.allclose(*[part["confidence"].to_numpy() for part in metrics.seed_frames(stacked)[:2]])


def test_verbalized_seeds_keep_the_settings_seed_as_the_default_entry():
    from helpers import config

    own = config.verbalized().seed
    assert pipeline.verbalized._seed_params(None) == {} and pipeline.verbalized._seed_params(own) == {}
    assert pipeline.verbalized._seed_params(own + 1) == {"seed": own + 1}
    with pytest.raises(ValueError, match="non-negative integer"):
        pipeline.verbalized._seed_params(-1)


def test_cached_findings_name_unknown_methods():
    from helpers.pipeline import claims

    claim = findings.Claim("x beats y", "contrast set AUC", "oracle adapter", "no such method", "higher")
    with pytest.raises(ValueError, match="no such method"):
        claims.decided(claim)
