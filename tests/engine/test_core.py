"""The compiled core (jaxprobe.engine.core): init/warmup/run inside a user's jit and scan, bit-identical to sample, donated trace buffers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.conftest import normal_starts, std_normal
import jaxprobe
from jaxprobe.engine import core, kernels, streaming

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


def _tilted(x):
    """log density −G(x) + log N(x; 0, I), G(x) = softplus(x₀ − x₁)²: the values a run carries (module level)."""
    return -_g_of(x) + std_normal(x)


def _g_of(x):
    return jax.nn.softplus(x[0] - x[1]) ** 2


@pytest.mark.parametrize("sampler", ["mala", "rwmh", "hmc"])
def test_carried_values_are_the_kept_draws_values_and_leave_the_chains_unchanged(sampler):
    """run_monitored(carried=...): MALA and RWMH compute the values beside the log density at each proposal and keep
    them with the accepted state, HMC's (which cannot) are evaluated at the kept draws; either way the record and the
    observables get G at each kept draw, folded from the carried values, and the chains, log densities and
    statistics are those of the run without them, bit for bit."""
    kernel = jaxprobe.engine.make_kernel(sampler)
    num_draws, positions = 40, jnp.asarray(normal_starts(8, 3))
    monitor = streaming.Monitor(8, 3, num_draws, observables=(("probe", lambda z: 0.0 * z[0]),))

    def run(carried):
        state = core.init(kernel, _tilted, positions, core.default_parameters(kernel, 8, 3, jnp.float32, 0.3))
        monitored = streaming.init_stats(monitor, jnp.float32)
        record = (lambda z, values: jnp.concatenate([z, values["probe"][:, None]], axis=1)) if carried else None
        return jax.jit(lambda state, monitored: core.run_monitored(
            jax.random.key(1), state, kernel, _tilted, num_draws, 1, monitor, monitored, 0, record=record,
            carried=(lambda z: {"probe": _g_of(z)}) if carried else None))(
            state, monitored)

    state, trace, stats, (draw_stats, folded) = run(carried=True)
    plain_state, plain_trace, plain_stats, (plain_draw_stats, _) = run(carried=False)
    assert type(state.kernel_state) is type(plain_state.kernel_state)  # the carried values do not leave the run
    np.testing.assert_array_equal(trace.position[..., :3], plain_trace.position)  # the same chains, bit for bit
    np.testing.assert_array_equal(trace.logdensity, plain_trace.logdensity)
    np.testing.assert_array_equal(stats.num_accepted, plain_stats.num_accepted)
    np.testing.assert_array_equal(draw_stats.subset, plain_draw_stats.subset)
    g_at_draws = jax.vmap(jax.vmap(_g_of))(plain_trace.position)
    np.testing.assert_allclose(trace.position[..., 3], g_at_draws, rtol=1e-6)  # G at each kept draw
    sums, counts = folded["probe"]  # folded from the carried G, not from the observable's own function (0)
    np.testing.assert_allclose(jnp.sum(sums) / (8 * jnp.sum(counts)), jnp.mean(g_at_draws), rtol=1e-5)
