"""What an edit to one method rebuilds: a method module's code is part of the key of exactly the builders that
run it (`helpers.cache.fingerprint`), and of what is built from their entries (each manifest's `deps`).

Each test edits a copy of a method's source text (the function a notebook shows), computes the fingerprint
every builder would get with that edit, and follows the shipped world's manifests downstream. The shipped
manifests also say how long the invalidated entries took to build on two cores (their own seconds), which
the test prints and bounds.
"""
from __future__ import annotations

import ast
import json
import tarfile
from functools import lru_cache

import pytest

from helpers.cache import artifacts, fingerprint, shipped


@lru_cache(maxsize=1)
def shipped_manifests() -> list[dict]:
    """Every shipped entry's manifest (read from the archives, not unpacked)."""
    index = shipped.read_index(shipped.SHIPPED_DIR)  # the full world (the tests run in fast mode)
    if index is None:
        pytest.skip("no shipped world (data/world/index.json)")
    out = []
    for name in sorted(index["archives"]):
        with tarfile.open(shipped.SHIPPED_DIR / name, "r:xz") as tar:
            for member in tar:
                if member.name.endswith("/" + artifacts.MANIFEST):
                    out.append(json.loads(tar.extractfile(member).read()))
    return out


def builders() -> dict[str, str]:
    """artifact name -> the module of its builder (the series' own builders only)."""
    return {name: art.build.__module__ for name, art in artifacts.REGISTRY.items()
            if art.build.__module__.startswith("helpers.")}


def edited_fingerprints(module: str, function: str, edit: tuple[str, str], monkeypatch) -> dict[str, str]:
    """Each builder's fingerprint after replacing edit[0] by edit[1] inside `function` of `module`."""
    path = fingerprint._path(module)
    source = path.read_text()
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)
    lines = source.splitlines(keepends=True)
    body = "".join(lines[node.lineno - 1:node.end_lineno])
    assert edit[0] in body, f"{edit[0]!r} is not in {module}.{function}; update this test's edit"
    changed = source.replace(body, body.replace(edit[0], edit[1]))
    digest = fingerprint._tree_digest(fingerprint._strip_docstrings(ast.parse(changed)))
    real = fingerprint._digest

    def with_edit(name):
        found = real(name)
        return (digest, found[1]) if name == module else found

    monkeypatch.setattr(fingerprint, "_digest", with_edit)
    monkeypatch.setattr(fingerprint, "_FINGERPRINTS", {})
    return {name: fingerprint.code_fingerprint(mod) for name, mod in builders().items()}


def invalidated(module: str, function: str, edit: tuple[str, str], monkeypatch) -> tuple[set[str], float]:
    """(artifacts whose entries the edit invalidates, their own build seconds in the shipped world)."""
    before = {name: fingerprint.code_fingerprint(mod) for name, mod in builders().items()}
    after = edited_fingerprints(module, function, edit, monkeypatch)
    direct = {name for name in before if before[name] != after[name]}
    manifests = shipped_manifests()
    stale = {m["id"] for m in manifests if m["name"] in direct}
    grew = True
    while grew:  # downstream: an entry built from a stale one is stale too
        more = {m["id"] for m in manifests if m["id"] not in stale and any(d["id"] in stale for d in m["deps"])}
        stale |= more
        grew = bool(more)
    names = {m["name"] for m in manifests if m["id"] in stale}
    seconds = sum(float(m.get("own_seconds", m.get("seconds", 0)) or 0) for m in manifests if m["id"] in stale)
    return names, seconds


TABLES = {"comparison", "claim", "sc_differences", "verbalized_findings", "transfer_claim", "random_claim",
          "domain_claim"}
DECODING = {"world", "selection", "greedy", "beams", "samples", "rephrasings", "post_training"}
ADAPTERS = {"adapter", "adapter_results", "multi_answer_adapter", "gcm", "gcm_results", "feature_variance"}


def test_editing_the_grouping_rule_of_self_consistency_rebuilds_only_tables(monkeypatch):
    names, seconds = invalidated("helpers.confidence.self_consistency", "group_masses",
                                 ('first=("rank", "min")', 'first=("rank", "max")'), monkeypatch)
    print(f"self-consistency's grouping rule: {sorted(names)}, {seconds:.0f} s of the shipped build")
    assert names == TABLES & names and "comparison" in names and "sc_differences" in names
    assert not names & (DECODING | ADAPTERS | {"verbalized", "verbalized_adapter", "p_true", "gcm_verifier"})


def test_editing_the_adapters_loss_rebuilds_only_adapters_and_their_tables(monkeypatch):
    names, seconds = invalidated("helpers.confidence.adapters", "_batch_loss",
                                 ("binary_cross_entropy_with_logits", "binary_cross_entropy"), monkeypatch)
    print(f"the adapters' loss: {sorted(names)}, {seconds:.0f} s of the shipped build")
    assert ADAPTERS <= names <= ADAPTERS | TABLES
    assert not names & (DECODING | {"verbalized", "verbalized_adapter", "p_true", "gcm_verifier", "verifier_answers"})


def test_the_scope_check_sees_an_edit_everywhere_it_reaches(monkeypatch):
    """The checker can fail: an edit to decoding reaches every artifact (all of them decode or read decodes)."""
    names, _ = invalidated("helpers.world.decoding", "greedy", ("batch_size", "batch_size_"), monkeypatch)
    assert DECODING - {"world"} <= names and ADAPTERS <= names and TABLES <= names
