"""The verdict knows how the chains started (jaxprobe issue 25): starting points that do not spread over the
target leave R̂ blind to modes no chain visited, and a sequential Monte Carlo path cut short by ``max_stages``
is named as the cause, never answered with "use sampler='smc'".

The false-alarm rate of the starts' check is stated in :mod:`jaxprobe.engine.verdict` ("Starting points"): at
most ``STARTS_FALSE_ALARM`` = 1 % of runs whose C starting points are draws of the target itself, and less
for starts wider than the target, as the prior's draws usually are. Both are tested against a binomial
tolerance below.
"""

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprobe
from jaxprobe.engine import streaming
from jaxprobe.engine import verdict as verdict_module
from jaxprobe.engine.samples import Samples
from jaxprobe.engine.verdict import (STARTS_FALSE_ALARM, CoordinateNames, Tempering, Verdict,
                                     start_coverage_threshold, start_range, verdict_from_statistics)
from jaxprobe.probes import Probe


def two_equal_modes(x):
    """Two equal unit-variance modes at ±(4, 4) in 2-D: each holds half of the mass."""
    return jnp.logaddexp(-0.5 * jnp.sum((x - 4.0) ** 2), -0.5 * jnp.sum((x + 4.0) ** 2))


def std_normal(x):
    return -0.5 * jnp.sum(x**2)


def binomial_upper(num_runs: int, rate: float, tail: float = 1e-4) -> int:
    """The largest count of ``num_runs`` independent runs with probability ``rate`` each that is not beyond
    the upper ``tail`` of the binomial distribution: more false alarms than this means a higher rate."""
    total = 0.0
    for count in range(num_runs + 1):
        total += math.comb(num_runs, count) * rate**count * (1 - rate) ** (num_runs - count)
        if 1.0 - total < tail:
            return count
    return num_runs


def binomial_lower(num_runs: int, rate: float, tail: float = 1e-4) -> int:
    """The smallest count not in the lower ``tail``: fewer false alarms than this means a lower rate."""
    total = 0.0
    for count in range(num_runs + 1):
        total += math.comb(num_runs, count) * rate**count * (1 - rate) ** (num_runs - count)
        if total >= tail:
            return count
    return num_runs


# ---------------------------------------------------------------- the threshold and its false-alarm rate


def test_threshold_is_one_for_one_chain_and_grows_with_the_chains_up_to_the_floor():
    assert start_coverage_threshold(1, 2, 4096) == 1.0
    shares = [start_coverage_threshold(chains, 2, 4096) for chains in (2, 3, 4, 8, 16, 64, 4096)]
    assert shares == sorted(shares) and shares[-1] == 0.5 and 0.0 < shares[0] < 0.01
    # Beta(C − 1, 2) for many draws: P(share <= u) = u^(C-1) (C - (C-1) u) = 1 % / D at the threshold.
    u = start_coverage_threshold(4, 2, 4096)
    assert u**3 * (4 - 3 * u) == pytest.approx(STARTS_FALSE_ALARM / 2, rel=0.05)
    with pytest.raises(ValueError, match="num_chains must be >= 1"):
        start_coverage_threshold(0, 2, 10)
    with pytest.raises(TypeError, match="num_values must be an int"):
        start_coverage_threshold(4, 2, 10.0)


def _judge_starts(draws, starts):
    """The verdict's check of starts ``(C, D)`` against draws ``(C, N, D)``, on the statistics a run computes."""
    num_chains, num_draws, dim = draws.shape
    monitor = streaming.Monitor(num_chains, dim, num_draws)
    statistics = streaming.finalize(streaming.stats_of_draws(draws, -np.sum(draws**2, axis=2), monitor), monitor,
                                    xp=np)
    return verdict_module._starts_check(statistics, CoordinateNames([""], [(dim,)]), monitor, start_range(starts))


@pytest.mark.parametrize("num_chains", [3, 8])
def test_starts_drawn_from_the_target_are_rarely_flagged_and_narrow_ones_are(num_chains):
    """Starts and draws drawn independently from one distribution (a Student t: the bound holds whatever the
    target) are flagged in at most STARTS_FALSE_ALARM of the runs (within a binomial tolerance); starts 20
    times narrower are flagged in nearly every run once there are enough chains to tell (8)."""
    rng = np.random.default_rng(num_chains)
    num_runs, num_draws, dim = 1500, 40, 2
    flagged = narrow_flagged = 0
    for run in range(num_runs):
        values = rng.standard_t(3, size=(num_chains, num_draws + 1, dim))
        draws, starts = values[:, 1:], values[:, 0]
        flagged += not _judge_starts(draws, starts).overdispersed
        if run < 200:
            narrow_flagged += not _judge_starts(draws, 0.05 * starts).overdispersed
    assert flagged <= binomial_upper(num_runs, STARTS_FALSE_ALARM), flagged
    if num_chains == 8:
        assert narrow_flagged >= 190, narrow_flagged


def test_the_verdict_of_a_run_judges_its_starts_and_names_the_problem():
    """verdict_from_statistics, as both front ends call it: identical starts, starts in a small region, and
    one chain each give their own problem; wide starts (also off to one side) none; after SMC (chains at
    draws of the target) and without starts no check is made."""
    rng = np.random.default_rng(0)
    draws = rng.standard_normal((8, 200, 2))
    monitor = streaming.Monitor(8, 2, 200)
    names = CoordinateNames([""], [(2,)])
    counts = dict(acceptance_rate=np.full(8, 0.5), num_divergent=np.zeros(8), num_nonfinite=np.zeros(8), thin=1)
    statistics = streaming.finalize(streaming.stats_of_draws(draws, -0.5 * np.sum(draws**2, axis=2), monitor),
                                    monitor, xp=np)

    def judged(starts, **options):
        return verdict_from_statistics(statistics, monitor, names, start_range=start_range(starts),
                                       **{"chains_start_at_target": False, **counts, **options})

    wide = judged(3.0 * rng.standard_normal((8, 2)))
    assert wide.converged and wide.starts_overdispersed and wide.start_coverage > 0.9
    aside = judged(10.0 + 3.0 * rng.standard_normal((8, 2)))  # wider than the target, all beside it
    assert aside.converged and aside.starts_overdispersed
    pinned = judged(np.zeros((8, 2)))
    assert not pinned.converged and pinned.start_coverage_threshold == 1.0
    assert "every chain starts at the same value of x[0]" in pinned.problems[-1]
    narrow = judged(0.05 * rng.standard_normal((8, 2)))
    assert narrow.starts_overdispersed is False and narrow.start_coverage < narrow.start_coverage_threshold
    assert f"can hold at most {narrow.start_coverage:.1%} of the draws" in narrow.problems[-1]
    assert "cannot vouch for modes no chain visited" in narrow.problems[-1]
    after_smc = judged(np.zeros((8, 2)), chains_start_at_target=True, tempering=Tempering(1.0, 4))
    assert after_smc.converged and after_smc.starts_overdispersed is None and after_smc.tempering_finished
    unknown = verdict_from_statistics(statistics, monitor, names, chains_start_at_target=False, **counts)
    assert unknown.converged and unknown.starts_overdispersed is None
    assert any("starting points are unknown" in note for note in unknown.notes)


def test_an_unfinished_tempering_path_is_the_first_problem_and_rhat_points_back_at_it():
    """SMC stopped by max_stages: the λ reached and max_stages are named first; R̂'s message (the particles
    keep the intermediate distribution's proportions of the modes) never says "use sampler='smc'"."""
    rng = np.random.default_rng(1)
    draws = rng.standard_normal((16, 100, 2)) + np.where(np.arange(16) < 8, 3.0, -3.0)[:, None, None]
    monitor = streaming.Monitor(16, 2, 100)
    statistics = streaming.finalize(streaming.stats_of_draws(draws, -0.5 * np.sum(draws**2, axis=2), monitor),
                                    monitor, xp=np)
    verdict = verdict_from_statistics(statistics, monitor, CoordinateNames([""], [(2,)]),
                                      acceptance_rate=np.full(16, 0.5), num_divergent=np.zeros(16),
                                      num_nonfinite=np.zeros(16), thin=1, chains_start_at_target=False,
                                      tempering=Tempering(0.18, 1))
    assert verdict.tempering_finished is False and verdict.tempering_lambda == pytest.approx(0.18)
    assert verdict.problems[0].startswith("sequential Monte Carlo stopped at λ = 0.18 < 1 after max_stages=1")
    assert "sampler_options['max_stages']" in verdict.problems[0]
    assert any("unfinished tempering path above" in problem for problem in verdict.problems[1:])  # R̂
    assert not any("sampler='smc'" in problem for problem in verdict.problems)
    assert Tempering.of_path(np.array([0.2, 0.6, 1.0])) == (1.0, 3) and Tempering.of_path(np.zeros(0)) is None


# ---------------------------------------------------------------- the case through sample()


def _bimodal_from_one_mode(num_chains, num_samples):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        samples = jaxprobe.sample(0, two_equal_modes, np.full((num_chains, 2), 4.0, np.float32),
                                  num_samples=num_samples, num_warmup=num_samples, progress=False)
    return samples, [str(w.message) for w in caught if issubclass(w.category, jaxprobe.ConvergenceWarning)]


def _assert_flags_the_starts(samples, messages):
    verdict = samples.verdict
    assert np.mean(samples.positions[..., 0] > 0) > 0.99  # no chain found the other mode (truth: 1/2)
    assert verdict.starts_overdispersed is False and not verdict.converged
    assert len(messages) == 1 and "cannot vouch for modes" in messages[0]
    assert "sampler='smc'" in messages[0] and "prior's draws" in messages[0]
    again = samples.diagnostics()  # recomputed from the draws: the same finding
    assert again.problems == verdict.problems and again.starts_overdispersed is False


def test_sixty_four_chains_started_in_one_mode_warn_although_rhat_agrees():
    samples, messages = _bimodal_from_one_mode(64, 200)
    assert samples.verdict.max_rhat < samples.verdict.rhat_threshold  # R̂ alone saw nothing wrong
    _assert_flags_the_starts(samples, messages)
    assert "every chain starts at the same value" in messages[0]


@pytest.mark.slow  # ~15 s: three more compiled runs
@pytest.mark.parametrize("num_chains,num_samples", [(1, 200), (4, 200), (4096, 20)])
def test_chains_started_in_one_mode_warn_at_every_chain_count(num_chains, num_samples):
    samples, messages = _bimodal_from_one_mode(num_chains, num_samples)
    _assert_flags_the_starts(samples, messages)
    if num_chains == 1:
        assert "one chain cannot show" in messages[0]


def test_starts_in_one_small_region_warn_and_name_the_share_they_hold():
    starts = 4.0 + 0.1 * np.random.default_rng(0).standard_normal((64, 2)).astype(np.float32)
    samples = jaxprobe.sample(0, two_equal_modes, starts, num_samples=200, num_warmup=200, progress=False,
                              convergence="ignore")
    verdict = samples.verdict
    assert verdict.starts_overdispersed is False
    assert verdict.start_coverage < verdict.start_coverage_threshold == 0.5
    assert any(f"can hold at most {verdict.start_coverage:.1%} of the draws" in problem
               for problem in verdict.problems)


def test_overdispersed_starts_on_a_unimodal_target_do_not_warn():
    """Starts ~ N(0, 3²) on a standard normal: R = 24 independent runs (one compiled program). The starts'
    check may flag at most 1 % of them (far fewer for starts this wide): at most binomial_upper(24, 0.01) = 3
    runs, and no more warnings name the starts. (R̂ is a separate criterion: at 4 chains x 400 draws it
    crosses Stan's 1.01 by chance in about 1 run of 5.)"""
    rng = np.random.default_rng(1)
    num_runs, flagged, warned = 24, 0, 0
    for run in range(num_runs):
        starts = 3.0 * rng.standard_normal((4, 2)).astype(np.float32)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            samples = jaxprobe.sample(run, std_normal, starts, num_samples=400, num_warmup=200, progress=False)
        flagged += not samples.verdict.starts_overdispersed
        warned += any("starting points" in str(w.message) or "cannot vouch" in str(w.message) for w in caught)
    assert flagged <= binomial_upper(num_runs, STARTS_FALSE_ALARM), flagged
    assert warned <= binomial_upper(num_runs, STARTS_FALSE_ALARM), warned


# ---------------------------------------------------------------- generate and sweep


def test_generate_from_prior_draws_passes_and_from_one_point_warns():
    options = dict(temperature=1.0, prior=jaxprobe.priors.StandardNormal(), dim=2, num_chains=16,
                   num_samples=200, num_warmup=200, progress=False)
    probe = Probe(lambda x: 0.5 * jnp.sum((x - 1.0) ** 2), "shifted")  # posterior N(0.5, 1/2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", jaxprobe.ConvergenceWarning)
        default = jaxprobe.generate(0, probe, **options)
    assert default.verdict.converged and default.verdict.starts_overdispersed
    with pytest.warns(jaxprobe.ConvergenceWarning, match="every chain starts at the same value"):
        pinned = jaxprobe.generate(0, probe, init=np.full((16, 2), 0.5), **options)
    assert pinned.verdict.starts_overdispersed is False


def test_sweep_cells_judge_their_own_starts():
    """A sweep cell starts from the question's initial draws; without a prior to draw from those are
    z ~ N(0, I): fine for G = |x|²/2 (target N(0, I)), not overdispersed for a target 100 times wider."""
    probe = lambda width: Probe(lambda x: 0.5 * jnp.sum(x**2) / width**2, "scaled")  # noqa: E731
    result = jaxprobe.sweep(0, probe, {"width": [1.0, 10.0]}, temperature=1.0, dim=2, num_chains=16, num_samples=200,
                            num_warmup=200, progress=False, convergence="ignore")
    narrow, wide = result.samples
    assert narrow.verdict.starts_overdispersed is True
    assert wide.verdict.starts_overdispersed is False
    assert any("starting points are not overdispersed" in problem for problem in wide.verdict.problems)
    assert result.rows[1]["status"] == "unconverged"


# ---------------------------------------------------------------- sequential Monte Carlo cut short

CENTRES = np.array([[3.0, 0.0], [-3.0, 0.0]])
UNEQUAL = Probe(lambda x: -jax.nn.logsumexp(-jnp.sum((x - jnp.asarray(CENTRES, x.dtype)) ** 2, axis=-1) / 0.5
                                            + jnp.log(jnp.asarray([0.9, 0.1], x.dtype))), "bumps_09_01")


def _assert_names_the_unfinished_path(verdict, message):
    assert verdict.tempering_finished is False and verdict.tempering_lambda < 1
    assert verdict.starts_overdispersed is None  # the chains start at particles: the tempering path is judged
    assert "max_stages=1" in verdict.problems[0] and "unfinished" in verdict.problems[0]  # the cause, first
    assert "sampler='smc'" not in message and "max_stages" in message


@pytest.mark.slow  # ~10 s: SMC's compile (the verdict's wording is tested on its own above)
def test_smc_stopped_by_max_stages_names_the_path_not_smc():
    options = dict(temperature=1.0, prior=jaxprobe.priors.StandardNormal(), dim=2, num_chains=256,
                   num_samples=50, num_warmup=50, sampler="smc", progress=False,
                   sampler_options={"max_stages": 1})
    with pytest.warns(jaxprobe.ConvergenceWarning) as caught:
        result = jaxprobe.generate(0, UNEQUAL, **options)
    assert np.mean(result.positions[..., 0] < 0) > 0.3  # the 0.1 mode over-weighted: an unfinished path
    convergence = [w for w in caught if w.category is jaxprobe.ConvergenceWarning]  # not the MCSE warning
    _assert_names_the_unfinished_path(result.verdict, str(convergence[0].message))
    again = result.diagnostics()
    assert again.problems[0] == result.verdict.problems[0]


@pytest.mark.slow  # ~20 s: SMC through a sweep cell (vmapped) and sample(reference=)
def test_smc_stopped_by_max_stages_is_named_by_sweep_and_sample():
    options = dict(num_samples=20, num_warmup=20, sampler="smc", progress=False, convergence="ignore",
                   sampler_options={"max_stages": 1})
    prior = jaxprobe.priors.StandardNormal()
    swept = jaxprobe.sweep(0, UNEQUAL, {"temperature": [1.0, 2.0]}, prior=prior, dim=2, num_chains=128, **options)
    for cell in swept.samples:
        _assert_names_the_unfinished_path(cell.verdict, "\n".join(cell.verdict.problems))
    reference = jaxprobe.priors.StandardNormal(event_shape=(2,))
    target = jaxprobe.gibbs(UNEQUAL, 1.0, reference)
    sampled = jaxprobe.sample(1, target, np.zeros((128, 2), np.float32), reference=reference, **options)
    _assert_names_the_unfinished_path(sampled.verdict, "\n".join(sampled.verdict.problems))


def test_old_verdicts_without_the_new_fields_still_load():
    data = {key: value for key, value in Verdict(True, (), 1.0, 1.01, 500.0, 400.0, 0, 0, 0, False, True).to_dict()
            .items() if key not in ("starts_overdispersed", "start_coverage", "start_coverage_threshold",
                                    "worst_start_coordinate", "tempering_finished", "tempering_lambda")}
    verdict = Verdict.from_dict(data)
    assert verdict.starts_overdispersed is None and verdict.tempering_finished is None
    samples = Samples(positions=np.random.default_rng(0).standard_normal((4, 50, 1)),
                      logdensity=np.zeros((4, 50)), acceptance_rate=np.full(4, 0.5), step_size=np.ones(4),
                      num_divergent=np.zeros(4, int), num_nonfinite=np.zeros(4, int),
                      num_gradient_evaluations=np.zeros(4, int), sampler="mala", num_warmup=0, thin=1,
                      verdict=verdict)
    fresh = samples.diagnostics()
    assert fresh.starts_overdispersed is None
    assert any("starting points are unknown" in note for note in fresh.notes)
