"""Independent worlds: a world seed's own cache and settings, and its result files written, read back
and verified against their SHA-256 list (`helpers.pipeline.worlds`; `make worlds`)."""
import json
import os

import pandas as pd
import pytest

from helpers import config
from helpers.pipeline import worlds


@pytest.fixture
def clean_env(monkeypatch):
    """No world-seed override or named cache while a test runs, and none left after it: `use_seed` writes
    os.environ itself, and `delenv` of an unset variable records nothing to undo, so each is set first (a
    seed leaked into this worker's later tests once: the kernels they started trained world 2's cache)."""
    for name in ("HELPERS_OVERRIDES", "HELPERS_CACHE"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    yield
    config.reset()


def test_a_world_seed_gets_its_settings_and_its_own_cache_in_every_new_process(clean_env):
    worlds.use_seed(2)
    assert config.world().seed == 2
    assert json.loads(os.environ["HELPERS_OVERRIDES"]) == {"world": {"seed": 2}}
    assert os.environ["HELPERS_CACHE"] == "data/scratch/seed-2"
    assert config.cache_dir() == config.REPO_ROOT / "data/scratch/seed-2" / "fast"


def test_seed_zero_is_the_shipped_world_and_other_overrides_are_kept(clean_env, monkeypatch):
    monkeypatch.setenv("HELPERS_OVERRIDES", '{"contrast": {"min_size": 50}}')
    monkeypatch.setenv("HELPERS_CACHE", "somewhere")
    worlds.use_seed(0)
    assert json.loads(os.environ["HELPERS_OVERRIDES"]) == {"contrast": {"min_size": 50}}
    assert os.environ["HELPERS_CACHE"] == "somewhere"  # a cache the caller named is kept
    with pytest.raises(ValueError, match="non-negative integer"):
        worlds.use_seed(-1)


@pytest.mark.slow
def test_result_files_round_trip_and_a_changed_file_is_caught(world, tmp_path, monkeypatch):
    monkeypatch.setattr(worlds, "WORLDS_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="make worlds"):
        worlds.read(0)
    assert worlds.verify(0) == ["no committed results for world seed 0 in " + str(tmp_path / "seed-0")]
    where = worlds.write(0)
    assert sorted(p.name for p in where.iterdir()) == ["SHA256SUMS", "checkpoints.csv", "claims.csv", "code.txt",
                                                       "rules.csv"]
    assert worlds.verify(0) == []
    frames = worlds.read(0)
    assert list(frames["checkpoints.csv"]["checkpoint"]) == list(world["selected"])
    assert set(frames["rules.csv"].columns) == {"rule", "value", "holds"}
    assert {"claim", "verdict"} <= set(frames["claims.csv"].columns)
    monkeypatch.setattr(worlds, "_decided_by", lambda: b"0123456789abcdef\n")  # as after a change to the claims
    with pytest.raises(ValueError, match="decided by other code"):
        worlds.read(0)
    monkeypatch.undo()
    monkeypatch.setattr(worlds, "WORLDS_DIR", tmp_path)
    rules = where / "rules.csv"
    rules.write_text(rules.read_text().replace("True", "False", 1))
    assert worlds.verify(0) == ["seed 0: rules.csv does not match its SHA-256 in SHA256SUMS"]
    with pytest.raises(ValueError, match="restore it with git"):
        worlds.read(0)


def _committed_world(root, seed, verdicts, decided_by):
    """A world's result folder as `write` leaves it, with the given claims' verdicts and code stamp."""
    where = root / f"seed-{seed}"
    where.mkdir()
    texts = {"claims.csv": pd.DataFrame({"claim": list(verdicts), "verdict": list(verdicts.values()),
                                         "difference": [-0.1] * len(verdicts)})
             .to_csv(index=False).encode(), worlds.CODE: decided_by}
    for name, data in texts.items():
        (where / name).write_bytes(data)
    (where / worlds.SUMS).write_text(worlds._sums(texts))


def test_replication_names_a_world_decided_by_other_code_and_counts_the_worlds(clean_env, tmp_path, monkeypatch):
    monkeypatch.setattr(worlds, "WORLDS_DIR", tmp_path)
    monkeypatch.setattr(worlds, "_decided_by", lambda: b"0123456789abcdef\n")
    current = pd.DataFrame({"verdict": ["reproduced", "contradicted"], "difference": [-0.2, 0.1]},
                           index=pd.Index(["a", "b"], name="claim"))
    _committed_world(tmp_path, 1, {"a": "reproduced", "b": "inconclusive"}, b"0123456789abcdef\n")
    _committed_world(tmp_path, 2, {"a": "reproduced", "b": "contradicted"}, b"fedcba9876543210\n")  # older code
    table = worlds.replication_table(current)
    assert list(table.columns) == ["world 0", "world 1", "replication", "signs"]
    assert table["signs"].tolist() == ["− −", "+ −"]  # world 0's and world 1's differences
    assert table["replication"].tolist() == ["replicated: reproduced (2 of 3 worlds)",
                                             "world-dependent: 1 contradicted, 1 inconclusive (2 of 3 worlds)"]
    assert len(table.attrs["missing"]) == 1 and "world 2" in table.attrs["missing"][0]
    assert "decided by other code" in table.attrs["missing"][0]
    (tmp_path / "seed-2" / worlds.CODE).write_bytes(b"0123456789abcdef\n")  # the stamp edited by hand
    assert "does not match its SHA-256" in worlds.replication_table(current).attrs["missing"][0]
