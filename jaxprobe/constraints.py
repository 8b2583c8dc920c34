"""Feature restrictions as exact bijections (probing paper, Sec. 3 "feature-restricted samples").

The sampler runs on an unconstrained vector z; a bijection T maps it to data
space, x = T(z), and the target picks up log|det J_T(z)| so that x is sampled
from exactly the restricted density (clipping a Langevin proposal instead, as
the paper's code does, breaks detailed balance).

- :class:`Fixed`: immutable features; only the free coordinates are sampled.
  Fixing every column of a one-hot group to a one-hot vector makes that
  categorical feature immutable.
- :class:`Box`: per-feature bounds; ``x = low + (high − low)·sigmoid(z)`` for
  two finite bounds, ``low + softplus(z)`` / ``high − softplus(z)`` for one.
- :class:`OneHot`: a categorical feature's one-hot group of K columns, relaxed
  during sampling to the open probability simplex through the additive-logistic
  (softmax with one logit pinned at 0) bijection of K − 1 free coordinates,
  whose log-Jacobian is ``Σ_k log x_k``; a Dirichlet(``concentration``) relaxation
  prior on the simplex (default 1: flat) can push the relaxed point towards the
  vertices. Samples are *reported* as valid categories: the one-hot vector of
  the largest entry (:meth:`Restriction.report`).
- :class:`Integer`: integer features, sampled as continuous values and reported
  rounded (in original units when the column is standardized).

The relaxations are approximations, stated here once: while sampling, the model
sees the relaxed input (a point inside the simplex, a non-integer value); the
reported sample is its argmax / rounded version, whose probe value can differ
from that of the relaxed point. The relaxed draw is exact for the relaxed target
exp(−G(x)/τ)·prior(x)·Dirichlet(x_group); the reported draws are its image under
argmax / rounding. A small ``concentration`` (< 1) and a low τ keep the two close;
check the probe on the reported points when it matters (the examples do).

Combine by passing a list: ``[Box(low, high), Fixed([2, 5], [1.0, 0.0]), OneHot([6, 7, 8])]``;
several ``Box`` constraints intersect, a fixed value must lie inside its bounds.
:func:`from_dataset` builds the list for a :class:`jaxprobe.datasets.Dataset`.

Constraints are values: two constraints of the same class with equal fields (arrays compared by dtype,
shape and content) are equal and hash alike, and so are two :class:`Restriction` objects that are the same
bijection and report the same way, so a question asked again with ``constraints=[Box(-3, 3)]`` written
inline reuses its compiled programs. (Do not change an array after passing it to a constraint.)
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe._inputs import as_float_array, check_int
from jaxprobe._values import ValueObject, value_key
from jaxprobe.types import Array

__all__ = ["Box", "Fixed", "OneHot", "Integer", "Restriction", "restriction", "from_dataset", "ConstraintList",
           "ONE_HOT_INIT_SMOOTHING", "BOUND_INIT_OFFSET", "BOUND_TOLERANCE"]

#: A one-hot row handed in as ``init`` lies on the simplex's boundary, where z is
#: infinite: it is moved inside to ``(1 − ε)·x + ε/K`` with this ε.
ONE_HOT_INIT_SMOOTHING = 0.1

#: Box bounds are closed for starting points: an ``init`` value ON a bound (a real data row at the data
#: set's minimum or maximum), where z is ±inf, is moved inside by this fraction of the box's width
#: (two finite bounds: the unconstrained coordinate becomes ±log((1 − δ)/δ) ≈ ±13.8) or of
#: ``max(1, |bound|)`` (one bound: z = softplus⁻¹(δ·max(1, |bound|))). Points strictly inside are not moved.
BOUND_INIT_OFFSET = 1e-6

#: An ``init`` value within this fraction of ``max(1, |bound|)`` outside a bound counts as on it (the float32
#: rounding of a data row whose bound was computed in float64); farther out is an error naming row and feature.
BOUND_TOLERANCE = 1e-6


@dataclasses.dataclass(frozen=True, eq=False)
class Box(ValueObject):
    """Bounds ``low <= x <= high`` per feature (scalars broadcast; ±inf for one-sided or none).

    ``low`` / ``high``: scalars or ``(d,)`` values (arrays, lists, pandas Series such as
    ``frame.min()``). ``indices`` restricts the bounds to some features (then ``low``/``high``
    are given for those only). Samples lie strictly inside; a starting point may lie ON a
    bound (the bounds are closed for ``init``: see :data:`BOUND_INIT_OFFSET`).

    Examples
    --------
    >>> box = restriction([Box(-1.0, 1.0)], dim=2)          # both features in [−1, 1]
    >>> x = box.forward(jnp.array([0.0, 100.0]))             # any z maps inside the box
    >>> bool(abs(x[0]) < 1e-6 and 0.99 < x[1] <= 1.0)
    True
    >>> restriction([Box(0.0, jnp.inf, indices=[1])], dim=2).num_free   # one-sided, on feature 1 only
    2
    """

    low: Any
    high: Any
    indices: Any = None


@dataclasses.dataclass(frozen=True, eq=False)
class Fixed(ValueObject):
    """Immutable features: ``x[indices] = values`` in every sample.

    Examples
    --------
    >>> immutable = restriction([Fixed([0], [2.5])], dim=3)  # feature 0 is 2.5 in every sample
    >>> immutable.num_free, immutable.forward(jnp.zeros(2)).tolist()
    (2, [2.5, 0.0, 0.0])
    """

    indices: Any
    values: Any


@dataclasses.dataclass(frozen=True, eq=False)
class OneHot(ValueObject):
    """A categorical feature's one-hot group: ``columns`` (K >= 2), relaxed to the simplex.

    ``concentration``: α > 0, a scalar or ``(K,)``; the relaxed point gets the
    Dirichlet(α) density on the simplex (α = 1: flat; α < 1 favours the vertices,
    i.e. relaxed inputs close to real one-hot vectors).

    Examples
    --------
    >>> colour = restriction([OneHot([0, 1, 2])], dim=3)     # features 0-2: one categorical, 3 levels
    >>> x = colour.forward(jnp.zeros(colour.num_free))
    >>> colour.num_free, [round(float(v), 3) for v in x], round(float(x.sum()), 3)   # on the simplex
    (2, [0.333, 0.333, 0.333], 1.0)
    """

    columns: Any
    concentration: Any = 1.0


@dataclasses.dataclass(frozen=True, eq=False)
class Integer(ValueObject):
    """Integer features, sampled continuously and reported rounded.

    For standardized columns give the standardization (``x_std = (x − mean)/scale``):
    the value is rounded in original units and reported as
    ``(round(x_std·scale + mean) − mean)/scale``. Rounding stays inside the
    feature's bounds (the nearest integer inside them).

    Examples
    --------
    >>> counts = restriction([Integer([1])], dim=2)          # feature 1 is a count
    >>> counts.num_free, counts.is_relaxed
    (2, True)
    """

    indices: Any
    mean: Any = 0.0
    scale: Any = 1.0


_KNOWN = (Box, Fixed, OneHot, Integer)
_KNOWN_NAMES = "a jaxprobe.constraints.Box, Fixed, OneHot or Integer"


@dataclasses.dataclass
class _Gathered:
    """What a list of constraints says about each of the d features, gathered before the bijection is built."""

    low: np.ndarray  # (d,) the intersected Box bounds
    high: np.ndarray
    fixed_values: np.ndarray  # (d,) NaN where not fixed
    group_of: np.ndarray  # (d,) the index of the feature's OneHot group, −1 outside groups
    groups: list[np.ndarray]  # the columns of every OneHot group, fixed or not
    concentrations: list[np.ndarray]
    is_integer: np.ndarray  # (d,) bool
    integer_mean: np.ndarray
    integer_scale: np.ndarray
    boxed: np.ndarray  # (d,) bool: has a finite Box bound

    @classmethod
    def unconstrained(cls, dim: int) -> "_Gathered":
        """No constraint yet: unbounded, free, continuous features."""
        return cls(low=np.full(dim, -np.inf), high=np.full(dim, np.inf), fixed_values=np.full(dim, np.nan),
                   group_of=np.full(dim, -1), groups=[], concentrations=[], is_integer=np.zeros(dim, bool),
                   integer_mean=np.zeros(dim), integer_scale=np.ones(dim), boxed=np.zeros(dim, bool))


def _check_consistent(gathered: _Gathered) -> None:
    """Refuse constraints that contradict each other across features (a ValueError naming them)."""
    in_group = gathered.group_of >= 0
    if np.any(in_group & gathered.boxed):
        raise ValueError(f"features {np.nonzero(in_group & gathered.boxed)[0].tolist()} are in a OneHot group and "
                         "have Box bounds: a group is bounded by its simplex already")
    if np.any(in_group & gathered.is_integer):
        raise ValueError(f"features {np.nonzero(in_group & gathered.is_integer)[0].tolist()} are both OneHot and "
                         "Integer")
    low, high, fixed_values = gathered.low, gathered.high, gathered.fixed_values
    if np.any(low >= high):
        bad = np.nonzero(low >= high)[0]
        raise ValueError(f"bounds are empty (low >= high) for features {bad.tolist()}")
    outside = ~np.isnan(fixed_values) & ((fixed_values < low) | (fixed_values > high))
    if np.any(outside):
        raise ValueError(f"fixed values lie outside their bounds for features {np.nonzero(outside)[0].tolist()}")


def _sampled_groups(gathered: _Gathered, is_fixed: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The OneHot groups left to sample and their concentrations: a group fixed as a whole (to a one-hot
    vector: an immutable category) is dropped; a group fixed in part is refused."""
    groups: list[np.ndarray] = []
    concentrations: list[np.ndarray] = []
    for columns, alpha in zip(gathered.groups, gathered.concentrations):
        fixed_here = is_fixed[columns]
        if np.any(fixed_here) and not np.all(fixed_here):
            raise ValueError(f"Fixed covers only part of the OneHot group {columns.tolist()}: "
                             "fix all of its columns (to a one-hot vector) or none")
        if np.all(fixed_here):
            values = gathered.fixed_values[columns]
            if not (np.all((values == 0) | (values == 1)) and values.sum() == 1):
                raise ValueError(f"the OneHot group {columns.tolist()} is fixed to {values.tolist()}, "
                                 "which is not a one-hot vector")
        else:
            groups.append(columns)
            concentrations.append(alpha)
    return groups, concentrations


class Restriction:
    """The bijection z ↦ x for a list of constraints on d features.

    Layout of z: first the free elementwise features (``free_indices``, each
    through its Box transform or the identity), then K − 1 coordinates for each
    free one-hot group (``groups``), in the order given.

    Attributes: ``dim`` (d), ``free_indices`` (sampled features outside one-hot
    groups), ``groups`` (column arrays of the sampled one-hot groups),
    ``num_free`` (dimension of z), ``low`` / ``high`` per feature,
    ``integer_indices`` (features reported rounded).

    Examples
    --------
    >>> r = Restriction([Box(-1.0, 1.0), Fixed([2], [0.5])], dim=3)
    >>> r.num_free                                            # z has the 2 free features
    2
    >>> x = r.forward(jnp.array([0.3, -0.2]))                # z ↦ x: in the box, feature 2 fixed
    >>> bool(jnp.all(jnp.abs(x[:2]) < 1.0)), float(x[2])
    (True, 0.5)
    >>> bool(jnp.allclose(r.inverse(np.asarray(x)), jnp.array([0.3, -0.2]), atol=1e-5))   # and back
    True
    """

    def __init__(self, constraints: Sequence[Any], dim: int):
        self.dim = check_int(dim, "dim", minimum=1)
        gathered = _Gathered.unconstrained(self.dim)
        for number, constraint in enumerate(constraints):
            self._gather(gathered, constraint, f"constraints[{number}]")
        _check_consistent(gathered)
        is_fixed = ~np.isnan(gathered.fixed_values)
        self.groups, self._concentrations = _sampled_groups(gathered, is_fixed)
        self._build_free_layout(gathered, is_fixed)
        self._build_integers(gathered, is_fixed)

    def _gather(self, gathered: _Gathered, constraint: Any, where: str) -> None:
        """Add one constraint (``where``: its place in the list, for errors) to ``gathered``, in place."""
        if isinstance(constraint, Box):
            self._gather_box(gathered, constraint, where)
        elif isinstance(constraint, Fixed):
            self._gather_fixed(gathered, constraint, where)
        elif isinstance(constraint, OneHot):
            self._gather_one_hot(gathered, constraint, where)
        elif isinstance(constraint, Integer):
            self._gather_integer(gathered, constraint, where)
        else:
            raise TypeError(f"{where} must be {_KNOWN_NAMES}, got {type(constraint).__name__}")

    def _gather_box(self, gathered: _Gathered, constraint: Box, where: str) -> None:
        """Intersect the bounds with a Box's."""
        indices = self._indices(constraint.indices, where)
        box_low = self._values(constraint.low, indices, f"{where} (Box) low", constraint.indices)
        box_high = self._values(constraint.high, indices, f"{where} (Box) high", constraint.indices)
        if np.any(np.isnan(box_low)) or np.any(np.isnan(box_high)):
            raise ValueError(f"{where}: Box bounds must not be NaN")
        gathered.low[indices] = np.maximum(gathered.low[indices], box_low)
        gathered.high[indices] = np.minimum(gathered.high[indices], box_high)
        gathered.boxed[indices] |= np.isfinite(box_low) | np.isfinite(box_high)

    def _gather_fixed(self, gathered: _Gathered, constraint: Fixed, where: str) -> None:
        """Fix features to finite values (the same feature may be fixed twice to the same value)."""
        indices = self._indices(constraint.indices, where)
        values = self._values(constraint.values, indices, f"{where} (Fixed) values", constraint.indices)
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{where}: Fixed values must be finite")
        if len(set(indices.tolist())) != len(indices):
            raise ValueError(f"{where}: Fixed indices repeat")
        fixed_values = gathered.fixed_values
        clash = ~np.isnan(fixed_values[indices]) & (fixed_values[indices] != values)
        if np.any(clash):
            raise ValueError(f"{where}: features {indices[clash].tolist()} are fixed to two different values")
        fixed_values[indices] = values

    def _gather_one_hot(self, gathered: _Gathered, constraint: OneHot, where: str) -> None:
        """Add a OneHot group of >= 2 distinct columns, in no other group, with concentrations > 0."""
        columns = self._indices(constraint.columns, where)
        if columns.size < 2 or len(set(columns.tolist())) != columns.size:
            raise ValueError(f"{where}: OneHot columns must be >= 2 distinct indices, got {columns.tolist()}")
        group_of = gathered.group_of
        if np.any(group_of[columns] >= 0):
            raise ValueError(f"{where}: columns {columns[group_of[columns] >= 0].tolist()} "
                             "already belong to another OneHot group")
        alpha = self._values(constraint.concentration, columns, f"{where} (OneHot) concentration",
                             constraint.columns)
        if not np.all(np.isfinite(alpha)) or np.any(alpha <= 0):
            raise ValueError(f"{where}: OneHot concentration must be finite and > 0, "
                             f"got {constraint.concentration!r}")
        group_of[columns] = len(gathered.groups)
        gathered.groups.append(columns)
        gathered.concentrations.append(np.array(alpha))

    def _gather_integer(self, gathered: _Gathered, constraint: Integer, where: str) -> None:
        """Mark features as Integer, with the standardization their rounding undoes."""
        indices = self._indices(constraint.indices, where)
        mean = self._values(constraint.mean, indices, f"{where} (Integer) mean", constraint.indices)
        scale = self._values(constraint.scale, indices, f"{where} (Integer) scale", constraint.indices)
        if not np.all(np.isfinite(mean)) or not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            raise ValueError(f"{where}: Integer mean must be finite and scale finite and > 0")
        gathered.is_integer[indices] = True
        gathered.integer_mean[indices] = mean
        gathered.integer_scale[indices] = scale

    def _build_free_layout(self, gathered: _Gathered, is_fixed: np.ndarray) -> None:
        """Set the bounds, the fixed values, the free features and the dimension of z (after ``groups``)."""
        low, high = gathered.low, gathered.high
        self.low, self.high = low, high
        self.fixed_values = np.where(is_fixed, gathered.fixed_values, 0.0)
        self.is_fixed = is_fixed
        self.free_indices = np.nonzero(~is_fixed & ~(gathered.group_of >= 0))[0]
        self.num_free = int(self.free_indices.size + sum(g.size - 1 for g in self.groups))
        if self.num_free == 0:
            raise ValueError("every feature is fixed: nothing to sample")
        free_low, free_high = low[self.free_indices], high[self.free_indices]
        self._has_low, self._has_high = np.isfinite(free_low), np.isfinite(free_high)
        # Safe stand-ins where a bound is absent, so no branch computes inf − inf (NaN gradients).
        self._low = np.where(self._has_low, free_low, 0.0)
        self._high = np.where(self._has_high, free_high, 1.0)
        # The common layouts get their map alone: every branch of the general one is computed (and differentiated)
        # for every feature at every step, which cost as much as a d = 50 MLP probe (generate at 1.8x sample).
        self._unbounded = not (np.any(self._has_low) or np.any(self._has_high))
        self._all_boxed = bool(np.all(self._has_low & self._has_high))
        self._all_free = self.free_indices.size == self.dim  # no fixed feature, no one-hot group: x_free is x

    def _build_integers(self, gathered: _Gathered, is_fixed: np.ndarray) -> None:
        """Set the Integer features reported rounded (those not fixed), refusing one with no integer in bounds."""
        self.integer_indices = np.nonzero(gathered.is_integer & ~is_fixed)[0]
        self._integer_mean = gathered.integer_mean[self.integer_indices]
        self._integer_scale = gathered.integer_scale[self.integer_indices]
        if self.integer_indices.size:
            lo, hi = self._integer_range()
            empty = lo > hi
            if np.any(empty):
                raise ValueError(f"Integer features {self.integer_indices[empty].tolist()} have no integer value "
                                 "inside their bounds")

    def _indices(self, indices: Any, where: str) -> np.ndarray:
        if indices is None:
            return np.arange(self.dim)
        array = np.atleast_1d(np.asarray(indices))
        if not np.issubdtype(array.dtype, np.integer) or array.ndim != 1:
            raise TypeError(f"{where}: indices must be a 1-D sequence of ints, got {indices!r}")
        if np.any(array < 0) or np.any(array >= self.dim):
            raise ValueError(f"{where}: indices {array.tolist()} out of range for {self.dim} features")
        return array

    def _values(self, value: Any, indices: np.ndarray, what: str, given: Any) -> np.ndarray:
        """A constraint's per-feature values: a scalar (broadcast) or one per index, else a ValueError naming it."""
        array = as_float_array(value, what, finite=False)
        if array.ndim == 0:
            return np.broadcast_to(array, indices.shape)
        if array.shape != indices.shape:
            per = "feature" if given is None else "index given"
            raise ValueError(f"{what} must be a scalar or have {indices.size} values (one per {per}), got shape "
                             f"{array.shape}")
        return array

    def _integer_range(self) -> tuple[np.ndarray, np.ndarray]:
        """Smallest and largest integer (original units) inside each Integer feature's bounds."""
        index = self.integer_indices
        with np.errstate(invalid="ignore"):
            low = np.ceil(self.low[index] * self._integer_scale + self._integer_mean - 1e-9)
            high = np.floor(self.high[index] * self._integer_scale + self._integer_mean + 1e-9)
        return low, high

    @property
    def key(self) -> tuple:
        """Everything :meth:`forward` and :meth:`log_weight` depend on, hashable: two
        restrictions with equal keys are the same bijection (compiled code is reused)."""
        return (self.dim, self.low.tobytes(), self.high.tobytes(), self.is_fixed.tobytes(),
                self.fixed_values.tobytes(), tuple(g.tobytes() for g in self.groups),
                tuple(a.tobytes() for a in self._concentrations))

    def _full_key(self) -> tuple:
        """:attr:`key` plus what :meth:`report` reads (the Integer features), computed once."""
        key = self.__dict__.get("_cached_full_key")
        if key is None:
            key = self.key + (self.integer_indices.tobytes(), self._integer_mean.tobytes(),
                              self._integer_scale.tobytes())
            self._cached_full_key = key
        return key

    def __eq__(self, other: Any) -> bool:
        """Equal restrictions are the same bijection and report the same way (by value, not identity)."""
        return other is self or (isinstance(other, Restriction) and self._full_key() == other._full_key())

    def __hash__(self) -> int:
        return hash(self._full_key())

    def _value_key(self) -> tuple:
        return ("Restriction", self._full_key())

    @property
    def is_identity(self) -> bool:
        return (self.num_free == self.dim and not self.groups
                and not (np.any(self._has_low) or np.any(self._has_high)))

    @property
    def is_relaxed(self) -> bool:
        """Whether :meth:`report` changes anything (one-hot groups or integer features)."""
        return bool(self.groups) or bool(self.integer_indices.size)

    def _free_forward(self, z: Array) -> tuple[Array, Array]:
        """Free elementwise coordinates and their log-Jacobian terms."""
        dtype = z.dtype
        if self._unbounded:  # the identity
            return z, jnp.zeros_like(z)
        low, high = self._low.astype(dtype), self._high.astype(dtype)
        # One exp and one log1p per feature for every map below (each of jax.nn's sigmoid, log_sigmoid, softplus
        # computes its own: the box's map and log-Jacobian cost twice as much written with them):
        # e = exp(−|z|) ∈ (0, 1], σ(z) = 1/(1 + e) or e/(1 + e), log σ(±z) = min(±z, 0) − log1p(e).
        e = jnp.exp(-jnp.abs(z))
        log1p_e = jnp.log1p(e)
        sigmoid = jnp.where(z >= 0, 1.0, e) / (1.0 + e)
        two_sided = low + (high - low) * sigmoid
        log_two_sided = jnp.log(high - low) - jnp.abs(z) - 2.0 * log1p_e  # log(high − low) + log σ(z) + log σ(−z)
        if self._all_boxed:  # the logistic map alone
            return two_sided, log_two_sided
        both = self._has_low & self._has_high
        only_low = self._has_low & ~self._has_high
        only_high = ~self._has_low & self._has_high
        softplus = jnp.maximum(z, 0.0) + log1p_e
        log_one_sided = jnp.minimum(z, 0.0) - log1p_e  # log σ(z) = log d softplus / dz
        x = jnp.where(both, two_sided, jnp.where(only_low, low + softplus, jnp.where(only_high, high - softplus, z)))
        log_jacobian = jnp.where(both, log_two_sided, jnp.where(only_low | only_high, log_one_sided, 0.0))
        return x, log_jacobian

    def _group_log_probabilities(self, z: Array) -> list[Array]:
        """log x of each free one-hot group: log softmax of (z_g, 0)."""
        out, start = [], self.free_indices.size
        for columns in self.groups:
            width = columns.size - 1
            logits = jnp.concatenate([z[start:start + width], jnp.zeros((1,), z.dtype)])
            out.append(jax.nn.log_softmax(logits))
            start += width
        return out

    def forward(self, z: Array) -> Array:
        """Unconstrained ``z`` ``(num_free,)`` → data-space ``x`` ``(dim,)`` (groups relaxed)."""
        if z.shape != (self.num_free,):
            raise ValueError(f"z must have shape ({self.num_free},), got {z.shape}")
        free, _ = self._free_forward(z[:self.free_indices.size])
        if self._all_free:
            return free
        x = jnp.asarray(self.fixed_values, z.dtype).at[self.free_indices].set(free)
        for columns, log_p in zip(self.groups, self._group_log_probabilities(z)):
            x = x.at[columns].set(jnp.exp(log_p))
        return x

    def log_det_jacobian(self, z: Array) -> Array:
        """log|det ∂x_free/∂z|, scalar: diagonal terms plus ``Σ_k log x_k`` per one-hot group.

        (For the additive-logistic map to the first K − 1 simplex coordinates,
        det(diag(p) − p pᵀ) = Π_{k<K} p_k · (1 − Σ_{k<K} p_k) = Π_k p_k.)
        """
        value = jnp.sum(self._free_forward(z[:self.free_indices.size])[1])
        for log_p in self._group_log_probabilities(z):
            value = value + jnp.sum(log_p)
        return value

    def log_weight(self, z: Array) -> Array:
        """What the target adds in z-space: the log-Jacobian plus each group's
        Dirichlet relaxation prior ``Σ_k (α_k − 1) log x_k`` (together ``Σ_k α_k log x_k``)."""
        value = (jnp.zeros((), z.dtype) if self._unbounded
                 else jnp.sum(self._free_forward(z[:self.free_indices.size])[1]))
        for log_p, alpha in zip(self._group_log_probabilities(z), self._concentrations):
            value = value + jnp.sum(alpha.astype(z.dtype) * log_p)
        return value

    def report(self, x: Any) -> np.ndarray:
        """Relaxed points ``(..., dim)`` → valid ones (NumPy): each free one-hot group
        becomes the one-hot vector of its largest entry (a tie goes to the first),
        each Integer feature the nearest integer (original units) inside its bounds."""
        x = np.array(x, copy=True)
        if x.shape[-1] != self.dim:
            raise ValueError(f"expected points with {self.dim} features, got shape {x.shape}")
        for columns in self.groups:
            winner = np.argmax(x[..., columns], axis=-1)
            x[..., columns] = (winner[..., None] == np.arange(columns.size)).astype(x.dtype)
        if self.integer_indices.size:
            index = self.integer_indices
            original = x[..., index].astype(np.float64) * self._integer_scale + self._integer_mean
            low, high = self._integer_range()
            rounded = np.clip(np.round(original), low, high)
            x[..., index] = ((rounded - self._integer_mean) / self._integer_scale).astype(x.dtype)
        return x

    def report_point(self, x: Array) -> Array:
        """:meth:`report` of ONE point ``(dim,)`` in JAX (traceable, e.g. inside an observable of the run).

        Integer features are rounded relative to the integer c nearest each feature's mean (computed in
        float64 here): x·scale + mean − c = x·scale − (c − mean), so float32 keeps the digits of values
        such as a year."""
        for columns in self.groups:
            x = x.at[columns].set(jax.nn.one_hot(jnp.argmax(x[columns]), columns.size, dtype=x.dtype))
        index = self.integer_indices
        if index.size:
            centre = np.round(self._integer_mean)
            offset = centre - self._integer_mean
            low, high = self._integer_range()
            scale, shift = jnp.asarray(self._integer_scale, x.dtype), jnp.asarray(offset, x.dtype)
            steps = jnp.clip(jnp.round(x[index] * scale - shift), jnp.asarray(low - centre, x.dtype),
                             jnp.asarray(high - centre, x.dtype))  # the rounded value, minus c
            x = x.at[index].set((steps + shift) / scale)
        return x

    def inverse(self, x: np.ndarray) -> np.ndarray:
        """Data-space points ``(..., dim)`` → ``z`` ``(..., num_free)`` (NumPy; for initial positions).

        Raises ``ValueError`` naming the row and feature if a point breaks a constraint:
        fixed features must equal their values, bounded ones lie inside their closed
        bounds, and each one-hot group be a probability vector (entries >= 0 summing
        to 1). A value ON a bound (within :data:`BOUND_TOLERANCE`: a real data row at
        the data's minimum or maximum) is moved inside by :data:`BOUND_INIT_OFFSET`
        of the box's width, where z is finite. Rows of a group with an entry below
        1e-6 (a real one-hot vector) are moved inside the simplex first:
        ``(1 − ε)·x + ε/K``, ε = :data:`ONE_HOT_INIT_SMOOTHING`.
        """
        x = np.array(as_float_array(x, "init", finite=False), np.float64)  # a copy: edge rows are moved below
        if x.ndim < 1 or x.shape[-1] != self.dim:
            raise ValueError(f"init: expected points with {self.dim} features, got shape {x.shape}")
        rows = x.reshape(-1, self.dim)  # a view: the moves below change x
        if np.any(self.is_fixed):
            fixed = np.flatnonzero(self.is_fixed)
            wrong = ~np.isclose(rows[:, fixed], self.fixed_values[fixed], rtol=0, atol=1e-6)
            if np.any(wrong):
                row, column = np.argwhere(wrong)[0]
                feature = fixed[column]
                raise ValueError(f"init breaks a Fixed constraint in {int(wrong.any(axis=1).sum())} row(s), e.g. "
                                 f"row {row}, feature {feature}: {rows[row, feature]:.9g} instead of the fixed "
                                 f"{self.fixed_values[feature]:.9g}")
        self._move_inside_bounds(rows)
        for columns in self.groups:
            p = x[..., columns]
            if np.any(p < 0) or not np.allclose(p.sum(axis=-1), 1.0, rtol=0, atol=1e-4):
                raise ValueError(f"init: the OneHot group {columns.tolist()} must hold probability vectors "
                                 "(entries >= 0 summing to 1)")
            on_edge = np.min(p, axis=-1, keepdims=True) < 1e-6
            eps = ONE_HOT_INIT_SMOOTHING
            x[..., columns] = np.where(on_edge, (1 - eps) * p + eps / columns.size, p)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # in branches np.where discards
            return self.unconstrain(x, np)

    def _move_inside_bounds(self, rows: np.ndarray) -> None:
        """Check the bounded free features of ``rows`` ``(n, dim)`` against their closed bounds (a ValueError
        naming row and feature beyond :data:`BOUND_TOLERANCE`) and move values on a bound inside, in place."""
        index = self.free_indices
        if not index.size:
            return
        low, high = self.low[index], self.high[index]
        free = rows[:, index]
        # max(1, |bound|) per side (1 where the side is unbounded): the scale of the tolerance and of a one-sided move
        scale_low = np.maximum(1.0, np.abs(np.where(np.isfinite(low), low, 0.0)))
        scale_high = np.maximum(1.0, np.abs(np.where(np.isfinite(high), high, 0.0)))
        outside = (free < low - BOUND_TOLERANCE * scale_low) | (free > high + BOUND_TOLERANCE * scale_high)
        if np.any(outside):
            row, column = np.argwhere(outside)[0]
            feature = index[column]
            raise ValueError(
                f"init lies outside the Box bounds in {int(outside.any(axis=1).sum())} row(s), e.g. row {row}, "
                f"feature {feature}: {free[row, column]:.9g} not in [{low[column]:.9g}, {high[column]:.9g}]")
        two_sided = np.isfinite(low) & np.isfinite(high)
        width = np.where(two_sided, high - low, 0.0)
        gap_low = BOUND_INIT_OFFSET * np.where(two_sided, width, scale_low)
        gap_high = BOUND_INIT_OFFSET * np.where(two_sided, width, scale_high)
        free = np.where(free <= low, low + gap_low, free)  # on (or within the tolerance below) the lower bound
        free = np.where(free >= high, high - gap_high, free)
        rows[:, index] = free

    def unconstrain(self, x: Any, xp: Any = jnp) -> Any:
        """The inverse map x ``(..., dim)`` → z ``(..., num_free)`` without checks (``xp``: ``numpy`` or
        ``jax.numpy``, so the host and compiled code share one formula). A point outside a bound or off
        the open simplex gives a non-finite z; :meth:`inverse` validates first."""
        free = x[..., self.free_indices]
        dtype = free.dtype
        low = xp.asarray(self._low, dtype)
        high = xp.asarray(self._high, dtype)
        unit = (free - low) / (high - low)
        two_sided = xp.log(unit) - xp.log1p(-unit)
        inverse_softplus = lambda y: y + xp.log(-xp.expm1(-y))  # noqa: E731
        both = self._has_low & self._has_high
        z = xp.where(both, two_sided,
                     xp.where(self._has_low, inverse_softplus(free - low),
                              xp.where(self._has_high, inverse_softplus(high - free), free)))
        parts = [z]
        for columns in self.groups:
            log_p = xp.log(x[..., columns])
            parts.append(log_p[..., :-1] - log_p[..., -1:])
        return xp.concatenate(parts, axis=-1)

    @property
    def concentrations(self) -> list[np.ndarray]:
        """The Dirichlet concentration α ``(K,)`` of each sampled one-hot group (same order as ``groups``)."""
        return list(self._concentrations)


class ConstraintList(list):
    """A list of constraints that also states the number of features ``dim`` (what :func:`from_dataset`
    returns), so that ``generate(probe, constraints=from_dataset(data))`` needs neither ``init`` nor ``dim``.
    Otherwise a plain list; adding a list to it keeps ``dim``.

    Examples
    --------
    >>> bounds = ConstraintList([Box(-3.0, 3.0)], dim=4)     # says how many features the data have
    >>> bounds.dim, len(bounds)
    (4, 1)
    """

    def __init__(self, items: Sequence[Any] = (), dim: int | None = None):
        super().__init__(items)
        self.dim = dim

    def __add__(self, other: Any) -> "ConstraintList":
        return ConstraintList(list(self) + list(other), self.dim)

    def __radd__(self, other: Any) -> "ConstraintList":
        return ConstraintList(list(other) + list(self), self.dim)

    def _value_key(self) -> tuple:
        """Its :func:`jaxprobe._values.value_key`: the constraints' keys and ``dim`` (a list stays unhashable)."""
        return (ConstraintList, tuple(value_key(item) for item in self), value_key(self.dim))


def restriction(constraints: Any, dim: int) -> Restriction:
    """A :class:`Restriction` from ``None``, one constraint, or a list of them.

    Examples
    --------
    >>> restriction(None, dim=3).is_identity, restriction(Box(-1.0, 1.0), dim=3).num_free
    (True, 3)
    """
    if constraints is None:
        constraints = []
    elif isinstance(constraints, _KNOWN):
        constraints = [constraints]
    elif not isinstance(constraints, (list, tuple)):
        raise TypeError(f"constraints must be {_KNOWN_NAMES} or a list of them, got {type(constraints).__name__}")
    return Restriction(constraints, dim)


def from_dataset(dataset: Any, *, standardized: bool = True, immutable: Sequence[str] = (), anchor: Any = None,
                 bounds: str = "range", concentration: Any = 1.0) -> ConstraintList:
    """The constraints a :class:`jaxprobe.datasets.Dataset` implies, as a list for ``generate``
    (a :class:`ConstraintList`: its ``dim`` is the data set's number of columns d, from which
    ``generate`` takes d).

    - each categorical feature: a :class:`OneHot` group (``concentration`` as there);
    - each integer feature: :class:`Integer` (rounded in original units);
    - ``bounds="range"``: each numeric feature inside its observed ``(min, max)``,
      widened by half a unit for integer features (so rounding can reach both
      ends) and by 0.1 % of the range for continuous ones (the bijection maps onto
      the open box, and an anchor may sit at an end); ``bounds=None``: no bounds;
    - ``immutable``: names of features held at their value in ``anchor`` ``(d,)``
      (a categorical one fixes its whole one-hot group: an immutable category).

    ``standardized``: the model's inputs are ``dataset.standardize(x)`` (bounds,
    fixed values and rounding are converted); otherwise original units.

    Examples
    --------
    >>> from jaxprobe import datasets
    >>> data = datasets.credit()                             # continuous, integer and one-hot features
    >>> bounds = from_dataset(data)                          # in standardized units, the data's range
    >>> bounds.dim, sorted({type(c).__name__ for c in bounds})
    (15, ['Box', 'Integer', 'OneHot'])
    >>> anchor = data.standardize(data.x)[0]                 # a counterfactual keeps this row's Age
    >>> [type(c).__name__ for c in from_dataset(data, immutable=["Age"], anchor=anchor)].count("Fixed")
    1
    """
    if bounds not in ("range", None):
        raise ValueError(f"bounds must be 'range' or None, got {bounds!r}")
    mean = dataset.mean if standardized else np.zeros_like(dataset.mean)
    scale = dataset.scale if standardized else np.ones_like(dataset.scale)
    if isinstance(immutable, str):
        immutable = (immutable,)
    names = [f.name for f in dataset.features]
    unknown = [name for name in immutable if name not in names]
    if unknown:
        raise ValueError(f"immutable: no features {unknown} in {dataset.name!r}; features are {names}")
    if immutable and anchor is None:
        raise ValueError("immutable features need anchor: the (d,) point whose values they keep")
    if anchor is not None:
        anchor = as_float_array(anchor, "anchor", shape=(dataset.x.shape[1],))
    result = ConstraintList(dim=int(dataset.x.shape[1]))
    for feature in dataset.features:
        columns = np.asarray(feature.columns)
        if feature.is_categorical:
            result.append(OneHot(columns, concentration))
        else:
            column = columns[0]
            if bounds == "range":
                low, high = feature.range
                margin = 0.5 if feature.kind == "integer" else 1e-3 * (high - low)
                low, high = low - margin, high + margin
                result.append(Box([(low - mean[column]) / scale[column]], [(high - mean[column]) / scale[column]],
                                  indices=columns))
            if feature.kind == "integer":
                result.append(Integer(columns, mean[column], scale[column]))
        if feature.name in immutable:
            result.append(Fixed(columns, anchor[columns]))
    return result
