"""The sample() contract: validation, reproducibility, compilation, results, files."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.conftest import normal_starts, std_normal

import jaxprobe
from jaxprobe.engine import api


_init = normal_starts


# ---------------------------------------------------------------- bad input, before compilation


def _assert_raises_without_compiling(compile_counter, error, match, **kwargs):
    arguments = dict(rng_key=0, logdensity_fn=std_normal, initial_positions=_init(), num_samples=10,
                     num_warmup=10, progress=False)
    arguments.update(kwargs)
    with compile_counter:
        with pytest.raises(error, match=match):
            jaxprobe.sample(**arguments)
    assert compile_counter.count == 0, "the bad input was only caught after compiling"


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"sampler": "gibbs"}, ValueError, "sampler must be one of 'mala', 'rwmh', 'hmc', 'nuts', 'chees'"),
        ({"num_samples": 0}, ValueError, "num_samples must be >= 1"),
        ({"num_samples": 2.5}, TypeError, "num_samples must be an int"),
        ({"thin": 0}, ValueError, "thin must be >= 1"),
        ({"num_warmup": -1}, ValueError, "num_warmup must be >= 0"),
        ({"step_size": 0.0}, ValueError, "step_size must be finite and > 0"),
        ({"step_size": -0.1}, ValueError, "step_size must be finite and > 0"),
        ({"step_size": np.ones(5)}, ValueError, r"step_size must be a scalar or have shape \(8,\)"),
        ({"initial_positions": np.zeros((8, 3), bool)}, TypeError, "must hold real numbers"),
        ({"initial_positions": np.zeros((8, 3), complex)}, TypeError, "must hold real numbers"),
        ({"step_size": "0.1"}, TypeError, "step_size must be numeric"),
        ({"step_size": True}, TypeError, "step_size must be numeric"),
        ({"target_acceptance_rate": "0.5"}, TypeError, "target_acceptance_rate must be a real number"),
        ({"initial_positions": np.array(1.0)}, ValueError, "must have a leading chain axis"),
        ({"initial_positions": np.full((8, 3), np.nan)}, ValueError, "contains NaN or inf"),
        ({"initial_positions": np.full((8, 3), np.inf)}, ValueError, "contains NaN or inf"),
        ({"initial_positions": {"a": np.zeros((8, 3)), "b": np.zeros((4, 3))}}, ValueError, "has 4 chains"),
        ({"logdensity_fn": lambda x: -0.5 * x**2}, ValueError, "must return a scalar"),
        ({"logdensity_fn": lambda x: -0.5 * x @ np.ones((5, 5)) @ x}, ValueError, "failed on one chain"),
        ({"logdensity_fn": "not callable"}, TypeError, "logdensity_fn must be callable"),
        ({"step_size_mode": "global"}, ValueError, "step_size_mode must be one of"),
        ({"num_warmup": 0}, ValueError, "num_warmup=0 needs an explicit step_size"),
        ({"rng_key": "seed"}, TypeError, "rng_key must be an int seed"),
        ({"target_acceptance_rate": 1.5}, ValueError, "target_acceptance_rate must be in"),
        ({"sampler": "mala", "inverse_mass_matrix": np.ones(3)}, ValueError, "inverse_mass_matrix is only used"),
        ({"sampler": "hmc", "sampler_options": {"bogus": 1}}, TypeError, "sampler_options for 'hmc'"),
    ],
)
def test_bad_input_raises_a_clear_error_before_compiling(compile_counter, kwargs, error, match):
    _assert_raises_without_compiling(compile_counter, error, match, **kwargs)


def test_unknown_sampler_lists_the_known_ones():
    with pytest.raises(ValueError) as info:
        jaxprobe.sample(0, std_normal, _init(), sampler="slice", progress=False)
    for name in ("mala", "hmc", "nuts", "rwmh", "chees"):
        assert name in str(info.value)


def test_logdensity_not_finite_at_init_is_reported():
    support = lambda x: jnp.where(jnp.all(x < 0.0), std_normal(x), -jnp.inf)
    with pytest.raises(ValueError, match="not finite at initial_positions of chains"):
        jaxprobe.sample(0, support, np.abs(_init()) + 0.1, num_samples=5, num_warmup=5, progress=False)


@pytest.mark.parametrize("temperature", [0.0, -1.0, float("nan"), float("inf")])
def test_gibbs_rejects_bad_temperature(temperature):
    with pytest.raises(ValueError, match="temperature must be finite and > 0"):
        jaxprobe.gibbs(lambda x: jnp.sum(x**2), temperature)


def test_gibbs_value():
    prior = jaxprobe.priors.StandardNormal()
    logdensity = jaxprobe.gibbs(lambda x: jnp.sum(x**2), 0.5, prior)
    x = jnp.array([0.3, -1.2])
    expected = -float(jnp.sum(x**2)) / 0.5 - 0.5 * float(jnp.sum(x**2)) - np.log(2 * np.pi)
    np.testing.assert_allclose(float(logdensity(x)), expected, rtol=1e-6)


# ---------------------------------------------------------------- non-finite proposals


@pytest.mark.parametrize("sampler", ["mala", "rwmh", "hmc"])
@pytest.mark.parametrize("bad_value", [jnp.nan, jnp.inf])
def test_nonfinite_proposals_are_rejected_and_counted(sampler, bad_value):
    """Outside x < 1 the log density is NaN or +inf: such proposals must never be accepted."""

    def logdensity(x):
        return jnp.where(jnp.all(x < 1.0), std_normal(x), bad_value)

    result = jaxprobe.sample(1, logdensity, _init(16, 2) * 0.1, sampler=sampler, num_samples=300,
                             num_warmup=0, step_size=0.8, progress=False)
    assert np.all(result.positions < 1.0)
    assert np.all(np.isfinite(result.logdensity))
    assert result.num_nonfinite.sum() > 0
    assert result.num_nonfinite.shape == (16,)


# ---------------------------------------------------------------- reproducibility, compilation


# HMC's chunk invariance in the slow pass (the default run's time; MALA's checks the same driver here).
@pytest.mark.parametrize("sampler, chunk_sizes", [("mala", (None, 1, 5, 12)),
                                                  pytest.param("hmc", (None, 5), marks=pytest.mark.slow)])
def test_same_key_same_samples_for_any_chunk_size(sampler, chunk_sizes):
    runs = [
        jaxprobe.sample(7, std_normal, _init(), sampler=sampler, num_samples=12, num_warmup=20, thin=3,
                        chunk_size=chunk_size, progress=False)
        for chunk_size in chunk_sizes
    ]
    for other in runs[1:]:
        np.testing.assert_array_equal(runs[0].positions, other.positions)
        np.testing.assert_array_equal(runs[0].logdensity, other.logdensity)
        np.testing.assert_array_equal(runs[0].step_size, other.step_size)
        # Acceptance is a float32 sum per chunk, totalled on the host: equal up to rounding.
        np.testing.assert_allclose(runs[0].acceptance_rate, other.acceptance_rate, rtol=1e-6)


def test_different_keys_differ():
    a = jaxprobe.sample(1, std_normal, _init(), num_samples=5, num_warmup=5, progress=False)
    b = jaxprobe.sample(2, std_normal, _init(), num_samples=5, num_warmup=5, progress=False)
    assert not np.array_equal(a.positions, b.positions)


def test_second_call_does_not_recompile(compile_counter):
    kwargs = dict(num_samples=20, num_warmup=20, progress=False, chunk_size=10)
    jaxprobe.sample(0, std_normal, _init(), **kwargs)
    with compile_counter:
        jaxprobe.sample(1, std_normal, _init(seed=1), **kwargs)
    assert compile_counter.count == 0


def test_thinning_stores_only_kept_draws():
    result = jaxprobe.sample(0, std_normal, _init(4, 2), num_samples=10, num_warmup=0, step_size=0.5, thin=50,
                             progress=False)
    assert result.positions.shape == (4, 10, 2)
    assert result.num_gradient_evaluations.tolist() == [500] * 4
    # Thinned draws of a well-mixing chain are nearly independent.
    assert result.summary().ess_bulk.min() > 20


# ---------------------------------------------------------------- the functional core


# ---------------------------------------------------------------- results and files


def test_progress_bar_reports_steps(capsys):
    jaxprobe.sample(0, std_normal, _init(), num_samples=20, num_warmup=20, progress=True, chunk_size=10)
    err = capsys.readouterr().err
    assert "step/s" in err and "acc=" in err


@pytest.mark.slow
def test_float64_when_x64_enabled(tmp_path):
    """float64 runs end to end when jax_enable_x64 is on (in a subprocess: the flag is global)."""
    import subprocess
    import sys

    script = (
        "import jax; jax.config.update('jax_enable_x64', True)\n"
        "import numpy as np, jax.numpy as jnp, jaxprobe\n"
        "x0 = np.zeros((4, 2), np.float64)\n"
        "for s in ['mala', 'rwmh', 'hmc', 'nuts', 'chees']:\n"
        "    r = jaxprobe.sample(0, lambda x: -0.5 * jnp.sum(x**2), x0, sampler=s, num_samples=20, num_warmup=30,"
        " progress=False)\n"
        "    assert r.positions.dtype == np.float64, (s, r.positions.dtype)\n"
        "    assert r.logdensity.dtype == np.float64\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ok" in out.stdout


def test_float64_input_without_x64_runs_in_float32():
    """NumPy's float64 (and ints) are cast to the working dtype, as jnp.asarray does (issue 15)."""
    if jax.config.jax_enable_x64:
        pytest.skip("x64 is on in this process")
    for init in (_init().astype(np.float64), np.round(_init()).astype(np.int64)):
        result = jaxprobe.sample(0, std_normal, init, num_samples=5, num_warmup=5, progress=False,
                                 convergence="ignore")
        assert result.positions.dtype == np.float32


# ---------------------------------------------------------------- interrupted runs


# ChEES (a cross-chain warmup state on file) in the slow pass: 35 s of compiles; MALA's run checks the driver here.
@pytest.mark.parametrize("sampler", ["mala", pytest.param("chees", marks=pytest.mark.slow)])
def test_checkpoint_resumes_an_interrupted_run_exactly(tmp_path, monkeypatch, sampler):
    from jaxprobe.engine import api

    kwargs = dict(sampler=sampler, num_samples=24, num_warmup=30, thin=2, chunk_size=5, progress=False)
    reference = jaxprobe.sample(11, std_normal, _init(), **kwargs)
    path = tmp_path / "run.npz"

    original, calls = api._run_chunk, []

    def interrupted(*args, **kw):
        calls.append(1)
        if len(calls) == 3:  # Ctrl-C in the middle of the third sampling chunk
            raise KeyboardInterrupt
        return original(*args, **kw)

    monkeypatch.setattr(api, "_run_chunk", interrupted)
    with pytest.raises(KeyboardInterrupt):
        jaxprobe.sample(11, std_normal, _init(), checkpoint=path, **kwargs)
    monkeypatch.setattr(api, "_run_chunk", original)
    with np.load(path, allow_pickle=False) as data:  # two finished chunks are on file (rows of the draws files)
        assert int(data["num_draws_saved"]) == 10
    assert sorted(p.name for p in (tmp_path / "run.npz.draws").iterdir()) == [  # the draws, a state per boundary
        "logdensity.npy", "position.npy", "state.0.npz", "state.10.npz", "state.5.npz"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.npz", "run.npz.draws"]  # no temporary files
    (tmp_path / ".run.npz.x1y2.partial").write_bytes(b"a write killed by SIGKILL")  # cleared on resume

    resumed = jaxprobe.sample(11, std_normal, _init(), checkpoint=path, **kwargs)
    assert not any(p.name.endswith(".partial") for p in tmp_path.iterdir())
    np.testing.assert_array_equal(resumed.positions, reference.positions)
    np.testing.assert_array_equal(resumed.logdensity, reference.logdensity)
    np.testing.assert_array_equal(resumed.num_gradient_evaluations, reference.num_gradient_evaluations)
    np.testing.assert_allclose(resumed.acceptance_rate, reference.acceptance_rate, rtol=1e-6)

    # A finished checkpoint returns the same result without sampling again.
    monkeypatch.setattr(api, "_run_chunk", lambda *a, **k: pytest.fail("resampled a finished run"))
    again = jaxprobe.sample(11, std_normal, _init(), checkpoint=path, **kwargs)
    np.testing.assert_array_equal(again.positions, reference.positions)
    # Its arrays read the draws files copy-on-write: changing the result never changes the checkpoint.
    again.positions[...] = 0.0
    np.testing.assert_array_equal(jaxprobe.sample(11, std_normal, _init(), checkpoint=path, **kwargs).positions,
                                  reference.positions)


def test_checkpoint_if_long_writes_a_checkpoint_only_for_a_run_worth_resuming(tmp_path, monkeypatch):
    """CheckpointIfLong(path, min_seconds): a new run whose sampling, projected from the warmup's speed (compiling
    excluded), is shorter than min_seconds writes nothing and gives the unchecked run's answer bit for bit; with
    min_seconds = 0 it is checkpointed as checkpoint=path is; a checkpoint already at the path is resumed whatever
    the threshold; the projection is steps × the warmup's time per step."""
    from jaxprobe.engine import CheckpointIfLong

    kwargs = dict(num_samples=200, num_warmup=2, chunk_size=50, progress=False)
    # A log density of its own: its warmup compiles here, and the compile (hundreds of ms, x100 in the projection)
    # must not count, or this short run would be projected over 5 s.
    fresh = lambda x: -0.5 * jnp.sum(x**2) - 0.0 * jnp.sum(jnp.sin(x))  # noqa: E731
    reference = jaxprobe.sample(11, fresh, _init(), **kwargs)
    short = jaxprobe.sample(11, lambda x: fresh(x), _init(), checkpoint=CheckpointIfLong(tmp_path / "run.npz", 5.0),
                            **kwargs)
    assert list(tmp_path.iterdir()) == []                            # no state file, no draws folder
    np.testing.assert_array_equal(short.positions, reference.positions)
    np.testing.assert_array_equal(short.logdensity, reference.logdensity)
    assert short.verdict.to_dict() == reference.verdict.to_dict()

    always = jaxprobe.sample(11, fresh, _init(), checkpoint=CheckpointIfLong(tmp_path / "run.npz", 0), **kwargs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.npz", "run.npz.draws"]
    np.testing.assert_array_equal(always.positions, reference.positions)
    monkeypatch.setattr(api, "_run_chunk", lambda *a, **k: pytest.fail("resampled a finished run"))
    resumed = jaxprobe.sample(11, fresh, _init(), checkpoint=CheckpointIfLong(tmp_path / "run.npz", 1e9), **kwargs)
    np.testing.assert_array_equal(resumed.positions, reference.positions)

    policy = CheckpointIfLong("run.npz", min_seconds=10)
    assert policy.worth_checkpointing(1.0, num_warmup=100, num_steps=1000)          # 10 s projected
    assert not policy.worth_checkpointing(1.0, num_warmup=100, num_steps=999)
    assert policy.worth_checkpointing(0.0, num_warmup=0, num_steps=1)               # no warmup: no speed to go by
    for bad, error in ((-1, ValueError), (float("nan"), ValueError), ("60", TypeError), (True, TypeError)):
        with pytest.raises(error, match="CheckpointIfLong min_seconds"):
            CheckpointIfLong("run.npz", bad)


def test_checkpoint_of_another_run_is_refused(tmp_path):
    path = tmp_path / "run.npz"
    jaxprobe.sample(1, std_normal, _init(), num_samples=4, num_warmup=4, progress=False, checkpoint=path)
    with pytest.raises(ValueError, match="belongs to another run .*key"):
        jaxprobe.sample(2, std_normal, _init(), num_samples=4, num_warmup=4, progress=False, checkpoint=path)
    with pytest.raises(ValueError, match="num_samples"):
        jaxprobe.sample(1, std_normal, _init(), num_samples=8, num_warmup=4, progress=False, checkpoint=path)


def test_checkpoint_of_another_target_start_or_mass_matrix_is_refused(tmp_path):
    """A checkpoint records what the run samples and where it starts, not only its settings: resuming with
    another log density, other initial positions or another inverse mass matrix raises, naming what differs
    (before, the two runs' draws were mixed)."""
    path = tmp_path / "run.npz"
    options = dict(num_samples=4, num_warmup=4, progress=False, checkpoint=path, sampler="hmc")
    jaxprobe.sample(1, std_normal, _init(), **options)
    shifted = lambda x: -0.5 * jnp.sum((x - 1.0) ** 2)  # noqa: E731
    with pytest.raises(ValueError, match=r"differs in target\)"):
        jaxprobe.sample(1, shifted, _init(), **options)
    with pytest.raises(ValueError, match=r"differs in initial_positions\)"):
        jaxprobe.sample(1, std_normal, _init(seed=1), **options)
    with pytest.raises(ValueError, match=r"differs in inverse_mass_matrix\)"):
        jaxprobe.sample(1, std_normal, _init(), inverse_mass_matrix=np.full(3, 2.0), **options)
    again = jaxprobe.sample(1, std_normal, _init(), **options)  # the same run: resumed (finished), not refused
    assert again.num_draws == 4
    assert issubclass(jaxprobe.engine.CheckpointMismatchError, ValueError)


def test_smc_checkpoint_of_another_reference_is_refused(tmp_path):
    """SMC's chains start at particles tempered from the reference: the same target from another reference is
    another run, refused; the same reference resumes."""
    from jaxprobe.priors import DiagonalGaussian

    path = tmp_path / "run.npz"
    options = dict(sampler="smc", num_samples=4, num_warmup=4, progress=False, checkpoint=path, convergence="ignore")
    jaxprobe.sample(1, std_normal, _init(), reference=DiagonalGaussian(np.zeros(3), np.ones(3)), **options)
    with pytest.raises(jaxprobe.engine.CheckpointMismatchError, match=r"differs in reference\)") as error:
        jaxprobe.sample(1, std_normal, _init(), reference=DiagonalGaussian(np.zeros(3), 2 * np.ones(3)), **options)
    assert error.value.differing == ["reference"]
    again = jaxprobe.sample(1, std_normal, _init(), reference=DiagonalGaussian(np.zeros(3), np.ones(3)), **options)
    assert again.num_draws == 4


class _FakeAccelerator:
    """A device as ``_draws_fit_on_devices`` sees one: a platform and memory statistics (or none)."""

    def __init__(self, platform, stats):
        self.platform, self._stats = platform, stats

    def memory_stats(self):
        if isinstance(self._stats, Exception):
            raise self._stats
        return self._stats


def _fit(num_samples, num_chains, dim, devices):
    from types import SimpleNamespace
    run = SimpleNamespace(num_samples=num_samples, num_chains=num_chains, dtype=np.float32,
                          layout=SimpleNamespace(dim=dim))
    sharding = SimpleNamespace(mesh=SimpleNamespace(devices=np.array(devices, dtype=object)))
    return api._draws_fit_on_devices(run, sharding)


def test_draws_stay_on_an_accelerator_only_while_half_its_free_memory_holds_them():
    # 1,000 draws x 1,000 chains x (9 + 1) float32 = 40 MB, on one device or 20 MB each on two.
    def gpu(free):
        return _FakeAccelerator("gpu", {"bytes_limit": 100_000_000 + free, "bytes_in_use": 100_000_000})
    assert _fit(1000, 1000, 9, [gpu(80_000_000)])
    assert not _fit(1000, 1000, 9, [gpu(79_999_999)])  # 40 MB is more than half of the free memory
    assert _fit(1000, 1000, 9, [gpu(40_000_000), gpu(40_000_000)])  # each holds its half of the chains
    assert not _fit(1000, 1000, 9, [gpu(40_000_000), gpu(39_999_999)])
    # No statistics (or a backend without them), or a CPU: the draws are copied out chunk by chunk.
    assert not _fit(1, 1, 1, [_FakeAccelerator("gpu", {})])
    assert not _fit(1, 1, 1, [_FakeAccelerator("gpu", NotImplementedError())])
    assert not _fit(1, 1, 1, [_FakeAccelerator("cpu", {"bytes_limit": 10**12, "bytes_in_use": 0})])


def _as_if_on_an_accelerator(array):
    """``host.on_accelerator`` for a test: every concrete JAX array counts as off the host, so that a CPU run
    takes the paths that keep an accelerator's arrays there."""
    return isinstance(array, jax.Array) and not isinstance(array, jax.core.Tracer)


def test_on_accelerator_is_false_for_host_arrays_cpu_arrays_and_tracers():
    from jaxprobe.engine.host import on_accelerator
    assert not on_accelerator(np.zeros(3)) and not on_accelerator(jnp.zeros(3)) and not on_accelerator(1.0)
    assert not jax.jit(lambda x: jnp.asarray(on_accelerator(x)))(jnp.zeros(3))


def test_starting_points_and_observables_on_an_accelerator_stay_there_and_give_the_same_answer(monkeypatch):
    # On a GPU, device-resident starting points and the observables' O(C·D) sums were brought to the host and
    # back (0.2 s of extra transfers and 0.6 s of NumPy at 2^20 chains on an H100): now they are checked,
    # flattened, placed and reduced where they are. The same run through both paths gives the same answer.
    from jaxprobe.engine import host, streaming
    x0 = {"a": jnp.asarray(normal_starts(8, 2, seed=3)), "b": jnp.asarray(normal_starts(8, 1, seed=4))}

    def logdensity(position):
        return -0.5 * (jnp.sum(position["a"] ** 2) + jnp.sum(position["b"] ** 2))
    observables = {"a": lambda position: position["a"], "b2": lambda position: position["b"][0] ** 2}
    options = dict(num_samples=200, num_warmup=100, progress=False, keep_draws=False, observables=observables)
    on_host = jaxprobe.sample(5, logdensity, x0, **options)
    draws_on_host = jaxprobe.sample(5, logdensity, x0, **{**options, "keep_draws": True})
    for module in (api, streaming, host):
        monkeypatch.setattr(module, "on_accelerator", _as_if_on_an_accelerator)
    assert isinstance(api._Layout(x0).flatten_chains(x0), jax.Array)  # no host copy of the starts
    kept = jaxprobe.sample(5, logdensity, x0, **options)
    for name in observables:
        for field in ("mean", "mcse", "per_chain_mean"):
            expected, got = getattr(on_host.observables[name], field), getattr(kept.observables[name], field)
            assert got.dtype == np.float64 and got.shape == expected.shape
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
        assert kept.observables[name].num_batches == on_host.observables[name].num_batches
    assert kept.verdict.start_coverage == on_host.verdict.start_coverage
    # Kept draws of a run on the device: the same values on the host.
    draws = jaxprobe.sample(5, logdensity, x0, **{**options, "keep_draws": True})
    for name in ("a", "b"):
        assert isinstance(draws.positions[name], np.ndarray)
        np.testing.assert_array_equal(draws.positions[name], draws_on_host.positions[name])
    np.testing.assert_array_equal(draws.logdensity, draws_on_host.logdensity)
    assert draws.verdict.converged == draws_on_host.verdict.converged
    np.testing.assert_array_equal(kept.acceptance_rate, on_host.acceptance_rate)
    bad = {"a": x0["a"].at[6, 1].set(jnp.nan), "b": x0["b"]}  # checked on the device, named on the host
    with pytest.raises(ValueError, match=r"initial_positions\['a'\] contains NaN or inf \(chains \[6\]\)"):
        jaxprobe.sample(5, logdensity, bad, **options)


@pytest.mark.parametrize("counts", [[25, 25, 25, 25], [30, 30, 0, 0], [40, 0, 0, 0]])
def test_batch_means_agree_between_numpy_and_jax(counts):
    # The accelerator's reduction (the run's float32) and the host's (float64) of the same batch sums, with
    # batches that no draw reached left out (a run shorter than its batches) and a single batch (no error).
    from jaxprobe.engine import streaming
    counts = np.asarray(counts, np.float64)
    sums = np.random.default_rng(0).normal(size=(4, 16, 3)) * counts[:, None, None]
    host = streaming._batch_means(sums, counts, np)
    device = streaming._batch_means(jnp.asarray(sums, jnp.float32), counts, jnp)
    assert host[3] == device[3] == int((counts > 0).sum()) * 16
    for expected, got in zip(host[:3], device[:3]):
        np.testing.assert_allclose(np.asarray(got), expected, rtol=2e-5, atol=1e-6)
