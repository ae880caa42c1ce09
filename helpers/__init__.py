"""Helpers for the notebook series on the confidence calibration of language models.

The modules form layers; each imports only modules of lower layers (tests/test_layers.py checks it,
and that no two modules import each other, directly or through others):

0. ``config`` (every setting), ``validation`` (argument checks)
1. ``sums`` (questions and splits), ``artifacts`` (the cache), ``metrics``
2. ``model`` (tokenizer and GPT-2), ``loop`` (the training loop), ``contrast`` (contrast sets), ``plots``,
   ``shipped`` (the trained world committed under data/world/)
3. ``lora`` (the one LoRA implementation), ``checkpoints`` (which exist, where, loading), ``stats`` (bootstrap)
4. ``decoding`` (greedy, sampling, beams; cached greedy results), ``shared_bootstrap`` (the bootstrap over pairs)
5. ``training`` (the world's run and the checkpoint selection)
6. ``rl`` (notebook 01's post-training) and ``confidence.*`` (the methods; acyclic among themselves)
7. ``comparison`` (the results tables of notebooks 05 and 06), ``findings`` (the claims, decided by the bootstrap),
   ``explorers`` (ipywidgets controls over the figures)
8. ``notebook`` (the setup cell), ``twins`` (the learner's notebooks, derived from the answer twins),
   ``__main__`` (the command line)

Importing the package imports the modules that register cached artifacts (``training``,
``decoding``, ``rl``, ``confidence.*``, ``comparison``), so that `helpers.artifacts` can build any
artifact by name without importing its users.
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
# A value already set is kept; `helpers.notebook.setup` says where the kernels in use are not these.
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

LAYERS = [
    ["config", "validation"],
    ["sums", "artifacts", "metrics"],
    ["model", "loop", "contrast", "plots", "shipped"],
    ["lora", "checkpoints", "stats"],
    ["decoding", "shared_bootstrap"],
    ["training"],
    ["rl", "confidence"],
    ["comparison", "findings", "explorers"],
    ["notebook", "twins", "__main__"],
]

from . import comparison, decoding, rl, training  # noqa: E402,F401  (register their builders)
from .confidence import feature_variance, verbalized  # noqa: E402,F401  (not imported by the modules above)
