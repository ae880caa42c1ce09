"""Figures shared by the notebooks: style, reliability diagrams, confidence histograms."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from .metrics import expected_calibration_error, reliability_table
from .validation import confidence_and_correct

GAP_COLOR = "#d62728"  # red: the miscalibration the reader should look at


def use_style() -> None:
    """Seaborn theme and small default figures; call once in every notebook's setup cell."""
    sns.set_theme(
        style="whitegrid",
        context="notebook",
        rc={"figure.figsize": (5.0, 3.6), "figure.dpi": 100, "axes.titlesize": "medium"},
    )


def reliability_diagram(ax, confidence, correct, n_bins: int = 5, strategy: str = "uniform", title=None, color=None):
    """Accuracy per bin against the diagonal, the gap to mean confidence in red, counts beneath. Used in notebooks 01, 02, 03.

    Bars span their bin; the red hatched segment runs from the bin's accuracy to its mean
    confidence. A small histogram of counts per bin sits in an inset below `ax` (it lives in
    `ax.child_axes`, so grids of diagrams keep working); constrained layout or
    bbox_inches="tight" (the notebook default) leaves room for it. The binned ECE is in the title.
    Returns `ax`.
    """
    conf, corr = confidence_and_correct(confidence, correct)
    table = reliability_table(conf, corr, n_bins, strategy)
    ece = expected_calibration_error(conf, corr, n_bins, strategy)
    color = color or sns.color_palette()[0]
    left, width = table["lower"].to_numpy(), (table["upper"] - table["lower"]).to_numpy()
    # A quantile bin holding a single repeated value has zero width: keep it visible.
    width = np.maximum(width, 0.01)

    ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="perfect calibration")
    ax.bar(left, table["accuracy"], width=width, align="edge", color=color, edgecolor="white", label="accuracy")
    gap_bottom = np.minimum(table["accuracy"], table["confidence"])
    ax.bar(
        left, table["gap"].abs(), bottom=gap_bottom, width=width, align="edge",
        color=GAP_COLOR, alpha=0.35, hatch="//", edgecolor=GAP_COLOR, label="gap to mean confidence",
    )
    ax.set(xlim=(0, 1), ylim=(0, 1), ylabel="accuracy")
    ax.set_title(f"{title}: ECE {ece:.3f}" if title else f"ECE {ece:.3f}")
    ax.legend(loc="upper left", fontsize="small")
    ax.tick_params(labelbottom=False)

    counts = ax.inset_axes([0.0, -0.3, 1.0, 0.22], sharex=ax)
    counts.bar(left, table["count"], width=width, align="edge", color=color, edgecolor="white")
    counts.set(xlabel="confidence", ylabel="count")
    counts.tick_params(labelsize="small")
    counts.yaxis.label.set_size("small")
    return ax


def side_by_side(results: dict, n_bins: int = 5, strategy: str = "uniform", suptitle=None):
    """One reliability diagram per entry of {name: (confidence, correct)}, sharing y. Used in notebooks 01, 02, 03, 05.

    Returns the Figure; fig.axes holds one diagram per entry (count insets are in ax.child_axes).
    """
    if not results:
        raise ValueError("results is empty; pass {name: (confidence, correct)} with at least one entry")
    k = len(results)
    fig, axes = plt.subplots(1, k, figsize=(3.4 * k, 4.2), sharey=True, layout="constrained", squeeze=False)
    # The count insets hang below each diagram; constrained layout places them only roughly,
    # so leave extra room at the bottom edge.
    fig.get_layout_engine().set(h_pad=0.15)
    for ax, (name, pair) in zip(axes[0], results.items()):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"results[{name!r}] must be a (confidence, correct) pair")
        reliability_diagram(ax, *pair, n_bins=n_bins, strategy=strategy, title=name)
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    if suptitle:
        fig.suptitle(suptitle)
    return fig


def confidence_histogram(ax, confidence, correct, bins: int = 20):
    """Stacked histogram of confidence, split into right and wrong answers. Used in notebooks 01, 02, 03."""
    conf, corr = confidence_and_correct(confidence, correct)
    edges = np.linspace(0.0, 1.0, bins + 1)
    ax.hist(
        [conf[corr == 1], conf[corr == 0]], bins=edges, stacked=True,
        color=[sns.color_palette()[2], GAP_COLOR], label=["right", "wrong"],
    )
    ax.set(xlim=(0, 1), xlabel="confidence", ylabel="answers")
    ax.legend(fontsize="small")
    return ax


RANGE_COLORS = {"small": "#1f77b4", "mixed": "#7f7f7f", "large": "#ff7f0e", "subtraction": "#2ca02c"}  # kinds of question


def _shade_phases(axes, steps, phases, label_ax=None) -> None:
    """Shade every stretch of steps where "large" operands dominate (darker) or the mix is uniform (lighter)."""
    steps, phases = np.asarray(steps), list(phases)
    width = np.median(np.diff(steps)) if len(steps) > 1 else 1
    start = 0
    for i in range(1, len(phases) + 1):
        if i < len(phases) and phases[i] == phases[start]:
            continue
        alpha = {"large": 0.15, "uniform": 0.06}.get(phases[start], 0.0)
        if alpha:
            lo, hi = steps[start] - width, steps[i - 1]
            for ax in axes:
                ax.axvspan(lo, hi, color="grey", alpha=alpha, lw=0)
            if label_ax is not None:
                label_ax.text((lo + hi) / 2, 0.02, phases[start], ha="center", fontsize="x-small", color="dimgrey")
        start = i


def learning_curves(log):
    """Loss and monitor accuracy per operand range along training, with the data phases shaded. Used in notebook 00.

    `log` has columns step, phase, loss, accuracy and accuracy_<range> for small, mixed and large. Returns the Figure.
    """
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained")
    ax_loss.plot(log["step"], log["loss"], marker=".")
    ax_loss.set(xlabel="step", ylabel="answer-token loss", title="Training loss")
    ax_acc.plot(log["step"], log["accuracy"], marker=".", color="black", label="all")
    for group in ("small", "mixed", "large"):
        ax_acc.plot(log["step"], log[f"accuracy_{group}"], marker=".", color=RANGE_COLORS[group], label=f"{group} operands")
    ax_acc.set(xlabel="step", ylabel="greedy accuracy", ylim=(0, 1), title="Accuracy on the monitor set")
    ax_acc.legend(fontsize="small")
    _shade_phases((ax_loss, ax_acc), log["step"], log["phase"], label_ax=ax_acc)
    return fig


def mixture(frame, windows=None):
    """The training stream along the run: operand ranges stacked, subtraction and verification shares as
    lines, and the steps of each window of selected checkpoints marked. Used in notebook 00.

    `frame` is `helpers.sums.mixture()`; `windows` maps a name to step numbers. Returns the Figure.
    """
    fig, ax = plt.subplots(figsize=(10, 3.2), layout="constrained")
    groups = ["small", "mixed", "large"]
    ax.stackplot(frame["step"], *[frame[g] for g in groups], colors=[RANGE_COLORS[g] for g in groups],
                 alpha=0.35, labels=[f"{g} operands" for g in groups], step="post")
    ax.step(frame["step"], frame["subtraction"], where="post", color=RANGE_COLORS["subtraction"], label="subtraction")
    ax.step(frame["step"], frame["verification"], where="post", color="black", ls=":", label="verification (Yes/No)")
    for (name, steps), color in zip((windows or {}).items(), ["#9467bd", "#d62728"]):
        ax.plot(steps, np.full(len(steps), 1.03), "v", color=color, clip_on=False, label=f"{name} checkpoints")
    ax.set(xlabel="step", ylabel="share of the training stream", ylim=(0, 1), xlim=(0, frame["step"].max() + frame["step"].diff().median()),
           title="What the model trains on, step by step")
    ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig


def window_accuracy(accuracy, windows):
    """Accuracy per group of questions at every selected checkpoint, the windows shaded. Used in notebook 00.

    `accuracy` is a frame indexed by checkpoint name (in training order) with one column per group;
    `windows` maps a window name to its checkpoint names. Returns the Figure.
    """
    fig, ax = plt.subplots(figsize=(10, 3.4), layout="constrained")
    x = np.arange(len(accuracy))
    for group in accuracy.columns:
        ax.plot(x, accuracy[group], marker="o", color=RANGE_COLORS.get(group.split()[0]), label=group)
    names = list(accuracy.index)
    for (name, members), color in zip(windows.items(), ["#9467bd", "#d62728"]):
        idx = [names.index(m) for m in members]
        ax.axvspan(min(idx) - 0.4, max(idx) + 0.4, color=color, alpha=0.08, lw=0)
        ax.text((min(idx) + max(idx)) / 2, 1.02, f"{name} window", ha="center", color=color, fontsize="small")
    ax.set_xticks(x, [n.replace("step-", "") for n in names], rotation=45)
    ax.set(xlabel="checkpoint (step)", ylabel="greedy accuracy on test", ylim=(0, 1.08))
    ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig


def flip_heatmap(flips, checkpoints):
    """Improvements (above the diagonal) and regressions (below) between every two checkpoints. Used in notebook 00.

    `flips` is `contrast.flip_counts(...)`; cell (row i, column j) above the diagonal counts questions
    wrong at i and right at j (i earlier); the mirrored cell below the diagonal counts questions right
    at i and wrong at j. Returns the Figure.
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
    kw = dict(annot=True, fmt=".0f", annot_kws={"size": 7}, xticklabels=labels, yticklabels=labels, ax=ax, square=True)
    sns.heatmap(gained, cmap="Greens", cbar_kws={"label": "improvements (above)", "shrink": 0.6}, **kw)
    sns.heatmap(lost, cmap="Reds", cbar_kws={"label": "regressions (below)", "shrink": 0.6}, **kw)
    ax.set(xlabel="checkpoint (step)", ylabel="checkpoint (step)")
    ax.set_title("Above the diagonal: improvements from row to column\nbelow: regressions from column to row",
                 fontsize="small")
    return fig
