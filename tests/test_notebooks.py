"""Every notebook executes in fast mode, each in a fresh kernel."""
import os
from pathlib import Path

import pytest

from helpers.__main__ import notebook_paths, run_notebook

NOTEBOOKS = notebook_paths()


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_in_fast_mode(path: Path):
    assert os.environ.get("HELPERS_FAST") == "1"
    run_notebook(path, inplace=False, timeout=600)
