"""Notebook 03's glue: its readouts by name (`verbalized_frames`) and its findings table, decided once and
cached (`decided_verbalized`)."""
from __future__ import annotations

import dataclasses
import json

import pandas as pd
from tqdm import tqdm

from helpers.cache.artifacts import load_or_build, register
from helpers.evaluation import findings, metrics
from helpers.pipeline import verbalized


def verbalized_frames() -> dict[str, pd.DataFrame]:
    """Notebook 03's readouts by name: every seed's oracle and moved (non-oracle) verbalized adapters read by
    their expected stated confidence, the oracle's token probability, and the focus checkpoint's answers whose
    stated number could be decoded, read both ways."""
    oracle_seeds = verbalized.seeded_results("test", source="oracle")
    oracle = metrics.seed_frames(oracle_seeds)[0]
    focus = oracle[oracle["checkpoint"] == verbalized.focus_checkpoint()].reset_index(drop=True)
    ok = focus["parsed"].to_numpy()
    frames = {"stated (expected)": oracle_seeds,
              "token probability": oracle.assign(confidence=oracle["token_probability"]),
              f"non-oracle ({verbalized.default_source()})":
                  verbalized.seeded_results("test", source=verbalized.default_source())}
    if ok.any():
        frames["expected, decodable answers"] = focus.loc[ok].assign(confidence=focus.loc[ok, "expected"])
        frames["decoded number"] = focus.loc[ok].assign(confidence=focus.loc[ok, "stated"])
    return frames


@register("verbalized_findings")
def _build_verbalized_findings(folder, claims: str) -> pd.DataFrame:
    """The findings table of claims about `verbalized_frames`, each on its own checkpoints."""
    frames = verbalized_frames()
    # Notebook 03's expectations come from the literature on stated confidence, not from the paper: the series'
    # extensions, each at its own 5% (the Holm correction covers the paper's claims, `findings.findings_table`).
    chosen = [(findings.Claim(**{**c, "part": "extension"}), where) for c, where in json.loads(claims)]
    return findings.findings_table([findings.decide(c, frames, where, [], 1, leave_out=False)
                                    for c, where in tqdm(chosen, desc="claims", leave=False)])


def decided_verbalized(claims) -> pd.DataFrame:
    """`findings.decide` for each (claim, checkpoints) about `verbalized_frames`, as one cached table (notebook 03)."""
    return load_or_build("verbalized_findings", claims=json.dumps(
        [[dataclasses.asdict(c), list(where)] for c, where in claims], sort_keys=True))
