"""``jaxprobe demo``: where is a breast-cancer classifier undecided?

Trains a small MLP on scikit-learn's bundled breast_cancer data (30 standardized
features), then samples inputs from p(x) ∝ exp(−(f(x) − ½)²/τ)·N(x; 0, I): the
prediction-risky probe of the probing paper (Section 3) with a standard-normal
prior in standardized units. Writes samples (.npz), a summary (.json) and a
plot (.png).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxprobe import priors
from jaxprobe._io import atomic_write
from jaxprobe.engine import sample
from jaxprobe.target import gibbs

# run_demo is the body of the `jaxprobe demo` command (cli.py), which users run: importable, not public API.
__all__ = ["train_mlp", "mlp_probability"]


def _init_mlp(rng_key: jax.Array, sizes: tuple[int, ...]) -> list[dict[str, jax.Array]]:
    keys = jax.random.split(rng_key, len(sizes) - 1)
    return [
        {"w": jax.random.normal(key, (n_in, n_out)) / jnp.sqrt(n_in), "b": jnp.zeros((n_out,))}
        for key, n_in, n_out in zip(keys, sizes[:-1], sizes[1:])
    ]


def mlp_logit(params: list[dict[str, jax.Array]], x: jax.Array) -> jax.Array:
    """Logit of an MLP with tanh hidden layers for one input ``(d,)`` → scalar."""
    h = x
    for layer in params[:-1]:
        h = jnp.tanh(h @ layer["w"] + layer["b"])
    return (h @ params[-1]["w"] + params[-1]["b"])[0]


def mlp_probability(params: list[dict[str, jax.Array]], x: jax.Array) -> jax.Array:
    """P(malignant | x) for one input ``(d,)``.

    Examples
    --------
    >>> params = [{"w": jnp.ones((2, 1)), "b": jnp.zeros(1)}]      # no hidden layer: sigmoid(x₀ + x₁)
    >>> round(float(mlp_probability(params, jnp.zeros(2))), 4), round(float(mlp_probability(params, jnp.ones(2))), 4)
    (0.5, 0.8808)
    """
    return jax.nn.sigmoid(mlp_logit(params, x))


def train_mlp(rng_key: jax.Array, x: np.ndarray, y: np.ndarray, hidden: int = 16, steps: int = 400,
              learning_rate: float = 1e-2, weight_decay: float = 1e-3) -> list[dict[str, jax.Array]]:
    """Full-batch AdamW on the logistic loss (a few seconds on CPU): ``x`` ``(n, d)``, labels ``y`` ``(n,)`` in
    {0, 1}; returns the MLP's layers ``d → hidden (tanh) → 1`` for :func:`mlp_probability`.

    Examples
    --------
    >>> x = np.array([[-2.0, -1.0], [-1.0, -2.0], [1.0, 2.0], [2.0, 1.0]], np.float32)
    >>> y = np.array([0.0, 0.0, 1.0, 1.0])
    >>> params = train_mlp(jax.random.key(0), x, y, hidden=4, steps=50)
    >>> [layer["w"].shape for layer in params]                          # 2 → 4 (tanh) → 1
    [(2, 4), (4, 1)]
    >>> jax.vmap(lambda row: mlp_probability(params, row))(x).round().tolist()   # it learned the labels
    [0.0, 0.0, 1.0, 1.0]
    """
    params = _init_mlp(rng_key, (x.shape[1], hidden, 1))
    optimizer = optax.adamw(learning_rate, weight_decay=weight_decay)
    x, y = jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)

    def loss(p):
        logits = jax.vmap(lambda row: mlp_logit(p, row))(x)
        return jnp.mean(optax.sigmoid_binary_cross_entropy(logits, y))

    def step(carry, _):
        p, opt_state = carry
        value, grads = jax.value_and_grad(loss)(p)
        updates, opt_state = optimizer.update(grads, opt_state, p)
        return (optax.apply_updates(p, updates), opt_state), value

    (params, _), _ = jax.jit(lambda p: jax.lax.scan(step, (p, optimizer.init(p)), None, length=steps))(params)
    return params


def run_demo(out_dir: str = "jaxprobe-demo", *, seed: int = 0, num_chains: int = 256, num_samples: int = 400,
             num_warmup: int = 400, temperature: float = 0.01, sampler: str = "chees",
             progress: bool = True) -> dict[str, Any]:
    """Run the demo and write ``samples.npz``, ``summary.json`` and ``plot.png`` into ``out_dir``."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    started = time.perf_counter()
    os.makedirs(out_dir, exist_ok=True)
    data = load_breast_cancer()
    x_train, x_test, y_train, y_test = train_test_split(
        data.data, 1 - data.target, test_size=0.25, random_state=seed, stratify=data.target
    )  # label 1 = malignant
    mean, scale = x_train.mean(axis=0), x_train.std(axis=0)
    z_train = ((x_train - mean) / scale).astype(np.float32)
    z_test = ((x_test - mean) / scale).astype(np.float32)

    key_train, key_init, key_sample = jax.random.split(jax.random.key(seed), 3)
    params = train_mlp(key_train, z_train, y_train)
    predict = jax.jit(jax.vmap(lambda row: mlp_probability(params, row)))
    test_accuracy = float(np.mean((np.asarray(predict(z_test)) > 0.5) == y_test))

    # Prediction-risky probe (probing paper, Sec. 3): G(x) = |f(x) − α|², α = ½.
    def risky(x):
        return (mlp_probability(params, x) - 0.5) ** 2

    logdensity = gibbs(risky, temperature, priors.StandardNormal())
    init = priors.StandardNormal().sample(key_init, num_chains, (data.data.shape[1],))
    samples = sample(key_sample, logdensity, init, sampler=sampler, num_samples=num_samples,
                              num_warmup=num_warmup, progress=progress)

    draws = samples.positions.reshape(-1, samples.positions.shape[-1])
    probabilities = np.asarray(predict(jnp.asarray(draws)))
    data_probabilities = np.asarray(predict(jnp.asarray(z_train)))
    summary = samples.summary()
    # The answer's numbers with their Monte-Carlo standard errors (sd/sqrt(ESS) of each function's values).
    mean_probability = samples.expectation(lambda x: mlp_probability(params, x))
    near_boundary = samples.expectation(lambda x: jnp.abs(mlp_probability(params, x) - 0.5) < 0.1)
    result = {
        "task": "prediction-risky probe of an MLP trained on sklearn breast_cancer (label 1 = malignant)",
        "temperature": temperature,
        "sampler": samples.sampler,
        "num_chains": samples.num_chains,
        "num_samples_per_chain": samples.num_draws,
        "num_warmup": samples.num_warmup,
        "test_accuracy": test_accuracy,
        "mean_acceptance_rate": float(samples.acceptance_rate.mean()),
        "step_size_median": float(np.median(samples.step_size)),
        "num_nonfinite_proposals": int(samples.num_nonfinite.sum()),
        "probe_output": {
            "mean_probability": float(mean_probability.mean),
            "mean_probability_mcse": float(mean_probability.mcse),
            "fraction_within_0.1_of_boundary": float(near_boundary.mean),
            "fraction_within_0.1_of_boundary_mcse": float(near_boundary.mcse),
            "data_fraction_within_0.1_of_boundary": float(np.mean(np.abs(data_probabilities - 0.5) < 0.1)),
        },
        "max_rhat": float(np.max(summary.rhat)),
        "min_ess_bulk": float(np.min(summary.ess_bulk)),
        "features": {
            name: {**stats, "mean_original_units": float(stats["mean"] * scale[i] + mean[i])}
            for i, (name, stats) in enumerate(zip(data.feature_names, summary.to_dict().values()))
        },
    }
    samples.save(os.path.join(out_dir, "samples.npz"))
    atomic_write(os.path.join(out_dir, "summary.json"), lambda f: json.dump(result, f, indent=2), binary=False)
    _plot(os.path.join(out_dir, "plot.png"), z_train, y_train, draws, probabilities, data_probabilities)
    result["seconds"] = time.perf_counter() - started
    return result


def _plot(path, z_train, y_train, draws, probabilities, data_probabilities) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Two principal directions of the training data, for a 2-D view of 30-D samples.
    centered = z_train - z_train.mean(axis=0)
    _, _, vt = np.linalg.svd(centered, full_matrices=False)
    project = lambda z: (z - z_train.mean(axis=0)) @ vt[:2].T
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    data_2d, samples_2d = project(z_train), project(draws[:4000])
    left.scatter(samples_2d[:, 0], samples_2d[:, 1], s=3, c="tab:green", alpha=0.3, label="probe samples")
    for label, color, name in ((0, "tab:blue", "benign"), (1, "tab:red", "malignant")):
        mask = y_train == label
        left.scatter(data_2d[mask, 0], data_2d[mask, 1], s=8, c=color, label=name)
    left.set_xlabel("PC 1")
    left.set_ylabel("PC 2")
    left.set_title("Prediction-risky samples (green) vs training data")
    left.legend(loc="best", fontsize=8)
    bins = np.linspace(0, 1, 41)
    right.hist(data_probabilities, bins=bins, density=True, alpha=0.6, label="training data")
    right.hist(probabilities, bins=bins, density=True, alpha=0.6, label="probe samples")
    right.set_xlabel("model P(malignant | x)")
    right.set_title("Model output: samples concentrate at the boundary")
    right.legend()
    figure.tight_layout()
    try:
        atomic_write(path, lambda stream: figure.savefig(stream, format="png", dpi=110))
    finally:
        plt.close(figure)
