"""The setup cell every notebook starts with.
"""
from __future__ import annotations

import platform
from importlib import metadata

from helpers import config
from helpers.cache.kernels import BLAS_KERNELS, CPU_KERNELS, NUMPY_AVX512, blas_kernels
from helpers.cache import shipped
from helpers.figures.plots import use_style

_SHOWN = ("torch", "transformers", "peft", "numpy", "pandas", "scikit-learn", "relplot", "matplotlib")


def torch_numpy_kernels() -> str:
    """The CPU kernels torch uses here ("AVX2", "AVX512", "DEFAULT", ...; helpers pins AVX2 where it can),
    plus ", numpy AVX-512" where numpy runs its AVX-512 loops (helpers turns them off where it can)."""
    import torch  # local: importing this module stays light
    from numpy._core._multiarray_umath import __cpu_features__  # local: beside torch, read when asked

    numpy_avx512 = any(__cpu_features__.get(name, False) for name in NUMPY_AVX512.split())  # the targets pinned off
    return torch.backends.cpu.get_cpu_capability() + (", numpy AVX-512" if numpy_avx512 else "")


def cpu_kernels() -> str:
    """`torch_numpy_kernels`, plus ", MKL AVX2" (or "other") where MKL's matrix products run other kernels
    than the world's (no pin can change those: helpers.cache.kernels). The world's: CPU_KERNELS exactly."""
    blas = blas_kernels()
    return torch_numpy_kernels() + ("" if blas == BLAS_KERNELS else f", MKL {blas}")


def setup(seed: int = config.SEED) -> None:
    """Seed everything, set threads and the plot style; print versions, the mode, whether the shipped
    world is in use (unpacking it if needed), and any changed settings."""
    config.set_seed(seed)
    threads = config.set_threads()
    use_style()
    versions = ", ".join(f"{p} {metadata.version(p)}" for p in _SHOWN)
    print(f"python {platform.python_version()}, {versions}")
    mode = "FAST (HELPERS_FAST=1: small sizes, for tests)" if config.fast_mode() else "full"
    print(f"mode: {mode}; random seed {seed}; {threads} torch threads")
    if torch_numpy_kernels() != CPU_KERNELS:  # not for MKL's alone: it moves only live training runs
        print(f"CPU kernels: {cpu_kernels()}, not the shipped world's ({CPU_KERNELS}, MKL {BLAS_KERNELS}): what torch "
              "and numpy compute here can differ from the committed outputs in the last digits, a live training "
              "run by more, and a rebuild can train another world (docs/platforms.md)")
    print(shipped.use())
    changed = config.overrides()
    if changed:
        print(f"settings changed from their defaults: {changed}")
