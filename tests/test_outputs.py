"""The committed outputs are what the code produces: every notebook, executed in full mode against the
shipped world, prints exactly the text its committed copy shows.

The shipped world (data/world/) is unpacked into a temporary cache, each half of the series (chapters
00-03, then 04-07) runs one notebook after another in one fresh kernel, in order (`run_together`: `%reset
-f` between them; a kernel start and about 12 s of imports once per half instead of once per notebook), and
the text of every output (streams, `text/plain`, `text/html`, errors) is compared cell by cell with the
committed notebook. The comparison
rule (also in docs/platforms.md):

- consecutive pieces of one stream are joined (the kernel splits them at random flushes), ANSI colour
  codes are removed and memory addresses masked;
- the setup cell's report of the reader's environment is masked: its `python 3.x.y, torch ...` line, the
  `CPU kernels: ...` line and the shipped-world line's clause naming the versions that differ from the
  world's (they describe the machine, not a result);
- where this machine has the package versions the world was built with (`data/world/index.json`) and its
  CPU kernels, every other character must match. Where either differs (another Python, a CUDA build of
  torch, a Mac), what a cell computes with torch or numpy itself may round differently, so each number
  may differ by one unit of its last printed digit; all other text must still match exactly. Measured
  on this kind of machine with Python 3.12 and 3.13 and PyPI's torch build: no number differed at all.

Nothing else is exempt (no notebook prints a time it measures live; timings are read from the build's
manifests), so a code change that moves any printed number must re-commit the notebook (`make
notebooks`). Images are not compared byte for byte; their number per cell is.

Where a chapter has an answer twin (notebooks/solutions/), the twin is the notebook executed and compared
(`notebook_paths`); its learner's copy holds the same outputs minus the solutions (tests/test_twins.py).

That each notebook runs on its own: `make notebooks` runs the notebooks in two kernels, each taking the
next notebook from a shared queue in another order than this (which notebook follows which depends on
timing). A notebook that leaned on what an earlier one left would either name a variable that `%reset -f`
removed (a NameError, and ruff's undefined-name rule in tests/test_notebooks.py finds it without running
anything), stop at a setting left changed (`run_together`), or print other text after another predecessor
than the committed one (a failure here, or a fresh clone's `make notebooks` leaving `git status` unclean).
"""
from __future__ import annotations

import copy
import re

import nbformat
import pytest

from helpers.cache import shipped
from helpers.build.cli import chapters, join_streams, run_together

CHAPTERS = chapters()
HALVES = {f"{names[0]}-{names[-1]}": [path for name in names for path in CHAPTERS[name]]
          for names in (sorted(CHAPTERS)[:len(CHAPTERS) // 2], sorted(CHAPTERS)[len(CHAPTERS) // 2:])}
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
_ENVIRONMENT = re.compile(r"^((?:stdout: )?)(?:python \d+\.\d+\.\d+\S*, torch .*|CPU kernels: .*)\n?", re.MULTILINE)
_VERSIONS_CLAUSE = re.compile(r"; built under other versions than these \(.*?\(docs/platforms\.md\)")
_NUMBER = re.compile(r"[-+]?\d+(?:\.(\d+))?(?:[eE][-+]?\d+)?")


def sanitize(text: str) -> str:
    """The comparison rule: no ANSI codes, no memory addresses, no report of the reader's environment."""
    text = _ADDRESS.sub("0x…", _ANSI.sub("", text))
    return _VERSIONS_CLAUSE.sub("", _ENVIRONMENT.sub(r"\1", text))


def same_environment() -> bool:
    """Whether this machine has the world's package versions and CPU kernels (then outputs match exactly)."""
    from helpers.cache.kernels import CPU_KERNELS
    from helpers.cache import artifacts
    from helpers.build.notebook import cpu_kernels

    index = shipped.read_index() or {}
    return not artifacts.version_differences(index.get("versions", {})) and cpu_kernels() == CPU_KERNELS


def numbers_agree(want: str, got: str) -> bool:
    """Under other versions: the same text, with each number allowed one unit of its last printed digit."""
    if _NUMBER.sub("#", want) != _NUMBER.sub("#", got):
        return False
    for a, b in zip(_NUMBER.finditer(want), _NUMBER.finditer(got)):
        if a.group(1) is None and b.group(1) is None and "e" not in (a.group() + b.group()).lower():
            unit = 1.0  # an integer (a count can move by one where a rounding flips a comparison)
        else:
            unit = 10.0 ** -max(len(a.group(1) or ""), len(b.group(1) or ""))
            if "e" in a.group().lower():
                unit *= abs(float(a.group()))
        if abs(float(a.group()) - float(b.group())) > unit * (1 + 1e-9):
            return False
    return True


def outputs_agree(want: tuple[str, ...], got: tuple[str, ...], exact: bool) -> bool:
    if exact or len(want) != len(got):
        return want == got
    return all(numbers_agree(w, g) for w, g in zip(want, got))


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
def shipped_cache(run_folder):
    """A cache holding the shipped world, one for the test run (`shipped.install` holds the cache's lock,
    so a second worker finds it unpacked)."""
    if shipped.read_index(shipped.SHIPPED_DIR) is None:
        pytest.skip("no shipped world in data/world/")
    root = run_folder("shipped-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("HELPERS_CACHE", str(root))
    mp.setenv("HELPERS_FAST", "0")
    mp.setenv("HELPERS_THREADS", "2")  # the committed outputs were made with the series' two threads
    mp.delenv("HELPERS_OVERRIDES", raising=False)
    shipped.install()
    yield root
    mp.undo()


@pytest.mark.slow
@pytest.mark.parametrize("half", sorted(HALVES))
def test_committed_outputs_are_what_the_code_prints(half: str, shipped_cache):
    exact = same_environment()
    for path, executed in zip(HALVES[half], run_together(HALVES[half], timeout=900)):
        want, got = cell_outputs(nbformat.read(path, as_version=4)), cell_outputs(executed)
        assert len(want) == len(got)
        for i, (w, g) in enumerate(zip(want, got)):
            assert outputs_agree(w, g, exact), (
                f"{path.parent.name}/{path.name}, code cell {i + 1}: the output differs from the committed one "
                f"({'exactly' if exact else 'beyond one unit of a last digit, under other versions'}); "
                "rerun `make notebooks`")


def test_the_comparison_rule():
    assert sanitize("\x1b[31mAUC 0.812\x1b[0m at 0x7f3a2b1c9d80") == "AUC 0.812 at 0x…"
    here = ("python 3.12.1, torch 2.13.0, numpy 2.4.6\nmode: full\nshipped world: verified, 5 of 5 shipped entries "
            "in use; built under other versions than these (python 3.11 -> 3.12): nothing is rebuilt "
            "(docs/platforms.md)\n")
    committed = ("python 3.11.7, torch 2.13.0+cpu, numpy 2.4.6\nmode: full\n"
                 "shipped world: verified, 5 of 5 shipped entries in use\n")
    assert sanitize(here) == sanitize(committed) == ("mode: full\n"
                                                     "shipped world: verified, 5 of 5 shipped entries in use\n")
    assert sanitize("mode: full; 2 torch threads\n") == "mode: full; 2 torch threads\n"  # only the report is masked
    as_stored = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("setup()", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text=here)])])  # as cell_outputs stores it: "stdout: ..."
    assert cell_outputs(as_stored)[0][0] == "stdout: " + sanitize(committed)
    assert outputs_agree(("AUC 0.812, n=500",), ("AUC 0.813, n=501",), exact=False)
    assert not outputs_agree(("AUC 0.812, n=500",), ("AUC 0.813, n=501",), exact=True)
    assert not outputs_agree(("AUC 0.812",), ("AUC 0.814",), exact=False)  # two units of the last digit
    assert not outputs_agree(("AUC 0.812 reproduced",), ("AUC 0.812 contradicted",), exact=False)  # words never
    assert (outputs_agree(("p 1.5e-03",), ("p 1.6e-03",), exact=False)
            and not outputs_agree(("p 1.5e-03",), ("p 1.8e-03",), exact=False))
    cell = nbformat.v4.new_code_cell("print(1)", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="a 1\n"),
        nbformat.v4.new_output("stream", name="stdout", text="b 2\n"),
        nbformat.v4.new_output("display_data", data={"image/png": "", "text/plain": "<Figure>"})])
    whole = nbformat.v4.new_code_cell("print(1)",
                                      outputs=[nbformat.v4.new_output("stream", name="stdout", text="a 1\nb 2\n")])
    assert cell_outputs(nbformat.v4.new_notebook(cells=[cell])) == [("stdout: a 1\nb 2\n", "text/plain: <Figure>",
                                                                     "images: 1")]
    assert cell_outputs(nbformat.v4.new_notebook(cells=[whole]))[0][0] == "stdout: a 1\nb 2\n"
