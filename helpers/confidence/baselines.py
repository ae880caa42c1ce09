"""Baselines that never look inside the evaluated checkpoint (notebook 05; notebook 06's findings table).

- **difficulty**: logistic regression on the question's features (digits, carries, operand sizes),
  fitted on the training checkpoints' `adapter_train` correctness. The same number for every checkpoint.
- **checkpoint index**: the same plus the checkpoint's position in the run. It knows *when* a checkpoint
  was saved but not what it knows; evaluation checkpoints lie beyond the indices it was fitted on.
- **GCM** (generalized correctness model): an external verifier with its own, fixed capability. A
  separate model is trained from scratch until it reaches a stated accuracy, then a LoRA adapter
  (helpers/confidence/adapters.py) teaches it to judge (question, answer) pairs from the training
  checkpoints' histories. It reads the evaluated checkpoint's answers, never its weights.
  Settings: `config.gcm()`.

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

from helpers.cache import artifacts
from helpers import config
from helpers.world import lora, loop, sums
from helpers.cache.artifacts import register
from helpers.world.checkpoints import get_checkpoints, load_per_checkpoint
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


def train_verifier(folder: Path, progress: bool = True) -> dict:
    """Train the verifier's model from scratch until it answers `target_accuracy` of fresh sums; save it.

    The LM's own training stream (helpers.world.sums.training_batch, all phrasings and answer forms), with the
    small and large operand phases alternating step by step, so its knowledge is not tilted to one range.
    Sizes: `config.gcm()`; the architecture and weight decay are the world's. Returns the log (step,
    accuracy, seconds) and the step it stopped at.
    """
    g = config.gcm()
    config.set_seed(g.seed)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    optim = torch.optim.AdamW(model.parameters(), lr=g.lr, weight_decay=config.world().weight_decay, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda step: min(1.0, (step + 1) / g.warmup_steps))
    rng = np.random.default_rng([g.seed, 7])
    held_out, check = sums.held_out_ids(), verifier_check_questions(g.seed, g.n_check)
    batches = (sums.training_batch(rng, g.batch_size, ("small", "large")[step % 2], held_out)
               for step in range(1, g.max_steps + 1))
    log, start = [], time.perf_counter()

    def check_accuracy(step: int, _loss: float) -> bool:
        """Score the check questions every `check_every` steps and at the last; True stops training."""
        if step % g.check_every and step != g.max_steps:
            return False
        model.eval()
        accuracy = float(greedy(model, tokenizer, check, progress=False)["correct"].mean())
        model.train()
        log.append({"step": step, "accuracy": accuracy, "seconds": time.perf_counter() - start})
        return accuracy >= g.target_accuracy

    loop.train(model, optim, batches, lambda pairs: training_step_loss(model, tokenizer, pairs), scheduler=sched,
               clip_norm=1.0, after_step=check_accuracy, total=g.max_steps, desc="GCM verifier", progress=progress)
    model.save_pretrained(folder / "model")
    tokenizer.save_pretrained(folder / "model")
    return {"log": pd.DataFrame(log), "steps": log[-1]["step"], "accuracy": log[-1]["accuracy"],
            "reached_target": log[-1]["accuracy"] >= g.target_accuracy}


@register("gcm_verifier")
def _build_verifier(folder: Path) -> dict:
    """The GCM's backbone: its own training run from scratch, stopped at a stated accuracy."""
    config.set_threads()
    out = train_verifier(folder)
    model, tokenizer = load_pretrained(folder / "model")
    test = greedy(model, tokenizer, sums.split("test"), progress=False)
    return {**out, "test_accuracy": float(test["correct"].mean())}


def verifier() -> dict:
    """The cached verifier run: log, steps, accuracy at the stop, whether it reached the target, test accuracy."""
    return artifacts.load_or_build("gcm_verifier")


@register("verifier_answers")
def _build_verifier_answers(folder: Path, split: str) -> pd.DataFrame:
    """The verifier's own greedy answers on a split: which questions the GCM's backbone knows."""
    config.set_threads()
    model, tokenizer = load_verifier()
    return greedy(model, tokenizer, sums.split(split), progress=False)


def verifier_correct(split: str = "test") -> pd.Series:
    """question_id -> 1 where the verifier answers the question right itself (notebook 05's GCM test)."""
    sums.split(split)  # an unknown split fails here
    answers = artifacts.load_or_build("verifier_answers", split=split)
    return answers.set_index("question_id")["correct"].astype(int)


def load_verifier():
    """(model, tokenizer) of the GCM's backbone, without any LoRA (trains it on first use)."""
    return load_pretrained(artifacts.folder("gcm_verifier") / "model")


# ---------------------------------------------------------------------------- GCM: adapter and results


def gcm_examples(seed: int = config.SEED) -> pd.DataFrame:
    """The GCM's training rows: training checkpoints' own answers on `adapter_train`, with correctness.

    Every row runs through the verifier's weights; `checkpoint` only says whose answer it is.
    """
    rows = adapters.adapter_examples(list(get_checkpoints().training), config.gcm().n_examples, seed=seed)
    return rows.drop(columns="base")


@register("gcm")
def _build_gcm(folder: Path, seed: int) -> dict:
    """The GCM: a LoRA adapter on the verifier, trained on the training checkpoints' histories."""
    config.set_threads()
    examples = gcm_examples(seed)
    model, tokenizer = load_verifier()
    peft_model, log = adapters.fit_adapter(model, tokenizer, examples, seed=seed)
    lora.save(peft_model, folder / "lora", "gcm_verifier", save_embedding_layers=False)
    return {"examples": examples[["checkpoint", "question_id", "source", "correct", "label"]], "log": log}


def train_gcm(seed: int = config.SEED) -> adapters.Adapter:
    """The cached GCM adapter (LoRA on the verifier); trains the verifier and the adapter on first use."""
    params = {"seed": adapters.validate_seed(seed)}
    stored = artifacts.load_or_build("gcm", **params)
    examples = stored["examples"]
    return adapters.Adapter(folder=artifacts.folder("gcm", **params) / "lora",
                            checkpoints=tuple(examples["checkpoint"].unique()), seed=params["seed"],
                            examples=examples, log=stored["log"])


def load_gcm(seed: int = config.SEED):
    """(peft model, tokenizer): the verifier with the GCM's LoRA weights. No checkpoint weights at all."""
    gcm = train_gcm(seed)
    base, tokenizer = load_verifier()
    return lora.attach(base, gcm.folder), tokenizer


def gcm_confidence(answers: pd.DataFrame, seed: int = config.SEED) -> np.ndarray:
    """The GCM's P(correct) for rows with `question` and `text` (an answer frame, not a model)."""
    if not isinstance(answers, pd.DataFrame) or not {"question", "text"} <= set(answers.columns):
        raise ValueError("answers must be a frame with `question` and `text` columns")
    model, tokenizer = load_gcm(seed)
    return adapter_confidence(model, tokenizer, answers["question"], answers["text"])


@register("gcm_results")
def _build_gcm_results(folder: Path, checkpoint: str, split: str, seed: int) -> pd.DataFrame:
    """The GCM's confidence in one checkpoint's greedy answers: it reads the answers, not the weights."""
    config.set_threads()
    answers = greedy_results(split, [checkpoint])
    answers = answers.merge(sums.split(split)[["question_id", "question"]], on="question_id")
    answers["confidence"] = gcm_confidence(answers, seed)
    return answers[COLUMNS]


def gcm_results(split: str = "test", eval_checkpoints=None, seed: int = config.SEED) -> pd.DataFrame:
    """GCM confidence in each evaluated checkpoint's greedy answers: the standard frame (notebook 05)."""
    sums.split(split)  # an unknown split fails here, before anything is trained
    seed = adapters.validate_seed(seed)
    return load_per_checkpoint("gcm_results", eval_checkpoints, default=get_checkpoints().evaluation, split=split,
                               seed=seed)
