"""jaxprobe's ChEES adaptation against BlackJAX's, and against the target's known scales.

jaxprobe.engine.chees reimplements BlackJAX's chees_adaptation with batch-invariant cross-chain
sums (tests/engine/test_api_devices.py checks the bit-identity across devices). Here: on a diagonal
Gaussian with known standard deviations, both adapt to the same step size, mean number of
leapfrog steps and mass matrix (up to Monte-Carlo noise: the two use different per-step keys),
and the adapted inverse mass matrix is the target's variance.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

SCALES = np.array([0.3, 1.0, 3.0, 10.0], np.float32)


def logdensity(x):
    return -0.5 * jnp.sum((x / SCALES) ** 2)


@pytest.mark.slow
def test_chees_warmup_matches_blackjax_and_the_known_scales():
    import blackjax
    import optax
    from blackjax.adaptation.base import get_filter_adapt_info_fn

    from jaxprobe.engine import chees, kernels

    num_chains, num_steps = 128, 300
    x0 = jax.random.normal(jax.random.key(0), (num_chains, SCALES.size))
    reference = blackjax.chees_adaptation(logdensity, num_chains, target_acceptance_rate=0.651,
                                          mass_matrix_estimation="diagonal",
                                          adaptation_info_fn=get_filter_adapt_info_fn(info_keys={"acceptance_rate"}))
    theirs = jax.jit(lambda key, x: {name: value for name, value in reference.run(
        key, x, 0.1, optax.adam(0.025), num_steps)[0][1].items() if not callable(value)})(jax.random.key(1), x0)
    state, acceptance = jax.jit(lambda key, x: chees.chees_warmup(key, x, kernels.ChEES(), logdensity, num_steps, 0.1))(
        jax.random.key(1), x0)
    ours = state.parameters

    np.testing.assert_allclose(ours["step_size"], theirs["step_size"], rtol=0.03)
    np.testing.assert_allclose(ours["num_leapfrog_steps"][0], theirs["integration_steps_params"][0], rtol=0.05)
    np.testing.assert_allclose(ours["inverse_mass_matrix"][0], theirs["inverse_mass_matrix"], rtol=0.05)
    # Known answer: the pooled cross-chain variance is the target's variance (150 steps x 128 chains).
    np.testing.assert_allclose(np.sqrt(ours["inverse_mass_matrix"][0]), SCALES, rtol=0.05)
    # Every chain carries the same shared parameters, and warmup moved them.
    assert np.all(ours["inverse_mass_matrix"] == ours["inverse_mass_matrix"][0])
    assert float(ours["step_size"]) != np.float32(0.1)
    assert 0.6 < float(np.mean(acceptance)) <= 1.0
