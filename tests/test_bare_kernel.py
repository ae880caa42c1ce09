"""A kernel that lacks the course's packages (Colab, a JupyterHub) runs the notebooks after one setup cell,
`%run ../course.py kernel` (docs/troubleshooting.md): it installs requirements.lock's versions and this
checkout's helpers into the kernel's own environment, unpacks the shipped world, and makes helpers importable
without a restart.

The end-to-end test runs a learner notebook through a bare kernel (a fresh venv with only ipykernel) with the
documented cell first. It installs the whole lock, torch included (minutes, about 1.5 GB with the CPU wheel), so it runs
only with COURSE_BARE_KERNEL=1 (`make test-bare-kernel`), never in `make test`. The other tests here are fast
and run no pip."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import course  # noqa: E402

# The learner notebook that runs fastest through a kernel (measured in full mode: 13-22 s, against 15-23 s for
# 01 and 02 and more for the others), with the setup cell as its first cell.
NOTEBOOK = ROOT / "notebooks" / "07_what_the_series_found.ipynb"
SETUP_CELL = "%run ../course.py kernel"


def documented_cell() -> str:
    """The setup cell as docs/troubleshooting.md gives it (its one ```ipython block)."""
    found = re.findall(r"^```ipython\n(.*?)^```", (ROOT / "docs" / "troubleshooting.md").read_text(),
                       re.MULTILINE | re.DOTALL)
    assert len(found) == 1, "docs/troubleshooting.md must hold exactly one ```ipython block, the setup cell"
    return found[0]


def test_the_documented_cell_is_ipython_that_ends_with_the_setup_command():
    from IPython.core.inputtransformer2 import TransformerManager

    cell = documented_cell()
    compile(TransformerManager().transform_cell(cell), "docs/troubleshooting.md", "exec")
    assert cell.strip().splitlines()[-1] == SETUP_CELL and "%cd {root}/notebooks" in cell


@pytest.fixture
def no_subprocess(monkeypatch):
    """course.py with every subprocess refused: a test that reaches pip or `helpers build` fails."""
    def refuse(args, **kwargs):
        raise AssertionError("course.py ran %s" % " ".join(map(str, args)))
    monkeypatch.setattr(course.subprocess, "run", refuse)
    monkeypatch.setattr(sys, "path", list(sys.path))  # use_checkout appends to it


def test_a_kernel_that_has_everything_is_left_alone(no_subprocess, capsys):
    """The course's own .venv has requirements.lock's versions and helpers installed from this checkout:
    the setup cell says so at once, and runs neither pip nor the build."""
    if Path(sys.prefix).resolve() != ROOT / ".venv":
        pytest.skip("checks the course's own .venv; this Python is %s" % sys.executable)
    start = time.perf_counter()
    course.kernel()
    assert time.perf_counter() - start < 5
    out = capsys.readouterr().out
    assert out.startswith("course.py kernel: nothing to do: ") and str(ROOT) in out
    assert str(ROOT) in sys.path


def test_helpers_stays_importable_after_run_removes_the_scripts_folder(no_subprocess, monkeypatch):
    """`%run ../course.py kernel` puts course.py's folder first on sys.path while it runs and removes it
    afterwards (IPython's prepended_to_syspath): the checkout added for helpers must outlive that."""
    from IPython.utils.syspathcontext import prepended_to_syspath

    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(ROOT)])
    with prepended_to_syspath(str(ROOT)):
        course.use_checkout()
    assert str(ROOT) in sys.path


def test_what_is_missing_is_named(tmp_path, monkeypatch):
    """Another version in the lock and a checkout that is not the installed one are both reported."""
    lock = (ROOT / "requirements.lock").read_text().replace("\nnumpy==", "\nnumpy==0.0.1+was")
    (tmp_path / "requirements.lock").write_text(lock)
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    monkeypatch.setattr(course, "ROOT", tmp_path)
    from importlib import metadata
    problems = course.kernel_problems()
    assert problems[0] == "helpers from %s" % tmp_path
    assert "numpy (%s, not 0.0.1+was" % metadata.version("numpy") in ", ".join(problems)


@pytest.fixture
def missing_numpy(monkeypatch, no_subprocess):
    monkeypatch.setattr(course, "kernel_problems", lambda: ["numpy (none)"])


def test_a_kernel_without_pip_is_told_so(missing_numpy, monkeypatch):
    find_spec = course.importlib.util.find_spec
    monkeypatch.setattr(course.importlib.util, "find_spec", lambda name: None if name == "pip" else find_spec(name))
    with pytest.raises(SystemExit, match=r"course.py kernel: this kernel's Python \(.+\) has no pip"):
        course.kernel()


def test_a_failed_step_is_named_and_its_own_message_shown(missing_numpy, monkeypatch, capsys):
    said = "ERROR: No matching distribution found for torch==2.13.0\n"
    monkeypatch.setattr(course.subprocess, "run",
                        lambda args, **kwargs: subprocess.CompletedProcess(args, 1, stdout="", stderr=said))
    with pytest.raises(SystemExit, match="course.py kernel: installing the packages with pip failed"):
        course.kernel()
    printed = capsys.readouterr()
    assert " -m pip install --quiet" in printed.out
    assert " -c requirements.lock -e %s torch==2.13.0" % ROOT in printed.out
    assert printed.err == said


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.mark.bare_kernel
@pytest.mark.skipif(os.environ.get("COURSE_BARE_KERNEL") != "1",
                    reason="installs requirements.lock, torch included, into a fresh venv (minutes): "
                           "set COURSE_BARE_KERNEL=1 to run it (make test-bare-kernel)")
def test_a_bare_kernel_runs_a_notebook_after_the_setup_cell(tmp_path, monkeypatch):
    """The documented cell in a fresh kernel of a venv with only ipykernel: it installs, and helpers imports
    in that same kernel. It asks for a restart where pip replaced a package the kernel had already imported
    (today's ipykernel from PyPI brings newer IPython and platformdirs than the lock's). Then, in a new
    kernel as after that restart, the cell says there is nothing to do and the whole notebook runs."""
    import nbformat
    from nbclient import NotebookClient

    pip_args = os.environ.get("PIP_ARGS", "").split()
    start = time.perf_counter()
    bare = tmp_path / "venv"
    venv.create(str(bare), with_pip=True)
    python = bare / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    subprocess.run([python, "-m", "pip", "install", "--quiet", *pip_args, "ipykernel"], check=True)
    subprocess.run([python, "-m", "ipykernel", "install", "--prefix", tmp_path / "jupyter", "--name", "course-bare"],
                   check=True, capture_output=True)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter" / "share" / "jupyter"))
    bare_size, ready = folder_size(bare), time.perf_counter()
    # A student's kernel: full mode, and nothing of this process's Python on its path.
    env = {k: v for k, v in os.environ.items()
           if k not in ("HELPERS_FAST", "HELPERS_THREADS", "PYTHONPATH", "VIRTUAL_ENV")}

    def execute(cells, name):
        """The cells in a new kernel of the bare venv, started in notebooks/ as a student's kernel is (so the
        cell's relative path is the one the docs give); the executed notebook is kept beside the venv."""
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) if isinstance(c, str) else c
                                             for c in cells])
        NotebookClient(nb, timeout=1800, kernel_name="course-bare", allow_errors=True,  # all errors reported below
                       resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute(env=env)
        nbformat.write(nb, tmp_path / name)
        return nb

    def text(cell):
        return "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in cell.outputs)

    def errors(nb):  # %run shows its exceptions without failing the cell
        return [(i, o.get("ename"), o.get("evalue")) for i, c in enumerate(nb.cells) if c.cell_type == "code"
                for o in c.outputs if o.output_type == "error"]

    first = execute([documented_cell(), "import helpers.build.notebook\nprint(helpers.build.notebook.__file__)"],
                    "setup.ipynb")
    installed = time.perf_counter()
    setup = text(first.cells[0])
    assert "course.py kernel: installing into %s" % python in setup
    assert " -m pip install --quiet" in setup and "course.py kernel: installed " in setup
    assert " -m helpers build" in setup and "course.py kernel: shipped world ready in " in setup
    restart = [e for e in errors(first) if e[:2] == (0, "SystemExit") and "restart the kernel" in e[2]]
    assert errors(first) == restart, "%s\nThe setup cell printed:\n%s" % (errors(first), setup)
    assert restart or "course.py kernel: ready: " in setup
    assert str(ROOT / "helpers" / "build" / "notebook.py") in text(first.cells[1])  # in the same kernel

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    again = execute([documented_cell(), *notebook.cells], NOTEBOOK.name)
    done = time.perf_counter()
    assert "course.py kernel: nothing to do: " in text(again.cells[0])
    assert not errors(again), errors(again)
    assert "shipped world: verified" in text(again.cells[1 + next(
        i for i, c in enumerate(notebook.cells) if c.cell_type == "code")])  # the notebook's own setup()
    print("\nbare venv with ipykernel: %.0f MB, %.0f s; the setup cell: %.0f s, the venv then %.0f MB; the notebook "
          "in a new kernel: %.0f s\n%s%s" % (bare_size / 1e6, ready - start, installed - ready, folder_size(bare) / 1e6,
                                              done - installed, setup, restart and restart[0][2]))
