"""map_points (jaxprobe._pointwise): one vmap, or on a CPU batches of points where a vmap would fall off XLA's CPU
cliff; the same values either way, and every sampler that evaluates over all chains still samples its target when
its evaluations are batched."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprobe
from jaxprobe import _pointwise
from jaxprobe._pointwise import _batch_layout, _largest_per_point, map_points
from tests.conftest import mc_check_mean, mc_check_second_moment

WIDE = jnp.asarray(np.random.default_rng(0).standard_normal((2, 512)), jnp.float32)


def _wide(x):
    """A scalar of one point through a (512,) intermediate, as an SVM's kernel row is."""
    return jnp.sum(jnp.tanh(x @ WIDE) ** 2)


def _lowered_has_loop(fn, points) -> bool:
    return "while" in jax.jit(fn).lower(points).as_text()


def test_largest_per_point_intermediate_counts_what_depends_on_the_point_only():
    assert _largest_per_point(jax.make_jaxpr(_wide)(jnp.ones(2)).jaxpr) == 512
    # the (2, 512) constant is shared by every point: it does not count; its gradient's intermediates do
    assert _largest_per_point(jax.make_jaxpr(jax.grad(_wide))(jnp.ones(2)).jaxpr) == 512
    assert _largest_per_point(jax.make_jaxpr(lambda x: jnp.sum(x))(jnp.ones(3)).jaxpr) == 3
    # inside a sub-jaxpr (a jitted call) too
    assert _largest_per_point(jax.make_jaxpr(jax.jit(_wide))(jnp.ones(2)).jaxpr) == 512


@pytest.mark.parametrize("num_points, max_batch, expected", [(20_000, 4096, (5, 4000)), (16_384, 4096, (4, 4096)),
                                                               (20_011, 4096, (5, 4003))])
def test_batch_layout_splits_exactly_when_it_can_and_pads_the_rest(num_points, max_batch, expected):
    num_batches, batch_size = _batch_layout(num_points, max_batch)
    assert (num_batches, batch_size) == expected
    assert batch_size <= max_batch and num_batches * batch_size >= num_points > (num_batches - 1) * batch_size


@pytest.mark.parametrize("num_points", [3_000, 3_001])  # an exact split and a padded one
def test_batched_values_equal_one_vmap(num_points):
    points = jax.random.normal(jax.random.key(1), (num_points, 2))
    batched = jax.jit(lambda p: map_points(_wide, p, max_values=512 * 1000, min_points=0))
    assert _lowered_has_loop(batched, points) and not _lowered_has_loop(jax.vmap(_wide), points)
    np.testing.assert_allclose(batched(points), jax.vmap(_wide)(points), rtol=2e-6)
    # below the bound, or at most MIN_POINTS_TO_BATCH points, it is the vmap itself: the same program
    assert not _lowered_has_loop(lambda p: map_points(_wide, p, min_points=0), points)
    assert not _lowered_has_loop(lambda p: map_points(_wide, p, max_values=512 * 1000), points)


def test_pytrees_keys_and_outer_tracers():
    """Typed keys and states as a pytree in and out, a closure over a traced value, under jit and vmap."""
    keys = jax.random.split(jax.random.key(2), 2_001)
    points = {"x": jax.random.normal(jax.random.key(3), (2_001, 2)), "keys": keys}

    def one(point, scale):
        noise = jax.random.normal(point["keys"], (2,))
        return {"value": scale * _wide(point["x"]), "moved": point["x"] + noise}

    run = jax.jit(lambda scale, p: map_points(lambda point: one(point, scale), p, max_values=512 * 300,
                                                               min_points=0))
    assert _lowered_has_loop(lambda p: run(2.0, p), points)
    out, expected = run(2.0, points), jax.vmap(lambda point: one(point, 2.0))(points)
    np.testing.assert_allclose(out["value"], expected["value"], rtol=2e-6)
    np.testing.assert_allclose(out["moved"], expected["moved"], rtol=1e-5, atol=1e-6)  # each point its own key
    scaled = jax.jit(jax.vmap(lambda s: run(s, points)["value"]))(jnp.asarray([1.0, 3.0]))
    np.testing.assert_allclose(scaled[1], 3 * scaled[0], rtol=2e-6)


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["rwmh", "mala", "hmc", "smc"])
def test_samplers_sample_their_target_with_every_evaluation_batched(sampler, monkeypatch):
    """A 2-D Gaussian N(μ, diag(σ²)) through a (512,) intermediate per point, with the bound lowered so that every
    evaluation over the chains (steps, initial values, SMC's tilt, moves and final values) runs in batches."""
    monkeypatch.setattr(_pointwise, "MAX_BATCHED_VALUES", 512 * 100)  # batches of at most 100 of 256 chains
    monkeypatch.setattr(_pointwise, "MIN_POINTS_TO_BATCH", 0)
    layouts = []
    original = _pointwise._batch_layout
    monkeypatch.setattr(_pointwise, "_batch_layout", lambda *a: layouts.append(a) or original(*a))
    mean, sd = np.array([1.0, -2.0]), np.array([0.5, 2.0])

    def logdensity(x):  # _wide's intermediate, times zero: it sets the batch size, not the target
        return -0.5 * jnp.sum(((x - mean) / sd) ** 2) + 0.0 * _wide(x)

    reference = jaxprobe.priors.DiagonalGaussian(np.zeros(2), 3 * np.ones(2))
    init = reference.sample(jax.random.key(4), 256)
    options = dict(reference=reference, sampler_options={"num_groups": 8}) if sampler == "smc" else {}
    result = jaxprobe.sample(jax.random.key(5), logdensity, init, sampler=sampler, num_samples=200, num_warmup=200,
                             progress=False, **options)
    assert layouts, "no evaluation was batched"
    assert all(args[1] <= 100 for args in layouts)
    assert result.verdict.converged, result.verdict
    mc_check_mean(result.positions, mean)
    mc_check_second_moment(result.positions, mean, np.diag(sd**2))
    if sampler == "smc":  # log ∫ exp(−½|(x − μ)/σ|²) dx = log(2π σ₁σ₂), within its error bar
        assert abs(result.log_evidence - np.log(2 * np.pi * sd.prod())) < 4 * result.log_evidence_se + 1e-3
