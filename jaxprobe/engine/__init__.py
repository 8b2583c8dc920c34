"""The sampling engine: BlackJAX kernels over many chains in one compiled program.

``sample`` is the convenient entry point; ``init`` / ``warmup`` (``adapt``) / ``run`` are the
pure functional core for use inside a user's own ``jax.jit`` or ``lax.scan`` (``refresh`` after the
log density's parameters change; ``run_monitored`` also folds the verdict's statistics and
observables in, as ``sample`` does: :mod:`jaxprobe.engine.streaming`). Every sampler
is a :class:`Kernel` with an :class:`Adaptation` (:mod:`jaxprobe.engine.protocols`), named
in one registry (:mod:`jaxprobe.engine.registry`: ``known_samplers``, ``make_kernel``,
``register_sampler``), beside the whole-run samplers (:class:`WholeRunSampler`, e.g. the
tree-ensemble Gibbs sampler of :mod:`jaxprobe.samplers`), which run whole questions themselves.
One switch, ``numerics="reproducible" | "fast"``, holds every batch-invariance and platform-specific
speed device (:mod:`jaxprobe.engine.numerics`).
"""

from jaxprobe._io import CorruptFileError, CorruptFileWarning
from jaxprobe.engine.api import CheckpointMismatchError, canonicalize_key, chain_sharding, sample
from jaxprobe.engine.checkpoint import CheckpointIfLong
from jaxprobe.engine.chees import ChEESAdaptation, chees_warmup
from jaxprobe.engine.core import (
    EngineState,
    RunStats,
    Trace,
    WarmupState,
    WindowAdaptation,
    adapt,
    default_parameters,
    init,
    refresh,
    run,
    run_monitored,
    warmup,
    warmup_final,
    warmup_init,
    warmup_run,
    warmup_schedule,
)
from jaxprobe.engine.kernels import HMC, MALA, NUTS, RWMH, SMC, ChEES, GradientKernel, StepInfo, ValueKernel
from jaxprobe.engine.numerics import FAST, REPRODUCIBLE, Numerics, numerics_field
from jaxprobe.engine.protocols import Adaptation, Kernel, WholeRunSampler
from jaxprobe.engine.registry import (SAMPLERS, known_kernels, known_sampler_starts_at_target, known_samplers,
                                      make_kernel, register_sampler, register_whole_run_sampler, unregister_sampler,
                                      unregister_whole_run_sampler, whole_run_sampler)
from jaxprobe.engine.samples import Samples, Summary
from jaxprobe.engine.streaming import Monitor, Observed
from jaxprobe.engine.estimates import Estimate, MCSEWarning

__all__ = [
    "sample",
    "CheckpointMismatchError",
    "CheckpointIfLong",
    "CorruptFileError",
    "CorruptFileWarning",
    "Estimate",
    "MCSEWarning",
    "Samples",
    "Summary",
    "EngineState",
    "RunStats",
    "Trace",
    "WarmupState",
    "init",
    "run",
    "run_monitored",
    "refresh",
    "Monitor",
    "Observed",
    "warmup",
    "warmup_init",
    "warmup_run",
    "warmup_final",
    "warmup_schedule",
    "adapt",
    "chees_warmup",
    "WindowAdaptation",
    "ChEESAdaptation",
    "Kernel",
    "Adaptation",
    "WholeRunSampler",
    "GradientKernel",
    "ValueKernel",
    "default_parameters",
    "make_kernel",
    "register_sampler",
    "unregister_sampler",
    "known_samplers",
    "known_kernels",
    "register_whole_run_sampler",
    "unregister_whole_run_sampler",
    "whole_run_sampler",
    "known_sampler_starts_at_target",
    "canonicalize_key",
    "chain_sharding",
    "SAMPLERS",
    "MALA",
    "RWMH",
    "HMC",
    "NUTS",
    "ChEES",
    "SMC",
    "StepInfo",
    "Numerics",
    "REPRODUCIBLE",
    "FAST",
    "numerics_field",
]
