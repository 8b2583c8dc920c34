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


def _check(samples, num_chains=512, num_groups=8):
    """The particle observables of one front end's result: near the truth, and the groups' means weighted by
    the groups' evidence estimates, which the result carries (``group_log_evidence``)."""
    particle_observables = samples.particle_observables
    assert set(particle_observables) == set(TRUTH)
    assert samples.group_log_evidence.shape == (num_groups,) and np.all(np.isfinite(samples.group_log_evidence))
    weights = estimates.group_weights(samples.group_log_evidence)
    for name, truth in TRUTH.items():
        estimate = particle_observables[name]
        assert estimate.num_batches == num_groups
        assert estimate.per_chain_mean.shape == (num_chains, 2)
        group_means = estimate.per_chain_mean.reshape(num_groups, -1, 2).mean(axis=1)
        np.testing.assert_allclose(estimate.mean, weights @ group_means)
        assert np.all(np.isfinite(estimate.mcse)) and np.all(estimate.mcse > 0)
        assert np.all(np.abs(estimate.mean - truth) <= SIGMAS * estimate.mcse + 0.01), (name, estimate)


def test_particle_observed_is_the_mean_with_the_spread_of_the_group_means():
    values = np.arange(12.0).reshape(12, 1)  # 3 groups of 4: means 1.5, 5.5, 9.5
    estimate = estimates.particle_observed(values, 3)
    np.testing.assert_allclose(estimate.mean, [5.5])
    np.testing.assert_allclose(estimate.mcse, [np.std([1.5, 5.5, 9.5], ddof=1) / np.sqrt(3)])
    assert estimate.num_batches == 3 and estimate.per_chain_mean.shape == (12, 1)
    assert np.isnan(estimates.particle_observed(values, 1).mcse[0])


def test_particle_observed_weights_the_groups_by_their_evidence():
    """Σ_g Ẑ_g m_g / Σ_g Ẑ_g with the delta-method error of a ratio; the effective groups 1/Σw² decide the note."""
    values = np.arange(12.0).reshape(12, 1)  # 3 groups of 4: means 1.5, 5.5, 9.5
    estimate = estimates.particle_observed(values, 3, np.log([1.0, 1.0, 2.0]))
    weights = np.array([0.25, 0.25, 0.5])
    mean = weights @ np.array([1.5, 5.5, 9.5])
    np.testing.assert_allclose(estimate.mean, [mean])
    np.testing.assert_allclose(estimate.mcse, [np.sqrt(1.5 * np.sum(weights**2 * (np.array([1.5, 5.5, 9.5]) - mean)
                                                                     ** 2))])
    equal = estimates.particle_observed(values, 3, np.zeros(3))  # equal evidence: the unweighted estimate
    np.testing.assert_allclose(equal.mcse, estimates.particle_observed(values, 3).mcse)
    many = np.arange(32.0)  # 16 groups of 2: enough groups, but one carries almost all the evidence
    assert estimates.particle_observed(many, 16, np.zeros(16)).note is None
    eight = np.arange(16.0)  # 8 groups with the typical unevenness (log Ẑ_g sd 0.35): about 7 effective, trusted
    spread = np.random.default_rng(0).normal(0.0, 0.35, 8)
    assert 1.0 / np.sum(estimates.group_weights(spread) ** 2) < 8 and estimates.particle_observed(eight, 8,
                                                                                                   spread).note is None
    lopsided = estimates.particle_observed(many, 16, np.r_[10.0, np.zeros(15)])
    assert "effective groups" in lopsided.note and float(lopsided.mean) > 0.99 * 0.5  # the first group's mean
    with pytest.raises(ValueError, match=r"group_log_evidence must have shape \(3,\)"):
        estimates.particle_observed(values, 3, np.zeros(4))


def test_generate_reports_particle_observables_near_the_truth(tmp_path):
    result = jaxprobe.generate(0, probe, temperature=1.0, prior=jaxprobe.priors.StandardNormal(), dim=2,
                               observables=OBSERVABLES, **OPTIONS)
    _check(result)
    for name in TRUTH:  # the chains' own estimate is there as before
        assert result.observables[name].mean.shape == (2,)
    result.save(tmp_path / "s.npz")
    loaded = jaxprobe.Samples.load(tmp_path / "s.npz")
    for name in TRUTH:
        for field in ("mean", "mcse", "per_chain_mean"):
            np.testing.assert_array_equal(getattr(loaded.particle_observables[name], field),
                                          getattr(result.particle_observables[name], field))
    np.testing.assert_array_equal(loaded.group_log_evidence, result.group_log_evidence)


def test_sample_with_a_reference_reports_particle_observables():
    prior = jaxprobe.priors.StandardNormal(event_shape=(2,))
    target = jaxprobe.gibbs(probe, 1.0, prior)
    options = {key: value for key, value in OPTIONS.items() if key != "num_chains"}
    samples = jaxprobe.sample(1, target, np.zeros((512, 2), np.float32), reference=prior,
                              observables=OBSERVABLES, **options)
    _check(samples)


def test_batched_sweep_cells_report_particle_observables():
    """Two cells in one vmapped program (a one-cell sweep runs generate's path, checked above)."""
    result = jaxprobe.sweep(0, probe, {"temperature": [1.0], "seed": [0, 1]}, prior=jaxprobe.priors.StandardNormal(),
                            dim=2, observables=OBSERVABLES, **OPTIONS)
    for samples in result.samples:
        _check(samples)
    assert not np.array_equal(result.samples[0].particle_observables["x"].mean,
                              result.samples[1].particle_observables["x"].mean)  # independent cells


@pytest.mark.parametrize("sampler", ["mala"])
def test_mcmc_runs_have_no_particle_observables(sampler):
    result = jaxprobe.generate(0, probe, temperature=1.0, prior=jaxprobe.priors.StandardNormal(), dim=2,
                               observables=OBSERVABLES, num_chains=16, num_samples=20, num_warmup=20,
                               sampler=sampler, progress=False, convergence="ignore")
    assert result.particle_observables is None and result.observables is not None


@pytest.mark.slow
def test_evidence_weighted_groups_remove_the_small_group_bias():
    """The d = 4 three-mode question (closed-form share 0.6 for the first mode) with 16 particles per group, over
    24 independent runs in one program: equally weighted groups under-count the big mode by ~0.09 (6σ of the
    runs' spread, the 1/(N/G) bias); weighted by their evidence estimates the runs' mean is within 3σ of 0.6."""
    import jax

    from jaxprobe.bench.smc_peers import QUESTIONS, _functions, closed_form
    from jaxprobe.engine.smc import tempered_smc

    question = QUESTIONS["three4d"]
    truth = closed_form(question)[0][0]
    prior, tilt, mode = _functions(question)
    num_particles, num_groups, runs = 256, 16, 24

    @jax.jit
    def first_mode_and_evidence(keys):
        def one(key):
            key_start, key_smc = jax.random.split(key)
            result = tempered_smc(key_smc, prior, tilt, jax.random.normal(key_start, (num_particles, 4)),
                                  num_groups=num_groups)
            return jax.vmap(mode)(result.particles) == 0, result.group_log_evidence
        return jax.vmap(one)(keys)

    first, group_log_evidence = map(np.asarray, first_mode_and_evidence(jax.random.split(jax.random.key(0), runs)))
    weighted = np.array([float(estimates.particle_observed(f.astype(float), num_groups, evidence).mean)
                         for f, evidence in zip(first, group_log_evidence)])
    equal = np.array([float(estimates.particle_observed(f.astype(float), num_groups).mean) for f in first])
    for shares in (weighted, equal):
        assert shares.std(ddof=1) > 0
    spread = lambda shares: shares.std(ddof=1) / np.sqrt(runs)  # noqa: E731
    assert abs(weighted.mean() - truth) < 3 * spread(weighted), (weighted.mean(), truth)
    assert equal.mean() - truth < -5 * spread(equal), (equal.mean(), truth)  # the bias this removes is real
