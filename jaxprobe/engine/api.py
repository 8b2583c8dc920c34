"""``jaxprobe.sample``: many chains, one compiled program, chunks, progress, devices."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
import warnings
import weakref
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxprobe._compiles import Compiles
from jaxprobe._inputs import as_float_array, as_positions, check_int, check_number
from jaxprobe._pointwise import map_points
from jaxprobe.engine import core
from jaxprobe.engine.checkpoint import STAT_FIELDS as _STAT_FIELDS
from jaxprobe.engine.checkpoint import (CheckpointIfLong, CheckpointMismatchError, CheckpointWriter,
                                        HostDraws as _HostDraws)
from jaxprobe.engine.checkpoint import discard_unsaved, prepare as prepare_checkpoint, resume as resume_checkpoint
from jaxprobe.engine.checkpoint import run_identity
from jaxprobe.engine.core import canonicalize_key
from jaxprobe.engine.compiled import jit_bounded
from jaxprobe.engine.host import on_accelerator, to_device as _to_device, to_host
from jaxprobe.engine.numerics import check_numerics, resolve_numerics, with_numerics
from jaxprobe.engine.registry import known_sampler_starts_at_target, known_samplers, make_kernel
from jaxprobe.engine.samples import Samples
from jaxprobe.engine import estimates, streaming
from jaxprobe.engine.verdict import (CoordinateNames, Tempering, check_policy, report, start_range,
                                    verdict_from_statistics)
from jaxprobe.types import ArrayTree, LogDensityFn, PRNGKey

__all__ = ["sample", "canonicalize_key", "to_host", "chain_sharding", "known_samplers", "known_sampler_starts_at_target",
           "make_kernel", "compiled_program_count", "CheckpointMismatchError", "Progress"]


# CheckpointMismatchError: the checkpoint module's (jaxprobe.engine.checkpoint), importable from here as before.

STEP_SIZE_MODES = ("per_chain", "shared")


# known_samplers, known_sampler_starts_at_target and make_kernel: the registry's (jaxprobe.engine.registry).


# ------------------------------------------------------------------ pytree <-> flat (C, D)


class _Layout:
    """How a pytree of per-chain leaves maps to a flat ``(C, D)`` array and back."""

    def __init__(self, positions: ArrayTree):
        leaves, self.treedef = jax.tree_util.tree_flatten(positions)
        self.event_shapes = [tuple(np.shape(leaf)[1:]) for leaf in leaves]
        self.sizes = [int(np.prod(shape, dtype=np.int64)) for shape in self.event_shapes]
        self.dim = sum(self.sizes)

    def flatten_chains(self, positions: ArrayTree) -> np.ndarray | jax.Array:
        """Leaves ``(C, *event_shape)`` → ``(C, D)``: a JAX array, left on its accelerator, when every leaf is
        one there (no host round trip for a GPU user's starting points); else a NumPy array."""
        leaves = jax.tree_util.tree_leaves(positions)
        if all(on_accelerator(leaf) for leaf in leaves):
            flat = [leaf.reshape(leaf.shape[0], -1) for leaf in leaves]
            return flat[0] if len(flat) == 1 else jnp.concatenate(flat, axis=1)
        return np.concatenate([np.asarray(leaf).reshape(leaf.shape[0], -1) for leaf in leaves], axis=1)

    def unflatten_one(self, flat: jax.Array) -> ArrayTree:
        """``(D,)`` → one position pytree (traceable)."""
        pieces, start = [], 0
        for shape, size in zip(self.event_shapes, self.sizes):
            pieces.append(flat[start:start + size].reshape(shape))
            start += size
        return jax.tree_util.tree_unflatten(self.treedef, pieces)

    def unflatten_draws(self, flat: np.ndarray) -> ArrayTree:
        """``(C, N, D)`` → pytree with leaves ``(C, N, *event_shape)`` (NumPy)."""
        pieces, start = [], 0
        for shape, size in zip(self.event_shapes, self.sizes):
            pieces.append(flat[:, :, start:start + size].reshape(flat.shape[:2] + shape))
            start += size
        return jax.tree_util.tree_unflatten(self.treedef, pieces)


class _FlatLogDensity:
    """``logdensity_fn`` seen through a layout: a function of a flat ``(D,)`` position.

    Hashable by the wrapped function and layout, so that two ``sample`` calls
    with the same log density and shapes reuse one compiled program.
    """

    def __init__(self, logdensity_fn: LogDensityFn, layout: _Layout):
        self.logdensity_fn = logdensity_fn
        self.layout = layout
        self._key = (logdensity_fn, layout.treedef, tuple(layout.event_shapes))

    def __call__(self, flat: jax.Array) -> jax.Array:
        return self.logdensity_fn(self.layout.unflatten_one(flat))

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _FlatLogDensity) and self._key == other._key


# ------------------------------------------------------------------ validation


def check_settings(*, num_samples: Any, num_warmup: Any, thin: Any = 1, chunk_size: Any = None,
                   step_size_mode: Any = "per_chain", target_acceptance_rate: Any = None, step_size: Any = None,
                   num_chains: int | None = None, needs_step_size: bool = True
                   ) -> tuple[int, int, int, int | None, float | None]:
    """:func:`sample`'s run settings checked (a TypeError/ValueError naming the argument), for callers that
    must refuse them before compiling anything of their own (``generate`` draws starting points first).
    Returns ``(num_samples, num_warmup, thin, chunk_size, target_acceptance_rate)``; ``step_size`` is
    checked when ``num_chains`` is given (a positive number or one per chain). ``needs_step_size=False``: a sampler
    without a step size (Gibbs sweeps), for which ``num_warmup=0`` needs nothing more."""
    num_samples = check_int(num_samples, "num_samples", 1)
    num_warmup = check_int(num_warmup, "num_warmup", 0)
    thin = check_int(thin, "thin", 1)
    if chunk_size is not None:
        chunk_size = check_int(chunk_size, "chunk_size", 1)
    if step_size_mode not in STEP_SIZE_MODES:
        raise ValueError(f"step_size_mode must be one of {STEP_SIZE_MODES}, got {step_size_mode!r}")
    if target_acceptance_rate is not None:
        target_acceptance_rate = check_number(target_acceptance_rate, "target_acceptance_rate", minimum=0.0,
                                              maximum=1.0, exclusive_minimum=True, exclusive_maximum=True)
    if step_size is not None and num_chains is not None:
        _check_positive_array("step_size", step_size, num_chains, np.float64)
    if needs_step_size and step_size is None and num_warmup == 0:
        raise ValueError("num_warmup=0 needs an explicit step_size (nothing to adapt it with)")
    return num_samples, num_warmup, thin, chunk_size, target_acceptance_rate


def _check_positive_array(name: str, value: Any, num_chains: int, dtype: Any, trailing: tuple[int, ...] = ()) -> np.ndarray:
    array = as_float_array(value, name, finite=False)  # numbers only: a string "0.1" or True is refused
    allowed = {(), (num_chains,) + trailing} | ({trailing} if trailing else set())
    if array.shape not in allowed:
        raise ValueError(
            f"{name} must be a scalar or have shape {(num_chains,) + trailing} (one per chain), got {array.shape}"
        )
    if not np.all(np.isfinite(array)) or np.any(array <= 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return array.astype(dtype)


def _check_positions(initial_positions: ArrayTree) -> tuple[int, Any]:
    leaves = jax.tree_util.tree_leaves(initial_positions)
    if not leaves:
        raise ValueError("initial_positions is empty: pass an array of shape (num_chains, ...) or a pytree of them")
    dtypes = set()
    num_chains = None
    for path, leaf in jax.tree_util.tree_flatten_with_path(initial_positions)[0]:
        where = f"initial_positions{jax.tree_util.keystr(path)}"
        if not hasattr(leaf, "shape") or not hasattr(leaf, "dtype"):
            raise TypeError(f"{where} must be an array, got {type(leaf).__name__}")
        if leaf.ndim < 1:
            raise ValueError(f"{where} must have a leading chain axis (shape (num_chains, ...)), got a scalar")
        if not jnp.issubdtype(leaf.dtype, jnp.floating):  # as_positions cast numbers already: not numbers
            raise TypeError(f"{where} must hold real numbers (floats or ints), got dtype {leaf.dtype}")
        if num_chains is None:
            num_chains = leaf.shape[0]
        elif leaf.shape[0] != num_chains:
            raise ValueError(
                f"{where} has {leaf.shape[0]} chains on its leading axis but other leaves have {num_chains}"
            )
        if num_chains < 1:
            raise ValueError(f"{where} must hold at least one chain, got leading axis 0")
        dtypes.add(np.dtype(leaf.dtype))
        # An accelerator's array is checked there (one bool comes back); the host sees it only to name bad chains.
        if on_accelerator(leaf) and bool(jnp.all(jnp.isfinite(leaf))):
            continue
        values = np.asarray(leaf)
        if not np.all(np.isfinite(values)):
            bad = np.unique(np.nonzero(~np.isfinite(values.reshape(values.shape[0], -1)))[0])
            raise ValueError(f"{where} contains NaN or inf (chains {bad[:10].tolist()})")
    if len(dtypes) > 1:
        raise TypeError(f"initial_positions leaves must share one dtype, got {sorted(map(str, dtypes))}")
    return num_chains, dtypes.pop()


class _CheckedOnce:
    """What checking (or tracing) a function found, per signature (its input's shapes, structure and dtype), kept
    weakly by function: tracing one to check it costs ~1-10 ms (a few per call of a small run), paid once per
    function and signature. A function equal by value to one checked before (a question asked again) is found
    while that one lives (the compiled programs it is a static argument of hold it); one that is gone is
    forgotten. Functions neither weakly referable nor hashable are checked every time. A failed check is never
    remembered."""

    _MISSING = object()

    def __init__(self):
        self._found: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()

    def get(self, fn: Any, signature: Any) -> Any:
        """What the check of ``fn`` at ``signature`` found, or ``_CheckedOnce._MISSING``."""
        try:
            return self._found.get(fn, {}).get(signature, self._MISSING)
        except TypeError:
            return self._MISSING

    def put(self, fn: Any, signature: Any, found: Any) -> Any:
        try:
            self._found.setdefault(fn, {})[signature] = found
        except TypeError:
            pass
        return found


#: Log densities, observables and records checked (:class:`_CheckedOnce`).
_CHECKED = _CheckedOnce()


def _signature(layout: _Layout, dtype: Any) -> tuple:
    """What a check of a function of one position depends on besides the function."""
    return (tuple(layout.event_shapes), layout.treedef, np.dtype(dtype).name)


def _check_logdensity(logdensity_fn: Any, layout: _Layout, dtype: Any) -> None:
    if not callable(logdensity_fn):
        raise TypeError(f"logdensity_fn must be callable, got {type(logdensity_fn).__name__}")
    signature = ("logdensity",) + _signature(layout, dtype)
    if _CHECKED.get(logdensity_fn, signature) is _CheckedOnce._MISSING:
        _trace_logdensity(logdensity_fn, layout, dtype)
        _CHECKED.put(logdensity_fn, signature, True)


def _trace_logdensity(logdensity_fn: Any, layout: _Layout, dtype: Any) -> None:
    """Trace ``logdensity_fn`` on one chain's abstract position: a scalar float, or an error naming why not."""
    one_chain = jax.ShapeDtypeStruct((layout.dim,), dtype)
    try:
        out = jax.eval_shape(lambda flat: logdensity_fn(layout.unflatten_one(flat)), one_chain)
    except Exception as error:  # noqa: BLE001 - re-raised with the shapes that explain it
        shapes = [(-1,) + s for s in layout.event_shapes]
        raise ValueError(
            "logdensity_fn failed on one chain's position taken from initial_positions "
            f"(leaf shapes {[s[1:] for s in shapes]} after removing the leading chain axis); "
            "initial_positions must have shape (num_chains, *event_shape). "
            f"Original error: {type(error).__name__}: {error}"
        ) from error
    if not hasattr(out, "shape") or out.shape != ():
        raise ValueError(
            "logdensity_fn must return a scalar for one chain's position, "
            f"got shape {getattr(out, 'shape', type(out).__name__)}; it is called on ONE position "
            "(no chain axis); jaxprobe vmaps it over chains"
        )
    if not jnp.issubdtype(out.dtype, jnp.floating):
        raise TypeError(f"logdensity_fn must return a floating-point scalar, got dtype {out.dtype}")


def refuse_traced(entry_point: str, **arguments: Any) -> None:
    """A TypeError naming the engine's core when ``entry_point`` (a host-side front end: chunks, progress,
    checkpoints, a verdict) is called inside a user's ``jit``/``vmap``/``grad`` with traced arguments."""
    for name, value in arguments.items():
        if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(value)):
            raise TypeError(
                f"{entry_point} was called with a traced {name} (inside jax.jit, vmap or grad): it runs on the host "
                "in chunks, with a progress bar, checkpoints and a verdict, and cannot be traced. Inside compiled "
                "code use the pure engine: state = jaxprobe.engine.init(kernel, logdensity_fn, positions), "
                "jaxprobe.engine.warmup(key, state, kernel, logdensity_fn, num_steps), then "
                "jaxprobe.engine.run(key, state, kernel, logdensity_fn, num_draws) (kernel e.g. "
                "jaxprobe.engine.MALA(); after the log density's parameters change, jaxprobe.engine.refresh)")


class _FlatObservable:
    """An observable of one position pytree seen on a flat ``(D,)`` position (hashable by function and layout,
    like :class:`_FlatLogDensity`)."""

    def __init__(self, fn: Any, layout: _Layout):
        self.fn, self.layout = fn, layout
        self._key = (fn, layout.treedef, tuple(layout.event_shapes))

    def __call__(self, flat: jax.Array) -> Any:
        return self.fn(self.layout.unflatten_one(flat))

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _FlatObservable) and self._key == other._key


def _one_flat_position(layout: _Layout, dtype: Any) -> jax.ShapeDtypeStruct:
    """One chain's flat position ``(D,)``, abstract: what ``observables`` and ``record`` are checked on (traced,
    as the log density is; a check depends on shapes and dtypes, never on the values)."""
    return jax.ShapeDtypeStruct((layout.dim,), dtype)


def check_observables_form(observables: Any) -> dict[str, Any]:
    """``observables`` as a dict ``{"name": fn}`` (``{}`` for None): a dict of non-empty string names to
    callables, else a TypeError naming the observable; what can be checked before the positions' shapes are
    known (:func:`check_observables` then traces each function on one position)."""
    if observables is None:
        return {}
    if not isinstance(observables, dict):
        raise TypeError(f"observables must be a dict of name -> function of one position, got "
                        f"{type(observables).__name__}")
    for name in sorted(observables, key=str):
        if not isinstance(name, str) or not name:
            raise TypeError(f"observables keys must be non-empty strings, got {name!r}")
        if not callable(observables[name]):
            raise TypeError(f"observables[{name!r}] must be a function of one position, got "
                            f"{type(observables[name]).__name__}")
    return dict(observables)


def check_observables(observables: Any, layout: _Layout | int, dtype: Any) -> tuple[tuple[str, Any], ...]:
    """``observables`` (``{"name": fn}`` of one position) checked on one chain's position, before anything
    compiles: each a callable returning a numeric array, without raising (:func:`check_observables_form`, then
    each traced abstractly, ``jax.eval_shape``, as the log density is: evaluating it eagerly compiled every one
    of its operations separately, seconds per call on a CPU). A function checked before at the same shapes is not
    traced again (:class:`_CheckedOnce`). ``layout``: the positions' layout, or ``d`` for flat positions ``(d,)``
    (a whole-run sampler's). Returns ``((name, fn of a flat position), ...)`` sorted by name."""
    observables = check_observables_form(observables)
    if isinstance(layout, (int, np.integer)):
        layout = _Layout(np.zeros((1, int(layout)), dtype))
    flat_first = _one_flat_position(layout, dtype)
    checked = []
    for name in sorted(observables, key=str):
        fn = observables[name]
        flat_fn = _FlatObservable(fn, layout)
        signature = ("observable",) + _signature(layout, dtype)
        if _CHECKED.get(fn, signature) is not _CheckedOnce._MISSING:
            checked.append((name, flat_fn))
            continue
        returned = []  # what fn returned while traced (its type and dtype are read below; nothing else)

        def traced(flat, flat_fn=flat_fn, returned=returned):
            returned.append(flat_fn(flat))
            return jnp.zeros(())

        try:
            jax.eval_shape(traced, flat_first)
            value = returned[0]
        except Exception as error:  # noqa: BLE001 - re-raised naming the observable
            raise ValueError(f"observables[{name!r}] failed on one chain's starting point (one position, no chain "
                             f"axis): {type(error).__name__}: {error}") from error
        dtype_of = getattr(value, "dtype", None) if not isinstance(value, (bool, int, float)) else np.float32
        if dtype_of is None or not (jnp.issubdtype(dtype_of, jnp.number) or jnp.issubdtype(dtype_of, jnp.bool_)):
            raise TypeError(f"observables[{name!r}] must return a numeric array (or a number), got "
                            f"{type(value).__name__}{'' if dtype_of is None else ' of dtype ' + str(dtype_of)}")
        _CHECKED.put(fn, signature, True)
        checked.append((name, flat_fn))
    return tuple(checked)


class _Batched:
    """``fn`` of one flat position applied to every chain's ``(C, D)`` (hashable by ``fn``: a static argument of
    the compiled chunk, equal for equal functions)."""

    def __init__(self, fn: Any):
        self.fn = fn

    def __call__(self, flat: jax.Array) -> jax.Array:
        return jax.vmap(self.fn)(flat)

    def __hash__(self) -> int:
        return hash(("batched", self.fn))

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _Batched) and self.fn == other.fn


def _check_record(record: Any, layout: _Layout, dtype: Any, keep_draws: bool) -> tuple[_Batched | None, int]:
    """``sample``'s ``record`` checked on one chain's position (traced abstractly, before anything compiles; once
    per function and shapes, :class:`_CheckedOnce`): a callable of one position returning a 1-D numeric array.
    Returns ``(record of the flat positions of all chains, or None; D' of a stored draw)``."""
    if record is None:
        return None, layout.dim
    if not callable(record):
        raise TypeError(f"record must be a function of one position (or None), got {type(record).__name__}")
    if not keep_draws:
        raise ValueError("record says what each kept draw stores: it needs keep_draws=True")
    flat_record = _FlatObservable(record, layout)
    signature = ("record",) + _signature(layout, dtype)
    record_dim = _CHECKED.get(record, signature)
    if record_dim is not _CheckedOnce._MISSING:
        return _Batched(flat_record), record_dim
    try:
        shape = jax.eval_shape(flat_record, _one_flat_position(layout, dtype))
    except Exception as error:  # noqa: BLE001 - re-raised naming the argument
        raise ValueError(f"record failed on one chain's starting point (one position, no chain axis): "
                         f"{type(error).__name__}: {error}") from error
    if not isinstance(shape, jax.ShapeDtypeStruct) or len(shape.shape) != 1 or not (
            jnp.issubdtype(shape.dtype, jnp.number) or jnp.issubdtype(shape.dtype, jnp.bool_)):
        raise TypeError(f"record must return a 1-D numeric array (D',) for one position, got "
                        f"{getattr(shape, 'shape', type(shape).__name__)} of dtype {getattr(shape, 'dtype', None)}")
    return _Batched(flat_record), _CHECKED.put(record, signature, int(shape.shape[0]))


# ------------------------------------------------------------------ devices


def chain_sharding(num_chains: int, devices: Any = None) -> NamedSharding:
    """A ``NamedSharding`` that splits the leading chain axis over a ``chains`` mesh axis.

    Uses all devices JAX sees (all hosts after ``jax.distributed.initialize()``);
    if ``num_chains`` is not a multiple of the device count, the largest count
    that divides it is used and a warning says so.

    Examples
    --------
    >>> sharding = chain_sharding(8)                            # all devices JAX sees (one CPU here or more)
    >>> sharding.spec[0], sharding.mesh.axis_names
    ('chains', ('chains',))
    """
    devices = list(jax.devices() if devices is None else devices)
    count = len(devices)
    while num_chains % count:
        count -= 1
    if count < len(devices):
        warnings.warn(
            f"{num_chains} chains do not split evenly over {len(devices)} devices; using {count}. "
            "Pass a multiple of the device count to use them all.",
            stacklevel=3,
        )
    mesh = Mesh(np.asarray(devices[:count]), ("chains",))
    return NamedSharding(mesh, PartitionSpec("chains"))


# to_host, _to_device: jaxprobe.engine.host's (imported above).


# ------------------------------------------------------------------ compiled pieces (cached by static args; the
# programs of the DEFAULT_MAXSIZE most recent questions are kept, older ones freed: see engine/compiled.py)


@jit_bounded(static_argnames=("kernel", "logdensity_fn"))
def _init(kernel, logdensity_fn, positions, parameters):
    return core.init(kernel, logdensity_fn, positions, parameters)


#: The steps of :func:`sample`, in the order it runs them: module-level functions it looks up at call time, so
#: that a profiler can wrap each with a timer (``jaxprobe.bench.answer_speed`` does). Each step ends synchronized
#: with the device, so a step's wall time is its own. Named here so that renaming a step breaks the profiler loudly.
SAMPLE_STEPS = ("_validate", "_place", "_adapt_or_resume", "_run_chunks", "_result")


@jit_bounded(static_argnames=("kernel", "logdensity_fn", "num_draws", "thin", "monitor", "keep_draws", "record"),
             donate_argnames=("trace",))
def _run_chunk(rng_key, state, monitored, first_draw, kernel, logdensity_fn, num_draws, thin, monitor, keep_draws,
               trace=None, trace_start=0, record=None):
    """One chunk of :func:`core.run_monitored`: the draws written into ``trace`` (donated buffers: a chunk's
    own, or the whole run's from row ``trace_start``) or not kept, every kept draw folded into ``monitored``
    (not donated: a checkpoint may still be writing the previous chunk's; it is ``O(C·D)``, so its copy costs
    nothing next to a chunk). At ``thin=1`` a kernel that ``carries_values`` (MALA, RWMH) computes the ``record`` of
    each proposal beside its log density (:class:`jaxprobe.engine.core.Carrying`): what the record shares with
    the log density (G(x) beside −G(x)/τ) is computed once, where a record of the kept draws computed it again
    (21% of a ``sample()`` recording G at 2,048 chains, d = 50). At ``thin > 1`` the record would be computed
    at every step for one kept draw in ``thin``: it is computed at the kept draws."""
    carried = None
    if record is not None and thin == 1 and getattr(kernel, "carries_values", False):
        one_position = record.fn
        carried = lambda position: {"record": one_position(position)}  # noqa: E731
        record = lambda positions, values: values["record"]  # noqa: E731
    return core.run_monitored(rng_key, state, kernel, logdensity_fn, num_draws, thin, monitor, monitored,
                              first_draw, trace, keep_draws, record=record, trace_start=trace_start, carried=carried)


@jit_bounded(static_argnames=("kernel", "logdensity_fn", "steps"))
def _burn_in(rng_key, state, kernel, logdensity_fn, steps):
    """``steps`` transitions with fixed parameters, nothing kept (warmup without adaptation)."""
    state, _, stats = core.run(rng_key, state, kernel, logdensity_fn, 1, steps)
    return state, stats


@jit_bounded(static_argnames=("fn",))
def _observe_particles(fn, particles):
    """An observable (a function of one flat position) at every particle ``(N, D)``."""
    return map_points(fn, particles)


@jit_bounded(static_argnames=("monitor",))
def _finalize(stats, monitor):
    """The verdict's device-side numbers (:func:`jaxprobe.engine.streaming.finalize`)."""
    return streaming.finalize(stats, monitor)


@jit_bounded(static_argnames=("adaptation", "logdensity_fn"))
def _adapt_init(adaptation, state, logdensity_fn):
    """``adaptation.init`` (any :class:`~jaxprobe.engine.protocols.Adaptation`)."""
    return adaptation.init(state, logdensity_fn)


@jit_bounded(static_argnames=("adaptation", "logdensity_fn"))
def _adapt_update(rng_key, adaptation_state, adaptation, logdensity_fn, schedule):
    """``adaptation.update`` on one chunk of its schedule (one program per chunk length)."""
    return adaptation.update(rng_key, adaptation_state, logdensity_fn, schedule)


@jit_bounded(static_argnames=("adaptation",))
def _adapt_final(adaptation, adaptation_state):
    return adaptation.final(adaptation_state)


def compiled_program_count() -> int:
    """How many programs the engine's jitted pieces have compiled in this process (grows by the programs a call
    compiled; programs freed with an evicted question still count).

    Examples
    --------
    >>> before = compiled_program_count()
    >>> prior = jaxprobe.priors.StandardNormal()
    >>> init = prior.sample(jax.random.key(0), 4, (2,))
    >>> _ = jaxprobe.sample(jax.random.key(1), prior, init, num_samples=500, num_warmup=200, progress=False)
    >>> after_first = compiled_program_count()
    >>> _ = jaxprobe.sample(jax.random.key(2), prior, init, num_samples=500, num_warmup=200, progress=False)
    >>> compiled_program_count() == after_first                        # the same question reuses its programs
    True
    """
    return sum(getattr(function, "_cache_size", lambda: 0)()  # a wrapped (test-patched) piece counts 0
               for function in (_init, _run_chunk, _burn_in, _finalize, _adapt_init, _adapt_update, _adapt_final))


class _Difference:
    """ℓ = log p − log r for a reference handed to ``sample`` with a plain target (hashable)."""

    def __init__(self, logdensity_fn: Any, reference: Any):
        self.logdensity_fn, self.reference = logdensity_fn, reference

    def __call__(self, position: Any) -> jax.Array:
        return self.logdensity_fn(position) - self.reference(position)

    def __hash__(self) -> int:
        return hash((self.logdensity_fn, self.reference))

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, _Difference) and self.logdensity_fn == other.logdensity_fn
                and self.reference == other.reference)


def _tempering_split(logdensity_fn: Any, reference: Any, layout: _Layout) -> tuple[Any, Any]:
    """(reference, tilt) of an SMC run, validated before anything compiles."""
    if reference is None:
        reference = getattr(logdensity_fn, "reference", None)
        tilt = getattr(logdensity_fn, "tilt", None)
        if reference is None or tilt is None:
            raise ValueError("sampler='smc' needs a reference to start from: pass reference= (a prior with "
                             ".sample(rng_key, n) and a log density) or sample a jaxprobe.Question")
    else:
        tilt = _Difference(logdensity_fn, reference)
    if not callable(reference) or not callable(getattr(reference, "sample", None)):
        raise TypeError(f"reference must be callable (its log density) and have .sample(rng_key, n), got "
                        f"{type(reference).__name__}")
    check = getattr(reference, "check", None)
    if callable(check):
        check()  # a Question's reference says here, before compiling, why it cannot be drawn
    return _FlatLogDensity(reference, layout), _FlatLogDensity(tilt, layout)


def _smc_start(rng_key, smc, reference, tilt, layout, num_chains, dtype, sharding):
    """Particles of a tempered SMC run from the reference to the target, placed like chains."""
    key_reference, key_tempering = jax.random.split(rng_key)
    drawn = reference.logdensity_fn.sample(key_reference, num_chains)
    drawn = jax.tree.map(lambda leaf: np.asarray(leaf), drawn)
    if layout.treedef.num_leaves == 1 and not isinstance(drawn, (list, tuple, dict)):
        drawn = [drawn]
    try:
        flat = layout.flatten_chains(jax.tree_util.tree_unflatten(layout.treedef, jax.tree_util.tree_leaves(drawn)))
    except Exception as error:  # noqa: BLE001 - explained
        raise ValueError(f"reference.sample(rng_key, {num_chains}) must return positions shaped like "
                         f"initial_positions: {error}") from error
    if flat.shape != (num_chains, layout.dim):
        raise ValueError(f"reference.sample(rng_key, {num_chains}) returned {flat.shape[1:]} coordinates per draw, "
                         f"the target has {layout.dim}")
    particles = _to_device(flat.astype(dtype), sharding)
    result = smc.start(key_tempering, reference, tilt, particles)
    return _to_device(to_host(result.particles), sharding), jax.tree.map(to_host, result)


def smc_evidence(result: Any) -> dict[str, Any]:
    """``Samples`` fields of an SMC run: log Z, its standard error, each group's log Ẑ_g (the groups' weights in
    every estimate, :func:`jaxprobe.engine.estimates.group_weights`), and log Z along the tempering path
    (stage λ_k is the question at temperature τ/λ_k: ``evidence_path["inverse_temperature"]`` holds λ_k,
    multiply τ by 1/λ_k for the temperatures)."""
    info = result.info
    stages = int(info.num_stages)
    return {
        "log_evidence": float(result.log_evidence),
        "log_evidence_se": float(result.log_evidence_se),
        "group_log_evidence": np.asarray(result.group_log_evidence, np.float64),  # the groups' weights
        "evidence_path": {
            "inverse_temperature": np.asarray(info.lambdas[:stages], np.float64),
            "log_evidence": np.asarray(info.log_evidence_path[:stages], np.float64),
            "log_evidence_se": np.asarray(info.log_evidence_path_se[:stages], np.float64),
        },
    }


def _chunks(total: int, size: int) -> list[int]:
    full, rest = divmod(total, size)
    return [size] * full + ([rest] if rest else [])


class Progress:
    """A tqdm bar updated between chunks (never from inside compiled code); nothing when not ``enabled``.

    Examples
    --------
    >>> bar = Progress(enabled=False, total=100, description="mala x4")   # progress=False: no bar at all
    >>> bar.update(10, acceptance=0.6, phase="warmup"); bar.close()
    >>> bar.bar is None
    True
    """

    def __init__(self, enabled: bool, total: int, description: str):
        self.bar = None
        if enabled and total > 0:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=description, unit="step", dynamic_ncols=True, leave=True)

    def update(self, steps: int, acceptance: float, phase: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(f"{phase} acc={acceptance:.3f}", refresh=False)
            self.bar.update(steps)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ------------------------------------------------------------------ public entry point


def sample(
    rng_key: Any,
    logdensity_fn: LogDensityFn,
    initial_positions: ArrayTree,
    *,
    sampler: str = "mala",
    num_samples: int = 1000,
    num_warmup: int = 500,
    step_size: Any = None,
    inverse_mass_matrix: Any = None,
    thin: int = 1,
    step_size_mode: str = "per_chain",
    target_acceptance_rate: float | None = None,
    chunk_size: int | None = None,
    progress: bool = True,
    devices: Any = None,
    sampler_options: dict[str, Any] | None = None,
    checkpoint: str | os.PathLike | CheckpointIfLong | None = None,
    reference: Any = None,
    convergence: str = "warn",
    numerics: str | None = None,
    observables: dict[str, Any] | None = None,
    keep_draws: bool = True,
    record: Callable[[Any], Any] | None = None,
) -> Samples:
    """Draw ``num_samples`` kept draws from each of C chains, all chains in one compiled program.

    Parameters
    ----------
    rng_key
        A ``jax.random.key`` or an int seed. The same key gives bit-identical
        samples for any ``chunk_size``, and with ``numerics="reproducible"`` (the
        default on CPU) for any number of devices.
    logdensity_fn
        Log density of ONE position (a pytree like one chain of
        ``initial_positions``) → scalar. Build one from a probe with
        :func:`jaxprobe.gibbs`. Pass the same function object to reuse the
        compiled program across calls.
    initial_positions
        Array ``(C, *event_shape)`` or a pytree whose leaves share the leading
        chain axis C; finite. NumPy/JAX arrays, a pandas DataFrame ``(C, d)`` or a
        nested list are accepted, cast to the working dtype as JAX does: float64
        (NumPy's and pandas' default) runs in float32 unless ``jax_enable_x64`` is
        on; float32 stays float32; ints become floats; float16/bfloat16 are
        computed in float32 (see :mod:`jaxprobe._inputs`). Spread the starts over (or
        beyond) the target, e.g. draws of a prior: the verdict says when they are not
        overdispersed (one chain, every chain at one value, or a spread far below the
        draws': R̂ cannot vouch for modes no chain visited; :mod:`jaxprobe.engine.verdict`).
    sampler
        ``"mala"`` (default), ``"hmc"``, ``"nuts"``, ``"rwmh"`` (gradient-free) or
        ``"chees"`` (jittered HMC with cross-chain ChEES adaptation: the choice
        for hundreds of chains), ``"smc"`` (chains started by sequential Monte
        Carlo), or a sampler added with :func:`jaxprobe.register_sampler`
        (:func:`jaxprobe.engine.known_kernels` lists them all; whole-run samplers such as the
        tree-ensemble Gibbs sampler take questions, through :func:`jaxprobe.generate`).
    num_samples, num_warmup, thin
        Kept draws per chain; warmup (adaptation or burn-in) transitions;
        transitions per kept draw. A run makes ``num_warmup + num_samples * thin``
        transitions but stores only ``num_samples`` draws per chain.
    step_size
        A number (not a string or a bool) or ``None``: adapted during warmup by dual averaging towards
        ``target_acceptance_rate`` (and a diagonal inverse mass matrix for
        hmc/nuts, Stan's windows). A scalar or ``(C,)`` array: used as given, no
        adaptation (warmup transitions are then plain burn-in).
    inverse_mass_matrix
        Diagonal inverse mass matrix ``(D,)`` or ``(C, D)`` for hmc/nuts/chees, as
        a starting point (adapted when ``step_size`` is None, else fixed).
    step_size_mode
        ``"per_chain"`` (default): each chain adapts its own step size (and mass
        matrix) from its own acceptance, so chains stay independent.
        ``"shared"``: one step size from the mean acceptance over chains and one
        mass matrix pooled over all chains, better with many short chains.
        ChEES always shares (its adaptation is cross-chain by design).
    target_acceptance_rate
        Defaults per sampler: 0.574 mala, 0.234 rwmh, 0.8 hmc/nuts, 0.651 chees.
    chunk_size
        Kept draws per compiled chunk (default: about 20 chunks per run). The
        host updates the progress bar and copies draws out between chunks.
    progress
        Show a tqdm progress bar with steps/s and the acceptance rate.
    devices
        Devices to shard chains over (default: all of ``jax.devices()``).
    sampler_options
        Extra kernel options, e.g. ``{"num_integration_steps": 20}`` for hmc,
        ``{"max_num_doublings": 8}`` for nuts. Checked like keyword arguments
        before anything compiles: an unknown name raises ``TypeError`` listing
        the sampler's options, a wrong type ``TypeError`` and a value out of
        range ``ValueError`` (the kernel's fields declare both,
        :mod:`jaxprobe.engine.options`).
    checkpoint
        A ``.npz`` path. The kept draws are stored in ``<path>.draws/position.npy``
        ``(num_samples, C, D)`` and ``logdensity.npy`` ``(num_samples, C)``, each chunk's
        rows written into them (with their CRC32) in a background thread as it is saved;
        their whole size is reserved before anything compiles (too little disk:
        ``OSError`` ENOSPC naming the folder, the bytes needed and free). After warmup
        and after every chunk the engine state goes to ``<path>.draws/state.<n>.npz`` (the last
        two kept with ``keep_draws=False``) and the chunk table (each chunk's CRC32) replaces
        ``path`` atomically. Calling
        ``sample`` again with the same arguments and path resumes from the last chunk
        and gives the same draws as an uninterrupted run (a finished checkpoint returns
        at once, its draws read from the verified files). Every file is verified
        on resume: damaged draws are redone from the last verified chunk with a
        :class:`jaxprobe.CorruptFileWarning`; a damaged state file raises
        :class:`jaxprobe.CorruptFileError` (:mod:`jaxprobe.engine.checkpoint`).
        Arguments that differ from the checkpoint's raise
        :class:`jaxprobe.engine.CheckpointMismatchError` (a ``ValueError``) naming them.
        :class:`jaxprobe.engine.CheckpointIfLong` ``(path, min_seconds)`` checkpoints a new
        run only when its sampling, projected from the warmup's speed, takes at least
        ``min_seconds`` (what ``jaxprobe run`` does).
    reference
        For ``sampler="smc"``: the reference r the tempering starts from, an object
        callable as its log density (one position → scalar) with
        ``.sample(rng_key, n)`` giving exact draws ``(n, *event_shape)``; the target is
        ``logdensity_fn = log r + ℓ`` and SMC moves r to it through ``r·exp(λℓ)``.
        Default: ``logdensity_fn.reference`` when it has one (a
        :class:`jaxprobe.Question`'s density does). With SMC, ``initial_positions``
        only give the shapes: chains start at the SMC particles, which are draws of
        the target; ``Samples.log_evidence`` is ``log E_r[exp(ℓ)]``.
    convergence
        What to do when the run's verdict (``Samples.verdict``:
        :func:`jaxprobe.engine.verdict.assess`: R̂, ESS, frozen chains, divergences,
        non-finite proposals, drift) says the answer cannot be trusted: ``"warn"``
        (default) issues a :class:`jaxprobe.ConvergenceWarning` with the next step,
        ``"error"`` raises :class:`jaxprobe.ConvergenceError` (for pipelines),
        ``"ignore"`` only records it.
    numerics
        The numerics policy (:mod:`jaxprobe.engine.numerics`). ``"reproducible"``:
        the same key gives bit-identical draws for any number of devices and any
        ``chunk_size`` (per-chain random streams from an unrolled Threefry hash, sums
        over chains by a fixed pairwise tree, no multiply-add contraction across
        them; also the fastest choice on CPU, where JAX's own Threefry is a rolled
        loop). ``"fast"``: plain ``jax.random``, ``jnp.sum``/``jnp.mean`` and XLA's
        own reductions, BlackJAX's ChEES adaptation: the same distribution,
        deterministic for a fixed key and set of devices, not bit-identical across
        device counts. ``None`` (default): per platform, ``"reproducible"`` when the
        run's ``devices`` are CPUs, ``"fast"`` on GPUs and TPUs.
        ``Samples.numerics`` records the mode used. Any other value raises
        (``TypeError`` for a non-string, ``ValueError`` for an unknown name) before
        anything compiles.
    observables
        ``{"name": fn}``: functions of ONE position (like ``logdensity_fn``) → an array,
        averaged on the device over every chain and kept draw as the run goes
        (:mod:`jaxprobe.engine.streaming`): ``samples.observables["name"]`` has ``.mean``
        and ``.mcse`` (``fn``'s output shape; the Monte-Carlo standard error by batch
        means) and ``.per_chain_mean`` ``(C, ...)``. Each is checked on one chain's
        starting point before anything compiles. With ``sampler="smc"`` each is also
        evaluated at the SMC run's final particles: ``samples.particle_observables``, its
        standard error from the independent particle groups.
    keep_draws
        ``False``: store no draw (``samples.positions`` is ``None``): memory ``O(C·D)``
        whatever ``num_samples`` is; the verdict and the observables are still computed,
        from the statistics folded in during the run, and a checkpoint keeps those.
    record
        What each kept draw stores instead of its position: a function of ONE position
        (like ``logdensity_fn``) → a 1-D array ``(D',)``, applied inside the run as the draw is
        written, so the draws are held once, already mapped (e.g. an unconstrained
        parameterization's map to the space the answer is read in: :func:`jaxprobe.generate`
        stores x = T(z) this way). ``samples.positions`` is then ``(C, N, D')``; the verdict,
        the observables and ``samples.logdensity`` still refer to the positions the chains
        move on. Checked on one chain's starting point before anything compiles; needs
        ``keep_draws``.

    Returns
    -------
    Samples
        ``positions`` with axes ``(chain, draw, ...)`` (``None`` without ``keep_draws``),
        per-chain diagnostics, the verdict and the observables.

    Inside a user's ``jax.jit``, ``vmap`` or ``grad``, call :func:`jaxprobe.engine.init`,
    :func:`~jaxprobe.engine.warmup` and :func:`~jaxprobe.engine.run` instead: ``sample``
    runs on the host (chunks, progress, checkpoints) and refuses traced arguments.

    Examples
    --------
    >>> prior = jaxprobe.priors.StandardNormal()             # the target: N(0, I), a log density
    >>> init = prior.sample(jax.random.key(0), 4, (2,))       # 4 chains in 2 dimensions
    >>> samples = jaxprobe.sample(jax.random.key(1), prior, init, num_samples=500, num_warmup=200,
    ...                           progress=False)
    >>> samples.positions.shape                               # (chain, draw, dim)
    (4, 500, 2)
    >>> samples.verdict.converged
    True
    >>> estimate = samples.expectation(lambda x: x @ x)       # E|x|² = 2
    >>> bool(abs(estimate.mean - 2.0) < 5 * estimate.mcse)
    True
    >>> scales = jaxprobe.sample(jax.random.key(1), prior, init, num_samples=500, num_warmup=200, progress=False,
    ...                          record=jnp.exp)          # the same chains (on log σ ~ N(0, 1)); σ is what is kept
    >>> bool(np.all(scales.positions > 0)), bool(np.allclose(np.log(scales.positions), samples.positions, atol=1e-6))
    (True, True)
    """
    refuse_traced("jaxprobe.sample", rng_key=rng_key, initial_positions=initial_positions, step_size=step_size,
                  inverse_mass_matrix=inverse_mass_matrix)
    rng_key = canonicalize_key(rng_key)
    run = _validate(logdensity_fn, initial_positions, sampler=sampler, num_samples=num_samples,
                    num_warmup=num_warmup, step_size=step_size, inverse_mass_matrix=inverse_mass_matrix, thin=thin,
                    step_size_mode=step_size_mode, target_acceptance_rate=target_acceptance_rate,
                    chunk_size=chunk_size, sampler_options=sampler_options, reference=reference,
                    convergence=convergence, numerics=numerics, observables=observables, keep_draws=keep_draws,
                    record=record)
    # Kept draws land in host arrays allocated once, draw-major as the scan writes them. With a checkpoint they are
    # its draws files: before anything compiles, its path is checked, its state file verified, and for a new run
    # the files are made with their whole size reserved (a full disk: OSError naming the folder and the bytes).
    draws = _HostDraws(run.num_samples, run.num_chains, run.record_dim, run.dtype, run.keep_draws)
    if_long = checkpoint if isinstance(checkpoint, CheckpointIfLong) else None
    checkpoint = prepare_checkpoint(checkpoint if if_long is None else if_long.path, draws) if (
        checkpoint is not None) else None
    bar = writer = None
    try:
        placed = _place(run, rng_key, devices)
        key_warmup, key_sampling = jax.random.split(rng_key)
        bar = Progress(progress, run.num_warmup + run.num_samples * run.thin, f"{sampler} x{run.num_chains}")
        run_id = run_identity(rng_key, run, placed) if checkpoint is not None else None
        writer = CheckpointWriter(checkpoint.path, run_id) if checkpoint is not None else None
        *progress_state, checkpointed = _adapt_or_resume(key_warmup, run, placed, draws, checkpoint, run_id, writer,
                                                         bar, if_long)
        if not checkpointed:  # a new run too short to be worth resuming (CheckpointIfLong): its files go, nothing
            writer.close()  # was saved; the draws land where an unchecked run's do
            discard_unsaved(checkpoint)
            writer = checkpoint = None
            draws = _HostDraws(run.num_samples, run.num_chains, run.record_dim, run.dtype, run.keep_draws)
        state, stats_sum, monitored = _run_chunks(key_sampling, run, placed, *progress_state, draws, run_id, writer,
                                                  bar)
    finally:
        if bar is not None:
            bar.close()
        if writer is not None:
            writer.close()
        if checkpoint is not None:  # a new run that stopped before its first save leaves no files behind
            discard_unsaved(checkpoint)
    result = _result(run, placed, state, draws, stats_sum, monitored)
    report(result.verdict, convergence, stacklevel=2)
    return result


# ------------------------------------------------------------------ sample(), step by step


@dataclasses.dataclass(frozen=True)
class _Run:
    """The checked arguments of one :func:`sample` call (:func:`_validate`); nothing is on a device yet."""

    sampler: str
    kernel: Any  # the MCMC kernel the chains run (for SMC: its chains' kernel)
    smc: Any  # the SMC kernel when the chains start from an SMC run, else None
    smc_reference: Any
    smc_tilt: Any
    layout: _Layout
    logdensity: "_FlatLogDensity"
    initial_positions: Any  # as_positions(initial_positions)
    num_chains: int
    dtype: Any
    num_samples: int
    num_warmup: int
    thin: int
    chunk_size: int | None
    step_size_mode: str
    target_acceptance_rate: float | None
    step_size: np.ndarray | None  # (C,) given step sizes, or None to adapt
    inverse_mass_matrix: np.ndarray | None  # (C, D) given, or None
    numerics: str | None
    monitor: streaming.Monitor  # what every kept draw is folded into (verdict statistics, observables)
    keep_draws: bool
    record: Any  # _Batched(what each kept draw stores, of a flat position), or None: the position itself
    record_dim: int  # D' of a stored draw (the layout's D without record)


@dataclasses.dataclass(frozen=True)
class _Placed:
    """A :class:`_Run` on its devices (:func:`_place`): the initialized engine state, before warmup."""

    sharding: NamedSharding
    policy: Any  # the resolved Numerics
    kernel: Any  # run.kernel with the run's numerics
    state: core.EngineState
    smc_result: Any  # the SMC run the chains start from, or None
    start_range: Any  # (2, D) smallest and largest starting point per coordinate (None after SMC)


def _validate(logdensity_fn, initial_positions, *, sampler, num_samples, num_warmup, step_size, inverse_mass_matrix,
              thin, step_size_mode, target_acceptance_rate, chunk_size, sampler_options, reference, convergence,
              numerics, observables=None, keep_draws=True, record=None) -> _Run:
    """Every argument of :func:`sample` checked, with a message naming it, before anything compiles."""
    kernel = make_kernel(sampler, sampler_options)
    check_policy(convergence)
    check_numerics(numerics)
    smc = kernel if getattr(kernel, "starts_at_target", False) else None
    if smc is None and reference is not None:
        raise ValueError(f"reference is only used by sampler='smc', not {sampler!r}")
    num_samples, num_warmup, thin, chunk_size, target_acceptance_rate = check_settings(
        num_samples=num_samples, num_warmup=num_warmup, thin=thin, chunk_size=chunk_size,
        step_size_mode=step_size_mode, target_acceptance_rate=target_acceptance_rate, step_size=step_size)
    initial_positions = as_positions(initial_positions)
    num_chains, dtype = _check_positions(initial_positions)
    layout = _Layout(initial_positions)
    _check_logdensity(logdensity_fn, layout, dtype)
    if step_size is not None:
        step_size = _check_positive_array("step_size", step_size, num_chains, dtype)
    if inverse_mass_matrix is not None:
        if not kernel.adapts_mass_matrix:
            raise ValueError(f"inverse_mass_matrix is only used by hmc, nuts and chees, not {sampler!r}")
        inverse_mass_matrix = _check_positive_array("inverse_mass_matrix", inverse_mass_matrix, num_chains, dtype,
                                                    (layout.dim,))
    if not isinstance(keep_draws, (bool, np.bool_)):
        raise TypeError(f"keep_draws must be True or False, got {keep_draws!r}")
    checked = check_observables(observables, layout, dtype)
    flat_record, record_dim = _check_record(record, layout, dtype, keep_draws)
    smc_reference = smc_tilt = None
    if smc is not None:
        smc_reference, smc_tilt = _tempering_split(logdensity_fn, reference, layout)
        kernel = smc.chains()
    monitor = streaming.Monitor(num_chains, layout.dim, num_samples, checked)
    return _Run(sampler, kernel, smc, smc_reference, smc_tilt, layout, _FlatLogDensity(logdensity_fn, layout),
                initial_positions, num_chains, dtype, num_samples, num_warmup, thin, chunk_size, step_size_mode,
                target_acceptance_rate, step_size, inverse_mass_matrix, numerics, monitor, bool(keep_draws),
                flat_record, record_dim)


def _place(run: _Run, rng_key: PRNGKey, devices: Any) -> _Placed:
    """Shard the chains over ``devices``, resolve the numerics there, and initialize every chain (SMC: from
    the particles of a tempered run); a chain whose log density is not finite at its start is refused."""
    sharding = chain_sharding(run.num_chains, devices)
    policy = resolve_numerics(run.numerics, sharding.mesh.devices.flat)  # None: decided by the run's devices
    kernel = with_numerics(run.kernel, policy)
    layout, dtype = run.layout, run.dtype
    starts = layout.flatten_chains(run.initial_positions).astype(dtype)
    positions = _to_device(starts, sharding)
    parameters = core.default_parameters(kernel, run.num_chains, layout.dim, dtype, run.step_size,
                                         run.inverse_mass_matrix)
    parameters = jax.tree.map(lambda p: _to_device(p, sharding), parameters)
    smc_result = None
    if run.smc is not None:  # chains start at the particles of a tempered SMC run: draws of the target
        positions, smc_result = _smc_start(jax.random.fold_in(rng_key, 1), run.smc, run.smc_reference,
                                           run.smc_tilt, layout, run.num_chains, dtype, sharding)
    state = _init(kernel, run.logdensity, positions, parameters)
    initial_logdensity = to_host(state.kernel_state.logdensity)
    if not np.all(np.isfinite(initial_logdensity)):
        bad = np.nonzero(~np.isfinite(initial_logdensity))[0]
        raise ValueError(
            f"logdensity_fn is not finite at initial_positions of chains {bad[:10].tolist()}: "
            "start every chain inside the support of the target"
        )
    # What the verdict needs of the starts, computed where they are (off a CPU only (2, D) comes to the host).
    starts_range = None if smc_result is not None else (
        to_host(start_range(starts, xp=jnp)) if on_accelerator(starts) else start_range(starts))
    return _Placed(sharding, policy, kernel, state, smc_result, starts_range)


def _adapt_or_resume(rng_key, run: _Run, placed: _Placed, draws: "_HostDraws", checkpoint, run_id, writer, bar,
                     if_long: CheckpointIfLong | None = None):
    """Where sampling starts: a checkpoint's state, statistics and folded draw statistics (its draws files
    become ``draws``) when ``checkpoint`` holds one of this run, else the warmup's (written to the checkpoint
    at once) with empty statistics. Returns ``(state, stats_sum, monitored, checkpointed)`` (``stats_sum`` None:
    no draws yet); ``checkpointed`` is False for a new run whose sampling, projected from its warmup's speed, is
    shorter than ``if_long.min_seconds``: nothing was written, and the caller drops the checkpoint."""
    template = _monitored_zeros(run, placed)
    resumed = (resume_checkpoint(checkpoint, run_id, draws, writer, placed.state, template, placed.sharding)
               if checkpoint is not None else None)  # verified chunk by chunk; rewound to the last verified one
    if resumed is not None:
        state, stats_sum, monitored = resumed
        bar.update(run.num_warmup + draws.count * run.thin, float("nan"), "resumed")
        return state, stats_sum, monitored, True
    timed = writer is not None and if_long is not None  # else nothing is timed or waited for
    with Compiles() if timed else contextlib.nullcontext() as compiling:
        started = time.perf_counter()
        state = _run_warmup(rng_key, placed.state, placed.kernel, run.logdensity, run.num_warmup,
                            run.step_size is None, run.target_acceptance_rate, run.step_size_mode == "shared",
                            run.chunk_size, bar)
        if timed:  # the warmup's own time: finished, less its tracing and compiling
            jax.block_until_ready(state)
            warmup_seconds = time.perf_counter() - started - compiling.seconds
    if timed and not if_long.worth_checkpointing(warmup_seconds, run.num_warmup, run.num_samples * run.thin):
        return state, None, template, False
    if writer is not None:  # the draws files were made before compiling (checkpoint.prepare)
        writer.save(run_id, state, draws, None, template)
    return state, None, template, True


def _monitored_zeros(run: _Run, placed: _Placed) -> Any:
    """Empty folded statistics of the run, placed like the chains: leaves with a chain axis (per-chain counts
    ``(C,)``, observables' sums ``(B, C, ...)``) split over the devices as the chains are, the bounded subset
    replicated."""
    # Every leaf is zeros: made in place on the devices (the observables' sums are O(C·D): made on one device
    # and moved, or on the host, they cost ~0.1 s per 126 MB on an H100 machine).
    signature = ("statistics", np.dtype(run.dtype).name)  # their shapes: traced once per monitor (_CheckedOnce)
    shapes = _CHECKED.get(run.monitor, signature)
    if shapes is _CheckedOnce._MISSING:
        shapes = _CHECKED.put(run.monitor, signature,
                              jax.eval_shape(lambda: streaming.init_stats(run.monitor, run.dtype)))
    stats, observables = shapes
    mesh = placed.sharding.mesh

    def place(leaf, chain_axis=None):
        spec = [None] * len(leaf.shape)
        if chain_axis is not None:
            spec[chain_axis] = "chains"
        return jnp.zeros(leaf.shape, leaf.dtype, device=NamedSharding(mesh, PartitionSpec(*spec)))

    stats = streaming.DrawStats(place(stats.nonfinite_draws, 0), place(stats.subset))
    return stats, {name: streaming.ObservableSums(place(sums.sums, 1), place(sums.counts))
                   for name, sums in observables.items()}


def _run_chunks(rng_key, run: _Run, placed: _Placed, state, stats_sum, monitored, draws: "_HostDraws", run_id,
                writer, bar):
    """The kept draws still missing, chunk by chunk, folded into ``monitored`` on the device and (when kept)
    into ``draws``; each chunk is copied out (and checkpointed with the state after it) while the next one
    computes. Returns ``(state, stats_sum, monitored)``."""
    draws_per_chunk = run.chunk_size or max(1, math.ceil(run.num_samples / 20))
    # Device trace buffers are recycled: once a chunk's draws are copied out, its buffer is donated to a
    # later chunk of the same length, which writes in place (no allocation or zero-fill per chunk).
    free_buffers: dict[int, list[core.Trace]] = {}
    # Where the device's memory is the host's (one CPU device, one process) and no checkpoint writes files, the
    # chunks write one whole-run buffer in turn (donated from chunk to chunk) that becomes the result without
    # a copy: copying every chunk out cost 8-15% of a MALA run on 2 cores, 1x the draws more memory.
    # On an accelerator whose free memory holds the whole run's draws (at most half of it), the same: the
    # draws stay on the device and come to the host in one transfer at the end, as from a user's own jit. Chunk
    # by chunk they were copied out twice (the transfer, then into the result) while the next chunk ran: 1.4-1.6x
    # the limit at C = 16,384-65,536 on an H100, where the transfer is most of a MALA run.
    resident = (run.keep_draws and writer is None and draws.count == 0 and draws.files_folder is None
                and jax.process_count() == 1
                and (placed.sharding.mesh.devices.size == 1 and placed.sharding.mesh.devices.flat[0].platform == "cpu"
                     or _draws_fit_on_devices(run, placed.sharding)))
    if resident and bar.bar is None and run.chunk_size is None:
        # Chunks exist for the progress bar, for checkpoints and (off a CPU) to bound the device's share of the
        # draws: with none of them, one chunk (the same draws for any chunk size; ~1 ms less per chunk), whose
        # scan stacks the draws into a buffer of its own (no zero-filled buffer handed in).
        draws_per_chunk = run.num_samples
    single = draws_per_chunk >= run.num_samples - draws.count
    whole = None
    if resident and not single:
        whole = _new_trace(run.num_samples, run.num_chains, run.record_dim, run.dtype, placed.sharding)
    pending = None
    first_draw = draws.count
    try:
        for num_draws in _chunks(run.num_samples - draws.count, draws_per_chunk):
            buffers = None
            if resident:
                buffers = whole
            elif run.keep_draws:
                buffers = (free_buffers.get(num_draws) or [
                    _new_trace(num_draws, run.num_chains, run.record_dim, run.dtype, placed.sharding)]).pop()
            state, trace, stats, monitored = _run_chunk(
                rng_key, state, monitored, np.int32(first_draw), placed.kernel, run.logdensity,  # NumPy scalars:
                num_draws, run.thin, run.monitor, run.keep_draws, buffers,  # no eager dispatch (~0.6 ms each)
                np.int32(first_draw if resident else 0), run.record)
            if resident:
                whole, trace = trace, None  # the chunk's rows are in the whole-run buffer: nothing to copy
            elif trace is not None:  # start the device-to-host copy now, so that it overlaps with the
                for leaf in (trace.position, trace.logdensity):  # host's copy of the previous chunk (off a CPU,
                    leaf.copy_to_host_async()  # the draws' transfer is most of a run: 1.7x the limit on an H200)
            first_draw += num_draws
            if pending is not None:  # copy the previous chunk out while this one computes
                stats_sum = _collect(pending, draws, stats_sum, bar, free_buffers)
                if writer is not None:  # that chunk's draws with the state after it: a consistent checkpoint,
                    writer.save(run_id, pending[3], draws, stats_sum, pending[4])  # written while this one samples
            pending = (trace, stats, num_draws * run.thin, state, monitored, num_draws)
        if pending is not None:
            stats_sum = _collect(pending, draws, stats_sum, bar, free_buffers)
            if writer is not None:
                writer.save(run_id, pending[3], draws, stats_sum, pending[4])
            pending = None
        if resident:
            draws.hold(whole)
    except BaseException:
        # Interrupted (Ctrl-C) while a chunk was in flight: that chunk was dispatched whole, so keep it too
        # (waits for it to finish), then stop. An error of the computation itself is the one raised.
        if writer is not None and pending is not None:
            try:
                stats_sum = _collect(pending, draws, stats_sum, bar, free_buffers)
                writer.save(run_id, pending[3], draws, stats_sum, pending[4])
            except Exception:  # noqa: BLE001 - the original exception is re-raised below
                pass
        raise
    return state, stats_sum, monitored


def _result(run: _Run, placed: _Placed, state, draws: "_HostDraws", stats_sum, monitored) -> Samples:
    """The run's :class:`Samples` with its verdict, from the statistics folded in on the device (with how far
    the starting points spread over the draws, or after SMC its tempering path), and its observables."""
    position, logdensity = draws.finished()
    steps = run.num_samples * run.thin
    smc_result = placed.smc_result
    gradient_evaluations = stats_sum["num_gradient_evaluations"]
    evidence = {}
    if smc_result is not None:
        gradient_evaluations = gradient_evaluations + np.asarray(smc_result.info.num_gradient_evaluations, np.int64)
        evidence = smc_evidence(smc_result)
    draw_stats, observable_sums = monitored
    if streaming.finishes_on_host(placed.sharding.mesh.devices.flat[0]):  # one memory: NumPy, nothing to compile
        statistics = streaming.finalize(jax.tree.map(to_host, draw_stats), run.monitor, xp=np)
    else:
        statistics = jax.tree.map(to_host, _finalize(draw_stats, run.monitor))
    acceptance_rate = stats_sum["acceptance_rate_sum"] / steps
    chains_start_at_target = smc_result is not None and bool(smc_result.info.reached_target)
    num_groups = None if smc_result is None else run.smc.groups(run.num_chains)
    names = CoordinateNames.of_draws(jax.tree_util.tree_unflatten(
        run.layout.treedef, [np.empty((0, 0) + shape) for shape in run.layout.event_shapes]))
    verdict = verdict_from_statistics(
        statistics, run.monitor, names, acceptance_rate=acceptance_rate, num_divergent=stats_sum["num_divergent"],
        num_nonfinite=stats_sum["num_nonfinite"], thin=run.thin, chains_start_at_target=chains_start_at_target,
        tempering=Tempering.of_path(evidence["evidence_path"]["inverse_temperature"]) if evidence else None,
        num_groups=num_groups,  # after SMC: the independent groups behind every error bar (too few: a warning)
        # the chains' own starts (after SMC the particles, judged by their tempering path instead)
        start_range=placed.start_range)
    return Samples(
        # Draw-major on the host; swapaxes is a view, so (chain, draw, ...) costs no copy.
        positions=None if position is None else (np.swapaxes(position, 0, 1) if run.record is not None
                                                 else run.layout.unflatten_draws(np.swapaxes(position, 0, 1))),
        logdensity=None if logdensity is None else np.swapaxes(logdensity, 0, 1),
        acceptance_rate=acceptance_rate,
        step_size=np.broadcast_to(to_host(state.parameters["step_size"]), (run.num_chains,)).copy(),
        num_divergent=stats_sum["num_divergent"],
        num_nonfinite=stats_sum["num_nonfinite"],
        num_gradient_evaluations=gradient_evaluations,
        sampler=run.sampler,
        num_warmup=run.num_warmup,
        thin=run.thin,
        inverse_mass_matrix=to_host(state.parameters["inverse_mass_matrix"])
        if "inverse_mass_matrix" in state.parameters else None,
        chains_start_at_target=chains_start_at_target,
        numerics=placed.policy.mode,
        verdict=verdict,
        # After SMC the chains of one particle group are one independent system: errors from the groups' means,
        # each group weighted by its evidence estimate.
        # Independent chains' sums are reduced where they are (on an accelerator: there, O(C·D) stays put).
        observables={name: estimates.streamed(sums if num_groups is None else jax.tree.map(to_host, sums),
                                              num_groups, evidence.get("group_log_evidence"))
                     for name, sums in observable_sums.items()} or None,
        particle_observables=None if smc_result is None else {
            name: estimates.particle_observed(to_host(_observe_particles(fn, jnp.asarray(smc_result.particles))),
                                              num_groups, evidence["group_log_evidence"])
            for name, fn in run.monitor.observables} or None,
        num_groups=num_groups,
        **evidence,
    )


# The checkpoint (run identity, draws files, state files, writer, resume): jaxprobe.engine.checkpoint.


#: The share of an accelerator's free memory that a run's draws may take to stay there until the end of the run.
RESIDENT_DRAWS_SHARE = 0.5


def _draws_fit_on_devices(run: _Run, sharding: NamedSharding) -> bool:
    """Whether the whole run's draws fit in ``RESIDENT_DRAWS_SHARE`` of each accelerator's free memory (their
    share of the chains). False on a CPU and where a device reports no memory statistics."""
    devices = list(sharding.mesh.devices.flat)
    if any(device.platform == "cpu" for device in devices):
        return False
    per_device = (run.num_samples * math.ceil(run.num_chains / len(devices)) * (run.layout.dim + 1)
                  * np.dtype(run.dtype).itemsize)
    for device in devices:
        try:
            stats = device.memory_stats() or {}
        except Exception:  # noqa: BLE001 - not every backend implements it
            return False
        if "bytes_limit" not in stats or per_device > RESIDENT_DRAWS_SHARE * (
                stats["bytes_limit"] - stats.get("bytes_in_use", 0)):
            return False
    return True


def _new_trace(num_draws: int, num_chains: int, dim: int, dtype: Any, sharding: NamedSharding) -> core.Trace:
    """Device buffers for one chunk's draws, chain axis sharded like the chains (axis 1)."""
    draw_sharding = NamedSharding(sharding.mesh, PartitionSpec(None, *sharding.spec))
    return core.Trace(jnp.zeros((num_draws, num_chains, dim), dtype, device=draw_sharding),
                      jnp.zeros((num_draws, num_chains), dtype, device=draw_sharding))


def _collect(pending, draws, stats_sum, bar, free_buffers):
    """Copy a finished chunk's draws into ``draws`` and hand its device buffers back for reuse."""
    trace, stats, steps = pending[:3]
    draws.append(pending[5], trace)
    if trace is not None:
        free_buffers.setdefault(trace.position.shape[0], []).append(trace)
    host = {name: to_host(getattr(stats, name)).astype(np.float64 if name == "acceptance_rate_sum" else np.int64)
            for name in _STAT_FIELDS}
    bar.update(steps, float(host["acceptance_rate_sum"].mean() / steps), "sampling")
    if stats_sum is None:
        return host
    return {name: stats_sum[name] + host[name] for name in _STAT_FIELDS}


def _run_warmup(rng_key, state, kernel, logdensity_fn, num_warmup, adapt, target, shared, chunk_size, bar):
    """Warmup of ``num_warmup`` steps: the kernel's adaptation (``adapt``), else burn-in with fixed parameters.

    The adaptation runs in chunks of ``chunk_size`` steps (default: about 10 chunks) when it is
    ``splittable``, else in one call; the progress bar advances after each.
    """
    if num_warmup == 0:
        return state
    # Warmup chunks exist for the progress bar only (no draws are kept): without one, a single chunk.
    steps_per_chunk = chunk_size or (max(1, math.ceil(num_warmup / 10)) if bar.bar is not None else max(1, num_warmup))
    if not adapt:  # fixed parameters: warmup is burn-in, draws discarded
        for steps in _chunks(num_warmup, steps_per_chunk):
            # One kept draw of `steps` transitions: burn-in draws are never stored.
            state, stats = _burn_in(rng_key, state, kernel, logdensity_fn, steps)
            bar.update(steps, float(np.mean(to_host(stats.acceptance_rate_sum))) / steps, "burn-in")
        return core.EngineState(state.kernel_state, state.parameters, jnp.zeros((), jnp.int32))
    adaptation = kernel.adaptation(target, shared)
    schedule = adaptation.schedule(num_warmup)
    adaptation_state = _adapt_init(adaptation, state, logdensity_fn)
    start = 0
    for steps in _chunks(num_warmup, steps_per_chunk) if adaptation.splittable else [num_warmup]:
        chunk = jax.tree.map(lambda inputs: np.asarray(inputs[start:start + steps]), schedule)  # host arrays: no eager op
        adaptation_state, stats = _adapt_update(rng_key, adaptation_state, adaptation, logdensity_fn, chunk)
        start += steps
        bar.update(steps, float(np.mean(to_host(stats.acceptance_rate_sum))) / steps, "warmup")
    return _adapt_final(adaptation, adaptation_state)
