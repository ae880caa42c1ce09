"""Shared fixtures. `make test` sets HELPERS_FAST=1, so the world here is the small, fast one."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HELPERS_FAST", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_sessionstart(session):
    """Import helpers before any test module: test modules import numpy first, and helpers turns numpy's
    AVX-512 loops off only before numpy loads (helpers/__init__.py). Not in the xdist controller, which
    runs no test (8 s saved).

    Then unpack the shipped fast world (data/fast-world/) into the fast cache, as the notebooks' setup cell
    does: the tests read the fast entries instead of training them (about 5 minutes of a fresh clone's
    `make test`). An entry whose code changed since it was shipped is rebuilt on first use, as any entry."""
    if hasattr(session.config, "workerinput") or not session.config.getoption("numprocesses", None):
        import helpers  # noqa: F401
        from helpers.cache import shipped

        if os.environ.get("HELPERS_FAST") == "1":
            print(shipped.use())


def pytest_collection_modifyitems(config, items):
    """The two longest runs apart: the output check (its two halves, about 4 minutes) first and the fast-mode
    notebook runs (about 3 minutes) last. `pytest -n 2 --dist worksteal` starts one worker at each half of
    the list, so one worker begins with the output check and the other ends with the notebook runs, and
    the short tests between them are shared by stealing. Side by side at the head of one worker's list,
    the long runs kept that worker busy after the other had finished."""
    def place(item) -> int:  # stable: the rest keep their order
        return {"tests/test_outputs.py": 0, "tests/test_notebooks.py": 2}.get(item.nodeid.split("::")[0], 1)
    items.sort(key=place)


@pytest.fixture(scope="session")
def world():
    """The fast-mode training run (built once, then cached in data/cache/fast)."""
    from helpers.pipeline.checkpoints import training_run  # local: tests/conftest.py must not import helpers early
    return training_run()


@pytest.fixture(scope="session")
def checkpoint(world):
    """(name, model, tokenizer) of the last selected fast-mode checkpoint."""
    from helpers.pipeline.checkpoints import load_checkpoint

    name = world["selected"][-1]
    model, tok = load_checkpoint(name)
    return name, model, tok


@pytest.fixture(scope="session")
def run_folder(tmp_path_factory, worker_id):
    """`run_folder(name)`: a temporary folder for this test run, which pytest-xdist's workers share (one
    worker builds what goes in it, holding `helpers.cache.artifacts.lock`; the others then read it)."""
    def folder(name: str) -> Path:
        if worker_id == "master":  # no workers: this session's own folder
            return tmp_path_factory.mktemp(name)
        shared = tmp_path_factory.getbasetemp().parent / name  # the run's folder, above each worker's
        shared.mkdir(exist_ok=True)
        return shared
    return folder


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """An empty artifact cache, so a test can build and break entries freely."""
    monkeypatch.setenv("HELPERS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="session", autouse=True)
def _threads():
    """Honour HELPERS_THREADS in every test: oversubscribed threads on a busy two-core machine
    trained about 30 times slower (measured)."""
    from helpers.config import set_threads

    set_threads()


@pytest.fixture(scope="session")
def ck(world):
    """The fast-mode checkpoints (training and evaluation)."""
    from helpers.pipeline.checkpoints import get_checkpoints

    return get_checkpoints()
