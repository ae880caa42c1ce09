"""The code a cached entry was built by, as one short hash: a code change never leaves a result in use.

`code_fingerprint(module)` hashes the source of a builder's module and of every helpers module it
imports, directly or through others, without docstrings and comments (the hash is of the parsed code,
`normal_dump`, the same on every supported Python), so rewording a comment keeps every entry and editing
a function body rebuilds exactly the entries whose builders use that module, and what was built from
them. The source is read from disk each time it changes (by modification time), so an edit made while a
kernel runs counts at once.

Left out, with their reason:
- `helpers.config`: what the settings contribute to a result is the values a build reads, which the
  cache records one by one (a changed default rebuilds exactly what read it);
- `helpers.cache`: the cache's machinery does not change what a builder computes;
- the package root `helpers/__init__.py`: it only imports the builders and pins the CPU kernels.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import sys
from pathlib import Path

UNHASHED = ("helpers", "helpers.config", "helpers.cache")
_DIGESTS: dict[Path, tuple[int, str, tuple[str, ...]]] = {}  # path -> (mtime, digest, imported modules)


def _path(module: str) -> Path | None:
    """The module's source file; None for code with no file (`python -c`, a notebook cell)."""
    loaded = sys.modules.get(module)
    if loaded is not None and getattr(loaded, "__spec__", None) is None:
        origin = getattr(loaded, "__file__", None)
        return Path(origin) if origin else None
    spec = importlib.util.find_spec(module)
    return Path(spec.origin) if spec is not None and spec.origin not in (None, "built-in", "frozen") else None


def _is_module(module: str) -> bool:
    try:
        return _path(module) is not None
    except (ImportError, ValueError):
        return False


def normal_dump(node) -> str:
    """The parsed code as text, the same on Python 3.11, 3.12 and 3.13: unlike `ast.dump`, fields that are
    None or empty are left out (3.12 added an empty `type_params` to every function and class)."""
    if isinstance(node, ast.AST):
        fields = [f"{name}={normal_dump(value)}" for name in node._fields
                  if (value := getattr(node, name, None)) is not None and value != []]
        return f"({type(node).__name__} {' '.join(fields)})"
    if isinstance(node, list):
        return "[" + ",".join(normal_dump(item) for item in node) + "]"
    return repr(node)


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return tree


def imported_modules(module: str, tree: ast.AST, is_package: bool) -> tuple[str, ...]:
    """The modules (or packages) of helpers, or of `module`'s own top-level package (a builder defined
    outside helpers, as in the tests), that `module`'s import statements name."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] in ("helpers", module.split(".")[0]))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = module.split(".") if is_package else module.split(".")[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base.split(".")[0] not in ("helpers", module.split(".")[0]):
                continue
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if _is_module(f"{base}.{alias.name}") else base)
    return tuple(sorted(found))


def _digest(module: str) -> tuple[str, tuple[str, ...]]:
    path = _path(module)
    if path is None:  # no source to read: its code is not tracked (say so in its docstring where it matters)
        return "no source file", ()
    return _path_digest(path, module)


def _path_digest(path: Path, module: str) -> tuple[str, tuple[str, ...]]:
    stamp = path.stat().st_mtime_ns
    memo = _DIGESTS.get(path)
    if memo is None or memo[0] != stamp:
        tree = _strip_docstrings(ast.parse(path.read_text()))
        digest = _tree_digest(tree)
        memo = (stamp, digest, imported_modules(module, tree, path.name == "__init__.py"))
        _DIGESTS[path] = memo
    return memo[1], memo[2]


def _hashed(module: str) -> bool:
    return not any(module == u or (u != "helpers" and module.startswith(u + ".")) for u in UNHASHED)


def closure(module: str) -> list[str]:
    """`module` and every helpers module it imports, directly or through others (the unhashed left out)."""
    seen, todo = set(), [module]
    while todo:
        current = todo.pop()
        if current in seen or not _hashed(current):
            continue
        seen.add(current)
        todo.extend(_digest(current)[1])
    return sorted(seen)


def code_fingerprint(module: str) -> str:
    """A 16-hex-digit hash of the code of `module` and of every helpers module it uses."""
    if module not in _FINGERPRINTS:
        h = hashlib.sha256()
        for name in closure(module):
            h.update(f"{name}:{_digest(name)[0]}\n".encode())
        _FINGERPRINTS[module] = h.hexdigest()[:16]
    return _FINGERPRINTS[module]


_FINGERPRINTS: dict[str, str] = {}  # module -> fingerprint, until a source file changes (`refresh`)


def _source_files() -> dict[Path, int]:
    """Modification times of the helpers sources and of any other module fingerprinted so far."""
    root = Path(__file__).resolve().parents[1]
    return {p: p.stat().st_mtime_ns for p in {*root.rglob("*.py"), *_DIGESTS} if p.exists()}


def _tree_digest(tree: ast.AST) -> str:
    return hashlib.sha256(normal_dump(tree).encode()).hexdigest()


def _code_digest(path: Path) -> str:
    return _tree_digest(_strip_docstrings(ast.parse(path.read_text())))


def _module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# The code of the helpers sources as this process imported them (comments and docstrings aside), each file
# parsed once: the fingerprints read the same digests (`_DIGESTS`) until a file changes.
_PACKAGE = Path(__file__).resolve().parents[1]
_AT_IMPORT = {path: _path_digest(path, _module_name(path, _PACKAGE))[0] for path in _PACKAGE.rglob("*.py")}
_SEEN = _source_files()
_GENERATION = [0]


def refresh() -> int:
    """Look at the sources again (a few dozen `stat` calls); returns a number that changes whenever one of
    them changed since the last call, so that checks made before an edit are made again."""
    global _SEEN
    now = _source_files()
    if {p: t for p, t in now.items() if p in _SEEN} != {p: t for p, t in _SEEN.items() if p in now}:
        _FINGERPRINTS.clear()
        _GENERATION[0] += 1
    _SEEN = now
    return _GENERATION[0]


def edited_since_import(module: str) -> list[str]:
    """The modules of `module`'s closure whose code changed on disk after this process imported helpers
    (comments and docstrings aside): a build now would run their old code under the new code's fingerprint."""
    stale = []
    for name in closure(module):
        path = _path(name)
        if path is None:
            continue
        now = _digest(name)[0]
        if _AT_IMPORT.setdefault(path, now) != now:  # a module outside helpers (a test's builder): from first sight
            stale.append(name)
    return stale
