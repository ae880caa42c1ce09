"""`make notebooks` keeps a live-trained figure's committed image only where nothing else in its cell moved."""
import copy

import nbformat

from helpers.build.cli import LIVE_FIGURE, keep_live_figures


def _notebook(source="plot(losses)", png="AAAA", text="mean loss 2.128\n", tags=(LIVE_FIGURE,)):
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": list(tags)}, outputs=[
        nbformat.v4.new_output("stream", name="stdout", text=text),
        nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"})])
    return nbformat.v4.new_notebook(cells=[cell])


def _png(nb):
    return nb.cells[0].outputs[1]["data"]["image/png"]


def test_the_committed_image_stays_where_code_and_text_are_unchanged():
    committed, executed = _notebook(png="OLD"), _notebook(png="NEW")
    assert keep_live_figures(committed, executed) == 1 and _png(executed) == "OLD"


def test_changed_code_a_moved_number_or_no_tag_redraws_it():
    for changed in (dict(source="plot(losses, lw=2)"), dict(text="mean loss 2.130\n"), dict(tags=())):
        committed = _notebook(png="OLD", **({"tags": ()} if "tags" in changed else {}))
        executed = _notebook(png="NEW", **changed)
        before = copy.deepcopy(executed)
        assert keep_live_figures(committed, executed) == 0 and executed == before
