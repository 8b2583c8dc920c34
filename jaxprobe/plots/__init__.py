"""Figures (matplotlib is imported lazily inside each function, with the Agg backend)."""

from jaxprobe.plots.extraction import plot_distillation, plot_queries_per_unit
from jaxprobe.plots.runs import plot_feature_distributions, plot_sweep

__all__ = ["plot_queries_per_unit", "plot_distillation", "plot_feature_distributions", "plot_sweep"]
