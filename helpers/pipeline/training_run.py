"""Builds the `world` entry: the training run of `helpers.world.training.train_run`, every save kept."""
from __future__ import annotations

from pathlib import Path


from helpers.cache.artifacts import register
from helpers.world.training import train_run


@register("world")
def _build_world(folder: Path) -> dict:
    """Train the model and save every checkpoint (the `selection` artifact picks the ones used)."""
    return {"log": train_run(folder)}
