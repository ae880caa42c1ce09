"""Rebuilds reproduce the shipped world: the first steps of the training run, retrained here, match the
shipped run's log and weights.

The full run takes about ten minutes; its first 100 steps (same schedule, `train_run(stop_after=100)`)
take about half a minute with the series' two torch threads. With the pinned packages and torch's AVX2
kernels (which `helpers` asks for on x86-64 Linux, with numpy's AVX2 loops), they are the same floats on
any processor that runs those kernels; the tolerance (losses to 1e-5, weights to 1e-4) is far below the
1.3e-3 in loss that torch's AVX-512 kernels moved the step-100 save on an AMD EPYC (README, "What may
differ on another machine").
"""
from __future__ import annotations

import os
import pickle
import platform
import tarfile

import pytest

from helpers.cache import shipped

STEPS = 100


def _shipped_world():
    """The shipped `world` entry's log and its weights at step STEPS, read from the archive."""
    index = shipped.verify(shipped.SHIPPED_DIR)  # the full world (the tests run in fast mode)
    archive = shipped.SHIPPED_DIR / "world.tar.xz"
    (entry,) = index["archives"][archive.name]["entries"]
    base = f"world/default/{entry['id']}/"
    with tarfile.open(archive, "r:xz") as tar:
        log = pickle.load(tar.extractfile(base + "result.pkl"))["log"]
        weights = tar.extractfile(base + f"checkpoints/step-{STEPS:05d}/model.safetensors").read()
    return log, weights


def _has_avx2() -> bool:
    from helpers.cache import kernels

    return "avx2" in kernels.cpu_flags()


def test_torch_and_numpy_run_the_shipped_worlds_cpu_kernels_where_the_processor_has_them():
    """helpers pins torch's kernels and numpy's loops before either loads (helpers/__init__.py, and
    tests/conftest.py imports helpers first); where the processor has no AVX2 (or is not x86-64 Linux),
    they pick and the setup cell says so."""
    from helpers.cache import kernels
    from helpers.build.notebook import torch_numpy_kernels

    if not _has_avx2():
        pytest.skip("no AVX2 on this processor (or not Linux): torch and numpy pick their own kernels")
    assert os.environ.get("ATEN_CPU_CAPABILITY", "").lower() == "avx2" == kernels.CPU_KERNELS.lower()
    assert torch_numpy_kernels() == kernels.CPU_KERNELS  # and no ", numpy AVX-512" (MKL's: the processor's)


def test_mkls_kernels_are_judged_by_vendor_and_avx512():
    """MKL takes its AVX-512 kernels only on Intel processors that have them (hand-written /proc/cpuinfo
    excerpts); the shipped world's matrix products were computed with those."""
    from helpers.cache import kernels

    intel, amd = "vendor_id\t: GenuineIntel\nflags\t\t: sse2 avx2", "vendor_id\t: AuthenticAMD\nflags\t\t: sse2 avx2"
    assert kernels.blas_kernels(intel + " avx512f") == "AVX-512" == kernels.BLAS_KERNELS
    assert kernels.blas_kernels(intel + " avx512f amx_tile") == "AVX-512 with AMX"  # other floats: not the world's
    assert kernels.blas_kernels(intel) == kernels.blas_kernels(amd) == kernels.blas_kernels(amd + " avx512f") == "AVX2"
    assert kernels.blas_kernels("vendor_id\t: GenuineIntel\nflags\t\t: sse2 avx") == "other"


def test_the_kernel_pin_keeps_a_users_choice_and_skips_other_processors(monkeypatch):
    from helpers.cache import kernels

    flags = kernels.cpu_flags()  # before platform.machine is patched below
    for name in ("ATEN_CPU_CAPABILITY", "NPY_DISABLE_CPU_FEATURES"):
        monkeypatch.setenv(name, "mine")
    kernels.pin()
    assert os.environ["ATEN_CPU_CAPABILITY"] == os.environ["NPY_DISABLE_CPU_FEATURES"] == "mine"  # kept
    for name in ("ATEN_CPU_CAPABILITY", "NPY_DISABLE_CPU_FEATURES"):
        monkeypatch.delenv(name)
    monkeypatch.setattr(platform, "machine", lambda: "arm64")
    kernels.pin()
    assert "ATEN_CPU_CAPABILITY" not in os.environ and "NPY_DISABLE_CPU_FEATURES" not in os.environ  # not x86
    if "avx2" in flags:
        monkeypatch.setattr(platform, "machine", lambda: "x86_64")
        kernels.pin()
        assert os.environ["ATEN_CPU_CAPABILITY"] == "avx2"
        avx512 = "avx512f" in flags
        assert os.environ.get("NPY_DISABLE_CPU_FEATURES") == (kernels.NUMPY_AVX512 if avx512 else None)


def test_numpys_avx512_targets_are_the_ones_this_numpy_dispatches():
    """NUMPY_AVX512 names dispatch targets of the pinned numpy: a name numpy does not know would be ignored."""
    from helpers.cache import kernels
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    known = set(__cpu_dispatch__) | set(__cpu_features__)
    assert set(kernels.NUMPY_AVX512.split()) <= known


@pytest.mark.slow
def test_a_retrained_prefix_matches_the_shipped_run(tmp_path, monkeypatch):
    if shipped.read_index(shipped.SHIPPED_DIR) is None:
        pytest.skip("no shipped world in data/world/")
    from helpers.cache.kernels import BLAS_KERNELS, CPU_KERNELS
    from helpers.build.notebook import cpu_kernels

    if cpu_kernels() != CPU_KERNELS:
        pytest.skip(f"this processor runs {cpu_kernels()} kernels, not the shipped world's ({CPU_KERNELS}, MKL "
                    f"{BLAS_KERNELS}): other floats")
    monkeypatch.setenv("HELPERS_FAST", "0")
    monkeypatch.setenv("HELPERS_THREADS", "2")  # the shipped run's count: other counts sum floats in another order
    monkeypatch.setenv("HELPERS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HELPERS_OVERRIDES", raising=False)
    from safetensors.torch import load, load_file

    from helpers.world.training import train_run

    shipped_log, shipped_weights = _shipped_world()
    log = train_run(tmp_path, stop_after=STEPS)
    assert log["step"].tolist() == shipped_log["step"].tolist()[: len(log)] == list(range(100, STEPS + 1, 100))
    for column in ("loss", "accuracy"):
        got, want = log[column].to_numpy(), shipped_log[column].to_numpy()[: len(log)]
        assert abs(got - want).max() <= 1e-5, f"{column} per save: {got} here, {want} shipped"
    mine, theirs = (load_file(tmp_path / "checkpoints" / f"step-{STEPS:05d}" / "model.safetensors"),
                    load(shipped_weights))
    assert mine.keys() == theirs.keys()
    worst = max(float((mine[k].float() - theirs[k].float()).abs().max()) for k in mine)
    assert worst <= 1e-4, f"weights at step {STEPS} differ from the shipped ones by up to {worst:.2e}"
