"""How many programs JAX compiles, and how long that takes, read from JAX's own ``jax.monitoring`` events.

One listener for every place that asks: a sweep cell's compile seconds, the benchmarks' compile columns and the
tests' "asked again, compiles nothing" checks. JAX times its whole compile step under :data:`BACKEND_COMPILE`, a
program the persistent compilation cache hands over included (``pxla._cached_compilation`` wraps
``compile_or_get_cached``), so a count means the same with that cache on or off.
"""

from __future__ import annotations

from typing import Any

import jax

#: Duration events of JAX's three compile stages: tracing to a jaxpr, lowering to MLIR, XLA's compile (or the
#: persistent cache's load).
TRACE = "/jax/core/compile/jaxpr_trace_duration"
LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
STAGES = {TRACE: "tracing", LOWER: "lowering", BACKEND_COMPILE: "compile"}


class Compiles:
    """Programs compiled while active: ``count`` (XLA compiles), ``compile_seconds`` (their time) and ``seconds``
    (tracing + lowering + compiling).

    Each ``with`` starts from zero and the numbers stay readable after it; monitors may nest (each has its own
    listener). Compiles on any thread of the process count.
    """

    def __init__(self) -> None:
        self.count = 0
        self.compile_seconds = 0.0
        self.seconds = 0.0

    def __enter__(self) -> "Compiles":
        self.count, self.compile_seconds, self.seconds = 0, 0.0, 0.0
        jax.monitoring.register_event_duration_secs_listener(self._listen)
        return self

    def _listen(self, event: str, duration: float, **_metadata: Any) -> None:
        if event in STAGES:
            self.seconds += duration
            if event == BACKEND_COMPILE:
                self.count += 1
                self.compile_seconds += duration

    def __exit__(self, *exception: Any) -> None:
        jax.monitoring.unregister_event_duration_listener(self._listen)
