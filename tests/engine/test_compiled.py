"""Compiled programs are freed again: a process that asks many questions does not keep every program.

jax.jit with a question as a static argument kept each question's programs for the life of the process; a
long run of questions exhausted the kernel's memory-mapping limit and XLA's compiler crashed with a
segmentation fault (CI's slow suite, in the test process, after some 20 000 programs).
"""

import gc
import sys
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprobe
from jaxprobe.engine import api, compiled
from jaxprobe.engine.compiled import BoundedJit, jit_bounded

ENGINE_PIECES = ((api, "_init"), (api, "_run_chunk"), (api, "_adapt_init"), (api, "_adapt_update"),
                 (api, "_adapt_final"), (compiled, "values_at"))


def _scaled_tanh(x, scale):
    return jnp.tanh(x * scale)


def test_programs_of_evicted_configurations_are_freed_and_recent_ones_reused():
    apply = jit_bounded(lambda x, fn: fn(x), static_argnames=("fn",), maxsize=2)
    x = jnp.ones(3)
    functions = [lambda v, s=float(s): jnp.tanh(v * s) for s in range(4)]
    alive = [weakref.ref(fn) for fn in functions]
    np.testing.assert_allclose(apply(x, functions[0]), np.tanh(0.0 * np.ones(3)))
    apply(x, functions[1])
    assert apply.compiled_count() == 2
    apply(x, fn=functions[1])  # by name or by position: the same configuration, no new program
    assert apply.compiled_count() == 2 and apply.live_count() == 2
    apply(x, functions[2])
    apply(x, functions[3])
    assert apply.compiled_count() == 4 and apply.live_count() == 2  # the two oldest were dropped
    del functions
    gc.collect()
    assert [ref() is None for ref in alive] == [True, True, False, False]
    apply.clear()
    gc.collect()
    assert all(ref() is None for ref in alive) and apply.compiled_count() == 4


def test_donated_arguments_by_position_or_name():
    add = jit_bounded(lambda buffer, value, scale: buffer + scale * value, static_argnames=("scale",),
                      donate_argnames=("buffer",))
    for call in (lambda b: add(b, jnp.ones(4), 2.0), lambda b: add(buffer=b, value=jnp.ones(4), scale=2.0)):
        buffer = jnp.zeros(4)
        np.testing.assert_array_equal(call(buffer), 2.0 * np.ones(4))
    _, by_name = add._jitted((2.0,)).lower(buffer=jnp.zeros(4), value=jnp.ones(4)).args_info
    assert by_name["buffer"].donated and not by_name["value"].donated  # (CPU ignores donation when it runs)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"no parameter\(s\) \['scale'\]"):
        jit_bounded(lambda x: x, static_argnames=("scale",))
    with pytest.raises(ValueError, match="maxsize must be >= 1"):
        jit_bounded(lambda x, s: x, static_argnames=("s",), maxsize=0)
    with pytest.raises(TypeError, match="maxsize must be an int, got float"):
        jit_bounded(lambda x, s: x, static_argnames=("s",), maxsize=2.0)
    assert jit_bounded(lambda x, s: x, static_argnames=("s",), maxsize=np.int32(2)).maxsize == 2
    apply = jit_bounded(lambda x, fn: x, static_argnames=("fn",))
    with pytest.raises(TypeError, match=r"static arguments \('fn',\) must be hashable"):
        apply(jnp.ones(2), [1, 2])


def _question(scale):
    model = lambda x: jax.nn.sigmoid(x @ (scale * jnp.array([2.0, -1.0, 0.5])))  # noqa: E731
    return jaxprobe.gibbs(jaxprobe.probes.prediction_risky(model, alpha=0.5), temperature=0.1,
                          prior=jaxprobe.priors.StandardNormal())


def _mappings() -> int:
    with open("/proc/self/maps") as maps:
        return sum(1 for _ in maps)


@pytest.mark.slow  # 12 s: compiles many questions on purpose
def test_many_questions_in_one_process_do_not_keep_every_program(monkeypatch):
    """Each new question through ``sample`` compiles its programs; once ``maxsize`` newer questions have run,
    the old question and its programs are gone (on Linux: the process's memory mappings stop growing)."""
    for module, name in ENGINE_PIECES:
        assert isinstance(getattr(module, name), BoundedJit)
        monkeypatch.setattr(getattr(module, name), "maxsize", 2)
    init = jax.random.normal(jax.random.key(0), (8, 3))
    refs, mappings = [], []
    for index in range(5):
        logdensity = _question(1.0 + index)
        refs.append(weakref.ref(logdensity))
        samples = jaxprobe.sample(jax.random.key(index), logdensity, init, sampler="mala", num_samples=20,
                                  num_warmup=20, progress=False, convergence="ignore")
        assert np.all(np.isfinite(samples.positions))
        del logdensity, samples
        gc.collect()
        if sys.platform.startswith("linux"):
            mappings.append(_mappings())
    assert all(ref() is None for ref in refs[:3]), "an old question is still held (with its programs)"
    if mappings:  # questions 3-5 compile as many programs as 1-2 did, but free as many as they make
        assert mappings[-1] - mappings[2] < 0.25 * (mappings[2] - mappings[0]) + 50, mappings


def test_the_same_question_asked_again_compiles_nothing():
    logdensity = _question(0.5)
    init = jax.random.normal(jax.random.key(0), (8, 3))
    arguments = dict(sampler="mala", num_samples=20, num_warmup=20, progress=False, convergence="ignore")
    first = jaxprobe.sample(jax.random.key(1), logdensity, init, **arguments)
    programs = api.compiled_program_count()
    again = jaxprobe.sample(jax.random.key(1), logdensity, init, **arguments)
    assert api.compiled_program_count() == programs
    np.testing.assert_array_equal(first.positions, again.positions)
