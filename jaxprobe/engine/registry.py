"""The one registry of samplers: names → kernel classes, and names → whole-run samplers.

``sample``, ``generate``, ``sweep``, ``reconstruct``, the configuration files and the
command line all read it (:func:`known_samplers`, :func:`make_kernel`, :func:`whole_run_sampler`);
the engine never tells samplers apart by name, only by the kernel's and its adaptation's members
(:mod:`jaxprobe.engine.protocols`). It starts with the built-in kernels
(:data:`jaxprobe.engine.kernels.BUILTIN_KERNELS`); :func:`register_sampler` adds one.

Whole-run samplers (:class:`~jaxprobe.engine.protocols.WholeRunSampler`, e.g. the tree-ensemble Gibbs
sampler of :mod:`jaxprobe.samplers`, registered when that package is imported: ``generate`` and the configuration
check import it) run a whole question
themselves: :func:`register_whole_run_sampler` names one for ``generate``, ``sweep``, ``reconstruct`` and
configuration files, which ask :func:`whole_run_sampler` for it; ``jaxprobe.sample`` takes engine kernels only.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from jaxprobe.engine.kernels import BUILTIN_KERNELS
from jaxprobe.engine.options import check_option_names, option_specs
from jaxprobe.engine.protocols import Adaptation, Kernel, WholeRunSampler

__all__ = ["SAMPLERS", "WHOLE_RUN_SAMPLERS", "register_sampler", "unregister_sampler", "known_samplers",
           "known_kernels", "sampler_class", "make_kernel", "known_sampler_starts_at_target",
           "register_whole_run_sampler", "unregister_whole_run_sampler", "whole_run_sampler"]

#: Sampler name → kernel class (a frozen dataclass implementing :class:`~jaxprobe.engine.protocols.Kernel`).
#: Read it through the functions below; change it only with :func:`register_sampler`.
SAMPLERS: dict[str, type] = {cls.name: cls for cls in BUILTIN_KERNELS}
_BUILTIN_NAMES = frozenset(SAMPLERS)

#: Sampler name → whole-run sampler (an object implementing :class:`~jaxprobe.engine.protocols.WholeRunSampler`).
#: Read it through :func:`whole_run_sampler`; change it only with :func:`register_whole_run_sampler`.
WHOLE_RUN_SAMPLERS: dict[str, Any] = {}


def known_samplers(*, whole_run: bool = False) -> tuple[str, ...]:
    """Names accepted by ``sample(..., sampler=NAME)``: the engine kernels, built-in first, then registered ones.
    ``whole_run=True`` adds the registered whole-run samplers: the names ``generate``, ``sweep``,
    ``reconstruct`` and configuration files take.

    Examples
    --------
    >>> known_samplers()[:6]                                   # the built-in ones first, then any registered
    ('mala', 'rwmh', 'hmc', 'nuts', 'chees', 'smc')
    """
    kernels = tuple(SAMPLERS)
    if not whole_run:
        return kernels
    return kernels + tuple(name for name in WHOLE_RUN_SAMPLERS if name not in SAMPLERS)


def known_kernels() -> tuple[str, ...]:
    """Names accepted by ``sample(..., sampler=NAME)`` (the same as :func:`known_samplers`).

    Examples
    --------
    >>> "nuts" in known_kernels()
    True
    """
    return known_samplers()


def whole_run_sampler(sampler: Any) -> Any:
    """The :class:`~jaxprobe.engine.protocols.WholeRunSampler` registered as ``sampler``, or None (an engine
    kernel's name, or an unknown one).

    Examples
    --------
    >>> whole_run_sampler("mala") is None                      # an engine kernel, not a whole-run sampler
    True
    """
    return WHOLE_RUN_SAMPLERS.get(sampler) if isinstance(sampler, str) else None


def sampler_class(sampler: str) -> type:
    """The kernel class registered as ``sampler``; an unknown name raises ``ValueError`` listing the known ones.

    Examples
    --------
    >>> sampler_class("nuts").__name__
    'NUTS'
    """
    if not isinstance(sampler, str) or sampler not in SAMPLERS:
        hint = (f"; {sampler!r} is not an engine kernel: it is a whole-run sampler, which samples questions through "
                "jaxprobe.generate, reconstruct, reconstruct_many, sweep and configuration files"
                if whole_run_sampler(sampler) is not None else "")
        raise ValueError(f"sampler must be one of {', '.join(map(repr, SAMPLERS))}; got {sampler!r}{hint}")
    return SAMPLERS[sampler]


def known_sampler_starts_at_target(sampler: str) -> bool:
    """Whether ``sampler`` draws its chains' starting points from the target itself (sequential Monte Carlo),
    so that user-given starting points are not used and chains need not mix between modes.

    Examples
    --------
    >>> known_sampler_starts_at_target("smc"), known_sampler_starts_at_target("mala")   # SMC starts at target draws
    (True, False)
    """
    return bool(getattr(SAMPLERS.get(sampler), "starts_at_target", False))


def make_kernel(sampler: str, sampler_options: Mapping[str, Any] | None = None, /, **options: Any) -> Kernel:
    """The kernel of a sampler name with its options, checked before anything compiles.

    Options come as a mapping (``make_kernel("hmc", {"num_integration_steps": 20})``, what
    ``sampler_options=`` holds) or as keywords (``make_kernel("hmc", num_integration_steps=20)``).
    Raises ``ValueError`` for an unknown sampler (listing the known ones) or an option out of range,
    ``TypeError`` for options that are not a mapping with string keys, an unknown option (listing the
    sampler's options and what each accepts) or an option of the wrong type; each message names the
    option and the accepted values.

    Examples
    --------
    >>> make_kernel("hmc", num_integration_steps=5)            # doctest: +ELLIPSIS
    HMC(num_integration_steps=5, target_acceptance_rate=0.8, ...)
    >>> make_kernel("nuts", {"max_num_doublings": 0})          # checked before anything compiles
    Traceback (most recent call last):
        ...
    ValueError: ...max_num_doublings...
    """
    cls = sampler_class(sampler)
    if sampler_options is None:
        sampler_options = {}
    if not isinstance(sampler_options, Mapping):
        raise TypeError(f"sampler_options must be a dict of option names to values, got "
                        f"{type(sampler_options).__name__}")
    merged = {**sampler_options, **options}
    bad_keys = [key for key in merged if not isinstance(key, str)]
    if bad_keys:
        raise TypeError(f"sampler_options keys must be option names (str), got {bad_keys[0]!r}")
    check_option_names(sampler, cls, merged)
    return cls(**merged)


def register_sampler(name: str, kernel_class: type | None = None, *, replace: bool = False) -> Any:
    """Register ``kernel_class`` as ``sampler=name`` for ``sample``, ``generate``, ``sweep``, ``reconstruct``
    and configuration files. Returns the class (usable as a decorator: ``@register_sampler("name")``).

    The recipe, e.g. BlackJAX's Barker proposal (a single-chain BlackJAX kernel, vmapped over chains)::

        import dataclasses
        from typing import ClassVar
        import jax.numpy as jnp
        from blackjax.mcmc import barker
        from jaxprobe.engine.kernels import (GradientKernel, GradientState, StepInfo, per_chain,
                                             safe_logdensity, vmap_chains)
        from jaxprobe.engine.options import float_option

        @jaxprobe.register_sampler("barker")
        @dataclasses.dataclass(frozen=True)           # frozen: hashable, a static jit argument
        class Barker(GradientKernel):                 # init → GradientState (position, logdensity, grad)
            name: ClassVar[str] = "barker"            # the same name as registered
            # Every field is an option, declared with its type and range (checked before compiling).
            target_acceptance_rate: float = float_option(0.4, minimum=0.0, maximum=1.0,
                                                         exclusive_minimum=True, exclusive_maximum=True)

            def step(self, rng_key, state, parameters, logdensity_fn):
                kernel = barker.build_kernel()
                safe = safe_logdensity(logdensity_fn)  # NaN/±inf proposals are rejected

                def one_chain(key, chain_state, step_size):
                    return kernel(key, barker.BarkerState(*chain_state), safe, step_size)

                num_chains = state.position.shape[0]
                new, info = vmap_chains(one_chain, rng_key, state, per_chain(parameters["step_size"], num_chains))
                nonfinite = ~jnp.isfinite(info.proposal.logdensity)
                return GradientState(*new), StepInfo(
                    acceptance_rate=jnp.where(nonfinite, 0.0, info.acceptance_rate),
                    is_accepted=info.is_accepted & ~nonfinite, is_divergent=jnp.zeros_like(nonfinite),
                    is_nonfinite=nonfinite, num_gradient_evaluations=jnp.ones((num_chains,), jnp.int32))

            def initial_step_size(self, dim):
                return 0.5

        jaxprobe.sample(0, logdensity, init, sampler="barker")  # or generate(...)/sweep(..., sampler="barker")

    What the engine reads (:class:`jaxprobe.engine.protocols.Kernel`): ``init``, ``step``,
    ``initial_step_size``, ``default_parameters`` and ``adaptation`` (the base classes
    ``GradientKernel`` / ``ValueKernel`` give a step size, adapted by Stan's windowed dual
    averaging towards ``target_acceptance_rate``; set ``adapts_mass_matrix = True`` and read
    ``parameters["inverse_mass_matrix"]`` ``(C, D)`` for a diagonal mass matrix too),
    ``uses_gradient``, ``adapts_mass_matrix`` and ``starts_at_target``. ``step`` must be
    batch-invariant for bit-identical draws across device counts (a per-chain key from
    ``vmap_chains`` is). A kernel that declares ``numerics: Numerics = numerics_field()``
    (:mod:`jaxprobe.engine.numerics`) receives the run's ``numerics=`` policy and may read it
    (``self.numerics.normal_and_uniform``, ``self.numerics.metric``, ...); one without the field
    runs its own arithmetic in both modes.

    Raises ``ValueError`` for a name that is taken (unless ``replace=True``; built-in samplers cannot be
    replaced) or that differs from ``kernel_class.name``; ``TypeError`` for a class that is not a frozen
    dataclass with declared options, or whose default instance is not a ``Kernel``.

    Examples
    --------
    A runnable variant: an existing kernel under a new name (one of your own follows the recipe above).

    >>> import dataclasses
    >>> from typing import ClassVar
    >>> from jaxprobe.engine.kernels import RWMH
    >>> @jaxprobe.register_sampler("my_rwmh")
    ... @dataclasses.dataclass(frozen=True)
    ... class MyRWMH(RWMH):
    ...     name: ClassVar[str] = "my_rwmh"
    >>> "my_rwmh" in known_kernels(), make_kernel("my_rwmh").target_acceptance_rate
    (True, 0.234)
    >>> register_sampler("my_rwmh", MyRWMH)      # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: a sampler named 'my_rwmh' is already registered (MyRWMH); pass replace=True to replace it
    >>> unregister_sampler("my_rwmh")
    >>> "my_rwmh" in known_kernels()
    False
    """
    if kernel_class is None:
        return lambda cls: register_sampler(name, cls, replace=replace)
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be a sampler name (a Python identifier such as 'barker'), got {name!r}")
    if name in _BUILTIN_NAMES:
        raise ValueError(f"name {name!r} is a built-in sampler and cannot be replaced; pick another name")
    if name in SAMPLERS and not replace:
        raise ValueError(f"a sampler named {name!r} is already registered ({SAMPLERS[name].__name__}); pass "
                         "replace=True to replace it")
    if name in WHOLE_RUN_SAMPLERS:
        raise ValueError(f"name {name!r} is a whole-run sampler ({type(WHOLE_RUN_SAMPLERS[name]).__name__}); pick "
                         "another name")
    if not isinstance(kernel_class, type):
        raise TypeError(f"kernel_class must be a class (a frozen dataclass), got {type(kernel_class).__name__}")
    if not dataclasses.is_dataclass(kernel_class) or not kernel_class.__dataclass_params__.frozen:
        raise TypeError(f"kernel_class {kernel_class.__name__} must be a frozen dataclass "
                        "(@dataclasses.dataclass(frozen=True)): kernels are static arguments of jax.jit")
    if getattr(kernel_class, "name", None) != name:
        raise ValueError(f"kernel_class.name must be the registered name {name!r}, got "
                         f"{getattr(kernel_class, 'name', None)!r}")
    option_specs(kernel_class)  # every field declares its option
    kernel = kernel_class()
    if not isinstance(kernel, Kernel):
        missing = [member for member in ("init", "step", "initial_step_size", "default_parameters", "adaptation",
                                         "uses_gradient", "adapts_mass_matrix", "starts_at_target",
                                         "target_acceptance_rate") if not hasattr(kernel, member)]
        raise TypeError(f"kernel_class {kernel_class.__name__} does not implement the Kernel protocol (missing "
                        f"{', '.join(missing)}); derive it from jaxprobe.engine.kernels.GradientKernel or ValueKernel")
    if not isinstance(kernel.adaptation(), Adaptation):
        raise TypeError(f"{kernel_class.__name__}.adaptation() must return an Adaptation "
                        "(jaxprobe.engine.protocols.Adaptation)")
    SAMPLERS[name] = kernel_class
    return kernel_class


def unregister_sampler(name: str) -> None:
    """Remove a sampler added by :func:`register_sampler` (built-in samplers stay).

    Examples
    --------
    >>> unregister_sampler("mala")                             # built-in samplers stay
    Traceback (most recent call last):
        ...
    ValueError: ...
    """
    if name in _BUILTIN_NAMES:
        raise ValueError(f"name {name!r} is a built-in sampler and cannot be removed")
    if name not in SAMPLERS:
        raise ValueError(f"no sampler named {name!r} is registered; registered: {', '.join(known_samplers())}")
    del SAMPLERS[name]



def register_whole_run_sampler(sampler: Any, *, replace: bool = False) -> Any:
    """Register ``sampler``, an object implementing :class:`~jaxprobe.engine.protocols.WholeRunSampler`, as
    ``sampler=sampler.name`` for ``generate``, ``sweep``, ``reconstruct``, ``reconstruct_many`` and
    configuration files (:func:`known_samplers` lists it). Returns ``sampler``.

    Raises ``ValueError`` for a name that is not a Python identifier, that an engine kernel has, or that is
    taken (unless ``replace=True``); ``TypeError`` for an object that does not implement the protocol.

    Examples
    --------
    >>> class Toy:                                   # the protocol's members; a real one samples questions
    ...     name, moves_into_support = "toy", False
    ...     def check_options(self, options): return dict(options)
    ...     def supports(self, question): return "probe: the toy samples no question"
    ...     def sample_question(self, rng_key, question, **options): raise NotImplementedError
    ...     def supports_reconstruction(self, model, prior, dim): return "model: the toy reconstructs nothing"
    ...     def reconstruction(self, question, models, priors, num_classes, dim, options): raise NotImplementedError
    >>> toy = register_whole_run_sampler(Toy())
    >>> "toy" in known_samplers(whole_run=True), whole_run_sampler("toy") is toy, "toy" in known_samplers()
    (True, True, False)
    >>> unregister_whole_run_sampler("toy")
    >>> register_whole_run_sampler(object())                     # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    TypeError: object does not implement the WholeRunSampler protocol (...; missing name, moves_into_support, ...)
    """
    if not isinstance(sampler, WholeRunSampler):
        missing = [member for member in ("name", "moves_into_support", "check_options", "supports",
                                         "sample_question", "supports_reconstruction", "reconstruction")
                   if not hasattr(sampler, member)]
        raise TypeError(f"{type(sampler).__name__} does not implement the WholeRunSampler protocol "
                        f"(jaxprobe.engine.protocols.WholeRunSampler; missing {', '.join(missing)})")
    name = sampler.name
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"sampler.name must be a sampler name (a Python identifier), got {name!r}")
    if name in SAMPLERS:
        raise ValueError(f"name {name!r} is an engine kernel ({SAMPLERS[name].__name__}); pick another name")
    if name in WHOLE_RUN_SAMPLERS and WHOLE_RUN_SAMPLERS[name] is not sampler and not replace:
        raise ValueError(f"a whole-run sampler named {name!r} is already registered "
                         f"({type(WHOLE_RUN_SAMPLERS[name]).__name__}); pass replace=True to replace it")
    WHOLE_RUN_SAMPLERS[name] = sampler
    return sampler


def unregister_whole_run_sampler(name: str) -> None:
    """Remove a whole-run sampler added by :func:`register_whole_run_sampler`.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> refuse = lambda *args, **options: "the toy does nothing"      # a toy with the protocol's members
    >>> toy = SimpleNamespace(name="toy", moves_into_support=False, check_options=dict, supports=refuse,
    ...                       sample_question=refuse, supports_reconstruction=refuse, reconstruction=refuse)
    >>> _ = register_whole_run_sampler(toy)
    >>> unregister_whole_run_sampler("toy")
    >>> "toy" in known_samplers(whole_run=True)
    False
    >>> unregister_whole_run_sampler("toy")                     # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: no whole-run sampler named 'toy' is registered; registered: ...
    """
    if name not in WHOLE_RUN_SAMPLERS:
        raise ValueError(f"no whole-run sampler named {name!r} is registered; registered: "
                         f"{', '.join(WHOLE_RUN_SAMPLERS) or 'none'}")
    del WHOLE_RUN_SAMPLERS[name]
