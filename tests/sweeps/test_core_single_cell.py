"""A sweep group of one cell is one generate run: its numeric probe parameters arrive as concrete JAX scalars,
which probes accept like the Python numbers they stand for (a weight used to fail: "multiplied by a real number,
got ArrayImpl"), and the draws equal generate's with the Python number, bit for bit."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprobe
from jaxprobe.probes import Probe


def _quadratic(x):
    return jnp.sum((x - 1.0) ** 2)


def test_one_cell_weight_axis_is_generate_with_the_number():
    options = dict(temperature=1.0, num_chains=4, num_samples=10, num_warmup=10, dim=2, progress=False,
                   convergence="ignore")
    result = jaxprobe.sweep(5, lambda weight: weight * Probe(_quadratic), {"weight": [0.5]}, **options)
    assert result.rows[0]["status"] in ("ok", "unconverged"), result.rows[0]["error"]
    direct = jaxprobe.generate(jax.random.fold_in(jax.random.key(5), 0), 0.5 * Probe(_quadratic), **options)
    np.testing.assert_array_equal(result.samples[0].positions, direct.positions)
    assert (jnp.float32(2.0) * Probe(_quadratic))(jnp.zeros(2)) == 4.0


@pytest.mark.slow
def test_string_and_engine_static_axes_select_what_they_name():
    """Python sweep: a string probe axis (which model), an engine static axis (sampler, num_chains) and a list
    axis each select what they name. Every axis is static, so each cell is its own run and equals generate of
    its own question with the sweep's documented key (fold_in(key, seed)), bit for bit; no two cells agree."""
    centres = {"left": jnp.array([-2.0, 0.0]), "right": jnp.array([2.0, 1.0])}

    @functools.lru_cache(maxsize=None)  # one Probe object per question: generate reuses the sweep's program
    def probe_of(model, scale):
        return Probe(lambda x: jnp.sum((x - centres[model] * jnp.asarray(scale)) ** 2))

    def build(model, scale):
        return probe_of(model, tuple(scale))

    options = dict(temperature=1.0, num_samples=12, num_warmup=12, dim=2, progress=False, convergence="ignore")
    base = {"model": "left", "scale": [1.0, 1.0], "sampler": "mala", "num_chains": 4}
    grid = [base, {**base, "model": "right"}, {**base, "scale": [0.5, 2.0]}, {**base, "sampler": "rwmh"},
            {**base, "num_chains": 6}]  # each cell changes one axis of the first
    result = jaxprobe.sweep(3, build, grid, **options)
    assert len(result.rows) == 5 and result.num_compilations >= 2
    means = []
    for row, swept in zip(result.rows, result.samples):
        assert row["status"] in ("ok", "unconverged"), row["error"]
        direct = jaxprobe.generate(jax.random.fold_in(jax.random.key(3), 0),
                                   build(row["model"], list(row["scale"])), sampler=row["sampler"],
                                   num_chains=row["num_chains"], **options)
        np.testing.assert_array_equal(swept.positions, direct.positions, err_msg=str(row))
        assert swept.sampler == row["sampler"] and swept.num_chains == row["num_chains"]
        means.append(swept.positions.mean(axis=(0, 1)))
    assert len({tuple(np.round(m, 6)) for m in means}) == 5
    # The model axis moves the draws to that model's centre (x₀ = -2 vs +2, unit spread).
    assert means[0][0] < -1.0 and means[1][0] > 1.0


def test_one_cell_evaluates_G_once_per_kept_draw(monkeypatch):
    """A one-cell sweep stores G(x) beside each kept draw as it is drawn: no pass over the draws afterwards (the
    post-run evaluation is made to fail here), G's mean and MCSE summed from those values equal the same cell's
    without draws (G folded in during the run, the same draws), and the spread columns are those of G at the
    stored draws."""
    from jaxprobe.sweeps import core

    def no_second_pass(*args, **kwargs):
        raise AssertionError("G was evaluated again at every kept draw after the run")

    monkeypatch.setattr(core, "_probe_values_by_block", no_second_pass)
    options = dict(temperature=0.5, num_chains=16, num_samples=100, num_warmup=100, dim=2, progress=False,
                   convergence="ignore")
    kept = jaxprobe.sweep(4, Probe(_quadratic), {"temperature": [0.5]}, **options)
    bare = jaxprobe.sweep(4, Probe(_quadratic), {"temperature": [0.5]}, keep_draws=False, **options)
    row, row_bare = kept.rows[0], bare.rows[0]
    assert row["status"] == row_bare["status"] == "ok", (row["error"], row_bare["error"])
    assert kept.samples[0].positions.shape == (16, 100, 2) and bare.samples[0].positions is None
    assert row["probe_mean"] == pytest.approx(row_bare["probe_mean"], rel=1e-6)
    assert row["probe_mcse"] == pytest.approx(row_bare["probe_mcse"], rel=1e-5) and row["probe_mcse"] > 0
    values = np.asarray(jax.vmap(jax.vmap(_quadratic))(jnp.asarray(kept.samples[0].positions)))
    assert row["probe_mean"] == pytest.approx(values.mean(), rel=1e-5)
    assert row["probe_median"] == pytest.approx(np.median(values), rel=1e-5)
    assert row["probe_max"] == pytest.approx(values.max(), rel=1e-5)
    assert row["probe_sd"] == pytest.approx(values.std(ddof=1), rel=1e-4)
    # E[G] = E|x - 1|² = d·τ/2 for the Gibbs density exp(−G/τ) (flat prior): within 4 MCSE
    assert abs(row["probe_mean"] - 2 * 0.5 / 2) < 4 * row["probe_mcse"]


def test_the_value_stored_beside_a_draw_is_G_or_NaN_for_a_draw_that_is_not_finite():
    """_ProbeBeside stores G(x) exactly for a finite x, NaN for an x with a NaN or inf (so finite stored values
    vouch for every draw without a pass over them); equal for equal probes (one compiled program)."""
    from jaxprobe.sweeps.core import _ProbeBeside

    beside = _ProbeBeside(Probe(_quadratic))
    x = jnp.array([0.5, -2.0])
    np.testing.assert_array_equal(beside(x), jnp.array([0.5, -2.0, _quadratic(x)]))
    for bad in (jnp.nan, jnp.inf, -jnp.inf):
        assert bool(jnp.isnan(beside(jnp.array([0.5, bad]))[-1]))
    assert beside == _ProbeBeside(Probe(_quadratic)) and hash(beside) == hash(_ProbeBeside(Probe(_quadratic)))
