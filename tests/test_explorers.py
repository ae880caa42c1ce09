"""helpers.figures.explorers without a browser: the views follow their controls, bad input says what to fix, and the
widgets redraw when a control changes and show a static PNG where widgets do not render."""
from __future__ import annotations

import base64
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from helpers.evaluation import contrast, metrics  # noqa: E402
from helpers.figures import explorers  # noqa: E402

CKPTS = ["step-100", "step-200", "step-300"]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _results(seed: int, n: int = 300, checkpoints=CKPTS) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    skill = rng.uniform(size=n)
    rows = []
    for i, name in enumerate(checkpoints):
        p = np.clip(skill + 0.15 * i + rng.normal(0, 0.2, n), 0.02, 0.98)
        rows.append(pd.DataFrame({"checkpoint": name, "question_id": np.arange(n),
                                  "confidence": np.sqrt(p), "correct": rng.uniform(size=n) < p}))
    return pd.concat(rows, ignore_index=True)


@pytest.fixture(scope="module")
def frames():
    return {"token probability": _results(0), "self-consistency": _results(1, checkpoints=CKPTS[1:])}


@pytest.fixture(scope="module")
def beams():
    """Ten beams per question, best first; the right answer in about half of them."""
    rng = np.random.default_rng(0)
    questions = pd.DataFrame({"question_id": np.arange(120), "target": rng.integers(100, 999, 120)})
    n, k = len(questions), 10
    answers = np.repeat(questions["target"].to_numpy(), k) + np.where(rng.uniform(size=n * k) < 0.5, 0,
                                                                       rng.integers(1, 3, n * k))
    one = pd.DataFrame({"question_id": np.repeat(questions["question_id"], k), "beam": np.tile(np.arange(k), n),
                        "answer": pd.array(answers, dtype="Int64"), "ended": rng.uniform(size=n * k) < 0.95,
                        "logprob": np.sort(rng.normal(-2, 1, (n, k)), axis=1)[:, ::-1].ravel()})
    return pd.concat([one.assign(checkpoint=c) for c in CKPTS[:2]], ignore_index=True), questions


@pytest.fixture(autouse=True)
def _no_pyplot_figures():
    """Views draw outside pyplot, so a notebook's inline backend never shows a figure twice."""
    before = plt.get_fignums()
    yield
    assert plt.get_fignums() == before


def _heights(ax, label="accuracy"):
    (container,) = [c for c in ax.containers if c.get_label() == label]
    return [round(p.get_height(), 9) for p in container]


def _png(explorer):
    (shown,) = explorer.output.outputs
    return base64.b64decode(shown["data"]["image/png"])


# --------------------------------------------------------------------------- reliability


def test_reliability_view_follows_its_controls(frames):
    base = explorers.reliability_view(frames, "step-200", "token probability", 5, "uniform")
    (ax,) = base.axes
    assert len(_heights(ax)) == 5 and "ECE" in ax.get_title() and "(5 equal-width bins)" in ax.get_title()
    more = explorers.reliability_view(frames, "step-200", "token probability", 12, "uniform").axes[0]
    assert len(_heights(more)) > 5
    later = explorers.reliability_view(frames, "step-300", "token probability", 5, "uniform").axes[0]
    other = explorers.reliability_view(frames, "step-200", "self-consistency", 5, "uniform").axes[0]
    assert _heights(later) != _heights(ax) and _heights(other) != _heights(ax)
    quantile = explorers.reliability_view(frames, "step-200", "token probability", 5, "quantile").axes[0]
    assert "equal-mass" in quantile.get_title()
    rows = frames["token probability"].query("checkpoint == 'step-200'")
    ece = metrics.expected_calibration_error(rows["confidence"], rows["correct"], n_bins=5)
    assert f"ECE {ece:.3f}" in ax.get_title()


def test_reliability_view_says_what_to_fix(frames):
    with pytest.raises(ValueError, match=r"method 'verbalized' is not in frames; choose one of \['token probability'"):
        explorers.reliability_view(frames, "step-200", "verbalized")
    with pytest.raises(ValueError, match=r"'self-consistency' has no results for checkpoint 'step-100'.*step-200"):
        explorers.reliability_view(frames, "step-100", "self-consistency")
    with pytest.raises(ValueError, match=r"missing columns \['correct'\]"):
        explorers.reliability_view({"x": frames["token probability"].drop(columns="correct")}, "step-100", "x")
    with pytest.raises(ValueError, match="non-empty dict"):
        explorers.reliability_view({}, "step-100", "x")
    with pytest.raises(ValueError, match="n_bins"):
        explorers.reliability_view(frames, "step-200", "token probability", n_bins=0)
    with pytest.raises(ValueError, match="strategy"):
        explorers.reliability_explorer(frames, strategy="equal")
    with pytest.raises(ValueError, match="checkpoint 'step-999' is not among the choices"):
        explorers.reliability_explorer(frames, checkpoint="step-999")


def test_reliability_explorer_redraws_when_a_control_changes(frames):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        explorer = explorers.reliability_explorer(frames, n_bins=5)
    assert explorer.renders == 1 and set(explorer.controls) == {"checkpoint", "method", "n_bins", "strategy", "band"}
    assert explorer.controls["checkpoint"].options == tuple(CKPTS)
    first = _png(explorer)
    assert first == explorer.png and first.startswith(b"\x89PNG")
    explorer.controls["n_bins"].value = 12
    assert explorer.renders == 2 and _png(explorer) != first and explorer.message is None
    explorer.controls["strategy"].value = "quantile"
    explorer.controls["band"].value = False
    assert explorer.renders == 4
    # a combination the view rejects: its message replaces the figure, the controls stay
    explorer.controls["method"].value = "self-consistency"
    explorer.controls["checkpoint"].value = "step-100"
    (shown,) = explorer.output.outputs
    assert shown["output_type"] == "stream" and "has no results for checkpoint 'step-100'" in shown["text"]
    explorer.controls["checkpoint"].value = "step-300"
    assert explorer.message is None and _png(explorer) == explorer.png


def test_reliability_explorer_over_another_grouping():
    """Notebook 01: two models, each on two sets of questions, instead of checkpoints."""
    hundred, test = _results(3, n=100, checkpoints=["x"]), _results(4, n=500, checkpoints=["x"])
    frames = {name: pd.concat([hundred.assign(questions="hundred sums"), test.assign(questions="test sums")])
              .drop(columns="checkpoint") for name in ["fine-tuned", "RL"]}
    explorer = explorers.reliability_explorer(frames, group="questions", n_bins=5)
    assert explorer.controls["checkpoint"].description == "questions"
    assert explorer.controls["checkpoint"].options == ("hundred sums", "test sums")
    fig = explorers.reliability_view(frames, "test sums", "RL", 5, group="questions")
    assert fig.axes[0].get_title().startswith("RL, test sums (500 answers)")
    with pytest.raises(ValueError, match=r"missing columns \['checkpoint'\]"):
        explorers.reliability_view(frames, "test sums", "RL")


def test_explorer_displays_as_widget_and_as_static_png(frames):
    explorer = explorers.reliability_explorer(frames)
    bundle = explorer._repr_mimebundle_()
    assert bundle[WIDGET_VIEW]["model_id"] == explorer.widget.model_id  # live in Jupyter
    assert base64.b64decode(bundle["image/png"]) == explorer.png  # where widgets do not render (GitHub)
    assert "run the notebook" in bundle["text/plain"]
    assert explorer.output in explorer.widget.children  # the figure lives in the widget: shown once


# --------------------------------------------------------------------------- contrast sets


def _flips():
    """Three checkpoints over 8 questions with known flips between a and c."""
    correct = {"a": [0, 0, 0, 1, 1, 1, 0, 1], "b": [1, 0, 0, 1, 1, 0, 0, 1], "c": [1, 1, 1, 0, 1, 1, 0, 1]}
    conf = {"a": [.3, .4, .2, .9, .8, .7, .1, .6], "b": [.6, .4, .3, .8, .8, .4, .2, .7],
            "c": [.9, .7, .8, .5, .9, .8, .2, .7]}
    return pd.concat([pd.DataFrame({"checkpoint": c, "question_id": range(8), "correct": correct[c],
                                    "confidence": conf[c]}) for c in "abc"], ignore_index=True)


def test_contrast_counts():
    assert explorers.contrast_counts(_flips(), "a", "c") == {"improvements": 3, "regressions": 1}
    assert explorers.contrast_counts(_flips(), "a", "b") == {"improvements": 1, "regressions": 1}


def test_contrast_view_shows_counts_and_both_normalizations():
    frame = _results(2, n=400)
    fig = explorers.contrast_view(frame, "step-100", "step-300", CKPTS, n_bins=10)
    scatter, raw, normalized = fig.axes
    counts = explorers.contrast_counts(frame, "step-100", "step-300")
    title = fig.get_suptitle()
    assert f"{counts['improvements']:,} improvements" in title and f"{counts['regressions']:,} regressions" in title
    pairs = contrast.contrast_set(frame, "step-100", "step-300")
    assert len(scatter.collections[0].get_offsets()) + len(scatter.collections[1].get_offsets()) == len(pairs)
    rows = contrast.contrast_rows(frame, "step-100", "step-300")
    later = rows[rows["checkpoint"] == "step-300"]
    q_ece = metrics.expected_calibration_error(later["confidence"], later["correct"], n_bins=10)
    p_ece = metrics.expected_calibration_error(pairs["confidence_j"], pairs["correct_j"], n_bins=10)
    assert f"ECE {p_ece:.3f}" in raw.get_title() and f"ECE {q_ece:.3f}" in normalized.get_title()
    summary = contrast.pair_metrics(pairs, n_bins=10)
    assert f"AUC {summary['auc']:.3f}" in title
    fitted = explorers.contrast_view(frame, "step-100", "step-300", CKPTS, normalizer="fitted")
    assert "fitted" in fitted.axes[2].get_title() and _heights(fitted.axes[2]) != _heights(normalized)
    other = explorers.contrast_view(frame, "step-200", "step-300", CKPTS)
    assert other.get_suptitle() != title


def test_contrast_view_says_what_to_fix():
    frame = _flips()
    with pytest.raises(ValueError, match="i is the earlier checkpoint"):
        explorers.contrast_view(frame, "c", "a", ["a", "b", "c"])
    with pytest.raises(ValueError, match="both 'a'"):
        explorers.contrast_view(frame, "a", "a", ["a", "b", "c"])
    with pytest.raises(ValueError, match="agree on every question"):
        explorers.contrast_view(pd.concat([frame, frame.query("checkpoint == 'a'").assign(checkpoint="d")]), "a", "d")
    with pytest.raises(ValueError, match="normalizer must be"):
        explorers.contrast_view(frame, "a", "c", normalizer="isotonic")
    with pytest.raises(ValueError, match="at least two checkpoints"):
        explorers.contrast_explorer(frame, ["a"])


def test_contrast_explorer_redraws_and_explains_a_wrong_order():
    frame = _results(2, n=400)
    explorer = explorers.contrast_explorer(frame, CKPTS)
    assert explorer.values() == {"ckpt_i": "step-100", "ckpt_j": "step-300", "n_bins": 10}
    first = _png(explorer)
    explorer.controls["ckpt_i"].value = "step-200"
    assert explorer.renders == 2 and _png(explorer) != first
    explorer.controls["ckpt_j"].value = "step-100"
    assert "earlier checkpoint" in explorer.output.outputs[0]["text"]


# --------------------------------------------------------------------------- beams


def test_beams_view_follows_the_number_of_beams(beams):
    frame, questions = beams
    one = explorers.beams_view(frame, questions, "step-100", k=1)
    diagram, histogram = one.axes
    assert "1 best of 10 beams" in one.get_suptitle()
    # one beam: its group holds all the mass, so every parsed answer has confidence 1 (or 0 if unended)
    assert len(_heights(diagram)) <= 2 and "2 distinct values" in histogram.get_title()
    ten = explorers.beams_view(frame, questions, "step-100", k=10)
    assert len(_heights(ten.axes[0])) > 2 and "10 best of 10 beams" in ten.get_suptitle()
    assert len(explorers.top_beams(frame, 3)) == 3 * 2 * len(questions)


def test_beams_view_says_what_to_fix(beams):
    frame, questions = beams
    with pytest.raises(ValueError, match="at most 10 beams"):
        explorers.beams_view(frame, questions, "step-100", k=11)
    with pytest.raises(ValueError, match="k .* whole number >= 1"):
        explorers.beams_view(frame, questions, "step-100", k=0)
    with pytest.raises(ValueError, match="no beams for checkpoint 'step-300'"):
        explorers.beams_view(frame, questions, "step-300", k=3)
    with pytest.raises(ValueError, match=r"missing columns \['logprob'\]"):
        explorers.beams_view(frame.drop(columns="logprob"), questions, "step-100", k=3)
    with pytest.raises(ValueError, match="between 1 and 10"):
        explorers.beams_explorer(frame, questions, k=12)


def test_beams_explorer_redraws_when_a_control_changes(beams):
    frame, questions = beams
    explorer = explorers.beams_explorer(frame, questions)
    assert explorer.values()["k"] == 10 and explorer.controls["k"].max == 10
    first = _png(explorer)
    explorer.controls["k"].value = 2
    assert explorer.renders == 2 and _png(explorer) != first
    explorer.controls["checkpoint"].value = "step-200"
    assert explorer.renders == 3


def test_strip_widgets_leaves_the_static_png():
    import nbformat

    png = {"image/png": "iVBORw0KGgo=", "text/plain": "reliability explorer"}
    cell = nbformat.v4.new_code_cell("explorers.reliability_explorer(frames)", outputs=[
        nbformat.v4.new_output("execute_result", data={**png, WIDGET_VIEW: {"model_id": "abc"}}, execution_count=1)])
    plain = nbformat.v4.new_code_cell("1", outputs=[nbformat.v4.new_output("stream", text="1\n")])
    nb = nbformat.v4.new_notebook(cells=[cell, plain], metadata={"widgets": {"state": {}}})
    assert explorers.strip_widgets(nb) == 1
    assert dict(nb.cells[0].outputs[0]["data"]) == png and "widgets" not in nb.metadata
    nbformat.validate(nb)
    assert explorers.strip_widgets(nb) == 0
