"""distill (Milli et al. 2019, Section 4) and the logistic closed form (footnote 2)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxprobe.extract import Oracle, distill, logistic_closed_form
from jaxprobe.models import nets, training

D = 6
RNG = np.random.default_rng(11)
W_TRUE = RNG.normal(size=D)
B_TRUE = 0.3


def binary_logistic(x):
    return jax.nn.sigmoid(jnp.asarray(W_TRUE) @ x + B_TRUE)


def test_footnote_2_one_gradient_and_one_value_query_identify_a_logistic_model():
    with jax.enable_x64(True):   # a victim of its own: JAX caches the constants of a traced function
        w_true = W_TRUE.copy()     # its own array too: the cache is keyed by the array
        oracle = Oracle(lambda x: jax.nn.sigmoid(jnp.asarray(w_true) @ x + B_TRUE), D)
        w, b = logistic_closed_form(oracle, RNG.normal(size=D) * 0.3)
    np.testing.assert_allclose(w, W_TRUE, rtol=1e-10)
    np.testing.assert_allclose(b, B_TRUE, rtol=1e-10)
    assert (oracle.num_value_queries, oracle.num_gradient_queries) == (1, 1)


def test_multinomial_logistic_from_one_jacobian_query():
    k = 4
    W, b = RNG.normal(size=(k, D)), RNG.normal(size=k)
    with jax.enable_x64(True):
        oracle = Oracle(lambda x: jax.nn.softmax(jnp.asarray(W) @ x + jnp.asarray(b)), D)
        W_hat, b_hat = logistic_closed_form(oracle, RNG.normal(size=D) * 0.3)
    # softmax is blind to a shift shared by all classes: the recovered model's probabilities agree
    x = RNG.normal(size=(100, D)) * 3

    def softmax(z):
        e = np.exp(z - z.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    np.testing.assert_allclose(softmax(x @ W_hat.T + b_hat), softmax(x @ W.T + b), atol=1e-10)
    np.testing.assert_allclose(W_hat - W_hat.mean(0), W - W.mean(0), atol=1e-10)
    assert (oracle.num_value_queries, oracle.num_gradient_queries) == (1, 1)


def test_one_gradient_query_trains_a_logistic_student_to_the_victim():
    """ℓ_J at one query point has a unique minimizer for a binary logistic student: the victim itself.
    One membership query (ℓ_M) cannot fix a direction in R^6."""
    oracle = Oracle(binary_logistic, D)
    student = nets.LogisticRegression(num_classes=1)
    init = student.init(jax.random.key(0), jnp.zeros((1, D)))
    query = (RNG.normal(size=(1, D)) * 0.2).astype(np.float32)
    with_gradients = distill(oracle, student, init, query, steps=3000, learning_rate=1e-2)
    membership = distill(oracle, student, init, query, use_gradients=False, steps=3000, learning_rate=1e-2)
    assert (oracle.num_value_queries, oracle.num_gradient_queries) == (2, 1)
    w = np.asarray(with_gradients["params"]["linear"]["kernel"])[:, 0]
    np.testing.assert_allclose(w, W_TRUE, rtol=2e-2, atol=2e-2)
    x_test = RNG.normal(size=(2000, D)).astype(np.float32)
    labels = np.asarray(jax.vmap(binary_logistic)(jnp.asarray(x_test))) > 0.5

    def agree(params):
        return training.accuracy(training.as_model(student, params), x_test, labels.astype(int))

    assert agree(with_gradients) > 0.97
    assert agree(membership) < agree(with_gradients) - 0.1


def test_smoothgrad_distillation_counts_one_gradient_query_per_row():
    oracle = Oracle(binary_logistic, D)
    student = nets.LogisticRegression(num_classes=1)
    init = student.init(jax.random.key(0), jnp.zeros((1, D)))
    queries = RNG.normal(size=(5, D)).astype(np.float32)
    params = distill(oracle, student, init, queries, explanation="smoothgrad", steps=5, smoothgrad_samples=4)
    assert jax.tree.structure(params) == jax.tree.structure(init)
    assert (oracle.num_value_queries, oracle.num_gradient_queries) == (5, 5)


def test_bad_arguments():
    oracle = Oracle(binary_logistic, D)
    student = nets.LogisticRegression(num_classes=1)
    init = student.init(jax.random.key(0), jnp.zeros((1, D)))
    with pytest.raises(ValueError, match="queries"):
        distill(oracle, student, init, np.zeros((3, D + 1)))
    with pytest.raises(ValueError, match="explanation"):
        distill(oracle, student, init, np.zeros((3, D)), explanation="lime")
    with pytest.raises(ValueError, match="lam"):
        distill(oracle, student, init, np.zeros((3, D)), lam=-1.0)
    with pytest.raises(TypeError, match="steps must be an int, got float"):
        distill(oracle, student, init, np.zeros((3, D)), steps=10.0)
    with pytest.raises(TypeError, match="learning_rate must be a real number, got the string"):
        distill(oracle, student, init, np.zeros((3, D)), learning_rate="0.1")
    with pytest.raises(TypeError, match="student"):
        distill(oracle, 3, init, np.zeros((3, D)))
    assert oracle.num_value_queries == oracle.num_gradient_queries == 0
    with pytest.raises(ValueError, match="probabilities"):
        distill(Oracle(lambda x: 5.0 + x.sum(), D), student, init, np.ones((2, D)))
    with pytest.raises(ValueError, match="one input"):
        logistic_closed_form(oracle, np.zeros((2, D)))


@pytest.mark.slow
def test_gradients_beat_membership_on_digits():
    """Section 5.1 on scikit-learn digits: at 10 queries a student trained with gradients is more
    accurate than one trained on membership queries, for a 2-layer MLP victim."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    order = np.random.default_rng(0).permutation(len(x))
    train, pool, test = order[:900], order[900:1300], order[1300:]
    module = nets.MLP((64,), 10)
    victim = training.as_model(module, training.fit(0, module, x[train], y[train], num_steps=300,
                                                    learning_rate=3e-3))
    assert training.accuracy(victim, x[test], y[test]) > 0.9
    oracle = Oracle(victim, 64)
    init = module.init(jax.random.key(1), jnp.zeros((1, 64)))
    scores = {}
    for use_gradients in (False, True):
        accuracies = []
        for seed in range(3):
            queries = x[np.random.default_rng(seed).choice(pool, 10, replace=False)]
            params = distill(oracle, module, init, queries, use_gradients=use_gradients, steps=300,
                             learning_rate=3e-3)
            accuracies.append(training.accuracy(training.as_model(module, params), x[test], y[test]))
        scores[use_gradients] = np.mean(accuracies)
    assert scores[True] > scores[False] + 0.05, scores
