"""Figures for data reconstruction: the paper's correlation plots and true-vs-reconstructed scatter plots.

matplotlib is imported lazily (Agg backend) so that jaxprobe does not depend on it.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

__all__ = ["plot_reconstruction_correlations", "plot_reconstruction_scatter"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_reconstruction_correlations(records: Sequence[dict[str, Any]], kl_key: str = "kl_knn",
                                     path: str | os.PathLike | None = None, title: str | None = None, *,
                                     correlations: dict[str, Any] | None = None):
    """Three panels as in the paper: KL vs prior error (every run, one colour per model kind),
    KL vs model error (correct prior) and synthetic vs base accuracy (correct prior, with y = x).

    ``records`` are :func:`jaxprobe.reconstruct.sweep.run_sweep` records (of one or several data sets);
    ``correlations`` their :func:`jaxprobe.reconstruct.sweep.spearman_summary` (a sweep result's
    ``.correlations``), whose ρ the panels' titles show (left out without it).
    Returns the figure; saves it when ``path`` is given.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> records = [{"model": model, "prior_error": prior_error, "kl_knn": 0.1 + prior_error + error,
    ...             "model_error": error, "base_accuracy": 1 - error, "synthetic_accuracy": 0.95 - error}
    ...            for model, error in (("logistic", 0.05), ("mlp", 0.02)) for prior_error in (0.0, 0.5)]
    >>> fig = plot_reconstruction_correlations(records, path="correlations.png")
    >>> len(fig.axes), fig.axes[0].get_xlabel()
    (3, 'prior error KL(correct ‖ assumed)')
    >>> plt.close(fig)
    """
    plt = _pyplot()
    figure, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    kinds = sorted({r["model"] for r in records})
    colours = {kind: plt.cm.tab10(i) for i, kind in enumerate(kinds)}
    correct = [r for r in records if r["prior_error"] == 0.0]
    for kind in kinds:
        mine = [r for r in records if r["model"] == kind]
        axes[0].scatter([r["prior_error"] for r in mine], [r[kl_key] for r in mine], color=colours[kind],
                        label=kind, s=18)
        good = [r for r in correct if r["model"] == kind]
        axes[1].scatter([r["model_error"] for r in good], [r[kl_key] for r in good], color=colours[kind], s=18)
        axes[2].scatter([r["base_accuracy"] for r in good], [r["synthetic_accuracy"] for r in good],
                        color=colours[kind], s=18)
    rho = (lambda key: "" if correlations is None else f"ρ = {correlations[key]['rho']:.2f}")  # noqa: E731
    axes[0].set(xlabel="prior error KL(correct ‖ assumed)", ylabel=f"{kl_key} (true ‖ reconstructed)",
                title=rho(f"{kl_key}_vs_prior_error"))
    axes[1].set(xlabel="model error (1 − test accuracy)", ylabel=kl_key,
                title=f"correct prior {rho(f'{kl_key}_vs_model_error')}")
    low = min([r["base_accuracy"] for r in correct] + [r["synthetic_accuracy"] for r in correct] + [1.0])
    axes[2].plot([low, 1.0], [low, 1.0], color="grey", lw=1)
    axes[2].set(xlabel="base model accuracy", ylabel="synthetic model accuracy",
                title=f"correct prior {rho('synthetic_vs_base_accuracy')}")
    axes[0].legend(fontsize=8)
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    if path is not None:
        figure.savefig(path, dpi=110)
    return figure


def plot_reconstruction_scatter(x_true: Any, y_true: Any, reconstruction: Any, features: tuple[int, int] = (0, 1),
                                feature_names: Sequence[str] | None = None, max_points: int = 500,
                                path: str | os.PathLike | None = None):
    """Real rows (dots) against reconstructed draws (crosses) of every class in two features.

    ``reconstruction``: a :class:`jaxprobe.reconstruct.Reconstruction` (its ``pooled(label)`` draws).

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from jaxprobe.reconstruct import GaussianClasses, reconstruct
    >>> truth = GaussianClasses(means=[[1.0, 0.0], [-1.0, 0.0]], covariance=np.eye(2))
    >>> x, y = truth.sample(jax.random.key(0), 40)                        # the real rows
    >>> result = reconstruct(0, truth.bayes_classifier(), truth.prior(), num_chains=8, num_samples=50,
    ...                      num_warmup=50)                             # draws of p̂(x | y) for each class
    >>> fig = plot_reconstruction_scatter(x, y, result, feature_names=["x₀", "x₁"])
    >>> len(fig.axes), len(fig.axes[0].collections)                 # draws and real rows of 2 classes
    (1, 4)
    >>> plt.close(fig)
    """
    plt = _pyplot()
    x_true, y_true = np.asarray(x_true), np.asarray(y_true)
    i, j = features
    figure, axis = plt.subplots(figsize=(5, 4.2))
    for label in range(reconstruction.num_classes):
        colour = plt.cm.tab10(label)
        draws = reconstruction.pooled(label)
        draws = draws[np.linspace(0, len(draws) - 1, min(max_points, len(draws))).astype(int)]
        axis.scatter(draws[:, i], draws[:, j], marker="x", s=8, alpha=0.35, color=colour)
        real = x_true[y_true == label]
        axis.scatter(real[:, i], real[:, j], s=12, color=colour, edgecolor="black", linewidth=0.4,
                     label=f"class {label}: real (dots) / reconstructed (x)")
    names = feature_names or [f"x[{i}]", f"x[{j}]"]
    axis.set(xlabel=names[0] if feature_names is None else feature_names[i],
             ylabel=names[1] if feature_names is None else feature_names[j])
    axis.legend(fontsize=7)
    figure.tight_layout()
    if path is not None:
        figure.savefig(path, dpi=110)
    return figure
