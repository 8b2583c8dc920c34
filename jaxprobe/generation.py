"""The module behind :func:`jaxprobe.generate`: answer a probe with samples in data space, constraints exact.

Named apart from the function it exports, so that ``import jaxprobe.generation`` is this module (a module
``jaxprobe.generate`` was shadowed by the function ``jaxprobe.generate``).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import warnings
from typing import Any, Callable

import jax
import numpy as np

from jaxprobe.engine import Samples, sample
from jaxprobe._inputs import as_float_array, check_int, check_number
from jaxprobe.engine.api import (canonicalize_key, check_settings, known_sampler_starts_at_target, make_kernel,
                                 refuse_traced)
from jaxprobe.engine.compiled import jit_bounded
from jaxprobe.engine import estimates
from jaxprobe.engine.estimates import MCSEWarning
from jaxprobe.engine.numerics import check_numerics
from jaxprobe.engine.registry import whole_run_sampler
from jaxprobe.engine.verdict import check_policy, groups_warning
from jaxprobe.engine.verdict import report as verdict_report
from jaxprobe.question import Question
from jaxprobe import samplers as _whole_run_samplers  # noqa: F401  registers the whole-run samplers for generate

__all__ = ["generate", "answer", "PrecisionWarning", "pool_runs"]


@jit_bounded(static_argnames=("question", "num_chains", "dtype"))
def _initial_positions(rng_key: Any, question: Question, num_chains: int, dtype: Any) -> jax.Array:
    return question.initial_positions(rng_key, num_chains, dtype)


class _DataSpace:
    """z ↦ x = T(z) of one position (``Question.to_data``), equal for equal questions: what ``sample`` stores
    of each kept draw (its ``record``), so an equal question asked again reuses the compiled run."""

    def __init__(self, question: Question):
        self.question = question

    def __call__(self, z: Any) -> Any:
        return self.question.to_data(z)

    def __hash__(self) -> int:
        return hash(("data space", self.question))

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _DataSpace) and self.question == other.question


def generate(
    rng_key: Any,
    probe: Callable,
    *,
    temperature: float,
    num_chains: int,
    num_samples: int,
    init: Any = None,
    prior: Callable | None = None,
    constraints: Any = None,
    sampler: str = "mala",
    dim: int | None = None,
    num_warmup: int = 500,
    report: str = "valid",
    convergence: str = "warn",
    numerics: str | None = None,
    precision: dict[str, Any] | None = None,
    **sample_options: Any,
) -> Samples:
    """Sample x ~ exp(−G(x)/τ)·prior(x) restricted by ``constraints`` (probing paper, Eq. 3).

    The engine samples an unconstrained z; x = T(z) maps it onto the restricted
    space (fixed features set, bounds by bijection) and the target includes
    log|det J_T|, so the samples are exact, not clipped.

    Parameters
    ----------
    probe
        G: a :class:`jaxprobe.probes.Probe` or any callable of one x ``(d,)`` → scalar.
    temperature
        τ > 0.
    num_chains, num_samples, num_warmup, sampler
        As in :func:`jaxprobe.sample`; other keywords go to it too (``thin``,
        ``step_size``, ``progress``, ``checkpoint``, ...). A whole-run sampler
        (:mod:`jaxprobe.samplers`, e.g. the tree-ensemble Gibbs sampler: exact
        coordinate-wise Gibbs sweeps for a probe built only from imported tree
        ensembles with a Gaussian, diagonal, mixture or box prior, or none within
        Box bounds) samples the question itself: ``num_warmup`` and ``thin`` then
        count its sweeps, the log density is that of x, and options it has no use
        for are refused by name.
    init
        Initial points ``(num_chains, d)`` in data space, satisfying the constraints
        (points ON a ``Box`` bound, such as real data rows at a feature's minimum or
        maximum, are accepted: see :data:`jaxprobe.constraints.BOUND_INIT_OFFSET`): a NumPy
        or JAX array, a pandas DataFrame or a nested list, cast to the working dtype
        (float32 unless ``jax_enable_x64`` is on; float16/bfloat16 run in float32).
        Default: draws from ``prior`` (if it has ``.sample`` and they satisfy the
        constraints), else z ~ N(0, I) mapped through T.
    prior
        Log density on data space (``jaxprobe.priors``), or None for flat.
    constraints
        A ``Box``, a ``Fixed`` or a list of them (:mod:`jaxprobe.constraints`). The categorical
        inputs of Pipelines imported with :func:`jaxprobe.models.from_sklearn` (``OneHotEncoder`` /
        ``OrdinalEncoder`` columns) that the probe reads get their exact constraint by default
        (``Integer`` + ``Box`` on the codes: every draw is a category), or a ValueError naming the
        column and the constraint to pass (:func:`jaxprobe.question.categorical_constraints`).
    dim
        Number of features d when nothing else states it: ``init``, a prior's mean,
        ``Box`` bounds of shape ``(d,)``, ``constraints.from_dataset(...)``, or the probe's
        model (``n_features_in_``, as ``from_sklearn`` models have) or anchor
        (:func:`jaxprobe.question.infer_dim`); they must agree.
    report
        ``"valid"`` (default): one-hot groups reported as the one-hot vector of
        their largest entry and Integer features rounded
        (:meth:`jaxprobe.constraints.Restriction.report`); ``"relaxed"``: the
        points the sampler actually visited (simplex points, non-integers).
    numerics
        ``"reproducible"``, ``"fast"`` or ``None`` (per platform: reproducible on
        CPU, fast on GPU/TPU), as in :func:`jaxprobe.sample`; checked before
        anything compiles. Unused by whole-run samplers (:mod:`jaxprobe.samplers`).
    observables, keep_draws
        As in :func:`jaxprobe.sample`, with each observable a function of ONE x ``(d,)``
        in data space (as the sampler visits it: one-hot groups relaxed, integers not
        rounded), e.g. ``{"disagree": lambda x: model_a(x) != model_b(x)}``:
        ``samples.observables["disagree"].mean`` and ``.mcse``.
    record
        What each kept draw stores instead of x: a function of ONE x ``(d,)`` in data space (seen as the
        observables see it) → a 1-D array ``(d',)``, applied on the device as each draw is written, e.g.
        ``lambda x: jnp.append(x, G(x))`` keeps G's value beside every draw without evaluating it again
        after the run. ``positions`` are then its values ``(chain, draw, d')`` (``report`` does not apply to
        them); the verdict and the observables are the same with or without it. Not with a whole-run
        sampler.

    precision
        Ask for a Monte-Carlo standard error instead of a run size: ``{"target": t, "mcse": ε}`` with
        ``t`` a function of one x (its :meth:`Samples.expectation`), the name of one of ``observables``, or
        ``"log_evidence"`` (``sampler="smc"``); optional ``"max_chains"`` (the budget, a multiple of
        ``num_chains``; default 16·num_chains). Runs of ``num_chains`` chains (independent SMC systems, or
        independent MCMC runs) are added, each with its own key (the first is the key itself), until the
        pooled estimate's MCSE (the largest over ``t``'s entries) is at most ε or the budget is spent; the
        result is the runs pooled along the chain axis (chains ``r·num_chains …`` are run r; their SMC groups
        stay independent groups), and its verdict's ``notes`` say what was spent and what was reached. A
        target the budget cannot reach gives the best estimate, its MCSE and a :class:`PrecisionWarning`
        naming the budget that would reach it (MCSE ∝ 1/√chains). Not with ``checkpoint``.

    Returns
    -------
    Samples
        ``positions`` ``(chain, draw, d)`` in data space, every constraint met
        exactly (one-hot groups and integers as ``report`` says); ``logdensity`` is that of the
        unconstrained z (it includes the log-Jacobian).

    Examples
    --------
    >>> from jaxprobe import priors, probes
    >>> model = lambda x: jax.nn.sigmoid(x @ jnp.array([2.0, -1.0]))    # a classifier of 2 features
    >>> risky = probes.prediction_risky(model, alpha=0.5)               # G(x) = |f(x) − ½|²
    >>> samples = jaxprobe.generate(jax.random.key(0), risky, temperature=0.01, num_chains=8,
    ...                             num_samples=200, num_warmup=200, sampler="chees",
    ...                             prior=priors.StandardNormal(), dim=2, progress=False)
    >>> samples.positions.shape, samples.verdict.converged
    ((8, 200, 2), True)
    >>> estimate = samples.expectation(model)                           # the inputs it is unsure about
    >>> bool(abs(estimate.mean - 0.5) < 0.02)
    True
    """
    refuse_traced("jaxprobe.generate", rng_key=rng_key, temperature=temperature, init=init)
    rng_key = canonicalize_key(rng_key)
    num_chains = check_int(num_chains, "num_chains", minimum=1)
    if report not in ("valid", "relaxed"):
        raise ValueError(f"report must be 'valid' or 'relaxed', got {report!r}")
    check_policy(convergence)
    check_numerics(numerics)
    if init is not None:
        init = _as_init(init, num_chains)
    precision = _check_precision(precision, num_chains, sampler, sample_options)
    question = Question(probe, temperature, prior, constraints, dim, init=init)
    options = dict(num_chains=num_chains, num_samples=num_samples, init=init, sampler=sampler,
                   num_warmup=num_warmup, report=report, convergence="ignore", numerics=numerics, **sample_options)
    if precision is None:
        result = answer(rng_key, question, **options)
    else:
        result = _answer_to_precision(rng_key, question, precision, options)
    verdict_report(result.verdict, convergence, stacklevel=2)
    return result


def _as_init(init: Any, num_chains: int) -> np.ndarray:
    """``init`` (an array, a DataFrame, a nested list) as finite ``(num_chains, d)`` positions of the working
    dtype, or a TypeError/ValueError naming it."""
    init = as_float_array(init, "init", ndim=2, dtype="positions")
    if init.shape[0] != num_chains:
        raise ValueError(f"init must have shape (num_chains={num_chains}, d), got {init.shape}")
    return init


_SAMPLE_KEYWORDS = frozenset(inspect.signature(sample).parameters) - {"rng_key", "logdensity_fn",
                                                                      "initial_positions"}


def _check_sample_options(num_chains: int, num_samples: Any, num_warmup: Any, options: dict[str, Any]) -> None:
    """The keywords bound for :func:`jaxprobe.sample`, checked before the starting points compile."""
    passed = {"num_samples", "num_warmup", "sampler"}
    unknown = sorted(set(options) - (_SAMPLE_KEYWORDS - passed))
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) {unknown}: the extra keywords go to jaxprobe.sample, "
                        f"which takes {sorted(_SAMPLE_KEYWORDS - passed)}")
    check_numerics(options.get("numerics"))
    check_settings(num_samples=num_samples, num_warmup=num_warmup, num_chains=num_chains,
                   **{name: options[name] for name in ("thin", "chunk_size", "step_size_mode",
                                                       "target_acceptance_rate", "step_size") if name in options})


def answer(rng_key: Any, question: Question, *, num_chains: int, num_samples: int, init: Any = None,
           sampler: str = "mala", num_warmup: int = 500, report: str = "valid", dtype: Any = None,
           **sample_options: Any) -> Samples:
    """Sample a :class:`jaxprobe.Question`: the one path from a question to the engine and back to data space.

    ``generate``, one-cell ``sweep``s and ``jaxprobe run`` all end here, so the
    same question and key give the same draws through each of them.
    Keys: ``rng_key`` splits into (initial positions, the engine's key).
    ``dtype``: of the default starting points (float32 unless given); ``init`` keeps its own.

    Examples
    --------
    >>> from jaxprobe import constraints, priors, probes
    >>> question = jaxprobe.Question(probes.localize(jnp.ones(2)), 1.0, priors.StandardNormal(),
    ...                              constraints=[constraints.Box(-3.0, 3.0)], dim=2)
    >>> samples = answer(jax.random.key(0), question, num_chains=4, num_samples=50, num_warmup=50,
    ...                  progress=False, convergence="ignore")
    >>> samples.positions.shape, bool(np.all(np.abs(samples.positions) <= 3.0))   # data space, in the box
    ((4, 50, 2), True)
    """
    rng_key = canonicalize_key(rng_key)
    whole_run = whole_run_sampler(sampler)
    record = sample_options.pop("record", None)
    if record is not None and not callable(record):
        raise TypeError(f"record must be a function of one x (d,) in data space (or None), got "
                        f"{type(record).__name__}")
    if record is not None and whole_run is not None:
        raise ValueError(f"record: sampler {sampler!r} runs the whole question itself and stores x; a record of "
                         "each kept draw needs one of the engine's samplers")
    if whole_run is not None:  # a sampler that runs the whole question itself (jaxprobe.samplers)
        result = whole_run.sample_question(rng_key, question, num_chains=num_chains, num_samples=num_samples,
                                           init=init, num_warmup=num_warmup, dtype=dtype, **sample_options)
        if report == "valid" and question.restriction.is_relaxed and result.positions is not None:
            result = dataclasses.replace(result, positions=question.restriction.report(result.positions))
        return result
    make_kernel(sampler, sample_options.get("sampler_options"))  # option errors before any compile
    if known_sampler_starts_at_target(sampler):
        question.reference.check()  # says why the reference cannot be drawn, before compiling
    key_init, key_sample = jax.random.split(rng_key)
    _check_sample_options(num_chains, num_samples, num_warmup, sample_options)
    if init is not None:
        init = _as_init(init, num_chains)
        z0 = question.to_unconstrained(init).astype(init.dtype)
    else:
        z0 = np.asarray(_initial_positions(key_init, question, num_chains, np.dtype(dtype or np.float32)))
    observables = sample_options.pop("observables", None)
    if observables is not None:
        if not isinstance(observables, dict):
            raise TypeError(f"observables must be a dict of name -> function of one x in data space, got "
                            f"{type(observables).__name__}")
        observables = {name: _InDataSpace(fn, question) if callable(fn) else fn for name, fn in observables.items()}
    # Each kept draw is stored in data space as it is written (record): the draws are held once, with no pass
    # over them after the run (mapping them afterwards held them two to three times over). A record of x given
    # by the caller sees x the same way.
    if record is not None:
        stored = _InDataSpace(record, question)
    else:
        stored = None if question.restriction.is_identity else _DataSpace(question)
    result = sample(key_sample, question.logdensity, z0, sampler=sampler, num_samples=num_samples,
                    num_warmup=num_warmup, observables=observables, record=stored, **sample_options)
    positions = result.positions
    if positions is not None and record is None and report == "valid" and question.restriction.is_relaxed:
        positions = question.restriction.report(positions)
    evidence_path = result.evidence_path
    if evidence_path is not None:  # stage λ of the tempering path is this question at temperature τ/λ
        evidence_path = dict(evidence_path,
                             temperature=question.temperature / np.asarray(evidence_path["inverse_temperature"]))
    return dataclasses.replace(result, positions=positions, evidence_path=evidence_path)


class _InDataSpace:
    """An observable of x in data space seen on the engine's unconstrained z: ``fn(question.to_data(z))``.
    Equal for an equal function and question, so a question asked again reuses its compiled run."""

    def __init__(self, fn: Callable, question: Question):
        self.fn, self.question = fn, question

    def __call__(self, z: Any) -> Any:
        return self.fn(self.question.to_data(z))

    def __hash__(self) -> int:
        return hash((self.fn, self.question))

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _InDataSpace) and (self.fn, self.question) == (other.fn, other.question)


# --- precision: add independent runs until the answer's Monte-Carlo standard error reaches a target ---------

class PrecisionWarning(UserWarning):
    """``generate(..., precision=...)`` spent its budget before the MCSE reached the target.

    Examples
    --------
    >>> import warnings
    >>> from jaxprobe import probes
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     samples = generate(jax.random.key(0), probes.localize(jnp.zeros(2)), temperature=1.0, num_chains=4,
    ...                        num_samples=50, num_warmup=50, dim=2, progress=False, convergence="ignore",
    ...                        precision={"target": lambda x: x[0], "mcse": 1e-4, "max_chains": 8})
    >>> [w.category.__name__ for w in caught], samples.num_chains    # 8 chains could not reach an MCSE of 1e-4
    (['PrecisionWarning'], 8)
    """


#: Budget of ``precision`` when ``max_chains`` is not given, in multiples of ``num_chains``.
DEFAULT_PRECISION_ROUNDS = 16
_PRECISION_KEYS = ("target", "mcse", "max_chains")


def _check_precision(precision: Any, num_chains: int, sampler: str, options: dict[str, Any]) -> dict[str, Any] | None:
    """``generate``'s ``precision`` checked before anything compiles: ``{"target", "mcse", "max_chains"}``
    with defaults filled in, or a TypeError/ValueError naming what is wrong."""
    if precision is None:
        return None
    if not isinstance(precision, dict):
        raise TypeError(f"precision must be a dict like {{'target': fn, 'mcse': 0.01}}, got "
                        f"{type(precision).__name__}")
    unknown = sorted(set(precision) - set(_PRECISION_KEYS))
    if unknown or "target" not in precision or "mcse" not in precision:
        raise ValueError(f"precision takes the keys {_PRECISION_KEYS} ('target' and 'mcse' required), got "
                         f"{sorted(precision)}")
    mcse = check_number(precision["mcse"], "precision['mcse']", minimum=0.0, exclusive_minimum=True)
    max_chains = check_int(precision.get("max_chains", DEFAULT_PRECISION_ROUNDS * num_chains),
                           "precision['max_chains']", minimum=num_chains)
    if max_chains % num_chains:
        raise ValueError(f"precision['max_chains'] must be a multiple of num_chains={num_chains} (runs of "
                         f"num_chains chains are added), got {max_chains}")
    target = precision["target"]
    observables = options.get("observables") or {}
    if target == "log_evidence":
        if not known_sampler_starts_at_target(sampler):
            raise ValueError(f"precision['target']='log_evidence' needs sampler='smc' (the sampler that estimates "
                             f"log Z), got sampler={sampler!r}")
    elif isinstance(target, str):
        if target not in observables:
            raise ValueError(f"precision['target'] must be a function of one x, 'log_evidence' or the name of one "
                             f"of observables {sorted(observables)}, got {target!r}")
    elif not callable(target):
        raise TypeError(f"precision['target'] must be a function of one x, 'log_evidence' or an observable's "
                        f"name, got {type(target).__name__}")
    elif options.get("keep_draws", True) is False:
        raise ValueError("precision['target'] as a function needs the draws (keep_draws=False keeps none): pass it "
                         "as observables={'name': fn} and precision={'target': 'name', ...} instead")
    elif options.get("record") is not None:
        raise ValueError("precision['target'] as a function of x needs x stored (record stores something else): "
                         "pass it as observables={'name': fn} and precision={'target': 'name', ...} instead")
    if options.get("checkpoint") is not None:
        raise ValueError("precision cannot be combined with checkpoint (each added run would need its own file)")
    return {"target": target, "mcse": mcse, "max_chains": max_chains}


#: The fewest independent SMC groups behind a ``log_evidence`` error that may end a precision run (the
#: expectations' own rule, :mod:`jaxprobe.engine.estimates`, says when theirs can be trusted).
MIN_PRECISION_GROUPS = 8


def _precision_estimate(result: Samples, target: Any) -> tuple[np.ndarray, np.ndarray, bool]:
    """The pooled result's estimate of the precision target, its MCSE (arrays of the target's shape), and whether
    that MCSE can be trusted to end the run (enough groups or batches behind it: a small error estimated from
    two groups is as likely luck as precision)."""
    if isinstance(target, str) and target == "log_evidence":
        trusted = (result.num_groups or 0) >= MIN_PRECISION_GROUPS
        return np.asarray(result.log_evidence, np.float64), np.asarray(result.log_evidence_se, np.float64), trusted
    if isinstance(target, str):
        estimate = result.observables[target]
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCSEWarning)  # the note is read from the estimate
            estimate = result.expectation(target)
    return np.asarray(estimate.mean, np.float64), np.asarray(estimate.mcse, np.float64), estimate.note is None


def _answer_to_precision(rng_key: Any, question: Question, precision: dict[str, Any],
                         options: dict[str, Any]) -> Samples:
    """Runs of ``num_chains`` chains (keys: the key, then ``fold_in(key, r)``) pooled until the target's MCSE is
    at most ``precision["mcse"]`` or ``max_chains`` chains are spent (then a :class:`PrecisionWarning`)."""
    num_chains, goal = options["num_chains"], precision["mcse"]
    rounds = precision["max_chains"] // num_chains
    runs: list[Samples] = []
    pooled = None
    mean = mcse = np.full((), np.nan)
    while len(runs) < rounds:
        key = rng_key if not runs else jax.random.fold_in(rng_key, len(runs))
        runs.append(answer(key, question, **options))
        pooled = pool_runs(runs)
        mean, mcse, trusted = _precision_estimate(pooled, precision["target"])
        worst = float(np.max(mcse)) if mcse.size else 0.0
        if trusted and np.isfinite(worst) and worst <= goal:
            break
    worst = float(np.max(mcse)) if mcse.size else 0.0
    spent = len(runs) * num_chains
    gradients = int(np.sum(pooled.num_gradient_evaluations))
    reached = bool(trusted and np.isfinite(worst) and worst <= goal)
    note = (f"precision: MCSE {worst:.3g} {'≤' if reached else '>'} target {goal:.3g} after {len(runs)} run(s) of "
            f"{num_chains} chains ({spent} chains, {gradients:,} gradient evaluations; budget max_chains="
            f"{precision['max_chains']})")
    if not reached:
        needed = (math.ceil(spent * (worst / goal) ** 2 / num_chains) * num_chains if np.isfinite(worst)
                  else None)
        advice = (f"about max_chains={needed} (MCSE ∝ 1/√chains) would reach it" if needed is not None else
                  "the MCSE could not be estimated (NaN): use more chains per run or another target")
        if not trusted:
            advice += "; the MCSE rests on too few groups or batches to be trusted"
        warnings.warn(f"precision target not reached: estimate {np.round(mean, 6).tolist()} with MCSE "
                      f"{np.round(mcse, 6).tolist()} > {goal:.3g} after {spent} of max_chains="
                      f"{precision['max_chains']} chains ({gradients:,} gradient evaluations); {advice}",
                      PrecisionWarning, stacklevel=3)
    verdict = pooled.verdict
    if verdict is not None:  # the pooled runs' SMC groups are behind the pooled errors (enough of them: no warning)
        verdict = dataclasses.replace(verdict, notes=tuple(verdict.notes) + (note,), num_groups=pooled.num_groups,
                                      mcse_warning=groups_warning(pooled.num_groups))
    return dataclasses.replace(pooled, verdict=verdict)


#: Per-chain fields of :class:`Samples` (leading axis: chains), concatenated when runs are pooled.
_PER_CHAIN_FIELDS = ("logdensity", "acceptance_rate", "step_size", "num_divergent", "num_nonfinite",
                     "num_gradient_evaluations", "inverse_mass_matrix")


def _pool_observed(parts: list[Any], num_groups: int | None = None, group_log_evidence: Any = None) -> Any:
    """Equal-sized independent runs' estimates as one. SMC runs with their groups' evidence estimates
    (``group_log_evidence`` of all runs, ``(num_groups,)``): one estimate over all their groups, each weighted
    by its evidence (:func:`jaxprobe.engine.estimates.particle_observed` of the chains' means). Else the mean of
    the means, MCSE ``√Σ mcse_r² / R``."""
    if group_log_evidence is not None:
        return estimates.particle_observed(np.concatenate([part.per_chain_mean for part in parts]), num_groups,
                                           group_log_evidence)
    count = len(parts)
    mean = sum(np.asarray(part.mean, np.float64) for part in parts) / count
    mcse = np.sqrt(sum(np.asarray(part.mcse, np.float64) ** 2 for part in parts)) / count
    notes = [part.note for part in parts if part.note is not None]
    return parts[0]._replace(mean=mean, mcse=mcse,
                             per_chain_mean=np.concatenate([part.per_chain_mean for part in parts]),
                             num_batches=sum(part.num_batches for part in parts),
                             ess=None if parts[0].ess is None else sum(part.ess for part in parts),
                             note=notes[0] if notes and count == 1 else None)


def pool_runs(runs: list[Samples]) -> Samples:
    """Independent runs of one question with the same number of chains as one :class:`Samples` along the chain
    axis (run r's chains are ``r·C … (r+1)·C − 1``).

    Per-chain arrays and draws are concatenated; observables pooled (:func:`_pool_observed`); SMC runs' groups
    stay groups (``num_groups`` summed: every run has the same group size; ``group_log_evidence``
    concatenated, so every pooled estimate weights all groups by their evidence), ``log_evidence`` is ``log mean_r Ẑ_r``
    with the delta-method error ``√Σ_r (Ẑ_r/ΣẐ)² se_r²`` and ``evidence_path`` is the first run's; the verdict is
    the first one that did not converge, else the last run's.

    Examples
    --------
    >>> from jaxprobe import priors, probes
    >>> runs = [generate(jax.random.key(seed), probes.localize(jnp.zeros(2)), temperature=1.0, num_chains=4,
    ...                  num_samples=50, num_warmup=50, prior=priors.StandardNormal(), dim=2, progress=False,
    ...                  convergence="ignore") for seed in (0, 1)]
    >>> pooled = pool_runs(runs)
    >>> pooled.positions.shape, bool(np.array_equal(pooled.positions[4:], runs[1].positions))
    ((8, 50, 2), True)
    """
    first = runs[0]
    if len(runs) == 1:
        return first
    fields: dict[str, Any] = {}
    if first.positions is not None:
        fields["positions"] = jax.tree.map(lambda *leaves: np.concatenate(leaves), *[run.positions for run in runs])
    for name in _PER_CHAIN_FIELDS:
        if getattr(first, name) is not None:
            fields[name] = np.concatenate([np.asarray(getattr(run, name)) for run in runs])
    if first.num_groups is not None:
        fields["num_groups"] = sum(run.num_groups for run in runs)
        if all(run.group_log_evidence is not None for run in runs):
            fields["group_log_evidence"] = np.concatenate([run.group_log_evidence for run in runs])
    for name in ("observables", "particle_observables"):
        if getattr(first, name):
            fields[name] = {key: _pool_observed([getattr(run, name)[key] for run in runs],
                                                fields.get("num_groups"), fields.get("group_log_evidence"))
                            for key in getattr(first, name)}
    if first.log_evidence is not None:
        log_z = np.array([run.log_evidence for run in runs], np.float64)
        shares = np.exp(log_z - np.logaddexp.reduce(log_z))  # Ẑ_r / Σ Ẑ_r
        fields["log_evidence"] = float(np.logaddexp.reduce(log_z) - math.log(len(runs)))
        fields["log_evidence_se"] = float(np.sqrt(np.sum((shares * np.array([run.log_evidence_se for run in runs]))
                                                         ** 2)))
    fields["chains_start_at_target"] = all(run.chains_start_at_target for run in runs)
    unconverged = [run.verdict for run in runs if run.verdict is not None and not run.verdict.converged]
    fields["verdict"] = unconverged[0] if unconverged else runs[-1].verdict
    return dataclasses.replace(first, **fields)
