"""Independent worlds: a world seed's own cache and settings, and its result files written, read back
and verified against their SHA-256 list (`helpers.pipeline.worlds`; `make worlds`)."""
import json
import os

import pytest

from helpers import config
from helpers.pipeline import worlds


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("HELPERS_OVERRIDES", raising=False)
    monkeypatch.delenv("HELPERS_CACHE", raising=False)
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
    assert sorted(p.name for p in where.iterdir()) == ["SHA256SUMS", "checkpoints.csv", "claims.csv", "rules.csv"]
    assert worlds.verify(0) == []
    frames = worlds.read(0)
    assert list(frames["checkpoints.csv"]["checkpoint"]) == list(world["selected"])
    assert set(frames["rules.csv"].columns) == {"rule", "value", "holds"}
    assert {"claim", "verdict"} <= set(frames["claims.csv"].columns)
    rules = where / "rules.csv"
    rules.write_text(rules.read_text().replace("True", "False", 1))
    assert worlds.verify(0) == ["seed 0: rules.csv does not match its SHA-256 in SHA256SUMS"]
    with pytest.raises(ValueError, match="restore it with git"):
        worlds.read(0)
