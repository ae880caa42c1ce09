"""The feature baselines' data and results (notebooks 04, 05): `helpers.confidence.baselines.fit_features`
on the training checkpoints' cached `adapter_train` correctness, applied to the evaluated checkpoints."""
from __future__ import annotations


import pandas as pd

from helpers.confidence.baselines import fit_features
from helpers.confidence.baselines import FeatureBaseline, question_features
from helpers.confidence.readout import COLUMNS
from helpers.pipeline.checkpoints import get_checkpoints
from helpers.pipeline.decoded import greedy_results
from helpers.world import sums


def _labelled(split: str, checkpoints: list[str]) -> pd.DataFrame:
    """Greedy results of `checkpoints` on `split`, with question features and checkpoint index."""
    ck = get_checkpoints()
    res = greedy_results(split, checkpoints)
    questions = sums.split(split).set_index("question_id").loc[res["question_id"]].reset_index()
    feats = question_features(questions)
    feats["checkpoint_index"] = [ck.index(c) for c in res["checkpoint"]]
    return pd.concat([res.reset_index(drop=True), feats], axis=1)


def fit_feature_baseline(use_index: bool = True, train_checkpoints=None) -> FeatureBaseline:
    """`fit_features` on the training checkpoints' (default) `adapter_train` correctness (notebook 05)."""
    ck = get_checkpoints()
    names = ck.validate(train_checkpoints, default=ck.training)
    return fit_features(_labelled("adapter_train", names), use_index)


def _feature_results(split: str, eval_checkpoints, use_index: bool, train_checkpoints) -> pd.DataFrame:
    ck = get_checkpoints()
    names = ck.validate(eval_checkpoints, default=ck.evaluation)
    sums.split(split)  # an unknown split fails here
    baseline = fit_feature_baseline(use_index, train_checkpoints)
    data = _labelled(split, names)
    data["confidence"] = baseline.predict(data)
    return data[COLUMNS]


def checkpoint_index_results(split: str = "test", eval_checkpoints=None, train_checkpoints=None) -> pd.DataFrame:
    """Checkpoint-index baseline: question features + checkpoint index, fitted on training checkpoints (05)."""
    return _feature_results(split, eval_checkpoints, True, train_checkpoints)


def difficulty_results(split: str = "test", eval_checkpoints=None, train_checkpoints=None) -> pd.DataFrame:
    """Difficulty-only baseline: question features alone, the same confidence for every checkpoint (05)."""
    return _feature_results(split, eval_checkpoints, False, train_checkpoints)
