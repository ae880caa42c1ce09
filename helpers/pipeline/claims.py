"""The findings table: the paper's claims and the series' own extensions, each decided once and cached
(notebooks 05 and 06).

Every row is one test of `helpers.evaluation.findings`, on the frames of `comparison.METHODS` or on notebook
06's own adapters. `table()` gathers them and corrects the paper's claims for multiplicity (Holm);
`checks()` lists what holds by construction, shown and never counted.

Rows about the GCM need a verifier that knows about as much as the evaluated checkpoints: the paper's test
reads the GCM's headroom against how much its backbone knows (§3.2, Figure 2), and a verifier weaker than every
evaluated checkpoint makes "the GCM falls below oracle training" hold for that reason alone. Where the verifier's
test accuracy lies outside the evaluation checkpoints' range, those rows say "not testable here" and why.
"""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd

from helpers import config
from helpers.cache.artifacts import load_or_build, register
from helpers.evaluation import contrast, findings
from helpers.evaluation.findings import CB, Claim
from helpers.pipeline import adapters, chapter06, feature_variance, verifier
from helpers.pipeline.checkpoints import get_checkpoints
from helpers.pipeline.comparison import METHODS, method_results
from helpers.pipeline.decoded import greedy_results

# Notebook 05's results table (Table 1, Table 2, B.1, B.2, B.4, Table 17), knowledge-tracking claims decided on the
# class-balanced contrast AUC (a rule "the later checkpoint is right" scores exactly 0.5 there; notebook 04), the
# plain AUC the paper reports shown beside; ECE claims on SmoothECE, the paper's estimator (A.2), binned ECE beside.
TABLE_CLAIMS = [
    Claim("self-consistency falls below oracle training on contrast sets", CB,
          "self-consistency", "oracle adapter", "lower", "§1, Table 1, §B.2",
          effect="-0.065 (plain AUC, Marin 8B Jeopardy)"),
    Claim("non-oracle training falls below oracle training on contrast sets", CB,
          "non-oracle adapter", "oracle adapter", "lower", "§3.2, §B.2"),
    Claim("fine-tuned verbalized confidence falls below oracle training on contrast sets", CB,
          "verbalized (fine-tuned)", "oracle adapter", "lower", "§3.1.1, §3.2"),
    Claim("isotonic recalibration lowers self-consistency's full-set ECE", "full set smooth_ece",
          "SC + isotonic", "self-consistency", "lower", "§B.2", effect="full-set ECE made negligible"),
    Claim("after isotonic recalibration, self-consistency still falls below oracle training on contrast sets",
          CB, "SC + isotonic", "oracle adapter", "lower", "§B.2"),
    Claim("self-consistency beats its surrogate ablation on contrast sets", CB,
          "self-consistency", "surrogate (SC)", "higher", "§3.2, Table 2, §B.2",
          effect="5 of 6 cases (with the copy ablation)"),
    Claim("self-consistency beats its copy ablation, which scores 0.5 by construction", CB,
          "self-consistency", "copy (SC)", "higher", "§3.2, Table 2, §B.2", effect="copies score 0.5"),
    Claim("non-oracle training beats its surrogate ablation on contrast sets", CB,
          "non-oracle adapter", "surrogate (non-oracle adapter)", "higher", "§3.2, Table 2, §B.2",
          effect="mixed: 3 of 6 cases (with the copy ablation)"),
    Claim("non-oracle training beats its copy ablation, which scores 0.5 by construction", CB,
          "non-oracle adapter", "copy (non-oracle adapter)", "higher", "§3.2, Table 2, §B.2",
          effect="mixed: 3 of 6 cases (with the surrogate)"),
    Claim("the checkpoint-index baseline falls below oracle training on contrast sets", CB,
          "checkpoint index", "oracle adapter", "lower", "§3.1.1, §A.3"),
    Claim("under the fitted normalization too, self-consistency falls below oracle training on contrast sets",
          CB, "self-consistency", "oracle adapter", "lower", "§B.1", normalizer="fitted"),
    Claim("the GCM falls below oracle training on contrast sets", CB, "GCM", "oracle adapter", "lower",
          "§3.2, §B.4, Table 17"),
    Claim("after post-hoc (isotonic) calibration too, the GCM falls below oracle training on contrast sets", CB,
          "GCM + isotonic", "oracle adapter", "lower", "Table 17"),
    Claim("temperature scaling lowers self-consistency's full-set ECE", "full set smooth_ece",
          "SC + temperature", "self-consistency", "lower", "the series (Guo et al. 2017)", part="extension"),
    Claim("Platt scaling lowers self-consistency's full-set ECE", "full set smooth_ece",
          "SC + Platt", "self-consistency", "lower", "the series (Platt 1999)", part="extension"),
    Claim("P(True), read from the evaluated weights without training, falls below oracle training on contrast sets",
          CB, "P(True)", "oracle adapter", "lower", "the series (Kadavath et al. 2022)", part="extension"),
    Claim("token probability falls below oracle training on contrast sets", CB, "token probability",
          "oracle adapter", "lower", "the series (the confidently wrong checkpoints of notebook 00)",
          part="extension"),
]

# Table 1's headline, method by method: a method's contrast-set AUC falls below its full-set AUC.
_DROPS = {"self-consistency": "-0.126 (plain AUC, Marin 8B Jeopardy)", "oracle adapter": "-0.065 (plain AUC, same)",
          "non-oracle adapter": "", "verbalized (fine-tuned)": "", "checkpoint index": "", "GCM": ""}
DROP_CLAIMS = [
    *(Claim(f"{name}: contrast-set AUC below full-set AUC", "contrast minus full set auc_cb", name, name, "lower",
            "Table 1, §3.2", effect=effect) for name, effect in _DROPS.items()),
    *(Claim(f"{name}: contrast-set AUC below full-set AUC", "contrast minus full set auc_cb", name, name, "lower",
            "the series", part="extension") for name in ("token probability", "P(True)")),
]

# Notebook 06: multi-checkpoint training and its ablations (§1, Table 3, B.3, Table 4).
MULTI_CLAIMS = [
    Claim("in the oracle setting too, training on several checkpoints beats each checkpoint's own adapter", CB,
          "multi-checkpoint oracle adapter", "oracle adapter", "higher", "§1, Table 3"),
    Claim("multi-checkpoint training beats training on one checkpoint", CB,
          "multi-checkpoint adapter", "non-oracle adapter", "higher", "§3.2, Table 3"),
    Claim("multi-checkpoint training beats as much data from one checkpoint", CB,
          "multi-checkpoint adapter", "single-checkpoint data", "higher", "§B.3, Table 4"),
    Claim("multi-checkpoint training beats several answers per question from one checkpoint", CB,
          "multi-checkpoint adapter", "multi-answer adapter", "higher", "§B.3, Table 4"),
]
CLAIMS = TABLE_CLAIMS + DROP_CLAIMS + MULTI_CLAIMS
GCM_METHODS = ("GCM", "GCM + isotonic")
# The rows that are not a `Claim` of METHODS, by the notebook section that shows them.
TRANSFER = "forward transfer is stronger than backward"
RANDOM = "random labels for one checkpoint hurt it more than the other"
DOMAIN = "out of domain, oracle training's advantage over non-oracle training largely disappears"
GCM_SLOPE = "the GCM's headroom shrinks where its verifier knows more of the contrast questions"


def gcm_range() -> dict:
    """The verifier's test accuracy against the evaluation checkpoints': ``verifier``, ``lowest``, ``highest``,
    ``in_range`` and, outside it, ``reason``."""
    ck = get_checkpoints()
    accuracy = greedy_results("test", ck.evaluation).groupby("checkpoint")["correct"].mean()
    run = verifier.verifier()
    out = {"verifier": float(run["test_accuracy"]), "lowest": float(accuracy.min()), "highest": float(accuracy.max()),
           "reached_target": bool(run["reached_target"]), "steps": int(run["steps"])}
    out["in_range"] = out["lowest"] <= out["verifier"] <= out["highest"]
    if not out["in_range"]:
        out["reason"] = (f"the GCM's verifier answers {out['verifier']:.1%} of test sums, outside the evaluation "
                         f"checkpoints' {out['lowest']:.1%} to {out['highest']:.1%}, after {out['steps']} steps"
                         + ("" if out["reached_target"] else " without reaching its target accuracy"))
    return out


def _gated(row: dict, names) -> dict:
    """`row` with the verdict "not testable here" when it is about the GCM and the verifier is out of range."""
    if not set(names) & set(GCM_METHODS):
        return row
    gate = gcm_range()
    return row if gate["in_range"] else {**row, "verdict": f"not testable here ({gate['reason']})"}


@register("claim")
def _build_claim(folder, claim: str) -> dict:
    """One `Claim` about METHODS, decided by `findings.decide` (with the metrics shown beside)."""
    c = Claim(**json.loads(claim))
    ck = get_checkpoints()
    frames = {name: method_results(name) for name in {c.a, c.b}}
    row = findings.decide(c, frames, ck.evaluation, contrast.all_pairs(ck.evaluation), config.contrast().min_size)
    return _gated(row, (c.a, c.b))


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
    return findings.auc_claim(cells, forward_minus_backward, "higher")


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
    return findings.auc_claim(cells, drop_difference, "higher")


@register("domain_claim")
def _build_domain_claim(folder) -> dict:
    """§3.2, §B.5 (`findings.gap_claim`, class-balanced, plain AUC beside), or why this world cannot test it."""
    ck = get_checkpoints()
    frames = [tuple(adapters.seeded_results(split, ck.evaluation, source=source)
                    for source in ("oracle", ck.training[-1]))
              for split in ("test", "transfer_test")]
    sizes = (config.contrast().min_size, config.contrast().min_size_transfer)
    try:
        out = findings.gap_claim(*frames, contrast.all_pairs(ck.evaluation), sizes)
        plain = findings.gap_claim(*frames, contrast.all_pairs(ck.evaluation), sizes, metric="auc")
    except ValueError as err:  # no pair of this world is large enough on one of the two sets
        return {"error": str(err)}
    return {**out, "beside": "auc", "beside: inside": plain["inside"], "beside: difference": plain["difference"],
            "beside: verdict": plain["verdict"]}


def domain_claim() -> dict:
    """The cached domain-transfer test (notebook 06); raises ValueError where a set has no large enough pair."""
    out = load_or_build("domain_claim")
    if "error" in out:
        raise ValueError(out["error"])
    return out


@register("gcm_test")
def _build_gcm_test(folder) -> dict:
    """The GCM's contrast-set headroom against the verifier's own knowledge (`findings.gcm_headroom`)."""
    ck = get_checkpoints()
    return findings.gcm_headroom(method_results("oracle adapter"), method_results("GCM"),
                                 verifier.verifier_correct("test"), contrast.all_pairs(ck.evaluation),
                                 config.contrast().min_size)


def gcm_test() -> dict:
    """The cached GCM headroom test of notebook 05 (§3.2, Figure 2)."""
    return load_or_build("gcm_test")


def variance_trend(source: str = "oracle") -> pd.DataFrame:
    """B.7 for one kind of adapter (`findings.variance_trend` on `feature_variance.feature_variance`)."""
    return findings.variance_trend(feature_variance.feature_variance(source), get_checkpoints().evaluation)


def _row(claim: str, metric: str, claimed: str, result: dict, source: str, part: str = "paper",
         effect: str = "") -> dict:
    keep = ("difference", "5%", "95%", "p for", "p against", "seeds", "verdict", "beside", "beside: difference",
            "beside: verdict")
    return {"claim": claim, "part": part, "metric": metric, "claimed": claimed, "source": source,
            "paper's effect": effect, **{k: result[k] for k in keep if k in result}}


def special_rows() -> list[dict]:
    """The rows that are not a Claim about METHODS: transfer, random labels, domain transfer, the GCM's slope, B.7
    and the worked example of notebook 01."""
    seeds = len(config.adapters().seeds)
    rows = [_row(TRANSFER, "test AUC, forward − backward cells", "higher", load_or_build("transfer_claim"),
                 "§4, Figure 3", effect="+0.199 (0.870 against 0.671, Olmo 3 7B TriviaQA)"),
            _row(RANDOM, "test AUC drop, shuffled − other", "higher", load_or_build("random_claim"), "§4, Figure 3")]
    try:
        rows.append(_row(DOMAIN, "contrast AUC_cb advantage out of domain, within ± half the one in domain",
                         "similar", domain_claim(), "§3.2, §B.5, Table 18"))
    except ValueError as err:
        rows.append({"claim": DOMAIN, "part": "paper", "source": "§3.2, §B.5", "verdict": f"not testable here ({err})"})
    try:
        test = gcm_test()
        rows.append(_gated(_row(GCM_SLOPE, "slope of the contrast AUC headroom", "lower",
                                {**test, "difference": test["slope"], "seeds": seeds}, "§3.2, Figure 2"), GCM_METHODS))
    except ValueError as err:  # fewer than 3 pairs large enough
        rows.append({"claim": GCM_SLOPE, "part": "paper", "source": "§3.2, Figure 2",
                     "verdict": f"not testable here ({err})"})
    for layer, r in variance_trend("oracle").iterrows():
        rows.append(_row(f"block {layer}: later checkpoints' oracle adapters vary more across seeds",
                         "mean per-question Spearman correlation, scale-free, checkpoints resampled", "higher",
                         {**r.to_dict(), "difference": r["mean"], "seeds": seeds}, "§B.7, Table 19"))
    post = {m: load_or_build("greedy", checkpoint=m, split="test") for m in ("finetuned", "rl")}
    for claim, r in findings.post_training_claims(post["finetuned"], post["rl"]).iterrows():
        rows.append(_row("worked example: " + claim, "test sums", r["claimed"], {**r.to_dict(), "seeds": 1},
                         "the series (notebook 01)", part="extension"))
    return rows


def table() -> pd.DataFrame:
    """Every claim's row, the paper's Holm-corrected (`findings.findings_table`)."""
    return findings.findings_table([decided(c) for c in CLAIMS] + special_rows())


def checks(values: pd.DataFrame) -> list[findings.Check]:
    """What holds by construction, from a results table's `values` (methods × metrics): both members of a copy
    pair get the same confidence, so the copies' contrast AUC, plain and class-balanced, is exactly 0.5."""
    out = []
    for name in ("copy (SC)", "copy (non-oracle adapter)"):
        for label in ("AUC", "AUC class-balanced"):
            if name in values.index:
                v = values.loc[name, ("contrast set", label)]
                out.append(findings.Check(f"{name}: contrast {label} is exactly 0.5", bool(v == 0.5), f"{v}"))
    return out


# ---------------------------------------------------------------------------- the table as a reader sees it


READABLE_COLUMNS = ["part", "value a", "value b", "difference", "5%", "95%", "verdict", "verdict at 5%",
           "beside: difference"]
_UNTESTABLE = r"^not testable here \((.*)\)$"


def _bare(verdicts: pd.Series) -> pd.Series:
    """Verdicts without their parenthesis: "not testable here (why)" -> "not testable here"."""
    return verdicts.astype("string").str.partition(" (")[0]


def readable(decided: pd.DataFrame, names: dict | None = None) -> tuple[pd.DataFrame, list[str]]:
    """`decided` (`claims.table()`, or some of its rows) as (table, reasons).

    The table has, per claim (renamed by `names`, {claim: shorter name}, where given): its part, the two
    values `a` and `b`, the difference, the 5%-95% interval as one column ("+0.004 to +0.035"; empty where
    there is none), the verdict and the verdict at 5% without their parenthesis, and the plain metric's
    difference beside. Columns a poor world lacks come out empty. `reasons`: why claims are "not testable
    here", each once, in table order.
    """
    rows = decided.reindex(columns=READABLE_COLUMNS)
    low, high = (rows[end].astype(float).map("{:+.3f}".format) for end in ["5%", "95%"])
    table = pd.DataFrame({
        "part": rows["part"], "a": rows["value a"], "b": rows["value b"], "difference": rows["difference"],
        "5% to 95%": (low + " to " + high).where(rows["5%"].notna(), ""),
        "verdict": _bare(rows["verdict"]), "verdict at 5%": _bare(rows["verdict at 5%"]),
        "beside: difference": rows["beside: difference"],
    }, index=rows.index)
    reasons = rows["verdict"].str.extract(_UNTESTABLE)[0].dropna().unique().tolist()
    return table.rename(index=names or {}), reasons
