"""The sampling engine: BlackJAX kernels over many chains in one compiled program.

``sample`` is the convenient entry point; ``init`` / ``warmup`` / ``run`` are the
pure functional core for use inside a user's own ``jax.jit`` or ``lax.scan``.
"""

from jaxprobe.engine.api import (canonicalize_key, chain_sharding, known_sampler_starts_at_target, known_samplers,
                                 make_kernel, sample)
from jaxprobe.engine.core import (
    EngineState,
    RunStats,
    Trace,
    WarmupState,
    chees_warmup,
    default_parameters,
    init,
    run,
    warmup,
    warmup_final,
    warmup_init,
    warmup_run,
    warmup_schedule,
)
from jaxprobe.engine.kernels import HMC, MALA, NUTS, RWMH, SAMPLERS, SMC, ChEES, StepInfo
from jaxprobe.engine.samples import Samples, Summary

__all__ = [
    "sample",
    "Samples",
    "Summary",
    "EngineState",
    "RunStats",
    "Trace",
    "WarmupState",
    "init",
    "run",
    "warmup",
    "warmup_init",
    "warmup_run",
    "warmup_final",
    "warmup_schedule",
    "chees_warmup",
    "default_parameters",
    "make_kernel",
    "known_samplers",
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
]
