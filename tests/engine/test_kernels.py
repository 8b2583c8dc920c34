"""Samplers against known answers: Monte-Carlo error from the ESS, not shapes."""

import jax
import numpy as np
import pytest
from tests.conftest import mc_check_mean, mc_check_second_moment

import jaxprobe

DIM = 20


def _ill_conditioned_gaussian():
    """A correlated 20-D Gaussian whose covariance has condition number 100."""
    rng = np.random.default_rng(0)
    rotation, _ = np.linalg.qr(rng.normal(size=(DIM, DIM)))
    eigenvalues = np.logspace(-2, 0, DIM)  # condition number exactly 100
    covariance = rotation @ np.diag(eigenvalues) @ rotation.T
    mean = rng.normal(size=DIM)
    return mean, covariance


GAUSSIAN_MEAN, GAUSSIAN_COV = _ill_conditioned_gaussian()
_PRECISION = np.linalg.inv(GAUSSIAN_COV)


def gaussian_logdensity(x):
    centered = x - GAUSSIAN_MEAN.astype(np.float32)
    return -0.5 * centered @ (_PRECISION.astype(np.float32) @ centered)


SETTINGS = {
    # sampler: (num_chains, num_warmup, num_samples, thin)
    "mala": (64, 600, 500, 4),
    "rwmh": (64, 800, 500, 10),
    "hmc": (64, 500, 400, 1),
    "nuts": (32, 400, 300, 1),
    "chees": (128, 400, 300, 1),
}


def test_condition_number_is_at_least_100():
    assert np.linalg.cond(GAUSSIAN_COV) >= 99.9


@pytest.mark.slow  # the known answers of every sampler (25 s cold for ChEES alone): CI's slow pass
@pytest.mark.parametrize("sampler", sorted(SETTINGS))
def test_ill_conditioned_gaussian_moments(sampler):
    num_chains, num_warmup, num_samples, thin = SETTINGS[sampler]
    init = jax.random.normal(jax.random.key(1), (num_chains, DIM)) + GAUSSIAN_MEAN[None, :].astype(np.float32)
    result = jaxprobe.sample(jax.random.key(2), gaussian_logdensity, init, sampler=sampler,
                             num_samples=num_samples, num_warmup=num_warmup, thin=thin, progress=False)
    assert result.positions.shape == (num_chains, num_samples, DIM)
    mc_check_mean(result.positions, GAUSSIAN_MEAN)
    mc_check_second_moment(result.positions, GAUSSIAN_MEAN, GAUSSIAN_COV)
    assert result.num_nonfinite.sum() == 0


def banana_logdensity(x):
    """Rosenbrock-type banana: x0 ~ N(0, 1), x1 | x0 ~ N(x0², 1)."""
    return -0.5 * x[0] ** 2 - 0.5 * (x[1] - x[0] ** 2) ** 2


# R̂ − 1 shrinks like 1/(ESS per chain): NUTS, the least efficient per draw here, gets
# fewer, longer chains; ChEES, tuned from cross-chain statistics, gets more chains.
BANANA_SETTINGS = {"hmc": (64, 1000), "nuts": (16, 3000), "chees": (128, 1000)}


@pytest.mark.slow  # 22 s cold for NUTS alone
@pytest.mark.parametrize("sampler", sorted(BANANA_SETTINGS))
def test_banana_split_rhat(sampler):
    num_chains, num_samples = BANANA_SETTINGS[sampler]
    init = jax.random.normal(jax.random.key(3), (num_chains, 2))
    result = jaxprobe.sample(jax.random.key(4), banana_logdensity, init, sampler=sampler, num_samples=num_samples,
                             num_warmup=500, progress=False)
    summary = result.summary()
    assert np.all(summary.rhat < 1.01), summary
    # Known moments: E[x0] = 0, E[x1] = E[x0²] = 1.
    mc_check_mean(result.positions, np.array([0.0, 1.0]))


@pytest.mark.slow
def test_linear_regression_fixed_label_closed_form():
    """Probing paper, Appendix A: with a least-squares model ŷ(x) = ξ·x + b, the fixed-label
    probe G(x) = ½(ŷ(x) − w)² and the Gaussian N(x̄, S) fitted to the data as prior, the
    samples are N(f̂, Σ) with f̂ = x̄ + Cov(X, ŷ)(w − mean ŷ)/(τ + Var ŷ) and
    Σ⁻¹ = S⁻¹ + ξξᵀ/τ (the paper's Σ⁻¹ = τS⁻¹ + ξξᵀ up to its overall factor 1/τ)."""
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import LinearRegression

    x, y = load_diabetes(return_X_y=True)
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    y = (y - y.mean()) / y.std()
    model = LinearRegression().fit(x, y)
    xi, b = model.coef_, model.intercept_
    y_hat = model.predict(x)
    x_bar, s = x.mean(axis=0), np.cov(x, rowvar=False, bias=True)
    tau, w = 0.1, 1.5  # ask for inputs the model maps to 1.5 sd above the mean outcome

    cov_x_yhat = ((x - x_bar) * (y_hat - y_hat.mean())[:, None]).mean(axis=0)
    var_yhat = y_hat.var()
    np.testing.assert_allclose(cov_x_yhat, s @ xi, rtol=1e-8, atol=1e-10)  # the paper's identity
    f_hat = x_bar + cov_x_yhat * (w - y_hat.mean()) / (tau + var_yhat)
    sigma = np.linalg.inv(np.linalg.inv(s) + np.outer(xi, xi) / tau)

    prior = jaxprobe.priors.Gaussian(x_bar, s)
    probe = lambda z: 0.5 * (z @ xi.astype(np.float32) + np.float32(b) - w) ** 2
    logdensity = jaxprobe.gibbs(probe, tau, prior)
    num_chains = 64
    init = prior.sample(jax.random.key(5), num_chains)
    result = jaxprobe.sample(jax.random.key(6), logdensity, init, sampler="mala", num_samples=400,
                             num_warmup=400, thin=2, progress=False)
    mc_check_mean(result.positions, f_hat)
    dim = x.shape[1]
    pairs = [(i, j) for i in range(dim) for j in range(i, dim)]
    mc_check_second_moment(result.positions, f_hat, sigma, pairs)
    # The model's prediction on the samples: mean w' = ξ·f̂ + b, close to but short of w (shrinkage).
    predictions = result.positions @ xi + b
    assert abs(predictions.mean() - (f_hat @ xi + b)) < 0.05
