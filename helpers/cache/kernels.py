"""The CPU kernels the shipped world's floats were computed with, asked for before torch or numpy runs.

Torch and numpy pick their CPU kernels by what the processor offers, AVX-512 ones where it has them, and
kernels of another width sum floats in another order: on an AVX-512 machine, 100 steps of the world's training
run ended 1.3e-3 away from the shipped run in loss, and numpy's AVX-512 loops moved the results tables by up
to 2e-14. The shipped world was built with torch's AVX2 kernels and numpy's AVX2 loops, which most x86-64
processors made since 2015 run, so the series asks for them: torch reads ATEN_CPU_CAPABILITY at its first
kernel call and numpy reads NPY_DISABLE_CPU_FEATURES when it is imported, and this runs before either (a
process that imported numpy before helpers keeps its loops; tests/conftest.py imports helpers first).
A value already set is kept; `helpers.build.notebook.setup` says where the kernels in use are not these.

Matrix products are the exception: torch hands them to Intel's MKL, which picks its own kernels by the
processor and reads neither variable. The shipped world was trained where MKL runs its AVX-512 kernels
(Intel processors with AVX-512). An AMD processor, or an Intel one without AVX-512, runs MKL's AVX2 kernels:
measured on an AMD EPYC without AVX-512 (2026-12-07), the world's first 100 training steps ended 8.9e-4 away
from the shipped run in loss, and a forward pass moved by about 1e-6. `blas_kernels` names which kernels MKL
takes here, judged from the processor as MKL judges it; the output check and the retrained-prefix test read it.

An Intel processor with AVX-512 and AMX (Sapphire Rapids class) computes other floats still: measured on an
Intel Xeon with AMX (2026-12-07), the first 100 training steps ended 2.2e-3 away from the shipped run in loss,
and pinning MKL's code path (MKL_CBWR=AVX512, AVX512_E1 to E3; MKL_ENABLE_INSTRUCTIONS) or oneDNN's
(ONEDNN_MAX_CPU_ISA) did not bring it back; the cause is not found. `blas_kernels` names such a processor
apart, so the output check and the retrained-prefix test treat it as one of other floats. There the live
training figures of notebooks 00.1 and 03.1 are drawn a little differently, and `make notebooks` rewrites them.
"""
from __future__ import annotations

import os
import platform
from pathlib import Path

CPU_KERNELS = "AVX2"
BLAS_KERNELS = "AVX-512"  # MKL's kernels for the shipped world's matrix products
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


def blas_kernels(cpuinfo: str | None = None) -> str:
    """The kernels MKL picks for matrix products: "AVX-512" on an Intel processor with AVX-512, "AVX-512 with
    AMX" on one that also has AMX (other floats, above), "AVX2" on another x86-64 one with AVX2 (AMD's
    included), "other" elsewhere. `cpuinfo`: /proc/cpuinfo's text (by default `cpu_flags`, whose words hold
    the vendor too; empty off x86-64 Linux)."""
    words = cpu_flags() if cpuinfo is None else set(cpuinfo.split())
    if "avx2" not in words:
        return "other"
    if "GenuineIntel" not in words or "avx512f" not in words:
        return "AVX2"
    return "AVX-512 with AMX" if "amx_tile" in words else "AVX-512"
