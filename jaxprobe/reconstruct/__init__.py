"""Reconstruct training data from a trained classifier by Bayesian inference.

Implements Hartoyo, Ciupek, Malawski & Crimi, "Data reconstruction from machine learning models via
inverse estimation and Bayesian inference": given a classifier's ``predict_proba``, an assumed prior over
features and a class label y, sample p̂(x | y) ∝ p_model(y | x) · p_prior(x) with many parallel chains
(:func:`reconstruct`), measure its divergence from the true class-conditional distribution
(:func:`fidelity`: Gaussian closed form and k-NN KL, per class and per feature), and train synthetic
models on the reconstructed data (:func:`synthetic_accuracy`).
"""

from jaxprobe.reconstruct.groundtruth import GaussianClasses
from jaxprobe.reconstruct.metrics import (
    ClassFidelity,
    fidelity,
    gaussian_kl,
    gaussian_kl_from_samples,
    gaussian_kl_marginals,
    knn_kl,
    knn_kl_marginals,
)
from jaxprobe.reconstruct.posterior import Reconstruction, reconstruct, reconstruct_many, reconstruction_logdensity
from jaxprobe.reconstruct.priors import GaussianMixture, fit_gaussian, kernel_density, misspecify, prior_moments
from jaxprobe.reconstruct.synthetic import synthetic_accuracy
from jaxprobe.reconstruct.victims import BlackBoxClassifier, JaxClassifier, as_classifier, original_errors

__all__ = [
    "reconstruct",
    "reconstruct_many",
    "reconstruction_logdensity",
    "Reconstruction",
    "as_classifier",
    "JaxClassifier",
    "BlackBoxClassifier",
    "original_errors",
    "GaussianMixture",
    "kernel_density",
    "fit_gaussian",
    "misspecify",
    "prior_moments",
    "GaussianClasses",
    "fidelity",
    "ClassFidelity",
    "gaussian_kl",
    "gaussian_kl_from_samples",
    "gaussian_kl_marginals",
    "knn_kl",
    "knn_kl_marginals",
    "synthetic_accuracy",
]
