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

Every row also carries its bootstrap p-values (the share of replicates on the wrong side of 0, for the
claimed direction and for the opposite one). `findings_table` corrects the paper's claims for
multiplicity with Holm's step-down procedure (Holm 1979), once for "reproduced" and once for
"contradicted", each at a family-wise 5%; the series' own extensions keep their 5% verdicts and the
tally counts the paper's claims only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from helpers.evaluation import metrics, stats
from helpers.evaluation.contrast import contrast_rows, pooled_normalizer
from helpers.evaluation.shared_bootstrap import (
    contrast_bootstrap_over_pairs, over_seeds, pairs_values, question_weights, seed_resampled_mean,
    weighted_auc,
)

DIRECTIONS = ("higher", "lower")
CONTRAST_ONLY = ("auc_cb", "brier_cb", "delta_cb")  # class-balanced: the mean over improvements and regressions
VERDICTS = ("reproduced", "contradicted", "inconclusive")
PARTS = ("paper", "extension")
ALPHA = 0.05  # one-sided level of every test; family-wise level of the Holm correction
# What each deciding metric is shown beside: the paper's plain metric next to the class-balanced one, binned ECE
# next to SmoothECE (the paper's ECE estimator, A.2).
BESIDE = {"auc_cb": "auc", "brier_cb": "brier", "delta_cb": "delta", "smooth_ece": "ece"}


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
    part: str = "paper"  # "paper": a claim of the paper (counted, Holm-corrected); "extension": the series' own
    effect: str = ""  # the paper's own effect size for the claim, where it gives one

    @property
    def parts(self) -> tuple[str, str]:
        """(where, the `stats` metric key): "contrast set AUC" -> ("contrast set", "auc"). `where` is "full set",
        "contrast set" or "contrast minus full set" (a method's contrast-set metric minus its full-set AUC, a = b)."""
        where, _, key = self.metric.rpartition(" ")
        return where, key.lower()

    def __post_init__(self):
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {self.direction!r}")
        if self.part not in PARTS:
            raise ValueError(f"part must be one of {PARTS}, got {self.part!r}")
        where, key = self.parts
        allowed = stats.METRICS if where == "full set" else CONTRAST_ONLY + tuple(stats.METRICS)
        if where not in ("full set", "contrast set", "contrast minus full set") or key not in allowed:
            raise ValueError(f"metric must be 'full set <m>' with m in {stats.METRICS} or 'contrast set <m>' or "
                             f"'contrast minus full set <m>', m also one of {CONTRAST_ONLY}; got {self.metric!r}")


@dataclass(frozen=True)
class Check:
    """A property that holds by construction: shown as a test of the machinery, not as a finding."""

    check: str
    holds: bool
    detail: str


# The metric knowledge-tracking claims are decided on: the class-balanced contrast AUC (the mean of the AUC on
# improvements and on regressions), where a rule "the later checkpoint is right" scores exactly 0.5 (notebook 04).
CB = "contrast set auc_cb"


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


def decision(diffs, direction: str) -> dict:
    """The verdict of resampled differences a − b for `direction` with its 5th/95th percentiles, and the
    bootstrap p-values: the share of replicates at or beyond 0 against the claimed direction (``p for``, small
    when the claim holds) and against the opposite one (``p against``)."""
    result, low, high = verdict(diffs, direction)
    d = np.asarray(diffs, dtype=float)
    d = d[np.isfinite(d)]
    wrong, right = float(np.mean(d <= 0)), float(np.mean(d >= 0))
    p_for, p_against = (wrong, right) if direction == "higher" else (right, wrong)
    return {"5%": low, "95%": high, "verdict": result, "p for": p_for, "p against": p_against}


def holm(p) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm 1979): sorted ascending, the k-th smallest (from 0) is multiplied
    by m − k, and the running maximum keeps the order."""
    p = np.asarray(p, dtype=float)
    if p.ndim != 1 or np.isnan(p).any():
        raise ValueError("holm needs a 1-d array of p-values without NaN")
    order = np.argsort(p, kind="stable")
    adjusted = np.maximum.accumulate(np.minimum(1.0, (p.size - np.arange(p.size)) * p[order]))
    out = np.empty_like(p)
    out[order] = adjusted
    return out


def decide(claim: Claim, frames: dict, checkpoints, pairs, min_size: int, n: int | None = None, seed: int = 0,
           beside: bool = True) -> dict:
    """One row of a findings table: the claim, both values, the difference, its 5th-95th percentile
    range over resamples, the p-values, the number of seeds and the verdict. `frames` maps names to results
    frames on the same questions; a trained method's frame has a ``seed`` column (see
    `shared_bootstrap.over_seeds`). With `beside`, the row also holds the same test on the metric shown
    beside the deciding one (`BESIDE`: plain AUC beside the class-balanced one, binned ECE beside SmoothECE)
    and, for a contrast claim under the independence normalization, under the fitted one (B.1)."""
    missing = [x for x in (claim.a, claim.b) if x not in frames]
    if missing:
        raise ValueError(f"claim {claim.claim!r} compares {missing}, which are not in frames ({list(frames)})")
    where, key = claim.parts
    row = {"claim": claim.claim, "part": claim.part,
           "metric": claim.metric + (f" ({claim.normalizer} normalization)" if claim.normalizer else ""),
           "a": claim.a, "b": claim.b, "claimed": claim.direction, "source": claim.source,
           "paper's effect": claim.effect}

    def run(metric, normalizer):
        if where == "full set":
            def one(a, b):
                return stats.full_set_bootstrap(metric, a, b, checkpoints, n=n, seed=seed, return_diffs=True)
        elif where == "contrast set":
            def one(a, b):
                return contrast_bootstrap_over_pairs(metric, a, b, pairs, min_size, n=n, seed=seed,
                                                     normalizer=normalizer)
        else:
            def one(a, b):
                return contrast_minus_full(metric, a, checkpoints, pairs, min_size, n=n, seed=seed,
                                           normalizer=normalizer)
        return over_seeds(one, frames[claim.a], frames[claim.b], seed=seed)

    try:  # a trained method brings one frame per seed: values average over seeds, the interval covers them
        main = run(key, claim.normalizer)
    except ValueError as err:  # e.g. no pair reaches min_size in this world
        return {**row, "value a": np.nan, "value b": np.nan, "difference": np.nan, "5%": np.nan, "95%": np.nan,
                "seeds": np.nan, "verdict": f"not testable here ({err})"}
    row.update({"value a": main["value_a"], "value b": main["value_b"], "difference": main["difference"],
                **decision(main["diffs"], claim.direction), "seeds": main["n_seeds"]})
    if beside and key in BESIDE:
        other = run(BESIDE[key], claim.normalizer)
        row.update({"beside": BESIDE[key], "beside: difference": other["difference"],
                    "beside: verdict": decision(other["diffs"], claim.direction)["verdict"]})
    if beside and where != "full set" and claim.normalizer is None:
        fitted = run(key, "fitted")
        row.update({"fitted normalization: difference": fitted["difference"],
                    "fitted normalization: verdict": decision(fitted["diffs"], claim.direction)["verdict"]})
    return row


def contrast_minus_full(metric: str, df: pd.DataFrame, checkpoints, pairs, min_size: int, n: int | None = None,
                        seed: int = 0, normalizer=None) -> dict:
    """Table 1's headline for one method: its contrast-set `metric` (averaged over the pairs with at least
    `min_size` contrast questions) minus its full-set AUC (pooled over `checkpoints`), with one question
    resample shared by both sides. Returns ``value_a`` (contrast), ``value_b`` (full set), ``difference`` and
    ``diffs`` (one per replicate), the form `shared_bootstrap.over_seeds` takes."""
    if metric not in ("auc", "auc_cb"):
        raise ValueError(f"contrast_minus_full compares AUCs; got {metric!r}")
    full = df[df["checkpoint"].isin(list(checkpoints))]
    norm = pooled_normalizer(normalizer, df, pairs, min_size)
    used = [(j, rows) for i, j in pairs
            if (rows := contrast_rows(df, i, j, norm))["question_id"].nunique() >= max(min_size, 1)]
    if full.empty or not used:
        raise ValueError(f"no pair has at least {min_size} contrast questions (or no answers at {list(checkpoints)})")
    ids = np.unique(full["question_id"].to_numpy())
    w = _with_data_row(ids, n, seed)
    cols = np.searchsorted(ids, full["question_id"].to_numpy())
    full_auc = weighted_auc(full["confidence"].to_numpy(float), full["correct"].to_numpy(float),
                            w.to_numpy()[:, cols])
    contrast_value = np.mean(pairs_values(metric, used, w), axis=0)
    diffs = contrast_value - full_auc
    return {"metric": metric, "value_a": float(contrast_value[0]), "value_b": float(full_auc[0]),
            "difference": float(diffs[0]), "diffs": diffs[1:]}


def findings_table(rows: list[dict]) -> pd.DataFrame:
    """The rows of `decide` (and of the other tests here) as one table in two parts, ``paper`` and
    ``extension``. The paper's testable claims are one family: their ``verdict`` is Holm-corrected (a
    family-wise 5% for "reproduced" and, apart, for "contradicted"), and ``verdict at 5%`` keeps each test's own
    verdict. `attrs`: ``counts`` (the paper's claims by verdict, "not testable here" included) and ``family``
    (how many claims the correction covers)."""
    table = pd.DataFrame(rows).set_index("claim")
    if "part" not in table:
        table["part"] = "paper"
    table["part"] = table["part"].fillna("paper")
    bad = sorted(set(table["part"]) - set(PARTS))
    if bad:
        raise ValueError(f"unknown parts {bad}; a row's part is one of {PARTS}")
    table["verdict at 5%"] = table["verdict"]
    has_p = table["p for"].notna() if "p for" in table else pd.Series(False, index=table.index)
    family = table["verdict"].isin(VERDICTS) & has_p & (table["part"] == "paper")
    if family.any():
        adjusted_for, adjusted_against = (holm(table.loc[family, k].to_numpy(float)) for k in ("p for", "p against"))
        table.loc[family, "Holm p for"], table.loc[family, "Holm p against"] = adjusted_for, adjusted_against
        table.loc[family, "verdict"] = np.where(adjusted_for < ALPHA, "reproduced",
                                                np.where(adjusted_against < ALPHA, "contradicted", "inconclusive"))
    paper = table.loc[table["part"] == "paper", "verdict"]
    counts = {v: int((paper == v).sum()) for v in VERDICTS}
    counts["not testable here"] = int(paper.str.startswith("not testable").sum())
    table.attrs["counts"], table.attrs["family"] = counts, int(family.sum())
    return table


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
    # (seeds, pairs, 1 + replicates) contrast AUCs per method, every pair at once
    per_seed = {k: np.array([pairs_values("auc", [(j, rows[k][s]) for _, j, rows in used], w)
                             for s in range(len(used[0][2][k]))]) for k in ("oracle", "gcm")}
    heads, shares, table = [], [], []
    for p, (ckpt_i, ckpt_j, rows) in enumerate(used):
        auc = {k: _mean_over_seeds(v[:, p], seed) for k, v in per_seed.items()}
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
    return {"per_pair": pd.DataFrame(table).set_index("pair"), "slope": float(slopes[0]), "diffs": slopes[1:],
            "mean_headroom": float(y[:, 0].mean()), "mean_headroom_diffs": y[:, 1:].mean(axis=0),
            **decision(slopes[1:], "lower")}


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
    return {"difference": float(diffs[0]), **decision(diffs[1:], direction), "seeds": max(map(len, parts.values()))}


def gap_claim(inside: tuple, outside: tuple, pairs, min_sizes: tuple[int, int], n: int | None = None,
              seed: int = 0, metric: str = "auc_cb", share: float = 0.5) -> dict:
    """The paper's domain-transfer claim (§3.2, §B.5): out of domain, method a's contrast-set advantage over
    method b largely disappears, the two "similarly poor". `inside` and `outside` are (frame a, frame b) on two
    question sets (e.g. sums and subtraction), with contrast pairs of at least `min_sizes` (inside, outside)
    questions; each set has its own question resample (they share no question) and both redraw the seeds alike.

    An equivalence test (two one-sided tests), so that a reversal is not a reproduction: "similar" holds when the
    outside advantage lies within ± `share` × the inside advantage, both bounds resampled. Reproduced when both
    one-sided 95% intervals lie inside the bounds; contradicted when one lies wholly beyond a bound (the outside
    advantage is larger than the margin, either way); inconclusive otherwise. Returns the advantages, the margin,
    the outside advantage's 5th/95th percentiles, the p-values, the seeds and the verdict; raises ValueError where
    a set has no large enough pair."""
    runs = []
    for (a, b), size, s in ((inside, min_sizes[0], seed), (outside, min_sizes[1], seed + 1)):
        def one(x, y, size=size, s=s):
            return contrast_bootstrap_over_pairs(metric, x, y, pairs, size, n=n, seed=s)
        runs.append(over_seeds(one, a, b, seed=seed))
    inner, outer = (np.asarray(r["diffs"], dtype=float) for r in runs)
    below, above = outer + share * inner, share * inner - outer  # > 0: inside the lower / the upper bound
    ok = np.isfinite(below) & np.isfinite(above)
    below, above, outer = below[ok], above[ok], outer[ok]
    low_b, low_a = np.percentile(below, 5), np.percentile(above, 5)
    high_b, high_a = np.percentile(below, 95), np.percentile(above, 95)
    result = ("reproduced" if min(low_b, low_a) > 0 else "contradicted" if min(high_b, high_a) < 0
              else "inconclusive")
    return {"inside": runs[0]["difference"], "outside": runs[1]["difference"], "margin": share * runs[0]["difference"],
            "difference": runs[1]["difference"], "5%": float(np.percentile(outer, 5)),
            "95%": float(np.percentile(outer, 95)), "verdict": result,
            "p for": float(max(np.mean(below <= 0), np.mean(above <= 0))),
            "p against": float(min(np.mean(below >= 0), np.mean(above >= 0))),
            "seeds": max(runs[0]["n_seeds"], runs[1]["n_seeds"])}


def _with_data_row(ids, n: int | None, seed: int) -> pd.DataFrame:
    """(1 + replicates, questions) weights, one column per question id: row 0 all ones (the data itself),
    then `shared_bootstrap.question_weights`."""
    return pd.concat([pd.DataFrame(np.ones((1, len(ids))), columns=ids), question_weights(ids, n, seed)],
                     ignore_index=True)


def _mean_over_seeds(values: np.ndarray, seed: int) -> np.ndarray:
    """(seeds, 1 + replicates) -> (1 + replicates): column 0 (the data) is the mean over seeds; every
    replicate averages seeds drawn with replacement."""
    return np.concatenate([[values[:, 0].mean()], seed_resampled_mean(values[:, 1:], seed)])


def variance_trend(variance: pd.DataFrame, order, n: int | None = None, seed: int = 0) -> pd.DataFrame:
    """The paper's B.7 test: per layer, does a question's cross-seed feature variance grow with the checkpoint's
    position in `order`? `variance` has columns checkpoint, question_id, layer, variance and spread
    (`confidence.feature_variance`).

    Two things make the raw per-question correlation misleading: the residual stream's scale differs between
    checkpoints (every question's variance can move with it), and the questions are not the replicates of a
    trend over checkpoints. So the variance is divided by the layer's spread at that checkpoint (scale-free), and
    every replicate redraws the **checkpoints** with replacement (keeping their positions) as well as the
    questions (Poisson weights). The seeds cannot be redrawn: the variance is measured across them. One row per
    layer: the mean per-question Spearman correlation, raw and scale-free, the scale-free one's range when one
    checkpoint is left out, its 5th/95th percentiles, p-values and verdict ("higher" than 0)."""
    need = {"checkpoint", "question_id", "layer", "variance", "spread"}
    if not isinstance(variance, pd.DataFrame) or variance.empty or not need <= set(variance.columns):
        raise ValueError(f"variance must be a non-empty frame with columns {sorted(need)}")
    order = [c for c in order if c in set(variance["checkpoint"])]
    if len(order) < 3:
        raise ValueError(f"a trend over checkpoints needs at least 3 of them, got {order}")
    layers = sorted(variance["layer"].unique())
    cubes = {}
    for name, values in (("raw", variance["variance"]), ("scaled", variance["variance"] / variance["spread"])):
        wide = variance.assign(value=values).pivot_table(index="question_id", columns=["layer", "checkpoint"],
                                                         values="value")
        cubes[name] = np.stack([wide[layer][order].to_numpy(float) for layer in layers])  # (layers, q, checkpoints)
    k, questions = len(order), cubes["raw"].shape[1]
    n = stats.resample_count("auc", n)
    rng = np.random.default_rng([seed, 7])
    picks, weights = rng.integers(0, k, size=(n, k)), rng.poisson(1.0, size=(n, questions)).astype(float)
    every, scaled = np.ones(questions), cubes["scaled"]
    replicates = np.array([_mean_rank_correlation(scaled, picks[r], weights[r]) for r in range(n)])  # (n, layers)
    left_out = np.array([_mean_rank_correlation(scaled, np.delete(np.arange(k), c), every) for c in range(k)])
    data, plain = (_mean_rank_correlation(cubes[x], np.arange(k), every) for x in ("scaled", "raw"))
    rows = []
    for i, layer in enumerate(layers):
        rows.append({"layer": layer, "questions": questions, "checkpoints": k, "raw mean": plain[i],
                     "mean": data[i], "one checkpoint left out: min": left_out[:, i].min(),
                     "one checkpoint left out: max": left_out[:, i].max(), **decision(replicates[:, i], "higher")})
    return pd.DataFrame(rows).set_index("layer")


def _mean_rank_correlation(values: np.ndarray, picks: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(layers, questions, checkpoints) values at the checkpoints `picks` (positions, repeats allowed) -> per layer
    the weighted mean over questions of the Spearman correlation between position and value (ties averaged;
    a question whose values do not vary is left out)."""
    x = rankdata(picks)
    y = rankdata(values[:, :, picks], axis=-1)
    xc, yc = x - x.mean(), y - y.mean(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (yc @ xc) / np.sqrt((yc ** 2).sum(axis=-1) * (xc ** 2).sum())  # (layers, questions)
    ok = np.isfinite(rho)
    w = weights[None, :] * ok
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.where(ok, rho, 0.0) * w).sum(axis=1) / w.sum(axis=1)


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
        rows.append({"claim": claim, "claimed": direction, "difference": float(values[0]),
                     **decision(values[1:], direction)})
    return pd.DataFrame(rows).set_index("claim")
