"""The student release (helpers/build/release.py): no answer twin, reference check, instructor page or link to
any of them; the learner notebooks lose their check cells and twin link; a planted leak is found."""
from __future__ import annotations

import json

import nbformat
import pytest

from helpers import config
from helpers.build import release, twins


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    return release.write(config.REPO_ROOT, tmp_path_factory.mktemp("release") / "course")


def test_a_release_holds_no_answer(written):
    assert release.leaks(written) == []
    assert not (written / "notebooks" / twins.SOLUTIONS).exists()
    assert not list((written / "helpers" / "exercises").glob("ch[0-9][0-9].py"))
    assert (written / "helpers" / "exercises" / "variants.py").is_file()  # the draws a student needs
    assert not (written / "docs" / "instructors").exists() and not (written / "tests").exists()
    assert (written / "data" / "world").is_dir() and (written / "book" / "conf.py").is_file()


def test_the_learner_notebooks_lose_their_checks_and_twin_link(written):
    lessons = sorted((written / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert len(lessons) == len(list((config.REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    for path in lessons:
        nb = nbformat.read(path, as_version=4)
        assert not any("check" in cell.metadata.get("tags", []) for cell in nb.cells), path.name
        assert not any(cell.get("id") == twins.LINK_ID for cell in nb.cells), path.name
        exercises = [cell for cell in nb.cells if cell.source.startswith("## Exercises")]
        assert exercises and exercises[0].source.endswith(release.GRADED_LINE), path.name
        if any(cell.get("id") == "student-id" for cell in nb.cells):  # the draw's instruction stays
            assert "student_id" in exercises[0].source, path.name
        assert any("answer" in cell.metadata.get("tags", []) for cell in nb.cells), path.name


def test_the_readme_and_guide_say_where_solutions_come_from(written):
    for name in release.TEXTS:
        text = (written / name).read_text(encoding="utf-8")
        assert not release.TWIN_WORDS.search(text), name
        assert release.WORKED in text, name


def test_release_text_keeps_the_other_sentences_and_a_list_label():
    text = ("Read it. The answer twin is in notebooks/solutions/. Then rest.\n- **Solutions.** See the twins. Fine.\n"
            "- [Instructors](docs/instructors/index.md): the pack.\n- [Other](docs/other.md): kept.")
    assert release.release_text(text) == (f"Read it. Then rest. {release.WORKED}\n"
                                          f"- **Solutions.** Fine. {release.WORKED}\n- [Other](docs/other.md): kept.\n")


def test_a_planted_leak_is_found(written, tmp_path):
    planted = tmp_path / "course"
    (planted / "docs").mkdir(parents=True)
    (planted / "docs" / "page.md").write_text("See [the answers](../notebooks/solutions/01_x.ipynb).\n")
    (planted / "notebooks" / "solutions").mkdir(parents=True)
    (planted / "notebooks" / "solutions" / "01_x.ipynb").write_text(json.dumps({"cells": []}))
    (planted / "site").mkdir()
    (planted / "site" / "index.html").write_text('<a href="docs/instructors/rubric.html">rubric</a>\n')
    found = release.leaks(planted)
    assert any(line.startswith("docs/page.md") for line in found)
    assert "notebooks/solutions/01_x.ipynb: present" in found
    assert any(line.startswith("site/index.html") for line in found)


def test_an_existing_folder_is_refused(written):
    with pytest.raises(FileExistsError, match="exists"):
        release.write(config.REPO_ROOT, written)
