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
`claims.b7` (`claim_forms.permutation_trend`), which tests the raw variance: the spread is a normalizer taken from
the adapter itself, so it is shown, not tested.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch
from scipy.stats import rankdata

from .readout import over_prompts


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
