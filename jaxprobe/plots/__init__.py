"""Plots of generated samples (matplotlib, imported lazily; figures on the Agg canvas)."""

from jaxprobe.plots.tabular import feature_distances, feature_distributions, prediction_scatter, scatter_2d

__all__ = ["feature_distributions", "scatter_2d", "prediction_scatter", "feature_distances"]
