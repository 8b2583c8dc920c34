"""All chains of :mod:`jaxprobe.samplers.tree_gibbs` in one compiled program (:func:`sample`), and its front
ends: :func:`sample_question` (``generate``, ``sweep``, configuration files) and :class:`TreeGibbs`, the
:class:`~jaxprobe.engine.protocols.WholeRunSampler` that ``jaxprobe.samplers`` registers.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.engine import streaming
from jaxprobe.engine.api import Progress, canonicalize_key, check_observables, check_observables_form, check_settings
from jaxprobe.engine.api import sample as engine_sample
from jaxprobe.engine.compiled import DEFAULT_MAXSIZE, jit_bounded, values_at
from jaxprobe.engine.numerics import check_numerics
from jaxprobe.engine.samples import Samples
from jaxprobe.engine.verdict import assess, check_policy, report
from jaxprobe.samplers.tree_gibbs.kernel import build_kernel, check_prior_moves, init
from jaxprobe.samplers.tree_gibbs.target import (NAME, SCANS, TreeGibbsTarget, as_tree_ensemble, prior_table,
                                                 reconstruction_target, target_from_question)
from jaxprobe.types import PRNGKey

__all__ = ["sample", "sample_question", "split_options", "TreeGibbs", "TREE_GIBBS"]


# ------------------------------------------------------------------ all chains in one program


@jit_bounded(static_argnames=("target",))
def _init(target, positions):
    """:func:`init` of every chain, ``positions`` ``(C, B, d)`` (compiled once per target)."""
    return jax.vmap(lambda position: init(target, position))(positions)


@jit_bounded(static_argnames=("target", "scan", "prior_moves"))
def _run(chain_keys, states, first_sweep, sweeps, target, scan, prior_moves):
    """One chunk for every chain: draw i comes after ``sweeps[i]`` (traced, ``(N,)``) more sweeps.

    Returns states, positions ``(C, N, B, d)``, log densities ``(C, N)``, the sweeps with a fallback
    update ``(C,)`` and the prior moves' summed acceptance ``(C,)``. Sweep s of chain c uses the key
    ``fold_in(key_c, s)``, so the draws do not depend on how a run is cut into chunks; warmup (draws
    discarded) and a short last chunk (trailing zeros in ``sweeps``) run the same compiled program.
    """
    kernel = build_kernel(target, scan, prior_moves)
    logdensity = target.logdensity_fn
    starts = first_sweep + jnp.cumsum(sweeps) - sweeps  # first sweep index of each draw

    def one_chain(key, state):
        def one_draw(carry, draw):
            start, count = draw

            def one_sweep(i, inner):
                state, fallbacks, accepted = inner
                state, info = kernel(jax.random.fold_in(key, start + i), state)
                return state, fallbacks + (info.num_fallback > 0).astype(jnp.int32), accepted + info.accepted

            carry = jax.lax.fori_loop(0, count, one_sweep, carry)
            position = carry[0].position
            return carry, (position, logdensity(position.reshape(-1)))

        zero = (jnp.zeros((), jnp.int32), jnp.zeros((), state.position.dtype))
        (state, fallbacks, accepted), (positions, values) = jax.lax.scan(one_draw, (state, *zero), (starts, sweeps))
        return state, positions, values, fallbacks, accepted

    return jax.vmap(one_chain)(chain_keys, states)


def _spread(total: int, parts: int) -> np.ndarray:
    """``total`` sweeps over ``parts`` draws, as evenly as possible: ``(parts,)`` int32."""
    base, extra = divmod(total, parts)
    return (base + (np.arange(parts) < extra)).astype(np.int32)


def _check_positions(target: TreeGibbsTarget, positions: Any) -> np.ndarray:
    positions = np.asarray(positions)
    shape = (target.num_blocks, target.dim)
    if positions.ndim != 3 or positions.shape[1:] != shape:
        raise ValueError(f"initial_positions must have shape (num_chains, {shape[0]}, {shape[1]}), got "
                         f"{positions.shape}")
    if not np.issubdtype(positions.dtype, np.floating) or not np.all(np.isfinite(positions)):
        raise ValueError("initial_positions must be finite floating-point values")
    if positions.dtype == np.float64 and not jax.config.jax_enable_x64:
        raise TypeError("initial_positions is float64 but jax_enable_x64 is off: enable it or pass float32")
    low, high = target.low[target.prior_index], target.high[target.prior_index]  # (B, d)
    if np.any(positions < low) or np.any(positions > high):
        raise ValueError("initial_positions must lie inside the prior's box and the Box bounds")
    return positions


def _event_shape(target: TreeGibbsTarget, event_shape: Any) -> tuple[int, ...]:
    if event_shape is None:
        return (target.dim,) if target.num_blocks == 1 else (target.num_blocks, target.dim)
    event_shape = tuple(int(size) for size in event_shape)
    if int(np.prod(event_shape)) != target.num_blocks * target.dim:
        raise ValueError(f"event_shape {event_shape} does not hold {target.num_blocks} x {target.dim} values")
    return event_shape


def sample(
    rng_key: PRNGKey,
    target: TreeGibbsTarget,
    initial_positions: Any,
    *,
    num_samples: int = 1000,
    num_warmup: int = 100,
    thin: int = 1,
    scan: str = "systematic",
    prior_moves: Sequence[float] | None = None,
    chunk_size: int | None = None,
    progress: bool = False,
    event_shape: tuple[int, ...] | None = None,
    convergence: str = "warn",
) -> Samples:
    """Draw ``num_samples`` kept draws (``thin`` sweeps apart) from each chain of ``target``.

    Parameters
    ----------
    rng_key
        A ``jax.random.key``.
    target
        A :class:`TreeGibbsTarget`.
    initial_positions
        ``(C, B, d)`` starting points inside the bounds (fixed features at their values). A start outside
        the support (zero density) is allowed: coordinates are drawn from the prior until a line through
        the chain meets the support, and from the exact conditional from then on.
    num_samples, num_warmup, thin
        Kept draws per chain, sweeps discarded first (burn-in; nothing to adapt), sweeps per kept draw.
    scan
        ``"systematic"`` or ``"random"`` (see :func:`build_kernel`).
    prior_moves
        Correlations ρ of the prior-preserving Metropolis moves that end every sweep (:func:`build_kernel`);
        None: ``target.default_prior_moves`` (:data:`DEFAULT_PRIOR_MOVES` for Gaussian and mixture priors
        without fixed features, else none); ``()``: pure coordinate-wise Gibbs.
    chunk_size
        Kept draws per compiled chunk (default: about 10 chunks); the draws do not depend on it.
    progress
        A tqdm bar over sweeps.
    event_shape
        Shape of one chain's position in the returned ``Samples`` (default ``(B, d)``, ``(d,)`` when B = 1).
    convergence
        ``"warn"``, ``"error"`` or ``"ignore"``, as :func:`jaxprobe.sample`.

    Returns
    -------
    Samples
        ``positions`` ``(C, N, *event_shape)``, ``logdensity`` ``(C, N)`` (``target.logdensity_fn``),
        ``acceptance_rate`` 1 (every Gibbs update moves; the prior moves' own acceptance is in
        :class:`TreeGibbsInfo`, kernel level), ``step_size`` NaN (none), ``num_nonfinite`` the
        sweeps per chain with a fallback update (a chain outside the support), ``sampler="tree_gibbs"``
        and the :class:`~jaxprobe.engine.verdict.Verdict`.

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from jaxprobe import models, priors, probes
    >>> tree = models.from_sklearn(DecisionTreeClassifier(max_depth=1).fit([[-1.0, 0.0], [1.0, 0.0]], [0, 1]))
    >>> question = jaxprobe.Question(probes.fixed_label(tree, 1), 1.0, priors.StandardNormal(), dim=2)  # class 1: x₀>0
    >>> samples = sample(jax.random.key(0), target_from_question(question), jnp.full((8, 1, 2), 0.5),
    ...                  num_samples=50, num_warmup=10)          # C = 8 chains of B = 1 block
    >>> samples.positions.shape, samples.sampler
    ((8, 50, 2), 'tree_gibbs')
    >>> bool(abs(samples.positions[..., 0].mean() - 0.798) < 0.1)   # x₀ given x₀ > 0: half-normal, mean √(2/π)
    True
    """
    rng_key = canonicalize_key(rng_key)
    num_samples, num_warmup, thin, chunk_size, _ = check_settings(num_samples=num_samples, num_warmup=num_warmup,
                                                                  thin=thin, chunk_size=chunk_size,
                                                                  needs_step_size=False)  # Gibbs: no step size
    if scan not in SCANS:
        raise ValueError(f"scan must be one of {SCANS}, got {scan!r}")
    check_policy(convergence)
    prior_moves = check_prior_moves(target, prior_moves)
    positions = _check_positions(target, initial_positions)
    event_shape = _event_shape(target, event_shape)
    num_chains = positions.shape[0]
    draws, values, fallbacks = _sample_chunks(rng_key, target, positions, num_samples, num_warmup, thin, scan,
                                              prior_moves, chunk_size, progress)
    result = Samples(
        positions=draws.reshape((num_chains, num_samples) + event_shape), logdensity=values,
        acceptance_rate=np.ones(num_chains), step_size=np.full(num_chains, np.nan),
        num_divergent=np.zeros(num_chains, np.int64), num_nonfinite=fallbacks,
        num_gradient_evaluations=np.zeros(num_chains, np.int64), sampler=NAME, num_warmup=num_warmup, thin=thin)
    result = dataclasses.replace(result, verdict=assess(result))
    report(result.verdict, convergence, stacklevel=2)
    return result


def _sample_chunks(rng_key: PRNGKey, target: TreeGibbsTarget, positions: np.ndarray, num_samples: int,
                   num_warmup: int, thin: int, scan: str, prior_moves: tuple, chunk_size: int | None,
                   progress: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Burn-in, then the kept draws in a few compiled chunks (a host loop over chunks, not over sweeps):
    positions ``(C, N, B, d)``, log densities ``(C, N)`` and the sweeps with a fallback update ``(C,)``."""
    num_chains = positions.shape[0]
    chain_keys = jax.random.split(rng_key, num_chains)
    states = _init(target, jnp.asarray(positions))
    per_chunk = min(chunk_size or max(1, math.ceil(num_samples / 10)), num_samples)
    bar = Progress(progress, num_warmup + num_samples * thin, f"{NAME} x{num_chains}")
    try:
        if num_warmup:  # burn-in: the sampling program with its draws dropped (one compiled program in all)
            states = _run(chain_keys, states, 0, _spread(num_warmup, per_chunk), target, scan, prior_moves)[0]
            bar.update(num_warmup, 1.0, "burn-in")
        pieces, values, fallbacks = [], [], np.zeros(num_chains, np.int64)
        done = 0
        while done < num_samples:
            count = min(per_chunk, num_samples - done)
            sweeps = np.where(np.arange(per_chunk) < count, thin, 0).astype(np.int32)
            states, chunk, logdensity, chunk_fallbacks, _ = _run(
                chain_keys, states, num_warmup + done * thin, sweeps, target, scan, prior_moves)
            pieces.append(np.asarray(chunk)[:, :count])
            values.append(np.asarray(logdensity)[:, :count])
            fallbacks += np.asarray(chunk_fallbacks)
            done += count
            bar.update(count * thin, 1.0, "sampling")
    finally:
        bar.close()
    return np.concatenate(pieces, axis=1), np.concatenate(values, axis=1), fallbacks


# ------------------------------------------------------------------ front ends (generate, sweep, reconstruct)

#: Options of :func:`jaxprobe.sample` that tree_gibbs uses; the others have no meaning for an exact Gibbs
#: sampler (no step size, no mass matrix, no adaptation) and are refused by name when set (left at
#: ``jaxprobe.sample``'s default, as ``sweep`` and configuration runs hand them over, they are not).
_OPTIONS = ("thin", "chunk_size", "progress", "sampler_options", "convergence")
_ENGINE_DEFAULTS = {name: parameter.default for name, parameter in inspect.signature(engine_sample).parameters.items()
                    if parameter.default is not inspect.Parameter.empty}


def _is_engine_default(name: str, value: Any) -> bool:
    default = _ENGINE_DEFAULTS.get(name, inspect.Parameter.empty)
    return value is default or (isinstance(value, str) and isinstance(default, str) and value == default)


def split_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the engine options handed to a front end with ``sampler="tree_gibbs"``: returns the keyword
    arguments of :func:`sample` (``thin``, ``chunk_size``, ``progress``, ``scan``, ``prior_moves``,
    ``convergence``); a ValueError names any option tree_gibbs has no use for (``step_size``, ``checkpoint``,
    ...) that is set to something other than :func:`jaxprobe.sample`'s default.

    Examples
    --------
    >>> split_options({"thin": 2, "sampler_options": {"scan": "random"}})
    {'thin': 2, 'scan': 'random', 'prior_moves': None}
    >>> split_options({"step_size": 0.1})
    Traceback (most recent call last):
        ...
    ValueError: step_size: not used by sampler='tree_gibbs' (exact Gibbs sweeps: no step size, ...
    """
    unknown = sorted(name for name, value in options.items()
                     if name not in _OPTIONS and not _is_engine_default(name, value))
    if unknown:
        raise ValueError(f"{unknown[0]}: not used by sampler={NAME!r} (exact Gibbs sweeps: no step size, mass "
                         f"matrix, adaptation, devices or checkpoints); it takes {', '.join(_OPTIONS)}")
    result = {key: value for key, value in options.items() if key in _OPTIONS and key != "sampler_options"}
    extra = dict(options.get("sampler_options") or {})
    scan = extra.pop("scan", "systematic")
    prior_moves = extra.pop("prior_moves", None)
    if extra:
        raise ValueError(f"sampler_options: sampler={NAME!r} takes 'scan' ({' or '.join(SCANS)}) and "
                         f"'prior_moves' (correlations in [0, 1)), got {sorted(extra)}")
    if scan not in SCANS:
        raise ValueError(f"sampler_options: scan must be one of {SCANS}, got {scan!r}")
    if prior_moves is not None:
        try:
            prior_moves = tuple(float(value) for value in prior_moves)
        except (TypeError, ValueError):
            raise ValueError(f"sampler_options: prior_moves must be a sequence of correlations in [0, 1), got "
                             f"{prior_moves!r}") from None
        if not all(0.0 <= value < 1.0 for value in prior_moves):
            raise ValueError(f"sampler_options: prior_moves must be correlations in [0, 1), got {prior_moves}")
    result.update(scan=scan, prior_moves=prior_moves)
    return result


def _check_observables(observables: Any, keep_draws: Any, dim: int | None = None,
                       dtype: Any = None) -> dict[str, Callable]:
    """``observables`` (functions of one x in data space) and ``keep_draws`` checked as ``jaxprobe.sample`` checks
    them (:func:`jaxprobe.engine.api.check_observables`): with ``dim``, each traced on one x ``(dim,)``."""
    if not isinstance(keep_draws, (bool, np.bool_)):
        raise TypeError(f"keep_draws must be True or False, got {keep_draws!r}")
    if dim is not None:
        check_observables(observables, dim, np.dtype(dtype or np.float32))
    return check_observables_form(observables)


def _observed(positions: np.ndarray, observables: Mapping[str, Callable]) -> dict[str, streaming.Observed]:
    """Each observable over the kept draws ``(C, N, d)``, with the engine's batch means
    (:func:`jaxprobe.engine.streaming.observed`: the same batches as a run of ``jaxprobe.sample``)."""
    num_chains, num_draws = positions.shape[:2]
    num_batches = streaming.Monitor(num_chains, positions.shape[-1], num_draws).num_batches
    result = {}
    for name, fn in observables.items():
        flat = jnp.asarray(positions).reshape((-1,) + positions.shape[2:])  # values only: jaxprobe._pointwise
        values = np.asarray(values_at(fn, flat), np.float64)
        values = values.reshape((num_chains, num_draws) + values.shape[1:])  # (C, N, ...)
        result[name] = streaming.observed(streaming.sums_of_values(values, num_batches))
    return result


def sample_question(rng_key: PRNGKey, question: Any, *, num_chains: int, num_samples: int, init: Any = None,
                    num_warmup: int = 100, dtype: Any = None, **options: Any) -> Samples:
    """Sample a :class:`jaxprobe.Question` of the tree form (:func:`target_from_question`): ``positions``
    ``(C, N, d)`` in data space (relaxed: the caller reports Integer features rounded), ``logdensity`` in data
    space, −G(x)/τ + log prior(x).

    Keys as :func:`jaxprobe.generation.answer`: ``rng_key`` splits into (initial positions, sampling). Starting
    points: ``init`` ``(C, d)`` in data space (checked against the constraints), else the question's own
    (:meth:`jaxprobe.Question.initial_positions`, mapped to data space). ``options``: see :func:`split_options`;
    also ``numerics`` (checked, unused: exact Gibbs sweeps have no numerics to choose), ``observables``
    (functions of one x in data space, computed over the kept draws: ``samples.observables``) and
    ``keep_draws`` (False: the positions and log densities are dropped after the verdict and observables).

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from jaxprobe import models, priors, probes
    >>> tree = models.from_sklearn(DecisionTreeClassifier(max_depth=1).fit([[-1.0, 0.0], [1.0, 0.0]], [0, 1]))
    >>> question = jaxprobe.Question(probes.fixed_label(tree, 1), 1.0, priors.StandardNormal(), dim=2)  # class 1: x₀>0
    >>> samples = sample_question(jax.random.key(0), question, num_chains=8, num_samples=50, num_warmup=10)
    >>> samples.positions.shape, bool(np.all(samples.positions[..., 0] > 0.0))   # every draw answers: class 1
    ((8, 50, 2), True)
    >>> bool(abs(samples.positions[..., 0].mean() - 0.798) < 0.1)   # half-normal x₀: mean √(2/π)
    True
    """
    rng_key = canonicalize_key(rng_key)
    check_numerics(options.pop("numerics", None))
    keep_draws = options.pop("keep_draws", True)
    observables = _check_observables(options.pop("observables", None), keep_draws, question.dim,
                                     np.asarray(init).dtype if init is not None else dtype)
    kwargs = split_options(options)  # option and target errors before anything compiles
    target = _target_of(question)
    kwargs["prior_moves"] = check_prior_moves(target, kwargs["prior_moves"])
    key_init, key_sample = jax.random.split(rng_key)
    start = _question_start(key_init, question, target, num_chains, init, dtype)
    result = sample(key_sample, target, start[:, None, :], num_samples=num_samples, num_warmup=num_warmup,
                    event_shape=(question.dim,), **kwargs)
    if observables:
        result = dataclasses.replace(result, observables=_observed(result.positions, observables))
    if not keep_draws:
        result = dataclasses.replace(result, positions=None, logdensity=None)
    return result


@functools.lru_cache(maxsize=DEFAULT_MAXSIZE)
def _target_of(question: Any) -> TreeGibbsTarget:
    """:func:`target_from_question`, the same target for an equal question (questions compare by value): the
    target is a static argument of the compiled sweeps, so a question asked again reuses them (a new target
    each call compiled every program again: 2 s for a one-split tree on 2 cores)."""
    return target_from_question(question)


@jit_bounded(static_argnames=("question", "num_chains", "dtype"))
def _initial_positions(rng_key: PRNGKey, question: Any, num_chains: int, dtype: Any) -> jax.Array:
    return question.initial_positions(rng_key, num_chains, dtype)


@jit_bounded(static_argnames=("question",))
def _to_data(question: Any, z: jax.Array) -> jax.Array:
    return jax.vmap(question.to_data)(z)


def _question_start(rng_key: PRNGKey, question: Any, target: TreeGibbsTarget, num_chains: int, init: Any,
                    dtype: Any) -> np.ndarray:
    """Starting points ``(C, d)`` in data space inside the target's bounds: ``init`` (checked) or the
    question's own."""
    if init is not None:
        init = np.asarray(init)
        if init.ndim != 2 or init.shape != (num_chains, question.dim):
            raise ValueError(f"init must have shape (num_chains={num_chains}, {question.dim}), got {init.shape}")
        if not np.issubdtype(init.dtype, np.floating) or not np.all(np.isfinite(init)):
            raise ValueError("init must be finite floating-point values")
        question.to_unconstrained(init)  # raises when init breaks a constraint
        start = init
    else:
        dtype = np.dtype(dtype or np.float32)
        z = _initial_positions(rng_key, question, int(num_chains), dtype)
        start = np.asarray(_to_data(question, z))
    # Box bounds are closed here: a start the bijection put on a bound by rounding is moved inside them.
    return np.clip(start, target.low[0], target.high[0]).astype(start.dtype)


# ------------------------------------------------------------------ the registered whole-run sampler


@dataclasses.dataclass(frozen=True)
class TreeGibbs:
    """``sampler="tree_gibbs"`` as a :class:`~jaxprobe.engine.protocols.WholeRunSampler`: what ``generate``,
    ``sweep``, ``reconstruct`` and configuration files call (``jaxprobe.samplers`` registers :data:`TREE_GIBBS`).

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from jaxprobe import models, priors, probes
    >>> tree = models.from_sklearn(DecisionTreeClassifier(max_depth=1).fit([[-1.0, 0.0], [1.0, 0.0]], [0, 1]))
    >>> question = jaxprobe.Question(probes.fixed_label(tree, 1), 1.0, priors.StandardNormal(), dim=2)  # class 1: x₀>0
    >>> TREE_GIBBS.name, TREE_GIBBS.supports(question)         # None: this question is of the tree form
    ('tree_gibbs', None)
    >>> TREE_GIBBS.supports(jaxprobe.Question(probes.localize(jnp.zeros(2)), 1.0, dim=2))   # why not
    "probe: sampler='tree_gibbs' needs a probe built only from imported tree ensembles ..."
    """

    name: str = NAME
    moves_into_support: bool = True  # a chain outside the support draws from the prior until it meets it

    def check_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """:func:`split_options` (``observables``, ``keep_draws`` and ``numerics`` are taken too)."""
        options = dict(options)
        check_numerics(options.pop("numerics", None))
        _check_observables(options.pop("observables", None), options.pop("keep_draws", True))
        return split_options(options)

    def supports(self, question: Any) -> str | None:
        """None if ``question`` is of the tree form (:func:`target_from_question`), else why not."""
        try:
            target_from_question(question)
        except ValueError as error:
            return str(error)
        return None

    def sample_question(self, rng_key: PRNGKey, question: Any, **kwargs: Any) -> Samples:
        """:func:`sample_question`."""
        return sample_question(rng_key, question, **kwargs)

    def supports_reconstruction(self, model: Any, prior: Any, dim: int) -> str | None:
        """None for an imported tree ensemble (or a reconstruction classifier of one) and a prior of
        :func:`prior_table`; else the reason, starting with ``"model: "`` or ``"prior: "``."""
        if as_tree_ensemble(model) is None:
            kind = ("a black-box predict_proba" if getattr(model, "black_box", False)
                    else getattr(model, "name", None) or type(model).__name__)
            return (f"model: sampler={NAME!r} needs an imported tree ensemble (DecisionTree, RandomForest, "
                    f"ExtraTrees, GradientBoosting, XGBoost), got {kind}")
        try:
            prior_table([prior], dim, "prior")
        except ValueError as error:
            return str(error)
        return None

    def reconstruction(self, question: Any, models: Sequence[Any], priors: Sequence[Any], num_classes: int,
                       dim: int, options: Mapping[str, Any]) -> Callable[..., Samples]:
        """The all-classes target (:func:`reconstruction_target`) and its options, checked now; returns
        ``run(rng_key, initial_positions (C, S·K, d), num_samples, num_warmup) -> Samples``, positions
        ``(C, N, S·K·d)`` in feature units."""
        kwargs = split_options(options)
        target = reconstruction_target(question, models, priors, num_classes, dim)
        kwargs["prior_moves"] = check_prior_moves(target, kwargs["prior_moves"])

        def run(rng_key: PRNGKey, initial_positions: Any, num_samples: int, num_warmup: int) -> Samples:
            start = np.asarray(initial_positions)
            start = start.reshape(start.shape[0], -1, dim)
            return sample(rng_key, target, start, num_samples=num_samples, num_warmup=num_warmup,
                          event_shape=(target.num_blocks * dim,), **kwargs)

        return run


TREE_GIBBS = TreeGibbs()
"""The instance ``jaxprobe.samplers`` registers (:func:`jaxprobe.engine.registry.register_whole_run_sampler`)."""
