"""Train the Flax models of :mod:`jaxprobe.models.nets` with optax, and turn them into probe-ready callables.

``fit`` runs every optimizer step inside ONE jitted ``lax.scan`` (minibatches drawn by
index on device, no Python loop over steps), so small models train in seconds on a CPU.
Weights are saved and loaded with Flax's msgpack serialization (data, never pickle),
written atomically.
"""

from __future__ import annotations

import json
import os
import platform
from typing import Any, Callable

import flax.linen as nn
import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxprobe._inputs import check_int, check_number
from jaxprobe._io import atomic_write
from jaxprobe.engine.api import canonicalize_key
from jaxprobe.types import ArrayTree, PRNGKey

__all__ = ["fit", "as_model", "accuracy", "save_params", "load_params", "record_training"]

_LOSSES = ("cross_entropy", "mse")
_OUTPUTS = ("probabilities", "logits")


def _output_size(module: nn.Module) -> int | None:
    """The width of the last output axis, or None for modules that return one value per input."""
    for name in ("num_outputs", "num_classes"):
        if hasattr(module, name):
            return int(getattr(module, name))
    return None


def fit(
    rng_key: PRNGKey | int,
    module: nn.Module,
    x: Any,
    y: Any,
    *,
    loss: str = "cross_entropy",
    num_steps: int = 1000,
    batch_size: int = 128,
    learning_rate: float = 1e-3,
    weight_decay: float = 0.0,
    params: ArrayTree | None = None,
) -> ArrayTree:
    """Train ``module`` on ``(x, y)`` with AdamW; returns its Flax variables ``{"params": ...}``.

    Parameters
    ----------
    rng_key
        Key (or int seed) for the initialization and the minibatch indices.
    module
        A Flax module mapping ``(n, ...)`` inputs to ``(n, k)`` outputs (or ``(n,)``).
    x
        Inputs ``(n, ...)``, finite floats.
    y
        ``loss="cross_entropy"``: integer class labels ``(n,)`` in ``[0, k)``; with one
        output (k = 1) the labels are 0/1 and the loss is the logistic one.
        ``loss="mse"``: targets ``(n,)`` or ``(n, k)``.
    num_steps, batch_size, learning_rate, weight_decay
        Optimizer steps (each on ``batch_size`` rows drawn with replacement; the full
        data when ``batch_size >= n``), AdamW's learning rate and decoupled weight decay.
    params
        Variables to start from (default: ``module.init``).

    Examples
    --------
    >>> from jaxprobe.models import MLP
    >>> from jaxprobe import datasets
    >>> data = datasets.iris()
    >>> x = data.standardize(data.x)
    >>> net = MLP(hidden_sizes=(8,), num_outputs=3)
    >>> params = fit(0, net, x, data.y, num_steps=200, learning_rate=0.01)    # AdamW, cross-entropy
    >>> accuracy(as_model(net, params), x, data.y) > 0.9
    True
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a flax.linen Module, got {type(module).__name__}")
    if loss not in _LOSSES:
        raise ValueError(f"loss must be one of {_LOSSES}, got {loss!r}")
    num_steps = check_int(num_steps, "num_steps", minimum=1)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    learning_rate = check_number(learning_rate, "learning_rate", minimum=0.0, exclusive_minimum=True)
    weight_decay = check_number(weight_decay, "weight_decay", minimum=0.0)
    x, y = _training_data(x, y)
    y, batch_loss = _loss_function(loss, y, _num_outputs(module, x, params), x.dtype)
    rng_key = canonicalize_key(rng_key)
    key_init, key_batches = jax.random.split(rng_key)
    if params is None:
        params = module.init(key_init, jnp.asarray(x[:1]))
    optimizer = optax.adamw(learning_rate, weight_decay=weight_decay)
    return _train(module, params, x, y, key_batches, batch_loss, optimizer, num_steps, batch_size)


def _training_data(x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """``x`` checked (finite numbers ``(n, ...)``) and cast to float32 (float64 stays with x64), and ``y``
    with one row per row of ``x``."""
    x = np.asarray(x)
    if x.ndim < 2 or not np.issubdtype(x.dtype, np.number) or not np.all(np.isfinite(x)):
        raise ValueError(f"x must be finite numbers with shape (n, ...), got shape {x.shape} and dtype {x.dtype}")
    x = x.astype(np.float32) if x.dtype != np.float64 or not jax.config.jax_enable_x64 else x
    y = np.asarray(y)
    if y.shape[:1] != x.shape[:1]:
        raise ValueError(f"y must have {x.shape[0]} rows like x, got shape {y.shape}")
    return x, y


def _num_outputs(module: nn.Module, x: np.ndarray, params: ArrayTree | None) -> int:
    """The output width, known before anything is compiled (from the module's fields, else by abstract
    evaluation, which may run Flax's initializers on constants); 1 for one value per input."""
    num_outputs = _output_size(module)
    if num_outputs is None:
        example = jax.ShapeDtypeStruct((1,) + x.shape[1:], x.dtype)
        abstract_params = params if params is not None else jax.eval_shape(
            lambda row: module.init(jax.random.key(0), row), example)
        output_shape = jax.eval_shape(module.apply, abstract_params, example).shape
        num_outputs = output_shape[-1] if len(output_shape) == 2 else 1
    return num_outputs


def _loss_function(loss: str, y: np.ndarray, num_outputs: int, dtype: Any
                   ) -> tuple[np.ndarray, Callable[[jax.Array, jax.Array], jax.Array]]:
    """``y`` checked for ``loss`` (labels in range for cross-entropy, finite targets in ``dtype`` for mse) and
    the mean loss of a minibatch, ``batch_loss(outputs, targets)``."""
    if loss == "cross_entropy":
        if not np.issubdtype(y.dtype, np.integer) or y.ndim != 1:
            raise ValueError(f"y must be integer class labels (n,) for loss='cross_entropy', got {y.dtype} {y.shape}")
        num_classes = num_outputs
        largest = 1 if num_classes == 1 else num_classes - 1
        if y.min() < 0 or y.max() > largest:
            raise ValueError(f"y labels must lie in [0, {largest}] for a model with {num_classes} output(s), "
                             f"got range [{y.min()}, {y.max()}]")

        def batch_loss(outputs, targets):
            if num_classes == 1:
                return optax.sigmoid_binary_cross_entropy(outputs.reshape(-1), targets.astype(outputs.dtype)).mean()
            return optax.softmax_cross_entropy_with_integer_labels(outputs, targets).mean()
    else:
        if not np.issubdtype(y.dtype, np.number) or not np.all(np.isfinite(y)):
            raise ValueError("y must be finite numbers for loss='mse'")
        y = y.astype(dtype)

        def batch_loss(outputs, targets):
            return jnp.mean((outputs.reshape(targets.shape) - targets) ** 2)

    return y, batch_loss


def _train(module: nn.Module, params: ArrayTree, x: np.ndarray, y: np.ndarray, key_batches: PRNGKey,
           batch_loss: Callable[[jax.Array, jax.Array], jax.Array], optimizer: optax.GradientTransformation,
           num_steps: int, batch_size: int) -> ArrayTree:
    """``num_steps`` optimizer steps in ONE jitted ``lax.scan``, each on ``batch_size`` rows drawn with
    replacement on device (the full data when ``batch_size >= n``); returns the trained variables."""
    num_rows = x.shape[0]
    full_batch = batch_size >= num_rows

    @jax.jit
    def train(params, x, y, key_batches):
        def objective(p, xb, yb):
            return batch_loss(module.apply(p, xb), yb)

        def step(carry, key):
            p, opt_state = carry
            if full_batch:
                xb, yb = x, y
            else:
                rows = jax.random.randint(key, (batch_size,), 0, num_rows)
                xb, yb = x[rows], y[rows]
            grads = jax.grad(objective)(p, xb, yb)
            updates, opt_state = optimizer.update(grads, opt_state, p)
            return (optax.apply_updates(p, updates), opt_state), None

        keys = jax.random.split(key_batches, num_steps)
        (p, _), _ = jax.lax.scan(step, (params, optimizer.init(params)), keys)
        return p

    return train(params, jnp.asarray(x), jnp.asarray(y), key_batches)


def as_model(module: nn.Module, params: ArrayTree, *, output: str = "probabilities") -> Callable[[jax.Array], jax.Array]:
    """``x ↦ module.apply(params, x)`` as a probe-ready model.

    ``output="probabilities"``: softmax over the classes ``(..., k)``, or σ(logit) ``(...,)``
    for a one-output (binary) model; ``"logits"``: the raw outputs, with a one-wide last
    axis dropped (regression values ``(...,)``). Works on one input or a batch.

    Examples
    --------
    >>> from jaxprobe.models import MLP
    >>> net = MLP(hidden_sizes=(8,), num_outputs=3)
    >>> params = net.init(jax.random.key(0), jnp.zeros(4))     # or trained: fit(...)
    >>> model = as_model(net, params)                          # x -> class probabilities
    >>> probabilities = model(jnp.ones(4))
    >>> probabilities.shape, bool(abs(float(probabilities.sum()) - 1.0) < 1e-5)
    ((3,), True)
    """
    if output not in _OUTPUTS:
        raise ValueError(f"output must be one of {_OUTPUTS}, got {output!r}")
    size = _output_size(module)

    def model(x: jax.Array) -> jax.Array:
        raw = module.apply(params, x)
        if size == 1:
            raw = raw[..., 0]
        if output == "logits" or size is None:
            return raw
        return jax.nn.sigmoid(raw) if size == 1 else jax.nn.softmax(raw, axis=-1)

    # Probes read this to check thresholds against the output range (prediction_risky's α in [0, 1]).
    model.output = "probabilities" if output == "probabilities" and size is not None else "logits"
    return model


def accuracy(model: Callable[[jax.Array], jax.Array], x: Any, y: Any) -> float:
    """Fraction of rows whose predicted class equals ``y``: argmax of ``(n, k)`` probabilities,
    or ``p > 0.5`` for ``(n,)`` binary probabilities.

    Examples
    --------
    >>> model = lambda x: jnp.stack([1.0 - x[..., 0], x[..., 0]], axis=-1)   # (n, d) -> (n, 2) probabilities
    >>> accuracy(model, np.array([[0.9], [0.2], [0.7]]), np.array([1, 0, 0]))
    0.6666666666666666
    """
    predictions = np.asarray(model(jnp.asarray(x)))
    y = np.asarray(y)
    labels = predictions.argmax(axis=-1) if predictions.ndim == 2 else (predictions > 0.5).astype(int)
    if labels.shape != y.shape:
        raise ValueError(f"y must have shape {labels.shape}, got {y.shape}")
    return float(np.mean(labels == y))


def save_params(path: str | os.PathLike, params: ArrayTree) -> None:
    """Write ``params`` to ``path`` as Flax msgpack (atomically: an interruption leaves the old file).

    Examples
    --------
    >>> params = {"params": {"w": jnp.arange(3.0)}}
    >>> save_params("weights.msgpack", params)
    >>> load_params("weights.msgpack")["params"]["w"].tolist()
    [0.0, 1.0, 2.0]
    """
    data = flax.serialization.msgpack_serialize(flax.serialization.to_state_dict(jax.device_get(params)))
    atomic_write(path, lambda stream: stream.write(data))


def _check_finite_params(path: str | os.PathLike, state: Any) -> None:
    """A ValueError naming the file and the leaf (``params/Dense_0/kernel``) if a weight is NaN or inf."""
    for key_path, leaf in jax.tree_util.tree_leaves_with_path(state):
        array = np.asarray(leaf)
        if array.dtype.kind in "fc" and not np.all(np.isfinite(array)):
            bad = np.argwhere(~np.isfinite(array))
            where = f", the first at index {tuple(int(i) for i in bad[0])}" if array.ndim else ""
            name = "/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in key_path)
            raise ValueError(f"{os.fspath(path)!r}: {name} holds NaN or inf ({len(bad)} of {array.size} "
                             f"entries{where}); saved weights must be finite")


def load_params(path: str | os.PathLike, template: ArrayTree | None = None) -> ArrayTree:
    """Read weights written by :func:`save_params`; with ``template`` (e.g. ``module.init(...)``)
    the result has its structure and the shapes are checked, else a nested dict of arrays. A NaN or inf
    weight is a ValueError naming the file and the leaf.

    Examples
    --------
    >>> save_params("weights.msgpack", {"params": {"w": jnp.arange(3.0)}})
    >>> template = {"params": {"w": jnp.zeros(3)}}                 # e.g. module.init(...): shapes checked
    >>> load_params("weights.msgpack", template)["params"]["w"].shape
    (3,)
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"path {os.fspath(path)!r} does not exist")
    with open(path, "rb") as stream:
        state = flax.serialization.msgpack_restore(stream.read())
    _check_finite_params(path, state)
    if template is None:
        return jax.tree.map(jnp.asarray, state)
    restored = flax.serialization.from_state_dict(template, state)
    for expected, got in zip(jax.tree_util.tree_leaves(template), jax.tree_util.tree_leaves(restored)):
        if np.shape(expected) != np.shape(got):
            raise ValueError(f"{os.fspath(path)!r} holds an array of shape {np.shape(got)} where the template "
                             f"has {np.shape(expected)}")
    return jax.tree.map(jnp.asarray, restored)


def record_training(path: str | os.PathLike, key: str, entry: dict) -> None:
    """Set ``entry`` under ``key`` in the JSON training record at ``path`` (created if missing), with the
    machine that trained it; written atomically. Bundled weights keep how they were made beside them.

    Examples
    --------
    >>> import json
    >>> record_training("training.json", "mlp", {"seed": 0, "test_accuracy": 0.97})
    >>> record_training("training.json", "cnn", {"seed": 1, "test_accuracy": 0.98})   # added beside it
    >>> with open("training.json") as stream:
    ...     record = json.load(stream)
    >>> sorted(record), record["mlp"]
    (['cnn', 'machine', 'mlp'], {'seed': 0, 'test_accuracy': 0.97})
    """
    record = {}
    if os.path.exists(path):
        with open(path) as stream:
            record = json.load(stream)
    record[key] = entry
    record["machine"] = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__}"
    atomic_write(path, lambda stream: stream.write(json.dumps(record, indent=2) + "\n"), binary=False)
