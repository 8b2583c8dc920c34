"""The quadrature of ``jaxprobe.bench.contrast_exact`` against a closed form: a standard-normal prior tilted by a
Gaussian bump, whose normalized target is Gaussian (so log Z and the probability of a half-plane are known)."""

import math

import jax.numpy as jnp
import numpy as np
from scipy.stats import norm

from jaxprobe.bench.contrast_exact import FIELDS, grid_answer


def test_grid_answer_matches_the_closed_form_of_a_gaussian_tilt():
    a, s = np.array([1.0, 0.5]), 0.3  # tilt exp(−|x − a|²/(2s²)) on N(0, I)
    q = {"logdensity": lambda x: -jnp.sum((x - a) ** 2) / (2 * s**2) - jnp.sum(x**2) / 2 - jnp.log(2 * jnp.pi),
         "values": lambda x: jnp.stack([(x[0] > 0.8).astype(x.dtype), (x[1] > 0.3).astype(x.dtype)])}
    found = grid_answer(q, 4.0, 400)
    # Z = s²/(1+s²) exp(−|a|²/(2(1+s²))); the target is N(a/(1+s²), s²/(1+s²) I)
    log_z = math.log(s**2 / (1 + s**2)) - a @ a / (2 * (1 + s**2))
    mean, sd = a / (1 + s**2), s / math.sqrt(1 + s**2)
    assert abs(found["log_evidence"] - log_z) < 1e-4
    assert abs(found[FIELDS[0]] - norm.sf((0.8 - mean[0]) / sd)) < 2e-3
    assert abs(found[FIELDS[1]] - norm.sf((0.3 - mean[1]) / sd)) < 2e-3
    assert found["edge_mass"] < 1e-12
    rings = found["max_logdensity_below_peak_by_ring"]
    assert rings["1-1.5"] == 0.0 and rings["0-1"] < 0.0  # the peak, a/(1+s²), lies at r = 1.03
