"""The samplers a benchmark runs, as one kind of program: a warmup and a step of C chains.

Each sampler the user names (:func:`resolve`) becomes a :class:`Program` for one target: ``warmup(key, x0)`` takes
the starting points ``(C, D)`` to a sampling state, and ``step(key, state)`` moves every chain once and says what
it cost (:class:`StepOut`). :mod:`jaxprobe.benchmark.compare` runs any program the same way: vmapped over seeds,
one compiled call, so that jaxprobe's kernels and BlackJAX's algorithms are timed by one harness.

Gradient evaluations are counted, not assumed: jaxprobe's kernels report them per step; for BlackJAX, the step's
``info.num_integration_steps`` where the algorithm reports one (HMC, NUTS, ...), else the gradients of the log
density traced in one step (a ``jax.custom_jvp`` counter, exact for kernels without an inner loop such as MALA;
a kernel that loops a data-dependent number of times and does not report it is undercounted).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, NamedTuple

import jax
import jax.numpy as jnp

from jaxprobe.engine import core
from jaxprobe.engine.protocols import EngineState, Kernel
from jaxprobe.engine.registry import known_samplers, make_kernel

__all__ = ["BlackJAXSampler", "JaxprobeSampler", "NumPyroNUTS", "Program", "StepOut", "from_blackjax",
           "resolve", "BUILTIN_PEERS"]

#: Built-in peer rows (names accepted besides jaxprobe's sampler names).
BUILTIN_PEERS = ("blackjax-nuts", "numpyro-nuts")


class StepOut(NamedTuple):
    """What one step of C chains reports: ``position`` ``(C, D)``, ``logdensity``, ``acceptance``, ``divergent``
    and ``gradients`` ``(C,)`` (gradient evaluations spent by the step).

    Examples
    --------
    >>> out = StepOut(jnp.zeros((2, 3)), jnp.zeros(2), jnp.ones(2), jnp.zeros(2, bool), jnp.ones(2, jnp.int32))
    >>> out.position.shape, out.gradients.tolist()                  # 2 chains in 3-D, one gradient each
    ((2, 3), [1, 1])
    """

    position: jax.Array
    logdensity: jax.Array
    acceptance: jax.Array
    divergent: jax.Array
    gradients: jax.Array


class Program(NamedTuple):
    """``warmup(key, x0 (C, D)) -> (state, warmup gradients (C,))``; ``step(key, state) -> (state, StepOut)``;
    ``adapted(state) -> bool scalar`` (None: always True): whether the warmup's adapted parameters are usable
    (finite), checked once after the warmup so that a failed adaptation is a row's failure by name.

    Examples
    --------
    >>> def stay(key, x):                          # a "sampler" whose chains never move and spend no gradient
    ...     c = x.shape[0]
    ...     return x, StepOut(x, jnp.zeros(c), jnp.ones(c), jnp.zeros(c, bool), jnp.zeros(c, jnp.int32))
    >>> program = Program(lambda key, x0: (x0, jnp.zeros(x0.shape[0], jnp.int32)), stay)
    >>> state, out = program.step(jax.random.key(0), jnp.ones((3, 2)))
    >>> out.acceptance.tolist(), program.adapted is None
    ([1.0, 1.0, 1.0], True)
    """

    warmup: Callable[[jax.Array, jax.Array], tuple[Any, jax.Array]]
    step: Callable[[jax.Array, Any], tuple[Any, StepOut]]
    adapted: Callable[[Any], jax.Array] | None = None


class MakeError(TypeError):
    """``make`` of :func:`from_blackjax` did not return a BlackJAX ``SamplingAlgorithm`` (bad input, not a
    failure of one run: :func:`jaxprobe.benchmark.compare` lets it through)."""


# ------------------------------------------------------------------ jaxprobe


@dataclasses.dataclass(frozen=True, eq=False)
class JaxprobeSampler:
    """A jaxprobe :class:`~jaxprobe.engine.protocols.Kernel` with its own warmup (``kernel.adaptation()``).

    Examples
    --------
    >>> from jaxprobe.benchmark import get_target
    >>> mala, smc = JaxprobeSampler(make_kernel("mala")), JaxprobeSampler(make_kernel("smc"))   # as "mala", "smc"
    >>> schools = get_target("eight_schools_centred")                    # starts of its own (Stan-style inits)
    >>> mala.applies(schools) is None, smc.applies(schools).startswith("not applicable")
    (True, True)
    """

    kernel: Kernel
    family: str = "jaxprobe"

    def applies(self, target: Any) -> str | None:
        """None if this sampler runs on ``target``, else why not: a sampler that starts at the target (SMC)
        tempers from a standard normal reference, which needs the target's starts to be its draws
        (``target.init`` None)."""
        if getattr(self.kernel, "starts_at_target", False) and target.init is not None:
            return "not applicable: SMC tempers from the standard normal starts, and this target has its own init"
        return None

    def program(self, logdensity_fn: Callable, dim: int, num_warmup: int) -> Program:
        smc = self.kernel if getattr(self.kernel, "starts_at_target", False) else None
        kernel = smc.chains() if smc is not None else self.kernel

        def warmup(key, x0):
            smc_gradients = jnp.zeros(x0.shape[:1], jnp.int32)
            if smc is not None:  # x0 are standard normal draws: the exact reference draws SMC starts from
                key, smc_key = jax.random.split(key)
                result = smc.start(smc_key, _standard_normal, _Tilt(logdensity_fn), x0)
                x0, smc_gradients = result.particles, result.info.num_gradient_evaluations.astype(jnp.int32)
            state = core.init(kernel, logdensity_fn, x0)
            if num_warmup == 0:
                return state, smc_gradients
            state, stats = core.adapt(key, state, kernel.adaptation(), logdensity_fn, num_warmup)
            return state, stats.num_gradient_evaluations + smc_gradients

        def step(key, state):
            kernel_state, info = kernel.step(key, state.kernel_state, state.parameters, logdensity_fn)
            out = StepOut(kernel_state.position, kernel_state.logdensity, info.acceptance_rate, info.is_divergent,
                          info.num_gradient_evaluations)
            return EngineState(kernel_state, state.parameters, state.step + 1), out

        return Program(warmup, step)


def _standard_normal(x: jax.Array) -> jax.Array:
    """The reference SMC tempers from: N(0, I), unnormalized."""
    return -0.5 * jnp.sum(x * x)


@dataclasses.dataclass(frozen=True)
class _Tilt:
    """``logdensity_fn − log N(0, I)``: what SMC tempers in (hashable by the log density's identity)."""

    logdensity_fn: Callable

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.logdensity_fn(x) - _standard_normal(x)


# ------------------------------------------------------------------ BlackJAX


def _counting(logdensity_fn: Callable) -> tuple[Callable, list[int]]:
    """``logdensity_fn`` with a trace-time counter of its derivatives (``count[0]`` grows by one each time a
    gradient of it is traced)."""
    count = [0]

    @jax.custom_jvp
    def counted(x):
        return logdensity_fn(x)

    @counted.defjvp
    def counted_jvp(primals, tangents):
        count[0] += 1
        return jax.jvp(logdensity_fn, primals, tangents)

    return counted, count


def _check_algorithm(algorithm: Any) -> Any:
    if not (callable(getattr(algorithm, "init", None)) and callable(getattr(algorithm, "step", None))):
        raise MakeError(f"make(logdensity_fn) must return a BlackJAX SamplingAlgorithm (with init(position) and "
                        f"step(rng_key, state)), e.g. blackjax.mala(logdensity_fn, step_size=0.1); got "
                        f"{type(algorithm).__name__}")
    return algorithm


def _integration_steps(info: Any, traced: int, shape: tuple[int, ...]) -> jax.Array:
    """Gradient evaluations per step from a BlackJAX info: ``num_integration_steps`` where reported, else the
    ``traced`` count of one step."""
    steps = getattr(info, "num_integration_steps", None)
    if steps is None:
        return jnp.full(shape, traced, jnp.int32)
    return jnp.broadcast_to(jnp.asarray(steps, jnp.int32), shape)


def _step_out(state: Any, info: Any, traced: int, num_chains: int) -> StepOut:
    acceptance = getattr(info, "acceptance_rate", None)
    if acceptance is None:
        acceptance = jnp.asarray(getattr(info, "is_accepted", jnp.ones((num_chains,))), jnp.float32)
    divergent = getattr(info, "is_divergent", None)
    divergent = jnp.zeros((num_chains,), bool) if divergent is None else divergent
    logdensity = getattr(state, "logdensity", None)
    logdensity = jnp.full((num_chains,), jnp.nan) if logdensity is None else logdensity
    return StepOut(state.position, logdensity, jnp.asarray(acceptance, jnp.float32),
                   jnp.asarray(divergent, bool), _integration_steps(info, traced, (num_chains,)))


@dataclasses.dataclass(frozen=True, eq=False)
class BlackJAXSampler:
    """A BlackJAX algorithm (:func:`from_blackjax`): one chain's ``init``/``step`` vmapped over chains.

    Examples
    --------
    >>> import blackjax
    >>> logdensity = lambda x: -0.5 * jnp.sum(x ** 2)
    >>> from_blackjax(lambda f: blackjax.mala(f, step_size=0.5)).check(logdensity)    # a SamplingAlgorithm: fine
    >>> BlackJAXSampler(lambda f: "not an algorithm").check(logdensity)                # refused before any run
    Traceback (most recent call last):
    ...
    jaxprobe.benchmark.samplers.MakeError: make(logdensity_fn) must return a BlackJAX SamplingAlgorithm ...
    """

    make: Callable[..., Any]
    adaptation: Callable[..., Any] | None = None
    across_chains: bool = False
    family: str = "blackjax"

    def check(self, logdensity_fn: Callable, num_chains: int = 1) -> None:
        """Without an adaptation, ``make(logdensity_fn)`` is called here and must be a SamplingAlgorithm; with
        one, ``adaptation(logdensity_fn)`` (across chains: ``adaptation(logdensity_fn, num_chains)``) must have
        ``run``."""
        if self.adaptation is None:
            _check_algorithm(self.make(logdensity_fn))
        elif not callable(getattr(self._adaptation(logdensity_fn, num_chains), "run", None)):
            raise MakeError("adaptation must return a BlackJAX adaptation (with run(rng_key, position, "
                            "num_steps)), e.g. lambda f: blackjax.window_adaptation(blackjax.nuts, f) per chain, "
                            "lambda f, num_chains: blackjax.meads_adaptation(f, num_chains) across chains")

    def _adaptation(self, logdensity_fn: Callable, num_chains: int) -> Any:
        """The user's adaptation for this log density (across chains: and this chain count)."""
        if self.across_chains:
            return self.adaptation(logdensity_fn, num_chains)
        return self.adaptation(logdensity_fn)

    def _burn_in(self, logdensity_fn, num_warmup):
        def warmup(key, x0):
            algorithm = _check_algorithm(self.make(logdensity_fn))
            state = jax.vmap(algorithm.init)(x0)
            step = self._step(logdensity_fn)
            carry = (state, None)

            def one(carry, t):
                carry, out = step(jax.random.fold_in(key, t), carry)
                return carry, out.gradients

            carry, gradients = jax.lax.scan(one, carry, jnp.arange(num_warmup))
            return carry, jnp.sum(gradients, axis=0).astype(jnp.int32)

        return warmup

    def _adapted(self, logdensity_fn, num_warmup, static):
        def warmup(key, x0):
            counted, count = _counting(logdensity_fn)
            before = count[0]
            adaptation = self._adaptation(counted, x0.shape[0])
            run = lambda k, x: adaptation.run(k, x, num_steps=num_warmup)  # noqa: E731
            if self.across_chains:
                (state, parameters), info = run(key, x0)
            else:
                keys = jax.random.split(key, x0.shape[0])
                (state, parameters), info = jax.vmap(run)(keys, x0)
            steps = getattr(getattr(info, "info", None), "num_integration_steps", None)
            if steps is None:  # traced gradients of one step, times the steps
                gradients = jnp.full(x0.shape[:1], (count[0] - before) * num_warmup, jnp.int32)
            else:
                steps = jnp.asarray(steps, jnp.int32)
                gradients = jnp.broadcast_to(jnp.sum(steps, axis=-1 if not self.across_chains else 0),
                                             x0.shape[:1]).astype(jnp.int32)
            arrays, static["rebuild"] = _split_parameters(parameters)
            return (state, arrays), gradients

        return warmup

    def _step(self, logdensity_fn, static=None):
        """One step of every chain; with an adaptation, ``static["rebuild"]`` (set by its warmup, traced first)
        makes the parameters again from the arrays the state carries."""
        per_chain = self.adaptation is not None and not self.across_chains

        def step(key, carry):
            state, parameters = carry
            counted, count = _counting(logdensity_fn)
            num_chains = jax.tree.leaves(state)[0].shape[0]
            keys = jax.random.split(key, num_chains)

            def one(k, s, arrays):
                p = None if arrays is None else static["rebuild"](arrays)
                algorithm = _check_algorithm(self.make(counted) if p is None else self.make(counted, **p))
                return algorithm.step(k, s)

            before = count[0]
            in_axes = (0, 0, 0 if per_chain else None)
            state, info = jax.vmap(one, in_axes=in_axes)(keys, state, parameters)
            return (state, parameters), _step_out(state, info, count[0] - before, num_chains)

        return step

    def program(self, logdensity_fn: Callable, dim: int, num_warmup: int) -> Program:
        if self.adaptation is None:
            return Program(self._burn_in(logdensity_fn, num_warmup), self._step(logdensity_fn))
        static: dict[str, Callable] = {}  # how the warmup's parameters are made again from their arrays
        return Program(self._adapted(logdensity_fn, num_warmup, static), self._step(logdensity_fn, static),
                       _finite_parameters)


def _split_parameters(parameters: Any) -> tuple[list[jax.Array], Callable[[list[jax.Array]], Any]]:
    """An adaptation's parameters as ``(arrays, rebuild)``: the array leaves, which a scan can carry, and a
    function making the parameters again from them with the other leaves as they were (ChEES returns functions,
    ``integration_steps_fn`` and ``next_random_arg_fn``, which close over its adapted values)."""
    leaves, treedef = jax.tree.flatten(parameters)
    is_array = [isinstance(leaf, (jax.Array, float, int)) or hasattr(leaf, "__array__") for leaf in leaves]
    arrays = [jnp.asarray(leaf) for leaf, array in zip(leaves, is_array) if array]

    def rebuild(new_arrays: list[jax.Array]) -> Any:
        remaining = iter(new_arrays)
        return treedef.unflatten([next(remaining) if array else leaf for leaf, array in zip(leaves, is_array)])

    return arrays, rebuild


def _finite_parameters(carry: Any) -> jax.Array:
    """Whether every floating-point array of an adaptation's parameters (``carry = (state, parameter arrays)``)
    is finite: a cross-chain adaptation given too few chains returns NaN ones (MEADS: one chain per fold)."""
    leaves = [leaf for leaf in jax.tree.leaves(carry[1]) if jnp.issubdtype(leaf.dtype, jnp.floating)]
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(leaf)) for leaf in leaves])) if leaves else jnp.array(True)


def from_blackjax(make: Callable[..., Any], adaptation: Callable[..., Any] | None = None, *,
                  across_chains: bool = False) -> BlackJAXSampler:
    """A BlackJAX algorithm as a benchmark sampler.

    Parameters
    ----------
    make
        ``make(logdensity_fn)`` → a BlackJAX ``SamplingAlgorithm`` of ONE chain (``init(position (D,))``,
        ``step(rng_key, state)``), e.g. ``lambda f: blackjax.mala(f, step_size=0.1)``. With an ``adaptation``,
        ``make(logdensity_fn, **parameters)`` with the parameters the adaptation returns.
    adaptation
        None (warmup steps are plain burn-in with ``make(logdensity_fn)``), or a function returning a BlackJAX
        adaptation with ``run(rng_key, position, num_steps)`` → ``((state, parameters), info)``: per chain
        ``adaptation(logdensity_fn)``, e.g. ``lambda f: blackjax.window_adaptation(blackjax.nuts, f)``; across
        chains ``adaptation(logdensity_fn, num_chains)`` (the run's chain count, so that one sampler serves
        every count of ``compare(num_chains=[...])``), e.g. ``lambda f, c: blackjax.meads_adaptation(f, c)``
        with ``make = lambda f, **p: blackjax.ghmc(f, **p)``. ``run`` is called as ``run(key, positions,
        num_steps=num_warmup)``: an adaptation whose run takes more (``blackjax.chees_adaptation``: an initial
        step size and an optax optimizer; with ``blackjax.dynamic_hmc``) is wrapped to bind them, e.g. an object
        with ``run = lambda key, x, num_steps: chees.run(key, x, 0.5, optax.adam(0.05), num_steps)``.
        Parameters that are not arrays (ChEES's functions) are kept out of the carried state.
    across_chains
        False: the adaptation runs per chain (vmapped; positions ``(D,)``, one set of parameters per chain).
        True: once over all chains (positions ``(C, D)``, parameters shared), as BlackJAX's cross-chain
        adaptations (``chees_adaptation``, ``meads_adaptation``) take them. They estimate scales from the
        chains themselves, so they need enough of them: MEADS splits the chains into ``num_folds`` folds (4 by
        default) and needs at least 2 chains per fold (``num_chains`` ≥ 2·``num_folds`` and a multiple of it);
        with 1 chain per fold its step size is NaN, and with 2 per fold a seed can mix poorly (measured on a 2-D
        Gaussian: min bulk ESS 9 of 1,600 draws in one of two seeds at 8 chains; 4 per fold, 16 chains, mixed):
        use 16 chains or more. Adapted parameters that are not finite make the row's ``failure`` "adaptation
        returned non-finite parameters in k of S seeds" (nothing is sampled from them).

    Returns
    -------
    BlackJAXSampler
        A value for ``compare(samplers={name: ...})``.

    Examples
    --------
    >>> import blackjax
    >>> mala = from_blackjax(lambda f: blackjax.mala(f, step_size=0.5))
    >>> nuts = from_blackjax(lambda f, **p: blackjax.nuts(f, **p),                 # window adaptation per chain
    ...                      lambda f: blackjax.window_adaptation(blackjax.nuts, f))
    >>> meads = from_blackjax(lambda f, **p: blackjax.ghmc(f, **p),               # across chains (C >= 16)
    ...                       lambda f, c: blackjax.meads_adaptation(f, c), across_chains=True)
    >>> mala.family, nuts.across_chains, meads.across_chains
    ('blackjax', False, True)
    """
    if not callable(make):
        raise TypeError(f"make must be callable (logdensity_fn -> blackjax SamplingAlgorithm), got "
                        f"{type(make).__name__}")
    if adaptation is not None and not callable(adaptation):
        raise TypeError(f"adaptation must be None or callable (logdensity_fn -> blackjax adaptation), got "
                        f"{type(adaptation).__name__}")
    return BlackJAXSampler(make, adaptation, bool(across_chains))


def _blackjax_nuts() -> BlackJAXSampler:
    """BlackJAX's NUTS with its window adaptation per chain (Stan's defaults: target acceptance 0.8)."""
    import blackjax
    from blackjax.adaptation.base import get_filter_adapt_info_fn

    keep = get_filter_adapt_info_fn(info_keys={"num_integration_steps"})
    return from_blackjax(lambda f, **p: blackjax.nuts(f, **p),
                         lambda f: blackjax.window_adaptation(blackjax.nuts, f, adaptation_info_fn=keep))


# ------------------------------------------------------------------ NumPyro


@dataclasses.dataclass(frozen=True, eq=False)
class NumPyroNUTS:
    """NumPyro's NUTS (``numpyro.infer.hmc.hmc(potential_fn, algo="NUTS")``), its own warmup (step size and
    diagonal mass matrix) run per chain, vmapped over chains.

    Examples
    --------
    >>> sampler = NumPyroNUTS()          # what compare makes of "numpyro-nuts"; .program needs NumPyro installed
    >>> sampler.family
    'numpyro'
    """

    family: str = "numpyro"

    def program(self, logdensity_fn: Callable, dim: int, num_warmup: int) -> Program:
        from numpyro.infer.hmc import hmc

        init_kernel, sample_kernel = hmc(potential_fn=lambda x: -logdensity_fn(x), algo="NUTS")

        def warmup(key, x0):
            def one(k, x):
                k_init, k_run = jax.random.split(k)
                state = init_kernel(x, num_warmup=num_warmup, rng_key=k_init)
                state = state._replace(rng_key=k_run)

                def body(s, _):
                    s = sample_kernel(s)
                    return s, s.num_steps

                state, steps = jax.lax.scan(body, state, None, length=num_warmup)
                return state, jnp.sum(steps).astype(jnp.int32)

            return jax.vmap(one)(jax.random.split(key, x0.shape[0]), x0)

        def step(key, state):
            del key  # NumPyro carries its own key in the state
            state = jax.vmap(sample_kernel)(state)
            return state, StepOut(state.z, -state.potential_energy, state.mean_accept_prob, state.diverging,
                                  state.num_steps.astype(jnp.int32))

        return Program(warmup, step)


# ------------------------------------------------------------------ names


def _numpyro_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("numpyro") is not None


def resolve(name: str, spec: Any) -> Any:
    """The sampler of one ``compare(samplers={name: spec})`` entry, checked before anything runs.

    ``spec``: a jaxprobe sampler name (``"mala"``), ``(name, options dict)``, a jaxprobe ``Kernel``, a
    :func:`from_blackjax` sampler, or a built-in peer name (:data:`BUILTIN_PEERS`). Returns a sampler with
    ``program``; the string ``"not installed"`` for ``"numpyro-nuts"`` without NumPyro.

    Examples
    --------
    >>> resolve("mine", "mala").family, resolve("peer", "blackjax-nuts").family
    ('jaxprobe', 'blackjax')
    >>> resolve("typo", "mals")
    Traceback (most recent call last):
    ...
    ValueError: ...not a known sampler...
    """
    accepted = (f"a jaxprobe sampler name ({', '.join(known_samplers())}), a built-in peer "
                f"({', '.join(BUILTIN_PEERS)}), (name, options dict), a jaxprobe Kernel, or "
                "jaxprobe.benchmark.from_blackjax(make)")
    if isinstance(spec, (JaxprobeSampler, BlackJAXSampler, NumPyroNUTS)):
        return spec
    if isinstance(spec, str) and spec == "blackjax-nuts":
        return _blackjax_nuts()
    if isinstance(spec, str) and spec == "numpyro-nuts":
        return NumPyroNUTS() if _numpyro_installed() else "not installed"
    if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str) and isinstance(spec[1], Mapping):
        return JaxprobeSampler(_kernel(name, spec[0], dict(spec[1]), accepted))
    if isinstance(spec, str):
        return JaxprobeSampler(_kernel(name, spec, {}, accepted))
    if isinstance(spec, Kernel):
        return JaxprobeSampler(spec)
    raise TypeError(f"samplers[{name!r}] must be {accepted}; got {type(spec).__name__}")


def _kernel(row: str, name: str, options: dict[str, Any], accepted: str) -> Kernel:
    if name not in known_samplers():
        raise ValueError(f"samplers[{row!r}] = {name!r} is not a known sampler: expected {accepted}")
    try:
        return make_kernel(name, options)
    except (TypeError, ValueError) as error:
        raise type(error)(f"samplers[{row!r}]: {error}") from None
