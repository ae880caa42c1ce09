"""Every code example in the README and in docs/ is right: each ```python block compiles, what it imports
from helpers exists, and every `module.name` it uses on a helpers module exists; each `make TARGET` in a
```bash block names a target of the Makefile. (The blocks are not run: some train models.)"""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(language: str) -> list[tuple[str, int, str]]:
    """(page, block number, code) of every fenced block of `language` in the README and docs/."""
    out = []
    for page in PAGES:
        found = [m.group(2) for m in _BLOCK.finditer(page.read_text()) if m.group(1) == language]
        out += [(page.relative_to(ROOT).as_posix(), i + 1, code) for i, code in enumerate(found)]
    return out


def helpers_names(code: str) -> list[str]:
    """Every problem with the helpers names a block uses: a module or name that does not exist."""
    tree = ast.parse(code)
    modules: dict[str, object] = {}
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "helpers":
            module = importlib.import_module(node.module)
            for alias in node.names:
                if not hasattr(module, alias.name):
                    try:
                        modules[alias.asname or alias.name] = importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        problems.append(f"{node.module} has no {alias.name}")
                    continue
                value = getattr(module, alias.name)
                if type(value).__name__ == "module":
                    modules[alias.asname or alias.name] = value
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "helpers":
                    modules[alias.asname or alias.name] = importlib.import_module(alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            if not hasattr(modules[node.value.id], node.attr):
                problems.append(f"{node.value.id}.{node.attr} does not exist")
    return problems


PYTHON = blocks("python")


def test_the_docs_have_python_examples():
    assert len(PYTHON) >= 2, "the README's change-a-setting example and the API page's examples"


@pytest.mark.parametrize("page, number, code", PYTHON, ids=[f"{p}#{n}" for p, n, _ in PYTHON])
def test_each_python_example_compiles_and_its_helpers_names_exist(page, number, code):
    compile(code, f"{page} block {number}", "exec")
    assert helpers_names(code) == [], f"{page}, python block {number}"


def test_each_make_command_in_the_docs_names_a_target():
    targets = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    used = {t for _, _, code in blocks("bash") for t in re.findall(r"(?:^|\s)make ([a-z][a-z-]*)", code)}
    assert used and used <= targets, f"not Makefile targets: {sorted(used - targets)}"


def test_the_checker_finds_a_wrong_import_and_a_missing_name():
    wrong = "from helpers.world.model import load_checkpoint"
    assert helpers_names(wrong) == ["helpers.world.model has no load_checkpoint"]
    missing = "from helpers.evaluation import findings\nfindings.gcm_slope()"
    assert helpers_names(missing) == ["findings.gcm_slope does not exist"]
    assert helpers_names("from helpers import config\nconfig.override('adapters', lr=1e-3)") == []


def test_every_make_target_is_listed_by_make_help():
    text = (ROOT / "Makefile").read_text()
    phony = re.search(r"^\.PHONY: (.*)$", text, re.MULTILINE).group(1).split()
    described = set(re.findall(r"^([a-z-]+):.*## ", text, re.MULTILINE))
    assert set(phony) == described, f"targets without a `## description`: {sorted(set(phony) - described)}"
