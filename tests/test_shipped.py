"""The shipped world (helpers.cache.shipped): packing, checksums, installing, comparing a rebuild.

Uses a throwaway artifact in a temporary full-mode cache, so it runs in seconds in `make test`.
"""
from __future__ import annotations

import json

import pandas as pd
import pytest

from helpers.cache import artifacts, shipped
from helpers import config


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """A temporary full-mode cache holding two entries of a toy artifact that reads one setting."""
    monkeypatch.setenv("HELPERS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HELPERS_FAST", "0")

    @artifacts.register("toy_for_shipping")
    def _build(folder, k: int):
        (folder / "weights.bin").write_bytes(bytes(range(k)) * 100)
        return pd.DataFrame({"k": [k] * 3, "seed": [config.world().seed] * 3})

    artifacts.forget()
    for k in (3, 5):
        artifacts.load_or_build("toy_for_shipping", k=k)
    yield tmp_path
    artifacts.REGISTRY.pop("toy_for_shipping")
    artifacts.forget()


def test_pack_then_install_restores_usable_entries(toy):
    where = toy / "world"
    index = shipped.pack(where)
    assert list(index["archives"]) == ["toy_for_shipping.tar.xz"]
    assert len(index["archives"]["toy_for_shipping.tar.xz"]["entries"]) == 2
    first = (where / "toy_for_shipping.tar.xz").read_bytes()
    shipped.pack(where)  # deterministic: the same entries give the same bytes
    assert (where / "toy_for_shipping.tar.xz").read_bytes() == first

    import shutil
    shutil.rmtree(toy / "cache")
    artifacts.forget()
    assert artifacts.why_invalid("toy_for_shipping", k=3) == "not built yet"
    assert shipped.install(where) == {"added": 2, "present": 0, "entries": 2}
    assert artifacts.why_invalid("toy_for_shipping", k=3) is None
    assert artifacts.load_or_build("toy_for_shipping", k=5)["k"].tolist() == [5, 5, 5]
    assert shipped.install(where)["present"] == 2  # a second install adds nothing
    assert shipped.compare_rebuild(where) == []
    assert not list((toy / "cache").rglob(".tmp-*"))


def test_a_changed_setting_never_uses_a_shipped_entry(toy):
    where = toy / "world"
    shipped.pack(where)
    with config.override("world", seed=7):
        assert "setting world.seed changed" in artifacts.why_invalid("toy_for_shipping", k=3)
        assert artifacts.load_or_build("toy_for_shipping", k=3)["seed"].tolist() == [7, 7, 7]
    artifacts.forget()
    assert artifacts.load_or_build("toy_for_shipping", k=3)["seed"].tolist() == [0, 0, 0]


def test_a_corrupt_or_missing_shipped_file_names_the_file_and_the_fix(toy):
    where = toy / "world"
    shipped.pack(where)
    archive = where / "toy_for_shipping.tar.xz"
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"toy_for_shipping\.tar\.xz is corrupt.*git checkout.*make world"):
        shipped.install(where)
    archive.unlink()
    with pytest.raises(ValueError, match=r"toy_for_shipping\.tar\.xz is missing"):
        shipped.verify(where)
    (where / "index.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"index\.json is not valid JSON"):
        shipped.read_index(where)


def test_compare_rebuild_reports_a_file_that_differs(toy):
    where = toy / "world"
    shipped.pack(where)
    index = json.loads((where / "index.json").read_text())
    entry = index["archives"]["toy_for_shipping.tar.xz"]["entries"][0]
    folder = artifacts.entry_folder(entry)
    # a rebuild that trains other weights: same artifact and parameters, another file
    (folder / "weights.bin").write_bytes(b"other floats")
    manifest = json.loads((folder / artifacts.MANIFEST).read_text())
    manifest["files"]["weights.bin"] = artifacts.sha256_file(folder / "weights.bin")
    (folder / artifacts.MANIFEST).write_text(json.dumps(manifest))
    artifacts.forget()
    assert shipped.compare_rebuild(where) == [f"toy_for_shipping (k={entry['params']['k']}): weights.bin differs"]


def test_each_mode_ships_its_own_world_and_never_unpacks_the_other(toy, monkeypatch):
    """Full mode's archives are refused in fast mode and fast mode's in full mode; the fast world holds the
    entries of the default settings and of each of `FAST_OVERRIDES` (the settings the tests also use)."""
    full = toy / "world"
    assert shipped.pack(full)["mode"] == "full"
    monkeypatch.setenv("HELPERS_FAST", "1")
    assert shipped.shipped_dir() == shipped.FAST_DIR
    with pytest.raises(ValueError, match="the full-mode world, and this is fast mode: unset HELPERS_FAST"):
        shipped.install(full)
    monkeypatch.setattr(shipped, "FAST_OVERRIDES", ({"world": {"seed": 7}},))
    artifacts.load_or_build("toy_for_shipping", k=3)
    with config.override("world", seed=7):
        artifacts.load_or_build("toy_for_shipping", k=3)
    fast = toy / "fast-world"
    index = shipped.pack(fast)
    assert index["mode"] == "fast"
    assert len(index["archives"]["toy_for_shipping.tar.xz"]["entries"]) == 2  # one per setting
    assert shipped.compare_rebuild(fast) == []  # same parameters, other settings: each matched to its own
    monkeypatch.setattr(shipped, "FAST_DIR", fast)
    assert shipped.use() == ("shipped fast world: verified, 1 of 2 shipped entries usable with these settings "
                             "(small sizes for the tests; the others: other settings the tests use, or code "
                             "changed since)")
    monkeypatch.setenv("HELPERS_FAST", "0")
    with pytest.raises(ValueError, match="the fast-mode world, and this is full mode: set HELPERS_FAST=1"):
        shipped.install(fast)


def test_use_installs_the_shipped_world_and_says_whether_it_is_in_use(toy, monkeypatch):
    import shutil

    where = toy / "world"
    shipped.pack(where)
    monkeypatch.setattr(shipped, "SHIPPED_DIR", where)
    shutil.rmtree(toy / "cache")
    artifacts.forget()
    assert shipped.use() == "shipped world: verified, 2 of 2 shipped entries in use"
    assert artifacts.why_invalid("toy_for_shipping", k=5) is None  # unpacked by use()
    with config.override("world", seed=7):
        assert ("verified, 0 of 2 shipped entries in use (the others: a setting, the code or the thread count "
                "changed") in shipped.use()
    index = json.loads((where / "index.json").read_text())
    here = index["versions"]["torch"]
    index["versions"]["torch"] = "0.1"  # as if the world was built with another torch: still used, and said
    (where / "index.json").write_text(json.dumps(index))
    assert shipped.use() == ("shipped world: verified, 2 of 2 shipped entries in use; built under other versions "
                             f"than these (torch 0.1 -> {here}): nothing is rebuilt for that, but what a cell "
                             "computes with torch or numpy itself can differ from the committed outputs in the last "
                             "digits (docs/platforms.md)")
    monkeypatch.setenv("HELPERS_SHIPPED", "0")
    assert "not used (HELPERS_SHIPPED=0" in shipped.use()
    monkeypatch.delenv("HELPERS_SHIPPED")
    (where / "index.json").unlink()
    assert "none in data/world/" in shipped.use()


def test_install_repairs_a_damaged_entry(toy):
    where = toy / "world"
    index = shipped.pack(where)
    entry = index["archives"]["toy_for_shipping.tar.xz"]["entries"][0]
    weights = artifacts.entry_folder(entry) / "weights.bin"
    weights.write_bytes(b"half a file")  # a corrupt copy in the cache
    artifacts.forget()
    assert artifacts.entry_problem(entry) == "files are missing or corrupt"
    assert shipped.install(where) == {"added": 1, "present": 1, "entries": 2}
    assert artifacts.entry_problem(entry) is None
    assert not [p for p in weights.parent.parent.iterdir() if p.name.startswith((".ship-", ".old-"))]


def test_pack_ships_what_was_read_and_everything_it_was_built_from(tmp_path):
    from helpers.cache.shipped import read_entries

    def entry(id_, *deps):
        return {"id": id_, "name": "x", "params": {}, "deps": [{"id": d, "name": "x", "params": {}} for d in deps]}

    entries = [entry("world"), entry("greedy", "world"), entry("adapter", "world"),
               entry("result", "adapter", "greedy"), entry("unread", "world")]
    log = tmp_path / "read.log"
    log.write_text("result/result\nresult/result\ngreedy/greedy\n")  # a kernel may log an entry many times
    assert sorted(e["id"] for e in read_entries(log, entries)) == ["adapter", "greedy", "result", "world"]
    log.write_text("gone/gone\n")
    with pytest.raises(ValueError, match="no longer valid"):
        read_entries(log, entries)


def test_a_rebuild_may_differ_in_timings_and_cache_paths_only():
    import pickle

    import pandas as pd

    from helpers.cache.shipped import same_content

    frame = pd.DataFrame({"confidence": [0.25, 0.5]})
    slow, fast = frame.copy(), frame.copy()
    slow.attrs["read_seconds"], fast.attrs["read_seconds"] = 9.0, 1.0
    assert same_content("result.pkl", pickle.dumps({"seconds": 3.0, "r": slow}),
                        pickle.dumps({"seconds": 1.0, "r": fast}))
    assert not same_content("result.pkl", pickle.dumps({"r": frame}), pickle.dumps({"r": frame * 2}))
    # peft writes the base checkpoint's path: another cache folder and another entry id are the same result
    readme = "base_model: /a/data/cache/full/world/default/839b936a520bd957/checkpoints/step-01300\n"
    moved = readme.replace("/a/data/cache", "/b/data/scratch").replace("839b936a520bd957", "2ab2e5c5ffcf8a16")
    assert same_content("README.md", readme.encode(), moved.encode())
    config_json = '{"base_model_name_or_path": "%s", "r": 16}' % readme.split(": ")[1].strip()
    assert same_content("adapter_config.json", config_json.encode(),
                        config_json.replace("/a/data/cache", "/tmp/x").encode())
    assert not same_content("README.md", readme.encode(), readme.replace("step-01300", "step-01400").encode())
    assert not same_content("adapter_config.json", config_json.encode(),
                            config_json.replace('"r": 16', '"r": 8').encode())
    assert not same_content("adapter_model.safetensors", b"1", b"2")


def test_a_rebuild_that_reproduces_the_shipped_files_rekeys_them_without_new_archives(toy, monkeypatch):
    """A refactor changes the code's key of every entry; `rekey` (after `make world`) records the new key in
    the index for each entry whose rebuild reproduced its files, and `install` writes it into the manifest."""
    import shutil

    where = toy / "world"
    index = shipped.pack(where)
    archive = (where / "toy_for_shipping.tar.xz").read_bytes()
    monkeypatch.setattr(artifacts, "code_of", lambda art: "refactored-code")  # as after a refactor
    artifacts.forget()
    assert "the code that built it changed" in artifacts.why_invalid("toy_for_shipping", k=3)
    monkeypatch.setenv("HELPERS_CACHE", str(toy / "scratch"))  # `make world`: rebuild without the shipped files
    for k in (3, 5):
        artifacts.load_or_build("toy_for_shipping", k=k)
    real = artifacts.REGISTRY["toy_for_shipping"].build

    def changed(folder, k):  # k=5 no longer reproduces its weights
        result = real(folder, k)
        if k == 5:
            (folder / "weights.bin").write_bytes(b"other")
        return result

    artifacts.REGISTRY["toy_for_shipping"].build = changed
    with config.override("world", seed=0):  # same settings, a new process's view of the k=5 entry
        artifacts.forget()
        shutil.rmtree(artifacts.entry_folder(artifacts.manifest("toy_for_shipping", k=5)))
        artifacts.load_or_build("toy_for_shipping", k=5)
    assert shipped.rekey(where) == ["toy_for_shipping (k=5)"]
    assert (where / "toy_for_shipping.tar.xz").read_bytes() == archive  # the archive is untouched
    rekeyed = json.loads((where / "index.json").read_text())["rekeyed"]
    assert list(rekeyed) == [e["id"] for e in index["archives"]["toy_for_shipping.tar.xz"]["entries"]
                             if e["params"]["k"] == 3]
    assert rekeyed[next(iter(rekeyed))]["code"] == "refactored-code"
    monkeypatch.setenv("HELPERS_CACHE", str(toy / "reader"))  # a reader's fresh clone
    artifacts.forget()
    shipped.install(where)
    assert artifacts.why_invalid("toy_for_shipping", k=3) is None  # re-keyed: used as shipped
    assert "the code that built it changed" in artifacts.why_invalid("toy_for_shipping", k=5)  # needs `make pack`


def test_a_repack_keeps_the_archives_whose_entries_did_not_change(toy, monkeypatch):
    """`make pack` after a change to one artifact rewrites that artifact's archive only: an archive whose
    entries are the ones it holds (same ids) stays byte for byte, so a clone grows by what changed."""
    where = toy / "world"

    @artifacts.register("toy_second")
    def _second(folder, k: int):
        return pd.DataFrame({"k": [k]})

    try:
        artifacts.load_or_build("toy_second", k=1)
        shipped.pack(where)
        kept, changed = (where / "toy_for_shipping.tar.xz").read_bytes(), (where / "toy_second.tar.xz").read_bytes()
        artifacts.load_or_build("toy_second", k=2)  # one more entry of the second artifact
        index = shipped.pack(where)
        assert (where / "toy_for_shipping.tar.xz").read_bytes() == kept
        assert (where / "toy_second.tar.xz").read_bytes() != changed
        assert len(index["archives"]["toy_second.tar.xz"]["entries"]) == 2
        first = index["archives"]["toy_for_shipping.tar.xz"]["entries"]
        assert sorted(index["rekeyed"]) == sorted(e["id"] for e in first)
        monkeypatch.setenv("HELPERS_CACHE", str(toy / "reader"))  # a reader's fresh clone
        artifacts.forget()
        assert shipped.install(where)["added"] == 4
        assert artifacts.why_invalid("toy_for_shipping", k=3) is None
        assert artifacts.why_invalid("toy_second", k=2) is None
    finally:
        artifacts.REGISTRY.pop("toy_second")
