"""Which checkpoints exist, where they live, and how to load them. Used by every notebook.

The world's training run (helpers.world.training) saves a checkpoint every few steps; its `selection`
artifact picks the ones the series studies: the earlier ones train non-oracle methods, the later ones
are evaluated. "finetuned" and "rl" name the post-trained models of notebook 01 (helpers.world.rl).
This module reads those artifacts by name from the cache, so it needs none of the modules that build them.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from helpers.cache import artifacts
from helpers.world.model import load_any, load_pretrained

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


def world() -> dict:
    """The cached training run: its log, the selected checkpoint names and the per-save flips (builds if needed)."""
    run, selection = artifacts.load_or_build("world"), artifacts.load_or_build("selection")
    return {"log": run["log"], **selection}


def phases() -> dict[str, str]:
    """The data phase (a key of `sums.PHASE_RANGES`: "small", "large", "mixed" or "uniform") each selected
    checkpoint was saved in, by name.

    Notebooks 00, 03, 05 and 06 print it where the mixture matters to a result."""
    log = world()["log"]
    phase = dict(zip(log["step"].astype(int), log["phase"]))
    return {name: phase[int(name.split("-")[1])] for name in get_checkpoints().all}


def get_checkpoints() -> Checkpoints:
    """The selected checkpoints, split into training and evaluation ones."""
    selection = artifacts.load_or_build("selection")
    names = tuple(selection["selected"])
    n = selection["n_training"]
    return Checkpoints(all=names, training=names[:n], evaluation=names[n:])


def list_checkpoints() -> list[str]:
    """Names of the selected checkpoints, in training order (trains the world if needed)."""
    return list(get_checkpoints().all)


def saved_steps() -> list[str]:
    """Every checkpoint the run saved, selected or not."""
    return sorted(p.name for p in (artifacts.folder("world") / "checkpoints").iterdir())


def checkpoint_path(name: str) -> Path:
    """Folder of a saved checkpoint (model and tokenizer), ready for `from_pretrained`.

    Besides the run's steps, "finetuned" and "rl" name the post-trained models of notebook 01.
    """
    if name in POST_TRAINED:
        return artifacts.folder("post_training") / name
    saved = saved_steps()
    if name not in saved:
        raise ValueError(f"unknown checkpoint {name!r}; available: {get_checkpoints().all} (selected), "
                         f"any saved step {saved[0]}..{saved[-1]}, or {POST_TRAINED}")
    return artifacts.folder("world") / "checkpoints" / name


def load_checkpoint(name: str, revision: str | None = None):
    """(model, tokenizer) of a checkpoint of this series (`step-01200`, `finetuned`, `rl`), or of any model.

    A local folder or a Hugging Face model id is loaded with the Auto classes; `revision` picks an
    intermediate checkpoint: a subfolder of a local folder (`run/step-1000`), or a branch or tag
    of a hub repository (Pythia publishes `step143000`, OLMo `stage1-step...`). The series itself
    never downloads anything; see "Running on real checkpoints" in docs/api.md.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"checkpoint name must be a non-empty string, got {name!r}")
    if revision is None and not ("/" in name or Path(name).is_dir()):
        return load_pretrained(checkpoint_path(name))
    return load_any(name, revision)


def load_per_checkpoint(artifact: str, checkpoints=None, default=None, **params) -> pd.DataFrame:
    """One cached frame per checkpoint (`load_or_build(artifact, checkpoint=c, **params)`), concatenated.

    The one accessor behind every `*_results(split, checkpoints)` of the series; `checkpoints` and
    `default` as in `Checkpoints.validate`.
    """
    names = get_checkpoints().validate(checkpoints, default)
    return pd.concat([artifacts.load_or_build(artifact, checkpoint=c, **params) for c in names], ignore_index=True)


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
