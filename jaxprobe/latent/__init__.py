"""Sampling on the data manifold: a VAE's latent space and the pushforward of probes (probing paper, Sec. 3, App. E).

- :class:`VAE`, :func:`train_vae`, :func:`save_vae`, :func:`load_vae`: the Appendix E convolutional VAE.
- :func:`pushforward`, :func:`latent_logdensity`, :func:`generate`, :func:`latent_walk`: probes on z with the
  prior N(z; 0, I), sampled by the engine and decoded.
- :func:`mnist_vae`, :func:`mnist_classifiers`: the committed checkpoints (see ``python -m jaxprobe.latent.train``).
- :func:`reconstruction_error`, :func:`nearest_neighbour_distance`: distance of images from the data manifold.
"""

from jaxprobe.latent.classifiers import mnist_classifiers, mnist_vae
from jaxprobe.latent.metrics import nearest_neighbour_distance, predicted_labels, reconstruction_error
from jaxprobe.latent.pushforward import LatentSamples, decode_draws, generate, latent_logdensity, latent_walk, pushforward
from jaxprobe.latent.vae import (VAE, VAEConfig, gaussian_kl, kl_to_standard_normal, load_vae, negative_elbo, save_vae,
                                 train_vae)

__all__ = ["VAE", "VAEConfig", "train_vae", "save_vae", "load_vae", "negative_elbo", "kl_to_standard_normal", "gaussian_kl",
           "pushforward", "latent_logdensity", "generate", "latent_walk", "decode_draws", "LatentSamples",
           "mnist_vae", "mnist_classifiers", "reconstruction_error", "nearest_neighbour_distance", "predicted_labels"]
