"""Cold and warm cost of the series (`make bench`, not part of `make test`).

Cold: what every cached artifact took to build, read from the manifests in data/cache/full (so run
`make data` first; a fresh clone's cold run is the sum). Warm: every notebook executed again with
the cache in place, with its wall time and the peak RSS of its kernel.
"""
from __future__ import annotations

import resource
import sys
import time
from collections import defaultdict

from helpers.cache import artifacts
from helpers.build.cli import notebook_paths, run_notebook

FROM_SCRATCH_TARGET_S = 20 * 60  # `make world` on 2 cores (issue: ship the trained world)
WARM_TARGET_S = 5 * 60  # `make notebooks` on a fresh clone, with the shipped world


def cold_table() -> None:
    seconds, counts = defaultdict(float), defaultdict(int)
    for m in artifacts.valid_entries():  # the entries of the current settings, not older side-by-side ones
        seconds[m["name"]] += m.get("own_seconds", m.get("seconds", 0.0))  # own: nested builds counted once
        counts[m["name"]] += 1
    print(f"{'artifact':<22}{'entries':>8}{'build s':>10}")
    for name in sorted(seconds, key=seconds.get, reverse=True):
        print(f"{name:<22}{counts[name]:>8}{seconds[name]:>10.0f}")
    total = sum(seconds.values())
    print(f"{'cold total':<22}{sum(counts.values()):>8}{total:>10.0f}")
    verdict = "within" if total <= FROM_SCRATCH_TARGET_S else f"{total / FROM_SCRATCH_TARGET_S:.1f}x over"
    print(f"from-scratch target {FROM_SCRATCH_TARGET_S} s: {verdict} "
          "(builds only; `make world` also runs the notebooks)")


def warm_table() -> None:
    print(f"\n{'notebook':<40}{'warm s':>8}{'peak RSS MB':>13}")
    total = 0.0
    for path in notebook_paths():
        start = time.perf_counter()
        run_notebook(path, inplace=False)
        took = time.perf_counter() - start
        total += took
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the largest kernel so far
        print(f"{path.name:<40}{took:>8.1f}{rss:>13.0f}", flush=True)
    print(f"{'warm total':<40}{total:>8.1f}")
    print(f"warm target {WARM_TARGET_S} s: {'within' if total <= WARM_TARGET_S else 'over'}")


if __name__ == "__main__":
    cold_table()
    if "--cold-only" not in sys.argv:
        warm_table()
