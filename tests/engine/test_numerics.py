"""The one numerics policy, ``numerics="reproducible" | "fast"`` (jaxprobe.engine.numerics).

Both modes give the same distribution on known answers for every built-in sampler; the reproducible
mode is the engine as before (bit-identical across device counts, and the fast mode deterministic on four devices:
the slow subprocess test of tests/engine/test_api_devices.py); the fast mode is deterministic for a fixed key; the default resolves
per platform (reproducible on CPU); bad values are refused before anything compiles; ``Samples``
records the mode, in memory and on file.
"""

import dataclasses
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.conftest import mc_check_mean, mc_check_second_moment

import jaxprobe
from jaxprobe.engine import kernels, numerics, registry
from jaxprobe.engine.numerics import FAST, REPRODUCIBLE
from jaxprobe.engine.options import option_specs
from jaxprobe.engine.samples import Samples
from jaxprobe.probes import Probe

MODES = ("reproducible", "fast")

# A 4-D Gaussian, not isotropic, off the origin: mean MU, standard deviations SD (diagonal).
MU = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
SD = np.array([0.5, 1.0, 2.0, 3.0], np.float32)


def gaussian(x):
    return -0.5 * jnp.sum(((x - MU) / SD) ** 2)


class Reference:
    """A broad Gaussian reference for sampler="smc": its log density and exact draws."""

    def __call__(self, x):
        return -0.5 * jnp.sum((x / 4.0) ** 2)

    def sample(self, rng_key, n):
        return 4.0 * jax.random.normal(rng_key, (n, MU.size))

    def __hash__(self):
        return hash(Reference)

    def __eq__(self, other):
        return isinstance(other, Reference)


def _init(num_chains, seed=1):
    return np.asarray(jax.random.normal(jax.random.key(seed), (num_chains, MU.size)), np.float32)


# sampler: (num_chains, num_warmup, num_samples, thin)
SETTINGS = {"mala": (32, 300, 300, 2), "rwmh": (32, 400, 300, 5), "hmc": (32, 300, 200, 1),
            "nuts": (16, 200, 200, 1), "chees": (64, 300, 200, 1), "smc": (64, 100, 200, 2)}


def test_every_builtin_sampler_is_checked():
    assert set(SETTINGS) == set(registry.known_samplers()[:6])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sampler", [pytest.param(name, marks=pytest.mark.slow)
                                     if name in ("hmc", "nuts", "chees", "smc") else name
                                     for name in sorted(SETTINGS)])  # HMC, NUTS, ChEES, SMC: 70 s, slow pass
def test_known_answer_in_both_modes(sampler, mode):
    """Mean and variance of every coordinate within 4 Monte-Carlo standard errors (ESS-based), both modes."""
    num_chains, num_warmup, num_samples, thin = SETTINGS[sampler]
    extra = {"reference": Reference()} if sampler == "smc" else {}
    result = jaxprobe.sample(2, gaussian, _init(num_chains), sampler=sampler, num_samples=num_samples,
                             num_warmup=num_warmup, thin=thin, progress=False, numerics=mode, **extra)
    assert result.numerics == mode
    mc_check_mean(result.positions, MU)
    mc_check_second_moment(result.positions, MU, np.diag(SD.astype(np.float64) ** 2))
    assert result.num_nonfinite.sum() == 0


def test_fast_mode_is_deterministic_and_differs_from_reproducible():
    run = lambda mode: jaxprobe.sample(5, gaussian, _init(16), sampler="mala", num_samples=30,  # noqa: E731
                                       num_warmup=30, progress=False, numerics=mode, convergence="ignore")
    first, second = run("fast"), run("fast")
    np.testing.assert_array_equal(first.positions, second.positions)
    np.testing.assert_array_equal(first.step_size, second.step_size)
    assert not np.array_equal(first.positions, run("reproducible").positions)  # another random stream


def test_default_resolves_to_reproducible_on_cpu():
    assert jax.default_backend() == "cpu"
    assert numerics.default_numerics() == "reproducible"
    assert numerics.resolve_numerics(None) == REPRODUCIBLE
    gpu = types.SimpleNamespace(platform="gpu")
    tpu = types.SimpleNamespace(platform="tpu")
    assert numerics.default_numerics([gpu]) == "fast" and numerics.default_numerics([tpu]) == "fast"
    assert numerics.resolve_numerics(None, [gpu]) == FAST
    assert numerics.resolve_numerics("reproducible", [gpu]) == REPRODUCIBLE  # asked for: kept
    result = jaxprobe.sample(0, gaussian, _init(8), num_samples=5, num_warmup=5, progress=False,
                             convergence="ignore")
    assert result.numerics == "reproducible"
    # The default run is the reproducible one, bit for bit.
    explicit = jaxprobe.sample(0, gaussian, _init(8), num_samples=5, num_warmup=5, progress=False,
                               convergence="ignore", numerics="reproducible")
    np.testing.assert_array_equal(result.positions, explicit.positions)


@pytest.mark.parametrize("value, error", [("quick", ValueError), (1, TypeError), (True, TypeError),
                                          ("FAST", ValueError)])
def test_bad_value_is_refused_before_compiling(compile_counter, value, error):
    init = _init(8)                       # outside the count: drawing the starts compiles on a worker's first call
    with compile_counter:
        with pytest.raises(error, match="numerics"):
            jaxprobe.sample(0, gaussian, init, num_samples=5, num_warmup=5, progress=False, numerics=value)
        with pytest.raises(error, match="numerics"):
            jaxprobe.generate(0, lambda x: jnp.sum(x ** 2), temperature=1.0, num_chains=4, num_samples=5, dim=2,
                              progress=False, numerics=value)
        with pytest.raises(error, match="numerics"):
            jaxprobe.sweep(0, Probe(lambda x: jnp.sum(x ** 2)), {"temperature": [1.0]},
                           num_chains=4, num_samples=5, dim=2, progress=False, numerics=value)
    assert compile_counter.count == 0, "a bad numerics value was only caught after compiling"


def test_numerics_is_not_a_sampler_option():
    with pytest.raises(TypeError, match="unknown option"):
        registry.make_kernel("mala", {"numerics": "fast"})
    assert "numerics" not in option_specs(kernels.MALA)


def test_kernels_carry_the_policy_as_a_static_hashable_field():
    assert kernels.MALA().numerics == REPRODUCIBLE
    fast = kernels.MALA(numerics="fast")
    assert fast.numerics is not None and fast == kernels.MALA(numerics=FAST) and hash(fast) == hash(kernels.MALA(
        numerics=FAST))
    assert fast != kernels.MALA()  # a different compiled program
    assert numerics.with_numerics(kernels.MALA(), "fast") == fast
    smc = numerics.with_numerics(registry.make_kernel("smc", {"kernel": "hmc"}), FAST)
    assert smc.chains().numerics == FAST  # the particles' chains inherit it
    with pytest.raises(ValueError, match="numerics"):
        kernels.HMC(numerics="quick")

    @dataclasses.dataclass(frozen=True)
    class Plain:  # a kernel without the field keeps its own arithmetic
        name = "plain"

    plain = Plain()
    assert numerics.with_numerics(plain, FAST) is plain and numerics.numerics_of(plain) == REPRODUCIBLE


def test_fast_pieces_are_plain_jax():
    key = jax.random.key(3)
    normal, uniform = FAST.normal_and_uniform(key, 8, 5, jnp.float32)
    key_normal, key_uniform = jax.random.split(key)
    np.testing.assert_array_equal(normal, jax.random.normal(key_normal, (40,)).reshape(8, 5))
    np.testing.assert_array_equal(uniform, jax.random.uniform(key_uniform, (8,)))
    np.testing.assert_array_equal(FAST.random_words(key, 4, 3), jax.random.bits(key, (4, 3)))
    values = jax.random.normal(key, (37, 3))
    np.testing.assert_array_equal(FAST.chain_sum(values), jnp.sum(values, axis=0))
    np.testing.assert_array_equal(FAST.chain_mean(values), jnp.mean(values, axis=0))
    zero = jnp.zeros((), jnp.int32)
    assert FAST.fma_barrier(values, zero) is values
    # Reproducible: the engine's generator and the pairwise tree.
    np.testing.assert_array_equal(REPRODUCIBLE.normal_and_uniform(key, 8, 5, jnp.float32)[0],
                                  kernels.normal_and_uniform(key, 8, 5, jnp.float32)[0])
    np.testing.assert_array_equal(REPRODUCIBLE.chain_sum(values), numerics.pairwise_chain_sum(values))
    np.testing.assert_allclose(REPRODUCIBLE.chain_sum(values, zero), jnp.sum(values, axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(REPRODUCIBLE.fma_barrier(values, zero), values)


def test_samples_record_the_mode_on_file(tmp_path):
    result = jaxprobe.sample(1, gaussian, _init(8), num_samples=5, num_warmup=5, progress=False, numerics="fast",
                             convergence="ignore")
    assert result.numerics == "fast"
    result.save(tmp_path / "fast.npz")
    assert Samples.load(tmp_path / "fast.npz").numerics == "fast"
    # A file written before the field existed loads with numerics None.
    import json

    with np.load(tmp_path / "fast.npz", allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    header = json.loads(str(arrays["header"]))
    # a version-2 file (no checksums: no per-array table, no header CRC32) written before the field existed
    del header["numerics"], header["arrays"]
    header["format_version"] = 2
    del arrays["header_crc32"]
    arrays["header"] = np.asarray(json.dumps(header))
    np.savez(tmp_path / "old.npz", **arrays)
    assert Samples.load(tmp_path / "old.npz").numerics is None


def test_generate_and_sweep_pass_the_mode_on():
    probe = Probe(lambda x: jnp.sum((x - 1.0) ** 2))
    options = dict(temperature=1.0, num_chains=8, num_samples=20, num_warmup=20, dim=2, progress=False,
                   convergence="ignore")
    assert jaxprobe.generate(0, probe, numerics="fast", **options).numerics == "fast"
    swept = jaxprobe.sweep(0, probe, {"temperature": [0.5, 1.0]}, numerics="fast",
                           **{k: v for k, v in options.items() if k != "temperature"})
    assert [samples.numerics for samples in swept.samples] == ["fast", "fast"]
    default = jaxprobe.sweep(0, probe, {"temperature": [0.5, 1.0]},
                             **{k: v for k, v in options.items() if k != "temperature"})
    assert [samples.numerics for samples in default.samples] == ["reproducible", "reproducible"]
    assert swept.rows[0]["cell"] != default.rows[0]["cell"]  # a fast cell is not a reproducible one


def test_config_files_take_numerics():
    from jaxprobe.config import ConfigError, parse_config

    text = ('[data]\nname = "breast_cancer"\n[model]\nkind = "logistic_regression"\n'
            '[probe]\ntype = "prediction_risky"\nalpha = 0.5\n[sampler]\ntemperature = 0.1\n')
    assert parse_config(text).get("sampler.numerics") is None
    assert parse_config(text + 'numerics = "fast"\n').get("sampler.numerics") == "fast"
    with pytest.raises(ConfigError, match="numerics"):
        parse_config(text + 'numerics = "quick"\n')
    with pytest.raises(ConfigError, match="numerics"):
        parse_config(text + '[sweep.grid]\n"sampler.numerics" = ["fast", "reproducible"]\n', sweep=True)


@pytest.mark.slow
def test_fast_chees_adaptation_matches_blackjax():
    """The fast mode's ChEES warmup is BlackJAX's update: the same adapted step size, trajectory length and
    mass matrix as blackjax.chees_adaptation, up to Monte-Carlo noise (the per-step keys differ)."""
    import blackjax
    import optax
    from blackjax.adaptation.base import get_filter_adapt_info_fn

    from jaxprobe.engine import chees

    scales = np.array([0.3, 1.0, 3.0, 10.0], np.float32)

    def logdensity(x):
        return -0.5 * jnp.sum((x / scales) ** 2)

    num_chains, num_steps = 128, 300
    x0 = jax.random.normal(jax.random.key(0), (num_chains, scales.size))
    reference = blackjax.chees_adaptation(logdensity, num_chains, target_acceptance_rate=0.651,
                                          mass_matrix_estimation="diagonal",
                                          adaptation_info_fn=get_filter_adapt_info_fn(info_keys={"acceptance_rate"}))
    theirs = jax.jit(lambda key, x: {name: value for name, value in reference.run(
        key, x, 0.1, optax.adam(0.025), num_steps)[0][1].items() if not callable(value)})(jax.random.key(1), x0)
    kernel = kernels.ChEES(numerics="fast")
    state, acceptance = jax.jit(lambda key, x: chees.chees_warmup(key, x, kernel, logdensity, num_steps, 0.1))(
        jax.random.key(1), x0)
    ours = state.parameters
    np.testing.assert_allclose(ours["step_size"], theirs["step_size"], rtol=0.03)
    np.testing.assert_allclose(ours["num_leapfrog_steps"][0], theirs["integration_steps_params"][0], rtol=0.05)
    np.testing.assert_allclose(ours["inverse_mass_matrix"][0], theirs["inverse_mass_matrix"], rtol=0.05)
    np.testing.assert_allclose(np.sqrt(ours["inverse_mass_matrix"][0]), scales, rtol=0.05)
    assert 0.6 < float(np.mean(acceptance)) <= 1.0


# One device against four (reproducible: the same bits; fast: deterministic) is checked in the subprocess of
# tests/engine/test_api_devices.py, which runs those samplers on that question already (one JAX start, not two).
