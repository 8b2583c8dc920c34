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
