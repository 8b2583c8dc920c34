"""Priors for ``jaxprobe.gibbs``: log densities of one position, and samplers for initial positions.

Each prior is a frozen dataclass, callable as ``prior(x) -> scalar log density``
(normalized), with ``prior.sample(rng_key, num_chains)`` to draw initial positions.
Parameters (means, scales, covariances, bounds) may be NumPy arrays, pandas Series/DataFrames
or nested lists; they are kept in float64 (read-only copies) and cast to the positions' dtype when evaluated.

Priors that exact coordinate-wise samplers can condition (every one here) implement :class:`MixtureFormPrior`:
``prior.mixture_form(d)`` writes the prior as a Gaussian mixture, or as flat, on a box (:class:`GaussianMixtureForm`),
whose one-feature conditionals are 1-D Gaussians per component (the tree-ensemble Gibbs sampler of
:mod:`jaxprobe.samplers` reads it). A prior class of one's own declares the same method to be sampled that way.

Priors are values: two priors of the same class with equal parameters (arrays compared by dtype, shape
and content) are equal and hash alike (:class:`jaxprobe._values.ValueObject`), so a question asked again
with ``prior=DiagonalGaussian(mean, sd)`` written inline reuses its compiled programs.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe._inputs import as_float_array
from jaxprobe._values import ValueObject, frozen_array
from jaxprobe.types import Array, ArrayTree, PRNGKey

__all__ = ["GaussianMixtureForm", "MixtureFormPrior", "StandardNormal", "DiagonalGaussian", "Gaussian", "UniformBox",
           "NoPrior", "standard_normal",
           "diagonal_gaussian", "gaussian", "uniform_box", "none"]

_LOG_2PI = math.log(2.0 * math.pi)


class GaussianMixtureForm(NamedTuple):
    """A prior on d features as a mixture of M Gaussians, or as flat, restricted to a box (NumPy, float64).

    ``log_weights`` ``(M,)``; ``means`` ``(M, d)``; ``precisions`` ``(Q, d, d)``, the components' precision
    matrices (``Q = 1``: one shared by every component, else ``Q = M``); ``log_det_precisions`` ``(Q,)``;
    ``flat``: no density, uniform on the box (the Gaussian fields are then placeholders); ``low``, ``high``
    ``(d,)``: the prior's support (±inf where unbounded). Given the other features, one feature of one
    component is then a 1-D Gaussian: mean ``x_j − Λ_j·(x − μ)/Λ_jj``, variance ``1/Λ_jj``.

    Examples
    --------
    >>> form = StandardNormal().mixture_form(2)              # N(0, I₂): one component
    >>> form.means.shape, form.precisions.shape, form.flat
    ((1, 2), (1, 2, 2), False)
    """

    log_weights: np.ndarray
    means: np.ndarray
    precisions: np.ndarray
    log_det_precisions: np.ndarray
    flat: bool
    low: np.ndarray
    high: np.ndarray

    @classmethod
    def flat_box(cls, dim: int, low: Any = -np.inf, high: Any = np.inf) -> "GaussianMixtureForm":
        """The flat prior on ``[low, high]`` (scalars or ``(d,)``; default the whole space)."""
        low, high = (np.broadcast_to(np.asarray(bound, np.float64), (dim,)).copy() for bound in (low, high))
        return cls(np.zeros(1), np.zeros((1, dim)), np.zeros((1, dim, dim)), np.zeros(1), True, low, high)

    @classmethod
    def gaussian(cls, mean: Any, precision: Any, log_det_precision: float, dim: int,
                 name: str) -> "GaussianMixtureForm":
        """One Gaussian ``N(mean, precision⁻¹)`` on the whole space; a ValueError if it does not have ``dim``
        features (``name``: the prior's, for the message)."""
        mean = np.asarray(mean, np.float64)
        if mean.shape != (dim,):
            raise ValueError(f"the {name} prior has {mean.size} features, the target {dim}")
        infinite = np.full(dim, np.inf)
        return cls(np.zeros(1), mean[None], np.asarray(precision, np.float64)[None],
                   np.array([log_det_precision], np.float64), False, -infinite, infinite)


@runtime_checkable
class MixtureFormPrior(Protocol):
    """A prior that can write itself as a Gaussian mixture or a flat box: ``mixture_form(dim) ->``
    :class:`GaussianMixtureForm` (a ValueError when it does not fit ``dim`` features). Exact coordinate-wise
    samplers (the tree-ensemble Gibbs sampler, :mod:`jaxprobe.samplers`) sample the priors that implement it.

    Examples
    --------
    >>> isinstance(StandardNormal(), MixtureFormPrior), isinstance(NoPrior(), MixtureFormPrior)
    (True, True)
    """

    def mixture_form(self, dim: int) -> GaussianMixtureForm: ...


@dataclasses.dataclass(frozen=True, eq=False)
class StandardNormal(ValueObject):
    """N(0, I) on every coordinate of a position (array or pytree): log p = −½|x|² − (D/2) log 2π.

    ``event_shape`` is only needed by :meth:`sample`.

    Examples
    --------
    >>> prior = StandardNormal()
    >>> round(float(prior(jnp.zeros(2))), 4)                 # −log 2π at the origin in 2-D
    -1.8379
    >>> prior.sample(jax.random.key(0), 3, (2,)).shape         # 3 chains' starting points
    (3, 2)
    """

    event_shape: tuple[int, ...] | None = None

    def __call__(self, x: ArrayTree) -> Array:
        leaves = jax.tree_util.tree_leaves(x)
        size = sum(leaf.size for leaf in leaves)
        return -0.5 * sum(jnp.sum(leaf**2) for leaf in leaves) - 0.5 * size * _LOG_2PI

    def sample(self, rng_key: PRNGKey, num_chains: int, event_shape: tuple[int, ...] | None = None,
               dtype: Any = jnp.float32) -> Array:
        """``(num_chains, *event_shape)`` draws."""
        shape = event_shape if event_shape is not None else self.event_shape
        if shape is None:
            raise ValueError("StandardNormal.sample needs event_shape (here or in the constructor)")
        return jax.random.normal(rng_key, (num_chains, *shape), dtype)

    def mixture_form(self, dim: int) -> GaussianMixtureForm:
        """N(0, I) on ``dim`` features (:class:`MixtureFormPrior`)."""
        return GaussianMixtureForm.gaussian(np.zeros(dim), np.eye(dim), 0.0, dim, type(self).__name__)


@dataclasses.dataclass(frozen=True, eq=False)
class DiagonalGaussian(ValueObject):
    """N(mean, diag(scale²)), ``mean`` and ``scale`` of shape ``(D,)`` (scale > 0).

    Examples
    --------
    >>> prior = DiagonalGaussian(jnp.array([1.0, -1.0]), jnp.array([0.5, 2.0]))
    >>> round(float(prior(jnp.array([1.0, -1.0]))), 4)       # at the mean: −log 2π − log(0.5·2)
    -1.8379
    >>> prior == DiagonalGaussian(jnp.array([1.0, -1.0]), jnp.array([0.5, 2.0]))   # compared by value
    True
    """

    mean: Any
    scale: Any

    def __post_init__(self):
        mean = as_float_array(self.mean, "mean", ndim=1)
        scale = as_float_array(self.scale, "scale")
        scale = np.broadcast_to(scale, mean.shape) if scale.ndim == 0 else scale
        if scale.shape != mean.shape:
            raise ValueError(f"scale must be a scalar or have the shape of mean {mean.shape}, got {scale.shape}")
        if np.any(scale <= 0):
            raise ValueError("scale must be > 0 in every coordinate")
        object.__setattr__(self, "mean", frozen_array(mean))
        object.__setattr__(self, "scale", frozen_array(scale))
        self._freeze_key()

    def __call__(self, x: Array) -> Array:
        z = (x - self.mean.astype(x.dtype)) / self.scale.astype(x.dtype)
        return -0.5 * jnp.sum(z**2) - jnp.sum(jnp.log(self.scale)) - 0.5 * z.size * _LOG_2PI

    def sample(self, rng_key: PRNGKey, num_chains: int, dtype: Any = jnp.float32) -> Array:
        noise = jax.random.normal(rng_key, (num_chains, self.mean.size), dtype)
        return jnp.asarray(self.mean, dtype) + jnp.asarray(self.scale, dtype) * noise

    def mixture_form(self, dim: int) -> GaussianMixtureForm:
        """One Gaussian with precision ``diag(scale⁻²)`` (:class:`MixtureFormPrior`)."""
        precision = np.diag(self.scale ** -2.0)
        return GaussianMixtureForm.gaussian(self.mean, precision, float(np.linalg.slogdet(precision)[1]), dim,
                                            type(self).__name__)


@dataclasses.dataclass(frozen=True, eq=False)
class Gaussian(ValueObject):
    """N(mean, covariance) with a full ``(D, D)`` symmetric positive-definite covariance.

    Examples
    --------
    >>> prior = Gaussian(jnp.zeros(2), jnp.array([[1.0, 0.5], [0.5, 1.0]]))
    >>> round(float(prior(jnp.zeros(2))), 4)                 # −log 2π − ½ log det Σ
    -1.694
    """

    mean: Any
    covariance: Any

    def __post_init__(self):
        mean = as_float_array(self.mean, "mean", ndim=1)
        covariance = as_float_array(self.covariance, "covariance", ndim=2)
        if covariance.shape != (mean.size, mean.size):
            raise ValueError(f"covariance must have shape {(mean.size, mean.size)}, got {covariance.shape}")
        if not np.allclose(covariance, covariance.T, rtol=1e-10, atol=1e-12):
            raise ValueError("covariance must be symmetric")
        try:
            cholesky = np.linalg.cholesky(covariance)
        except np.linalg.LinAlgError:
            raise ValueError("covariance must be positive definite") from None
        object.__setattr__(self, "mean", frozen_array(mean))
        object.__setattr__(self, "covariance", frozen_array(covariance))
        object.__setattr__(self, "_cholesky", cholesky)
        # L⁻¹, computed once on the host in float64: the log density is then one matvec. Inside a
        # vmapped, scanned sampler XLA:CPU runs a batched triangular solve ~50× slower than the matmul.
        object.__setattr__(self, "_inverse_cholesky", np.linalg.inv(cholesky))
        object.__setattr__(self, "_log_det", 2.0 * float(np.sum(np.log(np.diag(cholesky)))))
        self._freeze_key()  # by mean and covariance: the rest is derived from them

    def __call__(self, x: Array) -> Array:
        z = jnp.asarray(self._inverse_cholesky, x.dtype) @ (x - self.mean.astype(x.dtype))
        return -0.5 * jnp.sum(z**2) - 0.5 * self._log_det - 0.5 * z.size * _LOG_2PI

    def sample(self, rng_key: PRNGKey, num_chains: int, dtype: Any = jnp.float32) -> Array:
        noise = jax.random.normal(rng_key, (num_chains, self.mean.size), dtype)
        return jnp.asarray(self.mean, dtype) + noise @ jnp.asarray(self._cholesky, dtype).T

    def mixture_form(self, dim: int) -> GaussianMixtureForm:
        """One Gaussian with precision ``L⁻ᵀ L⁻¹`` (:class:`MixtureFormPrior`)."""
        precision = self._inverse_cholesky.T @ self._inverse_cholesky
        return GaussianMixtureForm.gaussian(self.mean, precision, float(np.linalg.slogdet(precision)[1]), dim,
                                            type(self).__name__)


@dataclasses.dataclass(frozen=True, eq=False)
class UniformBox(ValueObject):
    """Uniform on the box ``low <= x <= high`` (log density −inf outside).

    Gradient samplers see a flat density with a hard wall here: proposals outside
    are rejected (and counted as non-finite). To sample a bounded space
    efficiently, map an unconstrained space onto the box with a bijection
    (``jaxprobe.constraints``) instead.

    Examples
    --------
    >>> prior = UniformBox(jnp.zeros(2), 2.0 * jnp.ones(2))
    >>> float(prior(jnp.array([0.5, 0.5]))), float(prior(jnp.array([3.0, 0.5])))   # log(1/area) inside; −inf outside
    (-1.3862943649291992, -inf)
    """

    low: Any
    high: Any

    def __post_init__(self):
        low = as_float_array(self.low, "low")
        high = as_float_array(self.high, "high")
        low, high = np.broadcast_arrays(low, high)
        if np.any(high <= low):
            raise ValueError("uniform box needs low < high in every coordinate")
        object.__setattr__(self, "low", frozen_array(low))
        object.__setattr__(self, "high", frozen_array(high))
        self._freeze_key()

    def __call__(self, x: Array) -> Array:
        low, high = self.low.astype(x.dtype), self.high.astype(x.dtype)
        inside = jnp.all((x >= low) & (x <= high))
        log_volume = jnp.sum(jnp.broadcast_to(jnp.log(high - low), x.shape))
        return jnp.where(inside, -log_volume, -jnp.inf)

    def sample(self, rng_key: PRNGKey, num_chains: int, dtype: Any = jnp.float32) -> Array:
        uniform = jax.random.uniform(rng_key, (num_chains, *self.low.shape), dtype)
        return jnp.asarray(self.low, dtype) + uniform * jnp.asarray(self.high - self.low, dtype)

    def mixture_form(self, dim: int) -> GaussianMixtureForm:
        """Flat on its box (:class:`MixtureFormPrior`); a ValueError if the bounds do not fit ``dim`` features."""
        try:
            return GaussianMixtureForm.flat_box(dim, self.low, self.high)
        except ValueError:
            raise ValueError(f"the UniformBox prior's bounds have shape {self.low.shape}, the target {dim} "
                             "features") from None


@dataclasses.dataclass(frozen=True, eq=False)
class NoPrior(ValueObject):
    """The flat (improper) prior: log p = 0. The target must then be normalizable by itself.

    Examples
    --------
    >>> float(NoPrior()(jnp.ones(3)))
    0.0
    """

    def __call__(self, x: ArrayTree) -> Array:
        leaves = jax.tree_util.tree_leaves(x)
        return jnp.zeros((), leaves[0].dtype if leaves else jnp.float32)

    def mixture_form(self, dim: int) -> GaussianMixtureForm:
        """Flat on the whole space (:class:`MixtureFormPrior`)."""
        return GaussianMixtureForm.flat_box(dim)


standard_normal = StandardNormal
diagonal_gaussian = DiagonalGaussian
gaussian = Gaussian
uniform_box = UniformBox
none = NoPrior
