"""Models and parameter distributions q(θ) for probing."""

from jaxprobe.models.distributions import Ensemble, GaussianPerturbation, PointMass, PosteriorSamples
from jaxprobe.models.sklearn import ImportedModel, from_sklearn

__all__ = ["PointMass", "GaussianPerturbation", "Ensemble", "PosteriorSamples", "from_sklearn", "ImportedModel"]
