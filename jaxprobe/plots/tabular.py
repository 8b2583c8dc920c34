"""Plots of generated samples for tabular and toy data (probing paper, Figs. 2, 3, 5–8).

Matplotlib is imported inside each function and figures are built on the Agg
canvas (``matplotlib.figure.Figure``), so importing jaxprobe never needs it and
no global pyplot state or GUI backend is touched. Every function returns the
``Figure``; save it with ``fig.savefig(path)``.

:func:`feature_distances` gives the numbers behind the per-feature plots: the
Wasserstein-1 distance per numeric feature (original units) and the total-variation
distance between category frequencies per categorical feature.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["feature_distributions", "scatter_2d", "prediction_scatter", "feature_distances"]


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height))
    FigureCanvasAgg(figure)
    return figure


def _rows(x: Any, dataset: Any, name: str, standardized: bool) -> np.ndarray:
    array = np.asarray(x, np.float64)
    d = dataset.x.shape[1]
    if array.shape[-1] != d:
        raise ValueError(f"{name} must have shape (..., {d}) for dataset {dataset.name!r}, got {array.shape}")
    array = array.reshape(-1, d)
    return dataset.unstandardize(array) if standardized else array


def _wasserstein_1(a: np.ndarray, b: np.ndarray) -> float:
    """W1 between two 1-D empirical distributions: ∫ |F_a(t) − F_b(t)| dt."""
    a, b = np.sort(a), np.sort(b)
    points = np.concatenate([a, b])
    points.sort(kind="mergesort")
    widths = np.diff(points)
    cdf_a = np.searchsorted(a, points[:-1], side="right") / a.size
    cdf_b = np.searchsorted(b, points[:-1], side="right") / b.size
    return float(np.sum(np.abs(cdf_a - cdf_b) * widths))


def feature_distances(first: Any, second: Any, dataset: Any, *, standardized: bool = False) -> dict[str, float]:
    """Per-feature distances between two sample sets ``(..., d)`` of ``dataset``'s columns.

    Numeric features: Wasserstein-1 in original units; categorical: total variation
    ``½ Σ_k |f_k − g_k|`` between category frequencies (argmax of each one-hot block).
    ``standardized``: the inputs are in standardized units (converted first).

    Examples
    --------
    >>> from jaxprobe import datasets
    >>> data = datasets.iris()
    >>> shifted = data.x + np.array([1.0, 0.0, 0.0, 0.0])          # sepal length one cm longer
    >>> {name: round(value, 3) for name, value in feature_distances(shifted, data.x, data).items()}
    {'sepal length (cm)': 1.0, 'sepal width (cm)': 0.0, 'petal length (cm)': 0.0, 'petal width (cm)': 0.0}
    """
    a = _rows(first, dataset, "first", standardized)
    b = _rows(second, dataset, "second", standardized)
    out: dict[str, float] = {}
    for feature in dataset.features:
        if feature.is_categorical:
            k = len(feature.columns)
            fa = np.bincount(np.argmax(a[:, list(feature.columns)], axis=1), minlength=k) / a.shape[0]
            fb = np.bincount(np.argmax(b[:, list(feature.columns)], axis=1), minlength=k) / b.shape[0]
            out[feature.name] = float(0.5 * np.abs(fa - fb).sum())
        else:
            out[feature.name] = _wasserstein_1(a[:, feature.column], b[:, feature.column])
    return out


def feature_distributions(generated: Any, dataset: Any, *, reference: Any = None, factual: Any = None,
                          features: Sequence[str] | None = None, standardized: bool = False,
                          labels: tuple[str, str] = ("generated", "original data"), columns: int = 4,
                          bins: int = 30, title: str | None = None):
    """Per-feature distributions of generated samples against reference data, in original units
    (Figs. 3, 5, 6, 7).

    Parameters
    ----------
    generated
        Samples ``(..., d)`` (e.g. ``Samples.positions``) in ``dataset``'s columns.
    dataset
        A :class:`jaxprobe.datasets.Dataset` (names, kinds, categories, standardization).
    reference
        ``(n, d)`` points to compare with (default ``dataset.x``); another sample set
        works too (Fig. 6: risky vs sensitive), with ``labels`` naming both.
    factual
        ``(d,)`` factual instance, marked in red: a dashed vertical line for numeric
        features, a red category label and outlined bar for categorical ones (Fig. 7).
    features
        Names of the features to draw (default: all).
    standardized
        ``generated``, ``reference`` and ``factual`` are in standardized units.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> from jaxprobe import datasets
    >>> data = datasets.credit()                                  # numeric and one-hot categorical features
    >>> generated = data.x[:100]                                  # e.g. samples.positions, (..., d)
    >>> fig = feature_distributions(generated, data, features=["Income", "Student"], factual=data.x[0])
    >>> [ax.get_title() for ax in fig.axes]                       # one panel per feature
    ['Income', 'Student']
    >>> fig.savefig("features.png")
    """
    if reference is None:
        reference_rows = np.asarray(dataset.x, np.float64)
    else:
        reference_rows = _rows(reference, dataset, "reference", standardized)
    generated_rows = _rows(generated, dataset, "generated", standardized)
    factual_row = None if factual is None else _rows(factual, dataset, "factual", standardized)[0]
    chosen = [dataset.feature(name) for name in features] if features is not None else list(dataset.features)
    if not chosen:
        raise ValueError("features: nothing to draw")
    columns = max(1, min(int(columns), len(chosen)))
    rows = -(-len(chosen) // columns)
    figure = _figure(3.2 * columns, 2.6 * rows)
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    for ax, feature in zip(axes, chosen):
        if feature.is_categorical:
            k = len(feature.columns)
            block = list(feature.columns)
            frequency = [np.bincount(np.argmax(r[:, block], axis=1), minlength=k) / r.shape[0]
                         for r in (generated_rows, reference_rows)]
            positions = np.arange(k)
            ax.bar(positions - 0.2, frequency[0], width=0.4, color="tab:green", label=labels[0])
            ax.bar(positions + 0.2, frequency[1], width=0.4, color="tab:blue", alpha=0.6, label=labels[1])
            ax.set_xticks(positions)
            ax.set_xticklabels([str(c) for c in feature.categories], rotation=30, ha="right", fontsize=7)
            if factual_row is not None:
                chosen_index = int(np.argmax(factual_row[block]))
                ax.get_xticklabels()[chosen_index].set_color("red")
                ax.bar([chosen_index - 0.2], [frequency[0][chosen_index]], width=0.4, fill=False, edgecolor="red",
                       linewidth=1.5)
            ax.set_ylabel("frequency", fontsize=8)
        else:
            column = feature.column
            values = [generated_rows[:, column], reference_rows[:, column]]
            low = min(v.min() for v in values)
            high = max(v.max() for v in values)
            edges = np.linspace(low, high if high > low else low + 1.0, bins + 1)
            ax.hist(values[0], bins=edges, density=True, color="tab:green", alpha=0.6, label=labels[0])
            ax.hist(values[1], bins=edges, density=True, histtype="step", color="tab:blue", linewidth=1.5,
                    label=labels[1])
            if factual_row is not None:
                ax.axvline(factual_row[column], color="red", linestyle="--", linewidth=1.5, label="factual")
            ax.set_ylabel("density", fontsize=8)
        ax.set_title(feature.name, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in axes[len(chosen):]:
        ax.set_visible(False)
    axes[0].legend(fontsize=7)
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    return figure


def scatter_2d(data_x: Any, data_y: Any, generated: Any = None, *, anchor: Any = None, title: str | None = None,
               ax: Any = None):
    """Fig. 2: 2-D toy data coloured by label (red / blue), generated samples green, an anchor orange.

    ``data_x`` ``(n, 2)``, ``data_y`` ``(n,)`` labels 0/1, ``generated`` ``(..., 2)``.
    Draws into ``ax`` when given (returns its figure), else on a new figure.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> from jaxprobe import datasets
    >>> data = datasets.moons(n=100, seed=0)
    >>> generated = np.random.default_rng(0).normal(size=(4, 25, 2))     # e.g. samples.positions
    >>> fig = scatter_2d(data.x, data.y, generated, anchor=data.x[0], title="moons")
    >>> len(fig.axes), fig.axes[0].get_legend_handles_labels()[1]
    (1, ['class 0', 'class 1', 'generated', 'anchor'])
    """
    data_x = np.asarray(data_x, np.float64)
    data_y = np.asarray(data_y)
    if data_x.ndim != 2 or data_x.shape[1] != 2 or data_y.shape != (data_x.shape[0],):
        raise ValueError(f"data_x must be (n, 2) and data_y (n,), got {data_x.shape} and {data_y.shape}")
    if ax is None:
        figure = _figure(4.0, 4.0)
        ax = figure.subplots()
    else:
        figure = ax.figure
    for label, color in ((0, "tab:red"), (1, "tab:blue")):
        points = data_x[data_y == label]
        ax.scatter(points[:, 0], points[:, 1], s=6, color=color, alpha=0.5, label=f"class {label}")
    if generated is not None:
        points = np.asarray(generated, np.float64).reshape(-1, 2)
        ax.scatter(points[:, 0], points[:, 1], s=4, color="tab:green", alpha=0.4, label="generated")
    if anchor is not None:
        anchor = np.asarray(anchor, np.float64).reshape(2)
        ax.scatter([anchor[0]], [anchor[1]], s=80, color="tab:orange", edgecolor="black", zorder=5, label="anchor")
    ax.set_aspect("equal")
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=6, loc="upper right")
    return figure


def prediction_scatter(test_predictions: tuple[Any, Any], generated_predictions: tuple[Any, Any], *,
                       names: tuple[str, str] = ("model 1", "model 2"), title: str | None = None):
    """Fig. 8: predictions of two regressors against each other, test data blue, generated green,
    with the diagonal y = x where the models agree.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> rng = np.random.default_rng(0)
    >>> test = rng.normal(size=50)                                # model 1's predictions on test rows
    >>> generated = rng.normal(size=50)                           # ... on generated rows
    >>> fig = prediction_scatter((test, test + 0.1), (generated, -generated), names=("ridge", "forest"))
    >>> fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel()
    ('ridge', 'forest')
    """
    test_a, test_b = (np.ravel(np.asarray(v, np.float64)) for v in test_predictions)
    gen_a, gen_b = (np.ravel(np.asarray(v, np.float64)) for v in generated_predictions)
    if test_a.shape != test_b.shape or gen_a.shape != gen_b.shape:
        raise ValueError("each pair of predictions must have the same length")
    figure = _figure(4.5, 4.5)
    ax = figure.subplots()
    ax.scatter(test_a, test_b, s=8, color="tab:blue", alpha=0.6, label="test data")
    ax.scatter(gen_a, gen_b, s=8, color="tab:green", alpha=0.6, label="generated")
    every = np.concatenate([test_a, test_b, gen_a, gen_b])
    ax.plot([every.min(), every.max()], [every.min(), every.max()], color="gray", linestyle=":", linewidth=1)
    ax.set_xlabel(names[0])
    ax.set_ylabel(names[1])
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return figure
