"""Graded assignments, built from the answer twins with otter-grader (`make assignments`).

Why otter-grader and not nbgrader: an Otter assignment is one notebook with raw marker cells, which this
module writes from the twins' tags (``answer``, ``solution``, ``check``); `otter assign` turns it into a
student version (solutions removed, public tests only) and an autograder zip (hidden tests too), and
`otter run` grades a submission on the instructor's own machine, without a database, a server extension or
a container. nbgrader needs a course folder, a gradebook database and JupyterLab extensions: more to set up
for sixty students than the course itself.

Each exercise becomes one question worth one point: the learner's code cell (the answer cell's comment and
``variable = None``, then the solution, which the student version leaves out), a public test worth nothing
(the variable is filled in) and a hidden test worth the point: the variable is filled in and the exercise's
check cell, run silently by `helpers.exercises.graded`, says *right* (or that this world cannot check it; an
unanswered exercise never earns the point, even where the check cannot run). Worded answers are left to the
instructor's rubric (docs/instructors/rubric.md). The lesson's cells before the exercises are kept with their outputs.

Used by ``python -m helpers assignments`` (`make assignments`); tested by tests/test_assignments.py.
"""
from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import nbformat

from helpers.build import twins

QUESTION = "# BEGIN QUESTION\nname: {name}\npoints: 1"
PUBLIC = '""" # BEGIN TEST CONFIG\npoints: 0\n""" # END TEST CONFIG\n{variable} is not None'
HIDDEN = ('""" # BEGIN TEST CONFIG\npoints: 1\nhidden: true\n""" # END TEST CONFIG\n'
          "from helpers.exercises import graded, ch{chapter}\n{variable} is not None and graded({check!r}, globals())")
CONFIG = """# ASSIGNMENT CONFIG
name: {name}
init_cell: true
check_all_cell: false
export_cell: false
run_tests: false
generate:
  pdf: false
  show_stdout: true
tests:
  files: false
"""


def _raw(text: str):
    return nbformat.v4.new_raw_cell(text)


def _tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def _variable(answer_cell) -> str:
    """The variable an answer cell sets to None (its last line, ``name = None``)."""
    last = answer_cell.source.strip().splitlines()[-1]
    name, _, value = last.partition("=")
    if value.strip() != "None" or not name.strip().isidentifier():
        raise ValueError(f"answer cell {answer_cell.get('id')!r} does not end with `name = None`: {last!r}")
    return name.strip()


def _result(text: str):
    return nbformat.v4.new_output("execute_result", data={"text/plain": text}, execution_count=1)


LEARNER_LINE = "Fill each answer cell; its check cell says *right* or *not yet*."
GRADED_LINE = ("Fill each answer cell with code that computes the answer. `grader.check` runs its public test (is "
               "the answer there?; it needs otter-grader: `python course.py install grade`); the hidden tests "
               "decide the points when your notebook is graded. Write each "
               "sentence the exercise asks for in a comment or a markdown cell: the instructor grades those.")


def graded_instructions(text: str, name: str, graded_line: str = GRADED_LINE) -> str:
    """The Exercises cell `text` with its closing instructions (from LEARNER_LINE on: the check cells, the
    twin) replaced by `graded_line`; also used by the student release (helpers.build.release)."""
    if LEARNER_LINE not in text:
        raise ValueError(f"{name}: the Exercises cell no longer says {LEARNER_LINE!r}; update assignments.py")
    return text[:text.index(LEARNER_LINE)] + graded_line


def master_notebook(twin_nb, name: str):
    """The Otter master notebook of the twin `twin_nb` (file stem `name`): the lesson as it is, then each
    exercise as a question (see the module docstring). The twin is not modified."""
    nb = twins.relink(copy.deepcopy(twin_nb), to_twin=False)
    cells, questions = [_raw(CONFIG.format(name=name))], 0
    pending = None  # the question being written: [code cell, variable]
    for cell in nb.cells:
        tags = _tags(cell)
        if "answer" in tags and _variable(cell) != "student_id":
            questions += 1
            code = nbformat.v4.new_code_cell(cell.source.rstrip() + "\n# BEGIN SOLUTION NO PROMPT\n")
            pending = [code, _variable(cell)]
            cells += [_raw(QUESTION.format(name=f"exercise_{questions}")), _raw("# BEGIN SOLUTION"), code,
                      _raw("# END SOLUTION")]
        elif twins.TAG in tags:
            if cell.cell_type == "code" and pending:
                pending[0].source += cell.source.rstrip() + "\n"
        elif "check" in tags:
            if not pending:
                raise ValueError(f"{name}: check cell {cell.get('id')!r} comes before its answer cell")
            pending[0].source += "# END SOLUTION"
            public = nbformat.v4.new_code_cell(PUBLIC.format(variable=pending[1]))
            public.outputs = [_result("True")]
            hidden = nbformat.v4.new_code_cell(HIDDEN.format(chapter=name[:2], variable=pending[1],
                                                               check=cell.source.strip()))
            hidden.outputs = [_result("True")]
            cells += [_raw("# BEGIN TESTS"), public, hidden, _raw("# END TESTS"), _raw("# END QUESTION")]
            pending = None
        else:
            if cell.cell_type == "markdown" and cell.source.startswith("## Exercises"):
                cell.source = graded_instructions(cell.source, name)
            cells.append(cell)
    if pending:
        raise ValueError(f"{name}: exercise {questions} has no check cell")
    nb.cells = cells
    for cell in nb.cells:
        cell.pop("id", None)  # otter writes cells of its own; nbformat gives every cell a fresh id on write
    nb.nbformat_minor = 4
    return nb


def assign(twin: Path, out: Path) -> Path:
    """Write the master notebook of `twin` into out/master/ and run `otter assign` on it into out/<stem>/
    (``student/`` and ``autograder/``, with ``autograder.zip``); returns out/<stem>."""
    twin = Path(twin)
    master_dir, result = Path(out) / "master", Path(out) / twin.stem
    master_dir.mkdir(parents=True, exist_ok=True)
    master = master_dir / twin.name
    nbformat.write(master_notebook(nbformat.read(twin, as_version=4), twin.stem), master)
    done = subprocess.run([sys.executable, "-m", "otter", "assign", "-v", str(master), str(result)],
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"otter assign failed on {master}:\n{done.stdout}\n{done.stderr}")
    return result


def grade(submission: Path, autograder: Path, out: Path) -> dict[str, float]:
    """Points per question of `submission` (a notebook) graded by `autograder` (the zip `assign` wrote)
    with `otter run`, in this Python; the results JSON is left in `out`."""
    from otter.run import main as otter_run  # local: the grader is an instructor's tool, not the lessons'

    results = otter_run(str(submission), autograder=str(autograder), output_dir=str(out), no_logo=True)
    return {name: results.get_score(name) for name in results.test_files}
