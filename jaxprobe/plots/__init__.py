"""Figures (matplotlib imported lazily inside each function, Agg backend)."""

from jaxprobe.plots.reconstruct import plot_reconstruction_correlations, plot_reconstruction_scatter

__all__ = ["plot_reconstruction_correlations", "plot_reconstruction_scatter"]
