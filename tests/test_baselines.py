"""Difficulty, checkpoint-index and GCM baselines (helpers/confidence/baselines.py), in fast mode."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers.cache import artifacts
from helpers import config
from helpers.world import lora, sums
from helpers.pipeline.checkpoints import get_checkpoints
from helpers.pipeline.checkpoints import load_checkpoint
from helpers.confidence import baselines as B
from helpers import pipeline
from helpers.confidence import readout


def test_question_features_count_carries_per_position():
    questions = sums.make_questions("sum", [5, 19, 99, 0], [5, 1, 1, 0])
    feats = B.question_features(questions)
    assert list(feats.columns) == list(B.FEATURES)
    np.testing.assert_array_equal(feats[["carry_1", "carry_10", "carry_100"]].sum(axis=1), questions["n_carries"])
    assert feats["carry_1"].tolist() == [1, 1, 1, 0] and feats["carry_10"].tolist() == [0, 0, 1, 0]


def test_checkpoint_index_baseline_sees_the_index_and_difficulty_does_not(ck):
    with_index = pipeline.baselines.checkpoint_index_results("test")
    difficulty = pipeline.baselines.difficulty_results("test")
    for frame in (with_index, difficulty):
        assert list(frame.columns) == readout.COLUMNS
        assert set(frame["checkpoint"]) == set(ck.evaluation)
        assert frame["confidence"].between(0, 1).all()
    by_question = difficulty.pivot(index="question_id", columns="checkpoint", values="confidence")
    assert (by_question.nunique(axis=1) == 1).all()  # the same number for every checkpoint
    by_question = with_index.pivot(index="question_id", columns="checkpoint", values="confidence")
    assert (by_question.nunique(axis=1) == len(ck.evaluation)).all()  # one number per checkpoint index
    fitted = pipeline.baselines.fit_feature_baseline(use_index=True)
    assert "checkpoint_index" in fitted.columns() and fitted.train_checkpoints == ck.training
    # The index is the only thing that differs between these two rows.
    q = B.question_features(sums.split("test").iloc[:1])
    rows = pd.concat([q, q], ignore_index=True).assign(checkpoint_index=[0, len(ck.all) - 1])
    first, last = fitted.predict(rows)
    assert first != last


def test_gcm_never_loads_an_evaluated_checkpoint(ck, monkeypatch, tmp_path):
    import helpers.world.model as model_module
    from helpers.pipeline.decoded import greedy_results

    greedy_results("test", list(ck.evaluation))  # the answers being judged (decoding, not the GCM)
    greedy_results("adapter_train", list(ck.training))  # the histories it learns from
    pipeline.verifier.verifier()  # the verifier's own run, from scratch (it loads no model)
    loaded, original = [], model_module.GPT2LMHeadModel

    class Recording(original):
        """Every model the series loads goes through helpers.world.model.load_pretrained, hence through here."""

        @classmethod
        def from_pretrained(cls, path, *args, **kwargs):
            loaded.append(Path(path))
            return original.from_pretrained(path, *args, **kwargs)

    monkeypatch.setattr(model_module, "GPT2LMHeadModel", Recording)
    # The builders themselves, into a scratch folder: the whole path runs, whatever the cache holds.
    artifacts.REGISTRY["gcm"].build(tmp_path, seed=0)
    artifacts.REGISTRY["gcm_results"].build(tmp_path, split="test", seed=0)
    frame = pipeline.gcm.gcm_results("test")
    assert loaded and all("gcm_verifier" in path.parts for path in loaded)
    assert not {path.name for path in loaded} & set(ck.evaluation)
    assert list(frame.columns) == readout.COLUMNS and set(frame["checkpoint"]) == set(ck.evaluation)
    assert frame["confidence"].between(0, 1).all()


def test_gcm_verifier_is_its_own_model_trained_on_training_histories(ck):
    run = pipeline.verifier.verifier()
    g, strongest = config.gcm(), float(pipeline.verifier.evaluation_accuracies().max())
    assert run["steps"] <= g.max_steps and 0 <= run["test_accuracy"] <= 1
    assert run["reached_target"] == (run["accuracy"] >= strongest + g.stop_margin)
    # bounded: it stops at its first check at or above the strongest checkpoint, or at the cap
    log = run["log"]
    assert log["step"].tolist() == list(range(g.check_every, run["steps"] + 1, g.check_every)) or \
        run["steps"] == g.max_steps
    assert (log["accuracy"].iloc[:-1] < strongest + g.stop_margin).all()
    assert run["rungs"] == B.ladder_rungs(log, run["evaluation_accuracies"])
    assert run["test_accuracy"] == run["rung_test_accuracy"][g.shipped_rung]
    model, _ = pipeline.verifier.load_verifier()
    assert lora.base_weights_hash(model) not in {lora.base_weights_hash(load_checkpoint(c)[0]) for c in ck.all}
    gcm = pipeline.gcm.train_gcm()
    assert set(gcm.examples["checkpoint"]) == set(ck.training)
    assert set(gcm.examples["question_id"]) <= set(sums.split("adapter_train")["question_id"])


@pytest.mark.parametrize("call, message", [
    (lambda: pipeline.baselines.checkpoint_index_results("test", ["step-99999"]), "unknown checkpoint"),
    (lambda: pipeline.baselines.difficulty_results("test", []), "no checkpoints"),
    (lambda: pipeline.baselines.checkpoint_index_results("tset"), "unknown split"),
    (lambda: pipeline.baselines.fit_feature_baseline(train_checkpoints=["nope"]), "unknown checkpoint"),
    (lambda: pipeline.gcm.gcm_results("test", ["step-99999"]), "unknown checkpoint"),
    (lambda: pipeline.gcm.gcm_results("test", seed=-2), "seed"),
    (lambda: pipeline.gcm.gcm_results("test", rung="middle"), "rung"),
    (lambda: pipeline.gcm.gcm_results("test", [get_checkpoints().training[0]]), "not among them"),
    (lambda: B.question_features(pd.DataFrame()), "empty"),
    (lambda: pipeline.gcm.gcm_confidence(pd.DataFrame({"q": [1]})), "question"),
])
def test_bad_inputs_raise_value_errors(ck, call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_feature_baselines_on_checkpoints_that_know_no_sum_warn_and_give_a_constant(ck, monkeypatch):
    """A world whose training checkpoints answer nothing right (seen in a fast-mode sweep run) gets a baseline
    that says so and predicts 0 for every question, instead of a crash in notebooks 00, 04 and 05."""
    labelled = pipeline.baselines._labelled
    monkeypatch.setattr(pipeline.baselines, "_labelled",
                        lambda split, names: labelled(split, names).assign(correct=False))
    for use_index in (True, False):
        with pytest.warns(UserWarning, match="answer none of their adapter_train questions right"):
            fitted = pipeline.baselines.fit_feature_baseline(use_index=use_index)
        frame = labelled("test", list(ck.evaluation))
        assert np.array_equal(fitted.predict(frame), np.zeros(len(frame)))
    monkeypatch.setattr(pipeline.baselines, "_labelled",
                        lambda split, names: labelled(split, names).assign(correct=True))
    with pytest.warns(UserWarning, match="answer all of"):
        assert np.array_equal(pipeline.baselines.fit_feature_baseline().predict(frame), np.ones(len(frame)))


def test_ladder_rungs_follow_the_stated_rule_on_a_log_by_hand():
    log = pd.DataFrame({"step": [100, 200, 300, 400, 500, 600],
                        "accuracy": [0.10, 0.60, 0.66, 0.80, 0.90, 0.93]})
    evaluation = [0.66, 0.70, 0.78, 0.85, 0.92]  # median 0.78
    # weak: last save at or below 0.66 (300, equal counts); median: nearest 0.78 (400); strong: first >= 0.92
    assert B.ladder_rungs(log, evaluation) == {"weak": 300, "median": 400, "strong": 600}
    # a run that hit its cap below the strongest: strong is its last save; none at or below the weakest: the first
    capped = pd.DataFrame({"step": [100, 200], "accuracy": [0.70, 0.75]})
    assert B.ladder_rungs(capped, evaluation) == {"weak": 100, "median": 200, "strong": 200}
    tie = pd.DataFrame({"step": [100, 200], "accuracy": [0.76, 0.80]})  # both 0.02 from the median: the earlier
    assert B.ladder_rungs(tie, evaluation)["median"] == 100
    with pytest.raises(ValueError, match="empty"):
        B.ladder_rungs(log.iloc[:0], evaluation)


def test_every_rung_is_a_loadable_save_and_bad_rungs_raise(ck):
    run = pipeline.verifier.verifier()
    for rung in B.RUNGS:
        assert pipeline.verifier.rung_step(rung) == run["rungs"][rung]
    assert pipeline.verifier.rung_step(None) == run["rungs"][config.gcm().shipped_rung]
    weak = run["rungs"]["weak"]  # a rung's save, by its step
    model, _ = pipeline.verifier.load_verifier(weak)
    assert "gcm_verifier" in str(model.name_or_path) and f"step-{weak:05d}" in str(model.name_or_path)
    for bad in ("middle", 0, True, 1.5):
        with pytest.raises(ValueError, match="rung"):
            pipeline.verifier.validate_rung(bad)
    with pytest.raises(ValueError, match="saves of its rungs only"):
        pipeline.verifier.rung_step(weak + 1)
    kept = sorted(int(p.name.split("-")[1]) for p in (artifacts.folder("gcm_verifier") / "saves").iterdir())
    assert kept == sorted(set(run["rungs"].values()))  # the other saves are not kept
    assert pipeline.verifier.verifier_correct("test").index.is_unique


def test_gcm_confidence_scores_each_distinct_answer_once(ck, monkeypatch):
    calls = []
    monkeypatch.setattr(pipeline.gcm, "adapter_confidence",
                        lambda m, t, q, a: calls.append(len(q)) or np.arange(len(q)) / 10)
    answers = pd.DataFrame({"question": ["1+1", "1+1", "2+2", "1+1"], "text": ["2", "3", "4", "2"]})
    assert pipeline.gcm.gcm_confidence(answers).tolist() == [0.0, 0.1, 0.2, 0.0] and calls == [3]
