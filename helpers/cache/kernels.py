"""The CPU kernels the shipped world's floats were computed with, asked for before torch or numpy runs.

Torch and numpy pick their CPU kernels by what the processor offers, AVX-512 ones where it has them, and
kernels of another width sum floats in another order: on an AVX-512 machine, 100 steps of the world's training
run ended 1.3e-3 away from the shipped run in loss, and numpy's AVX-512 loops moved the results tables by up
to 2e-14. The shipped world was built with torch's AVX2 kernels and numpy's AVX2 loops, which most x86-64
processors made since 2015 run, so the series asks for them: torch reads ATEN_CPU_CAPABILITY at its first
kernel call and numpy reads NPY_DISABLE_CPU_FEATURES when it is imported, and this runs before either (a
process that imported numpy before helpers keeps its loops; tests/conftest.py imports helpers first).
A value already set is kept; `helpers.build.notebook.setup` says where the kernels in use are not these.
"""
import os
import platform
from pathlib import Path

CPU_KERNELS = "AVX2"
NUMPY_AVX512 = "X86_V4 AVX512_ICL AVX512_SPR"  # numpy's AVX-512 dispatch targets (numpy 2.4)


def cpu_flags() -> set[str]:
    """The processor's flags on x86-64 Linux ("avx2", "avx512f", ...); elsewhere none."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return set()
    try:
        return set(Path("/proc/cpuinfo").read_text().split())
    except OSError:  # not Linux: torch and numpy pick (set both variables by hand for the shipped floats)
        return set()


def pin() -> None:
    """Ask torch and numpy for the AVX2 kernels on a processor that has AVX2 (a value already set is kept)."""
    flags = cpu_flags()
    if "avx2" in flags:
        os.environ.setdefault("ATEN_CPU_CAPABILITY", CPU_KERNELS.lower())
    if "avx512f" in flags:
        os.environ.setdefault("NPY_DISABLE_CPU_FEATURES", NUMPY_AVX512)


