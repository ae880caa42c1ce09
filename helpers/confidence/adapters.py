"""Confidence adapters: a LoRA adapter asks a checkpoint "Correct?" about its own answer (notebooks 05, 06).

The read-out (prompt, `Y`/`N` ids, `adapter_confidence`, `confidence_in_answers`) is helpers.confidence.readout.
Only the LoRA weights train, with binary cross-entropy on (question, that checkpoint's greedy answer,
correctness) from `adapter_train`. They can be moved onto another checkpoint's weights (non-oracle) or
trained across several checkpoints at once, each batch through its own checkpoint's weights
(multi-checkpoint, notebook 06). Settings: `config.adapters()`.
"""
from __future__ import annotations

import copy
import time
from typing import Mapping

import numpy as np
import pandas as pd
import torch

from helpers import config
from helpers.world import lora, loop
from .readout import batch_of, encode_rows, margin

# The `config.adapters()` settings training reads (the scoring batch size and the fresh questions' seed
# are read where they are used, so that changing them rebuilds only what they change).
TRAINING_SETTINGS = ("rank", "alpha", "targets", "epochs", "batch_size", "lr")


# ---------------------------------------------------------------------------- training


def adapter_lora_config():
    """The peft LoraConfig of a confidence adapter (rank, alpha and targets from `config.adapters()`)."""
    s = config.adapters()
    return lora.build_config(s.rank, s.alpha, s.targets)


def _batches(examples: pd.DataFrame, batch_size: int, rng: np.random.Generator, by_base: bool) -> list[np.ndarray]:
    """Row positions per batch, in random order; with `by_base`, every batch comes from one base's rows."""
    groups = examples.groupby("base", sort=True).indices if by_base else {None: np.arange(len(examples))}
    batches = []
    for rows in groups.values():
        # Not sorted by length: batches of equal-length prompts train 10% faster but group the answer
        # forms together, and cost 0.04 test AUC (measured on a last checkpoint).
        rows = rng.permutation(rows)
        batches += [rows[i:i + batch_size] for i in range(0, len(rows), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def _batch_loss(model, tokenizer, weights: Mapping[str, torch.Tensor], encoded: Mapping[str, torch.Tensor],
                labels: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
    """Binary cross-entropy of the Y/N log-odds of `rows` (of `encode_rows`) against their labels, through the
    plain GPT-2 `model` run with `weights` (`lora.merged_weights`: a base with the LoRA weights merged in)."""
    log_odds = margin(model, batch_of(encoded, rows), tokenizer, weights)
    return torch.nn.functional.binary_cross_entropy_with_logits(log_odds, labels[torch.as_tensor(rows)])


def _check_examples(examples: pd.DataFrame) -> None:
    if not isinstance(examples, pd.DataFrame) or len(examples) == 0:
        raise ValueError("examples is empty; pass a frame with question, text and label columns")
    missing = {"question", "text", "label"} - set(examples.columns)
    if missing:
        raise ValueError(f"examples lacks columns {sorted(missing)}; see adapter_examples()")


def fit_adapter(model, tokenizer, examples: pd.DataFrame, bases: Mapping[str, Mapping[str, torch.Tensor]] | None = None,
                seed: int = config.SEED, progress: bool = False):
    """Train a fresh LoRA adapter on (question, answer text, label) rows; returns (peft model, log).

    `model` is wrapped in place. With `bases`, each row's `base` column names the weights its batch runs
    through (multi-checkpoint training: the LoRA weights are shared); the returned model holds `model`'s own
    base weights. Settings: `config.adapters()`.
    """
    _check_examples(examples)
    s = config.adapters()
    if bases is not None:
        if "base" not in examples:
            raise ValueError("with `bases`, examples needs a `base` column naming each row's weights")
        unknown = set(examples["base"]) - set(bases)
        if unknown:
            raise ValueError(f"examples name bases {sorted(map(str, unknown))} that `bases` lacks")
    config.set_seed(seed)
    rng = np.random.default_rng([seed, 31])
    # The steps run a plain copy of the model with the LoRA weights merged into its base weights (that base
    # chosen per batch: no weights are swapped in and out of the model), which trains the same LoRA weights
    # as peft's own forward, up to float rounding, in about 0.8 of the time (lora.merged_weights).
    plain = copy.deepcopy(model).requires_grad_(False)
    peft_model = lora.wrap(model, adapter_lora_config())
    factors = lora.lora_factors(peft_model)
    multi = bases is not None
    bases = bases if multi else {None: lora.base_state(peft_model)}
    params = [p for p in peft_model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=s.lr, weight_decay=0.0)
    epochs = [_batches(examples, s.batch_size, rng, by_base=multi) for _ in range(s.epochs)]
    total = sum(map(len, epochs))
    # Encoded once for the whole run, and no pandas inside the loop (both ran once per step before).
    encoded = encode_rows(tokenizer, examples["question"].tolist(), examples["text"].tolist())
    labels = torch.tensor(examples["label"].to_numpy(), dtype=torch.float)
    row_bases = examples["base"].to_numpy() if multi else np.full(len(examples), None)

    def loss(rows: np.ndarray) -> torch.Tensor:
        weights = lora.merged_weights(bases[row_bases[rows[0]]], factors)
        return _batch_loss(plain, tokenizer, weights, encoded, labels, rows)

    start = time.perf_counter()
    steps = loop.train(peft_model, optim, [rows for batches in epochs for rows in batches], loss,
                       scheduler=loop.linear_decay(optim, total), total=total, desc="adapter", progress=progress)
    losses, done = [], 0
    for batches in epochs:  # mean loss per example, epoch by epoch
        seen = 0.0
        for rows, value in zip(batches, steps[done:done + len(batches)]):
            seen += value * len(rows)
        done += len(batches)
        losses.append(seen / len(examples))
    log = {"seconds": time.perf_counter() - start, "loss_per_epoch": losses, "n_examples": len(examples),
           "n_batches": total, "settings": {name: getattr(s, name) for name in TRAINING_SETTINGS}}
    return peft_model, log


# ---------------------------------------------------------------------------- training data


# ---------------------------------------------------------------------------- cached adapters


# ---------------------------------------------------------------------------- cached results


# ---------------------------------------------------------------------------- multi-answer ablation


