"""Rank-normalized split R̂, bulk and tail ESS, and R̂ from moments (plain split and nested).

The estimators of Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021,
"Rank-normalization, folding, and localization: an improved R̂" (split R̂,
Eqs. 4–5; rank normalization with Blom's offsets, Eq. 14; ESS with Geyer's
initial monotone sequence, Eq. 10; tail ESS, Sec. 4.3), the same numbers as
:func:`blackjax.diagnostics.rhat` / :func:`blackjax.diagnostics.ess_bulk` and (but
for two edge cases of Geyer's sequence: where it never turns non-positive ArviZ
ends it two lags early, and BlackJAX also makes the last even term monotone)
ArviZ's ``rhat(method="rank")`` / ``ess(method="bulk" | "tail")``; and nested R̂
(Margossian, Hoffman, Sountsov, Riou-Durand, Vehtari & Gelman 2024, "Nested R̂").

Where each runs. A run's verdict folds every draw into per-chain moments on the
device (:mod:`jaxprobe.engine.streaming`); :func:`rhat_from_moments` and
:func:`nested_rhat` turn them into R̂ there (``xp=jax.numpy``) or on the host
(``xp=numpy``). The rank-normalized statistics sort every value of a quantity at
once, so they run on a bounded subset of the draws (at most 4096 values per
quantity), on the host in NumPy (:func:`rank_diagnostics`, vectorized over a
leading cell axis): a few milliseconds, where XLA takes 3–7 s to compile the same
sorts, FFTs and running minima for every new shape (measured on XLA:CPU, against
a JAX version with an exact radix-sort ranking that ran at NumPy's speed once
compiled), which every run of a new size would pay.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
import sys
import threading
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np
from scipy.fft import next_fast_len
from scipy.special import ndtri

__all__ = ["RankDiagnostics", "nested_rhat", "rank_diagnostics", "rhat_ess_bulk", "rhat_from_moments",
           "split_gelman_rubin"]


class RankDiagnostics(NamedTuple):
    """Convergence diagnostics of K quantities in each cell (each ``(cells, K)``), from :func:`rank_diagnostics`.

    Examples
    --------
    >>> result = rank_diagnostics(np.random.default_rng(0).normal(size=(3, 4, 100, 2)))   # 3 cells
    >>> result.rhat_bulk.shape, result.ess_tail.shape
    ((3, 2), (3, 2))
    """

    rhat_bulk: np.ndarray  #: rank-normalized split R̂
    rhat_folded: np.ndarray  #: rank-normalized split R̂ of the draws folded about their median
    rhat: np.ndarray  #: the larger of the two (what Stan, ArviZ and BlackJAX report as R̂)
    ess_bulk: np.ndarray  #: ESS of the rank-normalized split draws
    ess_tail: np.ndarray  #: the smaller ESS of the 5% and 95% quantile indicators


def _split_chains(draws: np.ndarray) -> np.ndarray:
    """(cells, C, N, K) → (cells, 2C, N // 2, K): each chain split in halves (odd N drops the last draw)."""
    half = draws.shape[2] // 2
    return np.concatenate([draws[:, :, :half], draws[:, :, half:2 * half]], axis=1)


#: Scratch arrays up to this size are kept per thread between calls (:func:`_workspace`).
WORKSPACE_BYTES = 4 * 2 ** 20
_scratch = threading.local()


def _workspace(name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """A scratch array of this thread, kept for its next call of the same ``name`` (overwritten then): valid until
    that call. Why: glibc gives fresh arrays of 0.1-4 MB pages that it returned to the system at the last
    ``free``, and the first write to each page faults. A verdict's rank statistics (17 × 3,840 values) spent 40% of
    their time in those faults (3.7 of 9.5 ms, 1,160 faults per call); with their large arrays kept here, none.
    Larger arrays are allocated fresh (their faults are a small share of their work, and a cache would pin them)."""
    cache = _scratch.__dict__
    array = cache.get(name)
    if array is None or array.shape != shape or array.dtype != dtype:
        array = np.empty(shape, dtype)
        if array.nbytes <= WORKSPACE_BYTES:
            cache[name] = array
    return array


def _sort_rows(rows: np.ndarray, name: str = "sort") -> tuple[np.ndarray, np.ndarray]:
    """The sorting permutation of each row of ``rows`` ``(R, n)`` as flat indices into ``rows`` (``(R, n)``
    int64) and the sorted rows (ties in any order; -0.0 sorts as 0.0, NaN anywhere in its row). For float32
    rows both are :func:`_workspace` arrays ``name``: valid until the next call with that name in this thread.

    float32 rows: each value's bits as an int32 that orders like the value (a negative value's 31 low bits
    flipped; -0.0 first made 0.0), shifted above its flat index in one int64 and sorted (NumPy's SIMD sort of
    integers; with the packing and unpacking, half the time of ``argsort`` and a gather of the sorted values).
    Other dtypes: ``argsort``."""
    if rows.dtype != np.float32 or rows.size >= 2 ** 31:
        order = np.argsort(rows, axis=-1) + np.arange(0, rows.size, rows.shape[1])[:, None]
        return order, rows.take(order)
    bits = _workspace(name + ".bits", rows.shape, np.int32)
    flip = _workspace(name + ".flip", rows.shape, np.int32)
    np.add(rows, np.float32(0.0), out=bits.view(np.float32))  # -0.0 + 0.0 = +0.0: one key for equal values
    np.right_shift(bits, 31, out=flip)  # -1 where negative (arithmetic shift), else 0
    flip &= np.int32(0x7FFFFFFF)
    bits ^= flip  # an int32 that orders like the float
    keys = _workspace(name + ".keys", rows.shape, np.int64)
    np.copyto(keys, bits)
    keys <<= 32
    keys |= _flat_index(rows.size).reshape(rows.shape)  # the flat index in the low 32 bits, the value above
    keys.sort(axis=-1)
    value = keys.view(np.int32).reshape(rows.shape + (2,))[..., _HIGH_HALF]
    np.right_shift(value, 31, out=flip)
    flip &= np.int32(0x7FFFFFFF)
    np.bitwise_xor(value, flip, out=bits)  # the same flip undoes itself
    keys &= 0xFFFFFFFF
    return keys, bits.view(np.float32)


_HIGH_HALF = 1 if sys.byteorder == "little" else 0  # which int32 of an int64 holds its high 32 bits


def _flat_index(size: int) -> np.ndarray:
    """``arange(size)`` as int64 (read-only), kept between calls up to :data:`WORKSPACE_BYTES` like the scratch
    arrays (a sweep's millions of values are not pinned)."""
    if size * 8 > WORKSPACE_BYTES:
        return np.arange(size, dtype=np.int64)
    return _small_flat_index(size)


@functools.lru_cache(maxsize=4)
def _small_flat_index(size: int) -> np.ndarray:
    index = np.arange(size, dtype=np.int64)
    index.flags.writeable = False
    return index


def _average_rank_scores(order: np.ndarray, ordered: np.ndarray, has_nan: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Blom's z = Φ⁻¹((r − 3/8) / (n + 1/4)) (Vehtari et al. 2021, Eq. 14) of the average ranks r (tied values get
    the mean of the ranks they span) of rows ``(R, n)`` sorted by ``order`` (flat indices, :func:`_sort_rows`) into
    ``ordered``, written into ``out`` ``(R, n)`` in the rows' own order (NaN in a row ``has_nan``). Returns which
    rows hold a tie ``(R,)``."""
    num_rows, n = ordered.shape
    table = _blom_table(n)  # z of the ranks 1, 1.5, ..., n: index 2r - 2
    tied = np.flatnonzero(ordered[:, 1:] == ordered[:, :-1])  # each value equal to the one before it
    tied_rows = np.zeros(num_rows, bool)
    tied_rows[tied // (n - 1)] = True
    if tied.size == 0:  # the usual case of continuous draws: the rank is the position in the order
        scores = np.broadcast_to(table[::2], (num_rows, n))
    else:  # the few runs of ties: each member gets the z of its run's average rank
        scores = np.tile(table[::2], (num_rows, 1))
        position = tied + tied // (n - 1) + 1  # flat into (R, n): never column 0, so runs never span rows
        new_run = np.ones(position.size, bool)
        np.not_equal(position[1:], position[:-1] + 1, out=new_run[1:])
        run = np.cumsum(new_run) - 1
        first = position[new_run] - 1
        last = position[np.append(np.flatnonzero(new_run)[1:], position.size) - 1]
        run_scores = table[first + last - 2 * (first // n) * n]
        scores.reshape(-1)[position] = run_scores[run]
        scores.reshape(-1)[first] = run_scores
    out.reshape(-1)[order.reshape(-1)] = scores.reshape(-1)
    if has_nan.any():  # a slice with a NaN is all NaN
        out[has_nan[:, 0]] = np.nan
    return tied_rows


def _pooled_rows(draws: np.ndarray) -> np.ndarray:
    """``(cells, C, N, K)`` → ``(cells·K, C·N)``: each cell's quantity as one row of its pooled values, chain-major."""
    cells, chains, num, k = draws.shape
    return np.ascontiguousarray(np.moveaxis(draws.reshape(cells, chains * num, k), 1, 2)).reshape(cells * k, -1)


def _rank_normalize(draws: np.ndarray) -> np.ndarray:
    """Blom's z = Φ⁻¹((r − 3/8) / (n + 1/4)) of the average ranks r over each cell's pooled chains and draws."""
    cells, chains, num, k = draws.shape
    n = chains * num
    rows = _pooled_rows(draws)
    scores = np.empty(rows.shape)
    _average_rank_scores(*_sort_rows(rows), np.any(np.isnan(rows), axis=-1, keepdims=True), scores)
    return np.moveaxis(scores.reshape(cells, k, n), 2, 1).reshape(draws.shape)


@functools.lru_cache(maxsize=16)
def _blom_table(n: int) -> np.ndarray:
    """Blom's z of the average ranks 1, 1.5, ..., n of n values (read-only: shared between calls)."""
    table = ndtri((np.arange(1.0, n + 0.75, 0.5) - 3.0 / 8.0) / (n + 0.25))
    table.flags.writeable = False
    return table


def _sorted_quantile(ordered: np.ndarray, q: float) -> np.ndarray:
    """``np.quantile(rows, q, axis=-1)`` (its default, linear method, the same arithmetic) of rows whose sorted
    values are ``ordered`` ``(R, n)``: no second sort."""
    n = ordered.shape[-1]
    virtual = n * q + (1 + q * (1 - 1 - 1)) - 1  # NumPy's _compute_virtual_index with alpha = beta = 1
    below = int(np.clip(np.floor(virtual), 0, n - 1))
    above = min(below + 1, n - 1)
    gamma = virtual - below
    a, b = ordered[:, below], ordered[:, above]
    diff = b - a
    return np.where(gamma >= 0.5, b - diff * (1 - gamma), a + diff * gamma)


def _mean_autocovariance(centered: np.ndarray) -> np.ndarray:
    """The chains' mean autocovariance Σₘ Σₜ xₘₜ·xₘ,ₜ₊ₗ / (N·M) of series ``(..., M, N)`` (M chains of N draws,
    time last), lags 0 … N − 1 → ``(..., N)``. Short series (a subset of 4096 values split over 512 half-chains
    has N = 8): one matrix product per quantity, Σₘ xₘᵢ·xₘⱼ (N × N), whose l-th diagonal sums to lag l: no
    per-chain output (products lag by lag cost 10× more there, one FFT per series more still). Long series: the
    power spectra averaged over chains before one inverse FFT per quantity (the mean commutes with it)."""
    *lead, chains, num = centered.shape
    if num <= 48:
        gram = np.matmul(np.swapaxes(centered, -1, -2), centered)  # (..., N, N)
        lag = np.arange(num)[None, :] - np.arange(num)[:, None]  # j − i of entry (i, j)
        diagonals = (lag.reshape(-1, 1) == np.arange(num)).astype(np.float64)  # (N², N): which lag each entry is
        return (gram.reshape(*lead, num * num) @ diagonals) / (num * chains)
    size = next_fast_len(2 * num)
    spectrum = np.fft.rfft(centered, n=size, axis=-1)
    power = (spectrum.real ** 2 + spectrum.imag ** 2).mean(axis=-2)
    return np.fft.irfft(power, n=size, axis=-1)[..., :num] / num


def _effective_sample_size(draws: np.ndarray) -> np.ndarray:
    """Geyer's initial-monotone-sequence ESS of (cells, M, N, K) → (cells, K), as BlackJAX computes it."""
    series = np.moveaxis(draws, 3, 1).astype(np.float64, order="C", copy=True)  # (cells, K, M, N): time last
    return _ess_and_rhat(series)[0]


def _changes_within_a_chain(series: np.ndarray) -> np.ndarray:
    """Whether some chain of each series ``(..., M, N)`` takes two values or holds a NaN → ``(...)``: where none
    does, W = 0 and the series has no ESS or R̂ (:func:`_ess_and_rhat`)."""
    return np.any(series != series[..., :1], axis=(-2, -1))


def _ess_and_rhat(series: np.ndarray, varies: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Geyer's initial-monotone-sequence ESS (as BlackJAX computes it) and Gelman–Rubin R̂ (Vehtari et al.
    2021, Eqs. 4–5: B = N·var(chain means), W = mean within-chain variance, its lag-0 autocovariance) of
    series ``(..., M, N)`` (M chains of N draws, time last, float64; centred in place: a scratch array) → two
    ``(...)``. One pass gives both: they share the chains' means and W. A series none of whose chains changes
    (constant, or frozen chains at different values: W = 0) has ESS 0 and NaN R̂; one with a NaN, NaN. ``varies``
    ``(...)``: whether some chain of each series changes within itself or holds a NaN, where the caller knows it
    (found from the series otherwise)."""
    *lead, chains, num = series.shape
    if varies is None:
        varies = _changes_within_a_chain(series)
    # A matrix product with 1/N: a mean over a short last axis is several times slower in NumPy.
    chain_mean = series @ np.full(num, 1.0 / num)  # (..., M)
    series -= chain_mean[..., None]  # centred in place (a new array of every series cost more than the rest)
    mean_autocov = _mean_autocovariance(series)  # (..., N)
    var0 = mean_autocov[..., 0] * num / (num - 1.0)  # W: the mean of the chains' variances (ddof 1)
    between = num * chain_mean.var(axis=-1, ddof=1)  # NaN with one chain: no R̂
    rhat = np.where(varies, np.sqrt((between / var0 + num - 1) / num), np.nan)
    degenerate = np.isfinite(var0) & (~varies | (var0 <= 0.0))
    weighted_var = var0 * (num - 1.0) / num + (between / num if chains > 1 else 0.0)
    weighted_var = np.where(degenerate, 1.0, weighted_var)
    num_even = num - num % 2
    rho = 1.0 - (var0[..., None] - mean_autocov[..., 1:num_even]) / weighted_var[..., None]
    rho = np.concatenate([np.ones((1,) + var0.shape), np.moveaxis(rho, -1, 0)], axis=0)  # (num_even, ...)
    even, odd = rho[0::2], rho[1::2]
    pairs = even.shape[0]
    # Geyer's initial positive sequence: keep pairs while even + odd > 0.
    mask = np.logical_and.accumulate((even + odd) > 0.0, axis=0)
    last = np.maximum(mask.sum(axis=0) - 1, 0)  # index of the last positive pair (0 if none)
    after = last + 1
    inside = after < pairs
    after_clamped = np.minimum(after, pairs - 1)
    even_after = np.take_along_axis(even, after_clamped[None], axis=0)[0]
    odd = np.where(mask, odd, 0.0)
    mask_even = mask.copy()
    mask_even[(after[inside],) + np.nonzero(inside)] = even_after[inside] > 0
    even = np.where(mask_even, even, 0.0)
    # Geyer's initial monotone sequence: the pair sums made non-increasing.
    pair_sum = even + odd
    running_min = np.minimum.accumulate(pair_sum, axis=0)
    lowered = pair_sum > running_min
    even = np.where(lowered, running_min / 2.0, even)
    odd = np.where(lowered, running_min / 2.0, odd)
    total = chains * num
    tau = -1.0 + 2.0 * np.sum(even + odd, axis=0) - np.take_along_axis(even, after_clamped[None], axis=0)[0]
    tau = np.maximum(tau, 1.0 / np.log10(total))
    ess = np.where(degenerate, 0.0, total / tau)
    return np.where(np.isnan(var0), np.nan, ess), rhat


def split_gelman_rubin(draws: np.ndarray) -> np.ndarray:
    """Split R̂ of (chains, draws, K) → (K,) on the raw values, without rank normalization.

    The Gelman–Rubin statistic of :func:`rhat_ess_bulk` (Eqs. 4–5 of Vehtari et al.
    2021) without its rank normalization (Eq. 14): no sort and no copy of the draws
    (moments in the draws' own precision, float32 or float64), so it is a cheap
    screen for which of very many coordinates (images) deserve the full
    rank-normalized R̂. A constant coordinate gives NaN (or a value near 1 after
    rounding). At least 4 draws.

    Examples
    --------
    >>> draws = np.random.default_rng(0).normal(size=(4, 500, 2))    # (chains, draws, K)
    >>> stuck = draws + np.arange(4)[:, None, None]                  # each chain around its own value
    >>> split_gelman_rubin(draws).round(3).tolist(), split_gelman_rubin(stuck).round(1).tolist()
    ([1.0, 1.001], [1.6, 1.6])
    """
    draws = np.asarray(draws)
    if draws.ndim != 3 or draws.shape[1] < 4:
        raise ValueError(f"draws must have shape (chains, draws >= 4, K), got {draws.shape}")
    if draws.dtype not in (np.float32, np.float64):
        draws = draws.astype(np.float32)
    half = draws.shape[1] // 2
    means, variances = [], []
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for part in (draws[:, :half], draws[:, half:2 * half]):
            mean = part.mean(axis=1, keepdims=True)
            variances.append(np.square(part - mean).sum(axis=1) / (half - 1))
            means.append(mean[:, 0])
        chain_mean = np.concatenate(means, axis=0)[None].astype(np.float64)
        chain_var = np.concatenate(variances, axis=0)[None].astype(np.float64)
        return rhat_from_moments(chain_mean, chain_var, half, xp=np)[0]


def rank_diagnostics(draws: np.ndarray) -> RankDiagnostics:
    """Rank-normalized split R̂ (bulk, folded and their max), bulk ESS and tail ESS of each cell and quantity.

    The tail ESS is the smaller ESS of the indicators I(x ≤ q₀.₀₅) and I(x ≤ q₀.₉₅) of the split chains
    (Vehtari et al. 2021, Sec. 4.3; ArviZ's ``ess(method="tail")``, NumPy's linear quantiles).

    Parameters
    ----------
    draws
        ``(cells, chains, draws >= 4, K)``.

    Returns
    -------
    RankDiagnostics
        Each field ``(cells, K)``, float64. A quantity that never changes has NaN R̂ and ESS 0; one holding
        a NaN has NaN everywhere.

    Examples
    --------
    >>> draws = np.random.default_rng(0).normal(size=(1, 4, 500, 2))   # (cells, chains, draws, K): mixed chains
    >>> result = rank_diagnostics(draws)
    >>> result.rhat.shape, bool(np.all(result.rhat < 1.01)), bool(np.all(result.ess_bulk > 1000))
    ((1, 2), True, True)
    """
    draws = np.asarray(draws)
    if draws.ndim != 4 or draws.shape[2] < 4:
        raise ValueError(f"draws must have shape (cells, chains, draws >= 4, K), got {draws.shape}")
    workers = min(_WORKERS, draws.shape[3], draws.size // _VALUES_PER_WORKER)
    if workers > 1:  # the quantities are independent: split them over threads (NumPy's sorts, FFTs and
        # reductions release the GIL), 1.3x faster on 2 cores for 4 cells x 17 quantities x 3840 values
        parts = np.array_split(np.arange(draws.shape[3]), workers)
        futures = [_executor().submit(_rank_diagnostics, draws[..., part]) for part in parts[1:]]
        results = [_rank_diagnostics(draws[..., parts[0]])] + [future.result() for future in futures]
        return RankDiagnostics(*(np.concatenate(fields, axis=-1) for fields in zip(*results)))
    return _rank_diagnostics(draws)


_WORKERS = max(1, min(4, os.cpu_count() or 1))
#: Below this many values a second thread costs more than it saves: the verdict's 17 × 3,840 values (its starts'
#: check on the other core) took 7.9 ms in one thread and 8.8-9.4 ms in two (2 cores).
_VALUES_PER_WORKER = 65536


@functools.lru_cache(maxsize=None)
def _executor() -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="jaxprobe-diagnostics")


def in_background(fn: Any, *args: Any) -> concurrent.futures.Future:
    """``fn(*args)`` on the diagnostics' thread pool: host NumPy work beside other host NumPy work."""
    return _executor().submit(fn, *args)


def _rank_diagnostics(draws: np.ndarray) -> RankDiagnostics:
    """:func:`rank_diagnostics` of ``draws`` ``(cells, chains, draws >= 4, K)`` in this thread. One sort of each
    quantity's pooled values gives its bulk ranks, its median and quantiles; a second, of the values folded about
    the median, its folded ranks. Its large arrays are :func:`_workspace` scratch."""
    with np.errstate(divide="ignore", invalid="ignore"):
        split = _split_chains(draws)  # ranks on the draws' own dtype (as BlackJAX does), statistics in float64
        cells, chains, num, k = split.shape
        n = chains * num
        rows = _pooled_rows(split)
        has_nan = np.any(np.isnan(rows), axis=-1, keepdims=True)
        # The median, quantiles and folding in the draws' dtype too, as BlackJAX computes them (folded in float64,
        # values a float32 rounding apart can swap ranks: R̂ differs in the 5th digit).
        order, ordered = _sort_rows(rows)
        median = 0.5 * (ordered[:, (n - 1) // 2] + ordered[:, n // 2])  # np.median's value
        # |x − median| in the sorted order: its sort's permutation indexes the positions in ``order``
        folded_position, folded_ordered = _sort_rows(np.abs(ordered - median[:, None]), "folded")
        folded_order = order.reshape(-1).take(folded_position)
        quantiles = _sorted_quantile(ordered, 0.05), _sorted_quantile(ordered, 0.95)
        # Every series in the layout the ESS takes, (4, cells·K, n) = (4, cells·K, 2C, N/2) time last, the rows'
        # own (chain-major): bulk and folded normal scores, the 5% and 95% quantile indicators. One pass gives
        # their R̂ and ESS: on a subset of 4096 values the cost is per NumPy call, not per value.
        series = _workspace("series", (4,) + rows.shape, np.float64)  # scratch: the ESS centres it in place
        tied_rows = [_average_rank_scores(order, ordered, has_nan, series[0]),
                     _average_rank_scores(folded_order, folded_ordered, has_nan, series[1])]
        np.less_equal(rows, quantiles[0][:, None], out=series[2])
        np.less_equal(rows, quantiles[1][:, None], out=series[3])
        by_chain = series.reshape(4, cells * k, chains, num)
        # Which series change within some chain (all frozen chains: ESS 0, no R̂), without a pass over every
        # series: scores without ties change in every chain (N ≥ 2 distinct values); the rows with ties are
        # compared; an indicator is frozen where every chain counts 0 or N values at or below its quantile.
        varies = np.ones((4, cells * k), bool)
        for which, tied in enumerate(tied_rows):
            if tied.any():
                varies[which, tied] = _changes_within_a_chain(by_chain[which, tied])
        counts = by_chain[2:] @ np.ones(num)  # exact: sums of 0s and 1s
        varies[2:] = np.any((counts != 0.0) & (counts != num), axis=-1)
        varies |= has_nan[:, 0]
        ess, rhat = (field.reshape(4, cells, k) for field in
                     _ess_and_rhat(series.reshape(4 * cells * k, chains, num), varies.reshape(-1)))
        bulk, folded_rhat = rhat[0], rhat[1]
        ess_tail = np.where(has_nan.reshape(cells, k), np.nan, np.minimum(ess[2], ess[3]))
        return RankDiagnostics(bulk, folded_rhat, np.maximum(bulk, folded_rhat), ess[0], ess_tail)


def rhat_ess_bulk(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(rhat, ess_bulk)`` of :func:`rank_diagnostics`: rank-normalized split R̂ (max of bulk and folded) and
    bulk ESS, each ``(cells, K)``. ``draws`` ``(cells, chains, draws >= 4, K)``.

    Examples
    --------
    >>> draws = np.random.default_rng(0).normal(size=(1, 4, 500, 2))
    >>> stuck = draws + np.arange(4)[None, :, None, None]            # each chain around its own value
    >>> rhat, ess = rhat_ess_bulk(stuck)
    >>> bool(np.all(rhat > 1.1)), bool(np.all(rhat_ess_bulk(draws)[0] < 1.01))
    (True, True)
    """
    result = rank_diagnostics(draws)
    return result.rhat, result.ess_bulk


def rhat_from_moments(chain_mean: Any, chain_var: Any, num_draws: Any, *,
                      xp: Any = jnp) -> Any:
    """Gelman–Rubin R̂ from each chain's moments (Vehtari et al. 2021, Eqs. 4–5 when the chains are halves).

    R̂ = sqrt((N − 1)/N + B/(N·W)) with B = N·var(chain means) (ddof 1) and W = mean(chain variances).

    Parameters
    ----------
    chain_mean, chain_var
        ``(..., M, K)``: each chain's mean and variance (ddof 1) of K quantities over ``num_draws`` draws
        (leading axes: cells). Pass the moments of half-chains for split R̂.
    num_draws
        N, the draws per chain (an int or a traced scalar).
    xp
        The array namespace: ``jax.numpy`` (default; jit-able) or ``numpy`` (on the host, nothing compiled).

    Returns
    -------
    array
        ``(..., K)``; NaN where no chain varies.

    Examples
    --------
    >>> chain_mean = np.array([[0.0], [0.1], [-0.1], [0.05]])          # 4 chains' means of 1 quantity
    >>> rhat_from_moments(chain_mean, np.ones((4, 1)), 500, xp=np).round(4).tolist()
    [1.0026]
    """
    between = num_draws * xp.var(chain_mean, axis=-2, ddof=1)
    within = xp.mean(chain_var, axis=-2)
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp.sqrt((between / within + num_draws - 1) / num_draws)


def nested_rhat(chain_mean: Any, chain_var: Any, num_draws: Any,
                num_superchains: int, *, xp: Any = jnp) -> Any:
    """Nested R̂ of many short chains grouped in superchains (Margossian, Hoffman, Sountsov, Riou-Durand,
    Vehtari & Gelman 2024, "Nested R̂").

    nR̂ = sqrt(1 + B/W): B is the variance (ddof 1) of the superchain means; W is the mean over superchains of
    the variance (ddof 1) of their chains' means (0 with one chain per superchain) plus their chains' mean
    within-chain variance (0 with one draw per chain). The paper's threshold for convergence is nR̂ < 1.01
    (δ = 0.01).

    Parameters
    ----------
    chain_mean, chain_var
        ``(C, K)``: each chain's mean and variance (ddof 1) of K quantities over ``num_draws`` draws.
    num_draws
        Draws per chain (an int or a traced scalar).
    num_superchains
        S >= 2 (static): superchain s holds chains s·C/S, ..., (s + 1)·C/S − 1 (e.g. those started from one
        initial point).
    xp
        The array namespace: ``jax.numpy`` (default; jit-able) or ``numpy``.

    Returns
    -------
    array
        ``(K,)``.

    Raises
    ------
    ValueError
        If C is not a multiple of S or S < 2.

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(8, 100, 1))          # 8 chains in 2 superchains
    >>> bool(nested_rhat(x.mean(1), x.var(1, ddof=1), 100, 2, xp=np)[0] < 1.01)
    True
    """
    chain_mean, chain_var = xp.asarray(chain_mean), xp.asarray(chain_var)
    chains = chain_mean.shape[0]
    if num_superchains < 2 or chains % num_superchains:
        raise ValueError(f"{chains} chains do not form {num_superchains} >= 2 superchains of equal size")
    grouped_mean = chain_mean.reshape(num_superchains, chains // num_superchains, -1)
    grouped_var = chain_var.reshape(grouped_mean.shape)
    between = xp.var(grouped_mean.mean(axis=1), axis=0, ddof=1)
    between_chains = xp.var(grouped_mean, axis=1, ddof=1) if grouped_mean.shape[1] > 1 else 0.0
    within_chains = xp.where(num_draws > 1, grouped_var.mean(axis=1), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp.sqrt(1.0 + between / xp.mean(between_chains + within_chains, axis=0))
