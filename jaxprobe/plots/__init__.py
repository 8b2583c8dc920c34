"""Figures as PNG files (matplotlib is imported lazily, Agg backend)."""

from jaxprobe.plots.images import image_grid, latent_walk_strip

__all__ = ["image_grid", "latent_walk_strip"]
