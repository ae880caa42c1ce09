"""Self-consistency (SC): group beam-search (or sampled) answers by meaning and trust the biggest group.

The paper (A.6) groups a model's 10 beams by NLI mutual entailment; here meaning is numeric, so beams
are grouped by the number `sums.parse_answer` reads ("936" and "It is 936." are one group).
answer = the group with the largest probability mass; confidence = that mass over the mass of all
returned beams. Used by notebooks 02, 04, 05 and 06. Sizes: `config.self_consistency()`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from tqdm import tqdm

from helpers import config
from helpers.world import sums
from helpers.cache.artifacts import register
from helpers.world.checkpoints import load_checkpoint, load_per_checkpoint
from helpers.world.decoding import beams, greedy, sample


def group_answers(answers, weights) -> tuple[int | None, float, pd.Series]:
    """Group one question's candidates by parsed answer; returns (answer, confidence, group masses).

    `answers` holds ints or None (unparsable or unended), `weights` non-negative masses (beam
    probabilities, or 1 per sample). Masses are normalized by their total. None forms its own group
    that never wins; if every candidate is None the answer is None with confidence 0. Ties go to the
    group whose best candidate comes first (candidates are given best first), so they are deterministic.
    """
    weights = np.asarray(weights, dtype=float)
    if len(answers) != len(weights) or len(weights) == 0:
        raise ValueError(f"need one weight per answer and at least one answer, got {len(answers)} and {len(weights)}")
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("weights must be finite and non-negative (probabilities or counts)")
    total = weights.sum()
    if total <= 0:
        raise ValueError("the weights sum to 0; pass probabilities (not log-probabilities) or counts")
    keys = ["none" if a is None or a is pd.NA else int(a) for a in answers]
    masses: dict = {}
    first: dict = {}
    for rank, (key, w) in enumerate(zip(keys, weights)):
        masses[key] = masses.get(key, 0.0) + w / total
        first.setdefault(key, rank)
    groups = pd.Series(masses)
    candidates = [k for k in masses if k != "none"]
    if not candidates:
        return None, 0.0, groups
    best = min(candidates, key=lambda k: (-masses[k], first[k]))
    return best, float(masses[best]), groups


def self_consistency(candidates: pd.DataFrame, questions: pd.DataFrame, weight: str = "probability") -> pd.DataFrame:
    """SC answer and confidence per question from beams (weight="probability") or samples ("count").

    `candidates` has question_id, answer (nullable int), ended, and logprob (for "probability"),
    best candidate first within each question. Returns question_id, answer, correct, confidence,
    n_groups and coverage (the probability mass the candidates cover, before normalization).
    """
    if weight not in ("probability", "count"):
        raise ValueError(f"weight must be 'probability' (beams) or 'count' (samples), got {weight!r}")
    if len(candidates) == 0:
        raise ValueError("candidates is empty; pass the beams or samples of at least one question")
    # Vectorized version of `group_answers` over all questions at once (tests check they agree).
    df = pd.DataFrame({
        "question_id": candidates["question_id"].to_numpy(),
        "rank": candidates.groupby("question_id", sort=False).cumcount().to_numpy(),
        "key": candidates["answer"].where(candidates["ended"].astype(bool)).astype("Int64").to_numpy(),
        "w": np.exp(candidates["logprob"].to_numpy()) if weight == "probability" else np.ones(len(candidates)),
    })
    total = df.groupby("question_id", sort=False)["w"].sum()
    groups = df.dropna(subset=["key"]).groupby(["question_id", "key"], sort=False).agg(mass=("w", "sum"),
                                                                                       first=("rank", "min"))
    groups = groups.reset_index()
    groups["mass"] /= total.reindex(groups["question_id"]).to_numpy()
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


def sc_questions(split: str) -> pd.DataFrame:
    """The questions SC is run on: all of test, the first part of adapter_train (enough to fit isotonic)."""
    questions = sums.split(split)
    return questions.iloc[:config.self_consistency().n_adapter_train] if split == "adapter_train" else questions


@register("beams")
def _build_beams(folder, checkpoint: str, split: str) -> pd.DataFrame:
    """`num_beams` beams per question of one checkpoint on one split."""
    n = config.self_consistency().num_beams
    model, tok = load_checkpoint(checkpoint)
    out = beams(model, tok, sc_questions(split), num_beams=n, num_return_sequences=n,
                desc=f"beams {checkpoint} {split}")
    out.insert(0, "checkpoint", checkpoint)
    return out


def beam_results(split: str = "test", checkpoints=None) -> pd.DataFrame:
    """Cached beams of several checkpoints (default: all selected), one long frame."""
    sums.split(split)  # an unknown split name fails here, before anything is built
    return load_per_checkpoint("beams", checkpoints, split=split)


def _per_checkpoint_sc(candidates: pd.DataFrame, questions: pd.DataFrame, weight: str) -> pd.DataFrame:
    frames = []
    for name, group in candidates.groupby("checkpoint", sort=False):
        frame = self_consistency(group, questions, weight)
        frame.insert(0, "checkpoint", name)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def sc_results(split: str = "test", checkpoints=None) -> pd.DataFrame:
    """SC answers and confidences: checkpoint, question_id, answer, correct, confidence, n_groups, coverage."""
    return _per_checkpoint_sc(beam_results(split, checkpoints), sc_questions(split), "probability")


@register("samples")
def _build_samples(folder, checkpoint: str, split: str) -> pd.DataFrame:
    """`samples_k` replies sampled at T = 1 for the first `sampled_questions` questions of one checkpoint."""
    s = config.self_consistency()
    model, tok = load_checkpoint(checkpoint)
    questions = sums.split(split).iloc[: s.sampled_questions]
    out = sample(model, tok, questions, k=s.samples_k, seed=s.sample_seed, desc=f"sampling {checkpoint}")
    out.insert(0, "checkpoint", checkpoint)
    return out


def sampled_sc_results(split: str = "test", checkpoints=None) -> pd.DataFrame:
    """The sampling variant of SC: the majority's share of k samples at T = 1."""
    sums.split(split)
    samples = load_per_checkpoint("samples", checkpoints, split=split)
    return _per_checkpoint_sc(samples.assign(ended=samples["answer"].notna()), sums.split(split), "count")


@register("rephrasings")
def _build_rephrasings(folder, checkpoint: str) -> pd.DataFrame:
    """Greedy answers of one checkpoint to the first `rephrased_questions` test questions under every phrasing."""
    model, tok = load_checkpoint(checkpoint)
    base = sums.split("test").iloc[: config.self_consistency().rephrased_questions]
    frames = []
    for template in tqdm(range(len(sums.QUESTION_TEMPLATES["sum"])), desc=f"phrasings {checkpoint}", leave=False):
        qs = sums.make_questions("sum", base["a"].to_numpy(), base["b"].to_numpy(), template=template)
        frames.append(greedy(model, tok, qs, progress=False).assign(template=template))
    out = pd.concat(frames, ignore_index=True)
    out.insert(0, "checkpoint", checkpoint)
    return out


def rephrasing_results(checkpoints=None) -> pd.DataFrame:
    """Greedy answers under every phrasing: checkpoint, question_id, template, answer, correct, confidence."""
    return load_per_checkpoint("rephrasings", checkpoints)


def agreement(answers) -> float:
    """Share of pairs of phrasings whose answers are equal (an unparsable answer agrees with nothing)."""
    values = [None if a is None or a is pd.NA else int(a) for a in answers]
    n = len(values)
    if n < 2:
        raise ValueError("agreement needs the answers to at least two phrasings")
    pairs = [(x, y) for i, x in enumerate(values) for y in values[i + 1:]]
    return float(np.mean([x is not None and x == y for x, y in pairs]))


def consistency_table(rephrased: pd.DataFrame) -> pd.DataFrame:
    """Per (checkpoint, question): agreement across phrasings, canonical correctness and confidence.

    The agreement column equals `agreement` of each question's answers (the share of its n(n-1)/2 pairs of
    phrasings that state the same parsed answer), counted per answer group rather than pair by pair: a
    Python loop over 12,000 questions took 14 s of notebook 02.
    """
    keys = ["checkpoint", "question_id"]
    n = rephrased.groupby(keys, sort=False).size()
    if (n < 2).any():
        raise ValueError("agreement needs the answers to at least two phrasings")
    same = rephrased.dropna(subset=["answer"]).groupby(keys + ["answer"], sort=False).size()
    agreeing = (same * (same - 1) // 2).groupby(level=keys, sort=False).sum().reindex(n.index, fill_value=0)
    canonical = rephrased[rephrased["template"] == 0].drop_duplicates(keys).set_index(keys).reindex(n.index)
    if canonical["correct"].isna().any():
        raise ValueError("every question needs its answer to the canonical phrasing (template 0)")
    correct = rephrased.groupby(keys, sort=False)["correct"].sum().reindex(n.index)
    return pd.DataFrame({"checkpoint": n.index.get_level_values(0), "question_id": n.index.get_level_values(1),
                         "agreement": (agreeing / (n * (n - 1) // 2)).to_numpy(dtype=float),
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


def surrogate_sc(scorer: str, answers: pd.DataFrame, split: str = "test") -> pd.DataFrame:
    """The surrogate ablation: checkpoint `scorer`'s beams judge another checkpoint's answers.

    Confidence = the share of `scorer`'s beam mass on the group that states the evaluated answer
    (0 if none of its beams does). `answers` is a standard frame of the evaluated checkpoints.
    """
    beams_ = beam_results(split, [scorer])
    ended = beams_[beams_["ended"] & beams_["answer"].notna()].assign(p=lambda d: np.exp(d["logprob"]))
    total = beams_.assign(p=np.exp(beams_["logprob"])).groupby("question_id")["p"].sum()
    mass = ended.groupby(["question_id", "answer"])["p"].sum() / total.reindex(
        ended.groupby(["question_id", "answer"]).size().index.get_level_values(0)).to_numpy()
    keys = pd.MultiIndex.from_arrays([answers["question_id"], answers["answer"].astype("Int64")])
    out = answers.copy()
    out["confidence"] = mass.reindex(keys).fillna(0.0).clip(0.0, 1.0).to_numpy(dtype=float)
    return out
