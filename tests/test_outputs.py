"""The committed outputs are what the code produces: every notebook, executed in full mode against the
shipped world, prints exactly the text its committed copy shows.

The shipped world (data/world/) is unpacked into a temporary cache, each notebook runs in a fresh
kernel, and the text of every output (streams, `text/plain`, `text/html`, errors) is compared cell by
cell with the committed notebook. The comparison rule (also in the README): consecutive pieces of one
stream are joined (the kernel splits them at random flushes), ANSI colour codes are removed and memory
addresses masked. Nothing else is exempt (no notebook prints a time it measures live; timings are read
from the build's manifests), so a code change that moves any printed number must re-commit the notebook
(`make notebooks`). Images are not compared byte for byte; their number per cell is.

Where a chapter has an answer twin (notebooks/solutions/), the twin is the notebook executed and compared
(`notebook_paths`); its learner's copy holds the same outputs minus the solutions (tests/test_twins.py).
"""
from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat
import pytest

from helpers import shipped
from helpers.__main__ import join_streams, notebook_paths, run_notebook

NOTEBOOKS = notebook_paths()
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


def sanitize(text: str) -> str:
    """The comparison rule: no ANSI codes, no memory addresses; every other character must match."""
    return _ADDRESS.sub("0x…", _ANSI.sub("", text))


def cell_outputs(nb) -> list[tuple[str, ...]]:
    """Per code cell: its outputs as sanitized text (a stream's consecutive pieces joined), plus the
    number of images."""
    nb = copy.deepcopy(nb)
    join_streams(nb)
    out = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        texts, images = [], 0
        for o in cell.get("outputs", []):
            if o["output_type"] == "stream":
                texts.append(f"{o['name']}: {o['text']}")
            elif o["output_type"] == "error":
                texts.append(f"error: {o['ename']}: {o['evalue']}")
            else:
                data = o.get("data", {})
                texts += [f"{kind}: {data[kind]}" for kind in ("text/plain", "text/html") if kind in data]
                images += sum(kind.startswith("image/") for kind in data)
        out.append(tuple(sanitize(t) for t in texts) + (f"images: {images}",))
    return out


@pytest.fixture(scope="module")
def shipped_cache(tmp_path_factory):
    if shipped.read_index() is None:
        pytest.skip("no shipped world in data/world/")
    root = tmp_path_factory.mktemp("shipped-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("HELPERS_CACHE", str(root))
    mp.setenv("HELPERS_FAST", "0")
    mp.setenv("HELPERS_THREADS", "2")  # the committed outputs were made with the series' two threads
    mp.delenv("HELPERS_OVERRIDES", raising=False)
    shipped.install()
    yield root
    mp.undo()


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_outputs_are_what_the_code_prints(path: Path, shipped_cache):
    committed = nbformat.read(path, as_version=4)
    executed = run_notebook(path, inplace=False, timeout=900, keep=True)
    want, got = cell_outputs(committed), cell_outputs(executed)
    assert len(want) == len(got)
    for i, (w, g) in enumerate(zip(want, got)):
        assert g == w, f"{path.parent.name}/{path.name}, code cell {i + 1}: the output differs from the committed one; rerun `make notebooks`"


def test_the_comparison_rule():
    assert sanitize("\x1b[31mAUC 0.812\x1b[0m at 0x7f3a2b1c9d80") == "AUC 0.812 at 0x…"
    cell = nbformat.v4.new_code_cell("print(1)", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="a 1\n"),
        nbformat.v4.new_output("stream", name="stdout", text="b 2\n"),
        nbformat.v4.new_output("display_data", data={"image/png": "", "text/plain": "<Figure>"})])
    whole = nbformat.v4.new_code_cell("print(1)", outputs=[nbformat.v4.new_output("stream", name="stdout", text="a 1\nb 2\n")])
    assert cell_outputs(nbformat.v4.new_notebook(cells=[cell])) == [("stdout: a 1\nb 2\n", "text/plain: <Figure>", "images: 1")]
    assert cell_outputs(nbformat.v4.new_notebook(cells=[whole]))[0][0] == "stdout: a 1\nb 2\n"
