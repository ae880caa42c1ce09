"""A killed build never leaves a usable partial artifact, and the world is bitwise reproducible."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from helpers.cache import artifacts
from helpers import config
from helpers.world import decoding, sums, training
from helpers.world.model import load_pretrained
from helpers import pipeline

ROOT = Path(__file__).resolve().parent.parent


def _entries(cache: Path):
    return [m.parent for m in cache.rglob(artifacts.MANIFEST)]


@pytest.mark.slow
def test_sigkill_during_build_then_rerun(world, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    # Start from the already trained fast world, so the killed build is in the greedy stage.
    shutil.copytree(artifacts.folder("world").parent, cache / "fast" / "world" / "default")
    env = {**os.environ, "HELPERS_CACHE": str(cache), "HELPERS_FAST": "1", "HELPERS_THREADS": "1"}
    # --scratch: the shipped fast world is not unpacked, so the greedy stage has something to build
    cmd = [sys.executable, "-m", "helpers", "build", "--fast", "--scratch", "--only", "greedy"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and not list((cache / "fast").glob("greedy/*/.tmp-*")):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert list((cache / "fast").glob("greedy/*/.tmp-*")), "the build was not caught in the middle of an artifact"
    # Every entry with a manifest is complete and valid; the one being written has none.
    monkeypatch.setenv("HELPERS_CACHE", str(cache))
    artifacts.forget()
    for folder in _entries(cache / "fast"):
        params = json.loads((folder / artifacts.MANIFEST).read_text())["params"]
        assert artifacts.why_invalid(folder.parent.parent.name, **params) is None
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    artifacts.forget()
    for name in pipeline.checkpoints.get_checkpoints().all:
        for split in ("hundred", "test", "adapter_train", "transfer_test"):
            assert artifacts.why_invalid("greedy", checkpoint=name, split=split) is None
    assert not list((cache / "fast").glob("greedy/*/.tmp-*"))  # the rerun cleaned up
    artifacts.forget()


def test_training_twice_is_bitwise_identical(tmp_path):
    runs = []
    for k in range(2):
        with config.override("world", train_steps=40, save_every=20):
            log = training.train_run(tmp_path / f"run{k}")
        model, tok = load_pretrained(tmp_path / f"run{k}" / "checkpoints" / "step-00040")
        res = decoding.greedy(model, tok, sums.split("test").iloc[:60], progress=False)
        runs.append((log, model.state_dict(), res))
    (log_a, state_a, res_a), (log_b, state_b, res_b) = runs
    pd.testing.assert_frame_equal(log_a, log_b)
    assert all(torch.equal(state_a[k], state_b[k]) for k in state_a)
    pd.testing.assert_frame_equal(res_a, res_b)  # same answers and confidences, to the last bit


def test_a_run_branched_and_resumed_equals_the_uninterrupted_run(tmp_path):
    # world_sweep.py --branch-at trains the steps two endings share once, then each ending from that state.
    small = dict(train_steps=40, save_every=20, phases=((0.0, "small"), (0.5, "large")))
    with config.override("world", **small):
        whole = training.train_run(tmp_path / "whole")
        head, state = training.train_run(tmp_path / "branch", stop_after=20, keep_state=True)
        rest = training.train_run(tmp_path / "branch", resume=state)
    pd.testing.assert_frame_equal(pd.concat([head, rest], ignore_index=True), whole)
    a, _ = load_pretrained(tmp_path / "whole" / "checkpoints" / "step-00040")
    b, _ = load_pretrained(tmp_path / "branch" / "checkpoints" / "step-00040")
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())
    # Another ending from the same state trains the other phases from step 21 on, so another run.
    with config.override("world", **{**small, "phases": ((0.0, "small"), (0.5, "mixed"))}):
        other = training.train_run(tmp_path / "other", resume=state)
    assert other["phase"].eq("mixed").all() and not other["loss"].equals(rest["loss"])
