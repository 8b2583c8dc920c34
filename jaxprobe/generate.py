"""``jaxprobe.generate``: answer a probe with samples in data space, constraints exact."""

from __future__ import annotations

import dataclasses
import functools
import numbers
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.constraints import restriction
from jaxprobe.engine import Samples, sample
from jaxprobe.engine.api import canonicalize_key
from jaxprobe.probes import as_probe
from jaxprobe.target import check_temperature

__all__ = ["generate"]


def _dimension(init: Any, dim: Any, prior: Any) -> int:
    if init is not None:
        shape = np.shape(init)
        if len(shape) != 2:
            raise ValueError(f"init must have shape (num_chains, num_features), got {shape}")
        return int(shape[1])
    if dim is not None:
        if isinstance(dim, bool) or not isinstance(dim, numbers.Integral) or dim < 1:
            raise ValueError(f"dim must be an int >= 1, got {dim!r}")
        return int(dim)
    mean = getattr(prior, "mean", None)
    if mean is not None:
        return int(np.size(mean))
    raise ValueError("generate needs the number of features: pass init (num_chains, d), dim=d, "
                     "or a prior with a mean")


class _RestrictedTarget:
    """z ↦ −G(T(z))/τ + log|J_T(z)| (+ relaxation prior) + log prior(T(z)), hashable by what it computes.

    Equal targets (same probe function, τ, prior and restriction) compare equal, so
    the engine's compiled programs (cached on the log density) are reused when the
    same question is asked again: only the first call compiles.
    """

    def __init__(self, probe_fn: Callable, tau: float, prior: Any, restricted: Any):
        self.probe_fn, self.tau, self.prior, self.restricted = probe_fn, tau, prior, restricted
        self._key = (id(probe_fn), tau, id(prior), restricted.key)

    def __call__(self, z):
        x = self.restricted.forward(z)
        value = -self.probe_fn(x) / self.tau + self.restricted.log_weight(z)
        if self.prior is not None:
            value = value + self.prior(x)
        return value

    def with_zero_probe(self) -> "_RestrictedTarget":
        return _RestrictedTarget(_zero_probe, 1.0, None, self.restricted)

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, _RestrictedTarget) and self._key == other._key
                and self.probe_fn is other.probe_fn and self.prior is other.prior)


def _zero_probe(x):
    return jnp.zeros((), x.dtype)


@functools.partial(jax.jit, static_argnames=("target",))
def _to_data_space(positions: Any, target: _RestrictedTarget) -> Any:
    return jax.vmap(jax.vmap(target.restricted.forward))(positions)


def generate(
    rng_key: Any,
    probe: Callable,
    *,
    temperature: float,
    num_chains: int,
    num_samples: int,
    init: Any = None,
    prior: Callable | None = None,
    constraints: Any = None,
    sampler: str = "mala",
    dim: int | None = None,
    num_warmup: int = 500,
    report: str = "valid",
    **sample_options: Any,
) -> Samples:
    """Sample x ~ exp(−G(x)/τ)·prior(x) restricted by ``constraints`` (probing paper, Eq. 3).

    The engine samples an unconstrained z; x = T(z) maps it onto the restricted
    space (fixed features set, bounds by bijection) and the target includes
    log|det J_T|, so the samples are exact, not clipped.

    Parameters
    ----------
    probe
        G: a :class:`jaxprobe.probes.Probe` or any callable of one x ``(d,)`` → scalar.
    temperature
        τ > 0.
    num_chains, num_samples, num_warmup, sampler
        As in :func:`jaxprobe.sample`; other keywords go to it too (``thin``,
        ``step_size``, ``progress``, ``checkpoint``, ...).
    init
        Initial points ``(num_chains, d)`` in data space, satisfying the constraints.
        Default: draws from ``prior`` (if it has ``.sample`` and they satisfy the
        constraints), else z ~ N(0, I) mapped through T.
    prior
        Log density on data space (``jaxprobe.priors``), or None for flat.
    constraints
        A ``Box``, a ``Fixed`` or a list of them (:mod:`jaxprobe.constraints`).
    dim
        Number of features d when neither ``init`` nor a prior with a mean gives it.
    report
        ``"valid"`` (default): one-hot groups reported as the one-hot vector of
        their largest entry and Integer features rounded
        (:meth:`jaxprobe.constraints.Restriction.report`); ``"relaxed"``: the
        points the sampler actually visited (simplex points, non-integers).

    Returns
    -------
    Samples
        ``positions`` ``(chain, draw, d)`` in data space, every constraint met
        exactly (one-hot groups and integers as ``report`` says); ``logdensity`` is that of the
        unconstrained z (it includes the log-Jacobian).
    """
    rng_key = canonicalize_key(rng_key)
    probe = as_probe(probe)
    tau = check_temperature(temperature)
    if isinstance(num_chains, bool) or not isinstance(num_chains, numbers.Integral) or num_chains < 1:
        raise ValueError(f"num_chains must be an int >= 1, got {num_chains!r}")
    if prior is not None and not callable(prior):
        raise TypeError(f"prior must be callable or None, got {type(prior).__name__}")
    if report not in ("valid", "relaxed"):
        raise ValueError(f"report must be 'valid' or 'relaxed', got {report!r}")
    num_features = _dimension(init, dim, prior)
    restricted = restriction(constraints, num_features)
    key_init, key_sample = jax.random.split(rng_key)

    if init is not None:
        init = np.asarray(init)
        if init.shape[0] != num_chains:
            raise ValueError(f"init has {init.shape[0]} rows but num_chains={num_chains}")
        if not np.issubdtype(init.dtype, np.floating) or not np.all(np.isfinite(init)):
            raise ValueError("init must be finite floating-point values")
        dtype = init.dtype
        z0 = restricted.inverse(init).astype(dtype)
    else:
        dtype = np.dtype(np.float32)
        z0 = None
        if prior is not None and hasattr(prior, "sample"):
            try:
                x0 = np.asarray(prior.sample(key_init, num_chains), np.float64)
                x0[:, restricted.is_fixed] = restricted.fixed_values[restricted.is_fixed]
                for columns in restricted.groups:  # start one-hot groups at the simplex's centre
                    x0[:, columns] = 1.0 / columns.size
                z0 = restricted.inverse(x0).astype(dtype)
            except (ValueError, TypeError):
                z0 = None  # the prior's draws break a constraint: start from T(N(0, I)) instead
        if z0 is None:
            z0 = np.asarray(jax.random.normal(key_init, (num_chains, restricted.num_free), dtype))

    logdensity = _RestrictedTarget(probe.fn, tau, prior, restricted)
    result = sample(key_sample, logdensity, z0, sampler=sampler, num_samples=num_samples, num_warmup=num_warmup,
                    **sample_options)
    positions = np.asarray(_to_data_space(jnp.asarray(result.positions), logdensity.with_zero_probe()))
    if report == "valid" and restricted.is_relaxed:
        positions = restricted.report(positions)
    return dataclasses.replace(result, positions=positions)
