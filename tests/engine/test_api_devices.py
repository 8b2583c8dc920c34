"""Chains sharded over several devices: same samples as on one device (``numerics="reproducible"``, the CPU's
default), and ``numerics="fast"`` deterministic there.

Runs in a subprocess with XLA_FLAGS=--xla_force_host_platform_device_count=4, which must be
set before JAX initializes its backend.

Bit-identity needs the same arithmetic on every device: the engine's own steps are batch-invariant
(per-step keys by fold_in, random words hashed from each chain's own counters, cross-chain statistics
by a fixed pairwise tree), but XLA:CPU runs elementwise code in SIMD blocks with a scalar remainder
loop that can round differently. With the number of chains per device a multiple of 16, no chain falls in a
remainder, and every sampler is bit-identical on 1 and 4 devices (tested below with 64 chains).
ChEES included: its cross-chain adaptation (jaxprobe.engine.chees) sums over chains by the same
pairwise tree and blocks XLA's multiply-add contraction where the sharded program's fusions differ.

The test's log density takes its constants as NumPy arrays. A ``jnp.arange`` inside it is an iota
that XLA constant-folds (and turns ``x / a`` into ``x * (1/a)``) in the one-device program but not
after SPMD partitioning, so the user's own arithmetic, not the engine's, would differ in the last
bit between the two programs.
"""

import subprocess
import sys
import textwrap

import pytest
from tests.conftest import host_devices_environment

SCRIPT = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numpy as np
    import jaxprobe
    from jaxprobe.engine import api

    assert jax.device_count() == 4, jax.devices()

    scales = np.arange(1.0, 5.0, dtype=np.float32)  # a literal constant (see the module docstring)

    def logdensity(x):
        return -0.5 * jnp.sum((x / scales) ** 2) - jnp.sum(jnp.tanh(x) ** 2)

    init = np.asarray(jax.random.normal(jax.random.key(0), (64, 4)))
    cases = [("mala", "per_chain"), ("mala", "shared"), ("rwmh", "per_chain"), ("hmc", "per_chain"),
             ("nuts", "shared")]
    for sampler, mode in cases:
        runs = {}
        for name, devices in (("one", jax.devices()[:1]), ("four", jax.devices())):
            runs[name] = jaxprobe.sample(3, logdensity, init, sampler=sampler, num_samples=30, num_warmup=60,
                                         step_size_mode=mode, progress=False, devices=devices)
        assert runs["one"].numerics == runs["four"].numerics == "reproducible"  # the default on a CPU
        np.testing.assert_array_equal(runs["one"].positions, runs["four"].positions, err_msg=f"{sampler} {mode}")
        np.testing.assert_array_equal(runs["one"].step_size, runs["four"].step_size)

    # A fixed step size, no warmup: sampling alone is bit-identical too.
    fixed = [jaxprobe.sample(4, logdensity, init, sampler="mala", num_samples=30, num_warmup=0, step_size=0.3,
                             progress=False, devices=devices) for devices in (jax.devices()[:1], jax.devices())]
    np.testing.assert_array_equal(fixed[0].positions, fixed[1].positions, err_msg="mala fixed step size")

    # ChEES: cross-chain adaptation of step size, trajectory length and mass matrix (all reductions
    # over chains by the pairwise tree), then sampling: the same bits on 1 and 4 devices. 100 warmup
    # steps reach the mass-matrix window (last half) and its engagement (64 pooled draws).
    chees = [jaxprobe.sample(3, logdensity, init, sampler="chees", num_samples=20, num_warmup=100, progress=False,
                             devices=devices) for devices in (jax.devices()[:1], jax.devices())]
    for field in ("positions", "logdensity", "step_size", "num_gradient_evaluations"):
        np.testing.assert_array_equal(getattr(chees[0], field), getattr(chees[1], field), err_msg=f"chees {field}")
    # The mean acceptance is a float32 sum per chunk, and one CPU device without a progress bar samples in one
    # chunk where four devices take twenty: the same per-step values summed in another grouping (1 ulp apart).
    np.testing.assert_allclose(chees[0].acceptance_rate, chees[1].acceptance_rate, rtol=1e-6,
                               err_msg="chees acceptance_rate")
    # The adaptation moved the parameters (not the initial 0.1 step, not one leapfrog step).
    assert chees[0].step_size[0] != np.float32(0.1)
    assert np.all(chees[0].num_gradient_evaluations > 20)

    # numerics="fast" on four devices (plain jax.random and sums, not batch-invariant): deterministic for a fixed
    # key, finite; the same bits as one device are promised only by "reproducible" (above).
    for sampler, warmup in (("mala", 60), ("rwmh", 60), ("chees", 100)):
        fast = [jaxprobe.sample(3, logdensity, init, sampler=sampler, num_samples=30, num_warmup=warmup,
                                progress=False, devices=jax.devices(), numerics="fast", convergence="ignore")
                for _ in range(2)]
        assert fast[0].numerics == "fast"
        np.testing.assert_array_equal(fast[0].positions, fast[1].positions, err_msg=f"{sampler} fast")
        assert np.all(np.isfinite(fast[0].positions))

    # The chains really live on four devices: the compiled chunk keeps the chain axis sharded.
    sharding = api.chain_sharding(64)
    assert len(sharding.device_set) == 4
    # Through the public functional core (jaxprobe.engine.init / run in the user's own jit), as embedded use does.
    from jaxprobe import engine

    kernel = engine.make_kernel("mala")
    positions = jax.device_put(np.asarray(init), sharding)
    parameters = {"step_size": jax.device_put(np.full(64, 0.3, np.float32), sharding)}  # (C,): per chain
    state = jax.jit(engine.init, static_argnums=(0, 1))(kernel, logdensity, positions, parameters)
    run = jax.jit(engine.run, static_argnums=(2, 3, 4, 5))
    state, trace, _ = run(jax.random.key(0), state, kernel, logdensity, 5, 2)
    assert len(state.kernel_state.position.sharding.device_set) == 4
    assert state.kernel_state.position.sharding.shard_shape((64, 4)) == (16, 4)

    # 6 chains do not split over 4 devices: the largest count that divides 6 (3) is used, with a warning.
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert len(api.chain_sharding(6).device_set) == 3
    assert any("do not split evenly" in str(w.message) for w in caught)
    print("devices ok")
    """
)


@pytest.mark.slow
def test_sharded_chains_match_single_device_bit_for_bit():
    environment = host_devices_environment(4)
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600, env=environment)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    assert "devices ok" in out.stdout
