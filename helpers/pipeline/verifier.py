"""The GCM's verifier (notebook 05): its own run from scratch (`gcm_verifier`, trained by
`helpers.confidence.baselines.train_verifier`), the ladder of its saves (`ladder_rungs`: weak, median, strong)
and its own answers (`verifier_answers`): which questions the GCM's backbone knows. Settings: `config.gcm()`."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from helpers import config
from helpers.cache import artifacts
from helpers.cache.artifacts import register
from helpers.confidence.baselines import RUNGS, ladder_rungs, train_verifier
from helpers.pipeline.checkpoints import get_checkpoints
from helpers.pipeline.decoded import greedy_results
from helpers.world import sums
from helpers.world.decoding import greedy
from helpers.world.model import load_pretrained


def evaluation_accuracies() -> pd.Series:
    """checkpoint -> test accuracy of each evaluation checkpoint (greedy): what the ladder is placed against."""
    res = greedy_results("test", list(get_checkpoints().evaluation))
    return res.groupby("checkpoint")["correct"].mean()


@register("gcm_verifier")
def _build_verifier(folder: Path) -> dict:
    """The GCM's backbone: its own run from scratch, saved at every check, with its three rungs picked.

    Test accuracy of each rung is scored on the test split (`claims.verifier_accuracy` reads it)."""
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
