"""Cross-seed variance of the confidence adapters' features, layer by layer (paper B.7; notebook 06).

The paper trains each checkpoint's adapter with several seeds and, for every question and layer, takes
the variance across seeds of the adapter's hidden features (within the question, so that how hard the
questions are does not enter); it then correlates that variance with the checkpoint index over the
checkpoints, one correlation per question, and reports their mean and median per layer. Positive
correlations mean later checkpoints leave more room for different confidence features.

Here the features are the residual stream after each transformer block at the read-out position (the
last token of the "Correct?" prompt, where P(`Y`) is read), for every test question with the evaluated
checkpoint's own greedy answer. GPT-2 applies its final layer norm to the last block's output, so the
last layer's features are normalized and the others are not; a correlation compares one layer across
checkpoints, never two layers.

The residual stream's scale differs between checkpoints, so a raw variance can grow only because a checkpoint's
features are larger. Each entry therefore also records the layer's **spread**: the variance of each feature across
the questions, averaged over features and seeds. The cross-seed variance divided by it is scale-free: the seeds'
disagreement as a share of how much the features vary between questions at that checkpoint. The verdict is
`findings.variance_trend`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from scipy.stats import rankdata

from helpers import config
from helpers.world import sums
from helpers.cache.artifacts import register
from helpers.world.checkpoints import get_checkpoints, load_per_checkpoint
from helpers.world.decoding import greedy_results
from . import adapters
from .readout import over_prompts

SOURCES = ("oracle", "multi")  # each checkpoint's own adapters, or the one adapter across the training checkpoints


def readout_features(model, tokenizer, questions: Sequence[str], answers: Sequence[str],
                     batch_size: int | None = None) -> np.ndarray:
    """The hidden state after every transformer block at the read-out position: (n_layer, N, n_embd)."""
    def read(batch):
        # n_layer + 1 of (B, T, n_embd); [0]: embeddings
        hidden = model(**batch, output_hidden_states=True).hidden_states
        return torch.stack([h[:, -1] for h in hidden[1:]]).double()  # left padding: the last column is the read-out
    return torch.cat(over_prompts(model, tokenizer, questions, answers, read, batch_size), dim=1).numpy()


def seed_variance(features: np.ndarray) -> np.ndarray:
    """(seeds, n_layer, N, n_embd) -> (n_layer, N): each question's variance across seeds (ddof 1), mean over
    features."""
    features = np.asarray(features, dtype=float)
    if features.ndim != 4 or features.shape[0] < 2:
        raise ValueError(f"features must be (seeds, layers, questions, features) with at least 2 seeds, "
                         f"got {features.shape}")
    return features.var(axis=0, ddof=1).mean(axis=-1)


@register("feature_variance")
def _build_feature_variance(folder: Path, checkpoint: str, source: str) -> pd.DataFrame:
    """Per test question and layer, the variance across adapter seeds of one evaluation checkpoint's read-out
    features."""
    config.set_threads()
    answers = greedy_results("test", [checkpoint]).merge(sums.split("test")[["question_id", "question"]],
                                                         on="question_id")
    per_seed = []
    for seed in config.adapters().seeds:
        adapter = adapters.train_adapter(adapters.source_checkpoints(_check_source(source), checkpoint), seed)
        model, tokenizer = adapters.apply_adapter(adapter, checkpoint)
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


def per_question_correlations(variance: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """Spearman correlation, per question and layer, between the checkpoints' positions in `order` and the
    question's cross-seed variance at those checkpoints. Rows: question_id; columns: layer."""
    order = list(order)
    if len(order) < 3:
        raise ValueError(f"a rank correlation over checkpoints needs at least 3 of them, got {order}")
    missing = sorted(set(order) - set(variance["checkpoint"]))
    if missing:
        raise ValueError(f"variance has no rows for checkpoints {missing}")
    out = {}
    for layer, part in variance.groupby("layer"):
        grid = part.pivot(index="question_id", columns="checkpoint", values="variance")[order].dropna()
        ranks = rankdata(grid.to_numpy(), axis=1)  # (questions, checkpoints), ties averaged
        x = np.arange(len(order), dtype=float) - (len(order) - 1) / 2
        rc = ranks - ranks.mean(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):  # a question whose variance never changes: no correlation
            rho = (rc @ x) / np.sqrt((rc ** 2).sum(axis=1) * (x ** 2).sum())
        out[int(layer)] = pd.Series(rho, index=grid.index)
    return pd.DataFrame(out).rename_axis(columns="layer")
