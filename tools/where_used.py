"""Which notebook uses which helper: the index at the end of docs/api.md, generated from the notebooks' code.

    python tools/where_used.py          # rewrite the index in docs/api.md
    python tools/where_used.py --check  # exit 1 if it is out of date (tests/test_docs_code.py runs this check)

Reads every code cell of the answer twins (notebooks/solutions/), follows their `helpers` imports and lists,
per module, each function, class or constant a notebook reaches through them. Nothing is imported from the
notebooks themselves; the helpers modules are imported to tell modules from the names inside them.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import json
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType

from helpers.build.twins import label

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api.md"
START, END = "<!-- where-used:start -->", "<!-- where-used:end -->"


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _cells(path: Path) -> list[str]:
    """The code cells, without IPython's magics and shell lines."""
    nb = json.loads(path.read_text())
    out = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            lines = "".join(cell["source"]).splitlines()
            out.append("\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in lines))
    return out


def _target(dotted: str):
    """(module name, attribute) for a dotted helpers name; None if it names nothing."""
    module = _module(dotted)
    if module is not None:
        return dotted, None
    parent, _, attr = dotted.rpartition(".")
    found = _module(parent) if parent else None
    return (parent, attr) if found is not None and hasattr(found, attr) else None


def used_names(path: Path) -> set[str]:
    """The helpers names ("helpers.world.sums.split") that one notebook's code reaches."""
    aliases: dict[str, str] = {}  # local name -> dotted helpers name
    found: set[str] = set()
    trees = [ast.parse(source) for source in _cells(path)]
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("helpers"):
                for alias in node.names:
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("helpers"):
                        aliases[alias.asname or "helpers"] = alias.name if alias.asname else "helpers"

    def dotted(node) -> str | None:
        if isinstance(node, ast.Name):
            return aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Attribute, ast.Name)) and isinstance(getattr(node, "ctx", None), ast.Load):
                name = dotted(node)
                target = _target(name) if name else None
                if target and target[1] is not None and not target[1].startswith("_"):
                    found.add(f"{target[0]}.{target[1]}")
    return found


def index() -> str:
    """The Markdown index: one row per module, each name with the notebooks that use it."""
    by_name: dict[str, set[str]] = defaultdict(set)
    for path in sorted((ROOT / "notebooks" / "solutions").glob("*.ipynb")):
        for name in used_names(path):
            by_name[name].add(label(path))
    by_module: dict[str, list[str]] = defaultdict(list)
    for name in sorted(by_name):
        module, _, attr = name.rpartition(".")
        if isinstance(getattr(_module(module), attr, None), ModuleType):
            continue
        by_module[module.removeprefix("helpers.")].append(f"`{attr}` ({', '.join(sorted(by_name[name]))})")
    rows = [f"| `{module}` | {', '.join(names)} |" for module, names in sorted(by_module.items())]
    return "\n".join(["## Where the notebooks use each helper", "",
                      "Generated from the notebooks' code by `python tools/where_used.py`; each name is followed by "
                      "the notebooks that call it.", "", "| module | names (notebooks) |", "| --- | --- |", *rows])


def rewritten(text: str) -> str:
    if START not in text or END not in text:
        raise SystemExit(f"docs/api.md needs the lines {START} and {END}; add them where the index goes")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{index()}\n{END}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/api.md's index is out of date")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    text = API.read_text()
    new = rewritten(text)
    if args.check:
        if new != text:
            print("docs/api.md's index of where the notebooks use each helper is out of date: "
                  "run `python tools/where_used.py`")
            return 1
        return 0
    API.write_text(new)
    print(f"wrote the index in {API.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
