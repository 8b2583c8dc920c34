"""What one run of a sampler on a target says, seed by seed: ESS, bias against the truth, poor runs.

All on the host in NumPy, from the kept draws of at most ``KEEP_CHAINS`` chains per seed (the compiled run stores
no more, so memory does not grow with the chain count):

- bulk and tail ESS (rank-normalized, :func:`jaxprobe.engine.diagnostics.rank_diagnostics`) of every coordinate
  of x and of x², minimum over them; with C > ``KEEP_CHAINS`` chains the kept chains' ESS times C / kept (the chains
  are independent and alike, so the ESS of all of them is that multiple).
- z of each coordinate's mean and variance against the target's truth: ``(estimate − truth) / √(mcse² + se²)``,
  the estimate's Monte-Carlo standard error from its own ESS (:func:`jaxprobe.engine.estimates.estimate`; for a
  variance scaled by truth / estimate, its error where the truth holds) and the truth's own standard error where it
  comes from a reference run. Calibrated on AR(1) chains of N(0, 1) (4 chains × 400–1,500 draws, 100 coordinates,
  ESS 100–650): 0–1% of runs flagged at ``ALPHA`` = 1% (3–5% with the unscaled variance error). A seed is
  ``biased`` when its largest |z| passes :func:`z_threshold` (Bonferroni over the seed's z's at a family-wise
  false-alarm rate ``ALPHA`` for a correct sampler); a row is ``biased`` when the z pooled over its seeds
  (Σ z / √S per coordinate over the seeds judged) passes it. A seed whose kept chains' min bulk ESS is below
  ``MIN_JUDGED_ESS`` is not judged (its MCSE is itself too uncertain: the flag would fire far more often than
  ``ALPHA``); it is poor by its ESS.
- a seed is ``poor`` when its minimum bulk ESS is below the verdict's threshold
  (:func:`jaxprobe.engine.verdict.default_thresholds`: 100 per chain for up to 4 chains, 400 from 4 on) or it is
  biased.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import ndtri

from jaxprobe.engine.diagnostics import rank_diagnostics
from jaxprobe.engine.estimates import estimate

__all__ = ["ALPHA", "KEEP_CHAINS", "MIN_JUDGED_ESS", "judge_seeds", "z_threshold", "seed_statistics", "pooled_z",
           "wilson_interval"]

#: Family-wise false-alarm rate of the ``biased`` flag for a correct sampler (over all z's of one seed or row).
ALPHA = 0.01
#: A seed's z's are judged only when the min bulk ESS of its kept chains reaches this: below it the MCSE is too
#: uncertain for the threshold to hold its false-alarm rate (such a seed is poor by its ESS anyway).
MIN_JUDGED_ESS = 100.0
#: Chains per seed whose draws are kept for the ESS and the moments.
KEEP_CHAINS = 64
#: Draws (as float64 bytes) handed to the rank diagnostics at once: they take about 33 times their input in
#: temporaries (ranks, splits, FFTs), so 600 seeds of eight schools at once (768 MB of x and x²) were killed for
#: memory on a 24 GB machine; blocks of 8 MB stay under 300 MB.
DIAGNOSTICS_BLOCK_BYTES = 8 * 2**20


def z_threshold(num_z: int, alpha: float = ALPHA) -> float:
    """|z| beyond which one of ``num_z`` two-sided z's is flagged: Φ⁻¹(1 − α / (2·num_z)) (Bonferroni).

    Examples
    --------
    >>> round(z_threshold(1), 3), round(z_threshold(100), 3)      # more z's checked: a higher bar for each
    (2.576, 3.891)
    """
    return float(ndtri(1.0 - alpha / (2.0 * max(int(num_z), 1))))


def _moments_z(draws: np.ndarray, target: Any) -> tuple[np.ndarray, np.ndarray]:
    """z of the means and variances ``(D,)`` each (NaN where the target has no truth) of ``draws`` ``(K, N, D)``."""
    dim = draws.shape[-1]
    z_mean = np.full(dim, np.nan)
    z_var = np.full(dim, np.nan)
    if target.mean is None and target.var is None:
        return z_mean, z_var
    mean = estimate(draws)
    if target.mean is not None:
        se = np.zeros(dim) if target.mean_se is None else np.asarray(target.mean_se, np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            z_mean = (mean.mean - np.asarray(target.mean)) / np.sqrt(mean.mcse ** 2 + se ** 2)
    if target.var is not None:
        variance = estimate((draws - mean.mean) ** 2)
        se = np.zeros(dim) if target.var_se is None else np.asarray(target.var_se, np.float64)
        n = draws.shape[0] * draws.shape[1]
        estimated, truth = variance.mean * n / (n - 1), np.asarray(target.var)
        with np.errstate(divide="ignore", invalid="ignore"):
            # The MCSE of a variance grows with the variance: scaled to the truth's (the error under the null),
            # else a low estimate brings a low error and the z's lean negative (3x the false alarms at |z| > 3).
            mcse = variance.mcse * truth / estimated
            z_var = (estimated - truth) / np.sqrt(mcse ** 2 + se ** 2)
    return z_mean, z_var


def _ess_of_x_and_x2(by_chain: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bulk and tail ESS ``(S, 2D)`` of x and x² of ``by_chain`` ``(S, K, N, D)``, a block of seeds at a time
    (:data:`DIAGNOSTICS_BLOCK_BYTES`): the memory is bounded whatever the number of seeds."""
    seeds = by_chain.shape[0]
    block = max(1, DIAGNOSTICS_BLOCK_BYTES // (2 * by_chain[0].size * 8))
    bulk, tail = [], []
    for start in range(0, seeds, block):
        part = by_chain[start:start + block]
        diagnostics = rank_diagnostics(np.concatenate([part, part ** 2], axis=-1))
        bulk.append(np.asarray(diagnostics.ess_bulk))
        tail.append(np.asarray(diagnostics.ess_tail))
    return np.concatenate(bulk), np.concatenate(tail)


def seed_statistics(draws: np.ndarray, target: Any, num_chains: int, min_ess: float) -> dict[str, np.ndarray]:
    """Per-seed statistics of ``draws`` ``(S, N, K, D)`` (kept draws of K of the ``num_chains`` chains).

    Returns ``{min_ess_bulk, min_ess_tail, max_abs_z, biased, judged, poor}`` each ``(S,)`` and ``z_mean``, ``z_var``
    ``(S, D)``. ESS are of all ``num_chains`` chains (see the module docs).

    Examples
    --------
    >>> from jaxprobe.benchmark import Target
    >>> target = Target("normal", lambda x: -0.5 * jnp.sum(x ** 2), 2, mean=np.zeros(2), var=np.ones(2))
    >>> draws = np.random.default_rng(0).normal(size=(3, 500, 4, 2))   # 3 seeds x 500 exact draws of 4 chains
    >>> stats = seed_statistics(draws, target, num_chains=4, min_ess=400)
    >>> stats["min_ess_bulk"].shape, bool(np.all(stats["min_ess_bulk"] > 1000)), stats["poor"].tolist()
    ((3,), True, [False, False, False])
    """
    draws = np.asarray(draws, np.float64)
    seeds, _, kept, dim = draws.shape
    by_chain = np.swapaxes(draws, 1, 2)  # (S, K, N, D)
    ess_bulk, ess_tail = _ess_of_x_and_x2(by_chain)
    scale = num_chains / kept
    min_bulk = np.nanmin(np.where(np.isnan(ess_bulk), 0.0, ess_bulk), axis=1) * scale
    min_tail = np.nanmin(np.where(np.isnan(ess_tail), 0.0, ess_tail), axis=1) * scale
    z = [_moments_z(by_chain[s], target) for s in range(seeds)]
    z_mean = np.stack([pair[0] for pair in z])
    z_var = np.stack([pair[1] for pair in z])
    judgement = judge_seeds(min_bulk, min_bulk / scale, z_mean, z_var, min_ess)
    return {"min_ess_bulk": min_bulk, "min_ess_tail": min_tail, "z_mean": z_mean, "z_var": z_var, **judgement}


def judge_seeds(min_ess_bulk: np.ndarray, kept_ess_bulk: np.ndarray, z_mean: np.ndarray, z_var: np.ndarray,
                min_ess: float) -> dict[str, np.ndarray]:
    """Each seed's verdict from its numbers: ``{max_abs_z, judged, biased, poor}`` each ``(S,)``.

    ``min_ess_bulk`` ``(S,)`` of all chains (against ``min_ess``), ``kept_ess_bulk`` of the kept chains (against
    ``MIN_JUDGED_ESS``), ``z_mean``, ``z_var`` ``(S, D)`` (NaN where the target has no truth).

    Examples
    --------
    >>> ess = np.array([900.0, 50.0])        # seed 0 mixed well; seed 1 too few effective draws to be judged
    >>> out = judge_seeds(ess, ess, np.array([[0.3, 5.0], [0.1, 0.2]]), np.zeros((2, 2)), min_ess=400)
    >>> out["judged"].tolist(), out["biased"].tolist(), out["poor"].tolist()   # |z| = 5 > 3.02: biased
    ([True, False], [True, False], [True, True])
    """
    both = np.concatenate([z_mean, z_var], axis=1)
    seeds = both.shape[0]
    checked = int(np.sum(~np.isnan(both[0]))) if seeds else 0
    max_abs_z = np.array([np.nanmax(np.abs(row)) if np.any(~np.isnan(row)) else np.nan for row in both])
    judged = (np.asarray(kept_ess_bulk) >= MIN_JUDGED_ESS) & bool(checked)  # what the MCSE is estimated from
    biased = judged & (np.nan_to_num(max_abs_z, nan=0.0) > z_threshold(checked))
    poor = (np.asarray(min_ess_bulk) < min_ess) | biased
    return {"max_abs_z": max_abs_z, "judged": judged, "biased": biased, "poor": poor}


def pooled_z(z: np.ndarray) -> np.ndarray:
    """Σ z / √S over the seeds ``(S, K)`` → ``(K,)``: the z of the seeds' average error (independent seeds).

    Examples
    --------
    >>> np.round(pooled_z(np.array([[1.0, -2.0], [1.0, 0.0]])), 3)      # 2 seeds, 2 z's each
    array([ 1.414, -1.414])
    """
    return np.sum(z, axis=0) / math.sqrt(max(z.shape[0], 1))


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial rate (``(0, 1)`` with no trials).

    Examples
    --------
    >>> low, high = wilson_interval(2, 20)                  # 2 poor runs in 20 seeds: 95% interval of the rate
    >>> round(low, 3), round(high, 3), wilson_interval(0, 0)
    (0.028, 0.301, (0.0, 1.0))
    """
    if trials == 0:
        return 0.0, 1.0
    z = float(ndtri(0.5 + confidence / 2.0))
    rate = successes / trials
    denominator = 1.0 + z * z / trials
    centre = (rate + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)
