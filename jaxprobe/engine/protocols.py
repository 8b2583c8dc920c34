"""The engine's declared interfaces: what a sampler (``Kernel``) and a warmup (``Adaptation``) implement, and
what a whole-run sampler (``WholeRunSampler``) offers the front ends.

Shapes: C chains, D coordinates (a flat position ``(D,)`` per chain). Everything the
engine runs goes through these two protocols, so a kernel registered with
:func:`jaxprobe.register_sampler` runs through ``sample``, ``generate`` and ``sweep``
exactly as the built-in ones do, and nothing outside the registry tells samplers
apart by name.

A run is ``kernel.init`` → ``adaptation.init`` → ``adaptation.update`` (once, or
once per chunk of the warmup schedule) → ``adaptation.final`` → ``kernel.step``
repeated (:mod:`jaxprobe.engine.core`). Both protocols are
:func:`typing.runtime_checkable`, so ``isinstance(obj, Kernel)`` checks that the
members exist (not their signatures).

A :class:`WholeRunSampler` is the other kind: a sampler that runs a whole question in its own compiled
program (e.g. the tree-ensemble Gibbs sampler of :mod:`jaxprobe.samplers`, whose targets are not mere log
densities). The engine never runs one: :func:`jaxprobe.engine.registry.register_whole_run_sampler` names it,
and ``generate``, ``sweep``, ``reconstruct`` and configuration files hand it their question through this
protocol, never by its name.

This module holds the data types the two share (:class:`StepInfo`,
:class:`EngineState`, :class:`RunStats`) and imports nothing else of the engine,
so that every engine module can import it without a cycle.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple, Protocol, runtime_checkable

import jax.numpy as jnp

from jaxprobe.types import Array, PRNGKey

__all__ = ["FlatLogDensity", "StepInfo", "EngineState", "RunStats", "KernelState", "Kernel", "Adaptation",
           "WholeRunSampler"]

#: Log density of one flat position ``(D,)`` → scalar.
FlatLogDensity = Callable[[Array], Array]


class StepInfo(NamedTuple):
    """What one transition reports, per chain (each field has shape ``(C,)``).

    Examples
    --------
    >>> StepInfo._fields
    ('acceptance_rate', 'is_accepted', 'is_divergent', 'is_nonfinite', 'num_gradient_evaluations')
    """

    acceptance_rate: Array
    is_accepted: Array
    is_divergent: Array
    is_nonfinite: Array
    num_gradient_evaluations: Array


class EngineState(NamedTuple):
    """Everything a run needs to continue: kernel state, parameters, step counter.

    ``kernel_state.position`` has shape ``(C, D)``; ``parameters`` maps names to
    per-chain arrays (``step_size`` ``()`` shared or ``(C,)``, ``inverse_mass_matrix`` ``(C, D)``, ...);
    ``step`` is the number of transitions done so far (int32 scalar).

    Examples
    --------
    >>> from jaxprobe import engine
    >>> state = engine.init(engine.make_kernel("hmc"), jaxprobe.priors.StandardNormal(), jnp.zeros((4, 3)))
    >>> state.kernel_state.position.shape, state.parameters["inverse_mass_matrix"].shape, int(state.step)
    ((4, 3), (4, 3), 0)
    """

    kernel_state: Any
    parameters: dict[str, Array]
    step: Array


class RunStats(NamedTuple):
    """Per-chain sums over every transition of a run (kept or thinned away), shape ``(C,)``.

    Examples
    --------
    >>> from jaxprobe import engine
    >>> kernel, logdensity = engine.make_kernel("mala"), jaxprobe.priors.StandardNormal()
    >>> state = engine.init(kernel, logdensity, jax.random.normal(jax.random.key(0), (4, 2)))
    >>> _, _, stats = engine.run(jax.random.key(1), state, kernel, logdensity, num_draws=20)
    >>> acceptance_rate = stats.acceptance_rate_sum / stats.num_steps     # (C,) mean over the run
    >>> acceptance_rate.shape, bool(jnp.all((acceptance_rate > 0) & (acceptance_rate <= 1)))
    ((4,), True)
    """

    acceptance_rate_sum: Array
    num_accepted: Array
    num_divergent: Array
    num_nonfinite: Array
    num_gradient_evaluations: Array
    num_steps: Array

    @classmethod
    def zeros(cls, num_chains: int, dtype: Any) -> "RunStats":
        count = jnp.zeros((num_chains,), jnp.int32)
        return cls(jnp.zeros((num_chains,), dtype), count, count, count, count, jnp.zeros((), jnp.int32))

    def add(self, info: StepInfo) -> "RunStats":
        return RunStats(
            self.acceptance_rate_sum + info.acceptance_rate.astype(self.acceptance_rate_sum.dtype),
            self.num_accepted + info.is_accepted.astype(jnp.int32),
            self.num_divergent + info.is_divergent.astype(jnp.int32),
            self.num_nonfinite + info.is_nonfinite.astype(jnp.int32),
            self.num_gradient_evaluations + info.num_gradient_evaluations.astype(jnp.int32),
            self.num_steps + 1,
        )


@runtime_checkable
class KernelState(Protocol):
    """A kernel's state of all chains: a NamedTuple of arrays with a leading chain axis.

    At least ``position`` ``(C, D)`` and ``logdensity`` ``(C,)``; further fields (a
    gradient ``(C, D)``, a per-chain counter ``(C,)``) are the kernel's own. A NamedTuple
    because checkpoints store its fields by name (``_asdict``, ``_fields``, ``_replace``).

    Examples
    --------
    >>> from jaxprobe.engine import MALA
    >>> state = MALA().init(jnp.zeros((4, 2)), jaxprobe.priors.StandardNormal())
    >>> isinstance(state, KernelState), state._fields            # MALA's adds the gradient
    (True, ('position', 'logdensity', 'logdensity_grad'))
    """

    position: Array
    logdensity: Array


@runtime_checkable
class Kernel(Protocol):
    """A batched MCMC transition of all chains at once: a frozen, hashable dataclass.

    Its fields are its options (declared with :mod:`jaxprobe.engine.options`, checked when it
    is built); being hashable it is a static argument of ``jax.jit``, so two equal kernels
    share compiled programs. Members:

    - ``name``: the registry name (``sampler="name"``).
    - ``uses_gradient``: whether ``step`` differentiates the log density (False: black boxes,
      piecewise-constant models).
    - ``adapts_mass_matrix``: whether its parameters include a diagonal
      ``inverse_mass_matrix`` ``(C, D)`` (``sample(inverse_mass_matrix=...)`` is accepted).
    - ``starts_at_target``: whether the sampler draws the chains' starting points from the
      target itself (sequential Monte Carlo; user-given starting points are then unused).
    - ``target_acceptance_rate``: what warmup adapts the step size towards.
    - ``init(positions (C, D), logdensity_fn) -> KernelState``.
    - ``step(rng_key, state, parameters, logdensity_fn) -> (KernelState, StepInfo)``: one
      transition of every chain; ``parameters`` as :meth:`default_parameters` makes them.
      A proposal whose log density is NaN or ±inf must be rejected.
    - ``initial_step_size(dim) -> float``: the step size warmup starts from.
    - ``default_parameters(num_chains, dim, dtype, step_size=None, inverse_mass_matrix=None)
      -> dict[str, Array]``: the typed parameters of ``step`` (``step_size`` ``()`` or
      ``(C,)``, and the kernel's others), given values or defaults.
    - ``adaptation(target_acceptance_rate=None, shared=False) -> Adaptation``: the warmup that
      tunes these parameters.

    Optional: a ``numerics`` field (:func:`jaxprobe.engine.numerics.numerics_field`), the run's
    numerics policy, which the engine sets with :func:`jaxprobe.engine.numerics.with_numerics`
    (the built-in kernels and their adaptations read it).

    Examples
    --------
    >>> from jaxprobe import engine
    >>> isinstance(engine.MALA(), Kernel), isinstance(engine.make_kernel("nuts"), Kernel)   # checked at runtime
    (True, True)
    """

    name: str
    uses_gradient: bool
    adapts_mass_matrix: bool
    starts_at_target: bool
    target_acceptance_rate: float

    def init(self, positions: Array, logdensity_fn: FlatLogDensity) -> Any: ...

    def step(self, rng_key: PRNGKey, state: Any, parameters: Mapping[str, Array],
             logdensity_fn: FlatLogDensity) -> tuple[Any, StepInfo]: ...

    def initial_step_size(self, dim: int) -> float: ...

    def default_parameters(self, num_chains: int, dim: int, dtype: Any, step_size: Any = None,
                           inverse_mass_matrix: Any = None) -> dict[str, Array]: ...

    def adaptation(self, target_acceptance_rate: float | None = None, shared: bool = False) -> "Adaptation": ...


@runtime_checkable
class Adaptation(Protocol):
    """A warmup: moves the chains with ``kernel`` while tuning its parameters. Frozen and hashable
    (a static argument of ``jax.jit``), like a kernel.

    - ``schedule(num_steps) -> pytree of NumPy arrays``, each with leading axis ``num_steps``:
      the per-step inputs of a warmup of that length (built on the host, so that warmups of
      any length and any chunk of one share one compiled program per chunk length).
    - ``init(state: EngineState, logdensity_fn) -> adaptation state`` (a pytree of arrays).
    - ``update(rng_key, adaptation_state, logdensity_fn, schedule) -> (adaptation state,
      RunStats)``: the warmup steps whose inputs are ``schedule`` (all of
      :meth:`schedule`'s arrays, or the same slice ``[start:stop]`` of each). Step ``t``
      uses the key ``fold_in(rng_key, t)``.
    - ``final(adaptation_state) -> EngineState``: the state to sample from (step counter 0).
    - ``splittable``: whether ``update`` may be called on consecutive slices of the schedule
      (for a progress bar) with the same result as one call; when False, the host runs the
      whole warmup in one call.

    Pure and jit-able; :func:`jaxprobe.engine.core.adapt` runs the four in one piece.

    Examples
    --------
    >>> from jaxprobe import engine
    >>> isinstance(engine.WindowAdaptation(engine.MALA()), Adaptation)
    True
    """

    kernel: Kernel
    splittable: bool

    def schedule(self, num_steps: int) -> Any: ...

    def init(self, state: EngineState, logdensity_fn: FlatLogDensity) -> Any: ...

    def update(self, rng_key: PRNGKey, adaptation_state: Any, logdensity_fn: FlatLogDensity,
               schedule: Any) -> tuple[Any, RunStats]: ...

    def final(self, adaptation_state: Any) -> EngineState: ...


@runtime_checkable
class WholeRunSampler(Protocol):
    """A sampler that runs a whole question itself (its own compiled program, its own notion of a step), for
    targets of a structure it knows: registered with :func:`jaxprobe.engine.registry.register_whole_run_sampler`,
    then ``sampler=name`` in ``generate``, ``sweep``, ``reconstruct``, ``reconstruct_many`` and configuration
    files (not :func:`jaxprobe.sample`, which takes log densities only). Members:

    - ``name``: the registry name (``sampler="name"``).
    - ``moves_into_support``: whether chains started where the target is zero walk into its support by
      themselves (``reconstruct`` then starts a class no prior draw reaches from plain prior draws).
    - ``check_options(options) -> dict``: the keyword options a front end hands it (those of
      :func:`jaxprobe.sample`: ``thin``, ``progress``, ``sampler_options``, ...), checked before anything
      compiles; a ValueError names any it has no use for (one left at ``sample``'s default is not refused).
      Returns the options it will use.
    - ``supports(question) -> str | None``: None if it can sample this :class:`jaxprobe.Question`, else the
      reason (a message that starts with the argument at fault: ``"probe: ..."``, ``"prior: ..."``).
    - ``sample_question(rng_key, question, *, num_chains, num_samples, num_warmup, init=None, dtype=None,
      **options) -> Samples``: the question's draws, ``positions`` ``(C, N, d)`` in data space (relaxed: the
      caller reports one-hot groups and integers), with the verdict; keys as
      :func:`jaxprobe.generation.answer` (``rng_key`` splits into initial positions, sampling). ``options`` as
      :meth:`check_options` takes them (also ``observables`` and ``keep_draws``, as ``sample`` has them).
    - ``supports_reconstruction(model, prior, dim) -> str | None``: None if it can reconstruct from this
      (model, prior) setting of ``dim`` features, else the reason (starting ``"model: "`` or ``"prior: "``).
    - ``reconstruction(question, models, priors, num_classes, dim, options) -> run``: the all-classes target of
      S settings (:func:`jaxprobe.reconstruct.reconstruction_question`'s ``question``, feature units, no
      whitening), checked before anything compiles; ``run(rng_key, initial_positions, num_samples,
      num_warmup) -> Samples`` samples it from ``initial_positions`` ``(C, S·K, d)``, positions
      ``(C, N, S·K·d)``.

    Examples
    --------
    >>> import jaxprobe.samplers                               # registers jaxprobe's whole-run samplers
    >>> from jaxprobe.engine import registry
    >>> runs = [registry.whole_run_sampler(name) for name in registry.known_samplers(whole_run=True)]
    >>> any(isinstance(run, WholeRunSampler) for run in runs)   # None for per-chain kernels such as "mala"
    True
    """

    name: str
    moves_into_support: bool

    def check_options(self, options: Mapping[str, Any]) -> dict[str, Any]: ...

    def supports(self, question: Any) -> str | None: ...

    def sample_question(self, rng_key: PRNGKey, question: Any, *, num_chains: int, num_samples: int,
                        num_warmup: int, init: Any = None, dtype: Any = None, **options: Any) -> Any: ...

    def supports_reconstruction(self, model: Any, prior: Any, dim: int) -> str | None: ...

    def reconstruction(self, question: Any, models: Any, priors: Any, num_classes: int, dim: int,
                       options: Mapping[str, Any]) -> Callable[..., Any]: ...
