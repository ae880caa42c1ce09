"""Choose the confidence adapters' settings on a validation set, never on `test` (notebooks 05, 06).

    python tests/benchmarks/adapter_settings.py [--full] [--cache DIR]

For each candidate (LoRA targets × epochs), trains the oracle adapter of the *last training checkpoint*
(no evaluation checkpoint is involved) and scores it on fresh validation questions: sums outside every
evaluation split, answered greedily by that checkpoint. Prints the validation AUC and Brier of each
candidate, and the one `config.adapters()` uses. Each candidate is cached in its own temporary cache
folder unless --cache is given.
"""
from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np
import pandas as pd


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--full", action="store_true", help="full-size world (default: fast mode)")
    parser.add_argument("--cache", default=None, help="the cache holding the world (its adapters are added there)")
    parser.add_argument("--n-validation", type=int, default=2000)
    args = parser.parse_args()
    os.environ["HELPERS_FAST"] = "0" if args.full else "1"
    os.environ["HELPERS_LONG_BUILDS"] = "1"  # it trains adapters (and, in an empty cache, a world) on purpose
    os.environ.setdefault("HELPERS_CACHE", args.cache or tempfile.mkdtemp(prefix="adapter-settings-"))

    from helpers import config, pipeline
    from helpers.evaluation import metrics
    from helpers.world import sums
    from helpers.pipeline.checkpoints import get_checkpoints
    from helpers.pipeline.checkpoints import load_checkpoint
    from helpers.confidence.readout import adapter_confidence
    from helpers.world.decoding import greedy
    from helpers.world.lora import attach

    config.set_threads()
    source = get_checkpoints().training[-1]
    validation = sums.fresh_questions(np.random.default_rng([config.SEED, 4242]), args.n_validation)
    base, tokenizer = load_checkpoint(source)
    answers = greedy(base, tokenizer, validation, progress=False).merge(validation[["question_id", "question"]],
                                                                       on="question_id")
    chosen = config.adapters()
    rows = []
    for targets_name, targets in (("attention", config.ATTENTION), ("attention and MLP", config.ATTENTION_AND_MLP)):
        for epochs in (1, 2, 3):
            with config.override("adapters", targets=targets, epochs=epochs):
                adapter = pipeline.adapters.train_adapter(source)
                model = attach(load_checkpoint(source)[0], adapter.folder)
                conf = adapter_confidence(model, tokenizer, answers["question"], answers["text"])
            summary = metrics.summary_metrics(conf, answers["correct"])
            rows.append({"targets": targets_name, "epochs": epochs, "validation AUC": summary["auroc"],
                         "validation Brier": summary["brier"],
                         "used": targets == chosen.targets and epochs == chosen.epochs})
    table = pd.DataFrame(rows)
    print(f"checkpoint {source}, {len(answers)} validation questions, accuracy {answers['correct'].mean():.3f}")
    print(table.round(3).to_string(index=False))
    best = table.sort_values("validation AUC", ascending=False).iloc[0]
    print(f"best on validation: {best['targets']}, {best['epochs']} epochs (AUC {best['validation AUC']:.3f})")


if __name__ == "__main__":
    main()
