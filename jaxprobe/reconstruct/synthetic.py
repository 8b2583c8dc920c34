"""Synthetic models: train a model of the same kind on reconstructed data and compare test accuracies."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["synthetic_accuracy"]


def synthetic_accuracy(base_estimator: Any, x_synthetic: Any, y_synthetic: Any, x_test: Any,
                       y_test: Any) -> dict[str, float]:
    """Fit a fresh copy of ``base_estimator`` (``sklearn.base.clone``: same kind and hyper-parameters,
    untrained) on the synthetic data and score it and the base model on the same test set, each with its
    standard error.

    ``base_estimator`` must be a fitted scikit-learn-style classifier (``predict``, ``get_params``);
    ``x_synthetic`` ``(n, D)``, ``y_synthetic`` ``(n,)``, ``x_test`` ``(n_test, D)``, ``y_test`` ``(n_test,)``.

    What the errors cover: the test set's sampling only, for the two fitted models as they are. An accuracy is
    the mean of ``n_test`` per-row correct/incorrect outcomes, so its standard error is the binomial
    ``√(p(1 − p)/n_test)``; the ratio's is the delta method on the same rows, paired (both models are scored on
    them): ``√(mean_i (s_i − r·b_i)² / n_test) / base`` with ``s_i``, ``b_i`` the rows' outcomes. They do not
    cover which reconstructed rows were drawn, the Monte-Carlo error of the reconstruction or the randomness of
    training (a single synthetic model has no spread to measure them by; refit on other draws to see it). At an
    accuracy of 0 or 1 the binomial error is 0: it then says only that no test row went the other way (about
    3/n_test is the 95% bound, the rule of three).

    Returns
    -------
    dict
        ``{"base_accuracy", "synthetic_accuracy", "ratio"}`` (ratio = synthetic / base, NaN for a base of 0),
        their standard errors ``"base_accuracy_se"``, ``"synthetic_accuracy_se"``, ``"ratio_se"``, and
        ``"num_test"``.

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression
    >>> from jaxprobe.reconstruct import GaussianClasses
    >>> truth = GaussianClasses(means=[[1.0, 0.0], [-1.0, 0.0]], covariance=np.eye(2))   # Bayes accuracy Φ(1) ≈ 0.84
    >>> (x, y), (x_test, y_test) = truth.sample(0, 200), truth.sample(1, 500)
    >>> x_synthetic, y_synthetic = truth.sample(2, 200)        # stands in for reconstructed rows
    >>> scores = synthetic_accuracy(LogisticRegression().fit(x, y), x_synthetic, y_synthetic, x_test, y_test)
    >>> round(scores["base_accuracy"], 2), bool(abs(scores["ratio"] - 1.0) < 3 * scores["ratio_se"])
    (0.85, True)
    """
    from sklearn.base import clone

    x_synthetic, y_synthetic = np.asarray(x_synthetic), np.asarray(y_synthetic)
    if x_synthetic.ndim != 2 or y_synthetic.shape != (x_synthetic.shape[0],):
        raise ValueError(f"x_synthetic must be (n, D) and y_synthetic (n,), got {x_synthetic.shape}, "
                         f"{y_synthetic.shape}")
    if np.unique(y_synthetic).size < 2:
        raise ValueError("y_synthetic holds a single class: nothing to train a classifier on")
    y_test = np.asarray(y_test)
    if y_test.ndim != 1 or y_test.size == 0 or np.shape(x_test)[:1] != y_test.shape:
        raise ValueError(f"x_test must be (n_test, D) and y_test (n_test,) with n_test >= 1, got "
                         f"{np.shape(x_test)}, {y_test.shape}")
    synthetic = clone(base_estimator).fit(x_synthetic, y_synthetic)
    base_correct = (np.asarray(base_estimator.predict(x_test)) == y_test).astype(np.float64)
    synthetic_correct = (np.asarray(synthetic.predict(x_test)) == y_test).astype(np.float64)
    num_test = y_test.size
    base, accuracy = float(base_correct.mean()), float(synthetic_correct.mean())
    binomial = lambda p: float(np.sqrt(p * (1.0 - p) / num_test))  # noqa: E731
    ratio = accuracy / base if base > 0 else np.nan
    ratio_se = (float(np.sqrt(np.mean((synthetic_correct - ratio * base_correct) ** 2) / num_test)) / base
                if base > 0 else np.nan)
    return {"base_accuracy": base, "synthetic_accuracy": accuracy, "ratio": ratio,
            "base_accuracy_se": binomial(base), "synthetic_accuracy_se": binomial(accuracy), "ratio_se": ratio_se,
            "num_test": int(num_test)}
