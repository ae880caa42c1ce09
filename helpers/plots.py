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


def learning_curves(log, phases=None):
    """Loss and monitor accuracy along training, with the data phases shaded. Used in notebook 00.

    `log` has columns step, phase, loss, accuracy, accuracy_small, accuracy_rest. Returns the Figure.
    """
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained")
    ax_loss.plot(log["step"], log["loss"], marker=".")
    ax_loss.set(xlabel="step", ylabel="answer-token loss", title="Training loss")
    for column, label in [("accuracy", "all"), ("accuracy_small", "small operands"), ("accuracy_rest", "other")]:
        ax_acc.plot(log["step"], log[column], marker=".", label=label)
    ax_acc.set(xlabel="step", ylabel="greedy accuracy", ylim=(0, 1), title="Accuracy on the monitor set")
    ax_acc.legend(fontsize="small")
    # Shade the saves made while "large" operands dominated the data, and the final uniform phase.
    step = log["step"].diff().median() if len(log) > 1 else 1
    for phase, label, alpha in [("large", "large operands", 0.15), ("uniform", "uniform", 0.07)]:
        saves = log.loc[log["phase"] == phase, "step"]
        if len(saves):
            for ax in (ax_loss, ax_acc):
                ax.axvspan(saves.min() - step, saves.max(), color="grey", alpha=alpha, lw=0)
            ax_acc.text((saves.min() - step + saves.max()) / 2, 0.03, label, ha="center", fontsize="small", color="dimgrey")
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
