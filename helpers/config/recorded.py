"""The machinery behind `helpers.config`: overrides, and the record of every setting a build reads.

`helpers.config` holds the settings a learner reads; it installs its defaults here (`install`) and hands out
this module's `Group` views, whose every field read is recorded for the cache (`recording`, used by
`helpers.cache.artifacts`), and `override`, `reset` and `overrides`.
"""
from __future__ import annotations

import dataclasses
import json
import os
from contextlib import contextmanager
from typing import Any, Callable

_TABLES: dict[str, Any] = {}  # "full", "fast": group -> defaults; "fast_mode": which one is in use
_OVERRIDES: dict[str, dict[str, Any]] = {}
_GENERATION = [0]  # bumped on every change, so cached validity checks are redone
# One list per build in progress (helpers.cache.artifacts pushes and pops them): the settings it read.
_RECORDERS: list[dict[str, Any]] = []


def install(full: dict, fast: dict, fast_mode: Callable[[], bool]) -> None:
    """The defaults of every group, full and fast, and the function that says which mode is in use."""
    _TABLES.update(full=full, fast=fast, fast_mode=fast_mode)


def canonical(value: Any) -> Any:
    """A JSON-comparable form of a setting's value (tuples become lists)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _group_defaults(group: str):
    table = _TABLES["fast"] if _TABLES["fast_mode"]() else _TABLES["full"]
    if group not in table:
        raise ValueError(f"unknown settings group {group!r}; choose one of {sorted(table)}")
    return table[group]


def current(group: str):
    """The group's values now (defaults of the mode, with overrides applied), without recording a read."""
    values = _group_defaults(group)
    return dataclasses.replace(values, **_OVERRIDES[group]) if _OVERRIDES.get(group) else values


def value(key: str) -> Any:
    """The current value of "group.field", without recording a read (used to check cached entries)."""
    group, _, name = key.partition(".")
    values = current(group)
    if name not in {f.name for f in dataclasses.fields(values)}:
        raise ValueError(f"unknown setting {key!r}")
    return getattr(values, name)


def generation() -> int:
    """A counter that changes whenever a setting does."""
    return _GENERATION[0]


class Group:
    """A read-only view of one group's current values; every field read is recorded for the cache."""

    __slots__ = ("_group", "_values")

    def __init__(self, group: str):
        object.__setattr__(self, "_group", group)
        object.__setattr__(self, "_values", current(group))

    def __getattr__(self, name: str):
        values = object.__getattribute__(self, "_values")
        if name.startswith("_") or name not in values.__dataclass_fields__:
            raise AttributeError(f"settings group {self._group!r} has no setting {name!r}; "
                                 f"it has {list(values.__dataclass_fields__)}")
        result = getattr(values, name)
        if _RECORDERS:
            _RECORDERS[-1][f"{self._group}.{name}"] = canonical(result)
        return result

    def __setattr__(self, name, value):
        raise AttributeError(f"settings are read-only; use config.override({self._group!r}, {name}=...)")

    def asdict(self) -> dict:
        """Every field (each recorded as read)."""
        return {name: getattr(self, name) for name in self._values.__dataclass_fields__}

    def __repr__(self) -> str:
        return f"config.{self._group}({', '.join(f'{k}={v!r}' for k, v in dataclasses.asdict(self._values).items())})"


def accessor(group: str) -> Callable[[], Group]:
    """The function that reads one group (`config.world`, `config.adapters`, ...)."""
    def read() -> Group:
        return Group(group)

    read.__name__ = group
    read.__doc__ = (f"The current `{group}` settings ({type(_TABLES['full'][group]).__name__}); "
                    "reads are recorded by the cache.")
    return read




class _Override:
    """Returned by `override`: already applied; as a context manager it undoes itself on exit."""

    def __init__(self, group: str, previous: dict | None):
        self.group, self.previous = group, previous

    def __enter__(self):
        return Group(self.group)

    def __exit__(self, *exc):
        if self.previous is None:
            _OVERRIDES.pop(self.group, None)
        else:
            _OVERRIDES[self.group] = self.previous
        _GENERATION[0] += 1
        return False


def override(group: str, **values) -> _Override:
    """Change settings of one group: for the session, or inside a `with` block.

    ``config.override("self_consistency", num_beams=5)`` keeps the change until `reset()`;
    ``with config.override("adapters", lr=1e-3): ...`` undoes it when the block ends. An unknown
    group or setting, or a value of the wrong type, raises ValueError.
    """
    defaults = _group_defaults(group)
    fields = {f.name: f for f in dataclasses.fields(defaults)}
    for name, new in values.items():
        if name not in fields:
            raise ValueError(f"settings group {group!r} has no setting {name!r}; it has {list(fields)}")
        old = getattr(defaults, name)
        ok = isinstance(new, type(old)) or (isinstance(old, float) and isinstance(new, int)
                                            and not isinstance(new, bool))
        if not ok or (isinstance(new, bool) != isinstance(old, bool)):
            raise ValueError(f"{group}.{name} must be a {type(old).__name__} like {old!r}, got {new!r}")
    previous = dict(_OVERRIDES[group]) if group in _OVERRIDES else None
    merged = {**(previous or {}), **values}
    merged = {k: v for k, v in merged.items() if canonical(v) != canonical(getattr(defaults, k))}
    if merged:
        _OVERRIDES[group] = merged
    else:
        _OVERRIDES.pop(group, None)
    _GENERATION[0] += 1
    return _Override(group, previous)


def reset() -> None:
    """Undo every override."""
    _OVERRIDES.clear()
    _GENERATION[0] += 1


def overrides() -> dict[str, dict[str, Any]]:
    """The settings changed from their defaults, by group."""
    return {g: dict(v) for g, v in _OVERRIDES.items()}


@contextmanager
def recording(reads: dict[str, Any]):
    """Record the settings read inside the block into `reads` (helpers.cache.artifacts uses it per build)."""
    _RECORDERS.append(reads)
    try:
        yield reads
    finally:
        _RECORDERS.pop()


def _tuples(value):  # JSON lists, nested too, as the tuples the frozen settings hold
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def overrides_from_environment() -> None:
    """HELPERS_OVERRIDES='{"group": {"setting": value}}' applies overrides at import (notebook kernels, tests)."""
    text = os.environ.get("HELPERS_OVERRIDES", "").strip()
    if not text:
        return
    try:
        wanted = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"HELPERS_OVERRIDES is not JSON ({err}); "
                         "write it like '{\"contrast\": {\"min_size\": 50}}'") from err
    if not isinstance(wanted, dict) or not all(isinstance(v, dict) for v in wanted.values()):
        raise ValueError("HELPERS_OVERRIDES must map each group to its settings, "
                         "like '{\"contrast\": {\"min_size\": 50}}'")
    for group, values in wanted.items():  # JSON has lists where the settings have tuples
        override(group, **{k: _tuples(v) for k, v in values.items()})

