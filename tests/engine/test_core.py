"""The compiled core (jaxprobe.engine.core): init/warmup/run inside a user's jit and scan, bit-identical to sample, donated trace buffers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.conftest import normal_starts, std_normal
import jaxprobe
from jaxprobe.engine import core, kernels

_init = normal_starts


def test_core_runs_inside_a_user_jit_and_scan():
    """engine.init / engine.run are pure: usable inside a user's jit and lax.scan (e.g. a training step)."""
    kernel = kernels.MALA()
    num_chains, dim = 16, 2

    @jax.jit
    def training_loop(rng_key, positions, shift):
        def training_step(carry, step_key):
            positions, shift = carry
            logdensity = lambda x: -0.5 * jnp.sum((x - shift) ** 2)
            state = core.init(kernel, logdensity, positions, {"step_size": jnp.asarray(0.5)})
            state, trace, stats = core.run(step_key, state, kernel, logdensity, num_draws=50, thin=2)
            shift = shift + 0.1  # a stand-in for a parameter update that uses the draws
            return (state.kernel_state.position, shift), jnp.mean(trace.position, axis=(0, 1))

        return jax.lax.scan(training_step, (positions, shift), jax.random.split(rng_key, 3))

    (positions, shift), means = training_loop(jax.random.key(0), jnp.zeros((num_chains, dim)), jnp.zeros(dim))
    assert positions.shape == (num_chains, dim)
    np.testing.assert_allclose(np.asarray(shift), 0.3, rtol=1e-6)
    assert means.shape == (3, dim) and np.all(np.isfinite(means))


def test_core_matches_sample_bit_for_bit():
    """sample() with a fixed step size and no warmup is exactly core.init + core.run."""
    key = jax.random.key(3)
    init = _init()
    result = jaxprobe.sample(key, std_normal, init, num_samples=30, num_warmup=0, step_size=0.4, progress=False)
    kernel = kernels.MALA()
    _, key_sampling = jax.random.split(key)
    state = core.init(kernel, std_normal, jnp.asarray(init), {"step_size": jnp.asarray(0.4, jnp.float32)})
    _, trace, _ = jax.jit(core.run, static_argnums=(2, 3, 4, 5))(key_sampling, state, kernel, std_normal, 30, 1)
    np.testing.assert_array_equal(result.positions, np.asarray(trace.chain_major().position))


@pytest.mark.parametrize("thin", [1, 3])
def test_core_run_into_donated_buffers_gives_the_same_draws(thin):
    """run(..., trace=buffers) writes the draws in place (buffers donated and reused) with the same values."""
    kernel = kernels.MALA()
    init = jnp.asarray(_init())
    state = core.init(kernel, std_normal, init, {"step_size": jnp.asarray(0.4, jnp.float32)})
    run_into = jax.jit(core.run, static_argnums=(2, 3, 4, 5), donate_argnums=6)
    key = jax.random.key(8)
    _, expected, expected_stats = jax.jit(core.run, static_argnums=(2, 3, 4, 5))(key, state, kernel, std_normal, 12,
                                                                                  thin)
    buffers = core.Trace(jnp.full((12,) + init.shape, jnp.nan), jnp.full((12, init.shape[0]), jnp.nan))
    for _ in range(2):  # the second call reuses the first call's output buffers
        _, trace, stats = run_into(key, state, kernel, std_normal, 12, thin, buffers)
        assert buffers.position.is_deleted()  # donated, written in place
        np.testing.assert_array_equal(np.asarray(trace.position), np.asarray(expected.position))
        np.testing.assert_array_equal(np.asarray(trace.logdensity), np.asarray(expected.logdensity))
        np.testing.assert_array_equal(np.asarray(stats.num_accepted), np.asarray(expected_stats.num_accepted))
        buffers = trace


def test_core_run_rejects_trace_buffers_of_the_wrong_shape():
    kernel = kernels.MALA()
    init = jnp.asarray(_init())
    state = core.init(kernel, std_normal, init, {"step_size": jnp.asarray(0.4, jnp.float32)})
    wrong = core.Trace(jnp.zeros((5,) + init.shape), jnp.zeros((5, init.shape[0])))
    with pytest.raises(ValueError, match="trace must have shapes"):
        core.run(jax.random.key(0), state, kernel, std_normal, 6, 1, wrong)


def test_core_warmup_is_pure_and_adapts():
    kernel = kernels.HMC(num_integration_steps=5)
    logdensity = lambda x: -0.5 * jnp.sum((x / jnp.array([0.1, 3.0])) ** 2)
    positions = jax.random.normal(jax.random.key(0), (32, 2))
    state = core.init(kernel, logdensity, positions)
    warm = jax.jit(core.warmup, static_argnums=(2, 3, 4))
    state, stats = warm(jax.random.key(1), state, kernel, logdensity, 300)
    # The adapted diagonal inverse mass matrix estimates the variances (0.01, 9), per chain.
    imm = np.asarray(state.parameters["inverse_mass_matrix"])
    assert imm.shape == (32, 2)
    ratio = np.median(imm[:, 1]) / np.median(imm[:, 0])
    assert 200 < ratio < 4000
