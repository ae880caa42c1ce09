"""The cache: builds once, records what a build read, rebuilds exactly what a change touches, never
serves a damaged or partial entry, and lets two processes share an entry."""
import json
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from helpers.cache import artifacts
from helpers import config


@pytest.fixture
def toy(tmp_cache):
    """Two toy artifacts: `_toy_base` reads two settings, `_toy_top` reads one and loads the base."""
    calls = []

    @artifacts.register("_toy_base")
    def _base(folder, size=3):
        calls.append(("base", size))
        (folder / "extra.txt").write_text("hello")
        n = config.self_consistency().num_beams + config.splits().n_test * 0
        return pd.DataFrame({"x": range(size + n)})

    @artifacts.register("_toy_top")
    def _top(folder):
        calls.append(("top",))
        base = artifacts.load_or_build("_toy_base", size=2)
        return {"rows": len(base), "lr": config.adapters().lr}

    yield calls
    config.reset()
    for name in ("_toy_base", "_toy_top"):
        artifacts.REGISTRY.pop(name, None)


def _entry(name, **params):
    found, _ = artifacts._valid_entry(name, params)
    return found


def test_load_or_build_builds_once(toy):
    a = artifacts.load_or_build("_toy_base", size=3)
    b = artifacts.load_or_build("_toy_base", size=3)
    pd.testing.assert_frame_equal(a, b)
    assert toy == [("base", 3)]
    artifacts.load_or_build("_toy_base", size=4)  # other parameters: another entry
    assert toy == [("base", 3), ("base", 4)]
    manifest = artifacts.manifest("_toy_base", size=3)
    assert manifest["versions"]["torch"] and "extra.txt" in manifest["files"]
    assert manifest["reads"] == {"self_consistency.num_beams": config.self_consistency().num_beams,
                                 "splits.n_test": config.splits().n_test}


def test_manifest_records_nested_loads(toy):
    assert artifacts.load_or_build("_toy_top")["rows"] == 2 + config.self_consistency().num_beams
    deps = artifacts.manifest("_toy_top")["deps"]
    assert [(d["name"], d["params"]) for d in deps] == [("_toy_base", {"size": 2})]
    assert deps[0]["id"] == _entry("_toy_base", size=2).name


def test_a_changed_setting_rebuilds_exactly_what_read_it(toy):
    artifacts.load_or_build("_toy_top")
    toy.clear()
    with config.override("adapters", lr=1e-4):  # read by the top only
        assert artifacts.why_invalid("_toy_base", size=2) is None
        assert "adapters.lr" in artifacts.why_invalid("_toy_top")
        assert artifacts.load_or_build("_toy_top")["lr"] == 1e-4
    assert toy == [("top",)]
    toy.clear()
    with config.override("self_consistency", num_beams=3):  # read by the base: both rebuild
        assert "num_beams" in artifacts.why_invalid("_toy_base", size=2)
        assert artifacts.why_invalid("_toy_top") is not None
        problems = [artifacts._entry_problem(e) for e in artifacts._entries("_toy_top", {})]
        assert None not in problems and any("it was built from _toy_base" in p for p in problems)
        assert artifacts.load_or_build("_toy_top")["rows"] == 5
    assert toy == [("top",), ("base", 2)]
    toy.clear()
    with config.override("verbalized", epochs=9):  # read by neither
        artifacts.load_or_build("_toy_top")
    assert toy == []


def test_configurations_live_side_by_side(toy):
    artifacts.load_or_build("_toy_top")
    with config.override("self_consistency", num_beams=3):
        artifacts.load_or_build("_toy_top")
    toy.clear()
    assert artifacts.load_or_build("_toy_top")["rows"] == 2 + config.self_consistency().num_beams  # back: no rebuild
    with config.override("self_consistency", num_beams=3):
        assert artifacts.load_or_build("_toy_top")["rows"] == 5
    assert toy == []
    assert len(list((config.cache_dir() / "_toy_base" / "size=2").glob("[0-9a-f]*"))) == 2


def test_a_change_in_a_running_process_is_seen_at_once(toy):
    """The in-kernel case: no restart, no cleared memo; the next load sees the new value."""
    first = artifacts.load_or_build("_toy_base", size=1)
    config.override("self_consistency", num_beams=1)  # for the session, as a notebook cell would
    try:
        assert len(artifacts.load_or_build("_toy_base", size=1)) == 2 != len(first)
    finally:
        config.reset()
    assert len(artifacts.load_or_build("_toy_base", size=1)) == len(first)


@pytest.mark.parametrize(
    "damage",
    ["corrupt_manifest", "delete_manifest", "truncate_result", "change_read", "delete_file"],
)
def test_damaged_entries_are_rebuilt(toy, damage):
    artifacts.load_or_build("_toy_base")
    folder = _entry("_toy_base")
    manifest = folder / artifacts.MANIFEST
    artifacts.forget()  # as in a fresh process
    if damage == "corrupt_manifest":
        manifest.write_text("{not json")
    elif damage == "delete_manifest":
        manifest.unlink()
    elif damage == "truncate_result":
        (folder / artifacts.RESULT).write_bytes((folder / artifacts.RESULT).read_bytes()[:10])
    elif damage == "delete_file":
        (folder / "extra.txt").unlink()
    else:
        m = json.loads(manifest.read_text())
        m["reads"]["splits.n_test"] = -1
        manifest.write_text(json.dumps(m))
    assert artifacts.why_invalid("_toy_base") is not None
    df = artifacts.load_or_build("_toy_base")
    assert toy == [("base", 3), ("base", 3)] and len(df) == 3 + config.self_consistency().num_beams
    assert artifacts.why_invalid("_toy_base") is None


def _other_versions(monkeypatch):
    """This process reports other package versions than the ones the entries were built with."""
    theirs = dict(artifacts.package_versions(), python="3.99", torch="9.9.9+cu999")
    monkeypatch.setattr(artifacts, "package_versions", lambda: dict(theirs))
    artifacts.forget()


def test_other_package_versions_never_refuse_an_entry_and_are_reported(toy, monkeypatch):
    """The acceptance rule: an entry is a result. Read under other versions (another Python, a CUDA
    build of torch) it is used as it is; what differs is reported, never rebuilt."""
    first = artifacts.load_or_build("_toy_top")
    built_with = artifacts.manifest("_toy_top")["versions"]
    _other_versions(monkeypatch)
    assert artifacts.why_invalid("_toy_top") is None and artifacts.why_invalid("_toy_base", size=2) is None
    assert artifacts.load_or_build("_toy_top") == first and toy == [("top",), ("base", 2)]  # nothing rebuilt
    differ = artifacts.version_differences(built_with)
    assert differ == {"python": (built_with["python"], "3.99"), "torch": (built_with["torch"], "9.9.9+cu999")}
    assert artifacts.describe_versions(differ) == (f"python {built_with['python']} -> 3.99, "
                                                   f"torch {built_with['torch']} -> 9.9.9+cu999")


def test_under_other_versions_a_changed_setting_or_builder_still_rebuilds(toy, monkeypatch):
    artifacts.load_or_build("_toy_top")
    _other_versions(monkeypatch)
    with config.override("adapters", lr=0.5):
        assert "setting adapters.lr changed" in artifacts.why_invalid("_toy_top")
        assert artifacts.load_or_build("_toy_top")["lr"] == 0.5
    assert toy == [("top",), ("base", 2), ("top",)]


def test_a_rebuild_says_what_it_builds_how_long_it_takes_and_that_versions_differ(toy, monkeypatch, capsys):
    artifacts.load_or_build("_toy_top")
    for name, params in (("_toy_top", {}), ("_toy_base", {"size": 2})):  # as if each took a minute to build
        path = _entry(name, **params) / artifacts.MANIFEST
        m = json.loads(path.read_text())
        m["own_seconds"] = 60.0
        path.write_text(json.dumps(m))
    artifacts.forget()
    with config.override("self_consistency", num_beams=1):  # read by the base only: both are out of date
        assert artifacts.rebuild_plan("_toy_top", {}) == (
            "this rebuilds it and 1 out-of-date upstream entries, about 2 min on two cores")
        assert artifacts.rebuild_plan("_toy_base", {"size": 9}).startswith("about 60 s on two cores (as other")
        _other_versions(monkeypatch)
        plan = artifacts.rebuild_plan("_toy_top", {})
        assert "other package versions (python" in plan and "will differ from the committed" in plan
        capsys.readouterr()
        artifacts.load_or_build("_toy_top")
    said = capsys.readouterr().err
    assert said.startswith("building _toy_top (no parameters): it was built from _toy_base") and "about 2 min" in said


CODE = {
    "low.py": "def f(x):\n    return x + 1  # {comment}\n",
    "uses_low.py": ("from helpers.cache import artifacts\nfrom toymods import low\n\n\n"
                    "@artifacts.register('_toy_a')\ndef build(folder):\n    return low.f(1)\n"),
    "other.py": ("from helpers.cache import artifacts\n\n\n@artifacts.register('_toy_b')\n"
                 "def build(folder):\n    return 2\n"),
    "on_top.py": ("from helpers.cache import artifacts\n\n\n@artifacts.register('_toy_c')\n"
                  "def build(folder):\n    return artifacts.load_or_build('_toy_a') * 10\n"),
}


@pytest.fixture
def toymods(tmp_cache, tmp_path, monkeypatch):
    """Three builders in a package on disk: `_toy_a` uses `low.f`, `_toy_b` does not, `_toy_c` loads `_toy_a`."""
    import importlib
    import sys

    package = tmp_path / "src" / "toymods"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name, text in CODE.items():
        (package / name).write_text(text.replace("{comment}", "one"))
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    modules = [importlib.import_module(f"toymods.{n[:-3]}") for n in CODE if n != "low.py"]
    yield package, modules
    for name in ("_toy_a", "_toy_b", "_toy_c"):
        artifacts.REGISTRY.pop(name, None)
    for name in [m for m in sys.modules if m.split(".")[0] == "toymods"]:
        del sys.modules[name]


def _edit(path, text):
    import os

    path.write_text(text)
    stamp = path.stat().st_mtime_ns + 10**9  # a later time than the import's, whatever the clock's resolution
    os.utime(path, ns=(stamp, stamp))


def test_editing_a_function_rebuilds_its_users_and_their_dependents_only(toymods):
    import importlib

    from helpers.cache import fingerprint

    package, _ = toymods
    assert [artifacts.load_or_build(n) for n in ("_toy_a", "_toy_b", "_toy_c")] == [2, 2, 20]
    _edit(package / "low.py", CODE["low.py"].replace("{comment}", "two"))  # a comment: nothing changes
    assert [artifacts.why_invalid(n) for n in ("_toy_a", "_toy_b", "_toy_c")] == [None, None, None]
    _edit(package / "low.py", CODE["low.py"].replace("x + 1", "x + 2").replace("{comment}", "two"))
    assert "the code that built it changed" in artifacts.why_invalid("_toy_a")
    assert "built from _toy_a" in artifacts.why_invalid("_toy_c")
    assert artifacts.why_invalid("_toy_b") is None  # does not use low.py
    with pytest.raises(RuntimeError, match="toymods.low changed on disk after this process imported it"):
        artifacts.load_or_build("_toy_c")  # the loaded code is the old one: a restart is asked for
    importlib.reload(importlib.import_module("toymods.low"))  # as a restarted kernel would import it
    fingerprint._AT_IMPORT[package / "low.py"] = fingerprint._code_digest(package / "low.py")
    assert artifacts.load_or_build("_toy_c") == 30 and artifacts.load_or_build("_toy_b") == 2


def test_another_thread_count_rebuilds(toy, monkeypatch):
    monkeypatch.setenv("HELPERS_THREADS", "1")
    artifacts.load_or_build("_toy_top")
    assert artifacts.manifest("_toy_top")["threads"] == 1
    monkeypatch.setenv("HELPERS_THREADS", "2")
    assert "built with 1 torch threads, not 2" in artifacts.why_invalid("_toy_top")
    artifacts.load_or_build("_toy_top")
    assert artifacts.manifest("_toy_top")["threads"] == 2 and toy == [("top",), ("base", 2), ("top",), ("base", 2)]


def test_no_builder_declares_a_version():
    import inspect

    assert "version" not in inspect.signature(artifacts.register).parameters


def test_a_second_builder_under_a_registered_name_is_refused():
    def verbalized_frames(folder):  # another function than the one registered as "domain_claim"
        return None

    with pytest.raises(ValueError,
                       match="'domain_claim' is already built by helpers.pipeline.claims._build_domain_claim"):
        artifacts.register("domain_claim")(verbalized_frames)
    assert artifacts.REGISTRY["domain_claim"].build.__qualname__ == "_build_domain_claim"


def test_failed_build_leaves_no_entry(tmp_cache):
    @artifacts.register("_test_failing")
    def _build(folder):
        (folder / "partial.bin").write_bytes(b"x" * 100)
        raise RuntimeError("killed halfway")

    try:
        with pytest.raises(RuntimeError):
            artifacts.load_or_build("_test_failing")
        where = config.cache_dir() / "_test_failing" / "default"
        assert not [p for p in where.iterdir() if p.name != ".lock"]
        assert artifacts.why_invalid("_test_failing") == "not built yet"
    finally:
        artifacts.REGISTRY.pop("_test_failing", None)


_TWO_PROCESSES = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from helpers.cache import artifacts

    log = Path(sys.argv[1])

    @artifacts.register("_slow")
    def _build(folder):
        with open(log, "a") as f:
            f.write("built\\n")
        (folder / "half.bin").write_bytes(b"x")
        time.sleep(3)  # the other process arrives while this one writes
        return {"value": 42}

    print(artifacts.load_or_build("_slow")["value"])
""")


@pytest.mark.slow
def test_two_processes_share_one_build(tmp_cache, tmp_path):
    script = tmp_path / "build.py"
    script.write_text(_TWO_PROCESSES)
    log = tmp_path / "builds.txt"
    procs = [subprocess.Popen([sys.executable, str(script), str(log)], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    outputs = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outputs == ["42", "42"]
    assert log.read_text().splitlines() == ["built"]  # the second process waited and used the first's entry
    entries = [p for p in (tmp_cache / "fast" / "_slow" / "default").iterdir() if not p.name.startswith(".")]
    assert len(entries) == 1 and not list(entries[0].parent.glob(".tmp-*"))


def test_unknown_settings_and_bad_values_are_refused():
    with pytest.raises(ValueError, match="no setting 'beams'"):
        config.override("self_consistency", beams=5)
    with pytest.raises(ValueError, match="unknown settings group"):
        config.override("beams", num_beams=5)
    with pytest.raises(ValueError, match="must be a int"):
        config.override("self_consistency", num_beams=2.5)
    with pytest.raises(AttributeError, match="read-only"):
        config.adapters().lr = 1.0
    assert config.overrides() == {}


def test_the_code_fingerprint_is_the_same_on_every_supported_python():
    """Python 3.12 added an empty `type_params` to every function and class in `ast.dump`, which moved every
    fingerprint; `normal_dump` leaves empty and None fields out (measured: the same 43 digests on 3.11-3.13)."""
    import ast

    from helpers.cache import fingerprint

    tree = ast.parse("def f(x):\n    return x + 1\n")
    before = fingerprint.normal_dump(tree)
    tree.body[0].type_params = []  # as Python 3.12 parses it
    assert fingerprint.normal_dump(tree) == before
    assert fingerprint.normal_dump(ast.parse("def f(x):\n    return x + 2\n")) != before
