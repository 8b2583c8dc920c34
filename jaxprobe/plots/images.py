"""Image grids and latent walks as PNG (probing paper, Fig. 4)."""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from jaxprobe._inputs import check_int
from jaxprobe._io import atomic_write

__all__ = ["image_grid", "latent_walk_strip"]


def _as_images(images: Any, image_shape: Sequence[int] | None) -> np.ndarray:
    images = np.asarray(images, np.float64)
    if image_shape is not None:
        images = images.reshape((-1,) + tuple(image_shape))
    if images.ndim != 3:
        raise ValueError(f"images must have shape (N, H, W) (or pass image_shape for flat images), got {images.shape}")
    if images.shape[0] == 0:
        raise ValueError("images is empty")
    if not np.all(np.isfinite(images)):
        raise ValueError("images must be finite")
    return images


def _save(figure: Any, path: str | os.PathLike) -> None:
    import io

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    atomic_write(path, lambda stream: stream.write(buffer.getvalue()))


def image_grid(images: Any, path: str | os.PathLike, *, num_columns: int = 8, titles: Sequence[str] | None = None,
               image_shape: Sequence[int] | None = None, title: str | None = None, cell_size: float = 1.0) -> None:
    """Write images ``(N, H, W)`` (grey levels in [0, 1]) as a grid PNG, ``num_columns`` per row.

    ``titles``: one short label per image (e.g. the predicted classes, ``"CNN 8 / MLP 8"``).

    Examples
    --------
    >>> images = np.random.default_rng(0).uniform(size=(6, 8, 8))          # 6 grey 8×8 images
    >>> image_grid(images, "grid.png", num_columns=3, titles=[f"image {i}" for i in range(6)])
    >>> with open("grid.png", "rb") as stream:
    ...     stream.read(4)                                            # a PNG file
    b'\x89PNG'
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    images = _as_images(images, image_shape)
    num_columns = check_int(num_columns, "num_columns", minimum=1)
    if titles is not None and len(titles) != len(images):
        raise ValueError(f"titles must have one entry per image ({len(images)}), got {len(titles)}")
    num_columns = min(num_columns, len(images))
    num_rows = -(-len(images) // num_columns)
    figure, axes = plt.subplots(num_rows, num_columns, figsize=(cell_size * num_columns, cell_size * num_rows * 1.15),
                                squeeze=False)
    for index, axis in enumerate(axes.flat):
        axis.axis("off")
        if index < len(images):
            axis.imshow(images[index], cmap="gray_r", vmin=0.0, vmax=1.0, interpolation="nearest")
            if titles is not None:
                axis.set_title(titles[index], fontsize=7)
    if title:
        figure.suptitle(title, fontsize=9, y=1.02 if titles is not None else 0.98)
    try:
        _save(figure, path)
    finally:
        plt.close(figure)


def latent_walk_strip(images: Any, path: str | os.PathLike, *, labels: Sequence[str] | None = None,
                      max_images: int = 16, image_shape: Sequence[int] | None = None,
                      title: str | None = None) -> None:
    """Write one chain's decoded images ``(T, H, W)`` as a strip (Fig. 4 left), at most ``max_images`` evenly
    spaced frames from the first to the last; ``labels`` (one per frame of ``images``) are shown above them.

    Examples
    --------
    >>> frames = np.linspace(0.0, 1.0, 10)[:, None, None] * np.ones((10, 8, 8))   # a walk from black to white
    >>> latent_walk_strip(frames, "walk.png", labels=[f"step {t}" for t in range(10)], max_images=4)
    >>> with open("walk.png", "rb") as stream:
    ...     stream.read(4)                                            # frames 0, 3, 6 and 9 in one PNG
    b'\x89PNG'
    """
    images = _as_images(images, image_shape)
    if labels is not None and len(labels) != len(images):
        raise ValueError(f"labels must have one entry per image ({len(images)}), got {len(labels)}")
    max_images = check_int(max_images, "max_images", minimum=2)
    frames = np.unique(np.linspace(0, len(images) - 1, min(max_images, len(images))).round().astype(int))
    image_grid(images[frames], path, num_columns=len(frames), title=title,
               titles=None if labels is None else [labels[i] for i in frames])
