"""course.py, the course's setup and runs without make (Windows included): standard library only, the
Makefile's student targets call it, the notebooks' install leaves the developer tools out, and .venv is
(re)installed exactly when its stamp is missing or older than pyproject.toml or requirements.lock."""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import course  # noqa: E402


def test_course_py_imports_only_the_standard_library_and_parses_as_python_3_6():
    tree = ast.parse((ROOT / "course.py").read_text(), feature_version=(3, 6))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported - set(sys.stdlib_module_names) == {"check_python"}  # tools/check_python.py, stdlib only
    assert not any(isinstance(node, ast.JoinedStr) for node in ast.walk(tree)), "no f-strings"


def test_the_makefiles_student_targets_call_course_py():
    makefile = (ROOT / "Makefile").read_text()
    for target in ("notebooks", "test", "lab"):
        recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE).group(1)
        assert f"$(PYTHON) course.py {target}" in recipe, f"make {target} must call course.py"
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("make test")


def test_the_notebooks_install_has_no_developer_tools():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needed = {re.split(r"[<>=\[]", d)[0] for d in project["dependencies"]}
    tools = {re.split(r"[<>=\[]", d)[0] for d in project["optional-dependencies"]["dev"]}
    assert {"pytest", "ruff", "sphinx"} <= tools and not needed & tools


def test_a_bare_call_lists_the_commands():
    done = subprocess.run([sys.executable, str(ROOT / "course.py")], capture_output=True, text=True)
    assert done.returncode != 0 and all(name in done.stderr for name in course.COMMANDS)
    done = subprocess.run([sys.executable, str(ROOT / "course.py"), "install", "docs"], capture_output=True,
                          text=True)
    assert done.returncode != 0 and "'docs' is not one of bench, dev, grade, lab" in done.stderr


@pytest.fixture
def fake_venv(tmp_path, monkeypatch):
    """course.py pointed at a scratch .venv whose commands are recorded instead of run."""
    for name in ("pyproject.toml", "requirements.lock"):
        (tmp_path / name).write_text("")
    calls = []
    monkeypatch.setattr(course, "ROOT", tmp_path)
    monkeypatch.setattr(course, "VENV", tmp_path / ".venv")
    monkeypatch.setattr(course, "run", lambda *args, **env: calls.append([str(a) for a in args]))
    monkeypatch.setattr(course.venv, "create", lambda path, with_pip: course.venv_python().parent.mkdir(parents=True)
                        or course.venv_python().touch())
    return tmp_path, calls


def test_install_runs_pip_once_then_again_when_the_lock_changes(fake_venv):
    root, calls = fake_venv
    course.install()
    pip = calls[0]
    assert pip[1:4] == ["-m", "pip", "install"] and pip[pip.index("-e") + 1] == "."
    assert "-c" in pip and "requirements.lock" in pip and course.TORCH in pip
    course.install()
    assert len(calls) == 2  # pip, then the one import that compiles: nothing more while the stamp is current
    stamp = root / ".venv" / ".installed"
    os.utime(stamp, (stamp.stat().st_mtime - 10,) * 2)
    course.install()
    assert len(calls) == 4
    course.install("dev")
    assert calls[4][calls[4].index("-e") + 1] == ".[dev]" and (root / ".venv" / ".installed-dev").exists()
    stamp.unlink()
    course.install()  # the developer tools' install holds the package too
    assert len(calls) == 6
    for name in ("pyproject.toml", "requirements.lock"):
        os.utime(root / name, (stamp.parent.joinpath(".installed-dev").stat().st_mtime + 10,) * 2)
    course.install()  # a stale stamp of an extra does not count
    assert len(calls) == 8 and calls[6][calls[6].index("-e") + 1] == "."


def test_windows_runs_the_venvs_python_from_scripts(monkeypatch):
    monkeypatch.setattr(course.os, "name", "nt")
    assert course.venv_python().parts[-2:] == ("Scripts", "python.exe")
