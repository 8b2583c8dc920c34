"""Probing losses (Eqs. 4–7), exact feature restrictions, and generate() against known answers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.conftest import mc_check_mean, mc_check_second_moment

import jaxprobe
from jaxprobe import probes
from jaxprobe.constraints import Box, Fixed, restriction
from jaxprobe.models import Ensemble, GaussianPerturbation, PointMass

W = jnp.array([1.5, -2.0, 0.5])


def logistic(x):
    return jax.nn.sigmoid(x @ W)


def logistic_two_columns(x):
    p = logistic(x)
    return jnp.stack([1 - p, p])


X = jnp.array([0.3, -0.2, 1.0])

# ---------------------------------------------------------------- probe values


def test_probe_algebra():
    a, b = probes.prediction_risky(logistic), probes.localize(np.zeros(3))
    combined = a + 0.1 * b
    np.testing.assert_allclose(float(combined(X)), float(a(X)) + 0.1 * float(b(X)), rtol=1e-6)
    np.testing.assert_allclose(float((b * 2.0)(X)), 2 * float(b(X)), rtol=1e-6)
    np.testing.assert_allclose(float(sum([a, b])(X)), float(a(X)) + float(b(X)), rtol=1e-6)
    with pytest.raises(TypeError, match="multiplied by a real number"):
        a * "x"


def test_prediction_risky_value_and_alpha_shape():
    p = float(logistic(X))
    np.testing.assert_allclose(float(probes.prediction_risky(logistic)(X)), (p - 0.5) ** 2, rtol=1e-6)
    np.testing.assert_allclose(float(probes.prediction_risky(logistic, 0.3, r=1)(X)), abs(p - 0.3), rtol=1e-6)
    vector = probes.prediction_risky(logistic_two_columns, np.array([0.5, 0.5]), r=3)
    np.testing.assert_allclose(float(vector(X)), 2 * abs(p - 0.5) ** 3, rtol=1e-5)
    with pytest.raises(ValueError, match="does not match the model output"):
        probes.prediction_risky(logistic_two_columns, np.ones(3))(X)
    with pytest.raises(ValueError, match="r must be (a real number )?>= 1"):
        probes.prediction_risky(logistic, r=0.5)


def test_model_contrast_binary_forms_agree_and_match_eq5():
    other = lambda x: jax.nn.sigmoid(x @ jnp.array([-1.0, 0.3, 2.0]))
    p, q = float(logistic(X)), float(other(X))
    expected = -((1 - q) * np.log(p) + q * np.log(1 - p))  # ℓ(p, 1 − ŷ), cross-entropy
    scalar = probes.model_contrast(logistic, other)(X)
    columns = probes.model_contrast(logistic_two_columns, lambda x: jnp.stack([1 - other(x), other(x)]))(X)
    np.testing.assert_allclose(float(scalar), expected, rtol=1e-5)
    np.testing.assert_allclose(float(columns), expected, rtol=1e-5)


def test_model_contrast_multiclass_and_regression():
    probs = lambda x: jnp.array([0.7, 0.2, 0.1])
    other = lambda x: jnp.array([0.1, 0.1, 0.8])
    target = (1 - np.array([0.1, 0.1, 0.8])) / 2
    expected = -np.sum(target * np.log([0.7, 0.2, 0.1]))
    np.testing.assert_allclose(float(probes.model_contrast(probs, other)(X)), expected, rtol=1e-6)
    f, g = (lambda x: x[0] * 2.0), (lambda x: x[1])
    value = probes.model_contrast(f, g, loss="similarity")(X)  # Appendix D: exp(−(y1 − y2)²)
    np.testing.assert_allclose(float(value), np.exp(-(0.6 + 0.2) ** 2), rtol=1e-6)
    with pytest.raises(ValueError, match="loss must be one of"):
        probes.model_contrast(f, g, loss="hinge")


def test_model_contrast_gradient_flows_through_the_differentiable_model():
    step = lambda x: jnp.where(x[0] > 0, 1.0, 0.0)  # a tree-like, piecewise-constant ŷ
    grad = jax.grad(probes.model_contrast(logistic, step))(X)
    assert np.all(np.isfinite(grad)) and np.linalg.norm(grad) > 0


def test_fixed_label_losses():
    p = float(logistic(X))
    np.testing.assert_allclose(float(probes.fixed_label(logistic, 1)(X)), -np.log(p), rtol=1e-6)
    np.testing.assert_allclose(float(probes.fixed_label(logistic, 0)(X)), -np.log(1 - p), rtol=1e-5)
    regression = lambda x: x @ W
    np.testing.assert_allclose(float(probes.fixed_label(regression, 2.0, loss="squared")(X)),
                               (float(X @ W) - 2.0) ** 2, rtol=1e-6)
    with pytest.raises(ValueError, match="out of range for 2 classes"):
        probes.fixed_label(logistic, 3)(X)
    with pytest.raises(ValueError, match="probability vector"):
        probes.fixed_label(logistic, np.array([0.5, 0.6]))


def test_an_imported_models_output_kind_must_match_from_logits():
    """An SVC without predict_proba is imported with its decision function: read as probabilities (the default
    from_logits=False) its margins gave a negative "cross-entropy" and no error. Refused by name, both ways;
    from_logits=True reads it as the logit (Fig. 2); the similarity loss and a squared loss against a value read
    raw outputs."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import SVC

    from jaxprobe.models import from_sklearn

    x = np.random.default_rng(0).standard_normal((40, 2))
    y = (x[:, 0] > 0).astype(int)
    svm, logistic_model = from_sklearn(SVC().fit(x, y)), from_sklearn(LogisticRegression().fit(x, y))
    assert svm.output == "decision_function" and logistic_model.output == "probabilities"
    with pytest.raises(ValueError, match=r"^model returns a decision function .*from_logits=True"):
        probes.fixed_label(svm, 1)
    with pytest.raises(ValueError, match=r"^other returns a decision function"):
        probes.model_contrast(logistic_model, svm)
    with pytest.raises(ValueError, match=r"^model returns probabilities .*not logits"):
        probes.fixed_label(logistic_model, 1, from_logits=True)
    point = jnp.array([1.0, 0.0])
    margin = float(svm(point))
    assert float(probes.fixed_label(svm, 1, from_logits=True)(point)) == pytest.approx(
        float(jax.nn.softplus(-margin)), rel=1e-5)                  # −log σ(margin)
    assert float(probes.model_contrast(svm, svm, loss="similarity")(point)) == pytest.approx(1.0)
    # a squared loss against a value reads the output itself (a margin of 1), not probabilities
    assert float(probes.fixed_label(svm, 1.0, loss="squared")(point)) == pytest.approx((margin - 1.0) ** 2, rel=1e-5)

def test_localize_value_and_validation():
    anchor, weights = np.array([1.0, 0.0, -1.0]), np.array([1.0, 0.0, 2.0])
    value = probes.localize(anchor, weights, r=2)(X)
    np.testing.assert_allclose(float(value), (0.3 - 1) ** 2 + 2 * (1.0 + 1) ** 2, rtol=1e-6)
    with pytest.raises(ValueError, match="weights must be finite and >= 0"):
        probes.localize(anchor, -weights)
    with pytest.raises(ValueError, match="weights must have the anchor's shape"):
        probes.localize(anchor, np.ones(2))


def test_parameter_sensitive_is_the_average_over_draws():
    apply_fn = lambda params, x: jax.nn.sigmoid(x @ params["w"])
    center = {"w": W}
    dist = GaussianPerturbation(center, sigma=0.3, num_draws=16, rng_key=jax.random.key(0))
    value = probes.parameter_sensitive(apply_fn, dist)(X)
    q = float(apply_fn(center, X))
    draws = np.asarray(dist.draws["w"])
    p = 1 / (1 + np.exp(-(draws @ np.asarray(X))))
    expected = np.mean(-(q * np.log(1 - p) + (1 - q) * np.log(p)))  # ℓ(y_θ, 1 − y_θ*), Eq. 6
    np.testing.assert_allclose(float(value), expected, rtol=1e-5)
    # A point mass at θ* reduces Eq. 6 to the model contrasted with itself.
    point = probes.parameter_sensitive(apply_fn, PointMass(center))(X)
    np.testing.assert_allclose(float(point), float(probes.model_contrast(logistic, logistic)(X)), rtol=1e-6)
    ensemble = Ensemble([{"w": W}, {"w": -W}])
    assert np.isfinite(float(probes.parameter_sensitive(apply_fn, ensemble)(X)))
    with pytest.raises(TypeError, match="param_dist must be a parameter distribution"):
        probes.parameter_sensitive(apply_fn, center)


# ---------------------------------------------------------------- constraints


def test_box_bijection_round_trip_and_log_jacobian():
    r = restriction([Box([0.0, -np.inf, -1.0, -np.inf], [1.0, 2.0, np.inf, np.inf])], 4)
    z = jnp.array([0.3, -1.2, 0.7, 2.0])
    x = r.forward(z)
    assert 0 < x[0] < 1 and x[1] < 2 and x[2] > -1 and float(x[3]) == 2.0
    np.testing.assert_allclose(r.inverse(np.asarray(x)), np.asarray(z), rtol=1e-5, atol=1e-5)
    jacobian = jax.jacfwd(r.forward)(z)
    np.testing.assert_allclose(float(r.log_det_jacobian(z)), np.log(abs(np.linalg.det(jacobian))), rtol=1e-5)
    assert np.all(np.isfinite(jax.grad(lambda v: r.log_det_jacobian(v) + jnp.sum(r.forward(v)))(z)))


def test_fixed_and_box_combine():
    r = restriction([Box(0.0, 5.0), Fixed([1], [2.0]), Box([1.0], [3.0], indices=[2])], 3)
    assert r.num_free == 2 and r.free_indices.tolist() == [0, 2]
    x = r.forward(jnp.array([0.0, 0.0]))
    np.testing.assert_allclose(np.asarray(x), [2.5, 2.0, 2.0], rtol=1e-6)


@pytest.mark.parametrize(
    "constraints, error, match",
    [
        ([Box(1.0, 1.0)], ValueError, "bounds are empty"),
        ([Box(0.0, 1.0), Fixed([0], [2.0])], ValueError, "outside their bounds"),
        ([Fixed([0], [1.0]), Fixed([0], [2.0])], ValueError, "fixed to two different values"),
        ([Fixed([5], [1.0])], ValueError, "out of range for 3 features"),
        ([Fixed([0, 1, 2], [1.0, 1.0, 1.0])], ValueError, "nothing to sample"),
        (["box"], TypeError, "must be a jaxprobe.constraints.Box, Fixed, OneHot or Integer"),
    ],
)
def test_bad_constraints(constraints, error, match):
    with pytest.raises(error, match=match):
        restriction(constraints, 3)


# ---------------------------------------------------------------- generate: exact restricted samples


@pytest.mark.slow  # 11-13 s of compiles: the default run stays under 10 minutes
def test_generate_uniform_box_is_exact():
    """A zero probe with a flat prior in a box is the uniform distribution: mean (lo+hi)/2 and
    variance (hi−lo)²/12 per feature. Clipped Langevin would pile mass at the walls and fail."""
    low, high = np.array([-1.0, 0.0, 2.0]), np.array([1.0, 0.5, 5.0])
    result = jaxprobe.generate(0, lambda x: jnp.zeros(()), temperature=1.0, num_chains=64, num_samples=400,
                               num_warmup=300, dim=3, constraints=Box(low, high), progress=False)
    assert np.all(result.positions > low) and np.all(result.positions < high)
    mean = (low + high) / 2
    mc_check_mean(result.positions, mean)
    mc_check_second_moment(result.positions, mean, np.diag((high - low) ** 2 / 12))


@pytest.mark.slow
def test_generate_fixed_features_and_half_normal():
    """Standard-normal prior, feature 0 fixed, feature 1 bounded below by 0 (half-normal, mean √(2/π))."""
    prior = jaxprobe.priors.StandardNormal()
    result = jaxprobe.generate(1, lambda x: jnp.zeros(()), temperature=1.0, num_chains=64, num_samples=400,
                               num_warmup=300, dim=3, prior=prior,
                               constraints=[Fixed([0], [0.7]), Box([0.0], [np.inf], indices=[1])], progress=False)
    assert np.all(result.positions[..., 0] == np.float32(0.7))
    assert np.all(result.positions[..., 1] > 0)
    mc_check_mean(result.positions[..., 1:], np.array([np.sqrt(2 / np.pi), 0.0]))
    mc_check_second_moment(result.positions[..., 1:], np.array([np.sqrt(2 / np.pi), 0.0]),
                           np.diag([1 - 2 / np.pi, 1.0]))


def test_generate_prediction_risky_concentrates_at_the_boundary():
    result = jaxprobe.generate(2, probes.prediction_risky(logistic), temperature=0.002, num_chains=32,
                               num_samples=200, num_warmup=300, dim=3, prior=jaxprobe.priors.StandardNormal(),
                               sampler="chees", progress=False)
    p = np.asarray(jax.vmap(logistic)(jnp.asarray(result.positions.reshape(-1, 3))))
    assert np.mean(np.abs(p - 0.5) < 0.1) > 0.9


def test_generate_validates_before_sampling():
    with pytest.raises(ValueError, match="temperature must be finite and > 0"):
        jaxprobe.generate(0, probes.localize(np.zeros(2)), temperature=0.0, num_chains=4, num_samples=5, dim=2)
    with pytest.raises(ValueError, match="number of features is not known"):  # a plain function states no d
        jaxprobe.generate(0, lambda x: jnp.sum(x**2), temperature=1.0, num_chains=4, num_samples=5)
    with pytest.raises(ValueError, match="init breaks a Fixed constraint"):
        jaxprobe.generate(0, probes.localize(np.zeros(2)), temperature=1.0, num_chains=2, num_samples=5,
                          init=np.zeros((2, 2), np.float32), constraints=Fixed([0], [1.0]))
    with pytest.raises(ValueError, match=r"outside the Box bounds .* row 0, feature 0"):
        jaxprobe.generate(0, probes.localize(np.zeros(2)), temperature=1.0, num_chains=2, num_samples=5,
                          init=np.full((2, 2), -0.5, np.float32), constraints=Box(0.0, 1.0))
