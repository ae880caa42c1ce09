"""Every notebook executes in fast mode (chapters 00 and 04-07 on a world that misses the contrast-set
thresholds, the others on the fast world as it is): its answer twin (notebooks/solutions/), which holds the
whole notebook; the learner's copy is the twin without the solution cells, checked by tests/test_twins.py
instead of being run a second time. Each of those two runs executes its notebooks one after another in one
fresh kernel (`run_together`): a kernel start and the imports, about 12 s on two cores, once per run instead
of once per notebook. That each notebook also runs on its own: `make notebooks` runs them after other
predecessors than the output check does (tests/test_outputs.py compares the two), settings are reset and
checked between notebooks (`test_notebooks_sharing_a_kernel_start_clean`), and
`test_no_notebook_uses_a_name_it_does_not_define` finds a name left by another notebook without running."""
import json
import os
import subprocess
import sys

import nbformat
import pytest

from helpers.build.cli import chapters, notebook_paths, run_together
from helpers.cache import shipped

NOTEBOOKS = notebook_paths()


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


# A world where no pair of checkpoints reaches the contrast-set sizes; the shipped fast world holds its entries.
POOR_WORLD = json.dumps(shipped.FAST_OVERRIDES[0])
CHAPTERS = chapters()
CONTRAST_CHAPTERS = [c for c in CHAPTERS if c in ("00", "04", "05", "06", "07")]
OTHER_CHAPTERS = [c for c in CHAPTERS if c not in CONTRAST_CHAPTERS]


def test_no_notebook_uses_a_name_it_does_not_define(tmp_path):
    """Each notebook runs on its own in a fresh kernel, so none may use a variable that only an earlier
    notebook defines: ruff's undefined-name rule (F821), which reads a notebook's cells as one module. The
    rule is shown to fire on a probe that uses a name from elsewhere."""
    probe = tmp_path / "probe.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"),
                                                   nbformat.v4.new_code_cell("print(x, left_by_02_1)")]), probe)
    learner = [p for p in NOTEBOOKS[0].parents[1].glob("*.ipynb")]
    found = {}
    for paths in ([probe], [*NOTEBOOKS, *learner]):
        done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", "--select",
                               "F821", "--output-format", "concise", *map(str, paths)],
                              capture_output=True, text=True)
        found[len(paths)] = done.stdout
    assert "left_by_02_1" in found[1]
    assert "F821" not in found[len(NOTEBOOKS) + len(learner)], found[len(NOTEBOOKS) + len(learner)]


def test_every_notebook_belongs_to_a_chapter_that_runs():
    assert sorted(p for c in CHAPTERS.values() for p in c) == sorted(NOTEBOOKS)
    assert len(CHAPTERS) >= 8 and all(CHAPTERS.values())


def in_chapters(names: list[str]) -> list:
    return [path for name in names for path in CHAPTERS[name]]


@pytest.mark.slow
def test_notebooks_run_in_fast_mode():
    assert os.environ.get("HELPERS_FAST") == "1"
    for nb in run_together(in_chapters(OTHER_CHAPTERS), timeout=600):
        assert_checks_pass(nb)
        assert_counted_from_1(nb)


def assert_checks_pass(nb):
    """The solutions pass their exercises' checks on this world too (or the world cannot check one)."""
    from helpers.exercises import RIGHT, UNCHECKABLE
    for cell in nb.cells:
        if "check" in cell.metadata.get("tags", []):
            text = "".join(str(o.get("text", "")) for o in cell.get("outputs", []))
            assert f": {RIGHT}:" in text or f": {UNCHECKABLE}:" in text, f"{cell.source!r} printed {text!r}"


@pytest.mark.slow
def test_notebooks_run_on_a_world_without_large_enough_contrast_sets(monkeypatch):
    """A world that misses a threshold (here: no pair of checkpoints reaches the contrast-set size) is
    reported by the notebook, which goes on with what exists instead of crashing.

    This is also the fast-mode run of the chapters that use contrast sets (00, 04-07): running them a
    second time on the fast world's own thresholds took another kernel and about a minute of `make test`.
    Their cells on a world that *has* large enough contrast sets run in full mode in tests/test_outputs.py.
    The override changes only the contrast-set sizes, so the adapters, answers and read-outs these runs
    build or read are the fast world's own; the results tables that do read the sizes are built on the
    fast world's thresholds by tests/test_cache_traces.py."""
    assert os.environ.get("HELPERS_FAST") == "1"
    monkeypatch.setenv("HELPERS_OVERRIDES", POOR_WORLD)
    paths = in_chapters(CONTRAST_CHAPTERS)
    for path, nb in zip(paths, run_together(paths, timeout=600)):
        assert_checks_pass(nb)
        text = "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                         for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
        assert "100000" in text, f"{path.name} does not say which threshold the world missed"


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


def test_make_notebooks_builds_only_what_the_shipped_world_lacks(monkeypatch, capsys):
    """`notebooks --build` (make notebooks) builds first only where the shipped world is not wholly in use,
    then runs each notebook once: two threads, each with one kernel, taking notebooks from one queue."""
    import threading
    import time

    import helpers.build.cli as main

    built, ran = [], {}
    monkeypatch.setattr(main.shipped, "use", lambda: "shipped world: ...")
    monkeypatch.setattr(main, "build_all", lambda: built.append(True))
    for complete in (True, False):
        monkeypatch.setattr(main.shipped, "complete", lambda complete=complete: complete)
        main.prepare()
    assert built == [True]
    assert "nothing to build" in capsys.readouterr().out

    def together(paths, timeout, done):  # what one kernel would run
        for path in paths:
            ran[path] = threading.get_ident()
            done(path, None, 1.0)

    monkeypatch.setattr(main, "run_together", together)
    main.run_notebooks(NOTEBOOKS, save=False, jobs=2)
    assert sorted(ran) == sorted(NOTEBOOKS) and threading.get_ident() not in ran.values()
    assert list(ran)[0].name.startswith("00") and "s" in capsys.readouterr().out

    kernels = []

    def one_fails(paths, timeout, done):  # the first kernel's first notebook fails after a while
        kernels.append(threading.get_ident())
        for path in paths:
            time.sleep(0.2 if len(kernels) == 1 else 0.02)
            if kernels[0] == threading.get_ident():
                raise RuntimeError("a cell failed")
            ran[path] = kernels[-1]

    ran.clear()
    monkeypatch.setattr(main, "run_together", one_fails)
    with pytest.raises(RuntimeError, match="a cell failed"):
        main.run_notebooks(NOTEBOOKS, save=False, jobs=2)
    assert 0 < len(ran) < len(NOTEBOOKS) - 2  # the other kernel stopped with the queue


def test_notebooks_sharing_a_kernel_start_clean():
    """What runs between two notebooks in one kernel (`run_together`'s `_BETWEEN`), in an IPython shell:
    an empty namespace, cells counted from 1 again, and a setting left changed stops the run, naming it
    (one given by HELPERS_OVERRIDES stays). The kernels' counts: `assert_counted_from_1`."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    from helpers import config
    from helpers.build.cli import _BETWEEN
    from helpers.config import recorded

    saved = sys.modules["__main__"], sys.displayhook, sys.excepthook  # the shell replaces them
    shell = InteractiveShell.instance(config=Config({"HistoryManager": {"enabled": False}}))
    try:
        shell.run_cell("x = 1", store_history=True)
        config.override("self_consistency", num_beams=5)
        left = shell.run_cell(_BETWEEN, store_history=True)
        assert isinstance(left.error_in_exec, AssertionError) and "num_beams" in str(left.error_in_exec)
        assert config.overrides() == {}  # the environment's settings again
        assert shell.run_cell(_BETWEEN, store_history=True).success
        after = shell.run_cell("'x' in dir()", store_history=True)
        assert after.execution_count == 1 and after.result is False
    finally:
        config.reset()
        recorded.overrides_from_environment()
        InteractiveShell.clear_instance()
        sys.modules["__main__"], sys.displayhook, sys.excepthook = saved  # a later spawn needs __main__


def assert_counted_from_1(nb) -> None:
    """A notebook run after another in one kernel counts its cells from 1, as a fresh kernel does."""
    counts = [c.execution_count for c in nb.cells if c.cell_type == "code" and c.execution_count]
    assert counts == list(range(1, len(counts) + 1)), counts[:5]
