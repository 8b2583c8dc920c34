"""jaxprobe: ask trained models questions by sampling p(x) ∝ exp(−G(x)/τ)·prior(x) with many chains in JAX."""

from jaxprobe import engine, priors
from jaxprobe.engine import Samples, sample
from jaxprobe.target import gibbs

__version__ = "0.1.0"

__all__ = ["sample", "Samples", "gibbs", "priors", "engine", "__version__"]
