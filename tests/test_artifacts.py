import json

import pandas as pd
import pytest

from helpers import artifacts


@pytest.fixture
def counting_artifact():
    calls = []

    @artifacts.register("_test_counter")
    def _build(folder, size=3):
        calls.append(size)
        (folder / "extra.txt").write_text("hello")
        return pd.DataFrame({"x": range(size)})

    yield calls
    artifacts.REGISTRY.pop("_test_counter", None)


def test_load_or_build_builds_once(tmp_cache, counting_artifact):
    a = artifacts.load_or_build("_test_counter", size=3)
    b = artifacts.load_or_build("_test_counter", size=3)
    pd.testing.assert_frame_equal(a, b)
    assert counting_artifact == [3]
    artifacts.load_or_build("_test_counter", size=4)  # other parameters: another entry
    assert counting_artifact == [3, 4]
    manifest = json.loads((artifacts.artifact_dir("_test_counter", size=3) / artifacts.MANIFEST).read_text())
    assert manifest["versions"]["torch"] and "extra.txt" in manifest["files"]


@pytest.mark.parametrize(
    "damage",
    ["corrupt_manifest", "delete_manifest", "truncate_result", "change_hash", "delete_file", "change_versions"],
)
def test_damaged_entries_are_rebuilt(tmp_cache, counting_artifact, damage):
    artifacts.load_or_build("_test_counter")
    folder = artifacts.artifact_dir("_test_counter")
    manifest = folder / artifacts.MANIFEST
    artifacts._VERIFIED.clear()  # as in a fresh process
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
        if damage == "change_hash":
            m["config_hash"] = "0" * 16
        else:
            m["versions"]["torch"] = "0.0"
        manifest.write_text(json.dumps(m))
    assert artifacts.why_invalid("_test_counter") is not None
    df = artifacts.load_or_build("_test_counter")
    assert counting_artifact == [3, 3] and len(df) == 3
    assert artifacts.why_invalid("_test_counter") is None


def test_failed_build_leaves_no_entry(tmp_cache):
    @artifacts.register("_test_failing")
    def _build(folder):
        (folder / "partial.bin").write_bytes(b"x" * 100)
        raise RuntimeError("killed halfway")

    try:
        with pytest.raises(RuntimeError):
            artifacts.load_or_build("_test_failing")
        folder = artifacts.artifact_dir("_test_failing")
        assert not folder.exists()
        assert not list(folder.parent.glob(".tmp-*"))
    finally:
        artifacts.REGISTRY.pop("_test_failing", None)


def test_unknown_artifact_raises():
    with pytest.raises(ValueError, match="known artifacts"):
        artifacts.load_or_build("no-such-thing")


def test_nested_builds_are_counted_once_in_own_seconds(tmp_cache):
    import time

    @artifacts.register("_test_inner")
    def _inner(folder):
        time.sleep(0.3)
        return 1

    @artifacts.register("_test_outer")
    def _outer(folder):
        time.sleep(0.1)
        return artifacts.load_or_build("_test_inner") + 1

    try:
        assert artifacts.load_or_build("_test_outer") == 2
        read = lambda n: json.loads((artifacts.artifact_dir(n) / artifacts.MANIFEST).read_text())
        inner, outer = read("_test_inner"), read("_test_outer")
        assert inner["own_seconds"] == pytest.approx(inner["seconds"], abs=0.02) and inner["seconds"] >= 0.3
        assert outer["seconds"] >= 0.4  # includes the inner build
        assert outer["own_seconds"] == pytest.approx(outer["seconds"] - inner["seconds"], abs=0.05)
        assert 0.1 <= outer["own_seconds"] < 0.3
        assert artifacts._NESTED_SECONDS == []
    finally:
        artifacts.REGISTRY.pop("_test_inner", None)
        artifacts.REGISTRY.pop("_test_outer", None)


def test_world_hash_follows_the_data_mixture(monkeypatch):
    from helpers import sums, training  # noqa: F401  (registers the world)

    before = artifacts.config_hash("world")
    selection = artifacts.config_hash("selection")
    monkeypatch.setattr(sums, "PHASES", ((0.0, "uniform"),))
    assert artifacts.config_hash("world") != before
    assert artifacts.config_hash("selection") != selection  # downstream entries follow
