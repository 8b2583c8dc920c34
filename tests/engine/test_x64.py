"""Every sampler with float32 and float64 starting positions, jax_enable_x64 on and off (issue 25).

With x64 on, float32 starts crashed every sampler that adapts a step size (the dual-averaging state was
promoted to float64 inside the warmup scan), NUTS (BlackJAX starts a trajectory's proposal weight as a
Python float, float64 under x64) and SMC (BlackJAX's tempering solver and MALA noise); a log density
returning float64 for float32 positions crashed ChEES and SMC. Each case runs a small N(μ, I) target from
starts away from μ and checks the dtypes (log densities in the positions' dtype) and the mean within its
Monte-Carlo error.

x64 is switched with ``jax.enable_x64`` (a context manager), never globally, so nothing leaks into other
tests. Cost: every case compiles its own programs (1 to 12 s each on 2 cores), so the default run keeps
MALA (the dual-averaging regression hit every adaptive sampler alike; a float64 start without x64 reuses
the float32 programs) and the slow pass (CI) runs every other sampler with x64 on, float32 and float64
starts (about 45 s). Not repeated here: the other samplers with x64 off (float32: known answers in
test_kernels.py and test_smc*.py; a float64 start without x64 is cast to float32 before anything
compiles, whatever the sampler, as the MALA cases check).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprobe
from jaxprobe.engine import known_samplers
from tests.conftest import mc_check_mean

MEAN = np.array([1.0, -0.5])


def shifted_normal():
    """N(MEAN, I). MEAN is a float64 NumPy array: under x64 the value is float64 for float32 positions too (as
    for a model with float64 weights), which the samplers' float32 states must take (it crashed ChEES and SMC).
    One function and one array per x64 setting: JAX keeps a NumPy constant as first lowered, so an array first
    used without x64 would stay float32 under ``jax.enable_x64`` (and fail to lower)."""
    mean = MEAN.copy()

    def logdensity(x):
        return -0.5 * jnp.sum((x - mean) ** 2)
    return logdensity


TARGETS = {x64: shifted_normal() for x64 in (False, True)}  # without x64, float64 starts reuse float32's programs


def _cases():
    """(sampler, x64, dtype) cases: MALA in the default run, the others under slow (see the module notes)."""
    default = [("mala", True, np.float32), ("mala", False, np.float32), ("mala", False, np.float64)]
    slow = [(sampler, True, dtype) for sampler in known_samplers() for dtype in (np.float32, np.float64)
            if (sampler, True, dtype) not in default]
    assert {case[0] for case in default + slow} == set(known_samplers())
    return [pytest.param(*case, marks=() if case in default else (pytest.mark.slow,),
                         id=f"{case[0]}-x64_{'on' if case[1] else 'off'}-{np.dtype(case[2]).name}")
            for case in default + slow]


@pytest.mark.slow
@pytest.mark.parametrize("sampler, x64, dtype", _cases())
def test_sampler_runs_with_and_without_x64(sampler, x64, dtype):
    smc = sampler == "smc"
    num_chains = 128 if smc else 16
    with jax.enable_x64(x64):
        start = np.zeros((num_chains, 2), dtype)
        extra = {"reference": jaxprobe.priors.StandardNormal((2,))} if smc else {}
        samples = jaxprobe.sample(3, TARGETS[x64], start, sampler=sampler, num_samples=200, num_warmup=200,
                                  progress=False, convergence="ignore", **extra)
    expected = np.dtype(dtype) if x64 else np.dtype(np.float32)
    assert samples.positions.dtype == expected and samples.logdensity.dtype == expected
    mc_check_mean(samples.positions, MEAN)


@pytest.mark.parametrize("seed", [-1, 2**64, 2**70, np.int64(-3)])
def test_out_of_range_seed_names_rng_key(seed):
    """An int seed outside [0, 2**64) is a ValueError naming rng_key (was an OverflowError from JAX that did
    not, or a silently different key), before anything compiles; for sample and generate alike."""
    with pytest.raises(ValueError, match=r"rng_key must be an int seed in \[0, 2\*\*64 - 1\]"):
        jaxprobe.sample(seed, TARGETS[False], np.zeros((4, 2), np.float32), progress=False)
    with pytest.raises(ValueError, match="rng_key must be an int seed"):
        jaxprobe.generate(seed, lambda x: jnp.sum(x**2), temperature=1.0, dim=2, num_chains=4, num_samples=5,
                          progress=False)


def test_large_seeds_give_the_same_key_with_and_without_x64():
    """Seeds of 2**32 and more are the seed's two 32-bit words, as jax.random.key makes them under x64 (without
    x64 JAX keeps the low word only, so 2**32 drew what 0 draws); seeds below 2**32 are jax.random.key(seed)."""
    from jaxprobe.engine import canonicalize_key

    seeds = [0, 7, 2**32 - 1, 2**32, 2**40 + 5, 2**63 - 1, 2**64 - 1]
    keys = {}
    for x64 in (False, True):
        with jax.enable_x64(x64):
            keys[x64] = [np.asarray(jax.random.key_data(canonicalize_key(seed))) for seed in seeds]
            for seed in seeds[:3] + ([2**32, 2**40 + 5, 2**63 - 1] if x64 else []):
                np.testing.assert_array_equal(keys[x64][seeds.index(seed)], jax.random.key_data(jax.random.key(seed)))
    for without, with_x64 in zip(keys[False], keys[True]):
        np.testing.assert_array_equal(without, with_x64)
    assert len({tuple(k) for k in keys[False]}) == len(seeds)  # 2**32 no longer collides with 0
