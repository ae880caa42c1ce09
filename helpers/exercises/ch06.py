"""The checks of chapter 06's exercises (the contrast-set transfer matrix in notebook 06.1, one contrast pair on
subtraction in notebook 06.2, the seed spread and each block's permutation test in notebook 06.3): each
recomputes the answer from the inputs its check cell passes and calls `helpers.exercises.check`. They read
cached results only."""
from __future__ import annotations

import numpy as np
import pandas as pd

from helpers.evaluation import claim_forms, contrast, metrics
from helpers.exercises import check, pair_aucs, uncheckable
from helpers.pipeline.adapters import seeded_results


def _pair_aucs(scored: pd.DataFrame, i: str, j: str, min_size: int) -> tuple[float, float] | None:
    """(plain, class-balanced) contrast AUC of one pair, the mean over seeds, from the normalized rows;
    None where the pair has fewer than `min_size` questions."""
    if len(contrast.contrast_set(metrics.seed_frames(scored)[0], i, j)) < min_size:
        return None
    plain, balanced = zip(*(pair_aucs(run, i, j) for run in metrics.seed_frames(scored)))
    return float(np.mean(plain)), float(np.mean(balanced))


def exercise_1(contrast_transfer, scored: dict, chosen: list[str], min_size: int) -> None:
    """The mean plain contrast AUC of the forward and of the backward cells: adapter `a` (a key of
    `scored`, whose frame holds its results on the chosen evaluation checkpoints) on each pair of them,
    trained before both checkpoints of the pair (forward) or after both (backward). An adapter trained on
    one of the pair's checkpoints counts as neither, as notebook 06.1's section 2 leaves out the diagonal."""
    cells = {"forward": [], "backward": []}
    for a, frame in scored.items():
        evaluated = [name for name in chosen if name in set(frame["checkpoint"])]
        for i, j in contrast.all_pairs(evaluated):
            aucs = _pair_aucs(frame, i, j, min_size)
            if aucs is not None and chosen.index(a) < chosen.index(i):
                cells["forward"].append(aucs[0])
            elif aucs is not None and chosen.index(a) > chosen.index(j):
                cells["backward"].append(aucs[0])
    if not all(cells.values()):
        return uncheckable("Exercise 1", f"too few pairs reach the contrast-set size {min_size} in this world")
    expected = {side: float(np.mean(values)) for side, values in cells.items()}
    return check("Exercise 1", "contrast_transfer", contrast_transfer, expected, tol=1e-3,
                 hint="a dict with keys 'forward' and 'backward'; an adapter trained on one of the pair's "
                      "checkpoints, or between them, counts as neither.")


def exercise_2(subtraction_pair, source: str, evaluation: list[str], pair: tuple[str, str]) -> None:
    """One pair's contrast questions on subtraction and its AUCs: the adapter trained on `source` (its first seed),
    read on the "transfer_test" split of the `evaluation` checkpoints, the pair (i, j): counts of improvements and
    regressions, and the plain and class-balanced contrast AUC of its normalized rows."""
    if subtraction_pair is None:
        return check("Exercise 2", "subtraction_pair", None, {})
    first = metrics.seed_frames(seeded_results("transfer_test", evaluation, source=source))[0]
    kinds = contrast.contrast_set(first, *pair)["kind"]
    if kinds.empty:
        return uncheckable("Exercise 2", f"the pair {pair} has no contrast question on subtraction here")
    plain, balanced = pair_aucs(first, *pair)
    expected = {"improvements": int((kinds == "improvement").sum()),
                "regressions": int((kinds == "regression").sum()), "plain": plain, "class_balanced": balanced}
    return check("Exercise 2", "subtraction_pair", subtraction_pair, expected, tol=1e-3,
                 hint="a dict with keys 'improvements', 'regressions', 'plain', 'class_balanced'; normalize each "
                      "pair of answers as section 2 does (q_i = sigmoid(logit p_i - logit p_j)).")


def exercise_3(spread_rhos, oracle: pd.DataFrame, evaluation: list[str]) -> None:
    """Two Spearman correlations over the evaluation checkpoints: the oracle adapters' mean seed spread with
    the checkpoint's test accuracy ("accuracy"), and the test accuracy with the checkpoint's position among
    `evaluation` ("accuracy_order"). `oracle`: the oracle adapters' test results, every seed."""
    wide = oracle.pivot_table(index=["checkpoint", "question_id"], columns="seed", values="confidence")
    spread = wide.std(axis=1).groupby(level="checkpoint").mean().reindex(evaluation)
    accuracy = oracle[oracle["seed"] == oracle["seed"].iloc[0]].groupby("checkpoint")["correct"].mean()
    accuracy = accuracy.reindex(evaluation)
    position = pd.Series(np.arange(len(evaluation)), index=evaluation)
    expected = {"accuracy": float(spread.corr(accuracy, method="spearman")),
                "accuracy_order": float(accuracy.corr(position, method="spearman"))}
    return check("Exercise 3", "spread_rhos", spread_rhos, expected, tol=1e-3,
                 hint="a dict with keys 'accuracy' and 'accuracy_order'; the spread is section 1's oracle "
                      "column, the accuracy each checkpoint's, the position 0 to 6.")


def exercise_4(block_p, variance: pd.DataFrame, evaluation: list[str]) -> None:
    """Per block (`layer`), the two-sided p of the exact permutation test on the seed variance of the features
    alone (`claim_forms.permutation_trend` on that block's cube): `variance` is `feature_variance`'s frame
    (checkpoint, question_id, layer, variance), `evaluation` the checkpoints in training order."""
    cube = claim_forms.trend_cube(variance, "variance", evaluation, by="layer")  # (blocks, questions, checkpoints)
    blocks = sorted(variance["layer"].unique())
    expected = {int(block): claim_forms.permutation_trend(cube[[k]])["p"] for k, block in enumerate(blocks)}
    answer = block_p
    if isinstance(block_p, dict) and all(str(k).isdigit() for k in block_p):  # block 1 or "1": either names it
        answer = {int(k): v for k, v in block_p.items()}
    return check("Exercise 4", "block_p", answer, expected, tol=1e-3,
                 hint="a dict {block: p}; per block, rank each question's seed variance over the checkpoints, "
                      "correlate with every order of the checkpoints as section 1 does, and take twice the smaller "
                      "tail share.")
