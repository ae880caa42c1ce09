"""The sources' claims, decided by the paper's statistics (notebooks 01, 03, 05 and 06).

A `Claim` is a metric, the two things it compares and the direction the source states ("the
oracle adapter's contrast AUC is higher than self-consistency's"). Its verdict comes from the paired
bootstrap of the difference a − b, and from nothing else (paper A.8.2):

- **reproduced**: the one-sided 95% interval excludes 0 in the claimed direction
  (for "higher", the 5th percentile of the resampled differences is above 0);
- **contradicted**: the one-sided 95% interval excludes 0 the other way;
- **inconclusive**: neither; this world cannot tell.

Contrast metrics averaged over pairs use `shared_bootstrap` (one question resample for every pair and
both methods); full-set metrics use `stats.full_set_bootstrap` (stratified by correctness). Checks that
hold by construction (a copy ablation's contrast AUC is exactly 0.5) are `Check`s of the machinery and
are never counted as findings.

Layer 7: imports metrics, stats and shared_bootstrap.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import metrics, stats
from .shared_bootstrap import contrast_bootstrap_over_pairs

DIRECTIONS = ("higher", "lower")
VERDICTS = ("reproduced", "contradicted", "inconclusive")


@dataclass(frozen=True)
class Claim:
    """What a source states: `a`'s `metric` is `direction` ("higher" or "lower") than `b`'s."""

    claim: str
    metric: str  # "full set AUC", "contrast set Brier", ...: a set and a `stats` metric
    a: str
    b: str
    direction: str
    source: str = ""

    @property
    def parts(self) -> tuple[str, str]:
        """("full set" or "contrast set", the `stats` metric key): "contrast set AUC" -> ("contrast set", "auc")."""
        where, _, key = self.metric.rpartition(" ")
        return where, key.lower()

    def __post_init__(self):
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {self.direction!r}")
        where, key = self.parts
        if where not in ("full set", "contrast set") or key not in stats.METRICS:
            raise ValueError(f"metric must be 'full set <m>' or 'contrast set <m>' with m in {stats.METRICS}, "
                             f"got {self.metric!r}")


@dataclass(frozen=True)
class Check:
    """A property that holds by construction: shown as a test of the machinery, not as a finding."""

    check: str
    holds: bool
    detail: str


# The claims notebook 05 decides on its results table (and notebook 06 repeats in its findings table).
TABLE_CLAIMS = [
    Claim("self-consistency falls below oracle training on contrast sets", "contrast set AUC",
          "self-consistency", "oracle adapter", "lower", "§1, §3.2"),
    Claim("non-oracle training falls below oracle training on contrast sets", "contrast set AUC",
          "non-oracle adapter", "oracle adapter", "lower", "§3.2, §B.2"),
    Claim("isotonic recalibration lowers self-consistency's full-set ECE", "full set ECE",
          "SC + isotonic", "self-consistency", "lower", "§B.2"),
    Claim("after isotonic recalibration, self-consistency still falls below oracle training on contrast sets",
          "contrast set AUC", "SC + isotonic", "oracle adapter", "lower", "§B.2"),
    Claim("self-consistency beats its surrogate ablation on contrast sets", "contrast set AUC",
          "self-consistency", "surrogate (SC)", "higher", "§3.2, §B.2"),
    Claim("self-consistency beats its copy ablation on contrast sets", "contrast set AUC",
          "self-consistency", "copy (SC)", "higher", "§3.2, §B.2"),
]


def verdict(diffs, direction: str) -> tuple[str, float, float]:
    """The verdict of resampled differences a − b for a claimed `direction`, with the 5th and 95th
    percentiles (the ends of the two one-sided 95% intervals)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    diffs = np.asarray(diffs, dtype=float)
    diffs = diffs[np.isfinite(diffs)]
    if diffs.size == 0:
        raise ValueError("no finite resampled difference; the metric is undefined on every resample")
    low, high = float(np.percentile(diffs, 5)), float(np.percentile(diffs, 95))
    above, below = low > 0, high < 0
    if direction == "higher":
        return ("reproduced" if above else "contradicted" if below else "inconclusive"), low, high
    return ("reproduced" if below else "contradicted" if above else "inconclusive"), low, high


def decide(claim: Claim, frames: dict, checkpoints, pairs, min_size: int, n: int | None = None, seed: int = 0) -> dict:
    """One row of a findings table: the claim, both values, the difference, its 5th-95th percentile
    range over resamples and the verdict. `frames` maps names to results frames on the same questions."""
    missing = [x for x in (claim.a, claim.b) if x not in frames]
    if missing:
        raise ValueError(f"claim {claim.claim!r} compares {missing}, which are not in frames ({list(frames)})")
    where, key = claim.parts
    row = {"claim": claim.claim, "metric": claim.metric, "a": claim.a, "b": claim.b, "claimed": claim.direction,
           "source": claim.source}
    try:
        if where == "full set":
            run = stats.full_set_bootstrap(key, frames[claim.a], frames[claim.b], checkpoints, n=n, seed=seed,
                                           return_diffs=True)
        else:
            run = contrast_bootstrap_over_pairs(key, frames[claim.a], frames[claim.b], pairs, min_size, n=n, seed=seed)
    except ValueError as err:  # e.g. no pair reaches min_size in this world
        return {**row, "value a": np.nan, "value b": np.nan, "difference": np.nan, "5%": np.nan, "95%": np.nan,
                "verdict": f"not testable here ({err})"}
    result, low, high = verdict(run["diffs"], claim.direction)
    return {**row, "value a": run["value_a"], "value b": run["value_b"], "difference": run["difference"],
            "5%": low, "95%": high, "verdict": result}


def findings_table(rows: list[dict]) -> pd.DataFrame:
    """The rows of `decide` as a table, with a count of each verdict in its `attrs`."""
    table = pd.DataFrame(rows).set_index("claim")
    table.attrs["counts"] = {v: int((table["verdict"] == v).sum()) for v in VERDICTS}
    return table


def copy_checks(table: dict) -> list[Check]:
    """The copy ablations' contrast AUC is exactly 0.5 (by construction: both members of a pair get the
    same confidence, so normalization gives 0.5 to each)."""
    con = table["values"][("contrast set", "AUC")]
    return [Check(f"{name}: contrast AUC is exactly 0.5", bool(con[name] == 0.5), f"{con[name]}")
            for name in ("copy (SC)", "copy (non-oracle adapter)") if name in con.index]


def gcm_gap(oracle: pd.DataFrame, gcm: pd.DataFrame, checkpoints) -> pd.DataFrame:
    """Per checkpoint: its accuracy, the oracle adapter's and the GCM's full-set AUC, and GCM − oracle."""
    rows = []
    for name in checkpoints:
        o, g = oracle[oracle["checkpoint"] == name], gcm[gcm["checkpoint"] == name]
        if o.empty or g.empty:
            raise ValueError(f"checkpoint {name!r} is missing from the oracle or the GCM frame")
        rows.append({"checkpoint": name, "accuracy": o["correct"].mean(),
                     "oracle AUC": metrics.summary_metrics(o["confidence"], o["correct"])["auroc"],
                     "GCM AUC": metrics.summary_metrics(g["confidence"], g["correct"])["auroc"]})
    out = pd.DataFrame(rows).set_index("checkpoint")
    out["GCM − oracle"] = out["GCM AUC"] - out["oracle AUC"]
    return out


def gcm_slope(oracle: pd.DataFrame, gcm: pd.DataFrame, checkpoints, n: int | None = None, seed: int = 0) -> dict:
    """The least-squares slope of the per-checkpoint AUC gap (GCM − oracle) against accuracy, and its
    paired bootstrap: one resample of questions, shared by every checkpoint and both methods, moves
    accuracies and AUCs together. Returns ``slope``, ``diffs`` (one slope per resample) and the
    verdict of the paper's claim that the gap widens as checkpoints know more (a negative slope)."""
    gap = gcm_gap(oracle, gcm, checkpoints)
    if len(gap) < 3:
        raise ValueError(f"a slope needs at least 3 checkpoints, got {len(gap)}")
    wide = {name: df[df["checkpoint"].isin(checkpoints)].pivot(index="question_id", columns="checkpoint")
            for name, df in (("oracle", oracle), ("gcm", gcm))}
    if not wide["oracle"].index.equals(wide["gcm"].index):
        raise ValueError("the oracle and GCM frames must score the same questions")
    idx = stats.resample_indices(n=n, seed=seed, size=len(wide["oracle"]))
    acc, gaps = [], []
    for name in checkpoints:
        correct = wide["oracle"][("correct", name)].to_numpy(dtype=float)
        auc = {k: stats.batched_auc(w[("confidence", name)].to_numpy(float)[idx], correct[idx]) for k, w in wide.items()}
        acc.append(correct[idx].mean(axis=1))
        gaps.append(auc["gcm"] - auc["oracle"])
    x, y = np.array(acc), np.array(gaps)  # (checkpoints, resamples)
    xc = x - x.mean(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        slopes = (xc * (y - y.mean(axis=0))).sum(axis=0) / (xc ** 2).sum(axis=0)
    observed = float(np.polyfit(gap["accuracy"], gap["GCM − oracle"], 1)[0])
    result, low, high = verdict(slopes, "lower")
    return {"slope": observed, "diffs": slopes, "5%": low, "95%": high, "verdict": result}


def post_training_claims(finetuned: pd.DataFrame, rl: pd.DataFrame, n_bins: int = 5, n: int | None = None,
                         seed: int = 0) -> pd.DataFrame:
    """The worked example's four claims about post-training (notebooks 01 and 06), each decided by a
    paired bootstrap: both models answer the same questions, so one resample of questions serves both.

    `finetuned` and `rl` are greedy frames (question_id, confidence, correct) on the same questions.
    One row per claim: the difference (RL − fine-tuned, or the fine-tuned model's overconfidence), the
    5th and 95th percentiles over resamples and the verdict."""
    both = finetuned.merge(rl, on="question_id", suffixes=("_ft", "_rl"), validate="one_to_one")
    if len(both) != len(finetuned) or len(both) != len(rl) or both.empty:
        raise ValueError("finetuned and rl must answer the same questions, one row each")
    idx = stats.resample_indices(n=n, seed=seed, size=len(both))
    take = {k: np.vstack([both[k].to_numpy(float), both[k].to_numpy(float)[idx]])  # row 0: the data itself
            for k in ("confidence_ft", "correct_ft", "confidence_rl", "correct_rl")}
    c_ft, y_ft, c_rl, y_rl = take["confidence_ft"], take["correct_ft"], take["confidence_rl"], take["correct_rl"]
    tests = {
        "the fine-tuned model is overconfident (mean confidence above accuracy)": ((c_ft - y_ft).mean(axis=1), "higher"),
        "RL raises accuracy": (y_rl.mean(axis=1) - y_ft.mean(axis=1), "higher"),
        f"RL lowers ECE ({n_bins} bins)": (stats.batched_ece(c_rl, y_rl, n_bins) - stats.batched_ece(c_ft, y_ft, n_bins), "lower"),
        "RL raises mean confidence": (c_rl.mean(axis=1) - c_ft.mean(axis=1), "higher"),
    }
    rows = []
    for claim, (values, direction) in tests.items():
        result, low, high = verdict(values[1:], direction)
        rows.append({"claim": claim, "claimed": direction, "difference": float(values[0]), "5%": low, "95%": high,
                     "verdict": result})
    return pd.DataFrame(rows).set_index("claim")
