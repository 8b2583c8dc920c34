"""jaxprobe._compiles.Compiles: the one count and clock of JAX's compiles (sweep rows, benchmarks, these tests)."""

import jax
import numpy as np

from jaxprobe._compiles import Compiles


def _program(scale):
    """A new jitted function (a new program to compile); inputs are NumPy arrays, which compile nothing."""
    return jax.jit(lambda x: jax.numpy.sin(x) * scale + 1.0)


def test_counts_a_new_program_once_and_a_reused_one_never():
    program = _program(3.0)
    with Compiles() as first:
        program(np.ones(5, np.float32)).block_until_ready()
    with Compiles() as again:
        program(np.zeros(5, np.float32)).block_until_ready()     # same shapes: the compiled program is reused
    with Compiles() as new_shape:
        program(np.zeros(7, np.float32)).block_until_ready()
    assert (first.count, again.count, new_shape.count) == (1, 0, 1)
    assert first.seconds >= first.compile_seconds > 0.0          # tracing and lowering on top of XLA's compile
    assert again.seconds == again.compile_seconds == 0.0


def test_monitors_nest_and_stop_counting_when_they_end():
    x = np.ones(2, np.float32)
    with Compiles() as outer:
        _program(2.0)(x).block_until_ready()
        with Compiles() as inner:
            _program(4.0)(x).block_until_ready()
    _program(5.0)(x).block_until_ready()                          # after both: counted by neither
    assert (outer.count, inner.count) == (2, 1)
    assert outer.compile_seconds >= inner.compile_seconds


def test_a_monitor_reused_starts_from_zero():
    monitor = Compiles()
    with monitor:
        _program(6.0)(np.ones(3, np.float32)).block_until_ready()
    assert monitor.count == 1
    with monitor:
        pass
    assert monitor.count == 0 and monitor.seconds == 0.0
