"""The run's own statistics, folded in on the device draw by draw: the verdict, observables, keep_draws=False,
and the engine's edges inside a user's compiled code."""


import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprobe
from jaxprobe.engine import api, core, streaming
from jaxprobe.engine.diagnostics import rank_diagnostics, split_gelman_rubin
from jaxprobe.engine.kernels import MALA
from jaxprobe.engine.verdict import assess


def std_normal(x):
    return -0.5 * jnp.sum(x**2)


def shifted(x):
    """N(mu, diag(sd²)) with mu = (1, -2, 0.5), sd = (1, 2, 0.5): known means and second moments."""
    mu, sd = jnp.asarray([1.0, -2.0, 0.5]), jnp.asarray([1.0, 2.0, 0.5])
    return -0.5 * jnp.sum(((x - mu) / sd) ** 2)


MU, SD = np.asarray([1.0, -2.0, 0.5]), np.asarray([1.0, 2.0, 0.5])


def _init(num_chains=32, dim=3, seed=0):
    return np.random.default_rng(seed).standard_normal((num_chains, dim)).astype(np.float32)


# ---------------------------------------------------------------- the streamed statistics are the draws'


def test_streamed_statistics_equal_those_of_the_kept_draws():
    """What the scan folds in draw by draw (chunked, donated) equals the statistics of the finished draws
    computed at once on the host: the verdict of a run and assess() of its draws agree."""
    samples = jaxprobe.sample(3, std_normal, _init(64), num_samples=150, num_warmup=100, chunk_size=40,
                              progress=False)
    monitor = streaming.Monitor(64, 3, 150)
    draws = np.asarray(samples.positions)
    host = streaming.stats_of_draws(draws, samples.logdensity, monitor)
    # The same statistics through the engine's fold in one scan over the kept draws.
    stats, _ = streaming.init_stats(monitor, jnp.float32)
    for index in range(150):
        stats, _ = streaming.fold_draw(monitor, (stats, {}), jnp.int32(index), jnp.asarray(draws[:, index]),
                                       jnp.asarray(samples.logdensity[:, index]))
    np.testing.assert_array_equal(np.asarray(stats.nonfinite_draws), host.nonfinite_draws)
    np.testing.assert_array_equal(np.asarray(stats.subset)[:-1], host.subset[:-1])
    again = assess(samples)
    for field in ("max_rhat", "min_ess_bulk", "min_ess_tail", "max_split_rhat", "nested_rhat"):
        assert getattr(samples.verdict, field) == pytest.approx(getattr(again, field), rel=1e-3), field
    assert samples.verdict.converged and again.converged


def test_plain_split_rhat_of_the_subset_matches_numpy():
    """Plain split R̂ of every quantity: over every chain and draw when the run fits the subset."""
    draws = two_modes = np.random.default_rng(4).standard_normal((16, 101, 2))
    two_modes[:4] += 3.0  # four chains elsewhere: R̂ well above 1
    logdensity = -0.5 * (draws**2).sum(axis=2)
    monitor = streaming.Monitor(16, 2, 101)
    statistics = streaming.finalize(streaming.stats_of_draws(draws, logdensity, monitor), monitor, xp=np)
    expected = split_gelman_rubin(np.concatenate([draws, logdensity[..., None]], axis=2))
    np.testing.assert_allclose(statistics.split_rhat, expected, rtol=1e-6)
    assert statistics.split_rhat[0] > 1.2


def test_subset_statistics_are_numpy_and_arviz_on_small_runs():
    """A run within the subset's budget: its rank-normalized R̂ and bulk/tail ESS are those of every draw."""
    samples = jaxprobe.sample(5, std_normal, _init(8, 2), num_samples=200, num_warmup=100, progress=False)
    flat = np.concatenate([np.asarray(samples.positions), samples.logdensity[..., None]], axis=2)
    rhat, ess_bulk, ess_tail = rank_diagnostics(flat.astype(np.float64)[None])[2:]
    assert samples.verdict.max_rhat == pytest.approx(rhat.max(), rel=1e-6)
    assert samples.verdict.min_ess_bulk == pytest.approx(ess_bulk.min(), rel=1e-6)
    assert samples.verdict.min_ess_tail == pytest.approx(ess_tail.min(), rel=1e-6)
    assert not any("every" in note for note in samples.verdict.notes)  # no subset: every draw was used


def test_large_runs_use_a_bounded_subset_and_say_so():
    samples = jaxprobe.sample(6, std_normal, _init(512, 2), num_samples=64, num_warmup=50, progress=False)
    chains, stride, num_subset = streaming.subset_plan(512, 64)
    assert len(chains) * num_subset <= streaming.DIAGNOSTIC_VALUES
    assert any(f"use {len(chains)} of 512 chains" in note for note in samples.verdict.notes)
    assert samples.verdict.nested_rhat is not None and samples.verdict.nested_rhat < 1.1
    assert samples.verdict.max_split_rhat < 1.05 and samples.verdict.converged


# ---------------------------------------------------------------- observables


def test_observables_recover_analytic_moments_within_their_mcse():
    samples = jaxprobe.sample(7, shifted, _init(64), num_samples=400, num_warmup=300, progress=False,
                              observables={"x": lambda x: x, "square": lambda x: x**2,
                                           "positive": lambda x: x[0] > 1.0})
    x, square, positive = (samples.observables[name] for name in ("x", "square", "positive"))
    assert x.mean.shape == x.mcse.shape == (3,) and x.per_chain_mean.shape == (64, 3)
    assert np.all(np.abs(x.mean - MU) < 4 * x.mcse), (x.mean, x.mcse)
    assert np.all(np.abs(square.mean - (MU**2 + SD**2)) < 4 * square.mcse)
    assert abs(float(positive.mean) - 0.5) < 4 * float(positive.mcse)
    # The per-chain means are those of the kept draws, and their mean is the estimate.
    np.testing.assert_allclose(x.per_chain_mean, np.asarray(samples.positions).mean(axis=1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(x.mean, x.per_chain_mean.mean(axis=0), rtol=1e-6)


def test_reported_mcse_matches_the_spread_over_independent_runs():
    """The MCSE of an observable's mean is what repeated runs show: within a factor 1.5 of the spread of the
    means over 12 independent runs (pooled over three coordinates)."""
    kwargs = dict(num_samples=200, num_warmup=200, progress=False, keep_draws=False,
                  observables={"x": lambda x: x})
    runs = [jaxprobe.sample(100 + seed, shifted, _init(32, seed=seed), **kwargs).observables["x"]
            for seed in range(12)]
    means = np.stack([run.mean for run in runs])
    spread = means.std(axis=0, ddof=1)
    reported = np.sqrt(np.mean(np.stack([run.mcse for run in runs]) ** 2, axis=0))
    ratio = np.sqrt(np.mean(spread**2)) / np.sqrt(np.mean(reported**2))
    assert 1 / 1.5 < ratio < 1.5, (spread, reported)
    z = (means - MU) / np.stack([run.mcse for run in runs])
    assert np.mean(np.abs(z) < 1.96) > 0.8


def test_keep_draws_false_gives_the_same_verdict_and_observables_without_draws(tmp_path):
    kwargs = dict(num_samples=120, num_warmup=60, chunk_size=25, progress=False, observables={"x": lambda x: x})
    kept = jaxprobe.sample(8, shifted, _init(), **kwargs)
    bare = jaxprobe.sample(8, shifted, _init(), keep_draws=False, **kwargs)
    assert bare.positions is None and bare.logdensity is None and bare.num_draws == 120
    np.testing.assert_array_equal(bare.observables["x"].mean, kept.observables["x"].mean)
    np.testing.assert_array_equal(bare.observables["x"].mcse, kept.observables["x"].mcse)
    assert bare.verdict == kept.verdict
    np.testing.assert_array_equal(bare.acceptance_rate, kept.acceptance_rate)
    for needs_draws in (bare.summary, bare.diagnostics, bare.to_arviz, bare.flat_positions):
        with pytest.raises(ValueError, match="keep_draws=False"):
            needs_draws()
    bare.save(tmp_path / "bare.npz")
    loaded = jaxprobe.Samples.load(tmp_path / "bare.npz")
    assert loaded.positions is None and loaded.verdict == bare.verdict
    np.testing.assert_array_equal(loaded.observables["x"].mean, bare.observables["x"].mean)
    kept.save(tmp_path / "kept.npz")
    np.testing.assert_array_equal(jaxprobe.Samples.load(tmp_path / "kept.npz").observables["x"].mcse,
                                  kept.observables["x"].mcse)


def test_keep_draws_false_memory_does_not_grow_with_the_draws():
    """Without kept draws the compiled chunk holds O(C·D): only its per-step keys (a few bytes per step, derived
    before the scan) grow with num_samples, never anything of size C·D per draw."""
    def chunk_bytes(num_samples):
        run = api._validate(std_normal, _init(256, 2), sampler="mala", num_samples=num_samples, num_warmup=10,
                            step_size=None, inverse_mass_matrix=None, thin=1, step_size_mode="per_chain",
                            target_acceptance_rate=None, chunk_size=num_samples, sampler_options=None,
                            reference=None, convergence="ignore", numerics=None, keep_draws=False)
        placed = api._place(run, jax.random.key(0), None)
        monitored = api._monitored_zeros(run, placed)
        compiled = jax.jit(lambda state, monitored: core.run_monitored(
            jax.random.key(1), state, placed.kernel, run.logdensity, num_samples, 1, run.monitor, monitored,
            jnp.int32(0), keep_draws=False)).lower(placed.state, monitored).compile()
        analysis = compiled.memory_analysis()
        return analysis.temp_size_in_bytes + analysis.output_size_in_bytes

    small, large = chunk_bytes(20), chunk_bytes(20_000)
    assert large - small < 32 * 20_000, (small, large)  # 256 chains x 2 coordinates x 20,000 draws: 40 MB


def test_keep_draws_false_resumes_from_a_checkpoint(tmp_path, monkeypatch):
    kwargs = dict(num_samples=60, num_warmup=20, chunk_size=10, progress=False, keep_draws=False,
                  observables={"x": lambda x: x})
    reference = jaxprobe.sample(9, shifted, _init(), **kwargs)
    original, calls = api._run_chunk, []

    def interrupted(*args, **kw):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return original(*args, **kw)

    monkeypatch.setattr(api, "_run_chunk", interrupted)
    with pytest.raises(KeyboardInterrupt):
        jaxprobe.sample(9, shifted, _init(), checkpoint=tmp_path / "ck.npz", **kwargs)
    monkeypatch.setattr(api, "_run_chunk", original)
    # No draws files without kept draws: only the engine state at the last two chunk boundaries (no chunk of draws
    # to rewind past; the earlier one serves if the last is damaged).
    saved = sorted(p.name for p in (tmp_path / "ck.npz.draws").iterdir())
    assert saved == ["state.20.npz", "state.30.npz"], saved
    resumed = jaxprobe.sample(9, shifted, _init(), checkpoint=tmp_path / "ck.npz", **kwargs)
    np.testing.assert_array_equal(resumed.observables["x"].mean, reference.observables["x"].mean)
    assert resumed.verdict == reference.verdict
    assert sorted(p.name for p in (tmp_path / "ck.npz.draws").iterdir()) == ["state.50.npz", "state.60.npz"]
    # the last boundary damaged: the resume goes on from the one before it, to the same answer
    os.unlink(tmp_path / "ck.npz.draws" / "state.60.npz")
    with pytest.warns(jaxprobe.CorruptFileWarning, match=r"state\.60\.npz is missing.*draws 50 to 60"):
        again = jaxprobe.sample(9, shifted, _init(), checkpoint=tmp_path / "ck.npz", **kwargs)
    np.testing.assert_array_equal(again.observables["x"].mean, reference.observables["x"].mean)


def test_generate_observables_take_x_in_data_space():
    from jaxprobe.constraints import Box

    samples = jaxprobe.generate(1, lambda x: jnp.sum(x), temperature=1e6, num_chains=32, num_samples=200,
                                num_warmup=100, constraints=[Box(0.0, 1.0)], dim=2, progress=False,
                                observables={"x": lambda x: x, "inside": lambda x: jnp.all((x >= 0) & (x <= 1))})
    assert float(samples.observables["inside"].mean) == 1.0  # every draw in the box: data space, not z
    np.testing.assert_allclose(samples.observables["x"].mean, np.asarray(samples.positions).mean(axis=(0, 1)),
                               rtol=1e-4)
    assert np.all(np.abs(samples.observables["x"].mean - 0.5) < 4 * samples.observables["x"].mcse)


@pytest.mark.parametrize("observables, error, match", [
    ({"x": 3.0}, TypeError, r"observables\['x'\] must be a function"),
    ({"x": lambda x: "text"}, TypeError, r"observables\['x'\] must return a numeric array"),
    ({"x": lambda x: x @ jnp.ones(5)}, ValueError, r"observables\['x'\] failed on one chain's starting point"),
    ([lambda x: x], TypeError, "observables must be a dict"),
])
def test_bad_observables_are_named_before_anything_compiles(observables, error, match):
    before = api.compiled_program_count()
    with pytest.raises(error, match=match):
        jaxprobe.sample(0, std_normal, _init(), observables=observables, progress=False)
    assert api.compiled_program_count() == before



def test_observables_and_record_are_traced_once_per_function_and_shapes():
    """A small run asked again traces no observable, record or log density to check it (each check costs
    ~1-10 ms, a tenth of a 256-chain run's overhead): only a new function, or new shapes, is traced again."""
    traces = {"x": 0, "record": 0}

    def observable(x):
        traces["x"] += 1
        return x

    def record(x):
        traces["record"] += 1
        return x[:1]

    kwargs = dict(num_samples=20, num_warmup=10, progress=False, convergence="ignore",
                  observables={"x": observable}, record=record)
    first = jaxprobe.sample(0, std_normal, _init(), **kwargs)
    traced = dict(traces)
    again = jaxprobe.sample(0, std_normal, _init(), **kwargs)
    assert traces == traced  # checked and compiled already: nothing traced
    np.testing.assert_array_equal(again.positions, first.positions)
    np.testing.assert_array_equal(again.observables["x"].mean, first.observables["x"].mean)
    jaxprobe.sample(0, std_normal, _init()[:, :1], **kwargs)  # other shapes: checked (and compiled) again
    assert traces["x"] > traced["x"] and traces["record"] > traced["record"]
    failing = {"x": lambda x: x @ jnp.ones(5)}
    for _ in range(2):  # a failed check is never remembered
        with pytest.raises(ValueError, match=r"observables\['x'\] failed"):
            jaxprobe.sample(0, std_normal, _init(), observables=failing, progress=False)

# ---------------------------------------------------------------- inside a user's compiled code


def test_sample_and_generate_under_jit_name_the_engine_core():
    with pytest.raises(TypeError, match=r"jaxprobe.engine.init"):
        jax.jit(lambda x0: jaxprobe.sample(0, std_normal, x0, progress=False).positions)(jnp.zeros((4, 2)))
    with pytest.raises(TypeError, match=r"jaxprobe.generate was called with a traced"):
        jax.jit(lambda t: jaxprobe.generate(0, lambda x: jnp.sum(x), temperature=t, num_chains=4, num_samples=10,
                                            dim=2, progress=False).positions)(1.0)


def test_engine_run_checks_its_arguments_and_takes_int_keys():
    kernel = MALA()
    state = core.init(kernel, std_normal, jnp.zeros((4, 2)))
    for thin, error, match in ((0, ValueError, "thin must be >= 1"), (-1, ValueError, "thin must be >= 1"),
                               (1.5, TypeError, "thin must be an int, got float")):
        with pytest.raises(error, match=match):
            core.run(0, state, kernel, std_normal, 5, thin)
    with pytest.raises(ValueError, match="num_draws must be >= 1"):
        core.run(0, state, kernel, std_normal, 0)
    with pytest.raises(TypeError, match="num_draws must be an int, got the string"):
        core.run_monitored(0, state, kernel, std_normal, "5", 1, None, None, 0)
    by_int = core.run(7, state, kernel, std_normal, 5)[1].position
    by_key = core.run(jax.random.key(7), state, kernel, std_normal, 5)[1].position
    np.testing.assert_array_equal(by_int, by_key)


def test_sampling_inside_a_training_step_refreshes_the_cached_log_density():
    """A log density whose parameter changes between steps (a model being trained): the kernel state caches
    the log density at the chains' positions, so the step must refresh it (jaxprobe.engine.refresh) after every
    change. With the refresh the cached value is the new density's; without it, it is stale."""
    kernel = MALA()

    def logdensity(theta):
        return lambda x: -0.5 * jnp.sum((x - theta) ** 2)

    @jax.jit
    def train_step(carry, theta):
        state, key = carry
        key, step_key = jax.random.split(key)
        state = core.refresh(state, kernel, logdensity(theta))  # the parameter changed: refresh the cache
        state, trace, _ = core.run(step_key, state, kernel, logdensity(theta), num_draws=5)
        return (state, key), trace.position[-1].mean(axis=0)

    state = core.init(kernel, logdensity(0.0), jnp.zeros((256, 1)),
                      core.default_parameters(kernel, 256, 1, jnp.float32, step_size=0.8))
    carry = (state, jax.random.key(0))
    for theta in jnp.linspace(0.0, 3.0, 30):
        carry, mean = train_step(carry, theta)
        cached = carry[0].kernel_state.logdensity
        np.testing.assert_allclose(cached, jax.vmap(logdensity(theta))(carry[0].kernel_state.position), rtol=1e-5)
    assert abs(float(mean[0]) - 3.0) < 0.3  # the chains followed the moving target
    stale = core.init(kernel, logdensity(0.0), jnp.ones((4, 1)))
    fresh = core.refresh(stale, kernel, logdensity(1.0))
    assert not np.allclose(stale.kernel_state.logdensity, fresh.kernel_state.logdensity)
    np.testing.assert_allclose(fresh.kernel_state.logdensity, 0.0, atol=1e-6)
