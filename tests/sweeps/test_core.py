"""jaxprobe.sweep: one compilation for a numeric grid, known answers per cell, equality with generate,
resume after an interruption, failing cells recorded, validation before compiling, several devices."""

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprobe
from jaxprobe._compiles import Compiles
from jaxprobe.engine.samples import Samples
from jaxprobe.probes import Probe, localize, prediction_risky
from jaxprobe.sweeps import read_table
from tests.conftest import host_devices_environment

ANCHORS = np.array([[0.0, 0.0], [1.0, -1.0], [2.0, 3.0], [-1.5, 0.5]], np.float32)
TEMPERATURES = [0.25, 0.5, 1.0, 2.0]
WEIGHTS = [0.5, 1.0, 2.0, 4.0]
_LOCALIZE_AT_ZERO = localize(np.zeros(2))


def weighted_localizer(weight, anchor):
    """G(x) = w |x − a|² with a = ANCHORS[anchor]: exp(−G/τ) is N(a, τ/(2w) I)."""
    anchor_point = jnp.asarray(ANCHORS)[anchor]
    return Probe(lambda x: weight * _LOCALIZE_AT_ZERO(x - anchor_point), "weighted_localizer")


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory):
    """A 64-cell grid (4 temperatures × 4 localizer weights × 4 anchor indices), run once."""
    out = tmp_path_factory.mktemp("sweep64")
    key = jax.random.key(11)
    with Compiles() as counter:
        result = jaxprobe.sweep(key, weighted_localizer,
                                {"temperature": TEMPERATURES, "weight": WEIGHTS, "anchor": [0, 1, 2, 3]},
                                num_chains=16, num_samples=100, num_warmup=100, dim=2, out=out, progress=False)
    return result, counter.count, out


def test_64_cell_numeric_grid_compiles_once(grid_run):
    result, compilations, _ = grid_run
    assert len(result.rows) == 64
    # One sampling program, plus the small program that fingerprints every cell's question (its log density
    # at 8 fixed points, vmapped over the cells) for the cell ids.
    assert compilations == 2, f"{compilations} XLA compilations for a 64-cell numeric grid"
    assert result.num_compilations == 1
    assert all(row["status"] == "ok" for row in result.rows)


def _z_scores(series, truth):
    """(mean − truth) / (sd / √ESS) per cell and coordinate; series (B, C, N, K), ESS = BlackJAX bulk ESS
    (the Monte-Carlo standard error of conftest.mc_check_mean, for all cells in one compiled call)."""
    from blackjax import diagnostics

    ess = np.asarray(jax.jit(jax.vmap(jax.vmap(diagnostics.ess_bulk, in_axes=2)))(series.astype(np.float32)))
    assert ess.min() > 50, f"ESS too small for a meaningful check: {ess.min():.1f}"
    flat = series.reshape(series.shape[0], -1, series.shape[-1])
    return (flat.mean(axis=1) - truth) / (flat.std(axis=1) / np.sqrt(ess)), ess


def test_every_cell_samples_its_own_gaussian(grid_run):
    """Cell (τ, w, a) targets N(a, τ/(2w) I): per cell, means and variances within 4.5 MC standard errors
    (ESS-based, as conftest.mc_check_mean / mc_check_second_moment), and E[G] = τ·d/2."""
    result, _, _ = grid_run
    positions = np.stack([s.positions for s in result.samples]).astype(np.float64)  # (64, C, N, 2)
    assert positions.shape == (64, 16, 100, 2)
    means = ANCHORS[[row["anchor"] for row in result.rows]]
    variances = np.array([row["temperature"] / (2 * row["weight"]) for row in result.rows])
    z_mean, _ = _z_scores(positions, means)
    squared = (positions - means[:, None, None, :]) ** 2
    z_variance, _ = _z_scores(squared, np.repeat(variances[:, None], 2, axis=1))
    assert np.abs(z_mean).max() < 4.5, np.abs(z_mean).max()
    assert np.abs(z_variance).max() < 4.5, np.abs(z_variance).max()
    # G(x)/τ = w|x − a|²/τ is χ²₂/2 under the target: E[G] = τ.
    ratio = np.array([row["probe_mean"] / row["temperature"] for row in result.rows])
    assert np.abs(ratio - 1.0).max() < 0.25


def test_table_and_samples_on_disk(grid_run):
    result, _, out = grid_run
    rows = read_table(os.path.join(out, "results.csv"))
    assert len(rows) == 64
    assert list(rows[0])[:5] == ["cell", "index", "temperature", "weight", "anchor"]
    for row, expected in zip(rows, result.rows):
        assert row["temperature"] == expected["temperature"] and row["anchor"] == expected["anchor"]
        assert row["status"] == "ok" and 0.3 < row["acceptance_rate"] < 0.9
        assert row["max_rhat"] < 1.1 and row["min_ess_bulk"] > 50
        assert row["probe_q05"] <= row["probe_median"] <= row["probe_q95"]
    first = Samples.load(os.path.join(out, rows[0]["samples"]))
    np.testing.assert_array_equal(first.positions, result.samples[0].positions)
    cell_ids = {row["cell"] for row in rows}
    assert len(cell_ids) == 64
    spec = json.loads((out / "sweep.json").read_text())
    assert spec["axes"] == ["temperature", "weight", "anchor"] and len(spec["cells"]) == 64
    if _has_pyarrow():
        import pyarrow.parquet

        assert pyarrow.parquet.read_table(out / "results.parquet").num_rows == 64


def _has_pyarrow():
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.slow
def test_cell_equals_generate_with_the_same_key():
    """A cell is generate(fold_in(key, seed), G_cell, ...): the same draws up to float32 rounding."""
    model = lambda x: jax.nn.sigmoid(x @ jnp.array([2.0, -1.0, 0.5]))  # noqa: E731
    prior = jaxprobe.priors.DiagonalGaussian(np.zeros(3), np.ones(3))
    key = jax.random.key(7)

    def risky(alpha):  # prediction_risky with a traced α: ‖(f(x) − α) − 0‖²
        return prediction_risky(lambda x: model(x) - alpha, alpha=0.0)

    options = dict(temperature=0.05, num_chains=16, num_samples=10, num_warmup=5, step_size=0.05, prior=prior,
                   progress=False)
    result = jaxprobe.sweep(key, risky, {"alpha": [0.3, 0.7], "seed": [1, 2]}, **options)
    for row, samples in list(zip(result.rows, result.samples))[3:]:  # one generate call (each compiles anew)
        reference = jaxprobe.generate(jax.random.fold_in(key, row["seed"]), prediction_risky(model, row["alpha"]),
                                      **options)
        np.testing.assert_allclose(samples.positions, reference.positions, atol=2e-6)
        np.testing.assert_allclose(samples.acceptance_rate, reference.acceptance_rate, atol=2e-6)


def _shifted(kind, shift):
    if kind == "broken":
        raise ValueError("no probe of kind 'broken'")
    # A shift above 1.5 makes G infinite everywhere: that cell cannot start and must be recorded as failed.
    return Probe(lambda x: jnp.where(shift > 1.5, jnp.inf, _LOCALIZE_AT_ZERO(x - shift)))


_FAILING_GRID = {"kind": ["ok", "broken"], "shift": [0.0, 1.0, 2.0]}
_FAILING_OPTIONS = dict(temperature=1.0, num_chains=8, num_samples=40, num_warmup=40, dim=2, cells_per_batch=1,
                        progress=False)


def test_interrupted_sweep_resumes_and_failing_cells_are_recorded(tmp_path, monkeypatch, compile_counter):
    complete = jaxprobe.sweep(3, _shifted, _FAILING_GRID, out=tmp_path / "complete", **_FAILING_OPTIONS)
    # 8 chains x 40 draws cannot reach the verdict's ESS of 400: finished cells are "unconverged", not failed.
    status = [(row["kind"], row["shift"], row["status"]) for row in complete.rows]
    assert status == [("ok", 0.0, "unconverged"), ("ok", 1.0, "unconverged"), ("ok", 2.0, "error"),
                      ("broken", 0.0, "error"), ("broken", 1.0, "error"), ("broken", 2.0, "error")]
    assert "min bulk ESS" in complete.rows[0]["problems"]
    assert "not finite at the initial positions" in complete.rows[2]["error"]
    assert "no probe of kind 'broken'" in complete.rows[3]["error"]
    np.testing.assert_allclose(complete.load_samples(1).positions.mean(axis=(0, 1)), [1.0, 1.0], atol=0.3)

    # Interrupt the same sweep while it writes its second cell.
    out = tmp_path / "resumed"
    original_save, calls = Samples.save, []

    def interrupted_save(self, path):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        original_save(self, path)

    monkeypatch.setattr(Samples, "save", interrupted_save)
    with pytest.raises(KeyboardInterrupt):
        jaxprobe.sweep(3, _shifted, _FAILING_GRID, out=out, **_FAILING_OPTIONS)
    monkeypatch.setattr(Samples, "save", original_save)
    finished = sorted(p.name for p in (out / "cells").iterdir())
    assert len(finished) == 2 and not any(name.endswith(".partial") for name in finished)  # one cell: .npz + .json
    first_written = (out / "cells" / finished[0]).stat().st_mtime_ns

    with compile_counter as counter:  # the program is reused (same builder and shapes): nothing recompiles
        resumed = jaxprobe.sweep(3, _shifted, _FAILING_GRID, out=out, **_FAILING_OPTIONS)
    assert counter.count == 0
    assert (out / "cells" / finished[0]).stat().st_mtime_ns == first_written  # the finished cell was skipped
    for a, b in zip(complete.rows, resumed.rows):
        assert (a["status"], a["error"], a["probe_mean"]) == (b["status"], b["error"], b["probe_mean"])
    for a, b in zip(complete.samples, resumed.samples):
        if a is not None:
            np.testing.assert_array_equal(a.positions, b.positions)
    table = read_table(out / "results.csv")
    assert [row["status"] for row in table] == ["unconverged", "unconverged", "error", "error", "error", "error"]


@pytest.mark.parametrize(
    "grid, options, match",
    [
        ({"temperature": [1.0, -0.5]}, {}, r"grid cell 1 \(temperature=-0.5\).*> 0"),
        ({"temperature": [1.0], "seed": [1.5]}, {}, "seed must be an int"),
        ({"weight": [1.0]}, {}, "temperature is required"),
        ({"temperature": [1.0]}, {"static": ["alpha"]}, "static names axes that are not in the grid"),
        ({"temperature": []}, {}, r"grid\['temperature'\] is empty"),
        ({"temperature": [1.0], "num_chains": [0]}, {}, r"grid cell 0 \(num_chains=0\): num_chains must be >= 1"),
        ({"temperature": [1.0]}, {"sampler": "gibbs"}, "sampler must be one of"),
    ],
)
def test_bad_grids_are_rejected_before_compiling(grid, options, match, compile_counter):
    build = lambda **params: _LOCALIZE_AT_ZERO  # noqa: E731
    with compile_counter as counter, pytest.raises((ValueError, TypeError), match=match):
        jaxprobe.sweep(0, build, grid, num_chains=4, num_samples=5, num_warmup=5, dim=2, progress=False,
                       **options)
    assert counter.count == 0


@pytest.mark.parametrize(
    "grid, options, error, match",
    [
        ({"temperature": [1.0]}, {"cells_per_batch": 2.0}, TypeError, "cells_per_batch must be an int, got float"),
        ({"temperature": [1.0]}, {"cells_per_batch": 0}, ValueError, "cells_per_batch must be >= 1, got 0"),
        ({"temperature": [1.0], "seed": [1.5]}, {}, TypeError, r"grid cell 0 \(seed=1.5\): seed must be an int"),
        ({"temperature": [1.0], "thin": ["2"]}, {}, TypeError, r"grid cell 0 \(thin='2'\): thin must be an int"),
    ],
)
def test_integer_settings_are_checked_by_type_then_range(grid, options, error, match):
    """cells_per_batch and the grid's integer axes are read by the shared check_int: a value of the wrong type
    is a TypeError, one out of range a ValueError, each naming the argument (and the grid cell)."""
    build = lambda **params: _LOCALIZE_AT_ZERO  # noqa: E731
    with pytest.raises(error, match=match):
        jaxprobe.sweep(0, build, grid, num_chains=4, num_samples=5, num_warmup=5, dim=2, progress=False, **options)


def test_probe_builder_that_needs_concrete_values_gets_a_clear_error(compile_counter):
    def needs_float(alpha):
        scale = float(alpha)  # float() needs a concrete value
        return Probe(lambda x: scale * x[0] ** 2)

    call = lambda: jaxprobe.sweep(0, needs_float, {"alpha": [0.2, 0.4]}, temperature=1.0, num_chains=4,  # noqa
                                  num_samples=5, num_warmup=5, dim=2, progress=False)
    with pytest.raises(ValueError, match=r"static=\[\.\.\.\]"):
        call()  # the first call also compiles the key handling (small eager ops) when run alone
    with compile_counter as counter, pytest.raises(ValueError, match=r"static=\[\.\.\.\]"):
        call()
    assert counter.count == 0


@pytest.mark.slow
def test_cells_are_sharded_over_four_devices_and_match_one_device(tmp_path):
    """Four simulated CPU devices (a subprocess): the chains axis is split over them; the draws match the
    one-device run of this process."""
    script = textwrap.dedent("""
        import os, sys
        import numpy as np, jax, jax.numpy as jnp, jaxprobe
        from jaxprobe.probes import Probe, localize
        base = localize(np.zeros(2))
        build = lambda weight: Probe(lambda x: weight * base(x))
        result = jaxprobe.sweep(1, build, {"temperature": [0.5, 2.0], "weight": [1.0, 3.0]}, num_chains=32,
                                num_samples=20, num_warmup=10, step_size=0.1, dim=2, progress=False)
        np.save(sys.argv[1], np.stack([s.positions for s in result.samples]))
        from jaxprobe.sweeps import core
        sharding = next(iter(core._PROGRAM_CACHE.values()))[0][0].output_shardings[1]["positions"]
        print("devices", jax.device_count(), "positions split", sharding.num_devices, "ways along", getattr(sharding, "spec", None))
    """)
    env = host_devices_environment(4)
    path = tmp_path / "4.npy"
    completed = subprocess.run([sys.executable, "-c", script, str(path)], env=env, capture_output=True, text=True,
                               timeout=300)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "devices 4" in completed.stdout
    # (draws, cells, chains, d), draw-major as the scan stacks them: the chains axis is split over the 4 devices
    assert "positions split 4 ways along P(None, None, 'chains')" in completed.stdout, completed.stdout
    base = localize(np.zeros(2))
    one_device = jaxprobe.sweep(1, lambda weight: Probe(lambda x: weight * base(x)),
                                {"temperature": [0.5, 2.0], "weight": [1.0, 3.0]}, num_chains=32, num_samples=20,
                                num_warmup=10, step_size=0.1, dim=2, progress=False, devices=jax.devices()[:1])
    np.testing.assert_allclose(np.load(path), np.stack([s.positions for s in one_device.samples]), atol=1e-5)


def test_host_rhat_and_ess_equal_blackjax():
    """The sweep's NumPy R̂ / bulk ESS (computed after the program, vectorized over cells) equal BlackJAX's
    rhat / ess_bulk on AR(1) chains of several autocorrelations, a non-converged cell, ties and a constant."""
    from blackjax import diagnostics

    from jaxprobe.engine.diagnostics import rhat_ess_bulk

    rng = np.random.default_rng(0)
    draws = rng.normal(size=(3, 8, 51, 5))
    for t in range(1, draws.shape[2]):
        draws[:, :, t] += np.array([0.0, 0.5, 0.9, 0.99, 0.0]) * draws[:, :, t - 1]
    draws[1, :2] += 3.0  # two chains elsewhere: R̂ well above 1
    draws[2, :, :, 4] = np.round(draws[2, :, :, 4])  # many ties: average ranks
    draws[0, :, :, 4] = 1.0  # constant: R̂ NaN, ESS 0
    draws = draws.astype(np.float32)
    rhat, ess = rhat_ess_bulk(draws)
    reference = jax.jit(lambda cells: (jax.vmap(jax.vmap(diagnostics.rhat, in_axes=2))(cells),
                                       jax.vmap(jax.vmap(diagnostics.ess_bulk, in_axes=2))(cells)))
    expected_rhat, expected_ess = reference(draws)
    np.testing.assert_allclose(rhat, expected_rhat, rtol=1e-5)
    np.testing.assert_allclose(ess, expected_ess, rtol=1e-5)
    assert np.isnan(rhat[0, 4]) and ess[0, 4] == 0.0 and rhat[1].min() > 1.3 and ess[0, 3] < ess[0, 0] / 10


def test_probe_constructors_accept_traced_hyperparameters():
    """prediction_risky / fixed_label / localize / Probe * w with vmapped (traced) α, target, anchor and weights
    equal the probes built from concrete values; an impossible traced value makes G NaN (the cell then fails)."""
    model = lambda x: jax.nn.sigmoid(x @ jnp.array([2.0, -1.0]))  # noqa: E731
    classifier = lambda x: jax.nn.softmax(jnp.array([x[0], x[1], x[0] - x[1]]))  # noqa: E731
    x = jnp.array([0.3, -0.2])
    alphas, targets, weights = jnp.array([0.2, 0.5, jnp.nan]), jnp.array([0, 2, 3]), jnp.array([0.5, 2.0, -1.0])
    anchors = jnp.array([[0.0, 1.0], [1.0, -1.0], [2.0, 0.5]])
    risky = jax.vmap(lambda a: prediction_risky(model, a)(x))(alphas)
    labels = jax.vmap(lambda t: jaxprobe.probes.fixed_label(classifier, t)(x))(targets)
    localized = jax.vmap(lambda a, w: (w * localize(a, weights=jnp.ones(2) * w))(x))(anchors, weights)
    for i in range(2):
        assert np.isclose(risky[i], prediction_risky(model, float(alphas[i]))(x))
        assert np.isclose(labels[i], jaxprobe.probes.fixed_label(classifier, int(targets[i]))(x))
        w = float(weights[i])
        assert np.isclose(localized[i], (w * localize(np.asarray(anchors[i]), weights=np.full(2, w)))(x), rtol=1e-6)
    # α NaN, class 3 of 3 classes, a negative localizer weight: undefined, not silently another question.
    assert np.isnan(risky[2]) and np.isnan(labels[2]) and np.isnan(localized[2])
    with pytest.raises(ValueError, match="anchor must be a finite vector"):
        jax.vmap(lambda a: localize(a)(x))(jnp.zeros((3, 2, 2)))


def test_a_fixed_probe_reuses_its_program(compile_counter):
    """Sweeping the same Probe object again (a resumed sweep, a second look) compiles nothing new."""
    options = dict(num_chains=4, num_samples=8, num_warmup=4, dim=2, progress=False)
    first = jaxprobe.sweep(5, _LOCALIZE_AT_ZERO, {"temperature": [0.5, 1.0]}, **options)
    with compile_counter as counter:
        second = jaxprobe.sweep(5, _LOCALIZE_AT_ZERO, {"temperature": [0.5, 1.0]}, **options)
    assert counter.count == 0 and second.num_compilations == 0 and first.num_compilations == 1
    np.testing.assert_array_equal(first.samples[1].positions, second.samples[1].positions)


def test_a_rerun_for_another_question_recomputes_its_cells(tmp_path):
    """Cell ids cover the question itself (its log density at fixed points: model parameters, data, probe, prior,
    constraints), not only grid values and settings: a rerun into the same folder after the model changed
    recomputes; the same question again reuses the cells on disk."""
    options = dict(num_chains=4, num_samples=8, num_warmup=4, dim=2, progress=False, out=tmp_path,
                   convergence="ignore")

    def trained(weights):  # a "model" whose trained parameters are captured, as a fitted estimator's are
        return lambda shift: Probe(lambda x: jnp.sum((x - jnp.asarray(weights) - shift) ** 2))

    first = jaxprobe.sweep(0, trained([0.0, 0.0]), {"shift": [0.0, 1.0], "temperature": [1.0]}, **options)
    retrained = jaxprobe.sweep(0, trained([5.0, 5.0]), {"shift": [0.0, 1.0], "temperature": [1.0]}, **options)
    assert [r["cell"] for r in first.rows] != [r["cell"] for r in retrained.rows]
    assert retrained.num_compilations == 1  # recomputed, not returned from disk
    assert retrained.samples[0].positions.mean() > 2.0 > first.samples[0].positions.mean()
    again = jaxprobe.sweep(0, trained([5.0, 5.0]), {"shift": [0.0, 1.0], "temperature": [1.0]}, **options)
    assert [r["cell"] for r in again.rows] == [r["cell"] for r in retrained.rows]
    np.testing.assert_array_equal(again.samples[1].positions, retrained.samples[1].positions)


def test_sweep_without_draws_answers_from_the_device_statistics():
    """keep_draws=False: no cell keeps a draw, in memory or on disk; every cell still has its verdict, G's mean
    with its MCSE (equal to the same sweep's with draws, which folds the same draws in) and the observables;
    the quantiles of G, which need the draws, are empty. Cell (τ, w, a) targets N(a, τ/(2w) I)."""
    grid = {"temperature": [0.5, 1.0], "weight": [1.0], "anchor": [1, 2]}
    kwargs = dict(num_chains=16, num_samples=100, num_warmup=100, dim=2, progress=False,
                  observables={"x": lambda x: x})
    bare = jaxprobe.sweep(jax.random.key(3), weighted_localizer, grid, keep_draws=False, **kwargs)
    kept = jaxprobe.sweep(jax.random.key(3), weighted_localizer, grid, **kwargs)
    for row_bare, row_kept, cell_bare, cell_kept in zip(bare.rows, kept.rows, bare.samples, kept.samples):
        assert cell_bare.positions is None and cell_kept.positions is not None
        assert row_bare["status"] == row_kept["status"] == "ok"
        assert row_bare["probe_mean"] == pytest.approx(row_kept["probe_mean"], rel=1e-6)
        assert row_bare["probe_mcse"] == pytest.approx(row_kept["probe_mcse"], rel=1e-6) and row_bare["probe_mcse"] > 0
        assert row_bare["max_rhat"] == pytest.approx(row_kept["max_rhat"], rel=1e-6)
        assert row_bare["probe_q05"] is None and row_kept["probe_q05"] is not None
        x = cell_bare.observables["x"]
        np.testing.assert_allclose(x.mean, cell_kept.observables["x"].mean, rtol=1e-6)
        np.testing.assert_allclose(x.mean, np.asarray(cell_kept.positions).mean(axis=(0, 1)), rtol=1e-4, atol=1e-5)
        anchor = ANCHORS[row_bare["anchor"]]
        assert np.all(np.abs(x.mean - anchor) < 5 * x.mcse), (x.mean, anchor, x.mcse)
        # the table carries each observable's value with its MCSE beside it (a vector: one entry per coordinate)
        for row, cell in ((row_bare, cell_bare), (row_kept, cell_kept)):
            np.testing.assert_allclose(row["observable_x"], cell.observables["x"].mean, rtol=1e-12)
            np.testing.assert_allclose(row["observable_x_mcse"], cell.observables["x"].mcse, rtol=1e-12)
            assert row["observable_x_note"] is None and row["mcse_warning"] is None
    with pytest.raises(ValueError, match="may not be named 'probe'"):
        jaxprobe.sweep(0, weighted_localizer, grid, **dict(kwargs, observables={"probe": lambda x: x}))


def test_the_table_holds_each_observables_value_with_its_error_beside_it(tmp_path):
    """results.csv: each observable's columns after the table's own (value, MCSE, note), a vector as a JSON list,
    a non-finite MCSE (one SMC group) empty; read_table gives the numbers back."""
    from jaxprobe.engine.estimates import estimate, particle_observed
    from jaxprobe.sweeps.core import OBSERVABLE_COLUMNS, TABLE_COLUMNS, _observable_columns, _write_table

    draws = np.random.default_rng(4).normal(size=(16, 40, 2))
    share = estimate((draws[..., 0] > 0).astype(float))  # a probability (a number) with its ESS-based error
    rows = [{"cell": "a", "index": 0, "temperature": 0.5, "status": "ok", **_observable_columns("share", share),
             **_observable_columns("x", particle_observed(draws[:, 0], 1))}]
    _write_table(str(tmp_path), rows, ["temperature"], ["share", "x"])
    header = (tmp_path / "results.csv").read_text().splitlines()[0].split(",")
    assert header[3:3 + len(TABLE_COLUMNS)] == list(TABLE_COLUMNS)
    assert header[3 + len(TABLE_COLUMNS):] == [c.format(n) for n in ("share", "x") for c in OBSERVABLE_COLUMNS]
    row = read_table(tmp_path / "results.csv")[0]
    assert row["observable_share"] == pytest.approx(float(share.mean)) and share.mean.shape == ()
    assert row["observable_share_mcse"] == pytest.approx(float(share.mcse)) and row["observable_share_note"] is None
    assert json.loads(row["observable_x"]) == pytest.approx(draws[:, 0].mean(axis=0).tolist())
    assert json.loads(row["observable_x_mcse"]) == [None, None] and "only 1 independent" in row["observable_x_note"]

