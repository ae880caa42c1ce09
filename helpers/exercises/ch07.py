"""The checks of notebook 07's exercises (what the series found): each recomputes the answer from the
worlds' claims tables its check cell passes and calls `helpers.exercises.check`."""
from __future__ import annotations

import numpy as np
import pandas as pd

from helpers.evaluation import findings
from helpers.exercises import check, uncheckable

def exercise_1(replicated_share, worlds: dict, taught_in: pd.Series) -> None:
    """Per chapter, the share of its claims whose combined verdict is the same in every world
    (`findings.replication`); `worlds` maps a world seed to its claims table, `taught_in` a claim to its chapter."""
    verdicts = pd.DataFrame({seed: frame["verdict"].reindex(taught_in.index) for seed, frame in worlds.items()})
    replicated = pd.Series([findings.replication(row).startswith("replicated") for row in verdicts.to_numpy()],
                           index=taught_in.index)
    expected = replicated.groupby(taught_in).mean().to_dict()
    answer = replicated_share.to_dict() if isinstance(replicated_share, pd.Series) else replicated_share
    if isinstance(answer, dict):  # chapter 2 or "02": either names it
        answer = {f"{int(k):02d}" if str(k).isdigit() else k: v for k, v in answer.items()}
    return check("Exercise 1", "replicated_share", answer, expected, tol=0.005,
                 hint="a claim replicates when its combined verdict is the same in every world; group the "
                      "claims by `taught in` and take each chapter's mean.")


def exercise_2(control_one_sign, worlds: dict, claims, chosen=(0, 1, 2)) -> None:
    """How many of `claims` have a control difference of one sign (all above 0 or all below) in every world
    of `chosen` (world seeds, keys of `worlds`)."""
    if not set(chosen) <= set(worlds):
        return uncheckable("Exercise 2", f"worlds {sorted(set(chosen) - set(worlds))} are not in this series' results")
    differences = np.array([worlds[seed]["control: difference"].reindex(claims).to_numpy(float)
                            for seed in chosen])
    expected = int(((differences > 0).all(axis=0) | (differences < 0).all(axis=0)).sum())
    return check("Exercise 2", "control_one_sign", control_one_sign, expected, tol=0,
                 hint="take the sign of `control: difference` in each of your worlds only, not the paper "
                      "metric's; a claim without a control does not count.")
