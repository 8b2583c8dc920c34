"""The image experiments of the probing paper (Sec. 4, Fig. 4): two MNIST classifiers probed through a VAE.

Each function builds its probe from :mod:`jaxprobe.probes`, samples it with the engine and reports numbers:

1. :func:`joint_label`: G = CE(CNN(x), y) + CE(MLP(x), y) (the sum of cross-entropies of Fig. 4 left);
2. :func:`contrasting_labels`: G = CE(CNN(x), y_cnn) + CE(MLP(x), y_mlp), y_cnn ≠ y_mlp (Fig. 4 right);
3. :func:`anchored_label`: 2. or 1. plus a two-norm localizer around the encoding of a real digit
   (in LATENT space: ``localize(μ(x_anchor))`` on z), "prefer '8' while staying near a real '3'";
4. :func:`pixel_space`: the same probe sampled directly on pixels x ∈ [0, 1]^784 (exact box bijection),
   for comparison; :func:`manifold_distance` measures how far either set is from the data manifold.

Models take one flat image ``(784,)`` and return class probabilities (:func:`jaxprobe.latent.mnist_classifiers`).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from jaxprobe.constraints import Box
from jaxprobe.generation import generate as generate_in_data_space
from jaxprobe.latent.metrics import nearest_neighbour_distance, predicted_labels, reconstruction_error
from jaxprobe.latent.pushforward import LatentSamples, generate
from jaxprobe.latent.vae import VAE
from jaxprobe.probes import Probe, fixed_label, localize

__all__ = ["label_probe", "fraction_with_labels", "joint_label", "contrasting_labels", "anchored_label",
           "pixel_space", "manifold_distance"]


def label_probe(models: Sequence[Callable], labels: Sequence[int]) -> Probe:
    """``G(x) = Σ_i CE(model_i(x), label_i)``: every model should give its own label (Eq. 7, summed).

    Examples
    --------
    >>> first = lambda x: jax.nn.softmax(jnp.stack([x.sum(), -x.sum()]))    # flat image -> 2 probabilities
    >>> second = lambda x: jax.nn.softmax(jnp.stack([-x.sum(), x.sum()]))
    >>> probe = label_probe([first, second], [0, 1])                  # first says 0 AND second says 1
    >>> round(float(probe(jnp.zeros(4))), 4)                          # undecided: 2 · log 2
    1.3863
    >>> bool(probe(jnp.ones(4)) < 0.01), bool(probe(-jnp.ones(4)) > 10.0)
    (True, True)
    """
    if len(models) != len(labels) or not models:
        raise ValueError(f"give one label per model, got {len(models)} models and {len(labels)} labels")
    return sum((fixed_label(model, int(label)) for model, label in zip(models, labels)), 0)


def fraction_with_labels(models: Sequence[Callable], labels: Sequence[int], images: Any) -> float:
    """Fraction of images ``(N, ...)`` that EVERY model assigns its requested label (argmax).

    Examples
    --------
    >>> first = lambda x: jnp.stack([x.sum(), -x.sum()])              # class 0 for a bright image
    >>> second = lambda x: jnp.stack([x[0], -x[0]])                   # class 0 when the first pixel is bright
    >>> images = np.array([[[1.0, 1.0]], [[-1.0, 3.0]], [[-1.0, -1.0]]])    # 3 images of 1×2 pixels
    >>> fraction_with_labels([first, second], [0, 1], images)         # only the second image
    0.3333333333333333
    """
    predicted = predicted_labels(list(models), images)
    return float(np.mean(np.all(predicted == np.asarray(labels, int)[:, None], axis=0)))


def _report(models, labels, result: LatentSamples) -> dict:
    images = result.flat_images()
    return {"fraction_with_labels": fraction_with_labels(models, labels, images),
            "num_images": int(images.shape[0]),
            "mean_acceptance_rate": float(np.mean(result.samples.acceptance_rate))}


def joint_label(rng_key: Any, vae: VAE, models: Sequence[Callable], label: int, *, temperature: float,
                num_chains: int, num_samples: int, num_warmup: int, **sample_options: Any) -> tuple[LatentSamples, dict]:
    """Experiment 1: one label for all models, sampled in latent space; returns (samples, report).

    Examples
    --------
    >>> from jaxprobe.latent import mnist_classifiers, mnist_vae
    >>> vae, models = mnist_vae(), mnist_classifiers()                # the committed VAE and (CNN, MLP)
    >>> result, report = joint_label(jax.random.key(0), vae, models, 8, temperature=1.0, num_chains=4,
    ...                              num_samples=10, num_warmup=10, sampler="rwmh", progress=False,
    ...                              convergence="ignore")             # a tiny run; the tutorial's is longer
    >>> result.images.shape, sorted(report)
    ((4, 10, 28, 28), ['fraction_with_labels', 'mean_acceptance_rate', 'num_images'])
    >>> report["fraction_with_labels"] == fraction_with_labels(models, [8, 8], result.flat_images())
    True
    """
    labels = [label] * len(models)
    result = generate(rng_key, label_probe(models, labels), vae, temperature=temperature, num_chains=num_chains,
                      num_samples=num_samples, num_warmup=num_warmup, **sample_options)
    return result, _report(models, labels, result)


def contrasting_labels(rng_key: Any, vae: VAE, models: Sequence[Callable], labels: Sequence[int], *,
                       temperature: float, num_chains: int, num_samples: int, num_warmup: int,
                       **sample_options: Any) -> tuple[LatentSamples, dict]:
    """Experiment 2: model i should say ``labels[i]`` (e.g. CNN '0', MLP '1'); returns (samples, report).

    Examples
    --------
    >>> from jaxprobe.latent import mnist_classifiers, mnist_vae
    >>> vae, models = mnist_vae(), mnist_classifiers()                # the committed VAE and (CNN, MLP)
    >>> result, report = contrasting_labels(jax.random.key(0), vae, models, [0, 1], temperature=1.0,
    ...                                     num_chains=4, num_samples=10, num_warmup=10, sampler="rwmh",
    ...                                     progress=False, convergence="ignore")    # a tiny run
    >>> result.latents.shape, report["num_images"]
    ((4, 10, 10), 40)
    >>> report["fraction_with_labels"] == fraction_with_labels(models, [0, 1], result.flat_images())
    True
    """
    result = generate(rng_key, label_probe(models, labels), vae, temperature=temperature, num_chains=num_chains,
                      num_samples=num_samples, num_warmup=num_warmup, **sample_options)
    return result, _report(models, labels, result)


def anchored_label(rng_key: Any, vae: VAE, models: Sequence[Callable], labels: Sequence[int], anchor_image: Any, *,
                   weight: float, temperature: float, num_chains: int, num_samples: int, num_warmup: int,
                   **sample_options: Any) -> tuple[LatentSamples, dict]:
    """Experiment 3: the label probe plus ``weight·‖z − μ(x_anchor)‖²`` in latent space, chains started at μ(x_anchor).

    The report adds the mean latent distance ‖z − μ(x_anchor)‖ and pixel distance ‖φ(z) − x_anchor‖.

    Examples
    --------
    >>> from jaxprobe.latent import mnist_classifiers, mnist_vae
    >>> vae, models = mnist_vae(), mnist_classifiers()                # the committed VAE and (CNN, MLP)
    >>> anchor = vae.decode(jnp.zeros(10))                  # an image on the manifold (a real digit, usually)
    >>> result, report = anchored_label(jax.random.key(0), vae, models, [8, 8], anchor, weight=10.0,
    ...                                 temperature=1.0, num_chains=4, num_samples=10, num_warmup=10,
    ...                                 sampler="rwmh", progress=False, convergence="ignore")   # a tiny run
    >>> result.images.shape, bool(report["mean_latent_distance_to_anchor"] < 1.5)    # kept near μ(anchor)
    ((4, 10, 28, 28), True)
    """
    anchor_latent = np.asarray(vae.encode(np.asarray(anchor_image, np.float32))[0], np.float64).reshape(-1)
    init = np.tile(anchor_latent.astype(np.float32), (num_chains, 1))
    result = generate(rng_key, label_probe(models, labels), vae, temperature=temperature, num_chains=num_chains,
                      num_samples=num_samples, num_warmup=num_warmup, init=init,
                      latent_probe=float(weight) * localize(anchor_latent), **sample_options)
    report = _report(models, labels, result)
    report["mean_latent_distance_to_anchor"] = float(np.mean(np.linalg.norm(result.latents - anchor_latent, axis=-1)))
    pixels = result.flat_images().reshape(report["num_images"], -1)
    report["mean_pixel_distance_to_anchor"] = float(np.mean(np.linalg.norm(
        pixels - np.asarray(anchor_image, np.float64).reshape(1, -1), axis=-1)))
    return result, report


def pixel_space(rng_key: Any, models: Sequence[Callable], labels: Sequence[int], init_images: Any, *,
                temperature: float, num_samples: int, num_warmup: int, anchor_image: Any = None, weight: float = 0.0,
                margin: float = 1e-3, **sample_options: Any) -> tuple[np.ndarray, dict]:
    """Experiment 4: the same label probe on pixels x ∈ [0, 1]^(H·W) (exact box bijection, flat prior).

    ``init_images`` ``(num_chains, H, W)`` start the chains (e.g. decoded prior draws, so that they start ON the
    manifold); they are moved ``margin`` inside the box. With ``anchor_image`` the pixel-space localizer
    ``weight·‖x − x_anchor‖²`` is added. Returns the images ``(chain, draw, H, W)`` and a report.

    Examples
    --------
    >>> bright = lambda x: jax.nn.softmax(jnp.stack([x.sum() - 2.0, 2.0 - x.sum()]) * 4.0)  # 0: mean pixel > ½
    >>> start = np.full((4, 2, 2), 0.5)                               # 4 chains of 2×2 images, on the boundary
    >>> images, report = pixel_space(jax.random.key(0), [bright], [0], start, temperature=0.1, num_samples=50,
    ...                              num_warmup=50, progress=False, convergence="ignore")
    >>> images.shape, bool(images.min() > 0.0 and images.max() < 1.0)     # pixels stay in (0, 1)
    ((4, 50, 2, 2), True)
    >>> bool(report["fraction_with_labels"] > 0.9)                   # the model reads them as bright
    True
    """
    init_images = np.asarray(init_images, np.float32)
    num_chains, image_shape = init_images.shape[0], init_images.shape[1:]
    init = np.clip(init_images.reshape(num_chains, -1), margin, 1.0 - margin)
    probe = label_probe(models, labels)
    if anchor_image is not None:
        probe = probe + float(weight) * localize(np.asarray(anchor_image, np.float64).reshape(-1))
    samples = generate_in_data_space(rng_key, probe, temperature=temperature, num_chains=num_chains,
                                     num_samples=num_samples, num_warmup=num_warmup, init=init,
                                     constraints=Box(0.0, 1.0), **sample_options)
    images = np.asarray(samples.positions).reshape((num_chains, num_samples) + image_shape)
    flat = images.reshape((-1,) + image_shape)
    report = {"fraction_with_labels": fraction_with_labels(models, labels, flat), "num_images": int(flat.shape[0]),
              "mean_acceptance_rate": float(np.mean(samples.acceptance_rate))}
    return images, report


def manifold_distance(vae: VAE, images: Any, reference: Any) -> dict:
    """Mean (and median) VAE reconstruction error and nearest-neighbour distance to real ``reference`` images.

    Examples
    --------
    >>> from jaxprobe.latent import mnist_vae
    >>> vae = mnist_vae()
    >>> decoded = vae.decode(jax.random.normal(jax.random.key(0), (8, 10)))   # on the VAE's manifold
    >>> noise = np.random.default_rng(0).uniform(size=(8, 28, 28))          # far from it
    >>> reference = decoded                                  # real digits in practice: mnist_digits()
    >>> near, far = manifold_distance(vae, decoded, reference), manifold_distance(vae, noise, reference)
    >>> sorted(near)
    ['nearest_neighbour_distance_mean', 'nearest_neighbour_distance_median',
     'reconstruction_mse_mean', 'reconstruction_mse_median']
    >>> near["reconstruction_mse_mean"] < far["reconstruction_mse_mean"]
    True
    >>> near["nearest_neighbour_distance_mean"] < far["nearest_neighbour_distance_mean"]
    True
    """
    images = np.asarray(images, np.float32).reshape((-1,) + vae.image_shape)
    errors = reconstruction_error(vae, images)
    distances = nearest_neighbour_distance(images, reference)
    return {"reconstruction_mse_mean": float(errors.mean()), "reconstruction_mse_median": float(np.median(errors)),
            "nearest_neighbour_distance_mean": float(distances.mean()),
            "nearest_neighbour_distance_median": float(np.median(distances))}
