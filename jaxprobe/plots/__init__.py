"""Figures (matplotlib is imported lazily inside each function, with the Agg backend)."""

from jaxprobe.plots.extraction import plot_distillation, plot_queries_per_unit
from jaxprobe.plots.images import image_grid, latent_walk_strip
from jaxprobe.plots.reconstruct import plot_reconstruction_correlations, plot_reconstruction_scatter
from jaxprobe.plots.runs import plot_sweep
from jaxprobe.plots.tabular import feature_distances, feature_distributions, prediction_scatter, scatter_2d

__all__ = ["feature_distributions", "scatter_2d", "prediction_scatter", "feature_distances",
           "plot_queries_per_unit", "plot_distillation", "plot_sweep",
           "plot_reconstruction_correlations", "plot_reconstruction_scatter", "image_grid", "latent_walk_strip"]
