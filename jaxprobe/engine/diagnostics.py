"""Rank-normalized split R̂ and bulk ESS of many cells at once, on the host (NumPy/SciPy).

The same estimators as :func:`blackjax.diagnostics.rhat` and
:func:`blackjax.diagnostics.ess_bulk` (Vehtari, Gelman, Simpson, Carpenter &
Bürkner 2021, "Rank-normalization, folding, and localization: an improved R̂",
Eqs. 4–5 for split R̂ with rank normalization (Eq. 14, Blom's plotting
position), Eq. 10 with Geyer's initial monotone sequence for the ESS), vectorized
over a leading cell axis and a trailing coordinate axis.

Used by :func:`jaxprobe.engine.verdict.assess` (one cell: a run's chains) and by
the sweeps (many cells at once). Why not inside the compiled sweep program: rank normalization needs a sort of
every coordinate's pooled draws, and XLA:CPU's sort is slow (the sweep program of
16 cells × 64 chains × 100 draws × 31 coordinates spent 3 s of its 3.3 s in the
sorts of R̂/ESS, against 0.3 s for all of its MCMC). NumPy sorts the same data in
milliseconds, so the sweep computes diagnostics here after the program returns.
"""

from __future__ import annotations

import numpy as np
from scipy.fft import next_fast_len
from scipy.special import ndtri

__all__ = ["rhat_ess_bulk", "split_gelman_rubin"]


def _split_chains(draws: np.ndarray) -> np.ndarray:
    """(cells, C, N, K) → (cells, 2C, N // 2, K): each chain split in halves (odd N drops the last draw)."""
    half = draws.shape[2] // 2
    return np.concatenate([draws[:, :, :half], draws[:, :, half:2 * half]], axis=1)


def _average_ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Twice the 1-based ranks minus 2 along the last axis (tied values get the mean of the ranks they span),
    and whether each slice holds a NaN.

    ``scipy.stats.rankdata(method="average")`` computes the same, 7× slower on
    sweep-sized arrays.
    """
    n = values.shape[-1]
    order = np.argsort(values, axis=-1)
    ordered = np.take_along_axis(values, order, axis=-1)
    index = np.arange(n)
    changes = ordered[..., 1:] != ordered[..., :-1]
    edge = np.ones(values.shape[:-1] + (1,), bool)
    first = np.maximum.accumulate(np.where(np.concatenate([edge, changes], axis=-1), index, 0), axis=-1)
    last = np.minimum.accumulate(np.where(np.concatenate([changes, edge], axis=-1), index, n)[..., ::-1],
                                 axis=-1)[..., ::-1]
    twice_rank = np.empty(values.shape, np.int64)  # 2r − 2: an index into a table of the n·2 − 1 possible ranks
    np.put_along_axis(twice_rank, order, first + last, axis=-1)
    return twice_rank, np.any(np.isnan(values), axis=-1, keepdims=True)


def _rank_normalize(draws: np.ndarray) -> np.ndarray:
    """Blom's z = Φ⁻¹((r − 3/8) / (n + 1/4)) of the average ranks r over each cell's pooled chains and draws."""
    cells, chains, num, k = draws.shape
    n = chains * num
    pooled = np.ascontiguousarray(np.moveaxis(draws.reshape(cells, n, k), 1, 2))  # (cells, K, n)
    twice_rank, has_nan = _average_ranks(pooled)
    table = ndtri((np.arange(1.0, n + 0.75, 0.5) - 3.0 / 8.0) / (n + 0.25))  # z of ranks 1, 1.5, ..., n
    z = np.where(has_nan, np.nan, table[twice_rank])  # a slice with a NaN is all NaN, as in rankdata
    return np.moveaxis(z, 2, 1).reshape(draws.shape)


def _potential_scale_reduction(draws: np.ndarray) -> np.ndarray:
    """Gelman–Rubin R̂ of (cells, M, N, K) → (cells, K)."""
    return _scale_reduction_from_moments(draws.mean(axis=2), draws.var(axis=2, ddof=1), draws.shape[2])


def _scale_reduction_from_moments(chain_mean: np.ndarray, chain_var: np.ndarray, num: int) -> np.ndarray:
    """Gelman–Rubin R̂ (cells, K) from each chain's mean and variance (cells, M, K) over ``num`` draws."""
    between = num * chain_mean.var(axis=1, ddof=1)
    within = chain_var.mean(axis=1)
    return np.sqrt((between / within + num - 1) / num)


def _effective_sample_size(draws: np.ndarray) -> np.ndarray:
    """Geyer's initial-monotone-sequence ESS of (cells, M, N, K) → (cells, K), as BlackJAX computes it."""
    _, chains, num, _ = draws.shape
    varies = np.any(draws != draws[:, :, :1], axis=(1, 2), keepdims=True)  # (cells, 1, 1, K)
    chain_mean = draws.mean(axis=2, keepdims=True)
    size = next_fast_len(2 * num)
    spectrum = np.fft.rfft(draws - chain_mean, n=size, axis=2)
    autocov = np.fft.irfft(spectrum * np.conjugate(spectrum), n=size, axis=2)[:, :, :num] / num
    mean_autocov = autocov.mean(axis=1, keepdims=True)  # (cells, 1, N, K)
    var0 = mean_autocov[:, :, :1] * num / (num - 1.0)
    degenerate = np.isfinite(var0) & (~varies | (var0 <= 0.0))
    weighted_var = var0 * (num - 1.0) / num
    if chains > 1:
        weighted_var = weighted_var + chain_mean.var(axis=1, ddof=1, keepdims=True)
    weighted_var = np.where(degenerate, 1.0, weighted_var)
    num_even = num - num % 2
    rho = np.concatenate([np.ones_like(var0), 1.0 - (var0 - mean_autocov[:, :, 1:num_even]) / weighted_var], axis=2)
    rho = np.moveaxis(rho[:, 0], 1, 0)  # (num_even, cells, K)
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
    cell_index, k_index = np.nonzero(inside)
    mask_even[after[inside], cell_index, k_index] = even_after[inside] > 0
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
    ess = np.where(degenerate[:, 0, 0], 0.0, total / tau)
    return np.where(np.any(np.isnan(draws), axis=(1, 2)), np.nan, ess)


def rhat_ess_bulk(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rank-normalized split R̂ (max of bulk and folded) and bulk ESS of each cell and coordinate.

    Parameters
    ----------
    draws
        ``(cells, chains, draws, K)``: K scalar quantities per draw (e.g. the
        coordinates and G(x)). At least 2 chains and 4 draws.

    Returns
    -------
    (rhat, ess_bulk)
        Each ``(cells, K)``, float64. A coordinate that never changes has NaN
        R̂ and ESS 0, as in BlackJAX.
    """
    draws = np.asarray(draws)
    if draws.ndim != 4 or draws.shape[2] < 4:
        raise ValueError(f"draws must have shape (cells, chains, draws >= 4, K), got {draws.shape}")
    with np.errstate(divide="ignore", invalid="ignore"):
        split = _split_chains(draws)  # ranks on the draws' own dtype (as BlackJAX does), statistics in float64
        normalized = _rank_normalize(split)
        bulk = _potential_scale_reduction(normalized)
        cells, chains, num, k = split.shape
        median = np.median(split.reshape(cells, chains * num, k), axis=1)
        folded = _potential_scale_reduction(_rank_normalize(np.abs(split - median[:, None, None, :])))
        rhat = np.maximum(bulk, folded)
        ess = _effective_sample_size(normalized)
    return rhat, ess


def split_gelman_rubin(draws: np.ndarray) -> np.ndarray:
    """Split R̂ of (chains, draws, K) → (K,) on the raw values, without rank normalization.

    The Gelman–Rubin statistic of :func:`rhat_ess_bulk` (Eqs. 4–5 of Vehtari et al.
    2021) without its rank normalization (Eq. 14): no sort and no copy of the draws
    (moments in the draws' own precision, float32 or float64), so it is a cheap
    screen for which of very many coordinates (images) deserve the full
    rank-normalized R̂. A constant coordinate gives NaN (or a value near 1 after
    rounding). At least 4 draws.
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
        return _scale_reduction_from_moments(chain_mean, chain_var, half)[0]
