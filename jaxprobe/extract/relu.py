"""Exact recovery of a two-layer ReLU network from gradient (or value-only) queries, vectorized.

Milli et al. (2019), Section 3, Algorithm 1: along a random line x(t) = u + t·v the victim

    f(x) = Σ_i w_i ReLU(A_i·x + b_i) + c          (Eq. 1, plus the biases b and c of a real network)

is piecewise linear in t, its gradient ∇f(x) = Σ_{i active} w_i A_i (Section 3.1) changes only where
one unit switches, and the jump of the gradient across the kink of unit i is ±w_i A_i. This module
recovers f *exactly* (up to float64 rounding) and spends fewer queries than the paper's
h·log2(2l/ε) (Theorem 2) by three changes:

1. **Sweep, then split all bracketing intervals at once.** Value and gradient are queried at N points
   of the whole line (t = tan θ on a uniform θ grid, ends at ±1e7: without biases the kink of every
   unit is Cauchy in t, i.e. uniform in θ). Every interval whose end gradients differ is then worked
   on in parallel inside ``lax.while_loop`` rounds over a fixed-capacity pool of intervals.
2. **Exact kink locations.** On an interval [t_a, t_b] holding one kink, f(x(t)) is the maximum or
   minimum of the two lines through (t_a, f_a) with slope ∇f_a·v and through (t_b, f_b) with slope
   ∇f_b·v; their intersection t° *is* the kink. One value query at t° confirms it (a second kink
   inside would, except on a null set, move f(t°) off both lines); otherwise a gradient query at t°
   splits the interval there (t° lies between the outer kinks when they bend the same way; the
   midpoint is used when the lines do not cross inside). No bisection to a resolution ε.
   The confirmed kink gives the unit's hyperplane with its bias: Z_i = ∇f_b − ∇f_a = ±w_i A_i and
   β_i = −Z_i·x(t°) = ±w_i b_i.
3. **Signs with one gradient and no extra queries (instead of Algorithm 1b's 2h).** Orient every
   recovered unit so that z_i(x) = Z_i·x + β_i grows along +v, and let κ_i = ±1 be the sign of the
   jump. Then r(x) = f(x) − Σ_i κ_i ReLU(−z_i(x)) has no kink anywhere, so it is affine:
   r(x) = ℓ·x + m, read off exactly from the value and gradient at any one sweep point. The network
   f̂(x) = Σ_i κ_i ReLU(−z_i(x)) + ℓ·x + m equals f for every h, including h > d where the rows of A
   are dependent and Algorithm 1b's h×h rank condition cannot hold. When the rows of Z are
   independent (h ≤ d), ℓ = Σ_i q_i Z_i has the unique solution q_i ∈ {0, κ_i} (the Z^T q = ℓ system
   is full column rank, the role Lemma 4's M plays in the paper), and ℓ is folded into the units:
   the result is a plain Σ_i w_i ReLU(A_i·x + b_i) + c with unit-norm rows A_i.

Failures are reported, not hidden: an interval still unresolved after ``max_iterations``, a pool
overflow, two kinks closer than the resolution, more units than ``hidden_dim``, or a fresh check of
f̂ against ``num_check_queries`` value queries that fails; each makes the attempt retry on a new
random line, and :class:`RecoveryError` lists them after ``max_attempts``.

Precision: the work runs in float64 inside ``jax.enable_x64(True)`` (a context manager: the process's
global ``jax_enable_x64`` setting is left as the user set it). The victim is called on float64 inputs;
a victim with float32 parameters (a Flax model) is evaluated in float64 after promotion, and what is
recovered exactly is that float32-parameter function. Caveat: JAX caches the constants a function
closes over when it is first traced, so a victim closing over NumPy float64 arrays that was first
traced in float32 mode (``Oracle(...)`` traces it once) keeps float32 copies of them. For a float64
victim, build the ``Oracle`` inside ``with jax.enable_x64(True):`` (or set ``jax_enable_x64`` globally).
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe._inputs import as_float_array, check_int
from jaxprobe.engine.api import canonicalize_key
from jaxprobe.engine.compiled import jit_bounded
from jaxprobe.extract.oracle import Oracle
from jaxprobe.types import Array

__all__ = ["recover_relu", "RecoveredReLU", "RecoveryError"]

_FAR = 1e7          # the sweep's outer ends, t = ±_FAR
_TINY = 1e-300


class RecoveryError(RuntimeError):
    """recover_relu failed on every attempt; ``failures`` lists why, one line per attempt.

    Examples
    --------
    >>> try:                                  # what recover_relu raises after max_attempts failed lines
    ...     raise RecoveryError(["attempt 1: 3 kinks on the line, more than hidden_dim=2"])
    ... except RuntimeError as error:
    ...     print(error.failures)
    ['attempt 1: 3 kinks on the line, more than hidden_dim=2']
    """

    def __init__(self, failures: list[str]):
        self.failures = failures
        super().__init__("recover_relu failed on every attempt:\n  " + "\n  ".join(failures))


@dataclasses.dataclass(frozen=True)
class RecoveredReLU:
    """A recovered network f̂(x) = Σ_i output_weights_i · ReLU(weights_i·x + biases_i) + linear·x + output_bias.

    ``weights`` (h, d) has unit-norm rows (the paper's assumption 1), ``biases`` (h,), ``output_weights``
    (h,), ``output_bias`` scalar, ``linear`` (d,) is zero when the units absorbed the affine part
    (always possible when the rows are independent, h ≤ d) and carries it otherwise. ``info`` holds the
    queries spent, the attempts and the failures met. Call it on (n, d) → (n,) (NumPy, float64).

    For a victim with k outputs (logits) ``output_weights`` is (k, h), ``output_bias`` (k,) and
    ``linear`` (k, d), and a call returns (n, k).

    Examples
    --------
    >>> net = RecoveredReLU(weights=np.array([[1.0, 0.0]]), biases=np.array([-1.0]),    # 2·ReLU(x₀ − 1) + 0.5
    ...                     output_weights=np.array([2.0]), output_bias=0.5, linear=np.zeros(2), info={})
    >>> net(np.array([[3.0, 0.0], [0.0, 5.0]])).tolist(), net.hidden_dim, net.input_dim
    ([4.5, 0.5], 1, 2)
    >>> float(net.as_jax_fn()(jnp.array([3.0, 0.0])))                 # the same network as a JAX function
    4.5
    """

    weights: np.ndarray
    biases: np.ndarray
    output_weights: np.ndarray
    output_bias: float
    linear: np.ndarray
    info: dict

    @property
    def hidden_dim(self) -> int:
        return int(self.weights.shape[0])

    @property
    def input_dim(self) -> int:
        return int(self.weights.shape[1])

    def __call__(self, x: Any) -> np.ndarray:
        x = as_float_array(x, "x", shape=(None, self.input_dim), finite=False)  # arrays, DataFrames, lists
        hidden = np.maximum(x @ self.weights.T + self.biases, 0.0)
        return hidden @ self.output_weights.T + x @ self.linear.T + self.output_bias

    def as_jax_fn(self):
        """The network as a pure JAX function of ONE input (d,) → scalar (or (k,)), in the caller's precision."""
        weights, biases = jnp.asarray(self.weights), jnp.asarray(self.biases)
        output_weights, linear = jnp.asarray(self.output_weights), jnp.asarray(self.linear)
        output_bias = jnp.asarray(self.output_bias)

        def f(x):
            return output_weights @ jax.nn.relu(weights @ x + biases) + linear @ x + output_bias

        return f


def _victim_not_finite(what: str, x: np.ndarray) -> ValueError:
    """The error for a victim that answered a query with NaN or inf: a ReLU network never does, and the
    geometry (kinks, lines) would otherwise fail with a misleading message."""
    shown = np.array2string(np.asarray(x, np.float64), precision=4, threshold=8)
    return ValueError(f"oracle: the victim returned NaN or inf for {what} at x = {shown}; recover_relu "
                      "recovers a ReLU network, which is finite everywhere (check the victim there, e.g. "
                      "with oracle.value)")


def _require_finite(what: str, x: np.ndarray, values: np.ndarray, gradients: np.ndarray | None = None) -> None:
    """Raise :func:`_victim_not_finite` at the first row of ``x`` (n, d) whose value (n,) or (n, k), or
    gradient (n, d), is NaN or inf."""
    values = np.asarray(values).reshape(len(x), -1)
    bad = ~np.all(np.isfinite(values), axis=1)
    kind = "a value query"
    if gradients is not None and not np.any(bad):
        bad, kind = ~np.all(np.isfinite(np.asarray(gradients)), axis=1), "a gradient query"
    if np.any(bad):
        raise _victim_not_finite(f"{kind} ({what}, {int(np.sum(bad))} of {len(x)} rows)",
                                 np.asarray(x)[np.argmax(bad)])


def _sweep_points(num_points: int) -> np.ndarray:
    """t = tan θ on a uniform grid of θ, then the tails out to ±_FAR in factors of 10, so that no interval
    is much wider than its distance from u (margins and rounding are relative to the interval)."""
    theta = np.linspace(-np.arctan(_FAR), np.arctan(_FAR), num_points)[1:-1]
    t = np.tan(theta)
    largest = max(np.max(np.abs(t)), 1.0)
    tail = 10.0 ** np.arange(np.ceil(np.log10(largest) + 0.5), np.log10(_FAR) + 0.5)
    return np.concatenate([-tail[::-1], t, tail])


class _Pool(NamedTuple):
    """The interval pool of :func:`_resolve` and its counters, carried through its ``lax.while_loop`` rounds.

    Capacity C: ta, tb, ga, gb (C,) the ends' t and values, grad_a, grad_b (C, d) their gradients,
    is_open (C,) bool the intervals still to work on, done and kink (C,) the confirmed kinks, tries (C,)
    the untrusted finite-difference gradients in a row; slots [num_used, C) are free. ``nonfinite``: a
    query was answered with NaN/inf, at t = ``nonfinite_t`` (the loop stops: see :func:`_victim_not_finite`).
    """

    ta: Array
    tb: Array
    ga: Array
    gb: Array
    grad_a: Array
    grad_b: Array
    is_open: Array
    done: Array
    kink: Array
    tries: Array
    num_used: Array
    num_values: Array
    num_gradients: Array
    iteration: Array
    overflow: Array
    narrow: Array
    nonfinite: Array
    nonfinite_t: Array


class _Round(NamedTuple):
    """The intervals one round of :func:`_resolve` works on, gathered from the pool: ``active`` marks the
    open ones, ``slope_a``/``slope_b`` are the slopes along v of the lines through their ends, and
    ``theta_*`` their ends in θ = arctan t (the sweep's own scale, so that margins stay local on the wide
    intervals at the ends of the line)."""

    active: Array
    ta: Array
    tb: Array
    ga: Array
    gb: Array
    grad_a: Array
    grad_b: Array
    tries: Array
    slope_a: Array
    slope_b: Array
    theta_a: Array
    theta_b: Array
    theta_width: Array


def _gather_round(pool: _Pool, selected: Array, v: Array) -> _Round:
    """The ``selected`` intervals of the pool with their end lines' slopes along v and their ends in θ."""
    ta, tb = pool.ta[selected], pool.tb[selected]
    grad_a, grad_b = pool.grad_a[selected], pool.grad_b[selected]
    theta_a, theta_b = jnp.arctan(ta), jnp.arctan(tb)
    return _Round(active=pool.is_open[selected], ta=ta, tb=tb, ga=pool.ga[selected], gb=pool.gb[selected],
                  grad_a=grad_a, grad_b=grad_b, tries=pool.tries[selected], slope_a=grad_a @ v,
                  slope_b=grad_b @ v, theta_a=theta_a, theta_b=theta_b, theta_width=theta_b - theta_a)


def _end_lines_crossing(intervals: _Round) -> tuple[Array, Array, Array]:
    """Where the lines through the two ends of each interval cross (the kink, if it holds just one).

    Returns (crossing, divisor, safe): ``divisor`` is the slopes' difference (1 where it is too small
    to divide by, ``safe`` False there)."""
    slope_a, slope_b = intervals.slope_a, intervals.slope_b
    denominator = slope_a - slope_b
    safe = jnp.abs(denominator) > 1e-13 * (jnp.abs(slope_a) + jnp.abs(slope_b)) + _TINY
    divisor = jnp.where(safe, denominator, 1.0)
    crossing = (intervals.gb - intervals.ga + slope_a * intervals.ta - slope_b * intervals.tb) / divisor
    return crossing, divisor, safe


def _confirm_lone_kinks(oracle: Oracle, u: Array, v: Array, intervals: _Round, crossing: Array, divisor: Array,
                        safe: Array, probe: Array, value_tolerance: Array,
                        finite_difference_step: float | None) -> tuple[Array, Array, Array, Array, Array]:
    """Value probes around each crossing that confirm a lone kink there (Section 3, change 2).

    Returns (single: confirmed, inside: the crossing is trusted, refined: the kink located again from
    the probes, the value queries spent, the t of a probe answered with NaN/inf or NaN if none)."""
    theta_a, theta_b, theta_width = intervals.theta_a, intervals.theta_b, intervals.theta_width
    slope_a, slope_b = intervals.slope_a, intervals.slope_b
    batch = intervals.ta.shape[0]
    theta_cross = jnp.arctan(crossing)
    # a crossing within probe·width of an end is not trusted (rounding, or two kinks by the end)
    inside = safe & (theta_cross > theta_a + probe * theta_width) & (theta_cross < theta_b - probe * theta_width)
    # confirm a lone kink at the crossing: f must lie on the left line just before it and on the
    # right line just after it (with two or more kinks one of the two is off by |Δslope|·δ)
    before = jnp.tan(theta_cross - 0.5 * probe * theta_width)
    after = jnp.tan(theta_cross + 0.5 * probe * theta_width)
    # and halfway between each end and the crossing: when two kinks bend oppositely their outer lines
    # cross outside them, where f sits on both lines; the far probe then lies off its line by
    # |Δslope| times half the interval, not by |Δslope|·δ (the tolerance that noisy finite-difference
    # slopes need would let the near probes pass)
    # With finite differences (looser tolerance) a ladder of probes at 10^-k of the way to each end:
    # two kinks k1 < k2 whose outer lines cross at c < k1 leave f off the right line by up to
    # |Δslope_2|·(k2 − k1) near k1, and one rung lands within a factor 10 of that
    fractions = jnp.asarray([0.5] if finite_difference_step is None else [0.5, 0.2, 1e-1, 1e-2, 1e-3, 1e-4],
                            intervals.ta.dtype)
    lefts = jnp.tan(theta_cross[None] - fractions[:, None] * (theta_cross - theta_a)[None])    # (k, batch)
    rights = jnp.tan(theta_cross[None] + fractions[:, None] * (theta_b - theta_cross)[None])
    check = intervals.active & inside
    num_rungs = fractions.shape[0]
    where = jnp.concatenate([before, after, lefts.ravel(), rights.ravel()])
    answered = jnp.tile(check, 2 + 2 * num_rungs)
    probes, num_values = oracle._masked_values(u + where[:, None] * v, answered)
    bad = answered & ~jnp.isfinite(probes)
    bad_t = jnp.where(jnp.any(bad), where[jnp.argmax(bad)], jnp.nan)
    value_before, value_after = probes[:batch], probes[batch:2 * batch]
    value_lefts = probes[2 * batch:(2 + num_rungs) * batch].reshape(num_rungs, batch)
    value_rights = probes[(2 + num_rungs) * batch:].reshape(num_rungs, batch)
    # allowed: the rounding of f (1e-12 of it) plus the slopes' error (value_tolerance of them, 1e-12
    # for exact gradients, more for finite differences) times the interval's width
    width = intervals.tb - intervals.ta
    allowed = (1e-12 * (jnp.abs(intervals.ga) + jnp.abs(intervals.gb))
               + value_tolerance * (jnp.abs(slope_a) + jnp.abs(slope_b)) * width + _TINY)

    def on_line(value, t, t_end, value_end, slope):
        return jnp.abs(value - (value_end + slope * (t - t_end))) <= allowed

    on_left = on_line(value_before, before, intervals.ta, intervals.ga, slope_a) & jnp.all(
        on_line(value_lefts, lefts, intervals.ta, intervals.ga, slope_a), axis=0)
    on_right = on_line(value_after, after, intervals.tb, intervals.gb, slope_b) & jnp.all(
        on_line(value_rights, rights, intervals.tb, intervals.gb, slope_b), axis=0)
    single = check & on_left & on_right
    # the kink again from the two probes, which sit probe·width/2 from it: the lines' slope errors
    # (finite differences) then move it by far less than from the interval's ends
    refined = (value_after - value_before + slope_a * before - slope_b * after) / divisor
    return single, inside, refined, num_values, bad_t


def _split_points(intervals: _Round, crossing: Array, inside: Array, u: Array, v: Array,
                  finite_difference_step: float | None) -> tuple[Array, Array, Array]:
    """Where each interval without a confirmed kink is split: (t, x(t), the finite-difference step scale).

    At the crossing (between the outer kinks when they bend alike) or the midpoint (in θ = arctan t, so
    that the wide end intervals shrink fast); after an untrusted finite-difference gradient (a kink
    within its step), at other fractions."""
    dtype = intervals.ta.dtype
    tries = intervals.tries
    fraction = jnp.asarray([0.5, 0.31, 0.69, 0.43, 0.57], dtype)[tries % 5]
    query = jnp.where(inside & (tries == 0), crossing, jnp.tan(intervals.theta_a + fraction * intervals.theta_width))
    x = u[None, :] + query[:, None] * v[None, :]
    # finite differences: a step well inside the interval (in x, the step is ≤ 5% of the distance
    # along the line to either end), so that kinks close together on the line stay out of it
    room = jnp.minimum(query - intervals.ta, intervals.tb - query) * jnp.linalg.norm(v)
    base = (finite_difference_step or 1.0) * jnp.maximum(1.0, jnp.max(jnp.abs(x), axis=1))
    # (and a tenth of it after each untrusted try, against kinks near in another direction)
    step_scale = jnp.clip(0.05 * room / base, 1e-4, 1.0) * 0.1 ** jnp.minimum(tries, 3).astype(dtype)
    return query, x, step_scale


def _update_selected(pool: _Pool, selected: Array, intervals: _Round, split: Array, single: Array,
                     retried: Array, query: Array, values: Array, gradients: Array, refined: Array,
                     left_open: Array) -> _Pool:
    """In place: the left children [ta, query] of the split intervals, the resolved ones closed with
    their kink, a retried one left open with one more try."""
    return pool._replace(
        tb=pool.tb.at[selected].set(jnp.where(split, query, intervals.tb)),
        gb=pool.gb.at[selected].set(jnp.where(split, values, intervals.gb)),
        grad_b=pool.grad_b.at[selected].set(jnp.where(split[:, None], gradients, intervals.grad_b)),
        is_open=pool.is_open.at[selected].set(jnp.where(split, left_open, intervals.active & ~single)),
        done=pool.done.at[selected].set(pool.done[selected] | single),
        kink=pool.kink.at[selected].set(jnp.where(single, refined, pool.kink[selected])),
        tries=pool.tries.at[selected].set(jnp.where(retried, intervals.tries + 1,
                                                    jnp.where(split, 0, intervals.tries))))


def _append_right_children(pool: _Pool, intervals: _Round, split: Array, query: Array, values: Array,
                           gradients: Array, right_open: Array) -> _Pool:
    """The right children [query, tb] of the split intervals in fresh slots from ``num_used`` on (after
    the in-place update: a selected free slot may be one of them); slots past the capacity are dropped."""
    target = jnp.where(split, pool.num_used + jnp.cumsum(split) - 1, pool.ta.shape[0])
    return pool._replace(
        ta=pool.ta.at[target].set(query, mode="drop"),
        tb=pool.tb.at[target].set(intervals.tb, mode="drop"),
        ga=pool.ga.at[target].set(values, mode="drop"),
        gb=pool.gb.at[target].set(intervals.gb, mode="drop"),
        grad_a=pool.grad_a.at[target].set(gradients, mode="drop"),
        grad_b=pool.grad_b.at[target].set(intervals.grad_b, mode="drop"),
        is_open=pool.is_open.at[target].set(right_open, mode="drop"),
        done=pool.done.at[target].set(False, mode="drop"),
        tries=pool.tries.at[target].set(0, mode="drop"))


@jit_bounded(static_argnames=("oracle", "max_iterations", "finite_difference_step"))
def _resolve(oracle: Oracle, u, v, ta, tb, ga, gb, grad_a, grad_b, is_open, num_used, gradient_scale,
             gradient_tolerance, value_tolerance, probe, min_width, *, max_iterations: int,
             finite_difference_step: float | None) -> _Pool:
    """Split every bracketing interval of the pool until each holds one confirmed kink.

    Pool of capacity C: ta, tb, ga, gb (C,), grad_a, grad_b (C, d), is_open (C,) bool; slots
    [num_used, C) are free. Returns the pool, the confirmed kinks (C,) with their flags, the query
    counts, the iterations run and the overflow / too-narrow flags (a :class:`_Pool`).
    """
    capacity = ta.shape[0]
    dtype = ta.dtype

    def changed(left, right):
        return jnp.linalg.norm(right - left, axis=-1) > gradient_tolerance * gradient_scale

    def body(pool: _Pool, batch: int) -> _Pool:
        # one round works on `batch` intervals, open ones first (the others wait for the next round);
        # the oracle runs the victim on the live rows of a query only (gathered into a smaller buffer)
        selected = jnp.argsort(~pool.is_open, stable=True)[:batch]
        intervals = _gather_round(pool, selected, v)
        crossing, divisor, safe = _end_lines_crossing(intervals)
        single, inside, refined, nv_probes, bad_t = _confirm_lone_kinks(
            oracle, u, v, intervals, crossing, divisor, safe, probe, value_tolerance, finite_difference_step)
        queried = intervals.active & ~single
        # otherwise split the interval (a gradient query inside it)
        query, x, step_scale = _split_points(intervals, crossing, inside, u, v, finite_difference_step)
        values, gradients, trusted, nv_split, ng = oracle._masked_values_and_gradients(
            x, queried, finite_difference_step, step_scale)
        bad = queried & ~(jnp.isfinite(values) & jnp.all(jnp.isfinite(gradients), axis=1))
        bad_t = jnp.where(jnp.isnan(bad_t) & jnp.any(bad), query[jnp.argmax(bad)], bad_t)
        nonfinite_t = jnp.where(pool.nonfinite, pool.nonfinite_t, bad_t)
        split = queried & trusted
        retried = queried & ~trusted                        # stays open, queried elsewhere next round
        width, scale = intervals.tb - intervals.ta, 1.0 + jnp.abs(intervals.ta) + jnp.abs(intervals.tb)
        narrow = pool.narrow | jnp.any(split & (width < min_width * scale))
        num_new = jnp.sum(split).astype(jnp.int32)
        overflow = pool.overflow | (pool.num_used + num_new > capacity)
        pool = _update_selected(pool, selected, intervals, split, single, retried, query, values, gradients,
                                refined, changed(intervals.grad_a, gradients))
        pool = _append_right_children(pool, intervals, split, query, values, gradients,
                                      changed(gradients, intervals.grad_b))
        return pool._replace(num_used=pool.num_used + num_new, num_values=pool.num_values + (nv_probes + nv_split),
                             num_gradients=pool.num_gradients + ng, iteration=pool.iteration + 1,
                             overflow=overflow, narrow=narrow, nonfinite=~jnp.isnan(nonfinite_t),
                             nonfinite_t=nonfinite_t)

    def cond(pool: _Pool, batch_below: int) -> Array:
        running = (jnp.any(pool.is_open) & (pool.iteration < max_iterations) & ~pool.overflow & ~pool.narrow
                   & ~pool.nonfinite)
        # the first loop hands over to the narrower one once the open intervals fit in it
        return running & (jnp.sum(pool.is_open) > batch_below)

    zero = jnp.zeros((), jnp.int32)
    pool = _Pool(ta, tb, ga, gb, grad_a, grad_b, is_open, done=jnp.zeros(capacity, bool),
                 kink=jnp.zeros(capacity, dtype), tries=jnp.zeros(capacity, jnp.int32), num_used=num_used,
                 num_values=zero, num_gradients=zero, iteration=zero, overflow=jnp.zeros((), bool),
                 narrow=jnp.zeros((), bool), nonfinite=jnp.zeros((), bool), nonfinite_t=jnp.full((), jnp.nan, dtype))
    # rounds on a quarter of the pool while many intervals are open, then on a thirty-second of it:
    # the victim is evaluated on roughly as many rows as there are intervals to work on
    wide, narrow_batch = min(capacity, max(16, capacity // 4)), min(capacity, max(16, capacity // 32))
    pool = jax.lax.while_loop(lambda p: cond(p, narrow_batch), lambda p: body(p, wide), pool)
    return jax.lax.while_loop(lambda p: cond(p, 0), lambda p: body(p, narrow_batch), pool)


@jax.jit
def _network_values(x, weights, biases, output_weights, output_bias, linear):
    """f̂ on a batch (n, d) → (n,), in JAX (the check's matrix product; NumPy's threaded BLAS stalls)."""
    return jax.nn.relu(x @ weights.T + biases) @ output_weights + x @ linear + output_bias


@jax.jit
def _fold_square(normals, linear, columns):
    """q with Zᵀ q = ℓ from h of the d equations (the coordinates ``columns``): an h × h LU, no Gram."""
    return jnp.linalg.solve(normals[:, columns].T, linear[columns])


@jax.jit
def _fold_normal(normals, linear):
    """q from the h × h normal equations (Z Zᵀ) q = Z ℓ by Cholesky: all d equations, h²·d work."""
    factor = jax.scipy.linalg.cho_factor(normals @ normals.T)
    return jax.scipy.linalg.cho_solve(factor, normals @ linear)


def _fold(normals: np.ndarray, linear: np.ndarray, is_exact) -> np.ndarray:
    """q with Zᵀ q = ℓ (Z (h, d), h ≤ d), in JAX (NumPy's threaded BLAS stalls on a busy machine).

    The consistent system is first solved on h coordinates drawn at random (h³ work instead of the
    normal equations' h²·d); ``is_exact(q)`` (the caller's rounding and residual test on all d
    equations) decides, and the normal equations are the fallback. NaN where singular."""
    columns = np.sort(np.random.default_rng(0).permutation(normals.shape[1])[:normals.shape[0]])
    q = np.asarray(_fold_square(normals, linear, columns))
    if is_exact(q):
        return q
    return np.asarray(_fold_normal(normals, linear))


@jit_bounded(static_argnames=("oracle", "finite_difference_step"))
def _sweep_differences(oracle: Oracle, x, finite_difference_step: float):
    """Values, checked forward-difference gradients and their trust flags at every sweep point."""
    return oracle._masked_values_and_gradients(x, jnp.ones(x.shape[0], bool), finite_difference_step)


def _capacity(n: int) -> int:
    return int(2 ** int(np.ceil(np.log2(max(n, 16)))))


def _sweep_line(oracle: Oracle, u: np.ndarray, v: np.ndarray, num_sweep_points: int,
                finite_difference_step: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """t, x(t) = u + t·v, values and gradients (float64) at the sweep points of the line (Section 3, change 1).

    With finite differences a sweep point whose gradient fails its check is left out."""
    t = _sweep_points(num_sweep_points)
    x = u[None, :] + t[:, None] * v[None, :]
    if finite_difference_step is None:
        values, gradients = oracle.value_and_gradient(x)
    else:
        oracle._rows(x)
        values, gradients, trusted, num_values, _ = _sweep_differences(oracle, jnp.asarray(x), finite_difference_step)
        oracle._record(num_values, 0)
    _require_finite("the sweep along a random line" + (", gradients by finite differences"
                                                       if finite_difference_step is not None else ""),
                    x, values, gradients)
    if finite_difference_step is not None:
        # a sweep point with a kink within its step has a wrong gradient: left out (its neighbours bracket)
        trusted = np.asarray(trusted)
        t, x, values, gradients = t[trusted], x[trusted], np.asarray(values)[trusted], np.asarray(gradients)[trusted]
    return t, x, np.asarray(values, np.float64), np.asarray(gradients, np.float64)


def _resolve_brackets(oracle: Oracle, u: np.ndarray, v: np.ndarray, t: np.ndarray, values: np.ndarray,
                      gradients: np.ndarray, gradient_scale: float, capacity_hint: int, gradient_tolerance: float,
                      value_tolerance: float, probe: float, max_iterations: int,
                      finite_difference_step: float | None) -> tuple[_Pool, int, int]:
    """Pool the sweep intervals whose end gradients differ and split them down to one kink each (:func:`_resolve`).

    Returns the final pool (NumPy), its capacity and the number of brackets; the queries are recorded."""
    jumps = np.linalg.norm(np.diff(gradients, axis=0), axis=1) > gradient_tolerance * gradient_scale
    brackets = np.flatnonzero(jumps)
    num_brackets = brackets.size
    capacity = _capacity(max(2 * num_brackets, num_brackets + capacity_hint) + 8)

    def pad(array, fill=0.0):
        out = np.full((capacity,) + array.shape[1:], fill, np.float64)
        out[:num_brackets] = array
        return out

    is_open = np.zeros(capacity, bool)
    is_open[:num_brackets] = True
    state = _resolve(oracle, jnp.asarray(u), jnp.asarray(v), pad(t[brackets]), pad(t[brackets + 1]),
                     pad(values[brackets]), pad(values[brackets + 1]), pad(gradients[brackets]),
                     pad(gradients[brackets + 1]), jnp.asarray(is_open), jnp.asarray(num_brackets, jnp.int32),
                     gradient_scale, gradient_tolerance, value_tolerance, probe, 1e-12,
                     max_iterations=max_iterations, finite_difference_step=finite_difference_step)
    pool = jax.device_get(state)
    oracle._record(pool.num_values, pool.num_gradients)
    return pool, capacity, num_brackets


def _pool_failure(pool: _Pool, capacity: int, num_brackets: int, num_sweep_points: int,
                  max_iterations: int) -> str | None:
    """Why the interval pool did not resolve every bracket (overflow, too narrow, out of rounds), or None."""
    if pool.overflow:
        return f"interval pool of {capacity} overflowed ({num_brackets} brackets from {num_sweep_points} " \
               "sweep points): more units than expected"
    if pool.narrow:
        return "two kinks closer than the resolution (an interval narrower than 1e-12 still held several)"
    if np.any(pool.is_open):
        return f"{int(np.sum(pool.is_open))} intervals unresolved after {max_iterations} iterations"
    return None


def _oriented_units(pool: _Pool, u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The units of the confirmed kinks: (κ_i, Z_i oriented so that z_i grows along +v, β_i = −Z_i·x(t_i))."""
    jump = (pool.grad_b - pool.grad_a)[pool.done]
    kink = pool.kink[pool.done]
    orientation = np.sign(jump @ v)                             # κ_i: z_i grows along +v
    normals = jump * orientation[:, None]                       # Z_i, oriented
    offsets = -(normals @ u + kink * (normals @ v))             # β_i = −Z_i·x(t_i)
    return orientation, normals, offsets


def _affine_remainder(t: np.ndarray, x: np.ndarray, values: np.ndarray, gradients: np.ndarray,
                      orientation: np.ndarray, normals: np.ndarray,
                      offsets: np.ndarray) -> tuple[np.ndarray, float]:
    """(ℓ, m) of the affine remainder r(x) = f(x) − Σ κ_i ReLU(−z_i(x)) = ℓ·x + m, from the sweep point nearest u."""
    center = int(np.argmin(np.abs(t)))
    x0 = x[center]
    pre = normals @ x0 + offsets
    linear = gradients[center] + (orientation * (pre < 0)) @ normals
    intercept = values[center] - linear @ x0 - orientation @ np.maximum(-pre, 0.0)
    return linear, intercept


def _as_network(orientation: np.ndarray, normals: np.ndarray, offsets: np.ndarray, linear: np.ndarray,
                intercept: float, gradient_scale: float) -> tuple[dict, bool]:
    """f̂ = Σ κ_i ReLU(−z_i) + ℓ·x + m as unit-norm units, ℓ folded into them when Zᵀ q = ℓ has q_i ∈ {0, κ_i}.

    Returns the RecoveredReLU fields and whether ℓ was folded (Section 3, change 3)."""
    h, d = normals.shape
    norms = np.linalg.norm(normals, axis=1)
    weights, biases = normals / norms[:, None], offsets / norms
    output_weights = orientation * norms
    folded = False
    if 0 < h <= d:
        # h of the d equations, else the normal equations (a least-squares SVD of the d × h system costs
        # ~100× more): any error is caught by the rounding to {0, 1} and the exact residual check
        def rounds_exactly(q):
            p = q * orientation
            close = np.all(np.minimum(np.abs(p), np.abs(p - 1.0)) < 1e-6)
            residual = normals.T @ (np.round(p) * orientation) - linear
            return bool(close and np.linalg.norm(residual) <= 1e-9 * (np.linalg.norm(linear) + gradient_scale))

        q = _fold(normals, linear, rounds_exactly)
        p = q * orientation
        if rounds_exactly(q):
            active_up = np.round(p) == 1.0
            intercept = intercept - np.round(p) * orientation @ offsets
            sign = np.where(active_up, 1.0, -1.0)
            weights, biases = weights * sign[:, None], biases * sign
            linear = np.zeros(d)
            folded = True
    if not folded:
        weights, biases = -weights, -biases                    # units are ReLU(−z_i)
    return dict(weights=weights, biases=biases, output_weights=output_weights, output_bias=float(intercept),
                linear=linear), folded


def _check_error(oracle: Oracle, rng_key: Array, recovered: dict, num_check_queries: int, d: int) -> float:
    """The largest relative error of f̂ against fresh value queries: the honest check of an attempt, at
    Gaussian inputs of several scales (kinks far out on the line are near 0 too)."""
    check = _gaussian_rows(rng_key, num_check_queries, d)
    truth = np.asarray(oracle.value(check), np.float64)
    _require_finite("the check of the recovered network", check, truth)
    return np.max(np.abs(np.asarray(_network_values(check, **recovered)) - truth) / (np.abs(truth) + np.max(np.abs(truth)) * 1e-3 + _TINY))


def _attempt(oracle: Oracle, rng_key: Array, num_sweep_points: int, capacity_hint: int, hidden_dim: int | None,
             finite_difference_step: float | None, gradient_tolerance: float, value_tolerance: float, probe: float,
             check_tolerance: float, num_check_queries: int, max_iterations: int):
    """One try on one random line. Returns (RecoveredReLU fields, None) or (None, reason)."""
    d = oracle.input_dim
    key_line, key_check = jax.random.split(rng_key)
    uv = np.asarray(jax.random.normal(key_line, (2, d), jnp.float64))
    u, v = uv[0], uv[1]
    t, x, values, gradients = _sweep_line(oracle, u, v, num_sweep_points, finite_difference_step)
    gradient_scale = float(np.max(np.linalg.norm(gradients, axis=1))) + _TINY
    pool, capacity, num_brackets = _resolve_brackets(oracle, u, v, t, values, gradients, gradient_scale,
                                                     capacity_hint, gradient_tolerance, value_tolerance, probe,
                                                     max_iterations, finite_difference_step)
    info = {"sweep_points": int(num_sweep_points), "sweep_points_used": int(t.size), "brackets": int(num_brackets),
            "iterations": int(pool.iteration)}
    if pool.nonfinite:
        raise _victim_not_finite("a query locating the kinks", u + float(pool.nonfinite_t) * v)
    failure = _pool_failure(pool, capacity, num_brackets, num_sweep_points, max_iterations)
    if failure is not None:
        return None, failure, info

    orientation, normals, offsets = _oriented_units(pool, u, v)
    h = normals.shape[0]
    if hidden_dim is not None and h > hidden_dim:
        return None, f"found {h} kinks on the line, more than hidden_dim={hidden_dim}", info
    linear, intercept = _affine_remainder(t, x, values, gradients, orientation, normals, offsets)
    recovered, info["folded"] = _as_network(orientation, normals, offsets, linear, intercept, gradient_scale)

    error = _check_error(oracle, key_check, recovered, num_check_queries, d)
    info["check_relative_error"] = float(error)
    if not error <= check_tolerance:
        return None, f"check against {num_check_queries} fresh value queries failed (relative error {error:.2e})", info
    return recovered, None, info


def recover_relu(oracle: Oracle, rng_key: Array, *, hidden_dim: int | None = None,
                 num_sweep_points: int | None = None, finite_differences: bool = False,
                 finite_difference_step: float = 1e-4, max_attempts: int = 3, num_check_queries: int = 64,
                 check_tolerance: float | None = None, max_iterations: int = 200,
                 output: int | None = None) -> RecoveredReLU:
    """Recover a two-layer ReLU network exactly from value and gradient queries (Algorithm 1, vectorized).

    Parameters
    ----------
    oracle:
        :class:`Oracle` of a scalar victim f(x) = Σ_i w_i ReLU(A_i·x + b_i) + c (Eq. 1; b = 0, c = 0 is
        the paper's setting), or of a victim with k outputs f(x) = W ReLU(A·x + b) + c (logits of a
        784-16-10 classifier, say). Its counters record every query spent, failed attempts included.
    output:
        k outputs only: the output whose gradients (class-``output`` explanations, default 0) locate the
        hidden units, as for a scalar victim. The output layer of all k outputs is then solved from the
        vector answers of about h + 1 value queries (h + d + 1 when the units could not absorb the
        affine part, h > d), by least squares on the recovered hidden features, and checked on fresh
        value queries like the scalar case. Every generic output sees every unit, so any one will do.
    rng_key:
        picks the random line(s) and the check points.
    hidden_dim:
        h if known: sizes the sweep (2h points, at least 8, plus the tails) and rejects a line with more
        than h kinks. ``None``
        infers h from the kinks found (sweep of 64 points, doubled after a pool overflow).
    num_sweep_points:
        overrides the sweep size N (value + gradient queries at N points of the line).
    finite_differences:
        build every gradient from d forward-difference value queries (Appendix C): no gradient queries,
        about d times more value queries; ``finite_difference_step`` is h of (f(x + h e_j) − f(x))/h,
        relative to max(1, ‖x‖∞), shrunk near close kinks. Each such gradient is checked by one more
        value query (a kink within a step spoils it: sweep points failing the check are left out, split
        points are moved), and a kink is confirmed by a ladder of value probes instead of two (the
        looser tolerance of finite-difference slopes would let two close kinks pass as one).
    max_attempts:
        random lines to try before raising :class:`RecoveryError`.
    num_check_queries, check_tolerance:
        fresh value queries at Gaussian inputs (scales 0.1 to 100) that f̂ must match within this
        relative error (|f̂ − f| / (|f| + 1e-3·max|f|)), or the attempt fails; default 1e-7, and 1e-6
        with finite differences (their rounding, ≈ 1e-10 per gradient entry, adds up).
    max_iterations:
        cap on the splitting rounds of the interval pool (each round: batched value queries and one
        batched gradient query of the open intervals, a quarter or a thirty-second of the pool at a time).

    Returns
    -------
    RecoveredReLU, callable on (n, d) → (n,) (or (n, k)), with ``weights`` (h, d), ``biases``,
    ``output_weights``, ``output_bias``, ``linear`` and ``info`` (queries per kind, attempts, failures).

    Examples
    --------
    >>> A = jnp.array([[1.0, 2.0, 0.0], [0.0, -1.0, 1.0]])                 # h = 2 hidden units, d = 3
    >>> victim = lambda x: jnp.array([1.5, -2.0]) @ jax.nn.relu(A @ x + jnp.array([0.5, -0.2])) + 0.3
    >>> oracle = Oracle(victim, input_dim=3)
    >>> net = recover_relu(oracle, jax.random.key(0), hidden_dim=2)
    >>> net.hidden_dim, net.info["failures"]
    (2, [])
    >>> sorted((np.round(net.output_weights[:, None] * net.weights, 3) + 0.0).tolist())   # w_i·A_i: its units
    [[0.0, 2.0, -2.0], [1.5, 3.0, 0.0]]
    >>> x = np.random.default_rng(0).normal(size=(5, 3))
    >>> bool(np.allclose(net(x), oracle.value(x), atol=1e-5))            # the same function
    True
    """
    if not isinstance(oracle, Oracle):
        raise TypeError(f"oracle must be a jaxprobe.extract.Oracle, got {type(oracle).__name__}")
    if oracle.num_outputs is None and output is not None:
        raise ValueError(f"output must be None for a victim with a scalar output, got {output!r}")
    if oracle.num_outputs is not None:
        output = 0 if output is None else check_int(output, "output")
        if not 0 <= output < oracle.num_outputs:
            raise ValueError(f"output must be a class index in [0, {oracle.num_outputs}), got {output!r}")
    for name, value in (("hidden_dim", hidden_dim), ("num_sweep_points", num_sweep_points)):
        if value is not None:
            check_int(value, name, minimum=1)
    for name, value in (("max_attempts", max_attempts), ("num_check_queries", num_check_queries),
                        ("max_iterations", max_iterations)):
        check_int(value, name, minimum=1)
    if check_tolerance is None:
        check_tolerance = 1e-6 if finite_differences else 1e-7
    for name, value in (("finite_difference_step", finite_difference_step), ("check_tolerance", check_tolerance)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < np.inf:
            raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    if num_sweep_points is not None:
        check_int(num_sweep_points, "num_sweep_points", minimum=3)
    rng_key = canonicalize_key(rng_key)  # an int seed or a key; a bool or a string is refused
    step = float(finite_difference_step) if finite_differences else None
    # thresholds: a gradient jump, a value off a line (relative to the interval's scale), and the
    # confirmation probes at the crossing ± probe·width/2; finite differences are noisier (≈1e-10)
    gradient_tolerance = 1e-6 if finite_differences else 1e-10
    value_tolerance = 1e-8 if finite_differences else 1e-12
    probe = 1e-5
    sweep = num_sweep_points or (max(8, 2 * hidden_dim) if hidden_dim is not None else 64)
    capacity_hint = 2 * hidden_dim if hidden_dim is not None else 4 * sweep

    start_values, start_gradients = oracle.num_value_queries, oracle.num_gradient_queries
    failures: list[str] = []
    attempts_info = []
    # k outputs: the hidden layer comes from one output's value/gradient queries, answered by a scalar
    # view of the victim whose counts are the parent's (one row = one query, whatever it returns)
    with jax.enable_x64(True):
        scalar_oracle = oracle if oracle.num_outputs is None else _OutputView(oracle, int(output))
        keys = jax.random.split(rng_key, max_attempts)
        for attempt in range(max_attempts):
            recovered, failure, info = _attempt(scalar_oracle, keys[attempt], sweep, capacity_hint, hidden_dim,
                                                step, gradient_tolerance, value_tolerance, probe, check_tolerance,
                                                int(num_check_queries), int(max_iterations))
            if recovered is not None and oracle.num_outputs is not None:
                recovered, failure = _fit_output_layer(oracle, jax.random.fold_in(keys[attempt], 1), recovered,
                                                       check_tolerance, int(num_check_queries), info)
            if scalar_oracle is not oracle:
                scalar_oracle.flush()
            attempts_info.append(info)
            if recovered is not None:
                break
            failures.append(f"attempt {attempt + 1}: {failure}")
            if "overflow" in failure:
                sweep, capacity_hint = 2 * sweep, 4 * capacity_hint
        else:
            raise RecoveryError(failures)
    info = {"num_value_queries": oracle.num_value_queries - start_values,
            "num_gradient_queries": oracle.num_gradient_queries - start_gradients,
            "attempts": len(attempts_info), "failures": failures, "per_attempt": attempts_info}
    return RecoveredReLU(**recovered, info=info)


class _OutputView(Oracle):
    """Output ``index`` of a k-output victim as a scalar :class:`Oracle`; its queries count as the parent's.

    A value query of the view is a value query of the victim (the API answers the whole vector; one entry
    is used), a gradient query is a class-``index`` explanation. ``flush()`` moves the view's counts to
    the parent (the compiled loops record their counts on the view after they run)."""

    def __init__(self, parent: Oracle, index: int):
        super().__init__(lambda x: parent._scores(x)[index], parent.input_dim)
        self.parent = parent

    def flush(self) -> None:
        self.parent._record(self.num_value_queries, self.num_gradient_queries)
        self.reset_counts()


def _hidden_features(x: np.ndarray, weights, biases, with_linear: bool) -> np.ndarray:
    """[ReLU(W x + b), x (when the units did not absorb the affine part), 1] for a batch (n, d)."""
    columns = [np.maximum(x @ weights.T + biases, 0.0)] + ([x] if with_linear else []) + [np.ones((x.shape[0], 1))]
    return np.concatenate(columns, axis=1)


def _gaussian_rows(key, n: int, d: int) -> np.ndarray:
    """n Gaussian inputs (n, d), a quarter each at scales 0.1, 1, 10, 100 (kinks far out on a line are near 0 too)."""
    scales = np.repeat(np.array([0.1, 1.0, 10.0, 100.0]), int(np.ceil(n / 4)))[:n]
    return np.asarray(jax.random.normal(key, (n, d), jnp.float64)) * scales[:, None]


def _fit_output_layer(oracle: Oracle, rng_key, recovered: dict, check_tolerance: float, num_check_queries: int,
                      info: dict) -> tuple[dict | None, str | None]:
    """The output layer of all k outputs on the recovered hidden units, from vector value queries.

    Every output is f_j(x) = Σ_i W_ji ReLU(A_i·x + b_i) + c_j with the same units, and ReLU(z) =
    ReLU(−z) + z, so f_j lies in the span of the recovered features (plus x when they did not absorb
    the affine part). Least squares on n ≥ #features + 8 Gaussian queries gives the coefficients
    exactly (up to rounding) when the features have full column rank; then a fresh check as for a
    scalar victim. Returns the network and None, or None and the failure."""
    weights, biases = recovered["weights"], recovered["biases"]
    with_linear = not info.get("folded", False)
    d = weights.shape[1]
    num_features = weights.shape[0] + 1 + (d if with_linear else 0)
    key_fit, key_check = jax.random.split(rng_key)
    x = _gaussian_rows(key_fit, num_features + 8, d)
    design = _hidden_features(x, weights, biases, with_linear)
    singular = np.linalg.svd(design, compute_uv=False)
    rank = int(np.sum(singular > singular[0] * 1e-10))
    if rank < num_features:
        return None, (f"output layer: the hidden features at {x.shape[0]} query points have rank {rank} "
                      f"< {num_features}")
    values = np.asarray(oracle.value(x), np.float64)                       # (n, k)
    _require_finite("the output layer's fit", x, values)
    coefficients, *_ = np.linalg.lstsq(design, values, rcond=None)         # (num_features, k)
    h = weights.shape[0]
    output_weights = coefficients[:h].T
    linear = coefficients[h:h + d].T if with_linear else np.zeros((values.shape[1], d))
    network = dict(weights=weights, biases=biases, output_weights=output_weights,
                   output_bias=coefficients[-1].copy(), linear=linear)
    check = _gaussian_rows(key_check, num_check_queries, d)
    truth = np.asarray(oracle.value(check), np.float64)
    _require_finite("the check of the output layer", check, truth)
    predicted = _hidden_features(check, weights, biases, with_linear) @ coefficients
    error = np.max(np.abs(predicted - truth) / (np.abs(truth) + np.max(np.abs(truth)) * 1e-3 + _TINY))
    info["output_layer_check_relative_error"] = float(error)
    if not error <= check_tolerance:
        return None, (f"output layer: check against {num_check_queries} fresh value queries failed "
                      f"(relative error {error:.2e})")
    return network, None
