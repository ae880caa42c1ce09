"""Answer twins: each notebook's solutions live in a twin, out of the learner's sight.

The source of truth of a chapter is its twin ``notebooks/solutions/NN_name.ipynb``: the whole notebook,
with the code of each exercise's solution (and its worded answer) in cells tagged ``solution``. An
exercise may also have an ``answer`` cell (the named variable the learner fills, ``None`` until then) and a
``check`` cell (`helpers.exercises` says whether that variable is right, without printing the expected
value). The learner's ``notebooks/NN_name.ipynb`` is derived from it by `student_copy`: the same cells and
outputs, without the ``solution`` cells, with the ``answer`` and ``check`` cells unrun (no outputs: the
twin's would say "right"), and with one markdown cell at the end that links to the twin.
Never edit a learner's notebook by hand: edit the twin, then run `make notebooks` (executes the twins
and writes both files) or `python -m helpers twins` (rewrites the learner's copies only).

Used by ``python -m helpers notebooks`` and ``python -m helpers twins`` (`helpers.build.cli`), and by
tests/test_twins.py, tests/test_notebooks.py and tests/test_outputs.py (through `notebook_paths`).
Imports only nbformat and the standard library.
"""
from __future__ import annotations

import copy
import os
import re
from pathlib import Path

import nbformat

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
SOLUTIONS = "solutions"  # the twins' folder, inside the notebooks folder
TAG = "solution"  # the cell tag of a solution (code or worded answer)
EXERCISE_TAGS = ("answer", "check")  # kept in the learner's copy, unrun: the variable to fill, its check
LINK_ID = "solutions-link"  # the cell id of the link, fixed so that a derivation is byte-identical
LINK_TEXT = ("**Solutions:** [{target}]({target}), this notebook with the solution of every exercise and its "
             "output. Open it after trying the exercises.")


def label(path: Path) -> str:
    """A notebook's label in the guide, the schedule and the API index: "02.1" for `02_1_….ipynb` (a
    chapter's first notebook), "07" for `07_….ipynb` (a chapter in one notebook)."""
    chapter, part = re.match(r"(\d\d)_(?:(\d)_)?", Path(path).name).groups()
    return f"{chapter}.{part}" if part else chapter


def is_solution(cell) -> bool:
    return TAG in cell.get("metadata", {}).get("tags", [])


def twin_path(student: Path) -> Path:
    """notebooks/NN_name.ipynb -> notebooks/solutions/NN_name.ipynb (used by `migrate` and the tests)."""
    student = Path(student)
    return student.parent / SOLUTIONS / student.name


def student_path(twin: Path) -> Path:
    """notebooks/solutions/NN_name.ipynb -> notebooks/NN_name.ipynb (used by `python -m helpers notebooks`)."""
    twin = Path(twin)
    if not is_twin(twin):
        raise ValueError(f"{twin} is not in a {SOLUTIONS}/ folder")
    return twin.parent.parent / twin.name


def is_twin(path: Path) -> bool:
    return Path(path).parent.name == SOLUTIONS


def student_copy(twin_nb, name: str):
    """The learner's notebook derived from the twin `twin_nb` (whose file name is `name`): every cell
    and output as in the twin, except the ``solution`` cells, which are left out, and the ``answer`` and
    ``check`` cells, which are kept without outputs; one markdown cell linking to ``solutions/<name>``
    ends it. The twin is not modified.

    The exercises must come last, so that the learner's copy runs on its own: a cell after a solution
    that is not tagged ``solution``, ``answer`` or ``check`` raises ValueError (a worded answer must be
    tagged ``solution`` too, or it would show).
    """
    nb = relink(copy.deepcopy(twin_nb), to_twin=False)  # links are written for the twin's folder
    first = next((i for i, cell in enumerate(nb.cells) if is_solution(cell)), None)
    if first is None:
        return nb
    for i, cell in enumerate(nb.cells[first:], start=first):
        if not is_solution(cell) and not _exercise_tag(cell):
            line = (cell.source.splitlines() or [""])[0][:60]
            raise ValueError(
                f"{name}: cell {i} ({cell.cell_type}, {line!r}) follows a solution cell but is not tagged "
                f"{TAG!r}, 'answer' or 'check'; the exercises must be the last cells (tag worded answers "
                f"{TAG!r} too)")
    if any(cell.get("id") == LINK_ID for cell in nb.cells):
        raise ValueError(f"{name}: a cell already has the id {LINK_ID!r}, which the link cell uses")
    for cell in nb.cells:
        if _exercise_tag(cell) and cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    link = nbformat.v4.new_markdown_cell(LINK_TEXT.format(target=f"{SOLUTIONS}/{name}"), id=LINK_ID)
    nb.cells = [cell for cell in nb.cells if not is_solution(cell)] + [link]
    return nb


def _exercise_tag(cell) -> bool:
    return any(tag in EXERCISE_TAGS for tag in cell.get("metadata", {}).get("tags", []))


# A markdown link or image whose target is a relative path: ](target) or ](target#anchor).
_LINK = re.compile(r"(\]\()([^)\s#]+)([^)\s]*\))")


def relink(nb, to_twin: bool):
    """`nb` with every relative markdown link rewritten for the other folder: a twin sits one level below
    its learner's copy, so ``../docs/glossary.md`` in a learner's notebook is ``../../docs/glossary.md`` in
    its twin, and ``02_1_self_consistency.ipynb`` is ``../02_1_self_consistency.ipynb``. In place; returns `nb`."""
    def move(match):
        target = match.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):  # a URL or an absolute path
            return match.group(0)
        here, there = (Path("."), Path(SOLUTIONS)) if to_twin else (Path(SOLUTIONS), Path("."))
        moved = Path(os.path.relpath(os.path.normpath(here / target), there)).as_posix()
        return match.group(1) + moved + match.group(3)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _LINK.sub(move, cell.source)
    return nb


def notebook_text(nb) -> str:
    """The file's text, exactly as `nbformat.write` writes it (and as `run_notebook` saves notebooks)."""
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


def student_text(twin: Path) -> str:
    """The text of the learner's copy of the twin file `twin` (what tests/test_twins.py expects on disk)."""
    twin = Path(twin)
    return notebook_text(student_copy(nbformat.read(twin, as_version=4), twin.name))


def _write_text(path: Path, text: str) -> bool:
    """Write `text` to `path` atomically unless it is already there; True if the file changed."""
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return True


def write_student_copy(twin: Path) -> bool:
    """Derive the learner's copy of the twin file `twin` next to its folder; True if the file changed
    (used by `python -m helpers notebooks` after it saves an executed twin)."""
    return _write_text(student_path(twin), student_text(twin))


def write_student_copies(notebooks_dir: Path = NOTEBOOKS_DIR, pattern: str = "*.ipynb") -> list[Path]:
    """Derive the learner's copy of every twin in `notebooks_dir`/solutions/ whose name matches `pattern`;
    returns the copies that changed (used by `python -m helpers twins`)."""
    twins = sorted((Path(notebooks_dir) / SOLUTIONS).glob(pattern))
    return [student_path(twin) for twin in twins if write_student_copy(twin)]


def migrate(notebooks_dir: Path = NOTEBOOKS_DIR) -> list[Path]:
    """Once: move each notebooks/NN_*.ipynb into notebooks/solutions/ (it becomes the twin, its relative links
    rewritten for that folder) and
    write its learner's copy in its place; returns the twins. Refuses to overwrite an existing twin."""
    notebooks_dir = Path(notebooks_dir)
    students = sorted(p for p in notebooks_dir.glob("*.ipynb") if re.match(r"\d\d_", p.name))
    taken = [str(twin_path(p)) for p in students if twin_path(p).exists()]
    if taken:
        raise FileExistsError(f"twins exist already: {taken}")
    for p in students:  # check every derivation before moving anything
        student_copy(nbformat.read(p, as_version=4), p.name)
    (notebooks_dir / SOLUTIONS).mkdir(exist_ok=True)
    for p in students:
        twin = relink(nbformat.read(p, as_version=4), to_twin=True)  # its links, from one folder deeper
        _write_text(twin_path(p), notebook_text(twin))
        p.unlink()
        write_student_copy(twin_path(p))
    return [twin_path(p) for p in students]
