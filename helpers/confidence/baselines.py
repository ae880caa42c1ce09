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

import shutil
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

from helpers.cache import artifacts
from helpers import config
from helpers.world import lora, loop, sums
from helpers.cache.artifacts import register
from helpers.world.checkpoints import get_checkpoints
from helpers.world.decoding import greedy, greedy_results
from helpers.world.model import build_model, build_tokenizer, load_pretrained
from helpers.world.training import training_step_loss
from . import adapters
from .readout import adapter_confidence

COLUMNS = adapters.COLUMNS
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


def _labelled(split: str, checkpoints: list[str]) -> pd.DataFrame:
    """Greedy results of `checkpoints` on `split`, with question features and checkpoint index."""
    ck = get_checkpoints()
    res = greedy_results(split, checkpoints)
    questions = sums.split(split).set_index("question_id").loc[res["question_id"]].reset_index()
    feats = question_features(questions)
    feats["checkpoint_index"] = [ck.index(c) for c in res["checkpoint"]]
    return pd.concat([res.reset_index(drop=True), feats], axis=1)


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


def fit_feature_baseline(use_index: bool = True, train_checkpoints=None) -> FeatureBaseline:
    """Fit on the training checkpoints' `adapter_train` correctness (notebook 05).

    Features are one-hot; the checkpoint index enters as one number, so the model extrapolates a
    trend in accuracy to later checkpoints without seeing their weights.
    """
    ck = get_checkpoints()
    names = ck.validate(train_checkpoints, default=ck.training)
    data = _labelled("adapter_train", names)
    encode = [("onehot", OneHotEncoder(handle_unknown="ignore"), list(FEATURES))]
    if use_index:
        encode.append(("index", "passthrough", ["checkpoint_index"]))
    estimator = LogisticRegression(max_iter=2000)
    if data["correct"].nunique() < 2:  # a world whose training checkpoints know no sum (or every one): say so, go on
        share = "all" if data["correct"].iloc[0] else "none"
        warnings.warn(f"the checkpoints {names} answer {share} of their adapter_train questions right, so the feature "
                      f"baseline has nothing to fit: it gives every question the confidence "
                      f"{1.0 if share == 'all' else 0.0}")
        estimator = DummyClassifier(strategy="prior")
    model = make_pipeline(ColumnTransformer(encode), estimator)
    cols = list(FEATURES) + (["checkpoint_index"] if use_index else [])
    model.fit(data[cols], data["correct"].astype(int))
    return FeatureBaseline(model, use_index, tuple(names))


def _feature_results(split: str, eval_checkpoints, use_index: bool, train_checkpoints) -> pd.DataFrame:
    ck = get_checkpoints()
    names = ck.validate(eval_checkpoints, default=ck.evaluation)
    sums.split(split)  # an unknown split fails here
    baseline = fit_feature_baseline(use_index, train_checkpoints)
    data = _labelled(split, names)
    data["confidence"] = baseline.predict(data)
    return data[COLUMNS]


def checkpoint_index_results(split: str = "test", eval_checkpoints=None, train_checkpoints=None) -> pd.DataFrame:
    """Checkpoint-index baseline: question features + checkpoint index, fitted on training checkpoints (05)."""
    return _feature_results(split, eval_checkpoints, True, train_checkpoints)


def difficulty_results(split: str = "test", eval_checkpoints=None, train_checkpoints=None) -> pd.DataFrame:
    """Difficulty-only baseline: question features alone, the same confidence for every checkpoint (05)."""
    return _feature_results(split, eval_checkpoints, False, train_checkpoints)


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


def evaluation_accuracies() -> pd.Series:
    """checkpoint -> test accuracy of each evaluation checkpoint (greedy): what the ladder is placed against."""
    res = greedy_results("test", list(get_checkpoints().evaluation))
    return res.groupby("checkpoint")["correct"].mean()


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


@register("gcm_verifier")
def _build_verifier(folder: Path) -> dict:
    """The GCM's backbone: its own run from scratch, saved at every check, with its three rungs picked.

    Test accuracy of each rung is scored on the test split (claims.gcm_range reads the shipped rung's)."""
    config.set_threads()
    accuracies = evaluation_accuracies()
    out = train_verifier(folder, stop_at=float(accuracies.max()) + config.gcm().stop_margin)
    rungs = ladder_rungs(out["log"], accuracies)
    for save in (folder / "saves").iterdir():  # the rungs' saves are kept (about 0.5 MB each), the rest go
        if int(save.name.split("-")[1]) not in rungs.values():
            shutil.rmtree(save)
    test = {}
    for step in sorted(set(rungs.values())):
        model, tokenizer = load_pretrained(folder / "saves" / f"step-{step:05d}")
        test[step] = float(greedy(model, tokenizer, sums.split("test"), progress=False)["correct"].mean())
    shipped = rungs[config.gcm().shipped_rung]
    return {**out, "rungs": rungs, "rung_test_accuracy": {r: test[s] for r, s in rungs.items()},
            "evaluation_accuracies": accuracies, "shipped_rung": config.gcm().shipped_rung,
            "test_accuracy": test[shipped]}


def verifier() -> dict:
    """The cached verifier run: log (step, accuracy, seconds), steps and accuracy at the stop, whether it reached
    the strongest evaluation checkpoint, rungs ({rung: step}), rung_test_accuracy, and the shipped rung's
    test_accuracy."""
    return artifacts.load_or_build("gcm_verifier")


def validate_rung(rung) -> str | int:
    """A rung name (RUNGS; None: the shipped one) or the step of a rung's save."""
    if rung is None:
        return config.gcm().shipped_rung
    if isinstance(rung, str) and rung in RUNGS:
        return rung
    if isinstance(rung, (int, np.integer)) and not isinstance(rung, bool) and rung > 0:
        return int(rung)
    raise ValueError(f"rung must be one of {RUNGS} or the step of a rung's save, got {rung!r}")


def rung_step(rung=None) -> int:
    """The saved step of `rung` (a name or a step; checked against the run's saves)."""
    rung, run = validate_rung(rung), verifier()
    step = run["rungs"][rung] if isinstance(rung, str) else rung
    saved = sorted(set(run["rungs"].values()))
    if step not in saved:
        raise ValueError(f"the verifier's run keeps the saves of its rungs only, steps {saved}; got {step}")
    return int(step)


@register("verifier_answers")
def _build_verifier_answers(folder: Path, split: str, rung="median") -> pd.DataFrame:
    """The verifier's own greedy answers on a split: which questions the GCM's backbone knows."""
    config.set_threads()
    model, tokenizer = load_verifier(rung)
    return greedy(model, tokenizer, sums.split(split), progress=False)


def verifier_correct(split: str = "test", rung=None) -> pd.Series:
    """question_id -> 1 where the verifier (the shipped rung) answers the question right itself (notebook 05)."""
    sums.split(split)  # an unknown split fails here
    answers = artifacts.load_or_build("verifier_answers", split=split, rung=validate_rung(rung))
    return answers.set_index("question_id")["correct"].astype(int)


def load_verifier(rung=None):
    """(model, tokenizer) of the GCM's backbone at `rung` (default the shipped one), without any LoRA."""
    return load_pretrained(artifacts.folder("gcm_verifier") / "saves" / f"step-{rung_step(rung):05d}")


# ---------------------------------------------------------------------------- GCM: adapter and results


def gcm_examples(seed: int = config.SEED) -> pd.DataFrame:
    """The GCM's training rows: training checkpoints' own answers on `adapter_train`, with correctness.

    Every row runs through the verifier's weights; `checkpoint` only says whose answer it is.
    """
    rows = adapters.adapter_examples(list(get_checkpoints().training), config.gcm().n_examples, seed=seed)
    return rows.drop(columns="base")


@register("gcm")
def _build_gcm(folder: Path, seed: int, rung="median") -> dict:
    """The GCM: a LoRA adapter on the verifier at `rung`, trained on the training checkpoints' histories."""
    config.set_threads()
    examples = gcm_examples(seed)
    model, tokenizer = load_verifier(rung)
    peft_model, log = adapters.fit_adapter(model, tokenizer, examples, seed=seed)
    lora.save(peft_model, folder / "lora", "gcm_verifier", save_embedding_layers=False)
    return {"examples": examples[["checkpoint", "question_id", "source", "correct", "label"]], "log": log}


def train_gcm(seed: int = config.SEED, rung=None) -> adapters.Adapter:
    """The cached GCM adapter (LoRA on the verifier at `rung`, default the shipped one); trains on first use."""
    params = {"seed": adapters.validate_seed(seed), "rung": validate_rung(rung)}
    stored = artifacts.load_or_build("gcm", **params)
    examples = stored["examples"]
    return adapters.Adapter(folder=artifacts.folder("gcm", **params) / "lora",
                            checkpoints=tuple(examples["checkpoint"].unique()), seed=params["seed"],
                            examples=examples, log=stored["log"])


def load_gcm(seed: int = config.SEED, rung=None):
    """(peft model, tokenizer): the verifier with the GCM's LoRA weights. No checkpoint weights at all."""
    gcm = train_gcm(seed, rung)
    base, tokenizer = load_verifier(rung)
    return lora.attach(base, gcm.folder), tokenizer


def gcm_confidence(answers: pd.DataFrame, seed: int = config.SEED, rung=None) -> np.ndarray:
    """The GCM's P(correct) for rows with `question` and `text` (an answer frame, not a model).

    The GCM reads only (question, answer text), so each distinct pair is scored once: checkpoints that give
    the same answer to a question (most of them, on most questions) share its confidence."""
    if not isinstance(answers, pd.DataFrame) or not {"question", "text"} <= set(answers.columns):
        raise ValueError("answers must be a frame with `question` and `text` columns")
    pairs = answers[["question", "text"]]
    unique = pairs.drop_duplicates(ignore_index=True)
    model, tokenizer = load_gcm(seed, rung)
    unique["confidence"] = adapter_confidence(model, tokenizer, unique["question"], unique["text"])
    return pairs.merge(unique, on=["question", "text"], how="left")["confidence"].to_numpy()


@register("gcm_results")
def _build_gcm_results(folder: Path, split: str, seed: int, rung="median") -> pd.DataFrame:
    """The GCM's confidence in every evaluation checkpoint's greedy answers: it reads the answers, not the
    weights. One entry for all of them, so that an answer several checkpoints give is scored once."""
    config.set_threads()
    answers = greedy_results(split, list(get_checkpoints().evaluation))
    answers = answers.merge(sums.split(split)[["question_id", "question"]], on="question_id")
    answers["confidence"] = gcm_confidence(answers, seed, rung)
    return answers[COLUMNS]


def gcm_results(split: str = "test", eval_checkpoints=None, seed: int = config.SEED, rung=None) -> pd.DataFrame:
    """GCM confidence in each evaluated checkpoint's greedy answers: the standard frame (notebook 05).

    `rung`: the verifier's rung (RUNGS or a rung's step; default the shipped one)."""
    sums.split(split)  # an unknown split fails here, before anything is trained
    ck = get_checkpoints()
    names = ck.validate(eval_checkpoints, default=ck.evaluation)
    outside = sorted(set(names) - set(ck.evaluation))
    if outside:
        raise ValueError(f"the GCM scores the evaluation checkpoints' answers; {outside} are not among them")
    frame = artifacts.load_or_build("gcm_results", split=split, seed=adapters.validate_seed(seed),
                                    rung=validate_rung(rung))
    return frame[frame["checkpoint"].isin(names)].reset_index(drop=True)
