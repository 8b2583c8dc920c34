"""Samples.expectation: a value and its Monte-Carlo standard error, for MCMC chains, SMC particle groups and
chains that continue them; the estimators against known answers, bad functions, and a small coverage check per
sampler family (the full tables: ``python -m jaxprobe.bench.calibration``, benchmarks/results/calibration.md)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import binom, norm

import jaxprobe
from jaxprobe.engine import estimates
from jaxprobe.engine.samples import Samples
from jaxprobe.probes import Probe


def _samples(positions, **fields):
    """Samples holding ``positions`` ``(C, N, ...)`` only (what expectation reads), as a run would give them."""
    num_chains = np.shape(jax.tree.leaves(positions)[0])[0]
    zeros = np.zeros(num_chains)
    return Samples(positions=positions, logdensity=np.zeros(np.shape(jax.tree.leaves(positions)[0])[:2]), acceptance_rate=zeros + 0.5,
                   step_size=zeros + 0.1, num_divergent=zeros, num_nonfinite=zeros, num_gradient_evaluations=zeros,
                   sampler="mala", num_warmup=0, thin=1, **fields)


def _ar1(rng, num_chains, num_draws, phi):
    """Stationary AR(1) chains with unit variance: integrated autocorrelation time (1 + φ)/(1 − φ)."""
    x = np.empty((num_chains, num_draws))
    x[:, 0] = rng.normal(size=num_chains)
    noise = rng.normal(size=(num_chains, num_draws)) * np.sqrt(1 - phi**2)
    for t in range(1, num_draws):
        x[:, t] = phi * x[:, t - 1] + noise[:, t]
    return x


def test_iid_draws_give_sd_over_root_n():
    rng = np.random.default_rng(0)
    draws = rng.normal(size=(4, 2000, 2)) * np.array([1.0, 3.0]) + np.array([1.0, -2.0])
    found = _samples(draws).expectation(lambda x: x)
    assert found.method == "ess" and found.note is None and found.mean.shape == (2,)
    np.testing.assert_allclose(found.mean, draws.mean(axis=(0, 1)))
    np.testing.assert_allclose(found.mcse, draws.reshape(-1, 2).std(axis=0, ddof=1) / np.sqrt(8000), rtol=0.1)
    assert np.all(np.abs(found.mean - [1.0, -2.0]) < 4 * found.mcse)
    assert found.per_chain_mean.shape == (4, 2)


def test_ar1_chains_give_the_analytic_error():
    """AR(1) with φ = 0.8: τ = 9, so the MCSE of the mean is √(9 / (C·N)); ESS-based, and batch means agree."""
    phi, num_chains, num_draws = 0.8, 8, 4000
    chains = _ar1(np.random.default_rng(1), num_chains, num_draws, phi)[..., None]
    exact = np.sqrt((1 + phi) / (1 - phi) / (num_chains * num_draws))
    found = _samples(chains).expectation(lambda x: x[0])
    assert found.mcse == pytest.approx(exact, rel=0.15)
    assert float(found.ess) == pytest.approx(num_chains * num_draws / 9, rel=0.3)
    batch = _samples(chains).expectation(lambda x: x[0], method="batch_means")
    assert batch.method == "batch_means" and batch.num_batches == 16  # streaming.NUM_BATCHES, 2 per chain
    # One error from 16 batch means has a ±18% sampling error of its own (seed 1's is 0.46x the truth, a 3-sigma
    # draw): over 20 independent data sets the mean of mcse² / exact² is 1 ± 0.08 (a χ²₁₅/15 average).
    ratios = [(_samples(_ar1(np.random.default_rng(seed), num_chains, num_draws, phi)[..., None])
               .expectation(lambda x: x[0], method="batch_means").mcse / exact) ** 2 for seed in range(20)]
    assert np.mean(ratios) == pytest.approx(1.0, abs=0.25)


def test_too_few_effective_draws_say_so_and_warn():
    chains = _ar1(np.random.default_rng(2), 2, 60, 0.95)[..., None]
    with pytest.warns(estimates.MCSEWarning, match="effective sample size"):
        found = _samples(chains).expectation(lambda x: x[0])
    assert not found.reliable and "effective sample size" in found.note and "unreliable" in str(found)
    with pytest.warns(estimates.MCSEWarning, match="error 0"):  # an indicator that never fired
        never = _samples(np.random.default_rng(3).normal(size=(4, 500, 1))).expectation(lambda x: x[0] > 10)
    assert never.mean == 0 and never.mcse == 0 and "cannot be estimated" in never.note


def test_a_gaussian_mean_under_mala_within_its_error():
    logdensity = lambda x: -0.5 * jnp.sum(((x - jnp.array([1.0, -2.0])) / jnp.array([1.0, 1.5])) ** 2)  # noqa: E731
    samples = jaxprobe.sample(0, logdensity, np.zeros((4, 2), np.float32), num_samples=600, num_warmup=300,
                              progress=False)
    found = samples.expectation(lambda x: x)
    assert found.note is None and np.all(found.ess > 200)
    assert np.all(np.abs(found.mean - np.array([1.0, -2.0])) < 4 * found.mcse)
    probability = samples.expectation(lambda x: x[0] > 2.0)  # an indicator's mean: P(x0 > 2) = 1 − Φ(1)
    assert abs(float(probability.mean) - norm.sf(1.0)) < 4 * float(probability.mcse)


def test_pytree_positions_and_vector_outputs():
    rng = np.random.default_rng(4)
    positions = {"a": rng.normal(size=(3, 50, 2)), "b": rng.normal(size=(3, 50))}
    found = _samples(positions).expectation(lambda p: jnp.stack([p["a"].sum(), p["b"]]), method="batch_means")
    np.testing.assert_allclose(found.mean, [positions["a"].sum(-1).mean(), positions["b"].mean()])


@pytest.mark.parametrize("fn, error, match", [
    (lambda x: x.no_such_attribute, ValueError, "fn failed on one position"),
    (lambda x: "text", TypeError, "fn must return a real numeric array"),
    (lambda x: jnp.log(x[0] - 100.0), ValueError, "fn returned a non-finite value"),
    (lambda x: jnp.log(x[0] + 0.5), ValueError, r"fn returned NaN or inf at \d+ of 400 draws"),
    (lambda x: np.asarray(x).sum(), ValueError, "fails under jax.vmap"),
    (3.0, TypeError, "fn must be a function of one position"),
])
def test_bad_functions_are_named(fn, error, match):
    draws = np.abs(np.random.default_rng(5).normal(size=(4, 100, 2)))
    draws[1, 7, 0] = -1.0  # one draw where log(x0 + 0.5) is NaN
    with pytest.raises(error, match=match):
        _samples(draws).expectation(fn)


def test_refusals_name_what_to_do_instead():
    samples = _samples(np.zeros((2, 10, 1)))
    with pytest.raises(ValueError, match="method must be one of"):
        samples.expectation(lambda x: x, method="bootstrap")
    with pytest.raises(ValueError, match="smc_groups.*sequential Monte Carlo"):
        samples.expectation(lambda x: x, method="smc_groups")
    kept_none = samples.__class__(**{**samples.__dict__, "positions": None, "logdensity": None})
    with pytest.raises(ValueError, match=r"keep_draws=False\): pass observables="):
        kept_none.expectation(lambda x: x)


def test_chains_of_one_smc_group_are_not_counted_as_independent():
    """8 groups of 16 chains; each group shares an offset (its particles' common ancestry, or the mode they sit
    in): the error is the groups' spread, which the chains' own ESS would miss by a factor ~4 = √16."""
    rng = np.random.default_rng(8)
    offsets = np.repeat(rng.normal(size=8), 16)[:, None, None]
    draws = offsets + 0.1 * rng.normal(size=(128, 50, 1))
    samples = _samples(draws, num_groups=8)
    found = samples.expectation(lambda x: x[0])
    assert found.method == "smc_groups" and found.num_batches == 8 and found.note is None
    group_means = draws.mean(axis=(1, 2)).reshape(8, 16).mean(axis=1)
    assert float(found.mcse) == pytest.approx(group_means.std(ddof=1) / np.sqrt(8), rel=1e-9)
    naive = samples.expectation(lambda x: x[0], method="ess")  # counts 128 chains as independent
    assert float(naive.mcse) < float(found.mcse) / 2


@pytest.mark.slow
def test_chains_after_smc_take_their_error_from_the_particle_groups():
    """Chain i continues particle i: the G groups of consecutive chains are independent, the chains within one
    are not. expectation(fn) is the streamed observable's estimate (same groups), near the truth E[x] = 0.5."""
    probe = Probe(lambda x: 0.5 * jnp.sum((x - 1.0) ** 2), "half_way")
    result = jaxprobe.generate(0, probe, temperature=1.0, prior=jaxprobe.priors.StandardNormal(), dim=2,
                               num_chains=256, num_samples=10, num_warmup=10, sampler="smc", progress=False,
                               convergence="ignore", sampler_options={"num_groups": 8},
                               observables={"x": lambda x: x})
    assert result.num_groups == 8
    found = result.expectation(lambda x: x)
    assert found.method == "smc_groups" and found.num_batches == 8 and found.note is None
    streamed = result.observables["x"]
    assert streamed.method == "smc_groups" and streamed.num_batches == 8
    np.testing.assert_allclose(found.mean, streamed.mean, rtol=1e-5)
    np.testing.assert_allclose(found.mcse, streamed.mcse, rtol=1e-4)
    groups = np.asarray(result.positions, np.float64).mean(axis=1).reshape(8, 32, 2).mean(axis=1)
    weights = estimates.group_weights(result.group_log_evidence)  # each group weighted by its evidence estimate
    mean = weights @ groups
    np.testing.assert_allclose(found.mean, mean, rtol=1e-6)
    np.testing.assert_allclose(found.mcse, np.sqrt(8 / 7 * (weights**2) @ (groups - mean) ** 2), rtol=1e-6)
    assert np.all(np.abs(found.mean - 0.5) < 4 * found.mcse)
    summary = result.summary()
    assert not summary.rhat_is_criterion and "r_hat*" in str(summary) and "8 independent particle groups" in str(
        summary)
    np.testing.assert_allclose(summary.mcse_mean, found.mcse, rtol=1e-6)


def test_few_smc_groups_say_so():
    values = np.random.default_rng(6).normal(size=(64, 5, 1))
    found = estimates.estimate(values, num_groups=2)
    assert found.num_batches == 2 and "fewer than 8" in found.note
    particles = estimates.particle_observed(values[:, 0], 4)
    assert "4 independent SMC particle groups" in particles.note
    assert estimates.particle_observed(values[:, 0], 8).note is None
    with pytest.raises(ValueError, match="num_groups equal groups"):
        estimates.estimate(values, num_groups=5, method="smc_groups")
    with pytest.warns(estimates.MCSEWarning, match="2 independent SMC particle groups, fewer than 8"):
        from_samples = _samples(values, num_groups=2, chains_start_at_target=True).expectation(lambda x: x)
    assert from_samples.method == "smc_groups" and not from_samples.reliable


def test_the_group_error_is_one_function_for_observables_and_log_evidence():
    """estimates.group_standard_error is the sd of the group means over √G in NumPy and in jax.numpy (SMC's stages
    use it compiled), and log_mean_and_se is the delta method on it: log mean Ẑ_g, sd(Ẑ_g/mean Ẑ)/√G."""
    means = np.random.default_rng(8).normal(size=(6, 3))
    expected = means.std(axis=0, ddof=1) / np.sqrt(6)
    np.testing.assert_allclose(estimates.group_standard_error(means), expected, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(estimates.group_standard_error(jnp.asarray(means), jnp)), expected, rtol=1e-5)
    assert np.isnan(estimates.group_standard_error(means[:1])).all()
    log_z = np.log(np.array([0.5, 1.0, 2.0, 1.5]))
    log_mean, se = jax.jit(estimates.log_mean_and_se)(jnp.asarray(log_z, jnp.float32))
    assert float(log_mean) == pytest.approx(np.log(1.25), rel=1e-6)
    assert float(se) == pytest.approx(np.std(np.exp(log_z) / 1.25, ddof=1) / 2, rel=1e-5)
    assert np.isnan(float(estimates.log_mean_and_se(jnp.zeros(1))[1]))


def _covered(errors, mcse):
    return int(np.sum(np.abs(errors) <= 1.959964 * mcse))


def test_mcmc_coverage_of_nominal_95_percent_intervals():
    """40 independent MALA runs of 4 chains (one call with 160 independent chains, split): 95% intervals of E[x0]
    and of P(x0 > 2) cover in at least 33 of 40 (Binomial(40, 0.95) falls below that with probability 0.006;
    an error too small by 2× covers ~68%, i.e. ~27 of 40); the errors' spread matches the MCSE."""
    runs, chains = 40, 4
    start = np.random.default_rng(7).normal(size=(runs * chains, 2)).astype(np.float32)
    samples = jaxprobe.sample(1, lambda x: -0.5 * jnp.sum(x**2), start, num_samples=300, num_warmup=200,
                              progress=False, convergence="ignore")
    values = estimates.evaluate(lambda x: jnp.stack([x[0], (x[0] > 2.0).astype(x.dtype)]), samples.positions)
    found = [estimates.estimate(values[r * chains:(r + 1) * chains]) for r in range(runs)]
    means, mcse = np.stack([f.mean for f in found]), np.stack([f.mcse for f in found])
    truth = np.array([0.0, norm.sf(2.0)])
    assert binom.cdf(32, runs, 0.95) < 0.01
    for q in range(2):
        assert _covered(means[:, q] - truth[q], mcse[:, q]) >= 33, q
        assert 0.6 < np.std((means[:, q] - truth[q]) / mcse[:, q]) < 1.5, q


@pytest.mark.slow
def test_smc_coverage_of_mode_shares_and_log_evidence():
    """30 seeds of the two-bumps question (shares 0.8 / 0.2, log Z closed form) under sampler="smc", batched as
    one sweep: the 95% intervals of the share x0 > 0 (chains after SMC, 16 groups) and of log Z cover in at
    least 24 of 30 (t with 15 dof covers 93%; P(Binomial(30, 0.93) < 24) < 0.01)."""
    from jaxprobe.bench.smc import BUMP_LOG_Z, bumps_loss

    runs = 30
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = jaxprobe.sweep(0, Probe(bumps_loss, "two_bumps"), {"seed": list(range(runs))}, temperature=1.0,
                                prior=jaxprobe.priors.StandardNormal(), dim=2, num_chains=2048, num_samples=4,
                                num_warmup=4, sampler="smc", sampler_options={"num_groups": 16},
                                observables={"share": lambda x: (x[0] > 0).astype(x.dtype)}, progress=False,
                                convergence="ignore")
    share = [s.observables["share"] for s in result.samples]
    assert all(s.method == "smc_groups" and s.num_batches == 16 for s in share)
    assert binom.cdf(23, runs, 0.93) < 0.01
    assert _covered(np.array([float(s.mean) for s in share]) - 0.8, np.array([float(s.mcse) for s in share])) >= 24
    log_z = np.array([s.log_evidence for s in result.samples]) - BUMP_LOG_Z
    assert _covered(log_z, np.array([s.log_evidence_se for s in result.samples])) >= 24
