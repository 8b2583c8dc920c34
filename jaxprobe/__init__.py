"""jaxprobe: ask trained models questions by sampling p(x) ∝ exp(−G(x)/τ)·prior(x) with many chains in JAX."""

from jaxprobe import constraints, datasets, engine, models, priors, probes
from jaxprobe import latent, plots
from jaxprobe.engine import Samples, sample
from jaxprobe.generate import generate
from jaxprobe.target import gibbs

__version__ = "0.1.0"

__all__ = ["sample", "generate", "Samples", "gibbs", "priors", "probes", "constraints", "models", "datasets", "engine",
           "latent", "plots",
           "__version__"]
