"""Feature restrictions as exact bijections (probing paper, Sec. 3 "feature-restricted samples").

The sampler runs on an unconstrained vector z; a bijection T maps it to data
space, x = T(z), and the target picks up log|det J_T(z)| so that x is sampled
from exactly the restricted density (clipping a Langevin proposal instead, as
the paper's code does, breaks detailed balance).

- :class:`Fixed`: immutable features; only the free coordinates are sampled.
- :class:`Box`: per-feature bounds; ``x = low + (high − low)·sigmoid(z)`` for
  two finite bounds, ``low + softplus(z)`` / ``high − softplus(z)`` for one.

Combine by passing a list: ``[Box(low, high), Fixed([2, 5], [1.0, 0.0])]``;
several ``Box`` constraints intersect, a fixed value must lie inside its bounds.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.types import Array

__all__ = ["Box", "Fixed", "Restriction", "restriction"]


@dataclasses.dataclass(frozen=True, eq=False)
class Box:
    """Bounds ``low <= x <= high`` per feature (scalars broadcast; ±inf for one-sided or none).

    ``indices`` restricts the bounds to some features (then ``low``/``high`` are
    given for those only).
    """

    low: Any
    high: Any
    indices: Any = None


@dataclasses.dataclass(frozen=True, eq=False)
class Fixed:
    """Immutable features: ``x[indices] = values`` in every sample."""

    indices: Any
    values: Any


class Restriction:
    """The bijection z ↦ x for a list of constraints on d features.

    Attributes: ``dim`` (d), ``free_indices`` (the sampled features),
    ``num_free`` (dimension of z), ``low`` / ``high`` per feature.
    """

    def __init__(self, constraints: Sequence[Any], dim: int):
        self.dim = int(dim)
        low = np.full(self.dim, -np.inf)
        high = np.full(self.dim, np.inf)
        fixed_values = np.full(self.dim, np.nan)
        for number, constraint in enumerate(constraints):
            where = f"constraints[{number}]"
            if isinstance(constraint, Box):
                indices = self._indices(constraint.indices, where)
                box_low = np.broadcast_to(np.asarray(constraint.low, np.float64), indices.shape)
                box_high = np.broadcast_to(np.asarray(constraint.high, np.float64), indices.shape)
                if np.any(np.isnan(box_low)) or np.any(np.isnan(box_high)):
                    raise ValueError(f"{where}: Box bounds must not be NaN")
                low[indices] = np.maximum(low[indices], box_low)
                high[indices] = np.minimum(high[indices], box_high)
            elif isinstance(constraint, Fixed):
                indices = self._indices(constraint.indices, where)
                values = np.broadcast_to(np.asarray(constraint.values, np.float64), indices.shape)
                if not np.all(np.isfinite(values)):
                    raise ValueError(f"{where}: Fixed values must be finite")
                if len(set(indices.tolist())) != len(indices):
                    raise ValueError(f"{where}: Fixed indices repeat")
                clash = ~np.isnan(fixed_values[indices]) & (fixed_values[indices] != values)
                if np.any(clash):
                    raise ValueError(f"{where}: features {indices[clash].tolist()} are fixed to two different values")
                fixed_values[indices] = values
            else:
                raise TypeError(f"{where} must be a jaxprobe.constraints.Box or Fixed, got {type(constraint).__name__}")
        if np.any(low >= high):
            bad = np.nonzero(low >= high)[0]
            raise ValueError(f"bounds are empty (low >= high) for features {bad.tolist()}")
        is_fixed = ~np.isnan(fixed_values)
        outside = is_fixed & ((fixed_values < low) | (fixed_values > high))
        if np.any(outside):
            raise ValueError(f"fixed values lie outside their bounds for features {np.nonzero(outside)[0].tolist()}")
        self.low, self.high = low, high
        self.fixed_values = np.where(is_fixed, fixed_values, 0.0)
        self.is_fixed = is_fixed
        self.free_indices = np.nonzero(~is_fixed)[0]
        self.num_free = int(self.free_indices.size)
        if self.num_free == 0:
            raise ValueError("every feature is fixed: nothing to sample")
        free_low, free_high = low[self.free_indices], high[self.free_indices]
        self._has_low, self._has_high = np.isfinite(free_low), np.isfinite(free_high)
        # Safe stand-ins where a bound is absent, so no branch computes inf − inf (NaN gradients).
        self._low = np.where(self._has_low, free_low, 0.0)
        self._high = np.where(self._has_high, free_high, 1.0)

    def _indices(self, indices: Any, where: str) -> np.ndarray:
        if indices is None:
            return np.arange(self.dim)
        array = np.atleast_1d(np.asarray(indices))
        if not np.issubdtype(array.dtype, np.integer) or array.ndim != 1:
            raise TypeError(f"{where}: indices must be a 1-D sequence of ints, got {indices!r}")
        if np.any(array < 0) or np.any(array >= self.dim):
            raise ValueError(f"{where}: indices {array.tolist()} out of range for {self.dim} features")
        return array

    @property
    def is_identity(self) -> bool:
        return self.num_free == self.dim and not (np.any(self._has_low) or np.any(self._has_high))

    def _free_forward(self, z: Array) -> tuple[Array, Array]:
        """Free coordinates and the log-Jacobian terms, elementwise."""
        dtype = z.dtype
        low, high = self._low.astype(dtype), self._high.astype(dtype)
        both = self._has_low & self._has_high
        only_low = self._has_low & ~self._has_high
        only_high = ~self._has_low & self._has_high
        two_sided = low + (high - low) * jax.nn.sigmoid(z)
        log_two_sided = jnp.log(high - low) + jax.nn.log_sigmoid(z) + jax.nn.log_sigmoid(-z)
        softplus = jax.nn.softplus(z)
        log_one_sided = jax.nn.log_sigmoid(z)  # d softplus / dz = sigmoid(z)
        x = jnp.where(both, two_sided, jnp.where(only_low, low + softplus, jnp.where(only_high, high - softplus, z)))
        log_jacobian = jnp.where(both, log_two_sided, jnp.where(only_low | only_high, log_one_sided, 0.0))
        return x, log_jacobian

    def forward(self, z: Array) -> Array:
        """Unconstrained ``z`` ``(num_free,)`` → data-space ``x`` ``(dim,)``."""
        free, _ = self._free_forward(z)
        x = jnp.asarray(self.fixed_values, z.dtype)
        return x.at[self.free_indices].set(free)

    def log_det_jacobian(self, z: Array) -> Array:
        """log|det ∂x_free/∂z| (a diagonal Jacobian), scalar."""
        return jnp.sum(self._free_forward(z)[1])

    def inverse(self, x: np.ndarray) -> np.ndarray:
        """Data-space points ``(..., dim)`` → ``z`` ``(..., num_free)`` (NumPy; for initial positions).

        Raises ``ValueError`` if a point breaks a constraint: fixed features must
        equal their values and bounded ones lie strictly inside their bounds.
        """
        x = np.asarray(x, np.float64)
        if x.shape[-1] != self.dim:
            raise ValueError(f"expected points with {self.dim} features, got shape {x.shape}")
        if np.any(self.is_fixed):
            wrong = ~np.isclose(x[..., self.is_fixed], self.fixed_values[self.is_fixed], rtol=0, atol=1e-6)
            if np.any(wrong):
                raise ValueError("init breaks a Fixed constraint: fixed features must equal their values")
        free = x[..., self.free_indices]
        low, high = self.low[self.free_indices], self.high[self.free_indices]
        if np.any(free <= low) or np.any(free >= high):
            raise ValueError("init must lie strictly inside the Box bounds (the bijection maps onto the open box)")
        both = self._has_low & self._has_high
        with np.errstate(divide="ignore", invalid="ignore"):
            unit = (free - low) / (high - low)
            two_sided = np.log(unit) - np.log1p(-unit)
            from_low = free - low
            from_high = high - free
            inverse_softplus = lambda y: y + np.log(-np.expm1(-y))
            z = np.where(both, two_sided,
                         np.where(self._has_low, inverse_softplus(from_low),
                                  np.where(self._has_high, inverse_softplus(from_high), free)))
        return z


def restriction(constraints: Any, dim: int) -> Restriction:
    """A :class:`Restriction` from ``None``, one constraint, or a list of them."""
    if constraints is None:
        constraints = []
    elif isinstance(constraints, (Box, Fixed)):
        constraints = [constraints]
    elif not isinstance(constraints, (list, tuple)):
        raise TypeError(f"constraints must be a Box, a Fixed or a list of them, got {type(constraints).__name__}")
    return Restriction(constraints, dim)
