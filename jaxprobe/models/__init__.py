"""Models and parameter distributions q(θ) for probing."""

from jaxprobe.models.distributions import Ensemble, GaussianPerturbation, PointMass, PosteriorSamples

__all__ = ["PointMass", "GaussianPerturbation", "Ensemble", "PosteriorSamples"]
