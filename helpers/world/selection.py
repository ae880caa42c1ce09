"""Which saves of the training run the series studies: the selection rules, as pure functions of the
run's log and of every save's correctness (`helpers.pipeline.selection` scores the saves and caches the picks).

The training checkpoints are picked by how much the monitor answers change (`select_checkpoints`), the
evaluation checkpoints by an exhaustive search for the window where knowledge moves both ways
(`evaluation_picks`, `window_picks`); the thresholds are `config.world().rules`.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from helpers import config


def first_save(log: pd.DataFrame, first_below: float | None = None) -> int:
    """Index of the last save before monitor accuracy first reaches `first_below` (0 if it starts there).

    `first_below` defaults to `config.world().first_below`."""
    first_below = config.world().first_below if first_below is None else first_below
    reached = np.flatnonzero(log["accuracy"].to_numpy() >= first_below)
    return max(int(reached[0]) - 1, 0) if reached.size else 0


def select_checkpoints(log: pd.DataFrame, n: int, first_below: float | None = None, changes=None) -> list[int]:
    """Pick `n` saved steps by what the model knows, not by step number.

    The first pick is the last save before accuracy first reaches `first_below` (so the series starts
    from a checkpoint that knows little, wherever the seed put the learning curve), the last is the
    final save. In between, picks are spread evenly along the cumulative `changes` (one count per save:
    how many monitor answers flipped since the previous save), so stretches where knowledge moves get
    more checkpoints and a plateau does not fill up with near-copies. Without `changes`, they are
    spread evenly over the saves.
    """
    if n < 2:
        raise ValueError(f"need at least 2 checkpoints, got n={n}")
    steps = log["step"].to_numpy()
    start = first_save(log, first_below)
    last = len(steps) - 1
    if last - start + 1 < n:
        raise ValueError(f"only {last - start + 1} saves after the start; lower n or save more often")
    if changes is None:
        position = np.arange(len(steps), dtype=float)
    else:
        changes = np.asarray(changes, dtype=float)
        if changes.shape != steps.shape or np.isnan(changes).any() or (changes < 0).any():
            raise ValueError(f"changes must hold one non-negative count per save ({len(steps)}), got {changes!r}")
        position = np.cumsum(changes)
    targets = np.linspace(position[start], position[last], n)
    picks = [start]
    for j, target in enumerate(targets[1:], start=1):
        nearest = start + int(np.argmin(np.abs(position[start:] - target)))
        # strictly after the previous pick, and leaving room for the picks still to come
        picks.append(min(max(nearest, picks[-1] + 1), last - (n - 1 - j)))
    return [int(steps[i]) for i in picks]


def window_picks(log: pd.DataFrame, correct, n_training: int, n_evaluation: int, cut: float,
                 first_below: float | None = None, last_at_least: float | None = None,
                 enough: int | None = None, kinds=None, at_least: float = 0.0) -> tuple[list[int], list[int]]:
    """Training and evaluation steps: two windows of saves, picked by knowledge change in each.

    `correct` is (saves, test questions) booleans. The run from `first_save(log, first_below)` to the
    final save is cut at share `cut` of its saves: the training window before, the evaluation window
    after. Training picks are spread along the cumulative flips (`monitor_flips`); evaluation picks end
    at a save whose accuracy on `correct` reaches `last_at_least` (None: the final save), keep `enough`
    regressions between neighbours, so that "the later checkpoint is right" is wrong often, and move as
    many of `kinds` (accuracy per kind of question and save) both ways as the run allows
    (`evaluation_picks`); with `kinds`, the training picks are chosen the same way (from the window's
    first save to its last, no regressions asked), so that what moves in one window moves in the other.
    Where a window has too few saves the cut moves, and where the run learns too late for both, the
    start does. `at_least` is one threshold, or one per kind.
    """
    correct = _saves_by_questions(correct)
    total, needed = len(log), n_training + n_evaluation
    if total < needed or correct.shape[0] != total:
        raise ValueError(f"the run saved {total} checkpoints ({correct.shape[0]} scored) but {needed} are to be "
                         "picked; save more often or pick fewer")
    # A run that learns late starts earlier than `first_below` asks, so that every pick exists
    # (notebook 00's rules then report the first accuracy).
    start = min(first_save(log, first_below), total - needed)
    split = start + int(round(cut * (total - start)))
    split = min(max(split, start + n_training), total - n_evaluation)
    flips = monitor_flips(correct)
    if kinds is None:
        training = select_checkpoints(log.iloc[start:split], n_training, first_below=0.0,
                                      changes=flips[start:split])
    else:
        picks = evaluation_picks(correct[:split], n_training, earliest=start, enough=0,
                                 kinds=np.asarray(kinds)[:, :split], at_least=at_least, first=start)
        training = [int(log["step"].iloc[i]) for i in picks]
    ends = None if last_at_least is None else np.flatnonzero(correct.mean(axis=1) >= last_at_least)
    picks = evaluation_picks(correct, n_evaluation, earliest=split, ends=ends, enough=enough, kinds=kinds,
                             at_least=at_least)
    return training, [int(log["step"].iloc[i]) for i in picks]


def evaluation_picks(correct, n: int, earliest: int = 0, ends=None, enough: int | None = None,
                     kinds=None, at_least=0.0, first: int | None = None) -> list[int]:
    """Indices of `n` saves from `earliest` on for the evaluation window.

    `correct` is (saves, questions) booleans; `kinds` (optional) is (kinds of question, saves) accuracies,
    one row per kind whose knowledge must move both ways in the window (rise and fall by more than
    `at_least` between neighbouring picks). The last pick is one of `ends` (save indices; by default,
    and where none is given or possible, the final save): a run that has converged by its end barely
    forgets anything into its final save, so the window may stop at an earlier save that is accurate
    enough. Among the chains that keep at least `enough` regressions (right at a pick, wrong at the
    next) between every two neighbours, the pick moves the most kinds both ways, then ends latest
    (later saves know more), then keeps the most regressions, then starts earliest. Where no chain
    keeps `enough`, the chain that keeps the most regressions. Every chain is tried (up to about 660,000
    for the series' 40 saves). `at_least` is one threshold or one per kind; `first` (optional) fixes
    the first pick.
    """
    correct = _saves_by_questions(correct)
    last = correct.shape[0] - 1
    if n < 1 or last - earliest + 1 < n:
        raise ValueError(f"cannot pick {n} evaluation saves from saves {earliest}..{last}")
    if math.comb(last - earliest + 1, n) > 2_000_000:
        raise ValueError(f"too many chains of {n} among saves {earliest}..{last}; save less often or pick fewer")
    ends = [int(j) for j in (ends if ends is not None else []) if earliest + n - 1 <= j <= last] or [last]
    c = correct.astype(np.int32)
    lost = c @ (1 - c).T  # lost[i, j]: right at i, wrong at j
    chains = np.array([ch for ch in itertools.combinations(range(earliest, last + 1), n)
                       if ch[-1] in ends and (first is None or ch[0] == first)])
    if len(chains) == 0:
        raise ValueError(f"no chain of {n} saves from save {first} to one of {ends}")
    fewest = lost[chains[:, :-1], chains[:, 1:]].min(axis=1) if n > 1 else np.full(len(chains), np.inf)
    moved = np.zeros(len(chains), dtype=int)
    if kinds is not None and n > 1:
        step = np.diff(np.asarray(kinds, dtype=float)[:, chains], axis=2).round(3)  # (kinds, chains, n - 1)
        threshold = np.broadcast_to(np.asarray(at_least, dtype=float), (step.shape[0],))[:, None]
        moved = ((step.max(axis=2) > threshold) & (-step.min(axis=2) > threshold)).sum(axis=0)
    good = fewest >= enough if enough is not None else np.zeros(len(chains), dtype=bool)
    order = -np.arange(len(chains))  # the last key of all: the first chain in order
    if good.any():
        keys = (order, -chains[:, 0], fewest, chains[:, -1], moved, good)
    else:
        keys = (order, -chains[:, 0], chains[:, -1], moved, fewest)
    return [int(i) for i in chains[np.lexsort(keys)[-1]]]


def _saves_by_questions(correct) -> np.ndarray:
    correct = np.asarray(correct, dtype=bool)
    if correct.ndim != 2 or correct.shape[0] == 0:
        raise ValueError(f"correct must be a (saves, questions) boolean array, got shape {correct.shape}")
    return correct


def monitor_flips(correct: np.ndarray) -> np.ndarray:
    """Per save, how many monitor questions changed correctness since the previous save (0 for the first).

    `correct` is (n_saves, n_questions) booleans.
    """
    correct = _saves_by_questions(correct)
    return np.concatenate([[0], (correct[1:] != correct[:-1]).sum(axis=1)])
