"""Flax definitions of the victim models used across jaxprobe.

Every module maps inputs with any leading batch axes to outputs with the same
leading axes, so the same module serves a training batch ``(n, d)`` and the one
input ``(d,)`` a probe sees. Inputs are flat feature vectors; :class:`LeNet5`
also takes images ``(..., H, W)`` / ``(..., H, W, C)``. Use
:func:`jaxprobe.models.training.fit` to train them and
:func:`jaxprobe.models.training.as_model` to turn (module, params) into a
callable ``x → probabilities`` for :mod:`jaxprobe.probes`.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["LinearRegression", "LogisticRegression", "MLP", "LeNet5", "TwoLayerReLU"]


class LinearRegression(nn.Module):
    """y = W x + b: ``(..., d)`` → ``(..., num_outputs)``.

    Examples
    --------
    >>> net = LinearRegression()
    >>> net.apply(net.init(jax.random.key(0), jnp.zeros(3)), jnp.zeros((7, 3))).shape
    (7, 1)
    """

    num_outputs: int = 1

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return nn.Dense(self.num_outputs, name="linear")(x)


class LogisticRegression(nn.Module):
    """Multinomial logistic regression: ``(..., d)`` → logits ``(..., num_classes)``.

    ``num_classes=1`` gives binary logistic regression with one logit (P(y=1|x) = σ(logit)).

    Examples
    --------
    >>> net = LogisticRegression(num_classes=3)
    >>> params = net.init(jax.random.key(0), jnp.zeros(4))
    >>> jax.tree_util.tree_map(jnp.shape, params)
    {'params': {'linear': {'bias': (3,), 'kernel': (4, 3)}}}
    """

    num_classes: int = 2

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return nn.Dense(self.num_classes, name="linear")(x)


class MLP(nn.Module):
    """Fully connected network: ``(..., d)`` → ``(..., num_outputs)`` (logits or regression values).

    Examples
    --------
    >>> net = MLP(hidden_sizes=(8,), num_outputs=3)
    >>> params = net.init(jax.random.key(0), jnp.zeros(4))
    >>> net.apply(params, jnp.zeros((5, 4))).shape           # (..., d) -> (..., num_outputs) logits
    (5, 3)
    """

    hidden_sizes: Sequence[int] = (64, 64)
    num_outputs: int = 1
    activation: Callable[[jax.Array], jax.Array] = nn.relu

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for index, width in enumerate(self.hidden_sizes):
            x = self.activation(nn.Dense(width, name=f"hidden_{index}")(x))
        return nn.Dense(self.num_outputs, name="output")(x)


class LeNet5(nn.Module):
    """LeNet-5-style CNN: conv(6, 5×5) → avg-pool → conv(16, 5×5) → avg-pool → 120 → 84 → classes.

    Both convolutions use SAME padding so that any image of at least 4×4 pixels works
    (28×28 MNIST and scikit-learn's 8×8 digits). Inputs: flat ``(..., H·W·C)``,
    ``(..., H, W)`` when C = 1, or ``(..., H, W, C)``; output logits ``(..., num_classes)``.

    Examples
    --------
    >>> net = LeNet5(num_classes=10, image_shape=(28, 28, 1))
    >>> params = jax.eval_shape(net.init, jax.random.key(0), jnp.zeros((1, 28, 28, 1)))   # shapes only
    >>> jax.eval_shape(net.apply, params, jnp.zeros((2, 28, 28, 1))).shape              # images -> logits
    (2, 10)
    """

    num_classes: int = 10
    image_shape: tuple[int, int, int] = (28, 28, 1)

    def _as_images(self, x: jax.Array) -> tuple[jax.Array, tuple[int, ...]]:
        height, width, channels = self.image_shape
        shape = tuple(x.shape)
        if shape[-3:] == (height, width, channels):
            batch = shape[:-3]
        elif channels == 1 and shape[-2:] == (height, width):
            batch = shape[:-2]
        elif shape[-1:] == (height * width * channels,):
            batch = shape[:-1]
        else:
            raise ValueError(f"LeNet5 with image_shape={self.image_shape} expects inputs (..., {height}, {width}"
                             f"{', ' + str(channels) if channels != 1 else ''}), (..., {height}, {width}, "
                             f"{channels}) or flat (..., {height * width * channels}); got {shape}")
        return x.reshape((math.prod(batch),) + self.image_shape), batch

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        images, batch = self._as_images(x)
        h = nn.tanh(nn.Conv(6, (5, 5), padding="SAME", name="conv_0")(images))
        h = nn.avg_pool(h, (2, 2), strides=(2, 2))
        h = nn.tanh(nn.Conv(16, (5, 5), padding="SAME", name="conv_1")(h))
        h = nn.avg_pool(h, (2, 2), strides=(2, 2))
        h = h.reshape((h.shape[0], -1))
        h = nn.tanh(nn.Dense(120, name="dense_0")(h))
        h = nn.tanh(nn.Dense(84, name="dense_1")(h))
        logits = nn.Dense(self.num_classes, name="output")(h)
        return logits.reshape(batch + (self.num_classes,))


class TwoLayerReLU(nn.Module):
    """f(x) = Σ_i w_i ReLU(A_i·x + b_i) + c: ``(..., d)`` → ``(...,)``.

    The network of the model-reconstruction paper (Section 3); ``use_bias=False`` is
    its exact setting f(x) = Σ_i w_i ReLU(A_i·x), with no hidden or output bias.

    Examples
    --------
    >>> net = TwoLayerReLU(hidden_dim=5)
    >>> params = net.init(jax.random.key(0), jnp.zeros(3))
    >>> net.apply(params, jnp.zeros(3)).shape, params["params"]["hidden"]["kernel"].shape   # scalar output
    ((), (3, 5))
    """

    hidden_dim: int
    use_bias: bool = True

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        hidden = nn.relu(nn.Dense(self.hidden_dim, use_bias=self.use_bias, name="hidden")(x))
        return nn.Dense(1, use_bias=self.use_bias, name="output")(hidden)[..., 0]

    @staticmethod
    def variables_from_weights(A: Any, w: Any, b: Any = None, c: Any = None) -> dict[str, Any]:
        """Flax variables for given weights: A ``(h, d)``, w ``(h,)``, b ``(h,)`` and scalar c (both or neither).

        Use with ``TwoLayerReLU(hidden_dim=h, use_bias=b is not None).apply(variables, x)``.
        """
        A = np.asarray(A)
        w = np.asarray(w)
        if A.ndim != 2:
            raise ValueError(f"A must have shape (hidden_dim, input_dim), got {A.shape}")
        if w.shape != (A.shape[0],):
            raise ValueError(f"w must have shape ({A.shape[0]},), got {w.shape}")
        if (b is None) != (c is None):
            raise ValueError("pass both b and c (a network with biases) or neither (the paper's bias-free net)")
        hidden = {"kernel": jnp.asarray(A.T)}
        output = {"kernel": jnp.asarray(w[:, None])}
        if b is not None:
            b = np.asarray(b)
            if b.shape != (A.shape[0],):
                raise ValueError(f"b must have shape ({A.shape[0]},), got {b.shape}")
            if np.ndim(c) != 0:
                raise ValueError(f"c must be a scalar, got shape {np.shape(c)}")
            hidden["bias"] = jnp.asarray(b)
            output["bias"] = jnp.asarray(c, hidden["kernel"].dtype).reshape(1)
        return {"params": {"hidden": hidden, "output": output}}
