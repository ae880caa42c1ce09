"""What the checkpoints say, decoded once and cached per checkpoint: greedy answers (`greedy`), beams
(`beams`), samples at T = 1 (`samples`) and greedy answers under every phrasing (`rephrasings`).
The decoding itself is `helpers.world.decoding`; sizes: `config.self_consistency()`."""
from __future__ import annotations


import pandas as pd
from tqdm import tqdm

from helpers import config
from helpers.cache.artifacts import register
from helpers.pipeline.checkpoints import load_checkpoint, load_per_checkpoint
from helpers.world import sums
from helpers.world.decoding import beams, greedy, sample


@register("greedy")
def _build_greedy(folder, checkpoint: str, split: str) -> pd.DataFrame:
    """Greedy answers and token-probability confidence of one checkpoint on one split."""
    model, tokenizer = load_checkpoint(checkpoint)
    df = greedy(model, tokenizer, sums.split(split), desc=f"greedy {checkpoint} {split}")
    df.insert(0, "checkpoint", checkpoint)
    return df


def greedy_results(split: str = "test", checkpoints=None) -> pd.DataFrame:
    """Cached greedy results of several checkpoints (default: all selected ones), one long frame."""
    sums.split(split)  # an unknown split name fails here, before anything is built
    return load_per_checkpoint("greedy", checkpoints, split=split)


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


@register("samples")
def _build_samples(folder, checkpoint: str, split: str) -> pd.DataFrame:
    """`samples_k` replies sampled at T = 1 for the first `sampled_questions` questions of one checkpoint."""
    s = config.self_consistency()
    model, tok = load_checkpoint(checkpoint)
    questions = sums.split(split).iloc[: s.sampled_questions]
    out = sample(model, tok, questions, k=s.samples_k, seed=s.sample_seed, desc=f"sampling {checkpoint}")
    out.insert(0, "checkpoint", checkpoint)
    return out


def sample_results(split: str = "test", checkpoints=None) -> pd.DataFrame:
    """Cached samples at T = 1 of several checkpoints (default: all selected), one long frame."""
    sums.split(split)  # an unknown split name fails here, before anything is built
    return load_per_checkpoint("samples", checkpoints, split=split)


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
