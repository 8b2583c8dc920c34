"""Estimates of expectations from draws: a value and its Monte-Carlo standard error (MCSE).

:func:`estimate` turns the values of a function at every kept draw, ``(chain, draw, *shape)``, into an
:class:`Estimate` (the same type as a run's observables, :class:`jaxprobe.engine.streaming.Observed`);
:func:`evaluate` computes those values with ``jax.vmap`` over the draws in chunks, after checking the function
on one position (:func:`check_function`). ``Samples.expectation`` and ``Samples.summary`` use both.

How the error is estimated
--------------------------
``"ess"`` (MCMC, the default): ``mcse = sd / √ESS`` with ``sd`` the standard deviation of all values and ESS
the effective sample size of the values themselves: Geyer's initial monotone sequence on the split chains,
without rank normalization (the estimator behind the verdict's bulk ESS, :mod:`jaxprobe.engine.diagnostics`;
ArviZ's ``ess(method="mean")`` and ``mcse(method="mean")``). Chosen over batch means because it needs no
batch length: batch means are only right once every batch is longer than the autocorrelation time, which a
run of few long chains and one of many short chains break in opposite ways, while the ESS reads the
autocorrelation of these very values. Its variance counts the spread between the chains' means, so chains
that disagree (stuck in different modes) give a larger error, never a smaller one.

``"batch_means"`` (MCMC): :data:`~jaxprobe.engine.streaming.NUM_BATCHES` batches over all chains (a whole
chain each from 32 chains on), the standard deviation of their means over √B: what the run's streamed
observables use (they see the draws once, as they are made, and cannot compute an ESS).

``"smc_groups"`` (chains started by sequential Monte Carlo, ``sampler="smc"``): the SMC run's particles are
``G`` independent groups of ``N/G`` consecutive particles (:func:`jaxprobe.engine.smc.tempered_smc`), and chain
``i`` starts at particle ``i`` (:func:`jaxprobe.engine.api.sample` places the particles as chains in order),
so the chains of one group form one independent system: particles that share ancestors after resampling, and
chains that keep the modes they started in. The means of the G groups (over their chains and draws) are
independent; the estimate weights each by its group's evidence estimate ``Ẑ_g`` (:func:`group_weights`: the
equally weighted groups are biased by order 1/(N/G), measured at −0.038 on a 0.6 mode share with 32 particles per
group, 6 standard errors over 100 runs, and +0.0003 weighted), and ``mcse`` is the weighted mean's group-based
standard error (with equal weights their standard deviation over √G, a t statistic with G − 1 degrees of
freedom). :func:`group_standard_error` is the one group-based error: :func:`particle_observed` for the particles
and the streamed observables (:func:`streamed`), and :func:`log_mean_and_se` for ``log_evidence_se`` (the delta
method on the same G groups' evidence estimates, inside the compiled SMC run). Per-chain ESS would count the
chains of one group as independent and report too small an error.

When the error cannot be trusted (fewer than :data:`~jaxprobe.engine.streaming.MIN_BATCHES` batches or groups,
an ESS below :data:`~jaxprobe.engine.streaming.MIN_ESS`, values that never changed) the estimate carries a
``note`` saying so, and ``Samples.expectation`` warns with an :class:`MCSEWarning`; a run whose SMC groups are
too few for any of its errors says so in its verdict (``Verdict.mcse_warning``, warned as an
:class:`MCSEWarning` by :func:`jaxprobe.engine.verdict.report`).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.engine import diagnostics
from jaxprobe.engine.streaming import (MIN_BATCHES, MIN_ESS, NUM_BATCHES, Observed, ObservableSums, combine_notes,
                                       few_batches_note, observed, zero_error_note)

__all__ = ["Estimate", "MCSEWarning", "METHODS", "estimate", "evaluate", "check_function", "group_standard_error",
           "group_weights", "log_mean_and_se", "MIN_EFFECTIVE_GROUPS", "particle_observed", "streamed", "SMC_GROUPS"]

#: An estimate: ``.mean`` and ``.mcse`` (and how it was made); the type of a run's observables.
Estimate = Observed
#: The ``method`` values of :func:`estimate`.
METHODS = ("auto", "ess", "batch_means", "smc_groups")
#: Draws per ``jax.vmap`` call of :func:`evaluate` (bounded memory: one chunk of ``fn``'s values at a time).
CHUNK_DRAWS = 4096


class MCSEWarning(UserWarning):
    """An estimate's Monte-Carlo standard error cannot be trusted (its ``note`` says why).

    Examples
    --------
    >>> import warnings
    >>> prior = jaxprobe.priors.StandardNormal()
    >>> samples = jaxprobe.sample(jax.random.key(1), prior, prior.sample(jax.random.key(0), 4, (2,)),
    ...                           num_samples=500, num_warmup=200, progress=False)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     rare = samples.expectation(lambda x: x[0] > 10.0)   # an event no draw showed: error 0 is no error bar
    >>> caught[0].category.__name__, float(rare.mean), rare.note is not None
    ('MCSEWarning', 0.0, True)
    """


#: What the groups behind an ``"smc_groups"`` error are called in its notes.
SMC_GROUPS = "independent SMC particle groups"
#: Fewest effective groups ``1/Σ w_g²`` of evidence-weighted SMC groups behind a trusted error. The count rule
#: (:data:`~jaxprobe.engine.streaming.MIN_BATCHES` groups) bounds the degrees of freedom of the spread; this one
#: flags weights so uneven that a few groups carry the estimate. Typical runs sit far above it (8 groups of 128
#: particles: about 7 effective groups; 16 groups: 14-15 on the d = 4 three-mode question).
MIN_EFFECTIVE_GROUPS = MIN_BATCHES // 2


def group_weights(group_log_evidence: Any) -> np.ndarray:
    """The weights ``w_g = Ẑ_g / Σ_h Ẑ_h`` ``(G,)`` of G independent SMC groups from their ``log Ẑ_g`` ``(G,)``.

    Why: each group is its own SMC sampler, and its particles' average is unbiased only *after* multiplying
    by its evidence estimate (``E[Ẑ_g · mean_g f] = Z · E_π[f]``); the equally weighted average of the groups'
    means carries a bias of order ``1/(N/G)`` (particles per group) that adding groups does not remove. The
    ratio ``Σ Ẑ_g mean_g f / Σ Ẑ_g`` is consistent as groups are added. A group whose particles all had
    zero weight (``log Ẑ_g = −inf``) gets weight 0; when no group has a finite evidence (the run failed, and
    its verdict says so) the groups are weighted equally.

    Examples
    --------
    >>> group_weights(np.log([1.0, 1.0, 2.0]))      # the third group's evidence estimate is twice as large
    array([0.25, 0.25, 0.5 ])
    """
    log_evidence = np.asarray(group_log_evidence, np.float64)
    top = np.max(log_evidence) if log_evidence.size else -np.inf
    if not np.isfinite(top):
        return np.full(log_evidence.shape, 1.0 / max(log_evidence.size, 1))
    weights = np.exp(log_evidence - top)
    return weights / weights.sum()


def group_standard_error(group_means: Any, xp: Any = np, weights: Any = None) -> Any:
    """The standard error of the mean of G independent, equally sized groups' means ``(G, *shape)``: their
    standard deviation (ddof 1) over √G, ``(*shape)``, a t statistic with G − 1 degrees of freedom; NaN for
    G = 1 (no spread to measure). The one group-based error of jaxprobe (module docstring): SMC observables
    and expectations (:func:`particle_observed`) and log Z (:func:`log_mean_and_se`). ``xp``: ``numpy`` on
    the host or ``jax.numpy`` inside a compiled program (SMC's stages).

    ``weights`` ``(G,)`` (summing to 1; NumPy only): the error of the weighted mean ``Σ w_g m_g`` of a ratio
    estimator (:func:`group_weights`), by the delta method, ``√(G/(G−1) · Σ_g w_g² (m_g − Σ_h w_h m_h)²)``,
    which is the unweighted formula when every ``w_g = 1/G``.

    Examples
    --------
    >>> round(float(group_standard_error(np.array([1.0, 2.0, 3.0, 4.0]))), 4)   # sd (ddof 1) / √4
    0.6455
    >>> round(float(group_standard_error(np.array([1.0, 2.0, 3.0, 4.0]), weights=np.full(4, 0.25))), 4)
    0.6455
    """
    num_groups = group_means.shape[0]
    if num_groups < 2:
        return xp.full(group_means.shape[1:], xp.nan, group_means.dtype)
    if weights is None:
        return xp.std(group_means, axis=0, ddof=1) / math.sqrt(num_groups)
    weights = np.asarray(weights, np.float64).reshape((num_groups,) + (1,) * (group_means.ndim - 1))
    mean = np.sum(weights * group_means, axis=0)
    return np.sqrt(num_groups / (num_groups - 1) * np.sum(weights**2 * (group_means - mean) ** 2, axis=0))


def log_mean_and_se(log_estimates: Any) -> tuple[Any, Any]:
    """``log mean_g Ẑ_g`` and its delta-method standard error ``sd_g(Ẑ_g) / (√G mean_g Ẑ_g)`` from G independent
    groups' ``log Ẑ_g`` ``(G,)`` (jax.numpy, jit-able; SMC's ``log_evidence`` and ``log_evidence_se`` at every
    stage): :func:`group_standard_error` of the ratios ``Ẑ_g / mean Ẑ_g = exp(log Ẑ_g − log mean Ẑ)``,
    formed in log space so that no ``Ẑ_g`` is exponentiated on its own. NaN for G = 1.

    Examples
    --------
    >>> log_z, se = log_mean_and_se(jnp.log(jnp.array([1.0, 2.0, 3.0, 2.0])))   # 4 groups' log Ẑ
    >>> round(float(log_z), 4), round(float(se), 4)                              # log 2; sd/(√4 · 2)
    (0.6931, 0.2041)
    """
    num_groups = log_estimates.shape[0]
    log_mean = jax.scipy.special.logsumexp(log_estimates) - math.log(num_groups)
    ratios = jnp.exp(log_estimates - log_mean)
    return log_mean, group_standard_error(ratios, jnp)


def particle_observed(values: Any, num_groups: int, group_log_evidence: Any = None) -> Observed:
    """An estimate over the N equally weighted particles of a tempered SMC run, ``values`` ``(N, *shape)``,
    whose ``num_groups`` = G groups of N/G consecutive particles are independent SMC systems
    (:func:`jaxprobe.engine.smc.tempered_smc`): ``mean`` the groups' means weighted by their evidence
    estimates (:func:`group_weights` of ``group_log_evidence`` ``(G,)``, the run's
    ``SMCResult.group_log_evidence``; equal weights when it is None), ``mcse`` the
    :func:`group_standard_error` of that weighted mean (NaN for G = 1; a ``note`` when fewer than
    :data:`~jaxprobe.engine.streaming.MIN_BATCHES` groups, or fewer than :data:`MIN_EFFECTIVE_GROUPS` effective
    groups ``1/Σ w_g²``, carry it),
    ``per_chain_mean`` the particles' own values and ``num_batches`` G.

    Examples
    --------
    >>> result = particle_observed(np.arange(8.0), num_groups=4)   # 8 particles, 4 independent groups
    >>> float(result.mean), result.method, result.note is not None    # too few groups for a trusted error
    (3.5, 'smc_groups', True)
    >>> values = np.repeat([0.0, 1.0], 16)                           # group 1 all 0, group 2 all 1 ...
    >>> float(particle_observed(values, 2, np.log([1.0, 3.0])).mean)  # ... its evidence estimate 3× as large
    0.75
    """
    values = np.asarray(values, np.float64)
    groups = values.reshape((num_groups, -1) + values.shape[1:]).mean(axis=1)
    weights = np.full(num_groups, 1.0 / num_groups) if group_log_evidence is None else \
        group_weights(group_log_evidence)
    if weights.shape != (num_groups,):
        raise ValueError(f"group_log_evidence must have shape ({num_groups},) (one log Ẑ per group), "
                         f"got {weights.shape}")
    mean = np.tensordot(weights, groups, axes=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mcse = group_standard_error(groups, weights=None if group_log_evidence is None else weights)
    effective = 1.0 / float(np.sum(weights**2))
    few = few_batches_note(int(num_groups), SMC_GROUPS) or (
        None if effective >= MIN_EFFECTIVE_GROUPS else
        f"the error comes from {num_groups} {SMC_GROUPS} whose evidence weights leave {effective:.1f} effective "
        f"groups, fewer than {MIN_EFFECTIVE_GROUPS}: it is itself too uncertain (more particles per group even out "
        f"the groups' evidence estimates)")
    return Observed(mean, mcse, values, int(num_groups), "smc_groups", None,
                    combine_notes(few, zero_error_note(mcse)))


def streamed(sums: ObservableSums, num_groups: int | None = None, group_log_evidence: Any = None) -> Observed:
    """An observable's estimate from the per-chain batch sums a run folded in
    (:class:`~jaxprobe.engine.streaming.ObservableSums`: host arrays, or for independent chains an
    accelerator's, reduced there).

    ``num_groups`` None: independent chains, the error by batch means over chains and batches
    (:func:`jaxprobe.engine.streaming.observed`). ``num_groups`` G: chains that continue the particles of an SMC
    run with G independent groups (chain i started at particle i, so the chains of one group are one independent
    system, not independent of each other): :func:`particle_observed` of the chains' means, the groups weighted
    by ``group_log_evidence`` ``(G,)`` (the MCMC moves after SMC leave each group's target unchanged, so the
    groups keep their evidence weights).

    Examples
    --------
    >>> from jaxprobe.engine.streaming import ObservableSums
    >>> sums = ObservableSums(sums=np.repeat([[0.0], [10.0]], 8, axis=0).T, counts=np.array([10]))  # 16 chains
    >>> streamed(sums).method, float(streamed(sums).mean)                # independent chains: batch means
    ('batch_means', 0.5)
    >>> after_smc = streamed(sums, num_groups=2, group_log_evidence=np.log([1.0, 3.0]))   # 2 groups of 8 chains
    >>> after_smc.method, float(after_smc.mean)                         # group 2's evidence is 3× as large
    ('smc_groups', 0.75)
    """
    if num_groups is None:
        return observed(sums)
    batch_sums = np.asarray(sums.sums, np.float64)  # (B, C, *shape)
    per_chain_mean = batch_sums.sum(axis=0) / np.asarray(sums.counts, np.float64).sum()
    return particle_observed(per_chain_mean, num_groups, group_log_evidence)


def _ess_estimate(values: np.ndarray) -> Observed:
    """``"ess"`` of ``values`` ``(C, N, K)`` with N >= 4: ``sd/√ESS`` per column."""
    num_chains, num_draws, _ = values.shape
    pooled = values.reshape(num_chains * num_draws, -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ess = diagnostics._effective_sample_size(diagnostics._split_chains(values[None]))[0]
        sd = pooled.std(axis=0, ddof=1)
        constant = np.all(pooled == pooled[:1], axis=0)
        mcse = np.where(constant, 0.0, sd / np.sqrt(ess))
    low = ess[~constant]
    note = None
    if low.size and low.min() < MIN_ESS:
        note = (f"effective sample size {low.min():.0f} < {MIN_ESS} (of {pooled.shape[0]} draws): the error "
                "is itself too uncertain; run longer or more chains")
    return Observed(pooled.mean(axis=0), mcse, values.mean(axis=1), num_chains, "ess", ess,
                    combine_notes(note, zero_error_note(mcse)))


def _batch_means_estimate(values: np.ndarray) -> Observed:
    """``"batch_means"`` of ``values`` ``(C, N, K)``: batches of consecutive draws of each chain, NUM_BATCHES
    over all chains (a chain's draw i is in batch ``i·b // N``, as the streamed observables batch them)."""
    num_chains, num_draws, _ = values.shape
    per_chain = max(1, min(num_draws, math.ceil(NUM_BATCHES / num_chains)))
    batch = (np.arange(num_draws) * per_chain) // num_draws
    means = np.stack([values[:, batch == b].mean(axis=1) for b in range(per_chain)], axis=1)
    flat = means.reshape(num_chains * per_chain, -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mcse = flat.std(axis=0, ddof=1) / np.sqrt(flat.shape[0]) if flat.shape[0] > 1 else \
            np.full(flat.shape[1], np.nan)
    return Observed(values.mean(axis=(0, 1)), mcse, values.mean(axis=1), flat.shape[0], "batch_means", None,
                    combine_notes(few_batches_note(flat.shape[0], "batch means"), zero_error_note(mcse)))


def estimate(values: Any, *, num_groups: int | None = None, method: str = "auto",
             group_log_evidence: Any = None) -> Estimate:
    """The mean of ``values`` and its Monte-Carlo standard error (module docstring).

    Parameters
    ----------
    values
        ``(C, N, *shape)``: a function's value at each of N kept draws of C chains; finite.
    num_groups
        G when the chains continue the particles of an SMC run with G independent groups of consecutive
        particles (``Samples.num_groups``), else None.
    method
        ``"auto"`` (``"smc_groups"`` when ``num_groups`` is given, else ``"ess"``), ``"ess"``,
        ``"batch_means"`` or ``"smc_groups"`` (needs ``num_groups``). With fewer than 4 draws per chain
        ``"ess"`` cannot be computed and the chains' means are the batches.
    group_log_evidence
        ``(G,)`` the SMC groups' ``log Ẑ_g`` (``Samples.group_log_evidence``): with ``"smc_groups"`` the groups'
        means are weighted by their evidence estimates (:func:`group_weights`); None: equally.

    Returns
    -------
    Estimate
        ``mean`` and ``mcse`` of ``shape``, ``per_chain_mean`` ``(C, *shape)``, ``num_batches``, ``method``,
        ``ess`` (``"ess"``), ``note`` (None when the error can be trusted).

    Examples
    --------
    >>> values = np.random.default_rng(0).normal(size=(4, 1000))   # (chains, draws)
    >>> result = estimate(values)
    >>> bool(abs(result.mean) < 5 * result.mcse), result.method, result.note
    (True, 'ess', None)
    >>> estimate(np.ones((4, 100))).note is not None               # a value that never changed: no error bar
    True
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    values = np.asarray(values, np.float64)
    if values.ndim < 2 or values.shape[0] < 1 or values.shape[1] < 1:
        raise ValueError(f"values must have shape (chains, draws, ...) with at least one draw, got {values.shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"values must be finite: {int(np.sum(~np.isfinite(values)))} are NaN or inf")
    shape = values.shape[2:]
    if method == "auto":
        method = "ess" if num_groups is None else "smc_groups"
    if method == "smc_groups":
        if num_groups is None or values.shape[0] % num_groups:
            raise ValueError(f"method='smc_groups' needs the chains to form num_groups equal groups of SMC "
                             f"particles, got {values.shape[0]} chains and num_groups={num_groups}")
        return particle_observed(values.mean(axis=1), num_groups, group_log_evidence)
    flat = values.reshape(values.shape[:2] + (-1,))
    if method == "batch_means" or values.shape[1] < 4:
        result = _batch_means_estimate(flat)
    else:
        result = _ess_estimate(flat)
    return result._replace(mean=result.mean.reshape(shape), mcse=result.mcse.reshape(shape),
                           per_chain_mean=result.per_chain_mean.reshape(values.shape[:1] + shape),
                           ess=None if result.ess is None else result.ess.reshape(shape))


def check_function(fn: Any, one: Any, two: Any, name: str = "fn") -> tuple[int, ...]:
    """Check ``fn`` (a function of one position) before it is mapped over every draw, with a clear error naming
    ``name``: it must be callable, run on one position ``one`` (a pytree without chain or draw axes), return a
    numeric array of finite values, and give the same value for that position inside ``jax.vmap`` over two
    positions ``two`` (leading axis 2) as alone (a function that reads a chain or batch axis does not).
    Returns the output shape.

    Examples
    --------
    >>> check_function(lambda x: x[0], jnp.ones(2), jnp.ones((2, 2)))    # one position, two positions -> shape
    ()
    >>> check_function(lambda x: "a", jnp.ones(2), jnp.ones((2, 2)), name="target")
    Traceback (most recent call last):
        ...
    TypeError: target must return a real numeric array (or a number), got str
    """
    if not callable(fn):
        raise TypeError(f"{name} must be a function of one position, got {type(fn).__name__}")
    try:
        value = fn(one)
    except Exception as error:  # noqa: BLE001 - re-raised naming fn
        raise ValueError(f"{name} failed on one position (chain 0, draw 0; no chain or draw axis): "
                         f"{type(error).__name__}: {error}") from error
    dtype = np.asarray(value).dtype if isinstance(value, (bool, int, float, np.ndarray, np.generic, jax.Array)) else None
    if dtype is None or not (np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.bool_)) \
            or np.issubdtype(dtype, np.complexfloating):
        raise TypeError(f"{name} must return a real numeric array (or a number), got {type(value).__name__}"
                        + ("" if dtype is None else f" of dtype {dtype}"))
    value = np.asarray(value, np.float64)
    if not np.all(np.isfinite(value)):
        raise ValueError(f"{name} returned a non-finite value (NaN or inf) at chain 0, draw 0: {value}")
    try:
        batched = np.asarray(jax.vmap(fn)(two), np.float64)
    except Exception as error:  # noqa: BLE001 - re-raised naming fn
        raise ValueError(f"{name} works on one position but fails under jax.vmap over positions (it must be a "
                         f"JAX function of ONE position): {type(error).__name__}: {error}") from error
    if batched.shape[1:] != value.shape or not np.allclose(batched[0], value, rtol=1e-4, atol=1e-6):
        raise ValueError(f"{name} depends on how many positions it is given (output shape {value.shape} for one "
                         f"position, {batched.shape[1:]} per position of a batch, or other values): it must be a "
                         "function of ONE position, without a chain or draw axis")
    return value.shape


def evaluate(fn: Callable[[Any], Any], positions: Any, name: str = "fn", chunk: int = CHUNK_DRAWS) -> np.ndarray:
    """``fn`` at every draw of ``positions`` (a pytree of leaves ``(C, N, *event)``) → ``(C, N, *shape)``
    float64, after :func:`check_function`; ``jax.vmap`` over chunks of ``chunk`` draws (the last one padded, so
    one program serves them all). Raises naming ``name`` when ``fn`` gives a non-finite value.

    Examples
    --------
    >>> positions = jnp.ones((4, 10, 2))                        # (chains, draws, D)
    >>> values = evaluate(lambda x: x @ x, positions)           # fn of ONE position, at every draw
    >>> values.shape, float(values[0, 0])
    ((4, 10), 2.0)
    """
    leaves, treedef = jax.tree_util.tree_flatten(positions)
    num_chains, num_draws = np.shape(leaves[0])[:2]
    flat = [np.asarray(leaf).reshape((num_chains * num_draws,) + np.shape(leaf)[2:]) for leaf in leaves]
    total = flat[0].shape[0]
    one = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(leaf[0]) for leaf in flat])
    two = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(leaf[np.minimum([0, 1], total - 1)]) for leaf in flat])
    shape = check_function(fn, one, two, name)
    size = min(chunk, total)
    mapped = jax.jit(jax.vmap(lambda *parts: jnp.asarray(fn(jax.tree_util.tree_unflatten(treedef, parts)))))
    out = np.empty((total,) + shape, np.float64)
    for start in range(0, total, size):
        stop = min(start + size, total)
        parts = [leaf[start:stop] for leaf in flat]
        if stop - start < size:  # pad with the chunk's first row: same shapes, no second compile
            parts = [np.concatenate([part, np.repeat(part[:1], size - (stop - start), axis=0)]) for part in parts]
        out[start:stop] = np.asarray(mapped(*parts), np.float64)[:stop - start]
    bad = ~np.isfinite(out.reshape(total, -1)).all(axis=1)
    if bad.any():
        first = int(np.argmax(bad))
        raise ValueError(f"{name} returned NaN or inf at {int(bad.sum())} of {total} draws (first: chain "
                         f"{first // num_draws}, draw {first % num_draws})")
    return out.reshape((num_chains, num_draws) + shape)
