"""Every code example in the README and in docs/ is right: each ```python block compiles, what it imports
from helpers exists, and every `module.name` it uses on a helpers module exists; each `make TARGET` in a
```bash block names a target of the Makefile. (The blocks are not run: some train models.)"""
from __future__ import annotations

import ast
import json
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


def test_the_where_used_index_in_the_api_page_is_current():
    """docs/api.md ends with the generated index of which notebook uses which helper (tools/where_used.py)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import where_used

    text = where_used.API.read_text()
    assert where_used.rewritten(text) == text, "docs/api.md's where-used index is out of date: run " \
                                               "`python tools/where_used.py`"


@pytest.mark.parametrize("twin", sorted((ROOT / "notebooks" / "solutions").glob("*.ipynb")), ids=lambda p: p.stem)
def test_each_notebook_names_the_functions_behind_its_results(twin):
    """*Under the hood* says where the code is: every file it names exists, in a method layer, and every function
    it names is defined in one of those files, so a student reaches the method in one hop from the notebook."""
    cells = json.loads(twin.read_text())["cells"]
    texts = ["".join(c["source"]) if c["cell_type"] == "markdown" else None for c in cells]
    start = next(i for i, t in enumerate(texts) if t and t.startswith("## Under the hood"))
    end = next((i for i in range(start + 1, len(texts)) if texts[i] is None or texts[i].startswith("## ")), len(texts))
    hood = "\n\n".join(texts[start:end])  # the section's markdown cells
    where = next((part for part in re.split(r"\n(?:- )?(?=\*\*)", hood) if part.startswith("**Where the code is.**")),
                 None)
    assert where, f"{twin.name}: its Under the hood has no '**Where the code is.**' paragraph"
    files = re.findall(r"`(helpers/[\w/]+\.py)`", where)
    assert files, f"{twin.name}: 'Where the code is' names no helpers file"
    defined = set()
    for name in files:
        path = ROOT / name
        assert path.exists(), f"{twin.name} names {name}, which does not exist"
        assert name.split("/")[1] in ("world", "evaluation", "confidence", "pipeline"), name
        defined |= {n.name for n in ast.parse(path.read_text()).body
                    if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    functions = [f for f in re.findall(r"`(\w+)`", where)]
    assert functions, f"{twin.name}: 'Where the code is' names no function"
    missing = sorted(set(functions) - defined)
    assert not missing, f"{twin.name} names functions that none of {files} defines: {missing}"
