"""A convolutional VAE (probing paper, Appendix E), its training with optax and msgpack weights.

Architecture (Appendix E; the layout of the classic TensorFlow/Flax convolutional VAE):

- encoder: ``Conv(32, 3×3, stride 2) → ReLU → Conv(64, 3×3, stride 2) → ReLU → Dense(2·latent_dim)``
  giving the mean and log-variance of q(z | x) = N(μ(x), diag σ²(x));
- decoder φ: ``Dense(H/4·W/4·32) → ReLU → ConvTranspose(64, 3×3, stride 2) → ReLU →
  ConvTranspose(32, 3×3, stride 2) → ReLU → Conv(1, 3×3, stride 1)`` giving per-pixel
  Bernoulli logits; φ(z) = sigmoid(logits) ∈ [0, 1] is the decoded image.

Training minimizes the negative ELBO with the "bitwise entropy" reconstruction loss of Appendix E,

    L(x) = Σ_pixels BCE(x, sigmoid(logits(z))) + KL(N(μ, σ²) ‖ N(0, I)),  z = μ + σ·ε,

with images scaled to [0, 1] (grey levels are soft Bernoulli targets). All steps run in ONE
jitted ``lax.scan``; mini-batches are drawn without replacement within each epoch.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Sequence

import flax.linen as nn
import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxprobe._inputs import check_int, check_number
from jaxprobe._io import atomic_write
from jaxprobe.engine.api import canonicalize_key
from jaxprobe.engine.compiled import jit_bounded
from jaxprobe.types import Array, PRNGKey

__all__ = ["VAE", "VAEConfig", "Encoder", "Decoder", "ConvTranspose2x", "negative_elbo", "kl_to_standard_normal", "gaussian_kl", "train_vae", "save_vae",
           "load_vae"]

_FORMAT = "jaxprobe.latent.VAE"
_FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class VAEConfig:
    """Architecture of a :class:`VAE`: image ``(H, W)`` (both divisible by 4), latent size, conv features.

    Examples
    --------
    >>> VAEConfig()                                              # the paper's MNIST VAE (Appendix E)
    VAEConfig(image_shape=(28, 28), latent_dim=10, features=(32, 64))
    >>> VAEConfig(image_shape=(8, 8), latent_dim=2).num_pixels
    64
    >>> VAEConfig(image_shape=(10, 10))                          # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: image_shape must be (H, W) with H and W multiples of 4 (two stride-2 layers), got (10, 10)
    """

    image_shape: tuple[int, int] = (28, 28)
    latent_dim: int = 10
    features: tuple[int, int] = (32, 64)

    def __post_init__(self):
        shape = tuple(self.image_shape)
        if len(shape) == 2:
            shape = tuple(check_int(size, f"image_shape[{axis}]") for axis, size in enumerate(shape))
        if len(shape) != 2 or any(size < 4 or size % 4 for size in shape):
            raise ValueError(f"image_shape must be (H, W) with H and W multiples of 4 (two stride-2 layers), "
                             f"got {self.image_shape!r}")
        latent_dim = check_int(self.latent_dim, "latent_dim", minimum=1)
        features = tuple(self.features)
        if len(features) != 2:
            raise ValueError(f"features must be two positive ints (the paper's (32, 64)), got {self.features!r}")
        features = tuple(check_int(width, f"features[{layer}]", minimum=1) for layer, width in enumerate(features))
        object.__setattr__(self, "image_shape", shape)
        object.__setattr__(self, "latent_dim", latent_dim)
        object.__setattr__(self, "features", features)

    @property
    def num_pixels(self) -> int:
        return self.image_shape[0] * self.image_shape[1]


class Encoder(nn.Module):
    """q(z | x): images ``(..., H, W)`` in [0, 1] → ``(mean, log_variance)``, each ``(..., latent_dim)``.

    Examples
    --------
    >>> from jaxprobe.latent import mnist_vae
    >>> encoder = Encoder(latent_dim=10)                       # a new one: encoder.init(key, jnp.zeros((28, 28)))
    >>> variables = {"params": mnist_vae().params["encoder"]}  # the committed VAE's trained encoder
    >>> mean, log_variance = encoder.apply(variables, jnp.zeros((3, 28, 28)))   # a batch of 3 images
    >>> mean.shape, log_variance.shape
    ((3, 10), (3, 10))
    """

    latent_dim: int
    features: Sequence[int] = (32, 64)

    @nn.compact
    def __call__(self, images: Array) -> tuple[Array, Array]:
        x = images[..., None]
        for num_features in self.features:
            x = nn.relu(nn.Conv(num_features, (3, 3), strides=(2, 2), padding="SAME")(x))
        x = x.reshape(x.shape[:-3] + (-1,))
        mean = nn.Dense(self.latent_dim, name="mean")(x)
        log_variance = nn.Dense(self.latent_dim, name="log_variance")(x)
        return mean, log_variance


# Kernel taps of a 3-tap, stride-2, 'SAME' transposed convolution (lax.conv_transpose pads (2, 1)):
# output 2m uses x[m−1]·w[0] + x[m]·w[2], output 2m+1 uses x[m]·w[1]. Per output phase (0 even, 1 odd),
# the kernel index used by the window position (0: offset −1, 1: offset 0), or None.
_PHASE_TAPS = {0: (0, 2), 1: (None, 1)}


class ConvTranspose2x(nn.Module):
    """``flax.linen.ConvTranspose(features, (3, 3), strides=(2, 2), padding="SAME")``, computed as one matmul.

    Same parameters (``kernel (3, 3, C_in, features)``, ``bias``), same initializers and the same outputs
    (a test checks it against Flax's layer): each output pixel (2m+a, 2n+b) is a sum over the 2×2 input
    window at (m−1..m, n−1..n), so the layer is one ``(…, 4·C_in) @ (4·C_in, 4·features)`` matmul on 2×2
    patches followed by depth-to-space. Why: XLA:CPU computes the kernel gradient of Flax's
    lhs-dilated convolution about 30× slower than this matmul's, which made VAE training take hours.
    Inputs ``(..., h, w, C_in)`` → ``(..., 2h, 2w, features)``.

    Examples
    --------
    >>> import flax.linen as nn
    >>> x = jax.random.normal(jax.random.key(0), (1, 4, 4, 2))             # (batch, h, w, C_in)
    >>> layer = ConvTranspose2x(features=3)
    >>> variables = layer.init(jax.random.key(1), x)
    >>> layer.apply(variables, x).shape
    (1, 8, 8, 3)
    >>> flax_layer = nn.ConvTranspose(3, (3, 3), strides=(2, 2), padding="SAME")   # the same parameters
    >>> bool(jnp.allclose(layer.apply(variables, x), flax_layer.apply(variables, x), atol=1e-5))
    True
    """

    features: int

    @nn.compact
    def __call__(self, x: Array) -> Array:
        num_inputs = x.shape[-1]
        kernel = self.param("kernel", nn.initializers.lecun_normal(), (3, 3, num_inputs, self.features),
                            jnp.float32)
        bias = self.param("bias", nn.initializers.zeros_init(), (self.features,), jnp.float32)
        kernel, bias = kernel.astype(x.dtype), bias.astype(x.dtype)
        zero = jnp.zeros_like(kernel[0, 0])
        blocks = []
        for i in (0, 1):          # window row: offset −1, 0
            for j in (0, 1):      # window column
                phases = []
                for a in (0, 1):  # output row phase
                    for b in (0, 1):
                        row, column = _PHASE_TAPS[a][i], _PHASE_TAPS[b][j]
                        phases.append(zero if row is None or column is None else kernel[row, column])
                blocks.append(jnp.concatenate(phases, axis=-1))
        window_kernel = jnp.concatenate(blocks, axis=0)                 # (4·C_in, 4·features)
        height, width = x.shape[-3], x.shape[-2]
        padded = jnp.pad(x, [(0, 0)] * (x.ndim - 3) + [(1, 0), (1, 0), (0, 0)])
        patches = jnp.concatenate([padded[..., i:i + height, j:j + width, :] for i in (0, 1) for j in (0, 1)],
                                  axis=-1)
        out = (patches @ window_kernel).reshape(x.shape[:-3] + (height, width, 2, 2, self.features))
        out = jnp.swapaxes(out, -4, -3)                                  # (..., h, a, w, b, features)
        return out.reshape(x.shape[:-3] + (2 * height, 2 * width, self.features)) + bias


class Decoder(nn.Module):
    """φ's logits: latents ``(..., latent_dim)`` → Bernoulli logits ``(..., H, W)``.

    Examples
    --------
    >>> from jaxprobe.latent import mnist_vae
    >>> decoder = Decoder(image_shape=(28, 28))                # a new one: decoder.init(key, jnp.zeros(10))
    >>> variables = {"params": mnist_vae().params["decoder"]}  # the committed VAE's trained decoder
    >>> logits = decoder.apply(variables, jnp.zeros((3, 10)))  # 3 latents -> Bernoulli logits
    >>> logits.shape, bool(jnp.allclose(jax.nn.sigmoid(logits), mnist_vae().decode(jnp.zeros((3, 10))), atol=1e-6))
    ((3, 28, 28), True)
    """

    image_shape: tuple[int, int]
    features: Sequence[int] = (32, 64)

    @nn.compact
    def __call__(self, z: Array) -> Array:
        height, width = self.image_shape[0] // 4, self.image_shape[1] // 4
        x = nn.relu(nn.Dense(height * width * self.features[0])(z))
        x = x.reshape(z.shape[:-1] + (height, width, self.features[0]))
        for num_features in reversed(tuple(self.features)):
            x = nn.relu(ConvTranspose2x(num_features)(x))
        # A stride-1 transposed convolution is a convolution (flipped kernel): the same function class.
        logits = nn.Conv(1, (3, 3), strides=(1, 1), padding="SAME")(x)
        return logits[..., 0]


def _modules(config: VAEConfig) -> tuple[Encoder, Decoder]:
    return (Encoder(config.latent_dim, config.features),
            Decoder(config.image_shape, config.features))


def _init_params(rng_key: PRNGKey, config: VAEConfig) -> dict:
    encoder, decoder = _modules(config)
    key_encoder, key_decoder = jax.random.split(rng_key)
    return {"encoder": encoder.init(key_encoder, jnp.zeros(config.image_shape, jnp.float32))["params"],
            "decoder": decoder.init(key_decoder, jnp.zeros((config.latent_dim,), jnp.float32))["params"]}


def kl_to_standard_normal(mean: Array, log_variance: Array) -> Array:
    """KL(N(mean, diag exp(log_variance)) ‖ N(0, I)) = ½ Σ (μ² + σ² − log σ² − 1), summed over the last axis
    (the VAE's prior term; :func:`jaxprobe.reconstruct.gaussian_kl` is the KL between two full Gaussians).

    Examples
    --------
    >>> float(kl_to_standard_normal(jnp.zeros(3), jnp.zeros(3)))          # q = N(0, I): no divergence
    0.0
    >>> float(kl_to_standard_normal(jnp.array([1.0, 0.0]), jnp.zeros(2)))  # ½ μ²
    0.5
    >>> kl_to_standard_normal(jnp.zeros((4, 3)), jnp.zeros((4, 3))).shape   # one per row
    (4,)
    """
    return 0.5 * jnp.sum(mean**2 + jnp.exp(log_variance) - log_variance - 1.0, axis=-1)


#: The former name of :func:`kl_to_standard_normal` (kept for existing code; one function, two names).
gaussian_kl = kl_to_standard_normal


def negative_elbo(params: dict, config: VAEConfig, rng_key: PRNGKey, images: Array) -> Array:
    """Per-image negative ELBO ``(N,)`` of images ``(N, H, W)`` in [0, 1], one reparameterized z each.

    ``Σ_pixels BCE(x, sigmoid(logits)) + KL(q(z|x) ‖ N(0, I))`` (Appendix E's bitwise entropy).

    Examples
    --------
    >>> from jaxprobe.latent import mnist_vae
    >>> vae = mnist_vae()                                        # params and config of a trained VAE
    >>> loss = negative_elbo(vae.params, vae.config, jax.random.key(0), jnp.full((3, 28, 28), 0.5))
    >>> loss.shape, bool((loss >= 784 * np.log(2)).all())    # 3 grey images: BCE against ½ ≥ log 2 a pixel; KL ≥ 0
    ((3,), True)
    """
    encoder, decoder = _modules(config)
    mean, log_variance = encoder.apply({"params": params["encoder"]}, images)
    noise = jax.random.normal(rng_key, mean.shape, mean.dtype)
    z = mean + jnp.exp(0.5 * log_variance) * noise
    logits = decoder.apply({"params": params["decoder"]}, z)
    reconstruction = jnp.sum(optax.sigmoid_binary_cross_entropy(logits, images), axis=(-2, -1))
    return reconstruction + kl_to_standard_normal(mean, log_variance)


@dataclasses.dataclass(frozen=True, eq=False)
class VAE:
    """A trained VAE: ``config`` and ``params`` (``{"encoder": ..., "decoder": ...}``).

    Images are ``(..., H, W)`` arrays in [0, 1]; latents are ``(..., latent_dim)``.

    Examples
    --------
    >>> from jaxprobe.latent import mnist_vae
    >>> vae = mnist_vae()                                        # or train_vae(...) / load_vae(path)
    >>> mean, log_variance = vae.encode(jnp.zeros((3, 28, 28)))   # q(z | x) of 3 blank images
    >>> mean.shape, vae.decode(mean).shape, vae.decoder()(mean[0]).shape   # images; one flat image for probes
    ((3, 10), (3, 28, 28), (784,))
    """

    config: VAEConfig
    params: dict

    @property
    def latent_dim(self) -> int:
        return self.config.latent_dim

    @property
    def image_shape(self) -> tuple[int, int]:
        return self.config.image_shape

    def encode(self, images: Array) -> tuple[Array, Array]:
        """``(mean, log_variance)`` of q(z | x), each ``(..., latent_dim)``."""
        images = self._check_images(images)
        return _modules(self.config)[0].apply({"params": self.params["encoder"]}, images)

    def decode(self, z: Array) -> Array:
        """φ(z) = sigmoid(logits): images ``(..., H, W)`` in [0, 1] from latents ``(..., latent_dim)``."""
        return jax.nn.sigmoid(self.decode_logits(z))

    def decode_logits(self, z: Array) -> Array:
        """Bernoulli logits ``(..., H, W)`` of p(x | z)."""
        z = jnp.asarray(z)
        if z.ndim < 1 or z.shape[-1] != self.config.latent_dim:
            raise ValueError(f"z must have shape (..., {self.config.latent_dim}), got {z.shape}")
        return _modules(self.config)[1].apply({"params": self.params["decoder"]}, z)

    def reconstruct(self, images: Array) -> Array:
        """φ(μ(x)): the decoded posterior mean, ``(..., H, W)``."""
        return self.decode(self.encode(images)[0])

    def decoder(self, *, flatten: bool = True) -> Callable[[Array], Array]:
        """φ as a pure function of ONE latent ``(latent_dim,)`` for :func:`jaxprobe.latent.pushforward`.

        Returns images flattened to ``(H·W,)`` (the ``(d,)`` convention of probes and
        of pixel-space :func:`jaxprobe.generate`) or ``(H, W)`` with ``flatten=False``.
        """
        params, config = self.params["decoder"], self.config
        module = _modules(config)[1]

        def decode_one(z: Array) -> Array:
            image = jax.nn.sigmoid(module.apply({"params": params}, z))
            return image.reshape(-1) if flatten else image

        return decode_one

    def _check_images(self, images: Array) -> Array:
        images = jnp.asarray(images)
        if images.ndim == 1 or (images.ndim >= 1 and images.shape[-1] == self.config.num_pixels
                                and images.shape[-2:] != self.config.image_shape):
            images = images.reshape(images.shape[:-1] + self.config.image_shape)
        if images.ndim < 2 or images.shape[-2:] != self.config.image_shape:
            raise ValueError(f"images must have shape (..., {self.config.image_shape[0]}, "
                             f"{self.config.image_shape[1]}) or (..., {self.config.num_pixels}), got {images.shape}")
        return images


def _check_training_images(images: Any) -> np.ndarray:
    images = np.asarray(images)
    if images.ndim != 3:
        raise ValueError(f"images must have shape (num_images, H, W), got {images.shape}")
    if not np.issubdtype(images.dtype, np.floating):
        raise TypeError(f"images must be floating point in [0, 1], got dtype {images.dtype}")
    if not np.all(np.isfinite(images)) or images.min() < 0 or images.max() > 1:
        raise ValueError("images must be finite and in [0, 1] (Bernoulli targets); divide grey levels by their "
                         "maximum (255 for MNIST, 16 for sklearn's digits)")
    return images.astype(np.float32)


def train_vae(
    rng_key: Any,
    images: Any,
    *,
    latent_dim: int = 10,
    features: Sequence[int] = (32, 64),
    num_steps: int = 2000,
    batch_size: int = 128,
    learning_rate: float = 1e-3,
) -> tuple[VAE, np.ndarray]:
    """Fit a :class:`VAE` to images by Adam on the negative ELBO, all steps in one jitted ``lax.scan``.

    Parameters
    ----------
    rng_key
        Key (or int seed) for the initialization, the mini-batches and the reparameterization noise.
    images
        ``(num_images, H, W)`` floats in [0, 1], H and W multiples of 4.
    latent_dim, features
        The architecture (Appendix E: ``features=(32, 64)``; the paper's latent size is 10).
    num_steps, batch_size, learning_rate
        Adam steps, images per step (sampled without replacement within an epoch), Adam's step size.

    Returns
    -------
    (VAE, losses)
        The trained model and the mean negative ELBO per image of each step's batch, ``(num_steps,)``.

    Examples
    --------
    >>> images = np.random.default_rng(0).uniform(0.7, 0.9, size=(16, 4, 4)).astype(np.float32)  # 16 light 4×4
    >>> vae, losses = train_vae(0, images, latent_dim=2, features=(2, 2), num_steps=50, batch_size=8,
    ...                         learning_rate=1e-2)
    >>> vae.latent_dim, vae.image_shape, losses.shape
    (2, (4, 4), (50,))
    >>> bool(losses[-10:].mean() < losses[:10].mean())          # the negative ELBO went down
    True
    """
    rng_key = canonicalize_key(rng_key)
    images = _check_training_images(images)
    config = VAEConfig(tuple(images.shape[1:]), latent_dim, tuple(features))
    num_steps = check_int(num_steps, "num_steps", minimum=1)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    if batch_size > images.shape[0]:
        raise ValueError(f"batch_size={batch_size} exceeds the number of images {images.shape[0]}")
    learning_rate = check_number(learning_rate, "learning_rate", minimum=0.0, exclusive_minimum=True)
    params, losses = _train(rng_key, jnp.asarray(images), config, num_steps, batch_size, learning_rate)
    return VAE(config, jax.device_get(params)), np.asarray(losses)


@jit_bounded(static_argnames=("config", "num_steps", "batch_size", "learning_rate"))
def _train(rng_key, images, config, num_steps, batch_size, learning_rate):
    key_init, key_batches, key_noise = jax.random.split(rng_key, 3)
    params = _init_params(key_init, config)
    optimizer = optax.adam(learning_rate)
    num_images = images.shape[0]
    batches_per_epoch = num_images // batch_size
    num_epochs = -(-num_steps // batches_per_epoch)
    order = jax.vmap(lambda key: jax.random.permutation(key, num_images))(jax.random.split(key_batches, num_epochs))

    def loss_fn(params, key, batch):
        return jnp.mean(negative_elbo(params, config, key, batch))

    def step(carry, step_index):
        params, opt_state = carry
        epoch, position = step_index // batches_per_epoch, step_index % batches_per_epoch
        indices = jax.lax.dynamic_slice(order[epoch], (position * batch_size,), (batch_size,))
        loss, grads = jax.value_and_grad(loss_fn)(params, jax.random.fold_in(key_noise, step_index), images[indices])
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    (params, _), losses = jax.lax.scan(step, (params, optimizer.init(params)), jnp.arange(num_steps))
    return params, losses


# ------------------------------------------------------------------ weights: msgpack, no pickle


def save_vae(path: str | os.PathLike, vae: VAE) -> None:
    """Write the VAE's architecture and weights to ``path`` (flax msgpack; atomic: never a half-written file).

    Examples
    --------
    >>> from jaxprobe.latent import mnist_vae
    >>> vae = mnist_vae()
    >>> save_vae("vae.msgpack", vae)
    >>> copy = load_vae("vae.msgpack")
    >>> copy.config == vae.config, jax.tree_util.tree_all(jax.tree_util.tree_map(
    ...     lambda a, b: bool(jnp.array_equal(a, b)), copy.params, vae.params))
    (True, True)
    """
    if not isinstance(vae, VAE):
        raise TypeError(f"vae must be a jaxprobe.latent.VAE, got {type(vae).__name__}")
    state = {
        "format": _FORMAT,
        "version": _FORMAT_VERSION,
        "image_shape": list(vae.config.image_shape),
        "latent_dim": vae.config.latent_dim,
        "features": list(vae.config.features),
        "params": jax.tree_util.tree_map(np.asarray, vae.params),
    }
    payload = flax.serialization.msgpack_serialize(state)
    atomic_write(path, lambda stream: stream.write(payload))


def load_vae(path: str | os.PathLike) -> VAE:
    """Read a VAE written by :func:`save_vae`; the weights are checked against the architecture.

    Examples
    --------
    >>> from jaxprobe.latent import mnist_vae
    >>> save_vae("vae.msgpack", mnist_vae())
    >>> load_vae("vae.msgpack").config
    VAEConfig(image_shape=(28, 28), latent_dim=10, features=(32, 64))
    >>> with open("notes.msgpack", "wb") as stream:
    ...     _ = stream.write(b"not weights")
    >>> load_vae("notes.msgpack")                                # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: 'notes.msgpack' is not ...
    """
    with open(path, "rb") as stream:
        data = stream.read()
    try:
        state = flax.serialization.msgpack_restore(data)
    except Exception as error:  # msgpack raises several unrelated types on garbage
        raise ValueError(f"{os.fspath(path)!r} is not a msgpack weights file: {error}") from None
    if not isinstance(state, dict) or state.get("format") != _FORMAT:
        raise ValueError(f"{os.fspath(path)!r} is not a jaxprobe VAE file (format {_FORMAT!r})")
    if state.get("version") != _FORMAT_VERSION:
        raise ValueError(f"{os.fspath(path)!r} has VAE file version {state.get('version')!r}; "
                         f"this jaxprobe reads version {_FORMAT_VERSION}")
    try:
        config = VAEConfig(tuple(state["image_shape"]), state["latent_dim"], tuple(state["features"]))
    except (KeyError, TypeError) as error:
        raise ValueError(f"{os.fspath(path)!r}: missing or malformed architecture entry: {error}") from None
    template = jax.eval_shape(lambda: _init_params(jax.random.key(0), config))
    restored = state["params"]
    expected = {jax.tree_util.keystr(k): (v.shape, v.dtype) for k, v in jax.tree_util.tree_leaves_with_path(template)}
    try:
        found = {jax.tree_util.keystr(k): (np.shape(v), np.asarray(v).dtype)
                 for k, v in jax.tree_util.tree_leaves_with_path(restored)}
    except Exception:  # noqa: BLE001
        found = {}
    if expected != found:
        missing = sorted(set(expected) ^ set(found)) or sorted(k for k in expected if expected[k] != found.get(k))
        raise ValueError(f"{os.fspath(path)!r}: the weights do not match the stored architecture {config}; "
                         f"first differences: {missing[:3]}")
    params = jax.tree_util.tree_map(jnp.asarray, flax.serialization.from_state_dict(
        jax.tree_util.tree_map(lambda s: np.zeros(s.shape, s.dtype), template), restored))
    return VAE(config, params)

