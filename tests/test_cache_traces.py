"""On the real (fast-mode) artifacts: a setting change invalidates exactly the entries that read it and
everything built from them, for every registered artifact, and the README's two examples hold."""
from __future__ import annotations

import dataclasses

import pytest

from helpers.cache import artifacts
from helpers import config
from helpers.build.cli import build_all
from helpers import pipeline

# Built by `python -m helpers build`; other registered names (tests' toys) are skipped.
BUILT = ["world", "selection", "greedy", "post_training", "beams", "samples", "rephrasings", "verbalized_targets",
         "verbalized_adapter", "verbalized", "verbalized_rephrasings", "adapter", "adapter_results",
         "multi_answer_adapter", "gcm_verifier", "gcm", "gcm_results", "comparison", "feature_variance", "domain_claim",
         "sc_differences", "claim", "transfer_claim", "random_claim"]


@pytest.fixture(scope="module")
def entries():
    """Every valid fast-mode entry, keyed by its folder (builds the fast world on first use)."""
    build_all()
    out = {}
    for m in artifacts.valid_entries():
        out[artifacts._params_dir(m["name"], m["params"]) / m["id"]] = m
    return out


def _other(value):
    """A different value of the same type."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 0.5 + 0.001
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, tuple):
        return value[:-1]
    raise AssertionError(f"no other value for {value!r}")


def _expected_invalid(entries: dict, key: str) -> set:
    """Entries that read `key`, and every entry built from one of them (transitively)."""
    by_id = {(m["name"], m["id"]): folder for folder, m in entries.items()}
    bad = {folder for folder, m in entries.items() if key in m["reads"]}
    changed = True
    while changed:
        changed = False
        for folder, m in entries.items():
            if folder not in bad and any(by_id.get((d["name"], d["id"])) in bad for d in m["deps"]):
                bad.add(folder)
                changed = True
    return bad


def _invalid_after(entries: dict, key: str) -> set:
    group, _, name = key.partition(".")
    with config.override(group, **{name: _other(config.value(key))}):
        return {folder for folder in entries if artifacts._entry_problem(folder) is not None}


def _all_keys() -> list[str]:
    return [f"{g}.{f.name}" for g, values in config.FULL.items() for f in dataclasses.fields(values)]


@pytest.mark.slow
@pytest.mark.parametrize("name", BUILT)
def test_a_setting_invalidates_exactly_its_readers_and_their_dependents(entries, name):
    mine = [folder for folder, m in entries.items() if m["name"] == name]
    assert mine, f"no valid {name} entry was built"
    manifest = entries[mine[0]]
    assert manifest["reads"], f"{name} read no setting at all"
    for key in manifest["reads"]:
        expected = _expected_invalid(entries, key)
        assert mine[0] in expected
        assert _invalid_after(entries, key) == expected, key
    # A setting neither it nor anything it was built from read: it stays valid.
    upstream = _expected_invalid(entries, "__none__")
    used = set(manifest["reads"])
    stack = list(manifest["deps"])
    while stack:
        d = stack.pop()
        m = entries[artifacts._params_dir(d["name"], d["params"]) / d["id"]]
        used |= set(m["reads"])
        stack += m["deps"]
    unread = [k for k in _all_keys() if k not in used]
    assert not upstream and unread
    for key in unread[:3]:
        assert mine[0] not in _invalid_after(entries, key), key


def _names(entries, folders) -> set[str]:
    return {entries[f]["name"] for f in folders}


@pytest.mark.slow
def test_the_readme_examples(entries):
    beams = _names(entries, _invalid_after(entries, "self_consistency.num_beams"))
    assert {"beams", "multi_answer_adapter", "comparison"} <= beams
    assert not beams & {"world", "selection", "greedy", "adapter", "verbalized_adapter", "verbalized", "gcm"}
    lr = _names(entries, _invalid_after(entries, "adapters.lr"))
    assert {"adapter", "adapter_results", "multi_answer_adapter", "gcm", "gcm_results", "comparison"} <= lr
    assert not lr & {"world", "selection", "greedy", "beams", "verbalized_adapter", "verbalized"}


@pytest.mark.slow
def test_fewer_beams_really_rebuild_with_new_numbers(entries):
    from helpers.pipeline.checkpoints import get_checkpoints
    from helpers.pipeline.comparison import TABLES

    name = get_checkpoints().evaluation[0]
    ten = pipeline.decoded.beam_results("test", [name])
    with config.override("self_consistency", num_beams=3):
        three = pipeline.decoded.beam_results("test", [name])
        reason = artifacts.why_invalid("comparison", methods="|".join(TABLES["05"]), reference="oracle adapter")
        assert reason is not None and reason != "not built yet"  # notebook 05's table shows SC: out of date
    assert three.groupby("question_id").size().eq(3).all()
    assert ten.groupby("question_id").size().eq(config.self_consistency().num_beams).all()
    assert artifacts.why_invalid("beams", checkpoint=name, split="test") is None  # the 10-beam entry is still there


def test_a_parallel_build_reuses_the_entries_a_serial_build_made(entries, capsys):
    """`helpers build --jobs 2`: the tasks of a stage run in two worker processes and find the serial build's
    entries."""
    def built() -> set:  # the stages up to greedy only: the other test worker may build later entries meanwhile
        return {m["id"] for m in artifacts.valid_entries() if m["name"] in ("world", "selection", "greedy")}

    before = built()
    build_all("greedy", jobs=2)
    printed = capsys.readouterr().out
    assert all(f"greedy {split}" in printed for split in ("hundred", "test", "adapter_train", "transfer_test"))
    assert before and built() == before
    with pytest.raises(ValueError, match="jobs"):
        build_all(jobs=0)
