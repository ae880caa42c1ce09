"""Command line: `python -m helpers build [--fast]` and `python -m helpers notebooks [--fast]`."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"


def build_all() -> None:
    """Build every artifact the notebooks load (trains the world first)."""
    from . import artifacts
    from .decoding import greedy_results

    start = time.perf_counter()
    artifacts.load_or_build("world")
    for split in ("hundred", "test", "adapter_train", "transfer_test"):
        greedy_results(split)
    for name, fn in artifacts.EXTRA_BUILDS:
        print(f"building {name}", file=sys.stderr, flush=True)
        fn()
    print(f"all artifacts ready in {time.perf_counter() - start:.0f} s")


def notebook_paths(pattern: str = "*.ipynb") -> list[Path]:
    return sorted(NOTEBOOK_DIR.glob(pattern))


def run_notebook(path: Path, inplace: bool, timeout: int = 1800) -> float:
    """Execute one notebook in a fresh kernel (in the notebooks folder); returns seconds."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - start
    if inplace:
        tmp = path.with_suffix(".ipynb.tmp")
        nbformat.write(nb, tmp)
        os.replace(tmp, path)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers")
    parser.add_argument("command", choices=["build", "notebooks"])
    parser.add_argument("--fast", action="store_true", help="small sizes (HELPERS_FAST=1), as in `make test`")
    parser.add_argument("--only", default="*.ipynb", help="glob of notebooks to run (notebooks command)")
    parser.add_argument("--no-save", action="store_true", help="execute notebooks without writing outputs back")
    args = parser.parse_args(argv)
    if args.fast:
        os.environ["HELPERS_FAST"] = "1"
    if args.command == "build":
        build_all()
    else:
        for path in notebook_paths(args.only):
            seconds = run_notebook(path, inplace=not args.no_save)
            print(f"{path.name}: {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
