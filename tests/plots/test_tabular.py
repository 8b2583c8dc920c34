"""jaxprobe.plots (tabular): distances against known values, and the figures' content."""

import sys

import numpy as np
import pytest

from jaxprobe import datasets, plots


def test_importing_jaxprobe_does_not_import_matplotlib():
    import subprocess

    code = "import jaxprobe, sys; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_feature_distances_known_values():
    """W1 of a sample and its shift by c is c; it matches scipy; TV of category frequencies."""
    from scipy.stats import wasserstein_distance

    data = datasets.default()
    rng = np.random.default_rng(0)
    a = data.x[rng.choice(len(data), 500)].astype(np.float64)
    b = a.copy()
    balance = data.feature("balance").column
    b[:, balance] += 100.0
    student = list(data.feature("student").columns)
    b[:250, student] = [0.0, 1.0]
    distances = plots.feature_distances(a, b, data)
    assert distances["balance"] == pytest.approx(100.0, rel=1e-9)
    assert distances["income"] == pytest.approx(0.0, abs=1e-9)
    c = data.x[:300].astype(np.float64)
    assert plots.feature_distances(a, c, data)["income"] == pytest.approx(
        wasserstein_distance(a[:, -1], c[:, -1]), rel=1e-9)
    freq_a = a[:, student].mean(axis=0)
    freq_b = b[:, student].mean(axis=0)
    assert distances["student"] == pytest.approx(0.5 * np.abs(freq_a - freq_b).sum())
    # standardized inputs are converted to original units first
    assert plots.feature_distances(data.standardize(a), data.standardize(b), data, standardized=True)["balance"] \
        == pytest.approx(100.0, rel=1e-5)


def test_feature_distributions_marks_the_factual(tmp_path):
    data = datasets.wage()
    factual = data.x[0]
    generated = data.x[10:200]
    figure = plots.feature_distributions(data.standardize(generated), data, factual=data.standardize(factual),
                                         standardized=True, features=["age", "race"])
    age_ax, race_ax = figure.axes[:2]
    assert age_ax.get_title() == "age" and race_ax.get_title() == "race"
    lines = [line for line in age_ax.get_lines() if line.get_linestyle() == "--"]
    assert len(lines) == 1 and lines[0].get_xdata()[0] == pytest.approx(factual[data.feature("age").column], rel=1e-5)
    race = data.decode(factual)["race"]
    red = [t.get_text() for t in race_ax.get_xticklabels() if t.get_color() == "red"]
    assert red == [race]
    figure.savefig(tmp_path / "features.png")
    assert (tmp_path / "features.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="generated must have shape"):
        plots.feature_distributions(np.zeros((3, 4)), data)


def test_scatter_and_prediction_scatter(tmp_path):
    data = datasets.circles(100)
    figure = plots.scatter_2d(data.x, data.y, data.x[:5] * 0.1, anchor=data.x[0])
    assert [c.get_offsets().shape[0] for c in figure.axes[0].collections] == [50, 50, 5, 1]
    figure = plots.prediction_scatter((np.arange(5), np.arange(5)), (np.zeros(3), np.ones(3)), names=("SVR", "LR"))
    assert figure.axes[0].get_xlabel() == "SVR"
    figure.savefig(tmp_path / "scatter.png")
    with pytest.raises(ValueError, match="data_x must be"):
        plots.scatter_2d(np.zeros((4, 3)), np.zeros(4))


def test_sweep_plot_draws_unconverged_cells_hollow_and_never_warns(tmp_path):
    import warnings

    import matplotlib.pyplot as plt

    from jaxprobe.plots.runs import plot_sweep

    rows = [dict(status="ok", temperature=0.1, probe_mean=1.0, alpha=1),
            dict(status="unconverged", temperature=1.0, probe_mean=2.0, alpha=1),
            dict(status="unconverged", temperature=0.1, probe_mean=1.5, alpha=2),
            dict(status="error", temperature=1.0, alpha=2)]
    captured = {}
    original = plt.close

    def keep(figure=None):  # look at the figure before it is closed
        captured["figure"] = figure
        return original(figure)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. matplotlib's "No artists with labels found to put in legend"
        plt.close = keep
        try:
            plot_sweep(str(tmp_path / "a.png"), rows, "temperature", group_by="alpha")
            axis = captured["figure"].axes[0]
            plot_sweep(str(tmp_path / "b.png"), rows[3:], "temperature", group_by="alpha")  # only failed cells
        finally:
            plt.close = original
    # Both groups are drawn (alpha=2 has only an unconverged cell), the unconverged markers hollow.
    assert [text.get_text() for text in axis.get_legend().get_texts()] == ["alpha=1", "alpha=2"]
    hollow = [line for line in axis.get_lines() if line.get_marker() == "o" and line.get_markerfacecolor() == "none"]
    assert sum(len(line.get_xdata()) for line in hollow) == 2
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "b.png").exists()


def test_plot_sweep_draws_95_percent_error_bars_from_the_mcse(tmp_path):
    import matplotlib.pyplot as plt

    from jaxprobe.plots.runs import plot_sweep

    rows = [dict(status="ok", temperature=0.1, probe_mean=1.0, probe_mcse=0.1),
            dict(status="ok", temperature=1.0, probe_mean=2.0, probe_mcse=None)]  # no error estimate: no bar
    captured, original = {}, plt.close
    plt.close = lambda figure=None: (captured.setdefault("figure", figure), original(figure))
    try:
        plot_sweep(str(tmp_path / "a.png"), rows, "temperature")
    finally:
        plt.close = original
    bars = [c for c in captured["figure"].axes[0].collections if len(c.get_segments())]
    assert len(bars) == 1 and len(bars[0].get_segments()) == 1
    np.testing.assert_allclose(bars[0].get_segments()[0][:, 1], [1.0 - 0.196, 1.0 + 0.196])
