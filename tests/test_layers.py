"""The helpers import in one direction: no module imports a higher layer, and there are no cycles.

The layers are listed in `helpers.LAYERS` (and in the package docstring). The package's own
`__init__` is the root that imports the modules registering artifacts, so it is left out.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import helpers

ROOT = Path(helpers.__file__).parent
MAX_LINES = 430  # "about 400 lines at most" per module


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py")) if p != ROOT / "__init__.py"}


def _resolve(module: str, path: Path, node: ast.ImportFrom | ast.Import) -> list[str]:
    """The helpers modules an import statement names (relative to `module`)."""
    found = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names if a.name == "helpers" or a.name.startswith("helpers.")]
        return [n.removeprefix("helpers").lstrip(".") for n in names]
    if node.level == 0:
        if not (node.module or "").startswith("helpers"):
            return []
        base = node.module.removeprefix("helpers").lstrip(".")
    else:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)] if node.level > 1 else package
        base = ".".join(package + ([node.module] if node.module else []))
    for alias in node.names:
        candidate = f"{base}.{alias.name}" if base else alias.name
        found.append(candidate if candidate in MODULES else base)
    return [f for f in found if f]


def _imports(module: str) -> list[tuple[str, int, bool]]:
    """(imported helpers module, line, inside a function) for every import of `module`."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    out = []
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    local_lines = {c.lineno for f in functions for c in ast.walk(f) if isinstance(c, (ast.Import, ast.ImportFrom))}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for target in _resolve(module, path, node):
                out.append((target, node.lineno, node.lineno in local_lines))
    return out


def _layer(module: str) -> int:
    top = module.split(".")[0]
    for i, names in enumerate(helpers.LAYERS):
        if top in names:
            return i
    raise AssertionError(f"module {module!r} is in no layer of helpers.LAYERS; add it there")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_only_downward(module):
    mine = _layer(module)
    upward = [(t, line) for t, line, _ in _imports(module) if t in MODULES and _layer(t) > mine]
    assert not upward, f"{module} (layer {mine}) imports higher layers: {upward}"


def test_no_import_cycles():
    graph = {m: sorted({t for t, _, _ in _imports(m) if t in MODULES and t != m}) for m in MODULES}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                raise AssertionError(f"import cycle: {' -> '.join(cycle)}")
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for m in graph:
        if m not in state:
            visit(m)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_function_local_imports_say_why(module):
    """A function-local import is there only to save start-up time, and its line says so."""
    lines = MODULES[module].read_text().splitlines()
    tree = ast.parse("\n".join(lines))
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    local = sorted({c.lineno for f in functions for c in ast.walk(f) if isinstance(c, (ast.Import, ast.ImportFrom))})
    unexplained = [n for n in local if "# local" not in lines[n - 1]]
    assert not unexplained, f"{module}: function-local imports without a '# local: why' comment on lines {unexplained}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_are_small(module):
    n = len(MODULES[module].read_text().splitlines())
    assert n <= MAX_LINES, f"{module} has {n} lines; split it by job (at most about 400)"


def test_the_checker_sees_a_cycle_and_an_upward_import(tmp_path):
    """The checks above can fail: a made-up module importing a higher layer is caught by `_layer`."""
    assert _layer("config") < _layer("training") < _layer("comparison")
    relative = ast.parse("from ..checkpoints import get_checkpoints").body[0]
    assert _resolve("confidence.adapters", ROOT / "confidence" / "adapters.py", relative) == ["checkpoints"]
    sibling = ast.parse("from . import adapters").body[0]
    assert _resolve("confidence.baselines", ROOT / "confidence" / "baselines.py", sibling) == ["confidence.adapters"]
