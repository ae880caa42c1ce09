"""Notebook 06's glue: the checkpoints of its transfer matrix (`transfer_grid`) and what it reads beyond the
results tables, as build tasks (`build_tasks`)."""
from __future__ import annotations

from typing import Callable


from helpers.pipeline.adapters import seeded_results
from helpers.pipeline.checkpoints import get_checkpoints


def build_tasks() -> dict[str, Callable[[], object]]:
    """What notebook 06 reads beyond the results tables, as independent build tasks (`python -m helpers build`):
    the transfer matrix (one task per trained checkpoint), random labels, domain transfer and exercise 1.
    The checkpoints are looked up when a task runs, after the world stage."""
    def transfer_from(i: int) -> list:
        grid = transfer_grid()
        return [seeded_results("test", [b], source=grid[i]) for b in grid] if i < len(grid) else []

    def random_labels() -> list:
        first, second = get_checkpoints().training[-2:]
        return [seeded_results("test", [first, second], source=[first, second], **kw)
                for kw in ({}, {"random_labels": second})]

    def domain_transfer() -> list:
        ck = get_checkpoints()
        return [seeded_results(split, ck.evaluation, source=source)
                for split in ("test", "transfer_test") for source in ("oracle", ck.training[-1])]

    return {**{f"transfer matrix row {i + 1}": (lambda i=i: transfer_from(i)) for i in range(4)},
            "random labels": random_labels, "domain transfer": domain_transfer,
            "two training checkpoints":
                lambda: seeded_results("test", None, source=list(get_checkpoints().training[-2:]))}


def transfer_grid() -> list[str]:
    """The checkpoints of notebook 06's transfer matrix: the last training checkpoint, then the first, middle
    and last evaluation checkpoints (each adapter trained on one is scored on every one)."""
    ck = get_checkpoints()
    return list(dict.fromkeys([ck.training[-1], ck.evaluation[0], ck.evaluation[len(ck.evaluation) // 2],
                               ck.evaluation[-1]]))
