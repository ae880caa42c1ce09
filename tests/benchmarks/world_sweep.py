"""Is the world robust? Train it with several seeds and thread counts and check the foundation's rules.

    python tests/benchmarks/world_sweep.py --seeds 0 1 2 --threads 1 2 [--world '{"phases": [[0, "small"], ...]}']
        [--full] [--cache DIR]
    python tests/benchmarks/world_sweep.py --full --seeds 1 --threads 2 --branch-at 0.81
        --endings '{"A": [[0.81, "uniform"]], ...}'

Each run trains the world (the `world` and `selection` artifacts) in its own temporary cache with the
given `config.world().seed` and torch thread count, then prints one column: the selection, every rule
of `helpers.world.training.world_rules` (first and last accuracy, contrast-set sizes, regressions, subtraction
contrast sets) and whether it holds, the largest rise and fall of accuracy per window and kind of
question (the mistake family included), per selected checkpoint the mistake family's and the other sums'
accuracy and the share of wrong answers that are consistent across phrasings
(`self_consistency.consistent_errors`), and the difficulty baseline's full-set AUC on the evaluation
checkpoints when fitted on the training checkpoints and when fitted on the evaluation checkpoints.
Not part of `make test`: a full-size run takes about 13 minutes on one core.

`--branch-at F --endings JSON` compares endings of the mixture: the steps before share F of the run are
trained once per seed and thread count (`train_run(keep_state=True)`), and each ending (the phases from F
on) continues from that state (`train_run(resume=...)`), which gives bit for bit the run that the whole
mixture trains from scratch (tests/test_robustness.py). An ending of the last quarter costs about a
quarter of a run.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd


def _tuples(value):
    """JSON lists as the tuples the frozen settings hold."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def one_run(seed: int, threads: int, world=None, cache: str | None = None) -> dict:
    os.environ["HELPERS_CACHE"] = cache or tempfile.mkdtemp(prefix=f"world-s{seed}-t{threads}-")
    os.environ["HELPERS_THREADS"] = str(threads)  # the builders call config.set_threads(), which reads it
    from helpers import config
    from helpers.evaluation import metrics
    from helpers.pipeline.checkpoints import get_checkpoints
    from helpers.pipeline.baselines import difficulty_results
    from helpers.confidence.self_consistency import consistent_errors
    from helpers.pipeline.decoded import rephrasing_results
    from helpers.pipeline.world_rules import world_rules

    config.set_threads(threads)
    changes = {"seed": seed} | {k: _tuples(v) for k, v in (world or {}).items()}
    with config.override("world", **changes):
        ck = get_checkpoints()
        rules = world_rules()
        row = {"seed": seed, "threads": threads, "cache": os.environ["HELPERS_CACHE"],
               "training": " ".join(n[5:] for n in ck.training), "evaluation": " ".join(n[5:] for n in ck.evaluation)}
        row.update({name: value for name, (value, _) in rules["values"].items()})
        row["rules hold"] = all(ok for _, ok in rules["values"].values())
        for (window, group), r in rules["windows"].iterrows():
            row[f"{window} {group}: rise/fall"] = f"{r['largest rise']:.2f}/{r['largest fall']:.2f}"
        errors = consistent_errors(rephrasing_results(ck.all)).set_index(["group", "checkpoint"])
        for group in ("mistake family", "other sums"):
            part = errors.loc[group].reindex(list(ck.all))
            row[f"{group}: accuracy"] = " ".join(f"{x:.2f}" for x in part["accuracy"])
            row[f"{group}: consistent share of wrong"] = " ".join(f"{x:.2f}" for x in part["consistent share of wrong"])
        needed = rules["windows"][rules["windows"]["needed"]]
        row["all move both ways"] = bool(rules["windows"]["both ways"].all())
        row["all needed move both ways"] = bool(needed["both ways"].all())
        for fit_on in ("training", "evaluation"):
            # A window that answers nothing right gets the baseline's constant (it warns), so AUC 0.5.
            df = difficulty_results("test", ck.evaluation, train_checkpoints=getattr(ck, fit_on))
            row[f"difficulty AUC, fit on {fit_on}"] = round(metrics.full_set_metrics(df, ck.evaluation)["auc"], 3)
    print(json.dumps(row, default=str), flush=True)  # each run as it ends; the table after the last
    return row


def branched_runs(seed: int, threads: int, at: float, endings: dict, world=None) -> list[dict]:
    """One run per ending, from the state the shared steps (before share `at`) reach; see the module docstring."""
    os.environ["HELPERS_THREADS"] = str(threads)
    from helpers.cache import artifacts
    from helpers import config
    from helpers.world import training

    base = {"seed": seed} | {k: _tuples(v) for k, v in (world or {}).items()}
    head = Path(tempfile.mkdtemp(prefix=f"world-s{seed}-t{threads}-head-"))
    with config.override("world", **base):
        steps = round(at * config.world().train_steps)
        head_log, state = training.train_run(head, stop_after=steps, keep_state=True)
        shared = tuple(p for p in config.world().phases if p[0] < at)
    original, rows = artifacts.REGISTRY["world"].build, []

    def resumed(folder: Path) -> dict:  # the `world` builder, from the shared state on
        shutil.copytree(head / "checkpoints", folder / "checkpoints")
        return {"log": pd.concat([head_log, training.train_run(folder, resume=state)], ignore_index=True)}

    try:
        artifacts.REGISTRY["world"].build = resumed
        for name, ending in endings.items():
            phases = [list(p) for p in shared] + ending
            cache = tempfile.mkdtemp(prefix=f"world-s{seed}-t{threads}-{name}-")
            rows.append({"ending": name, **one_run(seed, threads, (world or {}) | {"phases": phases}, cache)})
    finally:
        artifacts.REGISTRY["world"].build = original
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--world", default=None,
                        help='`config.world()` overrides as JSON, e.g. {"phases": [[0, "small"], [0.5, "uniform"]]}')
    parser.add_argument("--full", action="store_true", help="full-size world (default: fast mode)")
    parser.add_argument("--cache", default=None, help="reuse this cache folder (one seed and thread count)")
    parser.add_argument("--branch-at", type=float, default=None, help="share of the run the endings share")
    parser.add_argument("--endings", default=None, help='name -> phases from --branch-at on, as JSON')
    args = parser.parse_args()
    os.environ["HELPERS_FAST"] = "0" if args.full else "1"
    os.environ["HELPERS_LONG_BUILDS"] = "1"  # a sweep trains worlds on purpose (helpers.cache.artifacts)
    world = json.loads(args.world) if args.world else None
    if args.branch_at is None:
        rows = [one_run(seed, threads, world, args.cache) for seed in args.seeds for threads in args.threads]
        index = ["seed", "threads"]
    else:
        endings = json.loads(args.endings)
        rows = [row for seed in args.seeds for threads in args.threads
                for row in branched_runs(seed, threads, args.branch_at, endings, world)]
        index = ["ending", "seed", "threads"]
    with pd.option_context("display.width", 250, "display.max_columns", None):
        print(pd.DataFrame(rows).set_index(index).T.to_string())


if __name__ == "__main__":
    main()
