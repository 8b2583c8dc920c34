"""Batched MCMC kernels: one transition for all chains at once.

Every kernel here works on a flat ``(num_chains, dim)`` position array and a
log density of one flat ``(dim,)`` position. A kernel is a frozen, hashable
dataclass (its configuration), so it can be a static argument of ``jax.jit``;
its state is a NamedTuple of arrays with a leading chain axis.

MALA and random-walk Metropolis are written here, batched by hand: they carry
the log density (and gradient) of the current state, and draw the random
numbers of a step for all chains with one call, so that a step costs exactly
one log density (and gradient) evaluation per chain plus elementwise work.
HMC, NUTS and dynamic (ChEES-jittered) HMC wrap BlackJAX's single-chain
kernels, vmapped over chains with one key per chain.

Every built-in kernel has a ``numerics`` field (:mod:`jaxprobe.engine.numerics`,
``MALA(numerics="fast")``; ``sample(numerics=...)`` sets it for a run): how a step
draws its random numbers and which metric the HMC family uses. It is not a sampler
option (``sampler_options`` does not take it).

Why MALA and RWMH stay batched by hand in the fast mode too: BlackJAX's kernels
(``blackjax.mala.build_kernel``, ``blackjax.mcmc.random_walk.build_additive_step``)
vmapped over chains with one key per chain, the engine's per-step keys and state
otherwise unchanged, measured slower per step on CPU (2-core Xeon, the D = 30 MLP
target of ``benchmarks/throughput.py``, fixed step size, min of 9 interleaved
repetitions): MALA 1.42x at C = 1024 and 1.43x at C = 4096 (1.8M vs 1.2M and
2.0M vs 1.4M chain-steps/s), RWMH 1.24x and 1.64x. They draw and split keys per
chain where the hand-batched step makes one call for all chains; both make one
``value_and_grad`` per chain per step.

Every kernel treats a proposal whose log density is NaN or ±inf as rejected,
and reports it in ``StepInfo.is_nonfinite``.

Every kernel implements :class:`jaxprobe.engine.protocols.Kernel`; its fields are
its options, declared with :mod:`jaxprobe.engine.options` and checked when it is
built. The base classes :class:`GradientKernel` and :class:`ValueKernel` give a
new kernel (e.g. one wrapping another BlackJAX kernel, see
:func:`jaxprobe.register_sampler`) the state, parameters and warmup of the
built-in ones; :func:`vmap_chains` runs a single-chain BlackJAX kernel on all
chains. The registry of sampler names is :mod:`jaxprobe.engine.registry`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, NamedTuple, TypedDict

import jax
import jax.numpy as jnp
from blackjax.mcmc import dynamic_hmc as bj_dynamic_hmc
from blackjax.mcmc import hmc as bj_hmc
from blackjax.mcmc import integrators as bj_integrators
from blackjax.mcmc import metrics as bj_metrics
from blackjax.mcmc import nuts as bj_nuts
from blackjax.mcmc import proposal as bj_proposal
from blackjax.mcmc import termination as bj_termination
from blackjax.mcmc import trajectory as bj_trajectory

from jaxprobe._pointwise import map_points
from jaxprobe.engine.chees import ChEESAdaptation
from jaxprobe.engine.core import Carrying, WindowAdaptation
from jaxprobe.engine.numerics import (Numerics, as_numerics, diagonal_metric, in_positions_dtype, normal_and_uniform,
                                     numerics_field)
from jaxprobe.engine.options import choice_option, float_option, int_option, validate_options
from jaxprobe.engine.protocols import Adaptation, FlatLogDensity, StepInfo
from jaxprobe.engine.smc import KERNELS as SMC_INNER_KERNELS
from jaxprobe.engine.smc import tempered_smc
from jaxprobe.types import Array, PRNGKey

__all__ = [
    "StepInfo",
    "GradientState",
    "ValueState",
    "DynamicState",
    "CarryingState",
    "CarryingValueState",
    "StepSizeParameters",
    "MassMatrixParameters",
    "ChEESParameters",
    "BaseKernel",
    "GradientKernel",
    "ValueKernel",
    "MALA",
    "RWMH",
    "HMC",
    "NUTS",
    "ChEES",
    "SMC",
    "BUILTIN_KERNELS",
    "safe_logdensity",
    "normal_and_uniform",
    "diagonal_metric",
    "vmap_chains",
    "per_chain",
]


class StepSizeParameters(TypedDict):
    """Parameters of MALA and RWMH: ``step_size`` ``()`` (shared by all chains) or ``(C,)``.

    Examples
    --------
    >>> parameters = MALA().default_parameters(4, 2, jnp.float32, step_size=0.1)   # 4 chains, D = 2
    >>> sorted(parameters) == sorted(StepSizeParameters.__annotations__), parameters["step_size"].shape
    (True, ())
    """

    step_size: Array


class MassMatrixParameters(TypedDict):
    """Parameters of HMC and NUTS: ``step_size`` ``()`` or ``(C,)``, diagonal ``inverse_mass_matrix`` ``(C, D)``.

    Examples
    --------
    >>> parameters = HMC().default_parameters(4, 2, jnp.float32, step_size=jnp.full(4, 0.1))   # per chain
    >>> sorted(parameters) == sorted(MassMatrixParameters.__annotations__)
    True
    >>> parameters["step_size"].shape, parameters["inverse_mass_matrix"].shape
    ((4,), (4, 2))
    """

    step_size: Array
    inverse_mass_matrix: Array


class ChEESParameters(TypedDict):
    """Parameters of ChEES: those of HMC plus ``num_leapfrog_steps`` ``(C,)`` (mean trajectory length in steps).

    Examples
    --------
    >>> parameters = ChEES().default_parameters(4, 2, jnp.float32, step_size=0.5)
    >>> sorted(parameters) == sorted(ChEESParameters.__annotations__), parameters["num_leapfrog_steps"].shape
    (True, (4,))
    """

    step_size: Array
    inverse_mass_matrix: Array
    num_leapfrog_steps: Array


class GradientState(NamedTuple):
    """State of a gradient-based kernel: position, log density and its gradient.

    Shapes: ``position`` and ``logdensity_grad`` ``(C, D)``, ``logdensity`` ``(C,)``.
    The same layout as BlackJAX's ``HMCState`` (so BlackJAX kernels take it as is).

    Examples
    --------
    >>> positions = jnp.array([[0.0, 1.0], [2.0, -1.0], [0.5, 0.5]])       # 3 chains, D = 2
    >>> state = MALA().init(positions, jaxprobe.priors.StandardNormal())    # a GradientState
    >>> state.logdensity.shape, bool(jnp.allclose(state.logdensity_grad, -positions))   # ∇ log N(0, I) = −x
    ((3,), True)
    """

    position: Array
    logdensity: Array
    logdensity_grad: Array


class ValueState(NamedTuple):
    """State of a gradient-free kernel: position ``(C, D)`` and log density ``(C,)``.

    Examples
    --------
    >>> state = RWMH().init(jnp.zeros((4, 2)), jaxprobe.priors.StandardNormal())
    >>> state._fields, [round(float(value), 4) for value in state.logdensity]   # −log 2π at the origin
    (('position', 'logdensity'), [-1.8379, -1.8379, -1.8379, -1.8379])
    """

    position: Array
    logdensity: Array


class CarryingValueState(NamedTuple):
    """A :class:`ValueState` with ``carried`` values of each chain's position, as :class:`CarryingState` (RWMH's).

    Examples
    --------
    >>> carrying = Carrying(jaxprobe.priors.StandardNormal(), lambda x: {"norm": jnp.sum(x**2)})
    >>> RWMH().carry(RWMH().init(jnp.ones((3, 2)), carrying.logdensity_fn), carrying).carried["norm"].tolist()
    [2.0, 2.0, 2.0]
    """

    position: Array
    logdensity: Array
    carried: Any


class DynamicState(NamedTuple):
    """State of jittered HMC: a GradientState plus the per-chain quasi-random index.

    Examples
    --------
    >>> state = ChEES().init(jnp.zeros((4, 2)), jaxprobe.priors.StandardNormal())
    >>> state.position.shape, state.logdensity_grad.shape, state.random_generator_arg.shape
    ((4, 2), (4, 2), (4,))
    """

    position: Array
    logdensity: Array
    logdensity_grad: Array
    random_generator_arg: Array


class CarryingState(NamedTuple):
    """A :class:`GradientState` with ``carried``: values of each chain's position (a pytree of ``(C, ...)``
    arrays) computed beside its log density, from the same evaluation (:class:`jaxprobe.engine.core.Carrying`).

    Examples
    --------
    >>> carrying = Carrying(jaxprobe.priors.StandardNormal(), lambda x: {"norm": jnp.sum(x**2)})
    >>> state = MALA().carry(MALA().init(jnp.ones((3, 2)), carrying.logdensity_fn), carrying)
    >>> state._fields, state.carried["norm"].tolist()
    (('position', 'logdensity', 'logdensity_grad', 'carried'), [2.0, 2.0, 2.0])
    """

    position: Array
    logdensity: Array
    logdensity_grad: Array
    carried: Any


def safe_logdensity(logdensity_fn: FlatLogDensity) -> FlatLogDensity:
    """Map NaN and ±inf log densities to −inf, so that such a proposal is always rejected.

    +inf would otherwise be accepted with probability one and NaN compares false
    in every acceptance test; both mean the target is undefined there. The value is
    in the position's dtype (:func:`jaxprobe.engine.numerics.in_positions_dtype`).

    Examples
    --------
    >>> safe = safe_logdensity(lambda x: jnp.log(x[0]))            # NaN for x₀ < 0, +inf nowhere here
    >>> float(safe(jnp.array([1.0]))), float(safe(jnp.array([-1.0])))
    (0.0, -inf)
    """
    typed = in_positions_dtype(logdensity_fn)

    def wrapped(position: Array) -> Array:
        value = typed(position)
        return jnp.where(jnp.isfinite(value), value, -jnp.inf)

    return wrapped


def _value_and_grad(logdensity_fn: FlatLogDensity, positions: Array) -> tuple[Array, Array]:
    # in batches of chains on a CPU where one vmap would fall off XLA's CPU
    # cliff (a cubic SVM's fixed_label gradient: 0.15 s at 30,000 points, 15.6 s at 65,536; jaxprobe._pointwise)
    return map_points(jax.value_and_grad(logdensity_fn), positions)


def per_chain(value: Array, num_chains: int) -> Array:
    """A shared ``()`` or per-chain ``(C,)`` parameter as ``(C,)`` (to vmap a single-chain kernel over).

    Examples
    --------
    >>> per_chain(jnp.float32(0.5), 3).tolist()               # a shared step size, one per chain
    [0.5, 0.5, 0.5]
    >>> per_chain(jnp.array([0.1, 0.2, 0.3]), 3).tolist()    # already per chain: unchanged
    [0.1..., 0.2..., 0.3...]
    """
    return jnp.broadcast_to(value, (num_chains,))



def _as_column(step_size: Array) -> Array:
    """A shared step size stays a scalar; a per-chain ``(C,)`` one becomes ``(C, 1)``.

    Keeping the shared case scalar matters: on CPU, XLA's fused elementwise loops
    with a per-row broadcast operand run about 10% slower per MALA step.
    """
    return step_size if step_size.ndim == 0 else step_size[:, None]


class BaseKernel:
    """What every kernel shares: option checks, default parameters and the windowed warmup.

    A kernel is a frozen dataclass deriving from this class whose fields are all declared with
    :func:`~jaxprobe.engine.options.int_option`, :func:`~jaxprobe.engine.options.float_option` or
    :func:`~jaxprobe.engine.options.choice_option`; ``__post_init__`` checks them. It declares
    ``name`` and implements ``init``, ``step`` and ``initial_step_size``
    (:class:`jaxprobe.engine.protocols.Kernel`); it has a ``target_acceptance_rate`` field.

    Examples
    --------
    >>> issubclass(MALA, BaseKernel), sorted(MALA().default_parameters(4, 2, jnp.float32))
    (True, ['step_size'])
    >>> try:
    ...     MALA(target_acceptance_rate=1.5)                     # options are checked when the kernel is made
    ... except ValueError as error:
    ...     print(error)
    sampler_options['target_acceptance_rate'] for 'mala' must be a number in (0, 1), got 1.5
    """

    name: ClassVar[str]
    uses_gradient: ClassVar[bool] = True
    adapts_mass_matrix: ClassVar[bool] = False
    starts_at_target: ClassVar[bool] = False
    #: Whether :meth:`step` takes a :class:`~jaxprobe.engine.core.Carrying` log density (its state then a
    #: :class:`CarryingState` or :class:`CarryingValueState`, made by ``carry`` and undone by ``uncarry``): MALA's
    #: and RWMH's; the engine evaluates the values at the kept draws for the others.
    carries_values: ClassVar[bool] = False

    def __post_init__(self) -> None:
        validate_options(self)
        if hasattr(self, "numerics"):  # "fast" → Numerics("fast"): equal policies, one compiled program
            object.__setattr__(self, "numerics", as_numerics(self.numerics))

    def default_parameters(self, num_chains: int, dim: int, dtype: Any, step_size: Any = None,
                           inverse_mass_matrix: Any = None) -> dict[str, Array]:
        """``step_size`` (given, else :meth:`initial_step_size`): a scalar stays scalar (shared by all
        chains: the fast path), ``(C,)`` is per chain; with ``adapts_mass_matrix``, the diagonal
        ``inverse_mass_matrix`` (given ``(D,)`` or ``(C, D)``, else ones) broadcast to ``(C, D)``."""
        if step_size is None:
            step_size = self.initial_step_size(dim)
        parameters = {"step_size": jnp.asarray(step_size, dtype)}
        if self.adapts_mass_matrix:
            imm = jnp.ones((dim,), dtype) if inverse_mass_matrix is None else jnp.asarray(inverse_mass_matrix, dtype)
            parameters["inverse_mass_matrix"] = jnp.broadcast_to(imm, (num_chains, dim))
        return parameters

    def adaptation(self, target_acceptance_rate: float | None = None, shared: bool = False) -> Adaptation:
        """Stan's windowed adaptation (:class:`jaxprobe.engine.core.WindowAdaptation`)."""
        return WindowAdaptation(self, target_acceptance_rate, shared)


class GradientKernel(BaseKernel):
    """A kernel whose state carries the log density and its gradient (:class:`GradientState`).

    Examples
    --------
    >>> issubclass(MALA, GradientKernel), MALA().uses_gradient     # its state caches the gradient
    (True, True)
    """

    uses_gradient: ClassVar[bool] = True

    def init(self, positions: Array, logdensity_fn: FlatLogDensity) -> GradientState:
        """Positions ``(C, D)`` → their log densities ``(C,)`` and gradients ``(C, D)`` (non-finite → −inf)."""
        logdensity, grad = _value_and_grad(safe_logdensity(logdensity_fn), positions)
        return GradientState(positions, logdensity, grad)


class ValueKernel(BaseKernel):
    """A gradient-free kernel: its state carries only the log density (:class:`ValueState`).

    Examples
    --------
    >>> issubclass(RWMH, ValueKernel), RWMH().uses_gradient        # log density values only
    (True, False)
    """

    uses_gradient: ClassVar[bool] = False

    def init(self, positions: Array, logdensity_fn: FlatLogDensity) -> ValueState:
        """Positions ``(C, D)`` → their log densities ``(C,)`` (non-finite → −inf)."""
        return ValueState(positions, map_points(safe_logdensity(logdensity_fn), positions))


def _metropolis_step(state: Any, proposal: Any, log_uniform: Array, log_q_ratio: Array | None,
                     num_gradient_evaluations: int) -> tuple[Any, StepInfo]:
    """The accept/reject test shared by MALA and RWMH: every chain moves from ``state`` to ``proposal``
    (a state of the same kind, its log density as the target returned it) when
    ``log u < log p(x') − log p(x) [+ log_q_ratio]``; a non-finite proposal, or a NaN ratio (e.g. from a
    NaN gradient, which compares False), is rejected. Returns the new state and the step's
    :class:`StepInfo` (``num_gradient_evaluations`` per chain)."""
    num_chains = state.position.shape[0]
    is_nonfinite = ~jnp.isfinite(proposal.logdensity)
    proposal = proposal._replace(logdensity=jnp.where(is_nonfinite, -jnp.inf, proposal.logdensity))
    log_ratio = proposal.logdensity - state.logdensity
    if log_q_ratio is not None:  # MALA's asymmetric proposal; RWMH's is symmetric (no zero is added)
        log_ratio = log_ratio + log_q_ratio
    is_accepted = (log_uniform < log_ratio) & ~is_nonfinite
    acceptance_rate = jnp.where(jnp.isnan(log_ratio), 0.0, jnp.exp(jnp.minimum(log_ratio, 0.0)))

    def select(new: Array, old: Array) -> Array:  # a chain's row of any field (and of carried values)
        return jnp.where(is_accepted.reshape(is_accepted.shape + (1,) * (new.ndim - 1)), new, old)

    new_state = type(proposal)(*(jax.tree.map(select, new, old) for new, old in zip(proposal, state)))
    info = StepInfo(
        acceptance_rate=acceptance_rate,
        is_accepted=is_accepted,
        is_divergent=jnp.zeros((num_chains,), bool),
        is_nonfinite=is_nonfinite,
        num_gradient_evaluations=jnp.full((num_chains,), num_gradient_evaluations, jnp.int32),
    )
    return new_state, info


_TARGET_DOC = "mean acceptance probability warmup adapts the step size towards"


def _target_option(default: float) -> Any:
    return float_option(default, minimum=0.0, maximum=1.0, exclusive_minimum=True, exclusive_maximum=True,
                        doc=_TARGET_DOC)


def _divergence_option() -> Any:
    return float_option(1000.0, minimum=0.0, exclusive_minimum=True,
                        doc="energy error above which a trajectory counts as divergent")


@dataclasses.dataclass(frozen=True)
class MALA(GradientKernel):
    """Metropolis-adjusted Langevin algorithm, batched over chains.

    Proposal (Roberts & Tweedie 1996; probing paper, Appendix C):
    ``x' = x + ε ∇log p(x) + √(2ε) ξ``, ``ξ ~ N(0, I)``, accepted with probability
    ``min(1, p(x') q(x | x') / (p(x) q(x' | x)))`` where
    ``log q(x' | x) = −|x' − x − ε ∇log p(x)|² / (4ε)``.

    The gradient at the current state is carried in the state, so a step costs
    one ``value_and_grad`` per chain. Parameters: ``step_size`` ε, a scalar (shared) or ``(C,)`` (per chain).

    Examples
    --------
    >>> MALA()                                                 # sampler="mala"; options as keyword arguments
    MALA(target_acceptance_rate=0.574, numerics=Numerics('reproducible'))
    """

    name: ClassVar[str] = "mala"
    carries_values: ClassVar[bool] = True
    target_acceptance_rate: float = _target_option(0.574)
    numerics: Numerics = numerics_field()

    def carry(self, state: GradientState, carrying: Carrying) -> CarryingState:
        """``state`` with the carried values of its positions, from the evaluation :meth:`step` makes."""
        (_, values), _ = carrying.value_and_grad(state.position)
        return CarryingState(*state, values)

    def uncarry(self, state: CarryingState) -> GradientState:
        """The :class:`GradientState` of a :class:`CarryingState`."""
        return GradientState(state.position, state.logdensity, state.logdensity_grad)

    def step(
        self,
        rng_key: PRNGKey,
        state: GradientState,
        parameters: StepSizeParameters,
        logdensity_fn: FlatLogDensity,
    ) -> tuple[GradientState, StepInfo]:
        position, grad = state.position, state.logdensity_grad
        num_chains = position.shape[0]
        step_size = _as_column(parameters["step_size"])
        noise, uniform = self.numerics.normal_and_uniform(rng_key, num_chains, position.shape[1], position.dtype)
        # Off a CPU the noise is generated once, into memory (barrier), and below the log q ratio's per-chain sum
        # is computed on its own (barrier): without them XLA:GPU fused that sum, and the noise's generation, into
        # the accept test's select, which then ran row by row: on one H100 at 2^20 chains, d = 30, 2.5 of the
        # step's 3.7 ms (the limit's whole step: 1.35 ms); with both 2.0 ms. On a CPU regenerating the noise where
        # it is used is cheaper than storing it (the noise's barrier cost 5-15% of a step there).
        noise, uniform = jax.lax.platform_dependent(
            (noise, uniform), cpu=lambda values: values, default=jax.lax.optimization_barrier)
        log_uniform = jnp.log(uniform)

        proposal = position + step_size * grad + jnp.sqrt(2.0 * step_size) * noise
        carrying = isinstance(logdensity_fn, Carrying)
        if carrying:  # values of the proposal beside its log density (CarryingState)
            (raw_logdensity, carried), proposal_grad = logdensity_fn.value_and_grad(proposal)
        else:
            raw_logdensity, proposal_grad = _value_and_grad(in_positions_dtype(logdensity_fn), proposal)

        # log q(x | x') − log q(x' | x) with x' − x = ε g + √(2ε) ξ and s = g + g' (g = ∇log p(x), g' = ∇log p(x')):
        # −|ε s + √(2ε) ξ|²/(4ε) + |ξ|²/2 = −Σ s (ε s / 4 + √(ε/2) ξ). One reduction instead of two,
        # and no cancellation between the two |ξ|²/2 terms.
        summed_grad = grad + proposal_grad
        log_q_ratio = jax.lax.optimization_barrier(-jnp.sum(
            summed_grad * (0.25 * step_size * summed_grad + jnp.sqrt(0.5 * step_size) * noise), axis=-1))
        moved = (CarryingState(proposal, raw_logdensity, proposal_grad, carried) if carrying
                 else GradientState(proposal, raw_logdensity, proposal_grad))
        return _metropolis_step(state, moved, log_uniform, log_q_ratio, num_gradient_evaluations=1)

    def initial_step_size(self, dim: int) -> float:
        return 0.1 * dim ** (-1.0 / 3.0)


@dataclasses.dataclass(frozen=True)
class RWMH(ValueKernel):
    """Gaussian random-walk Metropolis, batched over chains; needs no gradient.

    Proposal ``x' = x + σ ξ`` with ``σ = step_size`` (scalar or ``(C,)``). The right
    sampler for black-box or piecewise-constant targets (tree ensembles).

    Examples
    --------
    >>> RWMH().uses_gradient, RWMH().target_acceptance_rate      # sampler="rwmh": no gradient needed
    (False, 0.234)
    """

    name: ClassVar[str] = "rwmh"
    carries_values: ClassVar[bool] = True
    target_acceptance_rate: float = _target_option(0.234)
    numerics: Numerics = numerics_field()

    def carry(self, state: ValueState, carrying: Carrying) -> CarryingValueState:
        """``state`` with the carried values of its positions, from the evaluation :meth:`step` makes."""
        _, values = carrying.value(state.position)
        return CarryingValueState(*state, values)

    def uncarry(self, state: CarryingValueState) -> ValueState:
        """The :class:`ValueState` of a :class:`CarryingValueState`."""
        return ValueState(state.position, state.logdensity)

    def step(
        self,
        rng_key: PRNGKey,
        state: ValueState,
        parameters: StepSizeParameters,
        logdensity_fn: FlatLogDensity,
    ) -> tuple[ValueState, StepInfo]:
        position = state.position
        num_chains = position.shape[0]
        # One Threefry block per word in the reproducible mode (see numerics.normal_and_uniform).
        noise, uniform = self.numerics.normal_and_uniform(rng_key, num_chains, position.shape[1], position.dtype,
                                                          paired=False)
        log_uniform = jnp.log(uniform)
        proposal = position + _as_column(parameters["step_size"]) * noise
        if isinstance(logdensity_fn, Carrying):  # values of the proposal beside its log density (tree ensembles:
            values, carried = logdensity_fn.value(proposal)  # G once a step, not again at each kept draw)
            moved = CarryingValueState(proposal, values, carried)
        else:
            moved = ValueState(proposal, map_points(in_positions_dtype(logdensity_fn), proposal))  # jaxprobe._pointwise
        return _metropolis_step(state, moved, log_uniform, log_q_ratio=None, num_gradient_evaluations=0)

    def initial_step_size(self, dim: int) -> float:
        return 2.38 / dim**0.5 * 0.5


def vmap_chains(one_chain: Callable, rng_key: PRNGKey, state: Any, *per_chain_args: Any) -> Any:
    """Run a single-chain kernel on every chain: ``jax.vmap(one_chain)(keys, state, *per_chain_args)`` (on a CPU
    where one vmap would fall off XLA's CPU cliff, in batches of chains: jaxprobe._pointwise).

    ``keys`` are ``jax.random.split(rng_key, C)`` (one per chain); ``state`` is a kernel state with a
    leading chain axis (``state.position`` ``(C, D)``); every ``per_chain_args`` leaf has a leading
    axis ``C`` too (:func:`per_chain` broadcasts a shared step size). Returns what ``one_chain``
    returns, stacked over chains (e.g. BlackJAX's ``(state, info)`` with leaves ``(C, ...)``).

    Examples
    --------
    >>> def one_chain(key, chain_state, step_size):               # a random-walk proposal of one chain
    ...     return chain_state.position + step_size * jax.random.normal(key, chain_state.position.shape)
    >>> state = ValueState(jnp.zeros((4, 2)), jnp.zeros(4))
    >>> proposals = vmap_chains(one_chain, jax.random.key(0), state, per_chain(jnp.asarray(0.1), 4))
    >>> proposals.shape, bool(jnp.all(proposals[0] != proposals[1]))   # each chain its own key
    ((4, 2), True)
    """
    keys = jax.random.split(rng_key, state.position.shape[0])
    # one vmap, or on a CPU batches of chains where one vmap would fall off XLA's CPU cliff (jaxprobe._pointwise)
    return map_points(lambda chain_args: one_chain(*chain_args), (keys, state, *per_chain_args))


def _hamiltonian_step(kernel: Any, trajectory: int, numerics: Any, rng_key: PRNGKey, state: GradientState,
                      parameters: MassMatrixParameters, logdensity_fn: FlatLogDensity) -> tuple[GradientState, Any]:
    """One transition of a BlackJAX HMC-family ``kernel`` (``build_kernel``'s function, whose last argument is
    ``trajectory``: leapfrog steps for HMC, doublings for NUTS) on every chain, with a per-chain step size and
    diagonal inverse mass matrix; the log density guarded by :func:`safe_logdensity`. Returns the new state
    and BlackJAX's info stacked over chains."""
    safe = safe_logdensity(logdensity_fn)

    def one_chain(key, chain_state, step_size, inverse_mass_matrix):
        return kernel(key, bj_hmc.HMCState(*chain_state), safe, step_size, numerics.metric(inverse_mass_matrix),
                      trajectory)

    new_state, info = vmap_chains(one_chain, rng_key, state,
                                  per_chain(parameters["step_size"], state.position.shape[0]),
                                  parameters["inverse_mass_matrix"])
    return GradientState(*new_state), info


@dataclasses.dataclass(frozen=True)
class HMC(GradientKernel):
    """Hamiltonian Monte Carlo with a fixed number of leapfrog steps (BlackJAX kernel).

    Parameters: ``step_size`` (scalar or ``(C,)``) and a diagonal ``inverse_mass_matrix`` ``(C, D)``.

    Examples
    --------
    >>> HMC(num_integration_steps=20).num_integration_steps     # sampler_options={"num_integration_steps": 20}
    20
    """

    name: ClassVar[str] = "hmc"
    num_integration_steps: int = int_option(10, minimum=1, doc="leapfrog steps per transition")
    target_acceptance_rate: float = _target_option(0.8)
    divergence_threshold: float = _divergence_option()
    numerics: Numerics = numerics_field()
    adapts_mass_matrix: ClassVar[bool] = True

    def step(self, rng_key: PRNGKey, state: GradientState, parameters: MassMatrixParameters,
             logdensity_fn: FlatLogDensity) -> tuple[GradientState, StepInfo]:
        kernel = bj_hmc.build_kernel(divergence_threshold=self.divergence_threshold)
        new_state, info = _hamiltonian_step(kernel, self.num_integration_steps, self.numerics, rng_key, state,
                                            parameters, logdensity_fn)
        is_nonfinite = ~jnp.isfinite(info.proposal.logdensity)
        return new_state, StepInfo(
            acceptance_rate=jnp.where(is_nonfinite, 0.0, info.acceptance_rate),
            is_accepted=info.is_accepted & ~is_nonfinite,
            is_divergent=info.is_divergent,
            is_nonfinite=is_nonfinite,
            num_gradient_evaluations=jnp.full((state.position.shape[0],), self.num_integration_steps, jnp.int32),
        )

    def initial_step_size(self, dim: int) -> float:
        return 0.1


def _nuts_kernel(divergence_threshold: float) -> Callable:
    """BlackJAX's iterative NUTS kernel (``blackjax.mcmc.nuts.build_kernel``, velocity Verlet), with the
    initial proposal's weight and acceptance sum in the energy's dtype.

    BlackJAX starts them as Python floats, weak float64 under ``jax_enable_x64``: with float32 positions
    its ``lax.cond`` branches then differ in type and tracing fails. Typed here, the draws are unchanged
    (the values are the same 0 and -inf)."""
    def kernel(rng_key, state, logdensity_fn, step_size, inverse_mass_matrix, max_num_doublings):
        metric = bj_metrics.default_metric(inverse_mass_matrix)
        integrator = bj_integrators.velocity_verlet(logdensity_fn, metric.kinetic_energy)
        new_termination, update_termination, is_criterion_met = bj_termination.iterative_uturn_numpyro(
            metric.check_turning)
        expand = bj_trajectory.dynamic_multiplicative_expansion(
            bj_trajectory.dynamic_progressive_integration(integrator, metric.kinetic_energy, update_termination,
                                                          is_criterion_met, divergence_threshold),
            metric.check_turning, max_num_doublings)
        key_momentum, key_integrator = jax.random.split(rng_key, 2)
        position, logdensity, logdensity_grad = state
        momentum = metric.sample_momentum(key_momentum, position)
        initial = bj_integrators.IntegratorState(position, momentum, logdensity, logdensity_grad)
        energy = -logdensity + metric.kinetic_energy(momentum)
        proposal = bj_proposal.Proposal(initial, energy, jnp.zeros_like(energy), jnp.full_like(energy, -jnp.inf))
        expansion = bj_trajectory.DynamicExpansionState(
            0, proposal, bj_trajectory.Trajectory(initial, initial, momentum, 0),
            new_termination(initial, max_num_doublings))
        (num_doublings, sampled, trajectory, _), (is_diverging, is_turning) = expand(
            key_integrator, expansion, energy, step_size)
        info = bj_nuts.NUTSInfo(momentum, is_diverging, is_turning, sampled.energy, trajectory.leftmost_state,
                                trajectory.rightmost_state, num_doublings, trajectory.num_states,
                                jnp.exp(sampled.sum_log_p_accept) / trajectory.num_states)
        return bj_hmc.HMCState(sampled.state.position, sampled.state.logdensity, sampled.state.logdensity_grad), info

    return kernel


@dataclasses.dataclass(frozen=True)
class NUTS(GradientKernel):
    """The No-U-Turn sampler (BlackJAX's iterative, multinomial NUTS), vmapped over chains.

    Chains run in lockstep: a step lasts as long as the longest trajectory among
    the chains. A non-finite log density inside a trajectory ends it as a
    divergence (``num_divergent``); ``is_nonfinite`` flags a non-finite energy of
    the chosen proposal. Parameters as for :class:`HMC`.

    Examples
    --------
    >>> NUTS(max_num_doublings=8)                              # doctest: +ELLIPSIS
    NUTS(max_num_doublings=8, target_acceptance_rate=0.8, ...)
    """

    name: ClassVar[str] = "nuts"
    # At most 2^k leapfrog steps per transition; 30 keeps 2^k inside BlackJAX's int32 step counts.
    max_num_doublings: int = int_option(10, minimum=1, maximum=30, doc="trajectory doublings per transition")
    target_acceptance_rate: float = _target_option(0.8)
    divergence_threshold: float = _divergence_option()
    numerics: Numerics = numerics_field()
    adapts_mass_matrix: ClassVar[bool] = True

    def step(self, rng_key: PRNGKey, state: GradientState, parameters: MassMatrixParameters,
             logdensity_fn: FlatLogDensity) -> tuple[GradientState, StepInfo]:
        kernel = _nuts_kernel(self.divergence_threshold)
        new_state, info = _hamiltonian_step(kernel, self.max_num_doublings, self.numerics, rng_key, state,
                                            parameters, logdensity_fn)
        return new_state, StepInfo(
            acceptance_rate=info.acceptance_rate,
            is_accepted=jnp.ones_like(info.is_divergent),
            is_divergent=info.is_divergent,
            is_nonfinite=~jnp.isfinite(info.energy),
            num_gradient_evaluations=info.num_integration_steps.astype(jnp.int32),
        )

    def initial_step_size(self, dim: int) -> float:
        return 0.1


@dataclasses.dataclass(frozen=True)
class ChEES(BaseKernel):
    """Jittered HMC (BlackJAX's dynamic HMC) tuned by ChEES (Hoffman, Radul & Sountsov 2021).

    Warmup maximizes the Change in the Estimator of the Expected Square across
    all chains at once (cross-chain statistics), so it improves with the number
    of chains: the default choice for hundreds of chains. The trajectory length
    is jittered by a Halton sequence, as in BlackJAX's ``chees_adaptation``; the adaptation is
    :class:`jaxprobe.engine.chees.ChEESAdaptation` (BlackJAX's update; in the reproducible numerics
    mode written out with batch-invariant reductions).
    Parameters (:class:`ChEESParameters`): one shared ``step_size`` and ``inverse_mass_matrix``
    (broadcast per chain) and ``num_leapfrog_steps`` (mean trajectory length in steps).

    Examples
    --------
    >>> ChEES().adapts_mass_matrix, ChEES().target_acceptance_rate   # sampler="chees": for hundreds of chains
    (True, 0.651)
    """

    name: ClassVar[str] = "chees"
    target_acceptance_rate: float = _target_option(0.651)
    learning_rate: float = float_option(0.025, minimum=0.0, exclusive_minimum=True,
                                        doc="Adam's learning rate for the log trajectory length")
    max_leapfrog_steps: int = int_option(1000, minimum=1, doc="upper bound of the trajectory length in steps")
    # The Halton jitter works on the bits of an int32 index.
    max_bits: int = int_option(20, minimum=1, maximum=31, doc="bits of the Halton sequence's index")
    divergence_threshold: float = _divergence_option()
    numerics: Numerics = numerics_field()
    uses_gradient: ClassVar[bool] = True
    adapts_mass_matrix: ClassVar[bool] = True

    def default_parameters(self, num_chains: int, dim: int, dtype: Any, step_size: Any = None,
                           inverse_mass_matrix: Any = None, num_leapfrog_steps: Any = None) -> ChEESParameters:
        """Those of HMC plus ``num_leapfrog_steps`` ``(C,)`` (given, else 10)."""
        parameters = super().default_parameters(num_chains, dim, dtype, step_size, inverse_mass_matrix)
        steps = 10.0 if num_leapfrog_steps is None else num_leapfrog_steps
        parameters["num_leapfrog_steps"] = jnp.broadcast_to(jnp.asarray(steps, dtype), (num_chains,))
        return parameters

    def adaptation(self, target_acceptance_rate: float | None = None, shared: bool = False) -> Adaptation:
        """Cross-chain ChEES adaptation (always shared: ``shared`` has no effect)."""
        del shared
        return ChEESAdaptation(self, target_acceptance_rate)

    def init(self, positions: Array, logdensity_fn: FlatLogDensity) -> DynamicState:
        logdensity, grad = _value_and_grad(safe_logdensity(logdensity_fn), positions)
        index = jnp.zeros((positions.shape[0],), jnp.int32)
        return DynamicState(positions, logdensity, grad, index)

    def jitter(self, random_generator_arg: Array) -> Array:
        """The Halton jitter in (0, 1] of trajectory ``random_generator_arg`` (shared by all chains)."""
        return bj_dynamic_hmc.halton_sequence(random_generator_arg, self.max_bits)

    def _integration_steps(self, random_generator_arg: Array, num_leapfrog_steps: Array) -> Array:
        jitter = self.jitter(random_generator_arg)
        return jnp.maximum(jnp.ceil(jitter * num_leapfrog_steps), 1).astype(jnp.int32)

    def step(self, rng_key: PRNGKey, state: DynamicState, parameters: ChEESParameters,
             logdensity_fn: FlatLogDensity) -> tuple[DynamicState, StepInfo]:
        new_state, info, _ = self.step_with_proposal(rng_key, state, parameters, logdensity_fn)
        return new_state, info

    def step_with_proposal(self, rng_key: PRNGKey, state: DynamicState, parameters: ChEESParameters,
                           logdensity_fn: FlatLogDensity) -> tuple[DynamicState, StepInfo, Any]:
        """A step that also returns BlackJAX's per-chain ``HMCInfo`` (the proposal's position and
        momentum, which ChEES adaptation reads)."""
        safe = safe_logdensity(logdensity_fn)
        kernel = bj_dynamic_hmc.build_kernel(
            divergence_threshold=self.divergence_threshold,
            next_random_arg_fn=lambda i: i + 1,
            integration_steps_fn=self._integration_steps,
        )

        def one_chain(key, chain_state, step_size, inverse_mass_matrix, num_leapfrog_steps):
            return kernel(
                key,
                bj_dynamic_hmc.DynamicHMCState(*chain_state),
                safe,
                step_size,
                self.numerics.metric(inverse_mass_matrix),
                (num_leapfrog_steps,),
            )

        new_state, info = vmap_chains(
            one_chain,
            rng_key,
            state,
            per_chain(parameters["step_size"], state.position.shape[0]),
            parameters["inverse_mass_matrix"],
            parameters["num_leapfrog_steps"],
        )
        is_nonfinite = ~jnp.isfinite(info.proposal.logdensity)
        return DynamicState(*new_state), StepInfo(
            acceptance_rate=jnp.where(is_nonfinite, 0.0, info.acceptance_rate),
            is_accepted=info.is_accepted & ~is_nonfinite,
            is_divergent=info.is_divergent,
            is_nonfinite=is_nonfinite,
            num_gradient_evaluations=jnp.asarray(info.num_integration_steps, jnp.int32),
        ), info

    def initial_step_size(self, dim: int) -> float:
        return 0.1


@dataclasses.dataclass(frozen=True)
class SMC(BaseKernel):
    """Adaptive tempered sequential Monte Carlo, then its particles continue as chains (``sampler="smc"``).

    Not a transition kernel of its own but a way to START chains at the target: particles drawn
    exactly from the reference r (the prior restricted to the feature space) are moved
    through ``r·exp(λ ℓ)``, λ: 0 → 1 (:meth:`start`, :func:`jaxprobe.engine.smc.tempered_smc`), which
    gets the proportions of separated modes right where chains started anywhere else
    keep the proportions of their starting points. The particles then run as chains of
    the ``kernel`` sampler (``"mala"`` or ``"hmc"``, :meth:`chains`) at the target; as a
    :class:`jaxprobe.engine.protocols.Kernel` it is that kernel (``init``, ``step``, parameters and
    warmup delegate to :meth:`chains`). Options:
    ``kernel``, ``num_mcmc_steps`` (inner steps per stage, default 4), ``target_ess`` (ESS fraction
    that sets each λ increment, default 0.7), ``num_groups`` (independent particle groups, for the
    standard error of log Z), ``max_stages``, ``num_integration_steps`` (HMC).

    Examples
    --------
    >>> SMC(kernel="hmc", num_mcmc_steps=10)                   # doctest: +ELLIPSIS
    SMC(kernel='hmc', num_mcmc_steps=10, ...)
    >>> SMC().starts_at_target                                 # chains start at draws of the target
    True
    """

    name: ClassVar[str] = "smc"
    starts_at_target: ClassVar[bool] = True
    uses_gradient: ClassVar[bool] = True
    kernel: str = choice_option("mala", SMC_INNER_KERNELS,
                                doc="the kernel that moves the particles, then the chains")
    # 4 steps at ESS 0.7: spread of mode shares and log Z per gradient evaluation 0.80-0.95× that of BlackJAX's best
    # setting on each of the three questions of benchmarks/results/smc_peers.md, in two independent sets of seeds
    # (200 seeds, then 300 more); 5 steps at ESS 0.5 (the default before) 0.86-1.12×, 10 steps (before that)
    # 1.0-1.4×, 3 steps at ESS 0.8 0.72-1.01×: a little more gradients per stage, many fewer stages' noise.
    num_mcmc_steps: int = int_option(4, minimum=1, doc="inner kernel steps per tempering stage")
    target_ess: float = float_option(0.7, minimum=0.0, maximum=1.0, exclusive_minimum=True, exclusive_maximum=True,
                                     doc="effective sample size fraction that sets each increment of λ")
    num_groups: int | None = int_option(None, minimum=1, allow_none=True,
                                        doc="independent particle groups (None: N/128 clipped to [2, 16])")
    max_stages: int = int_option(200, minimum=1, doc="most tempering stages before giving up")
    num_integration_steps: int = int_option(8, minimum=1, doc="leapfrog steps per HMC step")
    numerics: Numerics = numerics_field()

    def groups(self, num_particles: int) -> int:
        """Independent particle groups for N particles: ``num_groups`` if given, else N/128 clipped to
        [2, 16] (and down to a divisor of N). Each group is its own SMC system, so a particle average carries
        the O(1/n) bias of n = N/G particles, while the error bar of log Z is estimated from G values (a t
        statistic with G − 1 degrees of freedom: 4 groups gave a 4.5-se miss on a benchmark seed, 8 did not)."""
        if self.num_groups is not None:
            return self.num_groups
        groups = max(2, min(16, num_particles // 128))
        while num_particles % groups:
            groups -= 1
        return groups

    def chains(self) -> GradientKernel:
        """The kernel the particles continue with at the target."""
        return _SMC_CHAIN_KERNELS[self.kernel](self)

    def start(self, rng_key: PRNGKey, reference_logdensity: FlatLogDensity, tilt: FlatLogDensity,
              particles: Array) -> Any:
        """Move ``particles`` ``(N, D)``, exact draws of the reference, to the target ``reference · exp(tilt)``:
        :func:`jaxprobe.engine.smc.tempered_smc` with this sampler's options (its ``SMCResult``)."""
        return tempered_smc(rng_key, reference_logdensity, tilt, particles, kernel=self.kernel,
                            num_mcmc_steps=self.num_mcmc_steps, target_ess=self.target_ess,
                            max_stages=self.max_stages, num_groups=self.groups(particles.shape[0]),
                            num_integration_steps=self.num_integration_steps)

    # As a Kernel: the chains' kernel.
    @property
    def adapts_mass_matrix(self) -> bool:
        return self.chains().adapts_mass_matrix

    @property
    def target_acceptance_rate(self) -> float:
        return self.chains().target_acceptance_rate

    def init(self, positions: Array, logdensity_fn: FlatLogDensity) -> Any:
        return self.chains().init(positions, logdensity_fn)

    def step(self, rng_key: PRNGKey, state: Any, parameters: Any, logdensity_fn: FlatLogDensity) -> Any:
        return self.chains().step(rng_key, state, parameters, logdensity_fn)

    def initial_step_size(self, dim: int) -> float:
        return self.chains().initial_step_size(dim)

    def default_parameters(self, num_chains: int, dim: int, dtype: Any, step_size: Any = None,
                           inverse_mass_matrix: Any = None) -> dict[str, Array]:
        return self.chains().default_parameters(num_chains, dim, dtype, step_size, inverse_mass_matrix)

    def adaptation(self, target_acceptance_rate: float | None = None, shared: bool = False) -> Adaptation:
        return self.chains().adaptation(target_acceptance_rate, shared)


#: The chain kernel of each ``SMC(kernel=...)`` choice, built from the SMC options.
_SMC_CHAIN_KERNELS: dict[str, Callable[[SMC], GradientKernel]] = {
    "mala": lambda smc: MALA(numerics=smc.numerics),
    "hmc": lambda smc: HMC(num_integration_steps=smc.num_integration_steps, numerics=smc.numerics),
}

#: The samplers jaxprobe ships, in the order ``known_samplers()`` lists them (the registry,
#: :mod:`jaxprobe.engine.registry`, starts with these).
BUILTIN_KERNELS: tuple[type, ...] = (MALA, RWMH, HMC, NUTS, ChEES, SMC)
