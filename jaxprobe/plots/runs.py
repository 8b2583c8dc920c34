"""Figures for ``jaxprobe run`` and ``jaxprobe sweep``: samples vs data per feature, a sweep's table."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from jaxprobe._io import atomic_write

__all__ = ["plot_feature_distributions", "plot_sweep"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_feature_distributions(path: str, samples: np.ndarray, data: np.ndarray, feature_names: Sequence[str], *,
                               anchor: np.ndarray | None = None, max_features: int = 12, title: str = "") -> None:
    """Histograms per feature of probe samples ``(n, d)`` vs data ``(m, d)``, both in original units
    (probing paper, Figs. 3, 5-7), the anchor (factual instance) marked; written atomically as PNG."""
    plt = _pyplot()
    count = min(max_features, samples.shape[1])
    columns = min(4, count)
    rows = math.ceil(count / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 2.4 * rows), squeeze=False)
    for i, axis in enumerate(axes.flat):
        if i >= count:
            axis.axis("off")
            continue
        low = min(np.percentile(samples[:, i], 0.5), data[:, i].min())
        high = max(np.percentile(samples[:, i], 99.5), data[:, i].max())
        bins = np.linspace(low, high, 31) if high > low else 10
        axis.hist(data[:, i], bins=bins, density=True, alpha=0.5, label="data")
        axis.hist(samples[:, i], bins=bins, density=True, alpha=0.5, label="samples")
        if anchor is not None:
            axis.axvline(anchor[i], color="black", linestyle="--", linewidth=1, label="anchor")
        axis.set_title(str(feature_names[i])[:28], fontsize=8)
        axis.tick_params(labelsize=7)
    axes.flat[0].legend(fontsize=7)
    if title:
        figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    try:
        atomic_write(path, lambda stream: figure.savefig(stream, format="png", dpi=100))
    finally:
        plt.close(figure)


def plot_sweep(path: str, rows: list[dict[str, Any]], x_axis: str, y: str = "probe_mean",
               group_by: str | None = None) -> None:
    """``y`` (a table column, default the mean probe value) against the numeric axis ``x_axis``, one line
    per value of ``group_by``; failed cells are left out. Written atomically as PNG."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(5, 3.5))
    ok = [r for r in rows if r.get("status") == "ok"]
    groups = sorted({r.get(group_by) for r in ok}, key=str) if group_by else [None]
    for group in groups:
        members = sorted((r for r in ok if group_by is None or r.get(group_by) == group), key=lambda r: r[x_axis])
        axis.plot([r[x_axis] for r in members], [r[y] for r in members], marker="o",
                  label=f"{group_by}={group}" if group_by else None)
    axis.set_xlabel(x_axis)
    axis.set_ylabel(y)
    if all(r[x_axis] > 0 for r in ok):
        axis.set_xscale("log")
    if group_by:
        axis.legend(fontsize=7)
    figure.tight_layout()
    try:
        atomic_write(path, lambda stream: figure.savefig(stream, format="png", dpi=100))
    finally:
        plt.close(figure)
