"""Time helpers.evaluation.stats.paired_bootstrap (not collected by pytest: run it as a script).

    python tests/benchmarks/bench_stats.py

Target: 1,000 resamples of 5,000 questions for AUC, Brier and binned ECE together in
<= 2 s on 2 cores. SmoothECE is not vectorized, so it is timed per call.
"""
import time

import numpy as np
import pandas as pd

from helpers.evaluation import metrics
from helpers.evaluation.stats import paired_bootstrap

N_QUESTIONS = 5_000
N_RESAMPLES = 1_000


def synthetic_methods(n_questions: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    p = rng.uniform(size=n_questions)
    correct = rng.uniform(size=n_questions) < p
    frame = pd.DataFrame({"question_id": np.arange(n_questions), "correct": correct})
    # Rounded to 1% so that ties occur, as they do with real confidences.
    return frame.assign(confidence=np.round(p, 2)), frame.assign(confidence=np.round(p**1.3, 2))


def main() -> None:
    a, b = synthetic_methods(N_QUESTIONS)
    start = time.perf_counter()
    for metric in ("auc", "brier", "ece"):
        t0 = time.perf_counter()
        out = paired_bootstrap(metric, a, b, strata="correct", n=N_RESAMPLES)
        print(f"{metric:>6}: {time.perf_counter() - t0:6.3f} s  difference {out['difference']:+.4f}  "
              f"interval ({out['lower']:+.4f}, {out['upper']:+.4f})")
    total = time.perf_counter() - start
    print(f"auc + brier + ece, {N_RESAMPLES} resamples x {N_QUESTIONS} questions: {total:.3f} s (target <= 2 s)")

    calls = 20
    t0 = time.perf_counter()
    for _ in range(calls):
        metrics.smooth_ece(a["confidence"], a["correct"])
    per_call = (time.perf_counter() - t0) / calls
    print(f"smooth_ece on {N_QUESTIONS} values: {1000 * per_call:.1f} ms per call "
          f"(paired_bootstrap with n=200 makes 2 x 200 calls: ~{400 * per_call:.1f} s)")


if __name__ == "__main__":
    main()
