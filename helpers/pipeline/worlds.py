"""Independent worlds: the whole series trained again from another world seed, kept as small result files.

A world seed (`config.world().seed`) draws the training stream and the initialization, so the selected
checkpoints and everything built from them differ. The shipped world is seed 0; `make worlds` builds
seeds 1 and 2, each into its own cache (`cache_for`), and checks the files below against a rebuild.
Each world's results are three CSV files in ``data/worlds/seed-K/`` with a SHA-256 list:

- ``claims.csv``: every row of the findings table (`helpers.pipeline.claims.table`);
- ``checkpoints.csv``: each selected checkpoint's step, window and test accuracies;
- ``rules.csv``: every world rule (`helpers.pipeline.world_rules.world_rules`) with its value and whether it holds
  (a world that misses one is reported, never dropped).

Only these files are committed, not the worlds' archives: a world is about 40 MB, its results a few kB.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from helpers import config
from helpers.cache.fingerprint import code_fingerprint
from helpers.evaluation import findings
from helpers.pipeline import claims
from helpers.pipeline.checkpoints import get_checkpoints
from helpers.pipeline.decoded import greedy_results
from helpers.pipeline.world_rules import world_rules
from helpers.world import sums

WORLDS_DIR = config.DATA_DIR / "worlds"
REPLICATION_SEEDS = (1, 2)  # built by `make worlds` beside the shipped world's seed 0
SUMS = "SHA256SUMS"
CODE = "code.txt"  # the fingerprint of the code that decided the claims (`helpers.pipeline.claims` and its imports)


def folder(seed: int) -> Path:
    """Where the result files of world seed `seed` are committed."""
    return WORLDS_DIR / f"seed-{seed}"


def cache_for(seed: int) -> str:
    """The cache a world seed is built in unless HELPERS_CACHE names one (relative to the repository): the
    shipped seed 0 in data/scratch as `make world` has it, every other seed beside it in its own folder."""
    return "data/scratch" if seed == config.SEED else f"data/scratch/seed-{seed}"


def use_seed(seed: int) -> None:
    """Make this process, and the worker processes and notebook kernels it starts, use world seed `seed`
    and its cache: the override goes into HELPERS_OVERRIDES, which every new process reads at import."""
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"a world seed is a non-negative integer, got {seed!r}")
    wanted = json.loads(os.environ.get("HELPERS_OVERRIDES", "").strip() or "{}")
    wanted.setdefault("world", {})["seed"] = seed
    if seed == config.SEED:
        del wanted["world"]["seed"]
        wanted = {k: v for k, v in wanted.items() if v}
    os.environ["HELPERS_OVERRIDES"] = json.dumps(wanted)
    os.environ.setdefault("HELPERS_CACHE", cache_for(seed))  # a cache named by the caller is kept
    config.override("world", seed=seed)


def _checkpoint_summary() -> pd.DataFrame:
    ck, test = get_checkpoints(), greedy_results("test")
    questions = sums.split("test").set_index("question_id").loc[test["question_id"]]
    test = test.assign(family=np.asarray(sums.in_mistake_family(questions["a"], questions["b"])))
    by = test.groupby("checkpoint", sort=False)
    return pd.DataFrame({
        "checkpoint": list(ck.all),
        "step": [int(name.split("-")[1]) for name in ck.all],
        "window": ["training" if name in ck.training else "evaluation" for name in ck.all],
        "test accuracy": by["correct"].mean().loc[list(ck.all)].to_numpy(),
        "mistake family accuracy": by.apply(lambda g: g.loc[g["family"], "correct"].mean(),
                                            include_groups=False).loc[list(ck.all)].to_numpy(),
    })


def _rules() -> pd.DataFrame:

    rules = world_rules()
    rows = [{"rule": name, "value": str(value), "holds": bool(ok)} for name, (value, ok) in rules["values"].items()]
    for (window, group), row in rules["windows"].iterrows():
        if row["needed"]:
            rows.append({"rule": f"{window} window, {group}: moves both ways",
                         "value": f"rise {row['largest rise']:.3f}, fall {row['largest fall']:.3f}",
                         "holds": bool(row["both ways"])})
    return pd.DataFrame(rows)


def results() -> dict[str, pd.DataFrame]:
    """This world's result files, computed from its cache (builds what is missing, if allowed)."""

    table = claims.table().reset_index()
    return {"claims.csv": table, "checkpoints.csv": _checkpoint_summary(), "rules.csv": _rules()}


def _texts(frames: dict[str, pd.DataFrame]) -> dict[str, bytes]:
    out = {}
    for name, frame in frames.items():
        buffer = io.StringIO()
        frame.to_csv(buffer, index=False, lineterminator="\n")  # floats in full: a rebuild matches bit for bit
        out[name] = buffer.getvalue().encode()
    return out


def _sums(texts: dict[str, bytes]) -> str:
    return "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in sorted(texts.items()))


def _committed(where: Path) -> dict[str, str]:
    """{file name: SHA-256} of a world's SHA256SUMS list."""
    return dict(line.split("  ")[::-1] for line in (where / SUMS).read_text().splitlines())


def _decided_by() -> bytes:
    return f"{code_fingerprint('helpers.pipeline.claims')}\n".encode()


def write(seed: int) -> Path:
    """Write world seed `seed`'s result files, the fingerprint of the code that decided its claims, and their
    SHA-256 list (the current process uses that seed)."""
    texts = {**_texts(results()), CODE: _decided_by()}
    where = folder(seed)
    where.mkdir(parents=True, exist_ok=True)
    for name, data in texts.items():
        (where / name).write_bytes(data)
    (where / SUMS).write_text(_sums(texts))
    return where


def verify(seed: int) -> list[str]:
    """The differences between the committed result files of `seed` and the ones its cache gives now
    ([] when a rebuild reproduced them byte for byte)."""
    where = folder(seed)
    if not (where / SUMS).exists():
        return [f"no committed results for world seed {seed} in {where}"]
    committed = _committed(where)
    problems = [f"seed {seed}: {name} does not match its SHA-256 in {SUMS}" for name, digest in committed.items()
                if not (where / name).exists() or hashlib.sha256((where / name).read_bytes()).hexdigest() != digest]
    texts = {**_texts(results()), CODE: _decided_by()}
    for name, data in sorted(texts.items()):
        if hashlib.sha256(data).hexdigest() != committed.get(name):
            problems.append(f"seed {seed}: {name} differs from the rebuild")
    return problems


def read(seed: int) -> dict[str, pd.DataFrame]:
    """The committed result files of world seed `seed`, checked against their SHA-256 list."""
    where = folder(seed)
    if not (where / SUMS).exists():
        raise FileNotFoundError(f"no results for world seed {seed}: run `make worlds` (maintainers)")
    committed = _committed(where)
    out = {}
    for name, digest in sorted(committed.items()):
        data = (where / name).read_bytes()
        if hashlib.sha256(data).hexdigest() != digest:
            raise ValueError(f"{where.name}/{name} does not match its SHA-256 in {SUMS}: restore it with git")
        if name.endswith(".csv"):
            out[name] = pd.read_csv(io.BytesIO(data))
    if CODE not in committed or (where / CODE).read_text().strip() != _decided_by().decode().strip():
        raise ValueError(f"{where.name}'s claims were decided by other code than this checkout's: rebuild them "
                         f"with `make world WORLD_SEED={seed}` (maintainers)")
    return out


def replication_table(current: pd.DataFrame) -> pd.DataFrame:
    """`current` (this world's `claims.table()`) with each claim's verdict in every world and its replication
    verdict (`findings.replication`: "replicated: <verdict>" when all worlds agree, "world-dependent: <split>"
    otherwise). This world's verdicts come from `current`, the others' from their committed results; a world whose
    results are missing, altered or decided by other code (`read`) is left out, named in ``attrs["missing"]``, and
    each replication verdict then says over how many worlds it was reached ("(2 of 3 worlds)"). ``signs`` gives the
    sign of the paper metric's difference in each world compared ("− − −"): a claim can be world-dependent in
    its verdicts while its direction agrees everywhere."""
    here = config.world().seed
    columns, missing = {f"world {here}": current["verdict"]}, []
    differences = {here: current.get("difference")}
    for seed in sorted({config.SEED, *REPLICATION_SEEDS} - {here}):
        try:
            committed = read(seed)["claims.csv"].set_index("claim")
        except (FileNotFoundError, ValueError) as err:
            missing.append(f"world {seed}: {err}")
            continue
        columns[f"world {seed}"] = committed["verdict"].reindex(current.index)
        differences[seed] = committed.get("difference", pd.Series(dtype=float)).reindex(current.index)
    out = pd.DataFrame(columns, index=current.index)
    worlds = len(REPLICATION_SEEDS) + 1
    among = f" ({len(columns)} of {worlds} worlds)" if len(columns) < worlds else ""  # a world left out: say so
    out["replication"] = [findings.replication(row) + among if row.notna().all()
                          else "incomplete: a world lacks the claim" for _, row in out.iterrows()]
    signs = pd.DataFrame({seed: d for seed, d in differences.items() if d is not None}, index=current.index)
    out["signs"] = [" ".join("?" if pd.isna(v) else "+" if v > 0 else "−" if v < 0 else "0" for v in row)
                    for row in signs.to_numpy(dtype=float)]  # the paper metric's difference, world by world
    out.attrs["missing"] = missing
    return out
