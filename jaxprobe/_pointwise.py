"""``map_points``: a function of one point evaluated at many points, in batches that stay fast on XLA's CPU backend.

On the CPU (jaxlib 0.10.2) XLA hands reductions fused with what feeds them to YNNPACK, which falls off a cliff past
about 2^24 values in between (upstream: jax-ml/jax#37465, openxla/xla#46351). Measured on 2 cores with a cubic
SVM of 443 support vectors (Fig. 2's): its value vmapped over 45,000 points took 15.9 s against 0.04 s over
30,000; its ``fixed_label`` gradient 15.6 s over 65,536 points against 0.15 s over 30,000; and a tempered SMC run
of 65,536 particles did not finish its first call in 12 minutes. Every evaluation over all chains, particles or
draws can meet it: gradient steps, random-walk steps, SMC's tilt, observables, probe values, quadrature grids.

:func:`map_points` is ``jax.vmap(fn)(points)`` for up to :data:`MIN_POINTS_TO_BATCH` points, and above that
as long as no intermediate of the vmap would hold more than :data:`MAX_BATCHED_VALUES` values (``fn``'s largest
per-point intermediate, read from its jaxpr, times the number of points). Past that bound, on a CPU only, it is a
``lax.map`` over contiguous batches that each stay below it; on a GPU or TPU it stays one vmap (chosen when the
program is lowered, with ``jax.lax.platform_dependent``). So small runs, and probes with small intermediates (an
MLP with 64 hidden units at 65,536 chains), compile exactly as one vmap: batching an MLP's random-walk step that
did not need it cost 30-60% at 65,536 chains.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import jax
import jax.extend.core as jax_core
import jax.numpy as jnp

__all__ = ["MAX_BATCHED_VALUES", "MIN_POINTS_TO_BATCH", "batch_plan", "map_points"]

#: Up to this many points ``map_points`` is one vmap without looking at ``fn``: reading ``fn``'s intermediates
#: means tracing it once more, which made a latent-space SMC question's first call 15-20% slower (tracing 3 s to
#: 8 s), and the cliff was measured from ~40,000 points on (none at 30,000).
MIN_POINTS_TO_BATCH = 8192

#: The most values one intermediate of a batch may hold on a CPU: half of where XLA's CPU cliff starts (2^24), so
#: a 443-support-vector SVM is evaluated in batches of ~18,900 points and an MLP with 64 hidden units not at all
#: up to 131,072 points.
MAX_BATCHED_VALUES = 2**23


def _largest_per_point(jaxpr: Any) -> int:
    """The size of the largest intermediate of ``jaxpr`` that depends on its inputs (constants, such as an SVM's
    support vectors, are shared by all points, so they do not grow with a batch), sub-jaxprs included."""
    depends = set(jaxpr.invars)
    largest = max([1] + [math.prod(getattr(var.aval, "shape", ())) for var in jaxpr.invars])  # the point itself
    for equation in jaxpr.eqns:
        if not any(isinstance(var, jax_core.Var) and var in depends for var in equation.invars):
            continue
        for var in equation.outvars:
            depends.add(var)
            largest = max(largest, math.prod(getattr(var.aval, "shape", ())))
        for inner in jax_core.jaxprs_in_params(equation.params):
            largest = max(largest, _largest_per_point(inner))
    return largest


def _batch_layout(num_points: int, max_batch: int) -> tuple[int, int]:
    """``(num_batches, batch_size)`` with ``batch_size <= max_batch`` and ``num_batches · batch_size >= num_points``:
    an exact split when ``num_points`` has a divisor near the fewest batches (no padding), else the fewest batches
    with the last one padded."""
    fewest = -(-num_points // max_batch)
    for num_batches in range(fewest, 2 * fewest + 1):
        if num_points % num_batches == 0:
            return num_batches, num_points // num_batches
    return fewest, -(-num_points // fewest)


def batch_plan(fn: Callable[..., Any], points: Any, max_values: int | None = None,
               min_points: int | None = None) -> tuple[int, int] | None:
    """How :func:`map_points` evaluates ``fn`` at ``points`` on a CPU: ``None`` for one vmap, else
    ``(num_batches, batch_size)`` of its ``lax.map`` (arguments as :func:`map_points`'s).

    Examples
    --------
    >>> square = lambda x: jnp.sum(x**2)
    >>> batch_plan(square, jnp.zeros((20_001, 1)), max_values=4096), batch_plan(square, jnp.zeros((100, 1)))
    ((5, 4001), None)
    """
    num_points = jax.tree_util.tree_leaves(points)[0].shape[0]
    if num_points <= max(1, MIN_POINTS_TO_BATCH if min_points is None else min_points):
        return None
    one = jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape[1:], leaf.dtype), points)
    per_point = _largest_per_point(jax.make_jaxpr(fn)(one).jaxpr)
    max_batch = max(1, (MAX_BATCHED_VALUES if max_values is None else max_values) // per_point)
    if num_points <= max_batch:
        return None
    return _batch_layout(num_points, max_batch)


def map_points(fn: Callable[..., Any], points: Any, max_values: int | None = None,
               min_points: int | None = None) -> Any:
    """``fn`` of one point at every point: ``points`` a pytree of arrays with a common leading axis ``(N, ...)`` →
    ``fn``'s outputs stacked ``(N, ...)``, as ``jax.vmap(fn)(points)`` (equal up to float rounding).

    On a CPU, when ``N`` is above ``min_points`` (default :data:`MIN_POINTS_TO_BATCH`) and ``N`` times ``fn``'s
    largest per-point intermediate exceeds ``max_values`` (default :data:`MAX_BATCHED_VALUES`; both defaults read
    at each call), a ``lax.map`` over contiguous batches of points (module docstring); otherwise, and on other
    platforms, one vmap. Traceable
    (under ``jit``, ``vmap``, ``grad``); ``N`` must be static.

    Examples
    --------
    >>> points = jnp.arange(20_001.0).reshape(-1, 1)
    >>> square = lambda x: jnp.sum(x**2)
    >>> values = map_points(square, points, max_values=4096)      # batches of at most 4,096 points on a CPU
    >>> values.shape, bool(jnp.all(values == jax.vmap(square)(points)))
    ((20001,), True)
    """
    layout = batch_plan(fn, points, max_values, min_points)
    if layout is None:
        return jax.vmap(fn)(points)
    num_batches, batch_size = layout
    num_points = jax.tree_util.tree_leaves(points)[0].shape[0]
    padding = num_batches * batch_size - num_points

    def batched(points: Any) -> Any:
        def split(leaf: jax.Array) -> jax.Array:
            if padding:  # copies of the first point: evaluated, then dropped
                leaf = jnp.concatenate([leaf, jnp.broadcast_to(leaf[:1], (padding,) + leaf.shape[1:])])
            return leaf.reshape((num_batches, batch_size) + leaf.shape[1:])

        out = jax.lax.map(jax.vmap(fn), jax.tree.map(split, points))  # (num_batches, batch_size, ...)
        return jax.tree.map(lambda leaf: leaf.reshape((-1,) + leaf.shape[2:])[:num_points], out)

    return jax.lax.platform_dependent(points, cpu=batched, default=jax.vmap(fn))
