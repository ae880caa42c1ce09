"""Notebook 06's multi-answer ablation: one adapter trained on several beam answers per question of one
checkpoint (more views of one checkpoint's knowledge, instead of more checkpoints)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from helpers import config
from helpers.cache import artifacts
from helpers.cache.artifacts import register
from helpers.confidence.adapters import fit_adapter
from helpers.confidence.readout import COLUMNS, adapter_confidence
from helpers.pipeline.adapters import validate_seed
from helpers.pipeline.checkpoints import get_checkpoints, load_checkpoint
from helpers.pipeline.decoded import beam_results, greedy_results
from helpers.world import lora, sums


def multi_answer_examples(checkpoint: str, answers_per_question: int = 3) -> pd.DataFrame:
    """Several beam answers per `adapter_train` question, all from one checkpoint (notebook 06's ablation).

    Each distinct number among the checkpoint's ended beams (best beam's wording first, up to
    `answers_per_question`) becomes a row labelled by its correctness: more views of one checkpoint's
    knowledge, instead of more checkpoints. Uses the questions self-consistency decoded with beams.
    """
    if answers_per_question < 1:
        raise ValueError(f"answers_per_question must be >= 1, got {answers_per_question}")
    beams = beam_results("adapter_train", get_checkpoints().validate([checkpoint]))
    beams = beams[beams["ended"] & beams["answer"].notna()]
    rows = beams.drop_duplicates(["question_id", "answer"]).groupby("question_id", sort=False).head(
        answers_per_question)
    rows = rows.merge(sums.split("adapter_train")[["question_id", "question"]], on="question_id")
    rows = rows.assign(checkpoint=checkpoint, base=checkpoint, label=rows["correct"].astype(float), source="beams")
    return rows[["checkpoint", "base", "question_id", "question", "text", "correct", "label", "source"]].reset_index(
        drop=True)


@register("multi_answer_adapter")
def _build_multi_answer(folder: Path, checkpoint: str, seed: int) -> dict:
    """An adapter trained on several beam answers per question of one checkpoint, scored on every evaluation
    checkpoint."""
    config.set_threads()
    examples = multi_answer_examples(checkpoint)
    model, tokenizer = load_checkpoint(checkpoint)
    peft_model, log = fit_adapter(model, tokenizer, examples, seed=seed)
    lora.save(peft_model, folder / "lora", checkpoint, save_embedding_layers=False)
    questions = sums.split("test")[["question_id", "question"]]
    frames = []
    for name in get_checkpoints().evaluation:
        scored, tok = load_checkpoint(name)
        scored = lora.attach(scored, folder / "lora").merge_and_unload()  # merged: see _build_adapter_results
        answers = greedy_results("test", [name]).merge(questions, on="question_id")
        answers["confidence"] = adapter_confidence(scored, tok, answers["question"], answers["text"])
        frames.append(answers[COLUMNS])
    return {"examples": examples, "log": log, "results": pd.concat(frames, ignore_index=True)}


def multi_answer_results(checkpoint: str, seed: int = config.SEED) -> pd.DataFrame:
    """The multi-answer adapter's confidence in the evaluation checkpoints' test answers (cached)."""
    name = get_checkpoints().validate([checkpoint])[0]
    return artifacts.load_or_build("multi_answer_adapter", checkpoint=name, seed=validate_seed(seed))["results"]
