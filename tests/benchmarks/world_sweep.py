"""Is the world robust? Train it with several seeds and thread counts and check the foundation's rules.

    python tests/benchmarks/world_sweep.py --seeds 0 1 2 --threads 1 2 [--phases '[[0, "small"], ...]'] [--full]

Each run trains the world (the `world` and `selection` artifacts) in its own temporary cache with the
given `config.world().seed` and torch thread count, then scores every selected checkpoint greedily on
`test` and `transfer_test` and prints one row: the selection, the first and last accuracy, the
evaluation pairs with at least `config.contrast().min_size` contrast questions, the fewest regressions
between neighbouring evaluation checkpoints, the largest subtraction contrast set, and, per window
(training, evaluation) and operand range, how many questions improve and regress between neighbouring
checkpoints. Not part of `make test`: a full-size run takes about 6 minutes on two cores.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile

import numpy as np
import pandas as pd


def _window_flips(correct: pd.DataFrame, names: list[str], mask: np.ndarray) -> tuple[int, int]:
    """(improvements, regressions) summed over neighbouring checkpoints of `names`, on the masked questions."""
    up = down = 0
    for a, b in zip(names, names[1:]):
        ca, cb = correct[a].to_numpy()[mask], correct[b].to_numpy()[mask]
        up += int((~ca & cb).sum())
        down += int((ca & ~cb).sum())
    return up, down


def one_run(seed: int, threads: int, phases=None) -> dict:
    os.environ["HELPERS_CACHE"] = tempfile.mkdtemp(prefix=f"world-s{seed}-t{threads}-")
    os.environ["HELPERS_THREADS"] = str(threads)  # the builders call config.set_threads(), which reads it
    from helpers import config, contrast, sums
    from helpers.checkpoints import get_checkpoints
    from helpers.decoding import greedy_results

    config.set_threads(threads)
    changes = {"seed": seed} | ({"phases": tuple(tuple(p) for p in phases)} if phases else {})
    with config.override("world", **changes):
        ck = get_checkpoints()
        test, sub = greedy_results("test"), greedy_results("transfer_test")
        questions = sums.split("test").set_index("question_id")
        correct = test.pivot(index="question_id", columns="checkpoint", values="correct").loc[questions.index]
        small = questions["small"].to_numpy()
        acc = correct.mean()
        min_size, min_sub = config.contrast().min_size, config.contrast().min_size_transfer
        flips = contrast.flip_counts(test, ck.evaluation)
        neighbours = contrast.flip_counts(test, ck.evaluation).merge(
            pd.DataFrame(contrast.consecutive_pairs(ck.evaluation), columns=["ckpt_i", "ckpt_j"]))
        sub_flips = contrast.flip_counts(sub, ck.evaluation)
        row = {"seed": seed, "threads": threads, "training": " ".join(n[5:] for n in ck.training),
               "evaluation": " ".join(n[5:] for n in ck.evaluation),
               "first acc": round(float(acc[ck.all[0]]), 3), "last acc": round(float(acc[ck.all[-1]]), 3),
               f"pairs >= {min_size}": f"{int((flips['contrast'] >= min_size).sum())}/{len(flips)}",
               "min neighbour regressions": int(neighbours["regressions"].min()),
               f"sub pairs >= {min_sub}": int((sub_flips["contrast"] >= min_sub).sum()),
               "largest sub contrast": int(sub_flips["contrast"].max()),
               "sub acc (eval)": round(float(sub[sub["checkpoint"].isin(ck.evaluation)]["correct"].mean()), 3)}
        for window, names in (("train", list(ck.training)), ("eval", list(ck.evaluation))):
            for label, mask in (("small", small), ("large", ~small)):
                up, down = _window_flips(correct, names, mask)
                row[f"{window} {label} +/-"] = f"{up}/{down}"
            sub_correct = sub.pivot(index="question_id", columns="checkpoint", values="correct")
            up, down = _window_flips(sub_correct, names, np.ones(len(sub_correct), dtype=bool))
            row[f"{window} sub +/-"] = f"{up}/{down}"
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--phases", default=None, help='the mixture as JSON, e.g. [[0, "small"], [0.5, "uniform"]]')
    parser.add_argument("--full", action="store_true", help="full-size world (default: fast mode)")
    args = parser.parse_args()
    os.environ["HELPERS_FAST"] = "0" if args.full else "1"
    phases = json.loads(args.phases) if args.phases else None
    rows = [one_run(seed, threads, phases) for seed in args.seeds for threads in args.threads]
    with pd.option_context("display.width", 250, "display.max_columns", None):
        print(pd.DataFrame(rows).set_index(["seed", "threads"]).T.to_string())


if __name__ == "__main__":
    main()
