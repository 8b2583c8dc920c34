"""jaxprobe: ask trained models questions by sampling p(x) ∝ exp(−G(x)/τ)·prior(x) with many chains in JAX."""

from jaxprobe import (constraints, datasets, engine, extract, latent, models, plots, priors, probes, reconstruct,
                      samplers, sweeps)
from jaxprobe.engine import CorruptFileError, CorruptFileWarning, Estimate, MCSEWarning, Samples, sample
from jaxprobe.engine.verdict import ConvergenceError, ConvergenceWarning, Verdict
from jaxprobe.engine.registry import register_sampler
from jaxprobe.generation import PrecisionWarning, generate
from jaxprobe.question import Question
from jaxprobe.sweeps import sweep
from jaxprobe.target import gibbs
from jaxprobe._version import __version__


__all__ = ["sample", "generate", "sweep", "register_sampler", "Samples", "Question", "ConvergenceWarning", "ConvergenceError", "Verdict", "CorruptFileError",
           "CorruptFileWarning", "Estimate", "MCSEWarning", "PrecisionWarning", "gibbs", "priors", "probes", "constraints", "models", "datasets",
           "plots", "engine", "extract", "latent", "reconstruct", "samplers", "sweeps", "__version__"]
