"""Paths, seeds, fast mode and sizes: the one place every other module reads settings from."""
from __future__ import annotations

import os
import random
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = REPO_ROOT / "data"
SEED = 0

# Bump when a change anywhere should invalidate every cached artifact.
WORLD_VERSION = "1"


def fast_mode() -> bool:
    """True when HELPERS_FAST=1: smaller sizes, same code paths (used by `make test`)."""
    return os.environ.get("HELPERS_FAST", "0").strip() == "1"


def cache_dir() -> Path:
    """Where artifacts live; fast and full mode never share a folder."""
    root = Path(os.environ.get("HELPERS_CACHE", DATA_DIR / "cache"))
    return root / ("fast" if fast_mode() else "full")


def rel(path: Path | str) -> str:
    """A path relative to the repository root, for printing (outputs never show machine paths)."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return path.name


def set_seed(seed: int = SEED) -> None:
    """Seed random, numpy and torch; the only seeding entry point of the series."""
    import torch

    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    random.seed(int(seed))
    np.random.seed(int(seed) % 2**32)
    torch.manual_seed(int(seed))


def device():
    """The torch device: CPU unless HELPERS_DEVICE says otherwise (the series never needs a GPU)."""
    import torch

    return torch.device(os.environ.get("HELPERS_DEVICE", "cpu"))


def set_threads(n: int | None = None) -> int:
    """Use `n` torch threads (default: HELPERS_THREADS or every core); returns the count."""
    import torch

    n = n or int(os.environ.get("HELPERS_THREADS", 0)) or os.cpu_count() or 1
    if n < 1:
        raise ValueError(f"thread count must be >= 1, got {n}")
    torch.set_num_threads(n)
    return n


@dataclass(frozen=True)
class Settings:
    """Every size the series uses; `settings()` picks the fast or full set."""

    train_steps: int
    batch_size: int
    save_every: int
    n_checkpoints: int  # selected from the saved ones, by accuracy
    n_training_checkpoints: int  # the earliest selected ones; the rest evaluate
    n_test: int
    n_adapter_train: int
    n_transfer_test: int
    n_monitor: int  # test questions scored at every save, for checkpoint selection
    min_contrast: int  # pairs with fewer contrast questions are skipped
    min_contrast_transfer: int
    max_operand: int = 999  # fast mode asks two-digit sums
    # Post-training (notebook 01): a small SFT set seen many times, then GRPO.
    sft_questions: int = 100
    sft_epochs: int = 20
    sft_lr: float = 1e-3
    grpo_steps: int = 40
    grpo_prompts: int = 64
    grpo_group: int = 8
    grpo_lr: float = 3e-4
    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    lr: float = 3e-3
    warmup_steps: int = 100
    weight_decay: float = 0.1
    # The last part of training anneals the learning rate (cosine down to min_lr_ratio) so the final
    # checkpoint's accuracy does not depend on where a constant-rate run happens to stop.
    lr_decay_start: float = 2 / 3
    min_lr_ratio: float = 0.5


FULL = Settings(
    train_steps=3000, batch_size=256, save_every=100, n_checkpoints=12, n_training_checkpoints=5,
    n_test=5000, n_adapter_train=5000, n_transfer_test=3000, n_monitor=1000,
    min_contrast=500, min_contrast_transfer=300,
)
FAST = Settings(
    train_steps=800, batch_size=64, save_every=100, n_checkpoints=5, n_training_checkpoints=2,
    n_test=400, n_adapter_train=400, n_transfer_test=300, n_monitor=200,
    min_contrast=5, min_contrast_transfer=5, warmup_steps=30, lr=1e-2, max_operand=99,
    sft_questions=50, sft_epochs=5, grpo_steps=4, grpo_prompts=16, grpo_group=4,
)


# The sizes each kind of artifact depends on (see artifacts.register).
SPLIT_KEYS = ("n_test", "n_adapter_train", "n_transfer_test", "max_operand")
WORLD_KEYS = SPLIT_KEYS + ("train_steps", "batch_size", "save_every", "n_checkpoints", "n_training_checkpoints",
                           "n_monitor", "n_layer", "n_embd", "n_head", "lr", "warmup_steps", "weight_decay",
                           "lr_decay_start", "min_lr_ratio")
POST_TRAINING_KEYS = ("sft_questions", "sft_epochs", "sft_lr", "grpo_steps", "grpo_prompts", "grpo_group", "grpo_lr")


def settings() -> Settings:
    """The sizes for the current mode."""
    return FAST if fast_mode() else FULL


def settings_dict() -> dict:
    return asdict(settings())
