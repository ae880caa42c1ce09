"""Builds the `selection` entry: every save scored on the whole test and transfer_test splits, then the
selection rules of `helpers.world.selection` pick the checkpoints the series studies."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from helpers import config
from helpers.cache import artifacts
from helpers.cache.artifacts import register
from helpers.world import sums
from helpers.world.checkpoints import step_name
from helpers.world.decoding import greedy
from helpers.world.model import load_pretrained
from helpers.world.selection import monitor_flips, window_picks


@register("selection")
def _build_selection(folder: Path) -> dict:
    """Score every save on the whole test and transfer_test splits, then pick the checkpoints the series uses.

    The whole splits, not the monitor: the rules (`world_rules`) count regressions and contrast sets on
    them, and a 1,000-question sample misjudges them (a pick made on a sample can leave half the regressions
    between neighbours that the whole split allows). The evaluation
    picks move as many operand ranges and subtraction both ways as the run allows (`evaluation_picks`).
    About two minutes.
    """
    s, log = config.world(), artifacts.load_or_build("world")["log"]
    rules = dict(s.rules)
    test, sub = sums.split("test"), sums.split("transfer_test")
    saves = artifacts.folder("world") / "checkpoints"
    correct, sub_correct = [], []
    for step in tqdm(log["step"], desc="scoring saves", mininterval=2):
        model, tokenizer = load_pretrained(saves / step_name(int(step)))
        correct.append(greedy(model, tokenizer, test, progress=False)["correct"].to_numpy())
        sub_correct.append(greedy(model, tokenizer, sub, progress=False)["correct"].to_numpy())
    correct, sub_correct = np.array(correct), np.array(sub_correct)  # (saves, questions)
    ranges = sums.operand_range(test["a"], test["b"])
    family = sums.in_mistake_family(test["a"], test["b"])
    kinds = [correct[:, ranges == r].mean(axis=1) for r in sums.RANGES] + [sub_correct.mean(axis=1)]
    kinds.append(correct[:, family].mean(axis=1))
    at_least = [rules["both_ways_at_least"]] * (len(kinds) - 1) + [rules["mistake_both_ways_at_least"]]
    changes = monitor_flips(correct)
    training, evaluation = window_picks(log, correct, s.n_training_checkpoints,
                                        s.n_checkpoints - s.n_training_checkpoints, s.evaluation_start,
                                        last_at_least=rules["last_at_least"],
                                        enough=round(rules["regressions_per_5000"] * correct.shape[1] / 5000),
                                        kinds=kinds, at_least=at_least)
    steps = training + evaluation
    return {"selected": [step_name(x) for x in steps], "n_training": s.n_training_checkpoints,
            "changes": pd.Series(changes, index=log["step"], name="test answers flipped since the previous save")}
