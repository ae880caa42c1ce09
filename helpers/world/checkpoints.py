"""The selected checkpoints as a value (`Checkpoints`: their names, training and evaluation ones), their
naming, and how knowledge moves inside a window of them (`window_changes`, notebook 00).

The training run (helpers.world.training) saves a checkpoint every few steps and the selection rules
(helpers.world.selection) pick the ones the series studies: the earlier ones train non-oracle methods, the
later ones are evaluated. Loading them from the cache is `helpers.pipeline.checkpoints`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


POST_TRAINED = ("finetuned", "rl")


def step_name(step: int) -> str:
    """The name of the checkpoint saved at `step`: step-01200."""
    return f"step-{int(step):05d}"


@dataclass(frozen=True)
class Checkpoints:
    """The selected checkpoints: the earlier ones train non-oracle methods, the later ones evaluate."""

    all: tuple[str, ...]
    training: tuple[str, ...]
    evaluation: tuple[str, ...]

    def validate(self, names=None, default=None) -> list[str]:
        """The one checkpoint-list check of the series: `names` as a list of selected checkpoints.

        `names` is None (then `default`, or every selected checkpoint), one name, several joined by
        "+" ("step-01200+step-01500"), or a list. Unknown, repeated or no names raise ValueError.
        """
        if names is None:
            names = self.all if default is None else default
        if isinstance(names, str):
            names = names.split("+")
        names = list(names)
        if not names:
            raise ValueError(f"no checkpoints given; choose from {list(self.all)}")
        bad = [n for n in names if not isinstance(n, str)]
        if bad:
            raise ValueError(f"checkpoints are names such as {self.all[0]!r}, got {bad}")
        unknown = [n for n in names if n not in self.all]
        if unknown:
            raise ValueError(f"unknown checkpoint(s) {unknown}; available: {list(self.all)}")
        if len(set(names)) != len(names):
            raise ValueError(f"checkpoint listed twice in {names}; list each once")
        return names

    def index(self, name: str) -> int:
        """Position of a selected checkpoint in training order."""
        return self.all.index(self.validate([name])[0])


def window_changes(results: pd.DataFrame, windows: dict, groups: dict, at_least=0.0) -> pd.DataFrame:
    """How knowledge moves inside each window of checkpoints, per group of questions (notebook 00).

    `results` is a greedy frame (checkpoint, question_id, correct); `windows` maps a name to checkpoints
    in training order (e.g. {"training": ck.training, "evaluation": ck.evaluation}); `groups` maps a
    name to question ids. One row per (window, group): accuracy at every checkpoint of the window, the
    questions that improve and regress between neighbouring checkpoints (summed over neighbours), and
    the largest rise and fall of accuracy between neighbours. Knowledge moves "both ways" in a window
    when the largest rise and the largest fall both exceed `at_least` (an accuracy difference; one for
    every group, or a mapping from group to its own).
    """
    correct = results.pivot(index="question_id", columns="checkpoint", values="correct")
    rows = []
    for window, names in windows.items():
        names = list(names)
        if len(names) < 2:
            raise ValueError(f"window {window!r} needs at least two checkpoints, got {names}")
        missing = [n for n in names if n not in correct.columns]
        if missing:
            raise ValueError(f"results has no answers from {missing}; "
                             "pass greedy results of every window's checkpoints")
        for group, ids in groups.items():
            part = correct.loc[correct.index.intersection(pd.Index(ids)), names].astype(bool).to_numpy()
            if part.size == 0:
                raise ValueError(f"group {group!r} has no question in results")
            accuracy = part.mean(axis=0)
            steps = np.diff(accuracy)
            rows.append({"window": window, "group": group, "questions": part.shape[0],
                         "accuracy": " ".join(f"{x:.2f}" for x in accuracy),
                         "improvements": int((~part[:, :-1] & part[:, 1:]).sum()),
                         "regressions": int((part[:, :-1] & ~part[:, 1:]).sum()),
                         "largest rise": round(max(float(steps.max()), 0.0), 3) + 0.0,
                         "largest fall": round(max(float(-steps.min()), 0.0), 3) + 0.0})
    table = pd.DataFrame(rows)
    threshold = table["group"].map(at_least) if isinstance(at_least, dict) else at_least
    if isinstance(at_least, dict) and threshold.isna().any():
        raise ValueError(f"at_least names no threshold for {sorted(set(table['group'][threshold.isna()]))}")
    table["both ways"] = (table["largest rise"] > threshold) & (table["largest fall"] > threshold)
    return table.set_index(["window", "group"])
