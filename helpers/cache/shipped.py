"""The shipped world: the full-mode cache entries the notebooks read, committed under `data/world/`, and
the fast world: the fast-mode entries `make test` reads, committed under `data/fast-world/`.

Training the world and everything built on it takes more than half an hour on two cores, and another
machine's floats train another world. So the repository ships the entries themselves: one compressed
archive per artifact (`data/world/<name>.tar.xz`) and `data/world/index.json`, which gives each
archive's SHA-256, size and entries, and the package versions they were built with.

- `install()` (run by `python -m helpers build` and `notebooks --build`, so by `make notebooks`, and by
  `use()` in the setup cell of every notebook, so a notebook opened in JupyterLab uses it too) checks
  every archive against its checksum first, then unpacks the entries the cache does not already hold.
  A file that fails its checksum stops it with a `ValueError` naming the file and the commands that
  restore or rebuild it. Once unpacked, an entry is an ordinary cache entry: the cache checks its manifest (settings,
  builder version, package versions, upstream entries, file checksums) before every use, and
  rebuilds it when anything differs, so a changed setting never shows a shipped number.
- `pack()` (`python -m helpers pack`, after a complete build and notebook run) writes the archives.
  They are deterministic: the same entries give the same bytes, so repacking leaves `git status` clean.
- `compare_rebuild()` checks a from-scratch rebuild (`make world`, which sets HELPERS_SHIPPED=0 so that
  nothing is unpacked) against the shipped checksums.

The fast world is shipped the same way, for the same reason at a smaller scale: built from scratch, its
entries took about 5 of a fresh clone's `make test` minutes on two cores. Every function below works on
the current mode's folder (`shipped_dir()`), and an index records its mode, so neither world is ever
unpacked into the other's cache. The fast entries are results of one torch thread (`make test`'s), under
the default settings and under `FAST_OVERRIDES`; a code change rebuilds exactly the entries it touches,
as for any cache entry, until `make pack-fast` ships them again.

Used by `helpers.build.cli`, the setup cell of every notebook (`helpers.build.notebook`) and the tests'
session start (tests/conftest.py).
"""
from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import lzma
import os
import pickle
import re
import shutil
import tarfile
import uuid
from pathlib import Path

import numpy as np
import pandas as pd

from helpers.cache import artifacts
from helpers import config

SHIPPED_DIR = config.DATA_DIR / "world"
FAST_DIR = config.DATA_DIR / "fast-world"
# The settings `make test` also runs the fast world under, besides the defaults: a world where no pair of
# checkpoints reaches the contrast-set sizes (tests/test_notebooks.py). Their entries are shipped too.
FAST_OVERRIDES = ({"contrast": {"min_size": 100_000, "min_size_transfer": 100_000}},)
INDEX = "index.json"
RESTORE = ("restore it with `git checkout -- {path}` (or a fresh clone), or rebuild every artifact "
           "without the shipped files with `make world`")


def read_index(where: Path | None = None) -> dict | None:
    """The shipped index, or None where nothing is shipped. A corrupt index is a `ValueError`."""
    where = shipped_dir() if where is None else where
    path = where / INDEX
    if not path.exists():
        return None
    try:
        index = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); " + RESTORE.format(path=path)) from err
    if not isinstance(index, dict) or not isinstance(index.get("archives"), dict):
        raise ValueError(f"{path} has no 'archives' table; " + RESTORE.format(path=path))
    return index


def verify(where: Path | None = None) -> dict:
    """Check every shipped archive against the index; returns the index. Raises `ValueError` naming
    the first file that is missing or whose checksum differs."""
    where = shipped_dir() if where is None else where
    index = read_index(where)
    if index is None:
        raise ValueError(f"nothing is shipped: {where / INDEX} does not exist")
    for name, info in sorted(index["archives"].items()):
        path = where / name
        if not path.exists():
            raise ValueError(f"shipped file {path} is missing; " + RESTORE.format(path=path))
        if path.stat().st_size != info["bytes"] or artifacts.sha256_file(path) != info["sha256"]:
            raise ValueError(f"shipped file {path} is corrupt (its SHA-256 differs from {where / INDEX}); "
                             + RESTORE.format(path=path))
    return index


def mode() -> str:
    """"fast" where HELPERS_FAST=1, else "full": the mode whose world the functions below ship."""
    return "fast" if config.fast_mode() else "full"


def shipped_dir() -> Path:
    """This mode's shipped folder: `data/world/` in full mode, `data/fast-world/` in fast mode."""
    return FAST_DIR if config.fast_mode() else SHIPPED_DIR


def _mode_root(index: dict | None = None) -> Path:
    """The cache folder of this mode; a `ValueError` where `index` holds the other mode's entries."""
    shipped_mode = (index or {}).get("mode", "full")
    if index is not None and shipped_mode != mode():
        raise ValueError(f"these archives hold the {shipped_mode}-mode world, and this is {mode()} mode: "
                         + ("unset HELPERS_FAST to use it" if shipped_mode == "full" else "set HELPERS_FAST=1"))
    return config.cache_dir()


def _valid_entries() -> list[dict]:
    """The usable entries of this mode's cache; in fast mode, under the defaults or any of `FAST_OVERRIDES`."""
    found = {e["id"]: e for e in artifacts.valid_entries()}
    for overrides in FAST_OVERRIDES if config.fast_mode() else ():
        with contextlib.ExitStack() as stack:
            for group, values in overrides.items():
                stack.enter_context(config.override(group, **values))
            found.update((e["id"], e) for e in artifacts.valid_entries())
    return sorted(found.values(), key=lambda e: (e["name"], e["id"]))


_DAMAGED = ("manifest is missing", "manifest is corrupt", "files are missing or corrupt")


def _needs_unpacking(entry: dict) -> bool:
    """True where the entry's folder is missing, or holds a partial or corrupt copy of it."""
    return not artifacts.entry_folder(entry).exists() or artifacts.entry_problem(entry) in _DAMAGED


def install(where: Path | None = None) -> dict:
    """Verify the shipped archives and unpack every entry the cache lacks or holds damaged; returns
    counts (`added`: unpacked now, `present`: already there).

    An intact entry is left alone (the cache checks it on use), and an archive with nothing to unpack
    is not opened. Each entry is unpacked into a temporary folder and renamed into place, so an
    interrupted install leaves no partial entry; a damaged copy is moved aside first, then removed.
    """
    where = shipped_dir() if where is None else where
    index = verify(where)
    root = _mode_root(index)
    with artifacts.lock(root):  # two processes starting at once (two test workers) unpack it once
        added = _unpack_missing(where, index, root)
        rekeyed = _apply_rekeys(index)
    if added or rekeyed:
        artifacts.forget()  # entries replaced on disk are checked again (unpacked files keep the archive's times)
    entries = sum(len(info["entries"]) for info in index["archives"].values())
    return {"added": added, "present": entries - added, "entries": entries}


def _unpack_missing(where: Path, index: dict, root: Path) -> int:
    added = 0
    for name, info in sorted(index["archives"].items()):
        todo = {str(artifacts.entry_folder(e).relative_to(root)) for e in info["entries"] if _needs_unpacking(e)}
        if not todo:
            continue
        # Decompressed once, into memory (the largest archive is a few tens of MB): extracting entry by
        # entry from an xz stream seeks backwards, and each such seek decompresses from the start again.
        with lzma.open(where / name) as packed:
            data = io.BytesIO(packed.read())
        with tarfile.open(fileobj=data, mode="r:") as tar:
            members = tar.getmembers()
            for entry in sorted(todo):
                _unpack_entry(tar, members, entry, root / entry)
                added += 1
    return added


# Re-keying: a shipped entry whose rebuild under the current code reproduced every one of its files is kept
# as it is, and the index records the key of the code that reproduced it (`rekey`). `install` writes that key
# into the unpacked entry's manifest (which no checksum covers), so the archive itself never changes: a
# refactor costs a rebuild and a few lines of index.json, not new archives in every clone.
REKEYED = ("code", "threads", "cache_version")


def _apply_rekeys(index: dict) -> int:
    """Write the index's recorded keys into the manifests of the unpacked entries; returns how many changed."""
    changed = 0
    for entry_id, key in index.get("rekeyed", {}).items():
        entry = next((e for info in index["archives"].values() for e in info["entries"] if e["id"] == entry_id), None)
        path = artifacts.entry_folder(entry) / artifacts.MANIFEST if entry else None
        if path is None or not path.exists():
            continue
        manifest = json.loads(path.read_text())
        if {k: manifest.get(k) for k in REKEYED} != {k: key.get(k) for k in REKEYED}:
            manifest.update({k: key[k] for k in REKEYED if k in key})
            path.write_text(json.dumps(manifest, indent=1, sort_keys=True))
            changed += 1
    return changed


def rekey(where: Path | None = None) -> list[str]:
    """After a rebuild under the current code (`make world`): record in the index, for every shipped entry
    that the rebuild reproduced file for file, the key of the code that reproduced it. Returns the entries
    it could not re-key (not rebuilt, or a file differs): those need `make pack`. Writes nothing else."""
    where = shipped_dir() if where is None else where
    index = verify(where)
    differences = compare_rebuild(where)
    built = {(e["name"], json.dumps(e["params"], sort_keys=True)): e for e in _valid_entries()}
    failed_labels = {line.split(":")[0] for line in differences}
    rekeyed, failed = {}, []
    for info in index["archives"].values():
        for entry in info["entries"]:
            label = f"{entry['name']} ({artifacts.label(entry['params'])})"
            twin = built.get((entry["name"], json.dumps(entry["params"], sort_keys=True)))
            if twin is None or label in failed_labels:
                failed.append(label)
                continue
            rekeyed[entry["id"]] = {k: twin[k] for k in REKEYED}
    index["rekeyed"] = dict(sorted(rekeyed.items()))
    (where / INDEX).write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    return failed


def _unpack_entry(tar: tarfile.TarFile, members: list, entry: str, final: Path) -> None:
    tmp = final.parent / f".ship-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    old = final.with_name(f".old-{final.name}-{uuid.uuid4().hex[:8]}") if final.exists() else None
    try:
        inside = [copy.copy(m) for m in members if m.name.startswith(entry + "/")]
        for m in inside:
            m.name = m.name[len(entry) + 1:]
        tar.extractall(tmp, members=inside, filter="data")
        if old is not None:
            os.replace(final, old)
        try:
            os.replace(tmp, final)
        except OSError:  # another process unpacked it meanwhile
            if not final.exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def use() -> str:
    """Install the shipped world where it can be used, and say in one line whether it is (the setup
    cell of every notebook prints it)."""
    what = "shipped fast world" if config.fast_mode() else "shipped world"
    if os.environ.get("HELPERS_SHIPPED", "1") == "0":
        return f"{what}: not used (HELPERS_SHIPPED=0: everything is built on this machine, as `make world` does)"
    try:
        index = read_index()
        if index is None:
            return (f"{what}: none in data/{shipped_dir().name}/ (everything is built on this machine"
                    + (": minutes the first time)" if config.fast_mode() else ")"))
        install()
    except ValueError as err:
        return f"{what}: NOT USED: {err}"
    usable, entries = in_use(index)
    if config.fast_mode():  # its entries hold several settings (FAST_OVERRIDES): not all can be in use at once
        return (f"{what}: verified, {usable} of {len(entries)} shipped entries usable with these settings "
                "(small sizes for the tests; the others: other settings the tests use, or code changed since)")
    return (f"{what}: verified, {usable} of {len(entries)} shipped entries in use"
            + ("" if usable == len(entries) else
               " (the others: a setting, the code or the thread count changed since they were built)")
            + versions_note(index))


def in_use(index: dict) -> tuple[int, list[dict]]:
    """How many of the shipped entries `index` lists are valid with this code and these settings, and them all."""
    entries = [e for info in index["archives"].values() for e in info["entries"]]
    return sum(artifacts.entry_problem(e) is None for e in entries), entries


def complete() -> bool:
    """Whether the shipped world is installed and every entry of it is in use: then it holds everything the
    notebooks read (it was packed from what they read, and the output check runs them on it alone)."""
    index = read_index() if os.environ.get("HELPERS_SHIPPED", "1") != "0" else None
    if index is None or config.fast_mode():
        return False
    usable, entries = in_use(index)
    return usable == len(entries)


def versions_note(index: dict) -> str:
    """'' where this machine has the versions the world was built with; else one clause saying which
    differ and what that can change. A shipped entry is a result: other versions never refuse it."""
    differ = artifacts.version_differences(index.get("versions", {}))
    if not differ:
        return ""
    return (f"; built under other versions than these ({artifacts.describe_versions(differ)}): nothing is "
            "rebuilt for that, but what a cell computes with torch or numpy itself can differ from the "
            "committed outputs in the last digits (docs/platforms.md)")


# ---------------------------------------------------------------------------- packing


def _tar_bytes(root: Path, entries: list[Path]) -> bytes:
    """A deterministic tar of `entries` (folders under `root`): sorted, zero times and owners."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for entry in entries:
            for path in [entry, *sorted(entry.rglob("*"))]:
                if path.name.startswith(".lock"):
                    continue
                info = tar.gettarinfo(str(path), arcname=str(path.relative_to(root)))
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                info.mode = 0o755 if path.is_dir() else 0o644
                if path.is_file():
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return buf.getvalue()


def read_entries(log: Path, entries: list[dict]) -> list[dict]:
    """The entries a run read (the "name/id" lines HELPERS_READ_LOG collected), with everything they were
    built from: a cached entry is only valid while its inputs are there too."""
    by_id = {e["id"]: e for e in entries}
    todo = [line.strip().split("/")[-1] for line in Path(log).read_text().splitlines() if line.strip()]
    missing = sorted(set(todo) - set(by_id))
    if missing:
        raise ValueError(f"{len(missing)} entries in {log} are no longer valid (e.g. {missing[0]}); "
                         "rerun `make pack` to read a consistent world")
    keep: dict[str, dict] = {}
    while todo:
        entry = by_id[todo.pop()]
        if entry["id"] not in keep:
            keep[entry["id"]] = entry
            todo.extend(dep["id"] for dep in entry["deps"])
    return list(keep.values())


def pack(where: Path | None = None, read_log: Path | None = None) -> dict:
    """Write one archive per artifact of every valid full-mode entry (or, with `read_log`, of the entries a
    build and the notebooks read: see `read_entries`), and the index; returns the index.

    An archive whose entries are exactly those it already holds (the same ids: nothing in it was rebuilt) is
    kept byte for byte, with the keys `install` wrote into its manifests recorded under ``rekeyed``: a change
    to a few artifacts adds only their archives to every clone, not the whole world."""
    where = shipped_dir() if where is None else where
    root = _mode_root()
    entries = _valid_entries()
    if read_log is not None:
        entries = read_entries(read_log, entries)
    if not entries:
        raise ValueError(f"no valid entries under {root}; run `python -m helpers build` and the notebooks first")
    where.mkdir(parents=True, exist_ok=True)
    old = read_index(where) or {"archives": {}}
    by_name: dict[str, list[dict]] = {}
    for e in entries:
        by_name.setdefault(e["name"], []).append(e)
    archives, rekeyed = {}, {}
    for name, group in sorted(by_name.items()):
        path = where / f"{name}.tar.xz"
        before = old["archives"].get(path.name)
        if before and path.exists() and {e["id"] for e in before["entries"]} == {e["id"] for e in group}:
            archives[path.name] = before
            rekeyed.update({e["id"]: {k: e[k] for k in REKEYED} for e in group})
            continue
        folders = sorted(artifacts.entry_folder(e) for e in group)
        data = lzma.compress(_tar_bytes(root, folders), preset=9 | lzma.PRESET_EXTREME)
        path = where / f"{name}.tar.xz"
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        archives[path.name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
                               "entries": sorted(({"name": e["name"], "params": e["params"], "id": e["id"]}
                                                  for e in group), key=lambda e: json.dumps(e, sort_keys=True))}
    for stale in set(p.name for p in where.glob("*.tar.xz")) - set(archives):
        (where / stale).unlink()
    index = {"format": 1, "mode": mode(), "versions": artifacts.package_versions(),
             "total_bytes": sum(a["bytes"] for a in archives.values()), "archives": archives}
    if rekeyed:
        index["rekeyed"] = dict(sorted(rekeyed.items()))
    (where / INDEX).write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    return index


def compare_rebuild(where: Path | None = None) -> list[str]:
    """Compare the valid entries of the current cache with the shipped ones, file by file.

    Returns one line per difference (an empty list: the rebuild reproduced every shipped file).
    Entries are matched by artifact, parameters and the settings they read, so a rebuild under another id
    still compares (the fast world holds entries of the same parameters under several settings).
    """
    where = shipped_dir() if where is None else where
    index = verify(where)
    built = {_match_key(e): e for e in _valid_entries()}
    out = []
    for name in sorted(index["archives"]):
        with tarfile.open(where / name, "r:xz") as tar:
            manifests = {m.name: m for m in tar.getmembers() if m.name.endswith("/" + artifacts.MANIFEST)}
            for member in sorted(manifests):
                shipped = json.loads(tar.extractfile(manifests[member]).read())
                key = _match_key(shipped)
                label = f"{shipped['name']} ({artifacts.label(shipped['params'])})"
                if key not in built:
                    out.append(f"{label}: not rebuilt")
                    continue
                member_dir = member.rsplit("/", 1)[0]
                for file, sha in sorted(shipped["files"].items()):
                    if built[key]["files"].get(file) == sha:
                        continue
                    here = artifacts.entry_folder(built[key]) / file
                    theirs = tar.extractfile(f"{member_dir}/{file}")
                    if not here.exists() or theirs is None or not same_content(file, theirs.read(), here.read_bytes()):
                        out.append(f"{label}: {file} differs")
    return out


def _match_key(manifest: dict) -> tuple[str, str, str]:
    """What makes two builds the same entry: artifact, parameters and the settings it read."""
    return tuple(json.dumps(manifest[k], sort_keys=True) for k in ("name", "params", "reads"))


# What may differ between two builds of the same entry without changing a result: how long a step took,
# and the path of the base checkpoint that peft writes into an adapter's README and adapter_config.json
# (the cache's absolute path and the base entry's id, which is new in every build).
TIMINGS = {"seconds", "read_seconds", "train_seconds", "own_seconds"}
# <cache>/<mode>/<name>/<params>/<id>/
_CACHE_PATH = re.compile(r'[^\s:"]*/(full|fast)/[^/\s"]+/[^/\s"]+/[0-9a-f]{16}/')


def same_content(file: str, a: bytes, b: bytes) -> bool:
    """Whether two versions of a cache file hold the same result, timings and cache paths aside."""
    if a == b:
        return True
    if file.endswith((".md", ".json")):
        return _CACHE_PATH.sub("<entry>/", a.decode()) == _CACHE_PATH.sub("<entry>/", b.decode())
    if file.endswith(".pkl"):
        return _same(pickle.loads(a), pickle.loads(b))
    return False


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        keys = set(a) - TIMINGS
        return keys == set(b) - TIMINGS and all(_same(a[k], b[k]) for k in keys)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (pd.DataFrame, pd.Series)):
        if isinstance(a, pd.DataFrame):
            a, b = (x.drop(columns=[c for c in x.columns if c in TIMINGS]) for x in (a, b))
        return a.equals(b) and _same({k: v for k, v in a.attrs.items()}, {k: v for k, v in b.attrs.items()})
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, float):
        return a == b or (np.isnan(a) and np.isnan(b))
    return bool(a == b)
