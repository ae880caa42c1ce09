"""The setup cell every notebook starts with."""
from __future__ import annotations

import platform
from importlib import metadata

from .config import SEED, Settings, fast_mode, set_seed, set_threads, settings

_SHOWN = ("torch", "transformers", "peft", "numpy", "pandas", "scikit-learn", "relplot", "matplotlib")


def setup(seed: int = SEED) -> Settings:
    """Seed everything, set threads and the plot style, print versions and the mode; returns the sizes."""
    from .plots import use_style

    set_seed(seed)
    threads = set_threads()
    use_style()
    versions = ", ".join(f"{p} {metadata.version(p)}" for p in _SHOWN)
    print(f"python {platform.python_version()}, {versions}")
    mode = "FAST (HELPERS_FAST=1: small sizes, for tests)" if fast_mode() else "full"
    print(f"mode: {mode}; seed {seed}; {threads} torch threads")
    return settings()
