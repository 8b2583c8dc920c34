"""jaxprobe: ask trained models questions by sampling p(x) ∝ exp(−G(x)/τ)·prior(x) with many chains in JAX.

Each public name is imported from its module on first use (PEP 562 ``__getattr__``): ``import jaxprobe`` alone
loads no JAX, so the command line answers ``--help``, usage errors and configuration schema errors at once
(``tests/test_cli_startup.py``). ``jaxprobe.sample``, ``from jaxprobe import generate``, ``jaxprobe.priors`` and
the other names of ``__all__`` work as they always did; submodules (``jaxprobe.config``) too.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from jaxprobe._version import __version__

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports the same
    from jaxprobe import (constraints, datasets, engine, extract, latent, models, plots, priors, probes, reconstruct,
                          samplers, sweeps)
    from jaxprobe.engine import CorruptFileError, CorruptFileWarning, Estimate, MCSEWarning, Samples, sample
    from jaxprobe.engine.registry import register_sampler
    from jaxprobe.engine.verdict import ConvergenceError, ConvergenceWarning, Verdict
    from jaxprobe.generation import PrecisionWarning, generate
    from jaxprobe.question import Question
    from jaxprobe.sweeps import sweep
    from jaxprobe.target import gibbs

__all__ = ["sample", "generate", "sweep", "register_sampler", "Samples", "Question", "ConvergenceWarning", "ConvergenceError", "Verdict", "CorruptFileError",
           "CorruptFileWarning", "Estimate", "MCSEWarning", "PrecisionWarning", "gibbs", "priors", "probes", "constraints", "models", "datasets",
           "plots", "engine", "extract", "latent", "reconstruct", "samplers", "sweeps", "__version__"]

#: Public name → the module it comes from (``None``: the name is a subpackage of jaxprobe).
_SOURCES: dict[str, str | None] = {
    **{name: None for name in ("constraints", "datasets", "engine", "extract", "latent", "models", "plots", "priors",
                               "probes", "reconstruct", "samplers", "sweeps")},
    **{name: "jaxprobe.engine" for name in ("CorruptFileError", "CorruptFileWarning", "Estimate", "MCSEWarning",
                                            "Samples", "sample")},
    **{name: "jaxprobe.engine.verdict" for name in ("ConvergenceError", "ConvergenceWarning", "Verdict")},
    "register_sampler": "jaxprobe.engine.registry",
    "PrecisionWarning": "jaxprobe.generation",
    "generate": "jaxprobe.generation",
    "Question": "jaxprobe.question",
    "sweep": "jaxprobe.sweeps",
    "gibbs": "jaxprobe.target",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (then kept here), or a submodule such as
    ``jaxprobe.config``."""
    if name.startswith("__"):  # e.g. __path__ probes by tools: never a reason to import JAX
        raise AttributeError(f"module 'jaxprobe' has no attribute {name!r}")
    if name in _SOURCES:
        source = _SOURCES[name]
        module = importlib.import_module(f"jaxprobe.{name}" if source is None else source)
        value = module if source is None else getattr(module, name)
        globals()[name] = value
        return value
    if importlib.util.find_spec(f"jaxprobe.{name}") is None:
        raise AttributeError(f"module 'jaxprobe' has no attribute {name!r}")
    return importlib.import_module(f"jaxprobe.{name}")  # as an eager __init__ had it: jaxprobe.question, ...


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
