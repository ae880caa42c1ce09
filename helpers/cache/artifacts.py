"""Train-or-load: every heavy result is built once, cached with a manifest, and reused.

Notebooks and helpers call `load_or_build(name, **params)`. While a builder runs, the cache records
what it read: every setting (through `helpers.config`'s groups) and every other artifact it loaded
(nested `load_or_build` and `folder` calls, by entry). The manifest keeps that trace with the
fingerprint of the code that ran (`helpers.cache.fingerprint`: the builder's module and every helpers
module it uses), the torch thread count, the package versions and a checksum of every file. An entry is
used only while each recorded setting still has its recorded value, the code and the thread count are
unchanged, each artifact it loaded is still valid, and each file still has its checksum. So changing a
setting or editing a helper rebuilds exactly the entries that depend on it and everything built from
them, and nothing else.

Package versions are provenance, not validity: an entry is a result, like a figure in a paper, and a
reader's other Python or torch build does not refuse it (`version_differences` says what differs, and
the setup cell reports it). Versions matter when an entry is *rebuilt*: another torch sums floats in
another order. So before anything is built, `folder` says what it will build, roughly how long that
takes from the timings of the entry it replaces, and whether this machine's versions differ from the
ones that entry was built with.

Layout: ``cache/<mode>/<name>/<params>/<entry id>/``. Entries built under other settings stay beside
each other, so switching a setting back reuses the old entry. A build runs in a temporary folder that
is renamed into place only when complete, under a lock per (name, params): a second process waits for
the first and then uses its entry, and no process removes a folder another one is writing.

Builders register themselves here (`@register`); the package's `__init__` imports every module that does,
so this module never imports its users.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import pickle
import platform
import re
import shutil
import sys
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from helpers import config
from helpers.cache import fingerprint

MANIFEST = "manifest.json"
RESULT = "result.pkl"
CACHE_VERSION = "2"  # bump when a change anywhere should invalidate every cached artifact
_PACKAGES = ("torch", "transformers", "tokenizers", "peft", "numpy", "pandas", "scikit-learn")


@dataclass
class Artifact:
    """A named, cacheable result: `build(folder, **params)` writes files and/or returns an object."""

    name: str
    build: Callable[..., Any]
    describe: str


REGISTRY: dict[str, Artifact] = {}


def register(name: str):
    """Decorator: register `build(folder, **params)` as the builder of artifact `name`.

    Nothing else is declared: the cache records the settings and upstream artifacts the build reads,
    and fingerprints the code of the builder's module and of every helpers module it uses.
    """

    def wrap(fn):
        old = REGISTRY.get(name)  # the same function again (a re-import, a test fixture) may re-register
        if old is not None and (old.build.__module__, old.build.__qualname__) != (fn.__module__, fn.__qualname__):
            raise ValueError(f"artifact {name!r} is already built by {old.build.__module__}.{old.build.__qualname__}; "
                             f"register {fn.__module__}.{fn.__qualname__} under another name")
        REGISTRY[name] = Artifact(name, fn, (fn.__doc__ or "").strip())
        return fn

    return wrap


def package_versions() -> dict[str, str]:
    """The versions an entry is built with. Python by major.minor: a patch release changes no result."""
    return dict(_installed_versions())


@functools.cache
def _installed_versions() -> tuple[tuple[str, str], ...]:
    """Read once per process: importlib.metadata parses every package's METADATA on each call, and checking
    the cache's entries asked it thousands of times (95% of a cache check's time, measured)."""
    out = [("python", ".".join(platform.python_version_tuple()[:2]))]
    for pkg in _PACKAGES:
        try:
            out.append((pkg, metadata.version(pkg)))
        except metadata.PackageNotFoundError:
            out.append((pkg, "absent"))
    return tuple(out)


def code_of(art: Artifact) -> str:
    """The fingerprint of the code an entry of `art` is built by (`helpers.cache.fingerprint`)."""
    return fingerprint.code_fingerprint(art.build.__module__)


def cpu_kernels() -> str:
    """The CPU kernels torch computes with ("AVX2", "AVX512", "DEFAULT", ...): recorded, not checked, like
    the package versions (a shipped entry is a result on any processor)."""
    import torch  # local: only when a build records it

    return torch.backends.cpu.get_cpu_capability()


def version_differences(recorded: dict[str, str]) -> dict[str, tuple[str, str]]:
    """{package: (recorded, here)} for every package whose version here differs from `recorded`."""
    here = package_versions()
    return {pkg: (was, here.get(pkg, "absent")) for pkg, was in recorded.items() if here.get(pkg, "absent") != was}


def describe_versions(differ: dict[str, tuple[str, str]]) -> str:
    """"python 3.11 -> 3.12, torch 2.13.0+cpu -> 2.13.0+cu130" (recorded -> here)."""
    return ", ".join(f"{pkg} {was} -> {now}" for pkg, (was, now) in differ.items())


def _artifact(name: str) -> Artifact:
    if name not in REGISTRY:
        raise ValueError(f"unknown artifact {name!r}; known artifacts: {sorted(REGISTRY)}")
    return REGISTRY[name]


def _params_dir(name: str, params: dict) -> Path:
    """cache/<mode>/<name>/<params>: the folder holding every entry of these parameters."""
    _artifact(name)
    slug = "-".join(f"{k}={params[k]}" for k in sorted(params)) or "default"
    safe = re.sub(r"[^A-Za-z0-9=._+-]", "_", slug)
    if safe != slug or len(safe) > 80:  # long or odd parameters: a readable prefix and a hash
        safe = f"{safe[:40]}-{hashlib.sha256(slug.encode()).hexdigest()[:12]}"
    return config.cache_dir() / name / safe


def sha256_file(path: Path) -> str:
    """The SHA-256 of a file, read in 1 MB chunks (manifests here; the shipped archives in `shipped`)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): sha256_file(p) for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != MANIFEST}


def _read_manifest(folder: Path) -> dict | None:
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return manifest if isinstance(manifest, dict) else None


# ---------------------------------------------------------------------------- checking entries

# Per entry folder: (settings generation, sources generation, threads, manifest mtime, reason or None). Checksums are
# computed once per process and manifest; the rest is checked again after any change of a setting or a source.
_CHECKED: dict[Path, tuple[int, int, int, int, str | None]] = {}
_SOURCES = [0]  # the helpers sources' generation (`fingerprint.refresh`) when the checks were made
_FILES_OK: dict[Path, int] = {}


def forget() -> None:
    """Forget every check made in this process (as a fresh process would)."""
    _CHECKED.clear()
    _FILES_OK.clear()


def _entry_problem(folder: Path) -> str | None:
    """None if the entry in `folder` can be used now, else why not."""
    try:
        stamp = (folder / MANIFEST).stat().st_mtime_ns
    except OSError:
        return "manifest is missing"
    memo = _CHECKED.get(folder)
    now = (config.generation(), _SOURCES[0], config.threads(), stamp)
    if memo is not None and memo[:4] == now:
        return memo[4]
    reason = _check(folder, stamp)
    _CHECKED[folder] = (*now, reason)
    return reason


def _check(folder: Path, stamp: int) -> str | None:
    manifest = _read_manifest(folder)
    if manifest is None or not {"name", "reads", "deps", "files", "versions"} <= set(manifest):
        return "manifest is corrupt"
    art = REGISTRY.get(manifest["name"])
    if art is None:
        return f"no builder is registered as {manifest['name']!r} any more"
    if manifest.get("cache_version") != CACHE_VERSION:
        return "the cache's format changed"
    if manifest.get("code") != code_of(art):
        return ("the code that built it changed (its builder's module or a helpers module it uses)"
                if "code" in manifest else "it records no fingerprint of the code that built it")
    if manifest.get("threads") != config.threads():
        return f"it was built with {manifest.get('threads')} torch threads, not {config.threads()} (HELPERS_THREADS)"
    for key, recorded in manifest["reads"].items():
        try:
            now = config.canonical(config.value(key))
        except ValueError:
            return f"setting {key} no longer exists"
        if now != recorded:
            return f"setting {key} changed ({recorded!r} -> {now!r})"
    for dep in manifest["deps"]:
        problem = _entry_problem(_params_dir(dep["name"], dep["params"]) / dep["id"])
        if problem is not None:
            return f"it was built from {dep['name']} ({label(dep['params'])}), which is out of date: {problem}"
    if _FILES_OK.get(folder) != stamp:
        if _files(folder) != manifest["files"]:
            return "files are missing or corrupt"
        _FILES_OK[folder] = stamp
    return None


def _entries(name: str, params: dict) -> list[Path]:
    """The entries of (name, params), newest first."""
    where = _params_dir(name, params)
    if not where.is_dir():
        return []
    found = [p for p in where.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return sorted(found, key=lambda p: (p / MANIFEST).stat().st_mtime_ns if (p / MANIFEST).exists() else 0,
                  reverse=True)


def _valid_entry(name: str, params: dict) -> tuple[Path | None, str]:
    """The newest entry that can be used now, or (None, why the newest one cannot)."""
    _SOURCES[0] = fingerprint.refresh()  # an edited helper makes every check run again
    entries = _entries(name, params)
    reasons = []
    for folder in entries:
        problem = _entry_problem(folder)
        if problem is None:
            return folder, ""
        reasons.append(problem)
    return None, reasons[0] if reasons else "not built yet"


def why_invalid(name: str, **params) -> str | None:
    """None if a cached entry can be used now, else the reason the newest one must be rebuilt."""
    return _valid_entry(name, params)[1] or None


# ---------------------------------------------------------------------------- building

# One trace per build in progress: the settings it read and the entries it loaded.
_TRACES: list[dict] = []


def _record_dep(name: str, params: dict, folder: Path) -> None:
    if _TRACES:
        _TRACES[-1]["deps"][(name, json.dumps(params, sort_keys=True, default=str))] = {
            "name": name, "params": config.canonical(params), "id": folder.name}


@contextmanager
def lock(where: Path):
    """Hold `where/.lock` (a folder's writers wait for each other: a build, or `shipped.install`)."""
    where.mkdir(parents=True, exist_ok=True)
    with open(where / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _replace_dir(tmp: Path, final: Path) -> None:
    """Move a finished build into place; an old entry of the same id is moved aside first, then removed."""
    old = None
    if final.exists():
        old = final.with_name(f".old-{final.name}-{uuid.uuid4().hex[:8]}")
        os.replace(final, old)
    os.replace(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def label(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items())) or "no parameters"


def build(name: str, **params) -> Path:
    """Build an entry in a temporary folder and rename it into place (atomic); returns its folder.

    Holds the lock of (name, params) while building; if another process built a valid entry while
    this one waited, that entry is used instead.
    """
    art = _artifact(name)
    where = _params_dir(name, params)
    waited = time.perf_counter()
    with lock(where):
        forget_here = [p for p in list(_CHECKED) if p.parent == where]
        for p in forget_here:  # another process may have written here while we waited
            _CHECKED.pop(p, None)
        done, _ = _valid_entry(name, params)
        if done is not None:
            if _TRACES:  # the wait for another process's build is not the waiting builder's own time
                _TRACES[-1]["nested_seconds"] += time.perf_counter() - waited
            return done
        for stale in where.glob(".tmp-*"):  # left by a killed build (writers of `where` hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        code = code_of(art)
        stale = fingerprint.edited_since_import(art.build.__module__)
        if stale:
            raise RuntimeError(f"{', '.join(stale)} changed on disk after this process imported it, so building "
                               f"{name} now would run the old code: restart the kernel (or the command) to build "
                               "it with the code as it is now")
        tmp = where / f".tmp-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        trace = {"reads": {}, "deps": {}, "nested_seconds": 0.0}
        _TRACES.append(trace)
        start = time.perf_counter()
        try:
            with config.recording(trace["reads"]):
                result = art.build(tmp, **params)
            if result is not None:
                with open(tmp / RESULT, "wb") as f:
                    pickle.dump(result, f)
            seconds = time.perf_counter() - start
            identity = {"name": name, "code": code, "threads": config.threads(), "cache_version": CACHE_VERSION,
                        "params": config.canonical(params), "reads": dict(sorted(trace["reads"].items())),
                        "deps": sorted(trace["deps"].values(), key=lambda d: json.dumps(d, sort_keys=True)),
                        "versions": package_versions(), "kernels": cpu_kernels()}
            entry_id = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
            manifest = {**identity, "id": entry_id, "seconds": round(seconds, 2),
                        # without the upstream builds it triggered, so a sum over manifests counts each once
                        "own_seconds": round(seconds - trace["nested_seconds"], 2), "files": _files(tmp)}
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
            final = where / entry_id
            _CHECKED.pop(final, None)
            _FILES_OK.pop(final, None)
            _replace_dir(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        finally:
            _TRACES.pop()
            if _TRACES:
                _TRACES[-1]["nested_seconds"] += time.perf_counter() - start
    return final


def folder(name: str, **params) -> Path:
    """The folder of the valid entry (built first if needed). Inside a build, recorded as an input.

    A build nobody asked for by name that would retrain the full-size world, or take longer than
    `LONG_BUILD_SECONDS`, is refused with its plan (`LongBuildRefused`); `HELPERS_LONG_BUILDS=1` allows it."""
    found, reason = _valid_entry(name, params)
    if found is None:
        plan = _plan(name, params)
        _refuse_if_long(name, params, reason, plan)
        print(f"building {name} ({label(params)}): {reason}; {plan.text}", file=sys.stderr, flush=True)
        found = build(name, **params)
    _record_dep(name, params, found)
    _log_read(found)
    return found


# ---------------------------------------------------------------------------- long builds are asked for by name

LONG_BUILD_SECONDS = 600  # about 10 minutes on two cores: longer builds run only when asked for by name
LONG_BUILDS = "HELPERS_LONG_BUILDS"  # =1 allows them: `make world`, `make worlds` and `make pack` set it
WORLD = "world"  # the training run: every other entry of a world is built from it


class LongBuildRefused(RuntimeError):
    """A build that would retrain the world or take more than about 10 minutes, which nobody asked for."""


def long_builds_allowed() -> bool:
    return os.environ.get(LONG_BUILDS, "0").strip() == "1"


@dataclass
class Plan:
    """What building one entry involves: the entries rebuilt with it (itself first), their own build times
    summed from the manifests of the entries they replace (None when nothing was ever built to time it by),
    and the words that say so."""

    rebuilt: list[str]
    seconds: float | None
    text: str


def _plan(name: str, params: dict) -> Plan:
    entries = _entries(name, params)
    old = _read_manifest(entries[0]) if entries else None
    if old is None:  # never built with these parameters: time it by other entries of the same artifact
        others = [m for m in map(_read_manifest, sorted((config.cache_dir() / name).glob("*/*/"))) if m]
        if not others:
            return Plan([name], None, "no earlier build to time it by")
        seconds = sorted(float(m.get("own_seconds", 0)) for m in others)[len(others) // 2]
        return Plan([name], seconds, f"about {_duration(seconds)} on two cores (as other entries of {name} took)"
                                     f"{_versions_note(others[0])}")
    seen: dict[str, None] = {}
    seconds = _rebuild_seconds(old, seen)
    upstream = f" and {len(seen)} out-of-date upstream entries" if seen else ""
    return Plan([name, *(key.split("/")[0] for key in seen)], seconds,
                f"this rebuilds it{upstream}, about {_duration(seconds)} on two cores{_versions_note(old)}")


def rebuild_plan(name: str, params: dict) -> str:
    """What building (name, params) now involves, said before it starts: how many entries (this one and
    the upstream ones that are out of date too), roughly how long on two cores (the own build times in
    the manifests of the entries they replace, e.g. the shipped ones), and whether this machine's package
    versions differ from the ones those were built with (then its numbers differ from the committed ones)."""
    return _plan(name, params).text


def _refuse_if_long(name: str, params: dict, reason: str, plan: Plan) -> None:
    """Raise `LongBuildRefused` with the plan, unless long builds are allowed or this one is short.

    Every build is judged, nested ones too: a build never built with its parameters is timed by other
    entries of its artifact, so what it loads may turn out long only when it is reached. The full-size world
    always counts as long (in fast mode, `make test`'s small world trains in about a minute)."""
    retrains = WORLD in plan.rebuilt and not config.fast_mode()
    too_long = plan.seconds is not None and plan.seconds > LONG_BUILD_SECONDS
    if long_builds_allowed() or not (retrains or too_long):
        return
    what = ", ".join(f"{n} ×{c}" if c > 1 else n for n, c in Counter(plan.rebuilt).items())
    took = "the training run and everything built from it" if retrains else f"{len(plan.rebuilt)} entries"
    raise LongBuildRefused(
        f"refused: building {name} ({label(params)}) would rebuild {took} ({plan.text}).\n"
        f"  why: {reason}.\n  what: {what}.\n"
        f"  This is a long build nobody asked for. To run it, ask for it by name: `make world` (a whole world), "
        f"or set {LONG_BUILDS}=1 for this process (in a notebook: %env {LONG_BUILDS}=1, then rerun the cell). "
        f"To use the shipped world instead, undo what changed (the reason above), e.g. unset HELPERS_THREADS.")


def _rebuild_seconds(manifest: dict, seen: dict[str, None]) -> float:
    """The own build time of `manifest`'s entry plus that of every upstream entry that must be rebuilt
    with it (each counted once; `seen` collects them as "name/params", in the order found)."""
    total = float(manifest.get("own_seconds", manifest.get("seconds", 0)) or 0)
    for dep in manifest.get("deps", []):
        key = dep["name"] + "/" + json.dumps(dep["params"], sort_keys=True)
        if key in seen or _valid_entry(dep["name"], dep["params"])[0] is not None:
            continue  # counted already, or reused as it is
        seen[key] = None
        upstream = _read_manifest(_params_dir(dep["name"], dep["params"]) / dep["id"])
        if upstream is not None:
            total += _rebuild_seconds(upstream, seen)
    return total


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def _versions_note(reference: dict) -> str:
    differ = version_differences(reference.get("versions", {}))
    if not differ:
        return ""
    return (f"; built here under other package versions ({describe_versions(differ)}), so its numbers "
            "will differ from the committed notebooks' (a retrained model's, by more than the last digits)")


def _log_read(found: Path) -> None:
    """With HELPERS_READ_LOG set, append the entry's name/params/id: `shipped.pack` ships what was read."""
    log = os.environ.get("HELPERS_READ_LOG")
    if log:
        with open(log, "a") as handle:  # one short line per write: appends from several kernels do not mix
            handle.write(found.parent.parent.name + "/" + found.name + "\n")


def load_or_build(name: str, **params) -> Any:
    """The cached artifact (its stored object, or its folder if the builder stored only files)."""
    where = folder(name, **params)
    result = where / RESULT
    if result.exists():
        with open(result, "rb") as f:
            return pickle.load(f)
    return where


def entry_folder(manifest: dict) -> Path:
    """The folder of the entry a manifest describes (from its name, parameters and id)."""
    return _params_dir(manifest["name"], manifest["params"]) / manifest["id"]


def entry_problem(manifest: dict) -> str | None:
    """None if the entry a manifest names can be used now, else why not."""
    return _entry_problem(entry_folder(manifest))


def manifest(name: str, **params) -> dict:
    """The manifest of the valid entry (built first if needed): its trace, timings and checksums."""
    return _read_manifest(folder(name, **params)) or {}


def built_seconds(name: str, **params) -> float | None:
    """How long the valid entry took to build, from its manifest (None if there is none)."""
    found, _ = _valid_entry(name, params)
    return (_read_manifest(found) or {}).get("seconds") if found is not None else None


def valid_entries() -> list[dict]:
    """The manifests of every entry of the current mode that can be used now."""
    out = []
    root = config.cache_dir()
    _SOURCES[0] = fingerprint.refresh()
    for name in sorted(REGISTRY):
        for params_dir in sorted((root / name).glob("*")) if (root / name).is_dir() else []:
            for entry in params_dir.iterdir():
                if entry.is_dir() and not entry.name.startswith(".") and _entry_problem(entry) is None:
                    out.append(_read_manifest(entry))
    return out
