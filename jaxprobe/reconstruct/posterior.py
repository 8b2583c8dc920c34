"""Sampling the reconstruction posterior p̂(x | y) ∝ p_model(y | x)^(1/τ) · p_prior(x) for every class at once.

All classes in ONE compiled program: the position of a chain is a ``(K, D)`` array whose row k is a
point of class k, and the target is the product over classes

    log π(x_1..x_K) = Σ_k [ log p_model(k | x_k) / τ + log p_prior(x_k) ],

whose k-th marginal is exactly p̂(x | y = k) (the factors are independent). One chain therefore
reconstructs every class, the engine vmaps over chains and scans over steps, and a black-box
``predict_proba`` sees all chains × classes in one host call per step.

Chains run in whitened coordinates ``x = m + L z`` (m, L Lᵀ the prior's mean and covariance), so a
random-walk proposal has the shape of the prior (a linear bijection: no Jacobian term beyond a
constant). The starting points are drawn by sampling–importance–resampling from the prior with
weights p_model(k | x)^(1/τ), which already targets p̂(x | k) and lets short warmups suffice.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe._inputs import check_int
from jaxprobe.engine import Samples
from jaxprobe.engine.api import canonicalize_key, known_sampler_starts_at_target, known_samplers, make_kernel
from jaxprobe.engine.registry import whole_run_sampler
from jaxprobe.engine.verdict import check_policy
from jaxprobe.engine.verdict import report as verdict_report
from jaxprobe.generation import answer
from jaxprobe.priors import DiagonalGaussian, StandardNormal
from jaxprobe.reconstruct.priors import prior_moments
from jaxprobe.reconstruct.victims import as_classifier, original_errors
from jaxprobe.question import Question
from jaxprobe.target import check_temperature
from jaxprobe.types import LogDensityFn, PRNGKey

__all__ = ["Reconstruction", "reconstruct", "reconstruct_many", "reconstruction_logdensity", "reconstruction_question"]


@dataclasses.dataclass(frozen=True)
class Reconstruction:
    """The result of :func:`reconstruct`.

    Attributes
    ----------
    samples
        The engine's :class:`jaxprobe.Samples`; positions ``(chain, draw, K, D)`` in whitened
        coordinates z (diagnostics: ``samples.summary()``, acceptance rates, ...).
    draws
        ``(chain, draw, K, D)`` reconstructed points in feature units: ``draws[:, :, k]`` are
        draws of p̂(x | y = k).
    class_weights
        ``(K,)`` the class marginal implied by model and prior, p̂(y = k) = E_prior[p_model(k | x)]
        (estimated from the initial prior draws; used as default class proportions).
    mean, cholesky
        The whitening ``x = mean + cholesky @ z``.

    Examples
    --------
    >>> from jaxprobe.reconstruct import GaussianClasses, reconstruct
    >>> truth = GaussianClasses(means=[[1.0, 0.0], [-1.0, 0.0]], covariance=np.eye(2))
    >>> result = reconstruct(0, truth.bayes_classifier(), truth.prior(), num_chains=8, num_samples=50, num_warmup=50)
    >>> result.draws.shape, result.pooled(1).shape, round(float(result.class_weights.sum()), 6)
    ((8, 50, 2, 2), (400, 2), 1.0)
    >>> bool(result.pooled(0)[:, 0].mean() > result.pooled(1)[:, 0].mean())    # class 0 lies at x₁ > 0
    True
    >>> x, y = result.synthetic_dataset(jax.random.key(1), 10)    # 10 labelled rows in p̂(y) proportions
    >>> x.shape, y.shape
    ((10, 2), (10,))
    """

    samples: Samples
    draws: np.ndarray
    class_weights: np.ndarray
    mean: np.ndarray
    cholesky: np.ndarray

    @property
    def num_classes(self) -> int:
        return self.draws.shape[2]

    def class_draws(self, label: int) -> np.ndarray:
        """``(chain, draw, D)`` draws of p̂(x | y = label)."""
        label = check_int(label, "label", minimum=0, maximum=self.num_classes - 1)
        return self.draws[:, :, label]

    def pooled(self, label: int) -> np.ndarray:
        """``(chain · draw, D)`` all draws of class ``label`` in one table."""
        draws = self.class_draws(label)
        return draws.reshape(-1, draws.shape[-1])

    def synthetic_dataset(self, rng_key: Any, num_samples: int,
                          class_proportions: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """A labelled synthetic data set drawn from the reconstruction.

        ``round(num_samples · π_k)`` rows of class k (largest remainders, so the counts sum to
        ``num_samples``), π = ``class_proportions`` (default :attr:`class_weights`), each drawn
        without replacement from the pooled draws of class k (with replacement when there are
        fewer draws than rows). Returns ``x`` ``(num_samples, D)`` and ``y`` ``(num_samples,)`` int64,
        shuffled.
        """
        num_samples = check_int(num_samples, "num_samples", minimum=1)
        proportions = self.class_weights if class_proportions is None else np.asarray(class_proportions, float)
        if proportions.shape != (self.num_classes,) or np.any(proportions < 0) or proportions.sum() <= 0:
            raise ValueError(f"class_proportions must be {self.num_classes} non-negative numbers, not all 0; "
                             f"got {class_proportions!r}")
        proportions = proportions / proportions.sum()
        exact = num_samples * proportions
        counts = np.floor(exact).astype(int)
        counts[np.argsort(counts - exact)[: num_samples - counts.sum()]] += 1
        # Host-side table draws (NumPy generator seeded by the key's bits: no compile per count).
        rng = np.random.default_rng(np.asarray(jax.random.key_data(canonicalize_key(rng_key))).ravel())
        rows, labels = [], []
        for label, count in enumerate(counts):  # K table draws, not a sampling loop
            pool = self.pooled(label)
            index = rng.choice(pool.shape[0], int(count), replace=bool(count > pool.shape[0]))
            rows.append(pool[index])
            labels.append(np.full(int(count), label, np.int64))
        order = rng.permutation(num_samples)
        return np.concatenate(rows)[order], np.concatenate(labels)[order]


class _WhitenedPriors:
    """log Π_s Π_k prior_s(m_s + L_s z_{s,k}) of a flat ``z`` ``(S·K·D,)``, and exact draws of it (for SMC).

    The whitening is linear, so its Jacobian is a constant and left out.
    """

    def __init__(self, priors: Sequence[Any], means: Sequence[np.ndarray], choleskys: Sequence[np.ndarray],
                 num_classes: int):
        self.priors, self.means, self.choleskys = list(priors), list(means), list(choleskys)
        self.num_classes, self.dim = num_classes, self.means[0].size

    def features(self, z):
        """``(S·K·D,)`` → points in feature units ``(S, K, D)``."""
        z = z.reshape(len(self.priors), self.num_classes, self.dim)
        return jnp.stack([jnp.asarray(m, z.dtype) + z[s] @ jnp.asarray(L.T, z.dtype)
                          for s, (m, L) in enumerate(zip(self.means, self.choleskys))])

    def __call__(self, z):
        x = self.features(z)
        return sum(jnp.sum(jax.vmap(prior)(x[s])) for s, prior in enumerate(self.priors))

    def sample(self, rng_key, num, dtype=jnp.float32):
        keys = jax.random.split(rng_key, len(self.priors))
        parts = []
        for key, prior, m, L in zip(keys, self.priors, self.means, self.choleskys):
            x = jnp.asarray(prior.sample(key, num * self.num_classes, dtype=dtype), dtype)
            whitening = jnp.asarray(np.linalg.inv(L).T, dtype)
            parts.append(((x - jnp.asarray(m, dtype)) @ whitening).reshape(num, 1, self.num_classes, self.dim))
        return jnp.concatenate(parts, axis=1).reshape(num, -1)


def reconstruction_question(settings: Sequence[tuple[Any, Any, np.ndarray, np.ndarray]], temperature: float
                            ) -> Question:
    """The all-classes reconstruction target of S prepared ``(classifier, prior, mean, cholesky)`` settings as
    ONE :class:`jaxprobe.Question` on a flat whitened ``z`` ``(S·K·D,)``:
    G(z) = −Σ_s Σ_k log p_s(k | x_{s,k}), prior Π_s Π_k prior_s(x_{s,k}), ``x_{s,k} = m_s + L_s z_{s,k}``.

    Examples
    --------
    >>> from jaxprobe.reconstruct import GaussianClasses
    >>> truth = GaussianClasses(means=[[1.0, 0.0], [-1.0, 0.0]], covariance=np.eye(2))
    >>> setting = (truth.bayes_classifier(), truth.prior(), np.zeros(2), np.eye(2))   # no whitening: z = x
    >>> question = reconstruction_question([setting], 1.0)
    >>> question.dim                                          # S·K·D
    4
    >>> round(float(jax.jit(question.logdensity)(jnp.array([1.0, 0.0, -1.0, 0.0]))), 3)   # Σ_k log ½ N(μ_k; μ_k, I)
    -5.062
    """
    classifiers = [setting[0] for setting in settings]
    priors = _WhitenedPriors([s[1] for s in settings], [s[2] for s in settings], [s[3] for s in settings],
                             classifiers[0].num_classes)

    def negative_log_likelihood(z):
        x = priors.features(z)
        return -sum(jnp.sum(c.log_class_probabilities(x[s])) for s, c in enumerate(classifiers))

    size = len(settings) * priors.num_classes * priors.dim
    return Question(negative_log_likelihood, temperature, priors, dim=size)


def reconstruction_logdensity(classifier: Any, prior: Any, *, temperature: float = 1.0,
                              mean: Any = None, cholesky: Any = None) -> LogDensityFn:
    """The log density of the all-classes reconstruction target in whitened coordinates.

    ``logdensity(z)`` for ``z`` ``(K, D)``: with ``x_k = mean + cholesky @ z_k``,
    ``Σ_k log p_model(k | x_k) / τ + log p_prior(x_k)`` — the log density of
    :func:`reconstruction_question` for one setting. ``mean`` / ``cholesky`` default to 0 / I (no whitening).

    Examples
    --------
    >>> from jaxprobe.reconstruct import GaussianClasses
    >>> truth = GaussianClasses(means=[[1.0, 0.0], [-1.0, 0.0]], covariance=np.eye(2))
    >>> logdensity = jax.jit(reconstruction_logdensity(truth.bayes_classifier(), truth.prior()))
    >>> z = jnp.array([[1.0, 0.0], [-1.0, 0.0]])             # row k: a point of class k, at its mean
    >>> round(float(logdensity(z)), 3), bool(logdensity(z) > logdensity(z[::-1]))   # Σ_k log ½ N(μ_k; μ_k, I)
    (-5.062, True)
    """
    classifier = as_classifier(classifier)
    dim = classifier.num_features
    mean = np.zeros(dim) if mean is None else np.asarray(mean, np.float64)
    cholesky = np.eye(dim) if cholesky is None else np.asarray(cholesky, np.float64)
    if mean.shape != (dim,) or cholesky.shape != (dim, dim):
        raise ValueError(f"mean must be ({dim},) and cholesky ({dim}, {dim}); got {mean.shape}, {cholesky.shape}")
    question = reconstruction_question([(classifier, prior, mean, cholesky)], temperature)
    return lambda z: question.logdensity(z.reshape(-1))


def initial_positions(rng_key, probabilities_fn, prior, num_chains, num_candidates, tau, dtype,
                       allow_impossible=False):
    """Sampling–importance–resampling from the prior with weights p_model(k | x)^(1/τ): ``(C, K, D)``.

    ``allow_impossible``: a class no candidate gives p > 0 starts from plain prior draws instead of raising
    (for a whole-run sampler that walks out of a zero-probability region by itself, such as the tree-ensemble
    Gibbs sampler: ``WholeRunSampler.moves_into_support``)."""
    key_candidates, key_pick = jax.random.split(rng_key)
    candidates = prior.sample(key_candidates, num_candidates, dtype=dtype)
    probabilities = np.asarray(probabilities_fn(candidates), np.float64)
    class_weights = probabilities.mean(axis=0)
    with np.errstate(divide="ignore"):
        log_weights = np.log(probabilities) / tau
    if not np.all(np.isfinite(np.asarray(candidates))):
        raise ValueError("prior.sample returned non-finite points")
    impossible = np.flatnonzero(~np.any(np.isfinite(log_weights), axis=0))
    if impossible.size and allow_impossible:
        log_weights[:, impossible] = 0.0
    elif impossible.size:
        raise ValueError(f"no prior draw out of {num_candidates} has p_model(k | x) > 0 for classes "
                         f"{impossible.tolist()}: the prior does not cover them; widen the prior or raise "
                         "num_candidates")
    logits = jnp.asarray(log_weights.T, jnp.float32)  # (K, M)
    keys = jax.random.split(key_pick, logits.shape[0])
    index = jax.vmap(lambda key, logit: jax.random.categorical(key, logit, shape=(num_chains,)))(keys, logits)
    start = jnp.swapaxes(candidates[index], 0, 1)  # (C, K, D)
    return start, class_weights


def _prepare(model: Any, prior: Any, sampler: str, whiten: bool, dtype: Any):
    """Validate one (model, prior) setting; returns (classifier, prior, mean, cholesky)."""
    dim_hint = getattr(model, "num_features", None) or getattr(model, "n_features_in_", None)
    if isinstance(prior, StandardNormal):
        if dim_hint is None and prior.event_shape is None:
            raise ValueError("StandardNormal prior needs event_shape=(D,) here")
        size = int(np.prod(prior.event_shape)) if prior.event_shape is not None else int(dim_hint)
        prior = DiagonalGaussian(np.zeros(size), np.ones(size))
    if not callable(prior) or not hasattr(prior, "sample"):
        raise TypeError(f"prior must be a callable log density with a sample(rng_key, n) method, got "
                        f"{type(prior).__name__}")
    classifier = as_classifier(model, num_features=dim_hint)
    dim = classifier.num_features
    try:
        prior_shape = jax.eval_shape(prior, jax.ShapeDtypeStruct((dim,), dtype)).shape
    except Exception as error:  # noqa: BLE001 - explained below
        raise ValueError(f"prior fails on one point of shape ({dim},) (the model's input): {error}") from error
    if prior_shape != ():
        raise ValueError(f"prior must return a scalar log density for one ({dim},) point, got shape {prior_shape}")
    whole_run = whole_run_sampler(sampler)
    if whole_run is not None:  # it samples the reconstruction itself, in feature units (no whitening)
        reason = whole_run.supports_reconstruction(classifier, prior, dim)  # refused here, before compiling
        if reason is not None:
            raise ValueError(reason)
        return classifier, prior, np.zeros(dim), np.eye(dim)
    if make_kernel(sampler).uses_gradient and not classifier.differentiable:
        kind = "a black-box predict_proba" if classifier.black_box else f"{classifier.name} (piecewise constant)"
        raise ValueError(f"sampler={sampler!r} needs gradients but the model is {kind}: use sampler='rwmh'")
    if whiten:
        mean, covariance = prior_moments(prior, dim)
        cholesky = np.linalg.cholesky(covariance)
    else:
        mean, cholesky = np.zeros(dim), np.eye(dim)
    return classifier, prior, mean, cholesky


def reconstruct_many(
    rng_key: PRNGKey | int,
    settings: Sequence[tuple[Any, Any]],
    *,
    num_chains: int = 64,
    num_samples: int = 500,
    num_warmup: int = 500,
    sampler: str = "rwmh",
    thin: int = 1,
    temperature: float = 1.0,
    whiten: bool = True,
    num_candidates: int | None = None,
    dtype: Any = jnp.float32,
    progress: bool = False,
    **sample_options: Any,
) -> list[Reconstruction]:
    """:func:`reconstruct` for S ``(model, prior)`` settings at once, in ONE compiled program.

    All settings must share D and K. A chain's position is ``(S, K, D)`` and the target is the product
    of the S all-classes targets, so its marginals are each setting's p̂(x | y): a sweep over prior
    misspecification levels or over models compiles once instead of S times (on CPU compilation,
    not sampling, dominates small reconstructions). The price: one step size for all S·K·D
    coordinates, so random-walk chains need about S times more steps to mix; gradient samplers
    less (MALA scales as (S·K·D)^(1/3)). Every returned :class:`Reconstruction` holds the joint
    ``samples`` (positions ``(C, N, S, K, D)``) and its own ``draws`` ``(C, N, K, D)``.

    Examples
    --------
    >>> from jaxprobe.reconstruct import GaussianClasses, misspecify
    >>> truth = GaussianClasses(means=[[1.0, 0.0], [-1.0, 0.0]], covariance=np.eye(2))
    >>> model, prior = truth.bayes_classifier(), truth.prior()
    >>> correct, shifted = reconstruct_many(0, [(model, prior), (model, misspecify(prior, mean_shift=2.0))],
    ...                                     num_chains=8, num_samples=50, num_warmup=50)   # one compiled run
    >>> correct.draws.shape, correct.samples.positions.shape
    ((8, 50, 2, 2), (8, 50, 2, 2, 2))
    >>> bool(shifted.pooled(0).mean() > correct.pooled(0).mean())   # the shifted prior pulls the draws along
    True
    """
    rng_key = canonicalize_key(rng_key)
    whole_run, num_chains, num_candidates, tau = _check_run_settings(
        sampler, num_chains, num_candidates, temperature, dict(sample_options, thin=thin, progress=progress))
    prepared, classifiers, num_classes, dim = _prepare_settings(settings, sampler, whiten, dtype)
    question = reconstruction_question(prepared, tau)
    if whole_run is not None:  # the target and its options are checked before anything compiles
        run_whole = whole_run.reconstruction(question, [c for c, *_ in prepared], [p for _, p, *_ in prepared],
                                             num_classes, dim,
                                             dict(sample_options, thin=thin, progress=progress, convergence="ignore"))
    key_init, key_sample = jax.random.split(rng_key)
    starts, weights = _starting_points(key_init, prepared, num_chains, num_candidates, tau, dtype,
                                       allow_impossible=whole_run is not None and whole_run.moves_into_support)
    # Chains start from the sampling-importance-resampling draws (C, S, K, D), flattened as the question's z;
    # SMC starts from exact prior draws instead (the reference of its tempering path).
    start_z = None if known_sampler_starts_at_target(sampler) else \
        np.stack(starts, axis=1).astype(dtype).reshape(num_chains, -1)
    convergence = check_policy(sample_options.pop("convergence", "warn"))
    if whole_run is not None:
        flat = run_whole(key_sample, np.asarray(start_z).reshape(num_chains, -1, dim), num_samples, num_warmup)
    else:
        # A black-box predict_proba that raises inside the host callback keeps its own exception type.
        with original_errors(*classifiers):
            flat = answer(key_sample, question, num_chains=num_chains, num_samples=num_samples,
                          init=start_z, sampler=sampler, num_warmup=num_warmup, thin=thin, progress=progress,
                          dtype=dtype, convergence="ignore", **sample_options)
    verdict_report(flat.verdict, convergence, stacklevel=2)
    return _reconstructions(flat, prepared, weights, num_classes, dim)


def _check_run_settings(sampler: str, num_chains: Any, num_candidates: Any, temperature: Any,
                        options: dict[str, Any]) -> tuple[Any, int, int, float]:
    """The run-wide arguments of :func:`reconstruct_many`, checked before anything is built or compiled:
    returns the whole-run sampler (or None), C, the number of prior candidates and τ."""
    if sampler not in known_samplers(whole_run=True):
        raise ValueError(f"sampler must be one of {known_samplers(whole_run=True)}, got {sampler!r}")
    whole_run = whole_run_sampler(sampler)
    if whole_run is not None:  # its options, before anything else is checked or compiled
        whole_run.check_options(options)
    num_chains = check_int(num_chains, "num_chains", minimum=1)
    if num_candidates is None:
        num_candidates = max(1024, 16 * num_chains)
    else:  # prior draws for the starting points
        num_candidates = check_int(num_candidates, "num_candidates", minimum=1)
    return whole_run, num_chains, num_candidates, check_temperature(temperature)


def _prepare_settings(settings: Sequence[tuple[Any, Any]], sampler: str, whiten: bool, dtype: Any
                      ) -> tuple[list[tuple[Any, Any, np.ndarray, np.ndarray]], list[Any], int, int]:
    """Every ``(model, prior)`` setting through :func:`_prepare` (the same model in several settings is
    converted once): the prepared settings, the distinct classifiers, and the K and D they all share."""
    if isinstance(settings, (str, bytes)) or not hasattr(settings, "__len__") or len(settings) == 0:
        raise ValueError("settings must be a non-empty sequence of (model, prior) pairs")
    prepared, classifiers = [], {}
    for index, setting in enumerate(settings):
        if not isinstance(setting, (tuple, list)) or len(setting) != 2:
            raise ValueError(f"settings[{index}] must be a (model, prior) pair, got {type(setting).__name__}")
        model = setting[0]
        if id(model) not in classifiers:
            dim_hint = getattr(model, "num_features", None) or getattr(model, "n_features_in_", None)
            classifiers[id(model)] = as_classifier(model, num_features=dim_hint)
        prepared.append(_prepare(classifiers[id(model)], setting[1], sampler, whiten, dtype))
    shapes = {(classifier.num_classes, classifier.num_features) for classifier, *_ in prepared}
    if len(shapes) > 1:
        raise ValueError(f"all settings must share (num_classes, num_features); got {sorted(shapes)}")
    num_classes, dim = shapes.pop()
    return prepared, list(classifiers.values()), num_classes, dim


def _starting_points(rng_key: PRNGKey, prepared: Sequence[tuple[Any, Any, np.ndarray, np.ndarray]],
                     num_chains: int, num_candidates: int, tau: float, dtype: Any, allow_impossible: bool
                     ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each setting's starting points in its whitened coordinates ``(C, K, D)`` (:func:`initial_positions`,
    key ``fold_in(rng_key, s)``) and its class weights p̂(y = k) ``(K,)``."""
    dim = prepared[0][0].num_features
    starts, weights, batched = [], [], {}
    for index, (classifier, prior, mean, cholesky) in enumerate(prepared):  # S settings, built once
        if id(classifier) not in batched:  # one compiled batch evaluation per distinct model
            batched[id(classifier)] = (
                (lambda x, c=classifier: c.probabilities(np.asarray(x, np.float64))) if classifier.black_box
                else jax.jit(classifier.probabilities))
        start, class_weights = initial_positions(jax.random.fold_in(rng_key, index), batched[id(classifier)],
                                                  prior, num_chains, num_candidates, tau, dtype,
                                                  allow_impossible=allow_impossible)
        start_z = np.linalg.solve(cholesky, (np.asarray(start, np.float64) - mean).reshape(-1, dim).T).T
        starts.append(start_z.reshape(np.shape(start)))
        weights.append(class_weights)
    return starts, weights


def _reconstructions(flat: Samples, prepared: Sequence[tuple[Any, Any, np.ndarray, np.ndarray]],
                     weights: Sequence[np.ndarray], num_classes: int, dim: int) -> list[Reconstruction]:
    """One :class:`Reconstruction` per setting from the joint run ``flat`` (positions ``(C, N, S·K·D)``): the
    joint samples reshaped to ``(C, N, S, K, D)`` (``(C, N, K, D)`` for one setting), each setting's draws
    mapped back to feature units, ``x = m + L z``."""
    event_shape = (num_classes, dim) if len(prepared) == 1 else (len(prepared), num_classes, dim)
    samples = dataclasses.replace(flat, positions=np.asarray(flat.positions).reshape(
        flat.positions.shape[:2] + event_shape))
    z = np.asarray(samples.positions, np.float64)
    results = []
    for index, (classifier, prior, mean, cholesky) in enumerate(prepared):
        z_setting = z if len(prepared) == 1 else z[:, :, index]
        results.append(Reconstruction(samples, mean + z_setting @ cholesky.T, weights[index], mean, cholesky))
    return results


def reconstruct(
    rng_key: PRNGKey | int,
    model: Any,
    prior: Any,
    *,
    num_chains: int = 64,
    num_samples: int = 500,
    num_warmup: int = 500,
    sampler: str = "rwmh",
    thin: int = 1,
    temperature: float = 1.0,
    whiten: bool = True,
    num_candidates: int | None = None,
    dtype: Any = jnp.float32,
    progress: bool = False,
    **sample_options: Any,
) -> Reconstruction:
    """Reconstruct every class's data from a trained classifier: draws of p̂(x | y) ∝ p_model(y | x) p_prior(x).

    Parameters
    ----------
    rng_key
        ``jax.random.key`` or int seed.
    model
        The victim: an ImportedModel (``from_sklearn``), a JAX function ``x (D,) -> (K,)``
        probabilities, a fitted scikit-learn / XGBoost classifier, any object with
        ``predict_proba`` (called through one host callback per step for all chains), or a
        :class:`JaxClassifier` / :class:`BlackBoxClassifier` (see :func:`as_classifier`).
    prior
        Prior over features ``(D,)``: a :mod:`jaxprobe.priors` prior or one of
        :mod:`jaxprobe.reconstruct.priors` (with a ``sample`` method for the initial points).
    num_chains, num_samples, num_warmup, thin
        C chains, each carrying one point per class; kept draws per chain; warmup (step size
        adaptation) steps; transitions per kept draw.
    sampler
        ``"rwmh"`` (default; black-box, the paper's Metropolis–Hastings) or ``"mala"``, ``"hmc"``,
        ``"nuts"``, ``"chees"`` for differentiable JAX models, or a whole-run sampler of
        :mod:`jaxprobe.samplers`, such as the tree-ensemble Gibbs sampler for an imported tree
        ensemble (DecisionTree, RandomForest, ExtraTrees, GradientBoosting, XGBoost) with a Gaussian,
        diagonal, mixture or box prior: exact coordinate-wise Gibbs sweeps over the split intervals
        (each sweep ending with prior-preserving Metropolis moves for Gaussian and mixture priors;
        ``sampler_options={"scan": ..., "prior_moves": ...}``). A whole-run sampler's ``num_warmup``
        and ``thin`` count its own steps (sweeps), chains run in feature units (``whiten`` is not used),
        and, when it walks into the support by itself, a class no prior draw can reach still starts.
    temperature
        τ in p_model(y | x)^(1/τ); 1 is the paper's posterior.
    whiten
        Run chains in the prior's whitened coordinates (needs its mean and covariance:
        :func:`jaxprobe.reconstruct.priors.prior_moments`).
    num_candidates
        Prior draws for the importance-resampled starting points (default ``max(1024, 16 C)``).
    sample_options
        Passed to :func:`jaxprobe.sample` (``step_size``, ``chunk_size``, ``sampler_options``, ...).

    Returns
    -------
    Reconstruction
        ``draws`` ``(C, N, K, D)`` in feature units and the engine's ``samples``.

    Example
    -------
    >>> from jaxprobe.reconstruct import GaussianClasses
    >>> truth = GaussianClasses(means=[[1.0, 0.0], [-1.0, 0.5]], covariance=np.eye(2))
    >>> result = reconstruct(0, truth.bayes_classifier(), truth.prior(), num_chains=256)
    >>> result.class_draws(0).shape     # draws of p̂(x | y = 0) = N(μ_0, I)
    (256, 500, 2)
    """
    convergence = check_policy(sample_options.pop("convergence", "warn"))
    result = reconstruct_many(rng_key, [(model, prior)], num_chains=num_chains, num_samples=num_samples,
                              num_warmup=num_warmup, sampler=sampler, thin=thin, temperature=temperature,
                              whiten=whiten, num_candidates=num_candidates, dtype=dtype, progress=progress,
                              convergence="ignore", **sample_options)[0]
    verdict_report(result.samples.verdict, convergence, stacklevel=2)  # the warning points at the caller's line
    return result
