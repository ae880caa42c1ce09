"""One training run of the tiny model, its saved checkpoints, and which of them the series uses.

The run's checkpoints stand in for an open model's public checkpoints (notebook 00). A shifting
data mixture (small operands, then large, then small again, then the uniform mix while the learning rate
anneals) makes knowledge both appear and disappear between checkpoints, like continued pre-training.
Every size and the mixture come from `config.world()`. Which checkpoints were selected, and where they
live, is `helpers.checkpoints` (re-exported here for the notebooks).

Layer 5: imports config, sums, artifacts, model, loop, checkpoints and decoding.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from . import artifacts, config, loop, sums
from .artifacts import register
from .checkpoints import (Checkpoints, checkpoint_path, get_checkpoints, saved_steps,  # noqa: F401 (re-exported)
                          step_name, world)
from .decoding import greedy
from .model import build_model, build_tokenizer, chat_prompt, load_pretrained


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


def lr_factor(step: int, s) -> float:
    """Learning-rate multiplier: linear warm-up, constant, then a cosine anneal from `lr_decay_start`.

    `s` has train_steps, warmup_steps, lr_decay_start and min_lr_ratio (`config.world()`)."""
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


def train_run(folder: Path, seed: int | None = None) -> pd.DataFrame:
    """Train from scratch (sizes from `config.world()`), saving a checkpoint every `save_every` steps; returns the log."""
    s = config.world()
    seed = s.seed if seed is None else seed
    config.set_seed(seed)
    config.set_threads()
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    optim = torch.optim.AdamW(model.parameters(), lr=s.lr, weight_decay=s.weight_decay, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda step: lr_factor(step, s))
    rng = np.random.default_rng([seed, 7])
    held_out = sums.held_out_ids()
    monitor = sums.split("test").iloc[: s.n_monitor]
    log, window = [], []

    def batches():
        for step in range(1, s.train_steps + 1):
            yield sums.training_batch(rng, s.batch_size, sums.phase_at(step - 1, s.train_steps), held_out)

    def after_step(step: int, loss: float) -> None:
        window.append(loss)
        if step % s.save_every == 0:
            model.save_pretrained(folder / "checkpoints" / step_name(step))
            tokenizer.save_pretrained(folder / "checkpoints" / step_name(step))
            log.append({"step": step, "phase": sums.phase_at(step - 1, s.train_steps), "loss": float(np.mean(window)),
                        **_monitor(model, tokenizer, monitor)})
            window.clear()

    loop.train(model, optim, batches(), lambda pairs: training_step_loss(model, tokenizer, pairs), scheduler=sched,
               clip_norm=1.0, after_step=after_step, total=s.train_steps, desc="training")
    return pd.DataFrame(log)


def first_save(log: pd.DataFrame, first_below: float | None = None) -> int:
    """Index of the last save before monitor accuracy first reaches `first_below` (0 if it starts there).

    `first_below` defaults to `config.world().first_below`."""
    first_below = config.world().first_below if first_below is None else first_below
    reached = np.flatnonzero(log["accuracy"].to_numpy() >= first_below)
    return max(int(reached[0]) - 1, 0) if reached.size else 0


def select_checkpoints(log: pd.DataFrame, n: int, first_below: float | None = None, changes=None) -> list[int]:
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


@register("world", version="1")
def _build_world(folder: Path) -> dict:
    """Train the model and save every checkpoint (the `selection` artifact picks the ones used)."""
    return {"log": train_run(folder)}


@register("selection", version="1")
def _build_selection(folder: Path) -> dict:
    """Score every save on the monitor questions, then pick the checkpoints the series uses."""
    s, log = config.world(), artifacts.load_or_build("world")["log"]
    monitor = sums.split("test").iloc[: s.n_monitor]
    saves = artifacts.folder("world") / "checkpoints"
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
    min_lost = math.ceil(s.monitor_min_regressions * s.n_monitor / 1000)
    evaluation = evaluation_picks(correct, n_eval, min_lost, earliest=start + s.n_training_checkpoints)
    early = log.iloc[start : evaluation[0]]
    training = select_checkpoints(early, s.n_training_checkpoints, first_below=0.0, changes=changes[start : evaluation[0]])
    steps = training + [int(log["step"].iloc[i]) for i in evaluation]
    return {"selected": [step_name(x) for x in steps], "n_training": s.n_training_checkpoints,
            "changes": pd.Series(changes, index=log["step"], name="monitor answers flipped since the previous save")}
