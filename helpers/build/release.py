"""The student release (`make release`): the course as students of a graded class get it, without the
answers.

It copies the repository's files (notebooks, helpers, the shipped world, docs, the site's sources) into a
folder, leaving out what gives answers away or is for the instructor: the answer twins (notebooks/solutions/),
the exercises' reference checks (helpers/exercises/chNN.py: readable code that computes each answer), the
instructor pack (docs/instructors/) and the tests, which use both. In the learner notebooks it removes the
check cells and the link to the twin, and says where graded work goes instead; in the README and the guide it
removes every sentence that points at the twins. With the assignments written (`make assignments`), their
student versions go into assignments/. The per-student draws (helpers/exercises/variants.py) stay: a student
needs them to solve the exercise.

`leaks` lists what in a release still points at an answer; tests/test_release.py checks that it finds
nothing in a fresh release and something in a planted one. Used by ``python -m helpers release``.
"""
from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
from pathlib import Path

import nbformat

from helpers.build import assignments, twins

LEFT_OUT = ["notebooks/solutions/*", "helpers/exercises/ch[0-9][0-9].py", "docs/instructors/*", "tests/*",
            "book/solutions.md", ".ci/*"]
TEXTS = ["README.md", "docs/guide.md"]  # whose sentences about the twins are removed
GRADED_LINE = ("Fill each answer cell. Graded work goes in this notebook's assignment version (the "
               "`assignments/` folder of your release), whose `grader.check` cells run the public tests once "
               "`python course.py install grade` has installed otter-grader; the worked solutions come from your "
               "instructor after the deadline.")
TWIN_WORDS = re.compile(r"\btwins?\b|solutions/|instructors/|check cells?\b", re.IGNORECASE)
WORKED = "Worked solutions come from your instructor after the deadline."
# What must not be in a release: a link or path to a twin or to the instructor pack, a solution marker,
# a hidden test, a reference check.
LEAK = re.compile(r"\]\([^)]*(?:solutions|instructors)/|href=\"[^\"]*(?:solutions|instructors)/|BEGIN SOLUTION|"
                  r"hidden: true|from helpers\.exercises import (?:graded|ch\d\d)")


def _tracked(root: Path) -> list[str]:
    """The checkout's files: tracked, and new ones git does not ignore."""
    done = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                          capture_output=True, text=True, check=True)
    return [name for name in done.stdout.split("\0") if name]


def _left_out(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in LEFT_OUT)


def release_notebook(nb, name: str):
    """The learner notebook `nb` (file stem `name`) without its check cells and the link to its twin, its
    exercises' closing instructions saying where graded work goes (in place; returns `nb`)."""
    nb.cells = [cell for cell in nb.cells if "check" not in cell.get("metadata", {}).get("tags", [])
                and cell.get("id") != twins.LINK_ID]
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## Exercises"):
            cell.source = assignments.graded_instructions(cell.source, name, GRADED_LINE)
    return nb


def release_text(text: str) -> str:
    """`text` without the sentences that point at the answer twins, the check cells or the instructor pack; a
    line that lost one says where worked solutions come from instead (a list item keeps its bold label; one
    that only pointed there goes)."""
    lines = []
    for line in text.splitlines():
        if TWIN_WORDS.search(line):
            label = re.match(r"\s*- \*\*[^*]+\*\*\s*", line)
            body = line[label.end():] if label else line
            kept = [s for s in re.split(r"(?<=[.!?])\s+", body) if not TWIN_WORDS.search(s)]
            if not kept and not label and line.lstrip().startswith("- "):
                continue  # a list item that only pointed there
            line = (label.group(0) if label else "") + " ".join(kept + [WORKED])
        lines.append(line)
    return "\n".join(lines) + "\n"


def write(root: Path, out: Path, assignments: Path | None = None) -> Path:
    """Write the student release of the checkout `root` into `out` (which must not exist); returns `out`."""
    root, out = Path(root), Path(out)
    if out.exists():
        raise FileExistsError(f"{out} exists: remove it, or name another folder for the release")
    for name in _tracked(root):
        if _left_out(name) or not (root / name).is_file():
            continue
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)
    for path in sorted((out / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nbformat.write(release_notebook(nbformat.read(path, as_version=4), path.stem), path)
    for name in TEXTS:
        if (out / name).is_file():
            (out / name).write_text(release_text((out / name).read_text(encoding="utf-8")), encoding="utf-8")
    if assignments is not None and Path(assignments).is_dir():
        for student in sorted(Path(assignments).glob("*/student")):
            shutil.copytree(student, out / "assignments" / student.parent.name)
    return out


def leaks(release: Path) -> list[str]:
    """Every page of `release` (notebooks, Markdown, the site's HTML) with a line that points at
    an answer, as 'path: line'; and any answer twin, reference check or instructor page present."""
    release, found = Path(release), []
    for path in sorted(release.rglob("*")):
        name = path.relative_to(release).as_posix()
        if path.is_file() and _left_out(name):
            found.append(f"{name}: present")
        if path.suffix not in (".ipynb", ".md", ".html", ".txt") or not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if LEAK.search(line):
                found.append(f"{name}: {line.strip()[:120]}")
                break
    return found
