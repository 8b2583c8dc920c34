"""Learning a model from its explanations (Milli et al. 2019, Section 4) and the logistic closed form.

:func:`distill` queries the victim once per query input and fits a Flax student with optax on

    ℓ_J(x) = ‖∇f(x) − ∇f̂(x)‖² + λ · CE(f(x), f̂(x))      (gradient / SmoothGrad queries)
    ℓ_M(x) = CE(f(x), f̂(x))                              (membership queries only)

where f(x) are the victim's class probabilities, ∇f(x) the explanation the oracle returns (the gradient,
or SmoothGrad map, of the probability of the victim's predicted class) and ∇f̂(x) the gradient of the
student's probability of that same class. :func:`logistic_closed_form` is the paper's footnote 2:
a logistic model f(x) = σ(w·x + b) is identified by one gradient and one value query,
w = ∇f(x) / (f(x)(1 − f(x))), b = logit f(x) − w·x (and a multinomial one by one Jacobian query).
"""

from __future__ import annotations

from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxprobe._inputs import check_int, check_number
from jaxprobe.engine.api import canonicalize_key
from jaxprobe.extract.oracle import Oracle
from jaxprobe.types import Array, ArrayTree

__all__ = ["distill", "logistic_closed_form", "EXPLANATIONS"]

EXPLANATIONS = ("gradient", "smoothgrad")
_LOG_FLOOR = 1e-12


def _student_apply(student: Any) -> Callable[[ArrayTree, Array], Array]:
    if isinstance(student, nn.Module):
        return student.apply
    if callable(student):
        return student
    raise TypeError(f"student must be a flax.linen Module or a function apply(params, x), got {type(student).__name__}")


def _probabilities(logits: Array, num_outputs: int | None) -> Array:
    """Student logits of ONE input → probabilities shaped like the victim's output."""
    if num_outputs is None:
        return jax.nn.sigmoid(logits.reshape(()))
    return jax.nn.softmax(logits.reshape(num_outputs))


def _cross_entropy(target: Array, predicted: Array, num_outputs: int | None) -> Array:
    if num_outputs is None:
        return -(target * jnp.log(jnp.maximum(predicted, _LOG_FLOOR))
                 + (1 - target) * jnp.log(jnp.maximum(1 - predicted, _LOG_FLOOR)))
    return -jnp.sum(target * jnp.log(jnp.maximum(predicted, _LOG_FLOOR)))


def distill(oracle: Oracle, student: Any, student_params: ArrayTree, queries: Any, *, use_gradients: bool = True,
            explanation: str = "gradient", lam: float = 1.0, steps: int = 500, learning_rate: float = 1e-3,
            key: Any = 0, smoothgrad_samples: int = 50, smoothgrad_std: float = 0.15) -> ArrayTree:
    """Fit ``student`` to the victim behind ``oracle`` from queries at the rows of ``queries``.

    Parameters
    ----------
    oracle:
        the victim; it must return class probabilities (n, k) or one probability (n,) per input.
        Each query row costs one value query, plus one gradient query when ``use_gradients``.
    student, student_params:
        a Flax module (or a function ``apply(params, x)``) mapping (n, d) to logits (n, k) (or one logit
        per row for a one-probability victim), and its initial variables.
    queries:
        query inputs (n, d): drawn from data, or from a Gaussian (the paper's unknown-distribution case).
    use_gradients:
        True: minimize ℓ_J = ‖∇f − ∇f̂‖² + λ·CE(f, f̂) (paper Section 4); False: ℓ_M = CE(f, f̂) alone.
    explanation:
        ``"gradient"`` (raw saliency) or ``"smoothgrad"`` (mean gradient over ``smoothgrad_samples``
        copies with noise N(0, ``smoothgrad_std``²); one query per row all the same).
    lam, steps, learning_rate:
        λ of ℓ_J, full-batch Adam steps (one ``lax.scan``), Adam's learning rate.
    key:
        int seed or ``jax.random.key``: SmoothGrad's noise.

    Returns
    -------
    The trained student variables (same structure as ``student_params``).

    Examples
    --------
    >>> import flax.linen as nn
    >>> w = jnp.array([2.0, -1.0])
    >>> oracle = Oracle(lambda x: jax.nn.sigmoid(x @ w), input_dim=2)     # the victim: one probability
    >>> student = nn.Dense(1)                                             # (n, 2) -> one logit per row
    >>> queries = np.random.default_rng(0).normal(size=(20, 2))
    >>> params = distill(oracle, student, student.init(jax.random.key(0), jnp.zeros((1, 2))), queries,
    ...                  steps=300, learning_rate=0.05)
    >>> np.round(params["params"]["kernel"][:, 0], 2).tolist()           # the victim's weights, learned
    [2.0, -1.0]
    >>> oracle.num_value_queries, oracle.num_gradient_queries             # one of each per query row
    (20, 20)
    """
    if not isinstance(oracle, Oracle):
        raise TypeError(f"oracle must be a jaxprobe.extract.Oracle, got {type(oracle).__name__}")
    apply = _student_apply(student)
    if explanation not in EXPLANATIONS:
        raise ValueError(f"explanation must be one of {EXPLANATIONS}, got {explanation!r}")
    steps = check_int(steps, "steps", minimum=1)
    smoothgrad_samples = check_int(smoothgrad_samples, "smoothgrad_samples", minimum=1)
    for name, value, allow_zero in (("lam", lam, True), ("learning_rate", learning_rate, False),
                                    ("smoothgrad_std", smoothgrad_std, False)):
        check_number(value, name, minimum=0.0, exclusive_minimum=not allow_zero)
    queries = np.asarray(queries)
    if queries.ndim != 2 or queries.shape[1] != oracle.input_dim:
        raise ValueError(f"queries must have shape (n, {oracle.input_dim}), got {queries.shape}")
    key = canonicalize_key(key)
    num_outputs = oracle.num_outputs

    # ---- the queries (counted by the oracle), then no more contact with the victim
    targets = jnp.asarray(oracle.value(queries))
    if use_gradients:
        if explanation == "gradient":
            explanations = jnp.asarray(oracle.gradient(queries))
        else:
            explanations = jnp.asarray(oracle.smoothgrad(key, queries, num_samples=int(smoothgrad_samples),
                                                         noise_std=float(smoothgrad_std)))
    else:
        explanations = jnp.zeros_like(jnp.asarray(queries, targets.dtype))
    lo, hi = float(jnp.min(targets)), float(jnp.max(targets))
    if lo < -1e-6 or hi > 1 + 1e-6:
        raise ValueError("distill needs a victim that returns probabilities; its outputs range over "
                         f"[{lo:.3g}, {hi:.3g}] (wrap logits with jax.nn.softmax / jax.nn.sigmoid)")
    classes = (jnp.argmax(targets, axis=1) if num_outputs is not None else jnp.zeros(targets.shape[0], jnp.int32))
    x = jnp.asarray(queries, targets.dtype)

    def student_probability(params, row, cls):
        p = _probabilities(apply(params, row[None])[0], num_outputs)
        return p if num_outputs is None else p[cls]

    def loss(params):
        logits = apply(params, x)
        probabilities = jax.vmap(lambda lg: _probabilities(lg, num_outputs))(logits)
        cross_entropy = jnp.mean(jax.vmap(lambda t, p: _cross_entropy(t, p, num_outputs))(targets, probabilities))
        if not use_gradients:
            return cross_entropy
        student_gradients = jax.vmap(jax.grad(student_probability, argnums=1), in_axes=(None, 0, 0))(params, x, classes)
        gradient_loss = jnp.mean(jnp.sum((explanations - student_gradients) ** 2, axis=1))
        return gradient_loss + lam * cross_entropy

    optimizer = optax.adam(learning_rate)

    @jax.jit
    def train(params):
        def step(carry, _):
            params, state = carry
            grads = jax.grad(loss)(params)
            updates, state = optimizer.update(grads, state, params)
            return (optax.apply_updates(params, updates), state), None

        (params, _), _ = jax.lax.scan(step, (params, optimizer.init(params)), None, length=int(steps))
        return params

    return train(student_params)


def logistic_closed_form(oracle: Oracle, x: Any) -> tuple[np.ndarray, np.ndarray]:
    """Identify a logistic-regression victim from the queries at ONE input x (shape (d,) or (1, d)).

    Binary victim f(x) = σ(w·x + b) (one probability): footnote 2 of the paper,
    w = ∇f(x) / (f(x)(1 − f(x))) from one gradient and one value query, and b = log(f/(1 − f)) − w·x.
    Returns (w (d,), b scalar array).

    Multinomial victim p = softmax(W x + b) (k probabilities): one Jacobian query (``output='all'``)
    and one value query give ∂p_k/∂x = p_k (W_k − Σ_j p_j W_j), hence W'_k = J_k / p_k and
    b'_k = log p_k − W'_k·x: the same softmax model (W, b up to a shift shared by all classes, to
    which softmax is blind). Returns (W' (k, d), b' (k,)).

    Examples
    --------
    >>> oracle = Oracle(lambda x: jax.nn.sigmoid(x @ jnp.array([2.0, -1.0]) + 0.5), input_dim=2)
    >>> w, b = logistic_closed_form(oracle, np.array([0.1, 0.2]))
    >>> np.round(w, 3).tolist(), round(float(b), 3)                      # σ(2·x₀ − x₁ + 0.5), identified
    ([2.0, -1.0], 0.5)
    >>> oracle.num_value_queries, oracle.num_gradient_queries
    (1, 1)
    """
    if not isinstance(oracle, Oracle):
        raise TypeError(f"oracle must be a jaxprobe.extract.Oracle, got {type(oracle).__name__}")
    x = np.asarray(x, dtype=np.float64).reshape(1, -1) if np.ndim(x) == 1 else np.asarray(x, np.float64)
    if x.shape != (1, oracle.input_dim):
        raise ValueError(f"x must be one input of shape ({oracle.input_dim},), got {np.shape(x)}")
    p = np.asarray(oracle.value(x), np.float64)[0]
    if np.any(p <= 0) or np.any(p >= 1):
        raise ValueError("logistic_closed_form needs probabilities strictly inside (0, 1) at x; got "
                         f"{p} (a saturated output reveals nothing: pick a less extreme x)")
    if oracle.num_outputs is None:
        gradient = np.asarray(oracle.gradient(x), np.float64)[0]
        w = gradient / (p * (1 - p))
        return w, np.asarray(np.log(p / (1 - p)) - w @ x[0])
    jacobian = np.asarray(oracle.gradient(x, output="all"), np.float64)[0]
    W = jacobian / p[:, None]
    return W, np.log(p) - W @ x[0]
