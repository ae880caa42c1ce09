"""Paper B.7 (notebook 06): the adapters' read-out features across seeds, per evaluation checkpoint
(`helpers.confidence.feature_variance.readout_features` and `seed_variance`), cached per checkpoint."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from helpers.pipeline.adapters import apply_adapter, source_checkpoints, train_adapter
from helpers import config
from helpers.cache.artifacts import register
from helpers.confidence.feature_variance import readout_features, seed_variance
from helpers.pipeline.checkpoints import get_checkpoints, load_per_checkpoint
from helpers.pipeline.decoded import greedy_results
from helpers.world import sums


SOURCES = ("oracle", "multi")  # each checkpoint's own adapters, or the one adapter across the training checkpoints


@register("feature_variance")
def _build_feature_variance(folder: Path, checkpoint: str, source: str) -> pd.DataFrame:
    """Per test question and layer, the variance across adapter seeds of one evaluation checkpoint's read-out
    features."""
    config.set_threads()
    answers = greedy_results("test", [checkpoint]).merge(sums.split("test")[["question_id", "question"]],
                                                         on="question_id")
    per_seed = []
    for seed in config.adapters().seeds:
        adapter = train_adapter(source_checkpoints(_check_source(source), checkpoint), seed)
        model, tokenizer = apply_adapter(adapter, checkpoint)
        per_seed.append(readout_features(model, tokenizer, answers["question"], answers["text"]))
    features = np.stack(per_seed)  # (seeds, n_layer, N, n_embd)
    variance = seed_variance(features)  # (n_layer, N)
    spread = features.var(axis=2, ddof=1).mean(axis=(0, 2))  # (n_layer,): across questions, mean over seeds, features
    return pd.DataFrame({"checkpoint": checkpoint,
                         "question_id": np.tile(answers["question_id"].to_numpy(), len(variance)),
                         "layer": np.repeat(np.arange(1, len(variance) + 1), variance.shape[1]),
                         "variance": variance.ravel(), "spread": np.repeat(spread, variance.shape[1])})


def _check_source(source: str) -> str:
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; use one of {SOURCES}")
    return source


def feature_variance(source: str = "oracle", eval_checkpoints=None) -> pd.DataFrame:
    """Cross-seed feature variance per (checkpoint, question, layer), cached per checkpoint (notebook 06).

    `source`: "oracle" (each checkpoint's own adapters) or "multi" (the multi-checkpoint adapters).
    Columns: checkpoint, question_id, layer (1 = after the first block), variance, spread (the layer's variance
    across questions at that checkpoint, the same on every row of the layer)."""
    _check_source(source)  # an unknown source fails before anything is built
    if len(config.adapters().seeds) < 2:
        raise ValueError("a variance across seeds needs at least two adapter seeds (config.adapters().seeds)")
    return load_per_checkpoint("feature_variance", eval_checkpoints, default=get_checkpoints().evaluation,
                               source=source)
