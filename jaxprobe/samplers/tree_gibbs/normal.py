"""Truncated standard normals and their interval masses, stable far in either tail (float32 and float64).

The coordinate updates of :mod:`jaxprobe.samplers.tree_gibbs` weigh intervals by their prior mass and draw a
value inside the chosen one by the inverse CDF in log space; :func:`truncated_standard_normal` and
:func:`log_interval_mass` are the public forms of the same arithmetic.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr, ndtri

from jaxprobe.types import Array, PRNGKey

__all__ = ["log_interval_mass", "truncated_standard_normal"]

_LOG_2PI = math.log(2.0 * math.pi)
_FAR_TAIL = -60.0  # below this log Φ, Φ⁻¹ is found by Newton's method on log Φ (exp would underflow)


def log_interval_mass(lower: Array, upper: Array) -> Array:
    """log(Φ(upper) − Φ(lower)) for standardized bounds (elementwise), stable far in either tail.

    The interval is reflected to the side of 0 where both CDF values are small (``Φ(−u) − Φ(−l)`` when
    ``l + u > 0``), where ``log Φ`` keeps full relative precision; the difference is then
    ``log Φ(hi) + log(−expm1(log Φ(lo) − log Φ(hi)))``. ``−inf`` for an empty interval.

    Examples
    --------
    >>> masses = jax.jit(log_interval_mass)(jnp.array([0.0, 30.0]), jnp.array([jnp.inf, 31.0]))
    >>> np.round(np.asarray(masses, float), 3).tolist()     # log ½; finite 30σ out, where Φ(31) − Φ(30) is 0
    [-0.693, -454.321]
    """
    flip = lower + upper > 0  # NaN (−inf + inf) compares False: the whole line is not flipped
    lo, hi = jnp.where(flip, -upper, lower), jnp.where(flip, -lower, upper)
    log_lo, log_hi = log_ndtr(lo), log_ndtr(hi)
    nonempty = lo < hi
    difference = jnp.where(nonempty, log_lo - log_hi, -1.0)
    return jnp.where(nonempty, log_hi + jnp.log(-jnp.expm1(difference)), -jnp.inf)


def _log_consecutive_masses(z: Array) -> Array:
    """log masses ``(..., I)`` of the consecutive intervals ``(z_{i−1}, z_i]`` of N(0, 1) between ascending
    standardized breakpoints ``z`` ``(..., I + 1)`` (±inf allowed; equal neighbours: an empty interval, −inf).

    One log Φ per breakpoint, of its smaller tail ``L_k = log Φ(−|z_k|)``: an interval below 0 has mass
    ``Φ(z_i) − Φ(z_{i−1})``, one above 0 ``Φ(−z_{i−1}) − Φ(−z_i)`` (each a difference of two small tails,
    computed as ``L + log(−expm1(ΔL))``), one across 0 ``1 − Φ(z_{i−1}) − Φ(−z_i)`` (no cancellation: both
    tails are at most ½).
    """
    tail = log_ndtr(-jnp.abs(z))  # (..., I + 1)
    left, right = tail[..., :-1], tail[..., 1:]
    low, high = z[..., :-1], z[..., 1:]
    nonempty = low < high
    below = high <= 0  # Φ(high) − Φ(low): high's tail is the larger
    above = low >= 0  # Φ(−low) − Φ(−high): low's tail is the larger
    larger = jnp.where(below, right, left)
    smaller = jnp.where(below, left, right)
    difference = jnp.where(nonempty & (below | above), smaller - larger, -1.0)
    one_side = larger + jnp.log(-jnp.expm1(difference))
    across = jnp.log1p(-(jnp.exp(left) + jnp.exp(right)))
    return jnp.where(nonempty, jnp.where(below | above, one_side, across), -jnp.inf)


def _log_tail(z: Array) -> Array:
    """log Φ(−|z|), the log of the smaller tail beyond ``z`` (elementwise): :func:`_tails`' first part."""
    return _tails(z)[0]


def _tails(z: Array) -> tuple[Array, Array]:
    """``(log Φ(−|z|), Φ(−min(|z|, 9)))`` elementwise: the log of the smaller tail beyond ``z``, exact however
    far out, and the tail itself where it is at least Φ(−9) ≈ 1e-19 (beyond, the value at 9: wherever the
    caller subtracts it from 1 the difference is below float rounding). float32: one ``erfc`` up to |z| = 9 and
    the asymptotic series (:func:`_log_ndtr_far`) beyond, both within float32 rounding of ``log_ndtr`` and
    several times cheaper; float64: ``log_ndtr``."""
    a = jnp.minimum(jnp.abs(z), 9.0)
    near = 0.5 * jax.lax.erfc(a * np.asarray(1.0 / math.sqrt(2.0), z.dtype))
    if z.dtype != jnp.float32:
        return log_ndtr(-jnp.abs(z)), near
    far = _log_ndtr_far(-jnp.maximum(jnp.abs(z), 9.0))
    return jnp.where(jnp.abs(z) < 9.0, jnp.log(near), far), near


def _log_masses_from_tails(low: Array, high: Array, tail_low: Array, tail_high: Array, linear_low: Array,
                           linear_high: Array) -> Array:
    """log(Φ(high) − Φ(low)) for standardized ends ``low <= high`` (elementwise; ±inf allowed; equal ends:
    −inf) given their tails (:func:`_tails`: ``tail_* = log Φ(−|end|)``, ``linear_*`` the tail itself, clamped
    at 9), as :func:`_log_consecutive_masses` computes it: an interval below 0 is ``Φ(high) − Φ(low)``, one
    above 0 ``Φ(−low) − Φ(−high)`` (each a difference of two small tails, ``L + log(−expm1(ΔL))``), one across 0
    ``1 − Φ(low) − Φ(−high)`` (both tails at most ½: no cancellation; a tail beyond 9 changes it by less than
    float rounding). One ``expm1`` and one ``log`` per interval."""
    nonempty = low < high
    one_side = (high <= 0) | (low >= 0)
    below = high <= 0
    larger = jnp.where(below, tail_high, tail_low)
    smaller = jnp.where(below, tail_low, tail_high)
    difference = jnp.where(nonempty & one_side, smaller - larger, -1.0)
    inner = jnp.where(one_side, -jnp.expm1(difference), 1.0 - (linear_low + linear_high))
    return jnp.where(nonempty, jnp.where(one_side, larger, 0.0) + jnp.log(inner), -jnp.inf)


def _log_ndtr_far(z: Array) -> Array:
    """log Φ(z) for z < −10 by its asymptotic series (relative error below 1e-6 there), cheaper than
    ``log_ndtr``: −z²/2 − log(−z) − ½ log 2π + log(1 − 1/z² + 3/z⁴ − 15/z⁶)."""
    inverse = 1.0 / (z * z)
    series = 1.0 - inverse * (1.0 - inverse * (3.0 - 15.0 * inverse))
    return -0.5 * z * z - 0.5 * _LOG_2PI + jnp.log(series / -z)  # one log: log(series) − log(−z)


def _ndtri_of_log(log_p: Array) -> Array:
    """Φ⁻¹(exp(log_p)), accurate also where exp(log_p) underflows: below log_p = −60 (z < −10.6), three
    Newton steps on the asymptotic log Φ from ``z ≈ −√(t − log t − log 2π)``, ``t = −2 log_p``."""
    far = log_p < _FAR_TAIL
    direct = ndtri(jnp.exp(jnp.where(far, _FAR_TAIL, log_p)))
    t = -2.0 * jnp.minimum(log_p, _FAR_TAIL)
    z = -jnp.sqrt(t - jnp.log(t) - _LOG_2PI)
    for _ in range(3):  # fixed count: no while loop under vmap
        z = jnp.minimum(z, -10.0)
        log_cdf = _log_ndtr_far(z)
        slope = jnp.exp(-0.5 * z * z - 0.5 * _LOG_2PI - log_cdf)  # d log Φ / dz
        z = z - (log_cdf - log_p) / slope
    return jnp.where(far, z, direct)


def truncated_standard_normal(rng_key: PRNGKey, lower: Array, upper: Array) -> Array:
    """One draw of N(0, 1) truncated to ``[lower, upper]`` per element (shapes broadcast), by the inverse
    CDF in log space: exact to float precision however far the interval lies in a tail (unlike
    ``jax.random.truncated_normal``, which returns the upper bound for ``[10, 11]`` in float32).

    The interval is reflected as in :func:`log_interval_mass`, ``log u = log Φ(lo) ⊕ (log U + log mass)``
    with U uniform, and ``z = Φ⁻¹(exp(log u))`` (:func:`_ndtri_of_log`), clipped into the interval
    against rounding.

    Examples
    --------
    >>> z = jax.jit(truncated_standard_normal)(jax.random.key(0), jnp.full(1000, 10.0), jnp.full(1000, 11.0))
    >>> bool(jnp.all((z >= 10.0) & (z <= 11.0))), round(float(z.mean()), 1)   # exact mean ≈ 10.098
    (True, 10.1)
    """
    lower, upper = jnp.broadcast_arrays(lower, upper)
    dtype = lower.dtype
    u = jax.random.uniform(rng_key, lower.shape, dtype, minval=jnp.finfo(dtype).tiny, maxval=1.0)
    return _truncated_standard_normal(u, lower, upper)


def _truncated_standard_normal_from_tails(u: Array, lower: Array, upper: Array, tail_lower: Array,
                                          tail_upper: Array, linear_lower: Array, linear_upper: Array) -> Array:
    """:func:`_truncated_standard_normal` given the ends' tails (:func:`_tails`), which a coordinate update has
    already computed for the interval masses: no ``log_ndtr`` here. After the reflection (``lo + hi <= 0``, so
    ``lo <= 0``): ``log Φ(lo)`` is lo's log tail, ``log Φ(hi)`` hi's when ``hi <= 0`` and ``log1p(−tail)``
    otherwise."""
    flip = lower + upper > 0
    lo, hi = jnp.where(flip, -upper, lower), jnp.where(flip, -lower, upper)
    log_lo = jnp.where(flip, tail_upper, tail_lower)
    tail_hi = jnp.where(flip, tail_lower, tail_upper)
    linear_hi = jnp.where(flip, linear_lower, linear_upper)
    log_hi = jnp.where(hi > 0, jnp.log1p(-linear_hi), tail_hi)
    nonempty = lo < hi
    log_mass = log_hi + jnp.log(-jnp.expm1(jnp.where(nonempty, log_lo - log_hi, -1.0)))
    log_p = jnp.minimum(jnp.logaddexp(log_lo, jnp.log(u) + log_mass), log_hi)
    z = jnp.clip(_ndtri_of_log(log_p), lo, hi)
    return jnp.where(flip, -z, z)


def _truncated_standard_normal(u: Array, lower: Array, upper: Array) -> Array:
    """:func:`truncated_standard_normal` at given uniforms ``u`` ∈ (0, 1)."""
    flip = lower + upper > 0
    lo, hi = jnp.where(flip, -upper, lower), jnp.where(flip, -lower, upper)
    log_lo, log_hi = log_ndtr(lo), log_ndtr(hi)
    nonempty = lo < hi
    log_mass = log_hi + jnp.log(-jnp.expm1(jnp.where(nonempty, log_lo - log_hi, -1.0)))
    log_p = jnp.minimum(jnp.logaddexp(log_lo, jnp.log(u) + log_mass), log_hi)
    z = jnp.clip(_ndtri_of_log(log_p), lo, hi)
    return jnp.where(flip, -z, z)
