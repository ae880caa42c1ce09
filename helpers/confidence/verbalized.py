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
from ..config import SPLIT_KEYS, fast_mode, set_seed, set_threads
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
    new_tokens: str = "\nC:%"  # characters the LM never saw in training, whose embeddings train with the adapter
    seed: int = 0


# Measured on one (shared) core, notebook 03 section 7: per checkpoint, about 15 s to sample the
# targets (2,000 questions x 10 answers), 15 s to train (4 epochs, rank 16) and 5-10 s per readout of
# the 5,000 test questions; about 6 minutes for the 8 adapters and 14 readouts of the notebook. More
# data, epochs or rank (tried: 5,000 questions; 3-8 epochs; rank 8-32; lr 3e-3 to 1e-2) moved the AUC
# of the oracle readout by about 0.03 at most, for up to twice the time.
FULL = VerbalizedSettings(k=10, temperature=1.0, n_train=2000, rank=16, alpha=32, target_modules=TARGET_MODULES,
                          epochs=4, lr=5e-3, batch_size=16, n_rephrase=1000)
FAST = VerbalizedSettings(k=10, temperature=1.0, n_train=400, rank=16, alpha=32, target_modules=TARGET_MODULES,
                          epochs=2, lr=5e-3, batch_size=16, n_rephrase=100)


def verbalized_settings() -> VerbalizedSettings:
    """The sizes for the current mode (fast mode: HELPERS_FAST=1)."""
    return FAST if fast_mode() else FULL


def _adapter_config() -> dict:
    """What an adapter depends on: every setting but the size of the rephrasing check."""
    out = asdict(verbalized_settings())
    out.pop("n_rephrase")
    return out


def _rephrase_config() -> dict:
    return {"n_rephrase": verbalized_settings().n_rephrase}


def _targets_config() -> dict:
    """What the targets depend on (changing LoRA settings must not resample them)."""
    s = verbalized_settings()
    return {"k": s.k, "temperature": s.temperature, "n_train": s.n_train, "seed": s.seed}


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


def _checkpoints():
    from ..training import get_checkpoints

    return get_checkpoints()


def _check_checkpoint(name: str) -> str:
    if not isinstance(name, str):
        raise ValueError(f"checkpoint must be a name such as 'step-02000', got {name!r}")
    return _checkpoints().validate([name])[0]


def _train_questions() -> pd.DataFrame:
    return sums.split("adapter_train").iloc[: verbalized_settings().n_train].reset_index(drop=True)


@register("verbalized_targets", version="2", deps=lambda checkpoint: [("world", {})], settings_keys=SPLIT_KEYS,
          config=_targets_config)
def _build_targets(folder, checkpoint: str) -> pd.DataFrame:
    """Empirical accuracy of one checkpoint on adapter_train questions (k samples each), rounded to 10%."""
    set_threads()  # HELPERS_THREADS, or every core
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
    """Silence the known, harmless warnings peft raises while it wraps or loads GPT-2.

    - peft 0.21 calls transformers 5.x's `is_gradient_checkpointing`, which transformers deprecates
      (a FutureWarning about peft's code, not ours; seen on every wrap and load).
    - "fan_in_fan_out is set to False but the target module is `Conv1D`" (DESIGN §5): GPT-2's layers
      store their weights transposed. We set fan_in_fan_out=True, so it should not appear; if a config
      without it ever reaches peft, peft corrects the flag itself.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*is_gradient_checkpointing.*", category=FutureWarning)
        warnings.filterwarnings("ignore", message=r".*fan_in_fan_out.*")
        yield


def lora_config(tokenizer=None, inference: bool = False):
    """The peft LoraConfig of every verbalized adapter (settings from `verbalized_settings()`)."""
    from peft import LoraConfig

    s = verbalized_settings()
    extra = {}
    if s.new_tokens and tokenizer is not None:
        extra["trainable_token_indices"] = tokenizer.convert_tokens_to_ids(list(s.new_tokens))
    return LoraConfig(r=s.rank, lora_alpha=s.alpha, target_modules=s.target_modules, fan_in_fan_out=True,
                      lora_dropout=0.0, bias="none", task_type="CAUSAL_LM", inference_mode=inference, **extra)


def add_adapter(model, tokenizer=None):
    """Wrap a checkpoint's model with a fresh, trainable LoRA adapter; the base weights are frozen."""
    from peft import get_peft_model

    with _quiet_peft():
        return get_peft_model(model, lora_config(tokenizer))


def weights_hash(model) -> str:
    """SHA-256 of a model's base weights (LoRA weights excluded), to check that they never change."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        if "lora_" in name or "trainable_tokens" in name:
            continue
        # peft renames what it wraps: base_model.model.<name>, <layer>.base_layer, <emb>.token_adapter.base_layer
        name = name.replace("base_model.model.", "").replace(".token_adapter", "").replace(".base_layer", "")
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


def train_adapter(model, tokenizer, questions: pd.DataFrame, answers, target, epochs: int | None = None,
                  lr: float | None = None, batch_size: int | None = None, seed: int | None = None,
                  progress: bool = True):
    """Fine-tune a fresh LoRA adapter so the model continues each answer with "\\nConfidence: <target>%".

    `answers` are the checkpoint's own reply texts (decoding.greedy's `text`), `target` the levels in
    [0, 1]. The loss covers only the confidence suffix and its end mark. `model` is wrapped in place;
    returns (peft model in eval mode, log with the mean loss per epoch).
    """
    s = verbalized_settings()
    epochs = s.epochs if epochs is None else epochs
    lr = s.lr if lr is None else lr
    batch_size = s.batch_size if batch_size is None else batch_size
    seed = s.seed if seed is None else seed
    answers = _check_answers(questions, answers)
    target = np.asarray(target, dtype=float)
    if target.shape != (len(questions),):
        raise ValueError(f"target must hold one value per question ({len(questions)}), got shape {target.shape}")
    if epochs < 1 or batch_size < 1 or not lr > 0:
        raise ValueError(f"epochs and batch_size must be >= 1 and lr > 0, got {epochs}, {batch_size}, {lr}")
    prefixes = [chat_prompt(q) + a for q, a in zip(questions["question"], answers)]
    suffixes = [confidence_suffix(t) for t in target]
    set_seed(seed)
    peft_model = add_adapter(model, tokenizer)
    params = [p for p in peft_model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    n_steps = epochs * int(np.ceil(len(prefixes) / batch_size))
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda step: 1.0 - step / n_steps)  # linear decay to 0
    rng = np.random.default_rng(seed)
    peft_model.train()
    log = []
    lengths = np.array([len(p) + len(x) for p, x in zip(prefixes, suffixes)])
    for epoch in tqdm(range(epochs), desc="LoRA epochs", disable=not progress, leave=False):
        losses = []
        for idx in _length_batches(lengths, batch_size, rng):
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


@register("verbalized_adapter", version="2", deps=_adapter_deps, settings_keys=SPLIT_KEYS, config=_adapter_config)
def _build_adapter(folder, checkpoint: str) -> dict:
    """A LoRA adapter that makes one checkpoint state its confidence after its greedy answers."""
    set_threads()  # HELPERS_THREADS, or every core
    s = verbalized_settings()
    questions = _train_questions()
    answers = load_or_build("greedy", checkpoint=checkpoint, split="adapter_train")
    answers = questions[["question_id"]].merge(answers, on="question_id", how="left")
    goal = targets(checkpoint)
    goal = questions[["question_id"]].merge(goal, on="question_id", how="left")
    model, tokenizer = load_checkpoint(checkpoint)
    before = weights_hash(model)
    start = time.perf_counter()
    peft_model, log = train_adapter(model, tokenizer, questions, answers["text"], goal["target"])
    seconds = time.perf_counter() - start
    if weights_hash(peft_model) != before:
        raise RuntimeError("training changed the checkpoint's base weights; only LoRA weights may train")
    with _quiet_peft():
        peft_model.save_pretrained(folder / "adapter")
    n_trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    return {"checkpoint": checkpoint, "log": log, "n_trainable": n_trainable, "settings": asdict(s),
            "train_seconds": seconds}


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


def _encode_scoring_batch(tokenizer, prefixes: list[str]):
    """Inputs of one scoring pass: each left-padded `prefix + MARKER`, then the eleven level strings.

    Returns (input_ids, 4D additive attention mask, position_ids, n_prefix, segment starts, level ids).
    Every level string "d%" sees the prefix and its own earlier tokens only, at the positions it would
    have right after the prefix, so one pass scores all eleven as if each had been fed alone.
    """
    tokenizer.padding_side = "left"
    enc = tokenizer([p + MARKER for p in prefixes], return_tensors="pt", padding=True, add_special_tokens=False)
    ids, mask = enc["input_ids"], enc["attention_mask"].bool()
    batch, n_prefix = ids.shape
    level_ids = [tokenizer(f"{level}%", add_special_tokens=False)["input_ids"] for level in LEVELS]
    starts = np.cumsum([0] + [len(x) for x in level_ids])  # offset of each level string after the prefix
    n_cont = int(starts[-1])
    total = n_prefix + n_cont
    flat = torch.tensor([t for x in level_ids for t in x])
    input_ids = torch.cat([ids, flat.expand(batch, n_cont)], dim=1)
    allowed = torch.zeros(batch, total, total, dtype=torch.bool)
    allowed[:, :n_prefix, :n_prefix] = torch.ones(n_prefix, n_prefix, dtype=torch.bool).tril() & mask[:, None, :]
    allowed[:, n_prefix:, :n_prefix] = mask[:, None, :]
    for i, x in enumerate(level_ids):
        a, b = n_prefix + starts[i], n_prefix + starts[i + 1]
        allowed[:, a:b, a:b] = torch.ones(len(x), len(x), dtype=torch.bool).tril()
    allowed |= torch.eye(total, dtype=torch.bool)  # padding rows attend to themselves (no empty softmax)
    additive = torch.zeros(batch, 1, total, total)
    additive.masked_fill_(~allowed[:, None], torch.finfo(additive.dtype).min)
    prefix_pos = (mask.long().cumsum(1) - 1).clamp(min=0)
    offsets = torch.tensor([o for x in level_ids for o in range(len(x))])
    position_ids = torch.cat([prefix_pos, prefix_pos[:, -1:] + 1 + offsets], dim=1)
    return input_ids, additive, position_ids, n_prefix, starts, level_ids


@torch.no_grad()
def score_levels(model, tokenizer, prefixes: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Score the eleven stated levels after each prefix (a chat prompt followed by an answer).

    Returns (logprobs, greedy): logprobs (B, 11) are the log-probabilities of "0%" .. "100%" after
    `prefix + "\\nConfidence: "` (teacher forcing); greedy (B,) is the index of the level that greedy
    decoding after the bare prefix would produce, marker, digits, "%" and end mark included, or -1
    if greedy decoding leaves that path (then only real generation can tell what it says).
    Both come from one forward pass per batch (see `_encode_scoring_batch`).
    """
    input_ids, additive, position_ids, n_prefix, starts, level_ids = _encode_scoring_batch(tokenizer, prefixes)
    logits = model(input_ids=input_ids, attention_mask=additive, position_ids=position_ids).logits.float()
    logp = torch.log_softmax(logits, dim=-1)  # position t predicts token t+1
    top = logits.argmax(-1)
    batch = len(prefixes)
    # Greedy follows the marker if every marker token is the argmax after the tokens before it; the
    # prefixes are left-padded, so the marker is the last n_marker tokens of every row.
    marker = input_ids[0, n_prefix - len(tokenizer(MARKER, add_special_tokens=False)["input_ids"]):n_prefix]
    on_path = (top[:, n_prefix - 1 - len(marker):n_prefix - 1] == marker).all(dim=1)
    out = torch.zeros(batch, len(LEVELS))
    greedy = torch.full((batch,), -1, dtype=torch.long)
    eos = tokenizer.eos_token_id
    for j, ids in enumerate(level_ids):
        # the level's first token follows the prefix; each later one follows the level's previous token
        where = [n_prefix - 1] + [n_prefix + int(starts[j]) + t for t in range(len(ids) - 1)]
        out[:, j] = sum(logp[:, w, tok] for w, tok in zip(where, ids))
        follows = on_path.clone()
        for w, tok in zip(where, ids):
            follows &= top[:, w] == tok
        follows &= top[:, n_prefix + int(starts[j]) + len(ids) - 1] == eos  # then the end mark
        greedy[follows & (greedy < 0)] = j
    return out, greedy


def level_logprobs(model, tokenizer, prefixes: list[str]) -> torch.Tensor:
    """(B, 11) log-probabilities of "0%" .. "100%" after each `prefix + "\\nConfidence: "`."""
    return score_levels(model, tokenizer, prefixes)[0]


def expected_level(logprobs: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(expected stated level in [0, 1], probability mass on the eleven levels) from `level_logprobs`."""
    levels = torch.tensor(LEVELS, dtype=torch.float64) / 100
    lp = logprobs.double()
    weights = torch.softmax(lp, dim=1)
    return (weights @ levels).numpy(), lp.logsumexp(dim=1).exp().numpy()


@torch.no_grad()
def generate_continuations(model, tokenizer, prefixes: list[str], max_new_tokens: int = STATED_MAX_TOKENS) -> list[str]:
    """Greedy continuations of each prefix (chat prompt + answer), cut at the end mark."""
    tokenizer.padding_side = "left"
    enc = tokenizer(prefixes, return_tensors="pt", padding=True, add_special_tokens=False)
    eos = tokenizer.eos_token_id
    seqs = model.generate(**enc, do_sample=False, max_new_tokens=max_new_tokens,
                          pad_token_id=tokenizer.pad_token_id, eos_token_id=eos)
    new = seqs[:, enc["input_ids"].shape[1]:].tolist()
    return [tokenizer.decode(r[: r.index(eos)] if eos in r else r, skip_special_tokens=True) for r in new]


@torch.no_grad()
def read_confidence(model, tokenizer, questions: pd.DataFrame, answers, batch_size: int = 128,
                    progress: bool = True, desc: str = "verbalized") -> pd.DataFrame:
    """Both readouts of an adapted model after given answers, one row per question.

    Columns: question_id, stated_text (the greedy continuation after the answer), stated (parsed by
    `parse_confidence`, in [0, 1], NaN if it did not parse), parsed, expected (expected level under
    the model's distribution over the eleven levels, renormalized), likeliest (the most probable of
    the eleven levels), level_mass (their total probability after the marker, before renormalizing).

    The greedy continuation is read off the scoring pass when greedy decoding says the marker, a
    level and the end mark (the usual case); only the other rows are generated token by token.
    """
    answers = _check_answers(questions, answers)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    prefixes = [chat_prompt(q) + a for q, a in zip(questions["question"], answers)]
    logprobs, texts = [], []
    for start in tqdm(range(0, len(prefixes), batch_size), desc=desc, disable=not progress, leave=False):
        scores, greedy = score_levels(model, tokenizer, prefixes[start:start + batch_size])
        logprobs.append(scores)
        texts += [f"{MARKER}{LEVELS[j]}%" if j >= 0 else None for j in greedy.tolist()]
    off_path = [i for i, t in enumerate(texts) if t is None]
    for start in range(0, len(off_path), 4 * batch_size):  # the rest, decoded token by token
        some = off_path[start:start + 4 * batch_size]
        for i, text in zip(some, generate_continuations(model, tokenizer, [prefixes[i] for i in some])):
            texts[i] = text
    stated = [parse_confidence(t) for t in texts]
    logprobs = torch.cat(logprobs)
    expected, mass = expected_level(logprobs)
    return pd.DataFrame({
        "question_id": questions["question_id"].to_numpy(),
        "stated_text": texts,
        "stated": np.array([np.nan if v is None else v for v in stated], dtype=float),
        "parsed": [v is not None for v in stated],
        "expected": expected,
        "likeliest": np.asarray(LEVELS, dtype=float)[logprobs.argmax(dim=1).numpy()] / 100,
        "level_mass": mass,
    })


def _source_name(source: str, checkpoint: str) -> str:
    return checkpoint if source == "oracle" else source


def _results_deps(checkpoint: str, split: str, adapter: str):
    return [("verbalized_adapter", {"checkpoint": adapter}), ("greedy", {"checkpoint": checkpoint, "split": split})]


@register("verbalized", version="3", deps=_results_deps, settings_keys=SPLIT_KEYS)
def _build_results(folder, checkpoint: str, split: str, adapter: str) -> pd.DataFrame:
    """Verbalized confidence of one checkpoint on one split, read through the adapter trained on `adapter`."""
    set_threads()  # HELPERS_THREADS, or every core
    greedy = load_or_build("greedy", checkpoint=checkpoint, split=split)
    questions = sums.split(split)
    if not questions["question_id"].equals(greedy["question_id"]):
        raise RuntimeError("cached greedy results are out of step with the split; rebuild them")
    model, tokenizer = load_adapted(checkpoint, adapter)
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


def verbalized_results(split: str = "test", checkpoints=None, source: str = "oracle") -> pd.DataFrame:
    """Verbalized confidence of several checkpoints (default: the evaluation ones), one long frame.

    source="oracle" reads each checkpoint through its own adapter; a training checkpoint's name reads
    every checkpoint through that checkpoint's adapter (non-oracle). Columns: checkpoint, adapter,
    question_id, text, answer, correct (of the checkpoint's own greedy answer), token_probability,
    stated_text, stated (NaN if unparsed), parsed, expected, likeliest, level_mass, and confidence
    (= expected, always defined; use `stated` with `parsed` for the decoded number).
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


@register("verbalized_rephrasings", version="2", deps=_rephrase_deps, settings_keys=SPLIT_KEYS, config=_rephrase_config)
def _build_rephrasings(folder, checkpoint: str) -> pd.DataFrame:
    """The first n_rephrase test questions in every phrasing: greedy answer, token probability, both readouts."""
    set_threads()  # HELPERS_THREADS, or every core
    s = verbalized_settings()
    base = sums.split("test").iloc[: s.n_rephrase]
    model, tokenizer = load_checkpoint(checkpoint)
    frames = []
    for template in range(len(sums.QUESTION_TEMPLATES["sum"])):
        qs = sums.make_questions("sum", base["a"], base["b"], template=template)
        answers = decoding.greedy(model, tokenizer, qs, progress=False)
        frames.append(qs.merge(answers, on="question_id"))
    adapted = attach_adapter(model, adapter_path(checkpoint)).merge_and_unload()
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
    evaluation = _checkpoints().evaluation
    return evaluation[len(evaluation) // 2]


def rephrasing_results(checkpoint: str | None = None) -> pd.DataFrame:
    """The first n_rephrase test questions asked in every phrasing of `sums.QUESTION_TEMPLATES`, answered
    greedily and read through the checkpoint's own adapter (default: `focus_checkpoint()`).

    One row per (question, template): question_id, template, question, text, answer, correct,
    token_probability, and the readouts of `read_confidence`. The adapter only ever saw template 0.
    """
    name = _check_checkpoint(checkpoint or focus_checkpoint())
    return load_or_build("verbalized_rephrasings", checkpoint=name)


def adapter_checkpoints() -> list[str]:
    """The checkpoints that get an adapter: every evaluation checkpoint (oracle) and `default_source()`."""
    return [default_source()] + list(_checkpoints().evaluation)


def build_all() -> None:
    """Everything notebook 03 loads, stage by stage: targets, adapters, readouts (oracle and non-oracle
    on the evaluation checkpoints), rephrasings."""
    for name in adapter_checkpoints():
        targets(name)
    for name in adapter_checkpoints():
        adapter_info(name)
    verbalized_results("test", source="oracle")
    verbalized_results("test", source=default_source())
    rephrasing_results()


def build_costs() -> pd.DataFrame:
    """Seconds each cached stage took when it was built, per checkpoint (builds what is missing).

    sampling targets: the targets' build; LoRA training: the training loop alone; readouts: both
    readouts on the test split (oracle, and for evaluation checkpoints also non-oracle).
    """
    from ..artifacts import built_seconds

    rows = []
    for name in adapter_checkpoints():
        targets(name)
        rows.append({"checkpoint": name, "stage": "sampling targets",
                     "seconds": built_seconds("verbalized_targets", checkpoint=name)})
        rows.append({"checkpoint": name, "stage": "LoRA training", "seconds": adapter_info(name)["train_seconds"]})
    for source in ("oracle", default_source()):
        for name in _checkpoints().evaluation:
            df = load_or_build("verbalized", checkpoint=name, split="test", adapter=_source_name(source, name))
            rows.append({"checkpoint": name, "stage": "readouts (oracle)" if source == "oracle" else "readouts (non-oracle)",
                         "seconds": df.attrs.get("read_seconds", np.nan)})
    return pd.DataFrame(rows)


EXTRA_BUILDS.append(("verbalized", build_all))  # stage of `python -m helpers build` (notebook 03)
