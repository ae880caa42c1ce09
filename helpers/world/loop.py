"""The one training loop of the series: the runs differ only in their data and their loss.

Used by the world's training run (helpers.world.training, notebook 00), the GCM verifier's run
(helpers.confidence.baselines), the fine-tune and GRPO of notebook 01 (helpers.world.rl), and the LoRA
adapters of notebooks 03, 05 and 06 (helpers.confidence.adapters, helpers.confidence.verbalized).
"""
from __future__ import annotations

from typing import Callable, Iterable

import torch
from tqdm import tqdm


def linear_decay(optimizer: torch.optim.Optimizer, total_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Learning rate decayed linearly from its initial value to 0 over `total_steps` (the adapters' schedule)."""
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / total_steps)


def train(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batches: Iterable, loss: Callable,
          scheduler=None, clip_norm: float | None = None, after_step: Callable[[int, float], bool | None] | None = None,
          total: int | None = None, desc: str = "training", progress: bool = True) -> list[float]:
    """Run one optimizer step per batch; returns the loss of every step.

    `loss(batch)` returns a scalar tensor. If it still needs a backward pass, the loop calls it; a
    loss that back-propagated itself (for example in chunks) returns a tensor without a graph.
    Then the gradient norm is clipped to `clip_norm` (if given), the optimizer and the scheduler step,
    and `after_step(step, loss_value)` runs (steps count from 1); if it returns True, training stops.
    The model is in train mode during the loop and in eval mode after it.
    """
    losses: list[float] = []
    model.train()
    bar = tqdm(batches, total=total, desc=desc, disable=not progress, leave=False, mininterval=2)
    for step, batch in enumerate(bar, start=1):
        optimizer.zero_grad(set_to_none=True)
        value = loss(batch)
        if value.requires_grad:
            value.backward()
        if clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(value.item())
        if after_step is not None and after_step(step, losses[-1]):
            break
    model.eval()
    return losses
