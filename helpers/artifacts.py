"""Train-or-load: every heavy result is built once, cached with a manifest, and reused.

Notebooks call `load_or_build(name, **params)`. An entry is used only if its manifest matches the
current configuration (a hash of the settings, parameters, upstream artifacts and package versions)
and every file still has the recorded checksum; otherwise it is rebuilt. Builds happen in a temporary
folder that is renamed into place only when complete, so a killed build never leaves a usable entry.
"""
from __future__ import annotations

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
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from .config import SEED, WORLD_VERSION, cache_dir, fast_mode, settings_dict

MANIFEST = "manifest.json"
RESULT = "result.pkl"
_PACKAGES = ("torch", "transformers", "tokenizers", "peft", "numpy", "pandas", "scikit-learn")


@dataclass
class Artifact:
    """A named, cacheable result: `build(folder, **params)` writes files and/or returns an object."""

    name: str
    build: Callable[..., Any]
    version: str = "1"
    deps: Callable[..., list[tuple[str, dict]]] = field(default=lambda **_: [])
    describe: str = ""
    settings_keys: tuple[str, ...] | None = None  # the sizes it depends on (None: all of them)
    config: Callable[[], dict] | None = None  # extra values to hash (a module's own sizes)


REGISTRY: dict[str, Artifact] = {}


def register(name: str, version: str = "1", deps: Callable[..., list] | None = None,
             settings_keys: tuple[str, ...] | None = None, config: Callable[[], dict] | None = None):
    """Decorator: register `build(folder, **params)` as the builder of artifact `name`.

    `settings_keys` names the sizes in `config.Settings` the result depends on, so that changing an
    unrelated size (say, of a later notebook) does not retrain the model. `config()` returns any other
    values the result depends on (a module's own sizes), which are hashed too.
    """

    def wrap(fn):
        REGISTRY[name] = Artifact(name, fn, version, deps or (lambda **_: []), (fn.__doc__ or "").strip(),
                                  settings_keys, config)
        return fn

    return wrap


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in _PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "absent"
    return out


def _artifact(name: str) -> Artifact:
    _ensure_registered()
    if name not in REGISTRY:
        raise ValueError(f"unknown artifact {name!r}; known artifacts: {sorted(REGISTRY)}")
    return REGISTRY[name]


def config_hash(name: str, **params) -> str:
    """Hash of everything that determines the artifact, upstream artifacts included."""
    art = _artifact(name)
    upstream = [config_hash(dep, **dep_params) for dep, dep_params in art.deps(**params)]
    sizes = settings_dict()
    if art.settings_keys is not None:
        sizes = {key: sizes[key] for key in art.settings_keys}
    payload = {
        "name": name,
        "version": art.version,
        "world": WORLD_VERSION,
        "params": params,
        "settings": sizes,
        "fast": fast_mode(),
        "seed": SEED,
        "upstream": upstream,
        "config": art.config() if art.config else None,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def artifact_dir(name: str, **params) -> Path:
    """The folder an artifact lives in: cache/<name>/<params>."""
    _artifact(name)
    slug = "-".join(f"{k}={params[k]}" for k in sorted(params)) or "default"
    safe = re.sub(r"[^A-Za-z0-9=._+-]", "_", slug)
    if safe != slug or len(safe) > 80:  # long or odd parameters: a readable prefix and a hash
        safe = f"{safe[:40]}-{hashlib.sha256(slug.encode()).hexdigest()[:12]}"
    return cache_dir() / name / safe


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _files(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): _sha256(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }


# Entries already verified in this process, keyed by folder, with the manifest's mtime: checksums
# are computed once per process, not at every load.
_VERIFIED: dict[Path, int] = {}


def why_invalid(name: str, **params) -> str | None:
    """None if the cached entry can be used, else the reason it must be rebuilt."""
    folder = artifact_dir(name, **params)
    path = folder / MANIFEST
    if not path.exists():
        return "not built yet"
    if _VERIFIED.get(folder) == path.stat().st_mtime_ns:
        return None
    try:
        manifest = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return "manifest is corrupt"
    if not isinstance(manifest, dict) or manifest.get("config_hash") != config_hash(name, **params):
        return "configuration changed"
    if manifest.get("versions") != package_versions():
        return "package versions changed"
    files = manifest.get("files")
    if not isinstance(files, dict) or _files(folder) != files:
        return "files are missing or corrupt"
    _VERIFIED[folder] = path.stat().st_mtime_ns
    return None


def _replace_dir(tmp: Path, final: Path) -> None:
    """Move a finished build into place; the old entry is moved aside first, then removed."""
    old = None
    if final.exists():
        old = final.with_name(f".old-{final.name}-{uuid.uuid4().hex[:8]}")
        os.replace(final, old)
    os.replace(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


_NESTED_SECONDS: list[float] = []  # one slot per build in progress: seconds spent in builds it triggered


def build(name: str, **params) -> None:
    """Build an artifact into a temporary folder, then rename it into place (atomic)."""
    art = _artifact(name)
    final = artifact_dir(name, **params)
    final.parent.mkdir(parents=True, exist_ok=True)
    for stale in final.parent.glob(f".tmp-{final.name}-*"):  # left by a killed build
        shutil.rmtree(stale, ignore_errors=True)
    tmp = final.with_name(f".tmp-{final.name}-{uuid.uuid4().hex[:8]}")
    tmp.mkdir()
    _VERIFIED.pop(final, None)
    _NESTED_SECONDS.append(0.0)
    start = time.perf_counter()
    try:
        result = art.build(tmp, **params)
        if result is not None:
            with open(tmp / RESULT, "wb") as f:
                pickle.dump(result, f)
        manifest = {
            "name": name,
            "params": params,
            "config_hash": config_hash(name, **params),
            "versions": package_versions(),
            "seconds": round(time.perf_counter() - start, 2),
            # without the dependencies it built on the way, so a sum over manifests counts each once
            "own_seconds": round(time.perf_counter() - start - _NESTED_SECONDS[-1], 2),
            "files": _files(tmp),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        _replace_dir(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        took = time.perf_counter() - start
        _NESTED_SECONDS.pop()
        if _NESTED_SECONDS:
            _NESTED_SECONDS[-1] += took


def load(name: str, **params) -> Any:
    """The stored object of a valid entry (or its folder if the builder stored only files)."""
    folder = artifact_dir(name, **params)
    result = folder / RESULT
    if result.exists():
        with open(result, "rb") as f:
            return pickle.load(f)
    return folder


def load_or_build(name: str, **params) -> Any:
    """The cached artifact if its manifest matches, else build it first (with a progress bar)."""
    reason = why_invalid(name, **params)
    if reason is not None:
        label = ", ".join(f"{k}={v}" for k, v in sorted(params.items()))
        print(f"building {name}{f' ({label})' if label else ''}: {reason}", file=sys.stderr, flush=True)
        build(name, **params)
    return load(name, **params)


def built_seconds(name: str, **params) -> float | None:
    """How long the cached entry took to build, from its manifest."""
    try:
        return json.loads((artifact_dir(name, **params) / MANIFEST).read_text())["seconds"]
    except (OSError, KeyError, json.JSONDecodeError):
        return None


def _ensure_registered() -> None:
    """Import the modules that register artifacts (every confidence method registers its own)."""
    import importlib
    import pkgutil

    from . import confidence, decoding, rl, training  # noqa: F401

    for module in pkgutil.iter_modules(confidence.__path__):
        importlib.import_module(f"{confidence.__name__}.{module.name}")


# Build stages that `python -m helpers build` runs after its own ones, appended by the modules of
# later notebooks as (stage name, a function that builds everything of that stage).
EXTRA_BUILDS: list[tuple[str, Callable[[], Any]]] = []
