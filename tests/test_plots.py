"""helpers.figures.plots: right bars and counts, legends off the data, over/underconfidence named, ECE with its binning,
a seeded bootstrap band, no warnings."""
from __future__ import annotations

import time
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from helpers.evaluation.metrics import expected_calibration_error, reliability_table  # noqa: E402  # noqa: E402
from helpers.figures.plots import (  # noqa: E402
    accuracy_band, binning_label, chance_line, confidence_histogram, reliability_diagram,
    side_by_side, use_style,
)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _data(seed=0, n=500):
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0.2, 1.0, size=n)  # nothing below 0.2: bin [0, 0.2) stays empty
    return conf, rng.uniform(size=n) < conf**2


def _mixed(seed=0, n=600):
    """Overconfident at high confidence, underconfident at low confidence."""
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0.0, 1.0, size=n)
    return conf, rng.uniform(size=n) < 0.3 + 0.4 * conf


def _bars(ax, label):
    (container,) = [c for c in ax.containers if c.get_label() == label]
    return list(container)


def _counts(ax):
    return [int(t.get_text().replace(",", "")) for t in ax.texts if t.get_gid() == "bin count"]


def _diagram(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        use_style()
        fig, ax = plt.subplots()
        out = reliability_diagram(ax, *args, **kwargs)
        fig.canvas.draw()
    return fig, out


def test_reliability_diagram_draws_one_bar_per_non_empty_bin():
    conf, correct = _data()
    fig, ax = _diagram(conf, correct, n_bins=5, title="token probability")
    assert len(_bars(ax, "accuracy")) == 4
    table = reliability_table(conf, correct, n_bins=5)
    gaps = len(_bars(ax, "overconfident")) + len(_bars(ax, "underconfident"))
    assert gaps == int((table["gap"] != 0).sum())
    assert not ax.child_axes  # the counts are numbers on the bars now, not an inset
    ece = expected_calibration_error(conf, correct, n_bins=5)
    assert ax.get_title() == f"token probability\nECE {ece:.3f} (5 equal-width bins)"


def test_every_bin_shows_its_count_above_its_bar():
    conf, correct = _mixed()
    for n_bins in (5, 20):
        fig, ax = _diagram(conf, correct, n_bins=n_bins, band=True)
        table = reliability_table(conf, correct, n_bins=n_bins)
        assert _counts(ax) == table["count"].tolist()
        labels = [t for t in ax.texts if t.get_gid() == "bin count"]
        tops = np.maximum(table["accuracy"], table["confidence"]).to_numpy()
        assert all(t.get_position()[1] > top for t, top in zip(labels, tops))
        inside = ax.get_window_extent()
        assert all(inside.contains(*t.get_window_extent().get_points().mean(axis=0)) for t in labels)
        assert all(t.get_fontsize() >= 6 for t in labels)


def test_over_and_underconfident_bins_get_the_colours_the_legend_names():
    conf, correct = _mixed()
    fig, ax = _diagram(conf, correct, n_bins=10)
    table = reliability_table(conf, correct, n_bins=10)
    over, under = _bars(ax, "overconfident"), _bars(ax, "underconfident")
    assert len(over) == int((table["gap"] > 0).sum()) > 0
    assert len(under) == int((table["gap"] < 0).sum()) > 0
    legend = {h.get_label().split(":")[0]: h for h in ax.get_legend().legend_handles}
    assert {"overconfident", "underconfident", "perfect calibration", "accuracy per bin (bar height)",
            "mean confidence per bin"} <= set(legend)
    assert to_rgba(over[0].get_facecolor()) == to_rgba(legend["overconfident"].get_facecolor())
    assert to_rgba(under[0].get_facecolor()) == to_rgba(legend["underconfident"].get_facecolor())
    assert to_rgba(over[0].get_facecolor()) != to_rgba(under[0].get_facecolor())
    # an overconfident segment starts at the accuracy and reaches the mean confidence
    first = table[table["gap"] > 0].iloc[0]
    assert over[0].get_y() == pytest.approx(first["accuracy"])
    assert over[0].get_y() + over[0].get_height() == pytest.approx(first["confidence"])


def test_the_legend_lists_only_the_gap_directions_the_diagram_draws():
    """Every bin overconfident (confidence 0.9, accuracy about 0.3): no green strip, so no green key."""
    rng = np.random.default_rng(1)
    conf = rng.uniform(0.8, 1.0, size=400)
    fig, ax = _diagram(conf, rng.uniform(size=400) < 0.3, n_bins=10)
    assert _bars(ax, "overconfident") and not _bars(ax, "underconfident")
    labels = [h.get_label().split(":")[0] for h in ax.get_legend().legend_handles]
    assert "overconfident" in labels and "underconfident" not in labels
    plt.close(fig)


def test_a_bar_always_reaches_its_accuracy_and_the_tick_its_mean_confidence():
    """An underconfident bin's bar is not cut at its mean confidence: the bar is the accuracy in every bin,
    the black tick is the mean confidence, and the strip between them lies inside the bar's width."""
    conf, correct = _mixed()
    fig, ax = _diagram(conf, correct, n_bins=10)
    table = reliability_table(conf, correct, n_bins=10)
    assert [b.get_height() for b in _bars(ax, "accuracy")] == pytest.approx(table["accuracy"].tolist())
    (ticks,) = [c for c in ax.collections if c.get_gid() == "mean confidence"]
    assert [seg[0][1] for seg in ticks.get_segments()] == pytest.approx(table["confidence"].tolist())
    under = table[table["gap"] < 0]
    for strip, bar, (_, row) in zip(_bars(ax, "underconfident"),
                                    [b for b, g in zip(_bars(ax, "accuracy"), table["gap"]) if g < 0],
                                    under.iterrows()):
        assert strip.get_y() == pytest.approx(row["confidence"])
        assert strip.get_y() + strip.get_height() == pytest.approx(bar.get_height())
        assert bar.get_x() < strip.get_x() and strip.get_x() + strip.get_width() < bar.get_x() + bar.get_width()


def test_legend_stays_off_the_data():
    conf, correct = _mixed()
    fig, ax = _diagram(conf, correct, n_bins=10, band=True)
    assert not ax.get_legend().get_window_extent().overlaps(ax.get_window_extent())
    fig = side_by_side({name: _mixed(seed) for seed, name in enumerate(["a", "b", "c"])}, n_bins=10)
    fig.canvas.draw()
    (legend,) = fig.legends
    assert not any(legend.get_window_extent().overlaps(ax.get_window_extent()) for ax in fig.axes)
    assert any(t.get_text().startswith("underconfident") for t in legend.get_texts())


def test_quantile_bins_and_ties_say_their_binning():
    conf = np.repeat([0.5, 0.8], 50)  # quantile edges collapse to a single tied value per bin
    correct = np.tile([0, 1], 50)
    fig, ax = _diagram(conf, correct, n_bins=5, strategy="quantile", color="tab:green")
    assert len(_bars(ax, "accuracy")) == 2
    assert ax.get_title().startswith("ECE ") and ax.get_title().endswith("(5 equal-mass bins, 2 after ties)")
    assert binning_label(10) == "10 equal-width bins" and binning_label(1, "quantile") == "1 equal-mass bin"
    with pytest.raises(ValueError, match="strategy"):
        binning_label(5, "equal")


def test_band_is_seeded_and_brackets_the_accuracy():
    conf, correct = _mixed(n=300)

    def segments(seed):
        fig, ax = _diagram(conf, correct, n_bins=5, band=True, seed=seed)
        (bars,) = [c for c in ax.containers if c.get_label() == "95% bootstrap interval"]
        return np.array([s for s in bars.lines[2][0].get_segments()])

    assert np.array_equal(segments(0), segments(0))
    assert not np.array_equal(segments(0), segments(1))
    band = accuracy_band(conf, correct, n_bins=5)
    table = reliability_table(conf, correct, n_bins=5)
    assert (band["lower"] <= table["accuracy"]).all() and (table["accuracy"] <= band["upper"]).all()
    assert (band["upper"] - band["lower"] > 0).all()


def test_small_bins_show_their_count_but_no_interval():
    """A bin of fewer than MIN_INTERVAL_COUNT answers gets no bootstrap interval (it would have zero width when
    its few answers agree); the others get one each."""
    from helpers.figures.plots import MIN_INTERVAL_COUNT

    conf = np.r_[np.full(3, 0.05), np.linspace(0.4, 0.99, 200)]
    correct = np.r_[np.ones(3), (np.arange(200) % 3 > 0)].astype(int)
    table = reliability_table(conf, correct, n_bins=10)
    fig, ax = _diagram(conf, correct, n_bins=10, band=True)
    (bars,) = [c for c in ax.containers if c.get_label() == "95% bootstrap interval"]
    drawn = len(bars.lines[2][0].get_segments())
    assert table["count"].iloc[0] == 3 and drawn == int((table["count"] >= MIN_INTERVAL_COUNT).sum()) == len(table) - 1
    assert _counts(ax) == table["count"].tolist()


def test_band_matches_resampling_the_answers():
    """The per-bin binomial shortcut gives the intervals of resampling all answers with replacement."""
    conf, correct = _mixed(seed=3, n=200)
    shortcut = accuracy_band(conf, correct, n_bins=4, n_boot=4000, seed=1)
    rng = np.random.default_rng(2)
    bins = np.minimum((conf * 4).astype(int), 3)
    draws = []
    for _ in range(4000):
        pick = rng.integers(0, conf.size, conf.size)
        right = np.bincount(bins[pick], weights=correct[pick], minlength=4)
        draws.append(right / np.bincount(bins[pick], minlength=4))
    lower, upper = np.percentile(draws, [2.5, 97.5], axis=0)
    assert np.allclose(shortcut["lower"], lower, atol=0.03) and np.allclose(shortcut["upper"], upper, atol=0.03)


def test_band_is_fast_and_checks_its_arguments():
    conf, correct = _mixed(n=200_000)
    start = time.perf_counter()
    accuracy_band(conf, correct, n_bins=20, n_boot=1000)
    assert time.perf_counter() - start < 0.3
    with pytest.raises(ValueError, match="n_boot"):
        accuracy_band(conf, correct, n_boot=1)
    with pytest.raises(ValueError, match="level"):
        accuracy_band(conf, correct, level=95)


def test_side_by_side_one_axis_per_entry():
    results = {name: _data(seed) for seed, name in enumerate(["a", "b", "c"])}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = side_by_side(results, n_bins=10, suptitle="three")
        fig.canvas.draw()
    assert len(fig.axes) == 3
    assert [ax.get_title().split("\n")[0] for ax in fig.axes] == ["a", "b", "c"]
    assert all(ax.get_title().endswith("(10 equal-width bins)") for ax in fig.axes)
    assert fig.axes[0].get_shared_y_axes().joined(fig.axes[0], fig.axes[2])
    assert fig.get_suptitle() == "three"
    assert all(ax.get_legend() is None for ax in fig.axes)  # one legend, for the figure


def test_side_by_side_keeps_its_old_calls_working():
    conf, correct = _data()
    fig = side_by_side({"raw": (conf, correct), "normalized": (list(conf), list(correct))}, n_bins=10)
    fig.canvas.draw()
    assert len(fig.axes) == 2
    fig = side_by_side({"only": (conf, correct)}, 5, "quantile", "positional", band=True)
    fig.canvas.draw()
    assert fig.get_suptitle() == "positional" and "equal-mass" in fig.axes[0].get_title()


def test_side_by_side_rejects_bad_results():
    with pytest.raises(ValueError, match="at least one entry"):
        side_by_side({})
    with pytest.raises(ValueError, match=r"\(confidence, correct\) pair"):
        side_by_side({"a": [0.5, 0.6, 0.7]})


def test_chance_line():
    fig, ax = plt.subplots()
    ax.bar([0, 1], [0.8, 0.55])
    line = chance_line(ax)
    fig.canvas.draw()
    assert line.get_ydata()[0] == 0.5 and line.get_linestyle() == "--" and line.get_label() == "chance"
    (text,) = ax.texts
    assert text.get_text() == "chance"
    assert text.get_window_extent().x0 >= ax.get_window_extent().x1  # named outside the axes, off the bars


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

    from helpers.figures.plots import learning_curves

    log = pd.DataFrame({"step": [100, 200, 300, 400, 500, 600, 700],
                        "loss": [1.0, 0.8, 0.6, 0.5, 0.45, 0.4, 0.3], "accuracy": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]})
    for group in ("small", "mixed", "large"):
        log[f"accuracy_{group}"] = log["accuracy"]
    # the stream step by step: phases that switch between saves (at 130, 360, 420 and 540), and a wrong rule
    # taught over steps 250-309
    phase = ["small"] * 130 + ["large"] * 230 + ["small"] * 60 + ["large"] * 120 + ["uniform"] * 160
    stream = pd.DataFrame({"step": range(700), "phase": phase,
                           "taught wrong": [250 <= s < 310 for s in range(700)]})
    fig = learning_curves(log, stream=stream)
    loss_ax, acc_ax = fig.axes
    spans = [p for p in acc_ax.patches if isinstance(p, Rectangle)]
    # two small and two large stretches, one uniform stretch and the wrong-rule strip; the loss panel has no strip
    assert len(spans) == 6 and len([p for p in loss_ax.patches if isinstance(p, Rectangle)]) == 5
    # the shades named in a legend, not in labels that overprint each other in short phases
    assert not loss_ax.texts
    (phases,) = fig.legends  # one legend for the shading of both panels, below them
    assert [t.get_text() for t in phases.get_texts()] == [
        "small phase", "large phase", "mixed phase", "uniform phase"]
    # each stretch covers exactly its steps (step s trains on the batch drawn for s), not the save before it
    assert sorted((round(s.get_x()), round(s.get_x() + s.get_width())) for s in spans) == [
        (0, 130), (130, 360), (250, 310), (360, 420), (420, 540), (540, 700)]
    # a phase is shaded in its operand range's colour, the colour of that range's accuracy curve
    from matplotlib.colors import to_rgb

    from helpers.figures import palette
    small, large = (next(s for s in spans if round(s.get_x()) == x) for x in (0, 130))
    assert to_rgb(small.get_facecolor()) == to_rgb(palette.RANGES["small"])
    assert to_rgb(large.get_facecolor()) == to_rgb(palette.RANGES["large"])
    assert len(acc_ax.get_lines()) == 4
    # with the windows: their checkpoints as triangles and the cut between them as a dashed line
    fig = learning_curves(log, {"training": [200, 300], "evaluation": [500, 700]}, stream=stream)
    acc_ax = fig.axes[1]
    labels = [line.get_label() for line in acc_ax.get_lines()]
    # each window labelled with its number of checkpoints, so that crowded triangles can still be counted
    assert {"training checkpoints (2)", "evaluation checkpoints (2)", "training | evaluation cut"} <= set(labels)
    (cut,) = [line for line in acc_ax.get_lines() if line.get_label() == "training | evaluation cut"]
    assert cut.get_xdata()[0] == 400


def test_window_accuracy_spaces_checkpoints_by_step():
    import pandas as pd

    from helpers.figures.plots import window_accuracy

    names = ["step-02000", "step-02900", "step-04000"]
    accuracy = pd.DataFrame({"small operands": [0.2, 0.5, 0.9]}, index=names)
    ax = window_accuracy(accuracy, {"training": names[:1], "evaluation": names[1:]}).axes[0]
    training, evaluation = ax.get_lines()  # one line per window: none joins them across the cut
    assert list(training.get_xdata()) == [2000]
    assert list(evaluation.get_xdata()) == [2900, 4000]  # 1,100 steps between the two, not one tick
    assert [t.get_text() for t in ax.get_xticklabels()] == ["02000", "02900", "04000"]


def test_the_palette_gives_each_colour_one_meaning():
    from matplotlib.colors import to_hex

    from helpers.figures import palette

    named = {name: value for name, value in vars(palette).items() if name.isupper() and isinstance(value, str)
             and not name.endswith("_MAP")}
    named |= {f"RANGES[{k}]": v for k, v in palette.RANGES.items()}
    named |= {f"WINDOWS[{k}]": v for k, v in palette.WINDOWS.items()}
    named |= {f"VERDICTS[{k}]": v for k, v in palette.VERDICTS.items()}
    by_colour: dict[str, list[str]] = {}
    for name, value in named.items():
        by_colour.setdefault(to_hex(value), []).append(name)
    shared = {colour: names for colour, names in by_colour.items() if len(names) > 1}
    assert not shared, f"colours with more than one meaning: {shared}"


def test_the_legend_names_hatched_bins_only_where_a_bin_is_hatched():
    """A bin of fewer than MIN_INTERVAL_COUNT answers is hatched in its own colours, and the legend says what
    hatching means only in a figure that has such a bin."""
    def hatched_entry(ax):
        return any(t.get_text().startswith("hatched") for t in ax.get_legend().get_texts())

    rng = np.random.default_rng(0)
    conf = rng.uniform(0.4, 1.0, 500)
    correct = rng.uniform(size=500) < conf
    fig, ax = _diagram(conf, correct, n_bins=5)  # three bins of about 170 answers
    assert not any(p.get_hatch() for p in ax.patches) and not hatched_entry(ax)
    fig, ax = _diagram(np.r_[conf, 0.05, 0.1], np.r_[correct, True, False], n_bins=5)  # two answers below 0.2
    (bar,) = [b for b in _bars(ax, "accuracy") if b.get_hatch()]
    assert bar.get_x() == 0.0 and hatched_entry(ax)
    # the hatched bar keeps the colour the legend gives the bars: no faded shade that reads as a third kind
    assert {to_rgba(b.get_facecolor()) for b in _bars(ax, "accuracy")} == {to_rgba(_bars(ax, "accuracy")[0]
                                                                                   .get_facecolor())}
