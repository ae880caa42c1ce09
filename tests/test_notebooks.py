"""Every notebook executes in fast mode, each in a fresh kernel (notebooks 00 and 04-06 on a world that
misses the contrast-set thresholds, the others on the fast world as it is): a chapter's answer twin
(notebooks/solutions/) where it exists, which holds the whole chapter; its learner's copy is the twin
without the solution cells, checked by tests/test_twins.py instead of being run a second time."""
import os
from pathlib import Path

import pytest

from helpers.build.cli import notebook_paths, run_notebook

NOTEBOOKS = notebook_paths()


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


POOR_WORLD = '{"contrast": {"min_size": 100000, "min_size_transfer": 100000}}'
CONTRAST_NOTEBOOKS = [p for p in NOTEBOOKS if p.name[:2] in ("00", "04", "05", "06", "07")]
OTHER_NOTEBOOKS = [p for p in NOTEBOOKS if p not in CONTRAST_NOTEBOOKS]


@pytest.mark.slow
@pytest.mark.parametrize("path", OTHER_NOTEBOOKS, ids=[p.stem for p in OTHER_NOTEBOOKS])
def test_notebook_runs_in_fast_mode(path: Path):
    assert os.environ.get("HELPERS_FAST") == "1"
    assert_checks_pass(run_notebook(path, inplace=False, timeout=600, keep=True))


def assert_checks_pass(nb):
    """The solutions pass their exercises' checks on this world too (or the world cannot check one)."""
    from helpers.exercises import RIGHT, UNCHECKABLE
    for cell in nb.cells:
        if "check" in cell.metadata.get("tags", []):
            text = "".join(str(o.get("text", "")) for o in cell.get("outputs", []))
            assert f": {RIGHT}:" in text or f": {UNCHECKABLE}:" in text, f"{cell.source!r} printed {text!r}"


@pytest.mark.slow
@pytest.mark.parametrize("path", CONTRAST_NOTEBOOKS, ids=[p.stem for p in CONTRAST_NOTEBOOKS])
def test_notebook_runs_on_a_world_without_large_enough_contrast_sets(path: Path, monkeypatch):
    """A world that misses a threshold (here: no pair of checkpoints reaches the contrast-set size) is
    reported by the notebook, which goes on with what exists instead of crashing.

    This is also the fast-mode run of the notebooks that use contrast sets (00, 04-06): running them a
    second time on the fast world's own thresholds took four more kernels (about a minute of `make test`).
    Their cells on a world that *has* large enough contrast sets run in full mode in tests/test_outputs.py.
    The override changes only the contrast-set sizes, so the adapters, answers and read-outs these runs
    build or read are the fast world's own; the results tables that do read the sizes are built on the
    fast world's thresholds by tests/test_cache_traces.py."""
    assert os.environ.get("HELPERS_FAST") == "1"
    monkeypatch.setenv("HELPERS_OVERRIDES", POOR_WORLD)
    nb = run_notebook(path, inplace=False, timeout=600, keep=True)
    assert_checks_pass(nb)
    text = "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                     for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "100000" in text  # the notebook says which threshold the world missed


def test_join_streams_makes_a_rerun_write_the_same_file():
    import nbformat

    from helpers.build.cli import join_streams

    out = nbformat.v4.new_output
    split = nbformat.v4.new_code_cell("", outputs=[out("stream", name="stdout", text="a\n"),
                                                   out("stream", name="stdout", text="b\n"),
                                                   out("stream", name="stderr", text="warn\n"),
                                                   out("stream", name="stdout", text="c\n")])
    whole = nbformat.v4.new_code_cell("", outputs=[out("stream", name="stdout", text="a\nb\n"),
                                                   out("stream", name="stderr", text="warn\n"),
                                                   out("stream", name="stdout", text="c\n")])
    nb, again = nbformat.v4.new_notebook(cells=[split]), nbformat.v4.new_notebook(cells=[whole])
    join_streams(nb)
    join_streams(again)
    assert nb.cells[0].outputs == again.cells[0].outputs  # stderr between them keeps stdout pieces apart
    assert [o.text for o in nb.cells[0].outputs] == ["a\nb\n", "warn\n", "c\n"]


def test_the_kernel_imports_this_checkouts_helpers(tmp_path, monkeypatch):
    """A clone that borrows another clone's .venv (whose editable install points there) still runs its own
    helpers in the kernels: run_notebook puts this repository first on the kernel's PYTHONPATH."""
    import nbformat

    import helpers.build.cli as main
    from helpers import config

    seen = {}

    class Client:  # records what the kernel would be started with
        def __init__(self, nb, **kwargs):
            pass

        def execute(self, **kwargs):
            seen.update(kwargs)

    path = tmp_path / "nb.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), path)
    monkeypatch.setattr(main, "NotebookClient", Client)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    main.run_notebook(path, inplace=False)
    assert seen["env"]["PYTHONPATH"].split(os.pathsep) == [str(config.REPO_ROOT), "/elsewhere"]
