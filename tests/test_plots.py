"""Smoke tests for helpers.plots: right number of bars and axes, ECE shown, no warnings."""
from __future__ import annotations

import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from helpers.metrics import expected_calibration_error  # noqa: E402
from helpers.plots import confidence_histogram, reliability_diagram, side_by_side, use_style  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _data(seed=0, n=500):
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0.2, 1.0, size=n)  # nothing below 0.2: bin [0, 0.2) stays empty
    return conf, rng.uniform(size=n) < conf**2


def _bars(ax, label):
    (container,) = [c for c in ax.containers if c.get_label() == label]
    return list(container)


def test_reliability_diagram_draws_one_bar_per_non_empty_bin():
    conf, correct = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        use_style()
        fig, ax = plt.subplots()
        out = reliability_diagram(ax, conf, correct, n_bins=5, title="token probability")
        fig.canvas.draw()
    assert out is ax
    assert len(_bars(ax, "accuracy")) == 4
    assert len(_bars(ax, "gap to mean confidence")) == 4
    (counts,) = ax.child_axes
    assert len(counts.patches) == 4
    ece = expected_calibration_error(conf, correct, n_bins=5)
    assert f"{ece:.3f}" in ax.get_title() and "token probability" in ax.get_title()


def test_reliability_diagram_quantile_and_ties():
    conf = np.repeat([0.5, 0.8], 50)  # quantile edges collapse to a single tied value per bin
    correct = np.tile([0, 1], 50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig, ax = plt.subplots()
        reliability_diagram(ax, conf, correct, n_bins=5, strategy="quantile", color="tab:green")
        fig.canvas.draw()
    assert len(_bars(ax, "accuracy")) == 2
    assert ax.get_title().startswith("ECE ")


def test_side_by_side_one_axis_per_entry():
    results = {name: _data(seed) for seed, name in enumerate(["a", "b", "c"])}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = side_by_side(results, n_bins=10, suptitle="three")
        fig.canvas.draw()
    assert len(fig.axes) == 3
    assert [ax.get_title().split(":")[0] for ax in fig.axes] == ["a", "b", "c"]
    assert fig.axes[0].get_shared_y_axes().joined(fig.axes[0], fig.axes[2])
    assert fig.get_suptitle() == "three"


def test_side_by_side_rejects_bad_results():
    with pytest.raises(ValueError, match="at least one entry"):
        side_by_side({})
    with pytest.raises(ValueError, match=r"\(confidence, correct\) pair"):
        side_by_side({"a": [0.5, 0.6, 0.7]})


def test_confidence_histogram():
    conf, correct = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig, ax = plt.subplots()
        confidence_histogram(ax, conf, correct, bins=10)
        fig.canvas.draw()
    assert sum(p.get_height() for p in ax.patches) == len(conf)


def test_learning_curves_shade_every_large_and_uniform_stretch():
    import pandas as pd
    from matplotlib.patches import Rectangle

    from helpers.plots import learning_curves

    log = pd.DataFrame({"step": [100, 200, 300, 400, 500, 600, 700],
                        "phase": ["small", "large", "large", "small", "large", "uniform", "uniform"],
                        "loss": [1.0, 0.8, 0.6, 0.5, 0.45, 0.4, 0.3], "accuracy": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]})
    for group in ("small", "mixed", "large"):
        log[f"accuracy_{group}"] = log["accuracy"]
    fig = learning_curves(log)
    loss_ax, acc_ax = fig.axes
    spans = [p for p in acc_ax.patches if isinstance(p, Rectangle)]
    # two separate large stretches and one uniform stretch, shaded on both axes
    assert len(spans) == 3 and len([p for p in loss_ax.patches if isinstance(p, Rectangle)]) == 3
    assert sorted(t.get_text() for t in acc_ax.texts) == ["large", "large", "uniform"]  # the phase names
    assert [round(s.get_x()) for s in spans] == [100, 400, 500]  # each stretch starts one save before its first
    assert len(acc_ax.get_lines()) == 4
