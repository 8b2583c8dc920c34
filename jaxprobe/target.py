"""Targets: the Gibbs-Boltzmann density of a probing loss, p(x) ∝ exp(−G(x)/τ) · prior(x)."""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable

import jax

from jaxprobe.types import ArrayTree, LogDensityFn

__all__ = ["gibbs", "check_temperature"]


def check_temperature(temperature: Any) -> float:
    """``temperature`` as a float, or a ValueError/TypeError naming it."""
    if isinstance(temperature, bool) or not isinstance(temperature, (numbers.Real,)):
        try:
            temperature = float(temperature)  # 0-d NumPy/JAX arrays
        except (TypeError, ValueError):
            raise TypeError(f"temperature must be a real number, got {type(temperature).__name__}") from None
    temperature = float(temperature)
    if not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"temperature must be finite and > 0, got {temperature}")
    return temperature


def gibbs(G: Callable[[ArrayTree], jax.Array], temperature: float, prior: Callable | None = None) -> LogDensityFn:
    """The log density of the Gibbs-Boltzmann distribution of a probing loss (probing paper, Eq. 3).

    ``logdensity(x) = −G(x) / temperature + log prior(x)``; its samples minimize
    ``E_p[G] − τ H(p)``. ``G`` maps one position to a scalar; ``prior`` is one of
    :mod:`jaxprobe.priors` (or any callable giving a log density), ``None`` for flat.

    Example
    -------
    >>> logdensity = gibbs(lambda x: (x @ x - 1.0) ** 2, 0.1, jaxprobe.priors.StandardNormal())
    """
    if not callable(G):
        raise TypeError(f"G must be callable (one position -> scalar loss), got {type(G).__name__}")
    if prior is not None and not callable(prior):
        raise TypeError(f"prior must be callable or None, got {type(prior).__name__}")
    # A traced τ (a compiled sweep's cell input) is checked by its caller before tracing.
    tau = temperature if isinstance(temperature, jax.core.Tracer) else check_temperature(temperature)

    if prior is None:
        def logdensity(x: ArrayTree) -> jax.Array:
            return -G(x) / tau
    else:
        def logdensity(x: ArrayTree) -> jax.Array:
            return -G(x) / tau + prior(x)

    return logdensity
