"""The Flax model zoo and its optax training helper, against known answers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.linear_model import LogisticRegression as SklearnLogistic
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from jaxprobe.models import (MLP, LeNet5, LinearRegression, LogisticRegression, TwoLayerReLU, accuracy, as_model, fit,
                             load_params, save_params)


@pytest.fixture(scope="module")
def digits():
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    return train_test_split(x, y, test_size=0.3, random_state=0, stratify=y)


def test_linear_regression_recovers_least_squares_weights():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 5)).astype(np.float32)
    w_true = np.array([1.5, -2.0, 0.5, 0.0, 3.0], np.float32)
    y = x @ w_true + 0.7
    params = fit(0, LinearRegression(), x, y, loss="mse", num_steps=800, batch_size=512, learning_rate=0.05)
    kernel = np.asarray(params["params"]["linear"]["kernel"])[:, 0]
    np.testing.assert_allclose(kernel, w_true, atol=2e-3)
    np.testing.assert_allclose(float(params["params"]["linear"]["bias"][0]), 0.7, atol=2e-3)
    model = as_model(LinearRegression(), params, output="logits")
    assert model(jnp.asarray(x[0])).shape == ()


def test_logistic_regression_matches_sklearn_accuracy():
    x, y = load_breast_cancer(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.3, random_state=0, stratify=y)
    scaler = StandardScaler().fit(x_train)
    x_train, x_test = scaler.transform(x_train), scaler.transform(x_test)
    reference = SklearnLogistic(max_iter=1000).fit(x_train, y_train).score(x_test, y_test)
    binary = LogisticRegression(num_classes=1)
    params = fit(1, binary, x_train, y_train, num_steps=500, batch_size=512, learning_rate=0.05, weight_decay=1e-3)
    model = as_model(binary, params)
    assert model(jnp.asarray(x_test[0], jnp.float32)).shape == ()          # P(y = 1 | x), one input
    assert accuracy(model, x_test, y_test) >= reference - 0.03


def test_mlp_learns_digits(digits):
    x_train, x_test, y_train, y_test = digits
    mlp = MLP(hidden_sizes=(32,), num_outputs=10)
    params = fit(2, mlp, x_train, y_train, num_steps=300, batch_size=64, learning_rate=1e-2)
    assert accuracy(as_model(mlp, params), x_test, y_test) >= 0.93


def test_lenet5_accepts_flat_and_image_inputs(digits):
    x_test = jnp.asarray(digits[1][:3])
    cnn = LeNet5(num_classes=10, image_shape=(8, 8, 1))
    model = as_model(cnn, cnn.init(jax.random.key(0), x_test))
    flat = model(x_test)
    assert flat.shape == (3, 10)
    np.testing.assert_allclose(model(x_test.reshape(3, 8, 8)), flat, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model(x_test.reshape(3, 8, 8, 1)), flat, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model(x_test[0]), flat[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.sum(flat, axis=-1), 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match="image_shape"):
        model(jnp.zeros((3, 7, 7)))


@pytest.mark.slow
def test_lenet5_learns_digits(digits):
    x_train, x_test, y_train, y_test = digits
    cnn = LeNet5(num_classes=10, image_shape=(8, 8, 1))
    params = fit(3, cnn, x_train, y_train, num_steps=200, batch_size=32, learning_rate=1e-2)
    assert accuracy(as_model(cnn, params), x_test, y_test) >= 0.9


def test_two_layer_relu_from_weights_is_the_formula():
    rng = np.random.default_rng(1)
    A, w, b, c = rng.normal(size=(6, 4)), rng.normal(size=6), rng.normal(size=6), 0.3
    x = rng.normal(size=(10, 4))
    expected = np.maximum(x @ A.T + b, 0) @ w + c
    net = TwoLayerReLU(hidden_dim=6)
    got = net.apply(TwoLayerReLU.variables_from_weights(A, w, b, c), jnp.asarray(x))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    bias_free = TwoLayerReLU(hidden_dim=6, use_bias=False)
    got = bias_free.apply(TwoLayerReLU.variables_from_weights(A, w), jnp.asarray(x))
    np.testing.assert_allclose(got, np.maximum(x @ A.T, 0) @ w, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="both b and c"):
        TwoLayerReLU.variables_from_weights(A, w, b)
    with pytest.raises(ValueError, match="w must have shape"):
        TwoLayerReLU.variables_from_weights(A, w[:3])


def test_save_and_load_round_trip(tmp_path):
    module = MLP(hidden_sizes=(5,), num_outputs=3)
    params = module.init(jax.random.key(0), jnp.zeros((1, 4)))
    path = tmp_path / "mlp.msgpack"
    save_params(path, params)
    for restored in (load_params(path, params), load_params(path)):
        for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(restored)):
            np.testing.assert_array_equal(a, b)
    other = MLP(hidden_sizes=(6,), num_outputs=3).init(jax.random.key(0), jnp.zeros((1, 4)))
    with pytest.raises(ValueError, match="shape"):
        load_params(path, other)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_params(tmp_path / "missing.msgpack")


def test_load_params_names_the_file_and_leaf_of_a_nonfinite_weight(tmp_path):
    """NaN or inf saved weights are refused where the file is read, naming the file and the leaf (issue 25)."""
    params = {"params": {"hidden_0": {"kernel": np.ones((4, 5), np.float32), "bias": np.zeros(5, np.float32)},
                         "output": {"kernel": np.ones((5, 3), np.float32), "bias": np.zeros(3, np.float32)}}}
    path = tmp_path / "broken.msgpack"
    for bad_value in (np.nan, -np.inf):
        params["params"]["output"]["bias"][1] = bad_value
        save_params(path, params)
        for template in (params, None):
            with pytest.raises(ValueError, match=r"broken.msgpack': params/output/bias holds NaN or inf "
                                                 r"\(1 of 3 entries, the first at index \(1,\)\)"):
                load_params(path, template)


@pytest.mark.parametrize("change, message", [
    (dict(loss="hinge"), "loss must be one of"),
    (dict(num_steps=0), "num_steps"),
    (dict(learning_rate=-1.0), "learning_rate"),
    (dict(y=np.full(20, 3)), r"labels must lie in \[0, 1\]"),
    (dict(y=np.zeros(19, int)), "y must have 20 rows"),
    (dict(x=np.full((20, 3), np.nan)), "x must be finite"),
])
def test_fit_rejects_bad_input_before_compiling(change, message, compile_counter):
    arguments = dict(x=np.zeros((20, 3), np.float32), y=np.zeros(20, int))
    options = {k: v for k, v in change.items() if k not in arguments}
    arguments.update({k: v for k, v in change.items() if k in arguments})
    with compile_counter, pytest.raises(ValueError, match=message):
        fit(0, LogisticRegression(num_classes=2), arguments["x"], arguments["y"], **options)
    assert compile_counter.count == 0
