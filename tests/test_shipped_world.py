"""Rebuilds reproduce the shipped world: the first steps of the training run, retrained here, match the
shipped run's log and weights.

The full run takes about ten minutes; its first 100 steps (same schedule, `train_run(stop_after=100)`)
take about half a minute with the series' two torch threads. On a machine of the kind that built the world,
with the pinned packages, they are the same floats; the tolerance (losses to 1e-5, weights to 1e-4)
only absorbs summation order on another CPU, where a complete rebuild may still drift further
(README, "What may differ on another machine").
"""
from __future__ import annotations

import io
import pickle
import tarfile

import pytest

from helpers import shipped

STEPS = 100


def _shipped_world():
    """The shipped `world` entry's log and its weights at step STEPS, read from the archive."""
    index = shipped.verify()
    archive = shipped.SHIPPED_DIR / "world.tar.xz"
    (entry,) = index["archives"][archive.name]["entries"]
    base = f"world/default/{entry['id']}/"
    with tarfile.open(archive, "r:xz") as tar:
        log = pickle.load(tar.extractfile(base + "result.pkl"))["log"]
        weights = tar.extractfile(base + f"checkpoints/step-{STEPS:05d}/model.safetensors").read()
    return log, weights


@pytest.mark.slow
def test_a_retrained_prefix_matches_the_shipped_run(tmp_path, monkeypatch):
    if shipped.read_index() is None:
        pytest.skip("no shipped world in data/world/")
    monkeypatch.setenv("HELPERS_FAST", "0")
    monkeypatch.setenv("HELPERS_THREADS", "2")  # the shipped run's count: other counts sum floats in another order
    monkeypatch.setenv("HELPERS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HELPERS_OVERRIDES", raising=False)
    from safetensors.torch import load, load_file

    from helpers.training import train_run

    shipped_log, shipped_weights = _shipped_world()
    log = train_run(tmp_path, stop_after=STEPS)
    assert log["step"].tolist() == shipped_log["step"].tolist()[: len(log)] == list(range(100, STEPS + 1, 100))
    for column in ("loss", "accuracy"):
        got, want = log[column].to_numpy(), shipped_log[column].to_numpy()[: len(log)]
        assert abs(got - want).max() <= 1e-5, f"{column} per save: {got} here, {want} shipped"
    mine, theirs = load_file(tmp_path / "checkpoints" / f"step-{STEPS:05d}" / "model.safetensors"), load(shipped_weights)
    assert mine.keys() == theirs.keys()
    worst = max(float((mine[k].float() - theirs[k].float()).abs().max()) for k in mine)
    assert worst <= 1e-4, f"weights at step {STEPS} differ from the shipped ones by up to {worst:.2e}"
