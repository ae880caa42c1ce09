"""Notebook 07's short names, units and chapters for the counted claims (helpers/figures/claim_labels.py)."""
from __future__ import annotations

import pandas as pd
import pytest

from helpers.figures import claim_labels
from helpers.pipeline import claims

# The counted claims: the paper's, one per group (findings.findings_table), and the rows that are not a Claim.
COUNTED = [c.claim for c in claims.CLAIMS if c.part == "paper" and (c.group or c.claim) == c.claim]
COUNTED += [claims.TRANSFER, claims.RANDOM, claims.DOMAIN, claims.B7]


def test_every_counted_claim_has_its_own_short_name():
    names = [claim_labels.short_name(claim) for claim in COUNTED]
    assert len(COUNTED) == 19
    assert len(set(names)) == len(names), pd.Series(names).value_counts().head(3)


def test_a_claim_without_a_short_name_is_refused_by_name():
    with pytest.raises(ValueError, match="no short name for the claim 'the moon is made of cheese'"):
        claim_labels.short_name("the moon is made of cheese")


def test_units_of_the_metrics():
    assert claim_labels.unit(claims.CONTRAST_AUC) == "contrast AUC"
    assert claim_labels.unit("full set smooth_ece") == "SmoothECE"
    assert claim_labels.unit("contrast minus full set auc") == "contrast − full"
    assert claim_labels.unit("something else") == "something else"


def test_each_claim_is_taught_in_the_chapter_of_its_method():
    counted = pd.DataFrame({"a": ["self-consistency", "self-consistency", "self-consistency", None, "GCM"]},
                           index=[claims.SC_BELOW_ORACLE, claims.DROP, claim_labels.SURROGATE, claims.B7,
                                  claims.GCM_BELOW_ORACLE])
    assert claim_labels.taught_in(counted).tolist() == ["02", "04", "05", "06", "05"]
