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
from jaxprobe.constraints import Box, Fixed, Integer, Restriction, restriction
from jaxprobe.models.sklearn import CategoricalInput, categorical_inputs_read_by
from jaxprobe.probes import Probe, as_probe
from jaxprobe.target import check_temperature, gibbs
from jaxprobe.types import Array, PRNGKey

__all__ = ["Question", "infer_dim", "categorical_constraints"]


def infer_dim(*, dim: Any = None, init: Any = None, prior: Any = None, constraints: Any = None,
              probe: Any = None) -> int:
    """The number of features d, from whatever states it; a ValueError when nothing does or they disagree.

    Sources: ``dim``; ``init`` ``(num_chains, d)`` (an array, a DataFrame or a nested list);
    a prior with a ``mean`` ``(d,)``; a ``Box`` over all features whose bounds are ``(d,)``
    values; a list of constraints that states its ``dim`` (:func:`jaxprobe.constraints.from_dataset`
    builds one from a data set); a probe that knows its input length (``Probe.dim``: from a
    model's ``n_features_in_``, e.g. a :func:`jaxprobe.models.from_sklearn` import, or a
    ``localize`` anchor).

    Examples
    --------
    >>> from jaxprobe import priors, probes
    >>> infer_dim(init=np.zeros((4, 3))), infer_dim(probe=probes.localize(jnp.zeros(2)))
    (3, 2)
    >>> infer_dim(dim=2, prior=priors.DiagonalGaussian(jnp.zeros(3), jnp.ones(3)))
    Traceback (most recent call last):
        ...
    ValueError: the number of features disagrees between dim (2), prior (3)
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


def categorical_constraints(probe: Callable, constraints: Any, dim: int) -> Any:
    """``constraints`` completed so that every categorical input of the imported Pipelines ``probe`` reads is exact.

    The categorical inputs are those :func:`jaxprobe.models.from_sklearn` recorded for a Pipeline's
    ``OneHotEncoder`` / ``OrdinalEncoder`` columns (:class:`jaxprobe.models.sklearn.CategoricalInput`), found in
    the probe's traced program whatever wraps the model (:func:`~jaxprobe.models.sklearn.categorical_inputs_read_by`;
    a Pipeline is taken to read x itself when its raw row has d columns). Per column j, with values
    ``v_0 < … < v_{K−1}`` (codes 0..K−1 for strings; values for numbers, evenly spaced ``v_k = a + k·b``):

    - left unconstrained (or only inside bounds wider than every category's cell): ``Integer([j],
      mean=−a/b, scale=1/b)`` and ``Box(a − b/2, v_{K−1} + b/2)`` are added (one category: ``Fixed``). The
      model reads a value in (v_k − b/2, v_k + b/2] as category k (codes always, numbers with
      ``one_hot="nearest"``), so the relaxed draw has exactly the target ``exp(−G(v_k)/τ)·prior`` per cell,
      and the reported draws (rounded) are categories: exact, not a relaxation;
    - ``Fixed`` to one of the values, or already an Integer with Box bounds on cell edges: kept;
    - otherwise a ``ValueError`` naming the column and the constraint to pass: other constraints on it, a
      numeric column the model reads exactly (``one_hot="exact"``), unevenly spaced values, or a column
      another step also reads as a number (no relaxation is exact there: hold it ``Fixed``).

    The missing category (NaN) of a numeric column is never sampled. Returns ``constraints`` itself when
    nothing is added, else a list (a ``ConstraintList`` keeps its ``dim``). A :class:`Restriction` cannot be
    extended: one that leaves such a column unconstrained is refused with the constraints to add.

    Examples
    --------
    >>> from sklearn.compose import ColumnTransformer
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import OneHotEncoder
    >>> x, y = np.array([[0.0, 0.5], [1.0, -0.5], [2.0, 1.0], [0.0, -1.0]]), [0, 1, 1, 0]   # column 0: categories
    >>> pipeline = make_pipeline(ColumnTransformer([("code", OneHotEncoder(), [0])], remainder="passthrough"),
    ...                          LogisticRegression()).fit(x, y)
    >>> model = jaxprobe.models.from_sklearn(pipeline, one_hot="nearest")
    >>> categorical_constraints(jaxprobe.probes.fixed_label(model, 1), None, 2)   # column 0 sampled on its cells
    [Integer(indices=[0], mean=0.0, scale=1.0), Box(low=[-0.5], high=[2.5], indices=[0])]
    """
    found = categorical_inputs_read_by(as_probe(probe).fn, dim)
    if not found:
        return constraints
    given = constraints if isinstance(constraints, Restriction) else restriction(constraints, dim)
    by_column: dict[int, list[tuple[str, CategoricalInput]]] = {}
    for model, record in found:
        if record.column is None:
            raise ValueError(f"{model}: {record.describe()}; no constraint on x keeps a computed value on "
                             "the categories, so jaxprobe cannot sample this model's inputs exactly")
        by_column.setdefault(record.column, []).append((model, record))
    added: list[Any] = []
    for column, pairs in sorted(by_column.items()):
        added.extend(_exact_categorical(column, pairs, given))
    if not added:
        return constraints
    if isinstance(constraints, Restriction):
        raise ValueError(f"constraints is a Restriction without the categorical constraints {added}: pass the "
                         "constraints as a list, to which jaxprobe adds them, or build the Restriction with them")
    if isinstance(constraints, list):  # a ConstraintList stays one (its dim kept)
        return constraints + added
    if isinstance(constraints, tuple):
        return list(constraints) + added
    return ([] if constraints is None else [constraints]) + added


def _preview(values: Any) -> str:
    """At most 8 values of a list, for messages."""
    values = list(values)
    return str(values) if len(values) <= 8 else str(values[:8])[:-1] + f", ... ({len(values)} in all)]"


def _exact_categorical(column: int, pairs: list[tuple[str, CategoricalInput]], given: Restriction) -> list[Any]:
    """The constraints to add for one categorical column (``[]`` when ``given`` keeps it exact already), or a
    ValueError naming it (see :func:`categorical_constraints`)."""
    model, record = pairs[0]
    what = f"{model}: {record.describe()} ({record.kind}, categories {_preview(record.categories)})"
    if any(not np.array_equal(other.values, record.values, equal_nan=True) for _, other in pairs[1:]):
        raise ValueError(f"{what}: the models read column {column} with different categories; hold it Fixed")
    valid = np.sort(record.values[np.isfinite(record.values)])
    if given.is_fixed[column]:
        value = given.fixed_values[column]
        working = np.dtype(jnp.result_type(float))
        if not np.any(valid.astype(working) == working.type(value)):
            raise ValueError(f"{what}: it is fixed to {value:g}, which is none of its categories' values "
                             f"{_preview(valid.tolist())}")
        return []
    fix = f"Fixed([{column}], [value]) with value one of {_preview(valid.tolist())}"
    reason = None
    if any(other.read_as_number for _, other in pairs):
        reason = "another step reads the same value as a number, so no relaxation of it is exact"
    elif any(other.reading == "exact" for _, other in pairs):
        reason = (f"the model reads its values {_preview(valid.tolist())} exactly (from_sklearn(..., "
                  "one_hot='exact'), the default), so a sampled value between them is an unknown category; "
                  "import the Pipeline with from_sklearn(..., one_hot='nearest') to sample it")
    grid = _category_grid(valid)
    if reason is None and grid is None:
        reason = (f"its values {_preview(valid.tolist())} are not evenly spaced, so no Integer constraint "
                  "rounds onto them" if valid.size else
                  "its only category is the missing value (NaN), which no draw can hold")
    if reason is not None:
        raise ValueError(f"{what}: it cannot be sampled exactly: {reason}. Hold it fixed: {fix}")
    default = _default_categorical(column, valid, grid)
    start, step = grid
    # bounds (if any) around every category's cell, e.g. a Box(-5, 5) over all features: the defaults decide
    free = (given.low[column] <= start - step / 2 and given.high[column] >= float(valid[-1]) + step / 2
            and column not in given.integer_indices and not any(column in group for group in given.groups))
    if free:
        return default
    if _keeps_categories(given, column, valid, grid):
        return []
    raise ValueError(f"{what}: the constraints on column {column} do not keep it on its categories; leave it "
                     f"unconstrained (jaxprobe then adds {default}), pass those, or {fix}")


def _category_grid(valid: np.ndarray) -> tuple[float, float] | None:
    """``(a, b)`` with ``valid[k] = a + k·b`` (b = 1 for one value), or None when not evenly spaced (or empty)."""
    if valid.size == 0:
        return None
    if valid.size == 1:
        return float(valid[0]), 1.0
    steps = np.diff(valid)
    if not np.allclose(steps, steps[0], rtol=1e-6, atol=0.0):
        return None
    return float(valid[0]), float(steps[0])


def _default_categorical(column: int, valid: np.ndarray, grid: tuple[float, float]) -> list[Any]:
    """Integer on the category grid and Box on its outer cell edges (one category: Fixed to it)."""
    start, step = grid
    if valid.size == 1:
        return [Fixed([column], [start])]
    return [Integer([column], mean=-start / step + 0.0, scale=1.0 / step),
            Box([start - step / 2], [float(valid[-1]) + step / 2], indices=[column])]


def _keeps_categories(given: Restriction, column: int, valid: np.ndarray, grid: tuple[float, float]) -> bool:
    """Whether ``given`` already samples ``column`` exactly: an Integer on the category grid (checked by
    reporting points ±0.4 steps around each category inside the bounds) with Box bounds on cell edges."""
    start, step = grid
    low, high = given.low[column], given.high[column]
    edges = start - step / 2 + step * np.arange(valid.size + 1)
    on_edge = [np.isfinite(bound) and np.any(np.isclose(edges, bound, rtol=1e-6, atol=1e-9 * step))
               for bound in (low, high)]
    if column not in given.integer_indices or not all(on_edge):
        return False
    inside = valid[(valid > low) & (valid < high)]
    points = np.zeros((2 * inside.size, given.dim))
    points[:, column] = np.concatenate([inside - 0.4 * step, inside + 0.4 * step])
    reported = given.report(points)[:, column]
    return bool(np.allclose(reported, np.concatenate([inside, inside]), rtol=1e-6, atol=1e-6 * step))


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
        A :mod:`jaxprobe.constraints` object or a list of them. Categorical inputs of Pipelines imported
        with :func:`jaxprobe.models.from_sklearn` that the probe reads get exact constraints added (or a
        ValueError naming the column): see :func:`categorical_constraints`.
    dim
        d, when nothing else states it (see :func:`infer_dim`).

    Notes
    -----
    Two questions with equal probe functions, temperatures, priors and restrictions are equal and
    hash alike, so the engine's compiled programs are reused when the same question is asked again,
    also with new but equal objects written inline (``prior=DiagonalGaussian(m, s)``,
    ``constraints=[Box(-3, 3)]``, ``fixed_label(model, 1)``): priors, constraints and the probes of
    :mod:`jaxprobe.probes` compare by value (arrays by dtype, shape and content), models and functions
    of your own by identity, and a traced temperature or parameter only to itself
    (:func:`jaxprobe._values.value_key`).

    Examples
    --------
    >>> from jaxprobe import constraints, priors, probes
    >>> model = lambda x: jax.nn.sigmoid(x @ jnp.array([2.0, -1.0]))
    >>> question = jaxprobe.Question(probes.prediction_risky(model, alpha=0.5), 0.01, priors.StandardNormal(),
    ...                              constraints=[constraints.Box(-3.0, 3.0)], dim=2)
    >>> question.dim, question.num_free
    (2, 2)
    >>> z = question.initial_positions(jax.random.key(0), 4)  # 4 chains' starts on the unconstrained z
    >>> x = jax.vmap(question.to_data)(z)                    # z ↦ x (one position each) in the box
    >>> z.shape, x.shape, bool(jnp.all(jnp.abs(x) <= 3.0))
    ((4, 2), (4, 2), True)
    >>> bool(jnp.isfinite(question.logdensity(z[0])))          # the density the engine samples, on z
    True
    >>> question == jaxprobe.Question(probes.prediction_risky(model, alpha=0.5), 0.01, priors.StandardNormal(),
    ...                                constraints=[constraints.Box(-3.0, 3.0)], dim=2)   # equal by value
    True
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
        # categorical inputs of imported Pipelines: exact constraints added, or a ValueError naming the column
        constraints = categorical_constraints(self.probe, constraints, self.dim)
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
        if self.restriction.is_identity:  # x = z: the Gibbs density itself, with nothing added
            return self._gibbs(z)
        return self._gibbs(self.restriction.forward(z)) + self.restriction.log_weight(z)

    # ---------------------------------------------------------------- starting points

    def initial_positions(self, rng_key: PRNGKey, num_chains: int, dtype: Any = jnp.float32) -> Array:
        """``(num_chains, num_free)`` starting points z (traceable).

        Draws of the prior when it has ``.sample`` (fixed features set to their
        values, one-hot groups drawn uniformly on the simplex), mapped to z; a draw that
        breaks a bound (or a prior without ``.sample``) is replaced by z ~ N(0, I).
        The one-hot groups are spread over the simplex (Dirichlet(1)), not all at its centre: chains that
        all start at one point cannot show the verdict a category no chain visited (its starts check).
        """
        key_prior, key_normal = jax.random.split(rng_key)
        key_groups = jax.random.fold_in(rng_key, 1)  # a third key; the other two as before (same starts)
        normal = jax.random.normal(key_normal, (num_chains, self.num_free), dtype)
        drawn = self._prior_draws(key_prior, num_chains, dtype)
        if drawn is None:
            return normal
        drawn = drawn.astype(dtype)
        for key, columns in zip(jax.random.split(key_groups, max(1, len(self.restriction.groups))),
                                self.restriction.groups):
            simplex = jax.random.dirichlet(key, jnp.ones(columns.size, dtype), (num_chains,), dtype)
            drawn = drawn.at[:, columns].set(simplex)
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
