"""Models and parameter distributions q(θ) for probing: Flax definitions and their training
(``nets``, ``training``), scikit-learn / XGBoost imports (``from_sklearn``) and q(θ)."""

from jaxprobe.models.distributions import Ensemble, GaussianPerturbation, PointMass, PosteriorSamples
from jaxprobe.models.nets import MLP, LeNet5, LinearRegression, LogisticRegression, TwoLayerReLU
from jaxprobe.models.sklearn import ImportedModel, from_sklearn
from jaxprobe.models.training import accuracy, as_model, fit, load_params, save_params

__all__ = ["PointMass", "GaussianPerturbation", "Ensemble", "PosteriorSamples", "from_sklearn", "ImportedModel",
           "LinearRegression", "LogisticRegression", "MLP", "LeNet5", "TwoLayerReLU",
           "fit", "as_model", "accuracy", "save_params", "load_params"]
