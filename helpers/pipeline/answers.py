"""A checkpoint's own cached greedy answers, read by a model's "Correct?" read-out
(`helpers.confidence.readout.adapter_confidence`): P(True), the adapters and their ablations."""
from __future__ import annotations


import pandas as pd

from helpers.confidence.readout import COLUMNS, adapter_confidence
from helpers.pipeline.decoded import greedy_results
from helpers.world import sums


def confidence_in_answers(model, tokenizer, checkpoint: str, split: str) -> pd.DataFrame:
    """`checkpoint`'s greedy answers on `split`, with the read-out of `model` as their confidence.

    `model` is the checkpoint itself (P(True)), an adapter on it, or an adapter on another checkpoint's
    weights (the surrogate ablation). Returns the standard frame (COLUMNS)."""
    answers = greedy_results(split, [checkpoint]).merge(sums.split(split)[["question_id", "question"]],
                                                        on="question_id")
    answers["confidence"] = adapter_confidence(model, tokenizer, answers["question"], answers["text"])
    return answers[COLUMNS]
