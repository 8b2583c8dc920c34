"""Targets with known answers: a log density, its dimension, and the truth of E[x] and Var[x] per coordinate.

:class:`Target` is what :func:`jaxprobe.benchmark.compare` runs a sampler on; :func:`targets` is the registry of
the built-in ones (built on first use, cached) and :func:`get_target` looks one up by name. Every built-in
target's truth says where it comes from (``Target.source``):

- ``isotropic_gaussian`` (d = 100): N(0, I). Closed form.
- ``ill_conditioned_gaussian`` (d = 100): N(0, Q diag(λ) Qᵀ), λ log-spaced from 1e-2 to 1e2 (condition number 1e4),
  Q a fixed random rotation. Closed form.
- ``funnel`` (d = 10): Neal's funnel, v ~ N(0, 3²), x_i | v ~ N(0, e^v), position (v, x₁…x₉). Closed form.
- ``banana`` (d = 2): Haario et al.'s twisted Gaussian, x₁ ~ N(0, 10²), x₂ ~ N(0.03(x₁² − 100), 1). Closed form.
- ``mixture_2d``, ``mixture_10d``: N(0, I) tilted by four Gaussian bumps of weights 0.5 / 0.3 / 0.15 / 0.05
  (``jaxprobe.bench.smc_peers``' mix2d and mix10d): four modes about 7.6 sd apart. Closed form.
- ``student_t`` (d = 10): independent Student-t coordinates, ν = 5. Closed form.
- ``eight_schools_centred``, ``eight_schools_noncentred`` (d = 10): inference-gym's EightSchools, position
  (μ, log τ, θ₁…θ₈) or (μ, log τ, θ̃₁…θ̃₈) with θ = μ + τ θ̃; starts uniform(−2, 2). Quadrature over log τ.
- ``logistic_regression`` (d = 31): breast_cancer standardized, intercept first, N(0, 1) prior. Reference run.
- ``mlp_probe_2d`` (d = 2): a jaxprobe question, the benchmarks' MLP probe (:func:`mlp_probe`) at τ = 0.01 with an
  N(0, I) prior. Quadrature (2-D midpoint rule).
- ``mlp_probe_50d`` (d = 50): the same at d = 50 (``jaxprobe.bench.answer_speed``'s target). Reference run of
  exact draws.

Closed form: the moments are derived in each builder's docstring; ``log_z`` is the log normalizing constant of
``exp(logdensity_fn)`` exactly. Quadrature: one-dimensional (eight schools: given τ, μ and θ are Gaussian, so only
log τ is integrated numerically) or the 2-D midpoint rule (:class:`jaxprobe.quadrature.SquareGrid`); the rule's
error, bounded by the change from half the points, is stored as ``mean_se`` / ``var_se``. Reference run: a long
run made by ``python -m jaxprobe.benchmark.reference`` (:mod:`jaxprobe.benchmark.reference`), stored in
``jaxprobe/benchmark/reference/NAME.npz`` with its Monte-Carlo standard errors: NUTS on many chains for the logistic
regression (errors from the ESS), exact independent draws for the 50-D MLP probe (its target is the N(0, I) prior
times exp(−G/τ) ≤ 1: prior draws kept with that probability; log Z from the share kept).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe import priors
from jaxprobe._inputs import as_float_array, check_int, check_number
from jaxprobe._io import read_checked_npz
from jaxprobe.quadrature import SquareGrid
from jaxprobe.target import gibbs

__all__ = ["Target", "targets", "get_target", "names", "mlp_probe", "reference_path", "read_reference",
           "reference_problem", "REFERENCE_TARGETS", "mlp_loss", "logistic_data",
           "mixture_closed_form"]

#: Folder of the stored reference runs (package data).
REFERENCE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference")
#: The built-in targets whose truth comes from a reference run (:mod:`jaxprobe.benchmark.reference`).
REFERENCE_TARGETS = ("logistic_regression", "mlp_probe_50d")
_TRUTH_FIELDS = ("mean", "var", "mean_se", "var_se")


@dataclasses.dataclass(frozen=True, eq=False)
class Target:
    """A log density with the truth of its first two moments per coordinate.

    Parameters
    ----------
    name
        A short name (the report's row label).
    logdensity_fn
        One position ``(dim,)`` → a scalar, the log density up to a constant; a JAX function (jit, vmap and grad
        must work on it).
    dim
        The dimension of a position, a positive int.
    mean, var
        ``(dim,)`` truth of E[x] and Var[x] (var > 0), or None where not known.
    log_z
        log ∫ exp(logdensity_fn(x)) dx, or None where not known.
    mean_se, var_se
        ``(dim,)`` standard errors of ``mean`` / ``var`` where those come from a reference run or a quadrature
        rule (None: exact).
    init
        ``(key, num_chains) → (num_chains, dim)`` starting positions; None: standard normal draws.
    description, source
        What the target is; where its truth comes from (``"closed form"``, ``"quadrature"``, ``"reference run
        (jaxprobe/benchmark/reference/NAME.npz: how it was made)"``).

    Every argument is checked when the target is made (``TypeError`` for a wrong type, ``ValueError`` for a wrong
    value or shape, naming the argument), before anything runs.

    Examples
    --------
    >>> target = Target("my_gaussian", lambda x: -0.5 * x @ x, 2, mean=np.zeros(2), var=np.ones(2))
    >>> target.name, target.dim, target.mean.tolist()
    ('my_gaussian', 2, [0.0, 0.0])
    >>> get_target(target) is target                          # accepted wherever a built-in name is
    True
    """

    name: str
    logdensity_fn: Callable[[jax.Array], jax.Array]
    dim: int
    _: dataclasses.KW_ONLY
    mean: np.ndarray | None = None
    var: np.ndarray | None = None
    log_z: float | None = None
    mean_se: np.ndarray | None = None
    var_se: np.ndarray | None = None
    init: Callable[[jax.Array, int], jax.Array] | None = None
    description: str = ""
    source: str = ""

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"name must be a non-empty string, got {self.name!r}")
        if not callable(self.logdensity_fn):
            raise TypeError(f"logdensity_fn must be callable (one position (dim,) -> scalar log density), got "
                            f"{type(self.logdensity_fn).__name__}")
        dim = check_int(self.dim, "dim", minimum=1)
        object.__setattr__(self, "dim", dim)
        for field in _TRUTH_FIELDS:
            value = getattr(self, field)
            if value is not None:
                array = np.array(as_float_array(value, field, shape=(dim,)))  # a copy: the caller's stays writable
                array.setflags(write=False)  # a frozen target's truth cannot be changed in place
                object.__setattr__(self, field, array)
        if self.var is not None and not np.all(self.var > 0):
            raise ValueError(f"var must be > 0 in every coordinate, got {np.min(self.var)} at index "
                             f"{int(np.argmin(self.var))}")
        for field in ("mean_se", "var_se"):
            value = getattr(self, field)
            if value is not None and np.any(value < 0):
                raise ValueError(f"{field} must be >= 0 (standard errors), got {np.min(value)}")
            if value is not None and getattr(self, field[:-3]) is None:
                raise ValueError(f"{field} was given without {field[:-3]}: a standard error needs its estimate")
        if self.log_z is not None:
            object.__setattr__(self, "log_z", check_number(self.log_z, "log_z"))
        if self.init is not None and not callable(self.init):
            raise TypeError(f"init must be callable (key, num_chains) -> (num_chains, {dim}) or None, got "
                            f"{type(self.init).__name__}")
        for field in ("description", "source"):
            if not isinstance(getattr(self, field), str):
                raise TypeError(f"{field} must be a string, got {type(getattr(self, field)).__name__}")

    def initial_positions(self, key: jax.Array, num_chains: int) -> jax.Array:
        """``(num_chains, dim)`` starting positions: ``init(key, num_chains)``, or standard normal draws."""
        num_chains = check_int(num_chains, "num_chains", minimum=1)
        if self.init is None:
            return jax.random.normal(key, (num_chains, self.dim))
        positions = jnp.asarray(self.init(key, num_chains))
        if positions.shape != (num_chains, self.dim):
            raise ValueError(f"target {self.name!r}: init returned shape {positions.shape}, expected "
                             f"({num_chains}, {self.dim})")
        return positions

    def __repr__(self) -> str:
        truth = "mean/var" if self.mean is not None else "no truth"
        return f"Target({self.name!r}, dim={self.dim}, {truth}, source={self.source!r})"


# ------------------------------------------------------------------ Gaussians, funnel, banana, Student-t

_LOG_2PI = math.log(2 * math.pi)


def _isotropic_gaussian() -> Target:
    """N(0, I₁₀₀): mean 0, var 1, log Z = (d/2) log 2π for ``−½|x|²``."""
    dim = 100
    return Target("isotropic_gaussian", lambda x: -0.5 * jnp.sum(x * x), dim, mean=np.zeros(dim),
                  var=np.ones(dim), log_z=0.5 * dim * _LOG_2PI, source="closed form",
                  description="N(0, I), d = 100")


def _ill_conditioned_gaussian() -> Target:
    """N(0, Σ), Σ = Q diag(λ) Qᵀ with λ log-spaced from 1e-2 to 1e2 and Q a fixed random rotation (Haar, seed
    0): Var x_i = Σ_ii; log Z of ``−½ xᵀ Σ⁻¹ x`` is (d/2) log 2π − ½ log det Σ⁻¹ (Σ⁻¹ as stored, in float32). The rotation keeps a diagonal mass
    matrix from undoing the conditioning."""
    dim = 100
    eigenvalues = np.logspace(-2.0, 2.0, dim)
    q, r = np.linalg.qr(np.random.default_rng(0).standard_normal((dim, dim)))
    q = q * np.sign(np.diag(r))  # the Haar-distributed rotation (QR's signs fixed)
    precision32 = ((q / eigenvalues) @ q.T).astype(np.float32)
    precision32 = (precision32 + precision32.T) / 2  # exactly symmetric after rounding
    # The truth of the density as evaluated, with float32's precision matrix (rounding moves Σ by ~cond·2⁻²⁴ ≈ 1e-3)
    covariance = np.linalg.inv(precision32.astype(np.float64))
    precision = jnp.asarray(precision32)
    return Target("ill_conditioned_gaussian", lambda x: -0.5 * x @ (precision @ x), dim, mean=np.zeros(dim),
                  var=np.diag(covariance).copy(),
                  log_z=0.5 * dim * _LOG_2PI - 0.5 * float(np.linalg.slogdet(precision32.astype(np.float64))[1]),
                  source="closed form",
                  description="N(0, Q diag(λ) Qᵀ), d = 100, λ log-spaced 1e-2 to 1e2 (condition number 1e4), "
                              "Q a fixed random rotation")


def _funnel() -> Target:
    """Neal's funnel, position (v, x₁…x₉): v ~ N(0, 3²), x_i | v ~ N(0, e^v). E = 0; Var v = 9; Var x_i =
    E[e^v] = e^{9/2}. The log density is normalized: log Z = 0."""
    dim = 10

    def logdensity(z):
        v, x = z[0], z[1:]
        return (-0.5 * (v / 3.0) ** 2 - math.log(3.0) - 0.5 * _LOG_2PI
                - 0.5 * jnp.sum(x * x) * jnp.exp(-v) - 0.5 * (dim - 1) * (v + _LOG_2PI))

    var = np.full(dim, math.exp(4.5))
    var[0] = 9.0
    return Target("funnel", logdensity, dim, mean=np.zeros(dim), var=var, log_z=0.0, source="closed form",
                  description="Neal's funnel, d = 10: v ~ N(0, 3^2), x_i | v ~ N(0, e^v), position (v, x_1..x_9)")


BANANA_CURVATURE = 0.03


def _banana() -> Target:
    """Haario et al.'s twisted Gaussian (inference-gym's Banana): x₁ ~ N(0, 10²), x₂ = b(x₁² − 100) + ε, ε ~ N(0,
    1). E = 0 (E x₁² = 100); Var x₁ = 100, Var x₂ = 1 + b² Var x₁² = 1 + 2·10⁴ b². Normalized: log Z = 0."""
    b = BANANA_CURVATURE

    def logdensity(x):
        return (-0.5 * (x[0] / 10.0) ** 2 - math.log(10.0) - 0.5 * (x[1] - b * (x[0] ** 2 - 100.0)) ** 2
                - _LOG_2PI)

    return Target("banana", logdensity, 2, mean=np.zeros(2), var=np.array([100.0, 1.0 + 2e4 * b**2]), log_z=0.0,
                  source="closed form",
                  description=f"twisted Gaussian (Haario et al. 1999), d = 2: x1 ~ N(0, 10^2), "
                              f"x2 ~ N({b}(x1^2 - 100), 1)")


STUDENT_DF = 5.0


def _student_t() -> Target:
    """Ten independent Student-t coordinates, ν = 5: E = 0, Var = ν/(ν − 2); log Z of ``−(ν+1)/2 Σ log(1 +
    x²/ν)`` is d·(log Γ(ν/2) + ½ log νπ − log Γ((ν+1)/2))."""
    dim, nu = 10, STUDENT_DF
    log_z = dim * (math.lgamma(nu / 2) + 0.5 * math.log(nu * math.pi) - math.lgamma((nu + 1) / 2))
    return Target("student_t", lambda x: -0.5 * (nu + 1) * jnp.sum(jnp.log1p(x * x / nu)), dim,
                  mean=np.zeros(dim), var=np.full(dim, nu / (nu - 2)), log_z=log_z, source="closed form",
                  description=f"independent Student-t, nu = {nu:g}, d = 10 (heavy tails: E x^4 finite, E x^8 not)")


# ------------------------------------------------------------------ Gaussian mixtures (jaxprobe.bench.smc_peers)

#: The bumps of ``jaxprobe.bench.smc_peers``' mix2d / mix10d: weights, centres at radius 3 on the first two axes,
#: width s. The target is N(0, I) tilted by Σ_j w_j N(x; a_j, s² I).
MIXTURE_WEIGHTS = (0.5, 0.3, 0.15, 0.05)
MIXTURE_RADIUS, MIXTURE_WIDTH = 3.0, 0.5
_MIXTURE_AXES = ((0, 1.0), (1, 1.0), (0, -1.0), (1, -1.0))


def mixture_closed_form(weights: np.ndarray, centres: np.ndarray, width: float) -> dict[str, Any]:
    """The posterior of N(0, I) tilted by Σ_j w_j N(x; a_j, s² I): ``Σ_j π_j N(a_j/(1+s²), s²/(1+s²) I)`` with
    ``π_j ∝ w_j N(a_j; 0, (1+s²) I)``, and ``log Z = log Σ_j w_j N(a_j; 0, (1+s²) I)`` (the prior and the bumps
    normalized). Returns ``shares`` (K,), ``means`` (K, d), ``component_var``, per-coordinate ``mean``, ``var``
    (d,) and ``log_z``.

    Examples
    --------
    >>> out = mixture_closed_form(np.array([0.5, 0.5]), np.array([[-2.0], [2.0]]), width=1.0)   # two 1-D bumps
    >>> out["shares"], out["mean"], out["var"], round(out["log_z"], 3)     # log N(2; 0, 2) = -2.266
    (array([0.5, 0.5]), array([0.]), array([1.5]), -2.266)
    """
    weights, centres = np.asarray(weights, np.float64), np.asarray(centres, np.float64)
    dim, spread = centres.shape[1], 1.0 + width**2
    log_c = np.log(weights) - 0.5 * np.sum(centres**2, axis=1) / spread - 0.5 * dim * math.log(2 * math.pi * spread)
    log_z = float(np.logaddexp.reduce(log_c))
    shares = np.exp(log_c - log_z)
    means, component_var = centres / spread, width**2 / spread
    mean = shares @ means
    var = component_var + shares @ means**2 - mean**2
    return {"shares": shares, "means": means, "component_var": component_var, "mean": mean, "var": var,
            "log_z": log_z}


def _mixture(dim: int) -> Target:
    """N(0, I_d) tilted by the four bumps (:data:`MIXTURE_WEIGHTS`; :func:`mixture_closed_form`)."""
    centres = np.zeros((len(MIXTURE_WEIGHTS), dim))
    for row, (axis, sign) in enumerate(_MIXTURE_AXES):
        centres[row, axis] = sign * MIXTURE_RADIUS
    width = MIXTURE_WIDTH
    truth = mixture_closed_form(np.array(MIXTURE_WEIGHTS), centres, width)
    log_w = jnp.log(jnp.asarray(MIXTURE_WEIGHTS, jnp.float32))
    centres32, norm = jnp.asarray(centres, jnp.float32), -0.5 * dim * math.log(2 * math.pi * width**2)

    def logdensity(x):
        tilt = jax.nn.logsumexp(log_w + norm - 0.5 * jnp.sum((x - centres32) ** 2, axis=1) / width**2)
        return -0.5 * jnp.sum(x * x) - 0.5 * dim * _LOG_2PI + tilt

    return Target(f"mixture_{dim}d", logdensity, dim, mean=truth["mean"], var=truth["var"], log_z=truth["log_z"],
                  source="closed form",
                  description=f"N(0, I), d = {dim}, tilted by four Gaussian bumps (weights 0.5/0.3/0.15/0.05, "
                              f"radius 3 on the first two axes, s = 0.5): four modes ~7.6 sd apart")


# ------------------------------------------------------------------ eight schools (quadrature over log τ)

#: Rubin's eight schools as inference-gym's ``EightSchools``: μ ~ N(0, 10²), log τ ~ N(5, 1), θ_i ~ N(μ, τ²),
#: y_i ~ N(θ_i, σ_i²).
SCHOOLS_Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SCHOOLS_SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
_MU_SCALE, _LOG_TAU_LOC, _LOG_TAU_SCALE = 10.0, 5.0, 1.0


def _normal_logpdf(x, loc, scale):
    return -0.5 * ((x - loc) / scale) ** 2 - jnp.log(scale) - 0.5 * _LOG_2PI


def _schools_logdensity(centred: bool) -> Callable[[jax.Array], jax.Array]:
    """log p(μ, log τ, θ or θ̃, y), normalized (its integral is p(y)); position (μ, log τ, 8 school effects)."""
    y, sigma = jnp.asarray(SCHOOLS_Y, jnp.float32), jnp.asarray(SCHOOLS_SIGMA, jnp.float32)

    def logdensity(z):
        mu, log_tau, effects = z[0], z[1], z[2:]
        tau = jnp.exp(log_tau)
        theta = effects if centred else mu + tau * effects
        effects_prior = _normal_logpdf(effects, mu, tau) if centred else _normal_logpdf(effects, 0.0, 1.0)
        return (_normal_logpdf(mu, 0.0, _MU_SCALE) + _normal_logpdf(log_tau, _LOG_TAU_LOC, _LOG_TAU_SCALE)
                + jnp.sum(effects_prior) + jnp.sum(_normal_logpdf(y, theta, sigma)))

    return logdensity


def _schools_given_log_tau(s: np.ndarray) -> dict[str, np.ndarray]:
    """Everything given log τ = s ``(S,)``: the unnormalized log posterior of s, and E / Var of μ, θ and θ̃ given s.

    Given τ, μ and θ are Gaussian: y ~ N(1μ, D) with D = diag(σ² + τ²) after θ is integrated out, so
    μ | τ, y ~ N(m, V), V = 1/(1/10² + Σ 1/D), m = V Σ y/D, and p(y | τ) = N(y; 0, D + 10² 11ᵀ) (Sherman–Morrison);
    θ_i | μ, τ, y ~ N(A_i y_i + B_i μ, v_i), v_i = 1/(1/σ_i² + 1/τ²), A_i = v_i/σ_i², B_i = v_i/τ²; θ̃ = (θ − μ)/τ.
    """
    tau2 = np.exp(2.0 * s)[:, None]
    d = SCHOOLS_SIGMA**2 + tau2  # (S, 8)
    c = _MU_SCALE**2
    inv_sum, y_sum = np.sum(1.0 / d, axis=1), np.sum(SCHOOLS_Y / d, axis=1)
    quad = np.sum(SCHOOLS_Y**2 / d, axis=1) - c * y_sum**2 / (1.0 + c * inv_sum)
    logdet = np.sum(np.log(d), axis=1) + np.log1p(c * inv_sum)
    log_likelihood = -0.5 * (quad + logdet + len(SCHOOLS_Y) * _LOG_2PI)
    log_prior = -0.5 * ((s - _LOG_TAU_LOC) / _LOG_TAU_SCALE) ** 2 - math.log(_LOG_TAU_SCALE) - 0.5 * _LOG_2PI
    v_mu = 1.0 / (1.0 / c + inv_sum)
    m_mu = v_mu * y_sum
    v = 1.0 / (1.0 / SCHOOLS_SIGMA**2 + 1.0 / tau2)
    a, b = v / SCHOOLS_SIGMA**2, v / tau2
    tau = np.sqrt(tau2)
    return {"log_post": log_prior + log_likelihood, "mu": (m_mu, v_mu), "log_tau": (s, np.zeros_like(s)),
            "theta": (a * SCHOOLS_Y + b * m_mu[:, None], v + b**2 * v_mu[:, None]),
            "theta_tilde": ((a * SCHOOLS_Y + (b - 1.0) * m_mu[:, None]) / tau,
                            (v + (b - 1.0) ** 2 * v_mu[:, None]) / tau2)}


@functools.cache  # both forms come from the same rule: computed once
def _schools_moments(num: int, low: float = -12.0, high: float = 14.0) -> dict[str, Any]:
    """Posterior mean and var of (μ, log τ, θ) and (μ, log τ, θ̃), and log p(y), by the midpoint rule in log τ
    on ``num`` points of [low, high] (the prior N(5, 1) of log τ leaves e^{-40} of its mass outside)."""
    width = (high - low) / num
    s = low + width * (np.arange(num) + 0.5)
    given = _schools_given_log_tau(s)
    top = given["log_post"].max()
    weight = np.exp(given["log_post"] - top)
    log_z = float(top + np.log(weight.sum() * width))
    weight /= weight.sum()

    def moments(name):
        mean_s, var_s = (np.broadcast_to(np.asarray(a).reshape(num, -1), (num, np.size(a) // num)) for a in given[name])
        mean = weight @ mean_s
        return mean, weight @ (var_s + mean_s**2) - mean**2

    parts = {name: moments(name) for name in ("mu", "log_tau", "theta", "theta_tilde")}
    result = {"log_z": log_z}
    for key, effects in (("centred", "theta"), ("noncentred", "theta_tilde")):
        result[key] = tuple(np.concatenate([parts["mu"][i], parts["log_tau"][i], parts[effects][i]]) for i in (0, 1))
    return result


def _eight_schools(centred: bool) -> Target:
    """Eight schools, centred (θ) or non-centred (θ̃); truth by :func:`_schools_moments` on 200,000 points, its
    error bounded by the change from 100,000 (``mean_se``, ``var_se``). Starts uniform(−2, 2), as Stan's."""
    key = "centred" if centred else "noncentred"
    fine, coarse = _schools_moments(200_000), _schools_moments(100_000)
    (mean, var), (mean_half, var_half) = fine[key], coarse[key]
    effects = "theta" if centred else "theta_tilde (theta = mu + tau * theta_tilde)"
    return Target(f"eight_schools_{key}", _schools_logdensity(centred), 10, mean=mean, var=var,
                  mean_se=np.abs(mean - mean_half), var_se=np.abs(var - var_half), log_z=fine["log_z"],
                  init=lambda k, n: jax.random.uniform(k, (n, 10), minval=-2.0, maxval=2.0), source="quadrature",
                  description=f"eight schools ({key}; inference-gym's EightSchools: mu ~ N(0, 10^2), log tau ~ "
                              f"N(5, 1)), position (mu, log tau, {effects}); starts uniform(-2, 2)")


# ------------------------------------------------------------------ logistic regression (reference run)

LOGISTIC_PRIOR_SCALE = 1.0


@functools.cache
def logistic_data() -> tuple[np.ndarray, np.ndarray]:
    """``(design (569, 31), labels (569,))``: scikit-learn's breast_cancer (:func:`jaxprobe.datasets.breast_cancer`,
    label 1 = malignant) standardized, with an intercept column first. Needs scikit-learn (``jaxprobe[demo]``)."""
    from jaxprobe import datasets

    data = datasets.breast_cancer()
    x = np.asarray(data.standardize(np.asarray(data.x, np.float64)), np.float32)
    design = np.concatenate([np.ones((x.shape[0], 1), np.float32), x], axis=1)
    return design, np.asarray(data.y, np.float32)


def _logistic_logdensity(beta):
    """Σ_i y_i η_i − log(1 + e^{η_i}) − |β|²/(2·1²), η = Xβ (the data read on first trace)."""
    design, labels = (jnp.asarray(a) for a in logistic_data())
    eta = design @ beta
    return jnp.sum(labels * eta - jax.nn.softplus(eta)) - 0.5 * jnp.sum(beta * beta) / LOGISTIC_PRIOR_SCALE**2


# ------------------------------------------------------------------ the MLP probes


def mlp_probe(dim: int = 30, hidden: int = 64, seed: int = 0) -> tuple[dict[str, np.ndarray], Callable, Callable]:
    """The benchmarks' one target model: a fixed random MLP ``dim → hidden → hidden → 1`` (tanh, sigmoid output),
    weights and biases N(0, 1/fan_in) from a seeded key. Returns ``(weights, probe, G)``: ``probe`` maps one
    ``(dim,)`` position to f(x), ``G = (f(x) − 0.5)²`` the prediction-risky probing loss (maximally unsure at
    f(x) = 0.5). Used by the ``mlp_probe_*`` targets and by ``jaxprobe.bench``'s throughput, gpu and answer_speed.

    Examples
    --------
    >>> weights, probe, G = mlp_probe(dim=3, hidden=8)
    >>> sorted(weights), weights["w0"].shape
    (['b0', 'b1', 'b2', 'w0', 'w1', 'w2'], (3, 8))
    >>> bool(0.0 <= G(jnp.ones(3)) <= 0.25)                       # G = (f(x) - 0.5)^2 with 0 < f < 1
    True
    """
    keys = jax.random.split(jax.random.key(seed), 6)
    shapes = [(dim, hidden), (hidden, hidden), (hidden, 1)]
    weights = {}
    for i, (fan_in, fan_out) in enumerate(shapes):
        scale = 1.0 / math.sqrt(fan_in)
        weights[f"w{i}"] = np.asarray(jax.random.normal(keys[i], (fan_in, fan_out), jnp.float32) * scale)
        weights[f"b{i}"] = np.asarray(jax.random.normal(keys[3 + i], (fan_out,), jnp.float32) * scale)
    params = {name: jnp.asarray(value) for name, value in weights.items()}

    def probe(x):
        h = jnp.tanh(x @ params["w0"] + params["b0"])
        h = jnp.tanh(h @ params["w1"] + params["b1"])
        return jax.nn.sigmoid(h @ params["w2"] + params["b2"])[0]

    def G(x):
        return (probe(x) - 0.5) ** 2

    return weights, probe, G


MLP_HIDDEN, MLP_TEMPERATURE = 64, 0.01


def mlp_loss(dim: int) -> Callable[[jax.Array], jax.Array]:
    """G of the ``mlp_probe_*`` targets: :func:`mlp_probe` ``(dim, 64, seed 0)``'s loss (0 ≤ G ≤ ¼).

    Examples
    --------
    >>> G = mlp_loss(2)
    >>> bool(0.0 <= G(jnp.zeros(2)) <= 0.25)
    True
    """
    return mlp_probe(dim, MLP_HIDDEN, 0)[2]


def _mlp_logdensity(dim: int) -> Callable[[jax.Array], jax.Array]:
    """``gibbs(G, τ = 0.01, N(0, I))`` of :func:`mlp_loss`, as ``jaxprobe.bench.answer_speed.make_target``."""
    return gibbs(mlp_loss(dim), MLP_TEMPERATURE, priors.StandardNormal())


def _grid_moments(grid: SquareGrid, stride: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Mean, var ``(2,)`` and log Z of exp(−loss) by the midpoint rule on every ``stride``-th grid point."""
    loss = grid.loss.reshape(grid.num, grid.num)[::stride, ::stride].ravel()
    points = grid.points.reshape(grid.num, grid.num, 2)[::stride, ::stride].reshape(-1, 2)
    weight = np.exp(-(loss - loss.min()))
    total = weight.sum()
    mean = weight @ points / total
    var = weight @ (points - mean) ** 2 / total
    area = (grid.high - grid.low) ** 2
    return mean, var, float(-loss.min() + np.log(total / weight.size * area))


def _mlp_probe_2d() -> Target:
    """The MLP probe at d = 2; truth by the midpoint rule on 600² points of [−8, 8]² (the N(0, I) prior leaves
    < 1e-14 outside; the tilt is at most 1), its error bounded by the change from every other point."""
    logdensity = _mlp_logdensity(2)
    grid = SquareGrid(lambda x: -logdensity(x), -8.0, 8.0, 600)
    mean, var, log_z = _grid_moments(grid, 1)
    mean_half, var_half, _ = _grid_moments(grid, 2)
    return Target("mlp_probe_2d", logdensity, 2, mean=mean, var=var, log_z=log_z, mean_se=np.abs(mean - mean_half),
                  var_se=np.abs(var - var_half), source="quadrature",
                  description="jaxprobe question: the MLP probe G = (f(x) - 0.5)^2 of a fixed random MLP "
                              "2 -> 64 -> 64 -> 1, tau = 0.01, N(0, I) prior")


# ------------------------------------------------------------------ reference runs


def reference_path(name: str) -> str:
    """The stored reference run of built-in target ``name``: ``jaxprobe/benchmark/reference/NAME.npz``.

    Examples
    --------
    >>> path = reference_path("mlp_probe_50d")
    >>> path.endswith(os.path.join("reference", "mlp_probe_50d.npz")), os.path.exists(path)
    (True, True)
    """
    return os.path.join(REFERENCE_DIR, f"{name}.npz")


def read_reference(name: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``(header, arrays)`` of a stored reference run, verified (:func:`jaxprobe._io.read_checked_npz`): arrays
    ``mean``, ``var``, ``mean_se``, ``var_se`` ``(dim,)``; the header says how the run was made.

    Examples
    --------
    >>> header, arrays = read_reference("mlp_probe_50d")
    >>> header["method"], arrays["mean"].shape, bool(np.all(arrays["mean_se"] > 0))
    ('rejection', (50,), True)
    """
    remedy = f"Regenerate it: python -m jaxprobe.benchmark.reference --names {name}"
    return read_checked_npz(reference_path(name), remedy)


def reference_problem(name: str) -> tuple[Callable[[jax.Array], jax.Array], int, str]:
    """``(logdensity_fn, dim, description)`` of a target whose truth is a reference run (:data:`REFERENCE_TARGETS`).

    Examples
    --------
    >>> logdensity, dim, description = reference_problem("logistic_regression")
    >>> dim, description.split(" (")[0]                       # intercept + 30 coefficients
    (31, "Bayesian logistic regression on scikit-learn's breast_cancer")
    """
    if name == "logistic_regression":
        return (_logistic_logdensity, 31,
                "Bayesian logistic regression on scikit-learn's breast_cancer (569 rows, 30 features standardized, "
                "label 1 = malignant), intercept first, N(0, 1) prior on all 31 coefficients; needs scikit-learn")
    if name == "mlp_probe_50d":
        return (_mlp_logdensity(50), 50,
                "jaxprobe question: the MLP probe G = (f(x) - 0.5)^2 of a fixed random MLP 50 -> 64 -> 64 -> 1, "
                "tau = 0.01, N(0, I) prior (jaxprobe.bench.answer_speed's target)")
    raise ValueError(f"name must be one of {REFERENCE_TARGETS}, got {name!r}")


def _from_reference(name: str) -> Target:
    """A target whose truth is its stored reference run (FileNotFoundError naming the command if absent)."""
    logdensity, dim, description = reference_problem(name)
    path = reference_path(name)
    if not os.path.exists(path):
        raise FileNotFoundError(f"the reference run of target {name!r} is missing ({path}); make it with: "
                                f"python -m jaxprobe.benchmark.reference --names {name}")
    header, arrays = read_reference(name)
    log_z = float(arrays["log_z"]) if "log_z" in arrays else None  # rejection runs estimate it (module notes)
    return Target(name, logdensity, dim, **{field: arrays[field] for field in _TRUTH_FIELDS}, log_z=log_z,
                  source=f"reference run (jaxprobe/benchmark/reference/{name}.npz: {header.get('summary', '')})",
                  description=description)


# ------------------------------------------------------------------ the registry

_BUILDERS: dict[str, Callable[[], Target]] = {
    "isotropic_gaussian": _isotropic_gaussian,
    "ill_conditioned_gaussian": _ill_conditioned_gaussian,
    "funnel": _funnel,
    "banana": _banana,
    "mixture_2d": functools.partial(_mixture, 2),
    "mixture_10d": functools.partial(_mixture, 10),
    "student_t": _student_t,
    "eight_schools_centred": functools.partial(_eight_schools, True),
    "eight_schools_noncentred": functools.partial(_eight_schools, False),
    "logistic_regression": functools.partial(_from_reference, "logistic_regression"),
    "mlp_probe_2d": _mlp_probe_2d,
    "mlp_probe_50d": functools.partial(_from_reference, "mlp_probe_50d"),
}


def names() -> tuple[str, ...]:
    """The names of the built-in targets, in the registry's order.

    Examples
    --------
    >>> names()[:3]
    ('isotropic_gaussian', 'ill_conditioned_gaussian', 'funnel')
    """
    return tuple(_BUILDERS)


@functools.cache
def _built(name: str) -> Target:
    return _BUILDERS[name]()  # one Target object per name: its logdensity_fn's compiled programs are reused


def targets() -> dict[str, Target]:
    """The built-in targets by name (module table), built on first call and cached.

    Examples
    --------
    >>> table = targets()
    >>> table["funnel"].dim, table["funnel"] is get_target("funnel")
    (10, True)
    """
    return {name: _built(name) for name in _BUILDERS}


def get_target(name_or_target: str | Target) -> Target:
    """A built-in target by name (built on first use), or ``name_or_target`` itself if it is a :class:`Target`.

    Raises ``ValueError`` for an unknown name (listing the accepted ones), ``TypeError`` for anything else.

    Examples
    --------
    >>> target = get_target("isotropic_gaussian")
    >>> target.dim, float(target.logdensity_fn(jnp.zeros(target.dim))) > float(target.logdensity_fn(jnp.ones(target.dim)))
    (100, True)
    >>> get_target("gaussian")                                # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: ...isotropic_gaussian...
    """
    if isinstance(name_or_target, Target):
        return name_or_target
    if not isinstance(name_or_target, str):
        raise TypeError(f"a target must be a built-in name (one of {names()}) or a jaxprobe.benchmark.Target, got "
                        f"{type(name_or_target).__name__}")
    if name_or_target not in _BUILDERS:
        raise ValueError(f"unknown target {name_or_target!r}; the built-in targets are {names()}")
    return _built(name_or_target)
