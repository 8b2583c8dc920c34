"""Ground truth for reconstruction: data from known class-conditional Gaussians with a shared covariance.

With p(x | y = k) = N(μ_k, Σ) and class weights π_k, everything the paper's argument needs is known in
closed form:

* the true prior is the mixture p(x) = Σ_k π_k N(μ_k, Σ) (:meth:`GaussianClasses.prior`);
* the Bayes-optimal classifier is multinomial logistic regression,
  p(k | x) = softmax_k(w_kᵀ x + b_k), w_k = Σ⁻¹ μ_k, b_k = −½ μ_kᵀ Σ⁻¹ μ_k + log π_k
  (:meth:`GaussianClasses.bayes_classifier`);
* with both, p_model(k | x) p(x) = π_k N(x; μ_k, Σ), so the reconstruction posterior IS the
  class-conditional N(μ_k, Σ).

``bayes_classifier(bias_error=ε)`` adds ε·(k − (K−1)/2) to the logits: a model error that moves the
decision boundary while keeping the classifier in the same family.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.engine.api import canonicalize_key
from jaxprobe._inputs import as_float_array, check_int
from jaxprobe.priors import Gaussian
from jaxprobe.reconstruct.priors import GaussianMixture
from jaxprobe.reconstruct.victims import JaxClassifier

__all__ = ["GaussianClasses"]


@dataclasses.dataclass(frozen=True, eq=False)
class GaussianClasses:
    """K classes with p(x | y = k) = N(``means[k]``, ``covariance``) and p(y = k) = ``weights[k]``.

    Examples
    --------
    >>> truth = GaussianClasses(means=[[1.0, 0.0], [-1.0, 0.0]], covariance=np.eye(2))   # equal weights
    >>> p = truth.bayes_classifier().probabilities(jnp.array([[0.0, 0.0], [2.0, 0.0]]))    # softmax(2·x₁, −2·x₁)
    >>> np.round(np.asarray(p, float), 3).tolist()
    [[0.5, 0.5], [0.982, 0.018]]
    >>> x, y = truth.sample(jax.random.key(0), 2000)
    >>> x.shape, bool(np.allclose(x[y == 0].mean(axis=0), [1.0, 0.0], atol=0.15))
    ((2000, 2), True)
    """

    means: Any
    covariance: Any
    weights: Any = None

    def __post_init__(self):
        means = as_float_array(self.means, "means", ndim=2)
        if means.shape[0] < 2:
            raise ValueError(f"means must hold at least 2 classes, got {means.shape[0]}")
        covariance = as_float_array(self.covariance, "covariance", ndim=2)
        weights = np.full(means.shape[0], 1.0 / means.shape[0]) if self.weights is None else \
            as_float_array(self.weights, "weights", ndim=1)
        if weights.shape != (means.shape[0],) or np.any(weights <= 0):
            raise ValueError(f"weights must be {means.shape[0]} positive numbers, got {self.weights!r}")
        object.__setattr__(self, "means", means)
        object.__setattr__(self, "covariance", covariance)
        object.__setattr__(self, "weights", weights / weights.sum())
        Gaussian(means[0], covariance)  # validates the covariance (symmetric positive definite)

    @property
    def num_classes(self) -> int:
        return self.means.shape[0]

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    def class_conditional(self, label: int) -> Gaussian:
        """The true p(x | y = label)."""
        return Gaussian(self.means[label], self.covariance)

    def prior(self) -> GaussianMixture:
        """The true marginal p(x) = Σ_k π_k N(μ_k, Σ)."""
        return GaussianMixture(self.weights, self.means, self.covariance)

    def logits(self, bias_error: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """``(K, D)`` weights and ``(K,)`` biases of the Bayes-optimal softmax (plus the bias error)."""
        precision_means = np.linalg.solve(self.covariance, self.means.T).T  # w_k = Σ⁻¹ μ_k
        bias = -0.5 * np.sum(self.means * precision_means, axis=1) + np.log(self.weights)
        bias = bias + float(bias_error) * (np.arange(self.num_classes) - 0.5 * (self.num_classes - 1))
        return precision_means, bias

    def bayes_classifier(self, bias_error: float = 0.0) -> JaxClassifier:
        """p(k | x) = softmax(W x + b): the Bayes-optimal classifier when ``bias_error`` is 0."""
        weights, bias = self.logits(bias_error)

        def probability_fn(x):
            return jax.nn.softmax(x @ jnp.asarray(weights.T, x.dtype) + jnp.asarray(bias, x.dtype))

        return JaxClassifier(probability_fn, self.dim, self.num_classes, True,
                             f"bayes(bias_error={float(bias_error):g})")

    def sample(self, rng_key: Any, num_samples: int) -> tuple[np.ndarray, np.ndarray]:
        """``num_samples`` labelled points: labels from π, features from their class Gaussian (NumPy, seeded
        by the key's bits)."""
        num_samples = check_int(num_samples, "num_samples", minimum=1)
        rng = np.random.default_rng(np.asarray(jax.random.key_data(canonicalize_key(rng_key))).ravel())
        labels = rng.choice(self.num_classes, num_samples, p=self.weights)
        noise = rng.standard_normal((num_samples, self.dim))
        x = self.means[labels] + noise @ np.linalg.cholesky(self.covariance).T
        return x, labels.astype(np.int64)
