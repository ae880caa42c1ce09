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


import numpy as np
import pandas as pd
import torch

from helpers import config
from helpers.world import decoding, lora, loop
from helpers.world.model import chat_prompt
from .verbalized_readout import check_answers
from .verbalized_text import confidence_suffix, empirical_targets


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


# ---------------------------------------------------------------------------- cached results


def unparsed_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Per checkpoint (and adapter): answers read, how many stated confidences did not parse, and the share."""
    if not {"checkpoint", "parsed"} <= set(df.columns):
        raise ValueError("pass a frame from verbalized_results (it needs checkpoint and parsed columns)")
    keys = ["checkpoint"] + (["adapter"] if "adapter" in df.columns else [])
    out = df.groupby(keys, sort=False)["parsed"].agg(n="size", unparsed=lambda p: int((~p.astype(bool)).sum()))
    out["share_unparsed"] = out["unparsed"] / out["n"]
    return out.reset_index()


# ---------------------------------------------------------------------------- rephrasings


# ---------------------------------------------------------------------------- building and costs


