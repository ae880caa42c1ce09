"""Short names, units and chapters for the counted claims of the findings table, so that notebook 07's
tables and figures fit on a page (the claims' full texts are `helpers.pipeline.claims`'s)."""
from __future__ import annotations

import pandas as pd

from helpers.pipeline import claims

# Words that occur in one counted claim -> its short name (the first match wins, so the more specific first).
SHORT = {
    "self-consistency falls": "SC below oracle", "lowers": "isotonic lowers SC's ECE",
    "still falls": "SC + isotonic below oracle", "verbalized": "verbalized below oracle",
    "AUC falls below full": "contrast below full", "headroom": "GCM headroom shrinks",
    "post-hoc": "GCM + isotonic below oracle", "the GCM falls": "GCM below oracle",
    "self-consistency beats": "SC beats its surrogate", "training falls": "non-oracle below oracle",
    "non-oracle training beats": "non-oracle beats surrogate", "out of domain": "out of domain",
    "oracle setting": "oracle: multi beats own", "on one checkpoint": "multi beats one checkpoint",
    "as much data": "multi beats as much data", "several answers": "multi beats several answers",
    "forward": "forward beats backward", "random": "random labels hurt more",
    "vary": "later adapters vary more"}
# Words in a row's metric -> what its a − b measures.
UNITS = {"contrast set auc": "contrast AUC", "out of domain": "equivalence", "smooth_ece": "SmoothECE",
         "minus full": "contrast − full", "forward": "transfer AUC", "shuffled": "AUC drop",
         "Spearman": "mean Spearman"}
# Method a -> the chapter that teaches it; a claim without a method a is chapter 06's own (transfer, random
# labels, domain transfer, seeds).
TEACHES = {"self-consistency": "02", "SC + isotonic": "02", "verbalized (fine-tuned)": "03",
           "non-oracle adapter": "05", "GCM": "05", "GCM (strong verifier)": "05", "GCM + isotonic": "05",
           "multi-checkpoint oracle adapter": "06", "multi-checkpoint adapter": "06"}
SURROGATE = "self-consistency beats its surrogate ablation on contrast sets"  # taught with the surrogates, 05


def short_name(claim: str) -> str:
    """A claim's short name (`SHORT`); a ValueError names a claim that has none."""
    for words, name in SHORT.items():
        if words in claim:
            return name
    raise ValueError(f"no short name for the claim {claim!r}: add words that occur only in it to "
                     "helpers/figures/claim_labels.py's SHORT")


def unit(metric) -> str:
    """What a row's a − b measures, from its metric's description (the description itself where none fits)."""
    return next((name for words, name in UNITS.items() if words in str(metric)), metric)


def taught_in(counted: pd.DataFrame) -> pd.Series:
    """The chapter that teaches each claim of `counted` (the findings table's counted rows, column "a"):
    method a's chapter, 06 without a method a, 04 for the drop from full set to contrast set (about contrast
    sets themselves), 05 for self-consistency against its surrogate (taught with the surrogates)."""
    chapter = counted["a"].map(TEACHES).fillna("06")
    chapter[chapter.index == claims.DROP] = "04"
    chapter[chapter.index == SURROGATE] = "05"
    return chapter
