"""jaxprobe.reconstruct: known answers first.

Ground truth: two classes with p(x | y) = N(μ_y, Σ) in 2-D. With the Bayes-optimal (logistic) model and
the true mixture prior, the reconstruction posterior IS N(μ_y, Σ): means and covariances must match
within ESS-derived Monte-Carlo errors and the KL estimates must lie within the spread the same
estimators show on exact draws (their error at zero divergence).
"""

import numpy as np
import pytest
import scipy.stats
from tests.conftest import mc_check_mean

import jax
import jax.numpy as jnp

import jaxprobe
from jaxprobe import reconstruct as R

GROUND_TRUTH = R.GaussianClasses(means=[[1.0, 0.0], [-1.0, 0.5]], covariance=[[1.0, 0.3], [0.3, 0.8]],
                                 weights=[0.4, 0.6])
NUM_CHAINS, NUM_WARMUP, NUM_SAMPLES = 128, 300, 300


def _numpy_predict_proba(calls):
    """A host-only predict_proba (float64 NumPy) of the Bayes-optimal model that records batch sizes."""
    weights, bias = GROUND_TRUTH.logits()

    def predict_proba(x):
        calls.append(np.shape(x))
        logits = np.asarray(x) @ weights.T + bias
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        return p / p.sum(axis=1, keepdims=True)

    return predict_proba


@pytest.fixture(scope="module", params=["jax-rwmh", "callback-rwmh", "jax-mala", "jax-smc"])
def ground_truth_run(request):
    path, sampler = request.param.split("-")
    if path == "jax":
        model = GROUND_TRUTH.bayes_classifier()
    else:
        model = R.BlackBoxClassifier(_numpy_predict_proba([]), 2, 2)
    reconstruction = R.reconstruct(jax.random.key(3), model, GROUND_TRUTH.prior(), num_chains=NUM_CHAINS,
                                   num_warmup=NUM_WARMUP, num_samples=NUM_SAMPLES, sampler=sampler,
                                   chunk_size=NUM_SAMPLES)
    return request.param, reconstruction


@pytest.mark.slow
def test_bayes_model_and_true_prior_recover_class_conditionals(ground_truth_run):
    """Means and (co)variances of p̂(x | y) equal N(μ_y, Σ)'s within 4 MC standard errors (ESS)."""
    _, reconstruction = ground_truth_run
    assert reconstruction.draws.shape == (NUM_CHAINS, NUM_SAMPLES, 2, 2)
    # First and second moments of both classes as one (C, N, 10) table: one ESS computation.
    columns, truth = [], []
    for label in range(2):
        draws = reconstruction.class_draws(label)
        mean = GROUND_TRUTH.means[label]
        centered = draws - mean
        columns += [draws[..., 0], draws[..., 1]]
        truth += list(mean)
        for i, j in [(0, 0), (1, 1), (0, 1)]:
            columns.append(centered[..., i] * centered[..., j])
            truth.append(GROUND_TRUTH.covariance[i, j])
    mc_check_mean(np.stack(columns, axis=-1), np.array(truth))
    # p̂(y) = E_prior[p(y | x)] = π_y for the Bayes model and the true prior (1024+ prior draws).
    np.testing.assert_allclose(reconstruction.class_weights, GROUND_TRUTH.weights, atol=0.05)


def _null_kl(label, num_true, num_reconstructed, replicates=30):
    """KL estimates between two exact independent samples of p(x | y): the estimators' error at zero."""
    rng = np.random.default_rng(label)
    cholesky = np.linalg.cholesky(GROUND_TRUTH.covariance)
    gauss, knn = [], []
    for _ in range(replicates):
        p = GROUND_TRUTH.means[label] + rng.standard_normal((num_true, 2)) @ cholesky.T
        q = GROUND_TRUTH.means[label] + rng.standard_normal((num_reconstructed, 2)) @ cholesky.T
        gauss.append(R.gaussian_kl_from_samples(p, q))
        knn.append(R.knn_kl(p, q, k=5))
    return np.array(gauss), np.array(knn)


def test_kl_of_exact_reconstruction_is_within_estimator_error_of_zero(ground_truth_run):
    _, reconstruction = ground_truth_run
    x_true, y_true = GROUND_TRUTH.sample(jax.random.key(11), 1000)
    # Every 50th draw of every chain: nearly independent draws (RWMH in 4-D decorrelates in ~20 steps).
    thinned = {label: reconstruction.class_draws(label)[:, ::50].reshape(-1, 2) for label in range(2)}
    report = R.fidelity(x_true, y_true, thinned, k=5, max_reconstructed=None)
    for result in report:
        num_true = int(np.sum(y_true == result.label))
        gauss, knn = _null_kl(result.label, num_true, thinned[result.label].shape[0])
        assert abs(result.gaussian - gauss.mean()) < 4 * gauss.std() + 1e-3, (result.gaussian, gauss.mean(),
                                                                              gauss.std())
        assert abs(result.knn - knn.mean()) < 4 * knn.std(), (result.knn, knn.mean(), knn.std())
        assert result.gaussian_marginals.shape == (2,) and result.knn_marginals.shape == (2,)


def test_callback_is_called_once_per_step_for_all_chains_and_classes():
    calls = []
    model = R.BlackBoxClassifier(_numpy_predict_proba(calls), 2, 2, vmap_method="broadcast_all")
    assert calls == [(1, 2)]  # the constructor's shape check
    calls.clear()
    num_chains, num_samples, thin = 16, 10, 3
    # A given step size and no warmup: two compiled pieces only (init and the run), to keep this cheap.
    R.reconstruct(0, model, GROUND_TRUTH.prior(), num_chains=num_chains, num_warmup=0, step_size=0.5,
                  num_samples=num_samples, thin=thin, num_candidates=64)
    # 1 call for the importance-resampled start, then 1 (init) + one per transition, never one per chain.
    assert calls[0] == (64, 2)
    engine_calls = calls[1:]
    assert len(engine_calls) == 1 + num_samples * thin
    assert all(shape == (num_chains * 2, 2) for shape in engine_calls), set(engine_calls)
    assert model.num_calls == len(calls)


def test_unsupported_pipeline_falls_back_to_callback_and_gradient_samplers_are_refused():
    """A Pipeline of supported steps is imported as pure JAX (differentiable); one with a step from_sklearn
    cannot copy runs as a black box through the callback, where gradient samplers are refused."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures, StandardScaler

    x, y = GROUND_TRUTH.sample(0, 200)
    supported = make_pipeline(StandardScaler(), LogisticRegression()).fit(x, y)
    imported = R.as_classifier(supported)
    assert isinstance(imported, R.JaxClassifier) and imported.differentiable
    np.testing.assert_allclose(np.asarray(imported.probabilities(jnp.asarray(x[:5], jnp.float32))),
                               supported.predict_proba(x[:5]), atol=1e-5)
    pipeline = make_pipeline(PolynomialFeatures(2), LogisticRegression(max_iter=1000)).fit(x, y)
    classifier = R.as_classifier(pipeline)
    assert isinstance(classifier, R.BlackBoxClassifier)
    np.testing.assert_allclose(classifier.probabilities(x[:5]), pipeline.predict_proba(x[:5]))
    with pytest.raises(ValueError, match="sampler='rwmh'"):
        R.reconstruct(0, pipeline, GROUND_TRUTH.prior(), sampler="mala")


def test_bad_arguments_raise_before_compiling():
    prior = GROUND_TRUTH.prior()
    model = GROUND_TRUTH.bayes_classifier()
    with pytest.raises(ValueError, match="sampler"):
        R.reconstruct(0, model, prior, sampler="gibbs")
    with pytest.raises(ValueError, match="num_chains"):
        R.reconstruct(0, model, prior, num_chains=0)
    with pytest.raises(ValueError, match="temperature"):
        R.reconstruct(0, model, prior, temperature=-1.0)
    with pytest.raises(ValueError, match="prior"):
        R.reconstruct(0, model, jaxprobe.priors.Gaussian(np.zeros(3), np.eye(3)))
    with pytest.raises(TypeError, match="prior"):
        R.reconstruct(0, model, lambda x: 0.0)
    with pytest.raises(ValueError, match="predict_proba must return"):
        R.BlackBoxClassifier(lambda x: np.ones((len(x), 3)) / 3, 2, 2)
    with pytest.raises(ValueError, match="vmap_method"):
        R.BlackBoxClassifier(_numpy_predict_proba([]), 2, 2, vmap_method="sequential")
    with pytest.raises(ValueError, match="covariance_scale"):
        R.misspecify(prior, covariance_scale=0.0)
    impossible = R.JaxClassifier(lambda x: jnp.array([1.0, 0.0]) + 0.0 * x[0], 2, 2)
    with pytest.raises(ValueError, match="classes \\[1\\]"):
        R.reconstruct(0, impossible, prior)


@pytest.mark.parametrize("value, error", [("8", TypeError), (True, TypeError), (2.0, TypeError), (0, ValueError),
                                          (-3, ValueError)])
def test_integer_arguments_refuse_wrong_types_and_values(value, error):
    """Counts go through check_int: TypeError for a non-int (a string, a bool, 2.0), ValueError below 1."""
    prior = GROUND_TRUTH.prior()
    model = GROUND_TRUTH.bayes_classifier()
    with pytest.raises(error, match="num_chains"):
        R.reconstruct(0, model, prior, num_chains=value)
    with pytest.raises(error, match="num_candidates"):
        R.reconstruct(0, model, prior, num_chains=4, num_candidates=value)
    with pytest.raises(error, match="num_samples"):
        GROUND_TRUTH.sample(0, value)
    with pytest.raises(error, match="k"):
        R.knn_kl(np.arange(20.0).reshape(10, 2), np.arange(20.0).reshape(10, 2) + 0.5, k=value)


# ---------------------------------------------------------------- priors (closed forms, no sampling)


def test_gaussian_mixture_and_kde_match_scipy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 2))
    prior = GROUND_TRUTH.prior()
    expected = np.log(sum(w * scipy.stats.multivariate_normal(m, GROUND_TRUTH.covariance).pdf(x)
                          for w, m in zip(GROUND_TRUTH.weights, GROUND_TRUTH.means)))
    np.testing.assert_allclose(jax.vmap(prior)(jnp.asarray(x, jnp.float32)), expected, rtol=1e-5)
    per_component = R.GaussianMixture([1.0, 3.0], GROUND_TRUTH.means, np.stack([np.eye(2), 2 * np.eye(2)]))
    expected = np.log(0.25 * scipy.stats.multivariate_normal(GROUND_TRUTH.means[0], np.eye(2)).pdf(x)
                      + 0.75 * scipy.stats.multivariate_normal(GROUND_TRUTH.means[1], 2 * np.eye(2)).pdf(x))
    np.testing.assert_allclose(jax.vmap(per_component)(jnp.asarray(x, jnp.float32)), expected, rtol=1e-5)
    public = rng.standard_normal((40, 2)) @ np.array([[1.0, 0.0], [0.5, 0.7]])
    kde = R.kernel_density(public)
    np.testing.assert_allclose(jax.vmap(kde)(jnp.asarray(x, jnp.float32)),
                               scipy.stats.gaussian_kde(public.T, bw_method="scott").logpdf(x.T), rtol=1e-5)
    draws = np.asarray(per_component.sample(jax.random.key(0), 4096))
    mean, covariance = R.prior_moments(per_component)
    assert np.all(np.abs(draws.mean(0) - mean) < 4 * np.sqrt(np.diag(covariance) / 4096))
    np.testing.assert_allclose(np.cov(draws.T), covariance, atol=0.2)


@pytest.mark.parametrize("family", ["gaussian", "diagonal", "box", "mixture", "standard"])
def test_misspecify_shifts_mean_by_k_sd_and_scales_covariance(family):
    priors = {"gaussian": jaxprobe.priors.Gaussian([1.0, -1.0], [[2.0, 0.5], [0.5, 1.0]]),
              "diagonal": jaxprobe.priors.DiagonalGaussian([1.0, -1.0], [2.0, 0.5]),
              "box": jaxprobe.priors.UniformBox([0.0, -1.0], [1.0, 3.0]),
              "mixture": GROUND_TRUTH.prior(),
              "standard": jaxprobe.priors.StandardNormal((2,))}
    prior = priors[family]
    mean, covariance = R.prior_moments(prior)
    shifted = R.misspecify(prior, mean_shift=1.5, covariance_scale=2.0)
    new_mean, new_covariance = R.prior_moments(shifted)
    np.testing.assert_allclose(new_mean, mean + 1.5 * np.sqrt(np.diag(covariance)), rtol=1e-12)
    np.testing.assert_allclose(new_covariance, 2.0 * covariance, rtol=1e-12)
    unchanged = R.prior_moments(R.misspecify(prior))
    np.testing.assert_allclose(unchanged[0], mean)
    np.testing.assert_allclose(unchanged[1], covariance)


def test_fit_gaussian():
    rng = np.random.default_rng(1)
    sample = rng.standard_normal((500, 3)) * [1.0, 2.0, 3.0]
    full = R.fit_gaussian(sample, shrinkage=None)
    np.testing.assert_allclose(full.covariance, np.cov(sample.T))
    diagonal = R.fit_gaussian(sample, kind="diagonal")
    np.testing.assert_allclose(diagonal.scale, sample.std(0, ddof=1))
    with pytest.raises(ValueError, match="constant columns \\[1\\]"):
        R.fit_gaussian(np.c_[sample[:, :1], np.ones(500)])


# ---------------------------------------------------------------- KL estimators


def test_gaussian_kl_closed_form_and_knn_estimator():
    # KL(N(0,1) || N(1, 4)) = ½(1/4 + 1/4 − 1 + log 4)
    expected = 0.5 * (0.25 + 0.25 - 1.0 + np.log(4.0))
    assert R.gaussian_kl([0.0], [[1.0]], [1.0], [[4.0]]) == pytest.approx(expected, rel=1e-12)
    rng = np.random.default_rng(2)
    p = rng.standard_normal((3000, 2))
    q = 1.0 + 2.0 * rng.standard_normal((3000, 2))
    exact = 2 * expected  # independent coordinates add
    assert R.gaussian_kl_from_samples(p, q) == pytest.approx(exact, abs=0.05)
    assert R.knn_kl(p, q, k=5) == pytest.approx(exact, abs=0.1)
    np.testing.assert_allclose(R.gaussian_kl_marginals(p, q), expected, atol=0.05)
    np.testing.assert_allclose(R.knn_kl_marginals(p, q, k=5), expected, atol=0.1)
    with pytest.raises(ValueError, match="distinct"):
        R.knn_kl(np.zeros((10, 2)), q)


@pytest.mark.parametrize("ground_truth_run", ["jax-rwmh"], indirect=True)  # one of the three runs is enough
def test_synthetic_dataset_and_accuracy(ground_truth_run):
    _, reconstruction = ground_truth_run
    from sklearn.linear_model import LogisticRegression

    x, y = reconstruction.synthetic_dataset(0, 1001, class_proportions=[0.4, 0.6])
    assert x.shape == (1001, 2) and np.bincount(y).tolist() == [400, 601]
    x_train, y_train = GROUND_TRUTH.sample(1, 500)
    x_test, y_test = GROUND_TRUTH.sample(2, 2000)
    base = LogisticRegression().fit(x_train, y_train)
    result = R.synthetic_accuracy(base, x, y, x_test, y_test)
    # Both are near the Bayes accuracy of this problem; the synthetic model is as good as the base.
    assert result["ratio"] > 0.95, result


def test_reconstruction_tables_check_their_integer_arguments():
    result = R.Reconstruction(None, np.zeros((1, 3, 2, 2)), np.array([0.5, 0.5]), np.zeros(2), np.eye(2))
    assert result.class_draws(np.int64(1)).shape == (1, 3, 2)
    with pytest.raises(TypeError, match="label"):
        result.class_draws(1.0)
    with pytest.raises(ValueError, match="label"):
        result.class_draws(2)
    with pytest.raises(TypeError, match="num_samples"):
        result.synthetic_dataset(0, 2.0)
    with pytest.raises(ValueError, match="num_samples"):
        result.synthetic_dataset(0, 0)
