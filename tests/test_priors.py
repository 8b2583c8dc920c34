"""Priors against SciPy's densities; the jaxprobe command end to end."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import jaxprobe
from jaxprobe import priors


def test_standard_normal_matches_scipy():
    x = np.array([0.3, -1.2, 2.0], np.float32)
    np.testing.assert_allclose(float(priors.StandardNormal()(jnp.asarray(x))), stats.norm.logpdf(x).sum(), rtol=1e-6)
    tree = {"a": jnp.asarray(x[:2]), "b": jnp.asarray(x[2:])}
    np.testing.assert_allclose(float(priors.StandardNormal()(tree)), stats.norm.logpdf(x).sum(), rtol=1e-6)


def test_diagonal_gaussian_matches_scipy():
    mean, scale = np.array([1.0, -2.0]), np.array([0.5, 3.0])
    x = np.array([0.2, 1.0], np.float32)
    prior = priors.DiagonalGaussian(mean, scale)
    np.testing.assert_allclose(float(prior(jnp.asarray(x))), stats.norm.logpdf(x, mean, scale).sum(), rtol=1e-6)


def test_full_gaussian_matches_scipy():
    mean = np.array([1.0, 0.0, -1.0])
    covariance = np.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 0.5]])
    x = np.array([0.3, 0.2, -0.4], np.float32)
    prior = priors.Gaussian(mean, covariance)
    np.testing.assert_allclose(float(prior(jnp.asarray(x))), stats.multivariate_normal(mean, covariance).logpdf(x),
                               rtol=1e-5)
    draws = np.asarray(prior.sample(jax.random.key(0), 20000))
    np.testing.assert_allclose(np.cov(draws, rowvar=False), covariance, atol=0.06)


def test_uniform_box_density_and_support():
    prior = priors.UniformBox([0.0, -1.0], [2.0, 1.0])
    np.testing.assert_allclose(float(prior(jnp.array([1.0, 0.0]))), -np.log(4.0), rtol=1e-6)
    assert float(prior(jnp.array([2.5, 0.0]))) == -np.inf
    draws = np.asarray(prior.sample(jax.random.key(0), 1000))
    assert draws.min() >= -1.0 and draws[:, 0].max() <= 2.0


def test_no_prior_is_flat():
    assert float(priors.NoPrior()(jnp.array([5.0, -3.0]))) == 0.0


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: priors.DiagonalGaussian([0.0, 0.0], [1.0, -1.0]), "scale must be > 0"),
        (lambda: priors.DiagonalGaussian([0.0, 0.0], [1.0, 1.0, 1.0]), "scale must be a scalar or have the shape"),
        (lambda: priors.Gaussian([0.0, 0.0], [[1.0, 2.0], [2.0, 1.0]]), "positive definite"),
        (lambda: priors.Gaussian([0.0, 0.0], [[1.0, 0.5], [0.0, 1.0]]), "symmetric"),
        (lambda: priors.Gaussian([0.0, 0.0], np.eye(3)), r"covariance must have shape \(2, 2\)"),
        (lambda: priors.UniformBox([0.0, 1.0], [1.0, 1.0]), "low < high"),
        (lambda: priors.DiagonalGaussian([np.nan], [1.0]), "mean must be finite"),
    ],
)
def test_priors_reject_bad_parameters(build, match):
    with pytest.raises(ValueError, match=match):
        build()


@pytest.mark.slow
def test_sampling_a_prior_recovers_it():
    """gibbs with a zero loss samples the prior itself: a diagonal Gaussian, checked by moments."""
    from tests.conftest import mc_check_mean, mc_check_second_moment

    prior = priors.DiagonalGaussian([1.0, -2.0, 0.5], [0.5, 2.0, 1.0])
    logdensity = jaxprobe.gibbs(lambda x: jnp.zeros(()), 1.0, prior)
    result = jaxprobe.sample(0, logdensity, prior.sample(jax.random.key(1), 32), sampler="hmc", num_samples=300,
                             num_warmup=300, progress=False)
    mc_check_mean(result.positions, prior.mean)
    mc_check_second_moment(result.positions, prior.mean, np.diag(prior.scale**2))


