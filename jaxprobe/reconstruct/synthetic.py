"""Synthetic models: train a model of the same kind on reconstructed data and compare test accuracies."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["synthetic_accuracy"]


def synthetic_accuracy(base_estimator: Any, x_synthetic: Any, y_synthetic: Any, x_test: Any,
                       y_test: Any) -> dict[str, float]:
    """Fit a fresh copy of ``base_estimator`` (``sklearn.base.clone``: same kind and hyper-parameters,
    untrained) on the synthetic data and score it and the base model on the same test set.

    Returns ``{"base_accuracy", "synthetic_accuracy", "ratio"}`` (ratio = synthetic / base).
    ``base_estimator`` must be a fitted scikit-learn-style classifier (``score``, ``get_params``).
    """
    from sklearn.base import clone

    x_synthetic, y_synthetic = np.asarray(x_synthetic), np.asarray(y_synthetic)
    if x_synthetic.ndim != 2 or y_synthetic.shape != (x_synthetic.shape[0],):
        raise ValueError(f"x_synthetic must be (n, D) and y_synthetic (n,), got {x_synthetic.shape}, "
                         f"{y_synthetic.shape}")
    if np.unique(y_synthetic).size < 2:
        raise ValueError("y_synthetic holds a single class: nothing to train a classifier on")
    synthetic = clone(base_estimator).fit(x_synthetic, y_synthetic)
    base = float(base_estimator.score(x_test, y_test))
    accuracy = float(synthetic.score(x_test, y_test))
    return {"base_accuracy": base, "synthetic_accuracy": accuracy, "ratio": accuracy / base if base > 0 else np.nan}
