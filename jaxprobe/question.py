"""``jaxprobe.Question``: the one owner of a probing target, p(x) ∝ exp(−G(x)/τ)·prior(x) on a restricted space.

A question is a probe G, a temperature τ, a prior and feature restrictions
(:mod:`jaxprobe.constraints`). Every front end (``generate``, ``sweep``, the
``jaxprobe`` command, ``reconstruct``, ``latent.generate``) builds one and hands
it to the engine; nothing else assembles a target, so the same question asked
through any of them is the same density, started the same way.

The sampler runs on an unconstrained ``z`` ``(num_free,)``; ``x = T(z)``
(:meth:`to_data`) maps it to data space. On z the question owns (probing
paper, Eq. 3 with the change of variables of Sec. 3):

- the **reference** ``log r(z) = log prior(T(z)) + log|det J_T(z)| + Σ_groups log Dir(x_g; α)``
  (the prior restricted to the feature space, :meth:`reference_logdensity`);
- the **tilt** ``ℓ(z) = −G(T(z))/τ`` (:meth:`tilt`);
- the **target** ``log p(z) = log r(z) + ℓ(z)`` (:meth:`logdensity`).

Tempering (``sampler="smc"``) moves from the reference to the target through
``r(z)·exp(λ ℓ(z))``: stage λ is the same question at temperature τ/λ, and the
normalizing constant ``log Z = log E_r[exp(−G/τ)]`` is the share of the prior's
mass that answers the question.
"""

from __future__ import annotations

import numbers
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe._inputs import check_int
from jaxprobe._values import value_key
from jaxprobe.constraints import Restriction, restriction
from jaxprobe.probes import Probe, as_probe
from jaxprobe.target import check_temperature, gibbs
from jaxprobe.types import Array, PRNGKey

__all__ = ["Question", "infer_dim"]


def infer_dim(*, dim: Any = None, init: Any = None, prior: Any = None, constraints: Any = None,
              probe: Any = None) -> int:
    """The number of features d, from whatever states it; a ValueError when nothing does or they disagree.

    Sources: ``dim``; ``init`` ``(num_chains, d)`` (an array, a DataFrame or a nested list);
    a prior with a ``mean`` ``(d,)``; a ``Box`` over all features whose bounds are ``(d,)``
    values; a list of constraints that states its ``dim`` (:func:`jaxprobe.constraints.from_dataset`
    builds one from a data set); a probe that knows its input length (``Probe.dim``: from a
    model's ``n_features_in_``, e.g. a :func:`jaxprobe.models.from_sklearn` import, or a
    ``localize`` anchor).
    """
    stated: dict[str, int] = {}
    if dim is not None:
        stated["dim"] = check_int(dim, "dim", minimum=1)
    if init is not None:
        shape = np.shape(init)
        if len(shape) != 2:
            raise ValueError(f"init must have shape (num_chains, num_features), got {shape}")
        stated["init"] = int(shape[1])
    mean = getattr(prior, "mean", None)
    if mean is not None and np.ndim(mean) == 1:
        stated["prior"] = int(np.size(mean))
    if isinstance(constraints, Restriction):
        stated["constraints"] = constraints.dim
        constraints = None
    listed = getattr(constraints, "dim", None)
    if isinstance(listed, numbers.Integral) and not isinstance(listed, bool):
        stated["constraints (from the data set)"] = int(listed)
    for number, constraint in enumerate(constraints if isinstance(constraints, (list, tuple)) else [constraints]):
        if getattr(constraint, "indices", 0) is None:  # a Box over all features
            for side in ("low", "high"):
                bound = getattr(constraint, side)
                if np.ndim(bound) == 1:
                    stated.setdefault(f"constraints[{number}] ({type(constraint).__name__}) {side}",
                                      int(np.size(bound)))
    probe_dim = getattr(probe, "dim", None)
    if probe_dim is not None:
        stated["probe"] = int(probe_dim)
    if not stated:
        raise ValueError("the number of features is not known: pass init (num_chains, d), dim=d, "
                         "a prior with a mean (d,), Box bounds of shape (d,), or a probe of a model with "
                         "n_features_in_")
    if len(set(stated.values())) > 1:
        raise ValueError("the number of features disagrees between "
                         + ", ".join(f"{name} ({value})" for name, value in stated.items()))
    return next(iter(stated.values()))


def _is_traced(value: Any) -> bool:
    return isinstance(value, jax.core.Tracer)


class Question:
    """p(x) ∝ exp(−G(x)/τ)·prior(x) restricted by ``constraints``, on an unconstrained z.

    Parameters
    ----------
    probe
        G: a :class:`jaxprobe.probes.Probe` or a callable of one x ``(d,)`` → scalar.
    temperature
        τ > 0 (a traced scalar is accepted inside a compiled sweep).
    prior
        A log density on data space (:mod:`jaxprobe.priors`), or None for flat.
    constraints
        A :mod:`jaxprobe.constraints` object or a list of them.
    dim
        d, when nothing else states it (see :func:`infer_dim`).

    Two questions with equal probe functions, temperatures, priors and restrictions are equal and
    hash alike, so the engine's compiled programs are reused when the same question is asked again,
    also with new but equal objects written inline (``prior=DiagonalGaussian(m, s)``,
    ``constraints=[Box(-3, 3)]``, ``fixed_label(model, 1)``): priors, constraints and the probes of
    :mod:`jaxprobe.probes` compare by value (arrays by dtype, shape and content), models and functions
    of your own by identity, and a traced temperature or parameter only to itself
    (:func:`jaxprobe._values.value_key`).
    """

    def __init__(self, probe: Callable, temperature: Any, prior: Callable | None = None, constraints: Any = None,
                 dim: int | None = None, *, init: Any = None):
        self.probe: Probe = as_probe(probe)
        self.temperature = temperature if _is_traced(temperature) else check_temperature(temperature)
        if prior is not None and not callable(prior):
            raise TypeError(f"prior must be callable or None, got {type(prior).__name__}")
        self.prior = prior
        self._gibbs = gibbs(self.probe.fn, self.temperature, prior)  # −G(x)/τ + log prior(x): the one formula
        self.dim = infer_dim(dim=dim, init=init, prior=prior, constraints=constraints, probe=self.probe)
        self.restriction: Restriction = (constraints if isinstance(constraints, Restriction)
                                         else restriction(constraints, self.dim))
        self.logdensity = _Part(self, "target")
        self.reference = _Reference(self)
        # Everything the density, the starting points and the reports depend on, computed once.
        self._key = (value_key(self.probe.fn), value_key(self.temperature), value_key(self.prior), self.restriction)
        self._hash = hash(self._key)

    # ---------------------------------------------------------------- the density on z

    @property
    def num_free(self) -> int:
        """The dimension of z."""
        return self.restriction.num_free

    def to_data(self, z: Array) -> Array:
        """z ``(num_free,)`` → x ``(d,)`` in data space (one-hot groups relaxed)."""
        return self.restriction.forward(z)

    def reference_logdensity(self, z: Array) -> Array:
        """log r(z): the prior restricted to the feature space, with every Jacobian and relaxation term."""
        value = self.restriction.log_weight(z)
        if self.prior is not None:
            value = value + self.prior(self.restriction.forward(z))
        return value

    def tilt(self, z: Array) -> Array:
        """ℓ(z) = −G(T(z))/τ."""
        return -self.probe.fn(self.restriction.forward(z)) / self.temperature

    def _target(self, z: Array) -> Array:
        """log p(z) = [−G(x)/τ + log prior(x)] at x = T(z) (:func:`jaxprobe.gibbs`) + the restriction's terms."""
        return self._gibbs(self.restriction.forward(z)) + self.restriction.log_weight(z)

    # ---------------------------------------------------------------- starting points

    def initial_positions(self, rng_key: PRNGKey, num_chains: int, dtype: Any = jnp.float32) -> Array:
        """``(num_chains, num_free)`` starting points z (traceable).

        Draws of the prior when it has ``.sample`` (fixed features set to their
        values, one-hot groups at the simplex's centre), mapped to z; a draw that
        breaks a bound (or a prior without ``.sample``) is replaced by z ~ N(0, I).
        """
        key_prior, key_normal = jax.random.split(rng_key)
        normal = jax.random.normal(key_normal, (num_chains, self.num_free), dtype)
        drawn = self._prior_draws(key_prior, num_chains, dtype)
        if drawn is None:
            return normal
        drawn = drawn.astype(dtype)
        for columns in self.restriction.groups:  # one-hot groups start at the simplex's centre
            drawn = drawn.at[:, columns].set(1.0 / columns.size)
        z = jax.vmap(lambda x: self.restriction.unconstrain(x, jnp))(drawn)
        usable = jnp.all(jnp.isfinite(z), axis=1, keepdims=True)
        return jnp.where(usable, z, normal)

    def _prior_draws(self, rng_key: PRNGKey, num_chains: int, dtype: Any) -> Array | None:
        sampler = getattr(self.prior, "sample", None)
        if sampler is None:
            return None
        try:
            shape = jax.eval_shape(lambda key: _call_sample(sampler, key, num_chains, dtype), rng_key).shape
        except Exception:  # noqa: BLE001 - a prior whose .sample does not fit: start from N(0, I)
            return None
        if shape != (num_chains, self.dim):
            return None
        return _call_sample(sampler, rng_key, num_chains, dtype)

    def to_unconstrained(self, x: Any) -> np.ndarray:
        """Data-space points ``(..., d)`` given by a user → z ``(..., num_free)`` (NumPy, validated)."""
        return self.restriction.inverse(x)

    # ---------------------------------------------------------------- identity

    @property
    def key(self) -> tuple:
        """What the density depends on, hashable and compared by value: the probe's function, the
        temperature, the prior and the restriction (see the class notes)."""
        return self._key

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: Any) -> bool:
        return other is self or (isinstance(other, Question) and self._hash == other._hash and self._key == other._key)

    def __repr__(self) -> str:
        return (f"Question({self.probe.name}, temperature={self.temperature}, prior={type(self.prior).__name__}, "
                f"dim={self.dim}, num_free={self.num_free})")


def _call_sample(sampler: Callable, rng_key: PRNGKey, num_chains: int, dtype: Any) -> Array:
    try:
        return jnp.asarray(sampler(rng_key, num_chains, dtype=dtype))
    except TypeError:
        return jnp.asarray(sampler(rng_key, num_chains)).astype(dtype)


class _Part:
    """A question's log density on z as a hashable callable (equal questions share compiled programs)."""

    def __init__(self, question: Question, part: str):
        self.question, self.part = question, part

    def __call__(self, z: Array) -> Array:
        return self.question._target(z) if self.part == "target" else self.question.tilt(z)

    @property
    def tilt(self) -> "_Part":
        """ℓ(z) = −G(T(z))/τ, the part tempering scales (``sampler="smc"``). A hashable object, not a bound
        method: bound methods compare their instance by identity, so equal questions would not share programs."""
        return _Part(self.question, "tilt")

    @property
    def reference(self) -> "_Reference":
        """The reference r(z) tempering starts from (``sampler="smc"``)."""
        return self.question.reference

    def __hash__(self) -> int:
        return hash((self.part, self.question))

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _Part) and self.part == other.part and self.question == other.question


class _Reference:
    """The reference r(z) of a question: callable as its log density, ``sample`` for exact draws (SMC).

    Exact draws exist when the prior factorizes over the free features the way
    the restriction does: no prior (uniform on a bounded box, Dirichlet(α) on
    one-hot groups), :class:`~jaxprobe.priors.StandardNormal` /
    :class:`~jaxprobe.priors.DiagonalGaussian` (truncated to Box bounds; fixed
    features drop out), :class:`~jaxprobe.priors.UniformBox`, or any prior with
    ``.sample`` when no feature is bounded, fixed or one-hot. Otherwise
    :meth:`sample` raises ``ValueError`` saying why.
    """

    def __init__(self, question: Question):
        self.question = question

    def __call__(self, z: Array) -> Array:
        return self.question.reference_logdensity(z)

    def __hash__(self) -> int:
        return hash(("reference", self.question))

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _Reference) and self.question == other.question

    def check(self) -> None:
        """Raise ``ValueError`` if the reference cannot be drawn exactly."""
        self._plan()

    def _plan(self) -> tuple[str, Any]:
        from jaxprobe import priors

        question = self.question
        restricted = question.restriction
        prior = question.prior
        plain = (restricted.is_identity and not restricted.groups)
        has_groups = bool(restricted.groups)
        free_low, free_high = restricted.low[restricted.free_indices], restricted.high[restricted.free_indices]
        if isinstance(prior, (priors.StandardNormal, priors.DiagonalGaussian)):
            if has_groups:
                raise ValueError("sampler='smc' cannot draw the reference exactly: a Gaussian prior over one-hot "
                                 "columns is not a Dirichlet; pass prior=None for the one-hot features or use MCMC")
            if isinstance(prior, priors.StandardNormal):
                mean, scale = np.zeros(question.dim), np.ones(question.dim)
            else:
                mean, scale = prior.mean, prior.scale
            return "normal", (mean[restricted.free_indices], scale[restricted.free_indices])
        if isinstance(prior, priors.UniformBox):
            low = np.maximum(np.broadcast_to(prior.low, (question.dim,))[restricted.free_indices], free_low)
            high = np.minimum(np.broadcast_to(prior.high, (question.dim,))[restricted.free_indices], free_high)
            if has_groups or np.any(low >= high):
                raise ValueError("sampler='smc': the UniformBox prior and the constraints leave no box to draw from")
            return "uniform", (low, high)
        if prior is None or isinstance(prior, priors.NoPrior):
            if not (np.all(np.isfinite(free_low)) and np.all(np.isfinite(free_high))):
                raise ValueError("sampler='smc' needs a proper reference: with no prior every free feature needs "
                                 "finite Box bounds (else the reference is improper); pass a prior with .sample")
            return "uniform", (free_low, free_high)
        if not callable(getattr(prior, "sample", None)):
            raise ValueError(f"sampler='smc' needs a prior with .sample(rng_key, n) to draw the reference; "
                             f"{type(prior).__name__} has none")
        if not plain:
            raise ValueError(f"sampler='smc' cannot draw the reference exactly: the prior "
                             f"{type(prior).__name__} would have to be conditioned on fixed features, truncated to "
                             "Box bounds or combined with one-hot groups (supported there: StandardNormal, "
                             "DiagonalGaussian, UniformBox or no prior)")
        return "prior", None

    def sample(self, rng_key: PRNGKey, num: int, dtype: Any = jnp.float32) -> Array:
        """``(num, num_free)`` exact draws of r in z (traceable)."""
        kind, values = self._plan()
        question = self.question
        restricted = question.restriction
        key_free, key_groups = jax.random.split(rng_key)
        if kind == "prior":
            x = _call_sample(question.prior.sample, key_free, num, dtype)
            return jax.vmap(lambda row: restricted.unconstrain(row, jnp))(x)
        if kind == "normal":
            mean, scale = (np.asarray(v, np.float64) for v in values)
            free_low = restricted.low[restricted.free_indices]
            free_high = restricted.high[restricted.free_indices]
            with np.errstate(invalid="ignore"):
                lower, upper = (free_low - mean) / scale, (free_high - mean) / scale
            standard = jax.random.truncated_normal(key_free, jnp.asarray(lower, dtype), jnp.asarray(upper, dtype),
                                                   (num, mean.size), dtype)
            free = jnp.asarray(mean, dtype) + jnp.asarray(scale, dtype) * standard
        else:
            low, high = (np.asarray(v, np.float64) for v in values)
            unit = jax.random.uniform(key_free, (num, low.size), dtype)
            free = jnp.asarray(low, dtype) + jnp.asarray(high - low, dtype) * unit
        x = jnp.broadcast_to(jnp.asarray(restricted.fixed_values, dtype), (num, question.dim))
        x = x.at[:, restricted.free_indices].set(free)
        group_keys = jax.random.split(key_groups, max(len(restricted.groups), 1))
        for key, columns, alpha in zip(group_keys, restricted.groups, restricted.concentrations):
            x = x.at[:, columns].set(jax.random.dirichlet(key, jnp.asarray(alpha, dtype), (num,), dtype))
        return jax.vmap(lambda row: restricted.unconstrain(row, jnp))(x)
