"""The paper's claims checked against the results tables (notebooks 05 and 06).

Each check returns a `Claim`: what the source says, whether this world shows it, and the numbers.
The verdicts here still compare point estimates (as the series did before); deciding them with the
paired bootstrap of the difference is the next step of the series' plan.

Layer 7: imports metrics.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import metrics


@dataclass(frozen=True)
class Claim:
    """A claim of the sources; `holds` is None when this world cannot test it (the detail says why)."""

    claim: str
    holds: bool | None
    detail: str

    def __post_init__(self):
        if self.holds is not None:  # numpy booleans from comparisons become plain ones
            object.__setattr__(self, "holds", bool(self.holds))

    @property
    def verdict(self) -> str:
        return "cannot be tested here" if self.holds is None else "reproduced" if self.holds else "NOT reproduced"

    def line(self) -> str:
        """`[reproduced] claim` and the numbers on the next line, as notebook 05 prints them."""
        return f"[{self.verdict}] {self.claim}\n    {self.detail}"


def claims_table(claims: list[Claim]) -> pd.DataFrame:
    """One row per claim: this world's verdict and the numbers (notebook 06's findings table)."""
    return pd.DataFrame([{"claim": c.claim, "this world": c.verdict, "values": c.detail}
                         for c in claims]).set_index("claim")


def _testable(claim: Claim, *numbers) -> Claim:
    """The claim, or the same claim marked untestable if a number it needs is NaN (no large-enough pair)."""
    if all(np.isfinite(numbers)):
        return claim
    return Claim(claim.claim, None, claim.detail + " (not measurable in this world: no contrast set is large enough)")


def table_claims(table: dict) -> list[Claim]:
    """The claims read off notebook 05's results table (`comparison.comparison(...)`)."""
    v, same = table["values"], table["indistinguishable"]
    full_auc, con_auc, ece = v[("full set", "AUC")], v[("contrast set", "AUC")], v[("full set", "ECE")]
    apart = not same.loc["non-oracle adapter", ("contrast set", "AUC")]
    claims = [
        Claim("SC's full-set AUC is close to the oracle's while its contrast AUC is lower",
              abs(full_auc["self-consistency"] - full_auc["oracle adapter"]) < 0.02
              and con_auc["self-consistency"] < con_auc["oracle adapter"],
              f"full {full_auc['self-consistency']:.3f} vs {full_auc['oracle adapter']:.3f}; "
              f"contrast {con_auc['self-consistency']:.3f} vs {con_auc['oracle adapter']:.3f}"),
        Claim("copy ablations are at 0.5 on contrast sets",
              con_auc["copy (SC)"] == 0.5 and con_auc["copy (non-oracle adapter)"] == 0.5,
              f"{con_auc['copy (SC)']} and {con_auc['copy (non-oracle adapter)']}; their full-set AUCs "
              f"{full_auc['copy (SC)']:.3f}, {full_auc['copy (non-oracle adapter)']:.3f}"),
        Claim("non-oracle training is below oracle training on contrast sets",
              con_auc["non-oracle adapter"] < con_auc["oracle adapter"] and apart,
              f"contrast AUC {con_auc['non-oracle adapter']:.3f} vs {con_auc['oracle adapter']:.3f} "
              f"(bootstrap can tell them apart: {apart})"),
        Claim("isotonic fixes full-set ECE but not contrast AUC",
              ece["SC + isotonic"] < ece["self-consistency"] and con_auc["SC + isotonic"] <= con_auc["self-consistency"] + 0.005,
              f"SC full-set ECE {ece['self-consistency']:.3f} -> {ece['SC + isotonic']:.3f}; contrast AUC "
              f"{con_auc['self-consistency']:.3f} -> {con_auc['SC + isotonic']:.3f}"),
        Claim("temperature and Platt scaling do not fix contrast AUC either",
              max(con_auc["SC + temperature"], con_auc["SC + Platt"]) <= con_auc["self-consistency"] + 0.005,
              f"contrast AUC: temperature {con_auc['SC + temperature']:.3f}, Platt {con_auc['SC + Platt']:.3f}, "
              f"SC {con_auc['self-consistency']:.3f}"),
        Claim("SC beats its surrogate and copy ablations on contrast AUC",
              con_auc["self-consistency"] > max(con_auc["surrogate (SC)"], con_auc["copy (SC)"]),
              f"SC {con_auc['self-consistency']:.3f}, surrogate {con_auc['surrogate (SC)']:.3f}, copy {con_auc['copy (SC)']:.3f}"),
    ]
    return [_testable(c, *con_auc.to_numpy(dtype=float)) for c in claims]


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


def slope(x, y) -> float:
    """The least-squares slope of y against x (the GCM gap against accuracy)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.size < 2:
        raise ValueError(f"need two equal-length arrays of at least 2 points, got {x.size} and {y.size}")
    return float(np.polyfit(x, y, 1)[0])
