"""The verdict on a run: R̂ / ESS thresholds, frozen chains, divergences, drift, policies, files."""

import dataclasses
import json
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprobe
from jaxprobe.engine import verdict as verdict_module
from jaxprobe.engine.samples import Samples
from jaxprobe.engine.verdict import (
    POLICIES,
    ConvergenceError,
    ConvergenceWarning,
    Verdict,
    assess,
    check_policy,
    default_thresholds,
    report,
)


def make_samples(positions, logdensity=None, acceptance_rate=None, num_divergent=None, num_nonfinite=None,
                 **extra):
    """A Samples around NumPy draws (chain, draw, ...) with a Gaussian log density by default."""
    leaves = jax.tree_util.tree_leaves(positions)
    num_chains, num_draws = leaves[0].shape[:2]
    if logdensity is None:
        logdensity = sum(-0.5 * np.sum(leaf.reshape(num_chains, num_draws, -1) ** 2, axis=-1) for leaf in leaves)
    zeros = np.zeros(num_chains, np.int64)
    return Samples(
        positions=positions, logdensity=np.asarray(logdensity),
        acceptance_rate=np.full(num_chains, 0.6) if acceptance_rate is None else np.asarray(acceptance_rate),
        step_size=np.full(num_chains, 0.5), num_divergent=zeros if num_divergent is None else num_divergent,
        num_nonfinite=zeros if num_nonfinite is None else num_nonfinite, num_gradient_evaluations=zeros + 100,
        sampler="mala", num_warmup=100, thin=1, **extra)


def two_modes(num_chains, num_draws, dim=2, fraction=0.25, seed=0):
    """Chains stuck in one of two modes at ±4: ``fraction`` of them in the right one, iid N(mode, 1) draws."""
    rng = np.random.default_rng(seed)
    right = np.arange(num_chains) < int(fraction * num_chains)
    centers = np.where(right, 4.0, -4.0)[:, None, None]
    return centers + rng.standard_normal((num_chains, num_draws, dim))


def std_normal(x):
    return -0.5 * jnp.sum(x**2)


def flat(x):
    return 0.0 * x.sum()


# ---------------------------------------------------------------- thresholds


def test_default_thresholds_follow_stan_for_few_chains_and_relax_for_many():
    assert default_thresholds(1) == (1.01, 100.0)
    assert default_thresholds(4) == (1.01, 400.0)  # Stan: R-hat 1.01, ESS 100 per chain
    rhat_16, ess_16 = default_thresholds(16)
    assert ess_16 == 400.0 and rhat_16 == pytest.approx(np.sqrt(1 + 32 / 400))
    assert default_thresholds(128) == (1.1, 400.0)  # clipped at Gelman et al.'s 1.1
    assert default_thresholds(8, min_ess=1600)[0] == 1.01
    verdict = assess(make_samples(np.random.default_rng(0).standard_normal((8, 100, 2))), rhat_threshold=1.2,
                     min_ess=50)
    assert (verdict.rhat_threshold, verdict.min_ess_threshold) == (1.2, 50.0)
    with pytest.raises(ValueError, match="rhat_threshold must be >= 1"):
        assess(make_samples(np.zeros((2, 8, 1))), rhat_threshold=0.9)
    with pytest.raises(ValueError, match="min_ess must be >= 0"):
        assess(make_samples(np.zeros((2, 8, 1))), min_ess=-1)
    with pytest.raises(TypeError, match="rhat_threshold must be a real number, got the string"):
        assess(make_samples(np.zeros((2, 8, 1))), rhat_threshold="1.2")  # was read as 1.2


# ---------------------------------------------------------------- (a) converged runs


@pytest.mark.parametrize("shape", [(64, 300, 3), (4, 1000, 5), (128, 300, 10), (16, 100, 65)])
def test_iid_gaussian_draws_converge_without_warning(shape):
    samples = make_samples(np.random.default_rng(1).standard_normal(shape))
    verdict = assess(samples)
    assert verdict.converged, str(verdict)
    assert verdict.problems == () and verdict.checks_rhat and not verdict.drifting
    assert verdict.max_rhat <= verdict.rhat_threshold and verdict.min_ess_bulk >= verdict.min_ess_threshold
    assert verdict.num_coordinates_checked == min(shape[2], verdict_module.DEFAULT_MAX_COORDINATES)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert report(verdict, "warn") is verdict
    assert str(verdict).startswith("Verdict: converged")


def test_stationary_autocorrelated_chains_never_drift():
    """AR(1) chains started at stationarity, from nearly iid to far slower than the run: never drifting."""
    rng = np.random.default_rng(2)
    for rho in (0.0, 0.5, 0.9, 0.99, 0.999):
        for num_chains, num_draws in ((1, 16), (4, 64), (64, 300)):
            x = np.empty((num_chains, num_draws, 4))
            x[:, 0] = rng.standard_normal((num_chains, 4))
            for t in range(1, num_draws):
                x[:, t] = rho * x[:, t - 1] + np.sqrt(1 - rho**2) * rng.standard_normal((num_chains, 4))
            assert not assess(make_samples(x)).drifting, (rho, num_chains, num_draws)


# ---------------------------------------------------------------- (b) modes, and chains that start at the target


@pytest.mark.parametrize("fraction", [0.1, 0.25])
def test_chains_stuck_in_two_modes_fail_rhat_and_suggest_smc(fraction):
    verdict = assess(make_samples(two_modes(64, 200, fraction=fraction)))
    assert not verdict.converged and verdict.checks_rhat
    assert verdict.max_rhat > 1.2 > verdict.rhat_threshold
    (problem,) = [p for p in verdict.problems if "R-hat" in p]
    assert "sampler='smc'" in problem and "multimodal" in problem
    assert not verdict.drifting


def test_chains_starting_at_the_target_are_not_held_to_rhat():
    draws = two_modes(512, 40, fraction=0.25, seed=3)
    mcmc = assess(make_samples(draws))
    assert not mcmc.converged and any("R-hat" in p for p in mcmc.problems)
    smc = assess(make_samples(draws, chains_start_at_target=True))
    assert smc.converged, str(smc)
    assert not smc.checks_rhat and smc.max_rhat == pytest.approx(mcmc.max_rhat) and smc.max_rhat > 1.3
    assert any("sequential Monte Carlo" in note for note in smc.notes)
    assert "not a criterion" in str(smc)


def test_fewer_than_four_draws_skip_rhat_and_ess_and_say_so():
    verdict = assess(make_samples(np.random.default_rng(4).standard_normal((256, 3, 2))))
    assert verdict.converged and not verdict.checks_rhat
    assert verdict.max_rhat is None and verdict.min_ess_bulk is None
    assert any("not checked" in note and "3 draw(s)" in note for note in verdict.notes)


# ---------------------------------------------------------------- (c) frozen chains, constant coordinates


def test_frozen_chains_are_reported():
    draws = np.random.default_rng(5).standard_normal((32, 200, 3))
    draws[:3] = draws[:3, :1]  # three chains never leave their first position
    acceptance = np.full(32, 0.55)
    acceptance[:3] = 0.0
    verdict = assess(make_samples(draws, acceptance_rate=acceptance))
    assert verdict.num_frozen_chains == 3 and not verdict.converged
    assert any("3 of 32 chain(s) never moved" in p and "support" in p for p in verdict.problems)


def test_constant_coordinates_are_left_out():
    draws = np.random.default_rng(6).standard_normal((32, 200, 4))
    draws[..., 2] = 7.0  # a fixed feature
    verdict = assess(make_samples(draws))
    assert verdict.converged, str(verdict)
    assert any("x[2]" in note and "never changed" in note for note in verdict.notes)


# ---------------------------------------------------------------- (d) drift


@pytest.fixture(scope="module")
def flat_fixed_run():
    init = np.asarray(jax.random.normal(jax.random.key(0), (16, 3)))
    return jaxprobe.sample(0, flat, init, sampler="mala", step_size=0.5, num_warmup=0, num_samples=500,
                           progress=False, convergence="ignore")


def test_flat_target_with_a_fixed_step_size_drifts(flat_fixed_run):
    """MALA on an improper flat log density is a random walk (acceptance 1): |x| only reaches tens in 500
    steps, so it is the displacement test (not the 1e6 bound) that finds it."""
    samples = flat_fixed_run
    assert np.all(samples.acceptance_rate == 1.0)
    verdict = assess(samples)
    assert verdict.drifting and not verdict.converged
    assert verdict.max_abs_position < verdict_module.RUNAWAY_BOUND
    (problem,) = [p for p in verdict.problems if p.startswith("chains drift")]
    assert "flat log density" in problem and "add a prior or Box constraints" in problem
    assert any("R-hat" in p and "drift above" in p for p in verdict.problems)  # no smc advice for a drift
    assert samples.verdict.drifting and not samples.verdict.converged  # the verdict sample() attached


def test_flat_target_with_an_adapted_step_size_runs_away():
    init = np.asarray(jax.random.normal(jax.random.key(1), (16, 2)))
    samples = jaxprobe.sample(1, flat, init, sampler="mala", num_warmup=100, num_samples=100, progress=False,
                              convergence="ignore")
    verdict = assess(samples)
    assert verdict.drifting and verdict.max_abs_position > verdict_module.RUNAWAY_BOUND
    assert any(p.startswith("chains drift without bound") and "improper" in p for p in verdict.problems)


def test_real_gaussian_run_converges_and_does_not_drift():
    init = 2.0 * np.asarray(jax.random.normal(jax.random.key(2), (32, 3)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        samples = jaxprobe.sample(2, std_normal, init, sampler="mala", num_warmup=200, num_samples=300,
                                  progress=False)
    verdict = assess(samples)
    assert verdict.converged and samples.verdict.converged, str(verdict)
    assert not verdict.drifting
    assert samples.diagnostics().to_dict() == verdict.to_dict()


def test_numpy_random_walk_with_constant_log_density_drifts_and_iid_does_not():
    rng = np.random.default_rng(7)
    walk = np.cumsum(rng.standard_normal((8, 400, 2)), axis=1)
    assert assess(make_samples(walk, logdensity=np.zeros((8, 400)))).drifting
    assert not assess(make_samples(rng.standard_normal((8, 400, 2)), logdensity=np.zeros((8, 400)))).drifting


# ---------------------------------------------------------------- (e) divergences, non-finite values


def test_divergences_are_a_problem():
    draws = np.random.default_rng(8).standard_normal((16, 200, 2))
    divergent = np.zeros(16, np.int64)
    divergent[[2, 5]] = [3, 1]
    verdict = assess(make_samples(draws, num_divergent=divergent))
    assert verdict.num_divergent == 4 and not verdict.converged
    assert any("4 divergent transition(s) in 2 chain(s)" in p and "target_acceptance_rate" in p
               for p in verdict.problems)


def test_nonfinite_proposals_above_one_percent_are_a_problem():
    draws = np.random.default_rng(9).standard_normal((16, 200, 2))  # 3200 transitions
    few = assess(make_samples(draws, num_nonfinite=np.full(16, 1)))  # 0.5 %
    assert few.converged and few.num_nonfinite == 16 and few.nonfinite_fraction == pytest.approx(0.005)
    many = assess(make_samples(draws, num_nonfinite=np.full(16, 4)))  # 2 %
    assert not many.converged and any("2.0% of proposals" in p for p in many.problems)


def test_nonfinite_draws_are_a_problem():
    draws = np.random.default_rng(10).standard_normal((16, 200, 2))
    draws[3, 50, 1] = np.nan
    verdict = assess(make_samples(draws))
    assert not verdict.converged and any("1 kept draw(s) hold NaN or inf" in p for p in verdict.problems)


# ---------------------------------------------------------------- many coordinates, pytrees


def test_coordinate_cap_keeps_the_worst_coordinate_and_names_pytree_leaves():
    rng = np.random.default_rng(11)
    image = rng.standard_normal((32, 100, 3, 16, 16)).astype(np.float32)
    image[:8, :, 2, 9, 4] += 6.0  # one pixel where a quarter of the chains sit elsewhere
    positions = {"image": image, "z": rng.standard_normal((32, 100, 2)).astype(np.float32)}
    verdict = assess(make_samples(positions), max_coordinates=16)
    assert verdict.num_coordinates_checked == 16
    assert verdict.worst_rhat_coordinate == "['image'][2,9,4]" and not verdict.converged
    assert any("16 of 770 position coordinates" in note for note in verdict.notes)
    with pytest.raises(ValueError, match="max_coordinates"):
        assess(make_samples(positions), max_coordinates=0)
    with pytest.raises(TypeError, match="max_coordinates must be an int, got float"):
        assess(make_samples(positions), max_coordinates=16.0)


# ---------------------------------------------------------------- (f) policies


def failing_verdict():
    return assess(make_samples(two_modes(32, 100)))


def test_warn_policy_issues_one_warning_listing_every_problem_at_the_callers_line():
    verdict = failing_verdict()
    with pytest.warns(ConvergenceWarning, match="did not converge") as record:
        report(verdict, "warn", stacklevel=1)
    assert len(record) == 1 and record[0].filename == __file__
    message = str(record[0].message)
    assert all(problem in message for problem in verdict.problems) and "convergence='ignore'" in message
    assert issubclass(ConvergenceWarning, UserWarning)


def test_error_policy_raises_and_ignore_is_silent():
    verdict = failing_verdict()
    with pytest.raises(ConvergenceError, match="sampler='smc'") as caught:
        report(verdict, "error")
    assert isinstance(caught.value, RuntimeError) and caught.value.verdict is verdict
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report(verdict, "ignore")
        report(assess(make_samples(np.random.default_rng(12).standard_normal((16, 200, 2)))), "error")


@pytest.mark.parametrize("policy", ["raise", "", None, "WARN", 1])
def test_bad_policy_names_the_convergence_keyword(policy):
    assert POLICIES == ("warn", "error", "ignore")
    with pytest.raises(ValueError, match="convergence must be one of 'warn', 'error', 'ignore'"):
        report(failing_verdict(), policy)
    with pytest.raises(ValueError, match="convergence"):
        check_policy(policy)
    assert check_policy("ignore") == "ignore"


# ---------------------------------------------------------------- (g) dicts and files


def test_verdict_dict_is_strict_json_and_round_trips():
    verdict = dataclasses.replace(failing_verdict(), max_rhat=float("inf"), min_ess_bulk=None)
    text = json.dumps(verdict.to_dict(), allow_nan=False)
    assert Verdict.from_dict(json.loads(text)) == verdict
    assert Verdict.from_dict({**verdict.to_dict(), "a_future_field": 1}) == verdict


def test_save_load_round_trips_every_new_field(tmp_path):
    rng = np.random.default_rng(13)
    base = make_samples({"a": rng.standard_normal((8, 20, 2)).astype(np.float32),
                         "b": [rng.standard_normal((8, 20)).astype(np.float32)]})
    path = {"temperature": np.array([0.0, 0.1, 0.45, 1.0]), "log_evidence": np.array([0.0, -1.5, -3.25, -4.0]),
            "log_evidence_se": np.array([0.0, 0.01, 0.02, 0.03])}
    samples = dataclasses.replace(base, verdict=assess(base), chains_start_at_target=True, log_evidence=-4.0123456789,
                                  log_evidence_se=float("nan"), evidence_path=path)
    samples.save(tmp_path / "run.npz")
    loaded = Samples.load(tmp_path / "run.npz")
    assert loaded.verdict == samples.verdict and isinstance(loaded.verdict, Verdict)
    assert loaded.chains_start_at_target is True
    assert loaded.log_evidence == -4.0123456789 and np.isnan(loaded.log_evidence_se)
    assert list(loaded.evidence_path) == list(path)
    for key, values in path.items():
        np.testing.assert_array_equal(loaded.evidence_path[key], values)
        assert loaded.evidence_path[key].dtype == values.dtype
    np.testing.assert_array_equal(loaded.positions["b"][0], samples.positions["b"][0])
    with np.load(tmp_path / "run.npz", allow_pickle=False) as data:
        assert json.loads(str(data["header"]))["format_version"] == 3
    # Defaults survive too.
    base.save(tmp_path / "plain.npz")
    plain = Samples.load(tmp_path / "plain.npz")
    assert (plain.verdict, plain.chains_start_at_target, plain.log_evidence, plain.log_evidence_se,
            plain.evidence_path) == (None, False, None, None, None)


def test_files_of_format_version_1_still_load(tmp_path):
    """A file as version 1 wrote it: the old header keys only."""
    rng = np.random.default_rng(14)
    header = {"format_version": 1, "structure": {"leaf": 0}, "sampler": "hmc", "num_warmup": 50, "thin": 2,
              "has_inverse_mass_matrix": True}
    arrays = {"position_0": rng.standard_normal((4, 10, 3)), "logdensity": rng.standard_normal((4, 10)),
              "acceptance_rate": np.full(4, 0.8), "step_size": np.full(4, 0.3),
              "num_divergent": np.zeros(4, np.int64), "num_nonfinite": np.zeros(4, np.int64),
              "num_gradient_evaluations": np.full(4, 200, np.int64), "inverse_mass_matrix": np.ones((4, 3)),
              "header": np.asarray(json.dumps(header))}
    np.savez(tmp_path / "v1.npz", **arrays)
    loaded = Samples.load(tmp_path / "v1.npz")
    np.testing.assert_array_equal(loaded.positions, arrays["position_0"])
    assert (loaded.sampler, loaded.num_warmup, loaded.thin) == ("hmc", 50, 2)
    np.testing.assert_array_equal(loaded.inverse_mass_matrix, arrays["inverse_mass_matrix"])
    assert (loaded.verdict, loaded.chains_start_at_target, loaded.log_evidence, loaded.evidence_path) == (
        None, False, None, None)
    header["format_version"] = 99
    np.savez(tmp_path / "v99.npz", **{**arrays, "header": np.asarray(json.dumps(header))})
    with pytest.raises(ValueError, match="unsupported jaxprobe samples format 99"):
        Samples.load(tmp_path / "v99.npz")


# ---------------------------------------------------------------- (h) error bars from too few SMC groups


def test_too_few_smc_groups_make_the_verdict_warn_about_its_error_bars():
    """Draws that converged, started by an SMC run of 2 groups: converged, yet the verdict records the groups and
    says why its errors cannot be trusted (t with 1 dof covers 70%), issued as an MCSEWarning (not under
    'ignore'; before the error of 'error'); 8 groups or no SMC: nothing."""
    from jaxprobe.engine.estimates import MCSEWarning

    draws = np.random.default_rng(21).standard_normal((64, 200, 2))
    verdict = assess(make_samples(draws, chains_start_at_target=True, num_groups=2))
    assert verdict.converged and verdict.num_groups == 2
    assert "2 independent SMC particle groups" in verdict.mcse_warning and "70%" in verdict.mcse_warning
    assert "sampler_options['num_groups']" in verdict.mcse_warning and "warning: " in str(verdict)
    with pytest.warns(MCSEWarning, match="2 independent SMC particle groups") as record:
        report(verdict, "warn", stacklevel=1)
    assert len(record) == 1 and record[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report(verdict, "ignore")
        smc_fine = assess(make_samples(draws, chains_start_at_target=True, num_groups=8))
        for fine in (smc_fine, assess(make_samples(draws))):
            assert fine.mcse_warning is None and fine.num_groups in (8, None)
            report(fine, "warn")
    assert Verdict.from_dict(json.loads(json.dumps(verdict.to_dict()))) == verdict
    failing = dataclasses.replace(failing_verdict(), mcse_warning=verdict.mcse_warning)
    with pytest.warns(MCSEWarning), pytest.raises(ConvergenceError):
        report(failing, "error")
    assert "no error can be estimated" in verdict_module.groups_warning(1)
    assert "86%" in verdict_module.groups_warning(4) and verdict_module.groups_warning(16) is None


@pytest.mark.slow
def test_sample_and_generate_with_two_smc_groups_warn_and_say_so():
    """Through sample (with a reference) and generate, sampler="smc" with num_groups=2: an MCSEWarning from the
    verdict (which holds num_groups and mcse_warning), and Samples.expectation warns too, its note saying why."""
    from jaxprobe.engine.estimates import MCSEWarning
    from jaxprobe.probes import Probe

    options = dict(num_samples=8, num_warmup=0, step_size=0.5, sampler="smc", sampler_options={"num_groups": 2},
                   progress=False)
    reference = jaxprobe.priors.StandardNormal(event_shape=(2,))
    with pytest.warns(MCSEWarning, match="2 independent SMC particle groups"):
        sampled = jaxprobe.sample(0, lambda x: -0.5 * jnp.sum(x**2) - 0.5 * jnp.sum((x - 1.0) ** 2),
                                  np.zeros((64, 2), np.float32), reference=reference, **options)
    with pytest.warns(MCSEWarning, match="2 independent SMC particle groups"):
        generated = jaxprobe.generate(0, Probe(lambda x: 0.5 * jnp.sum((x - 1.0) ** 2), "half_way"), temperature=1.0,
                                      prior=jaxprobe.priors.StandardNormal(), dim=2, num_chains=64, **options)
    for result in (sampled, generated):
        assert result.num_groups == 2 and result.verdict.num_groups == 2 and "70%" in result.verdict.mcse_warning
        with pytest.warns(MCSEWarning, match="fewer than 8"):
            estimate = result.expectation(lambda x: x[0])
        assert not estimate.reliable and estimate.num_batches == 2
        assert abs(float(estimate.mean) - 0.5) < 0.3  # the target's mean, E[x0] = 1/2 (the error bar is the point)
