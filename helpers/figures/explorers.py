"""Interactive explorers: ipywidgets controls over the series' figures, for readers who run the notebooks.

Each explorer has two halves:

- a *view*, a plain function from DataFrames and control values to a matplotlib Figure
  (`reliability_view`, `contrast_view`, `beams_view`), testable without a browser; bad input raises
  ValueError saying what to fix;
- a *widget* function (`reliability_explorer`, `contrast_explorer`, `beams_explorer`) returning an
  `Explorer`: the controls, and an ipywidgets Output holding the current figure as a PNG. Changing a
  control redraws the figure in place (a choice the view rejects shows its message instead).

Where widgets do not render (a notebook executed headless and viewed on GitHub, nbviewer without widget
state), an `Explorer` shows the default view as a static PNG: its display carries the PNG next to the
widget, and a frontend with widgets shows the widget only, so JupyterLab never shows the figure twice.
Put the call last in its cell (or pass it to `display`).

Views draw on `matplotlib.figure.Figure` objects outside pyplot, so the inline backend never shows them
a second time. Used in notebooks 01 (bins), 02 (self-consistency), 04 (contrast sets), 05/06 (methods).
"""
from __future__ import annotations

import base64
import io
from typing import Callable

import ipywidgets as widgets
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from helpers.evaluation import contrast, metrics
from helpers.figures import palette, plots
from helpers.confidence import self_consistency as sc

BEAM_COLUMNS = ("checkpoint", "question_id", "answer", "ended", "logprob")
KIND_COLORS = {"improvement": palette.IMPROVEMENT, "regression": palette.REGRESSION}
# Each kind its own marker (told apart without colour); the fewer regressions drawn larger, opaque and edged.
KIND_STYLES = {"improvement": dict(marker="o", s=10, alpha=0.45, edgecolor="none"),
               "regression": dict(marker="^", s=16, alpha=0.9, edgecolor="black")}
STRATEGIES = [("equal-width", "uniform"), ("equal-mass", "quantile")]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


# --------------------------------------------------------------------------- the widget


def figure_png(fig: Figure) -> bytes:
    """The figure as PNG bytes, cropped as the notebooks' inline backend crops it; no version stamp."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight", metadata={"Software": None})
    return buffer.getvalue()


def _png_output(png: bytes) -> dict:
    return {"output_type": "display_data", "metadata": {},
            "data": {"image/png": base64.b64encode(png).decode("ascii"), "text/plain": "<Figure>"}}


class Explorer:
    """Controls wired to a view function; see the module docstring.

    `controls` maps each argument of `view` that a control sets to its widget; `fixed` holds the other
    arguments. `widget` is the live ipywidgets box, `output` the Output holding the figure, `png` the
    figure last drawn, `renders` how many were drawn, `message` the last error shown instead of a figure.
    """

    def __init__(self, name: str, view: Callable[..., Figure], controls: dict, fixed: dict | None = None):
        self.name, self.view, self.controls, self.fixed = name, view, dict(controls), dict(fixed or {})
        self.output = widgets.Output()
        self.widget = widgets.VBox([widgets.HBox(list(self.controls.values()),
                                                 layout=widgets.Layout(flex_flow="row wrap")), self.output])
        self.renders, self.message = 0, None
        self.png = self._draw()  # the default view; bad input raises here, before any widget shows
        self.output.outputs = (_png_output(self.png),)
        for control in self.controls.values():
            control.observe(self._changed, names="value")

    def values(self) -> dict:
        """The current control values, by the view's argument names."""
        return {name: control.value for name, control in self.controls.items()}

    def _draw(self) -> bytes:
        png = figure_png(self.view(**self.fixed, **self.values()))
        self.renders += 1
        return png

    def _changed(self, change=None) -> None:
        try:
            self.png = self._draw()
        except Exception as err:  # noqa: BLE001  a callback's error would vanish into the kernel log: show it
            # A ValueError is a combination of controls the view rejects (its message says why); others are bugs.
            self.message = str(err) if isinstance(err, ValueError) else f"{type(err).__name__}: {err}"
            self.output.outputs = ({"output_type": "stream", "name": "stdout", "text": f"{self.message}\n"},)
            return
        self.message = None
        self.output.outputs = (_png_output(self.png),)

    def _repr_mimebundle_(self, **kwargs) -> dict:
        bundle = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        bundle["image/png"] = base64.b64encode(self.png).decode("ascii")  # shown where widgets are not
        bundle["text/plain"] = f"{self.name} ({', '.join(self.controls)}); run the notebook to use the controls"
        return bundle

    def __repr__(self) -> str:
        return f"<Explorer {self.name}: {self.values()}>"


def strip_widgets(nb) -> int:
    """Drop live-widget data from an executed notebook (nbformat node), in place; returns the outputs changed.

    An explorer's output keeps its static PNG and text; the widget view (a random model id) and the saved
    widget state (the Output's PNGs again) go, so a rerun writes the same file and every viewer shows the
    PNG. Running the cell in Jupyter brings the controls back. For the runner that saves the notebooks.
    """
    changed = 0
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            if WIDGET_VIEW in output.get("data", {}):
                del output["data"][WIDGET_VIEW]
                changed += 1
    nb.get("metadata", {}).pop("widgets", None)
    return changed


def _dropdown(description, options, value):
    options = list(options)
    if value is not None and value not in options:
        raise ValueError(f"{description} {value!r} is not among the choices {options}")
    return widgets.Dropdown(options=options, value=options[0] if value is None else value, description=description,
                            style={"description_width": "initial"})


def _bins_slider(value: int, low: int = 3, high: int = 20):
    if not low <= value <= high:
        raise ValueError(f"n_bins must lie between {low} and {high} for the slider, got {value}")
    return widgets.IntSlider(value=value, min=low, max=high, description="bins", continuous_update=False)


# --------------------------------------------------------------------------- 1. reliability diagrams


def _check_frames(frames, group: str = "checkpoint") -> dict:
    if not isinstance(frames, dict) or not frames:
        raise ValueError("frames must be a non-empty dict {method name: results DataFrame}")
    for name, frame in frames.items():
        if not isinstance(frame, pd.DataFrame):
            raise ValueError(f"frames[{name!r}] must be a DataFrame of results, got {type(frame).__name__}")
        missing = [c for c in (group, "confidence", "correct") if c not in frame.columns]
        if missing:
            raise ValueError(f"frames[{name!r}] is missing columns {missing}; need {group}, confidence and correct, "
                             f"one row per question per {group}")
    return frames


def _groups(frames: dict, group: str) -> list:
    """Every checkpoint (or other `group`) of any method, in order of first appearance."""
    return list(dict.fromkeys(c for frame in frames.values() for c in pd.unique(frame[group])))


def reliability_view(frames: dict, checkpoint: str, method: str, n_bins: int = 10, strategy: str = "uniform",
                     band: bool = True, group: str = "checkpoint") -> Figure:
    """The reliability diagram of one method at one checkpoint (`plots.reliability_diagram`). Used in notebooks 01-06.

    `frames` maps a confidence method's name to its results: checkpoint, confidence, correct (question_id
    and more may be there), one row per question per checkpoint. `band`: the bootstrap interval of each
    bin's accuracy. `group` names the column `checkpoint` picks from, for results split by something else
    (notebook 01: a column "questions" holding "hundred sums" and "test sums").
    """
    _check_frames(frames, group)
    if method not in frames:
        raise ValueError(f"method {method!r} is not in frames; choose one of {list(frames)}")
    rows = frames[method][frames[method][group] == checkpoint]
    if rows.empty:
        have = list(pd.unique(frames[method][group]))
        raise ValueError(f"method {method!r} has no results for {group} {checkpoint!r}; it has {have}")
    fig = Figure(figsize=(5.2, 4.9), layout="constrained")
    ax = fig.add_subplot()
    where = f"checkpoint {checkpoint}" if group == "checkpoint" else str(checkpoint)
    plots.reliability_diagram(ax, rows["confidence"], rows["correct"], n_bins=n_bins, strategy=strategy,
                              title=f"{method}, {where} ({len(rows):,} answers)", band=band, legend=False)
    # A figure legend: an axes legend wider than its axes would make constrained layout narrow the axes.
    fig.legend(handles=plots.legend_handles(ax, band=band, ncols=2), loc="outside lower center",
               ncols=2, fontsize="x-small",
               frameon=False)
    return fig


def reliability_explorer(frames: dict, checkpoint: str | None = None, method: str | None = None, n_bins: int = 10,
                         strategy: str = "uniform", band: bool = True, group: str = "checkpoint") -> Explorer:
    """Reliability diagrams to explore: checkpoint, method, number of bins (3-20), equal-width or equal-mass
    bins, bootstrap interval on/off. Used in notebooks 01, 02, 04, 05, 06. Defaults: the first checkpoint and
    method. `group` as in `reliability_view` (the first dropdown is then named after it)."""
    _check_frames(frames, group)
    if strategy not in dict(STRATEGIES).values():
        raise ValueError(f"strategy must be 'uniform' (equal-width) or 'quantile' (equal-mass), got {strategy!r}")
    controls = {
        "checkpoint": _dropdown(group, _groups(frames, group), checkpoint),
        "method": _dropdown("method", frames, method),
        "n_bins": _bins_slider(n_bins),
        "strategy": widgets.ToggleButtons(options=STRATEGIES, value=strategy, description="binning"),
        "band": widgets.Checkbox(value=band, description="95% bootstrap interval", indent=False),
    }
    return Explorer("reliability explorer", reliability_view, controls, {"frames": frames, "group": group})


# --------------------------------------------------------------------------- 2. contrast sets


def _pair(checkpoints, ckpt_i, ckpt_j) -> None:
    if ckpt_i == ckpt_j:
        raise ValueError(f"ckpt_i and ckpt_j are both {ckpt_i!r}; pick two different checkpoints")
    if checkpoints is not None:
        names = list(checkpoints)
        unknown = [c for c in (ckpt_i, ckpt_j) if c not in names]
        if unknown:
            raise ValueError(f"checkpoints {unknown} are not in {names}")
        if names.index(ckpt_i) > names.index(ckpt_j):
            raise ValueError(f"ckpt_i ({ckpt_i}) comes after ckpt_j ({ckpt_j}); i is the earlier checkpoint, "
                             "so improvements are wrong at i and right at j")


def contrast_counts(frame: pd.DataFrame, ckpt_i: str, ckpt_j: str) -> dict:
    """Improvements (wrong at i, right at j) and regressions (right at i, wrong at j). Used in notebook 04."""
    kinds = contrast.contrast_set(frame, ckpt_i, ckpt_j)["kind"]
    return {"improvements": int((kinds == "improvement").sum()), "regressions": int((kinds == "regression").sum())}


def contrast_view(frame: pd.DataFrame, ckpt_i: str, ckpt_j: str, checkpoints=None, normalizer=None,
                  n_bins: int = 10) -> Figure:
    """One contrast set, before and after normalization. Used in notebook 04.

    Left: each question's raw confidences (p_i, p_j), coloured by which checkpoint is right. Middle and
    right: reliability diagrams of the later checkpoint's raw p_j and normalized q_j on the contrast set
    (`contrast.contrast_rows`; the contrast ECE is on j's rows, as in `contrast.pair_metrics`). The title
    counts improvements and regressions and gives the normalized AUC and Δ. `checkpoints` (their order)
    checks that i comes first; `normalizer`: None for `contrast.normalize_pair`, "fitted" for
    `contrast.fitted_normalization` fitted on this pair's contrast set, or a callable f(p_i, p_j) -> (q_i, q_j).
    """
    _pair(checkpoints, ckpt_i, ckpt_j)
    pairs = contrast.contrast_set(frame, ckpt_i, ckpt_j)
    if pairs.empty:
        raise ValueError(f"{ckpt_i} and {ckpt_j} agree on every question: the contrast set is empty; pick another pair")
    if isinstance(normalizer, str):
        if normalizer != "fitted":
            raise ValueError(f"normalizer must be None, 'fitted' or a callable, got {normalizer!r}")
        normalizer = contrast.fitted_normalization(pairs["confidence_i"], pairs["confidence_j"], pairs["correct_i"])
    rows = contrast.contrast_rows(frame, ckpt_i, ckpt_j, normalizer)
    later = rows[rows["checkpoint"] == ckpt_j]
    summary = contrast.pair_metrics(pairs, n_bins=n_bins, normalizer=normalizer)
    kinds = pairs["kind"].value_counts()

    fig = Figure(figsize=(12.5, 4.9), layout="constrained")
    scatter, raw, normalized = fig.subplots(1, 3)
    raw.sharey(normalized)
    # The larger kind first, so that the smaller one is never hidden under it; each kind its own marker, and
    # the legend counts the points above the diagonal (the later checkpoint more confident), which a dense
    # corner hides from the eye.
    above = {}
    for kind in sorted(KIND_COLORS, key=lambda k: -int((pairs["kind"] == k).sum())):
        part = pairs[pairs["kind"] == kind]
        above[kind] = (int((part["confidence_j"] > part["confidence_i"]).sum()), len(part))
        scatter.scatter(part["confidence_i"], part["confidence_j"], color=KIND_COLORS[kind], lw=0.3,
                        **KIND_STYLES[kind])
    scatter.plot([0, 1], [0, 1], ls="--", color="grey", lw=1)
    # a little past 0 and 1, so that a point at 0 or 1 is drawn whole
    scatter.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02), xlabel=f"raw p at {ckpt_i} (i, earlier)",
                ylabel=f"raw p at {ckpt_j} (j, later)", title="raw confidences, one point per question")
    scatter.set_aspect("equal")
    name = "normalized q (fitted)" if isinstance(normalizer, contrast.FittedNormalization) else "normalized q"
    plots.reliability_diagram(raw, pairs["confidence_j"], pairs["correct_j"], n_bins=n_bins,
                              title=f"raw p at {ckpt_j}", legend=False)
    plots.reliability_diagram(normalized, later["confidence"], later["correct"], n_bins=n_bins,
                              title=f"{name} at {ckpt_j}", legend=False)
    normalized.set_ylabel("")
    right = {"improvement": ckpt_j, "regression": ckpt_i}
    points = [Line2D([], [], ls="", marker=KIND_STYLES[kind]["marker"], color=KIND_COLORS[kind],
                     label=f"{kind}: {right[kind]} right ({above[kind][0]:,} of {above[kind][1]:,} above the diagonal)")
              for kind in KIND_COLORS]
    fig.legend(handles=points + plots.legend_handles(raw, normalized),
               loc="outside lower center", ncols=4, fontsize="x-small",
               frameon=False)
    fig.suptitle(f"{ckpt_i} → {ckpt_j}: {kinds.get('improvement', 0):,} improvements (wrong at i, right at j), "
                 f"{kinds.get('regression', 0):,} regressions (right at i, wrong at j)\n"
                 f"{name}: plain contrast AUC {summary['auc']:.3f}, Δ {summary['delta']:.3f}")
    return fig


def contrast_explorer(frame: pd.DataFrame, checkpoints, normalizer=None, ckpt_i: str | None = None,
                      ckpt_j: str | None = None, n_bins: int = 10) -> Explorer:
    """Contrast sets to explore: the earlier checkpoint i, the later j, the number of bins. Used in notebook 04.

    `frame`: one method's results (checkpoint, question_id, confidence, correct); `checkpoints` in training
    order; defaults: the first and the last. `normalizer` as in `contrast_view`.
    """
    names = list(checkpoints)
    if len(names) < 2:
        raise ValueError(f"need at least two checkpoints to contrast, got {names}")
    controls = {"ckpt_i": _dropdown("i (earlier)", names, ckpt_i),
                "ckpt_j": _dropdown("j (later)", names, names[-1] if ckpt_j is None else ckpt_j),
                "n_bins": _bins_slider(n_bins)}
    return Explorer("contrast explorer", contrast_view, controls,
                    {"frame": frame, "checkpoints": names, "normalizer": normalizer})


# --------------------------------------------------------------------------- 3. how many beams


def top_beams(beams: pd.DataFrame, k: int) -> pd.DataFrame:
    """The k best beams of every question (rows are best first within a question, as `decoding.beams` returns)."""
    missing = [c for c in BEAM_COLUMNS if c not in beams.columns]
    if missing:
        raise ValueError(f"beams is missing columns {missing}; pass sc.beam_results(...) (need {list(BEAM_COLUMNS)})")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k (beams kept per question) must be a whole number >= 1, got {k!r}")
    return beams[beams.groupby(["checkpoint", "question_id"], sort=False).cumcount() < k]


def beams_view(beams: pd.DataFrame, questions: pd.DataFrame, checkpoint: str, k: int, n_bins: int = 10) -> Figure:
    """Self-consistency from the k best beams of one checkpoint: reliability diagram and confidence histogram.
    Used in notebook 02.

    The k best of the returned beams stand in for a k-beam search (which could find other beams). With
    k = 1 every parsed answer gets confidence 1: SC divides by the mass of the beams it has, so the fewer
    beams, the more that normalization inflates confidence.
    """
    rows = top_beams(beams, k)
    rows = rows[rows["checkpoint"] == checkpoint]
    if rows.empty:
        raise ValueError(f"no beams for checkpoint {checkpoint!r}; beams has {list(pd.unique(beams['checkpoint']))}")
    most = int(beams[beams["checkpoint"] == checkpoint].groupby("question_id").size().max())
    if k > most:
        raise ValueError(f"k = {k} but checkpoint {checkpoint!r} has at most {most} beams per question")
    result = sc.self_consistency(rows, questions)
    # One group holding all the mass can sum to 1 + 1e-16 (float rounding of mass / total): clip it back.
    result["confidence"] = result["confidence"].clip(0.0, 1.0)
    fig = Figure(figsize=(10.5, 4.9), layout="constrained")
    diagram, histogram = fig.subplots(1, 2)
    plots.reliability_diagram(diagram, result["confidence"], result["correct"], n_bins=n_bins, title="reliability",
                              legend=False)
    fig.legend(handles=plots.legend_handles(diagram), loc="outside lower center", ncols=3,
               fontsize="x-small", frameon=False)
    plots.confidence_histogram(histogram, result["confidence"], result["correct"])
    correct = result["correct"].to_numpy()
    auc = metrics.auroc(result["confidence"], correct) if 0 < correct.sum() < correct.size else float("nan")
    histogram.set_title(f"confidence of right and wrong answers\nAUROC {auc:.3f}, {result['confidence'].nunique()} "
                        "distinct values")
    fig.suptitle(f"self-consistency from the {k} best of {most} beams, checkpoint {checkpoint} "
                 f"({len(result):,} questions, accuracy {correct.mean():.3f})")
    return fig


def beams_explorer(beams: pd.DataFrame, questions: pd.DataFrame, checkpoint: str | None = None, k: int | None = None,
                   n_bins: int = 10) -> Explorer:
    """How many beams self-consistency needs: checkpoint, beams kept per question (1 to all), bins. Used in notebook 02.

    `beams`: `sc.beam_results(split, checkpoints)`; `questions`: that split (`sums.split`), for the targets.
    """
    top_beams(beams, 1)  # checks the columns
    most = int(beams.groupby(["checkpoint", "question_id"]).size().max())
    if k is not None and not 1 <= k <= most:
        raise ValueError(f"k must lie between 1 and {most} (the most beams any question has), got {k}")
    controls = {"checkpoint": _dropdown("checkpoint", pd.unique(beams["checkpoint"]), checkpoint),
                "k": widgets.IntSlider(value=most if k is None else k, min=1, max=most, description="beams kept",
                                       continuous_update=False, style={"description_width": "initial"}),
                "n_bins": _bins_slider(n_bins)}
    return Explorer("beams explorer", beams_view, controls, {"beams": beams, "questions": questions})
