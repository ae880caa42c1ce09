"""The GCM (generalized correctness model; notebook 05): its verifier's run and rungs (`gcm_verifier`,
trained by `helpers.confidence.baselines.train_verifier`), the verifier's own answers, the GCM's adapter on it
(`gcm`, trained by `helpers.confidence.fit_adapter`) and its confidence in the evaluation checkpoints'
answers (`gcm_results`). Settings: `config.gcm()`."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from helpers.pipeline.verifier import load_verifier, validate_rung
from helpers.confidence.adapters import fit_adapter
from helpers.pipeline.adapters import Adapter, adapter_examples, validate_seed
from helpers import config
from helpers.cache import artifacts
from helpers.cache.artifacts import register
from helpers.confidence.readout import COLUMNS, adapter_confidence
from helpers.pipeline.checkpoints import get_checkpoints
from helpers.pipeline.decoded import greedy_results
from helpers.world import lora, sums


def gcm_examples(seed: int = config.SEED) -> pd.DataFrame:
    """The GCM's training rows: training checkpoints' own answers on `adapter_train`, with correctness.

    Every row runs through the verifier's weights; `checkpoint` only says whose answer it is.
    """
    rows = adapter_examples(list(get_checkpoints().training), config.gcm().n_examples, seed=seed)
    return rows.drop(columns="base")


@register("gcm")
def _build_gcm(folder: Path, seed: int, rung="median") -> dict:
    """The GCM: a LoRA adapter on the verifier at `rung`, trained on the training checkpoints' histories."""
    config.set_threads()
    examples = gcm_examples(seed)
    model, tokenizer = load_verifier(rung)
    peft_model, log = fit_adapter(model, tokenizer, examples, seed=seed)
    lora.save(peft_model, folder / "lora", "gcm_verifier", save_embedding_layers=False)
    return {"examples": examples[["checkpoint", "question_id", "source", "correct", "label"]], "log": log}


def train_gcm(seed: int = config.SEED, rung=None) -> Adapter:
    """The cached GCM adapter (LoRA on the verifier at `rung`, default the shipped one); trains on first use."""
    params = {"seed": validate_seed(seed), "rung": validate_rung(rung)}
    stored = artifacts.load_or_build("gcm", **params)
    examples = stored["examples"]
    return Adapter(folder=artifacts.folder("gcm", **params) / "lora",
                            checkpoints=tuple(examples["checkpoint"].unique()), seed=params["seed"],
                            examples=examples, log=stored["log"])


def load_gcm(seed: int = config.SEED, rung=None):
    """(peft model, tokenizer): the verifier with the GCM's LoRA weights. No checkpoint weights at all."""
    gcm = train_gcm(seed, rung)
    base, tokenizer = load_verifier(rung)
    return lora.attach(base, gcm.folder), tokenizer


def gcm_confidence(answers: pd.DataFrame, seed: int = config.SEED, rung=None) -> np.ndarray:
    """The GCM's P(correct) for rows with `question` and `text` (an answer frame, not a model).

    The GCM reads only (question, answer text), so each distinct pair is scored once: checkpoints that give
    the same answer to a question (most of them, on most questions) share its confidence."""
    if not isinstance(answers, pd.DataFrame) or not {"question", "text"} <= set(answers.columns):
        raise ValueError("answers must be a frame with `question` and `text` columns")
    pairs = answers[["question", "text"]]
    unique = pairs.drop_duplicates(ignore_index=True)
    model, tokenizer = load_gcm(seed, rung)
    unique["confidence"] = adapter_confidence(model, tokenizer, unique["question"], unique["text"])
    return pairs.merge(unique, on=["question", "text"], how="left")["confidence"].to_numpy()


@register("gcm_results")
def _build_gcm_results(folder: Path, split: str, seed: int, rung="median") -> pd.DataFrame:
    """The GCM's confidence in every evaluation checkpoint's greedy answers: it reads the answers, not the
    weights. One entry for all of them, so that an answer several checkpoints give is scored once."""
    config.set_threads()
    answers = greedy_results(split, list(get_checkpoints().evaluation))
    answers = answers.merge(sums.split(split)[["question_id", "question"]], on="question_id")
    answers["confidence"] = gcm_confidence(answers, seed, rung)
    return answers[COLUMNS]


def gcm_results(split: str = "test", eval_checkpoints=None, seed: int = config.SEED, rung=None) -> pd.DataFrame:
    """GCM confidence in each evaluated checkpoint's greedy answers: the standard frame (notebook 05).

    `rung`: the verifier's rung (RUNGS or a rung's step; default the shipped one)."""
    sums.split(split)  # an unknown split fails here, before anything is trained
    ck = get_checkpoints()
    names = ck.validate(eval_checkpoints, default=ck.evaluation)
    outside = sorted(set(names) - set(ck.evaluation))
    if outside:
        raise ValueError(f"the GCM scores the evaluation checkpoints' answers; {outside} are not among them")
    frame = artifacts.load_or_build("gcm_results", split=split, seed=validate_seed(seed),
                                    rung=validate_rung(rung))
    return frame[frame["checkpoint"].isin(names)].reset_index(drop=True)
