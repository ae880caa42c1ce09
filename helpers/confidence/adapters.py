"""Confidence adapters: a LoRA adapter asks a checkpoint "Correct?" about its own answer (notebooks 05, 06).

The prompt is the question, the checkpoint's answer and a second user turn `Correct?`; the confidence is
P(`Y`) / (P(`Y`) + P(`N`)) at the next position, read through the checkpoint's **own** LM head and
embeddings (paper A.7: no new head). Only the LoRA weights train, with binary cross-entropy on
(question, that checkpoint's greedy answer, correctness) from `adapter_train`. They can be moved onto
another checkpoint's weights (non-oracle) or trained across several checkpoints at once, each batch
through its own checkpoint's weights (multi-checkpoint, notebook 06).

Read-out temperature. `Y` and `N` never occur in the LM's training text, so their output embeddings are
two near-copies of the "unused token" vector: ‖w_Y − w_N‖ is 0.16 at the first selected checkpoint and
0.05 at the last (weight decay keeps shrinking it). After the final layer norm, the raw logit gap
h·(w_Y − w_N) cannot leave ±0.62 at the last checkpoint (±2.06 at the first), so whatever the adapter
learns, its confidence stays within [0.35, 0.65] there, and the same adapter gets less confident on
every later checkpoint. The gap is therefore divided by ‖w_Y − w_N‖ of the checkpoint being read: the
Y/N softmax at temperature ‖w_Y − w_N‖, still read through that checkpoint's own head, with no new
parameter (`AdapterSettings.normalize_readout`; full mode, step-03000 oracle, test AUC 0.63 raw vs
0.83 normalized; a learned temperature stayed within 10% of ‖w_Y − w_N‖⁻¹).
"""
from __future__ import annotations

import hashlib
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from .. import sums
from ..artifacts import artifact_dir, load_or_build, register
from ..config import SEED, SPLIT_KEYS, fast_mode, set_seed, set_threads

VERIFY = "Correct?"  # the second user turn
YES, NO = "Y", "N"
# GPT-2's layers are Conv1D (fan_in_fan_out=True). "c_proj" alone would match both the attention and
# the MLP projection, so the pattern names each one.
ATTENTION = r".*\.attn\.(c_attn|c_proj)$"
ATTENTION_AND_MLP = r".*\.(attn\.(c_attn|c_proj)|mlp\.(c_fc|c_proj))$"
FRESH_SEED = 205  # the extra questions when an adapter gets more examples than adapter_train has
COLUMNS = ["checkpoint", "question_id", "answer", "correct", "confidence"]


@dataclass(frozen=True)
class AdapterSettings:
    """LoRA and training sizes (the measurements behind them are in the comments)."""

    rank: int = 8
    alpha: int = 16
    # Full-mode step-03000 oracle, test AUC (token probability: 0.815). Attention only: 0.80; with the
    # MLP: 0.83 (seeds 0-2: 0.828, 0.835, 0.825), for 30% more time.
    targets: str = ATTENTION_AND_MLP
    # The paper trains one epoch; here 1 epoch gives 0.76, 2 give 0.80, 3 give 0.83: three are what it
    # takes to beat the token probability, at about 20 s per adapter on one busy core.
    epochs: int = 3
    batch_size: int = 64
    lr: float = 5e-3  # linearly decayed to 0
    normalize_readout: bool = True  # divide the Y/N gap by ‖w_Y − w_N‖ (module docstring)
    score_batch_size: int = 1000


FULL_ADAPTER = AdapterSettings()
FAST_ADAPTER = AdapterSettings(epochs=1, batch_size=32)  # same code path, a few seconds per adapter


def adapter_settings() -> AdapterSettings:
    """The adapter sizes for the current mode."""
    return FAST_ADAPTER if fast_mode() else FULL_ADAPTER


# ---------------------------------------------------------------------------- prompt and read-out


def verification_prompt(question: str, answer: str) -> str:
    """`<bos><user>question<assistant>answer<eos><user>Correct?<assistant>`: the adapter's prompt."""
    from ..model import ASSISTANT, EOS, USER, chat_prompt

    return f"{chat_prompt(question)}{answer}{EOS}{USER}{VERIFY}{ASSISTANT}"


def encode_verification(tokenizer, questions: Sequence[str], answers: Sequence[str]) -> dict[str, torch.Tensor]:
    """Left-padded verification prompts with attention mask and position ids (positions start at 0)."""
    if len(questions) != len(answers):
        raise ValueError(f"got {len(questions)} questions but {len(answers)} answers; pass one answer per question")
    texts = [verification_prompt(q, a) for q, a in zip(questions, answers)]
    enc = tokenizer(texts, add_special_tokens=False, padding=True, padding_side="left", return_tensors="pt")
    # Left padding puts every prompt's last token in the last column; explicit positions keep each
    # prompt's positions as in training (0 at <bos>), whatever its padding.
    position_ids = (enc["attention_mask"].cumsum(1) - 1).clamp(min=0)
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"], "position_ids": position_ids}


def yes_no_ids(tokenizer) -> tuple[int, int]:
    """Token ids of `Y` and `N` (in the vocabulary since before the base model trained)."""
    ids = tokenizer.convert_tokens_to_ids([YES, NO])
    if tokenizer.unk_token_id in ids:
        raise ValueError("the tokenizer has no `Y`/`N` tokens; use helpers.model.build_tokenizer")
    return ids[0], ids[1]


def readout_temperature(model, tokenizer) -> float:
    """‖w_Y − w_N‖ of the model's own output embeddings: the Y/N softmax's temperature."""
    y, n = yes_no_ids(tokenizer)
    head = model.get_output_embeddings().weight
    return float((head[y] - head[n]).norm())


def yes_no_logits(model, batch: Mapping[str, torch.Tensor], tokenizer) -> torch.Tensor:
    """Logits of `Y` and `N` at each prompt's last position, through the model's own head: (B, 2)."""
    y, n = yes_no_ids(tokenizer)
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                   position_ids=batch["position_ids"], logits_to_keep=1).logits  # (B, 1, V)
    return logits[:, -1, [y, n]]


def _margin(model, batch, tokenizer, temperature: float) -> torch.Tensor:
    """(logit_Y − logit_N) / temperature: the log-odds of `Y` over `N`, (B,)."""
    both = yes_no_logits(model, batch, tokenizer)
    return (both[:, 0] - both[:, 1]) / temperature


def _temperature(model, tokenizer, normalize: bool | None) -> float:
    normalize = adapter_settings().normalize_readout if normalize is None else normalize
    return readout_temperature(model, tokenizer) if normalize else 1.0


@torch.no_grad()
def adapter_confidence(model, tokenizer, questions: Sequence[str], answers: Sequence[str],
                       normalize: bool | None = None, batch_size: int | None = None) -> np.ndarray:
    """P(Y) / (P(Y) + P(N)) after `Correct?` for each (question, answer text) pair (notebooks 05, 06).

    `normalize` (default: the module setting) reads the Y/N softmax at temperature ‖w_Y − w_N‖ of the
    model's own head; False gives the raw P(Y) / (P(Y) + P(N)).
    """
    questions, answers = list(questions), list(answers)
    if not questions:
        raise ValueError("questions is empty; pass at least one question with its answer")
    batch_size = batch_size or adapter_settings().score_batch_size
    temperature = _temperature(model, tokenizer, normalize)
    was_training = model.training
    model.eval()
    out = []
    for start in range(0, len(questions), batch_size):
        batch = encode_verification(tokenizer, questions[start:start + batch_size], answers[start:start + batch_size])
        out.append(torch.sigmoid(_margin(model, batch, tokenizer, temperature)).double())
    model.train(was_training)
    return torch.cat(out).numpy()


# ---------------------------------------------------------------------------- base weights


def _base_parameters(model) -> dict[str, torch.nn.Parameter]:
    """The base (non-LoRA) parameters under plain GPT-2 names, for a plain or a peft-wrapped model."""
    from peft import PeftModel

    inner = model.get_base_model() if isinstance(model, PeftModel) else model
    return {name.replace(".base_layer", ""): p for name, p in inner.named_parameters() if "lora_" not in name}


def base_state(model) -> dict[str, torch.Tensor]:
    """A copy of the model's base weights (LoRA excluded), keyed by plain GPT-2 parameter names."""
    return {name: p.detach().clone() for name, p in _base_parameters(model).items()}


@torch.no_grad()
def load_base(model, state: Mapping[str, torch.Tensor]) -> None:
    """Copy base weights into a (peft-wrapped) model in place; its LoRA weights stay as they are."""
    params = _base_parameters(model)
    if set(params) != set(state):
        raise ValueError("base weights do not match the model's architecture; pass base_state() of a checkpoint")
    for name, p in params.items():
        p.copy_(state[name])


def base_weights_hash(model) -> str:
    """A short hash of the base weights (LoRA excluded): equal hashes mean the same checkpoint weights."""
    h = hashlib.sha256()
    for name, p in sorted(_base_parameters(model).items()):
        h.update(name.encode())
        h.update(p.detach().float().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------------------- training


def lora_model(model, settings: AdapterSettings | None = None):
    """Wrap a GPT-2 in a fresh LoRA adapter (in place); only the LoRA weights are trainable."""
    from peft import LoraConfig, get_peft_model

    s = settings or adapter_settings()
    config = LoraConfig(r=s.rank, lora_alpha=s.alpha, target_modules=s.targets, fan_in_fan_out=True,
                        lora_dropout=0.0, bias="none")
    with warnings.catch_warnings():
        # peft reads transformers' deprecated `is_gradient_checkpointing` property while wrapping the
        # model; the FutureWarning is about transformers v6 and changes nothing here.
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        return get_peft_model(model, config)


def _batches(examples: pd.DataFrame, batch_size: int, rng: np.random.Generator, by_base: bool) -> list[np.ndarray]:
    """Row positions per batch, in random order; with `by_base`, every batch comes from one base's rows."""
    groups = examples.groupby("base", sort=True).indices if by_base else {None: np.arange(len(examples))}
    batches = []
    for rows in groups.values():
        # Not sorted by length: batches of equal-length prompts train 10% faster but group the answer
        # forms together, and cost 0.04 test AUC (step-03000, measured).
        rows = rng.permutation(rows)
        batches += [rows[i:i + batch_size] for i in range(0, len(rows), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def _batch_loss(model, tokenizer, batch: pd.DataFrame, temperature: float) -> torch.Tensor:
    """Binary cross-entropy of the Y/N log-odds against the batch's labels."""
    enc = encode_verification(tokenizer, batch["question"].tolist(), batch["text"].tolist())
    labels = torch.tensor(batch["label"].to_numpy(), dtype=torch.float)
    return torch.nn.functional.binary_cross_entropy_with_logits(_margin(model, enc, tokenizer, temperature), labels)


def _check_examples(examples: pd.DataFrame) -> None:
    if not isinstance(examples, pd.DataFrame) or len(examples) == 0:
        raise ValueError("examples is empty; pass a frame with question, text and label columns")
    missing = {"question", "text", "label"} - set(examples.columns)
    if missing:
        raise ValueError(f"examples lacks columns {sorted(missing)}; see adapter_examples()")


def fit_adapter(model, tokenizer, examples: pd.DataFrame, bases: Mapping[str, Mapping[str, torch.Tensor]] | None = None,
                seed: int = SEED, settings: AdapterSettings | None = None):
    """Train a fresh LoRA adapter on (question, answer text, label) rows; returns (peft model, log).

    `model` is wrapped in place. With `bases`, each row's `base` column names the weights its batch runs
    through (multi-checkpoint training: the base weights are swapped in before each batch, the LoRA
    weights are shared); the model's own weights are restored at the end.
    """
    _check_examples(examples)
    s = settings or adapter_settings()
    if bases is not None:
        if "base" not in examples:
            raise ValueError("with `bases`, examples needs a `base` column naming each row's weights")
        unknown = set(examples["base"]) - set(bases)
        if unknown:
            raise ValueError(f"examples name bases {sorted(map(str, unknown))} that `bases` lacks")
    set_seed(seed)
    rng = np.random.default_rng([seed, 31])
    peft_model = lora_model(model, s)
    own = base_state(peft_model) if bases is not None else None
    params = [p for p in peft_model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=s.lr, weight_decay=0.0)
    epochs = [_batches(examples, s.batch_size, rng, by_base=bases is not None) for _ in range(s.epochs)]
    total = sum(map(len, epochs))
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda step: 1 - step / total)
    current, losses, start = None, [], time.perf_counter()
    peft_model.train()
    for batches in epochs:
        seen = 0.0
        for rows in batches:
            batch = examples.iloc[rows]
            if bases is not None and batch["base"].iloc[0] != current:
                current = batch["base"].iloc[0]
                load_base(peft_model, bases[current])
            # The temperature is read from the weights this batch runs through.
            loss = _batch_loss(peft_model, tokenizer, batch, _temperature(peft_model, tokenizer, s.normalize_readout))
            optim.zero_grad(set_to_none=True)
            loss.backward()
            optim.step()
            sched.step()
            seen += loss.item() * len(rows)
        losses.append(seen / len(examples))
    if own is not None:
        load_base(peft_model, own)
    peft_model.eval()
    log = {"seconds": time.perf_counter() - start, "loss_per_epoch": losses, "n_examples": len(examples),
           "n_batches": total, "settings": asdict(s)}
    return peft_model, log


def save_lora(peft_model, folder: Path, base_name: str) -> None:
    """Save only the LoRA weights (peft save_pretrained), recording `base_name` rather than a machine path."""
    peft_model.peft_config["default"].base_model_name_or_path = base_name
    # The embeddings are never trained; saying so stops peft from looking up `base_name` (a checkpoint
    # name, not a Hub id) to check whether the vocabulary grew.
    peft_model.save_pretrained(folder, save_embedding_layers=False)


# ---------------------------------------------------------------------------- training data


def _checkpoints(names) -> list[str]:
    """Checkpoint names from a name, a "a+b" string or a list, checked against the selected ones."""
    from ..training import get_checkpoints

    if isinstance(names, str):
        names = names.split("+")
    names = list(names)
    if not names:
        raise ValueError(f"no checkpoints given; choose from {list(get_checkpoints().all)}")
    if len(set(names)) != len(names):
        raise ValueError(f"checkpoint listed twice in {names}; list each once")
    return get_checkpoints().validate(names)


def fresh_pool(n: int) -> pd.DataFrame:
    """n extra canonical questions outside every evaluation split (the same ones for every checkpoint)."""
    from ..rl import fresh_questions

    return fresh_questions(np.random.default_rng([SEED, FRESH_SEED]), n)


def checkpoint_examples(checkpoint: str, n: int | None = None) -> pd.DataFrame:
    """A checkpoint's greedy answers and correctness on `adapter_train` (topped up with fresh questions).

    Columns: checkpoint, question_id, question, text, correct, source ("adapter_train" or "fresh").
    Never uses `test`: fresh questions avoid every evaluation split.
    """
    from ..decoding import greedy, greedy_results
    from ..model import load_checkpoint

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
                     seed: int = SEED) -> pd.DataFrame:
    """The training rows of an adapter: each checkpoint's own answers, labelled by their correctness.

    Several checkpoints share `n_examples` (default: all of `adapter_train` each) and see the same
    questions. `random_labels` names one of them whose labels are permuted (notebook 06's ablation).
    Columns: checkpoint, base, question_id, question, text, correct, label, source.
    """
    names = _checkpoints(checkpoints)
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


def check_seed(seed) -> int:
    """`seed` as an int, or a ValueError saying what a seed must be."""
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _adapter_params(checkpoints, seed: int, n_examples: int | None, random_labels: str | None) -> dict:
    """Artifact parameters; options at their defaults are left out, so equal adapters share an entry."""
    from ..training import get_checkpoints

    seed = check_seed(seed)
    names = sorted(_checkpoints(checkpoints), key=get_checkpoints().index)  # "b+a" is the same adapter as "a+b"
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


def _adapter_deps(checkpoints: str, seed: int, **_):
    return [("world", {})] + [("greedy", {"checkpoint": c, "split": "adapter_train"}) for c in checkpoints.split("+")]


@register("adapter", version="1", deps=_adapter_deps, settings_keys=SPLIT_KEYS,
          config=lambda: {"adapter": asdict(adapter_settings()), "fresh_seed": FRESH_SEED, "verify": VERIFY})
def _build_adapter(folder: Path, checkpoints: str, seed: int, n_examples: int | None = None,
                   random_labels: str | None = None) -> dict:
    """A LoRA confidence adapter trained on one or several checkpoints' own answers."""
    from ..model import load_checkpoint

    set_threads()
    names = checkpoints.split("+")
    examples = adapter_examples(names, n_examples, random_labels, seed)
    model, tokenizer = load_checkpoint(names[0])
    bases = {name: base_state(load_checkpoint(name)[0]) for name in names} if len(names) > 1 else None
    peft_model, log = fit_adapter(model, tokenizer, examples, bases, seed)
    save_lora(peft_model, folder / "lora", names[0])
    keep = ["checkpoint", "question_id", "source", "correct", "label"]
    return {"examples": examples[keep], "log": log}


def train_adapter(checkpoints, seed: int = SEED, n_examples: int | None = None,
                  random_labels: str | None = None) -> Adapter:
    """The cached adapter trained on `checkpoints` (notebooks 05, 06); trains it on first use.

    `checkpoints`: one name (the per-checkpoint adapter), or several (a list or "a+b") for one adapter
    trained across them, each batch through its own checkpoint's weights. `n_examples` is the total
    number of training rows (default: every `adapter_train` question once per checkpoint; more than that
    adds fresh questions answered by the checkpoint: the single-checkpoint-data ablation).
    `random_labels` names the checkpoint whose labels are shuffled.
    """
    params = _adapter_params(checkpoints, seed, n_examples, random_labels)
    stored = load_or_build("adapter", **params)
    return Adapter(folder=artifact_dir("adapter", **params) / "lora",
                   checkpoints=tuple(params["checkpoints"].split("+")), seed=params["seed"],
                   examples=stored["examples"], log=stored["log"])


def apply_adapter(adapter, target_checkpoint: str):
    """(peft model, tokenizer): `target_checkpoint`'s own base weights with the adapter's LoRA weights.

    `adapter` is an `Adapter` or the checkpoint name(s) it was trained on (seed 0). Applying it to another
    checkpoint than its own is the non-oracle setting; the LoRA weights move, the base does not.
    """
    from ..model import load_checkpoint

    if not isinstance(adapter, Adapter):
        adapter = train_adapter(adapter)
    target = _checkpoints([target_checkpoint])[0]
    base, tokenizer = load_checkpoint(target)
    return attach_lora(base, adapter.folder), tokenizer


def attach_lora(base, folder: Path):
    """`base` (a plain GPT-2, wrapped in place) with the LoRA weights saved in `folder`, in eval mode."""
    from peft import PeftModel

    with warnings.catch_warnings():
        # The same harmless FutureWarning as in lora_model.
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        model = PeftModel.from_pretrained(base, folder)
    model.eval()
    return model


# ---------------------------------------------------------------------------- cached results


SOURCES = ("oracle", "multi", "<checkpoint>", "<checkpoint>+<checkpoint>...")


def _source_checkpoints(source, evaluated: str) -> str:
    """The adapter's checkpoints ("a+b") for a source spec and one evaluated checkpoint."""
    from ..training import get_checkpoints

    if isinstance(source, str) and source == "oracle":
        return evaluated
    if isinstance(source, str) and source == "multi":
        return "+".join(get_checkpoints().training)
    try:
        return "+".join(_checkpoints(source))
    except (ValueError, TypeError) as err:
        raise ValueError(f"unknown adapter source {source!r}; use one of {SOURCES} "
                         f"(checkpoints: {list(get_checkpoints().all)})") from err


def _results_deps(checkpoint: str, split: str, source: str, seed: int, **options):
    adapter = {"checkpoints": source, "seed": seed,
               **{k: options[k] for k in ("n_examples", "random_labels") if k in options}}
    return [("adapter", adapter), ("greedy", {"checkpoint": checkpoint, "split": split})]


@register("adapter_results", version="1", deps=_results_deps, settings_keys=SPLIT_KEYS,
          config=lambda: {"adapter": asdict(adapter_settings())})
def _build_adapter_results(folder: Path, checkpoint: str, split: str, source: str, seed: int,
                           n_examples: int | None = None, random_labels: str | None = None,
                           surrogate: bool = False) -> pd.DataFrame:
    """An adapter's confidence in one checkpoint's greedy answers on one split."""
    from ..decoding import greedy_results

    set_threads()
    adapter = train_adapter(source, seed, n_examples, random_labels)
    model, tokenizer = apply_adapter(adapter, source if surrogate else checkpoint)
    answers = greedy_results(split, [checkpoint])
    answers = answers.merge(sums.split(split)[["question_id", "question"]], on="question_id")
    answers["confidence"] = adapter_confidence(model, tokenizer, answers["question"], answers["text"])
    return answers[COLUMNS]


def adapter_results(split: str = "test", eval_checkpoints=None, source="oracle", seed: int = SEED,
                    n_examples: int | None = None, random_labels: str | None = None,
                    surrogate: bool = False) -> pd.DataFrame:
    """Adapter confidence in each evaluated checkpoint's greedy answers: the standard long frame.

    `source`: "oracle" (each checkpoint's own adapter), "multi" (one adapter across every training
    checkpoint), a checkpoint name (its adapter, moved onto each evaluated checkpoint: non-oracle), or
    several names ("a+b" or a list). `surrogate=True` leaves a single-checkpoint adapter on its own
    checkpoint's weights to score the evaluated checkpoint's answers (notebook 05's ablation).
    `eval_checkpoints` defaults to the evaluation checkpoints. Cached per checkpoint (notebooks 05, 06).
    """
    from ..training import get_checkpoints

    names = get_checkpoints().validate(get_checkpoints().evaluation if eval_checkpoints is None else eval_checkpoints)
    sums.split(split)  # an unknown split fails here, before anything is trained
    if surrogate and (source in ("oracle", "multi") or len(_source_checkpoints(source, names[0]).split("+")) > 1):
        raise ValueError("surrogate=True needs a single training checkpoint as source, e.g. source='step-01800'")
    frames = []
    for name in names:
        params = _adapter_params(_source_checkpoints(source, name), seed, n_examples, random_labels)
        params = {"checkpoint": name, "split": split, "source": params.pop("checkpoints"), **params}
        if surrogate:
            params["surrogate"] = True
        frames.append(load_or_build("adapter_results", **params))
    return pd.concat(frames, ignore_index=True)


# ---------------------------------------------------------------------------- multi-answer ablation


def multi_answer_examples(checkpoint: str, answers_per_question: int = 3) -> pd.DataFrame:
    """Several beam answers per `adapter_train` question, all from one checkpoint (notebook 06's ablation).

    Each distinct number among the checkpoint's ended beams (best beam's wording first, up to
    `answers_per_question`) becomes a row labelled by its correctness: more views of one checkpoint's
    knowledge, instead of more checkpoints. Uses the questions self-consistency decoded with beams.
    """
    from .self_consistency import beam_results

    if answers_per_question < 1:
        raise ValueError(f"answers_per_question must be >= 1, got {answers_per_question}")
    beams = beam_results("adapter_train", [_checkpoints([checkpoint])[0]])
    beams = beams[beams["ended"] & beams["answer"].notna()]
    rows = beams.drop_duplicates(["question_id", "answer"]).groupby("question_id", sort=False).head(answers_per_question)
    rows = rows.merge(sums.split("adapter_train")[["question_id", "question"]], on="question_id")
    rows = rows.assign(checkpoint=checkpoint, base=checkpoint, label=rows["correct"].astype(float), source="beams")
    return rows[["checkpoint", "base", "question_id", "question", "text", "correct", "label", "source"]].reset_index(drop=True)


@register("multi_answer_adapter", version="1", deps=lambda checkpoint, seed: [("beams", {"checkpoint": checkpoint, "split": "adapter_train"})],
          settings_keys=SPLIT_KEYS, config=lambda: {"adapter": asdict(adapter_settings())})
def _build_multi_answer(folder: Path, checkpoint: str, seed: int) -> dict:
    """An adapter trained on several beam answers per question of one checkpoint, scored on every evaluation checkpoint."""
    from ..decoding import greedy_results
    from ..model import load_checkpoint
    from ..training import get_checkpoints

    set_threads()
    examples = multi_answer_examples(checkpoint)
    model, tokenizer = load_checkpoint(checkpoint)
    peft_model, log = fit_adapter(model, tokenizer, examples, seed=seed)
    save_lora(peft_model, folder / "lora", checkpoint)
    questions = sums.split("test")[["question_id", "question"]]
    frames = []
    for name in get_checkpoints().evaluation:
        scored, tok = load_checkpoint(name)
        scored = attach_lora(scored, folder / "lora")
        answers = greedy_results("test", [name]).merge(questions, on="question_id")
        answers["confidence"] = adapter_confidence(scored, tok, answers["question"], answers["text"])
        frames.append(answers[COLUMNS])
    return {"examples": examples, "log": log, "results": pd.concat(frames, ignore_index=True)}


def multi_answer_results(checkpoint: str, seed: int = SEED) -> pd.DataFrame:
    """The multi-answer adapter's confidence in the evaluation checkpoints' test answers (cached)."""
    return load_or_build("multi_answer_adapter", checkpoint=_checkpoints([checkpoint])[0], seed=check_seed(seed))["results"]
