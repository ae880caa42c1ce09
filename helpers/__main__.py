"""Command line: `python -m helpers COMMAND [--fast]`.

- `build`: unpack the shipped world (`helpers.shipped`), then build whatever is missing;
  `build --scratch` ignores the shipped files (`make world`).
- `notebooks`: execute the notebooks in place (`--only GLOB`, `--no-save`).
- `pack`: write the shipped archives from the cache; `verify-rebuild`: compare the cache with them.

The top layer: imports whatever the build stages need.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from . import artifacts, config, rl, shipped
from .comparison import TABLES, comparison
from .confidence import self_consistency as sc
from .confidence import verbalized
from .decoding import greedy_results

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"


def stages() -> dict:
    """The build stages, in order: name -> a function that builds (or loads) everything of that stage."""
    def tables():
        # The results tables of notebooks 05 and 06; building them trains every adapter and baseline they use.
        for methods in TABLES.values():
            comparison(methods, reference="oracle adapter")

    config.set_threads()  # HELPERS_THREADS, or 2
    return {
        "world": lambda: (artifacts.load_or_build("world"), artifacts.load_or_build("selection")),
        "greedy": lambda: [greedy_results(split) for split in ("hundred", "test", "adapter_train", "transfer_test")],
        "post_training": lambda: [artifacts.load_or_build("greedy", checkpoint=m, split=s)
                                  for m in rl.POST_TRAINED for s in ("hundred", "test")],
        "self_consistency": lambda: (sc.sc_results("test"), sc.sc_results("adapter_train"),
                                     sc.sampled_sc_results("test"), sc.rephrasing_results()),
        "verbalized": verbalized.build_all,
        "adapters and baselines": tables,
    }


def build_all(only: str | None = None) -> None:
    """Build every artifact the notebooks load (or the stages up to and including `only`)."""
    todo = stages()
    if only is not None and only not in todo:
        raise ValueError(f"unknown stage {only!r}; choose one of {list(todo)}")
    start = time.perf_counter()
    for name, fn in todo.items():
        t = time.perf_counter()
        fn()
        print(f"stage {name}: {time.perf_counter() - t:.0f} s", flush=True)
        if name == only:
            break
    print(f"artifacts ready in {time.perf_counter() - start:.0f} s")


def notebook_paths(pattern: str = "*.ipynb") -> list[Path]:
    return sorted(NOTEBOOK_DIR.glob(pattern))


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


def run_notebook(path: Path, inplace: bool, timeout: int = 1800, keep: bool = False):
    """Execute one notebook in a fresh kernel (in the notebooks folder); returns seconds (or, with
    `keep`, the executed notebook)."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    # No timing metadata: a rerun that computes the same outputs writes the same file (git status stays clean).
    NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - start
    join_streams(nb)
    if inplace:
        tmp = path.with_suffix(".ipynb.tmp")
        nbformat.write(nb, tmp)
        os.replace(tmp, path)
    return nb if keep else seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers")
    parser.add_argument("command", choices=["build", "notebooks", "pack", "verify-rebuild"])
    parser.add_argument("--fast", action="store_true", help="small sizes (HELPERS_FAST=1), as in `make test`")
    parser.add_argument("--only", default=None,
                        help="build: the last stage to build; notebooks: a glob of notebooks to run")
    parser.add_argument("--no-save", action="store_true", help="execute notebooks without writing outputs back")
    parser.add_argument("--scratch", action="store_true", help="do not unpack the shipped world (HELPERS_SHIPPED=0)")
    args = parser.parse_args(argv)
    if args.fast:
        os.environ["HELPERS_FAST"] = "1"
    if args.scratch:
        os.environ["HELPERS_SHIPPED"] = "0"  # the notebooks' setup cell then unpacks nothing either
    if args.command == "build":
        if os.environ.get("HELPERS_SHIPPED", "1") != "0" and not config.fast_mode() and shipped.read_index() is not None:
            print(f"shipped world: {shipped.install()}", flush=True)
        build_all(args.only)
    elif args.command == "pack":
        index = shipped.pack()
        for name, info in sorted(index["archives"].items()):
            print(f"{name}: {info['bytes'] / 1e6:.1f} MB, {len(info['entries'])} entries")
        print(f"shipped world: {index['total_bytes'] / 1e6:.1f} MB in {shipped.SHIPPED_DIR}")
    elif args.command == "verify-rebuild":
        differences = shipped.compare_rebuild()
        print("\n".join(differences) or "the cache reproduces every shipped file")
        return 1 if differences else 0
    else:
        for path in notebook_paths(args.only or "*.ipynb"):
            seconds = run_notebook(path, inplace=not args.no_save)
            print(f"{path.name}: {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
