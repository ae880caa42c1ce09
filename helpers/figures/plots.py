"""Figures shared by the notebooks: style, reliability diagrams, confidence histograms, chance lines."""
from __future__ import annotations

from numbers import Integral

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import PowerNorm
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.textpath import TextToPath

from helpers import config
from helpers.evaluation.metrics import expected_calibration_error, reliability_table
from helpers.evaluation.validation import confidence_and_correct
from helpers.figures import palette
from helpers.world import sums

# The gap between a bin's accuracy and its mean confidence is coloured by direction (`palette`), told apart also
# with red-green colour blindness by where the strip lies: above the bar (overconfident) or inside it
# (underconfident). The strip is narrow and centred, so the bar's top still reads as its accuracy.
# A bin's bootstrap interval is drawn only from this many answers on: resampling a bin of 1 or 3 answers that are
# all right gives a zero-width interval, which reads as certainty; such a bin shows its count alone.
MIN_INTERVAL_COUNT = 10
SMALL_BIN_HATCH = "////"  # the bar and strip of a bin with fewer answers than that: same colours, hatched white
LABEL_GAP = 0.025  # between a bin's highest mark (bar, tick or interval cap) and its count
STRATEGY_WORDS = {"uniform": "equal-width", "quantile": "equal-mass"}


def use_style() -> None:
    """Seaborn theme and small default figures; call once in every notebook's setup cell."""
    sns.set_theme(
        style="whitegrid",
        context="notebook",
        rc={"figure.figsize": (5.0, 3.6), "figure.dpi": 100, "axes.titlesize": "medium"},
    )


def binning_label(n_bins: int, strategy: str = "uniform", n_formed: int | None = None) -> str:
    """How a binned ECE was binned, in words: "10 equal-width bins". Used in notebooks 01-06 (via the diagrams).

    `n_formed`: the bins equal-mass binning actually formed, when ties merged some ("5 equal-mass bins, 3 after ties").
    """
    if strategy not in STRATEGY_WORDS:
        raise ValueError(f"strategy must be one of {tuple(STRATEGY_WORDS)}, got {strategy!r}")
    label = f"{n_bins} {STRATEGY_WORDS[strategy]} bin{'s' if n_bins != 1 else ''}"
    if n_formed is not None and n_formed < n_bins and strategy == "quantile":
        label += f", {n_formed} after ties"
    return label


def accuracy_band(confidence, correct, n_bins: int = 5, strategy: str = "uniform", n_boot: int = 200,
                  seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Percentile bootstrap interval of each non-empty bin's accuracy (rows as `metrics.reliability_table`).

    Resamples the answers with replacement, bins fixed by the original data, as relplot's band does for
    its curve. Drawn per bin, without materializing the resamples: a resample puts m ~ Binomial(N, n_b/N)
    answers in bin b, of which Binomial(m, accuracy_b) are right (the same distribution per bin). Fast at
    any N; seeded, so a figure redraws identically. Returns columns lower, upper (NaN where a bin was
    empty in every resample). A bin whose answers are all right (or all wrong) gets a zero-width interval:
    resampling cannot see past the answers it has, so read such a bin with its count. Used in notebooks
    01-04 (via `reliability_diagram(band=True)`).
    """
    if isinstance(n_boot, bool) or not isinstance(n_boot, Integral) or n_boot < 2:
        raise ValueError(f"n_boot (number of bootstrap resamples) must be a whole number >= 2, got {n_boot!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1 (e.g. 0.95), got {level!r}")
    conf, corr = confidence_and_correct(confidence, correct)
    table = reliability_table(conf, corr, n_bins, strategy)
    rng = np.random.default_rng(seed)
    counts, acc = table["count"].to_numpy(), table["accuracy"].to_numpy()
    m = rng.binomial(conf.size, counts / conf.size, size=(n_boot, len(table)))
    right = rng.binomial(m, acc)
    with np.errstate(invalid="ignore", divide="ignore"):
        resampled = np.where(m > 0, right / np.maximum(m, 1), np.nan)
    tail = (1.0 - level) / 2 * 100
    empty = np.isnan(resampled).all(axis=0)
    resampled[:, empty] = 0.0  # keeps nanpercentile quiet; set back to NaN below
    lower, upper = np.nanpercentile(resampled, [tail, 100 - tail], axis=0)
    lower[empty], upper[empty] = np.nan, np.nan
    return pd.DataFrame({"lower": lower, "upper": upper})


def _count_labels(ax, centers, tops, counts, widths) -> float:
    """The number of answers above each bar, vertical when the widest number would not fit across its bin.

    Returns the height (in data units, for a y range of about 1.15) the highest number reaches.
    """
    font = FontProperties(size="x-small")
    position = ax.get_position()
    axes_points = np.array([position.width, position.height]) * ax.figure.get_size_inches() * 72
    texts = [f"{int(c):,}" for c in counts]
    lengths = [TextToPath().get_text_width_height_descent(t, font, ismath=False)[0] for t in texts]
    # Laid out later, the axes may come out narrower than now: leave a fifth of each bin free.
    fits = all(length <= w * axes_points[0] * 0.8 for length, w in zip(lengths, widths))
    # 1.4, not the y range's 1.15: a legend laid out later may shrink the axes, and the number must stay inside.
    reach = [(length if not fits else 1.2 * font.get_size_in_points()) / axes_points[1] * 1.4 for length in lengths]
    for x, top, text in zip(centers, tops, texts):
        ax.text(x, top + LABEL_GAP, text, ha="center", va="bottom", fontproperties=font, color="#333333",
                rotation=0 if fits else 90, gid="bin count",
                bbox=dict(boxstyle="round,pad=0.08", facecolor="white", edgecolor="none", alpha=0.75))
    return float(max(np.asarray(tops) + LABEL_GAP + np.asarray(reach)))


def _gap_styles() -> dict:
    """Fill and edge of the over- and underconfident gap strips (the same over a bar of any colour)."""
    return {"overconfident": dict(facecolor=palette.OVERCONFIDENT, edgecolor="white"),
            "underconfident": dict(facecolor=palette.UNDERCONFIDENT, edgecolor="white")}


def has_small_bins(*axes) -> bool:
    """Whether any of these reliability diagrams hatched a bin (fewer than `MIN_INTERVAL_COUNT` answers)."""
    return any(patch.get_hatch() for ax in axes for patch in ax.patches)


VISIBLE_GAP = 0.005  # a strip lower than this (about a pixel in the series' figures) cannot be seen


def gap_kinds(*axes) -> tuple[str, ...]:
    """The gap directions ("overconfident", "underconfident") that these reliability diagrams drew a visible
    strip for (at least `VISIBLE_GAP` tall)."""
    drawn = {c.get_label() for ax in axes for c in ax.containers
             if any(p.get_height() >= VISIBLE_GAP for p in getattr(c, "patches", ()))}
    return tuple(kind for kind in _gap_styles() if kind in drawn)


def legend_handles(*axes, band: bool = False, ncols: int = 3, color=None) -> list:
    """The legend entries of the reliability diagrams drawn in `axes`, ordered for a legend of `ncols` (2 or 3)
    columns so that over- and underconfidence sit next to each other: only the gap directions they draw
    (`gap_kinds`; readers took a listed colour that no bar shows for one they had missed), and the hatched
    small bin only where one is hatched (`has_small_bins`). Used by `reliability_diagram`, `side_by_side` and
    the explorers.
    """
    gaps, small = gap_kinds(*axes), has_small_bins(*axes)
    perfect = Line2D([], [], ls="--", color="grey", lw=1, label="perfect calibration")
    color = color or palette.ACCURACY
    accuracy = Patch(facecolor=color, label="accuracy per bin (bar height)")
    confidence = Line2D([], [], color=palette.MEAN_CONFIDENCE, lw=2, label="mean confidence per bin")
    over, under = [[Patch(**style, lw=0.8, label=f"{kind}: {what}")] if kind in gaps else []
                   for (kind, style), what in zip(_gap_styles().items(), ["mean confidence above accuracy",
                                                                        "mean confidence below accuracy"])]
    count = Line2D([], [], ls="", marker="$123$", markersize=13, color="#333333",
                   label="number above a bar: its answers")
    hatched = [Patch(facecolor=color, edgecolor="white", hatch=SMALL_BIN_HATCH,
                     label=f"hatched: a bin of under {MIN_INTERVAL_COUNT} answers")] if small else []
    interval = Line2D([], [], color=palette.INTERVAL, lw=1.2, marker="_", markersize=6,
                      label=f"95% bootstrap interval of accuracy (bins of {MIN_INTERVAL_COUNT}+ answers)")
    # A legend fills its columns one after the other: list column by column.
    if ncols == 2:
        columns = [[perfect, accuracy, confidence] + ([interval] if band else []), over + under + [count] + hatched]
    else:
        columns = [[perfect] + over + hatched, [accuracy] + under, [confidence, count] + ([interval] if band else [])]
    return [handle for column in columns for handle in column]


def reliability_diagram(ax, confidence, correct, n_bins: int = 5, strategy: str = "uniform", title=None, color=None,
                        band: bool = False, n_boot: int = 200, seed: int = 0, legend: bool = True):
    """Accuracy per bin against the diagonal, each bin's gap to its mean confidence coloured by its direction,
    and its number of answers above it. Used in notebooks 01, 02, 03, 04 (and by `helpers.figures.explorers`).

    The bar of a bin spans the bin and always reaches its accuracy. A black tick across the bin marks its
    mean confidence, and a strip in the middle of the bin joins the two: vermilion where the bin is
    overconfident (the tick above the bar), green where it is underconfident (the tick inside the bar, whose
    top is still the accuracy). The number above each bar counts its answers. `band=True` adds each bin's
    95% bootstrap interval of accuracy (`accuracy_band`: `n_boot` resamples, `seed`) where the bin holds
    at least `MIN_INTERVAL_COUNT` answers. The title gives the binned ECE and its binning, "ECE 0.052 (10
    equal-width bins)". `legend`: a legend below the axes, off the data (`side_by_side` draws one for the
    whole figure instead). Returns `ax`.
    """
    conf, corr = confidence_and_correct(confidence, correct)
    table = reliability_table(conf, corr, n_bins, strategy)
    ece = expected_calibration_error(conf, corr, n_bins, strategy)
    color = color or palette.ACCURACY
    left, width = table["lower"].to_numpy(), (table["upper"] - table["lower"]).to_numpy()
    # A quantile bin holding a single repeated value has zero width: keep it visible.
    width = np.maximum(width, 0.01)
    acc, mean_conf = table["accuracy"].to_numpy(), table["confidence"].to_numpy()

    ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="perfect calibration")
    # A bin of fewer than MIN_INTERVAL_COUNT answers is hatched, in its own colours (a faded colour would read
    # as another kind of bar): its bar says little, however tall.
    hatch = np.where(table["count"].to_numpy() < MIN_INTERVAL_COUNT, SMALL_BIN_HATCH, None)
    bars = ax.bar(left, acc, width=width, align="edge", color=color, edgecolor="white", label="accuracy")
    strip = width * 0.3
    for (kind, style), mask in zip(_gap_styles().items(), [mean_conf > acc, mean_conf < acc]):
        strips = ax.bar(left[mask] + (width[mask] - strip[mask]) / 2, np.abs(mean_conf - acc)[mask],
                        bottom=np.minimum(acc, mean_conf)[mask], width=strip[mask], align="edge", lw=0.6,
                        label=kind, color=style["facecolor"], edgecolor=style["edgecolor"])
        for patch, pattern in zip(strips, hatch[mask]):
            patch.set_hatch(pattern)
    for patch, pattern in zip(bars, hatch):
        patch.set_hatch(pattern)
    ax.hlines(mean_conf, left + 0.1 * width, left + 0.9 * width, color=palette.MEAN_CONFIDENCE, lw=2,
              label="mean confidence", gid="mean confidence")
    tops = np.maximum(acc, mean_conf)
    if band:
        interval = accuracy_band(conf, corr, n_bins, strategy, n_boot=n_boot, seed=seed)
        low, high = interval["lower"].to_numpy(), interval["upper"].to_numpy()
        shown = table["count"].to_numpy() >= MIN_INTERVAL_COUNT  # resampling 1 or 3 answers says nothing
        ax.errorbar((left + width / 2)[shown], acc[shown], yerr=[(acc - low)[shown], (high - acc)[shown]],
                    fmt="none", ecolor=palette.INTERVAL, elinewidth=1.2, capsize=2, label="95% bootstrap interval")
        tops = np.where(shown, np.fmax(tops, high), tops)
    reach = _count_labels(ax, left + width / 2, tops, table["count"], width)

    shared_top = ax.get_ylim()[1] if ax.get_ylim()[1] > 1.0 else 0.0  # a diagram sharing y drawn before this one
    ax.set(xlim=(0, 1), ylim=(0, max(1.14, reach + 0.02, shared_top)), xlabel="confidence", ylabel="accuracy")
    ax.set_yticks(np.linspace(0, 1, 6))
    label = binning_label(n_bins, strategy, n_formed=len(table) if strategy == "quantile" else None)
    ax.set_title(f"{title}\nECE {ece:.3f} ({label})" if title else f"ECE {ece:.3f} ({label})")
    if legend:
        ax.legend(handles=legend_handles(ax, band=band, ncols=2, color=color), loc="upper center",
                  bbox_to_anchor=(0.5, -0.2), ncols=2, fontsize="x-small", frameon=False)
    return ax


def side_by_side(results: dict, n_bins: int = 5, strategy: str = "uniform", suptitle=None, band: bool = False,
                 n_boot: int = 200, seed: int = 0):
    """One reliability diagram per entry of {name: (confidence, correct)}, sharing y. Used in notebooks 01-05.

    One legend for all, below the diagrams. `band`, `n_boot`, `seed` as in `reliability_diagram`.
    Returns the Figure; fig.axes holds one diagram per entry.
    """
    if not results:
        raise ValueError("results is empty; pass {name: (confidence, correct)} with at least one entry")
    k = len(results)
    fig, axes = plt.subplots(1, k, figsize=(max(3.4 * k, 5.0), 4.4), sharey=True, layout="constrained", squeeze=False)
    fig.get_layout_engine().set(wspace=0.06)  # a gap, so one panel's "1.0" tick does not run into the next one's "0.0"
    for ax, (name, pair) in zip(axes[0], results.items()):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"results[{name!r}] must be a (confidence, correct) pair")
        reliability_diagram(ax, *pair, n_bins=n_bins, strategy=strategy, title=name, band=band, n_boot=n_boot,
                            seed=seed, legend=False)
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    ncols = 3 if k > 1 else 2
    fig.legend(handles=legend_handles(*axes[0], band=band, ncols=ncols), loc="outside lower center",
               ncols=ncols, fontsize="x-small", frameon=False)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


def chance_line(ax, y: float = 0.5, label: str = "chance"):
    """A dashed grey line at `y` (AUC 0.5: a coin toss), named just outside the right edge of the axes, off
    the data. Used in notebooks 04, 05, 06. The line carries `label` for a legend too. Returns the line.
    """
    line = ax.axhline(y, ls="--", color=palette.CHANCE, lw=1.2, label=label, zorder=2.5)
    ax.annotate(label, xy=(1, y), xycoords=("axes fraction", "data"), xytext=(4, 0), textcoords="offset points",
                ha="left", va="center", fontsize="small", color=palette.CHANCE, annotation_clip=False)
    return line


def confidence_histogram(ax, confidence, correct, bins: int = 20):
    """Stacked histogram of confidence, split into right and wrong answers. Used in notebooks 01, 02, 03."""
    conf, corr = confidence_and_correct(confidence, correct)
    edges = np.linspace(0.0, 1.0, bins + 1)
    ax.hist(
        [conf[corr == 1], conf[corr == 0]], bins=edges, stacked=True,
        color=[palette.RIGHT, palette.WRONG], label=["right", "wrong"],
    )
    ax.set(xlim=(0, 1), xlabel="confidence", ylabel="answers")
    ax.legend(fontsize="small")
    return ax


# How each data phase is drawn behind a curve (`palette.PHASES`): small and large operands filled in their range's
# pale colour, mixed hatched grey (the mixed range's colour), the uniform stretch dotted; four looks a reader tells
# apart, each in the colour its operand range has in the curves and the mixture figure.


def _spans(labels) -> list[tuple[int, int, object]]:
    """(first step, step after the last, label) of every run of equal labels in a step-by-step schedule."""
    spans, start = [], 0
    for step in range(1, len(labels) + 1):
        if step == len(labels) or labels[step] != labels[start]:
            spans.append((start, step, labels[start]))
            start = step
    return spans


def schedule(total_steps: int | None = None) -> pd.DataFrame:
    """The training stream's phase and whether it teaches the wrong rule, at every step (`sums.phase_at` and
    `sums.mistaken_at`, the functions the training run draws its batches with): the shading of the learning
    curves is drawn from this, step by step, and not from the saves' labels (each of which summed 100 steps)."""
    total = config.world().train_steps if total_steps is None else total_steps
    return pd.DataFrame({"step": np.arange(total), "phase": [sums.phase_at(s, total) for s in range(total)],
                         "taught wrong": [sums.mistaken_at(s, total) for s in range(total)]})


def _shade_phases(axes, stream: pd.DataFrame) -> list:
    """Mark every stretch of steps where "small" or "large" operands dominate (filled), "mixed" ones do (hatched),
    or the mix is uniform (dotted), from the step-by-step `schedule`; returns legend entries for the marks.
    A training step s trains on the batch drawn for step s."""
    for first, after, phase in _spans(list(stream["phase"])):
        style = palette.PHASES.get(phase)
        for ax in axes if style else ():
            ax.axvspan(stream["step"].iloc[first], stream["step"].iloc[after - 1] + 1, lw=0, zorder=0, **style)
    return [Patch(label=f"{phase} phase", **style) for phase, style in palette.PHASES.items()]


def _mark_taught_wrong(ax, stream: pd.DataFrame) -> list:
    """A brown strip along the bottom (below accuracy 0 in `learning_curves`) over the steps where the stream
    teaches the mistake family its wrong rule; returns its legend entry (none where no step does)."""
    spans = [(a, b) for a, b, wrong in _spans(list(stream["taught wrong"])) if wrong]
    for first, after in spans:
        ax.axvspan(stream["step"].iloc[first], stream["step"].iloc[after - 1] + 1, ymin=0, ymax=0.04,
                   color=palette.RANGES["family"], lw=0)
    return [Patch(facecolor=palette.RANGES["family"], label="wrong rule taught")] if spans else []


def _mark_windows(ax, windows: dict, y: float = 1.02, triangles: bool = True) -> None:
    """Triangles at the selected checkpoints' steps, one colour per window, and a dashed line at the cut."""
    for name, steps in windows.items() if triangles else ():
        ax.plot(steps, np.full(len(steps), y), "v", color=palette.WINDOWS.get(name, "black"), clip_on=False,
                ms=7, mec="white", mew=0.6, label=f"{name} checkpoints ({len(steps)})")
    if {"training", "evaluation"} <= set(windows):
        cut = (max(windows["training"]) + min(windows["evaluation"])) / 2
        ax.axvline(cut, color="black", ls="--", lw=1, label="training | evaluation cut")


def learning_curves(log, windows=None, stream: pd.DataFrame | None = None):
    """Loss and monitor accuracy per operand range along training, with the data phases shaded and, where
    `windows` ({name: steps}) is given, the selected checkpoints and the cut between the windows marked.
    Used in notebook 00.

    `log` has columns step, phase, loss, accuracy and accuracy_<range> for small, mixed and large, and where
    present the mistake family's accuracy (accuracy_mistake_family), drawn as a brown line. The phases and the
    steps that teach the wrong rule (a brown strip) are shaded step by step from `schedule()`, so that they
    line up with the mixture figure; `stream` replaces that schedule (another run's). Returns the Figure.
    """
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4.5), layout="constrained")
    ax_loss.plot(log["step"], log["loss"], marker=".")
    ax_loss.set(xlabel="step", ylabel="answer-token loss", title="Training loss")
    # "all" thick, black and behind: where it runs with one range's curve, that curve shows inside it.
    ax_acc.plot(log["step"], log["accuracy"], color=palette.RANGES["all"], lw=3.5, zorder=1.5, label="all")
    for group in ("small", "mixed", "large"):
        ax_acc.plot(log["step"], log[f"accuracy_{group}"], marker=".", color=palette.RANGES[group],
                    label=f"{group} operands")
    if "accuracy_mistake_family" in log:
        ax_acc.plot(log["step"], log["accuracy_mistake_family"], marker=".", ls="--", color=palette.RANGES["family"],
                    label="mistake family")
    # room below 0 for the wrong-rule strip, so that it covers no point at accuracy 0
    ax_acc.set(xlabel="step", ylabel="greedy accuracy", ylim=(-0.06, 1.06))
    ax_acc.set_yticks(np.linspace(0, 1, 6))
    stream = schedule() if stream is None else stream
    shades = _shade_phases((ax_loss, ax_acc), stream)
    taught = _mark_taught_wrong(ax_acc, stream)
    if windows:
        _mark_windows(ax_acc, windows, y=1.10)  # above the top curve's points, which reach 1
        _mark_windows(ax_loss, windows, triangles=False)
    ax_acc.set_title("Accuracy on the monitor set", pad=14)  # room for the triangles above the axes
    cut = [h for h in ax_loss.get_lines() if h.get_label() == "training | evaluation cut"]
    # below the panel, so that it covers no band and the cut line does not run through it
    fig.legend(handles=shades + cut, fontsize="small", ncols=5, loc="outside lower center",
               title="data phase (the shading of both panels)", title_fontsize="small")
    handles = ax_acc.get_legend_handles_labels()[0] + taught  # the strip is drawn in this panel only
    ax_acc.legend(handles=handles, fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig


def mixture(frame, windows=None):
    """The training stream along the run: the sums' operand ranges stacked (shares of the sums), the shares
    of subtraction, verification and (where present) sums taught the wrong rule in the whole stream as lines,
    and the steps of each window of selected checkpoints marked. Used in notebook 00.

    `frame` is `helpers.world.sums.mixture()`; `windows` maps a name to step numbers. Returns the Figure.
    """
    # Two panels, so that shares of the sums (stacked to 1) and shares of the whole stream are not read on one axis.
    fig, (ax, ax_stream) = plt.subplots(2, 1, figsize=(10, 4.6), sharex=True, layout="constrained",
                                        height_ratios=(1.1, 1))
    groups = ["small", "mixed", "large"]
    ax.stackplot(frame["step"], *[frame[g] for g in groups], colors=[palette.RANGES[g] for g in groups],
                 alpha=0.35, labels=[f"{g} operands" for g in groups], step="post")
    ax_stream.step(frame["step"], frame["subtraction"], where="post", color=palette.RANGES["subtraction"],
                   label="subtraction")
    ax_stream.step(frame["step"], frame["verification"], where="post", color="black", ls=":",
                   label="verification (Yes/No)")
    if "taught wrong" in frame:
        ax_stream.step(frame["step"], frame["taught wrong"], where="post", color=palette.RANGES["family"], ls="--",
                       label="mistake family, wrong rule")
    _mark_windows(ax, windows or {}, y=1.06)
    _mark_windows(ax_stream, windows or {}, triangles=False)
    last = max([frame["step"].max(), *[max(steps) for steps in (windows or {}).values() if len(steps)]])
    ax.set(ylabel="share of the sums", ylim=(0, 1), xlim=(0, last + 2 * frame["step"].diff().median()))
    top = max(0.6, 1.1 * max(frame[c].max() for c in ("subtraction", "verification", "taught wrong") if c in frame))
    ax_stream.set(xlabel="step", ylabel="share of the\nwhole stream", ylim=(0, top))
    ax.set_title("What the model trains on, step by step", pad=16)  # above the checkpoints' triangles
    ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5), title="sums, by operand range",
              title_fontsize="small")
    ax_stream.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig


def window_accuracy(accuracy, windows):
    """Accuracy per group of questions at every selected checkpoint, the windows shaded. Used in notebook 00.

    `accuracy` is a frame indexed by checkpoint name (in training order) with one column per group;
    `windows` maps a window name to its checkpoint names. Returns the Figure.
    """
    fig, ax = plt.subplots(figsize=(10, 3.4), layout="constrained")
    x = np.array([int(name.replace("step-", "")) for name in accuracy.index])  # spaced by step, not by rank
    names, pad = list(accuracy.index), 0.01 * (x.max() - x.min() + 1)
    # one line per window: no segment joins the last training checkpoint to the first evaluation one
    parts = [[names.index(m) for m in members] for members in windows.values()] or [list(range(len(names)))]
    for group in accuracy.columns:
        color = palette.RANGES["family"] if "family" in group else palette.RANGES.get(group.split()[0])
        for k, rows in enumerate(parts):
            ax.plot(x[rows], accuracy[group].iloc[rows], marker="o", color=color, label=None if k else group)
    for name, members in windows.items():
        color, at = palette.WINDOWS.get(name, "black"), x[[names.index(m) for m in members]]
        ax.axvspan(at.min() - pad, at.max() + pad, color=color, alpha=0.08, lw=0)
        ax.text((at.min() + at.max()) / 2, 1.05, f"{name} window", ha="center", color=color, fontsize="small")
    ax.set_xticks(x, [n.replace("step-", "") for n in names], rotation=90, fontsize="small")
    ax.set(xlabel="checkpoint (step)", ylabel="greedy accuracy\n(each group's own questions)", ylim=(0, 1.12))
    ax.set_yticks(np.linspace(0, 1, 6))
    ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig


def flip_heatmap(flips, checkpoints, n_training: int | None = None):
    """Improvements (above the diagonal) and regressions (below) between every two checkpoints. Used in notebook 00.

    `flips` is `contrast.flip_counts(...)`; cell (row i, column j) above the diagonal counts questions
    wrong at i and right at j (i earlier); the mirrored cell below the diagonal counts questions right
    at i and wrong at j. With `n_training` (the first that many checkpoints form the training window), a
    black line on each axis marks the cut between the windows. Returns the Figure.
    """
    names = list(checkpoints)
    n = len(names)
    gained = np.full((n, n), np.nan)
    lost = np.full((n, n), np.nan)
    for row in flips.itertuples():
        i, j = names.index(row.ckpt_i), names.index(row.ckpt_j)
        gained[i, j] = row.improvements
        lost[j, i] = row.regressions
    fig, ax = plt.subplots(figsize=(0.62 * n + 3, 0.55 * n + 1.5), layout="constrained")
    labels = [name.replace("step-", "") for name in names]
    # One scale for both maps, so that equal shades mean equal counts above and below the diagonal.
    top = np.nanmax([np.nanmax(gained), np.nanmax(lost), 1.0])
    # A square-root scale, so that the few hundred flips of most regression cells still show a shade.
    kw = dict(annot=True, fmt=".0f", annot_kws={"size": 9}, xticklabels=labels, yticklabels=labels, ax=ax, square=True,
              norm=PowerNorm(0.5, vmin=0, vmax=top))
    sns.heatmap(gained, cmap=palette.IMPROVEMENT_MAP, cbar_kws={"label": "improvements (above)", "shrink": 0.6}, **kw)
    sns.heatmap(lost, cmap=palette.REGRESSION_MAP, cbar_kws={"label": "regressions (below)", "shrink": 0.6}, **kw)
    ax.grid(False)  # no grid lines across the empty diagonal
    if n_training:
        ax.axhline(n_training, color="black", lw=2)
        ax.axvline(n_training, color="black", lw=2)
    ax.set(xlabel="checkpoint (step)", ylabel="checkpoint (step)")
    ax.set_title("Above the diagonal: improvements, wrong at the row's checkpoint and right at the column's\n"
                 "below it: regressions, right at the column's checkpoint and wrong at the row's\n"
                 "(earlier to later in both; colour on a square-root scale)")
    return fig
