"""Time helpers.evaluation.metrics' binned ECE, Brier and AUROC next to torchmetrics and netcal.

    python tests/benchmarks/bench_metrics.py

Not collected by pytest (only test_*.py files are). torchmetrics and netcal are optional
(`pip install -e .[bench]`); a missing one shows as "not installed".
Target: our binned ECE takes <= 0.5x torchmetrics' binary_calibration_error time at n = 1e6 and 1e7.
"""
import time

import numpy as np

from helpers.evaluation.metrics import auroc, brier_score, expected_calibration_error

SIZES = (10**4, 10**5, 10**6, 10**7)
N_BINS = 15
REPEATS = 3

try:
    import torch
    from torchmetrics.functional.classification import binary_calibration_error
except ImportError:
    binary_calibration_error = None
try:
    from netcal.metrics import ECE as NetcalECE
except ImportError:
    NetcalECE = None


def best_of(fn, repeats=REPEATS):
    """(fastest wall time in seconds, value) over `repeats` calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return min(times), float(value)


def data(n, seed=0):
    # Labels ~ Bernoulli(confidence**1.3): mildly overconfident, like a real model.
    rng = np.random.default_rng(seed)
    conf = rng.beta(4, 2, size=n)
    return conf, rng.uniform(size=n) < conf**1.3


def main():
    header = (f"{'n':>10} | {'ours ECE':>9} {'torchm.':>9} {'ratio':>6} {'netcal':>13} | "
              f"{'Brier':>8} {'AUROC':>8} | ECE values (ours, torchmetrics, netcal)")
    print(f"best of {REPEATS}, seconds; ratio = ours / torchmetrics; {N_BINS} equal-width bins, l1")
    print(header)
    print("-" * len(header))
    for n in SIZES:
        conf, correct = data(n)
        t_ours, v_ours = best_of(lambda: expected_calibration_error(conf, correct, N_BINS))
        t_brier, _ = best_of(lambda: brier_score(conf, correct))
        t_auc, _ = best_of(lambda: auroc(conf, correct))

        if binary_calibration_error is None:
            tm_cell, ratio_cell, v_tm = f"{'not installed':>9}", f"{'':>6}", "-"
        else:
            preds, target = torch.from_numpy(conf), torch.from_numpy(correct.astype(np.int64))
            t_tm, v = best_of(lambda: binary_calibration_error(preds, target, n_bins=N_BINS, norm="l1"))
            tm_cell, ratio_cell, v_tm = f"{t_tm:9.4f}", f"{t_ours / t_tm:6.3f}", f"{v:.5f}"

        if NetcalECE is None:
            nc_cell, v_nc = f"{'not installed':>13}", "-"
        else:
            netcal = NetcalECE(bins=N_BINS)
            t_nc, v = best_of(lambda: netcal.measure(conf, correct.astype(np.int64)))
            nc_cell, v_nc = f"{t_nc:13.4f}", f"{v:.5f}"

        print(f"{n:>10} | {t_ours:9.4f} {tm_cell} {ratio_cell} {nc_cell} | {t_brier:8.4f} {t_auc:8.4f} | "
              f"{v_ours:.5f}, {v_tm}, {v_nc}")


if __name__ == "__main__":
    main()
