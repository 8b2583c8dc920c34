"""Multi-class SVC through from_sklearn: one-vs-one machines and libsvm's pairwise coupling, at 1e-5."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn import svm
from sklearn.datasets import load_iris, load_wine
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from jaxprobe.models import from_sklearn


def _data(loader):
    x, y = loader(return_X_y=True)
    return train_test_split(StandardScaler().fit_transform(x), y, random_state=0)


WINE = _data(load_wine)  # 3 classes, 13 features
IRIS = _data(load_iris)  # 3 classes, 4 features


def _fit(estimator, data):
    x_train, x_test, y_train, _ = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # sklearn 1.9 deprecates probability=True
        estimator.fit(x_train, y_train)
    return estimator, x_test


@pytest.mark.parametrize("kernel", ["rbf", pytest.param("poly", marks=pytest.mark.slow),
                                    pytest.param("linear", marks=pytest.mark.slow),
                                    pytest.param("sigmoid", marks=pytest.mark.slow)])
def test_multiclass_svc_probabilities_match_predict_proba(kernel):
    estimator, x_test = _fit(svm.SVC(kernel=kernel, degree=3, probability=True, random_state=0), WINE)
    model = from_sklearn(estimator)
    reference = estimator.predict_proba(x_test)
    ours = model.predict_batch(x_test)
    assert model.output == "probabilities" and ours.shape == reference.shape
    np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-5)
    gradient = jax.grad(lambda x: model(x)[0])(jnp.asarray(x_test[0], jnp.float32))
    assert np.all(np.isfinite(gradient))


@pytest.mark.parametrize("kernel, shape", [("rbf", "ovr"), ("poly", "ovo"),
                                           pytest.param("rbf", "ovo", marks=pytest.mark.slow),
                                           pytest.param("poly", "ovr", marks=pytest.mark.slow)])
def test_multiclass_svc_decision_function_matches(kernel, shape):
    estimator, x_test = _fit(svm.SVC(kernel=kernel, degree=3, decision_function_shape=shape), IRIS)
    model = from_sklearn(estimator)
    reference = estimator.decision_function(x_test)
    ours = model.predict_batch(x_test)
    assert model.output == "decision_function" and ours.shape == reference.shape
    # 1e-5 relative to Σ|α| (a float32 sum of kernel terms), as for the binary imports
    scale = max(1.0, float(np.abs(estimator.dual_coef_).sum()) / 10)
    assert np.abs(ours - reference).max() <= 1e-5 * scale
    np.testing.assert_array_equal(np.argmax(ours, axis=1) if shape == "ovr" else ours > 0,
                                  np.argmax(reference, axis=1) if shape == "ovr" else reference > 0)


@pytest.mark.slow
def test_four_class_coupling():
    """K = 4 (digits 0–3, 64 features): the coupling's sweeps over all coordinates, at 1e-5."""
    from sklearn.datasets import load_digits

    x, y = load_digits(n_class=4, return_X_y=True)
    data = train_test_split(x / 16.0, y, random_state=0)
    estimator, x_test = _fit(svm.SVC(kernel="rbf", probability=True, random_state=0), data)
    np.testing.assert_allclose(from_sklearn(estimator).predict_batch(x_test), estimator.predict_proba(x_test),
                               rtol=0, atol=1e-5)
