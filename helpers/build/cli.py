"""Command line: `python -m helpers COMMAND [--fast]`.

- `build`: unpack the shipped world (`helpers.cache.shipped`), then build whatever is missing;
  `build --scratch` ignores the shipped files (`make world`).
- `notebooks`: execute the notebooks in place (`--only GLOB`, `--no-save`): each chapter's answer twin
  (notebooks/solutions/) where it exists, saving the twin and its learner's copy (`helpers.build.twins`);
  `--build` first does what `build` does, unless every shipped entry is in use (`make notebooks`).
- `twins`: rewrite the learner's notebooks from their twins, without executing anything (`--only GLOB`).
- `pack`: write the shipped archives from the cache; `verify-rebuild`: compare the cache with them;
  `rekey`: after a rebuild that reproduced them, record the current code's key for the shipped entries.
- `world-results`: write a world's small result files (`helpers.pipeline.worlds`), or `--verify` them.
- `--world-seed K` (build, notebooks, world-results): another independent world, in its own cache.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from helpers import config
from helpers.build import twins
from helpers.cache import shipped
from helpers.figures import explorers
from helpers.pipeline import worlds
from helpers.pipeline.plan import stages

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"


def _for_workers(name: str):
    """This module's function `name` as a spawned worker can import it: by its module's name,
    `helpers.build.cli` (`python -m helpers` runs the shim helpers/__main__.py, which imports this)."""
    return getattr(importlib.import_module(__name__), name)


def _run_task(stage: str, task: str) -> float:
    """Run one task of `stages()` (in a worker process); returns its seconds."""
    start = time.perf_counter()
    stages()[stage][task]()
    return time.perf_counter() - start


def build_all(only: str | None = None, jobs: int = 1) -> None:
    """Build every artifact the notebooks load (or the stages up to and including `only`), with `jobs`
    worker processes for the tasks of a stage (each with the world's torch threads: the same numbers)."""
    todo = stages()
    if only is not None and only not in todo:
        raise ValueError(f"unknown stage {only!r}; choose one of {list(todo)}")
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    start = time.perf_counter()
    for name, tasks in todo.items():
        t = time.perf_counter()
        if jobs == 1 or len(tasks) == 1:
            for fn in tasks.values():
                fn()
        else:
            with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = {pool.submit(_for_workers("_run_task"), name, task): task for task in tasks}
                for future in as_completed(futures):
                    print(f"  {futures[future]}: {future.result():.0f} s", flush=True)
        print(f"stage {name}: {time.perf_counter() - t:.0f} s", flush=True)
        if name == only:
            break
    print(f"artifacts ready in {time.perf_counter() - start:.0f} s")


def notebook_paths(pattern: str = "*.ipynb") -> list[Path]:
    """The notebooks to execute, by file name: a chapter's answer twin (notebooks/solutions/, which holds
    the whole chapter) where it exists, else the notebook itself (no solutions/ folder: every notebook)."""
    found = {p.name: p for p in NOTEBOOK_DIR.glob(pattern)}
    found.update({p.name: p for p in (NOTEBOOK_DIR / twins.SOLUTIONS).glob(pattern)})
    return [found[name] for name in sorted(found)]


def chapters(pattern: str = "*.ipynb") -> dict[str, list[Path]]:
    """`notebook_paths` grouped by chapter (the file name's first two characters), chapters in order."""
    paths = notebook_paths(pattern)
    return {chapter: [p for p in paths if p.name[:2] == chapter] for chapter in sorted({p.name[:2] for p in paths})}


def join_streams(nb) -> None:
    """Join each cell's consecutive pieces of one stream: the kernel splits them at random flushes,
    so a rerun that prints the same text writes the same file."""
    for cell in nb.cells:
        joined = []
        for out in cell.get("outputs", []):
            if joined and out.get("output_type") == "stream" and joined[-1].get("output_type") == "stream" \
                    and joined[-1]["name"] == out["name"]:
                joined[-1]["text"] += out["text"]
            else:
                joined.append(out)
        if "outputs" in cell:
            cell["outputs"] = joined


def _client(nb, folder: Path, timeout: int) -> NotebookClient:
    """A client that runs `nb` with the notebooks folder as its working directory. No timing metadata: a
    rerun that computes the same outputs writes the same file (git status stays clean)."""
    return NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                          resources={"metadata": {"path": str(folder)}})


def _kernel_env() -> dict[str, str]:
    """The kernel's environment: it imports this checkout's helpers, also where .venv belongs to another
    clone (its editable install)."""
    paths = os.pathsep.join(p for p in (str(config.REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": paths}


# Between two notebooks in one kernel: an empty namespace, the settings as the environment gives them
# (HELPERS_OVERRIDES), and the next notebook's cells counted from 1, as in a fresh kernel (the cell after
# this one gets 1). A setting a notebook changed and left changed stops the run: it would reach the next.
_BETWEEN = """%reset -f
from helpers.config import recorded as _recorded
_left = _recorded.overrides()
_recorded.reset()
_recorded.overrides_from_environment()
assert _left == _recorded.overrides(), f"a notebook left settings changed: {_left}"
del _recorded, _left
get_ipython().execution_count = 1"""


def run_together(paths, timeout: int = 1800, done=None) -> list:
    """Execute notebooks (any iterable of paths, read as each one's turn comes) one after another in ONE fresh
    kernel, without saving; returns the executed notebooks (streams joined and widgets stripped, as
    `run_notebook` saves them), and calls `done(path, notebook, seconds)` as each one finishes. It saves a
    kernel start and the imports (about 12 s on two cores) per notebook after the first. Between notebooks
    `%reset -f` empties the namespace (the imported modules stay loaded), so a notebook cannot use a
    variable an earlier one left; that none names one is also checked statically (ruff's undefined-name
    rule, tests/test_notebooks.py), and `_BETWEEN` refuses a setting left changed."""
    nbs, client = [], None
    with contextlib.ExitStack() as kernel:
        for path in paths:
            nb = nbformat.read(path, as_version=4)
            start = time.perf_counter()
            if client is None:
                folder = twins.student_path(path).parent if twins.is_twin(path) else path.parent
                client = _client(nb, folder, timeout)
                kernel.enter_context(client.setup_kernel(env=_kernel_env()))
            else:  # in a notebook of its own, so that no executed notebook holds it (an error stops the run)
                between = nbformat.v4.new_code_cell(_BETWEEN)
                client.nb = nbformat.v4.new_notebook(cells=[between])
                client.execute_cell(between, 0)
            client.nb = nb
            client.reset_execution_trackers()
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)
            join_streams(nb)
            explorers.strip_widgets(nb)  # the explorers' static figures stay; random widget ids would change
            nbs.append(nb)
            if done is not None:
                done(path, nb, time.perf_counter() - start)
    return nbs


LIVE_FIGURE = "live-figure"  # the tag of a cell whose figure draws a model trained live in the notebook


def _has_png(output) -> bool:
    return "image/png" in output.get("data", {})


def keep_live_figures(committed, executed) -> int:
    """Give `executed`'s `live-figure` cells the committed images where their code and every other output are
    unchanged; returns how many images were kept. Such a figure draws a training run's values, whose last bits
    differ between processor classes (docs/platforms.md): redrawn elsewhere, the same curve would change the
    PNG's bytes and nothing a reader can see. Changed code, or a printed number that moved, redraws it."""
    kept = 0
    for old, new in zip(committed.cells, executed.cells):
        if LIVE_FIGURE not in old.get("metadata", {}).get("tags", []) or old.source != new.source:
            continue
        old_outputs, new_outputs = old.get("outputs", []), new.get("outputs", [])
        if len(old_outputs) != len(new_outputs):
            continue
        pairs = list(zip(old_outputs, new_outputs))
        images = [(a, b) for a, b in pairs if _has_png(a) and _has_png(b)]
        if any(a != b for a, b in pairs if not (_has_png(a) and _has_png(b))):  # another output moved
            continue
        for a, b in images:
            b["data"]["image/png"] = a["data"]["image/png"]
            kept += 1
    return kept


def _save(path: Path, nb, committed) -> None:
    """Write an executed notebook over `path` with its committed notebook's metadata (the kernel's Python version
    is no result: another Python rewrites only outputs) and live figures (`keep_live_figures`); a twin's
    learner copy is rewritten from it."""
    keep_live_figures(committed, nb)
    nb.metadata = copy.deepcopy(committed.metadata)
    tmp = path.with_suffix(".ipynb.tmp")
    nbformat.write(nb, tmp)
    os.replace(tmp, path)
    if twins.is_twin(path):
        twins.write_student_copy(path)


def _read_checked(path: Path):
    """The committed notebook; for a twin, checked first that its solutions are in place (it fails now,
    not after the run)."""
    nb = nbformat.read(path, as_version=4)
    if twins.is_twin(path):
        twins.student_copy(nb, path.name)
    return nb


def run_notebook(path: Path, inplace: bool, timeout: int = 1800, keep: bool = False):
    """Execute one notebook in a fresh kernel (in the notebooks folder, also for an answer twin);
    returns seconds (or, with `keep`, the executed notebook). Saving a twin also writes its learner's copy."""
    nb = _read_checked(path) if inplace else nbformat.read(path, as_version=4)
    committed = copy.deepcopy(nb)
    folder = twins.student_path(path).parent if twins.is_twin(path) else path.parent
    start = time.perf_counter()
    _client(nb, folder, timeout).execute(env=_kernel_env())
    seconds = time.perf_counter() - start
    join_streams(nb)
    explorers.strip_widgets(nb)
    if inplace:
        _save(path, nb, committed)
    else:
        nb.metadata = committed.metadata
    return nb if keep else seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers")
    parser.add_argument("command", choices=["build", "notebooks", "twins", "pack", "verify-rebuild", "rekey",
                                            "world-results", "assignments", "release"])
    parser.add_argument("--fast", action="store_true", help="small sizes (HELPERS_FAST=1), as in `make test`")
    parser.add_argument("--only", default=None,
                        help="build: the last stage to build; notebooks, twins: a glob of notebook file names")
    parser.add_argument("--no-save", action="store_true", help="execute notebooks without writing outputs back")
    parser.add_argument("--build", action="store_true",
                        help="notebooks: first unpack the shipped world, build what the notebooks read that it lacks")
    parser.add_argument("--scratch", action="store_true", help="do not unpack the shipped world (HELPERS_SHIPPED=0)")
    parser.add_argument("--read-log", default=None, help="pack: ship only the entries this HELPERS_READ_LOG file lists")
    parser.add_argument("--jobs", type=int, default=1,
                        help="build: worker processes for a stage's independent tasks; notebooks: notebooks at once")
    parser.add_argument("--world-seed", type=int, default=None,
                        help="train and use the world of this seed (its own cache unless HELPERS_CACHE is set)")
    parser.add_argument("--verify", action="store_true",
                        help="world-results: compare the committed result files with this cache's; "
                             "release: only check a written release for answers")
    parser.add_argument("--out", default=None,
                        help="assignments, release: the folder to write (dist/assignments, dist/release)")
    args = parser.parse_args(argv)
    if args.world_seed is not None:
        worlds.use_seed(args.world_seed)
    if args.fast:
        os.environ["HELPERS_FAST"] = "1"
    if args.scratch:
        os.environ["HELPERS_SHIPPED"] = "0"  # the notebooks' setup cell then unpacks nothing either
    if args.command == "build":
        print(shipped.use(), flush=True)  # unpacks it, and says which package versions differ from its own
        build_all(args.only, args.jobs)
    elif args.command == "pack":
        index = shipped.pack(read_log=None if args.read_log is None else Path(args.read_log))
        for name, info in sorted(index["archives"].items()):
            print(f"{name}: {info['bytes'] / 1e6:.1f} MB, {len(info['entries'])} entries")
        print(f"shipped {index['mode']} world: {index['total_bytes'] / 1e6:.1f} MB in {shipped.shipped_dir()}")
    elif args.command == "rekey":
        failed = shipped.rekey()
        print("re-keyed every shipped entry to the current code" if not failed else
              f"{len(failed)} shipped entries were not reproduced and keep their old key (run `make pack`): "
              + "; ".join(failed[:10]))
        return 1 if failed else 0
    elif args.command == "verify-rebuild":
        differences = shipped.compare_rebuild()
        print("\n".join(differences) or "the cache reproduces every shipped file")
        return 1 if differences else 0
    elif args.command == "world-results":
        seed = config.world().seed
        if not args.verify:
            print(f"wrote {worlds.write(seed).relative_to(config.REPO_ROOT)}")
            return 0
        differences = worlds.verify(seed)
        print("\n".join(differences) or f"world seed {seed}: the cache reproduces every committed result file")
        return 1 if differences else 0
    elif args.command == "assignments":
        from helpers.build import assignments  # local: needs otter-grader, the instructor's tool, only here
        out = Path(args.out or config.REPO_ROOT / "dist" / "assignments")
        for twin in sorted((NOTEBOOK_DIR / twins.SOLUTIONS).glob(args.only or "*.ipynb")):
            print(f"wrote {assignments.assign(twin, out)} (student/, autograder/)", flush=True)
    elif args.command == "release":
        from helpers.build import release  # local: the release module is for `make release` only
        out = Path(args.out or config.REPO_ROOT / "dist" / "release")
        if not args.verify:  # --verify: only look for answers in a written release (and its site)
            release.write(config.REPO_ROOT, out, assignments=config.REPO_ROOT / "dist" / "assignments")
        found = release.leaks(out)
        print("\n".join(found) or f"{'checked' if args.verify else 'wrote'} the student release in {out}: no answer "
              "twin, reference check or link to either")
        return 1 if found else 0
    elif args.command == "twins":
        for path in twins.write_student_copies(NOTEBOOK_DIR, args.only or "*.ipynb"):
            print(f"rewrote {path.relative_to(NOTEBOOK_DIR.parent)}", flush=True)
    else:
        if args.build:
            prepare()
        run_notebooks(notebook_paths(args.only or "*.ipynb"), save=not args.no_save, jobs=args.jobs)
    return 0


def prepare() -> None:
    """Before the notebooks run (`make notebooks`): unpack the shipped world and, unless every shipped entry
    is in use (then it holds all the notebooks read), build what they load first, so that no notebook's
    saved outputs show a build."""
    print(shipped.use(), flush=True)
    if shipped.complete():
        print("nothing to build: the notebooks read only shipped entries", flush=True)
    else:
        build_all()


def run_notebooks(paths: list[Path], save: bool, jobs: int = 1) -> None:
    """Execute `paths`, saving each (unless not `save`), with `jobs` threads: each starts one kernel and runs
    the notebooks it takes from a shared queue one after another in it (`run_together`), so the imports are
    paid once per thread instead of once per notebook (about 2 minutes of `make notebooks` on two cores).
    Which notebook follows which depends on timing, and the committed outputs do not: the output check
    (tests/test_outputs.py) runs them in another order, and a fresh clone's `make notebooks` leaves
    `git status` clean. Chapter 00 (it trains a model live) and the last chapters (the longest builds) go
    first and the short middle ones last, so that both threads finish together."""
    committed = {path: _read_checked(path) for path in paths}
    first = [p for p in paths if p.name.startswith("00")]
    queue = [*first, *reversed([p for p in paths if p not in first])]
    lock = threading.Lock()

    def take() -> Path | None:
        with lock:
            return queue.pop(0) if queue else None

    def done(path: Path, nb, seconds: float) -> None:
        if save:
            _save(path, nb, committed[path])
        print(f"{path.relative_to(NOTEBOOK_DIR)}: {seconds:.1f} s", flush=True)

    def work() -> None:
        try:
            run_together(iter(take, None), 1800, done)
        except BaseException:
            with lock:
                queue.clear()  # a failed notebook stops the run: the other kernels finish theirs, then stop
            raise

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in [pool.submit(work) for _ in range(jobs)]:
            future.result()
