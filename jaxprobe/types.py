"""Type aliases shared across jaxprobe."""

from __future__ import annotations

from typing import Any, Callable

import jax

__all__ = ["Array", "ArrayTree", "PRNGKey", "LogDensityFn"]

Array = jax.Array
#: A pytree whose leaves are arrays (a dict of arrays, a tuple, a single array, ...).
ArrayTree = Any
#: A ``jax.random.key`` (typed) or a legacy ``uint32[2]`` key.
PRNGKey = jax.Array
#: A log density of ONE position (no chain axis) returning a scalar.
LogDensityFn = Callable[[ArrayTree], jax.Array]
