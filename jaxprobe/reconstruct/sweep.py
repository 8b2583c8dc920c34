"""The paper's real-data experiment: prior accuracy × model accuracy → KL and synthetic-model accuracy.

For one data set (standardized features, a stratified train/test split):

* models of several kinds (logistic regression, MLP, gradient boosting, decision tree) are trained on
  different fractions of the training rows, so model error (1 − test accuracy) varies;
* the correct prior is a Gaussian fitted to the training features (Ledoit–Wolf); misspecified priors
  shift its mean by k standard deviations and scale its covariance by c (:func:`misspecify`); the prior
  error is KL(correct ‖ misspecified) in closed form;
* for every model, all prior levels are reconstructed in one compiled program
  (:func:`reconstruct_many`, black-box random-walk MH on the model's JAX import unless told otherwise);
* fidelity = KL(true class-conditional of the held-out test rows ‖ reconstruction), Gaussian and k-NN,
  averaged over classes; a synthetic model of the same kind is trained on ``synthetic_size``
  reconstructed rows (at least as many as the model saw) in its class proportions, and scored on the
  same test set as the base model; each accuracy and their ratio carry the standard error of the test set's
  sampling (``*_se``, :func:`synthetic_accuracy`: binomial, the ratio paired on the same rows), which does not
  cover the spread over which reconstructed rows were drawn;
* Spearman correlations: KL vs prior error (all runs), KL vs model error (correct prior), synthetic
  vs base accuracy (correct prior).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Sequence

import numpy as np

from jaxprobe.reconstruct.metrics import fidelity, gaussian_kl
from jaxprobe.reconstruct.posterior import reconstruct_many
from jaxprobe.reconstruct.priors import fit_gaussian, misspecify, prior_moments
from jaxprobe.reconstruct.synthetic import synthetic_accuracy

__all__ = ["MODEL_KINDS", "KL_KEYS", "SweepResult", "make_model", "prepare_data", "run_sweep", "spearman_summary"]

MODEL_KINDS = ("logistic", "mlp", "gradient_boosting", "decision_tree")


def make_model(kind: str, seed: int = 0):
    """An untrained scikit-learn classifier of ``kind`` (small, fast settings).

    Examples
    --------
    >>> model = make_model("decision_tree").fit([[0.0], [1.0], [2.0], [3.0]] * 5, [0, 0, 1, 1] * 5)
    >>> type(model).__name__, model.predict([[0.5], [2.5]]).tolist()
    ('DecisionTreeClassifier', [0, 1])
    """
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.tree import DecisionTreeClassifier

    if kind == "logistic":
        return LogisticRegression(max_iter=2000)
    if kind == "mlp":
        return MLPClassifier(hidden_layer_sizes=(32,), max_iter=1500, random_state=seed)
    if kind == "gradient_boosting":
        return GradientBoostingClassifier(n_estimators=30, max_depth=2, random_state=seed)
    if kind == "decision_tree":
        return DecisionTreeClassifier(max_depth=4, min_samples_leaf=5, random_state=seed)
    raise ValueError(f"kind must be one of {MODEL_KINDS}, got {kind!r}")


def prepare_data(name: str, seed: int = 0, test_fraction: float = 0.3, max_rows: int | None = None):
    """Standardized ``(x_train, y_train, x_test, y_test, feature_names)`` of a :mod:`jaxprobe.datasets` set.

    Columns constant over the training rows are dropped (digits' blank border pixels);
    ``max_rows`` keeps a stratified subset first (Default has 10,000 rows).

    Examples
    --------
    >>> x_train, y_train, x_test, y_test, names = prepare_data("iris")    # 150 rows: a 70/30 stratified split
    >>> x_train.shape, x_test.shape, np.bincount(y_test).tolist(), names[0]
    ((105, 4), (45, 4), [15, 15, 15], 'sepal length (cm)')
    >>> bool(np.all(np.abs(x_train.mean(axis=0)) < 0.1))     # standardized
    True
    """
    from jaxprobe import datasets

    data = datasets.load(name)
    if max_rows is not None and len(data) > max_rows:
        data, _ = data.train_test_split(seed=seed, test_fraction=1.0 - max_rows / len(data))
    train, test = data.train_test_split(seed=seed, test_fraction=test_fraction)
    x_train, x_test = data.standardize(train.x).astype(np.float64), data.standardize(test.x).astype(np.float64)
    keep = np.flatnonzero(x_train.std(axis=0) > 1e-8)
    names = [data.feature_names[j] for j in keep]
    return x_train[:, keep], np.asarray(train.y), x_test[:, keep], np.asarray(test.y), names


@dataclasses.dataclass
class SweepResult:
    """``records``: one dict per (model, prior level); ``correlations``: Spearman ρ and p-values.

    Examples
    --------
    >>> import json
    >>> result = SweepResult("iris", records=[{"model": "logistic", "kl_gaussian": 0.3}], correlations={}, seconds=1.5)
    >>> json.dumps(result.to_dict())                          # JSON-ready, as the benchmark stores it
    '{"dataset": "iris", "records": [{"model": "logistic", "kl_gaussian": 0.3}], "correlations": {}, "seconds": 1.5}'
    """

    dataset: str
    records: list[dict[str, Any]]
    correlations: dict[str, Any]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "records": self.records, "correlations": self.correlations,
                "seconds": self.seconds}


def _subset(rng, y, fraction):
    """A stratified subset of row indices (every class keeps at least 2 rows)."""
    chosen = []
    for label in np.unique(y):
        rows = np.flatnonzero(y == label)
        count = max(2, int(round(fraction * rows.size)))
        chosen.append(rng.choice(rows, min(count, rows.size), replace=False))
    return np.sort(np.concatenate(chosen))


KL_KEYS = ("kl_gaussian", "kl_knn", "kl_gaussian_marginal_mean")


def _rho(a, b) -> dict[str, Any]:
    from scipy.stats import spearmanr

    a, b = np.asarray(a, float), np.asarray(b, float)
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3 or np.unique(a[ok]).size < 2 or np.unique(b[ok]).size < 2:
        return {"rho": float("nan"), "p": float("nan"), "n": int(ok.sum())}
    result = spearmanr(a[ok], b[ok])
    return {"rho": float(result.statistic), "p": float(result.pvalue), "n": int(ok.sum())}


def spearman_summary(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Spearman ρ (with p and n) for every KL estimate in :data:`KL_KEYS`:

    * ``<kl>_vs_prior_error``: over all runs (models pooled);
    * ``<kl>_vs_prior_error_within_model``: the mean of the per-model ρ (each model's own prior levels,
      free of between-model differences);
    * ``<kl>_vs_model_error``: over the correct-prior runs;

    and ``synthetic_vs_base_accuracy`` over the correct-prior runs. NaN where fewer than 3 points or a
    constant variable.

    Examples
    --------
    >>> records = [{"model": "logistic", "train_fraction": 1.0, "prior_error": error, "model_error": 0.1,
    ...             "base_accuracy": 0.9, "synthetic_accuracy": 0.8, "kl_gaussian": 0.5 + error,
    ...             "kl_knn": 0.4 + error, "kl_gaussian_marginal_mean": 0.1 + error} for error in (0.0, 0.5, 1.0, 2.0)]
    >>> summary = spearman_summary(records)                   # KL grows with the prior error: ρ = 1
    >>> summary["kl_gaussian_vs_prior_error"], summary["kl_gaussian_vs_model_error"]["n"]   # one correct-prior run
    ({'rho': 1.0, 'p': 0.0, 'n': 4}, 1)
    """
    correct = [r for r in records if r["prior_error"] == 0.0]
    models = sorted({(r["model"], r["train_fraction"]) for r in records})
    summary: dict[str, Any] = {}
    for key in KL_KEYS:
        summary[f"{key}_vs_prior_error"] = _rho([r["prior_error"] for r in records], [r[key] for r in records])
        within = [_rho([r["prior_error"] for r in records if (r["model"], r["train_fraction"]) == m],
                       [r[key] for r in records if (r["model"], r["train_fraction"]) == m])["rho"] for m in models]
        within = [value for value in within if np.isfinite(value)]
        summary[f"{key}_vs_prior_error_within_model"] = {
            "rho": float(np.mean(within)) if within else float("nan"), "n": len(within)}
        summary[f"{key}_vs_model_error"] = _rho([r["model_error"] for r in correct], [r[key] for r in correct])
    summary["synthetic_vs_base_accuracy"] = _rho([r["base_accuracy"] for r in correct],
                                                 [r["synthetic_accuracy"] for r in correct])
    return summary


def run_sweep(
    name: str,
    *,
    model_kinds: Sequence[str] = MODEL_KINDS,
    train_fractions: Sequence[float] = (0.1, 0.3, 1.0),
    prior_levels: Sequence[tuple[float, float]] = ((0.0, 1.0), (0.5, 1.0), (1.0, 1.0), (2.0, 1.0), (0.0, 3.0)),
    num_chains: int = 64,
    num_warmup: int = 400,
    num_samples: int = 200,
    thin: int = 5,
    sampler: str = "rwmh",
    max_rows: int | None = 2000,
    ridge: float = 1e-3,
    synthetic_size: int | None = 1000,
    seed: int = 0,
    verbose: bool = False,
) -> SweepResult:
    """Run the sweep on data set ``name``; ``prior_levels`` are ``(mean_shift, covariance_scale)`` pairs
    and the first must be ``(0, 1)`` (the correct prior). Each synthetic training set has
    ``max(synthetic_size, rows the base model saw)`` rows (``None``: as many rows as the base model saw).

    Examples
    --------
    >>> result = run_sweep("iris", model_kinds=("logistic",), train_fractions=(1.0,),
    ...                    prior_levels=((0.0, 1.0), (2.0, 1.0)), num_chains=4, num_warmup=20, num_samples=20,
    ...                    thin=1, synthetic_size=100)             # a tiny sweep: one model, two priors
    >>> correct, shifted = result.records
    >>> shifted["prior_error"] > 0.0, bool(shifted["kl_gaussian"] > correct["kl_gaussian"])   # worse prior, worse fit
    (True, True)
    """
    from jaxprobe.models import from_sklearn

    if tuple(prior_levels[0]) != (0.0, 1.0):
        raise ValueError(f"prior_levels must start with the correct prior (0.0, 1.0), got {prior_levels[0]}")
    for kind in model_kinds:
        make_model(kind)
    started = time.perf_counter()
    x_train, y_train, x_test, y_test, _ = prepare_data(name, seed, max_rows=max_rows)
    correct = fit_gaussian(x_train)
    priors = [misspecify(correct, shift, scale) for shift, scale in prior_levels]
    correct_mean, correct_covariance = prior_moments(correct)
    prior_errors = [0.0 if (shift, scale) == (0.0, 1.0) else
                    gaussian_kl(correct_mean, correct_covariance, *prior_moments(prior))
                    for (shift, scale), prior in zip(prior_levels, priors)]
    rng = np.random.default_rng(seed)
    records = []
    for kind in model_kinds:  # a few dozen fitted models: host-side experiment loop, one program each
        for fraction in train_fractions:
            rows = _subset(rng, y_train, fraction)
            base = make_model(kind, seed).fit(x_train[rows], y_train[rows])
            base_accuracy = float(base.score(x_test, y_test))
            victim = from_sklearn(base)
            model_sampler = sampler
            if sampler == "auto":
                model_sampler = "mala" if victim.differentiable else "rwmh"
            tic = time.perf_counter()
            reconstructions = reconstruct_many(int(rng.integers(2**31)), [(victim, prior) for prior in priors],
                                               num_chains=num_chains, num_warmup=num_warmup,
                                               num_samples=num_samples, thin=thin, sampler=model_sampler,
                                               chunk_size=num_samples)
            seconds = time.perf_counter() - tic
            proportions = np.bincount(y_train[rows], minlength=reconstructions[0].num_classes) / rows.size
            for (shift, scale), prior_error, reconstruction in zip(prior_levels, prior_errors, reconstructions):
                report = fidelity(x_test, y_test, reconstruction, k=5, ridge=ridge, max_reconstructed=2000)
                num_synthetic = int(rows.size) if synthetic_size is None else max(int(synthetic_size),
                                                                                  int(rows.size))
                x_syn, y_syn = reconstruction.synthetic_dataset(int(rng.integers(2**31)), num_synthetic, proportions)
                accuracy = synthetic_accuracy(base, x_syn, y_syn, x_test, y_test)
                record = {
                    "dataset": name, "model": kind, "train_fraction": float(fraction),
                    "num_train": int(rows.size), "num_synthetic": num_synthetic, "mean_shift": float(shift),
                    "covariance_scale": float(scale),
                    "prior_error": float(prior_error), "model_error": 1.0 - base_accuracy,
                    "base_accuracy": base_accuracy, "synthetic_accuracy": accuracy["synthetic_accuracy"],
                    "accuracy_ratio": accuracy["ratio"],
                    # standard errors of the test set's sampling (synthetic_accuracy says what they cover)
                    "base_accuracy_se": accuracy["base_accuracy_se"],
                    "synthetic_accuracy_se": accuracy["synthetic_accuracy_se"],
                    "accuracy_ratio_se": accuracy["ratio_se"], "num_test": accuracy["num_test"],
                    "kl_gaussian": float(np.mean([r.gaussian for r in report])),
                    "kl_knn": float(np.nanmean([r.knn for r in report])) if np.any(
                        np.isfinite([r.knn for r in report])) else float("nan"),
                    "kl_gaussian_marginal_mean": float(np.mean([r.gaussian_marginals.mean() for r in report])),
                    "kl_per_class_gaussian": [r.gaussian for r in report],
                    "acceptance_rate": float(reconstruction.samples.acceptance_rate.mean()),
                    "sampler": model_sampler, "sampling_seconds": seconds,
                }
                records.append(record)
            if verbose:
                print(f"{name} {kind} {fraction}: acc {base_accuracy:.3f} ± {records[-1]['base_accuracy_se']:.3f} -> "
                      + ", ".join(f"KL {r['kl_gaussian']:.2f} syn {r['synthetic_accuracy']:.3f} ± "
                                  f"{r['synthetic_accuracy_se']:.3f}" for r in records[-len(priors):])
                      + f" ({seconds:.1f}s)", flush=True)
    return SweepResult(name, records, spearman_summary(records), time.perf_counter() - started)
