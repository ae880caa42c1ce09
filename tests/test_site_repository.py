"""The course website's repository address (book/website.py, `repository_url`): one setting, `repository` under
`[tool.course]` in pyproject.toml; when it is empty, the checkout's `origin` remote; with neither, no address
(the site then says so and names none). A remote's credentials are never published."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book"))
import website  # noqa: E402


def checkout(path: Path, setting: str | None, remote: str | None) -> Path:
    path.mkdir()
    if setting is not None:
        (path / "pyproject.toml").write_text(f'[project]\nname = "x"\n\n[tool.course]\nrepository = "{setting}"\n')
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    if remote:
        subprocess.run(["git", "-C", str(path), "remote", "add", "origin", remote], check=True)
    return path


def test_the_setting_wins_over_the_remote(tmp_path):
    root = checkout(tmp_path / "a", "https://example.org/course/calibration.git", "https://github.com/o/r.git")
    assert website.repository_url(root) == "https://example.org/course/calibration"


def test_an_empty_setting_falls_back_to_the_origin_remote(tmp_path):
    root = checkout(tmp_path / "b", "", "git@github.com:owner/calibration-series.git")
    assert website.repository_url(root) == "https://github.com/owner/calibration-series"


def test_a_local_origin_gives_no_address(tmp_path):
    assert website.repository_url(checkout(tmp_path / "e", "", str(tmp_path / "upstream"))) == ""


def test_neither_gives_no_address(tmp_path):
    assert website.repository_url(checkout(tmp_path / "c", "", None)) == ""
    assert website.repository_url(checkout(tmp_path / "d", None, None)) == ""


@pytest.mark.parametrize("given, public", [
    ("https://user:token@github.com/o/r.git", "https://github.com/o/r"),
    ("ssh://git@gitlab.com/o/r.git", "https://gitlab.com/o/r"),
    ("https://codeberg.org/o/r/", "https://codeberg.org/o/r"),
    ("  ", ""),
    ("/work/main", ""),  # a clone of a local checkout: no address a learner can use
    ("file:///srv/git/r.git", ""),
])
def test_the_address_is_published_without_credentials_or_git_suffix(given, public):
    assert website._public(given) == public


def test_this_repository_sets_the_address_in_one_place():
    text = (ROOT / "pyproject.toml").read_text()
    assert text.count("[tool.course]") == 1 and "\nrepository = " in text
    assert "REPOSITORY-URL" not in (ROOT / "README.md").read_text()
    assert website.README_PLACEHOLDER in (ROOT / "README.md").read_text()
