"""requirements.lock, environment.yml and pyproject.toml agree: the lock pins every package exactly,
environment.yml pins the same versions, and pyproject.toml's lower bounds are those tested versions."""
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_SPEC = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$")


def _parse(spec: str) -> tuple[str, str]:
    name, rest = _SPEC.match(spec).groups()
    return name.lower().replace("_", "-"), rest.replace(" ", "")


def _pyproject() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = project["dependencies"] + project["optional-dependencies"]["dev"]
    return dict(_parse(s) for s in specs)


def _environment() -> dict[str, str]:
    """Package specs under `dependencies:` (conda ones and the nested `pip:` list)."""
    text = (ROOT / "environment.yml").read_text().split("dependencies:", 1)[1]
    specs = []
    for line in text.splitlines():
        item = line.split("#", 1)[0].strip()
        if item.startswith("- ") and item != "- pip:":
            specs.append(item[2:].strip())
    out = dict(_parse(s) for s in specs if not s.startswith("-e"))
    out.pop("python", None)
    out.pop("pip", None)
    return out


def _lock() -> dict[str, str]:
    lines = (ROOT / "requirements.lock").read_text().splitlines()
    pins = [line.split("==") for line in lines if line.strip() and not line.startswith("#")]
    assert all(len(p) == 2 for p in pins), "every line of requirements.lock is name==version"
    return {name.lower().replace("_", "-"): version.strip() for name, version in pins}


def test_same_packages_pinned_to_the_lock():
    lock, env, project = _lock(), _environment(), _pyproject()
    assert set(env) == set(project)
    for name in project:
        assert project[name] == f">={lock[name]}", f"pyproject.toml: {name} should be >={lock[name]}"
        assert env[name] == f"=={lock[name]}", f"environment.yml: {name} should be =={lock[name]}"


def test_the_install_is_from_the_lock():
    assert '"-c", "requirements.lock"' in (ROOT / "course.py").read_text()  # course.py, which make calls


def test_environment_installs_the_package_itself():
    assert "- -e ." in (ROOT / "environment.yml").read_text()


def test_ci_runs_the_readme_test_command_and_nothing_else():
    lines = [line for line in (ROOT / ".ci/run").read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert lines[-1].strip() == "make test"
    assert all(line.startswith(("set ", "cd ")) for line in lines[:-1])
    assert "make test" in (ROOT / "README.md").read_text()


def test_make_refuses_a_python_outside_the_tested_range_and_pyproject_agrees():
    import importlib.util

    spec = importlib.util.spec_from_file_location("check_python", ROOT / "tools" / "check_python.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    assert [check.problem(v, "py") is None for v in ((3, 10, 0), (3, 11, 9), (3, 12, 1), (3, 13, 0), (3, 14, 0))] \
        == [False, True, True, True, False]
    assert "py is Python 3.10; the series runs on Python 3.11 to 3.13" in check.problem((3, 10, 13), "py")
    newest = check.NEWEST[0], check.NEWEST[1] + 1
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">={}.{},<{}.{}".format(*check.OLDEST, *newest)
    assert "python_check().problem(sys.version_info, sys.executable)" in (ROOT / "course.py").read_text()
