"""One training run of the tiny model, its saved checkpoints, and which of them the series uses.

The run's checkpoints stand in for an open model's public checkpoints (notebook 00). A shifting
data mixture (small operands, then large, then small again, then the uniform mix while the learning rate
anneals) makes knowledge both appear and disappear between checkpoints, like continued pre-training.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from . import sums
from .artifacts import artifact_dir, load_or_build, register
from .config import SEED, WORLD_KEYS, Settings, set_seed, set_threads, settings
from .decoding import greedy
from .model import build_model, build_tokenizer, chat_prompt


FIRST_BELOW = 0.35  # the first selected checkpoint is the last save before monitor accuracy reaches this
# Regressions required between neighbouring evaluation checkpoints, per 1,000 monitor questions. The
# monitor is a fifth of the test set, where notebook 00 asks for 100 (20 per 1,000): 30 leaves room
# for the sampling noise of the subset.
MONITOR_MIN_REGRESSIONS = 30


def step_name(step: int) -> str:
    return f"step-{step:05d}"


def encode_training_pairs(tokenizer, pairs: list[tuple[str, str]]) -> dict[str, torch.Tensor]:
    """Right-padded (prompt + answer + end mark) ids; the loss sees only the answer and end mark."""
    prompts = [chat_prompt(q) for q, _ in pairs]
    prompt_len = torch.tensor([len(p) for p in tokenizer(prompts, add_special_tokens=False)["input_ids"]])
    enc = tokenizer([p + a + tokenizer.eos_token for p, (_, a) in zip(prompts, pairs)],
                    add_special_tokens=False, padding=True, padding_side="right", return_tensors="pt")
    positions = torch.arange(enc["input_ids"].shape[1])
    is_answer = (positions >= prompt_len[:, None]) & enc["attention_mask"].bool()
    labels = enc["input_ids"].masked_fill(~is_answer, -100)
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"], "labels": labels}


def lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Summed next-token cross-entropy; logits (B, T, V), labels (B, T) with -100 where ignored."""
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100, reduction="sum"
    )


def training_step_loss(model, tokenizer, pairs: list[tuple[str, str]], n_buckets: int = 4) -> torch.Tensor:
    """Mean answer-token loss of a batch, computed in length buckets to waste less padding.

    Sorting by length and running a few narrower forward passes is much cheaper on CPU than padding
    the whole batch to its longest phrasing. Gradients accumulate as if it were one batch.
    """
    pairs = sorted(pairs, key=lambda qa: len(qa[0]) + len(qa[1]))
    size = math.ceil(len(pairs) / n_buckets)
    chunks = [encode_training_pairs(tokenizer, pairs[i : i + size]) for i in range(0, len(pairs), size)]
    n_tokens = sum(int((c["labels"][:, 1:] != -100).sum()) for c in chunks)
    total = 0.0
    for c in chunks:
        logits = model(input_ids=c["input_ids"], attention_mask=c["attention_mask"]).logits
        loss = lm_loss(logits, c["labels"]) / n_tokens
        loss.backward()
        total += loss.item()
    return torch.tensor(total)


def lr_factor(step: int, s: Settings) -> float:
    """Learning-rate multiplier: linear warm-up, constant, then a cosine anneal from `lr_decay_start`."""
    warm = min(1.0, (step + 1) / s.warmup_steps)
    t = (step / s.train_steps - s.lr_decay_start) / max(1.0 - s.lr_decay_start, 1e-9)
    if t <= 0:
        return warm
    return warm * (s.min_lr_ratio + (1 - s.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(t, 1.0))))


def _monitor(model, tokenizer, monitor: pd.DataFrame) -> dict[str, float]:
    model.eval()
    res = greedy(model, tokenizer, monitor, progress=False)
    model.train()
    small = monitor["small"].to_numpy()
    correct = res["correct"].to_numpy()
    return {"accuracy": correct.mean(), "accuracy_small": correct[small].mean(), "accuracy_rest": correct[~small].mean()}


def train_run(folder: Path, s: Settings | None = None, seed: int = SEED) -> pd.DataFrame:
    """Train from scratch, saving a checkpoint every `save_every` steps; returns the log."""
    s = s or settings()
    set_seed(seed)
    set_threads()
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, s)
    model.train()
    optim = torch.optim.AdamW(model.parameters(), lr=s.lr, weight_decay=s.weight_decay, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda step: lr_factor(step, s))
    rng = np.random.default_rng([seed, 7])
    held_out = sums.held_out_ids()
    monitor = sums.split("test").iloc[: s.n_monitor]
    log, losses = [], []
    bar = tqdm(range(1, s.train_steps + 1), desc="training", mininterval=2)
    for step in bar:
        phase = sums.phase_at(step - 1, s.train_steps)
        optim.zero_grad(set_to_none=True)
        loss = training_step_loss(model, tokenizer, sums.training_batch(rng, s.batch_size, phase, held_out))
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        sched.step()
        losses.append(loss.item())
        if step % s.save_every == 0:
            model.save_pretrained(folder / "checkpoints" / step_name(step))
            tokenizer.save_pretrained(folder / "checkpoints" / step_name(step))
            row = {"step": step, "phase": phase, "loss": float(np.mean(losses)), **_monitor(model, tokenizer, monitor)}
            log.append(row)
            losses = []
            bar.set_postfix(loss=f"{row['loss']:.3f}", acc=f"{row['accuracy']:.2f}")
    return pd.DataFrame(log)


def first_save(log: pd.DataFrame, first_below: float = FIRST_BELOW) -> int:
    """Index of the last save before monitor accuracy first reaches `first_below` (0 if it starts there)."""
    reached = np.flatnonzero(log["accuracy"].to_numpy() >= first_below)
    return max(int(reached[0]) - 1, 0) if reached.size else 0


def select_checkpoints(log: pd.DataFrame, n: int, first_below: float = FIRST_BELOW, changes=None) -> list[int]:
    """Pick `n` saved steps by what the model knows, not by step number.

    The first pick is the last save before accuracy first reaches `first_below` (so the series starts
    from a checkpoint that knows little, wherever the seed put the learning curve), the last is the
    final save. In between, picks are spread evenly along the cumulative `changes` (one count per save:
    how many monitor answers flipped since the previous save), so stretches where knowledge moves get
    more checkpoints and a plateau does not fill up with near-copies. Without `changes`, they are
    spread evenly over the saves.
    """
    if n < 2:
        raise ValueError(f"need at least 2 checkpoints, got n={n}")
    steps = log["step"].to_numpy()
    start = first_save(log, first_below)
    last = len(steps) - 1
    if last - start + 1 < n:
        raise ValueError(f"only {last - start + 1} saves after the start; lower n or save more often")
    if changes is None:
        position = np.arange(len(steps), dtype=float)
    else:
        changes = np.asarray(changes, dtype=float)
        if changes.shape != steps.shape or np.isnan(changes).any() or (changes < 0).any():
            raise ValueError(f"changes must hold one non-negative count per save ({len(steps)}), got {changes!r}")
        position = np.cumsum(changes)
    targets = np.linspace(position[start], position[last], n)
    picks = [start]
    for j, target in enumerate(targets[1:], start=1):
        nearest = start + int(np.argmin(np.abs(position[start:] - target)))
        # strictly after the previous pick, and leaving room for the picks still to come
        picks.append(min(max(nearest, picks[-1] + 1), last - (n - 1 - j)))
    return [int(steps[i]) for i in picks]


def _saves_by_questions(correct) -> np.ndarray:
    correct = np.asarray(correct, dtype=bool)
    if correct.ndim != 2 or correct.shape[0] == 0:
        raise ValueError(f"correct must be a (saves, questions) boolean array, got shape {correct.shape}")
    return correct


def evaluation_picks(correct: np.ndarray, n: int, min_regressions: int, earliest: int = 0) -> list[int]:
    """Indices of `n` saves ending with the last one, each the latest save before the next pick that
    has at least `min_regressions` questions right where the next pick is wrong.

    `correct` is (n_saves, n_questions) booleans on the monitor set. Contrast sets need regressions
    between neighbouring evaluation checkpoints; near the end of an annealed run the model barely
    forgets, so neighbouring saves there would be near-copies. Where no earlier save has enough
    regressions, the previous save is taken (and notebook 00's check reports the shortfall).
    """
    correct = _saves_by_questions(correct)
    if n < 1 or correct.shape[0] - earliest < n:
        raise ValueError(f"cannot pick {n} evaluation saves from saves {earliest}..{correct.shape[0] - 1}")
    picks = [correct.shape[0] - 1]
    while len(picks) < n:
        after = picks[0]
        lowest = earliest + (n - 1 - len(picks))  # leave room for the picks still to come
        lost = (correct[lowest:after] & ~correct[after]).sum(axis=1)  # regressions into `after`
        enough = np.flatnonzero(lost >= min_regressions)
        picks.insert(0, lowest + int(enough[-1]) if enough.size else after - 1)
    return picks


def monitor_flips(correct: np.ndarray) -> np.ndarray:
    """Per save, how many monitor questions changed correctness since the previous save (0 for the first).

    `correct` is (n_saves, n_questions) booleans.
    """
    correct = _saves_by_questions(correct)
    return np.concatenate([[0], (correct[1:] != correct[:-1]).sum(axis=1)])


@dataclass(frozen=True)
class Checkpoints:
    """The selected checkpoints: the earlier ones train non-oracle methods, the later ones evaluate."""

    all: tuple[str, ...]
    training: tuple[str, ...]
    evaluation: tuple[str, ...]

    def validate(self, names=None) -> list[str]:
        """`names` (default: all) checked against the selected checkpoints."""
        if names is None:
            return list(self.all)
        if isinstance(names, str):
            names = [names]
        unknown = [n for n in names if n not in self.all]
        if unknown:
            raise ValueError(f"unknown checkpoint(s) {unknown}; available: {list(self.all)}")
        if not names:
            raise ValueError(f"no checkpoints given; choose from {list(self.all)}")
        return list(names)

    def index(self, name: str) -> int:
        return self.all.index(self.validate([name])[0])


def _stream_config() -> dict:
    """The training stream's constants: changing any of them must retrain the world."""
    return {"phases": sums.PHASES, "phase_ranges": sums.PHASE_RANGES, "phase_majority": sums.PHASE_MAJORITY,
            "transfer_share": sums.TRANSFER_SHARE, "question_weights": sums.QUESTION_WEIGHTS,
            "answer_weights": sums.ANSWER_WEIGHTS}


@register("world", version="1", settings_keys=WORLD_KEYS, config=_stream_config)
def _build_world(folder: Path) -> dict:
    """Train the model and save every checkpoint (the `selection` artifact picks the ones used)."""
    return {"log": train_run(folder, settings())}


@register("selection", version="1", deps=lambda: [("world", {})], settings_keys=WORLD_KEYS,
          config=lambda: {"first_below": FIRST_BELOW, "monitor_min_regressions": MONITOR_MIN_REGRESSIONS})
def _build_selection(folder: Path) -> dict:
    """Score every save on the monitor questions, then pick the checkpoints the series uses."""
    from .model import load_pretrained

    s, log = settings(), load_or_build("world")["log"]
    monitor = sums.split("test").iloc[: s.n_monitor]
    saves = artifact_dir("world") / "checkpoints"
    correct = []
    for step in tqdm(log["step"], desc="scoring saves", mininterval=2):
        model, tokenizer = load_pretrained(saves / step_name(int(step)))
        correct.append(greedy(model, tokenizer, monitor, progress=False)["correct"].to_numpy())
    correct = np.array(correct)
    changes = monitor_flips(correct)
    # Evaluation checkpoints: from the end backwards, each with enough regressions into the next.
    # Training checkpoints: spread along the knowledge change between the start and the first of those.
    start = first_save(log)
    n_eval = s.n_checkpoints - s.n_training_checkpoints
    min_lost = math.ceil(MONITOR_MIN_REGRESSIONS * s.n_monitor / 1000)
    evaluation = evaluation_picks(correct, n_eval, min_lost, earliest=start + s.n_training_checkpoints)
    early = log.iloc[start : evaluation[0]]
    training = select_checkpoints(early, s.n_training_checkpoints, first_below=0.0, changes=changes[start : evaluation[0]])
    steps = training + [int(log["step"].iloc[i]) for i in evaluation]
    return {"selected": [step_name(x) for x in steps], "n_training": s.n_training_checkpoints,
            "changes": pd.Series(changes, index=log["step"], name="monitor answers flipped since the previous save")}


def world() -> dict:
    """The cached training run: its log, the selected checkpoint names and the per-save flips (builds if needed)."""
    run, selection = load_or_build("world"), load_or_build("selection")
    return {"log": run["log"], **selection}


def get_checkpoints() -> Checkpoints:
    """The selected checkpoints, split into training and evaluation ones."""
    w = world()
    names = tuple(w["selected"])
    return Checkpoints(all=names, training=names[: w["n_training"]], evaluation=names[w["n_training"] :])


def saved_steps() -> list[str]:
    """Every checkpoint the run saved, selected or not."""
    load_or_build("world")
    return sorted(p.name for p in (artifact_dir("world") / "checkpoints").iterdir())


def checkpoint_path(name: str) -> Path:
    """Folder of a saved checkpoint (model and tokenizer), ready for `from_pretrained`.

    Besides the run's steps, "finetuned" and "rl" name the post-trained models of notebook 01.
    """
    from .rl import POST_TRAINED, post_trained_path

    if name in POST_TRAINED:
        return post_trained_path(name)
    saved = saved_steps()
    if name not in saved:
        raise ValueError(f"unknown checkpoint {name!r}; available: {get_checkpoints().all} (selected), "
                         f"any saved step {saved[0]}..{saved[-1]}, or {POST_TRAINED}")
    return artifact_dir("world") / "checkpoints" / name
