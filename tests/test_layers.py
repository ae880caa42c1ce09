"""The helpers are in layers, one folder each, listed once in `helpers.LAYERS` (import order): no module
imports a higher layer, no artifact is loaded by name from a module below its builder's layer, and there
are no import cycles. The package's own `__init__` (which imports every builder, to register it) and the
`python -m helpers` shim are left out.
"""
from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

import helpers
from helpers.cache import artifacts

ROOT = Path(helpers.__file__).parent
# A module is read in one sitting: at most 340 lines of code (docstrings, comments and blank lines not
# counted); split a longer one by job. 340, not 300: the cache's train-or-load holds its refusal of long
# builds, one job with the plan it reads, and a split would only add a shim (issue 51 asks for a cap that
# does not force shims).
MAX_CODE_LINES = 340
LOADERS = {"load_or_build", "folder", "manifest", "built_seconds", "why_invalid", "load_per_checkpoint"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))
           if p not in (ROOT / "__init__.py", ROOT / "__main__.py")}


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
    top = module.removeprefix("helpers.").split(".")[0]
    if top not in helpers.LAYERS:
        raise AssertionError(f"module {module!r} is in no layer of helpers.LAYERS; add its folder there")
    return helpers.LAYERS.index(top)


def _loads_by_name(module: str) -> list[tuple[str, int]]:
    """(artifact name, line) for every `load_or_build("name", ...)`-like call with a literal name."""
    out = []
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func in LOADERS and isinstance(node.args[0].value, str):
                out.append((node.args[0].value, node.lineno))
    return out


# The layers whose modules are methods: functions of frames, arrays and models. They never read or write the
# cache; every builder, and every function that loads a cached entry, is in the pipeline layer above them.
METHOD_LAYERS = ("evaluation", "world", "confidence")


def _method_modules() -> list[str]:
    return [m for m in sorted(MODULES) if m.split(".")[0] in METHOD_LAYERS]


@pytest.mark.parametrize("module", _method_modules())
def test_method_modules_never_touch_the_cache(module):
    cached = [(t, line) for t, line, _ in _imports(module) if t.split(".")[0] == "cache"]
    assert not cached, f"{module} is a method module but imports the cache: {cached}; move that code to pipeline/"
    named = _loads_by_name(module)
    assert not named, f"{module} loads cached entries by name: {named}; move that code to pipeline/"


def test_every_builder_lives_in_the_pipeline_layer():
    elsewhere = {name: art.build.__module__ for name, art in artifacts.REGISTRY.items()
                 if art.build.__module__.startswith("helpers.")
                 and not art.build.__module__.startswith("helpers.pipeline.")}
    assert not elsewhere, f"builders outside helpers/pipeline/: {elsewhere}"
    assert len(artifacts.REGISTRY) >= 27  # the 27 builders of the series (the GCM slope test left in issue 52)


def test_the_layers_are_the_folders():
    folders = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith("__"))
    assert sorted(helpers.LAYERS) == folders
    assert {m.split(".")[0] for m in MODULES} == set(helpers.LAYERS)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_only_downward(module):
    mine = _layer(module)
    upward = [(t, line) for t, line, _ in _imports(module) if t in MODULES and _layer(t) > mine]
    assert not upward, f"{module} (layer {helpers.LAYERS[mine]}) imports higher layers: {upward}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_artifacts_are_loaded_by_name_only_from_their_builders_layer_or_above(module):
    """A builder found through the registry by name is a dependency an import graph cannot see: the
    module that loads it must sit no lower than the module that builds it."""
    upward = []
    for name, line in _loads_by_name(module):
        assert name in artifacts.REGISTRY, f"{module}, line {line}: no artifact is registered as {name!r}"
        builder = artifacts.REGISTRY[name].build.__module__
        if _layer(builder) > _layer(module):
            upward.append((name, builder, line))
    assert not upward, f"{module} loads artifacts built in higher layers: {upward}"


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


def code_lines(source: str) -> int:
    """Lines holding code: not blank, not only a comment, not part of a docstring."""
    tree = ast.parse(source)
    docs = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docs.update(range(body[0].lineno, body[0].end_lineno + 1))
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    code = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skip:
            code.update(range(token.start[0], token.end[0] + 1))
    return len(code - docs)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_are_small(module):
    n = code_lines(MODULES[module].read_text())
    assert n <= MAX_CODE_LINES, f"{module} has {n} lines of code; split it by job (at most {MAX_CODE_LINES})"


def test_the_checkers_can_fail():
    """A made-up upward import, name load and long module are each caught."""
    assert _layer("config") < _layer("world.training") < _layer("pipeline.comparison")
    relative = ast.parse("from ..world.checkpoints import get_checkpoints").body[0]
    assert _resolve("confidence.adapters", ROOT / "confidence" / "adapters.py", relative) == ["world.checkpoints"]
    sibling = ast.parse("from . import adapters").body[0]
    assert _resolve("confidence.baselines", ROOT / "confidence" / "baselines.py", sibling) == ["confidence.adapters"]
    assert code_lines('"""doc\nmore"""\n# note\n\nx = 1\ny = (2,\n     3)\n') == 3
    assert artifacts.REGISTRY["comparison"].build.__module__ == "helpers.pipeline.comparison"
    assert _layer("world.checkpoints") < _layer(artifacts.REGISTRY["comparison"].build.__module__)
