"""Baselines that never look inside the evaluated checkpoint (notebook 05; notebook 06's findings table).

- **difficulty**: logistic regression on the question's features (digits, carries, operand sizes),
  fitted on the training checkpoints' `adapter_train` correctness. The same number for every checkpoint.
- **checkpoint index**: the same plus the checkpoint's position in the run. It knows *when* a checkpoint
  was saved but not what it knows; evaluation checkpoints lie beyond the indices it was fitted on.
- **GCM** (generalized correctness model): an external verifier with its own, fixed capability. A
  separate model is trained from scratch, saved at every check, until it is as accurate as the strongest
  evaluation checkpoint; its saves are a ladder of verifier strengths (`ladder_rungs`: weak, median, strong),
  and the shipped GCM uses the median rung. A LoRA adapter (helpers/confidence/adapters.py) teaches the
  verifier to judge (question, answer) pairs from the training checkpoints' histories. It reads the evaluated
  checkpoint's answers, never its weights. Settings: `config.gcm()`.

All return the standard frame: checkpoint, question_id, answer, correct, confidence.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.compose import ColumnTransformer
from sklearn.dummy import DummyClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import OneHotEncoder

from helpers import config
from helpers.world import loop, sums
from helpers.world.decoding import greedy
from helpers.world.model import build_model, build_tokenizer
from helpers.world.training import training_step_loss

FEATURES = ("n_digits", "n_carries", "small", "carry_1", "carry_10", "carry_100", "a_size", "b_size", "sum_size")


# ---------------------------------------------------------------------------- question features


def question_features(questions: pd.DataFrame) -> pd.DataFrame:
    """Categorical difficulty features of each question (one row per question, FEATURES columns).

    Operand and sum sizes are tenths of the operand range (hundreds in full mode, tens in fast mode).
    """
    if not isinstance(questions, pd.DataFrame) or len(questions) == 0:
        raise ValueError("questions is empty; pass a question table from helpers.world.sums")
    missing = {"a", "b", "n_digits", "n_carries", "small"} - set(questions.columns)
    if missing:
        raise ValueError(f"questions lacks columns {sorted(missing)}; build it with helpers.world.sums.make_questions")
    a, b = questions["a"].to_numpy(), questions["b"].to_numpy()
    top = sums.max_operand() + 1
    out = pd.DataFrame({
        "n_digits": questions["n_digits"].to_numpy(),
        "n_carries": questions["n_carries"].to_numpy(),
        "small": questions["small"].to_numpy().astype(int),
        "a_size": a * 10 // top,
        "b_size": b * 10 // top,
        "sum_size": (a + b) * 10 // top,
    })
    for place in (1, 10, 100):  # a carry out of each digit position
        out[f"carry_{place}"] = ((a % (place * 10)) + (b % (place * 10)) >= place * 10).astype(int)
    return out[list(FEATURES)]


def fit_features(data: pd.DataFrame, use_index: bool = True) -> "FeatureBaseline":
    """Logistic regression of `correct` on the question features of `data` (and its checkpoint_index column).

    `data` holds checkpoint, correct, the FEATURES columns and checkpoint_index (`question_features` plus each
    row's checkpoint position). Features are one-hot; the checkpoint index enters as one number, so the model
    extrapolates a trend in accuracy to later checkpoints without seeing their weights.
    """
    names = tuple(dict.fromkeys(data["checkpoint"]))
    encode = [("onehot", OneHotEncoder(handle_unknown="ignore"), list(FEATURES))]
    if use_index:
        encode.append(("index", "passthrough", ["checkpoint_index"]))
    estimator = LogisticRegression(max_iter=2000)
    if data["correct"].nunique() < 2:  # a world whose training checkpoints know no sum (or every one): say so, go on
        share = "all" if data["correct"].iloc[0] else "none"
        warnings.warn(f"the checkpoints {list(names)} answer {share} of their adapter_train questions right, so the "
                      f"feature baseline has nothing to fit: it gives every question the confidence "
                      f"{1.0 if share == 'all' else 0.0}")
        estimator = DummyClassifier(strategy="prior")
    model = make_pipeline(ColumnTransformer(encode), estimator)
    cols = list(FEATURES) + (["checkpoint_index"] if use_index else [])
    model.fit(data[cols], data["correct"].astype(int))
    return FeatureBaseline(model, use_index, names)


@dataclass
class FeatureBaseline:
    """A fitted logistic regression on question features, with or without the checkpoint index."""

    model: Pipeline
    use_index: bool
    train_checkpoints: tuple[str, ...]

    def columns(self) -> list[str]:
        return list(FEATURES) + (["checkpoint_index"] if self.use_index else [])

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        """P(correct) for rows with FEATURES (and checkpoint_index) columns."""
        proba, classes = self.model.predict_proba(frame[self.columns()]), list(self.model.classes_)
        return proba[:, classes.index(1)] if 1 in classes else np.zeros(len(frame))


# ---------------------------------------------------------------------------- GCM: the verifier


def verifier_check_questions(seed: int, n: int) -> pd.DataFrame:
    """The fresh questions (outside every evaluation split) the verifier is scored on at every check."""
    return sums.fresh_questions(np.random.default_rng([seed, config.gcm().check_seed]), n)


RUNGS = ("weak", "median", "strong")


def ladder_rungs(log: pd.DataFrame, accuracies) -> dict[str, int]:
    """Pick three saves of the verifier's run by their check accuracy against the evaluation checkpoints'.

    `log` has columns step, accuracy (one row per save); `accuracies` are the evaluation checkpoints' test
    accuracies. The rule: ``weak`` is the last save at or below the weakest checkpoint (the first save if none
    is), ``median`` the save nearest their median (the earlier one on a tie), ``strong`` the first save at or
    above the strongest (the last save if none is: the run hit its cap). Returns {rung: step}.
    """
    if len(log) == 0:
        raise ValueError("the verifier's log is empty; it needs at least one save")
    acc = np.asarray(accuracies, dtype=float)
    if acc.size == 0:
        raise ValueError("no evaluation accuracies to place the rungs against")
    steps, checked = log["step"].to_numpy(), log["accuracy"].to_numpy(float)
    below, above = np.flatnonzero(checked <= acc.min()), np.flatnonzero(checked >= acc.max())
    return {"weak": int(steps[below[-1] if below.size else 0]),
            "median": int(steps[np.argmin(np.abs(checked - np.median(acc)))]),  # argmin: the first on a tie
            "strong": int(steps[above[0] if above.size else -1])}


def train_verifier(folder: Path, stop_at: float, progress: bool = True) -> dict:
    """Train the verifier's model from scratch, saving it at every check; stop at `stop_at` check accuracy.

    The LM's own training stream (helpers.world.sums.training_batch, all phrasings and answer forms, with
    verification conversations and subtraction), its operand phases cycled step by step from `config.gcm().stream`.
    Every `check_every` steps the check questions are scored and the weights saved to ``saves/step-NNNNN``; the
    run stops at the first check at or above `stop_at`, or at `max_steps` (a bounded run). Architecture and
    weight decay are the world's. Returns the log (step, accuracy, seconds), the last step and its accuracy.
    """
    g = config.gcm()
    config.set_seed(g.seed)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    optim = torch.optim.AdamW(model.parameters(), lr=g.lr, weight_decay=config.world().weight_decay, betas=(0.9, 0.98))

    def rate(step: int) -> float:
        """Warm-up, then a cosine from lr to `min_lr_ratio` of it at the cap: a steadier late verifier."""
        cosine = 0.5 * (1 + np.cos(np.pi * min(step, g.max_steps) / g.max_steps))
        anneal = g.min_lr_ratio + (1 - g.min_lr_ratio) * cosine
        return min(1.0, (step + 1) / g.warmup_steps) * float(anneal)

    sched = torch.optim.lr_scheduler.LambdaLR(optim, rate)
    rng = np.random.default_rng([g.seed, 7])
    held_out, check = sums.held_out_ids(), verifier_check_questions(g.seed, g.n_check)
    batches = (sums.training_batch(rng, g.batch_size, g.stream[step % len(g.stream)], held_out)
               for step in range(1, g.max_steps + 1))
    log, start = [], time.perf_counter()

    def check_accuracy(step: int, _loss: float) -> bool:
        """Score the check questions and save every `check_every` steps and at the last; True stops training."""
        if step % g.check_every and step != g.max_steps:
            return False
        model.eval()
        accuracy = float(greedy(model, tokenizer, check, progress=False)["correct"].mean())
        model.save_pretrained(folder / "saves" / f"step-{step:05d}")  # a rung of the ladder
        tokenizer.save_pretrained(folder / "saves" / f"step-{step:05d}")
        model.train()
        log.append({"step": step, "accuracy": accuracy, "seconds": time.perf_counter() - start})
        return accuracy >= stop_at

    loop.train(model, optim, batches, lambda pairs: training_step_loss(model, tokenizer, pairs), scheduler=sched,
               clip_norm=1.0, after_step=check_accuracy, total=g.max_steps, desc="GCM verifier", progress=progress)
    return {"log": pd.DataFrame(log), "steps": log[-1]["step"], "accuracy": log[-1]["accuracy"],
            "reached_target": log[-1]["accuracy"] >= stop_at}


# ---------------------------------------------------------------------------- GCM: adapter and results


