"""The findings table: the paper's claims and the series' own extensions, each decided once and cached
(notebooks 05 and 06).

Every row is one test of `helpers.evaluation.findings`, on the frames of `comparison.METHODS` or on notebook
06's own adapters, decided on the paper's metric (the plain contrast AUC of its Table 1) and on its control (the
class-balanced one). `table()` gathers them and corrects the paper's counted claims for multiplicity once (Holm);
`checks()` lists what holds by construction, shown and never counted. `helpers.pipeline.worlds.replication_table`
sets the shipped world's verdicts beside those of world seeds 1 and 2 with a replication verdict.

The GCM is tested at every rung of its verifier ladder (`config.gcm()`): its headroom below oracle training is
the paper's claim about backbones weaker than the evaluated model (§3.2, Figure 2).
"""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd

from helpers import config
from helpers.cache.artifacts import load_or_build, register
from helpers.evaluation import claim_forms, contrast, findings
from helpers.evaluation.findings import CONTRAST_AUC, Claim
from helpers.pipeline import adapters, chapter06, feature_variance, verifier
from helpers.pipeline.checkpoints import get_checkpoints
from helpers.pipeline.comparison import METHODS, method_results

SC_BELOW_ORACLE = "self-consistency falls below oracle training on contrast sets"
GCM_BELOW_ORACLE = "the GCM falls below oracle training on contrast sets"
DROP = "contrast-set AUC falls below full-set AUC"  # Table 1's headline; one claim, decided on self-consistency

# Notebook 05's results table (Table 1, Table 2, B.1, B.2, B.4, Table 17): knowledge-tracking claims on the plain
# contrast AUC the paper reports with the class-balanced one as control; ECE claims on SmoothECE, the paper's
# estimator (A.2), with binned ECE as control. Rows of one `group` are one claim: only the row named as the
# group counts, the others are shown beside it.
TABLE_CLAIMS = [
    Claim(SC_BELOW_ORACLE, CONTRAST_AUC, "self-consistency", "oracle adapter", "lower", "§1, Table 1, §B.2",
          effect="-0.065 (0.760 against 0.825, Marin 8B Jeopardy)"),
    Claim("under the fitted normalization too, self-consistency falls below oracle training on contrast sets",
          CONTRAST_AUC, "self-consistency", "oracle adapter", "lower", "§B.1", normalizer="fitted",
          group=SC_BELOW_ORACLE),
    Claim("non-oracle training falls below oracle training on contrast sets", CONTRAST_AUC,
          "non-oracle adapter", "oracle adapter", "lower", "§3.2, §B.2"),
    Claim("fine-tuned verbalized confidence falls below oracle training on contrast sets", CONTRAST_AUC,
          "verbalized (fine-tuned)", "oracle adapter", "lower", "§3.1.1, §3.2"),
    Claim("isotonic recalibration lowers self-consistency's full-set ECE", "full set smooth_ece",
          "SC + isotonic", "self-consistency", "lower", "§B.2", effect="full-set ECE made negligible"),
    Claim("after isotonic recalibration, self-consistency still falls below oracle training on contrast sets",
          CONTRAST_AUC, "SC + isotonic", "oracle adapter", "lower", "§B.2"),
    Claim("self-consistency beats its surrogate ablation on contrast sets", CONTRAST_AUC,
          "self-consistency", "surrogate (SC)", "higher", "§3.2, Table 2, §B.2",
          effect="5 of 6 cases (with the copy ablation)"),
    Claim("self-consistency beats its copy ablation (a copy scores chance)", CONTRAST_AUC,
          "self-consistency", "copy (SC)", "higher", "§3.2, Table 2, §B.2", part="sanity"),
    Claim("non-oracle training beats its surrogate ablation on contrast sets", CONTRAST_AUC,
          "non-oracle adapter", "surrogate (non-oracle adapter)", "higher", "§3.2, Table 2, §B.2",
          effect="mixed: 3 of 6 cases (with the copy ablation)"),
    Claim("non-oracle training beats its copy ablation (a copy scores chance)", CONTRAST_AUC,
          "non-oracle adapter", "copy (non-oracle adapter)", "higher", "§3.2, Table 2, §B.2", part="sanity"),
    Claim(GCM_BELOW_ORACLE, CONTRAST_AUC, "GCM", "oracle adapter", "lower", "§3.2, §B.4, Table 17"),
    *(Claim(f"the GCM on the {rung} verifier falls below oracle training on contrast sets", CONTRAST_AUC,
            f"GCM ({rung} verifier)", "oracle adapter", "lower", "§3.2, Figure 2", group=GCM_BELOW_ORACLE)
      for rung in ("weak", "strong")),
    Claim("the GCM's headroom below oracle training shrinks when its verifier knows more", CONTRAST_AUC,
          "GCM (strong verifier)", "GCM (weak verifier)", "higher", "§3.2, Figure 2",
          effect="headroom largest where the backbone is weaker than the evaluated model"),
    Claim("after post-hoc (isotonic) calibration too, the GCM falls below oracle training on contrast sets",
          CONTRAST_AUC, "GCM + isotonic", "oracle adapter", "lower", "Table 17"),
    Claim("temperature scaling lowers self-consistency's full-set ECE", "full set smooth_ece",
          "SC + temperature", "self-consistency", "lower", "the series (Guo et al. 2017)", part="extension"),
    Claim("Platt scaling lowers self-consistency's full-set ECE", "full set smooth_ece",
          "SC + Platt", "self-consistency", "lower", "the series (Platt 1999)", part="extension"),
    Claim("P(True), read from the evaluated weights without training, falls below oracle training on contrast sets",
          CONTRAST_AUC, "P(True)", "oracle adapter", "lower", "the series (Kadavath et al. 2022)",
          part="extension"),
    Claim("token probability falls below oracle training on contrast sets", CONTRAST_AUC, "token probability",
          "oracle adapter", "lower", "the series (the confidently wrong checkpoints of notebook 00)",
          part="extension"),
]

# Table 1's headline, like for like (`findings.contrast_minus_full`): plain contrast AUC against the pooled
# full-set AUC, class-balanced contrast AUC against the mean within-checkpoint AUC. One claim, decided on
# self-consistency (the paper's largest drop); the other methods are shown beside it.
_DROPS = {"oracle adapter": "-0.065 (0.825 against 0.890, same)", "non-oracle adapter": "",
          "verbalized (fine-tuned)": "", "GCM": ""}
DROP_CLAIMS = [
    Claim(DROP, "contrast minus full set auc", "self-consistency", "self-consistency", "lower", "§1, Table 1, §3.2",
          effect="-0.126 (0.760 against 0.886, Marin 8B Jeopardy)"),
    *(Claim(f"{name}: contrast-set AUC below full-set AUC", "contrast minus full set auc", name, name, "lower",
            "Table 1, §3.2", effect=effect, group=DROP) for name, effect in _DROPS.items()),
    *(Claim(f"{name}: contrast-set AUC below full-set AUC", "contrast minus full set auc", name, name, "lower",
            "the series", part="extension") for name in ("token probability", "P(True)")),
]

# Notebook 06: multi-checkpoint training and its ablations (§1, Table 3, B.3, Table 4).
MULTI_CLAIMS = [
    Claim("in the oracle setting too, training on several checkpoints beats each checkpoint's own adapter",
          CONTRAST_AUC, "multi-checkpoint oracle adapter", "oracle adapter", "higher", "§1, Table 3"),
    Claim("multi-checkpoint training beats training on one checkpoint", CONTRAST_AUC,
          "multi-checkpoint adapter", "non-oracle adapter", "higher", "§3.2, Table 3"),
    Claim("multi-checkpoint training beats as much data from one checkpoint", CONTRAST_AUC,
          "multi-checkpoint adapter", "single-checkpoint data", "higher", "§B.3, Table 4"),
    Claim("multi-checkpoint training beats several answers per question from one checkpoint", CONTRAST_AUC,
          "multi-checkpoint adapter", "multi-answer adapter", "higher", "§B.3, Table 4"),
]
CLAIMS = TABLE_CLAIMS + DROP_CLAIMS + MULTI_CLAIMS
GCM_METHODS = ("GCM", "GCM + isotonic", "GCM (weak verifier)", "GCM (strong verifier)")
# The rows that are not a `Claim` of METHODS, by the notebook section that shows them.
TRANSFER = "forward transfer is stronger than backward"
RANDOM = "random labels for one checkpoint hurt it more than the other"
DOMAIN = "out of domain, oracle training's advantage over non-oracle training disappears: both similarly poor"
B7 = "later checkpoints' adapters vary more across seeds"


def verifier_accuracy(rung=None) -> float:
    """The test accuracy of the GCM's verifier at `rung` (default the shipped one)."""
    run = verifier.verifier()
    return float(run["rung_test_accuracy"][verifier.validate_rung(rung)])


def _rung(name: str):
    """The verifier rung a GCM method reads ("GCM (weak verifier)" -> "weak"); None for every other method."""
    if name not in GCM_METHODS:
        return None
    return name.partition("(")[2].partition(" verifier")[0] or config.gcm().shipped_rung


@register("claim")
def _build_claim(folder, claim: str) -> dict:
    """One `Claim` about METHODS, decided by `findings.decide` on the paper's metric and its control; a row about
    the GCM also gives its verifier's test accuracy."""
    c = Claim(**json.loads(claim))
    ck = get_checkpoints()
    frames = {name: method_results(name) for name in {c.a, c.b}}
    row = findings.decide(c, frames, ck.evaluation, contrast.all_pairs(ck.evaluation), config.contrast().min_size)
    rungs = [_rung(name) for name in (c.a, c.b) if _rung(name)]
    if rungs:
        row["verifier accuracy"] = " against ".join(f"{verifier_accuracy(r):.3f}" for r in rungs)
    return row


def decided(claim: Claim) -> dict:
    """The cached row of one claim."""
    unknown = sorted({claim.a, claim.b} - set(METHODS))
    if unknown:
        raise ValueError(f"claim {claim.claim!r} compares unknown methods {unknown}")
    return load_or_build("claim", claim=json.dumps(dataclasses.asdict(claim), sort_keys=True))


@register("transfer_claim")
def _build_transfer_claim(folder) -> dict:
    """Figure 3: forward transfer (an adapter read through a later checkpoint) against backward, over the cells of
    `chapter06.transfer_grid`, each cell every seed; one question resample for every cell."""
    grid = chapter06.transfer_grid()
    cells = {(a, b): adapters.seeded_results("test", [b], source=a) for a in grid for b in grid if a != b}

    def forward_minus_backward(aucs):
        after = {cell: grid.index(cell[1]) > grid.index(cell[0]) for cell in aucs}
        return (np.mean([v for cell, v in aucs.items() if after[cell]], axis=0)
                - np.mean([v for cell, v in aucs.items() if not after[cell]], axis=0))
    return claim_forms.auc_claim(cells, forward_minus_backward, "higher")


@register("random_claim")
def _build_random_claim(folder) -> dict:
    """Figure 3: random labels for the second of two training checkpoints hurt its AUC more than the first's."""
    first, second = get_checkpoints().training[-2:]
    cells = {}
    for label, kwargs in (("real", {}), ("shuffled", {"random_labels": second})):
        scored = adapters.seeded_results("test", [first, second], source=[first, second], **kwargs)
        cells.update({(label, name): scored[scored["checkpoint"] == name] for name in (first, second)})

    def drop_difference(a):
        return (a[("real", second)] - a[("shuffled", second)]) - (a[("real", first)] - a[("shuffled", first)])
    return claim_forms.auc_claim(cells, drop_difference, "higher")


@register("domain_claim")
def _build_domain_claim(folder) -> dict:
    """§3.2, §B.5 (`claim_forms.gap_claim` on the plain contrast AUC, the class-balanced one as control, margin and
    level from `config.findings()`), or why this world cannot test it."""
    ck = get_checkpoints()
    frames = [tuple(adapters.seeded_results(split, ck.evaluation, source=source)
                    for source in ("oracle", ck.training[-1]))
              for split in ("test", "transfer_test")]
    sizes = (config.contrast().min_size, config.contrast().min_size_transfer)
    form = config.findings()
    try:
        paper, control = (claim_forms.gap_claim(*frames, contrast.all_pairs(ck.evaluation), sizes, form.domain_margin,
                                             form.poor_level, metric=metric) for metric in ("auc", "auc_cb"))
    except ValueError as err:  # no pair of this world is large enough on one of the two sets
        return {"error": str(err)}
    return {**paper, "control": "auc_cb", **{f"control: {k}": v for k, v in control.items()}}


def domain_claim() -> dict:
    """The cached domain-transfer test (notebook 06); raises ValueError where a set has no large enough pair."""
    out = load_or_build("domain_claim")
    if "error" in out:
        raise ValueError(out["error"])
    return out


def confidence_spread(source: str = "oracle") -> pd.DataFrame:
    """Each question's spread across adapter seeds of the confidence itself, per evaluation checkpoint
    (checkpoint, question_id, spread: the standard deviation over seeds): B.7's second read-out."""
    scored = adapters.seeded_results("test", get_checkpoints().evaluation, source=source)
    return (scored.groupby(["checkpoint", "question_id"])["confidence"].std(ddof=1)
            .rename("spread").reset_index())


def b7(source: str = "oracle") -> dict:
    """B.7 as the paper states it, one claim: does a question's cross-seed feature variance grow with the
    checkpoint's position? The mean (and median) over layers of the mean per-question Spearman correlation,
    exact permutation test over checkpoint orders (`claim_forms.permutation_trend`), on the raw variance (no
    normalizer taken from the adapter); the seed spread of the confidence itself is the control read-out."""
    order = get_checkpoints().evaluation
    variance = claim_forms.trend_cube(feature_variance.feature_variance(source), "variance", order, by="layer")
    spread = claim_forms.trend_cube(confidence_spread(source), "spread", order)
    return {"features": claim_forms.permutation_trend(variance), "confidence": claim_forms.permutation_trend(spread)}


def _row(claim: str, metric: str, claimed: str, result: dict, source: str, part: str = "paper",
         effect: str = "", control: dict | None = None, control_metric: str = "") -> dict:
    keep = ("value a", "value b", "difference", "5%", "95%", "p", "p shown", "seeds")
    row = {"claim": claim, "part": part, "metric": metric, "claimed": claimed, "source": source,
           "paper's effect": effect, **{k: result[k] for k in keep if k in result},
           "paper verdict at 5%": result["verdict"], "verdict at 5%": result["verdict"]}
    if control:
        row.update({"control": control_metric, "control verdict at 5%": control["verdict"],
                    "verdict at 5%": findings.combined(result["verdict"], control["verdict"]),
                    **{f"control: {k}": control[k] for k in keep if k in control and k != "seeds"}})
    return row


def special_rows() -> list[dict]:
    """The rows that are not a Claim about METHODS: transfer, random labels, domain transfer, B.7 and the worked
    example of notebook 01."""
    seeds = len(config.adapters().seeds)
    rows = [_row(TRANSFER, "test AUC, forward − backward cells", "higher", load_or_build("transfer_claim"),
                 "§4, Figure 3", effect="+0.199 (0.870 against 0.671, Olmo 3 7B TriviaQA)"),
            _row(RANDOM, "test AUC drop, shuffled − other", "higher", load_or_build("random_claim"), "§4, Figure 3")]
    try:
        out = domain_claim()
        control = {k.removeprefix("control: "): v for k, v in out.items() if k.startswith("control: ")}
        form = config.findings()
        rows.append(_row(DOMAIN, f"contrast AUC advantage out of domain within ± {form.domain_margin}, both below "
                         f"{form.poor_level}", "similar", out, "§3.2, §B.5, Table 18",
                         effect="0.544 against 0.567 out of domain", control=control, control_metric="auc_cb"))
    except ValueError as err:
        rows.append({"claim": DOMAIN, "part": "paper", "source": "§3.2, §B.5", "verdict": f"not testable here ({err})"})
    test = b7("oracle")
    rows.append(_row(B7, "mean over layers of the mean per-question Spearman correlation of feature variance with "
                     "position; exact permutation test", "higher",
                     {**test["features"], "difference": test["features"]["mean"], "seeds": seeds}, "§B.7, Table 19",
                     control={**test["confidence"], "difference": test["confidence"]["mean"]},
                     control_metric="the confidence's seed spread"))
    post = {m: load_or_build("greedy", checkpoint=m, split="test") for m in ("finetuned", "rl")}
    for claim, r in findings.post_training_claims(post["finetuned"], post["rl"]).iterrows():
        rows.append(_row("worked example: " + claim, "test sums", r["claimed"], {**r.to_dict(), "seeds": 1},
                         "the series (notebook 01)", part="extension"))
    return rows


def table() -> pd.DataFrame:
    """Every claim's row, the paper's counted claims Holm-corrected once (`findings.findings_table`)."""
    return findings.findings_table([decided(c) for c in CLAIMS] + special_rows())


def checks(values: pd.DataFrame) -> list[findings.Check]:
    """What holds by construction, from a results table's `values` (methods × metrics): both members of a copy
    pair get the same confidence, and the checkpoint index gives every question of a pair the same normalized
    confidence, so their class-balanced contrast AUC is exactly 0.5 (the copies' plain one too)."""
    out = []
    for name, labels in (("copy (SC)", ("AUC", "AUC class-balanced")),
                         ("copy (non-oracle adapter)", ("AUC", "AUC class-balanced")),
                         ("checkpoint index", ("AUC class-balanced",))):
        for label in labels:
            if name in values.index:
                v = values.loc[name, ("contrast set", label)]
                out.append(findings.Check(f"{name}: contrast {label} is exactly 0.5", bool(v == 0.5), f"{v}"))
    return out


# ---------------------------------------------------------------------------- the table as a reader sees it


READABLE_COLUMNS = ["part", "counted", "value a", "value b", "difference", "5%", "95%", "p shown", "paper verdict",
                    "control: difference", "control: 5%", "control: 95%", "control verdict", "verdict",
                    "hinges on"]
_UNTESTABLE = r"^not testable here \((.*)\)$"


def _bare(verdicts: pd.Series) -> pd.Series:
    """Verdicts without their parenthesis: "not testable here (why)" -> "not testable here"."""
    return verdicts.astype("string").str.partition(" (")[0]


def _interval(rows: pd.DataFrame, prefix: str = "") -> pd.Series:
    low, high = (rows[f"{prefix}{end}"].astype(float).map("{:+.3f}".format) for end in ["5%", "95%"])
    return (low + " to " + high).where(rows[f"{prefix}5%"].notna(), "")


def readable(decided: pd.DataFrame, names: dict | None = None) -> tuple[pd.DataFrame, list[str]]:
    """`decided` (`claims.table()`, or some of its rows) as (table, reasons).

    The table has, per claim (renamed by `names`, {claim: shorter name}, where given): its part, whether it is
    counted, the paper metric's values a and b, its difference with the 5%-95% interval as one column
    ("+0.004 to +0.035"; empty where there is none) and its verdict after Holm, the control's difference,
    interval and verdict, the combined verdict, and the checkpoint the verdict hinges on. Columns a poor world
    lacks come out empty. `reasons`: why claims are "not testable here", each once, in table order.
    """
    rows = decided.reindex(columns=READABLE_COLUMNS)
    table = pd.DataFrame({
        "part": rows["part"], "counted": rows["counted"], "a": rows["value a"], "b": rows["value b"],
        "difference": rows["difference"], "5% to 95%": _interval(rows), "p": rows["p shown"],
        "paper verdict": _bare(rows["paper verdict"]), "control: difference": rows["control: difference"],
        "control: 5% to 95%": _interval(rows, "control: "), "control verdict": _bare(rows["control verdict"]),
        "verdict": _bare(rows["verdict"]), "hinges on": rows["hinges on"].fillna(""),
    }, index=rows.index)
    reasons = rows["verdict"].astype("string").str.extract(_UNTESTABLE)[0].dropna().unique().tolist()
    return table.rename(index=names or {}), reasons
