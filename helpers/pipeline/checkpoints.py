"""The cached training run's checkpoints: which were selected (`get_checkpoints`), where they live and how
to load them (`load_checkpoint`), and the one accessor behind every per-checkpoint result (`load_per_checkpoint`).

Reads the `world`, `selection` and `post_training` entries by name, so it imports none of their builders.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from helpers.cache import artifacts
from helpers.world.checkpoints import POST_TRAINED, Checkpoints
from helpers.world.model import load_any, load_pretrained


def training_run() -> dict:
    """The cached training run: its log, the selected checkpoint names and the per-save flips (builds if needed)."""
    run, selection = artifacts.load_or_build("world"), artifacts.load_or_build("selection")
    return {"log": run["log"], **selection}


def phases() -> dict[str, str]:
    """The data phase (a key of `sums.PHASE_RANGES`: "small", "large", "mixed" or "uniform") each selected
    checkpoint was saved in, by name.

    Notebooks 00, 03, 05 and 06 print it where the mixture matters to a result."""
    log = training_run()["log"]
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
