"""Self-consistency (SC): group beam-search (or sampled) answers by meaning and trust the biggest group.

The paper (A.6) groups a model's 10 beams by NLI mutual entailment; here meaning is numeric, so beams
are grouped by the number `sums.parse_answer` reads ("936" and "It is 936." are one group).
answer = the group with the largest probability mass; confidence = that mass over the mass of all
returned beams. Sizes: `config.self_consistency()`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from helpers.world import sums


def candidate_weights(candidates: pd.DataFrame, weight: str = "probability") -> np.ndarray:
    """Each candidate's weight: its probability (weight="probability", from `logprob`: beams) or 1 ("count":
    samples)."""
    if weight not in ("probability", "count"):
        raise ValueError(f"weight must be 'probability' (beams) or 'count' (samples), got {weight!r}")
    return np.exp(candidates["logprob"].to_numpy()) if weight == "probability" else np.ones(len(candidates))


def group_masses(candidates: pd.DataFrame, weights: np.ndarray,
                 sorted_totals: bool = False) -> tuple[pd.DataFrame, pd.Series]:
    """The grouping rule of self-consistency, for every question at once: (groups, total).

    `candidates` has question_id, answer (nullable int) and ended, best candidate first within each question;
    `weights` one non-negative weight per candidate (`candidate_weights`). A candidate that never ended or
    states no number belongs to no group. `groups` has one row per (question_id, key = the parsed answer):
    mass (the group's weight over the question's total, `total`, which counts every candidate) and first (the
    rank of its best candidate). `sorted_totals` sums each question's total in pandas' sorted group order
    instead of the order questions come in: the same number up to the last bit (1e-17), and the order in which
    the surrogate ablation's shipped results were summed.
    """
    if len(candidates) == 0:
        raise ValueError("candidates is empty; pass the beams or samples of at least one question")
    df = pd.DataFrame({
        "question_id": candidates["question_id"].to_numpy(),
        "rank": candidates.groupby("question_id", sort=False).cumcount().to_numpy(),
        "key": candidates["answer"].where(candidates["ended"].astype(bool)).astype("Int64").to_numpy(),
        "w": weights,
    })
    total = df.groupby("question_id", sort=sorted_totals)["w"].sum()
    groups = df.dropna(subset=["key"]).groupby(["question_id", "key"], sort=False).agg(mass=("w", "sum"),
                                                                                       first=("rank", "min"))
    groups = groups.reset_index()
    groups["mass"] /= total.reindex(groups["question_id"]).to_numpy()
    return groups, total


def self_consistency(candidates: pd.DataFrame, questions: pd.DataFrame, weight: str = "probability") -> pd.DataFrame:
    """SC answer and confidence per question from beams (weight="probability") or samples ("count").

    The answer is the group of `group_masses` with the largest mass; ties go to the group whose best
    candidate comes first, so they are deterministic. A question whose candidates all fall in no group gets
    no answer and confidence 0. `questions` has question_id and target. Returns question_id, answer,
    correct, confidence, n_groups and coverage (the probability mass the candidates cover, before
    normalization; 1 for samples).
    """
    weights = candidate_weights(candidates, weight)
    groups, total = group_masses(candidates, weights)
    best = groups.sort_values(["question_id", "mass", "first"], ascending=[True, False, True]).drop_duplicates(
        "question_id")
    out = pd.DataFrame({"question_id": total.index})
    out = out.merge(best[["question_id", "key", "mass"]], on="question_id", how="left")
    out = out.merge(groups.groupby("question_id").size().rename("n_groups"), on="question_id", how="left")
    targets = questions.set_index("question_id")["target"].reindex(out["question_id"]).to_numpy()
    answer = out["key"].astype("Int64")
    return pd.DataFrame({
        "question_id": out["question_id"],
        "answer": answer,
        "correct": (answer == targets).fillna(False).astype(bool).to_numpy(),
        "confidence": out["mass"].fillna(0.0).clip(0.0, 1.0).to_numpy(),  # a share; rounding can exceed 1 by 1e-16
        "n_groups": out["n_groups"].fillna(0).astype(int).to_numpy(),
        "coverage": total.to_numpy() if weight == "probability" else 1.0,
    })


def group_answers(answers, weights) -> tuple[int | None, float, pd.Series]:
    """`group_masses` for one question's candidates: (answer, confidence, group masses).

    `answers` holds ints or None (unparsable or unended), best first; `weights` non-negative masses (beam
    probabilities, or 1 per sample). The masses are shares of the total weight; the group of None never
    wins, and if every candidate is None the answer is None with confidence 0.
    """
    weights = np.asarray(weights, dtype=float)
    if len(answers) != len(weights) or len(weights) == 0:
        raise ValueError(f"need one weight per answer and at least one answer, got {len(answers)} and {len(weights)}")
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("weights must be finite and non-negative (probabilities or counts)")
    if weights.sum() <= 0:
        raise ValueError("the weights sum to 0; pass probabilities (not log-probabilities) or counts")
    stated = [a is not None and a is not pd.NA for a in answers]
    candidates = pd.DataFrame({"question_id": 0, "ended": True, "answer": pd.array(
        [int(a) if ok else None for a, ok in zip(answers, stated)], dtype="Int64")})
    groups, total = group_masses(candidates, weights)
    masses = pd.Series(dict(zip(groups["key"].astype(int), groups["mass"])), dtype=float)
    if not all(stated):
        masses["none"] = weights[~np.array(stated)].sum() / total.iloc[0]
    if groups.empty:
        return None, 0.0, masses
    best = groups.sort_values(["mass", "first"], ascending=[False, True]).iloc[0]
    return int(best["key"]), float(min(best["mass"], 1.0)), masses


def surrogate_confidence(scorer_candidates: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """The surrogate ablation: one checkpoint's beams (`scorer_candidates`) judge other checkpoints' answers.

    Confidence = the mass `group_masses` gives the scorer's group that states the evaluated answer (0 if none
    of its beams does). `answers` is a standard frame (question_id, answer, ...); returns it with its
    confidence replaced.
    """
    groups, _ = group_masses(scorer_candidates, candidate_weights(scorer_candidates), sorted_totals=True)
    mass = groups.set_index(["question_id", "key"])["mass"]
    keys = pd.MultiIndex.from_arrays([answers["question_id"], answers["answer"].astype("Int64")])
    out = answers.copy()
    out["confidence"] = mass.reindex(keys).fillna(0.0).clip(0.0, 1.0).to_numpy(dtype=float)
    return out


def agreements(rephrased: pd.DataFrame) -> pd.Series:
    """Per (checkpoint, question_id): the share of its n(n-1)/2 pairs of phrasings whose answers are equal.

    `rephrased` has checkpoint, question_id and answer (nullable int; an unparsable answer agrees with nothing),
    one row per phrasing. Counted per answer group: a group of g equal answers holds g(g-1)/2 agreeing pairs.
    """
    keys = ["checkpoint", "question_id"]
    n = rephrased.groupby(keys, sort=False).size()
    if (n < 2).any():
        raise ValueError("agreement needs the answers to at least two phrasings")
    same = rephrased.dropna(subset=["answer"]).groupby(keys + ["answer"], sort=False).size()
    agreeing = (same * (same - 1) // 2).groupby(level=keys, sort=False).sum().reindex(n.index, fill_value=0)
    return agreeing / (n * (n - 1) // 2)


def agreement(answers) -> float:
    """`agreements` of one question's answers to its phrasings."""
    values = pd.array([None if a is None or a is pd.NA else int(a) for a in answers], dtype="Int64")
    return float(agreements(pd.DataFrame({"checkpoint": "", "question_id": 0, "answer": values})).iloc[0])


def consistency_table(rephrased: pd.DataFrame) -> pd.DataFrame:
    """Per (checkpoint, question): `agreements` across phrasings, canonical correctness and confidence."""
    keys = ["checkpoint", "question_id"]
    share = agreements(rephrased)
    index = share.index
    canonical = rephrased[rephrased["template"] == 0].drop_duplicates(keys).set_index(keys).reindex(index)
    if canonical["correct"].isna().any():
        raise ValueError("every question needs its answer to the canonical phrasing (template 0)")
    correct = rephrased.groupby(keys, sort=False)["correct"].sum().reindex(index)
    return pd.DataFrame({"checkpoint": index.get_level_values(0), "question_id": index.get_level_values(1),
                         "agreement": share.to_numpy(dtype=float),
                         "correct": canonical["correct"].astype(bool).to_numpy(),
                         "confidence": canonical["confidence"].astype(float).to_numpy(),
                         "n_correct_phrasings": correct.astype(int).to_numpy()})


def consistent_errors(rephrased: pd.DataFrame, at_least: int = 3) -> pd.DataFrame:
    """How often each checkpoint is wrong *consistently*, in and outside the mistake family (notebook 00).

    `rephrased` is `rephrasing_results()` (test sums under every phrasing). A wrong canonical answer is
    consistent when at least `at_least` of the phrasings state that same wrong number: the model holds a
    wrong rule rather than guessing. One row per checkpoint and group ("mistake family", "other sums"):
    questions, accuracy (canonical phrasing), wrong answers, and the share of those that are consistent.
    """
    keys = ["checkpoint", "question_id"]
    canonical = rephrased[rephrased["template"] == 0].drop_duplicates(keys)
    if canonical.empty:
        raise ValueError("rephrased needs the canonical phrasing (template 0) of every question")
    same = rephrased.dropna(subset=["answer"]).groupby(keys + ["answer"], sort=False).size().rename("same")
    canonical = canonical.merge(same.reset_index(), on=keys + ["answer"], how="left")
    wrong = ~canonical["correct"].astype(bool)
    consistent = wrong & (canonical["same"].fillna(0) >= at_least)
    a, b = canonical["question_id"] // 1000, canonical["question_id"] % 1000
    group = np.where(sums.in_mistake_family(a, b), "mistake family", "other sums")
    table = pd.DataFrame({"checkpoint": canonical["checkpoint"], "group": group, "correct": ~wrong,
                          "wrong": wrong, "consistent": consistent})
    out = table.groupby(["checkpoint", "group"], sort=False).agg(
        questions=("wrong", "size"), accuracy=("correct", "mean"), wrong=("wrong", "sum"),
        consistent=("consistent", "sum"))
    out["consistent share of wrong"] = (out["consistent"] / out["wrong"].where(out["wrong"] > 0)).round(3)
    out["accuracy"] = out["accuracy"].round(3)
    return out.drop(columns="consistent").reset_index()


