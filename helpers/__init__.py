"""Helpers for the notebook series on the confidence calibration of language models.

The package is in layers, one folder each (``config`` is one module), in import order; a module imports
only from its own layer or lower ones (tests/test_layers.py checks it, and that no artifact is loaded by
name from a higher layer than its builder's):

- ``config``: every size, seed and hyper-parameter, in one place a user overrides
- ``cache/``: train-or-load (``artifacts``) and the shipped world (``shipped``): machinery
- ``evaluation/``: metrics, contrast sets, bootstrap statistics and the claims decided by them
- ``world/``: the sum world, the tiny GPT-2, its training run, checkpoints, decoding, post-training
- ``confidence/``: the confidence methods (self-consistency, verbalized, adapters, baselines, ...)
- ``results/``: the results tables of notebooks 05 and 06
- ``figures/``: plots and the ipywidgets explorers
- ``build/``: the notebooks' setup cell, the answer twins and the command line: machinery

Importing the package imports every module that registers a cached artifact (below), so that
`helpers.cache.artifacts` can build any artifact by name without importing its builders.
"""
import os
import platform
import warnings
from pathlib import Path

# Torch and numpy pick their CPU kernels by what the processor offers, AVX-512 ones where it has them, and
# kernels of another width sum floats in another order: on an AVX-512 machine, 100 steps of the world's training
# run ended 1.3e-3 away from the shipped run in loss, and numpy's AVX-512 loops moved the results tables by up
# to 2e-14. The shipped world was built with torch's AVX2 kernels and numpy's AVX2 loops, which most x86-64
# processors made since 2015 run, so the series asks for them: torch reads ATEN_CPU_CAPABILITY at its first
# kernel call and numpy reads NPY_DISABLE_CPU_FEATURES when it is imported, and this runs before either (a
# process that imported numpy before helpers keeps its loops; tests/conftest.py imports helpers first).
# A value already set is kept; `helpers.build.notebook.setup` says where the kernels in use are not these.
CPU_KERNELS = "AVX2"
NUMPY_AVX512 = "X86_V4 AVX512_ICL AVX512_SPR"  # numpy's AVX-512 dispatch targets (numpy 2.4)


def _cpu_flags() -> set[str]:
    """The processor's flags on x86-64 Linux ("avx2", "avx512f", ...); elsewhere none."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return set()
    try:
        return set(Path("/proc/cpuinfo").read_text().split())
    except OSError:  # not Linux: torch and numpy pick (set both variables by hand for the shipped floats)
        return set()


def _pin_cpu_kernels() -> None:
    flags = _cpu_flags()
    if "avx2" in flags:
        os.environ.setdefault("ATEN_CPU_CAPABILITY", CPU_KERNELS.lower())
    if "avx512f" in flags:
        os.environ.setdefault("NPY_DISABLE_CPU_FEATURES", NUMPY_AVX512)


_pin_cpu_kernels()

# tqdm.auto (imported by transformers) warns in Jupyter when ipywidgets is absent; the series
# uses plain text progress bars on purpose, so that committed notebooks carry no widget state.
warnings.filterwarnings("ignore", message="IProgress not found")

LAYERS = ["config", "cache", "evaluation", "world", "confidence", "pipeline", "figures", "build"]

# The pipeline imports every module that registers a builder (`@artifacts.register`), so that any artifact can be
# built by name.
from helpers import pipeline  # noqa: E402,F401
