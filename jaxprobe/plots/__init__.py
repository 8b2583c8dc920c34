"""Figures (matplotlib, imported lazily, Agg backend)."""

from jaxprobe.plots.runs import plot_feature_distributions, plot_sweep

__all__ = ["plot_feature_distributions", "plot_sweep"]
