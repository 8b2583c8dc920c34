"""jaxprobe.extract.Oracle: answers equal the analytic values, and every answered row is counted."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxprobe.extract import Oracle

D, K = 5, 3
RNG = np.random.default_rng(3)
W = RNG.normal(size=(K, D)).astype(np.float32)
B = RNG.normal(size=K).astype(np.float32)
LINEAR = RNG.normal(size=D).astype(np.float32)


def softmax_victim(x):
    return jax.nn.softmax(W @ x + B)


def linear_victim(x):
    return LINEAR @ x + 0.5


@pytest.fixture(scope="module")
def classifier():
    return Oracle(softmax_victim, D)


def test_value_and_gradient_counts_per_row(classifier):
    x = RNG.normal(size=(7, D))
    classifier.reset_counts()
    probabilities = classifier.value(x)
    assert probabilities.shape == (7, K)
    np.testing.assert_allclose(probabilities, jax.vmap(softmax_victim)(jnp.asarray(x, jnp.float32)), rtol=1e-6)
    assert (classifier.num_value_queries, classifier.num_gradient_queries) == (7, 0)
    classifier.gradient(x[:3])
    classifier.value_and_gradient(x[:2])
    assert (classifier.num_value_queries, classifier.num_gradient_queries) == (9, 5)
    classifier.reset_counts()
    assert (classifier.num_value_queries, classifier.num_gradient_queries) == (0, 0)


def test_gradient_of_predicted_class_probability(classifier):
    x = RNG.normal(size=(6, D)).astype(np.float32)
    p = jax.vmap(softmax_victim)(jnp.asarray(x))
    predicted = np.argmax(np.asarray(p), axis=1)
    # d p_k / dx = p_k (W_k − Σ_j p_j W_j), the softmax derivative
    expected = np.asarray(p)[np.arange(6), predicted, None] * (W[predicted] - np.asarray(p) @ W)
    np.testing.assert_allclose(classifier.gradient(x), expected, rtol=1e-4, atol=1e-6)
    k = 1
    expected_k = np.asarray(p)[:, k, None] * (W[k] - np.asarray(p) @ W)
    np.testing.assert_allclose(classifier.gradient(x, output=k), expected_k, rtol=1e-4, atol=1e-6)
    jacobian = classifier.gradient(x, output="all")
    assert jacobian.shape == (6, K, D)
    np.testing.assert_allclose(jacobian[:, k], expected_k, rtol=1e-4, atol=1e-6)


def test_smoothgrad_of_a_linear_model_is_its_gradient_and_one_query_per_row():
    oracle = Oracle(linear_victim, D)
    x = RNG.normal(size=(4, D))
    maps = oracle.smoothgrad(jax.random.key(0), x, num_samples=8, noise_std=0.5)
    np.testing.assert_allclose(maps, np.broadcast_to(LINEAR, (4, D)), rtol=1e-6)
    assert (oracle.num_value_queries, oracle.num_gradient_queries) == (0, 4)


def test_smoothgrad_is_the_mean_gradient_over_noisy_copies(classifier):
    x = RNG.normal(size=(2, D)).astype(np.float32)
    key = jax.random.key(1)
    maps = classifier.smoothgrad(key, x, num_samples=16, noise_std=0.3, output=0)

    @jax.jit
    def reference(key, x):
        keys = jax.random.split(key, 2)
        noise = jax.vmap(lambda k, r: 0.3 * jax.random.normal(k, (16, D), r.dtype))(keys, x)
        return jax.vmap(jax.vmap(jax.grad(lambda z: softmax_victim(z)[0])))(x[:, None] + noise).mean(axis=1)

    np.testing.assert_allclose(maps, reference(key, jnp.asarray(x)), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("scheme,per_row", [("forward", D + 1), ("central", 2 * D)])
def test_finite_differences_use_value_queries_only(scheme, per_row):
    with jax.enable_x64(True):
        oracle = Oracle(lambda x: jnp.sum(x ** 2) + LINEAR @ x, D)
        x = RNG.normal(size=(3, D))
        gradients = oracle.finite_difference_gradient(x, step=1e-6, scheme=scheme)
        tolerance = 1e-5 if scheme == "forward" else 1e-8
        np.testing.assert_allclose(gradients, 2 * x + LINEAR, atol=tolerance)
    assert (oracle.num_value_queries, oracle.num_gradient_queries) == (3 * per_row, 0)


def test_bad_input_is_rejected_before_any_query(classifier):
    classifier.reset_counts()
    with pytest.raises(ValueError, match=r"shape \(n, 5\)"):
        classifier.value(np.zeros(D))
    with pytest.raises(ValueError, match=r"shape \(n, 5\)"):
        classifier.gradient(np.zeros((2, D + 1)))
    with pytest.raises(ValueError, match="NaN"):
        classifier.value(np.full((1, D), np.nan))
    with pytest.raises(ValueError, match="output"):
        classifier.gradient(np.zeros((1, D)), output=K)
    with pytest.raises(TypeError, match="output must be an int, got float"):
        classifier.gradient(np.zeros((1, D)), output=1.0)
    with pytest.raises(ValueError, match="output must be None"):
        classifier.gradient(np.zeros((1, D)), output="first")
    with pytest.raises(ValueError, match="num_samples"):
        classifier.smoothgrad(jax.random.key(0), np.zeros((1, D)), num_samples=0)
    with pytest.raises(ValueError, match="scheme"):
        classifier.finite_difference_gradient(np.zeros((1, D)), scheme="backward")
    with pytest.raises(TypeError, match="traced"):
        jax.jit(classifier.value)(jnp.zeros((1, D)))
    assert (classifier.num_value_queries, classifier.num_gradient_queries) == (0, 0)
    with pytest.raises(ValueError, match="input_dim"):
        Oracle(softmax_victim, 0)
    with pytest.raises(TypeError, match="callable"):
        Oracle("model", D)
    with pytest.raises(ValueError, match="scalar output"):
        Oracle(linear_victim, D).gradient(np.zeros((1, D)), output=0)


def test_masked_queries_answer_live_rows_only_and_count_them():
    """The compiled loops' queries gather the live rows into the smallest fixed-size buffer (1024 rows:
    buffers of 256 and 1024): every live row gets the victim's answer, every other row a zero."""
    oracle = Oracle(linear_victim, D)
    x = jnp.asarray(RNG.normal(size=(1024, D)), jnp.float32)
    exact = jax.vmap(linear_victim)(x)
    masked = jax.jit(oracle._masked_values)
    both = jax.jit(lambda x, m: oracle._masked_values_and_gradients(x, m, None))
    for num_live in (0, 3, 300, 1024):
        mask = jnp.asarray(RNG.permutation(1024) < num_live)
        values, count = masked(x, mask)
        np.testing.assert_allclose(values, jnp.where(mask, exact, 0.0), rtol=1e-6)
        assert int(count) == num_live
        values, gradients, trusted, num_values, num_gradients = both(x, mask)
        np.testing.assert_array_equal(trusted, mask)
        np.testing.assert_allclose(values, jnp.where(mask, exact, 0.0), rtol=1e-6)
        np.testing.assert_allclose(gradients, np.where(np.asarray(mask)[:, None], LINEAR, 0.0), rtol=1e-6)
        assert int(num_values) == int(num_gradients) == num_live
    assert oracle.num_value_queries == oracle.num_gradient_queries == 0     # counted by the caller's _record
