"""What a from-scratch build costs, measured against what this machine can do (`make bench`; issue 42).

    python tests/benchmarks/bench_build.py [--steps 20]

Two tables:

1. **Stages**: the build seconds recorded in the manifests of the current full-mode cache (`make data` or a
   build first), grouped by the stage of `python -m helpers build` that makes each artifact, with each
   stage's share of the total. Seconds are the builders' own (nested builds counted once), on whatever the
   machine was doing when the entry was built.
2. **The training step against the machine**: a short timed sample of the world's training run (the same
   model, batch, loss and optimizer, `config.world()`, on `config.threads()` torch threads), split into the
   text-to-tokens part and the rest, with the achieved FLOP/s by the 6·N·T rule (N parameters, T answer-and-
   prompt tokens of the batch) as a ratio to the FLOP/s a plain matmul reaches in the same process on the same
   threads (a 1024×1024 one, and one of the model's own shape). Machines of this kind differ by 2×; the
   ratio is the figure to improve, not the seconds.
"""
from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict

import numpy as np
import pandas as pd
import torch

os.environ.setdefault("HELPERS_FAST", "0")

from helpers import config  # noqa: E402
from helpers.cache import artifacts  # noqa: E402
from helpers.world import sums  # noqa: E402
from helpers.world.model import build_model, build_tokenizer  # noqa: E402
from helpers.world.training import encode_training_pairs, training_step_loss  # noqa: E402

# The stage of `python -m helpers build` (helpers.build.cli.stages) that builds each artifact.
STAGES = {
    "world": ("world", "selection"),
    "greedy": ("greedy",),
    "inference-time methods": ("beams", "samples", "rephrasings", "post_training", "verbalized_targets",
                               "verbalized_adapter", "verbalized", "verbalized_rephrasings", "p_true"),
    "adapters and baselines": ("adapter", "adapter_results", "multi_answer_adapter", "gcm_verifier", "gcm",
                               "gcm_results", "verifier_answers", "feature_variance"),
    "tables and findings": ("comparison", "claim", "transfer_claim", "random_claim", "domain_claim",
                            "sc_differences", "verbalized_findings"),
}


def stage_table() -> None:
    by_name = defaultdict(float)
    for m in artifacts.valid_entries():
        by_name[m["name"]] += m.get("own_seconds", m.get("seconds", 0.0))
    stage_of = {name: stage for stage, names in STAGES.items() for name in names}
    seconds = defaultdict(float)
    for name, s in by_name.items():
        seconds[stage_of.get(name, "other")] += s
    total = sum(seconds.values()) or float("nan")
    print(f"{'stage':<26}{'build s':>10}{'share':>8}")
    for stage in [*STAGES, "other"]:
        if stage in seconds:
            print(f"{stage:<26}{seconds[stage]:>10.0f}{seconds[stage] / total:>8.0%}")
    print(f"{'total (the notebooks apart)':<26}{total:>10.0f}   target of `make world`: {20 * 60} s with the notebooks")


def matmul_flops(m: int, k: int, n: int, seconds: float = 1.0) -> float:
    """FLOP/s of an (m, k) @ (k, n) float32 matmul, repeated for about `seconds`."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    for _ in range(3):
        a @ b
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        count += 1
    return 2 * m * k * n * count / (time.perf_counter() - start)


def training_sample(steps: int) -> dict:
    """Seconds per step of the world's training step, the tokenizing part apart, and its FLOP/s (6·N·T)."""
    s = config.world()
    config.set_seed(s.seed)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    optim = torch.optim.AdamW(model.parameters(), lr=s.lr, weight_decay=s.weight_decay)
    rng = np.random.default_rng([s.seed, 7])
    held_out = sums.held_out_ids()
    n_params = sum(p.numel() for p in model.parameters())
    encode_s, step_s, tokens = 0.0, 0.0, 0
    for step in range(steps + 2):  # the first two warm up and are not timed
        pairs = sums.training_batch(rng, s.batch_size, sums.phase_at(step, s.train_steps), held_out)
        t0 = time.perf_counter()
        encoded = encode_training_pairs(tokenizer, pairs)  # the text-to-tokens part alone, timed apart
        t1 = time.perf_counter()
        optim.zero_grad()
        training_step_loss(model, tokenizer, pairs)  # the world's own step (it encodes again, in buckets)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        t2 = time.perf_counter()
        if step >= 2:
            encode_s += t1 - t0
            step_s += t2 - t1 - (t1 - t0)  # the step without its own encoding, taken as long as the one timed
            tokens += int(encoded["attention_mask"].sum())
    per_step = (encode_s + step_s) / steps
    return {"params": n_params, "tokens per step": tokens / steps, "s per step": per_step,
            "s tokenizing": encode_s / steps, "flops": 6 * n_params * tokens / steps / per_step}


def adapter_sample(rows: int = 1280) -> dict:
    """Seconds per optimizer step of a confidence adapter's training (`adapters.fit_adapter`, one epoch of
    `rows` verification prompts at `config.adapters().batch_size`, on a fresh model) and its FLOP/s by 6·N·T
    (N the model's parameters, through which every step runs forward and back; T the batch's prompt tokens)."""
    from helpers.confidence import adapters
    from helpers.confidence.readout import encode_verification

    tokenizer = build_tokenizer()
    config.set_seed(0)
    model = build_model(tokenizer)
    questions = sums.split("adapter_train").iloc[:rows]
    rng = np.random.default_rng(0)
    label = rng.random(rows) < 0.5
    text = np.where(label, questions["target"], questions["target"] + 1).astype(str)
    examples = pd.DataFrame({"question": questions["question"].to_numpy(), "text": text, "label": label.astype(int)})
    tokens = int(encode_verification(tokenizer, examples["question"].tolist(), text.tolist())["attention_mask"].sum())
    with config.override("adapters", epochs=1):
        _, log = adapters.fit_adapter(model, tokenizer, examples)
    n_params = sum(p.numel() for p in build_model(tokenizer).parameters())
    per_step = log["seconds"] / log["n_batches"]
    return {"s per step": per_step, "flops": 6 * n_params * tokens / log["seconds"], "steps": log["n_batches"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20, help="timed training steps (after two untimed ones)")
    args = parser.parse_args()
    config.set_threads()
    stage_table()
    peak = matmul_flops(1024, 1024, 1024)
    shape = matmul_flops(2560, 64, 256)
    sample = training_sample(args.steps)
    print(f"\ntorch threads: {torch.get_num_threads()}")
    print(f"plain matmul 1024x1024x1024: {peak / 1e9:.0f} GFLOP/s; the model's shape 2560x64 @ 64x256: "
          f"{shape / 1e9:.0f} GFLOP/s")
    print(f"training step ({args.steps} timed): {sample['s per step'] * 1000:.0f} ms, of which tokenizing "
          f"{sample['s tokenizing'] * 1000:.0f} ms ({sample['s tokenizing'] / sample['s per step']:.0%}); "
          f"{sample['params']:,} parameters, {sample['tokens per step']:,.0f} tokens per step")
    print(f"achieved {sample['flops'] / 1e9:.0f} GFLOP/s by 6·N·T: {sample['flops'] / peak:.2f} of the plain "
          f"matmul's peak (the figure to raise)")
    adapter = adapter_sample()
    print(f"confidence adapter step ({adapter['steps']} steps of batch {config.adapters().batch_size}): "
          f"{adapter['s per step'] * 1000:.0f} ms, {adapter['flops'] / 1e9:.0f} GFLOP/s by 6·N·T: "
          f"{adapter['flops'] / peak:.2f} of the plain matmul's peak")


if __name__ == "__main__":
    main()
