"""The cached verbalized-confidence adapters and their readouts (notebook 03): the targets (`verbalized_targets`),
the adapters (`verbalized_adapter`, trained by `helpers.confidence.verbalized.fit_verbalized_adapter`), both
readouts of the test answers (`verbalized`) and of every phrasing (`verbalized_rephrasings`)."""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pandas as pd

from helpers import config
from helpers.cache import artifacts
from helpers.cache.artifacts import register
from helpers.confidence.verbalized import fit_verbalized_adapter, make_targets
from helpers.confidence.verbalized_readout import read_confidence
from helpers.evaluation import metrics
from helpers.pipeline.checkpoints import get_checkpoints, load_checkpoint
from helpers.world import decoding, lora, sums


def _one(name) -> str:
    """A single selected checkpoint's name, or a ValueError."""
    return get_checkpoints().validate([name])[0]


def _train_questions() -> pd.DataFrame:
    return sums.split("adapter_train").iloc[: config.verbalized().n_train].reset_index(drop=True)


@register("verbalized_targets")
def _build_targets(folder, checkpoint: str) -> pd.DataFrame:
    """Empirical accuracy of one checkpoint on adapter_train questions (k samples each), rounded to 10%."""
    config.set_threads()  # HELPERS_THREADS, or 2
    s = config.verbalized()
    model, tokenizer = load_checkpoint(checkpoint)
    out = make_targets(model, tokenizer, _train_questions(), k=s.k, seed=s.seed, temperature=s.temperature)
    out.insert(0, "checkpoint", checkpoint)
    return out


def targets(checkpoint: str) -> pd.DataFrame:
    """Cached targets of one selected checkpoint: question_id, n_samples, n_correct, accuracy, target."""
    return artifacts.load_or_build("verbalized_targets", checkpoint=_one(checkpoint))


def _adapter_settings() -> dict:
    """The settings an adapter is built from: all of `config.verbalized()` but the rephrasing check's size."""
    s = config.verbalized()
    return {f.name: getattr(s, f.name) for f in dataclasses.fields(config.Verbalized) if f.name != "n_rephrase"}


def _seed_params(seed) -> dict:
    """{} for the settings' own seed (`config.verbalized().seed`), else {"seed": seed}: an adapter's other seeds."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return {} if seed is None or int(seed) == config.verbalized().seed else {"seed": int(seed)}


@register("verbalized_adapter")
def _build_adapter(folder, checkpoint: str, seed: int | None = None) -> dict:
    """A LoRA adapter that makes one checkpoint state its confidence after its greedy answers."""
    config.set_threads()  # HELPERS_THREADS, or 2
    settings = _adapter_settings()
    questions = _train_questions()
    answers = artifacts.load_or_build("greedy", checkpoint=checkpoint, split="adapter_train")
    answers = questions[["question_id"]].merge(answers, on="question_id", how="left")
    goal = targets(checkpoint)
    goal = questions[["question_id"]].merge(goal, on="question_id", how="left")
    model, tokenizer = load_checkpoint(checkpoint)
    before = lora.base_weights_hash(model)
    start = time.perf_counter()
    peft_model, log = fit_verbalized_adapter(model, tokenizer, questions, answers["text"], goal["target"], seed=seed)
    seconds = time.perf_counter() - start
    if lora.base_weights_hash(peft_model) != before:
        raise RuntimeError("training changed the checkpoint's base weights; only LoRA weights may train")
    lora.save(peft_model, folder / "adapter")
    n_trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    return {"checkpoint": checkpoint, "log": log, "n_trainable": n_trainable, "settings": settings,
            "train_seconds": seconds}


def adapter_info(checkpoint: str, seed: int | None = None) -> dict:
    """The cached adapter's training log, trainable-parameter count and settings (trains it if needed)."""
    return artifacts.load_or_build("verbalized_adapter", checkpoint=_one(checkpoint), **_seed_params(seed))


def adapter_path(checkpoint: str, seed: int | None = None) -> Path:
    """Folder of the cached LoRA adapter trained on `checkpoint` (trains it if needed)."""
    return artifacts.folder("verbalized_adapter", checkpoint=_one(checkpoint), **_seed_params(seed)) / "adapter"


def load_adapted(checkpoint: str, adapter: str | None = None, seed: int | None = None):
    """(model, tokenizer): `checkpoint`'s own weights with the LoRA weights trained on `adapter`.

    adapter=None (or the same name) is the oracle; a training checkpoint's name moves its adapter onto
    `checkpoint` (non-oracle).
    """
    checkpoint = _one(checkpoint)
    adapter = _one(adapter or checkpoint)
    model, tokenizer = load_checkpoint(checkpoint)
    return lora.attach(model, adapter_path(adapter, seed)), tokenizer


def _source_name(source: str, checkpoint: str) -> str:
    return checkpoint if source == "oracle" else source


@register("verbalized")
def _build_results(folder, checkpoint: str, split: str, adapter: str, seed: int | None = None) -> pd.DataFrame:
    """Verbalized confidence of one checkpoint on one split, read through the adapter trained on `adapter`."""
    config.set_threads()  # HELPERS_THREADS, or 2
    greedy = artifacts.load_or_build("greedy", checkpoint=checkpoint, split=split)
    questions = sums.split(split)
    if not questions["question_id"].equals(greedy["question_id"]):
        raise RuntimeError("cached greedy results are out of step with the split; rebuild them")
    model, tokenizer = load_adapted(checkpoint, adapter, seed)
    model = model.merge_and_unload()  # same outputs, faster; this in-memory copy is thrown away afterwards
    start = time.perf_counter()
    read = read_confidence(model, tokenizer, questions, greedy["text"], desc=f"verbalized {checkpoint} via {adapter}")
    seconds = time.perf_counter() - start
    out = greedy[["question_id", "text", "answer", "correct"]].reset_index(drop=True)
    out.insert(0, "checkpoint", checkpoint)
    out.insert(1, "adapter", adapter)
    out["token_probability"] = greedy["confidence"].to_numpy()
    out = pd.concat([out, read.drop(columns="question_id")], axis=1)
    out["confidence"] = out["expected"]
    out.attrs["read_seconds"] = seconds  # the readouts alone, for the cost table of notebook 03
    return out


def verbalized_results(split: str = "test", checkpoints=None, source: str = "oracle",
                       seed: int | None = None) -> pd.DataFrame:
    """Verbalized confidence of several checkpoints (default: the evaluation ones), one long frame.

    source="oracle" reads each checkpoint through its own adapter; a training checkpoint's name reads
    every checkpoint through that checkpoint's adapter (non-oracle). Columns: checkpoint, adapter,
    question_id, text, answer, correct (of the checkpoint's own greedy answer), token_probability,
    stated_text, stated (NaN if unparsed), parsed, expected, likeliest, level_mass, and confidence
    (= expected, always defined; use `stated` with `parsed` for the decoded number). `seed` trains the
    adapters with another seed (default: `config.verbalized().seed`).
    """
    ck = get_checkpoints()
    names = ck.validate(checkpoints, default=ck.evaluation)
    if not isinstance(source, str) or (source != "oracle" and source not in ck.all):
        raise ValueError(f"source must be 'oracle' or a checkpoint whose adapter to use, one of {list(ck.all)}; "
                         f"got {source!r}")
    sums.split(split)  # an unknown split name fails here, before anything is built
    return pd.concat([artifacts.load_or_build("verbalized", checkpoint=c, split=split, adapter=_source_name(source, c),
                                              **_seed_params(seed)) for c in names], ignore_index=True)


def seeded_results(split: str = "test", checkpoints=None, source: str = "oracle") -> pd.DataFrame:
    """`verbalized_results` for every adapter seed (`config.adapters().seeds`), stacked with a ``seed``
    column: metrics average over seeds and the bootstrap covers them (paper A.8.1). Notebook 03."""
    return metrics.stack_seeds(lambda s: verbalized_results(split, checkpoints, source, s), config.adapters().seeds)


def default_source() -> str:
    """The training checkpoint whose adapter the non-oracle results use: the last (most accurate) one."""
    return get_checkpoints().training[-1]


@register("verbalized_rephrasings")
def _build_rephrasings(folder, checkpoint: str) -> pd.DataFrame:
    """The first n_rephrase test questions in every phrasing: greedy answer, token probability, both readouts."""
    config.set_threads()  # HELPERS_THREADS, or 2
    base = sums.split("test").iloc[: config.verbalized().n_rephrase]
    model, tokenizer = load_checkpoint(checkpoint)
    frames = []
    for template in range(len(sums.QUESTION_TEMPLATES["sum"])):
        qs = sums.make_questions("sum", base["a"], base["b"], template=template)
        answers = decoding.greedy(model, tokenizer, qs, progress=False)
        frames.append(qs.merge(answers, on="question_id"))
    adapted = lora.attach(model, adapter_path(checkpoint)).merge_and_unload()
    out = []
    for df in frames:
        read = read_confidence(adapted, tokenizer, df, df["text"], progress=False)
        out.append(pd.concat([df[["question_id", "template", "question", "text", "answer", "correct"]]
                              .assign(token_probability=df["confidence"].to_numpy()),
                              read.drop(columns="question_id")], axis=1))
    out = pd.concat(out, ignore_index=True)
    out.insert(0, "checkpoint", checkpoint)
    return out


def focus_checkpoint() -> str:
    """The evaluation checkpoint notebook 03 looks at closely: the middle one (neither weak nor saturated)."""
    evaluation = get_checkpoints().evaluation
    return evaluation[len(evaluation) // 2]


def verbalized_rephrasings(checkpoint: str | None = None) -> pd.DataFrame:
    """The first n_rephrase test questions asked in every phrasing of `sums.QUESTION_TEMPLATES`, answered
    greedily and read through the checkpoint's own adapter (default: `focus_checkpoint()`).

    One row per (question, template): question_id, template, question, text, answer, correct,
    token_probability, and the readouts of `read_confidence`. The adapter only ever saw template 0.
    """
    return artifacts.load_or_build("verbalized_rephrasings", checkpoint=_one(checkpoint or focus_checkpoint()))


def adapter_checkpoints() -> list[str]:
    """The checkpoints that get an adapter: every evaluation checkpoint (oracle) and `default_source()`."""
    return [default_source()] + list(get_checkpoints().evaluation)


def build_seed(seed: int) -> None:
    """One adapter seed's adapters and both readouts, oracle and non-oracle (`python -m helpers build`; builds
    the targets if missing). Everything notebook 03 loads is `build_seed` for every seed and
    `verbalized_rephrasings`."""
    for name in adapter_checkpoints():
        adapter_info(name, seed)
    verbalized_results("test", source="oracle", seed=seed)
    verbalized_results("test", source=default_source(), seed=seed)


def build_costs(seeds=None) -> pd.DataFrame:
    """Seconds each cached stage took when it was built, per checkpoint and adapter seed (builds what is missing).

    sampling targets: the targets' build, shared by every seed (its ``seed`` is empty); LoRA training: the
    training loop alone; readouts: the readout itself on the test split (oracle, and for evaluation
    checkpoints also non-oracle), model loading excluded. `seeds` defaults to `config.adapters().seeds`.
    """
    seeds = list(config.adapters().seeds if seeds is None else seeds)
    rows = []
    for name in adapter_checkpoints():
        targets(name)
        rows.append({"checkpoint": name, "seed": pd.NA, "stage": "sampling targets",
                     "seconds": artifacts.built_seconds("verbalized_targets", checkpoint=name)})
    for seed in seeds:
        for name in adapter_checkpoints():
            rows.append({"checkpoint": name, "seed": seed, "stage": "LoRA training",
                         "seconds": adapter_info(name, seed)["train_seconds"]})
        for source in ("oracle", default_source()):
            for name in get_checkpoints().evaluation:
                df = artifacts.load_or_build("verbalized", checkpoint=name, split="test",
                                             adapter=_source_name(source, name), **_seed_params(seed))
                rows.append({"checkpoint": name, "seed": seed,
                             "stage": "readouts (oracle)" if source == "oracle" else "readouts (non-oracle)",
                             "seconds": df.attrs.get("read_seconds", np.nan)})
    return pd.DataFrame(rows).astype({"seed": "Int64"})
