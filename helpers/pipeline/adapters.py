"""The cached confidence adapters and their results (notebooks 05, 06): which rows an adapter trains on
(`adapter_examples`), the `adapter` entry (trained by `helpers.confidence.adapters.fit_adapter`), and its
confidence in the evaluated checkpoints' answers (`adapter_results`, `seeded_results`)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from helpers import config
from helpers.cache import artifacts
from helpers.cache.artifacts import register
from helpers.confidence.adapters import fit_adapter
from helpers.evaluation import metrics
from helpers.pipeline.answers import confidence_in_answers
from helpers.pipeline.checkpoints import get_checkpoints, load_checkpoint
from helpers.pipeline.decoded import greedy_results
from helpers.world import lora, sums
from helpers.world.decoding import greedy


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
    `metrics.seed_average`, `shared_bootstrap.over_seeds`)."""
    return metrics.stack_seeds(lambda s: adapter_results(split, eval_checkpoints, source, validate_seed(s), **kwargs),
                               config.adapters().seeds if seeds is None else seeds)


