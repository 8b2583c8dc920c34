"""Targets: the Gibbs-Boltzmann density of a probing loss, p(x) ∝ exp(−G(x)/τ) · prior(x)."""

from __future__ import annotations

from typing import Any, Callable

import jax

from jaxprobe._inputs import check_number
from jaxprobe._values import Keyed
from jaxprobe.types import ArrayTree, LogDensityFn

__all__ = ["gibbs", "check_temperature"]


def check_temperature(temperature: Any) -> float:
    """``temperature`` as a float (a real number or a 0-d array; not a bool or a string), or a
    TypeError/ValueError naming it.

    Examples
    --------
    >>> check_temperature(np.float32(0.5))
    0.5
    >>> check_temperature(0.0)
    Traceback (most recent call last):
        ...
    ValueError: temperature must be finite and > 0, got 0.0
    """
    return check_number(temperature, "temperature", minimum=0.0, exclusive_minimum=True)


def gibbs(G: Callable[[ArrayTree], jax.Array], temperature: float, prior: Callable | None = None) -> LogDensityFn:
    """The log density of the Gibbs-Boltzmann distribution of a probing loss (probing paper, Eq. 3).

    ``logdensity(x) = −G(x) / temperature + log prior(x)``; its samples minimize
    ``E_p[G] − τ H(p)``. ``G`` maps one position to a scalar; ``prior`` is one of
    :mod:`jaxprobe.priors` (or any callable giving a log density), ``None`` for flat.

    Two log densities built from equal ``G``, temperature and prior are equal (see
    :mod:`jaxprobe._values`), so ``sample`` reuses its compiled programs for one written inline again.

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

    return Keyed(logdensity, "gibbs", G, tau, prior)
