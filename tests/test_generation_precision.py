"""generate(..., precision={"target": ..., "mcse": ε}): independent runs are added until the answer's
Monte-Carlo standard error is at most ε, within a budget; an unreachable target warns with the budget
that would reach it.

Known answer: two separated Gaussian bumps (weights 0.8 / 0.2, equidistant from the origin) under a
standard-normal prior in 2-D, so the posterior share of the first bump is exactly 0.8 (closed form, as in
tests/engine/test_smc_answers.py).
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprobe
from jaxprobe.generation import PrecisionWarning
from jaxprobe.probes import Probe

CENTRES = np.array([[3.0, 0.0], [-3.0, 0.0]])
WEIGHTS = np.array([0.8, 0.2])


def _bumps(x):
    log_bumps = -jnp.sum((x - jnp.asarray(CENTRES, x.dtype)) ** 2, axis=-1) / (2 * 0.5**2)
    return -jax.nn.logsumexp(log_bumps + jnp.log(jnp.asarray(WEIGHTS, x.dtype)))


BUMPS = Probe(_bumps, "two_bumps_precision")
OPTIONS = dict(temperature=1.0, prior=jaxprobe.priors.StandardNormal(), dim=2, num_chains=256, num_samples=4,
               num_warmup=4, sampler="smc", progress=False, convergence="ignore")


def in_first(x):
    return (x[0] > 0).astype(jnp.float32)


@pytest.mark.slow
def test_a_loose_target_is_reached_within_the_budget():
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)  # reached: no warning
        result = jaxprobe.generate(0, BUMPS, precision={"target": in_first, "mcse": 0.02, "max_chains": 256 * 12},
                                   **OPTIONS)
    estimate = result.expectation(in_first)
    runs = result.num_chains // 256
    assert result.num_chains % 256 == 0 and 4 <= runs <= 12  # 2 groups a run: ≥ 8 groups before it may stop
    assert estimate.mcse <= 0.02 and result.num_groups == 2 * runs
    assert abs(estimate.mean - 0.8) < 4 * estimate.mcse + 2 / 128, (estimate.mean, estimate.mcse)
    assert any(note.startswith("precision: MCSE") and "≤ target 0.02" in note for note in result.verdict.notes)
    first = jaxprobe.generate(0, BUMPS, **OPTIONS)  # the first run is the plain call with the same key
    np.testing.assert_array_equal(result.positions[:256], first.positions)


@pytest.mark.slow
def test_an_unreachable_target_warns_with_the_budget_that_would_reach_it():
    with pytest.warns(PrecisionWarning, match=r"about max_chains=\d+ \(MCSE ∝ 1/√chains\) would reach it"):
        result = jaxprobe.generate(0, BUMPS, precision={"target": "log_evidence", "mcse": 1e-4, "max_chains": 1024},
                                   **OPTIONS)
    assert result.num_chains == 1024 and result.num_groups == 8  # the whole budget, pooled
    assert np.isfinite(result.log_evidence) and result.log_evidence_se > 1e-4
    assert any("> target 0.0001" in note for note in result.verdict.notes)


def test_bad_precision_is_refused_before_compiling(compile_counter):
    jax.random.split(jax.random.key(0))  # the key programs themselves, compiled once per process
    with compile_counter as counter:
        with pytest.raises(ValueError, match=r"precision\['mcse'\]"):
            jaxprobe.generate(0, BUMPS, precision={"target": in_first, "mcse": 0.0}, **OPTIONS)
        with pytest.raises(ValueError, match="'target' and 'mcse' required"):
            jaxprobe.generate(0, BUMPS, precision={"mcse": 0.01}, **OPTIONS)
        with pytest.raises(ValueError, match="multiple of num_chains=256"):
            jaxprobe.generate(0, BUMPS, precision={"target": in_first, "mcse": 0.01, "max_chains": 300}, **OPTIONS)
        with pytest.raises(ValueError, match="needs sampler='smc'"):
            jaxprobe.generate(0, BUMPS, precision={"target": "log_evidence", "mcse": 0.01},
                              **dict(OPTIONS, sampler="mala"))
        with pytest.raises(ValueError, match="name of one of observables"):
            jaxprobe.generate(0, BUMPS, precision={"target": "share", "mcse": 0.01}, **OPTIONS)
        with pytest.raises(TypeError, match="precision must be a dict"):
            jaxprobe.generate(0, BUMPS, precision=0.01, **OPTIONS)
    assert counter.count == 0
