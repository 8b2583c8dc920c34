"""The module behind :func:`jaxprobe.generate`: answer a probe with samples in data space, constraints exact.

Named apart from the function it exports, so that ``import jaxprobe.generation`` is this module (a module
``jaxprobe.generate`` was shadowed by the function ``jaxprobe.generate``).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.engine import Samples, sample
from jaxprobe._inputs import as_float_array, check_int
from jaxprobe.engine.api import (canonicalize_key, check_settings, known_sampler_starts_at_target, make_kernel,
                                 refuse_traced)
from jaxprobe.engine.compiled import jit_bounded
from jaxprobe.engine.numerics import check_numerics
from jaxprobe.engine.registry import whole_run_sampler
from jaxprobe.engine.verdict import check_policy
from jaxprobe.engine.verdict import report as verdict_report
from jaxprobe.question import Question

__all__ = ["generate", "answer"]


@jit_bounded(static_argnames=("question", "num_chains", "dtype"))
def _initial_positions(rng_key: Any, question: Question, num_chains: int, dtype: Any) -> jax.Array:
    return question.initial_positions(rng_key, num_chains, dtype)


@jit_bounded(static_argnames=("question",))
def _to_data_space(positions: Any, question: Question) -> Any:
    return jax.vmap(jax.vmap(question.to_data))(positions)


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
        A ``Box``, a ``Fixed`` or a list of them (:mod:`jaxprobe.constraints`).
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

    Returns
    -------
    Samples
        ``positions`` ``(chain, draw, d)`` in data space, every constraint met
        exactly (one-hot groups and integers as ``report`` says); ``logdensity`` is that of the
        unconstrained z (it includes the log-Jacobian).
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
    question = Question(probe, temperature, prior, constraints, dim, init=init)
    result = answer(rng_key, question, num_chains=num_chains, num_samples=num_samples, init=init, sampler=sampler,
                    num_warmup=num_warmup, report=report, convergence="ignore", numerics=numerics,
                    **sample_options)
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
    """
    rng_key = canonicalize_key(rng_key)
    whole_run = whole_run_sampler(sampler)
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
    result = sample(key_sample, question.logdensity, z0, sampler=sampler, num_samples=num_samples,
                    num_warmup=num_warmup, observables=observables, **sample_options)
    positions = result.positions
    if positions is not None:
        positions = np.asarray(_to_data_space(jnp.asarray(positions), question))
        if report == "valid" and question.restriction.is_relaxed:
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
