"""A sweep group of one cell is one generate run: its numeric probe parameters arrive as concrete JAX scalars,
which probes accept like the Python numbers they stand for (a weight used to fail: "multiplied by a real number,
got ArrayImpl"), and the draws equal generate's with the Python number, bit for bit."""

import jax
import jax.numpy as jnp
import numpy as np

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
