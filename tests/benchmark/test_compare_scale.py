"""jaxprobe.benchmark at scale and across chains (issue 27): the one limit every harness times, BlackJAX's
cross-chain adaptation (MEADS) against a known answer and its minimum chain count, and (slow) the same compare
call on 4 forced host CPU devices giving the rows of the one-device run."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import types

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxprobe.benchmark import Target, compare, from_blackjax
from jaxprobe.benchmark.compare import limit_step
from tests.conftest import host_devices_environment

SCALES = np.array([1.0, 2.0])


def _gaussian() -> Target:
    """N(0, diag(1, 4)): a small target with closed-form truth."""
    return Target("small_gaussian", lambda x: -0.5 * jnp.sum((x / SCALES) ** 2), 2, mean=np.zeros(2),
                  var=SCALES ** 2)


def _standard_normal(x):
    return -0.5 * jnp.sum(x * x)


# ------------------------------------------------------------------ one limit


def test_limit_step_is_the_unadjusted_langevin_update():
    """One step from x: x + ε ∇log p(x) + √(2ε) ξ, ξ the flat normal draw of fold_in(key, t); the jaxprobe
    generator draws other noise of the same law; an unknown generator is refused; and run long on N(0, 1) the
    limit keeps ULA's known variance 1/(1 − ε/2)."""
    x = jnp.arange(6.0, dtype=jnp.float32).reshape(3, 2)
    key = jax.random.key(7)
    step = limit_step(_standard_normal, 3, 2, step_size=0.1)
    noise = jax.random.normal(jax.random.fold_in(key, 4), (6,)).reshape(3, 2)
    np.testing.assert_allclose(step(key, x, 4), x - 0.1 * x + math.sqrt(0.2) * noise, rtol=1e-6)
    other = limit_step(_standard_normal, 3, 2, step_size=0.1, generator="jaxprobe")(key, x, 4)
    assert other.shape == (3, 2) and not np.allclose(other, step(key, x, 4))
    with pytest.raises(ValueError, match="generator must be 'jax' or 'jaxprobe'"):
        limit_step(_standard_normal, 3, 2, generator="numpy")
    ula = limit_step(_standard_normal, 4096, 1, step_size=0.2)  # 4096 chains, 200 steps from 0
    x = jax.lax.scan(lambda x, t: (ula(jax.random.key(0), x, t), None), jnp.zeros((4096, 1)), jnp.arange(200))[0]
    assert abs(float(jnp.var(x)) - 1 / 0.9) < 5 * (1 / 0.9) * math.sqrt(2 / 4096)


def test_bench_scripts_time_the_same_limit():
    """throughput's and gpu's limit rows are compare's limit_step: the same positions after the same steps (4
    chains in the scripts' dimension, 5 steps)."""
    from jaxprobe.bench import gpu, throughput

    x0 = throughput.initial_positions(4)
    step = limit_step(_standard_normal, 4, throughput.DIM, throughput.STEP_SIZE)
    expected = jax.lax.scan(lambda x, t: (step(jax.random.key(2), x, t), None), x0, jnp.arange(5))[0]
    np.testing.assert_allclose(throughput.build_limit(_standard_normal, x0, throughput.STEP_SIZE)(5)(), expected,
                               rtol=1e-5, atol=1e-6)
    row = gpu.limit_row(_standard_normal, 4, 5, x0)
    np.testing.assert_allclose(row.compiled(row.state)[1], expected, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ across chains


def _meads():
    return from_blackjax(lambda f, **p: blackjax.ghmc(f, **p), lambda f, c: blackjax.meads_adaptation(f, c),
                         across_chains=True)


def _chees():
    """BlackJAX's ChEES across chains; its run also takes an initial step size and an optimizer: bound here."""
    import optax

    def adaptation(logdensity_fn, num_chains):
        chees = blackjax.chees_adaptation(logdensity_fn, num_chains)
        return types.SimpleNamespace(
            run=lambda key, x, num_steps: chees.run(key, x, 0.5, optax.adam(0.05), num_steps))

    return from_blackjax(lambda f, **p: blackjax.dynamic_hmc(f, **p), adaptation, across_chains=True)


def test_failed_adaptation_is_a_row_failure():
    """An adaptation whose parameters are not finite: the row's failure says so (nothing is judged from it)."""
    class NaNAdaptation:
        def __init__(self, logdensity_fn, num_chains):
            self.mala = blackjax.mala(logdensity_fn, step_size=0.1)

        def run(self, key, positions, num_steps):
            return (jax.vmap(self.mala.init)(positions), {"step_size": jnp.nan}), None

    sampler = from_blackjax(lambda f, **p: blackjax.mala(f, **p), NaNAdaptation, across_chains=True)
    row = compare({"nan-adapt": sampler}, [_gaussian()], num_chains=4, num_warmup=5, num_samples=8, seeds=2,
                  progress=False).rows[0]
    assert row["failure"] == "adaptation returned non-finite parameters in 2 of 2 seeds"
    assert row["poor_runs"] == 2 and row.get("ess_bulk") is None


@pytest.mark.slow
def test_meads_across_chains_known_answer_and_minimum_chains():
    """BlackJAX's MEADS adapted across chains (4 folds), one sampler for every chain count: with 16 chains (4 per
    fold) GHMC is right on the Gaussian (both seeds judged, not biased, ESS well above the judging floor); with 4
    chains (1 per fold, each fold's scale a 0/0) its parameters are NaN and the row says so instead of reporting
    a frozen run."""
    report = compare({"meads": _meads()}, [_gaussian()], num_chains=[4, 16], num_warmup=100, num_samples=200,
                     seeds=2, key=1, progress=False)
    four, sixteen = report.row("meads", "small_gaussian", 4), report.row("meads", "small_gaussian", 16)
    assert four["failure"] == "adaptation returned non-finite parameters in 2 of 2 seeds"
    assert sixteen["failure"] is None and sixteen["biased"] is False and sixteen["judged_seeds"] == 2
    assert sixteen["ess_bulk"] > 200 and sixteen["acceptance"] > 0.5


@pytest.mark.slow
def test_chees_across_chains_known_answer():
    """BlackJAX's ChEES adapted across chains (its parameters hold functions, which the harness keeps out of the
    carried state): right on the Gaussian at 16 chains, its leapfrog steps counted from its info."""
    row = compare({"chees": _chees()}, [_gaussian()], num_chains=16, num_warmup=200, num_samples=200, seeds=2,
                  key=1, progress=False).rows[0]
    assert row["failure"] is None and row["biased"] is False and row["judged_seeds"] == 2
    assert row["ess_bulk"] > 400 and row["gradients_per_step"] > 1


# ------------------------------------------------------------------ many devices


def _device_rows() -> list[dict]:
    """The rows the device test compares: jaxprobe's ChEES on the Gaussian, 8 chains, 2 seeds."""
    report = compare({"chees": "chees"}, [_gaussian()], num_chains=8, num_warmup=100, num_samples=200, seeds=2,
                     key=3, progress=False)
    return json.loads(json.dumps(report.rows, default=float))


_DEVICES_SCRIPT = textwrap.dedent("""
    import json, sys
    import jax
    sys.path.insert(0, sys.argv[1])
    from test_compare_scale import _device_rows
    print(json.dumps({"devices": jax.device_count(), "rows": _device_rows()}))
""")


@pytest.mark.slow
def test_compare_on_four_devices_gives_the_one_device_rows():
    """compare shards the chains over 4 forced host CPU devices as the engine does (chain_sharding): the rows
    record 4 devices and their per-seed statistics equal the one-device run's (CPU, reproducible numerics:
    exactly, up to float rounding, rtol 1e-6), jaxprobe's ChEES, whose adaptation pools over the sharded chains;
    and the row is right (not biased). The one-device run is this process's when it sees one device."""
    runs = {}
    if jax.device_count() == 1:
        runs[1] = {"devices": 1, "rows": _device_rows()}
    for count in (1, 4):
        if count in runs:
            continue
        env = host_devices_environment(count)
        completed = subprocess.run([sys.executable, "-c", _DEVICES_SCRIPT, os.path.dirname(__file__)], env=env,
                                   capture_output=True, text=True, timeout=600)
        assert completed.returncode == 0, completed.stderr[-3000:]
        runs[count] = json.loads(completed.stdout.strip().splitlines()[-1])
        assert runs[count]["devices"] == count
    assert len(runs[1]["rows"]) == len(runs[4]["rows"]) == 1
    for one, four in zip(runs[1]["rows"], runs[4]["rows"]):
        assert (one["sampler"], one["num_devices"], four["num_devices"]) == (four["sampler"], 1, 4)
        assert one["failure"] is None and four["failure"] is None and one["biased"] is False
        assert set(one) == set(four)
        for key in ("min_ess_bulk", "acceptance", "gradients", "z_mean", "z_var"):
            np.testing.assert_allclose(np.asarray(four["per_seed"][key], float),
                                       np.asarray(one["per_seed"][key], float), rtol=1e-6, err_msg=key)
