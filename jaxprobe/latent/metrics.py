"""How far images are from the data manifold, and what classifiers call them.

- :func:`reconstruction_error`: ‖x − φ(μ(x))‖² / (H·W), the VAE's per-pixel squared reconstruction
  error; images on the manifold the VAE learned are reconstructed well, off-manifold ones are not.
- :func:`nearest_neighbour_distance`: the Euclidean distance from each image to the closest real image.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["reconstruction_error", "nearest_neighbour_distance", "predicted_labels"]

_BLOCK = 256


def _as_flat(name: str, images: Any, num_pixels: int | None = None) -> np.ndarray:
    images = np.asarray(images, np.float32)
    if images.ndim < 2:
        raise ValueError(f"{name} must be a batch of images (N, H, W) or (N, H·W), got shape {images.shape}")
    flat = images.reshape(images.shape[0], -1)
    if num_pixels is not None and flat.shape[1] != num_pixels:
        raise ValueError(f"{name} have {flat.shape[1]} pixels, expected {num_pixels}")
    if not np.all(np.isfinite(flat)):
        raise ValueError(f"{name} must be finite")
    return flat


def _blocks(flat: np.ndarray) -> tuple[jax.Array, int]:
    count = flat.shape[0]
    padded = -(-count // _BLOCK) * _BLOCK
    return jnp.asarray(np.pad(flat, ((0, padded - count), (0, 0))).reshape(-1, _BLOCK, flat.shape[1])), count


def reconstruction_error(vae: Any, images: Any) -> np.ndarray:
    """Per-image mean squared error of the VAE's reconstruction φ(μ(x)): ``(N,)`` for images ``(N, H, W)``.

    Examples
    --------
    >>> from jaxprobe.latent import mnist_vae
    >>> vae = mnist_vae()
    >>> decoded = vae.decode(jax.random.normal(jax.random.key(0), (8, 10)))   # images the VAE can make
    >>> noise = np.random.default_rng(0).uniform(size=(8, 28, 28))          # images it cannot
    >>> errors = reconstruction_error(vae, decoded)
    >>> errors.shape, bool(errors.max() < reconstruction_error(vae, noise).min())
    ((8,), True)
    """
    from jaxprobe.latent.vae import VAE

    if not isinstance(vae, VAE):
        raise TypeError(f"vae must be a jaxprobe.latent.VAE, got {type(vae).__name__}")
    flat = _as_flat("images", images, vae.config.num_pixels)
    blocks, count = _blocks(flat)

    def errors(block):
        reconstruction = vae.reconstruct(block.reshape((-1,) + vae.image_shape)).reshape(block.shape)
        return jnp.mean((reconstruction - block) ** 2, axis=-1)

    return np.asarray(jax.jit(lambda b: jax.lax.map(errors, b))(blocks)).reshape(-1)[:count]


def nearest_neighbour_distance(images: Any, reference: Any) -> np.ndarray:
    """Euclidean distance from each image to its nearest neighbour in ``reference`` (real images): ``(N,)``.

    Examples
    --------
    >>> images = np.zeros((3, 2, 2))                                 # 3 generated 2×2 images
    >>> reference = np.ones((5, 2, 2)); reference[0] = 0.5           # real ones; the nearest is 0.5 everywhere
    >>> nearest_neighbour_distance(images, reference).tolist()       # √(4 · 0.5²)
    [1.0, 1.0, 1.0]
    """
    flat = _as_flat("images", images)
    reference = jnp.asarray(_as_flat("reference images", reference, flat.shape[1]))
    blocks, count = _blocks(flat)
    reference_norms = jnp.sum(reference**2, axis=1)

    def distances(block):
        squared = jnp.sum(block**2, axis=1)[:, None] + reference_norms[None, :] - 2.0 * block @ reference.T
        return jnp.sqrt(jnp.maximum(jnp.min(squared, axis=1), 0.0))

    return np.asarray(jax.jit(lambda b: jax.lax.map(distances, b))(blocks)).reshape(-1)[:count]


def predicted_labels(models: Sequence[Callable] | Callable, images: Any) -> np.ndarray:
    """argmax class of each model on each image: ``(num_models, N)`` (or ``(N,)`` for one model).

    Models take one flat image ``(H·W,)`` (or a batch) and return class probabilities or logits.

    Examples
    --------
    >>> model = lambda x: jnp.stack([x.sum(-1), -x.sum(-1)], -1)     # flat image (H·W,) -> 2 logits
    >>> images = np.stack([np.ones((2, 2)), -np.ones((2, 2))])
    >>> predicted_labels(model, images).tolist(), predicted_labels([model, lambda x: -model(x)], images).tolist()
    ([0, 1], [[0, 1], [1, 0]])
    """
    single = callable(models)
    model_list = [models] if single else list(models)
    flat = jnp.asarray(_as_flat("images", images))
    labels = np.stack([np.asarray(jnp.argmax(jax.jit(jax.vmap(model))(flat), axis=-1)) for model in model_list])
    return labels[0] if single else labels
