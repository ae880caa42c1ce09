"""Difficulty, checkpoint-index and GCM baselines (helpers/confidence/baselines.py), in fast mode."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from helpers import artifacts, sums
from helpers.confidence import adapters as A
from helpers.confidence import baselines as B


def test_question_features_count_carries_per_position():
    questions = sums.make_questions("sum", [5, 19, 99, 0], [5, 1, 1, 0])
    feats = B.question_features(questions)
    assert list(feats.columns) == list(B.FEATURES)
    np.testing.assert_array_equal(feats[["carry_1", "carry_10", "carry_100"]].sum(axis=1), questions["n_carries"])
    assert feats["carry_1"].tolist() == [1, 1, 1, 0] and feats["carry_10"].tolist() == [0, 0, 1, 0]


def test_checkpoint_index_baseline_sees_the_index_and_difficulty_does_not(ck):
    with_index = B.checkpoint_index_results("test")
    difficulty = B.difficulty_results("test")
    for frame in (with_index, difficulty):
        assert list(frame.columns) == A.COLUMNS
        assert set(frame["checkpoint"]) == set(ck.evaluation)
        assert frame["confidence"].between(0, 1).all()
    by_question = difficulty.pivot(index="question_id", columns="checkpoint", values="confidence")
    assert (by_question.nunique(axis=1) == 1).all()  # the same number for every checkpoint
    by_question = with_index.pivot(index="question_id", columns="checkpoint", values="confidence")
    assert (by_question.nunique(axis=1) == len(ck.evaluation)).all()  # one number per checkpoint index
    fitted = B.fit_feature_baseline(use_index=True)
    assert "checkpoint_index" in fitted.columns() and fitted.train_checkpoints == ck.training
    # The index is the only thing that differs between these two rows.
    q = B.question_features(sums.split("test").iloc[:1])
    rows = pd.concat([q, q], ignore_index=True).assign(checkpoint_index=[0, len(ck.all) - 1])
    first, last = fitted.predict(rows)
    assert first != last


def test_gcm_never_loads_an_evaluated_checkpoint(ck, monkeypatch):
    import helpers.model as model_module
    from helpers.decoding import greedy_results

    greedy_results("test", list(ck.evaluation))  # the answers being judged (decoding, not the GCM)
    greedy_results("adapter_train", list(ck.training))  # the histories it learns from
    loaded_names, loaded_paths = [], []
    load_checkpoint, load_pretrained = model_module.load_checkpoint, model_module.load_pretrained

    def recording_checkpoint(name):
        loaded_names.append(name)
        return load_checkpoint(name)

    def recording_pretrained(path):
        loaded_paths.append(str(path))
        return load_pretrained(path)

    monkeypatch.setattr(model_module, "load_checkpoint", recording_checkpoint)
    monkeypatch.setattr(model_module, "load_pretrained", recording_pretrained)
    artifacts.build("gcm", seed=0)  # rebuilt even if cached, so the whole path runs
    for name in ck.evaluation:
        artifacts.build("gcm_results", checkpoint=name, split="test", seed=0)
    frame = B.gcm_results("test")
    assert not set(loaded_names) & set(ck.evaluation)
    assert loaded_paths and all("gcm_verifier" in p for p in loaded_paths)
    assert list(frame.columns) == A.COLUMNS and set(frame["checkpoint"]) == set(ck.evaluation)
    assert frame["confidence"].between(0, 1).all()


def test_gcm_verifier_is_its_own_model_trained_on_training_histories(ck):
    from helpers.model import load_checkpoint

    run = B.verifier()
    assert run["steps"] <= B.gcm_settings().max_steps and 0 <= run["test_accuracy"] <= 1
    assert run["reached_target"] == (run["accuracy"] >= B.gcm_settings().target_accuracy)
    model, _ = B.load_verifier()
    assert A.base_weights_hash(model) not in {A.base_weights_hash(load_checkpoint(c)[0]) for c in ck.all}
    gcm = B.train_gcm()
    assert set(gcm.examples["checkpoint"]) == set(ck.training)
    assert set(gcm.examples["question_id"]) <= set(sums.split("adapter_train")["question_id"])


@pytest.mark.parametrize("call, message", [
    (lambda: B.checkpoint_index_results("test", ["step-99999"]), "unknown checkpoint"),
    (lambda: B.difficulty_results("test", []), "no checkpoints"),
    (lambda: B.checkpoint_index_results("tset"), "unknown split"),
    (lambda: B.fit_feature_baseline(train_checkpoints=["nope"]), "unknown checkpoint"),
    (lambda: B.gcm_results("test", ["step-99999"]), "unknown checkpoint"),
    (lambda: B.gcm_results("test", seed=-2), "seed"),
    (lambda: B.question_features(pd.DataFrame()), "empty"),
    (lambda: B.gcm_confidence(pd.DataFrame({"q": [1]})), "question"),
])
def test_bad_inputs_raise_value_errors(ck, call, message):
    with pytest.raises(ValueError, match=message):
        call()
