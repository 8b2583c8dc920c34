"""The functional core of the sampling engine: pure functions, no host side effects.

``init`` → ``warmup`` (optional) → ``run``. Each works on all chains at once on
flat positions of shape ``(C, D)`` and a log density of one flat ``(D,)``
position, and can be called inside a user's ``jax.jit``, ``lax.scan`` or
training step. :func:`jaxprobe.sample` is the convenient wrapper (pytrees,
validation, chunking, progress bar, sharding, the ``Samples`` result).

Randomness: step ``t`` of a run uses ``jax.random.fold_in(rng_key, t)`` with the
global step counter carried in :class:`EngineState`, so a run split into
chunks gives bit-identical draws to a run in one piece.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.adaptation.staged_adaptation import build_schedule
from blackjax.adaptation.step_size import dual_averaging_adaptation

from jaxprobe._inputs import check_int
from jaxprobe._pointwise import map_points
from jaxprobe.engine import streaming
from jaxprobe.engine.numerics import Numerics, in_positions_dtype, numerics_of
from jaxprobe.engine.protocols import Adaptation, EngineState, FlatLogDensity, Kernel, RunStats
from jaxprobe.types import Array, PRNGKey

__all__ = [
    "EngineState",
    "RunStats",
    "Trace",
    "WarmupState",
    "WindowAdaptation",
    "default_parameters",
    "init",
    "run",
    "run_monitored",
    "canonicalize_key",
    "refresh",
    "adapt",
    "warmup_init",
    "warmup_run",
    "warmup_final",
    "warmup_schedule",
    "warmup",
    "prepare",
]


class Trace(NamedTuple):
    """Kept draws of a run in scan layout: ``position`` ``(N, C, D)``, ``logdensity`` ``(N, C)``.

    Draw-major because that is how ``lax.scan`` stacks them; transposing inside
    the compiled run would cost a copy of every draw. ``chain_major()`` gives the
    ArviZ layout ``(chain, draw, ...)``.

    Examples
    --------
    >>> from jaxprobe import engine
    >>> kernel, logdensity = engine.make_kernel("mala"), jaxprobe.priors.StandardNormal()
    >>> state = engine.init(kernel, logdensity, jax.random.normal(jax.random.key(0), (4, 2)))
    >>> _, trace, _ = engine.run(jax.random.key(1), state, kernel, logdensity, num_draws=10)
    >>> trace.position.shape, trace.chain_major().position.shape      # (draw, chain, D) -> (chain, draw, D)
    ((10, 4, 2), (4, 10, 2))
    """

    position: Array
    logdensity: Array

    def chain_major(self) -> "Trace":
        return Trace(jnp.swapaxes(self.position, 0, 1), jnp.swapaxes(self.logdensity, 0, 1))


class Carrying:
    """A log density of one position and ``values_fn``, values of the same position (a pytree of arrays) that a
    kernel with ``carries_values`` computes beside it at every proposal and keeps with the accepted state.

    Where the values share the log density's work (G(x) inside −G(x)/τ + log prior(x)), XLA computes it once:
    G at every kept draw costs nothing more, where evaluating it again at the accepted positions cost 21% of a
    MALA run (sample() recording G, d = 50 MLP probe, 2,048 chains, 2 CPU cores). Equal for equal functions
    (hashable: a static argument of compiled programs)."""

    def __init__(self, logdensity_fn: FlatLogDensity, values_fn: Callable[[Array], Any]):
        self.logdensity_fn, self.values_fn = logdensity_fn, values_fn

    def value(self, positions: Array) -> tuple[Array, Any]:
        """``(log densities (C,), values)`` at ``positions`` ``(C, D)``, one evaluation each (no gradient)."""
        typed = in_positions_dtype(self.logdensity_fn)
        return map_points(lambda position: (typed(position), self.values_fn(position)), positions)

    def value_and_grad(self, positions: Array) -> tuple[tuple[Array, Any], Array]:
        """``((log densities (C,), values), gradients (C, D))`` at ``positions`` ``(C, D)``, one evaluation each."""
        typed = in_positions_dtype(self.logdensity_fn)
        return map_points(jax.value_and_grad(lambda position: (typed(position), self.values_fn(position)),
                                             has_aux=True), positions)

    def __hash__(self) -> int:
        return hash(("carrying", self.logdensity_fn, self.values_fn))

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, Carrying) and self.logdensity_fn == other.logdensity_fn
                and self.values_fn == other.values_fn)


def default_parameters(kernel: Kernel, num_chains: int, dim: int, dtype: Any, step_size: Any = None,
                       inverse_mass_matrix: Any = None, num_leapfrog_steps: Any = None) -> dict[str, Array]:
    """Kernel parameters for ``kernel``: given values, else defaults (``kernel.default_parameters``).

    ``step_size`` stays a scalar when given as one (shared by all chains) or is
    ``(C,)``; ``inverse_mass_matrix`` is broadcast to ``(C, D)`` for kernels that have one;
    ``num_leapfrog_steps`` (a kernel parameter of ``ChEES``) is passed on only when given.

    Examples
    --------
    >>> from jaxprobe import engine
    >>> parameters = engine.default_parameters(engine.make_kernel("hmc"), 4, 3, jnp.float32, step_size=0.1)
    >>> sorted(parameters), parameters["inverse_mass_matrix"].shape
    (['inverse_mass_matrix', 'step_size'], (4, 3))
    """
    extra = {} if num_leapfrog_steps is None else {"num_leapfrog_steps": num_leapfrog_steps}
    return kernel.default_parameters(num_chains, dim, dtype, step_size, inverse_mass_matrix, **extra)


def init(kernel: Any, logdensity_fn: FlatLogDensity, positions: Array,
         parameters: dict[str, Array] | None = None) -> EngineState:
    """Build the engine state of all chains.

    Parameters
    ----------
    kernel
        A kernel configuration from :mod:`jaxprobe.engine.kernels` (e.g. ``MALA()``).
    logdensity_fn
        Log density of one flat position ``(D,)`` → scalar.
    positions
        Initial positions, shape ``(C, D)``.
    parameters
        Per-chain kernel parameters; defaults from :func:`default_parameters`.

    Examples
    --------
    >>> from jaxprobe import engine
    >>> kernel = engine.make_kernel("mala")
    >>> logdensity = jaxprobe.priors.StandardNormal()          # one position (2,) -> scalar
    >>> positions = jax.random.normal(jax.random.key(0), (4, 2))  # 4 chains
    >>> state = engine.init(kernel, logdensity, positions,
    ...                     engine.default_parameters(kernel, 4, 2, jnp.float32, step_size=0.5))
    >>> state.kernel_state.position.shape, float(state.parameters["step_size"])
    ((4, 2), 0.5)
    """
    num_chains, dim = positions.shape
    if parameters is None:
        parameters = default_parameters(kernel, num_chains, dim, positions.dtype)
    return EngineState(kernel.init(positions, logdensity_fn), parameters, jnp.zeros((), jnp.int32))


def _transition(kernel, logdensity_fn, rng_key, state):
    step_key = jax.random.fold_in(rng_key, state.step)
    kernel_state, info = kernel.step(step_key, state.kernel_state, state.parameters, logdensity_fn)
    return EngineState(kernel_state, state.parameters, state.step + 1), info


def _check_draws(num_draws: Any, thin: Any) -> tuple[int, int]:
    """``num_draws`` and ``thin`` as static ints >= 1 (checked before tracing: a bad one is named)."""
    return check_int(num_draws, "num_draws", minimum=1), check_int(thin, "thin", minimum=1)


def _scan_draws(rng_key, state, kernel, logdensity_fn, num_draws, thin, on_draw, carry):
    """The one scan of a run: ``num_draws * thin`` transitions; after every ``thin``-th,
    ``(carry, output) = on_draw(carry, draw, kernel_state)`` with ``draw`` the kept draw's index in this call.
    Returns ``(state, carry, outputs stacked by the scan, RunStats)``. Keys ``fold_in(rng_key, t)`` for the
    global step t are derived for the whole call in one batched call before the scan."""
    num_draws, thin = _check_draws(num_draws, thin)
    position = state.kernel_state.position
    stats0 = RunStats.zeros(position.shape[0], position.dtype)
    steps = state.step + jnp.arange(num_draws * thin, dtype=jnp.int32).reshape(num_draws, thin)
    step_keys = jax.vmap(jax.vmap(lambda t: jax.random.fold_in(rng_key, t)))(steps)

    def transition(inner, step_key):
        state, stats = inner
        kernel_state, info = kernel.step(step_key, state.kernel_state, state.parameters, logdensity_fn)
        return (EngineState(kernel_state, state.parameters, state.step + 1), stats.add(info)), None

    def one_draw(outer, inputs):
        keys, draw = inputs
        inner, carry = outer
        if thin == 1:
            inner, _ = transition(inner, keys[0])
        else:
            inner, _ = jax.lax.scan(transition, inner, keys)
        carry, output = on_draw(carry, draw, inner[0].kernel_state)
        return (inner, carry), output

    ((state, stats), carry), outputs = jax.lax.scan(one_draw, ((state, stats0), carry),
                                                     (step_keys, jnp.arange(num_draws, dtype=jnp.int32)))
    return state, carry, outputs, stats


def _write_draw(trace: Trace, draw: Array, kernel_state: Any, position: Array | None = None) -> Trace:
    """Kept draw ``draw`` written into row ``draw`` of the buffers (in place when they are donated): its
    positions ``(C, D)``, or what the run records of them, ``position`` ``(C, D')``."""
    position = kernel_state.position if position is None else position
    return Trace(
        jax.lax.dynamic_update_index_in_dim(trace.position, position.astype(trace.position.dtype), draw, 0),
        jax.lax.dynamic_update_index_in_dim(trace.logdensity,
                                            kernel_state.logdensity.astype(trace.logdensity.dtype), draw, 0))


def _check_trace(trace: Trace, num_draws: int, position: Array, at_least: bool = False) -> None:
    """``trace`` rows ``num_draws`` (or, ``at_least``, a whole run's buffer of ``num_draws`` or more) of
    ``(C, D)`` positions and ``(C,)`` log densities."""
    expected = ((num_draws,) + position.shape, (num_draws, position.shape[0]))
    got = (tuple(trace.position.shape), tuple(trace.logdensity.shape))
    rows_ok = got[0][0] == got[1][0] and (got[0][0] >= num_draws if at_least else got[0][0] == num_draws)
    if not rows_ok or got[0][1:] != expected[0][1:] or got[1][1:] != expected[1][1:]:
        raise ValueError(f"trace must have shapes {expected} (num_draws, C, D) and (num_draws, C)"
                         f"{' or more rows' if at_least else ''}, got {got}")


def run(rng_key: PRNGKey, state: EngineState, kernel: Any, logdensity_fn: FlatLogDensity,
        num_draws: int, thin: int = 1, trace: Trace | None = None) -> tuple[EngineState, Trace, RunStats]:
    """Advance all chains by ``num_draws * thin`` transitions, keeping every ``thin``-th.

    Pure and jit-able (``kernel``, ``logdensity_fn``, ``num_draws`` and ``thin``
    are static; ``num_draws`` and ``thin`` are ints >= 1, else a TypeError/ValueError
    before tracing). Only kept draws are stored: memory is ``O(num_draws · C · D)``
    whatever ``thin`` is. The per-step keys ``fold_in(rng_key, t)`` are derived
    for the whole run in one batched call before the scan. ``rng_key``: a
    ``jax.random.key`` or an int seed (as :func:`jaxprobe.sample` takes).

    ``trace``: optional buffers to write the kept draws into, ``position``
    ``(num_draws, C, D)`` and ``logdensity`` ``(num_draws, C)`` (their contents are
    overwritten). Donate them to the enclosing ``jax.jit`` (``donate_argnames``)
    and pass the returned trace back in on the next call, once its draws are
    copied out: the draws are then written in place, with no fresh allocation
    and no zero-fill of the output per call. On CPU that is 5-8% of a MALA step
    at ``thin=1`` (page faults of a new buffer on every call). Without it, the
    scan stacks the draws into a new buffer.

    Parameters that change between calls (a model trained in the same loop) belong in
    ``logdensity_fn``'s closure only if the state is rebuilt with :func:`init` after each change:
    ``state`` caches the log density (and its gradient) at the chains' positions, which the next
    accept test compares against. Pass changing parameters through :func:`refresh` instead.

    Returns
    -------
    (state, trace, stats)
        The state after the last transition; the kept draws in scan layout
        ``(draw, chain, D)`` (``trace.chain_major()`` gives ``(chain, draw, D)``);
        and per-chain sums over all transitions.

    Examples
    --------
    >>> from jaxprobe import engine
    >>> kernel, logdensity = engine.make_kernel("mala"), jaxprobe.priors.StandardNormal()
    >>> state = engine.init(kernel, logdensity, jax.random.normal(jax.random.key(0), (4, 2)),
    ...                     engine.default_parameters(kernel, 4, 2, jnp.float32, step_size=0.5))
    >>> state, trace, stats = engine.run(jax.random.key(1), state, kernel, logdensity, num_draws=100)
    >>> trace.position.shape, trace.logdensity.shape                 # (draw, chain, ...)
    ((100, 4, 2), (100, 4))
    >>> int(stats.num_steps), bool(jnp.all(stats.num_accepted > 0))
    (100, True)
    """
    rng_key = canonicalize_key(rng_key)
    num_draws, thin = _check_draws(num_draws, thin)
    if trace is not None:
        _check_trace(trace, num_draws, state.kernel_state.position)
        state, trace, _, stats = _scan_draws(rng_key, state, kernel, logdensity_fn, num_draws, thin,
                                             lambda buffers, draw, ks: (_write_draw(buffers, draw, ks), None), trace)
        return state, trace, stats
    state, _, (positions, logdensities), stats = _scan_draws(
        rng_key, state, kernel, logdensity_fn, num_draws, thin,
        lambda carry, draw, ks: (carry, (ks.position, ks.logdensity)), None)
    return state, Trace(positions, logdensities), stats


def run_monitored(rng_key: PRNGKey, state: EngineState, kernel: Any, logdensity_fn: FlatLogDensity,
                  num_draws: int, thin: int, monitor: streaming.Monitor, monitored: Any, first_draw: Array,
                  trace: Trace | None = None, keep_draws: bool = True,
                  record: Callable[..., Array] | None = None, trace_start: Array | int = 0,
                  carried: Callable[[Array], dict[str, Array]] | None = None
                  ) -> tuple[EngineState, Trace | None, RunStats, Any]:
    """:func:`run` that also folds every kept draw into ``monitored`` (the verdict's statistics and the
    observables of :mod:`jaxprobe.engine.streaming`) inside the scan: nothing is computed after the run
    from the draws, and with ``keep_draws=False`` no draw is stored (memory ``O(C·D)``).

    ``monitored``: :func:`jaxprobe.engine.streaming.init_stats` or the value a previous chunk returned;
    ``first_draw``: the index in the whole run of this call's first kept draw (``monitor.num_draws`` is
    the whole run's). ``trace``: buffers of ``num_draws`` or more rows (donated), this call's draws written
    from row ``trace_start`` on (a traced int: one program for every chunk of a run that writes one
    whole-run buffer). ``record`` (with ``keep_draws``): what the trace keeps of each kept draw's positions
    ``(C, D)``, e.g. the map to data space, so that the draws are stored once, already transformed (default:
    the positions themselves); with ``trace``, one array ``(C, D')`` that the buffers' rows hold. ``carried``: a
    function of one position ``(D,)`` → a dict of values (e.g. ``{"probe": G(x)}``) read at each kept draw:
    ``record(positions, values)`` then takes them beside the positions, and an observable of ``monitor`` named
    like one of them is folded from it, not evaluated again. A kernel that ``carries_values`` (MALA, RWMH) computes
    them beside the log density at every proposal (:class:`Carrying`: once, where they share its work) and keeps
    them with the accepted state; for the others they are evaluated at the kept draws. Returns
    ``(state, trace or None, stats, monitored)``.

    Examples
    --------
    >>> from jaxprobe import engine
    >>> from jaxprobe.engine import streaming
    >>> kernel, logdensity = engine.make_kernel("mala"), jaxprobe.priors.StandardNormal()
    >>> state = engine.init(kernel, logdensity, jax.random.normal(jax.random.key(0), (4, 2)))
    >>> monitor = streaming.Monitor(num_chains=4, dim=2, num_draws=400, observables=(("x0", lambda x: x[0]),))
    >>> monitored = streaming.init_stats(monitor, jnp.float32)
    >>> state, trace, stats, (draw_stats, observables) = engine.run_monitored(
    ...     jax.random.key(1), state, kernel, logdensity, 400, 1, monitor, monitored, first_draw=0)
    >>> estimate = streaming.observed(observables["x0"])      # E[x₀] = 0, folded in as the scan ran
    >>> bool(abs(estimate.mean) < 4 * estimate.mcse)          # within 4 Monte-Carlo standard errors of 0
    True
    >>> bool(jnp.isclose(estimate.mean, trace.position[..., 0].mean(), atol=1e-5))   # the kept draws' mean
    True
    """
    num_draws, thin = _check_draws(num_draws, thin)
    if record is not None and not keep_draws:
        raise ValueError("record applies to kept draws (keep_draws=True)")
    step_logdensity = logdensity_fn
    carrying = carried is not None and getattr(kernel, "carries_values", False)
    if carrying:  # the values from each proposal's evaluation
        step_logdensity = Carrying(logdensity_fn, carried)
        state = EngineState(kernel.carry(state.kernel_state, step_logdensity), state.parameters, state.step)
        values_at = lambda ks: ks.carried  # noqa: E731
    elif carried is not None:  # evaluated at the kept draws
        values_at = lambda ks: map_points(carried, ks.position)  # noqa: E731
    else:
        values_at = lambda ks: None  # noqa: E731

    def recorded(ks, values):  # what a kept draw stores
        if record is None:
            return ks.position
        return record(ks.position) if carried is None else record(ks.position, values)

    def fold(carry, draw, ks, values):
        return streaming.fold_draw(monitor, carry, first_draw + draw, ks.position, ks.logdensity, values)

    if trace is not None:
        position = state.kernel_state.position
        stored = position if record is None else jax.eval_shape(
            lambda ks: recorded(ks, values_at(ks)), state.kernel_state)
        _check_trace(trace, num_draws, stored, at_least=True)

        def on_draw(carry, draw, ks):
            buffers, monitored = carry
            values = values_at(ks)
            return (_write_draw(buffers, trace_start + draw, ks, recorded(ks, values)),
                    fold(monitored, draw, ks, values)), None

        state, (trace, monitored), _, stats = _scan_draws(rng_key, state, kernel, step_logdensity, num_draws, thin,
                                                          on_draw, (trace, monitored))
    elif keep_draws:
        def on_draw(carry, draw, ks):
            values = values_at(ks)
            return fold(carry, draw, ks, values), (recorded(ks, values), ks.logdensity)

        state, monitored, (positions, logdensities), stats = _scan_draws(
            rng_key, state, kernel, step_logdensity, num_draws, thin, on_draw, monitored)
        trace = Trace(positions, logdensities)
    else:
        state, monitored, _, stats = _scan_draws(
            rng_key, state, kernel, step_logdensity, num_draws, thin,
            lambda carry, draw, ks: (fold(carry, draw, ks, values_at(ks)), None), monitored)
        trace = None
    if carrying:
        state = EngineState(kernel.uncarry(state.kernel_state), state.parameters, state.step)
    return state, trace, stats, monitored


#: Int seeds are 64-bit words: 0 <= seed < 2**64.
SEED_LIMIT = 2**64


def _is_int_seed(rng_key: Any) -> bool:
    """An int, a NumPy integer or a concrete 0-d integer array (not a bool, not a key, not traced)."""
    if isinstance(rng_key, (bool, np.bool_)):
        return False
    if isinstance(rng_key, (int, np.integer)):
        return True
    return (isinstance(rng_key, (np.ndarray, jax.Array)) and not isinstance(rng_key, jax.core.Tracer)
            and np.shape(rng_key) == () and jnp.issubdtype(rng_key.dtype, jnp.integer))


def _key_from_seed(rng_key: Any) -> PRNGKey:
    """The key of an int seed in [0, 2**64): ``jax.random.key(seed)`` below 2**32; above, the Threefry key
    whose data is the seed's (high, low) 32-bit halves, which is what ``jax.random.key`` gives under
    ``jax_enable_x64`` (without x64 JAX would keep only the low 32 bits, so that 2**32 and 0 drew alike)."""
    seed = int(np.asarray(rng_key).item()) if not isinstance(rng_key, int) else rng_key
    if not 0 <= seed < SEED_LIMIT:
        raise ValueError(f"rng_key must be an int seed in [0, 2**64 - 1] or a jax.random.key, got {seed}")
    if seed < 2**32:
        return jax.random.key(seed)
    if str(jax.config.jax_default_prng_impl) != "threefry2x32":
        raise ValueError(f"rng_key={seed}: seeds of 2**32 or more need JAX's default threefry2x32 keys (this "
                         f"process uses {jax.config.jax_default_prng_impl}); pass a seed below 2**32 or a "
                         "jax.random.key")
    return jax.random.wrap_key_data(np.array([seed >> 32, seed & 0xFFFFFFFF], np.uint32))


def canonicalize_key(rng_key: Any) -> PRNGKey:
    """Accept an int seed in [0, 2**64) (a NumPy integer or 0-d integer array too), a typed key or a legacy
    uint32[2] key (also traced, inside a user's jit); return a typed key. A seed out of range is a
    ValueError naming ``rng_key`` (the same seed gives the same key with and without ``jax_enable_x64``).

    Examples
    --------
    >>> key = canonicalize_key(0)                              # an int seed gives a typed key
    >>> jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    True
    >>> bool(jnp.all(jax.random.key_data(canonicalize_key(jax.random.key(0))) == jax.random.key_data(key)))
    True
    """
    if _is_int_seed(rng_key):
        return _key_from_seed(rng_key)
    if isinstance(rng_key, jax.Array) and jnp.issubdtype(rng_key.dtype, jax.dtypes.prng_key):
        if rng_key.shape != ():
            raise ValueError(f"rng_key must be a single key, got a key array of shape {rng_key.shape}")
        return rng_key
    array = np.asarray(rng_key) if not isinstance(rng_key, jax.Array) else rng_key
    if array.dtype == np.uint32 and array.shape == (2,):
        return jax.random.wrap_key_data(jnp.asarray(array))
    raise TypeError(f"rng_key must be an int seed or a jax.random.key, got {type(rng_key).__name__}")


def refresh(state: EngineState, kernel: Any, logdensity_fn: FlatLogDensity) -> EngineState:
    """``state`` with its cached log density (and gradient) recomputed for ``logdensity_fn``, keeping the
    positions, parameters and step counter. Call it whenever the log density changed since ``state`` was
    made (the parameters of a model trained between sampling steps): the accept test compares a proposal
    with the cached value, so a stale one biases every step after the change.

    Examples
    --------
    >>> from jaxprobe import engine
    >>> kernel = engine.make_kernel("mala")
    >>> state = engine.init(kernel, jaxprobe.priors.StandardNormal(), jnp.zeros((4, 2)))
    >>> shifted = jaxprobe.priors.DiagonalGaussian(jnp.ones(2), jnp.ones(2))   # the density changed (a trained model)
    >>> state = refresh(state, kernel, shifted)                       # the cached log density follows it
    >>> bool(jnp.allclose(state.kernel_state.logdensity, shifted(jnp.zeros(2))))
    True
    """
    return EngineState(kernel.init(state.kernel_state.position, logdensity_fn), state.parameters, state.step)


# ---------------------------------------------------------------- warmup


class _Welford(NamedTuple):
    mean: Array  # (C, D)
    m2: Array  # (C, D)
    count: Array  # ()


class WarmupState(NamedTuple):
    """Engine state plus step-size (dual averaging) and mass-matrix (Welford) statistics.

    With ``shared=False`` the dual-averaging leaves have shape ``(C,)`` (one step
    size per chain); with ``shared=True`` they are scalars driven by the mean
    acceptance rate over chains. Welford statistics are always per chain ``(C, D)``;
    in shared mode they are pooled across chains at the end of each window. Means and
    sums over chains follow the kernel's numerics policy (a fixed pairwise tree in the
    reproducible mode, ``jnp.mean``/``jnp.sum`` in the fast one).

    Examples
    --------
    >>> from jaxprobe import engine
    >>> kernel, logdensity = engine.make_kernel("mala"), jaxprobe.priors.StandardNormal()
    >>> state = engine.init(kernel, logdensity, jax.random.normal(jax.random.key(0), (4, 2)))
    >>> warmup_state = warmup_init(state, kernel)                      # warmup in pieces: init, run..., final
    >>> is_slow, is_window_end = warmup_schedule(kernel, 50)
    >>> warmup_state.engine.kernel_state.position.shape, warmup_state.welford.mean.shape   # per-chain statistics
    ((4, 2), (4, 2))
    """

    engine: EngineState
    dual_averaging: Any
    welford: _Welford


def warmup_schedule(kernel: Any, num_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Stan's windowed schedule (BlackJAX's ``build_schedule``) as two arrays ``(num_steps,)``.

    Returns ``(is_slow, is_window_end)``: in slow steps the mass matrix statistics
    are accumulated; at a window end the inverse mass matrix is updated and step
    size adaptation restarts. Kernels without a mass matrix only have fast steps.

    Examples
    --------
    >>> from jaxprobe import engine
    >>> is_slow, is_window_end = warmup_schedule(engine.make_kernel("hmc"), 100)   # HMC adapts a mass matrix
    >>> is_slow.shape, int(is_slow.sum()) > 0, int(is_window_end.sum()) > 0
    ((100,), True, True)
    >>> int(warmup_schedule(engine.make_kernel("mala"), 100)[0].sum())             # MALA: step size only
    0
    """
    if num_steps == 0:
        return np.zeros((0,), bool), np.zeros((0,), bool)
    if not kernel.adapts_mass_matrix:
        return np.zeros((num_steps,), bool), np.zeros((num_steps,), bool)
    with jax.ensure_compile_time_eval():  # a constant even when called under jit
        schedule = np.asarray(build_schedule(num_steps), dtype=np.int64).reshape(num_steps, 2)
    return schedule[:, 0] == 1, schedule[:, 1] == 1


def _dual_typed(dual: Any, dtype: Any) -> Any:
    """The dual-averaging state with fixed types: real fields in the positions' ``dtype``, the step count in
    JAX's default integer type (int64 under ``jax_enable_x64``, as BlackJAX's update returns it).

    BlackJAX starts some fields as Python or weak-typed scalars and its update promotes to the default float
    (float64 under ``jax_enable_x64``, whatever the positions' dtype). The scan carry must keep one type, and
    the adaptation slices one signature (one compile), so every state is cast here (values unchanged when
    the dtypes already agree)."""
    def typed(field):
        field = jnp.asarray(field)
        return field.astype(dtype if jnp.issubdtype(field.dtype, jnp.floating)
                            else jax.dtypes.canonicalize_dtype(jnp.int64))

    return jax.tree.map(typed, dual)


def warmup_init(state: EngineState, kernel: Any, target_acceptance_rate: float | None = None,
                shared: bool = False) -> WarmupState:
    """Start adaptation from the current parameters of ``state``.

    Examples
    --------
    >>> from jaxprobe import engine
    >>> kernel, logdensity = engine.make_kernel("mala"), jaxprobe.priors.StandardNormal()
    >>> state = engine.init(kernel, logdensity, jax.random.normal(jax.random.key(0), (4, 2)))
    >>> warmup_state = warmup_init(state, kernel)                      # warmup in pieces: init, run..., final
    >>> is_slow, is_window_end = warmup_schedule(kernel, 50)
    >>> warmup_state, stats = warmup_run(jax.random.key(1), warmup_state, kernel, logdensity, is_slow, is_window_end)
    >>> state = warmup_final(warmup_state)
    >>> state.parameters["step_size"].shape, int(state.step)           # per-chain step sizes; counter reset
    ((4,), 0)
    """
    target = kernel.target_acceptance_rate if target_acceptance_rate is None else target_acceptance_rate
    da_init, _, _ = dual_averaging_adaptation(target)
    step_size = state.parameters["step_size"]
    num_chains = state.kernel_state.position.shape[0]
    per_chain = jnp.broadcast_to(step_size, (num_chains,))
    dual = da_init(numerics_of(kernel).chain_mean(per_chain)) if shared else jax.vmap(da_init)(per_chain)
    position = state.kernel_state.position
    dual = _dual_typed(dual, position.dtype)
    parameters = dict(state.parameters)
    parameters["step_size"] = jnp.exp(dual.log_step_size).astype(position.dtype)  # () shared, (C,) per chain
    state = EngineState(state.kernel_state, parameters, state.step)
    zeros = jnp.zeros_like(position)
    return WarmupState(state, dual, _Welford(zeros, zeros, jnp.zeros((), position.dtype)))


def _regularized_variance(welford: _Welford, shared: bool, numerics: Numerics) -> Array:
    """Stan's regularized variance estimate: (n/(n+5)) var + 1e-3 · 5/(n+5), per chain or pooled (the sums over
    chains as ``numerics`` makes them)."""
    count = welford.count
    if shared:
        num_chains = welford.mean.shape[0]
        pooled_mean = numerics.chain_mean(welford.mean)
        # Chan et al.'s merge of equal-size per-chain Welford states.
        m2 = numerics.chain_sum(welford.m2) + count * numerics.chain_sum((welford.mean - pooled_mean) ** 2)
        n = count * num_chains
        variance = jnp.broadcast_to(m2 / jnp.maximum(n - 1, 1), welford.mean.shape)
    else:
        n = count
        variance = welford.m2 / jnp.maximum(n - 1, 1)
    return (n / (n + 5.0)) * variance + 1e-3 * (5.0 / (n + 5.0))


def warmup_run(rng_key: PRNGKey, warmup_state: WarmupState, kernel: Any, logdensity_fn: FlatLogDensity,
               is_slow: Array, is_window_end: Array, target_acceptance_rate: float | None = None,
               shared: bool = False) -> tuple[WarmupState, RunStats]:
    """Run ``len(is_slow)`` adaptation transitions (a slice of :func:`warmup_schedule`).

    Step ``t`` uses ``fold_in(rng_key, t)`` with ``t`` the global warmup step, so
    warmup in chunks equals warmup in one piece.

    Examples
    --------
    >>> from jaxprobe import engine
    >>> kernel, logdensity = engine.make_kernel("mala"), jaxprobe.priors.StandardNormal()
    >>> state = engine.init(kernel, logdensity, jax.random.normal(jax.random.key(0), (4, 2)))
    >>> warmup_state = warmup_init(state, kernel)                      # warmup in pieces: init, run..., final
    >>> is_slow, is_window_end = warmup_schedule(kernel, 50)
    >>> first, _ = warmup_run(jax.random.key(1), warmup_state, kernel, logdensity, is_slow[:25], is_window_end[:25])
    >>> both, _ = warmup_run(jax.random.key(1), first, kernel, logdensity, is_slow[25:], is_window_end[25:])
    >>> whole, _ = warmup_run(jax.random.key(1), warmup_state, kernel, logdensity, is_slow, is_window_end)
    >>> bool(jnp.allclose(warmup_final(both).parameters["step_size"], warmup_final(whole).parameters["step_size"]))
    True
    """
    rng_key = canonicalize_key(rng_key)
    target = kernel.target_acceptance_rate if target_acceptance_rate is None else target_acceptance_rate
    da_init, da_update, _ = dual_averaging_adaptation(target)
    numerics = numerics_of(kernel)
    position0 = warmup_state.engine.kernel_state.position
    num_chains = position0.shape[0]
    stats0 = RunStats.zeros(num_chains, position0.dtype)

    def one_step(carry, schedule):
        slow, window_end = schedule
        (state, dual, welford), stats = carry
        state, info = _transition(kernel, logdensity_fn, rng_key, state)
        stats = stats.add(info)
        if shared:
            dual = da_update(dual, numerics.chain_mean(info.acceptance_rate))
        else:
            dual = jax.vmap(da_update)(dual, info.acceptance_rate)
        dual = _dual_typed(dual, position0.dtype)

        parameters = dict(state.parameters)
        if kernel.adapts_mass_matrix:
            position = state.kernel_state.position
            count = welford.count + 1
            delta = position - welford.mean
            mean = welford.mean + delta / count
            m2 = welford.m2 + delta * (position - mean)
            updated = _Welford(mean, m2, count)
            welford = jax.tree.map(lambda new, old: jnp.where(slow, new, old), updated, welford)
            new_imm = _regularized_variance(welford, shared, numerics)
            parameters["inverse_mass_matrix"] = jnp.where(window_end, new_imm, parameters["inverse_mass_matrix"])
            reset = _Welford(jnp.zeros_like(mean), jnp.zeros_like(m2), jnp.zeros_like(count))
            welford = jax.tree.map(lambda r, w: jnp.where(window_end, r, w), reset, welford)
            # Stan restarts dual averaging from the averaged step size after each window.
            restart = _dual_typed(da_init(jnp.exp(dual.log_step_size_avg)) if shared else jax.vmap(da_init)(
                jnp.exp(dual.log_step_size_avg)), position0.dtype)
            dual = jax.tree.map(lambda r, d: jnp.where(window_end, r, d), restart, dual)

        parameters["step_size"] = jnp.exp(dual.log_step_size).astype(position0.dtype)
        state = EngineState(state.kernel_state, parameters, state.step)
        return (WarmupState(state, dual, welford), stats), None

    (warmup_state, stats), _ = jax.lax.scan(one_step, (warmup_state, stats0), (is_slow, is_window_end))
    return warmup_state, stats


def warmup_final(warmup_state: WarmupState) -> EngineState:
    """The engine state to sample from: the averaged step size of dual averaging (Hoffman & Gelman 2014).

    Examples
    --------
    >>> from jaxprobe import engine
    >>> kernel, logdensity = engine.make_kernel("mala"), jaxprobe.priors.StandardNormal()
    >>> state = engine.init(kernel, logdensity, jax.random.normal(jax.random.key(0), (4, 2)))
    >>> warmup_state = warmup_init(state, kernel)                      # warmup in pieces: init, run..., final
    >>> is_slow, is_window_end = warmup_schedule(kernel, 50)
    >>> warmup_state, stats = warmup_run(jax.random.key(1), warmup_state, kernel, logdensity, is_slow, is_window_end)
    >>> state = warmup_final(warmup_state)                             # the averaged step size, to sample with
    >>> state.parameters["step_size"].shape, int(state.step)
    ((4,), 0)
    """
    state = warmup_state.engine
    parameters = dict(state.parameters)
    parameters["step_size"] = jnp.exp(warmup_state.dual_averaging.log_step_size_avg).astype(
        state.kernel_state.position.dtype)
    return EngineState(state.kernel_state, parameters, jnp.zeros((), jnp.int32))


@dataclasses.dataclass(frozen=True)
class WindowAdaptation:
    """Stan's windowed adaptation as an :class:`jaxprobe.engine.protocols.Adaptation`: dual averaging of
    the step size on the acceptance rate (Hoffman & Gelman 2014) and, for kernels that have one, a diagonal
    inverse mass matrix from Welford statistics in Stan's slow windows.

    ``target_acceptance_rate``: None for the kernel's own. ``shared``: one step size from the mean
    acceptance over chains and one mass matrix pooled over chains (else one per chain). Splittable:
    the schedule may be run in chunks (the progress bar of :func:`jaxprobe.sample`).

    Examples
    --------
    >>> from jaxprobe import engine
    >>> kernel, logdensity = engine.make_kernel("hmc"), jaxprobe.priors.StandardNormal()
    >>> state = engine.init(kernel, logdensity, jax.random.normal(jax.random.key(0), (4, 2)))
    >>> state, stats = adapt(jax.random.key(1), state, WindowAdaptation(kernel), logdensity, 100)
    >>> state.parameters["step_size"].shape, state.parameters["inverse_mass_matrix"].shape
    ((4,), (4, 2))
    """

    kernel: Kernel
    target_acceptance_rate: float | None = None
    shared: bool = False
    splittable: ClassVar[bool] = True

    def schedule(self, num_steps: int) -> tuple[np.ndarray, np.ndarray]:
        """``(is_slow, is_window_end)``, each ``(num_steps,)`` (:func:`warmup_schedule`)."""
        return warmup_schedule(self.kernel, num_steps)

    def init(self, state: EngineState, logdensity_fn: FlatLogDensity) -> WarmupState:
        del logdensity_fn
        return warmup_init(state, self.kernel, self.target_acceptance_rate, self.shared)

    def update(self, rng_key: PRNGKey, adaptation_state: WarmupState, logdensity_fn: FlatLogDensity,
               schedule: tuple[Array, Array]) -> tuple[WarmupState, RunStats]:
        is_slow, is_window_end = schedule
        return warmup_run(rng_key, adaptation_state, self.kernel, logdensity_fn, jnp.asarray(is_slow),
                          jnp.asarray(is_window_end), self.target_acceptance_rate, self.shared)

    def final(self, adaptation_state: WarmupState) -> EngineState:
        return warmup_final(adaptation_state)


def adapt(rng_key: PRNGKey, state: EngineState, adaptation: Adaptation, logdensity_fn: FlatLogDensity,
          num_steps: int) -> tuple[EngineState, RunStats]:
    """Run ``adaptation`` for ``num_steps`` warmup steps in one piece: init → update → final.

    Pure and jit-able (``adaptation``, ``logdensity_fn`` and ``num_steps`` static). Returns the
    adapted engine state (step counter reset to 0) and the warmup statistics ``(C,)``.

    Examples
    --------
    >>> from jaxprobe import engine
    >>> kernel, logdensity = engine.make_kernel("mala"), jaxprobe.priors.StandardNormal()
    >>> state = engine.init(kernel, logdensity, jax.random.normal(jax.random.key(0), (4, 2)))
    >>> state, stats = adapt(jax.random.key(1), state, WindowAdaptation(kernel, shared=True), logdensity, 50)
    >>> int(state.step), int(stats.num_steps)                 # warmup done in one piece; counter reset
    (0, 50)
    """
    rng_key = canonicalize_key(rng_key)
    schedule = jax.tree.map(jnp.asarray, adaptation.schedule(num_steps))
    adaptation_state = adaptation.init(state, logdensity_fn)
    adaptation_state, stats = adaptation.update(rng_key, adaptation_state, logdensity_fn, schedule)
    return adaptation.final(adaptation_state), stats


def prepare(rng_key: PRNGKey, state: EngineState, kernel: Kernel, logdensity_fn: FlatLogDensity, num_steps: int,
            adapt: bool = True, target_acceptance_rate: float | None = None, shared: bool = False) -> EngineState:
    """The warmup of a run in one piece, as :func:`jaxprobe.sample` makes it in chunks: ``adapt`` the
    kernel's parameters (:func:`warmup`), or with given parameters (``adapt=False``) ``num_steps`` of burn-in
    whose draws are discarded. Either way the step counter restarts at 0 for sampling.

    Examples
    --------
    >>> from jaxprobe import engine
    >>> kernel, logdensity = engine.make_kernel("mala"), jaxprobe.priors.StandardNormal()
    >>> state = engine.init(kernel, logdensity, jnp.full((4, 2), 5.0))          # far out in the tail
    >>> burned = prepare(jax.random.key(1), state, kernel, logdensity, 100, adapt=False)   # burn-in only
    >>> int(burned.step), bool(burned.parameters["step_size"] == state.parameters["step_size"])
    (0, True)
    >>> bool(jnp.all(jnp.abs(burned.kernel_state.position) < 3.0))              # moved towards the mode
    True
    """
    if num_steps == 0:
        return state
    if adapt:
        return warmup(rng_key, state, kernel, logdensity_fn, num_steps, target_acceptance_rate, shared)[0]
    state, _, _ = run(rng_key, state, kernel, logdensity_fn, 1, num_steps)
    return EngineState(state.kernel_state, state.parameters, jnp.zeros((), jnp.int32))


def warmup(rng_key: PRNGKey, state: EngineState, kernel: Kernel, logdensity_fn: FlatLogDensity, num_steps: int,
           target_acceptance_rate: float | None = None, shared: bool = False) -> tuple[EngineState, RunStats]:
    """Adapt ``kernel``'s parameters with its own warmup (``kernel.adaptation``) in one piece.

    Pure and jit-able (``kernel``, ``logdensity_fn``, ``num_steps`` static). For MALA, RWMH, HMC
    and NUTS: dual averaging on the acceptance rate (Hoffman & Gelman 2014) inside Stan's windowed
    schedule, and a diagonal inverse mass matrix for HMC/NUTS; for ChEES its cross-chain
    adaptation (:class:`jaxprobe.engine.chees.ChEESAdaptation`, ``shared`` has no effect). Returns
    the adapted engine state (step counter reset to 0) and warmup statistics.

    Examples
    --------
    >>> from jaxprobe import engine
    >>> kernel, logdensity = engine.make_kernel("mala"), jaxprobe.priors.StandardNormal()
    >>> state = engine.init(kernel, logdensity, jax.random.normal(jax.random.key(0), (4, 2)))
    >>> state, stats = engine.warmup(jax.random.key(2), state, kernel, logdensity, num_steps=100)
    >>> step_size = state.parameters["step_size"]                   # adapted per chain
    >>> step_size.shape, bool(jnp.all((step_size > 0.2) & (step_size < 5.0)))
    ((4,), True)
    """
    return adapt(rng_key, state, kernel.adaptation(target_acceptance_rate, shared), logdensity_fn, num_steps)
