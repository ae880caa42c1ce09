"""The sources' claims, decided by the paper's statistics (notebooks 01, 03, 05 and 06).

A `Claim` is a metric, the two things it compares and the direction the source states ("the
oracle adapter's contrast AUC is higher than self-consistency's"). It is decided on the paper's own
metric and on its control (`CONTROL`: the class-balanced contrast metric beside the plain one the paper
reports, binned ECE beside SmoothECE), each by the paired bootstrap of the difference a − b (paper A.8.2):

- **reproduced**: the one-sided 95% interval excludes 0 in the claimed direction
  (for "higher", the 5th percentile of the resampled differences is above 0);
- **contradicted**: the one-sided 95% interval excludes 0 the other way;
- **inconclusive**: neither; this world cannot tell.

The combined verdict (`combined`) is the metrics' verdict where they agree and **metric-dependent** where they
do not. Contrast metrics averaged over pairs use `shared_bootstrap` (one question resample for every pair and
both methods); full-set metrics use `stats.full_set_bootstrap` (stratified by correctness). Every row also says
which checkpoint its verdict hinges on: the verdict recomputed with each checkpoint left out (with the pairs it
is in), and the jackknife standard error of the difference over those leave-one-out values.

`findings_table` corrects the paper's counted claims for multiplicity once: one Holm family (Holm 1979) over
both metrics' two-sided p-values, at a family-wise 5%. A bootstrap share of 0 only says p < about 2/(R + 1)
(R resamples); there the test uses the normal approximation of the replicates, never capped, and the table
shows "< 1/R".
Checks that hold by construction (a copy's contrast AUC is exactly 0.5) are `Check`s of the machinery and
are never counted as findings.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm

from helpers.evaluation import stats
from helpers.evaluation.contrast import contrast_rows, pooled_normalizer
from helpers.evaluation.shared_bootstrap import (
    contrast_bootstrap_over_pairs, over_seeds, pairs_values, question_weights, seed_resampled_mean,
    weighted_auc,
)

DIRECTIONS = ("higher", "lower")
CONTRAST_ONLY = ("auc_cb", "brier_cb", "delta_cb")  # class-balanced: the mean over improvements and regressions
VERDICTS = ("reproduced", "contradicted", "inconclusive")
METRIC_DEPENDENT = "metric-dependent"
# paper: a claim of the paper (counted once per `group`, Holm-corrected); extension: the series' own; sanity: a
# "beats chance" check (shown, never counted)
PARTS = ("paper", "extension", "sanity")
ALPHA = 0.05  # one-sided level of every test; family-wise level of the Holm correction
# The control decided beside the paper's metric, by where the claim is measured: the class-balanced contrast
# metric (the mean over improvements and regressions, where "the later checkpoint is right" scores 0.5; notebook 04)
# beside the plain one of the paper's Table 1, binned ECE beside SmoothECE (the paper's ECE estimator, A.2).
CONTROL = {"contrast set": {"auc": "auc_cb", "brier": "brier_cb", "delta": "delta_cb"},
           "contrast minus full set": {"auc": "auc_cb"},
           "full set": {"smooth_ece": "ece"}}


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
    part: str = "paper"  # one of PARTS
    effect: str = ""  # the paper's own effect size for the claim, where it gives one
    group: str = ""  # correlated rows of one paper claim share a group; only the row whose claim is the group counts

    @property
    def parts(self) -> tuple[str, str]:
        """(where, the `stats` metric key): "contrast set AUC" -> ("contrast set", "auc"). `where` is "full set",
        "contrast set" or "contrast minus full set" (a method's contrast-set AUC minus its full-set AUC, a = b,
        like for like: `contrast_minus_full`)."""
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


# The paper's metric for knowledge-tracking claims: the plain contrast AUC of its Table 1 (the class-balanced one is
# decided beside it as the control).
CONTRAST_AUC = "contrast set auc"


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
    when the claim holds) and against the opposite one (``p against``); ``p`` and ``p shown`` are `two_sided`'s."""
    result, low, high = verdict(diffs, direction)
    d = np.asarray(diffs, dtype=float)
    d = d[np.isfinite(d)]
    wrong, right = float(np.mean(d <= 0)), float(np.mean(d >= 0))
    p_for, p_against = (wrong, right) if direction == "higher" else (right, wrong)
    p, shown = two_sided(d)
    return {"5%": low, "95%": high, "verdict": result, "p for": p_for, "p against": p_against, "p": p,
            "p shown": shown}


def two_sided(diffs) -> tuple[float, str]:
    """(p, as shown) of "a − b is 0" from resampled differences: twice the smaller share of replicates on one side
    of 0. Where no replicate crosses 0 the share only says that p is below about 2/(R + 1) (R replicates), too
    coarse for Holm's smallest thresholds: p is then the normal approximation 2 Φ(−|mean| / sd) of the
    replicates (stated, never capped), and it is shown as "< 1/R"."""
    d = np.asarray(diffs, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        raise ValueError("no finite resampled difference; the metric is undefined on every resample")
    share = min(1.0, 2 * min(float(np.mean(d <= 0)), float(np.mean(d >= 0))))
    if share > 0:
        return share, f"{share:.3f}"
    sd = d.std(ddof=1) if d.size > 1 else 0.0
    normal = float(2 * norm.sf(abs(d.mean()) / sd)) if sd > 0 else 0.0
    return normal, f"< 1/{d.size}"


def combined(paper: str, control: str | None = None) -> str:
    """The verdict of a claim decided on the paper's metric and on its control: theirs where they agree,
    "metric-dependent" where they differ (one of them inconclusive included), the paper metric's alone where
    there is no control."""
    if control is None or (isinstance(control, float) and np.isnan(control)) or control == "":
        return paper
    return paper if paper == control else METRIC_DEPENDENT


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


def leave_one_checkpoint_out(main: dict, control: dict | None, direction: str, at_5: str) -> dict:
    """Which checkpoint a verdict hinges on. `main` and `control` are the paper metric's and the control's runs,
    each with ``loo`` ({checkpoint: (1 + replicates,) difference without it}, entry 0 the data). Returns
    ``hinges on`` (each checkpoint whose omission changes the combined verdict at 5% `at_5`, with the verdict
    without it; "" when none does), ``jackknife SE`` of the paper metric's difference and ``left out: min``/``max``
    (its leave-one-out values)."""
    loo = main.get("loo") or {}
    if not loo:
        return {}
    changed, values = [], []
    for checkpoint, arr in loo.items():
        values.append(arr[0])
        try:
            without = verdict(arr[1:], direction)[0]
            if control and "loo" in control:
                without = combined(without, verdict(control["loo"][checkpoint][1:], direction)[0])
        except ValueError:
            without = "not testable"
        if without != at_5:
            changed.append(f"{checkpoint} ({without} without it)")
    values = np.asarray(values, dtype=float)
    k = np.isfinite(values).sum()
    se = float(np.sqrt((k - 1) / k * np.nansum((values - np.nanmean(values)) ** 2))) if k > 1 else np.nan
    return {"hinges on": "; ".join(changed), "jackknife SE": se, "left out: min": float(np.nanmin(values)),
            "left out: max": float(np.nanmax(values))}


def _tested(run: dict, direction: str, prefix: str = "") -> dict:
    d = decision(run["diffs"], direction)
    label = "control verdict at 5%" if prefix else "paper verdict at 5%"
    return {f"{prefix}value a": run["value_a"], f"{prefix}value b": run["value_b"],
            f"{prefix}difference": run["difference"], f"{prefix}5%": d["5%"], f"{prefix}95%": d["95%"],
            f"{prefix}p": d["p"], f"{prefix}p shown": d["p shown"], label: d["verdict"]}


def decide(claim: Claim, frames: dict, checkpoints, pairs, min_size: int, n: int | None = None, seed: int = 0,
           leave_out: bool = True) -> dict:
    """One row of a findings table, decided on the paper's metric and on its control (`CONTROL`).

    The paper metric's columns are unprefixed (both values, the difference, its 5th-95th percentile range over
    resamples, the two-sided ``p`` and ``p shown``, ``paper verdict at 5%``), the control's are prefixed
    "control: " (``control verdict at 5%``); ``verdict at 5%`` is `combined`. `frames` maps names to results
    frames on the same questions; a trained method's frame has a ``seed`` column (see
    `shared_bootstrap.over_seeds`). With `leave_out` (and at least 3 checkpoints), the row also says which
    checkpoint the verdict hinges on (`leave_one_checkpoint_out`)."""
    missing = [x for x in (claim.a, claim.b) if x not in frames]
    if missing:
        raise ValueError(f"claim {claim.claim!r} compares {missing}, which are not in frames ({list(frames)})")
    where, key = claim.parts
    control = CONTROL.get(where, {}).get(key)
    checkpoints = list(checkpoints)
    leave_out = leave_out and len(checkpoints) >= 3
    row = {"claim": claim.claim, "part": claim.part, "group": claim.group or claim.claim,
           "metric": claim.metric + (f" ({claim.normalizer} normalization)" if claim.normalizer else ""),
           "control": control or "", "a": claim.a, "b": claim.b, "claimed": claim.direction,
           "source": claim.source, "paper's effect": claim.effect}

    def run(metric):
        if where == "full set":
            def one(a, b):
                out = stats.full_set_bootstrap(metric, a, b, checkpoints, n=n, seed=seed, return_diffs=True)
                if leave_out:
                    out["loo"] = {}
                    for c in checkpoints:
                        r = stats.full_set_bootstrap(metric, a, b, [x for x in checkpoints if x != c], n=n,
                                                     seed=seed, return_diffs=True)
                        out["loo"][c] = np.concatenate([[r["difference"]], r["diffs"]])
                return out
        elif where == "contrast set":
            def one(a, b):
                return contrast_bootstrap_over_pairs(metric, a, b, pairs, min_size, n=n, seed=seed,
                                                     normalizer=claim.normalizer)
        else:
            def one(a, b):
                return contrast_minus_full(metric, a, checkpoints, pairs, min_size, n=n, seed=seed,
                                           normalizer=claim.normalizer)
        return over_seeds(one, frames[claim.a], frames[claim.b], seed=seed)

    try:  # a trained method brings one frame per seed: values average over seeds, the interval covers them
        main = run(key)
    except ValueError as err:  # e.g. no pair reaches min_size in this world
        return {**row, "value a": np.nan, "value b": np.nan, "difference": np.nan, "5%": np.nan, "95%": np.nan,
                "seeds": np.nan, "verdict at 5%": f"not testable here ({err})"}
    row.update({**_tested(main, claim.direction), "seeds": main["n_seeds"]})
    other = None
    if control:
        other = run(control)
        row.update(_tested(other, claim.direction, "control: "))
    row["verdict at 5%"] = combined(row["paper verdict at 5%"], row.get("control verdict at 5%"))
    if leave_out:
        row.update(leave_one_checkpoint_out(main, other, claim.direction, row["verdict at 5%"]))
    return row


def contrast_minus_full(metric: str, df: pd.DataFrame, checkpoints, pairs, min_size: int, n: int | None = None,
                        seed: int = 0, normalizer=None) -> dict:
    """Table 1's headline for one method, like for like, with one question resample shared by both sides:
    - ``auc``: the plain contrast AUC (averaged over the pairs with at least `min_size` contrast questions) minus
      the full-set AUC pooled over `checkpoints`; both keep the credit for telling checkpoints apart;
    - ``auc_cb``: the class-balanced contrast AUC minus the mean within-checkpoint AUC; neither has that credit.
    Returns ``value_a`` (contrast), ``value_b`` (full set), ``difference``, ``diffs`` (one per replicate) and
    ``loo`` (per checkpoint, the difference without it: its pairs and its answers), the form
    `shared_bootstrap.over_seeds` takes."""
    if metric not in ("auc", "auc_cb"):
        raise ValueError(f"contrast_minus_full compares AUCs; got {metric!r}")
    checkpoints = list(checkpoints)
    full = df[df["checkpoint"].isin(checkpoints)]
    norm_ = pooled_normalizer(normalizer, df, pairs, min_size)
    used = [(i, j, rows) for i, j in pairs
            if (rows := contrast_rows(df, i, j, norm_))["question_id"].nunique() >= max(min_size, 1)]
    if full.empty or not used:
        raise ValueError(f"no pair has at least {min_size} contrast questions (or no answers at {checkpoints})")
    ids = np.unique(full["question_id"].to_numpy())
    w = with_data_row(ids, n, seed)
    weights = w.to_numpy()

    def auc_of(part):
        cols = np.searchsorted(ids, part["question_id"].to_numpy())
        return weighted_auc(part["confidence"].to_numpy(float), part["correct"].to_numpy(float), weights[:, cols])

    within = {c: auc_of(full[full["checkpoint"] == c]) for c in checkpoints} if metric == "auc_cb" else {}

    def full_value(keep):
        if metric == "auc_cb":
            return np.mean([within[c] for c in keep], axis=0)
        return auc_of(full[full["checkpoint"].isin(keep)])

    per_pair = pairs_values(metric, [(j, rows) for _, j, rows in used], w)
    diffs = per_pair.mean(axis=0) - full_value(checkpoints)
    loo = {}
    for c in checkpoints:
        keep = np.array([c not in (i, j) for i, j, _ in used])
        rest = [x for x in checkpoints if x != c]
        loo[c] = (per_pair[keep].mean(axis=0) - full_value(rest) if keep.any() and rest
                  else np.full(diffs.shape, np.nan))
    return {"metric": metric, "value_a": float(per_pair.mean(axis=0)[0]), "value_b": float(full_value(checkpoints)[0]),
            "difference": float(diffs[0]), "diffs": diffs[1:], "loo": loo}


def findings_table(rows: list[dict]) -> pd.DataFrame:
    """The rows of `decide` (and of the other tests here) as one table in the parts of `PARTS`.

    The paper's counted claims (part "paper", one row per `group`: the row named as its group) form one family:
    Holm's correction over both metrics' two-sided p-values at a family-wise 5%. ``paper verdict`` and
    ``control verdict`` are each metric's verdict at 5% where its adjusted p is below 5% and "inconclusive"
    otherwise, ``verdict`` is their `combined` verdict; ``verdict at 5%`` keeps the uncorrected one. Rows outside
    the family keep their verdict at 5%. `attrs`: ``counts`` (the counted claims by verdict, "not testable here"
    included), ``family`` (how many p-values the correction covers) and ``claims`` (how many claims)."""
    table = pd.DataFrame(rows).set_index("claim")
    if "verdict" in table:  # a row that is not `decide`'s gives its one verdict as "verdict"
        table["verdict at 5%"] = table.get("verdict at 5%", table["verdict"]).fillna(table["verdict"])
        table = table.drop(columns="verdict")
    if "paper verdict at 5%" in table:
        table["paper verdict at 5%"] = table["paper verdict at 5%"].fillna(table["verdict at 5%"])
    for column, default in (("part", "paper"), ("group", ""), ("control", ""), ("control verdict at 5%", "")):
        if column not in table:
            table[column] = default
        table[column] = table[column].fillna(default)
    bad = sorted(set(table["part"]) - set(PARTS))
    if bad:
        raise ValueError(f"unknown parts {bad}; a row's part is one of {PARTS}")
    table["group"] = table["group"].where(table["group"] != "", table.index.to_series())
    table["counted"] = (table["part"] == "paper") & (table["group"] == table.index.to_series())
    testable = table["verdict at 5%"].isin((*VERDICTS, METRIC_DEPENDENT))
    table["paper verdict"] = table.get("paper verdict at 5%", table["verdict at 5%"])
    table["control verdict"] = table["control verdict at 5%"]
    tests = [(claim, side) for claim in table.index[table["counted"] & testable]
             for side, p in (("paper", "p"), ("control", "control: p"))
             if p in table and np.isfinite(float(table.loc[claim, p]))]
    if tests:
        adjusted = holm([table.loc[c, "p" if side == "paper" else "control: p"] for c, side in tests])
        for (claim, side), p in zip(tests, adjusted):
            table.loc[claim, f"{side}: Holm p" if side == "control" else "Holm p"] = p
            if p >= ALPHA:
                table.loc[claim, f"{side} verdict"] = "inconclusive"
    table["verdict"] = [combined(p, c) if counted and ok else v for p, c, counted, ok, v in
                        zip(table["paper verdict"], table["control verdict"], table["counted"], testable,
                            table["verdict at 5%"])]
    counted = table.loc[table["counted"], "verdict"].astype(str)
    counts = {v: int((counted == v).sum()) for v in (*VERDICTS, METRIC_DEPENDENT)}
    counts["not testable here"] = int(counted.str.startswith("not testable").sum())
    table.attrs.update(counts=counts, family=len(tests), claims=int(table["counted"].sum()))
    return table


def replication(verdicts) -> str:
    """A claim's verdicts in several worlds -> "replicated: <verdict>" when they all agree, else "world-dependent"
    with the split ("world-dependent: 2 reproduced, 1 inconclusive"). Parentheses ("not testable here (why)") are
    dropped."""
    bare = [str(v).partition(" (")[0] for v in verdicts]
    if not bare:
        raise ValueError("no verdicts to compare; pass one per world")
    if len(set(bare)) == 1:
        return f"replicated: {bare[0]}"
    split = pd.Series(bare).value_counts()
    return "world-dependent: " + ", ".join(f"{count} {v}" for v, count in split.items())


def with_data_row(ids, n: int | None, seed: int) -> pd.DataFrame:
    """(1 + replicates, questions) weights, one column per question id: row 0 all ones (the data itself),
    then `shared_bootstrap.question_weights`."""
    return pd.concat([pd.DataFrame(np.ones((1, len(ids))), columns=ids), question_weights(ids, n, seed)],
                     ignore_index=True)


def mean_over_seeds(values: np.ndarray, seed: int) -> np.ndarray:
    """(seeds, 1 + replicates) -> (1 + replicates): column 0 (the data) is the mean over seeds; every
    replicate averages seeds drawn with replacement."""
    return np.concatenate([[values[:, 0].mean()], seed_resampled_mean(values[:, 1:], seed)])


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
