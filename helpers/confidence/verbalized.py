"""Verbalized confidence: a LoRA adapter teaches a checkpoint to say how sure it is. Used in notebook 03.

After its own greedy answer, the adapted checkpoint continues with ``"\\nConfidence: 70%"`` and the end
mark; the stated number is the checkpoint's empirical accuracy on each `adapter_train` question, from
k answers sampled at T = 1 (the text and the arithmetic are helpers.confidence.verbalized_text). The
base weights stay frozen; only the LoRA weights (and the embeddings of the suffix's new characters)
train, and they are cached with peft's `save_pretrained`. The two readouts, stated and expected, are
helpers.confidence.verbalized_readout.

**Oracle** results read an evaluation checkpoint through an adapter trained on that checkpoint;
**non-oracle** results attach the LoRA weights trained on a training checkpoint to the evaluation
checkpoint's own weights. `verbalized_results(split, checkpoints, source)` returns both in the
standard long frame (one row per checkpoint and question) that later notebooks reuse.
Settings: `config.verbalized()`.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from helpers.cache import artifacts
from helpers import config
from helpers.world import decoding, lora, loop, sums
from helpers.evaluation import metrics
from helpers.cache.artifacts import register
from helpers.world.checkpoints import get_checkpoints, load_checkpoint
from helpers.world.model import chat_prompt
from .verbalized_readout import (STATED_MAX_TOKENS, check_answers, expected_level,  # noqa: F401 (re-exported)
                                 generate_continuations, level_logprobs, read_confidence, score_levels)
from .verbalized_text import (LEVELS, MARKER, confidence_suffix, empirical_targets,  # noqa: F401 (re-exported)
                              parse_confidence, round_to_level)


def _one(name) -> str:
    """A single selected checkpoint's name, or a ValueError."""
    return get_checkpoints().validate([name])[0]


# ---------------------------------------------------------------------------- targets


def sample_answers(model, tokenizer, questions: pd.DataFrame, k: int, seed: int = 0, temperature: float = 1.0,
                   sampler=None, progress: bool = True) -> pd.DataFrame:
    """k answers per question sampled at `temperature`: one row per (question, sample), as `decoding.sample`.

    `sampler` defaults to `decoding.sample` (same signature); tests pass a fake one.
    """
    if not isinstance(k, (int, np.integer)) or k < 10:
        raise ValueError(f"k must be an integer >= 10 (CalibratedMath's targets need enough samples), got {k!r}")
    sampler = sampler or decoding.sample
    samples = sampler(model, tokenizer, questions, k=k, seed=seed, temperature=temperature, progress=progress,
                      desc="sampling targets")
    counts = samples.groupby("question_id").size() if len(samples) else pd.Series(dtype=int)
    if set(counts.index) != set(questions["question_id"]) or (counts != k).any():
        raise ValueError("the sampler must return exactly k rows for every question")
    return samples


def make_targets(model, tokenizer, questions: pd.DataFrame, k: int, seed: int = 0, temperature: float = 1.0,
                 sampler=None, progress: bool = True) -> pd.DataFrame:
    """Targets for each question, in the questions' order: the model's accuracy over k sampled answers,
    rounded to 10% (`empirical_targets` of `sample_answers`)."""
    samples = sample_answers(model, tokenizer, questions, k, seed, temperature, sampler, progress)
    return questions[["question_id"]].merge(empirical_targets(samples), on="question_id", how="left")


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


# ---------------------------------------------------------------------------- training


def lora_config(tokenizer=None, inference: bool = False):
    """The peft LoraConfig of every verbalized adapter (settings from `config.verbalized()`).

    With a tokenizer, the embeddings of the suffix's new characters (`new_tokens`) train too.
    """
    s = config.verbalized()
    tokens = tokenizer.convert_tokens_to_ids(list(s.new_tokens)) if s.new_tokens and tokenizer is not None else None
    return lora.build_config(s.rank, s.alpha, s.targets, trainable_token_indices=tokens, task_type="CAUSAL_LM",
                             inference_mode=inference)


def encode_suffix_pairs(tokenizer, prefixes: list[str], suffixes: list[str]) -> dict[str, torch.Tensor]:
    """Right-padded prefix + suffix + end mark; labels only on the suffix and the end mark.

    prefixes are full chat prompts with the answer (`chat_prompt(q) + answer`), suffixes the texts to learn.
    """
    if len(prefixes) != len(suffixes) or not prefixes:
        raise ValueError("pass one suffix per prefix, and at least one of each")
    prefix_len = torch.tensor([len(p) for p in tokenizer(prefixes, add_special_tokens=False)["input_ids"]])
    enc = tokenizer([p + s + tokenizer.eos_token for p, s in zip(prefixes, suffixes)], add_special_tokens=False,
                    padding=True, padding_side="right", return_tensors="pt")
    positions = torch.arange(enc["input_ids"].shape[1])
    learn = (positions >= prefix_len[:, None]) & enc["attention_mask"].bool()
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
            "labels": enc["input_ids"].masked_fill(~learn, -100)}



def _length_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffled batches of similar length (less padding): shuffle, sort within pools of 16 batches, shuffle."""
    order = rng.permutation(len(lengths))
    pool = 16 * batch_size
    batches = []
    for start in range(0, len(order), pool):
        chunk = order[start:start + pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]



def fit_verbalized_adapter(model, tokenizer, questions: pd.DataFrame, answers, target, epochs: int | None = None,
                           lr: float | None = None, batch_size: int | None = None, seed: int | None = None,
                           progress: bool = True):
    """Fine-tune a fresh LoRA adapter so the model continues each answer with "\\nConfidence: <target>%".

    `answers` are the checkpoint's own reply texts (decoding.greedy's `text`), `target` the levels in
    [0, 1]. The loss covers only the confidence suffix and its end mark. `model` is wrapped in place;
    returns (peft model in eval mode, log with the mean loss per epoch). Unset sizes come from
    `config.verbalized()`.
    """
    s = config.verbalized()
    epochs = s.epochs if epochs is None else epochs
    lr = s.lr if lr is None else lr
    batch_size = s.batch_size if batch_size is None else batch_size
    seed = s.seed if seed is None else seed
    answers = check_answers(questions, answers)
    target = np.asarray(target, dtype=float)
    if target.shape != (len(questions),):
        raise ValueError(f"target must hold one value per question ({len(questions)}), got shape {target.shape}")
    if epochs < 1 or batch_size < 1 or not lr > 0:
        raise ValueError(f"epochs and batch_size must be >= 1 and lr > 0, got {epochs}, {batch_size}, {lr}")
    prefixes = [chat_prompt(q) + a for q, a in zip(questions["question"], answers)]
    suffixes = [confidence_suffix(t) for t in target]
    config.set_seed(seed)
    peft_model = lora.wrap(model, lora_config(tokenizer))
    params = [p for p in peft_model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    per_epoch = int(np.ceil(len(prefixes) / batch_size))
    rng = np.random.default_rng(seed)
    lengths = np.array([len(p) + len(x) for p, x in zip(prefixes, suffixes)])
    batches = (idx for _ in range(epochs) for idx in _length_batches(lengths, batch_size, rng))

    def loss(idx: np.ndarray) -> torch.Tensor:
        batch = encode_suffix_pairs(tokenizer, [prefixes[i] for i in idx], [suffixes[i] for i in idx])
        logits = peft_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                 batch["labels"][:, 1:].reshape(-1), ignore_index=-100)

    steps = loop.train(peft_model, optim, batches, loss, scheduler=loop.linear_decay(optim, epochs * per_epoch),
                       total=epochs * per_epoch, desc="LoRA", progress=progress)
    log = [{"epoch": e + 1, "loss": float(np.mean(steps[e * per_epoch:(e + 1) * per_epoch]))} for e in range(epochs)]
    return peft_model, pd.DataFrame(log)


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


# ---------------------------------------------------------------------------- cached results


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


def unparsed_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Per checkpoint (and adapter): answers read, how many stated confidences did not parse, and the share."""
    if not {"checkpoint", "parsed"} <= set(df.columns):
        raise ValueError("pass a frame from verbalized_results (it needs checkpoint and parsed columns)")
    keys = ["checkpoint"] + (["adapter"] if "adapter" in df.columns else [])
    out = df.groupby(keys, sort=False)["parsed"].agg(n="size", unparsed=lambda p: int((~p.astype(bool)).sum()))
    out["share_unparsed"] = out["unparsed"] / out["n"]
    return out.reset_index()


def default_source() -> str:
    """The training checkpoint whose adapter the non-oracle results use: the last (most accurate) one."""
    return get_checkpoints().training[-1]


# ---------------------------------------------------------------------------- rephrasings


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


# ---------------------------------------------------------------------------- building and costs


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
