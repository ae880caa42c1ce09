"""No surprise rebuilds: a build that would retrain the full-size world, or take more than about ten
minutes, runs only when asked for by name (`make world`, `make worlds`, `make pack` set HELPERS_LONG_BUILDS=1).
Anywhere else, in a script or a notebook kernel, it is refused with its plan: what would be rebuilt, about
how long it takes, why, and the one switch that allows it."""
import json
import os
import subprocess
import sys
import textwrap

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from helpers import config
from helpers.cache import artifacts


@pytest.fixture
def slow_toys(tmp_cache, monkeypatch):
    """`_slow_top` loads `_slow_base`; their manifests then say the top took 100 s and the base 600 s."""
    monkeypatch.delenv(artifacts.LONG_BUILDS, raising=False)
    calls = []

    @artifacts.register("_slow_base")
    def _base(folder):
        calls.append("base")
        return config.self_consistency().num_beams

    @artifacts.register("_slow_top")
    def _top(folder, k=0):
        calls.append("top")
        return artifacts.load_or_build("_slow_base") + k

    artifacts.load_or_build("_slow_top")
    for name, seconds in (("_slow_top", 100.0), ("_slow_base", 600.0)):
        path = artifacts._valid_entry(name, {})[0] / artifacts.MANIFEST
        manifest = json.loads(path.read_text())
        manifest["own_seconds"] = seconds
        path.write_text(json.dumps(manifest))
    artifacts.forget()
    calls.clear()
    yield calls
    config.reset()
    for name in ("_slow_base", "_slow_top"):
        artifacts.REGISTRY.pop(name, None)


def test_a_build_over_ten_minutes_is_refused_with_its_plan(slow_toys):
    with config.override("self_consistency", num_beams=1):  # read by the base: both are out of date
        with pytest.raises(artifacts.LongBuildRefused) as refused:
            artifacts.load_or_build("_slow_top")
        said = str(refused.value)
        assert "about 12 min" in said and "what: _slow_top, _slow_base." in said
        assert "setting self_consistency.num_beams changed" in said and artifacts.LONG_BUILDS + "=1" in said
        assert slow_toys == []  # nothing was built
        assert artifacts.load_or_build("_slow_base") == 1  # 600 s alone is allowed
        assert artifacts.load_or_build("_slow_top") == 1  # and then the top's 100 s
        assert slow_toys == ["base", "top"]


def test_a_long_build_runs_when_asked_for(slow_toys, monkeypatch):
    monkeypatch.setenv(artifacts.LONG_BUILDS, "1")
    with config.override("self_consistency", num_beams=1):
        assert artifacts.load_or_build("_slow_top") == 1
    assert slow_toys == ["top", "base"]


def test_a_nested_build_that_is_long_on_its_own_is_refused(slow_toys, monkeypatch):
    """`_slow_top(k=1)` was never built: timed by its other entry (100 s), it starts, and the base it loads,
    long on its own, is refused when it is reached."""
    monkeypatch.setattr(artifacts, "LONG_BUILD_SECONDS", 300)
    with config.override("self_consistency", num_beams=1):
        with pytest.raises(artifacts.LongBuildRefused, match="refused: building _slow_base"):
            artifacts.load_or_build("_slow_top", k=1)
    assert slow_toys == ["top"]
    assert artifacts._valid_entry("_slow_top", {"k": 1})[0] is None  # the refused build left no entry


RETRAIN = textwrap.dedent("""
    import helpers
    from helpers.cache import artifacts
    artifacts.load_or_build("selection")
""")


def _full_mode_env(cache) -> dict:
    env = {k: v for k, v in os.environ.items() if k != artifacts.LONG_BUILDS}
    return {**env, "HELPERS_FAST": "0", "HELPERS_CACHE": str(cache), "HELPERS_SHIPPED": "0",
            "HELPERS_THREADS": "1"}


def test_a_script_that_would_retrain_the_world_is_refused(tmp_path):
    done = subprocess.run([sys.executable, "-c", RETRAIN], env=_full_mode_env(tmp_path / "cache"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "LongBuildRefused: refused: building world" in done.stderr
    assert "the training run and everything built from it" in done.stderr and "make world" in done.stderr
    assert not list((tmp_path / "cache").rglob("manifest.json"))  # nothing was built


def test_a_notebook_kernel_that_would_retrain_the_world_is_refused(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(RETRAIN)])
    env = {**_full_mode_env(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join(p for p in (str(config.REPO_ROOT), os.environ.get("PYTHONPATH")) if p)}
    client = NotebookClient(nb, timeout=300, kernel_name="python3")
    with pytest.raises(CellExecutionError) as failed:
        client.execute(env=env)
    assert "refused: building world" in str(failed.value) and artifacts.LONG_BUILDS in str(failed.value)
    assert not list((tmp_path / "cache").rglob("manifest.json"))
