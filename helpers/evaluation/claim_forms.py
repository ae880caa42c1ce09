"""The claim forms that are not one metric of two methods (notebook 06), each decided as `findings` decides:

- `auc_claim`: a difference of test AUCs inside checkpoints (forward against backward transfer, random labels);
- `gap_claim`: domain transfer, an equivalence test with a fixed margin and a level;
- `permutation_trend`: B.7, a trend over checkpoints by an exact permutation test over their orders.
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from helpers.evaluation import metrics
from helpers.evaluation.findings import ALPHA, DIRECTIONS, decision, mean_over_seeds, with_data_row
from helpers.evaluation.shared_bootstrap import contrast_bootstrap_over_pairs, over_seeds, weighted_auc


def auc_claim(cells: dict, combine, direction: str, n: int | None = None, seed: int = 0) -> dict:
    """A claim about test AUCs inside checkpoints (notebook 06: forward against backward transfer, random
    labels), decided by the paired bootstrap. `cells` maps a key to one checkpoint's results frame (a trained
    method's with a ``seed`` column); every cell scores the same questions, so one resample of the questions
    (Poisson weights, `shared_bootstrap.question_weights`) serves every cell and the seeds are redrawn in
    each replicate. `combine(aucs)` turns {key: AUC} into the claimed difference (it is called with arrays,
    one value per replicate). Returns the difference, its 5th/95th percentiles over replicates, the number of
    seeds and the verdict for `direction`. Weighting the questions of each class alike would not change an AUC,
    so the resample needs no strata."""
    if not cells:
        raise ValueError("cells is empty; pass {key: results frame of one checkpoint}")
    parts = {key: metrics.seed_frames(df) for key, df in cells.items()}
    for key, frames in parts.items():
        if frames[0]["checkpoint"].nunique() != 1:
            raise ValueError(f"cell {key!r} holds several checkpoints; pass one checkpoint's answers per cell")
    ids = np.unique(np.concatenate([f["question_id"].to_numpy() for frames in parts.values() for f in frames]))
    w = with_data_row(ids, n, seed).to_numpy()
    aucs = {}
    for key, frames in parts.items():
        values = []
        for f in frames:
            pos = np.searchsorted(ids, f["question_id"].to_numpy())
            values.append(weighted_auc(f["confidence"].to_numpy(float), f["correct"].to_numpy(float), w[:, pos]))
        aucs[key] = mean_over_seeds(np.array(values), seed)
    diffs = np.asarray(combine(aucs), dtype=float)
    return {"difference": float(diffs[0]), **decision(diffs[1:], direction), "seeds": max(map(len, parts.values()))}


def gap_claim(inside: tuple, outside: tuple, pairs, min_sizes: tuple[int, int], margin: float,
              level: float, n: int | None = None, seed: int = 0, metric: str = "auc") -> dict:
    """The paper's domain-transfer claim (§3.2, §B.5): out of domain, method a's contrast-set advantage over
    method b largely disappears, the two "similarly poor". `inside` and `outside` are (frame a, frame b) on two
    question sets (e.g. sums and subtraction), with contrast pairs of at least `min_sizes` (inside, outside)
    questions; each set has its own question resample (they share no question) and both redraw the seeds alike.

    Two parts, with the margin and level of `config.findings()` (chosen after world 0's numbers were seen;
    docs/settings.md says how):
    - **similar**: an equivalence test (two one-sided tests), so that a reversal is not a reproduction: the
      outside advantage lies within ± `margin` (an absolute AUC difference);
    - **poor**: both methods' outside contrast `metric` lies below `level`.
    Reproduced when the equivalence holds (both one-sided 95% intervals inside ± margin) and both methods' 95th
    percentiles lie below `level`; contradicted when the advantage lies wholly beyond a bound or a method's 5th
    percentile lies above `level`; inconclusive otherwise. Returns the advantages, the margin, the outside
    advantage's 5th/95th percentiles, ``p`` (two-sided, below), each outside value with its
    5th/95th percentiles, the seeds and the verdict; raises ValueError where a set has no large enough pair."""
    def one_set(a, b, size, s):
        def one(x, y):
            return contrast_bootstrap_over_pairs(metric, x, y, pairs, size, n=n, seed=s)
        return over_seeds(one, a, b, seed=seed)

    runs = [one_set(*inside, min_sizes[0], seed), one_set(*outside, min_sizes[1], seed + 1)]
    outer = np.asarray(runs[1]["diffs"], dtype=float)
    outer = outer[np.isfinite(outer)]
    below, above = outer + margin, margin - outer  # > 0: inside the lower / the upper bound
    similar = min(np.percentile(below, 5), np.percentile(above, 5)) > 0
    beyond = min(np.percentile(below, 95), np.percentile(above, 95)) < 0
    levels, under = {}, []
    for name, frame in zip(("a", "b"), outside):  # each method against chance: a constant confidence scores 0.5
        chance = frame.assign(confidence=0.5)
        r = one_set(frame, chance, min_sizes[1], seed + 1)
        d = np.asarray(r["diffs"], dtype=float) + 0.5
        d = d[np.isfinite(d)]
        levels[name] = (r["value_a"], float(np.percentile(d, 5)), float(np.percentile(d, 95)))
        under.append(level - d)  # > 0: below the level
    poor = all(high < level for _, _, high in levels.values())
    not_poor = any(low > level for _, low, _ in levels.values())
    result = "reproduced" if similar and poor else "contradicted" if beyond or not_poor else "inconclusive"
    # p, the same rule whatever the verdict: twice the smaller p of the two directions' tests. Reproduced needs
    # all four one-sided tests (inside both bounds, both methods below the level): the largest of their p-values
    # (an intersection-union test). Contradicted needs any one of their opposites: the smallest p-value times four
    # (Bonferroni over the four ways). A share of 0 counts as 1/R (R replicates).
    parts = (below, above, *under)
    floor = 1 / outer.size
    p_reproduced = max(floor, max(float(np.mean(x <= 0)) for x in parts))
    p_contradicted = min(1.0, 4 * max(floor, min(float(np.mean(x >= 0)) for x in parts)))
    p = min(1.0, 2 * min(p_reproduced, p_contradicted))
    return {"inside": runs[0]["difference"], "outside": runs[1]["difference"], "margin": margin, "level": level,
            "difference": runs[1]["difference"], "5%": float(np.percentile(outer, 5)),
            "95%": float(np.percentile(outer, 95)), "verdict": result, "p": p,
            "p shown": f"{p:.3f}",
            **{f"outside {k}{end}": v for k, trio in levels.items() for end, v in zip(("", ": 5%", ": 95%"), trio)},
            "seeds": max(runs[0]["n_seeds"], runs[1]["n_seeds"])}


def permutation_trend(values: np.ndarray, direction: str = "higher") -> dict:
    """The paper's B.7 statistic and its exact permutation test. `values` is (layers, questions, checkpoints),
    the checkpoints in training order. Per layer, the mean over questions of each question's Spearman correlation
    between position and value (ties averaged; a question whose values do not vary is left out); the statistic is
    the mean across layers, with the median beside (the paper reports both). The test recomputes the statistic
    under every order of the checkpoints (k! of them; a 7-checkpoint world has 5,040): the one-sided p is the share
    of orders at least as far in `direction`, the observed order included, so it cannot be 0. Returns ``mean``,
    ``median``, ``per layer``, ``orders``, ``p for``, ``p against``, ``p`` (two-sided: twice the smaller, capped
    at 1), ``p shown`` and the ``verdict`` at 5% one-sided."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 3 or values.shape[2] < 3:
        raise ValueError(f"values must be (layers, questions, checkpoints >= 3), got {values.shape}")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    k = values.shape[2]
    orders = np.array(list(itertools.permutations(range(k))), dtype=float)  # (orders, k); row 0 the observed
    y = rankdata(values, axis=-1)
    yc = y - y.mean(axis=-1, keepdims=True)
    xc = orders - orders.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (yc @ xc.T) / np.sqrt((yc ** 2).sum(axis=-1, keepdims=True) * (xc[0] ** 2).sum())  # (L, Q, orders)
        per_layer = np.nanmean(rho, axis=1)  # (layers, orders)
    statistic = per_layer.mean(axis=0)
    upper, lower = float(np.mean(statistic >= statistic[0])), float(np.mean(statistic <= statistic[0]))
    p_for, p_against = (upper, lower) if direction == "higher" else (lower, upper)
    p = min(1.0, 2 * min(upper, lower))
    result = "reproduced" if p_for < ALPHA else "contradicted" if p_against < ALPHA else "inconclusive"
    return {"mean": float(statistic[0]), "median": float(np.median(per_layer[:, 0])),
            "per layer": per_layer[:, 0].tolist(), "orders": len(orders), "p for": p_for, "p against": p_against,
            "p": p, "p shown": f"{p:.3f}", "verdict": result}


def trend_cube(frame: pd.DataFrame, value: str, order, by: str | None = None) -> np.ndarray:
    """(layers, questions, checkpoints) values from a long frame with checkpoint, question_id, `value` and, where
    given, the layer column `by`; checkpoints in `order`, questions present at every checkpoint."""
    order = [c for c in order if c in set(frame["checkpoint"])]
    groups = [frame] if by is None else [g for _, g in sorted(frame.groupby(by))]
    cubes = [g.pivot_table(index="question_id", columns="checkpoint", values=value)[order].dropna().to_numpy(float)
             for g in groups]
    return np.stack(cubes)
