"""Priors for data reconstruction: Gaussian mixtures, kernel density estimates, fitted Gaussians and
controlled misspecification of any of jaxprobe's priors.

The reconstruction posterior p̂(x | y) ∝ p_model(y | x) · p_prior(x) needs a prior over the FEATURES
(the marginal p(x), not a class-conditional one). When the data come from class-conditional Gaussians
with a shared covariance, the true p(x) is a Gaussian mixture (:class:`GaussianMixture`); a kernel
density estimate from a small public sample is a mixture too (:func:`kernel_density`).

:func:`misspecify` dials the prior's accuracy: it moves the prior by the affine map
``x ↦ m + k·s⊙u + √c·(x − m)`` (m the prior's mean, s its per-feature standard deviation, u a direction,
by default all ones), i.e. the mean is shifted by k standard deviations in every feature and the
covariance is multiplied by c, whatever the prior's family.

These priors live here (not in :mod:`jaxprobe.priors`) so that reconstruction owns them; they follow the
same protocol: ``prior(x) -> scalar`` normalized log density of one ``(D,)`` position and
``prior.sample(rng_key, num_chains)``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe._inputs import as_float_array, check_number
from jaxprobe.priors import DiagonalGaussian, Gaussian, GaussianMixtureForm, StandardNormal, UniformBox
from jaxprobe.types import Array, PRNGKey
from jaxprobe._values import ValueObject

__all__ = ["GaussianMixture", "kernel_density", "fit_gaussian", "misspecify", "prior_moments"]

_LOG_2PI = math.log(2.0 * math.pi)


def _cholesky(name: str, covariance: np.ndarray) -> np.ndarray:
    if not np.allclose(covariance, np.swapaxes(covariance, -1, -2), rtol=1e-10, atol=1e-12):
        raise ValueError(f"{name} must be symmetric")
    try:
        return np.linalg.cholesky(covariance)
    except np.linalg.LinAlgError:
        raise ValueError(f"{name} must be positive definite") from None


@dataclasses.dataclass(frozen=True, eq=False)
class GaussianMixture(ValueObject):
    """Σ_j w_j N(x; μ_j, Σ_j): ``weights`` ``(M,)`` (positive, normalized here), ``means`` ``(M, D)``,
    ``covariance`` ``(D, D)`` shared by all components or ``(M, D, D)`` one per component.

    log p(x) = logsumexp_j [log w_j − ½|L_j⁻¹(x − μ_j)|² − ½ log det Σ_j] − (D/2) log 2π.
    With a shared covariance the whitening L⁻¹ (a precomputed matrix) is applied once per evaluation, so a
    kernel density estimate over a few hundred points costs one (D, D) matmul plus
    ``M·D`` multiply-adds.

    Examples
    --------
    >>> prior = GaussianMixture(np.array([1.0, 3.0]), np.array([[0.0, 0.0], [2.0, 2.0]]), np.eye(2))
    >>> prior.weights.tolist()                                        # normalized
    [0.25, 0.75]
    >>> round(float(prior(jnp.zeros(2))), 4)                          # a log density, usable as a prior
    -3.1707
    """

    weights: Any
    means: Any
    covariance: Any

    def __post_init__(self):
        means = as_float_array(self.means, "means", ndim=2)
        weights = as_float_array(self.weights, "weights", ndim=1)
        if weights.shape != (means.shape[0],):
            raise ValueError(f"weights must have shape ({means.shape[0]},) (one per mean), got {weights.shape}")
        if np.any(weights <= 0):
            raise ValueError("weights must be > 0")
        weights = weights / weights.sum()
        covariance = as_float_array(self.covariance, "covariance")
        dim = means.shape[1]
        if covariance.shape not in ((dim, dim), (means.shape[0], dim, dim)):
            raise ValueError(f"covariance must have shape ({dim}, {dim}) (shared) or "
                             f"({means.shape[0]}, {dim}, {dim}) (per component), got {covariance.shape}")
        cholesky = _cholesky("covariance", covariance)
        log_det = 2.0 * np.sum(np.log(np.diagonal(cholesky, axis1=-2, axis2=-1)), axis=-1)
        object.__setattr__(self, "weights", weights)
        object.__setattr__(self, "means", means)
        object.__setattr__(self, "covariance", covariance)
        # Inverse Cholesky factors: a matmul per evaluation (XLA:CPU's batched triangular solve is
        # about 50 times slower than a small matmul inside a vmapped sampler step).
        inverse_cholesky = np.linalg.inv(cholesky)
        object.__setattr__(self, "_cholesky", cholesky)
        object.__setattr__(self, "_inverse_cholesky", inverse_cholesky)
        object.__setattr__(self, "_log_det", log_det)
        if covariance.ndim == 2:  # whitened means for the one-matmul evaluation
            object.__setattr__(self, "_white_means", means @ inverse_cholesky.T)
        self._freeze_key()  # equal by value: a question asked again with an equal mixture compiles nothing

    @property
    def shared(self) -> bool:
        """Whether all components share one covariance."""
        return self.covariance.ndim == 2

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    def __call__(self, x: Array) -> Array:
        dtype = x.dtype
        log_weights = jnp.asarray(np.log(self.weights), dtype)
        if self.shared:
            white = jnp.asarray(self._inverse_cholesky, dtype) @ x
            squared = jnp.sum((white - jnp.asarray(self._white_means, dtype)) ** 2, axis=-1)
        else:
            diff = x - jnp.asarray(self.means, dtype)
            white = jnp.einsum("mij,mj->mi", jnp.asarray(self._inverse_cholesky, dtype), diff)
            squared = jnp.sum(white**2, axis=-1)
        terms = log_weights - 0.5 * squared - 0.5 * jnp.asarray(self._log_det, dtype)
        return jax.scipy.special.logsumexp(terms) - 0.5 * self.dim * _LOG_2PI

    def sample(self, rng_key: PRNGKey, num_chains: int, dtype: Any = jnp.float32) -> Array:
        """``(num_chains, D)`` draws: a component by its weight, then its Gaussian."""
        key_component, key_noise = jax.random.split(rng_key)
        component = jax.random.choice(key_component, self.weights.size, (num_chains,),
                                      p=jnp.asarray(self.weights, dtype))
        noise = jax.random.normal(key_noise, (num_chains, self.dim), dtype)
        cholesky = jnp.asarray(self._cholesky, dtype)
        scaled = noise @ cholesky.T if self.shared else jnp.einsum("cij,cj->ci", cholesky[component], noise)
        return jnp.asarray(self.means, dtype)[component] + scaled

    def mixture_form(self, dim: int) -> GaussianMixtureForm:
        """Itself, as :class:`jaxprobe.priors.GaussianMixtureForm` (:class:`jaxprobe.priors.MixtureFormPrior`:
        exact coordinate-wise samplers condition it); a ValueError if it does not have ``dim`` features."""
        if self.dim != dim:
            raise ValueError(f"the GaussianMixture has {self.dim} features, the target {dim}")
        inverse = self._inverse_cholesky  # (d, d) shared or (M, d, d)
        precisions = (inverse.T @ inverse)[None] if self.shared else np.einsum("mki,mkj->mij", inverse, inverse)
        infinite = np.full(dim, np.inf)
        return GaussianMixtureForm(np.log(self.weights), self.means, precisions, -np.atleast_1d(self._log_det),
                                   False, -infinite, infinite)

    def component_covariances(self) -> np.ndarray:
        """``(M, D, D)`` covariances (the shared one repeated)."""
        return np.broadcast_to(self.covariance, (self.weights.size, self.dim, self.dim))


def kernel_density(sample: Any, bandwidth: str | float = "scott") -> GaussianMixture:
    """A Gaussian kernel density estimate from a small public ``sample`` ``(n, D)``, as a mixture.

    Kernel covariance ``h² · Cov(sample)`` with ``h = n^(−1/(D+4))`` (Scott's rule),
    ``(n (D+2) / 4)^(−1/(D+4))`` (Silverman's), or a given positive float h.
    Raises ValueError for fewer than D + 1 points (the sample covariance would be singular).

    Examples
    --------
    >>> prior = kernel_density(np.random.default_rng(0).normal(size=(50, 2)))   # one component per point
    >>> prior.means.shape, prior.covariance.shape
    ((50, 2), (2, 2))
    """
    sample = as_float_array(sample, "sample", ndim=2)
    n, dim = sample.shape
    if n < dim + 1:
        raise ValueError(f"sample must have at least D + 1 = {dim + 1} rows for a kernel density, got {n}")
    if bandwidth == "scott":
        factor = n ** (-1.0 / (dim + 4))
    elif bandwidth == "silverman":
        factor = (n * (dim + 2) / 4.0) ** (-1.0 / (dim + 4))
    elif isinstance(bandwidth, (int, float)) and not isinstance(bandwidth, bool) and bandwidth > 0:
        factor = float(bandwidth)
    else:
        raise ValueError(f"bandwidth must be 'scott', 'silverman' or a float > 0, got {bandwidth!r}")
    covariance = np.atleast_2d(np.cov(sample, rowvar=False))
    return GaussianMixture(np.ones(n), sample, factor**2 * covariance)


def fit_gaussian(sample: Any, kind: str = "full", shrinkage: str | float | None = "ledoit_wolf"):
    """A Gaussian prior fitted to ``sample`` ``(n, D)``: ``kind="full"`` → :class:`jaxprobe.priors.Gaussian`,
    ``"diagonal"`` → :class:`jaxprobe.priors.DiagonalGaussian`.

    ``shrinkage``: ``"ledoit_wolf"`` (scikit-learn's Ledoit–Wolf estimate, well conditioned
    for small samples), a float α ∈ [0, 1] for ``(1 − α) S + α (tr S / D) I``, or None for
    the plain sample covariance. Columns with zero variance raise ValueError (drop them first).

    Examples
    --------
    >>> sample = np.random.default_rng(0).normal(size=(500, 2)) * 2.0 + 1.0
    >>> prior = fit_gaussian(sample)                                  # a jaxprobe.priors.Gaussian
    >>> type(prior).__name__, bool(np.allclose(prior.mean, 1.0, atol=0.3))
    ('Gaussian', True)
    >>> bool(np.allclose(np.diag(prior.covariance), 4.0, atol=0.8))
    True
    """
    sample = as_float_array(sample, "sample", ndim=2)
    if sample.shape[0] < 2:
        raise ValueError(f"sample must have at least 2 rows, got {sample.shape[0]}")
    if kind not in ("full", "diagonal"):
        raise ValueError(f"kind must be 'full' or 'diagonal', got {kind!r}")
    variance = sample.var(axis=0, ddof=1)
    if np.any(variance <= 0):
        raise ValueError(f"sample has constant columns {np.flatnonzero(variance <= 0).tolist()}: drop them first")
    mean = sample.mean(axis=0)
    if kind == "diagonal":
        return DiagonalGaussian(mean, np.sqrt(variance))
    if shrinkage == "ledoit_wolf":
        from sklearn.covariance import LedoitWolf

        covariance = LedoitWolf().fit(sample).covariance_
    elif shrinkage is None:
        covariance = np.cov(sample, rowvar=False)
    elif isinstance(shrinkage, (int, float)) and not isinstance(shrinkage, bool) and 0.0 <= shrinkage <= 1.0:
        empirical = np.cov(sample, rowvar=False)
        target = np.trace(empirical) / empirical.shape[0] * np.eye(empirical.shape[0])
        covariance = (1.0 - shrinkage) * empirical + shrinkage * target
    else:
        raise ValueError(f"shrinkage must be 'ledoit_wolf', a float in [0, 1] or None, got {shrinkage!r}")
    return Gaussian(mean, 0.5 * (covariance + covariance.T))


def prior_moments(prior: Any, dim: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Mean ``(D,)`` and covariance ``(D, D)`` of a prior (for whitening and misspecification).

    Known: StandardNormal (needs ``dim`` or its ``event_shape``), DiagonalGaussian, Gaussian,
    UniformBox, GaussianMixture. Anything else raises TypeError.

    Examples
    --------
    >>> mean, covariance = prior_moments(jaxprobe.priors.StandardNormal(), dim=2)
    >>> mean.tolist(), covariance.tolist()
    ([0.0, 0.0], [[1.0, 0.0], [0.0, 1.0]])
    """
    if isinstance(prior, StandardNormal):
        shape = prior.event_shape
        size = dim if dim is not None else (int(np.prod(shape)) if shape is not None else None)
        if size is None:
            raise ValueError("StandardNormal has no event_shape: pass dim")
        return np.zeros(size), np.eye(size)
    if isinstance(prior, DiagonalGaussian):
        return prior.mean.copy(), np.diag(prior.scale**2)
    if isinstance(prior, Gaussian):
        return prior.mean.copy(), prior.covariance.copy()
    if isinstance(prior, UniformBox):
        if prior.low.ndim != 1:
            raise ValueError(f"UniformBox bounds must be (D,) vectors here, got shape {prior.low.shape}")
        return 0.5 * (prior.low + prior.high), np.diag((prior.high - prior.low) ** 2 / 12.0)
    if isinstance(prior, GaussianMixture):
        mean = prior.weights @ prior.means
        centered = prior.means - mean
        between = (prior.weights[:, None] * centered).T @ centered
        within = np.tensordot(prior.weights, prior.component_covariances(), axes=1)
        return mean, between + within
    raise TypeError(f"prior_moments does not know {type(prior).__name__}; use a jaxprobe prior or a "
                    "GaussianMixture, or pass its mean and covariance yourself")


def misspecify(prior: Any, mean_shift: float = 0.0, covariance_scale: float = 1.0, direction: Any = None,
               dim: int | None = None):
    """The prior pushed through ``x ↦ m + k·s⊙u + √c·(x − m)``: mean shifted by ``k = mean_shift``
    standard deviations along ``u = direction`` (default: every feature), covariance times ``c =
    covariance_scale``; returns a prior of the same family (StandardNormal → DiagonalGaussian).

    Gaussian: N(m + k s⊙u, c Σ); DiagonalGaussian likewise; UniformBox: centre shifted by k s⊙u,
    half-widths times √c; GaussianMixture: μ_j ↦ m + k s⊙u + √c (μ_j − m), Σ_j ↦ c Σ_j.

    Examples
    --------
    >>> shifted = misspecify(jaxprobe.priors.StandardNormal(), mean_shift=1.0, dim=2)   # one sd along every feature
    >>> [m.tolist() for m in prior_moments(shifted)]
    [[1.0, 1.0], [[1.0, 0.0], [0.0, 1.0]]]
    """
    shift = check_number(mean_shift, "mean_shift")
    scale = check_number(covariance_scale, "covariance_scale", minimum=0.0, exclusive_minimum=True)
    mean, covariance = prior_moments(prior, dim)
    sd = np.sqrt(np.diag(covariance))
    u = np.ones_like(mean) if direction is None else as_float_array(direction, "direction", ndim=1)
    if u.shape != mean.shape:
        raise ValueError(f"direction must have shape {mean.shape}, got {u.shape}")
    offset = shift * sd * u
    root = math.sqrt(scale)
    if isinstance(prior, StandardNormal):
        return DiagonalGaussian(mean + offset, np.full(mean.shape, root))
    if isinstance(prior, DiagonalGaussian):
        return DiagonalGaussian(prior.mean + offset, prior.scale * root)
    if isinstance(prior, Gaussian):
        return Gaussian(prior.mean + offset, prior.covariance * scale)
    if isinstance(prior, UniformBox):
        centre, half = 0.5 * (prior.low + prior.high) + offset, 0.5 * (prior.high - prior.low) * root
        return UniformBox(centre - half, centre + half)
    means = mean + offset + root * (prior.means - mean)
    return GaussianMixture(prior.weights, means, prior.covariance * scale)
