"""recover_relu (Milli et al. 2019, Algorithm 1): exact recovery, honest failures, query counts."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxprobe.extract import Oracle, RecoveryError, recover_relu


def relu_net(seed, d, h, bias):
    """f(x) = Σ w_i ReLU(A_i·x + b_i) + c with float64 parameters (NumPy, so usable in and out of x64)."""
    rng = np.random.default_rng(seed)
    A, w = rng.normal(size=(h, d)), rng.normal(size=h)
    b = rng.normal(size=h) if bias else np.zeros(h)
    c = 0.7 if bias else 0.0

    def victim(x):
        return jnp.asarray(w) @ jax.nn.relu(jnp.asarray(A) @ x + jnp.asarray(b)) + c

    def truth(x):
        return np.maximum(x @ A.T + b, 0.0) @ w + c

    return victim, truth, (A, b, w, c)


def x64_oracle(victim, d):
    """The victim's NumPy constants are first traced here, in float64 (JAX caches traced constants:
    a victim first traced in float32 keeps float32 parameters, see recover_relu's docstring)."""
    with jax.enable_x64(True):
        return Oracle(victim, d)


def relative_error(network, truth, d, n=10_000, seed=0):
    scales = np.random.default_rng(seed + 1).choice([0.1, 1, 10], n)[:, None]
    x = np.random.default_rng(seed).normal(size=(n, d)) * scales
    exact = truth(x)
    return np.max(np.abs(network(x) - exact)) / np.max(np.abs(exact))


def assert_same_units(network, params):
    """Each true unit w_i ReLU(A_i·x + b_i) is one recovered unit: same hyperplane, same orientation."""
    A, b, w, c = params
    norms = np.linalg.norm(A, axis=1)
    true_rows = np.c_[A / norms[:, None], b / norms]
    found = np.c_[network.weights, network.biases]
    match = np.argmax(true_rows @ found.T, axis=1)
    assert sorted(match) == list(range(len(w))), "units do not match one to one"
    np.testing.assert_allclose(found[match], true_rows, atol=1e-9)
    np.testing.assert_allclose(network.output_weights[match], w * norms, rtol=1e-9)
    np.testing.assert_allclose(network.output_bias, c, atol=1e-9)
    np.testing.assert_array_equal(network.linear, 0.0)


@pytest.mark.parametrize("bias", [True, False], ids=["with-biases", "paper-setting"])
def test_exact_recovery_h_below_d_gives_the_true_units(bias, compile_counter):
    d, h = 12, 5
    victim, truth, params = relu_net(1, d, h, bias)
    oracle = x64_oracle(victim, d)
    network = recover_relu(oracle, jax.random.key(0), hidden_dim=h)
    with compile_counter:                      # a second recovery reuses every compiled function
        again = recover_relu(oracle, jax.random.key(0), hidden_dim=h)
    assert compile_counter.count == 0
    np.testing.assert_array_equal(again.weights, network.weights)
    oracle.reset_counts()
    network = recover_relu(oracle, jax.random.key(0), hidden_dim=h)
    assert network.hidden_dim == h and network.info["per_attempt"][-1]["folded"]
    assert relative_error(network, truth, d) < 1e-9
    assert_same_units(network, params)
    # Theorem 2 spends h·log2(2l/ε) gradient queries (l = h², its choice; ε = 1e-6 here)
    assert oracle.num_gradient_queries < h * np.log2(2 * h ** 2 / 1e-6) / 2
    # the network reports the queries it spent, and they are the oracle's
    assert network.info["num_gradient_queries"] == oracle.num_gradient_queries
    assert network.info["num_value_queries"] == oracle.num_value_queries


def test_exact_recovery_h_above_d_and_unknown_h():
    d, h = 4, 11       # rows of A cannot be independent: the affine part stays a linear term
    victim, truth, _ = relu_net(2, d, h, True)
    network = recover_relu(x64_oracle(victim, d), jax.random.key(1))
    assert network.hidden_dim == h
    assert relative_error(network, truth, d) < 1e-9
    x = np.random.default_rng(5).normal(size=(50, d))
    with jax.enable_x64(True):
        np.testing.assert_allclose(jax.vmap(network.as_jax_fn())(jnp.asarray(x)), network(x), rtol=1e-12)


@pytest.mark.slow
def test_gradient_queries_beat_the_papers_bound():
    d, h = 30, 16
    victim, truth, _ = relu_net(3, d, h, True)
    oracle = x64_oracle(victim, d)
    network = recover_relu(oracle, jax.random.key(2), hidden_dim=h)
    assert relative_error(network, truth, d) < 1e-9
    # Theorem 2 spends h·log2(2l/ε) gradient queries; with l = h² (its choice) and even a generous
    # ε = 1e-3 that is h·log2(2h²·1e3) ≈ 28 per unit here. The sweep + exact kinks need a handful.
    assert oracle.num_gradient_queries / h < 6
    assert oracle.num_gradient_queries < h * np.log2(2 * h ** 2 / 1e-3) / 4


def test_finite_difference_variant_uses_value_queries_only():
    d, h = 6, 4
    victim, truth, params = relu_net(4, d, h, True)
    oracle = x64_oracle(victim, d)
    network = recover_relu(oracle, jax.random.key(3), hidden_dim=h, finite_differences=True)
    assert oracle.num_gradient_queries == 0
    assert relative_error(network, truth, d) < 1e-6
    # every gradient of the sweep costs d + 1 value queries (Appendix C: about d times more queries)
    sweep = sum(attempt["sweep_points"] for attempt in network.info["per_attempt"])
    assert oracle.num_value_queries >= (d + 1) * sweep


def test_failures_are_reported_not_returned():
    d, h = 5, 6
    victim, _, _ = relu_net(5, d, h, True)
    with pytest.raises(RecoveryError, match="more than hidden_dim=2"):
        recover_relu(x64_oracle(victim, d), jax.random.key(4), hidden_dim=2, max_attempts=1)
    # a smooth victim is no ReLU network: whatever the kinks found, the check on fresh queries fails
    rng = np.random.default_rng(0)
    A, w = rng.normal(size=(3, d)), rng.normal(size=3)
    smooth = x64_oracle(lambda x: jnp.asarray(w) @ jnp.tanh(jnp.asarray(A) @ x), d)
    with pytest.raises(RecoveryError, match="attempt 1"):
        recover_relu(smooth, jax.random.key(5), max_attempts=1, max_iterations=20)


def _reported_input(error: pytest.ExceptionInfo) -> np.ndarray:
    """The x = [...] an error names (printed with 4 decimals)."""
    text = str(error.value)
    return np.array(text[text.index("at x = [") + 8:text.index("]", text.index("at x = ["))].split(), float)


@pytest.mark.parametrize("finite_differences", [False, True], ids=["gradients", "finite-differences"])
@pytest.mark.parametrize("kind", ["nan-everywhere", "inf-on-a-half-space"])
def test_nonfinite_victim_is_named_not_taken_for_kinks(kind, finite_differences):
    """A victim answering NaN or inf: a ValueError naming the oracle, the query and the input (which really
    answers non-finite), not a geometric failure ("two kinks closer than the resolution") after retries."""
    d = 4
    victim, _, _ = relu_net(9, d, 3, True)
    bad = (lambda x: victim(x) * jnp.nan) if kind == "nan-everywhere" else \
        (lambda x: jnp.where(x[0] > 3.0, jnp.inf, victim(x)))
    oracle = x64_oracle(bad, d)
    with pytest.raises(ValueError, match=r"oracle: the victim returned NaN or inf for a value query \(the sweep "
                                         r"along a random line.* at x = \[") as error:
        recover_relu(oracle, jax.random.key(0), hidden_dim=3, finite_differences=finite_differences)
    with jax.enable_x64(True):
        assert not np.all(np.isfinite(np.asarray(oracle.value(_reported_input(error)[None]))))


def test_nonfinite_answers_inside_the_search_or_the_output_fit_are_named():
    """NaN only near a unit's kink (met by the interval search's probes, not by the sweep) and NaN in another
    logit of a k-output victim (met by the output layer's fit): each a ValueError naming the query."""
    d, h = 4, 3
    victim, _, (A, b, _, _) = relu_net(10, d, h, True)

    def near_kink(x):
        return jnp.where(jnp.abs(jnp.asarray(A[0]) @ x + b[0]) < 1e-2 * (1 + jnp.linalg.norm(x)), jnp.nan, victim(x))

    with pytest.raises(ValueError, match="for a query locating the kinks at x = ") as error:
        recover_relu(x64_oracle(near_kink, d), jax.random.key(0), hidden_dim=h)
    x = _reported_input(error)
    assert abs(A[0] @ x + b[0]) < 1e-2 * (1 + np.linalg.norm(x)) + 1e-3  # printed to 4 decimals
    logits, _, _ = logit_net(12, d, h, 3)
    second_logit_nan = x64_oracle(lambda x: logits(x).at[2].set(jnp.where(x[1] > 0.5, jnp.nan, logits(x)[2])), d)
    with pytest.raises(ValueError, match=r"for a value query \(the output layer's fit"):
        recover_relu(second_logit_nan, jax.random.key(1), output=0)


def test_bad_arguments():
    victim, _, _ = relu_net(6, 3, 2, False)
    oracle = Oracle(victim, 3)
    with pytest.raises(TypeError, match="Oracle"):
        recover_relu(victim, jax.random.key(0))
    with pytest.raises(ValueError, match="hidden_dim"):
        recover_relu(oracle, jax.random.key(0), hidden_dim=0)
    with pytest.raises(ValueError, match="output must be None"):
        recover_relu(oracle, jax.random.key(0), output=0)
    with pytest.raises(ValueError, match="output must be a class index"):
        recover_relu(Oracle(lambda x: jnp.stack([x.sum(), -x.sum()]), 3), jax.random.key(0), output=2)
    with pytest.raises(ValueError, match="finite_difference_step"):
        recover_relu(oracle, jax.random.key(0), finite_difference_step=-1.0)
    assert oracle.num_value_queries == oracle.num_gradient_queries == 0


@pytest.mark.slow
@pytest.mark.parametrize("d", [10, 200])
@pytest.mark.parametrize("h", [8, 64])
def test_gradient_queries_per_unit_flat_in_d(d, h):
    victim, truth, _ = relu_net(7, d, h, True)
    oracle = x64_oracle(victim, d)
    network = recover_relu(oracle, jax.random.key(6), hidden_dim=h)
    assert relative_error(network, truth, d) < 1e-6
    assert oracle.num_gradient_queries / h < 6


@pytest.mark.slow
def test_finite_difference_variant_with_dense_kinks():
    """h = 512 units on d = 10: kinks on the line closer than a finite-difference step, in pairs whose
    outer lines cross outside them (the cases that made the value-only variant fail before)."""
    d, h = 10, 512
    victim, truth, _ = relu_net(8, d, h, True)
    oracle = x64_oracle(victim, d)
    network = recover_relu(oracle, jax.random.key(7), hidden_dim=h, finite_differences=True)
    assert oracle.num_gradient_queries == 0
    assert relative_error(network, truth, d) < 1e-6


def logit_net(seed, d, h, k):
    """Logits f(x) = W ReLU(A·x + b) + c of a k-class classifier (NumPy float64 parameters)."""
    rng = np.random.default_rng(seed)
    A, b, W, c = rng.normal(size=(h, d)), rng.normal(size=h), rng.normal(size=(k, h)), rng.normal(size=k)

    def victim(x):
        return jnp.asarray(W) @ jax.nn.relu(jnp.asarray(A) @ x + jnp.asarray(b)) + jnp.asarray(c)

    def truth(x):
        return np.maximum(x @ A.T + b, 0.0) @ W.T + c

    return victim, truth, (A, b, W, c)


@pytest.mark.slow
@pytest.mark.parametrize("d, h", [(30, 6), (4, 7)], ids=["h<d", "h>d"])
def test_logit_victims_recovered_exactly(d, h):
    """A k-output victim (a classifier's logits): hidden units from one logit's gradients, output layer of
    all k logits from vector value queries; exact up to rounding, with honest counts, h inferred."""
    k = 4
    victim, truth, (A, b, W, c) = logit_net(11, d, h, k)
    oracle = x64_oracle(victim, d)
    network = recover_relu(oracle, jax.random.key(2), output=1)
    assert network.hidden_dim == h
    assert network.output_weights.shape == (k, h) and network.output_bias.shape == (k,)
    assert network.linear.shape == (k, d)
    x = np.random.default_rng(3).normal(size=(4000, d)) * np.resize([0.1, 1.0, 10.0], 4000)[:, None]
    exact = truth(x)
    got = network(x)
    assert got.shape == (4000, k)
    assert np.max(np.abs(got - exact)) / np.max(np.abs(exact)) < 1e-9
    np.testing.assert_array_equal(np.argmax(got, 1), np.argmax(exact, 1))
    # every query is counted on the caller's oracle, and reported
    assert network.info["num_value_queries"] == oracle.num_value_queries > 0
    assert network.info["num_gradient_queries"] == oracle.num_gradient_queries > 0
    # the output layer costs about one value query per feature (h + 1, or h + d + 1 unfolded) plus checks
    folded = network.info["per_attempt"][-1]["folded"]
    assert folded == (h <= d)
    if folded:  # the true units with their orientation: output weights are W up to the row norms of A
        np.testing.assert_array_equal(network.linear, 0.0)
        norms = np.linalg.norm(A, axis=1)
        match = np.argmax(np.c_[A / norms[:, None], b / norms] @ np.c_[network.weights, network.biases].T, axis=1)
        np.testing.assert_allclose(network.output_weights[:, match], W * norms, rtol=1e-8)
        np.testing.assert_allclose(network.output_bias, c, atol=1e-9)
    # a JAX function of one input with the same answers (in the caller's precision: float64 here)
    with jax.enable_x64(True):
        f = network.as_jax_fn()
        np.testing.assert_allclose(np.asarray(jax.vmap(f)(jnp.asarray(x[:50]))), exact[:50], rtol=1e-9, atol=1e-9)
