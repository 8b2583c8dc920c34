"""Exact coordinate-wise Gibbs sampling of targets built from tree ensembles (``sampler="tree_gibbs"``).

The target is a product of B independent blocks of d features each,

    log p(x) = Σ_b [ −G_b(x_b)/τ + log prior_b(x_b) ],   x = (x_1, …, x_B),  x_b ∈ R^d,

where every G_b depends on x_b only through imported tree ensembles (:mod:`jaxprobe.models.trees`). A
probing question (:func:`jaxprobe.generate`) is one block; a reconstruction (:func:`jaxprobe.reconstruct`)
has one block per class and prior setting, each G_b = −log p_model(k | x_b).

Why it is exact. Along coordinate j of block b, with everything else fixed, every tree's leaf is constant
between consecutive split thresholds on feature j, so G_b is constant on each interval
``(t_{i−1}, t_i]`` of the sorted union of the thresholds ``−∞ < t_1 < … < t_m < +∞`` that the ensembles
test on feature j. The full conditional of x_j is therefore the mixture of truncated prior conditionals

    p(x_j | x_−j) = Σ_i  w_i · N(x_j; μ, σ²) 1[x_j ∈ I_i] / P_i,   w_i ∝ exp(−G_b(I_i)/τ) · P_i,

with P_i the prior conditional's mass of interval I_i (intersected with the feature's bounds). One
update evaluates the ensembles once per interval (vectorized over intervals, blocks and chains; only
the trees that test feature j are evaluated: for trees no deeper than ``COMPLETE_MAX_DEPTH`` by dense decisions
and one matrix product, :meth:`TreeEnsembleModel.scores_along_complete`, else by walking them,
:meth:`TreeEnsembleModel.raw_score_along`), draws an interval
from w, then x_j from the prior conditional truncated to it. No step size, no rejection: every draw is a
draw of the full conditional, so the chain is exact Gibbs sampling of p.

Priors (per block): the conditional of x_j given the other coordinates is a 1-D Gaussian for
:class:`~jaxprobe.priors.StandardNormal`, :class:`~jaxprobe.priors.DiagonalGaussian` and a full-covariance
:class:`~jaxprobe.priors.Gaussian` (mean ``x_j − Λ_j·(x − μ)/Λ_jj``, variance ``1/Λ_jj``, Λ the precision
matrix); flat for no prior (:class:`~jaxprobe.priors.NoPrior`, every free feature then
needs finite bounds) and :class:`~jaxprobe.priors.UniformBox` (flat on its box). A Gaussian mixture
(:class:`jaxprobe.reconstruct.priors.GaussianMixture`, kernel density estimates) is handled by **data
augmentation**: each block carries a component indicator c, drawn exactly from p(c | x_b) at the start
of every sweep; the coordinate updates then use component c's Gaussian. That is exact Gibbs sampling of
the joint p(x, c), whose x-marginal is the target; it mixes more slowly than the collapsed conditional
when components are far apart (a chain moves between components only where they overlap), but costs
one pass over the M component densities per sweep (O(M·d²)) instead of M truncated Gaussians per interval
and coordinate. Box constraints bound the intervals; fixed features
are never updated; Integer features are sampled continuously and reported rounded, as with every other
sampler. One-hot groups are refused.

Prior moves. A coordinate-wise sweep crawls along directions the prior correlates (image pixels, a
tumour's radius, perimeter and area at correlation 0.99). By default a sweep therefore ends with a few
Metropolis moves per block whose proposals keep the block's Gaussian prior invariant (preconditioned
Crank–Nicolson, x' = μ + ρ(x − μ) + √(1 − ρ²) L ξ, :data:`DEFAULT_PRIOR_MOVES`): the prior cancels in the
acceptance ratio, only the trees' likelihood ratio decides, and each costs one full ensemble evaluation per
block. They leave p invariant, so the chain stays exact; ``prior_moves=()`` gives pure Gibbs sweeps.

Cost: one sweep updates every free coordinate of every block once and makes
:attr:`TreeGibbsTarget.evaluations_per_sweep` ensemble evaluations per chain (Σ_j (m_j + 1) per block,
m_j the thresholds on feature j), each walking only the trees that test j. Random-walk Metropolis makes
one per block per step. The sampler wins where a random walk does not move: many features, deep or
many trees (a sweep's cost grows with the thresholds, RWMH's mixing time with the dimension).

Layers (as BlackJAX): :func:`init` (positions → :class:`TreeGibbsState`), :func:`build_kernel` (target,
scan → ``kernel(rng_key, state) -> (state, info)``, one sweep of one chain), :func:`sample` (all chains in
one compiled program: ``jit`` + ``lax.scan`` over sweeps, ``vmap`` over chains), returning the engine's
:class:`~jaxprobe.engine.samples.Samples` with its verdict. Targets come from a
:class:`jaxprobe.Question` (:func:`target_from_question`) or a reconstruction
(:func:`reconstruction_target`); both refuse a target that is not of this form with a ``ValueError``
naming the argument, before anything compiles.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr, ndtri

from jaxprobe.engine.samples import Samples
from jaxprobe.engine.verdict import assess, check_policy, report
from jaxprobe.engine.compiled import jit_bounded
from jaxprobe.types import Array, PRNGKey

__all__ = [
    "NAME",
    "SCANS",
    "PriorTable",
    "TreeGibbsTarget",
    "TreeGibbsState",
    "TreeGibbsInfo",
    "FeatureGroup",
    "as_tree_ensemble",
    "prior_table",
    "target_from_question",
    "reconstruction_target",
    "init",
    "build_kernel",
    "sample",
    "sample_question",
    "split_options",
    "check_prior_moves",
    "DEFAULT_PRIOR_MOVES",
    "log_interval_mass",
    "truncated_standard_normal",
]

NAME = "tree_gibbs"
"""The sampler's name in ``generate``, ``reconstruct`` and ``reconstruct_many``."""

DEFAULT_PRIOR_MOVES = (0.0, 0.3, 0.6, 0.8, 0.9, 0.95)
"""The correlations ρ of the prior moves a sweep ends with by default (Gaussian and mixture priors, no fixed
features): six Crank–Nicolson proposals from a fresh prior draw (ρ = 0) to a small step (ρ = 0.95), each one
full ensemble evaluation per block (see :func:`build_kernel`)."""

SCANS = ("systematic", "random")
"""Sweep orders: every free coordinate once in a fixed order, or as many coordinates drawn uniformly with
replacement (random scan; within each group of :attr:`TreeGibbsTarget.groups`)."""

_LOG_2PI = math.log(2.0 * math.pi)
_FAR_TAIL = -60.0  # below this log Φ, Φ⁻¹ is found by Newton's method on log Φ (exp would underflow)


# ------------------------------------------------------------------ truncated normals, stable in the tails


def log_interval_mass(lower: Array, upper: Array) -> Array:
    """log(Φ(upper) − Φ(lower)) for standardized bounds (elementwise), stable far in either tail.

    The interval is reflected to the side of 0 where both CDF values are small (``Φ(−u) − Φ(−l)`` when
    ``l + u > 0``), where ``log Φ`` keeps full relative precision; the difference is then
    ``log Φ(hi) + log(−expm1(log Φ(lo) − log Φ(hi)))``. ``−inf`` for an empty interval.
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


# ------------------------------------------------------------------ the target


def as_tree_ensemble(model: Any) -> Any:
    """The :class:`~jaxprobe.models.trees.TreeEnsembleModel` behind ``model`` (itself, an
    :class:`~jaxprobe.models.ImportedModel` of trees or a reconstruction ``JaxClassifier`` of one), or None."""
    from jaxprobe.models.trees import TreeEnsembleModel

    for candidate in (model, getattr(model, "fn", None), getattr(model, "probability_fn", None)):
        if isinstance(candidate, TreeEnsembleModel):
            return candidate
    return None


@dataclasses.dataclass(frozen=True, eq=False)
class PriorTable:
    """P priors over d features as Gaussian mixtures (or flat), NumPy on the host.

    Attributes
    ----------
    log_weights
        ``(P, M)`` log mixture weights (``−inf`` pads priors with fewer components; 0 for one Gaussian).
    means
        ``(P, M, d)`` component means.
    precisions
        ``(P, Q, d, d)`` component precision matrices; ``Q = 1`` when every component of a prior shares
        one covariance (then component c uses ``precisions[p, 0]``), else ``Q = M``.
    log_det_precisions
        ``(P, Q)`` log det of each precision.
    choleskys
        ``(P, Q, d, d)`` lower Cholesky factors of the component covariances (zeros for a flat prior).
    flat
        ``(P,)`` bool: no density (uniform on the bounds).
    low, high
        ``(P, d)`` bounds (a UniformBox prior's box; ±inf where none).
    """

    log_weights: np.ndarray
    means: np.ndarray
    precisions: np.ndarray
    log_det_precisions: np.ndarray
    flat: np.ndarray
    low: np.ndarray
    high: np.ndarray
    choleskys: np.ndarray

    @property
    def num_components(self) -> int:
        return int(self.log_weights.shape[1])

    @property
    def shared(self) -> bool:
        """Whether component c of every prior uses the prior's one precision matrix."""
        return self.precisions.shape[1] == 1


_SUPPORTED_PRIORS = ("None (flat), NoPrior, StandardNormal, DiagonalGaussian, Gaussian, UniformBox or "
                     "reconstruct.priors.GaussianMixture")


def _one_prior(prior: Any, dim: int, what: str) -> dict[str, np.ndarray]:
    """One prior as mixture arrays (``log_weights`` (M,), ``means`` (M, d), ``precisions`` (Q, d, d), ...)."""
    from jaxprobe import priors
    from jaxprobe.reconstruct.priors import GaussianMixture

    infinite = np.full(dim, np.inf)
    flat = dict(log_weights=np.zeros(1), means=np.zeros((1, dim)), precisions=np.zeros((1, dim, dim)),
                log_det=np.zeros(1), flat=True, low=-infinite, high=infinite)
    if prior is None or isinstance(prior, priors.NoPrior):
        return flat
    if isinstance(prior, priors.UniformBox):
        low, high = (np.broadcast_to(np.asarray(b, np.float64), (dim,)) for b in (prior.low, prior.high))
        return dict(flat, low=low.copy(), high=high.copy())
    if isinstance(prior, priors.StandardNormal):
        mean, precision = np.zeros(dim), np.eye(dim)
    elif isinstance(prior, priors.DiagonalGaussian):
        mean, precision = prior.mean, np.diag(prior.scale ** -2.0)
    elif isinstance(prior, priors.Gaussian):
        mean, precision = prior.mean, prior._inverse_cholesky.T @ prior._inverse_cholesky
    elif isinstance(prior, GaussianMixture):
        inverse = prior._inverse_cholesky  # (d, d) shared or (M, d, d)
        precisions = (inverse.T @ inverse)[None] if prior.shared else np.einsum("mki,mkj->mij", inverse, inverse)
        if prior.means.shape[1] != dim:
            raise ValueError(f"{what}: the GaussianMixture has {prior.means.shape[1]} features, the target {dim}")
        return dict(log_weights=np.log(prior.weights), means=prior.means, precisions=precisions,
                    log_det=-np.atleast_1d(prior._log_det), flat=False, low=-infinite, high=infinite)
    else:
        raise ValueError(f"{what}: sampler='tree_gibbs' needs a prior whose conditionals it can draw exactly: "
                         f"{_SUPPORTED_PRIORS}; got {type(prior).__name__}")
    mean = np.asarray(mean, np.float64)
    if mean.shape != (dim,):
        raise ValueError(f"{what}: the {type(prior).__name__} prior has {mean.size} features, the target {dim}")
    sign, log_det = np.linalg.slogdet(precision)
    return dict(log_weights=np.zeros(1), means=mean[None], precisions=np.asarray(precision)[None],
                log_det=np.array([log_det]), flat=False, low=-infinite, high=infinite)


def prior_table(priors: Sequence[Any], dim: int, what: str = "prior") -> PriorTable:
    """Stack ``priors`` (see the module notes for the supported ones) into one :class:`PriorTable`;
    a ``ValueError`` naming ``what`` for any other prior."""
    parts = [_one_prior(prior, dim, what) for prior in priors]
    num_components = max(part["means"].shape[0] for part in parts)
    shared = all(part["precisions"].shape[0] == 1 for part in parts)
    num_precisions = 1 if shared else num_components
    count = len(parts)
    log_weights = np.full((count, num_components), -np.inf)
    means = np.zeros((count, num_components, dim))
    precisions = np.zeros((count, num_precisions, dim, dim))
    log_det = np.zeros((count, num_precisions))
    for p, part in enumerate(parts):
        m = part["means"].shape[0]
        log_weights[p, :m], means[p, :m] = part["log_weights"], part["means"]
        q = part["precisions"].shape[0]
        # A shared precision is repeated when other priors need one per component; padding components
        # (weight 0) repeat the first.
        precisions[p], log_det[p] = part["precisions"][0], part["log_det"][0]
        precisions[p, :q], log_det[p, :q] = part["precisions"], part["log_det"]
    flat = np.array([part["flat"] for part in parts])
    choleskys = np.zeros_like(precisions)
    for p in np.flatnonzero(~flat):
        choleskys[p] = np.linalg.cholesky(np.linalg.inv(precisions[p]))
    return PriorTable(log_weights=log_weights, means=means, precisions=precisions, log_det_precisions=log_det,
                      flat=flat, low=np.stack([part["low"] for part in parts]),
                      high=np.stack([part["high"] for part in parts]), choleskys=choleskys)


def _threshold_union(ensembles: Sequence[Any], dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The sorted union of the ensembles' thresholds per feature: ``(d, M)`` float32 (+inf padded), counts."""
    per_feature = []
    for j in range(dim):  # d small unions on the host, once per target
        values = [e.split_thresholds[j, :e.split_counts[j]] for e in ensembles]
        per_feature.append(np.unique(np.concatenate(values)) if values else np.zeros(0, np.float32))
    counts = np.array([v.size for v in per_feature], np.int32)
    table = np.full((dim, max(1, int(counts.max(initial=0)))), np.inf, np.float32)
    for j, values in enumerate(per_feature):
        table[j, :values.size] = values
    return table, counts


@dataclasses.dataclass(frozen=True, eq=False)
class TreeGibbsTarget:
    """A target of the form the module docstring states, with everything a sweep needs precomputed.

    Positions are ``(B, d)`` per chain. Build one with :func:`target_from_question` or
    :func:`reconstruction_target`; the constructor checks only shapes.

    Attributes
    ----------
    ensembles
        The distinct :class:`~jaxprobe.models.trees.TreeEnsembleModel` objects G depends on.
    energy
        ``energy(outputs, block) -> G_b``: ``outputs`` a tuple with one output per ensemble (``(K,)`` or
        ``()``, as ``ensemble(x_b)`` gives), ``block`` an int32 scalar (traced).
    temperature
        τ > 0.
    num_blocks, dim
        B and d.
    prior
        The :class:`PriorTable` of the P distinct priors.
    prior_index
        ``(B,)`` int: the prior of each block.
    low, high
        ``(P, d)`` bounds per prior and feature: the prior's own box intersected with Box constraints.
    free
        ``(d,)`` bool: the features the sweeps update (the others keep their initial values).
    thresholds, threshold_counts
        ``(d, M)`` and ``(d,)``: the union over ``ensembles`` of the split thresholds per feature.
    logdensity_fn
        log p of one chain's flattened position ``(B·d,)`` (the question's own formula), for the kept draws.
    description
        For messages.

    Derived on construction: ``free_indices`` and ``groups`` (:class:`FeatureGroup`: the free features in
    at most :data:`MAX_GROUPS` groups of similar interval and tree counts, so that an update pads the
    ensemble evaluation to its group's largest counts rather than the largest overall).
    """

    ensembles: tuple
    energy: Callable[[tuple, Array], Array]
    temperature: float
    num_blocks: int
    dim: int
    prior: PriorTable
    prior_index: np.ndarray
    low: np.ndarray
    high: np.ndarray
    free: np.ndarray
    thresholds: np.ndarray
    threshold_counts: np.ndarray
    logdensity_fn: Callable[[Array], Array]
    description: str = "tree ensembles"

    def __post_init__(self):
        dim, count = self.dim, self.prior.log_weights.shape[0]
        index = self.prior_index
        if index.shape != (self.num_blocks,) or index.min() < 0 or index.max() >= count:
            raise ValueError(f"prior_index must be ({self.num_blocks},) ints in [0, {count})")
        for name in ("low", "high"):
            if getattr(self, name).shape != (count, dim):
                raise ValueError(f"{name} must have shape ({count}, {dim}), got {getattr(self, name).shape}")
        if self.free.shape != (dim,) or not self.free.any():
            raise ValueError(f"free must be a ({dim},) bool mask with at least one True")
        # Interval tables (d, I), I = M + 1: interval i of feature j is (lower, upper], evaluated at `point`.
        thresholds, counts = self.thresholds.astype(np.float32), self.threshold_counts
        num_intervals = thresholds.shape[1] + 1
        index = np.arange(num_intervals)[None, :]
        padded = np.concatenate([thresholds, np.full((dim, 1), np.inf, np.float32)], axis=1)
        lower = np.concatenate([np.full((dim, 1), -np.inf, np.float32), thresholds], axis=1)
        upper = np.where(index < counts[:, None], padded, np.inf).astype(np.float32)
        # Interval i < m is evaluated at its upper end t_i (included: x <= t_i goes left); the last one well
        # above t_m (not at nextafter(t_m): for t_m = 0 that is a subnormal, which XLA flushes to 0 on CPU).
        last = thresholds[np.arange(dim), np.maximum(counts - 1, 0)]
        with np.errstate(over="ignore"):
            above_last = np.where(counts > 0, last + np.maximum(np.abs(last), np.float32(1.0)), np.float32(0.0))
        point = np.where(index < counts[:, None], padded, above_last[:, None]).astype(np.float32)
        object.__setattr__(self, "_interval_lower", np.where(index <= counts[:, None], lower, np.inf))
        object.__setattr__(self, "_interval_upper", upper)
        object.__setattr__(self, "_interval_point", point)
        object.__setattr__(self, "_interval_valid", index <= counts[:, None])
        object.__setattr__(self, "free_indices", np.flatnonzero(self.free).astype(np.int32))
        object.__setattr__(self, "groups", _feature_groups(self, MAX_GROUPS))

    @property
    def supports_prior_moves(self) -> bool:
        """Whether :func:`build_kernel` can add prior moves: every prior Gaussian (or a mixture) and no feature
        fixed (a move redraws all d coordinates of a block)."""
        return bool(not self.prior.flat.any() and self.free.all())

    @property
    def default_prior_moves(self) -> tuple:
        """:data:`DEFAULT_PRIOR_MOVES` where they are supported, else none."""
        return DEFAULT_PRIOR_MOVES if self.supports_prior_moves else ()

    @property
    def num_intervals(self) -> int:
        """I: intervals evaluated per coordinate update (padded to the feature with most thresholds, + 1)."""
        return int(self.thresholds.shape[1] + 1)

    @property
    def evaluations_per_sweep(self) -> int:
        """Ensemble evaluations per chain made by a systematic sweep's coordinate updates: B · Σ_{free j}
        (m_j + 1), one per interval (each walks only the trees that test feature j; a random-scan sweep makes
        this many on average). Prior moves add B full evaluations each."""
        return int(self.num_blocks * np.sum(self.threshold_counts[self.free] + 1))

    @property
    def padded_evaluations_per_sweep(self) -> int:
        """What a systematic sweep computes, the intervals padded to each group's largest count (see
        :func:`_feature_groups`): B · Σ_groups (features in it) · (its intervals)."""
        return int(self.num_blocks * sum(group.features.size * group.num_intervals for group in self.groups))

    def __repr__(self) -> str:
        return (f"TreeGibbsTarget({self.description}, blocks={self.num_blocks}, dim={self.dim}, "
                f"free={int(self.free.sum())}, thresholds={int(self.threshold_counts.sum())}, "
                f"evaluations/sweep={self.evaluations_per_sweep})")


MAX_GROUPS = 4
"""At most this many feature groups (each one more branch of the update to compile)."""


class FeatureGroup(NamedTuple):
    """Free features whose updates share one padding of the ensemble evaluation: ``features`` ``(n,)`` int32
    (ascending), the intervals evaluated per update (the largest ``m_j + 1`` in the group) and, per ensemble,
    the trees walked per interval (the largest count of trees testing a feature of the group)."""

    features: np.ndarray
    num_intervals: int
    widths: tuple


def _feature_groups(target: "TreeGibbsTarget", max_groups: int) -> tuple:
    """Split the free features into at most ``max_groups`` groups so that padding each group's updates to its
    largest interval and tree counts wastes little: features sorted by their cost I_j · (U_j + 1)
    (I_j = m_j + 1 intervals, U_j trees testing j over all ensembles), cut into contiguous runs by dynamic
    programming on the padded cost Σ_g n_g · max I · (max U + 1); the fewest groups within 15 % of the best
    are kept (every group is one more branch to compile)."""
    features = target.free_indices
    intervals = target.threshold_counts[features].astype(np.int64) + 1
    per_ensemble = np.stack([e.feature_tree_counts[features] for e in target.ensembles], axis=1)  # (n, E)
    trees = per_ensemble.sum(axis=1)
    order = np.lexsort((trees, intervals, intervals * (trees + 1)))
    count = order.size
    # cost[a, b]: the padded cost of one group holding the sorted features a..b-1 (b > a).
    cost = np.full((count + 1, count + 1), np.inf)
    for a in range(count):
        top_i = np.maximum.accumulate(intervals[order[a:]])
        top_u = np.maximum.accumulate(trees[order[a:]])
        cost[a, a + 1:] = np.arange(1, count - a + 1) * top_i * (top_u + 1)
    best = [cost[0]]  # best[g - 1][b]: the first b sorted features in g groups
    cuts = [np.zeros(count + 1, np.int64)]
    for _ in range(1, max_groups):
        total = best[-1][:, None] + cost  # (a, b)
        cuts.append(np.argmin(total, axis=0))
        best.append(np.min(total, axis=0))
    totals = np.array([b[count] for b in best])
    groups_needed = int(np.flatnonzero(totals <= 1.15 * totals.min())[0]) + 1
    bounds, end = [], count
    for g in range(groups_needed - 1, -1, -1):
        start = int(cuts[g][end]) if g else 0
        bounds.append((start, end))
        end = start
    result = []
    for start, end in reversed(bounds):
        if end <= start:
            continue
        chosen = np.sort(order[start:end])
        result.append(FeatureGroup(features[chosen].astype(np.int32), int(intervals[chosen].max()),
                                   tuple(int(w) for w in per_ensemble[chosen].max(axis=0))))
    return tuple(result)


def _check_ensembles(models: Sequence[Any], dim: int, what: str) -> tuple[tuple, list[int]]:
    """Distinct tree ensembles of ``models`` and each model's slot among them; ValueError naming ``what``."""
    ensembles = []
    for model in models:
        ensemble = as_tree_ensemble(model)
        if ensemble is None:
            name = getattr(model, "estimator_name", None) or getattr(model, "name", None) or type(model).__name__
            raise ValueError(f"{what}: sampler='tree_gibbs' needs every model to be an imported tree ensemble "
                             f"(from_sklearn of a DecisionTree, RandomForest, ExtraTrees, GradientBoosting or "
                             f"an XGBoost model); {name} is not (a differentiable model: use sampler='mala' or "
                             "'nuts'; another black box: 'rwmh')")
        if ensemble.num_features != dim:
            raise ValueError(f"{what}: {ensemble.estimator_name} takes {ensemble.num_features} features, the target "
                             f"has {dim}")
        ensembles.append(ensemble)
    distinct, slots = _distinct_by_identity(ensembles)
    return tuple(distinct), slots


def _distinct_by_identity(items: Sequence[Any]) -> tuple[list, list[int]]:
    """The distinct objects of ``items`` (by identity, in first-seen order) and each item's index among them."""
    distinct, slots = [], []
    for item in items:
        slot = next((index for index, known in enumerate(distinct) if known is item), len(distinct))
        if slot == len(distinct):
            distinct.append(item)
        slots.append(slot)
    return distinct, slots


def _check_temperature(temperature: Any) -> float:
    if isinstance(temperature, jax.core.Tracer):
        raise ValueError("temperature: sampler='tree_gibbs' needs a concrete temperature, not a traced one "
                         "(a compiled sweep over temperatures); run one tree_gibbs call per temperature")
    return float(temperature)


def target_from_question(question: Any) -> TreeGibbsTarget:
    """The :class:`TreeGibbsTarget` of a :class:`jaxprobe.Question` (one block), or a ValueError naming what
    breaks the form: ``probe`` (a part not built from tree ensembles: ``localize``, ``parameter_sensitive``,
    ``fixed_label`` with ``param_dist``, a plain function, a differentiable model), ``prior`` (not one of
    those listed in the module notes; with no prior every free feature needs finite bounds),
    ``constraints`` (OneHot groups), ``temperature`` (traced).
    """
    from jaxprobe.target import gibbs

    probe, dim = question.probe, question.dim
    if probe.models is None or probe.head is None:
        raise ValueError(f"probe: sampler='tree_gibbs' needs a probe built only from imported tree ensembles "
                         f"(prediction_risky, fixed_label without param_dist, model_contrast, and sums and "
                         f"multiples of them); {probe.name} has a part it cannot see through (localize, "
                         "parameter_sensitive, fixed_label with param_dist or a plain function)")
    if not probe.models:
        raise ValueError(f"probe: {probe.name} depends on no model: nothing for sampler='tree_gibbs' to sample")
    ensembles, slots = _check_ensembles(probe.models, dim, "probe")
    tau = _check_temperature(question.temperature)
    restricted = question.restriction
    if restricted.groups:
        raise ValueError("constraints: sampler='tree_gibbs' does not sample OneHot groups (their simplex "
                         "relaxation is not coordinate-wise); use sampler='rwmh' or 'mala'")
    table = prior_table([question.prior], dim, "prior")
    low = np.maximum(table.low, restricted.low[None])
    high = np.minimum(table.high, restricted.high[None])
    free = ~restricted.is_fixed
    if np.any(low[0, free] >= high[0, free]):
        raise ValueError("prior: its box and the Box constraints leave no room for features "
                         f"{np.flatnonzero(free & (low[0] >= high[0])).tolist()}")
    if table.flat[0] and not (np.all(np.isfinite(low[0, free])) and np.all(np.isfinite(high[0, free]))):
        unbounded = np.flatnonzero(free & ~(np.isfinite(low[0]) & np.isfinite(high[0])))
        raise ValueError(f"prior: with no prior (or a flat one) sampler='tree_gibbs' needs finite Box bounds on "
                         f"every free feature (else the conditional is improper); features {unbounded[:10].tolist()} "
                         "have none: pass a prior or Box constraints")
    head = probe.head

    def energy(outputs, block):
        return head(*(outputs[slot] for slot in slots))

    logdensity = gibbs(probe.fn, tau, question.prior)  # the question's formula, in data space
    thresholds, counts = _threshold_union(ensembles, dim)
    return TreeGibbsTarget(ensembles=ensembles, energy=energy, temperature=tau, num_blocks=1, dim=dim, prior=table,
                           prior_index=np.zeros(1, np.int64), low=low, high=high, free=free, thresholds=thresholds,
                           threshold_counts=counts, logdensity_fn=logdensity, description=probe.name)


def reconstruction_target(question: Any, classifiers: Sequence[Any], priors: Sequence[Any], num_classes: int,
                          dim: int) -> TreeGibbsTarget:
    """The :class:`TreeGibbsTarget` of an all-classes reconstruction (:func:`jaxprobe.reconstruct`).

    Blocks ``b = s·K + k`` for S settings ``(classifiers[s], priors[s])`` and K classes, with
    ``G_b(x) = −log p_s(k | x)``; positions ``(S·K, d)`` in feature units (no whitening). ``question`` is the
    reconstruction's :class:`jaxprobe.Question` (with identity whitening), whose log density is reported.
    A ValueError names ``model`` (not a tree ensemble) or ``prior`` (unsupported).
    """
    ensembles, slots = _check_ensembles(classifiers, dim, "model")
    tau = _check_temperature(question.temperature)
    distinct, prior_slots = _distinct_by_identity(priors)
    table = prior_table(distinct, dim, "prior")
    bounded = np.isfinite(table.low) & np.isfinite(table.high)
    if np.any(table.flat & ~bounded.all(axis=1)):
        raise ValueError("prior: sampler='tree_gibbs' needs a proper prior (Gaussian, mixture or a bounded "
                         "UniformBox) for reconstruction")
    num_settings = len(classifiers)
    model_of_block = np.repeat(np.asarray(slots, np.int32), num_classes)  # (S·K,)
    class_of_block = np.tile(np.arange(num_classes, dtype=np.int32), num_settings)

    def energy(outputs, block):
        probabilities = jnp.stack([jnp.asarray(output) for output in outputs])  # (distinct models, K)
        return -jnp.log(probabilities[jnp.asarray(model_of_block)[block], jnp.asarray(class_of_block)[block]])

    thresholds, counts = _threshold_union(ensembles, dim)
    return TreeGibbsTarget(ensembles=ensembles, energy=energy, temperature=tau, num_blocks=num_settings * num_classes,
                           dim=dim, prior=table, prior_index=np.repeat(np.asarray(prior_slots), num_classes),
                           low=table.low, high=table.high, free=np.ones(dim, bool), thresholds=thresholds,
                           threshold_counts=counts, logdensity_fn=question.logdensity,
                           description=f"reconstruction of {ensembles[0].estimator_name}")


# ------------------------------------------------------------------ kernel


class TreeGibbsState(NamedTuple):
    """One chain: ``position`` ``(B, d)``, each block's mixture ``component`` ``(B,)`` int32, and per ensemble
    the flat leaves ``(B, T)`` int32 every block's point reaches and its raw score ``(B, G)`` (kept up to
    date by the updates, so that an update touches only the trees that test its feature; the raw scores are
    summed afresh from the leaves at the start of every sweep, so float rounding cannot accumulate)."""

    position: Array
    component: Array
    leaves: tuple
    raw: tuple


class TreeGibbsInfo(NamedTuple):
    """One sweep: ``num_fallback`` coordinate updates whose every interval had zero density (the chain was
    outside the support along that line; x_j was then drawn from its prior conditional alone), and
    ``accepted``: the prior moves' acceptance, summed over the sweep's moves (mean over blocks each)."""

    num_fallback: Array
    accepted: Array


def init(target: TreeGibbsTarget, position: Array) -> TreeGibbsState:
    """The state of one chain at ``position`` ``(B, d)``; components start at 0 (redrawn by every sweep)."""
    position = jnp.asarray(position)
    leaves = tuple(jax.vmap(ensemble.leaves)(position) for ensemble in target.ensembles)
    return TreeGibbsState(position, jnp.zeros((target.num_blocks,), jnp.int32), leaves,
                          _raw_scores(target, leaves, position.dtype))


def _raw_scores(target: TreeGibbsTarget, leaves: tuple, dtype: Any) -> tuple:
    """Each ensemble's raw score ``(B, G)`` from its leaves ``(B, T)``."""
    return tuple(jax.vmap(lambda leaf, e=ensemble: e.raw_score_of_leaves(leaf, dtype))(block)
                 for ensemble, block in zip(target.ensembles, leaves))


def _component_logits(target: TreeGibbsTarget, x: Array, prior: int) -> Array:
    """log w_c + log N(x; μ_c, Λ_c⁻¹) up to a constant, ``(M,)``, for one block's ``x`` ``(d,)``."""
    table, dtype = target.prior, x.dtype
    means = jnp.asarray(table.means, dtype)[prior]  # (M, d)
    precisions = jnp.asarray(table.precisions, dtype)[prior]  # (Q, d, d)
    centered = x[None, :] - means  # (M, d)
    if table.shared:
        quadratic = jnp.sum((centered @ precisions[0]) * centered, axis=1)
    else:
        quadratic = jnp.einsum("mi,mij,mj->m", centered, precisions, centered)
    log_det = jnp.asarray(table.log_det_precisions, dtype)[prior]
    return jnp.asarray(table.log_weights, dtype)[prior] + 0.5 * log_det - 0.5 * quadratic


def check_prior_moves(target: TreeGibbsTarget, prior_moves: Any) -> tuple:
    """``prior_moves`` as a tuple of floats in [0, 1), or a ValueError naming ``prior_moves``."""
    if prior_moves is None:
        return target.default_prior_moves
    try:
        moves = tuple(float(value) for value in prior_moves)
    except (TypeError, ValueError):
        raise ValueError(f"prior_moves must be a sequence of correlations in [0, 1), got {prior_moves!r}") from None
    if not all(0.0 <= value < 1.0 for value in moves):
        raise ValueError(f"prior_moves must be correlations in [0, 1), got {moves}")
    if moves and not target.supports_prior_moves:
        raise ValueError("prior_moves need a Gaussian or mixture prior on every block and no fixed feature; "
                         "pass prior_moves=() here")
    return moves


def _inverse_cdf_choice(log_weight: Array, u: Array) -> Array:
    """Index i with probability ∝ exp(log_weight[..., i]) by the inverse CDF at ``u`` ∈ (0, 1) ``(...)``:
    one uniform per draw (a Gumbel argmax needs one per category). Rows need one finite weight."""
    weight = jnp.exp(log_weight - jnp.max(log_weight, axis=-1, keepdims=True))
    cumulative = jnp.cumsum(weight, axis=-1)
    chosen = jnp.sum(cumulative < (u * cumulative[..., -1])[..., None], axis=-1)
    # Rounding can only push the target past the last positive weight: clip to it.
    last = log_weight.shape[-1] - 1 - jnp.argmax(jnp.flip(weight > 0, axis=-1), axis=-1)
    return jnp.minimum(chosen, last)


def build_kernel(target: TreeGibbsTarget, scan: str = "systematic", prior_moves: Sequence[float] = ()) -> Callable:
    """One sweep of one chain: ``kernel(rng_key, state) -> (state, info)``.

    A sweep makes one update per free feature, every block at once (:attr:`TreeGibbsTarget.groups` says
    which features share a padding of the ensemble evaluation): with ``scan="systematic"`` every feature
    once, group after group, in index order within a group; with ``"random"`` each group's slots take
    features of that group drawn uniformly with replacement (the choice never depends on the state, so
    every update leaves p invariant). Mixture priors first redraw each block's component from p(c | x_b).
    The sweep's random numbers are drawn up front (two uniforms per block and update); an update chooses
    its interval by the inverse CDF and its value by :func:`truncated_standard_normal`'s inverse CDF.

    ``prior_moves`` ``(ρ_1, …)``: the sweep ends with one Metropolis move per ρ and block whose proposal keeps
    the block's Gaussian prior (its mixture component's) invariant, x' = μ + ρ (x − μ) + √(1 − ρ²) L ξ with
    L Lᵀ the covariance and ξ ~ N(0, I) (preconditioned Crank–Nicolson; ρ = 0 proposes an independent prior
    draw), accepted with probability min(1, exp(−(G_b(x') − G_b(x))/τ)): the prior ratio cancels against
    the proposal's, so only the likelihood decides. A coordinate-wise sweep moves slowly along directions
    the prior correlates (a ridge at correlation 0.99 takes ~100 sweeps to cross); these moves cross it in
    one step at the price of one full ensemble evaluation per block each. Every move leaves p invariant, so
    the sweep stays exact. Needs :attr:`TreeGibbsTarget.supports_prior_moves`.
    """
    if scan not in SCANS:
        raise ValueError(f"scan must be one of {SCANS}, got {scan!r}")
    prior_moves = check_prior_moves(target, prior_moves)
    table = target.prior
    ensembles, energy, tau = target.ensembles, target.energy, target.temperature
    num_blocks, groups = target.num_blocks, target.groups
    size = max(group.num_intervals for group in groups)  # intervals per update in the draw (padded, masked)
    mixtures = table.num_components > 1
    blocks = np.arange(num_blocks, dtype=np.int32)
    slot_group = np.concatenate([np.full(g.features.size, i, np.int32) for i, g in enumerate(groups)])
    slot_feature = np.concatenate([g.features for g in groups]).astype(np.int32)
    group_starts = np.concatenate([[0], np.cumsum([g.features.size for g in groups])[:-1]])
    interval_point = target._interval_point[:, :size]
    interval_lower = target._interval_lower[:, :size]
    # Interval i of feature j is (breakpoints[j, i], breakpoints[j, i + 1]] (padding intervals at +inf, empty).
    interval_breakpoints = np.concatenate([target._interval_lower[:, :1], target._interval_upper[:, :size]], axis=1)
    interval_valid = target._interval_valid[:, :size]

    def group_energies(group: FeatureGroup, x: Array, feature: Array, leaves: tuple, raws: tuple) -> tuple:
        """Every block's G_b with x_j set to each interval's point ``(B, I_g)`` (I_g: the group's intervals;
        padding: +inf), and per ensemble the raw scores ``(B, I_g, G)`` there and, for an ensemble without
        complete trees, the moving trees' leaves ``(B, I_g, U_g)`` (None for complete ones: their leaves are
        recomputed at the drawn point, :meth:`TreeEnsembleModel.update_leaves`)."""
        points = jnp.asarray(interval_point[:, :group.num_intervals])[feature].astype(x.dtype)

        def one_block(x_block: Array, block: Array, block_leaves: tuple, block_raws: tuple) -> tuple:
            raws, moved = [], []
            for ensemble, width, leaf, raw in zip(ensembles, group.widths, block_leaves, block_raws):
                if ensemble.complete_depth is not None:  # dense decisions and one matrix product, no walk
                    raws.append(ensemble.scores_along_complete(x_block, feature, points, raw, width))
                    moved.append(None)
                else:
                    score, walked = ensemble.scores_along(x_block, feature, points, leaf, raw, width)
                    raws.append(score)
                    moved.append(walked)
            outputs = tuple(jax.vmap(ensemble.output_from_raw)(raw) for ensemble, raw in zip(ensembles, raws))
            energies = jax.vmap(lambda *one: energy(one, block))(*outputs)
            return energies, tuple(raws), tuple(moved)

        energies, raws, moved = jax.vmap(one_block)(x, jnp.asarray(blocks), leaves, raws)
        return energies.astype(x.dtype), raws, moved

    def update(state: TreeGibbsState, feature: Array, group: FeatureGroup, u: Array
               ) -> tuple[TreeGibbsState, Array]:
        """Draw x_j (j = ``feature``, traced, a feature of ``group``) of every block from its full conditional;
        ``u`` ``(B, 2)``. Arrays span the group's I_g intervals only (the others are padding for it)."""
        x, component, leaves, raws = state
        dtype = x.dtype
        size = group.num_intervals
        energies, interval_raws, interval_leaves = group_energies(group, x, feature, leaves, raws)
        lower = jnp.asarray(interval_lower[:, :size], dtype)[feature]
        valid = jnp.asarray(interval_valid[:, :size])[feature]
        prior = jnp.asarray(target.prior_index)  # (B,)
        low = jnp.asarray(target.low, dtype)[prior, feature][:, None]  # (B, 1)
        high = jnp.asarray(target.high, dtype)[prior, feature][:, None]
        # Breakpoints of the consecutive intervals, clipped to the bounds: interval i is (c_i, c_{i+1}]
        # (invalid padding intervals lie at +inf, empty).
        ends = jnp.clip(jnp.asarray(interval_breakpoints[:, :size + 1], dtype)[feature][None], low, high)
        a, b = ends[:, :-1], ends[:, 1:]  # (B, I): interval i ∩ bounds is (a_i, b_i]
        usable = valid[None] & (a < b)
        # The prior conditional of x_j given the block's other coordinates (its component's Gaussian).
        precision_row = jnp.asarray(table.precisions, dtype)[prior, component if not table.shared else 0, feature]
        mean = jnp.asarray(table.means, dtype)[prior, component]  # (B, d)
        is_flat = jnp.asarray(table.flat)[prior]
        safe_jj = jnp.where(is_flat, 1.0, precision_row[:, feature])
        shift = jnp.sum(precision_row * (x - mean), axis=1) / safe_jj
        conditional_mean = jnp.where(is_flat, 0.0, x[:, feature] - shift)[:, None]  # (B, 1)
        conditional_sd = jax.lax.rsqrt(safe_jj)[:, None]
        # One tail per breakpoint (I + 1), materialized: fused into its consumers XLA would evaluate the special
        # functions again for every read of every slice.
        z = (ends - conditional_mean) / conditional_sd  # (B, I + 1)
        tails, linear = jax.lax.optimization_barrier(_tails(z))
        gaussian_mass = _log_masses_from_tails(z[:, :-1], z[:, 1:], tails[:, :-1], tails[:, 1:], linear[:, :-1],
                                               linear[:, 1:])
        flat_mass = jnp.log(jnp.where(usable, b - a, 1.0))
        log_mass = jnp.where(usable, jnp.where(is_flat[:, None], flat_mass, gaussian_mass), -jnp.inf)
        log_weight = -energies / tau + log_mass
        log_weight = jnp.where(jnp.isnan(log_weight), -jnp.inf, log_weight)
        # Outside the support along this whole line (a pure leaf of another class, ...): draw x_j from the
        # prior conditional alone; a chain in the support never leaves it (zero-weight intervals stay 0).
        fallback = ~jnp.any(log_weight > -jnp.inf, axis=1)  # (B,)
        log_weight = jnp.where(fallback[:, None], log_mass, log_weight)
        # Materialized once: fused into the draw's max, exp and cumulative sum, XLA would evaluate the masses'
        # special functions again for every read (a cumulative sum reads each entry up to I times).
        log_weight = jax.lax.optimization_barrier(log_weight)
        chosen = _inverse_cdf_choice(log_weight, u[:, 0])[:, None]  # (B, 1)
        a_i = jnp.take_along_axis(a, chosen, axis=1)[:, 0]
        b_i = jnp.take_along_axis(b, chosen, axis=1)[:, 0]
        m, s = conditional_mean[:, 0], conditional_sd[:, 0]
        pick_end = lambda table, shift: jnp.take_along_axis(table, chosen + shift, axis=1)[:, 0]  # noqa: E731
        gaussian = m + s * _truncated_standard_normal_from_tails(
            u[:, 1], pick_end(z, 0), pick_end(z, 1), pick_end(tails, 0), pick_end(tails, 1), pick_end(linear, 0),
            pick_end(linear, 1))
        value = jnp.where(is_flat, a_i + u[:, 1] * (b_i - a_i), gaussian)
        # Exactly inside the interval as the trees see it (float32 x > lower, x <= upper) and the bounds.
        lower_i = jnp.take_along_axis(jnp.broadcast_to(lower[None], a.shape), chosen, axis=1)[:, 0]
        # (The smallest normal float above a zero or subnormal lower end: subnormals are flushed to 0.)
        lower32 = lower_i.astype(jnp.float32)
        tiny = jnp.finfo(jnp.float32).tiny
        just_above = jnp.where(jnp.abs(lower32) < tiny, tiny, jnp.nextafter(lower32, jnp.float32(jnp.inf)))
        just_above = just_above.astype(dtype)
        value = jnp.clip(value, jnp.maximum(just_above, a_i), b_i)
        x = x.at[:, feature].set(value)
        # The trees see x_j in the chosen interval: its raw scores and leaves are the point's now.
        pick = lambda table: jnp.take_along_axis(table, chosen[:, :, None], axis=1)[:, 0]  # noqa: E731
        raws = tuple(pick(table) for table in interval_raws)
        leaves = tuple(
            jax.vmap(lambda leaf, point, e=ensemble, w=width: e.update_leaves(leaf, point, feature, w))(block, x)
            if table is None else
            jax.vmap(lambda leaf, row, e=ensemble: e.set_leaves(leaf, feature, row))(block, pick(table))
            for ensemble, width, block, table in zip(ensembles, group.widths, leaves, interval_leaves))
        return TreeGibbsState(x, component, leaves, raws), jnp.sum(fallback.astype(jnp.int32))

    def kernel(rng_key: PRNGKey, state: TreeGibbsState) -> tuple[TreeGibbsState, TreeGibbsInfo]:
        key_component, key_order, key_updates, key_moves = jax.random.split(rng_key, 4)
        dtype = state.position.dtype
        state = state._replace(raw=_raw_scores(target, state.leaves, dtype))  # fresh sums: no drift
        if mixtures:  # data augmentation: c_b ~ p(c | x_b), exactly
            logits = jax.vmap(lambda x, p: _component_logits(target, x, p))(state.position,
                                                                           jnp.asarray(target.prior_index))
            u = jax.random.uniform(key_component, (num_blocks,), dtype, minval=jnp.finfo(dtype).tiny)
            state = state._replace(component=_inverse_cdf_choice(logits, u).astype(jnp.int32))
        features = jnp.asarray(slot_feature)
        if scan == "random":  # each slot: a feature of its group, uniformly with replacement
            starts = np.concatenate([[0], np.cumsum([g.features.size for g in groups])[:-1]])
            sizes = np.array([g.features.size for g in groups])[slot_group]
            pick = jax.random.randint(key_order, slot_feature.shape, 0, jnp.asarray(sizes))
            features = features[jnp.asarray(starts[slot_group]) + pick]
        uniforms = jax.random.uniform(key_updates, (slot_feature.size, num_blocks, 2), dtype,
                                      minval=jnp.finfo(dtype).tiny)

        # One scan per group (its shapes static), in slot order: no branch on the group inside the loop.
        fallbacks = []
        for index, group in enumerate(groups):
            slots = slice(int(group_starts[index]), int(group_starts[index]) + group.features.size)
            state, counts = jax.lax.scan(lambda carry, slot, group=group: update(carry, slot[0], group, slot[1]),
                                         state, (features[slots], uniforms[slots]))
            fallbacks.append(jnp.sum(counts))
        accepted = jnp.zeros((), dtype)
        if prior_moves:  # one compiled move, scanned over the correlations
            state, accepted_each = jax.lax.scan(
                lambda carry, move: prior_move(move[0], carry, move[1]), state,
                (jax.random.split(key_moves, len(prior_moves)), jnp.asarray(prior_moves, dtype)))
            accepted = jnp.sum(accepted_each)
        return state, TreeGibbsInfo(sum(fallbacks), accepted)

    def current_energies(state: TreeGibbsState) -> Array:
        """G_b of every block ``(B,)`` from the kept raw scores."""
        outputs = [jax.vmap(ensemble.output_from_raw)(raw) for ensemble, raw in zip(ensembles, state.raw)]
        return jax.vmap(lambda block, *one: energy(one, block))(jnp.asarray(blocks), *outputs)

    def prior_move(rng_key: PRNGKey, state: TreeGibbsState, correlation: Array) -> tuple[TreeGibbsState, Array]:
        """A Metropolis move per block that keeps the block's Gaussian prior (component) invariant: the
        preconditioned Crank–Nicolson proposal x' = μ + ρ (x − μ) + √(1 − ρ²) L ξ, accepted with probability
        min(1, exp(−(G_b(x') − G_b(x))/τ)) (the prior cancels) and 0 outside the bounds. ρ = 0 proposes a fresh
        prior draw. Flat priors stay put. Returns the state and the blocks' mean acceptance."""
        x, component = state.position, state.component
        dtype = x.dtype
        key_normal, key_accept = jax.random.split(rng_key)
        prior = jnp.asarray(target.prior_index)
        index = component if not table.shared else jnp.zeros_like(component)
        mean = jnp.asarray(table.means, dtype)[prior, component]  # (B, d)
        cholesky = jnp.asarray(table.choleskys, dtype)[prior, index]  # (B, d, d)
        noise = jax.random.normal(key_normal, x.shape, dtype)
        proposal = mean + correlation * (x - mean) + jnp.sqrt(1.0 - correlation**2) * jnp.einsum(
            "bij,bj->bi", cholesky, noise)
        inside = jnp.all((proposal >= jnp.asarray(target.low, dtype)[prior])
                         & (proposal <= jnp.asarray(target.high, dtype)[prior]), axis=1)
        leaves = tuple(jax.vmap(ensemble.leaves)(proposal) for ensemble in ensembles)
        moved = TreeGibbsState(proposal, component, leaves, _raw_scores(target, leaves, dtype))
        log_ratio = -(current_energies(moved) - current_energies(state)) / tau
        u = jax.random.uniform(key_accept, (num_blocks,), dtype, minval=jnp.finfo(dtype).tiny)
        accept = (jnp.log(u) < jnp.where(jnp.isnan(log_ratio), -jnp.inf, log_ratio)) & inside \
            & ~jnp.asarray(table.flat)[prior]
        keep = lambda new, old: jnp.where(accept.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)  # noqa: E731
        return jax.tree.map(keep, moved, state), jnp.mean(accept.astype(dtype))

    return kernel


# ------------------------------------------------------------------ all chains in one program


@jit_bounded(static_argnames=("target",))
def _init(target, positions):
    """:func:`init` of every chain, ``positions`` ``(C, B, d)`` (compiled once per target)."""
    return jax.vmap(lambda position: init(target, position))(positions)


@jit_bounded(static_argnames=("target", "scan", "prior_moves"))
def _run(chain_keys, states, first_sweep, sweeps, target, scan, prior_moves):
    """One chunk for every chain: draw i comes after ``sweeps[i]`` (traced, ``(N,)``) more sweeps.

    Returns states, positions ``(C, N, B, d)``, log densities ``(C, N)``, the sweeps with a fallback
    update ``(C,)`` and the prior moves' summed acceptance ``(C,)``. Sweep s of chain c uses the key
    ``fold_in(key_c, s)``, so the draws do not depend on how a run is cut into chunks; warmup (draws
    discarded) and a short last chunk (trailing zeros in ``sweeps``) run the same compiled program.
    """
    kernel = build_kernel(target, scan, prior_moves)
    logdensity = target.logdensity_fn
    starts = first_sweep + jnp.cumsum(sweeps) - sweeps  # first sweep index of each draw

    def one_chain(key, state):
        def one_draw(carry, draw):
            start, count = draw

            def one_sweep(i, inner):
                state, fallbacks, accepted = inner
                state, info = kernel(jax.random.fold_in(key, start + i), state)
                return state, fallbacks + (info.num_fallback > 0).astype(jnp.int32), accepted + info.accepted

            carry = jax.lax.fori_loop(0, count, one_sweep, carry)
            position = carry[0].position
            return carry, (position, logdensity(position.reshape(-1)))

        zero = (jnp.zeros((), jnp.int32), jnp.zeros((), state.position.dtype))
        (state, fallbacks, accepted), (positions, values) = jax.lax.scan(one_draw, (state, *zero), (starts, sweeps))
        return state, positions, values, fallbacks, accepted

    return jax.vmap(one_chain)(chain_keys, states)


def _spread(total: int, parts: int) -> np.ndarray:
    """``total`` sweeps over ``parts`` draws, as evenly as possible: ``(parts,)`` int32."""
    base, extra = divmod(total, parts)
    return (base + (np.arange(parts) < extra)).astype(np.int32)


def _check_positions(target: TreeGibbsTarget, positions: Any) -> np.ndarray:
    positions = np.asarray(positions)
    shape = (target.num_blocks, target.dim)
    if positions.ndim != 3 or positions.shape[1:] != shape:
        raise ValueError(f"initial_positions must have shape (num_chains, {shape[0]}, {shape[1]}), got "
                         f"{positions.shape}")
    if not np.issubdtype(positions.dtype, np.floating) or not np.all(np.isfinite(positions)):
        raise ValueError("initial_positions must be finite floating-point values")
    if positions.dtype == np.float64 and not jax.config.jax_enable_x64:
        raise TypeError("initial_positions is float64 but jax_enable_x64 is off: enable it or pass float32")
    low, high = target.low[target.prior_index], target.high[target.prior_index]  # (B, d)
    if np.any(positions < low) or np.any(positions > high):
        raise ValueError("initial_positions must lie inside the prior's box and the Box bounds")
    return positions


def sample(
    rng_key: PRNGKey,
    target: TreeGibbsTarget,
    initial_positions: Any,
    *,
    num_samples: int = 1000,
    num_warmup: int = 100,
    thin: int = 1,
    scan: str = "systematic",
    prior_moves: Sequence[float] | None = None,
    chunk_size: int | None = None,
    progress: bool = False,
    event_shape: tuple[int, ...] | None = None,
    convergence: str = "warn",
) -> Samples:
    """Draw ``num_samples`` kept draws (``thin`` sweeps apart) from each chain of ``target``.

    Parameters
    ----------
    rng_key
        A ``jax.random.key``.
    target
        A :class:`TreeGibbsTarget`.
    initial_positions
        ``(C, B, d)`` starting points inside the bounds (fixed features at their values). A start outside
        the support (zero density) is allowed: coordinates are drawn from the prior until a line through
        the chain meets the support, and from the exact conditional from then on.
    num_samples, num_warmup, thin
        Kept draws per chain, sweeps discarded first (burn-in; nothing to adapt), sweeps per kept draw.
    scan
        ``"systematic"`` or ``"random"`` (see :func:`build_kernel`).
    prior_moves
        Correlations ρ of the prior-preserving Metropolis moves that end every sweep (:func:`build_kernel`);
        None: ``target.default_prior_moves`` (:data:`DEFAULT_PRIOR_MOVES` for Gaussian and mixture priors
        without fixed features, else none); ``()``: pure coordinate-wise Gibbs.
    chunk_size
        Kept draws per compiled chunk (default: about 10 chunks); the draws do not depend on it.
    progress
        A tqdm bar over sweeps.
    event_shape
        Shape of one chain's position in the returned ``Samples`` (default ``(B, d)``, ``(d,)`` when B = 1).
    convergence
        ``"warn"``, ``"error"`` or ``"ignore"``, as :func:`jaxprobe.sample`.

    Returns
    -------
    Samples
        ``positions`` ``(C, N, *event_shape)``, ``logdensity`` ``(C, N)`` (``target.logdensity_fn``),
        ``acceptance_rate`` 1 (every Gibbs update moves; the prior moves' own acceptance is in
        :class:`TreeGibbsInfo`, kernel level), ``step_size`` NaN (none), ``num_nonfinite`` the
        sweeps per chain with a fallback update (a chain outside the support), ``sampler="tree_gibbs"``
        and the :class:`~jaxprobe.engine.verdict.Verdict`.
    """
    from jaxprobe.engine.api import _Progress, canonicalize_key, check_settings

    rng_key = canonicalize_key(rng_key)
    num_samples, num_warmup, thin, chunk_size, _ = check_settings(num_samples=num_samples, num_warmup=num_warmup,
                                                                  thin=thin, chunk_size=chunk_size)
    if scan not in SCANS:
        raise ValueError(f"scan must be one of {SCANS}, got {scan!r}")
    check_policy(convergence)
    prior_moves = check_prior_moves(target, prior_moves)
    positions = _check_positions(target, initial_positions)
    num_chains = positions.shape[0]
    if event_shape is None:
        event_shape = (target.dim,) if target.num_blocks == 1 else (target.num_blocks, target.dim)
    event_shape = tuple(int(size) for size in event_shape)
    if int(np.prod(event_shape)) != target.num_blocks * target.dim:
        raise ValueError(f"event_shape {event_shape} does not hold {target.num_blocks} x {target.dim} values")

    chain_keys = jax.random.split(rng_key, num_chains)
    states = _init(target, jnp.asarray(positions))
    per_chunk = min(chunk_size or max(1, math.ceil(num_samples / 10)), num_samples)
    bar = _Progress(progress, num_warmup + num_samples * thin, f"{NAME} x{num_chains}")
    try:
        if num_warmup:  # burn-in: the sampling program with its draws dropped (one compiled program in all)
            states = _run(chain_keys, states, 0, _spread(num_warmup, per_chunk), target, scan, prior_moves)[0]
            bar.update(num_warmup, 1.0, "burn-in")
        pieces, values, fallbacks = [], [], np.zeros(num_chains, np.int64)
        done = 0
        while done < num_samples:  # host loop over a few chunks, not over steps
            count = min(per_chunk, num_samples - done)
            sweeps = np.where(np.arange(per_chunk) < count, thin, 0).astype(np.int32)
            states, chunk, logdensity, chunk_fallbacks, _ = _run(
                chain_keys, states, num_warmup + done * thin, sweeps, target, scan, prior_moves)
            pieces.append(np.asarray(chunk)[:, :count])
            values.append(np.asarray(logdensity)[:, :count])
            fallbacks += np.asarray(chunk_fallbacks)
            done += count
            bar.update(count * thin, 1.0, "sampling")
    finally:
        bar.close()
    draws = np.concatenate(pieces, axis=1)
    result = Samples(
        positions=draws.reshape((num_chains, num_samples) + event_shape),
        logdensity=np.concatenate(values, axis=1),
        acceptance_rate=np.ones(num_chains),
        step_size=np.full(num_chains, np.nan),
        num_divergent=np.zeros(num_chains, np.int64),
        num_nonfinite=fallbacks,
        num_gradient_evaluations=np.zeros(num_chains, np.int64),
        sampler=NAME,
        num_warmup=num_warmup,
        thin=thin,
    )
    result = dataclasses.replace(result, verdict=assess(result))
    report(result.verdict, convergence, stacklevel=2)
    return result


# ------------------------------------------------------------------ front ends (generate, reconstruct)

#: ``sample_options`` of ``generate`` / ``reconstruct`` that tree_gibbs uses; the others have no meaning for
#: an exact Gibbs sampler (no step size, no mass matrix, no adaptation) and are refused by name.
_OPTIONS = ("thin", "chunk_size", "progress", "sampler_options", "convergence")


def split_options(options: dict[str, Any]) -> dict[str, Any]:
    """Validate the engine options handed to a front end with ``sampler="tree_gibbs"``: returns the keyword
    arguments of :func:`sample` (``thin``, ``chunk_size``, ``progress``, ``scan``, ``convergence``); a
    ValueError names any option tree_gibbs has no use for (``step_size``, ``checkpoint``, ...)."""
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise ValueError(f"{unknown[0]}: not used by sampler='tree_gibbs' (exact Gibbs sweeps: no step size, mass "
                         f"matrix, adaptation, devices or checkpoints); it takes {', '.join(_OPTIONS)}")
    result = {key: value for key, value in options.items() if key != "sampler_options"}
    extra = dict(options.get("sampler_options") or {})
    scan = extra.pop("scan", "systematic")
    prior_moves = extra.pop("prior_moves", None)
    if extra:
        raise ValueError(f"sampler_options: sampler='tree_gibbs' takes 'scan' ({' or '.join(SCANS)}) and "
                         f"'prior_moves' (correlations in [0, 1)), got {sorted(extra)}")
    if scan not in SCANS:
        raise ValueError(f"sampler_options: scan must be one of {SCANS}, got {scan!r}")
    if prior_moves is not None:
        try:
            prior_moves = tuple(float(value) for value in prior_moves)
        except (TypeError, ValueError):
            raise ValueError(f"sampler_options: prior_moves must be a sequence of correlations in [0, 1), got "
                             f"{prior_moves!r}") from None
        if not all(0.0 <= value < 1.0 for value in prior_moves):
            raise ValueError(f"sampler_options: prior_moves must be correlations in [0, 1), got {prior_moves}")
    result.update(scan=scan, prior_moves=prior_moves)
    return result


def sample_question(rng_key: PRNGKey, question: Any, *, num_chains: int, num_samples: int, init: Any = None,
                    num_warmup: int = 100, dtype: Any = None, **options: Any) -> Samples:
    """Sample a :class:`jaxprobe.Question` of the tree form (:func:`target_from_question`): ``positions``
    ``(C, N, d)`` in data space (relaxed: the caller reports Integer features rounded), ``logdensity`` in data
    space, −G(x)/τ + log prior(x).

    Keys as :func:`jaxprobe.generate.answer`: ``rng_key`` splits into (initial positions, sampling). Starting
    points: ``init`` ``(C, d)`` in data space (checked against the constraints), else the question's own
    (:meth:`jaxprobe.Question.initial_positions`, mapped to data space). ``options``: see :func:`split_options`.
    """
    from jaxprobe.engine.api import canonicalize_key

    rng_key = canonicalize_key(rng_key)
    kwargs = split_options(options)  # option and target errors before anything compiles
    target = target_from_question(question)
    kwargs["prior_moves"] = check_prior_moves(target, kwargs["prior_moves"])
    key_init, key_sample = jax.random.split(rng_key)
    if init is not None:
        init = np.asarray(init)
        if init.ndim != 2 or init.shape != (num_chains, question.dim):
            raise ValueError(f"init must have shape (num_chains={num_chains}, {question.dim}), got {init.shape}")
        if not np.issubdtype(init.dtype, np.floating) or not np.all(np.isfinite(init)):
            raise ValueError("init must be finite floating-point values")
        question.to_unconstrained(init)  # raises when init breaks a constraint
        start = init
    else:
        dtype = np.dtype(dtype or np.float32)
        z = jax.jit(question.initial_positions, static_argnums=(1, 2))(key_init, int(num_chains), dtype)
        start = np.asarray(jax.jit(jax.vmap(question.to_data))(z))
    # Box bounds are closed here: a start the bijection put on a bound by rounding is moved inside them.
    start = np.clip(start, target.low[0], target.high[0]).astype(start.dtype)
    return sample(key_sample, target, start[:, None, :], num_samples=num_samples, num_warmup=num_warmup,
                  event_shape=(question.dim,), **kwargs)
