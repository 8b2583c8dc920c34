"""sampler="tree_gibbs": exact coordinate-wise Gibbs over the split intervals of tree ensembles.

Known answers first. A stump ensemble with known leaf probabilities and a Gaussian prior has a posterior
that is a mixture of truncated Gaussians in closed form; a two-feature interaction tree with a correlated
Gaussian prior has one computed by quadrature on a fine grid. Means, variances and interval (cell)
masses must match within 4 Monte-Carlo standard errors from the ESS. Then real ensembles (scikit-learn
trees, forests, gradient boosting, XGBoost) through ``reconstruct`` against importance sampling from the
prior, and the refusals, each before anything compiles.
"""

import numpy as np
import pytest
import scipy.special
import scipy.stats
from tests.conftest import mc_check_mean, mc_check_second_moment

import jax
import jax.numpy as jnp

import jaxprobe
from jaxprobe import priors, probes
from jaxprobe import reconstruct as R
from jaxprobe.constraints import Box, Fixed, OneHot
from jaxprobe.samplers import tree_gibbs
from jaxprobe.models.trees import TreeEnsembleModel
from jaxprobe.question import Question
from tests.samplers.ensembles import stump_ensemble

_SLOW = pytest.mark.slow  # cases the default run leaves to the slow pass (CI runs both)

KEY = jax.random.key(20261124)


# ------------------------------------------------------------------ hand-built ensembles


def interaction_tree():
    """One depth-2 tree: x0 <= 0 → (x1 <= 0.5 → A, else B); x0 > 0 → (x1 <= -0.3 → C, else D)."""
    p1 = {3: 0.1, 4: 0.8, 5: 0.6, 6: 0.3}  # A, B, C, D
    values = np.zeros((1, 7, 2))
    for node, p in p1.items():
        values[0, node] = [1 - p, p]
    model = TreeEnsembleModel(feature=[[0, 1, 1, 0, 0, 0, 0]], threshold=[[0.0, 0.5, -0.3, 0, 0, 0, 0]],
                              left=[[1, 3, 5, 3, 4, 5, 6]], right=[[2, 4, 6, 3, 4, 5, 6]], leaf_values=values,
                              base_score=np.zeros(2), link="identity", num_features=2, is_classifier=True)
    return model, p1


def mixture_of_truncated_normals(cuts, p1, mean, sd, tau):
    """Exact posterior of x ~ N(mean, sd²) · p1(interval)^(1/τ): interval masses, mean and variance."""
    z = (np.asarray(cuts) - mean) / sd
    prior_mass = np.diff(scipy.stats.norm.cdf(z))
    weights = np.asarray(p1) ** (1 / tau) * prior_mass
    weights /= weights.sum()
    moments = [scipy.stats.truncnorm(z[i], z[i + 1], loc=mean, scale=sd) for i in range(len(p1))]
    first = sum(w * m.mean() for w, m in zip(weights, moments))
    second = sum(w * (m.var() + m.mean() ** 2) for w, m in zip(weights, moments))
    return weights, first, second - first**2


def indicator_draws(draws, cuts):
    """``(C, N, I)`` indicators of the intervals ``(cuts[i], cuts[i + 1]]``."""
    return np.stack([(draws > cuts[i]) & (draws <= cuts[i + 1]) for i in range(len(cuts) - 1)],
                    axis=-1).astype(np.float64)


# ------------------------------------------------------------------ building blocks


def test_thresholds_and_feature_trees_are_extracted_once_at_import():
    model = stump_ensemble([(0, 0.3, 0.2, 0.7), (0, -1.0, 0.4, 0.9), (2, 0.3, 0.5, 0.1), (0, 0.3, 0.6, 0.6)], 3)
    assert model.split_thresholds.shape == (3, 2)
    np.testing.assert_array_equal(model.split_counts, [2, 0, 1])
    np.testing.assert_array_equal(model.split_thresholds[0], np.float32([-1.0, 0.3]))
    assert model.split_thresholds[2, 0] == np.float32(0.3) and np.isinf(model.split_thresholds[2, 1])
    np.testing.assert_array_equal(model.feature_tree_counts, [3, 0, 1])
    np.testing.assert_array_equal(model.feature_trees[0], [0, 1, 3])


def test_evaluation_along_a_coordinate_equals_full_evaluation():
    """raw_score_along / output_along / update_leaves agree with evaluating the modified points in full."""
    from sklearn.datasets import load_iris
    from sklearn.ensemble import GradientBoostingClassifier

    from jaxprobe.models.trees import tree_ensemble_from_sklearn

    x, y = load_iris(return_X_y=True)
    model = tree_ensemble_from_sklearn(GradientBoostingClassifier(n_estimators=5, max_depth=2,
                                                                  random_state=0).fit(x, y))
    point = jnp.asarray(x[60], jnp.float32)
    values = jnp.concatenate([jnp.asarray(model.split_thresholds[2, :4]), jnp.linspace(0.0, 8.0, 9)])

    @jax.jit
    def compare(feature):  # one program for every feature: the feature is traced
        full_raw = jax.vmap(lambda v: model.raw_score(point.at[feature].set(v)))(values)
        full_output = jax.vmap(lambda v: model(point.at[feature].set(v)))(values)
        moved = point.at[feature].set(5.0)
        return (full_raw, model.raw_score_along(point, feature, values),
                model.raw_score_along(point, feature, values, leaves=model.leaves(point)),
                full_output, model.output_along(point, feature, values),
                model.leaves(moved), model.update_leaves(model.leaves(point), moved, feature))

    for feature in range(4):
        full_raw, along, along_cached, full_output, output, leaves, updated = compare(jnp.int32(feature))
        np.testing.assert_allclose(along, full_raw, atol=2e-6)
        np.testing.assert_allclose(along_cached, full_raw, atol=2e-6)
        np.testing.assert_allclose(output, full_output, atol=1e-6)
        np.testing.assert_array_equal(updated, leaves)


@_SLOW  # 14 s cold for boosting alone
@pytest.mark.parametrize("kind", ["boosting", "forest", "deep_tree"])
def test_complete_trees_give_the_walks_leaves_and_scores(kind):
    """Ensembles up to COMPLETE_MAX_DEPTH are also stored as complete trees: leaves() equals the fori_loop walk
    leaf for leaf, and scores_along_complete (dense decisions, one matrix product) equals scores_along; a deeper
    ensemble keeps the walk (complete_depth None) and tree_gibbs still samples it."""
    from sklearn.datasets import load_iris
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
    from sklearn.tree import DecisionTreeClassifier

    from jaxprobe.models.trees import COMPLETE_MAX_DEPTH, tree_ensemble_from_sklearn

    x, y = load_iris(return_X_y=True)
    rng = np.random.default_rng(3)
    if kind == "boosting":
        estimator = GradientBoostingClassifier(n_estimators=6, max_depth=3, random_state=0).fit(x, y)
    elif kind == "forest":
        estimator = RandomForestClassifier(n_estimators=5, max_depth=5, random_state=0).fit(x, y)
    else:  # deeper than COMPLETE_MAX_DEPTH: a classification tree grown to purity on noisy features
        estimator = DecisionTreeClassifier(random_state=0).fit(x + rng.normal(scale=0.5, size=x.shape), y)
    model = tree_ensemble_from_sklearn(estimator)
    points = jnp.asarray(x[::7] + rng.normal(scale=0.2, size=x[::7].shape), jnp.float32)
    if kind == "deep_tree":
        assert model.max_depth > COMPLETE_MAX_DEPTH and model.complete_depth is None
        with pytest.raises(ValueError, match="COMPLETE_MAX_DEPTH"):
            model.scores_along_complete(points[0], 0, points[:3, 0], model.raw_score(points[0]))
        # tree_gibbs walks such trees instead; every draw lies where its class has positive probability.
        result = R.reconstruct(KEY, estimator, R.fit_gaussian(x, kind="diagonal"), sampler="tree_gibbs",
                               num_chains=8, num_samples=20, num_warmup=5, convergence="ignore")
        draws = np.asarray(result.draws, np.float32).reshape(-1, 3, 4)
        for label in range(3):
            assert np.all(np.asarray(model.predict_batch(draws[:, label]))[:, label] > 0)
        return
    assert model.complete_depth == model.max_depth
    walked = jax.vmap(lambda point: jax.lax.fori_loop(  # the walk, one gather per level
        0, model.max_depth,
        lambda _, node: jnp.where(point[model._feature[node]] <= model._threshold[node], model._left[node],
                                  model._right[node]), model._offsets))(points)
    np.testing.assert_array_equal(jax.vmap(model.leaves)(points), walked)
    for feature in range(4):
        values = jnp.concatenate([jnp.asarray(model.split_thresholds[feature, :model.split_counts[feature]]),
                                  jnp.float32([-50.0, 0.0, 50.0])])
        for point in points[:5]:
            leaves = model.leaves(point)
            raw = model.raw_score_of_leaves(leaves)
            walked_scores, _ = model.scores_along(point, feature, values, leaves, raw)
            dense = model.scores_along_complete(point, feature, values, raw)
            np.testing.assert_allclose(dense, walked_scores, atol=2e-6)


@pytest.mark.parametrize("lower, upper", [(10.0, 11.0), (-40.0, -39.5), (-1e-3, 2e-3), (3.0, np.inf),
                                          (-np.inf, -25.0), (-0.5, 60.0)])
def test_truncated_normal_is_exact_far_in_the_tails(lower, upper):
    """Moments of 40,000 draws against scipy's truncnorm; jax.random.truncated_normal fails at [10, 11]."""
    draws = np.asarray(tree_gibbs.truncated_standard_normal(KEY, jnp.full(40_000, lower, jnp.float32),
                                                            jnp.full(40_000, upper, jnp.float32)), np.float64)
    exact = scipy.stats.truncnorm(lower, upper)
    assert draws.min() >= lower and draws.max() <= upper
    assert abs(draws.mean() - exact.mean()) < 5 * exact.std() / 200 + 1e-6 * abs(exact.mean())
    assert abs(draws.std() / exact.std() - 1) < 0.03
    log_mass = float(tree_gibbs.log_interval_mass(jnp.float32(lower), jnp.float32(upper)))
    # float64 reference: the lower tail of whichever side the interval lies on.
    a, b = (-upper, -lower) if lower + upper > 0 else (lower, upper)
    log_a, log_b = scipy.special.log_ndtr(a), scipy.special.log_ndtr(b)
    expected = log_b + np.log(-np.expm1(log_a - log_b))
    assert abs(log_mass - expected) < 1e-5 * max(1.0, abs(expected))


# ------------------------------------------------------------------ ground truth


@_SLOW  # 48 s: the default run keeps the other ground-truth cases below
def test_stump_ensemble_posterior_is_a_mixture_of_truncated_normals():
    """Three stumps on x0 (and x1 untouched by any tree), prior N(0.4, 1.3²) × N(-1, 0.5²), τ = 0.5."""
    model = stump_ensemble([(0, -1.0, 0.2, 0.7), (0, 0.3, 0.4, 0.9), (0, 1.5, 0.5, 0.05)], 2)
    cuts = np.concatenate([[-np.inf], model.split_thresholds[0].astype(np.float64), [np.inf]])
    p1 = [np.mean([0.2, 0.4, 0.5]), np.mean([0.7, 0.4, 0.5]), np.mean([0.7, 0.9, 0.5]), np.mean([0.7, 0.9, 0.05])]
    masses, mean, variance = mixture_of_truncated_normals(cuts, p1, 0.4, 1.3, tau=0.5)
    samples = jaxprobe.generate(KEY, probes.fixed_label(model, 1), temperature=0.5, num_chains=64,
                                num_samples=400, num_warmup=10, sampler="tree_gibbs",
                                prior=priors.DiagonalGaussian([0.4, -1.0], [1.3, 0.5]),
                                sampler_options={"prior_moves": ()})  # pure coordinate-wise Gibbs
    assert samples.sampler == "tree_gibbs" and samples.positions.shape == (64, 400, 2)
    assert samples.verdict.converged, samples.verdict
    x0 = samples.positions[..., :1].astype(np.float64)
    mc_check_mean(indicator_draws(x0[..., 0], cuts), masses)
    mc_check_mean(samples.positions, np.array([mean, -1.0]))
    mc_check_second_moment(samples.positions, np.array([mean, -1.0]), np.diag([variance, 0.25]))


@_SLOW  # 32 s
def test_no_warmup_needs_no_step_size_and_is_still_exact():
    """Gibbs sweeps have no step size to adapt: ``num_warmup=0`` runs (it once asked for a step_size) and the
    stump posterior's mixture masses and mean still come out within Monte-Carlo error."""
    model = stump_ensemble([(0, -1.0, 0.2, 0.7), (0, 0.3, 0.4, 0.9), (0, 1.5, 0.5, 0.05)], 2)
    cuts = np.concatenate([[-np.inf], model.split_thresholds[0].astype(np.float64), [np.inf]])
    p1 = [np.mean([0.2, 0.4, 0.5]), np.mean([0.7, 0.4, 0.5]), np.mean([0.7, 0.9, 0.5]), np.mean([0.7, 0.9, 0.05])]
    masses, mean, _ = mixture_of_truncated_normals(cuts, p1, 0.4, 1.3, tau=0.5)
    samples = jaxprobe.generate(KEY, probes.fixed_label(model, 1), temperature=0.5, num_chains=32,
                                num_samples=150, num_warmup=0, sampler="tree_gibbs",
                                prior=priors.DiagonalGaussian([0.4, -1.0], [1.3, 0.5]))
    assert samples.positions.shape == (32, 150, 2)
    mc_check_mean(indicator_draws(samples.positions[..., 0].astype(np.float64), cuts), masses)
    mc_check_mean(samples.positions, np.array([mean, -1.0]))


def _grid_posterior(model, prior, tau, half_width=8.0, points=1201):
    """Posterior moments and cell masses of a 2-D target on a grid (trapezoid-free: cells are tiny)."""
    axis = np.linspace(-half_width, half_width, points)
    grid = np.stack(np.meshgrid(axis, axis, indexing="ij"), axis=-1).reshape(-1, 2).astype(np.float32)
    p1 = np.asarray(model.predict_batch(grid))[:, 1].astype(np.float64)
    log_prior = scipy.stats.multivariate_normal(prior.mean, prior.covariance).logpdf(grid.astype(np.float64))
    weight = np.exp(np.log(p1) / tau + log_prior - log_prior.max())
    weight /= weight.sum()
    grid = grid.astype(np.float64)
    mean = weight @ grid
    centered = grid - mean
    return weight, grid, mean, (weight[:, None] * centered).T @ centered


@pytest.mark.parametrize("scan, prior_moves", [pytest.param("systematic", (), marks=_SLOW),
                                                     pytest.param("random", None, marks=_SLOW)])
def test_interaction_tree_with_correlated_prior_matches_quadrature(scan, prior_moves):
    """A depth-2 tree over both features, full-covariance Gaussian prior: the 1-D conditionals come from the
    precision matrix; cell masses, means and covariance against a 1201² grid. Pure Gibbs sweeps, and random
    scans with the default prior moves. (The root splits at 0: the interval above it must not be evaluated
    at nextafter(0), a subnormal that XLA flushes to 0 on CPU.)"""
    model, _ = interaction_tree()
    prior = priors.Gaussian([0.2, -0.1], [[1.0, 0.6], [0.6, 1.5]])
    weight, grid, mean, covariance = _grid_posterior(model, prior, tau=1.0)
    cells = [(grid[:, 0] <= 0) & (grid[:, 1] <= 0.5), (grid[:, 0] <= 0) & (grid[:, 1] > 0.5),
             (grid[:, 0] > 0) & (grid[:, 1] <= -0.3), (grid[:, 0] > 0) & (grid[:, 1] > -0.3)]
    masses = np.array([weight[cell].sum() for cell in cells])
    samples = jaxprobe.generate(KEY, probes.fixed_label(model, 1), temperature=1.0, num_chains=64, num_samples=300,
                                num_warmup=20, sampler="tree_gibbs", prior=prior,
                                sampler_options={"scan": scan, "prior_moves": prior_moves})
    x = samples.positions.astype(np.float64)
    indicators = np.stack([(x[..., 0] <= 0) & (x[..., 1] <= 0.5), (x[..., 0] <= 0) & (x[..., 1] > 0.5),
                           (x[..., 0] > 0) & (x[..., 1] <= -0.3), (x[..., 0] > 0) & (x[..., 1] > -0.3)],
                          axis=-1).astype(np.float64)
    mc_check_mean(indicators, masses)
    mc_check_mean(x, mean)
    mc_check_second_moment(x, mean, covariance, pairs=[(0, 0), (1, 1), (0, 1)])


def _one_dimensional_truth(model, log_prior, low, high, tau=1.0, points=400_001):
    axis = np.linspace(low, high, points)
    p1 = np.asarray(model.predict_batch(axis[:, None].astype(np.float32)))[:, 1].astype(np.float64)
    log_weight = np.log(p1) / tau + log_prior(axis)
    weight = np.exp(log_weight - log_weight.max())
    weight /= weight.sum()
    mean = weight @ axis
    return mean, weight @ (axis - mean) ** 2


@pytest.mark.parametrize("kind", [pytest.param("mixture", marks=_SLOW), pytest.param("flat_box", marks=_SLOW),
                                  "gaussian_box_far_tail"])
def test_other_priors_match_one_dimensional_quadrature(kind):
    """A Gaussian mixture (data augmentation of the component), no prior within Box bounds, and a Gaussian
    prior whose mean lies 8 sd below a Box (every draw in the far tail)."""
    model = stump_ensemble([(0, -0.5, 0.2, 0.7), (0, 1.0, 0.6, 0.1)], 1)
    constraints, low, high = None, -12.0, 12.0
    if kind == "mixture":
        prior = R.GaussianMixture([0.3, 0.7], [[-1.0], [2.0]], [[[0.25]], [[0.5]]])
        log_prior = lambda t: np.logaddexp(np.log(0.3) + scipy.stats.norm.logpdf(t, -1.0, 0.5),  # noqa: E731
                                           np.log(0.7) + scipy.stats.norm.logpdf(t, 2.0, np.sqrt(0.5)))
    elif kind == "flat_box":
        prior, constraints, low, high = None, Box(-1.5, 2.5), -1.5, 2.5
        log_prior = np.zeros_like  # noqa: E731
    else:
        prior, constraints, low, high = priors.DiagonalGaussian([0.0], [1.0]), Box(8.0, 9.0), 8.0, 9.0
        log_prior = lambda t: scipy.stats.norm.logpdf(t)  # noqa: E731
    mean, variance = _one_dimensional_truth(model, log_prior, low, high)
    samples = jaxprobe.generate(KEY, probes.fixed_label(model, 1), temperature=1.0, num_chains=64, num_samples=400,
                                num_warmup=20, sampler="tree_gibbs", prior=prior, constraints=constraints, dim=1)
    assert samples.verdict.converged, samples.verdict
    assert samples.positions.min() >= low and samples.positions.max() <= high
    mc_check_mean(samples.positions, np.array([mean]))
    mc_check_second_moment(samples.positions, np.array([mean]), np.array([[variance]]))


def test_fixed_features_stay_fixed_and_model_contrast_of_two_ensembles_runs():
    first = stump_ensemble([(0, 0.0, 0.2, 0.8), (1, 0.5, 0.3, 0.6)], 3)
    second = stump_ensemble([(0, 0.4, 0.7, 0.1), (2, -0.2, 0.5, 0.4)], 3)
    probe = probes.model_contrast(first, second) + 0.5 * probes.prediction_risky(first)
    samples = jaxprobe.generate(KEY, probe, temperature=0.3, num_chains=16, num_samples=50, num_warmup=5,
                                sampler="tree_gibbs", prior=priors.StandardNormal(), dim=3,
                                constraints=Fixed([2], [0.25]), convergence="ignore")
    assert np.all(samples.positions[..., 2] == np.float32(0.25))
    assert np.all(np.isfinite(samples.logdensity))
    target = tree_gibbs.target_from_question(Question(probe, 0.3, priors.StandardNormal(), Fixed([2], [0.25]), 3))
    # Union of the two ensembles' thresholds: x0 {0, 0.4}, x1 {0.5}; x2 fixed: (3 + 2) evaluations per sweep.
    assert target.evaluations_per_sweep == 5 and len(target.ensembles) == 2


@pytest.mark.slow  # 13 s of compiles
def test_draws_do_not_depend_on_chunks_and_a_second_call_does_not_recompile(compile_counter):
    model, _ = interaction_tree()
    question = Question(probes.fixed_label(model, 0), 1.0, priors.StandardNormal(), dim=2)
    target = tree_gibbs.target_from_question(question)
    start = np.zeros((8, 1, 2), np.float32)
    one = tree_gibbs.sample(KEY, target, start, num_samples=30, num_warmup=7, chunk_size=10, convergence="ignore")
    with compile_counter:
        two = tree_gibbs.sample(KEY, target, start, num_samples=30, num_warmup=7, chunk_size=10,
                                convergence="ignore")
    assert compile_counter.count == 0
    np.testing.assert_array_equal(one.positions, two.positions)
    three = tree_gibbs.sample(KEY, target, start, num_samples=30, num_warmup=7, chunk_size=7, convergence="ignore")
    np.testing.assert_array_equal(one.positions, three.positions)
    density = jaxprobe.gibbs(question.probe.fn, 1.0, question.prior)
    np.testing.assert_allclose(one.logdensity, jax.vmap(jax.vmap(density))(jnp.asarray(one.positions)), rtol=1e-6)


# ------------------------------------------------------------------ real ensembles through reconstruct


def _fit(kind, data):
    from sklearn import datasets, ensemble, tree

    loader = {"iris": datasets.load_iris, "breast_cancer": datasets.load_breast_cancer}[data]
    x, y = loader(return_X_y=True)
    x = x[:, [0, 1, 4, 9]] if data == "breast_cancer" else x  # radius, texture, smoothness, fractal dimension
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    if kind == "xgboost":
        import xgboost

        model = xgboost.XGBClassifier(n_estimators=8, max_depth=2, learning_rate=0.5, random_state=0)
    else:
        model = {"decision_tree": tree.DecisionTreeClassifier(max_depth=3, min_samples_leaf=5, random_state=0),
                 "random_forest": ensemble.RandomForestClassifier(n_estimators=6, max_depth=3, random_state=0),
                 "gradient_boosting": ensemble.GradientBoostingClassifier(n_estimators=8, max_depth=2,
                                                                          random_state=0)}[kind]
    return model.fit(x, y), x


def _importance_means(model, prior, num_classes, count=400_000):
    """E[x | y = k] under p(y | x) prior(x) by importance sampling from the prior (weights p(k | x) <= 1)."""
    draws = np.asarray(prior.sample(jax.random.key(7), count, dtype=jnp.float32), np.float64)
    probabilities = np.asarray(jaxprobe.models.from_sklearn(model).predict_batch(draws.astype(np.float32)),
                               np.float64)
    weights = probabilities / probabilities.sum(axis=0)
    means = weights.T @ draws  # (K, D)
    # Importance-sampling standard error of each mean (self-normalized estimator).
    errors = np.sqrt(np.einsum("nk,nkd->kd", weights**2, (draws[:, None, :] - means[None]) ** 2))
    return means, errors


@_SLOW  # 31 s cold for gradient boosting on iris alone
@pytest.mark.parametrize("kind, data", [("decision_tree", "iris"), ("random_forest", "iris"),
                                        ("gradient_boosting", "breast_cancer"), ("gradient_boosting", "iris"),
                                        ("xgboost", "breast_cancer"), ("xgboost", "iris")])
def test_reconstruct_with_sklearn_and_xgboost_ensembles_matches_importance_sampling(kind, data):
    """Decision tree, random forest, gradient boosting (binary and multi-class) and XGBoost (binary and
    multi-class) through ``reconstruct``: each class's mean within 4 MC errors (ESS) of importance sampling."""
    model, x = _fit(kind, data)
    # Iris' petal features correlate at 0.96: coordinate-wise moves along that ridge are short, so its runs take
    # a diagonal prior; breast cancer's columns here correlate at most 0.58 and keep the full covariance.
    prior = R.fit_gaussian(x, kind="diagonal") if data == "iris" else R.fit_gaussian(x)
    result = R.reconstruct(KEY, model, prior, sampler="tree_gibbs", num_chains=32, num_samples=300, num_warmup=30,
                           convergence="ignore")
    num_classes = result.num_classes
    assert result.draws.shape == (32, 300, num_classes, x.shape[1]) and result.samples.sampler == "tree_gibbs"
    assert result.samples.verdict.max_rhat < 1.1, result.samples.verdict
    np.testing.assert_array_equal(result.mean, 0.0)
    means, errors = _importance_means(model, prior, num_classes)
    for label in range(num_classes):
        draws = result.class_draws(label).astype(np.float64)
        from blackjax import diagnostics

        ess = np.asarray(jax.vmap(diagnostics.ess_bulk, in_axes=2)(jnp.asarray(draws, jnp.float32)))
        mcse = draws.reshape(-1, draws.shape[-1]).std(axis=0) / np.sqrt(ess)
        z = (draws.mean(axis=(0, 1)) - means[label]) / np.sqrt(mcse**2 + errors[label] ** 2)
        assert np.all(np.abs(z) < 4), f"class {label}: {z}"


def test_reconstruct_many_with_several_priors_and_a_class_no_prior_draw_reaches():
    """Several prior settings in one program; a pure-leaf tree whose class 2 no prior draw reaches still starts
    (tree_gibbs walks into the support) and ends with every draw inside it."""
    from sklearn.tree import DecisionTreeClassifier

    x = np.array([[-3.0], [-2.5], [0.0], [0.2], [6.0], [6.1]])
    model = DecisionTreeClassifier(random_state=0).fit(x, [0, 0, 1, 1, 2, 2])
    narrow = priors.DiagonalGaussian([0.0], [0.5])  # x > 3.1 (class 2) lies 6 sd out
    results = R.reconstruct_many(KEY, [(model, narrow), (model, priors.DiagonalGaussian([0.0], [2.0]))],
                                 sampler="tree_gibbs", num_chains=8, num_samples=40, num_warmup=10,
                                 num_candidates=256, convergence="ignore")
    for result in results:
        assert np.all(result.class_draws(2) > 3.05)
        assert np.all(result.class_draws(0) <= -1.25)
        assert np.all(np.isfinite(result.samples.logdensity))
    assert results[0].samples.positions.shape == (8, 40, 2, 3, 1)


# ------------------------------------------------------------------ refusals, before compiling


def _tree_model():
    return stump_ensemble([(0, 0.0, 0.2, 0.8)], 2)


def _refusals():
    from sklearn.linear_model import LogisticRegression

    logistic = jaxprobe.models.from_sklearn(LogisticRegression().fit(np.random.default_rng(0).standard_normal(
        (20, 2)), np.arange(20) % 2))
    tree = _tree_model()
    normal = priors.DiagonalGaussian([0.0, 0.0], [1.0, 1.0])
    generate = dict(temperature=1.0, num_chains=4, num_samples=10, num_warmup=2, sampler="tree_gibbs")
    return [
        ("probe", lambda: jaxprobe.generate(0, probes.fixed_label(tree, 1) + probes.localize(np.zeros(2)),
                                            prior=normal, **generate)),
        ("probe", lambda: jaxprobe.generate(0, lambda x: jnp.sum(x**2), prior=normal, dim=2, **generate)),
        ("probe", lambda: jaxprobe.generate(0, probes.model_contrast(tree, logistic), prior=normal, **generate)),
        ("prior", lambda: jaxprobe.generate(0, probes.fixed_label(tree, 1), prior=lambda x: -jnp.sum(jnp.abs(x)),
                                            dim=2, **generate)),
        ("prior", lambda: jaxprobe.generate(0, probes.fixed_label(tree, 1), dim=2, **generate)),
        ("constraints", lambda: jaxprobe.generate(0, probes.fixed_label(tree, 1), prior=None, dim=2,
                                                  constraints=OneHot([0, 1]), **generate)),
        ("step_size", lambda: jaxprobe.generate(0, probes.fixed_label(tree, 1), prior=normal, step_size=0.1,
                                                **generate)),
        ("sampler_options", lambda: jaxprobe.generate(0, probes.fixed_label(tree, 1), prior=normal,
                                                      sampler_options={"scan": "diagonal"}, **generate)),
        ("sampler_options", lambda: jaxprobe.generate(0, probes.fixed_label(tree, 1), prior=normal,
                                                      sampler_options={"prior_moves": (0.5, 1.0)}, **generate)),
        ("prior_moves", lambda: jaxprobe.generate(0, probes.fixed_label(tree, 1), prior=normal,
                                                  constraints=Fixed([1], [0.0]),
                                                  sampler_options={"prior_moves": (0.5,)}, **generate)),
        ("model", lambda: R.reconstruct(0, logistic, normal, sampler="tree_gibbs")),
        ("prior", lambda: R.reconstruct(0, tree, _LaplacePrior(), sampler="tree_gibbs")),
    ]


class _LaplacePrior:
    """A prior tree_gibbs cannot condition exactly (callable with .sample, like the supported ones)."""

    def __call__(self, x):
        return -jnp.sum(jnp.abs(x))

    def sample(self, rng_key, num, dtype=jnp.float32):
        return jax.random.laplace(rng_key, (num, 2), dtype)


@pytest.mark.parametrize("index", range(12))
def test_targets_not_of_the_tree_form_are_refused_by_name_before_compiling(compile_counter, index):
    argument, call = _refusals()[index]
    jaxprobe.engine.canonicalize_key(0)  # the seed's key: compiled once per process, not a refusal's cost
    with compile_counter:
        with pytest.raises(ValueError, match=f"^{argument}"):
            call()
    assert compile_counter.count == 0, "the bad input was only caught after compiling"


def test_front_ends_without_tree_gibbs_say_where_it_runs():
    """jaxprobe.sample runs engine kernels only: asked for tree_gibbs (a whole-run sampler) it names the entry
    points that have it, before anything compiles."""
    with pytest.raises(ValueError, match="'tree_gibbs' is not an engine kernel: .* jaxprobe.generate, reconstruct"):
        jaxprobe.sample(0, lambda x: -0.5 * jnp.sum(x**2), np.zeros((2, 3)), sampler="tree_gibbs", progress=False)
