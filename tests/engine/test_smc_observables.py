"""Observables at the particles of a tempered SMC run, with the standard error of its independent particle
groups, through each front end that runs SMC: sample (with a reference), generate and a sweep cell.

Target: the probe G(x) = |x − 1|²/2 at τ = 1 under a N(0, I) prior in d = 2: p(x) ∝ exp(−|x − 1|²/2 − |x|²/2),
a Gaussian with mean 1/2 and variance 1/2 per coordinate, so E[x] = 0.5 and E[x²] = 0.75."""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxprobe
from jaxprobe.engine import estimates
from jaxprobe.probes import Probe

TRUTH = {"x": 0.5, "x2": 0.75}
OBSERVABLES = {"x": lambda x: x, "x2": lambda x: x**2}
SIGMAS = 4.0  # each estimate within 4 standard errors (and a small absolute floor for the O(1/n) bias)


def _loss(x):
    return 0.5 * jnp.sum((x - 1.0) ** 2)


probe = Probe(_loss, "half_way")  # a Probe object: sweep calls a bare function as build_probe()


OPTIONS = dict(num_chains=512, num_samples=20, num_warmup=20, sampler="smc", progress=False, convergence="ignore",
               sampler_options={"num_groups": 8})


def _check(particle_observables, num_chains=512, num_groups=8):
    assert set(particle_observables) == set(TRUTH)
    for name, truth in TRUTH.items():
        estimate = particle_observables[name]
        assert estimate.num_batches == num_groups
        assert estimate.per_chain_mean.shape == (num_chains, 2)
        np.testing.assert_allclose(estimate.mean, estimate.per_chain_mean.mean(axis=0))
        assert np.all(np.isfinite(estimate.mcse)) and np.all(estimate.mcse > 0)
        assert np.all(np.abs(estimate.mean - truth) <= SIGMAS * estimate.mcse + 0.01), (name, estimate)


def test_particle_observed_is_the_mean_with_the_spread_of_the_group_means():
    values = np.arange(12.0).reshape(12, 1)  # 3 groups of 4: means 1.5, 5.5, 9.5
    estimate = estimates.particle_observed(values, 3)
    np.testing.assert_allclose(estimate.mean, [5.5])
    np.testing.assert_allclose(estimate.mcse, [np.std([1.5, 5.5, 9.5], ddof=1) / np.sqrt(3)])
    assert estimate.num_batches == 3 and estimate.per_chain_mean.shape == (12, 1)
    assert np.isnan(estimates.particle_observed(values, 1).mcse[0])


def test_generate_reports_particle_observables_near_the_truth(tmp_path):
    result = jaxprobe.generate(0, probe, temperature=1.0, prior=jaxprobe.priors.StandardNormal(), dim=2,
                               observables=OBSERVABLES, **OPTIONS)
    _check(result.particle_observables)
    for name in TRUTH:  # the chains' own estimate is there as before
        assert result.observables[name].mean.shape == (2,)
    result.save(tmp_path / "s.npz")
    loaded = jaxprobe.Samples.load(tmp_path / "s.npz")
    for name in TRUTH:
        for field in ("mean", "mcse", "per_chain_mean"):
            np.testing.assert_array_equal(getattr(loaded.particle_observables[name], field),
                                          getattr(result.particle_observables[name], field))


def test_sample_with_a_reference_reports_particle_observables():
    prior = jaxprobe.priors.StandardNormal(event_shape=(2,))
    target = jaxprobe.gibbs(probe, 1.0, prior)
    options = {key: value for key, value in OPTIONS.items() if key != "num_chains"}
    samples = jaxprobe.sample(1, target, np.zeros((512, 2), np.float32), reference=prior,
                              observables=OBSERVABLES, **options)
    _check(samples.particle_observables)


def test_batched_sweep_cells_report_particle_observables():
    """Two cells in one vmapped program (a one-cell sweep runs generate's path, checked above)."""
    result = jaxprobe.sweep(0, probe, {"temperature": [1.0], "seed": [0, 1]}, prior=jaxprobe.priors.StandardNormal(),
                            dim=2, observables=OBSERVABLES, **OPTIONS)
    for samples in result.samples:
        _check(samples.particle_observables)
    assert not np.array_equal(result.samples[0].particle_observables["x"].mean,
                              result.samples[1].particle_observables["x"].mean)  # independent cells


@pytest.mark.parametrize("sampler", ["mala"])
def test_mcmc_runs_have_no_particle_observables(sampler):
    result = jaxprobe.generate(0, probe, temperature=1.0, prior=jaxprobe.priors.StandardNormal(), dim=2,
                               observables=OBSERVABLES, num_chains=16, num_samples=20, num_warmup=20,
                               sampler=sampler, progress=False, convergence="ignore")
    assert result.particle_observables is None and result.observables is not None
