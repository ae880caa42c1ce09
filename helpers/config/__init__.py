"""Every size, seed and hyper-parameter of the series, in one place, with a scoped override.

One group per thing configured, each with a full and a fast value (HELPERS_FAST=1 picks the fast ones, as
`make test` does): `world` (the training run, its mixture and the checkpoint selection; notebook 00), `splits`
(the evaluation questions), `post_training` (01), `self_consistency` (02, 04-06), `verbalized` (03, 04),
`adapters` (05, 06), `gcm` (05, 06), `bootstrap` (01, 04-06), `contrast` (minimum sizes, 04-06),
`findings` (the findings' test forms, 05, 06) and `live` (the small from-scratch builds every notebook runs
in view). Each setting says why it has its value; the measurements that chose them are in docs/settings.md.

Read a group with its function (`config.adapters().lr`). Change one for a while with
``with config.override("adapters", lr=1e-3): ...``, for the session with ``config.override(...)`` (undo with
`config.reset()`), or from the shell with HELPERS_OVERRIDES='{"self_consistency": {"num_beams": 5}}'. The cache
(`helpers.cache.artifacts`) records every setting a build reads, so a change rebuilds exactly what read it.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = REPO_ROOT / "data"
SEED = 0  # the series' base seed: the default of every `seed` argument

# GPT-2's Conv1D layers to adapt, each named: "c_proj" alone would match both attention's and the MLP's output.
ATTENTION = r".*\.attn\.(c_attn|c_proj)$"
ATTENTION_AND_MLP = r".*\.(attn\.(c_attn|c_proj)|mlp\.(c_fc|c_proj))$"


def fast_mode() -> bool:
    """True when HELPERS_FAST=1: smaller sizes, same code paths (used by `make test`)."""
    return os.environ.get("HELPERS_FAST", "0").strip() == "1"


def cache_dir() -> Path:
    """Where artifacts live (fast and full mode apart); a relative HELPERS_CACHE starts at the repository root."""
    return REPO_ROOT / os.environ.get("HELPERS_CACHE", DATA_DIR / "cache") / ("fast" if fast_mode() else "full")


def set_seed(seed: int = SEED) -> None:
    """Seed random, numpy and torch; the only seeding entry point of the series."""
    import torch  # local: config is imported by numpy-only modules that never need torch

    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    random.seed(int(seed))
    np.random.seed(int(seed) % 2**32)
    torch.manual_seed(int(seed))


def threads() -> int:
    """The torch thread count builds use: HELPERS_THREADS, else 2 (the shipped world's count). Recorded in
    every cache entry: another count sums floats in another order, so it rebuilds what it changes."""
    return int(os.environ.get("HELPERS_THREADS", 0)) or 2


def set_threads(n: int | None = None) -> int:
    """Use `n` torch threads (default `threads()`); returns it."""
    import torch  # local: see set_seed

    n = n or threads()
    if n < 1:
        raise ValueError(f"thread count must be >= 1, got {n}")
    torch.set_num_threads(n)
    return n


# ---------------------------------------------------------------------------- the groups


@dataclass(frozen=True)
class World:
    """The training run whose saved checkpoints the series studies (notebook 00)."""

    train_steps: int = 4000  # every run tried starts learning early enough for phase alternations in both windows
    batch_size: int = 256
    save_every: int = 100
    n_checkpoints: int = 12  # selected from the saved ones, by what they know
    n_training_checkpoints: int = 5  # the earliest selected ones; the rest evaluate
    n_monitor: int = 1000  # test questions scored at every save for the learning curves (selection scores all)
    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    lr: float = 5e-3  # fast enough that every seed learns in time (3e-3 was not)
    warmup_steps: int = 100
    weight_decay: float = 0.1
    lr_decay_start: float = 2 / 3  # from here a cosine anneals the rate to min_lr_ratio: a steadier last checkpoint
    min_lr_ratio: float = 0.5  # the annealed rate's floor, as a share of lr
    # The data mixture, (start as a share of training, phase): operand ranges alternate so that checkpoints forget.
    phases: tuple = ((0.0, "small"), (0.09, "large"), (0.15, "small"), (0.21, "mixed"), (0.27, "large"),
                     (0.33, "small"), (0.39, "mixed"), (0.45, "large"), (0.51, "small"), (0.57, "mixed"),
                     (0.63, "large"), (0.69, "small"), (0.75, "mixed"), (0.81, "uniform"), (0.95, "large"))
    phase_majority: float = 0.97  # share of a batch drawn from the phase's range; the rest is uniform
    # share of subtraction questions in each phase
    transfer_shares: tuple = (("small", 0.45), ("large", 0.03), ("mixed", 0.25), ("uniform", 0.3))
    verification_share: float = 0.1  # share of "Correct?" -> Yes/No conversations in the training stream
    # (start, end) shares of training that teach the mistake family a wrong rule (`sums.MISTAKE_FAMILY`);
    # one in each window wherever a seed's learning curve puts the windows (docs/settings.md)
    mistake_spans: tuple = ((0.30, 0.36), (0.46, 0.51), (0.62, 0.68), (0.78, 0.84))
    question_weights: tuple = (0.55, 0.15, 0.15, 0.15)  # how often each phrasing appears in training
    answer_weights: tuple = (0.6, 0.25, 0.15)  # how often each answer form appears
    first_below: float = 0.3  # training checkpoints start at the last save before monitor accuracy reaches this
    evaluation_start: float = 0.35  # evaluation ones follow this share of the saves from there to the end
    # what a world must meet (notebook 00 prints them; docs/settings.md explains each)
    rules: tuple = (("first_below", 0.40), ("last_at_least", 0.85), ("regressions_per_5000", 100),
                    ("both_ways_at_least", 0.02), ("mistake_both_ways_at_least", 0.5))
    seed: int = SEED


@dataclass(frozen=True)
class Splits:
    """The evaluation question sets, disjoint from each other and from the training stream."""

    n_test: int = 5000
    n_adapter_train: int = 5000
    n_transfer_test: int = 3000
    max_operand: int = 999  # fast mode asks two-digit sums
    split_seeds: tuple = (("hundred", 100), ("test", 101), ("adapter_train", 102), ("transfer_test", 103))
    seed: int = SEED


@dataclass(frozen=True)
class PostTraining:
    """Notebook 01: a small SFT set seen many times, then GRPO against the exact-answer verifier."""

    base_accuracy: float = 0.65  # post-train the checkpoint whose monitor accuracy is closest to this
    sft_questions: int = 100
    sft_epochs: int = 20
    sft_lr: float = 1e-3
    sft_seed: int = 11  # draws the SFT questions
    grpo_steps: int = 40
    grpo_prompts: int = 64
    grpo_group: int = 8
    grpo_lr: float = 3e-4
    grpo_pool_seed: int = 12  # draws GRPO's question pool


@dataclass(frozen=True)
class SelfConsistency:
    """Beam search, sampling and rephrasing (notebook 02; SC is a method of notebooks 04-06)."""

    num_beams: int = 10  # beams searched and returned per question
    n_adapter_train: int = 2000  # adapter_train questions SC decodes (enough to fit isotonic)
    samples_k: int = 10  # samples per question for the sampling variant
    sample_seed: int = 0
    sampled_questions: int = 1000
    rephrased_questions: int = 1000


@dataclass(frozen=True)
class Verbalized:
    """The verbalized-confidence adapters (notebook 03): larger settings cost more time for little AUC."""

    k: int = 10  # answers sampled per adapter_train question for its target
    temperature: float = 1.0  # of those samples
    n_train: int = 2000  # adapter_train questions the adapter learns from (the first n of the split)
    rank: int = 16
    alpha: int = 32  # LoRA scale = alpha / rank
    targets: str = ATTENTION_AND_MLP  # the better of attention alone and attention + MLP on the validation set
    epochs: int = 4
    lr: float = 5e-3  # linearly decayed to 0
    batch_size: int = 16
    n_rephrase: int = 1000  # test questions asked in every phrasing (notebook 03, section 4)
    new_tokens: str = "\nC:%"  # the suffix's characters (the LM saw only "C", in "Correct?"); their embeddings train
    seed: int = 0


@dataclass(frozen=True)
class Adapters:
    """The confidence adapters (notebooks 05, 06): a LoRA adapter reads P(Y) after "Correct?", unscaled.

    Chosen on a validation set, never on `test` (tests/benchmarks/adapter_settings.py; docs/settings.md)."""

    rank: int = 8
    alpha: int = 16
    targets: str = ATTENTION_AND_MLP
    epochs: int = 3  # the best of 1, 2 and 3 epochs on the validation set
    batch_size: int = 64
    lr: float = 5e-3  # linearly decayed to 0
    score_batch_size: int = 1000
    fresh_seed: int = 205  # the extra questions when an adapter gets more rows than adapter_train has
    seeds: tuple = (0, 1, 2)  # each adapter trains once per seed, metrics average them (the paper's A.8.1)


@dataclass(frozen=True)
class GCM:
    """The generalized correctness model's verifier: its own run, saved at every check, a ladder of strengths.

    The run stops at the first check at or above the strongest evaluation checkpoint's test accuracy (read at
    build time, plus `stop_margin`) or at `max_steps`; its saves are the ladder (`confidence.baselines.ladder_rungs`).
    """

    seed: int = 1  # the world trains with seed 0
    batch_size: int = 256  # the world's recipe: it reaches ~0.9 in 4000 steps (batch 64 at 2e-3: 0.648 after 10,000)
    lr: float = 5e-3  # the world's rate
    warmup_steps: int = 100
    min_lr_ratio: float = 0.1  # a cosine over `max_steps` anneals the rate to this share of lr (1.0: constant)
    # operand phases cycled step by step: uniform sums (the test's distribution) with the world's subtraction share
    stream: tuple = ("uniform",)
    stop_margin: float = 0.0  # added to the strongest evaluation checkpoint's accuracy to stop (check noise +-0.012)
    # the cap (and the cosine's length): a bounded run even where no save reaches the strongest checkpoint. Measured
    # (1 thread): cosine over 3000 steps reached 0.87 at 1600, 0.91 at 3000 (663 s); a constant 5e-3 0.876 at 3000
    max_steps: int = 4000
    check_every: int = 100  # every check scores the check questions and saves the weights (a rung)
    n_check: int = 500  # fresh questions (no evaluation split) scored at every check
    check_seed: int = 301  # draws those questions (with `seed`)
    # the rung the shipped GCM uses: "median", a verifier about as accurate as the evaluated checkpoints, which
    # is what the paper's test needs (one weaker than all of them trails the oracle for that reason alone)
    shipped_rung: str = "median"
    n_examples: int = 5000  # GCM adapter rows, shared by the training checkpoints: one adapter's budget


@dataclass(frozen=True)
class Bootstrap:
    """Resamples of the paired bootstrap."""

    n_resamples: int = 1000  # default of helpers.evaluation.stats
    n_resamples_smooth_ece: int = 200  # fewer: SmoothECE is not vectorized
    table_resamples: int = 200  # per cell of the results tables of notebooks 05 and 06


@dataclass(frozen=True)
class Contrast:
    """Contrast sets smaller than these are skipped."""

    min_size: int = 500
    min_size_transfer: int = 300


@dataclass(frozen=True)
class Findings:
    """The forms of the findings' tests (notebook 06); docs/settings.md says when and how they were chosen."""

    # Domain transfer (§3.2, §B.5): "the advantage largely disappears" is an equivalence test with an absolute
    # margin. 0.05 AUC is a tenth of the scale above chance and below the smallest gap between methods the paper
    # reports as one (0.065, self-consistency against oracle training, Table 1); a margin taken from the in-domain
    # advantage would grow with the effect it is compared with.
    domain_margin: float = 0.05
    # "Both similarly poor": both methods' out-of-domain contrast AUC below 0.6, nearer chance (0.5) than any
    # method the paper calls useful on contrast sets (0.7 and above in its Table 1).
    poor_level: float = 0.6


@dataclass(frozen=True)
class Live:
    """Sizes of the from-scratch builds each notebook runs in view (all of one notebook's together: at most
    about 30 s on two cores). The cached results, built at full size by the helpers, stay the series' numbers."""

    seed: int = 0
    # notebook 00
    train_steps_00: int = 100  # the world log's first 100-step loss mean, in about 12 s on two cores
    # notebook 01
    # notebook 02
    greedy_vs_beam_questions_02: int = 5  # questions decoded live, greedy and ten beams: under 2 s
    # notebook 03
    lora_questions_03: int = 256  # live LoRA adapter's training questions: 64 steps at 4 epochs, about 2 s
    lora_read_03: int = 500  # test questions the live adapter is read on (its AUC beside the cached ones)
    # notebook 04
    # notebook 05
    adapter_rows_05: int = 256  # rows of the adapter trained in view: 12 steps at batch 64, a few seconds
    scored_answers_05: int = 1_000  # test answers both live adapters score: their check and an AUC, ~1 s
    resamples_05: int = 200  # resamples of the by-hand bootstrap, checked against the helper's: ~2 s
    # notebook 06
    multi_rows_06: int = 64  # rows per training checkpoint in the live multi-checkpoint loop: one batch each


FULL: dict[str, Any] = {
    "world": World(),
    "splits": Splits(),
    "post_training": PostTraining(),
    "self_consistency": SelfConsistency(),
    "verbalized": Verbalized(),
    "adapters": Adapters(),
    "gcm": GCM(),
    "bootstrap": Bootstrap(),
    "contrast": Contrast(),
    "findings": Findings(),
    "live": Live(),
}
FAST: dict[str, Any] = {
    "world": World(train_steps=800, batch_size=64, n_checkpoints=5, n_training_checkpoints=2, n_monitor=200,
                   warmup_steps=30, lr=5e-3, phase_majority=0.95,  # lr: 1e-2 learned less
                   # four phases: 800 steps learn too little with more
                   phases=((0.0, "small"), (1 / 3, "large"), (2 / 3, "small"), (0.8, "uniform"))),
    "splits": Splits(n_test=400, n_adapter_train=400, n_transfer_test=300, max_operand=99),
    "post_training": PostTraining(sft_questions=50, sft_epochs=5, grpo_steps=4, grpo_prompts=16, grpo_group=4),
    "self_consistency": SelfConsistency(n_adapter_train=200, sampled_questions=100, rephrased_questions=100),
    "verbalized": Verbalized(n_train=400, epochs=2, n_rephrase=100),
    "adapters": Adapters(epochs=1, batch_size=32, seeds=(0, 1)),  # two seeds: the averaging runs, at 2/3 the cost
    "gcm": GCM(batch_size=32, lr=1e-2, max_steps=200, check_every=50, n_check=100, n_examples=400),
    # fewer resamples: notebook 03's findings in a quarter of the time
    "bootstrap": Bootstrap(n_resamples=200, n_resamples_smooth_ece=50, table_resamples=50),
    "contrast": Contrast(min_size=5, min_size_transfer=5),
    "findings": Findings(),
    "live": Live(),  # the full size: the fast log also saves every 100 steps
}


# ---------------------------------------------------------------------------- reading and overriding them

# The machinery (overrides, and the record of what a build reads) is helpers.config.recorded.
from helpers.config import recorded  # noqa: E402

recorded.install(FULL, FAST, fast_mode)
canonical, current, value, generation = recorded.canonical, recorded.current, recorded.value, recorded.generation
Group, override, reset, overrides, recording = (recorded.Group, recorded.override, recorded.reset, recorded.overrides,
                                               recorded.recording)

world = recorded.accessor("world")
splits = recorded.accessor("splits")
post_training = recorded.accessor("post_training")
self_consistency = recorded.accessor("self_consistency")
verbalized = recorded.accessor("verbalized")
adapters = recorded.accessor("adapters")
gcm = recorded.accessor("gcm")
bootstrap = recorded.accessor("bootstrap")
contrast = recorded.accessor("contrast")
findings = recorded.accessor("findings")
live = recorded.accessor("live")

recorded.overrides_from_environment()  # HELPERS_OVERRIDES, for notebook kernels and tests
