"""jaxprobe.benchmark.compare: bad input before anything runs, failures as rows, Ctrl-C, the report's file and
table, paired tests, and (slow) that wrong samplers are flagged while correct ones are not."""

from __future__ import annotations

import json
import math
import re
import types

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from blackjax.base import SamplingAlgorithm
from blackjax.mcmc.mala import MALAState
from scipy import stats

from jaxprobe.benchmark import Report, Target, compare, from_blackjax
from jaxprobe.benchmark.measure import ALPHA, wilson_interval, z_threshold
from jaxprobe.benchmark.stats import paired_tests

SCALES = np.array([1.0, 2.0])


def _gaussian() -> Target:
    """N(0, diag(1, 4)): a small target with closed-form truth."""
    return Target("small_gaussian", lambda x: -0.5 * jnp.sum((x / SCALES) ** 2), 2, mean=np.zeros(2),
                  var=SCALES ** 2)


def _unadjusted_langevin(logdensity_fn, step_size):
    """MALA without its Metropolis–Hastings correction (a wrong sampler: its draws are off by O(step_size))."""
    value_and_grad = jax.value_and_grad(logdensity_fn)

    def init(position):
        value, grad = value_and_grad(position)
        return MALAState(position, value, grad)

    def step(key, state):
        noise = jax.random.normal(key, state.position.shape)
        position = state.position + step_size * state.logdensity_grad + jnp.sqrt(2 * step_size) * noise
        value, grad = value_and_grad(position)
        info = blackjax.mcmc.mala.MALAInfo(jnp.ones(()), jnp.array(True))
        return MALAState(position, value, grad), info

    return SamplingAlgorithm(init, step)


def _nan_algorithm(logdensity_fn):
    """Moves every chain to NaN after its first step (non-finite positions)."""
    mala = blackjax.mala(logdensity_fn, step_size=0.1)

    def step(key, state):
        state, info = mala.step(key, state)
        return state._replace(position=state.position * jnp.nan), info

    return SamplingAlgorithm(mala.init, step)


def _raising_algorithm(logdensity_fn):
    def step(key, state):
        raise RuntimeError("this sampler is broken")

    return SamplingAlgorithm(blackjax.mala(logdensity_fn, step_size=0.1).init, step)


# ------------------------------------------------------------------ bad input (nothing compiles)


def test_bad_input_is_refused_before_anything_runs(compile_counter):
    target = _gaussian()
    with compile_counter:
        with pytest.raises(ValueError, match="not a known sampler.*mala"):
            compare({"x": "no-such-sampler"}, [target], progress=False)
        with pytest.raises(ValueError, match="unknown target 'nowhere'.*isotropic_gaussian"):
            compare({"m": "mala"}, ["nowhere"], progress=False)
        wrong = types.SimpleNamespace(name="wrong", logdensity_fn=target.logdensity_fn, dim=2, mean=np.zeros(3),
                                      var=None, mean_se=None, var_se=None, init=None)
        with pytest.raises(ValueError, match=r"targets\[0\].mean must have shape \(2,\)"):
            compare({"m": "mala"}, [wrong], progress=False)
        with pytest.raises(TypeError, match="SamplingAlgorithm"):
            compare({"b": from_blackjax(lambda f: "not an algorithm")}, [target], progress=False)
        with pytest.raises(TypeError, match="unknown option|options"):
            compare({"h": ("hmc", {"no_such_option": 3})}, [target], progress=False)
        with pytest.raises(TypeError, match="samplers must be a non-empty dict"):
            compare(["mala"], [target], progress=False)
        with pytest.raises(ValueError, match="num_chains"):
            compare({"m": "mala"}, [target], num_chains=0, progress=False)
        with pytest.raises(TypeError, match="make must be callable"):
            from_blackjax("mala")
    assert compile_counter.count == 0


# ------------------------------------------------------------------ failures, Ctrl-C, the report


@pytest.fixture(scope="module")
def small_report():
    """One compare call with a correct sampler, one that raises, one that returns NaN, one interrupted by Ctrl-C."""
    calls = {"n": 0}

    def interrupting(logdensity_fn):
        calls["n"] += 1
        if calls["n"] > 1:  # the check before the runs passes; the run itself is interrupted
            raise KeyboardInterrupt
        return blackjax.mala(logdensity_fn, step_size=0.5)

    samplers = {"ok": from_blackjax(lambda f: blackjax.mala(f, step_size=0.8)),
                "raises": from_blackjax(_raising_algorithm), "nan": from_blackjax(_nan_algorithm),
                "ctrl-c": from_blackjax(interrupting), "after": "mala"}
    return compare(samplers, [_gaussian()], num_chains=2, num_warmup=20, num_samples=40, seeds=2, key=3,
                   progress=False)


def test_failures_are_rows_and_ctrl_c_keeps_the_rows_measured(small_report):
    rows = {row["sampler"]: row for row in small_report.rows}
    assert small_report.interrupted
    assert "after" not in rows and "ctrl-c" not in rows  # stopped there, the earlier rows kept
    assert rows["ok"]["failure"] is None and rows["ok"]["ess_bulk"] > 0
    assert rows["raises"]["failure"].startswith("RuntimeError: this sampler is broken")
    assert rows["nan"]["failure"] == "non-finite positions in 2 of 2 seeds" and rows["nan"]["poor_runs"] == 2


def test_numpyro_row_without_numpyro(monkeypatch):
    from jaxprobe.benchmark import samplers

    monkeypatch.setattr(samplers, "_numpyro_installed", lambda: False)
    report = compare({"numpyro": "numpyro-nuts"}, [_gaussian()], progress=False)
    assert report.rows[0]["failure"] == "not installed" and not report.interrupted


def test_row_keys_and_counts(small_report):
    row = small_report.row("ok", "small_gaussian")
    for key in ("sampler", "target", "num_chains", "ess_per_gradient", "chain_steps_per_second", "max_abs_z",
                "biased", "compile_seconds", "wall_seconds", "gradients_per_second", "kept_draws_per_second",
                "ratio_to_limit", "ess_tail", "ess_per_second", "acceptance", "divergences", "poor_rate_ci"):
        assert key in row, key
    assert row["gradients_per_step"] == 1.0  # BlackJAX MALA: one gradient per step, counted from its trace
    assert row["chain_steps_per_second"] == pytest.approx(2 * 2 * 60 / row["wall_seconds"])
    assert len(row["per_seed"]["min_ess_bulk"]) == 2


def test_report_saves_loads_and_tabulates(small_report, tmp_path):
    json_path, md_path = small_report.save(tmp_path)
    loaded = Report.load(json_path)
    assert loaded.rows == json.loads(json.dumps(small_report.rows)) and loaded.interrupted
    assert loaded.meta["versions"]["jax"] == jax.__version__ and loaded.meta["commit"]
    markdown = open(md_path).read()
    assert "| ok | small_gaussian | 2 |" in markdown and "this sampler is broken" in markdown
    assert "Interrupted" in markdown
    for path in small_report.plot(tmp_path):
        assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="not a jaxprobe benchmark report"):
        Report.load(tmp_path / "bad.json")


# ------------------------------------------------------------------ statistics


def _row(name, ess_per_gradient, poor):
    return {"sampler": name, "target": "t", "per_seed": {"seed": list(range(len(poor))),
                                                         "ess_per_gradient": list(ess_per_gradient), "poor": poor}}


def test_paired_tests():
    rng = np.random.default_rng(0)
    base = np.exp(rng.normal(size=12))
    same = paired_tests(_row("a", base, [False] * 12), _row("b", base, [False] * 12))
    assert same["wilcoxon_p"] == 1.0 and same["mcnemar_p"] == 1.0
    alike = paired_tests(_row("a", base, [False] * 12), _row("b", base * np.exp(rng.normal(0, 0.1, 12)), [False] * 12))
    assert alike["wilcoxon_p"] > 0.05
    worse = paired_tests(_row("a", base, [False] * 12), _row("b", base / 3, [True] * 10 + [False] * 2))
    assert worse["wilcoxon_p"] < 0.001 and worse["mcnemar_p"] < 0.01 and worse["poor_b"] == 10
    assert worse["median_log_ratio"] == pytest.approx(math.log(3))


def test_thresholds():
    assert z_threshold(1, 0.05) == pytest.approx(1.959964, abs=1e-5)
    assert z_threshold(400) == pytest.approx(stats.norm.ppf(1 - ALPHA / 800))
    low, high = wilson_interval(18, 600)
    assert low < 18 / 600 < high and high - low < 0.03
    assert wilson_interval(0, 5)[0] == 0.0


# ------------------------------------------------------------------ wrong samplers are flagged (slow)


@pytest.mark.slow
def test_wrong_samplers_flagged_and_correct_ones_not():
    """On the built-in isotropic Gaussian (d = 100): a tempered target, a dropped MH correction and a step size that
    freezes the chains are flagged; BlackJAX's MALA and jaxprobe's MALA are not, over 20 seeds each (a seed's
    false-alarm rate is at most ALPHA = 1%: 0 to 2 of 40 seeds flagged has probability > 0.99)."""
    samplers = {
        "tempered": from_blackjax(lambda f: blackjax.mala(lambda x: 0.5 * f(x), step_size=0.5)),
        "no-mh": from_blackjax(lambda f: _unadjusted_langevin(f, 0.5)),
        "frozen": from_blackjax(lambda f: blackjax.mala(f, step_size=50.0)),
        "blackjax-mala": from_blackjax(lambda f: blackjax.mala(f, step_size=0.3)),
        "mala": "mala",
    }
    report = compare(samplers, ["isotropic_gaussian"], num_chains=4, num_warmup=200, num_samples=1000, seeds=20,
                     key=11, progress=False, min_ess=50)
    rows = {row["sampler"]: row for row in report.rows}
    summary = {name: (row["failure"], row.get("max_abs_z"), row.get("biased_runs"), row.get("poor_runs"),
                      row.get("ess_bulk")) for name, row in rows.items()}
    for wrong in ("tempered", "no-mh"):  # wrong answers: the z's of the variances
        assert rows[wrong]["biased"] and rows[wrong]["biased_runs"] >= 15, summary
    # Frozen chains stay at their starts (here exact draws): not biased, but no effective draws: every seed poor.
    assert rows["frozen"]["poor_runs"] == 20 and rows["frozen"]["ess_bulk"] < 1, summary
    flagged = sum(rows[name]["biased_runs"] for name in ("blackjax-mala", "mala"))
    assert flagged <= 2, summary  # P(3 or more of 40 | rate 1%) < 0.008
    assert not rows["blackjax-mala"]["biased"] and not rows["mala"]["biased"], summary
    assert rows["blackjax-mala"]["poor_runs"] == 0 and rows["mala"]["poor_runs"] == 0, summary
    assert re.match(r"\d+/20 converged", rows["mala"]["verdict"]) and "verdict" not in rows["blackjax-mala"]
    assert report.paired("mala", "frozen", "isotropic_gaussian")["mcnemar_p"] < 0.01


def _ar1(rng, seeds, draws, chains, dim, rho, scale=1.0):
    """AR(1) chains of N(0, scale²) in the harness's layout ``(S, N, K, D)``, started at stationarity."""
    x = np.empty((seeds, draws, chains, dim))
    x[:, 0] = rng.normal(size=(seeds, chains, dim))
    noise = rng.normal(size=x.shape) * math.sqrt(1 - rho ** 2)
    for t in range(1, draws):
        x[:, t] = rho * x[:, t - 1] + noise[:, t]
    return x * scale


def test_bias_flag_false_alarm_rate_and_power():
    """Correct autocorrelated draws are flagged at about ALPHA per seed (binomial tolerance); draws whose standard
    deviation is 10% too large are flagged in most seeds."""
    from jaxprobe.benchmark.measure import seed_statistics

    rng = np.random.default_rng(5)
    truth = types.SimpleNamespace(mean=np.zeros(20), var=np.ones(20), mean_se=None, var_se=None)
    right = seed_statistics(_ar1(rng, 150, 400, 4, 20, 0.5), truth, 4, 50.0)
    assert right["biased"].sum() <= stats.binom.ppf(0.999, 150, ALPHA), right["biased"].sum()
    assert np.abs(right["z_mean"]).mean() == pytest.approx(math.sqrt(2 / math.pi), rel=0.1)  # z ~ N(0, 1)
    wrong = seed_statistics(_ar1(rng, 20, 400, 4, 20, 0.5, scale=1.1), truth, 4, 50.0)
    assert wrong["biased"].sum() >= 15


def test_seed_statistics_in_blocks_equal_all_at_once(monkeypatch):
    """The rank diagnostics run a block of seeds at a time (their temporaries are ~33x their input: 600 seeds of
    eight schools at once were killed for memory); the statistics do not depend on the block size."""
    from jaxprobe.benchmark import measure

    truth = types.SimpleNamespace(mean=np.zeros(3), var=np.ones(3), mean_se=None, var_se=None)
    draws = _ar1(np.random.default_rng(2), 7, 120, 4, 3, 0.5)
    whole = measure.seed_statistics(draws, truth, 4, 50.0)
    monkeypatch.setattr(measure, "DIAGNOSTICS_BLOCK_BYTES", 2 * 4 * 120 * 3 * 8 * 2)   # two seeds per block
    blocked = measure.seed_statistics(draws, truth, 4, 50.0)
    for name, values in whole.items():
        np.testing.assert_array_equal(blocked[name], values, err_msg=name)
    assert np.all(whole["min_ess_bulk"] > 10)


@pytest.mark.slow
def test_blackjax_adaptation_per_chain():
    """from_blackjax with BlackJAX's window adaptation run per chain: adapted HMC is right, and its gradients are
    counted from its info (3 leapfrog steps per step, in warmup too)."""
    adapted = from_blackjax(lambda f, **p: blackjax.hmc(f, **p),
                            lambda f: blackjax.window_adaptation(blackjax.hmc, f, num_integration_steps=3))
    report = compare({"hmc-window": adapted}, [_gaussian()], num_chains=4, num_warmup=100, num_samples=300, seeds=3,
                     key=2, progress=False)
    row = report.rows[0]
    assert row["failure"] is None and row["gradients_per_step"] == 3.0
    assert row["gradients_per_second"] * row["wall_seconds"] == pytest.approx(3 * 4 * 3 * 400)
    assert not row["biased"] and row["ess_bulk"] > 50
