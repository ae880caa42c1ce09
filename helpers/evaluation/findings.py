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
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from helpers.evaluation import metrics, stats
from helpers.evaluation.contrast import contrast_rows
from helpers.evaluation.shared_bootstrap import (
    contrast_bootstrap_over_pairs, over_seeds, pair_values, question_weights, seed_resampled_mean,
    weighted_auc,
)

DIRECTIONS = ("higher", "lower")
CONTRAST_ONLY = ("auc_cb", "brier_cb", "delta_cb")  # class-balanced: the mean over improvements and regressions
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
    normalizer: str | None = None  # contrast metrics: None (independence, A.1) or "fitted" (B.1)

    @property
    def parts(self) -> tuple[str, str]:
        """("full set" or "contrast set", the `stats` metric key): "contrast set AUC" -> ("contrast set", "auc")."""
        where, _, key = self.metric.rpartition(" ")
        return where, key.lower()

    def __post_init__(self):
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {self.direction!r}")
        where, key = self.parts
        allowed = stats.METRICS if where == "full set" else CONTRAST_ONLY + tuple(stats.METRICS)
        if where not in ("full set", "contrast set") or key not in allowed:
            raise ValueError(f"metric must be 'full set <m>' with m in {stats.METRICS} or 'contrast set <m>', m also "
                             f"one of {CONTRAST_ONLY}; got {self.metric!r}")


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
    Claim("temperature scaling lowers self-consistency's full-set ECE", "full set ECE",
          "SC + temperature", "self-consistency", "lower", "§B.2"),
    Claim("Platt scaling lowers self-consistency's full-set ECE", "full set ECE",
          "SC + Platt", "self-consistency", "lower", "§B.2"),
    Claim("P(True), read from the evaluated weights without training, falls below oracle training on contrast sets",
          "contrast set AUC", "P(True)", "oracle adapter", "lower", "§3.2; Kadavath et al. 2022"),
    Claim("once improvements and regressions count equally, the checkpoint-index baseline falls below oracle "
          "training on contrast sets", "contrast set auc_cb", "checkpoint index", "oracle adapter", "lower",
          "§3.1.1, §A.3"),
    Claim("under the fitted normalization too, self-consistency falls below oracle training on contrast sets",
          "contrast set AUC", "self-consistency", "oracle adapter", "lower", "§B.1", normalizer="fitted"),
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
    range over resamples, the number of seeds and the verdict. `frames` maps names to results frames on
    the same questions; a trained method's frame has a ``seed`` column (see `shared_bootstrap.over_seeds`)."""
    missing = [x for x in (claim.a, claim.b) if x not in frames]
    if missing:
        raise ValueError(f"claim {claim.claim!r} compares {missing}, which are not in frames ({list(frames)})")
    where, key = claim.parts
    row = {"claim": claim.claim,
           "metric": claim.metric + (f" ({claim.normalizer} normalization)" if claim.normalizer else ""),
           "a": claim.a, "b": claim.b, "claimed": claim.direction, "source": claim.source}
    if where == "full set":
        def one(a, b):
            return stats.full_set_bootstrap(key, a, b, checkpoints, n=n, seed=seed, return_diffs=True)
    else:
        def one(a, b):
            return contrast_bootstrap_over_pairs(key, a, b, pairs, min_size, n=n, seed=seed,
                                                 normalizer=claim.normalizer)
    try:  # a trained method brings one frame per seed: values average over seeds, the interval covers them
        run = over_seeds(one, frames[claim.a], frames[claim.b], seed=seed)
    except ValueError as err:  # e.g. no pair reaches min_size in this world
        return {**row, "value a": np.nan, "value b": np.nan, "difference": np.nan, "5%": np.nan, "95%": np.nan,
                "seeds": np.nan, "verdict": f"not testable here ({err})"}
    result, low, high = verdict(run["diffs"], claim.direction)
    return {**row, "value a": run["value_a"], "value b": run["value_b"], "difference": run["difference"],
            "5%": low, "95%": high, "seeds": run["n_seeds"], "verdict": result}


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


def gcm_headroom(oracle: pd.DataFrame, gcm: pd.DataFrame, verifier_correct: pd.Series, pairs, min_size: int,
                 n: int | None = None, seed: int = 0) -> dict:
    """The paper's GCM test (§3.2, Figure 2): the oracle adapter's contrast-set AUC headroom over the GCM,
    per pair of evaluation checkpoints, against the share of that pair's contrast questions the verifier
    itself answers correctly. The claim: the headroom shrinks where the verifier knows more (a negative
    slope). `verifier_correct` maps question_id -> 1 if the verifier's own greedy answer is right.

    One question resample (`shared_bootstrap.question_weights`) is shared by every pair, both methods
    and the verifier's share; a trained method's seeds are averaged and redrawn per replicate. Returns
    ``per_pair`` (headroom, share known, size), ``slope``, ``mean_headroom``, their replicates, the
    5th/95th percentiles of the slope and its ``verdict``."""
    known = verifier_correct.astype(float)
    used = []
    for ckpt_i, ckpt_j in pairs:
        rows = {name: [contrast_rows(part, ckpt_i, ckpt_j) for part in metrics.seed_frames(df)]
                for name, df in (("oracle", oracle), ("gcm", gcm))}
        shared = np.intersect1d(rows["oracle"][0]["question_id"], rows["gcm"][0]["question_id"])
        if shared.size >= max(min_size, 1):
            used.append((ckpt_i, ckpt_j, {k: [r[r["question_id"].isin(shared)] for r in v] for k, v in rows.items()}))
    if len(used) < 3:
        raise ValueError(f"a slope needs at least 3 pairs with {min_size} contrast questions, got {len(used)}")
    ids = np.unique(np.concatenate([rows["oracle"][0]["question_id"].to_numpy() for *_, rows in used]))
    missing = np.setdiff1d(ids, known.index)
    if missing.size:
        raise ValueError(f"verifier_correct lacks {missing.size} contrast questions (e.g. {missing[0]}); "
                         "score the split")
    w = _with_data_row(ids, n, seed)
    heads, shares, table = [], [], []
    for ckpt_i, ckpt_j, rows in used:
        auc = {k: _mean_over_seeds(np.array([pair_values("auc", r, ckpt_j, w) for r in v]), seed)
               for k, v in rows.items()}
        q = rows["oracle"][0].drop_duplicates("question_id")["question_id"].to_numpy()
        share = (w[q].to_numpy() * known.loc[q].to_numpy()).sum(axis=1) / w[q].to_numpy().sum(axis=1)
        heads.append(auc["oracle"] - auc["gcm"])
        shares.append(share)
        table.append({"pair": f"{ckpt_i} → {ckpt_j}", "contrast questions": q.size, "verifier knows": share[0],
                      "oracle AUC": auc["oracle"][0], "GCM AUC": auc["gcm"][0], "headroom": heads[-1][0]})
    x, y = np.array(shares), np.array(heads)  # (pairs, 1 + replicates); column 0 is the data itself
    xc = x - x.mean(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        slopes = (xc * (y - y.mean(axis=0))).sum(axis=0) / (xc ** 2).sum(axis=0)
    result, low, high = verdict(slopes[1:], "lower")
    return {"per_pair": pd.DataFrame(table).set_index("pair"), "slope": float(slopes[0]), "diffs": slopes[1:],
            "mean_headroom": float(y[:, 0].mean()), "mean_headroom_diffs": y[:, 1:].mean(axis=0),
            "5%": low, "95%": high, "verdict": result}


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
    w = _with_data_row(ids, n, seed).to_numpy()
    aucs = {}
    for key, frames in parts.items():
        values = []
        for f in frames:
            pos = np.searchsorted(ids, f["question_id"].to_numpy())
            values.append(weighted_auc(f["confidence"].to_numpy(float), f["correct"].to_numpy(float), w[:, pos]))
        aucs[key] = _mean_over_seeds(np.array(values), seed)
    diffs = np.asarray(combine(aucs), dtype=float)
    result, low, high = verdict(diffs[1:], direction)
    return {"difference": float(diffs[0]), "5%": low, "95%": high, "seeds": max(map(len, parts.values())),
            "verdict": result}


def gap_claim(inside: tuple, outside: tuple, pairs, min_sizes: tuple[int, int], n: int | None = None,
              seed: int = 0) -> dict:
    """The paper's domain-transfer claim (§3.2, notebook 06): method a's contrast-AUC advantage over method b
    shrinks out of domain. `inside` and `outside` are (frame a, frame b) on two question sets (e.g. sums and
    subtraction), with contrast pairs of at least `min_sizes` (inside, outside) questions. Each set has its own
    question resample (they share no question); both redraw the seeds alike (the same adapters). Returns the
    advantages, their difference (outside − inside), its 5th/95th percentiles, the number of seeds and the
    verdict for "lower"; raises ValueError where a set has no large enough pair."""
    runs = []
    for (a, b), size, s in ((inside, min_sizes[0], seed), (outside, min_sizes[1], seed + 1)):
        def one(x, y, size=size, s=s):
            return contrast_bootstrap_over_pairs("auc", x, y, pairs, size, n=n, seed=s)
        runs.append(over_seeds(one, a, b, seed=seed))
    diffs = np.asarray(runs[1]["diffs"], dtype=float) - np.asarray(runs[0]["diffs"], dtype=float)
    result, low, high = verdict(diffs, "lower")
    return {"inside": runs[0]["difference"], "outside": runs[1]["difference"],
            "difference": runs[1]["difference"] - runs[0]["difference"], "5%": low, "95%": high,
            "seeds": max(runs[0]["n_seeds"], runs[1]["n_seeds"]), "verdict": result}


def _with_data_row(ids, n: int | None, seed: int) -> pd.DataFrame:
    """(1 + replicates, questions) weights, one column per question id: row 0 all ones (the data itself),
    then `shared_bootstrap.question_weights`."""
    return pd.concat([pd.DataFrame(np.ones((1, len(ids))), columns=ids), question_weights(ids, n, seed)],
                     ignore_index=True)


def _mean_over_seeds(values: np.ndarray, seed: int) -> np.ndarray:
    """(seeds, 1 + replicates) -> (1 + replicates): column 0 (the data) is the mean over seeds; every
    replicate averages seeds drawn with replacement."""
    return np.concatenate([[values[:, 0].mean()], seed_resampled_mean(values[:, 1:], seed)])


def variance_trend(correlations: pd.DataFrame, n: int | None = None, seed: int = 0) -> pd.DataFrame:
    """The paper's B.7 test: per layer, the mean and median over questions of the per-question correlation
    between checkpoint index and cross-seed feature variance (`confidence.feature_variance`). The claim is
    a positive mean; one resample of the questions serves every layer. One row per layer: the mean, the
    median, the 5th/95th percentiles of the resampled mean and the verdict ("higher" than 0)."""
    if not isinstance(correlations, pd.DataFrame) or correlations.empty:
        raise ValueError("correlations is empty; pass feature_variance.per_question_correlations(...)")
    values = correlations.to_numpy(float)  # (questions, layers)
    idx = stats.resample_indices(n=n, seed=seed, size=len(values))
    with warnings.catch_warnings():  # NaN: a question whose variance never changes; an all-NaN resample stays NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        means = np.nanmean(values[idx], axis=1)  # (resamples, layers)
    rows = []
    for k, layer in enumerate(correlations.columns):
        result, low, high = verdict(means[:, k], "higher")
        rows.append({"layer": layer, "questions": int(np.isfinite(values[:, k]).sum()),
                     "mean": float(np.nanmean(values[:, k])), "median": float(np.nanmedian(values[:, k])),
                     "5%": low, "95%": high, "verdict": result})
    return pd.DataFrame(rows).set_index("layer")


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
        "the fine-tuned model is overconfident (mean confidence above accuracy)":
            ((c_ft - y_ft).mean(axis=1), "higher"),
        "RL raises accuracy": (y_rl.mean(axis=1) - y_ft.mean(axis=1), "higher"),
        f"RL lowers ECE ({n_bins} bins)":
            (stats.batched_ece(c_rl, y_rl, n_bins) - stats.batched_ece(c_ft, y_ft, n_bins), "lower"),
        "RL raises mean confidence": (c_rl.mean(axis=1) - c_ft.mean(axis=1), "higher"),
    }
    rows = []
    for claim, (values, direction) in tests.items():
        result, low, high = verdict(values[1:], direction)
        rows.append({"claim": claim, "claimed": direction, "difference": float(values[0]), "5%": low, "95%": high,
                     "verdict": result})
    return pd.DataFrame(rows).set_index("claim")
