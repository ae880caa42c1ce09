"""P(True) (Kadavath et al., 2022): the checkpoint's own zero-shot judgement of its answer (notebook 05).

The checkpoint answers a question; the same weights then read `Correct?` after that answer, and the
confidence is P(`Y`) / (P(`Y`) + P(`N`)) at the next position (`helpers.confidence.readout.adapter_confidence`).
No training at all: the world's training stream holds verification conversations
(`helpers.world.sums.training_batch`), so every checkpoint has learned what `Yes` and `No` mean. A confidence
adapter (`helpers.confidence.adapters.fit_adapter`) starts from exactly this read-out and fine-tunes it.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from helpers import config
from helpers.cache.artifacts import register
from helpers.pipeline.answers import confidence_in_answers
from helpers.pipeline.checkpoints import get_checkpoints, load_checkpoint, load_per_checkpoint
from helpers.world import sums


@register("p_true")
def _build_p_true(folder: Path, checkpoint: str, split: str) -> pd.DataFrame:
    """One checkpoint's P(True) in its own greedy answers on one split."""
    config.set_threads()
    model, tokenizer = load_checkpoint(checkpoint)
    return confidence_in_answers(model, tokenizer, checkpoint, split)


def p_true_results(split: str = "test", checkpoints=None) -> pd.DataFrame:
    """Each checkpoint's zero-shot P(True) in its own greedy answers (default: the evaluation checkpoints)."""
    sums.split(split)  # an unknown split fails here
    return load_per_checkpoint("p_true", checkpoints, default=get_checkpoints().evaluation, split=split)
