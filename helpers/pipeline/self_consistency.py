"""Self-consistency's results on the cached beams and samples: `helpers.confidence.self_consistency`
applied per checkpoint (notebooks 02, 04, 05, 06). Nothing here is cached: grouping takes a second."""
from __future__ import annotations


import pandas as pd

from helpers.confidence.self_consistency import surrogate_confidence
from helpers.pipeline.decoded import sample_results
from helpers.confidence.self_consistency import self_consistency
from helpers.pipeline.decoded import beam_results, sc_questions
from helpers.world import sums


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


def sampled_sc_results(split: str = "test", checkpoints=None) -> pd.DataFrame:
    """The sampling variant of SC: the majority's share of k samples at T = 1."""
    samples = sample_results(split, checkpoints)
    return _per_checkpoint_sc(samples.assign(ended=samples["answer"].notna()), sums.split(split), "count")


def surrogate_sc(scorer: str, answers: pd.DataFrame, split: str = "test") -> pd.DataFrame:
    """The surrogate ablation (`surrogate_confidence`): checkpoint `scorer`'s cached beams judge `answers`."""
    return surrogate_confidence(beam_results(split, [scorer]), answers)
