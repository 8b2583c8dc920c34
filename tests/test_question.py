"""jaxprobe.Question: one owner of the target; generate and sweep ask the same question and get the same draws."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprobe
from jaxprobe.constraints import Box, Fixed, Integer, OneHot
from jaxprobe.probes import Probe
from jaxprobe.question import Question, infer_dim

WEIGHTS = jnp.array([1.5, -1.0, 0.5, 2.0, -0.5])


def _probe(x):
    """A smooth probe that involves every feature: a logistic model's squared distance from 0.5."""
    return (jax.nn.sigmoid(x @ WEIGHTS) - 0.5) ** 2


PROBE = Probe(_probe, "risky")
RESTRICTIONS = {
    "box": [Box(-2.0, 2.0)],
    "fixed": [Fixed([1, 3], [0.5, -1.0])],
    "onehot": [OneHot([2, 3, 4], concentration=0.5), Box(-3.0, 3.0, indices=[0, 1])],
    "integer": [Box(-3.0, 3.0), Integer([0, 4], mean=0.0, scale=0.5)],
}
OPTIONS = dict(num_chains=8, num_samples=20, num_warmup=20, progress=False, convergence="ignore")


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(RESTRICTIONS))
def test_generate_and_a_one_cell_sweep_give_bit_identical_draws(kind):
    prior = jaxprobe.priors.DiagonalGaussian(np.zeros(5), np.full(5, 1.5))
    key = jax.random.key(3)
    direct = jaxprobe.generate(jax.random.fold_in(key, 2), PROBE, temperature=0.1, prior=prior,
                               constraints=RESTRICTIONS[kind], **OPTIONS)
    swept = jaxprobe.sweep(key, PROBE, {"temperature": [0.1]}, seed=2, prior=prior, constraints=RESTRICTIONS[kind],
                           **OPTIONS)
    assert swept.rows[0]["status"] in ("ok", "unconverged"), swept.rows[0]["error"]  # 8 x 20 draws: a short test run
    np.testing.assert_array_equal(swept.samples[0].positions, direct.positions)
    np.testing.assert_array_equal(swept.samples[0].logdensity, direct.logdensity)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["onehot", "integer"])
def test_batched_cells_ask_the_same_question_as_generate(kind):
    """Cells of a batched program sample the question generate samples (one-hot relaxation prior included),
    from the same starting points: equal draws up to float32 rounding of a different program. Measured: every
    position within 7.2e-7 of generate's on JAX 0.10 and 0.12 (92-99% bit-identical; XLA versions round a few
    operations of the two programs differently), while a chain that parted from generate's would differ by
    the scale of the target (~1)."""
    prior = jaxprobe.priors.DiagonalGaussian(np.zeros(5), np.full(5, 1.5))
    key = jax.random.key(4)
    swept = jaxprobe.sweep(key, PROBE, {"temperature": [0.1, 0.3]}, seed=1, prior=prior,
                           constraints=RESTRICTIONS[kind], step_size=0.05, **OPTIONS)
    for row, samples in zip(swept.rows, swept.samples):
        direct = jaxprobe.generate(jax.random.fold_in(key, 1), PROBE, temperature=row["temperature"], prior=prior,
                                   constraints=RESTRICTIONS[kind], step_size=0.05, **OPTIONS)
        np.testing.assert_allclose(samples.logdensity, direct.logdensity, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(samples.positions, direct.positions, rtol=0, atol=1e-5)


def test_question_splits_into_reference_and_tilt():
    prior = jaxprobe.priors.StandardNormal()
    question = Question(PROBE, 0.25, prior, [OneHot([2, 3, 4], 0.5), Box(-1.0, 1.0, indices=[0])], dim=5)
    z = jnp.array([0.3, -0.2, 0.1, 0.4])
    total = question.logdensity(z)
    np.testing.assert_allclose(total, question.reference_logdensity(z) + question.tilt(z), rtol=1e-6)
    x = question.to_data(z)
    np.testing.assert_allclose(question.tilt(z), -_probe(x) / 0.25, rtol=1e-6)
    assert question == Question(PROBE, 0.25, prior, [OneHot([2, 3, 4], 0.5), Box(-1.0, 1.0, indices=[0])], dim=5)
    assert question != Question(PROBE, 0.5, prior, [OneHot([2, 3, 4], 0.5), Box(-1.0, 1.0, indices=[0])], dim=5)


def test_dimension_is_inferred_from_what_states_it():
    assert infer_dim(constraints=[Box(np.zeros(4), np.ones(4))]) == 4
    assert infer_dim(prior=jaxprobe.priors.DiagonalGaussian(np.zeros(3), 1.0)) == 3
    with pytest.raises(ValueError, match="disagrees between dim \\(2\\), prior \\(3\\)"):
        infer_dim(dim=2, prior=jaxprobe.priors.DiagonalGaussian(np.zeros(3), 1.0))
    with pytest.raises(ValueError, match="number of features is not known"):
        infer_dim()
    assert infer_dim(dim=np.int64(3)) == infer_dim(dim=np.array(3)) == 3
    with pytest.raises(TypeError, match="dim must be an int, got float"):
        infer_dim(dim=3.0)
    with pytest.raises(ValueError, match="dim must be >= 1, got 0"):
        infer_dim(dim=0)


def test_reference_draws_are_exact_where_they_can_be():
    """Truncated Gaussian on a Box and Dirichlet(α) on a group: the moments of the reference in data space."""
    prior = jaxprobe.priors.DiagonalGaussian(np.zeros(2), np.ones(2))
    question = Question(PROBE, 1.0, prior, [Box(0.0, np.inf, indices=[0]), Fixed([1], [0.3])], dim=2)
    z = question.reference.sample(jax.random.key(0), 20000)
    x = np.asarray(jax.vmap(question.to_data)(z))
    np.testing.assert_allclose(x[:, 0].mean(), np.sqrt(2 / np.pi), atol=4 * 0.6 / np.sqrt(20000))  # half-normal
    np.testing.assert_array_equal(x[:, 1], np.float32(0.3))
    grouped = Question(PROBE, 1.0, None, [OneHot([0, 1, 2], [2.0, 1.0, 1.0]), Box(0.0, 1.0, indices=[3, 4])], dim=5)
    x = np.asarray(jax.vmap(grouped.to_data)(grouped.reference.sample(jax.random.key(1), 20000)))
    np.testing.assert_allclose(x[:, :3].mean(axis=0), [0.5, 0.25, 0.25], atol=4 * 0.25 / np.sqrt(20000))
    np.testing.assert_allclose(x[:, 3:].mean(axis=0), [0.5, 0.5], atol=4 * 0.3 / np.sqrt(20000))
    with pytest.raises(ValueError, match="improper"):
        Question(PROBE, 1.0, None, None, dim=5).reference.check()
    with pytest.raises(ValueError, match="Gaussian prior over one-hot"):
        Question(PROBE, 1.0, jaxprobe.priors.StandardNormal(), [OneHot([0, 1])], dim=5).reference.check()
