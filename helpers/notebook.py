"""The setup cell every notebook starts with.

Top layer: imports config, plots and shipped.
"""
from __future__ import annotations

import platform
from importlib import metadata

from . import config, shipped
from .plots import use_style

_SHOWN = ("torch", "transformers", "peft", "numpy", "pandas", "scikit-learn", "relplot", "matplotlib")


def setup(seed: int = config.SEED) -> None:
    """Seed everything, set threads and the plot style; print versions, the mode, whether the shipped
    world is in use (unpacking it if needed), and any changed settings."""
    config.set_seed(seed)
    threads = config.set_threads()
    use_style()
    versions = ", ".join(f"{p} {metadata.version(p)}" for p in _SHOWN)
    print(f"python {platform.python_version()}, {versions}")
    mode = "FAST (HELPERS_FAST=1: small sizes, for tests)" if config.fast_mode() else "full"
    print(f"mode: {mode}; random seed {seed}; {threads} torch threads")
    print(shipped.use())
    changed = config.overrides()
    if changed:
        print(f"settings changed from their defaults: {changed}")
