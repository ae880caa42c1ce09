"""Verbalized confidence: a LoRA adapter teaches a checkpoint to say how sure it is. Used in notebook 03.

After its own greedy answer, the adapted checkpoint continues with ``"\\nConfidence: 70%"`` and the end
mark. The stated number is learned from the checkpoint's *empirical accuracy* on each `adapter_train`
question: the share of k answers sampled at T = 1 that are right, rounded to the nearest 10%
(CalibratedMath; Lin, Hilton and Evans 2022). The base weights stay frozen; only the LoRA weights
train, and they are cached with peft's `save_pretrained`.

Two readouts of the same adapted model, on the checkpoint's own (cached, unadapted) greedy answers:

- **stated**: decode the continuation greedily and parse the percentage with `parse_confidence`;
  a continuation that does not parse is counted, never guessed;
- **expected**: teacher-force ``"\\nConfidence: "`` and score the eleven levels "0%" .. "100%"; the
  expected level under the model's distribution over them (renormalized over the eleven).

**Oracle** results read an evaluation checkpoint through an adapter trained on that checkpoint;
**non-oracle** results attach the LoRA weights trained on a training checkpoint to the evaluation
checkpoint's own weights. `verbalized_results(split, checkpoints, source)` returns both in the
standard long frame (one row per checkpoint and question) that later notebooks reuse.
"""
from __future__ import annotations

import hashlib
import re
import time
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from .. import decoding, sums
from ..artifacts import EXTRA_BUILDS, artifact_dir, load_or_build, register
from ..config import SPLIT_KEYS, fast_mode, set_seed
from ..model import chat_prompt, load_checkpoint

MARKER = "\nConfidence: "  # what the adapted model says after its answer, before the number
LEVELS = tuple(range(0, 101, 10))  # the stated levels, in percent
# GPT-2's linear layers are Conv1D. "c_proj" names both the attention output and the MLP output, so
# the pattern spells out each module it adapts (DESIGN §5).
TARGET_MODULES = r".*\.(attn\.(c_attn|c_proj)|mlp\.(c_fc|c_proj))$"
STATED_MAX_TOKENS = len(MARKER) + len("100%") + 4  # room for the longest level, its end mark and a little slack


@dataclass(frozen=True)
class VerbalizedSettings:
    """The sizes of this module (hashed into its artifacts)."""

    k: int  # answers sampled per adapter_train question for its target
    temperature: float  # of those samples
    n_train: int  # adapter_train questions the adapter learns from (the first n of the split)
    rank: int  # LoRA rank
    alpha: int  # LoRA scaling numerator (scale = alpha / rank)
    target_modules: str  # regex of adapted modules
    epochs: int
    lr: float
    batch_size: int
    n_rephrase: int  # test questions asked in every phrasing (notebook 03, section 4)
    seed: int = 0


FULL = VerbalizedSettings(k=10, temperature=1.0, n_train=2000, rank=8, alpha=16, target_modules=TARGET_MODULES,
                          epochs=3, lr=3e-3, batch_size=32, n_rephrase=1000)
FAST = VerbalizedSettings(k=10, temperature=1.0, n_train=400, rank=8, alpha=16, target_modules=TARGET_MODULES,
                          epochs=2, lr=3e-3, batch_size=32, n_rephrase=100)


def verbalized_settings() -> VerbalizedSettings:
    """The sizes for the current mode (fast mode: HELPERS_FAST=1)."""
    return FAST if fast_mode() else FULL


def _config() -> dict:
    return asdict(verbalized_settings())


# ---------------------------------------------------------------------------- parsing

_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
          "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_WORD_VALUES = {w: i for i, w in enumerate(_UNITS)} | {w: 10 * i for i, w in enumerate(_TENS) if w}
_WORD_VALUES["fourty"] = 40  # a common misspelling
_WORD = r"(?:" + "|".join(sorted(_WORD_VALUES, key=len, reverse=True)) + r")"
# "seventy", "seventy-five", "seventy five", "one hundred", "a hundred", "hundred"
_WORDS_NUMBER = re.compile(rf"\b(?:(?:one|a)\s+)?hundred\b|\b{_WORD}(?:[\s-]+{_WORD})?\b", re.IGNORECASE)
# A number stands alone: "7O%" (a letter O) or "70.5.1" is not a number here.
_NUMBER = re.compile(r"(?<![\w.])(-?\d+(?:\.\d+)?|-?\.\d+)(?!\w|\.\d)")
_PERCENT_AFTER = re.compile(r"^\s*(%|per\s*cent\b|percent\b)", re.IGNORECASE)


def _words_value(match: str) -> int | None:
    words = re.split(r"[\s-]+", match.strip().lower())
    if words[-1] == "hundred":
        return 100
    values = [_WORD_VALUES[w] for w in words]
    if len(values) == 1:
        return values[0]
    tens, unit = values
    if tens % 10 == 0 and tens >= 20 and 0 < unit < 10:  # "seventy five"
        return tens + unit
    return None


def parse_confidence(text) -> float | None:
    """The confidence a text states, as a probability in [0, 1], or None if it states none clearly.

    Accepts "70%", "70 %", "70 percent", "0.7", "seventy percent", "seventy-five per cent",
    "I'm 70% sure", "Confidence: 70%" and "Confidence: 70". Rules:

    - if the text says "confidence", only what follows its last mention is read;
    - exactly one number must be stated ("60% or 70%" gives None);
    - a number followed by "%" or "percent" (digits or words) is a percentage;
    - a bare number with a decimal point is a probability and must lie in [0, 1] ("0.7", ".5");
    - a bare whole number is ambiguous ("It is 4." is an answer, not 4%) and counts, as a percentage,
      only right after "Confidence:";
    - anything outside 0..100% gives None, as do non-strings and text with no number.
    """
    if not isinstance(text, str):
        return None
    found = re.split(r"confidence\s*[:=]?", text, flags=re.IGNORECASE)
    part, after_marker = found[-1], len(found) > 1
    if not part.strip():
        return None
    values = []
    for m in _NUMBER.finditer(part):
        raw = m.group(1)
        value = float(raw)
        if _PERCENT_AFTER.match(part[m.end():]):
            values.append(value / 100)
        elif "." in raw:
            values.append(value if 0 <= value <= 1 else float("nan"))
        elif after_marker and not part[: m.start()].strip():
            values.append(value / 100)
        else:
            values.append(float("nan"))  # a bare whole number elsewhere: ambiguous
    if not values:
        for m in _WORDS_NUMBER.finditer(part):
            value = _words_value(m.group(0))
            percent = _PERCENT_AFTER.match(part[m.end():]) or (after_marker and not part[: m.start()].strip())
            values.append(value / 100 if value is not None and percent else float("nan"))
    if len(values) != 1:
        return None
    value = values[0]
    if not np.isfinite(value) or not 0.0 <= value <= 1.0:
        return None
    return float(value)


def confidence_suffix(confidence: float) -> str:
    """The text the adapter learns to say after an answer: "\\nConfidence: 70%" (confidence in [0, 1])."""
    level = round_to_level(confidence)
    return f"{MARKER}{int(round(level * 100))}%"


# ---------------------------------------------------------------------------- targets


def round_to_level(share):
    """Round a share in [0, 1] to the nearest 10% (halves round up: 0.25 -> 0.3)."""
    arr = np.asarray(share, dtype=float)
    if arr.size and (not np.all(np.isfinite(arr)) or arr.min() < 0 or arr.max() > 1):
        raise ValueError("shares must be finite and lie in [0, 1]; pass accuracies, not percentages")
    out = np.floor(arr * 10 + 0.5 + 1e-9) / 10
    return float(out) if out.ndim == 0 else out


def empirical_targets(samples: pd.DataFrame) -> pd.DataFrame:
    """Per question: n_samples, n_correct, accuracy (share right) and target (rounded to 10%).

    `samples` has one row per sampled answer with question_id and correct, as `decoding.sample` returns.
    """
    if not isinstance(samples, pd.DataFrame) or samples.empty:
        raise ValueError("samples is empty; pass the frame decoding.sample returns (one row per sampled answer)")
    missing = {"question_id", "correct"} - set(samples.columns)
    if missing:
        raise ValueError(f"samples lacks columns {sorted(missing)}; pass the frame decoding.sample returns")
    grouped = samples.groupby("question_id", sort=False)["correct"]
    out = pd.DataFrame({"n_samples": grouped.size(), "n_correct": grouped.sum().astype(int)}).reset_index()
    out["accuracy"] = out["n_correct"] / out["n_samples"]
    out["target"] = round_to_level(out["accuracy"].to_numpy())
    return out


def make_targets(model, tokenizer, questions: pd.DataFrame, k: int, seed: int = 0, temperature: float = 1.0,
                 sampler=None, progress: bool = True) -> pd.DataFrame:
    """Targets for each question: the model's accuracy over k answers sampled at `temperature`.

    `sampler` defaults to `decoding.sample` (same signature); tests pass a fake one.
    """
    if not isinstance(k, (int, np.integer)) or k < 10:
        raise ValueError(f"k must be an integer >= 10 (CalibratedMath's targets need enough samples), got {k!r}")
    sampler = sampler or decoding.sample
    samples = sampler(model, tokenizer, questions, k=k, seed=seed, temperature=temperature, progress=progress,
                      desc="sampling targets")
    out = empirical_targets(samples)
    if set(out["question_id"]) != set(questions["question_id"]) or (out["n_samples"] != k).any():
        raise ValueError("the sampler must return exactly k rows for every question")
    return questions[["question_id"]].merge(out, on="question_id", how="left")


def _checkpoints():
    from ..training import get_checkpoints

    return get_checkpoints()


def _check_checkpoint(name: str) -> str:
    if not isinstance(name, str):
        raise ValueError(f"checkpoint must be a name such as 'step-02000', got {name!r}")
    return _checkpoints().validate([name])[0]


def _train_questions() -> pd.DataFrame:
    return sums.split("adapter_train").iloc[: verbalized_settings().n_train].reset_index(drop=True)


@register("verbalized_targets", version="1", deps=lambda checkpoint: [("world", {})], settings_keys=SPLIT_KEYS,
          config=_config)
def _build_targets(folder, checkpoint: str) -> pd.DataFrame:
    """Empirical accuracy of one checkpoint on adapter_train questions (k samples each), rounded to 10%."""
    s = verbalized_settings()
    model, tokenizer = load_checkpoint(checkpoint)
    out = make_targets(model, tokenizer, _train_questions(), k=s.k, seed=s.seed, temperature=s.temperature)
    out.insert(0, "checkpoint", checkpoint)
    return out


def targets(checkpoint: str) -> pd.DataFrame:
    """Cached targets of one selected checkpoint: question_id, n_samples, n_correct, accuracy, target."""
    return load_or_build("verbalized_targets", checkpoint=_check_checkpoint(checkpoint))


# ---------------------------------------------------------------------------- LoRA


@contextmanager
def _quiet_peft():
    """Silence peft's known, harmless warnings while it wraps or loads GPT-2.

    - "fan_in_fan_out is set to False but the target module is `Conv1D`": GPT-2's layers are Conv1D
      (weights stored transposed); we do set fan_in_fan_out=True, but peft may still check.
    - "Found missing adapter keys" / "Already found a `peft_config` attribute": loading an adapter into a
      freshly injected model; the keys it lists are the frozen base weights, which are not in an adapter.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*fan_in_fan_out.*")
        warnings.filterwarnings("ignore", message=r".*peft_config.*")
        warnings.filterwarnings("ignore", message=r".*missing adapter keys.*")
        # peft 0.21 asks transformers 5.x `is_gradient_checkpointing`, which transformers deprecates.
        warnings.filterwarnings("ignore", message=r".*is_gradient_checkpointing.*", category=FutureWarning)
        yield


def lora_config(inference: bool = False):
    """The peft LoraConfig of every verbalized adapter (settings from `verbalized_settings()`)."""
    from peft import LoraConfig

    s = verbalized_settings()
    return LoraConfig(r=s.rank, lora_alpha=s.alpha, target_modules=s.target_modules, fan_in_fan_out=True,
                      lora_dropout=0.0, bias="none", task_type="CAUSAL_LM", inference_mode=inference)


def add_adapter(model):
    """Wrap a checkpoint's model with a fresh, trainable LoRA adapter; the base weights are frozen."""
    from peft import get_peft_model

    with _quiet_peft():
        return get_peft_model(model, lora_config())


def weights_hash(model) -> str:
    """SHA-256 of a model's base weights (LoRA weights excluded), to check that they never change."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        if "lora_" in name:
            continue
        name = name.replace("base_model.model.", "").replace(".base_layer", "")
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


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


def _check_answers(questions: pd.DataFrame, answers) -> list[str]:
    decoding._check_questions(questions)
    answers = list(answers)
    if len(answers) != len(questions):
        raise ValueError(f"got {len(answers)} answers for {len(questions)} questions; pass one answer text per question")
    if not all(isinstance(a, str) for a in answers):
        raise ValueError("answers must be texts (the `text` column of decoding.greedy), not parsed numbers")
    return answers


def train_adapter(model, tokenizer, questions: pd.DataFrame, answers, target, epochs: int | None = None,
                  lr: float | None = None, batch_size: int | None = None, seed: int | None = None,
                  progress: bool = True):
    """Fine-tune a fresh LoRA adapter so the model continues each answer with "\\nConfidence: <target>%".

    `answers` are the checkpoint's own reply texts (decoding.greedy's `text`), `target` the levels in
    [0, 1]. The loss covers only the confidence suffix and its end mark. `model` is wrapped in place;
    returns (peft model in eval mode, log with the mean loss per epoch).
    """
    s = verbalized_settings()
    epochs, lr = epochs or s.epochs, lr or s.lr
    batch_size, seed = batch_size or s.batch_size, s.seed if seed is None else seed
    answers = _check_answers(questions, answers)
    target = np.asarray(target, dtype=float)
    if target.shape != (len(questions),):
        raise ValueError(f"target must hold one value per question ({len(questions)}), got shape {target.shape}")
    if epochs < 1 or batch_size < 1 or not lr > 0:
        raise ValueError(f"epochs and batch_size must be >= 1 and lr > 0, got {epochs}, {batch_size}, {lr}")
    prefixes = [chat_prompt(q) + a for q, a in zip(questions["question"], answers)]
    suffixes = [confidence_suffix(t) for t in target]
    set_seed(seed)
    peft_model = add_adapter(model)
    params = [p for p in peft_model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    n_steps = epochs * int(np.ceil(len(prefixes) / batch_size))
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda step: 1.0 - step / n_steps)  # linear decay to 0
    rng = np.random.default_rng(seed)
    peft_model.train()
    log = []
    for epoch in tqdm(range(epochs), desc="LoRA epochs", disable=not progress, leave=False):
        order = rng.permutation(len(prefixes))
        losses = []
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            batch = encode_suffix_pairs(tokenizer, [prefixes[i] for i in idx], [suffixes[i] for i in idx])
            logits = peft_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                     batch["labels"][:, 1:].reshape(-1), ignore_index=-100)
            optim.zero_grad(set_to_none=True)
            loss.backward()
            optim.step()
            sched.step()
            losses.append(loss.item())
        log.append({"epoch": epoch + 1, "loss": float(np.mean(losses))})
    peft_model.eval()
    return peft_model, pd.DataFrame(log)


def _adapter_deps(checkpoint: str):
    return [("verbalized_targets", {"checkpoint": checkpoint}), ("greedy", {"checkpoint": checkpoint, "split": "adapter_train"})]


@register("verbalized_adapter", version="1", deps=_adapter_deps, settings_keys=SPLIT_KEYS, config=_config)
def _build_adapter(folder, checkpoint: str) -> dict:
    """A LoRA adapter that makes one checkpoint state its confidence after its greedy answers."""
    s = verbalized_settings()
    start = time.perf_counter()
    questions = _train_questions()
    answers = load_or_build("greedy", checkpoint=checkpoint, split="adapter_train")
    answers = questions[["question_id"]].merge(answers, on="question_id", how="left")
    goal = targets(checkpoint)
    goal = questions[["question_id"]].merge(goal, on="question_id", how="left")
    model, tokenizer = load_checkpoint(checkpoint)
    before = weights_hash(model)
    peft_model, log = train_adapter(model, tokenizer, questions, answers["text"], goal["target"])
    if weights_hash(peft_model) != before:
        raise RuntimeError("training changed the checkpoint's base weights; only LoRA weights may train")
    with _quiet_peft():
        peft_model.save_pretrained(folder / "adapter")
    n_trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    return {"checkpoint": checkpoint, "log": log, "n_trainable": n_trainable, "settings": asdict(s),
            "train_seconds": time.perf_counter() - start}


def adapter_info(checkpoint: str) -> dict:
    """The cached adapter's training log, trainable-parameter count and settings (trains it if needed)."""
    return load_or_build("verbalized_adapter", checkpoint=_check_checkpoint(checkpoint))


def adapter_path(checkpoint: str) -> Path:
    """Folder of the cached LoRA adapter trained on `checkpoint` (trains it if needed)."""
    adapter_info(checkpoint)
    return artifact_dir("verbalized_adapter", checkpoint=checkpoint) / "adapter"


def attach_adapter(model, path):
    """Attach saved LoRA weights to `model` (any checkpoint with the same architecture), for inference."""
    from peft import PeftModel

    with _quiet_peft():
        peft_model = PeftModel.from_pretrained(model, str(path), is_trainable=False)
    peft_model.eval()
    return peft_model


def load_adapted(checkpoint: str, adapter: str | None = None):
    """(model, tokenizer): `checkpoint`'s own weights with the LoRA weights trained on `adapter`.

    adapter=None (or the same name) is the oracle; a training checkpoint's name moves its adapter onto
    `checkpoint` (non-oracle).
    """
    checkpoint = _check_checkpoint(checkpoint)
    adapter = _check_checkpoint(adapter or checkpoint)
    model, tokenizer = load_checkpoint(checkpoint)
    return attach_adapter(model, adapter_path(adapter)), tokenizer


# ---------------------------------------------------------------------------- readouts


def _level_token_ids(tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """(11, 4) ids of "0%" .. "100%" right-padded with the pad id, and their lengths."""
    texts = [f"{level}%" for level in LEVELS]
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    width = max(len(i) for i in ids)
    out = torch.full((len(ids), width), tokenizer.pad_token_id, dtype=torch.long)
    for row, i in enumerate(ids):
        out[row, : len(i)] = torch.tensor(i)
    return out, torch.tensor([len(i) for i in ids])


@torch.no_grad()
def level_logprobs(model, tokenizer, prefixes: list[str]) -> torch.Tensor:
    """(B, 11) log-probabilities of the strings "0%" .. "100%" after each prefix (teacher forcing).

    The prefix runs once; its key-value cache is repeated for the eleven continuations. Left padding
    needs explicit position ids (taken from the attention mask, as generation does).
    """
    tokenizer.padding_side = "left"
    enc = tokenizer(prefixes, return_tensors="pt", padding=True, add_special_tokens=False)
    mask = enc["attention_mask"]
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    out = model(input_ids=enc["input_ids"], attention_mask=mask, position_ids=positions, use_cache=True)
    first = torch.log_softmax(out.logits[:, -1].float(), dim=-1)  # (B, V)
    ids, lengths = _level_token_ids(tokenizer)
    n_levels, width = ids.shape
    batch = len(prefixes)
    cache = out.cache
    cache.batch_repeat_interleave(n_levels)
    cont_ids = ids.repeat(batch, 1)  # (B*11, width): for each prefix, the eleven levels in order
    cont_mask = torch.cat([mask.repeat_interleave(n_levels, 0), torch.ones(batch * n_levels, width, dtype=mask.dtype)], 1)
    cont_pos = positions[:, -1:].repeat_interleave(n_levels, 0) + 1 + torch.arange(width)
    logits = model(input_ids=cont_ids, attention_mask=cont_mask, position_ids=cont_pos, cache=cache).logits
    logp = torch.log_softmax(logits.float(), dim=-1)  # (B*11, width, V): position t predicts token t+1
    later = logp[:, :-1].gather(-1, cont_ids[:, 1:].unsqueeze(-1)).squeeze(-1)  # (B*11, width-1)
    keep = torch.arange(1, width)[None, :] < lengths.repeat(batch)[:, None]
    total = first.repeat_interleave(n_levels, 0).gather(-1, cont_ids[:, :1]).squeeze(-1) + (later * keep).sum(1)
    return total.view(batch, n_levels)


def expected_level(logprobs: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(expected stated level in [0, 1], probability mass on the eleven levels) from `level_logprobs`."""
    levels = torch.tensor(LEVELS, dtype=torch.float64) / 100
    lp = logprobs.double()
    weights = torch.softmax(lp, dim=1)
    return (weights @ levels).numpy(), lp.logsumexp(dim=1).exp().numpy()


@torch.no_grad()
def read_confidence(model, tokenizer, questions: pd.DataFrame, answers, batch_size: int = 500,
                    progress: bool = True, desc: str = "verbalized") -> pd.DataFrame:
    """Both readouts of an adapted model after given answers, one row per question.

    Columns: question_id, stated_text (the greedy continuation), stated (parsed, in [0, 1], NaN if it
    did not parse), parsed, expected (expected level under the model's distribution over the eleven
    levels, renormalized), level_mass (their total probability before renormalizing).
    """
    answers = _check_answers(questions, answers)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    eos = tokenizer.eos_token_id
    prefixes = [chat_prompt(q) + a for q, a in zip(questions["question"], answers)]
    rows = []
    for start in tqdm(range(0, len(prefixes), batch_size), desc=desc, disable=not progress, leave=False):
        chunk = prefixes[start:start + batch_size]
        tokenizer.padding_side = "left"
        enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False)
        seqs = model.generate(**enc, do_sample=False, max_new_tokens=STATED_MAX_TOKENS,
                              pad_token_id=tokenizer.pad_token_id, eos_token_id=eos)
        new = seqs[:, enc["input_ids"].shape[1]:].tolist()
        texts = [tokenizer.decode(r[: r.index(eos)] if eos in r else r, skip_special_tokens=True) for r in new]
        stated = [parse_confidence(t) for t in texts]
        expected, mass = expected_level(level_logprobs(model, tokenizer, [p + MARKER for p in chunk]))
        rows.append(pd.DataFrame({
            "question_id": questions["question_id"].iloc[start:start + batch_size].to_numpy(),
            "stated_text": texts,
            "stated": np.array([np.nan if v is None else v for v in stated], dtype=float),
            "parsed": [v is not None for v in stated],
            "expected": expected,
            "level_mass": mass,
        }))
    return pd.concat(rows, ignore_index=True)


def _source_name(source: str, checkpoint: str) -> str:
    return checkpoint if source == "oracle" else source


def _results_deps(checkpoint: str, split: str, adapter: str):
    return [("verbalized_adapter", {"checkpoint": adapter}), ("greedy", {"checkpoint": checkpoint, "split": split})]


@register("verbalized", version="1", deps=_results_deps, settings_keys=SPLIT_KEYS, config=_config)
def _build_results(folder, checkpoint: str, split: str, adapter: str) -> pd.DataFrame:
    """Verbalized confidence of one checkpoint on one split, read through the adapter trained on `adapter`."""
    greedy = load_or_build("greedy", checkpoint=checkpoint, split=split)
    questions = sums.split(split)
    if not questions["question_id"].equals(greedy["question_id"]):
        raise RuntimeError("cached greedy results are out of step with the split; rebuild them")
    model, tokenizer = load_adapted(checkpoint, adapter)
    read = read_confidence(model, tokenizer, questions, greedy["text"], desc=f"verbalized {checkpoint} via {adapter}")
    out = pd.DataFrame({
        "checkpoint": checkpoint,
        "adapter": adapter,
        "question_id": greedy["question_id"].to_numpy(),
        "text": greedy["text"].to_numpy(),
        "answer": greedy["answer"].to_numpy(),
        "correct": greedy["correct"].to_numpy(),
        "token_probability": greedy["confidence"].to_numpy(),
    })
    out = pd.concat([out, read.drop(columns="question_id")], axis=1)
    out["confidence"] = out["expected"]
    return out


def verbalized_results(split: str = "test", checkpoints=None, source: str = "oracle") -> pd.DataFrame:
    """Verbalized confidence of several checkpoints (default: the evaluation ones), one long frame.

    source="oracle" reads each checkpoint through its own adapter; a training checkpoint's name reads
    every checkpoint through that checkpoint's adapter (non-oracle). Columns: checkpoint, adapter,
    question_id, text, answer, correct (of the checkpoint's own greedy answer), token_probability,
    stated_text, stated (NaN if unparsed), parsed, expected, level_mass, and confidence (= expected,
    always defined; use `stated` with `parsed` for the decoded number).
    """
    ckpts = _checkpoints()
    names = ckpts.validate(list(ckpts.evaluation) if checkpoints is None else checkpoints)
    if not isinstance(source, str) or (source != "oracle" and source not in ckpts.all):
        raise ValueError(f"source must be 'oracle' or a checkpoint whose adapter to use, one of {list(ckpts.all)}; "
                         f"got {source!r}")
    sums.split(split)  # an unknown split name fails here, before anything is built
    return pd.concat([load_or_build("verbalized", checkpoint=c, split=split, adapter=_source_name(source, c))
                      for c in names], ignore_index=True)


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
    return _checkpoints().training[-1]


# ---------------------------------------------------------------------------- rephrasings


def _rephrase_deps(checkpoint: str):
    return [("verbalized_adapter", {"checkpoint": checkpoint})]


@register("verbalized_rephrasings", version="1", deps=_rephrase_deps, settings_keys=SPLIT_KEYS, config=_config)
def _build_rephrasings(folder, checkpoint: str) -> pd.DataFrame:
    """The first n_rephrase test questions in every phrasing: greedy answer, token probability, both readouts."""
    s = verbalized_settings()
    base = sums.split("test").iloc[: s.n_rephrase]
    model, tokenizer = load_checkpoint(checkpoint)
    frames = []
    for template in range(len(sums.QUESTION_TEMPLATES["sum"])):
        qs = sums.make_questions("sum", base["a"], base["b"], template=template)
        frames.append(qs.merge(decoding.greedy(model, tokenizer, qs, progress=False), on="question_id"))
    adapted = attach_adapter(model, adapter_path(checkpoint))
    out = []
    for df in frames:
        read = read_confidence(adapted, tokenizer, df, df["text"], progress=False)
        out.append(pd.concat([df[["question_id", "template", "question", "text", "answer", "correct"]]
                              .assign(token_probability=df["confidence"].to_numpy()),
                              read.drop(columns="question_id")], axis=1))
    out = pd.concat(out, ignore_index=True)
    out.insert(0, "checkpoint", checkpoint)
    return out


def rephrasing_results(checkpoint: str | None = None) -> pd.DataFrame:
    """Test questions asked in every phrasing of `sums.QUESTION_TEMPLATES` (default checkpoint: the last
    evaluation one), read through the checkpoint's own adapter. One row per (question, template)."""
    name = _check_checkpoint(checkpoint or _checkpoints().evaluation[-1])
    return load_or_build("verbalized_rephrasings", checkpoint=name)


def build_all() -> None:
    """Everything notebook 03 loads: oracle and non-oracle results on the evaluation checkpoints, rephrasings."""
    verbalized_results("test", source="oracle")
    verbalized_results("test", source=default_source())
    rephrasing_results()


EXTRA_BUILDS.append(("verbalized confidence (notebook 03)", build_all))
