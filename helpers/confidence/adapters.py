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
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import pandas as pd
import torch

from helpers.cache import artifacts
from helpers import config
from helpers.world import lora, loop, sums
from helpers.evaluation import metrics
from helpers.cache.artifacts import register
from helpers.world.checkpoints import get_checkpoints, load_checkpoint
from helpers.world.decoding import greedy, greedy_results
from .readout import (COLUMNS, NO, VERIFY, YES, adapter_confidence, confidence_in_answers,  # noqa: F401 (re-exported)
                      batch_of, encode_rows, encode_verification, margin, verification_prompt, yes_no_ids,
                      yes_no_logits)
from .self_consistency import beam_results

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
        # forms together, and cost 0.04 test AUC (measured on an earlier world's last checkpoint).
        rows = rng.permutation(rows)
        batches += [rows[i:i + batch_size] for i in range(0, len(rows), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def _batch_loss(model, tokenizer, weights: Mapping[str, torch.Tensor], encoded: Mapping[str, torch.Tensor],
                labels: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
    """Binary cross-entropy of the Y/N log-odds of `rows` (of `encode_rows`) against their labels, through the
    plain GPT-2 `model` run with `weights` (`lora.merged_weights`: a base with the LoRA weights merged in)."""
    batch = batch_of(encoded, rows)
    logits = torch.func.functional_call(model, dict(weights), args=(), kwargs=dict(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=batch["position_ids"],
        logits_to_keep=1)).logits[:, -1]
    y, n = yes_no_ids(tokenizer)
    return torch.nn.functional.binary_cross_entropy_with_logits(logits[:, y] - logits[:, n],
                                                                labels[torch.as_tensor(rows)])


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


def _named(checkpoints) -> list[str]:
    """The checkpoints an adapter trains on: `Checkpoints.validate`, without its default (all of them)."""
    if checkpoints is None:
        raise ValueError(f"no checkpoints given; choose from {list(get_checkpoints().all)}")
    return get_checkpoints().validate(checkpoints)


def fresh_pool(n: int) -> pd.DataFrame:
    """n extra canonical questions outside every evaluation split (the same ones for every checkpoint)."""
    return sums.fresh_questions(np.random.default_rng([config.SEED, config.adapters().fresh_seed]), n)


def checkpoint_examples(checkpoint: str, n: int | None = None) -> pd.DataFrame:
    """A checkpoint's greedy answers and correctness on `adapter_train` (topped up with fresh questions).

    Columns: checkpoint, question_id, question, text, correct, source ("adapter_train" or "fresh").
    Never uses `test`: fresh questions avoid every evaluation split.
    """
    train = sums.split("adapter_train")
    n = len(train) if n is None else int(n)
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    own = greedy_results("adapter_train", [checkpoint]).merge(train[["question_id", "question"]], on="question_id")
    own = own.iloc[:n].assign(source="adapter_train")
    if n > len(own):
        pool = fresh_pool(n - len(own))
        model, tokenizer = load_checkpoint(checkpoint)
        extra = greedy(model, tokenizer, pool, progress=False)
        extra = extra.merge(pool[["question_id", "question"]], on="question_id")
        own = pd.concat([own, extra.assign(checkpoint=checkpoint, source="fresh")], ignore_index=True)
    return own[["checkpoint", "question_id", "question", "text", "correct", "source"]].reset_index(drop=True)


def adapter_examples(checkpoints, n_examples: int | None = None, random_labels: str | None = None,
                     seed: int = config.SEED) -> pd.DataFrame:
    """The training rows of an adapter: each checkpoint's own answers, labelled by their correctness.

    Several checkpoints share `n_examples` (default: all of `adapter_train` each) and see the same
    questions. `random_labels` names one of them whose labels are permuted (notebook 06's ablation).
    Columns: checkpoint, base, question_id, question, text, correct, label, source.
    """
    names = _named(checkpoints)
    if random_labels is not None and random_labels not in names:
        raise ValueError(f"random_labels={random_labels!r} is not among the adapter's checkpoints {names}")
    if n_examples is not None and n_examples < len(names):
        raise ValueError(f"n_examples={n_examples} is fewer than one example per checkpoint ({len(names)})")
    shares = [None] * len(names)  # None: all of adapter_train
    if n_examples is not None:
        shares = np.diff(np.linspace(0, n_examples, len(names) + 1).round().astype(int)).tolist()
    parts = []
    for name, share in zip(names, shares):
        part = checkpoint_examples(name, share)
        label = part["correct"].to_numpy()
        if name == random_labels:
            label = np.random.default_rng([seed, 47]).permutation(label)
        parts.append(part.assign(base=name, label=label.astype(float)))
    cols = ["checkpoint", "base", "question_id", "question", "text", "correct", "label", "source"]
    return pd.concat(parts, ignore_index=True)[cols]


# ---------------------------------------------------------------------------- cached adapters


@dataclass(frozen=True)
class Adapter:
    """A trained, cached adapter: its LoRA folder, what it was trained on, and the training log."""

    folder: Path  # peft save_pretrained output (LoRA weights only)
    checkpoints: tuple[str, ...]
    seed: int
    examples: pd.DataFrame
    log: dict


def validate_seed(seed) -> int:
    """`seed` as an int, or a ValueError saying what a seed must be."""
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _adapter_params(checkpoints, seed: int, n_examples: int | None, random_labels: str | None) -> dict:
    """Artifact parameters; options at their defaults are left out, so equal adapters share an entry."""
    seed = validate_seed(seed)
    ck = get_checkpoints()
    names = sorted(_named(checkpoints), key=ck.index)  # "b+a" is the same adapter as "a+b"
    if random_labels is not None and random_labels not in names:
        raise ValueError(f"random_labels={random_labels!r} is not among the adapter's checkpoints {names}")
    if n_examples is not None and (not isinstance(n_examples, (int, np.integer)) or n_examples < len(names)):
        raise ValueError(f"n_examples must be an integer, at least one per checkpoint ({len(names)}); "
                         f"got {n_examples!r}")
    params = {"checkpoints": "+".join(names), "seed": seed}
    if n_examples is not None:
        params["n_examples"] = int(n_examples)
    if random_labels is not None:
        params["random_labels"] = random_labels
    return params


@register("adapter")
def _build_adapter(folder: Path, checkpoints: str, seed: int, n_examples: int | None = None,
                   random_labels: str | None = None) -> dict:
    """A LoRA confidence adapter trained on one or several checkpoints' own answers."""
    config.set_threads()
    names = checkpoints.split("+")
    examples = adapter_examples(names, n_examples, random_labels, seed)
    model, tokenizer = load_checkpoint(names[0])
    bases = {name: lora.base_state(load_checkpoint(name)[0]) for name in names} if len(names) > 1 else None
    peft_model, log = fit_adapter(model, tokenizer, examples, bases, seed)
    lora.save(peft_model, folder / "lora", names[0], save_embedding_layers=False)
    keep = ["checkpoint", "question_id", "source", "correct", "label"]
    return {"examples": examples[keep], "log": log}


def train_adapter(checkpoints, seed: int = config.SEED, n_examples: int | None = None,
                  random_labels: str | None = None) -> Adapter:
    """The cached adapter trained on `checkpoints` (notebooks 05, 06); trains it on first use.

    `checkpoints`: one name (the per-checkpoint adapter), or several (a list or "a+b") for one adapter
    trained across them, each batch through its own checkpoint's weights. `n_examples` is the total
    number of training rows (default: every `adapter_train` question once per checkpoint; more than that
    adds fresh questions answered by the checkpoint: the single-checkpoint-data ablation).
    `random_labels` names the checkpoint whose labels are shuffled.
    """
    params = _adapter_params(checkpoints, seed, n_examples, random_labels)
    stored = artifacts.load_or_build("adapter", **params)
    return Adapter(folder=artifacts.folder("adapter", **params) / "lora",
                   checkpoints=tuple(params["checkpoints"].split("+")), seed=params["seed"],
                   examples=stored["examples"], log=stored["log"])


def apply_adapter(adapter, target_checkpoint: str):
    """(peft model, tokenizer): `target_checkpoint`'s own base weights with the adapter's LoRA weights.

    `adapter` is an `Adapter` or the checkpoint name(s) it was trained on (default seed). Applying it to
    another checkpoint than its own is the non-oracle setting; the LoRA weights move, the base does not.
    """
    if not isinstance(adapter, Adapter):
        adapter = train_adapter(adapter)
    target = get_checkpoints().validate([target_checkpoint])[0]
    base, tokenizer = load_checkpoint(target)
    return lora.attach(base, adapter.folder), tokenizer


# ---------------------------------------------------------------------------- cached results


SOURCES = ("oracle", "multi", "<checkpoint>", "<checkpoint>+<checkpoint>...")


def source_checkpoints(source, evaluated: str) -> str:
    """The adapter's checkpoints ("a+b") for a source spec and one evaluated checkpoint (also used by
    `feature_variance`)."""
    ck = get_checkpoints()
    if isinstance(source, str) and source == "oracle":
        return evaluated
    if isinstance(source, str) and source == "multi":
        return "+".join(ck.training)
    try:
        return "+".join(_named(source))
    except (ValueError, TypeError) as err:
        raise ValueError(f"unknown adapter source {source!r}; use one of {SOURCES} "
                         f"(checkpoints: {list(ck.all)})") from err


@register("adapter_results")
def _build_adapter_results(folder: Path, checkpoint: str, split: str, source: str, seed: int,
                           n_examples: int | None = None, random_labels: str | None = None,
                           surrogate: bool = False) -> pd.DataFrame:
    """An adapter's confidence in one checkpoint's greedy answers on one split."""
    config.set_threads()
    adapter = train_adapter(source, seed, n_examples, random_labels)
    model, tokenizer = apply_adapter(adapter, source if surrogate else checkpoint)
    # Scored with the LoRA weights merged into the base (W + scale·BA, same function up to float rounding):
    # peft's separate LoRA path was about half of a scoring pass of the tiny model (measured).
    return confidence_in_answers(model.merge_and_unload(), tokenizer, checkpoint, split)


def adapter_results(split: str = "test", eval_checkpoints=None, source="oracle", seed: int = config.SEED,
                    n_examples: int | None = None, random_labels: str | None = None,
                    surrogate: bool = False) -> pd.DataFrame:
    """Adapter confidence in each evaluated checkpoint's greedy answers: the standard long frame.

    `source`: "oracle" (each checkpoint's own adapter), "multi" (one adapter across every training
    checkpoint), a checkpoint name (its adapter, moved onto each evaluated checkpoint: non-oracle), or
    several names ("a+b" or a list). `surrogate=True` leaves a single-checkpoint adapter on its own
    checkpoint's weights to score the evaluated checkpoint's answers (notebook 05's ablation).
    `eval_checkpoints` defaults to the evaluation checkpoints. Cached per checkpoint (notebooks 05, 06).
    """
    ck = get_checkpoints()
    names = ck.validate(eval_checkpoints, default=ck.evaluation)
    sums.split(split)  # an unknown split fails here, before anything is trained
    if surrogate and (source in ("oracle", "multi") or len(source_checkpoints(source, names[0]).split("+")) > 1):
        raise ValueError("surrogate=True needs a single training checkpoint as source, e.g. source='step-01800'")
    frames = []
    for name in names:  # the adapter's parameters depend on the evaluated checkpoint (oracle)
        params = _adapter_params(source_checkpoints(source, name), seed, n_examples, random_labels)
        params = {"checkpoint": name, "split": split, "source": params.pop("checkpoints"), **params}
        if surrogate:
            params["surrogate"] = True
        frames.append(artifacts.load_or_build("adapter_results", **params))
    return pd.concat(frames, ignore_index=True)


def seeded_results(split: str = "test", eval_checkpoints=None, source="oracle", seeds=None, **kwargs) -> pd.DataFrame:
    """`adapter_results` once per seed (default `config.adapters().seeds`), stacked with a ``seed`` column.

    Metrics of such a frame average over its seeds and its bootstrap covers them (paper A.8.1;
    `metrics.seed_average`, `shared_bootstrap.over_seeds`). Used by `comparison` and notebooks 05, 06."""
    return metrics.stack_seeds(lambda s: adapter_results(split, eval_checkpoints, source, validate_seed(s), **kwargs),
                               config.adapters().seeds if seeds is None else seeds)


def transfer_grid() -> list[str]:
    """The checkpoints of notebook 06's transfer matrix: the last training checkpoint, then the first, middle
    and last evaluation checkpoints (each adapter trained on one is scored on every one)."""
    ck = get_checkpoints()
    return list(dict.fromkeys([ck.training[-1], ck.evaluation[0], ck.evaluation[len(ck.evaluation) // 2],
                               ck.evaluation[-1]]))


def notebook06_results() -> dict[str, Callable[[], object]]:
    """What notebook 06 reads beyond the results tables, as independent build tasks (`python -m helpers build`):
    the transfer matrix (one task per trained checkpoint), random labels, domain transfer and exercise 1.
    The checkpoints are looked up when a task runs, after the world stage."""
    def transfer_from(i: int) -> list:
        grid = transfer_grid()
        return [seeded_results("test", [b], source=grid[i]) for b in grid] if i < len(grid) else []

    def random_labels() -> list:
        first, second = get_checkpoints().training[-2:]
        return [seeded_results("test", [first, second], source=[first, second], **kw)
                for kw in ({}, {"random_labels": second})]

    def domain_transfer() -> list:
        ck = get_checkpoints()
        return [seeded_results(split, ck.evaluation, source=source)
                for split in ("test", "transfer_test") for source in ("oracle", ck.training[-1])]

    return {**{f"transfer matrix row {i + 1}": (lambda i=i: transfer_from(i)) for i in range(4)},
            "random labels": random_labels, "domain transfer": domain_transfer,
            "two training checkpoints":
                lambda: seeded_results("test", None, source=list(get_checkpoints().training[-2:]))}


# ---------------------------------------------------------------------------- multi-answer ablation


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
