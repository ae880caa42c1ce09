"""Cross-seed feature variance (helpers/confidence/feature_variance.py); its verdict is tested in test_claim_forms."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from helpers.world import lora
from helpers.pipeline.checkpoints import load_checkpoint
from helpers.confidence import adapters as A
from helpers.confidence import feature_variance as F
from helpers import pipeline
from helpers.confidence import readout


def test_last_layer_features_give_the_read_out(ck):
    """The last block's features at the read-out position, through the LM head, are the adapter's confidence."""
    model, tok = load_checkpoint(ck.evaluation[-1])
    model = lora.wrap(model, A.adapter_lora_config())
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    questions, answers = ["What is 3+4?", "What is 12+85?", "What is 7+0?"], ["7", "It is 97.", ""]
    features = F.readout_features(model, tok, questions, answers, batch_size=2)
    assert features.shape == (model.config.n_layer, 3, model.config.n_embd)
    y, n = readout.yes_no_ids(tok)
    head = model.get_base_model().lm_head.weight.detach().double().numpy()
    margin = features[-1] @ (head[y] - head[n])
    read = readout.adapter_confidence(model, tok, questions, answers)
    assert 1 / (1 + np.exp(-margin)) == pytest.approx(read, abs=1e-5)


def test_seed_variance_by_hand():
    features = np.zeros((3, 1, 2, 2))  # seeds, layers, questions, features
    features[:, 0, 0, 0] = [1.0, 2.0, 3.0]  # variance 1 (ddof 1); the question's other feature is constant
    features[:, 0, 1, :] = 5.0  # no variance at all
    assert F.seed_variance(features) == pytest.approx(np.array([[0.5, 0.0]]))
    with pytest.raises(ValueError, match="at least 2 seeds"):
        F.seed_variance(features[:1])


def _frame(grid: np.ndarray, names) -> pd.DataFrame:
    """(questions, checkpoints) variances of one layer as the long frame of feature_variance."""
    q, c = np.meshgrid(np.arange(grid.shape[0]), np.arange(grid.shape[1]), indexing="ij")
    return pd.DataFrame({"checkpoint": np.asarray(names)[c.ravel()], "question_id": q.ravel(), "layer": 1,
                         "variance": grid.ravel()})


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 4), min_size=5, max_size=5), min_size=1, max_size=8))
def test_per_question_correlations_match_scipy(rows):
    grid = np.array(rows, dtype=float)  # small integers: ties happen
    names = ["c0", "c1", "c2", "c3", "c4"]
    got = F.per_question_correlations(_frame(grid, names), names)[1].to_numpy()
    for value, row in zip(got, grid):
        want = spearmanr(np.arange(5), row).statistic if np.ptp(row) > 0 else np.nan
        assert value == pytest.approx(want, nan_ok=True)


def test_per_question_correlations_follow_the_given_order():
    grid = np.array([[1.0, 2.0, 3.0]])
    frame = _frame(grid, ["a", "b", "c"])
    assert F.per_question_correlations(frame, ["a", "b", "c"])[1].iloc[0] == pytest.approx(1.0)
    assert F.per_question_correlations(frame, ["c", "b", "a"])[1].iloc[0] == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="at least 3"):
        F.per_question_correlations(frame, ["a", "b"])
    with pytest.raises(ValueError, match="no rows for checkpoints"):
        F.per_question_correlations(frame, ["a", "b", "z"])


def test_feature_variance_rejects_unknown_sources():
    with pytest.raises(ValueError, match="unknown source"):
        pipeline.feature_variance.feature_variance("everything")
