"""What a run learns about itself as it goes: statistics folded in draw by draw, inside the compiled scan.

A run's verdict and its observables are computed on the device, from statistics that each kept draw
updates as soon as the scan makes it (:func:`fold_draw`), so they need no second copy of the draws and
no pass over them afterwards, and they cost the same whether the draws are kept or not
(``keep_draws=False``: memory ``O(C·D)`` whatever the number of draws).

Per kept draw, for the ``K = D + 1`` quantities of every chain (the D coordinates and the log density):

* **moments of each half of every chain** (Welford; the two halves of split R̂, Vehtari et al. 2021
  Eqs. 4–5; an odd run leaves its last draw out, as split R̂ does): the plain split R̂ of every quantity
  over all chains and all draws, nested R̂ (Margossian et al. 2022), and which quantities never change;
* **the largest |x| of the last quarter** of the run, over all chains (the runaway test), the number of
  draws with a NaN or inf per chain, and the range of the finite log densities (a flat target);
* **a bounded subset** of the draws: at most :data:`DIAGNOSTIC_CHAINS` evenly spaced chains, every
  ``stride``-th draw, at most :data:`DIAGNOSTIC_VALUES` values per quantity. The statistics that need
  every value at once (rank normalization sorts them: rank-normalized bulk and folded R̂, bulk and tail
  ESS, and the lag-based drift test) are computed on it, by NumPy on the host
  (:func:`rank_statistics`): a few milliseconds for its at most 4096 × 17 values, where XLA spends
  4–10 s compiling the same sorts, FFTs and running minima for every new run shape (measured on
  XLA:CPU; the compile is host work on a GPU too). :func:`subset_plan` says how big it is, and the
  verdict's notes say when it is smaller than the run;
* **observables** ``fn(x)``: per-chain sums over batches of draws, giving the mean, its Monte-Carlo
  standard error (batch means over chains and batches) and every chain's mean.

:func:`finalize` turns the folded statistics into the verdict's numbers on the device and picks the
subset's quantities; :func:`jaxprobe.engine.verdict.verdict_from_statistics` phrases them.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.engine import diagnostics
from jaxprobe.types import Array

__all__ = ["DIAGNOSTIC_VALUES", "DIAGNOSTIC_CHAINS", "DEFAULT_MAX_COORDINATES", "NUM_BATCHES", "Monitor",
           "DrawStats", "ObservableSums", "Observed", "Statistics", "RankStatistics", "subset_plan", "init_stats",
           "fold_draw", "finalize", "stats_of_draws", "rank_statistics", "observed"]

#: Values per quantity in the subset that rank-normalized R̂, bulk/tail ESS and the drift test see.
DIAGNOSTIC_VALUES = 4096
#: Chains in that subset, evenly spaced over the run's chains.
DIAGNOSTIC_CHAINS = 256
#: Position coordinates that enter the rank-normalized statistics (half with the largest plain split R̂ over
#: all draws, half evenly spaced); the log density is always one more. Plain split R̂ covers every coordinate.
DEFAULT_MAX_COORDINATES = 16
#: Batches of an observable's batch-means standard error, over all chains together (at least one per chain).
NUM_BATCHES = 32
#: Superchains of nested R̂ (Margossian et al. 2022), computed for runs of at least 64 chains.
MAX_SUPERCHAINS = 16
MIN_CHAINS_FOR_NESTED_RHAT = 64
# The drift test (see jaxprobe.engine.verdict, "Drift") and the fewest draws R̂ and ESS need.
DIFFUSION_RATIO = 3.0
SPREAD_GROWTH = 2.0
MIN_DRAWS_FOR_RHAT = 4
MIN_DRAWS_FOR_DIFFUSION = 16
MIN_CHAINS_FOR_SPREAD = 16
FLAT_TOLERANCE = 1e-6


def subset_plan(num_chains: int, num_draws: int, values: int = DIAGNOSTIC_VALUES,
                max_chains: int = DIAGNOSTIC_CHAINS) -> tuple[np.ndarray, int, int]:
    """``(chains, stride, num_subset_draws)`` of the diagnostic subset of a run of ``num_chains`` × ``num_draws``
    kept draws: ``chains`` the evenly spaced chain indices, and kept draw ``i`` is in the subset when
    ``(i + 1) % stride == 0`` (the last draw of every ``stride`` draws), ``num_subset_draws`` of them."""
    subset_chains = min(num_chains, max_chains)
    chains = (np.arange(subset_chains) * num_chains) // subset_chains
    per_chain = max(1, values // subset_chains)
    stride = max(1, math.ceil(num_draws / per_chain))
    return chains, stride, num_draws // stride


def _superchains(num_chains: int) -> int:
    """How many superchains nested R̂ groups the chains into (0: not computed)."""
    if num_chains >= MIN_CHAINS_FOR_NESTED_RHAT:
        for superchains in range(MAX_SUPERCHAINS, 1, -1):
            if num_chains % superchains == 0:
                return superchains
    return 0


@dataclasses.dataclass(frozen=True)
class Monitor:
    """What a run folds in per kept draw (a static, hashable description: part of the compiled program).

    ``num_draws``: kept draws of the whole run per chain (the halves and quarters are of this run, also
    when it is sampled in chunks). ``observables``: ``((name, fn), ...)`` with ``fn`` of one flat position
    ``(D,)`` → an array (compose any change of space into ``fn``). ``max_coordinates``: position coordinates
    of the rank-normalized statistics (:data:`DEFAULT_MAX_COORDINATES`).
    """

    num_chains: int
    dim: int
    num_draws: int
    observables: tuple[tuple[str, Callable[[Array], Array]], ...] = ()
    max_coordinates: int = DEFAULT_MAX_COORDINATES

    @property
    def num_batches(self) -> int:
        """Batches per chain of the observables' batch means: :data:`NUM_BATCHES` over all chains."""
        return max(1, min(self.num_draws, math.ceil(NUM_BATCHES / self.num_chains)))

    def plan(self) -> tuple[np.ndarray, int, int]:
        return subset_plan(self.num_chains, self.num_draws)


class DrawStats(NamedTuple):
    """The verdict's statistics folded in so far; ``K = D + 1`` (coordinates, then the log density)."""

    half_count: Array  # (2,) draws folded into each half of every chain
    half_mean: Array  # (2, C, K)
    half_m2: Array  # (2, C, K) sums of squared deviations (Welford)
    late_max_abs: Array  # (D,) largest |x| over chains in the run's last quarter (NaN ignored)
    nonfinite_draws: Array  # (C,) kept draws holding a NaN or inf (position or log density)
    logdensity_range: Array  # (2,) smallest and largest finite log density
    subset: Array  # (S + 1, C_sub, K): the diagnostic subset; row S takes the draws that are not in it


class ObservableSums(NamedTuple):
    """One observable's per-chain sums over batches of draws: ``sums`` ``(B, C, *shape)``, ``counts`` ``(B,)``."""

    sums: Array
    counts: Array


class Observed(NamedTuple):
    """An observable's estimate over all chains and kept draws (arrays of the observable's shape).

    ``mean``; ``mcse``, its Monte-Carlo standard error by batch means (the chains' batch means are
    independent once each batch is longer than the autocorrelation time; with at least
    :data:`NUM_BATCHES` chains each batch is a whole chain); ``per_chain_mean`` ``(C, *shape)``;
    ``num_batches``, the batch means behind ``mcse`` (fewer than about 10 make it unreliable).
    """

    mean: np.ndarray
    mcse: np.ndarray
    per_chain_mean: np.ndarray
    num_batches: int


def init_stats(monitor: Monitor, dtype: Any) -> tuple[DrawStats, dict[str, ObservableSums]]:
    """Empty statistics for a run described by ``monitor``. Observables' output shapes come from
    ``jax.eval_shape`` (no computation)."""
    chains, _, num_subset = monitor.plan()
    num_chains, k = monitor.num_chains, monitor.dim + 1
    zeros = jnp.zeros((2, num_chains, k), dtype)
    stats = DrawStats(jnp.zeros((2,), jnp.int32), zeros, zeros, jnp.zeros((monitor.dim,), dtype),
                      jnp.zeros((num_chains,), jnp.int32), jnp.asarray([jnp.inf, -jnp.inf], dtype),
                      jnp.zeros((num_subset + 1, len(chains), k), dtype))
    observables = {}
    one = jax.ShapeDtypeStruct((monitor.dim,), dtype)
    for name, fn in monitor.observables:
        out = jax.eval_shape(fn, one)
        out_dtype = jnp.result_type(out.dtype, dtype) if jnp.issubdtype(out.dtype, jnp.floating) else dtype
        observables[name] = ObservableSums(jnp.zeros((monitor.num_batches, num_chains) + out.shape, out_dtype),
                                           jnp.zeros((monitor.num_batches,), jnp.int32))
    return stats, observables


def fold_draw(monitor: Monitor, carry: tuple[DrawStats, dict[str, ObservableSums]], index: Array,
              position: Array, logdensity: Array) -> tuple[DrawStats, dict[str, ObservableSums]]:
    """Fold kept draw ``index`` (of the whole run) of every chain, ``position`` ``(C, D)`` and ``logdensity``
    ``(C,)``, into the statistics. Touches one half's moments and one subset row, not the whole buffers."""
    stats, observables = carry
    num_draws = monitor.num_draws
    dtype = stats.half_mean.dtype
    values = jnp.concatenate([position, logdensity[:, None]], axis=1).astype(dtype)  # (C, K)

    # Welford in the half this draw belongs to (an odd run's last draw is in neither).
    half_length = num_draws // 2
    half = jnp.where(index < half_length, 0, 1)
    counted = index < 2 * half_length
    count = stats.half_count[half] + 1
    mean = jax.lax.dynamic_index_in_dim(stats.half_mean, half, 0, keepdims=False)
    m2 = jax.lax.dynamic_index_in_dim(stats.half_m2, half, 0, keepdims=False)
    delta = values - mean
    new_mean = mean + delta / count.astype(dtype)
    new_m2 = m2 + delta * (values - new_mean)
    half_mean = jax.lax.dynamic_update_index_in_dim(stats.half_mean, jnp.where(counted, new_mean, mean), half, 0)
    half_m2 = jax.lax.dynamic_update_index_in_dim(stats.half_m2, jnp.where(counted, new_m2, m2), half, 0)
    half_count = stats.half_count.at[half].add(counted.astype(jnp.int32))

    finite = jnp.isfinite(values)
    late = index >= num_draws - max(1, num_draws // 4)
    magnitude = jnp.max(jnp.where(finite[:, :-1], jnp.abs(values[:, :-1]), 0), axis=0)
    late_max_abs = jnp.where(late, jnp.maximum(stats.late_max_abs, magnitude), stats.late_max_abs)
    nonfinite_draws = stats.nonfinite_draws + (~jnp.all(finite, axis=1)).astype(jnp.int32)
    finite_ld = finite[:, -1]
    ld = values[:, -1]
    logdensity_range = jnp.stack([jnp.minimum(stats.logdensity_range[0], jnp.min(jnp.where(finite_ld, ld, jnp.inf))),
                                  jnp.maximum(stats.logdensity_range[1], jnp.max(jnp.where(finite_ld, ld, -jnp.inf)))])

    chains, stride, num_subset = monitor.plan()
    row = jnp.where(((index + 1) % stride == 0) & (index < num_subset * stride), index // stride, num_subset)
    chosen = values if len(chains) == monitor.num_chains else values[jnp.asarray(chains)]
    subset = jax.lax.dynamic_update_index_in_dim(stats.subset, chosen, row, 0)

    batch = (index * monitor.num_batches) // num_draws
    updated = {}
    for name, fn in monitor.observables:
        sums, counts = observables[name]
        value = jnp.asarray(jax.vmap(fn)(position)).astype(sums.dtype)
        current = jax.lax.dynamic_index_in_dim(sums, batch, 0, keepdims=False)
        updated[name] = ObservableSums(jax.lax.dynamic_update_index_in_dim(sums, current + value, batch, 0),
                                       counts.at[batch].add(1))
    stats = DrawStats(half_count, half_mean, half_m2, late_max_abs, nonfinite_draws, logdensity_range, subset)
    return stats, updated


# ------------------------------------------------------------------ finalize (on the device)


class Statistics(NamedTuple):
    """The verdict's numbers computed on the device by :func:`finalize` (K = D + 1 quantities; M checked ones)."""

    split_rhat: Array  # (K,) plain split R̂ of every quantity, all chains and draws
    nested_rhat: Array  # (K,) nested R̂ (NaN when not computed)
    constant: Array  # (K,) bool: never changed in any draw of any chain
    coordinates: Array  # (M,) int32: quantities of the rank-normalized statistics (the last is the log density)
    subset: Array  # (C_sub, S, M): their diagnostic subset, chain-major
    late_max_abs: Array  # (D,)
    num_nonfinite_draws: Array  # ()
    logdensity_range: Array  # (2,)


def _merge(count_a, mean_a, m2_a, count_b, mean_b, m2_b):
    """Chan et al.'s merge of two Welford states."""
    count = count_a + count_b
    delta = mean_b - mean_a
    safe = max(count, 1) if isinstance(count, (int, np.integer)) else jnp.maximum(count, 1)
    return count, mean_a + delta * count_b / safe, m2_a + m2_b + delta ** 2 * count_a * count_b / safe


def _chosen_coordinates(screen: Any, dim: int, max_coordinates: int, xp: Any) -> Any:
    """All coordinates if ``dim <= max_coordinates``; else half with the largest ``screen`` (plain split R̂)
    and half evenly spaced over the others."""
    if dim <= max_coordinates:
        return xp.arange(dim, dtype=np.int32)
    worst = max_coordinates // 2
    top = xp.argsort(-xp.where(xp.isnan(screen), -np.inf, screen))[:worst]
    taken = (xp.arange(dim)[:, None] == top[None, :]).any(axis=1)
    rest_position = xp.cumsum(~taken) - 1  # index of each untaken coordinate among the untaken ones
    targets = np.round(np.linspace(0, dim - worst - 1, max_coordinates - worst)).astype(np.int32)
    spaced = xp.argmax((rest_position[None, :] == xp.asarray(targets)[:, None]) & ~taken[None, :], axis=1)
    return xp.sort(xp.concatenate([top, spaced]).astype(np.int32))


def finalize(stats: DrawStats, monitor: Monitor, xp: Any = jnp) -> Statistics:
    """The verdict's numbers from the folded statistics: plain split R̂ and nested R̂ of every quantity over
    all chains and draws, which quantities are constant, the quantities the rank-normalized statistics check
    and their subset (:func:`rank_statistics` takes it to the host: sorting its bounded values there costs
    milliseconds, where XLA spends 4-10 s compiling the same sorts for every new run shape).

    ``xp``: ``jax.numpy`` (pure and jit-able, ``monitor`` static: on a GPU or TPU, where the statistics stay
    on the device) or ``numpy`` (on the host: on a CPU, where host and device memory are one, this compiles
    nothing).
    """
    dim = monitor.dim
    half = monitor.num_draws // 2
    means = stats.half_mean.reshape(-1, dim + 1)
    variances = stats.half_m2.reshape(-1, dim + 1) / max(half - 1, 1)
    if half >= 2:
        split_rhat = diagnostics.rhat_from_moments(means, variances, half, xp=xp)
    else:
        split_rhat = xp.full(dim + 1, np.nan, means.dtype)
    count = 2 * half
    _, mean, m2 = _merge(half, stats.half_mean[0], stats.half_m2[0], half, stats.half_mean[1], stats.half_m2[1])
    constant = xp.all(m2 == 0, axis=0) & xp.all(mean == mean[:1], axis=0) & xp.all(xp.isfinite(mean), axis=0)
    superchains = _superchains(monitor.num_chains)
    if superchains and half >= 1:
        nested = diagnostics.nested_rhat(mean, m2 / max(count - 1, 1), count, superchains, xp=xp)
    else:
        nested = xp.full(dim + 1, np.nan, means.dtype)
    coordinates = xp.concatenate([_chosen_coordinates(split_rhat[:dim], dim, monitor.max_coordinates, xp),
                                  xp.asarray([dim], np.int32)])
    _, _, num_subset = monitor.plan()
    subset = xp.swapaxes(stats.subset[:num_subset], 0, 1)[:, :, coordinates]
    return Statistics(split_rhat, nested, constant, coordinates, subset, stats.late_max_abs,
                      xp.sum(stats.nonfinite_draws), stats.logdensity_range)


def stats_of_draws(position: np.ndarray, logdensity: np.ndarray, monitor: Monitor) -> DrawStats:
    """The statistics :func:`fold_draw` folds in over a run, computed at once from finished draws on the host
    (NumPy, float64): ``position`` ``(C, N, D)``, ``logdensity`` ``(C, N)``. For ``Samples.diagnostics()``
    and the verdict of draws made elsewhere; equal to the streamed statistics up to float rounding (tested)."""
    num_chains, num_draws, dim = position.shape
    half = num_draws // 2
    late = max(1, num_draws // 4)
    blocks = (np.asarray(position), np.asarray(logdensity)[:, :, None])

    def moments(part):  # (2, C, k) means and sums of squared deviations of the two halves
        halves = [np.asarray(part[:, :half], np.float64), np.asarray(part[:, half:2 * half], np.float64)]
        mean = [h.mean(axis=1) if half else np.zeros(h.shape[::2]) for h in halves]
        m2 = [((h - m[:, None]) ** 2).sum(axis=1) for h, m in zip(halves, mean)]
        return np.stack(mean), np.stack(m2)

    half_mean, half_m2 = (np.concatenate(pair, axis=2) for pair in zip(*(moments(b) for b in blocks)))
    with np.errstate(invalid="ignore"):
        tail = np.asarray(position[:, num_draws - late:], np.float64)
        late_max_abs = np.where(np.isfinite(tail), np.abs(tail), 0.0).max(axis=(0, 1)) if tail.size else \
            np.zeros(dim)
    nonfinite = ~np.isfinite(position).all(axis=2) | ~np.isfinite(logdensity)
    finite_ld = np.asarray(logdensity, np.float64)[np.isfinite(logdensity)]
    ld_range = np.asarray([finite_ld.min(), finite_ld.max()] if finite_ld.size else [np.inf, -np.inf])
    chains, stride, num_subset = monitor.plan()
    rows = np.arange(1, num_subset + 1) * stride - 1
    subset = np.concatenate([np.asarray(b, np.float64)[chains][:, rows] for b in blocks], axis=2)
    subset = np.concatenate([np.swapaxes(subset, 0, 1), np.zeros((1,) + subset.shape[:1] + subset.shape[2:])])
    return DrawStats(np.asarray([half, half]), half_mean, half_m2, late_max_abs, nonfinite.sum(axis=1),
                     ld_range, subset)


class RankStatistics(NamedTuple):
    """The subset's rank-normalized statistics (host NumPy), each ``(M,)``."""

    rhat: np.ndarray  # max of bulk and folded rank-normalized split R̂ (Vehtari et al. 2021)
    ess_bulk: np.ndarray
    ess_tail: np.ndarray
    diffusing: np.ndarray  # bool: keeps spreading like a random walk


def rank_statistics(subset: np.ndarray, logdensity_range: np.ndarray, chains_start_at_target: bool) -> RankStatistics:
    """Rank-normalized R̂, bulk and tail ESS and the drift test of a diagnostic subset ``(C_sub, S, M)``
    (the last quantity the log density); NaN statistics when ``S < 4``."""
    subset = np.asarray(subset, np.float64)
    num_chains, num_draws, count = subset.shape
    diffusing = _drift(subset[:, :, :-1], _is_flat(np.asarray(logdensity_range, np.float64)))
    diffusing = np.concatenate([diffusing, [False]])
    if num_draws < MIN_DRAWS_FOR_RHAT:
        nan = np.full(count, np.nan)
        return RankStatistics(nan, nan, nan, diffusing)
    ranked = diagnostics.rank_diagnostics(subset[None])
    rhat, ess_bulk, ess_tail = ranked.rhat[0], ranked.ess_bulk[0], ranked.ess_tail[0]
    if chains_start_at_target:
        # Chains that start at draws of the target need not mix between modes, so the pooled ESS (which
        # counts between-chain variance) undercounts them: the ESS is the sum of the chains' own.
        per_chain = diagnostics.rank_diagnostics(subset[:, None])
        ess_bulk, ess_tail = np.nansum(per_chain.ess_bulk, axis=0), np.nansum(per_chain.ess_tail, axis=0)
    return RankStatistics(rhat, ess_bulk, ess_tail, diffusing)


def _is_flat(logdensity_range: np.ndarray) -> bool:
    """Whether every finite log density was the same (a flat target)."""
    low, high = logdensity_range
    return bool(np.isfinite(low) and high - low <= FLAT_TOLERANCE * max(1.0, abs(low), abs(high)))


def _drift(x: np.ndarray, flat: bool) -> np.ndarray:
    """Per quantity of ``x`` ``(C, S, M)``: whether it diffuses like an unconfined random walk (see
    :mod:`jaxprobe.engine.verdict`, "Drift")."""
    num_chains, num_draws, _ = x.shape
    if num_draws < MIN_DRAWS_FOR_DIFFUSION:
        return np.zeros(x.shape[2], bool)
    short, long, quarter = num_draws // 8, num_draws // 2, num_draws // 4
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN coordinates: reported as non-finite draws
        msd_short = np.nanmean((x[:, short:] - x[:, :-short]) ** 2, axis=(0, 1))
        msd_long = np.nanmean((x[:, long:] - x[:, :-long]) ** 2, axis=(0, 1))
        moving = (msd_short > 0) & (msd_long >= DIFFUSION_RATIO * msd_short)
        spread_first = np.nanstd(x[:, :quarter], axis=(0, 1))
        spread_last = np.nanstd(x[:, -quarter:], axis=(0, 1))
        growing = (spread_last >= SPREAD_GROWTH * spread_first) & (num_chains >= MIN_CHAINS_FOR_SPREAD)
    return moving & (flat | growing)


def observed(sums: ObservableSums) -> Observed:
    """An observable's mean, batch-means standard error and per-chain means (host NumPy, float64)."""
    batch_sums = np.asarray(sums.sums, np.float64)  # (B, C, *shape)
    counts = np.asarray(sums.counts, np.float64)
    shape = (-1,) + (1,) * (batch_sums.ndim - 1)
    total = counts.sum()
    per_chain_mean = batch_sums.sum(axis=0) / total
    mean = per_chain_mean.mean(axis=0)
    filled = counts > 0
    batch_means = batch_sums[filled] / counts[filled].reshape(shape)
    flat = batch_means.reshape((-1,) + batch_means.shape[2:])
    num_batches = flat.shape[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        mcse = flat.std(axis=0, ddof=1) / np.sqrt(num_batches) if num_batches > 1 else np.full(mean.shape, np.nan)
    return Observed(mean, mcse, per_chain_mean, num_batches)
