"""from_sklearn: each import against the estimator's own predictions on held-out data."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn import linear_model, neural_network, svm
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine, make_circles
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from jaxprobe.models.sklearn import from_sklearn


def _split(loader, regression=False):
    x, y = loader(return_X_y=True)
    x = StandardScaler().fit_transform(x)
    if regression:
        y = (y - y.mean()) / y.std()
    return train_test_split(x, y, random_state=0)


BINARY = _split(load_breast_cancer)
MULTICLASS = _split(load_wine)
REGRESSION = _split(load_diabetes, regression=True)


def _check(estimator, data, reference_method):
    x_train, x_test, y_train, _ = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn 1.9 deprecates SVC(probability=True); still supported
        estimator.fit(x_train, y_train)
        reference = getattr(estimator, reference_method)(x_test)
    model = from_sklearn(estimator)
    ours = model.predict_batch(x_test)
    # 1e-5 relative to the output's scale (probabilities: absolute). A kernel machine's output is a
    # float32 sum of terms of total size Σ|α_i K_i| <= Σ|α_i|, which can exceed the output by 100×.
    scale = max(1.0, float(np.abs(reference).max()))
    if hasattr(estimator, "dual_coef_") and not getattr(estimator, "_probA", np.zeros(0)).size:
        scale = max(scale, float(np.abs(estimator.dual_coef_).sum()) / 10)
    assert np.abs(ours - reference).max() <= 1e-5 * scale, np.abs(ours - reference).max()
    # One input at a time, under jit and grad: a pure JAX function.
    x0 = jnp.asarray(x_test[0], jnp.float32)
    out = jax.jit(model)(x0)
    np.testing.assert_allclose(np.asarray(out), reference[0], rtol=1e-5, atol=1e-5 * scale)
    gradient = jax.grad(lambda x: jnp.sum(model(x)))(x0)
    assert np.all(np.isfinite(gradient))
    return model


@pytest.mark.parametrize("estimator", [
    linear_model.LogisticRegression(max_iter=2000),
    neural_network.MLPClassifier(hidden_layer_sizes=(16, 8), max_iter=300, random_state=0),
    neural_network.MLPClassifier(hidden_layer_sizes=(16,), activation="tanh", max_iter=300, random_state=0),
    svm.SVC(kernel="rbf", probability=True, random_state=0),
    svm.SVC(kernel="poly", degree=3, probability=True, random_state=0),
    svm.SVC(kernel="linear", probability=True, random_state=0),
], ids=lambda e: f"{type(e).__name__}-{getattr(e, 'kernel', getattr(e, 'activation', ''))}")
def test_binary_classifiers_match_predict_proba(estimator):
    model = _check(estimator, BINARY, "predict_proba")
    assert model.is_classifier and model.output == "probabilities"


@pytest.mark.parametrize("kernel", ["rbf", "poly", "linear", "sigmoid"])
def test_svc_without_probabilities_gives_the_decision_function(kernel):
    model = _check(svm.SVC(kernel=kernel, gamma="scale"), BINARY, "decision_function")
    assert model.output == "decision_function"


@pytest.mark.parametrize("estimator", [
    linear_model.LogisticRegression(max_iter=2000),
    neural_network.MLPClassifier(hidden_layer_sizes=(16,), max_iter=300, random_state=0),
], ids=lambda e: type(e).__name__)
def test_multiclass_classifiers_match_predict_proba(estimator):
    _check(estimator, MULTICLASS, "predict_proba")


@pytest.mark.parametrize("estimator", [
    linear_model.LinearRegression(),
    linear_model.Ridge(alpha=2.0),
    svm.SVR(kernel="rbf"),
    svm.SVR(kernel="poly", degree=2),
    svm.SVR(kernel="linear"),
    neural_network.MLPRegressor(hidden_layer_sizes=(16,), max_iter=500, random_state=0),
], ids=lambda e: f"{type(e).__name__}-{getattr(e, 'kernel', '')}")
def test_regressors_match_predict(estimator):
    model = _check(estimator, REGRESSION, "predict")
    assert not model.is_classifier and model(jnp.zeros(10, jnp.float32)).shape == ()


def test_figure2_svms_on_circles():
    x, y = make_circles(400, noise=0.1, factor=0.4, random_state=0)
    for kernel in ("rbf", "poly"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimator = svm.SVC(kernel=kernel, degree=3, probability=True, random_state=0).fit(x, y)
            reference = estimator.predict_proba(x)
        np.testing.assert_allclose(from_sklearn(estimator).predict_batch(x), reference, atol=1e-5)


def test_unsupported_and_unfitted_estimators_are_refused():
    with pytest.raises(TypeError, match="is not fitted"):
        from_sklearn(linear_model.LogisticRegression())
    x, y = MULTICLASS[0], MULTICLASS[2]
    from sklearn.neighbors import KNeighborsClassifier

    with pytest.raises(TypeError, match="does not support KNeighborsClassifier"):
        from_sklearn(KNeighborsClassifier().fit(x, y))
    model = from_sklearn(linear_model.LinearRegression().fit(REGRESSION[0], REGRESSION[2]))
    with pytest.raises(ValueError, match=r"expects one input of shape \(10,\)"):
        model(jnp.zeros(3))


# ---------------------------------------------------------------- CalibratedClassifierCV
# sklearn 1.9 deprecates SVC(probability=True) in favour of CalibratedClassifierCV(SVC(), ensemble=False).

CALIBRATED = [
    ("binary", svm.SVC(kernel="rbf"), "sigmoid", False),  # sklearn's recommended replacement
    ("binary", svm.SVC(kernel="rbf"), "sigmoid", True),
    ("binary", linear_model.LogisticRegression(max_iter=2000), "temperature", True),
    ("binary", neural_network.MLPClassifier((16,), max_iter=300, random_state=0), "isotonic", False),
    ("multiclass", svm.SVC(kernel="poly", degree=3), "sigmoid", True),
    ("multiclass", svm.SVC(kernel="rbf"), "isotonic", False),
    ("multiclass", neural_network.MLPClassifier((16,), max_iter=300, random_state=0), "temperature", False),
    ("multiclass", linear_model.LogisticRegression(max_iter=2000), "sigmoid", False),
]


@pytest.mark.slow
@pytest.mark.parametrize("kind,base,method,ensemble", CALIBRATED,
                         ids=[f"{k}-{type(b).__name__}-{m}-ensemble={e}" for k, b, m, e in CALIBRATED])
def test_calibrated_classifiers_match_predict_proba(kind, base, method, ensemble):
    from sklearn.base import clone
    from sklearn.calibration import CalibratedClassifierCV

    data = BINARY if kind == "binary" else MULTICLASS
    estimator = CalibratedClassifierCV(clone(base), method=method, ensemble=ensemble, cv=3)
    x_train, x_test, y_train, _ = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MLP convergence warnings at max_iter=300
        estimator.fit(x_train, y_train)
    model = from_sklearn(estimator)
    # Held-out inputs and the same inputs moved off the data, where the calibrators extrapolate.
    rng = np.random.default_rng(0)
    inputs = np.concatenate([x_test, x_test[:30] + rng.normal(size=(30, x_test.shape[1]))])
    ours, reference = model.predict_batch(inputs), estimator.predict_proba(inputs)
    assert np.abs(ours - reference).max() <= 2e-5, np.abs(ours - reference).max()
    assert model.output == "probabilities" and list(model.classes) == list(estimator.classes_)
    assert model.differentiable == (method != "isotonic")
    if model.differentiable:  # one input at a time, under jit and grad
        x0 = jnp.asarray(x_test[0], jnp.float32)
        np.testing.assert_allclose(np.asarray(jax.jit(model)(x0)), reference[0], atol=2e-5)
        assert np.all(np.isfinite(np.asarray(jax.grad(lambda x: model(x)[-1])(x0))))


def test_calibrated_tree_ensemble_and_refused_bases():
    """Trees are calibrated through their probabilities (not differentiable); a base whose
    decision_function jaxprobe does not import is refused with the reason."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

    x_train, x_test, y_train, _ = BINARY
    forest = CalibratedClassifierCV(RandomForestClassifier(20, random_state=0), method="temperature", cv=3)
    forest.fit(x_train, y_train)
    model = from_sklearn(forest)
    np.testing.assert_allclose(model.predict_batch(x_test), forest.predict_proba(x_test), atol=2e-5)
    assert not model.differentiable and not np.any(np.isnan(model.predict_batch(x_test)))
    boosted = CalibratedClassifierCV(GradientBoostingClassifier(n_estimators=5, random_state=0), cv=3)
    boosted.fit(x_train, y_train)
    with pytest.raises(TypeError, match="decision_function"):
        from_sklearn(boosted)


def test_config_svms_fall_back_to_calibrated_svc_without_the_probability_parameter(monkeypatch):
    """Config sweeps build SVC(probability=True) while scikit-learn has it, else (1.11 removes it) the
    recommended CalibratedClassifierCV(SVC(), ensemble=False); both give probabilities through from_sklearn."""
    from sklearn.calibration import CalibratedClassifierCV

    from jaxprobe.sweeps import from_config

    platt = from_config._probabilistic_svc({"kernel": "rbf", "random_state": 0})
    assert isinstance(platt, svm.SVC) and platt.probability

    class SVCWithoutProbability(svm.SVC):
        def get_params(self, deep=True):
            return {k: v for k, v in super().get_params(deep).items() if k != "probability"}

    monkeypatch.setattr(svm, "SVC", SVCWithoutProbability)
    calibrated = from_config._probabilistic_svc({"kernel": "rbf", "random_state": 0})
    assert isinstance(calibrated, CalibratedClassifierCV) and calibrated.ensemble is False
    x_train, x_test, y_train, _ = BINARY
    calibrated.fit(x_train, y_train)
    np.testing.assert_allclose(from_sklearn(calibrated).predict_batch(x_test), calibrated.predict_proba(x_test),
                               atol=2e-5)
