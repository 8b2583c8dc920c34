"""The targets :mod:`jaxprobe.samplers.tree_gibbs` samples: tree ensembles, their split thresholds per feature,
and the priors as Gaussian mixtures (or flat boxes), everything a sweep needs precomputed on the host.

Build one from a :class:`jaxprobe.Question` (:func:`target_from_question`) or from a reconstruction
(:func:`reconstruction_target`); both refuse a target not of the tree form with a ``ValueError`` whose message
starts with the argument at fault, before anything compiles. Priors are read through
:class:`jaxprobe.priors.MixtureFormPrior` (``prior.mixture_form(d)``): a prior class that does not implement it
is refused by name.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.models.trees import TreeEnsembleModel
from jaxprobe.priors import GaussianMixtureForm, MixtureFormPrior, NoPrior
from jaxprobe.target import gibbs
from jaxprobe.types import Array

__all__ = ["NAME", "SCANS", "DEFAULT_PRIOR_MOVES", "MAX_GROUPS", "PriorTable", "TreeGibbsTarget", "FeatureGroup",
           "as_tree_ensemble", "prior_table", "target_from_question", "reconstruction_target"]

NAME = "tree_gibbs"
"""The sampler's name in ``generate``, ``sweep``, ``reconstruct``, ``reconstruct_many`` and configuration files."""

DEFAULT_PRIOR_MOVES = (0.0, 0.3, 0.6, 0.8, 0.9, 0.95)
"""The correlations ρ of the prior moves a sweep ends with by default (Gaussian and mixture priors, no fixed
features): six Crank–Nicolson proposals from a fresh prior draw (ρ = 0) to a small step (ρ = 0.95), each one
full ensemble evaluation per block (see :func:`jaxprobe.samplers.tree_gibbs.build_kernel`)."""

SCANS = ("systematic", "random")
"""Sweep orders: every free coordinate once in a fixed order, or as many coordinates drawn uniformly with
replacement (random scan; within each group of :attr:`TreeGibbsTarget.groups`)."""


def as_tree_ensemble(model: Any) -> Any:
    """The :class:`~jaxprobe.models.trees.TreeEnsembleModel` behind ``model`` (itself, an
    :class:`~jaxprobe.models.ImportedModel` of trees or a reconstruction ``JaxClassifier`` of one), or None.

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> tree = jaxprobe.models.from_sklearn(DecisionTreeClassifier(max_depth=1).fit([[-1.0], [1.0]], [0, 1]))
    >>> as_tree_ensemble(tree), as_tree_ensemble(lambda x: x)      # an imported tree; a plain function
    (TreeEnsembleModel(DecisionTreeClassifier, trees=1, max_nodes=3, max_depth=1, link='identity'), None)
    """
    for candidate in (model, getattr(model, "fn", None), getattr(model, "probability_fn", None)):
        if isinstance(candidate, TreeEnsembleModel):
            return candidate
    return None


@dataclasses.dataclass(frozen=True, eq=False)
class PriorTable:
    """P priors over d features as Gaussian mixtures (or flat), NumPy on the host.

    Attributes
    ----------
    log_weights
        ``(P, M)`` log mixture weights (``−inf`` pads priors with fewer components; 0 for one Gaussian).
    means
        ``(P, M, d)`` component means.
    precisions
        ``(P, Q, d, d)`` component precision matrices; ``Q = 1`` when every component of a prior shares
        one covariance (then component c uses ``precisions[p, 0]``), else ``Q = M``.
    log_det_precisions
        ``(P, Q)`` log det of each precision.
    choleskys
        ``(P, Q, d, d)`` lower Cholesky factors of the component covariances (zeros for a flat prior).
    flat
        ``(P,)`` bool: no density (uniform on the bounds).
    low, high
        ``(P, d)`` bounds (a UniformBox prior's box; ±inf where none).

    Examples
    --------
    >>> uniform = jaxprobe.priors.UniformBox(-jnp.ones(2), jnp.ones(2))
    >>> table = prior_table([jaxprobe.priors.StandardNormal(), uniform], 2)
    >>> table.means.shape, table.flat.tolist(), table.low.tolist()   # P = 2 priors, M = 1 component, d = 2
    ((2, 1, 2), [False, True], [[-inf, -inf], [-1.0, -1.0]])
    """

    log_weights: np.ndarray
    means: np.ndarray
    precisions: np.ndarray
    log_det_precisions: np.ndarray
    flat: np.ndarray
    low: np.ndarray
    high: np.ndarray
    choleskys: np.ndarray

    @property
    def num_components(self) -> int:
        return int(self.log_weights.shape[1])

    @property
    def shared(self) -> bool:
        """Whether component c of every prior uses the prior's one precision matrix."""
        return self.precisions.shape[1] == 1


def _one_prior(prior: Any, dim: int, what: str) -> GaussianMixtureForm:
    """One prior's :class:`~jaxprobe.priors.GaussianMixtureForm` (None: flat), or a ValueError naming ``what``:
    for a prior that does not implement :class:`~jaxprobe.priors.MixtureFormPrior` or does not fit ``dim``."""
    if prior is None:
        prior = NoPrior()
    if not isinstance(prior, MixtureFormPrior):
        raise ValueError(f"{what}: sampler={NAME!r} needs a prior whose conditionals it can draw exactly, one that "
                         f"implements jaxprobe.priors.MixtureFormPrior (a mixture_form(dim) method: the prior as a "
                         f"Gaussian mixture or a flat box), as StandardNormal, DiagonalGaussian, Gaussian, "
                         f"UniformBox, NoPrior (or None) and reconstruct.priors.GaussianMixture do; "
                         f"{type(prior).__name__} does not")
    try:
        form = prior.mixture_form(dim)
    except ValueError as error:
        raise ValueError(f"{what}: {error}") from None
    if not isinstance(form, GaussianMixtureForm):
        raise ValueError(f"{what}: {type(prior).__name__}.mixture_form must return a jaxprobe.priors."
                         f"GaussianMixtureForm, got {type(form).__name__}")
    return form


def prior_table(priors: Sequence[Any], dim: int, what: str = "prior") -> PriorTable:
    """Stack ``priors`` (each None or a :class:`~jaxprobe.priors.MixtureFormPrior`) into one :class:`PriorTable`;
    a ``ValueError`` naming ``what`` for any other prior.

    Examples
    --------
    >>> table = prior_table([jaxprobe.priors.StandardNormal(), None], 2)     # None: flat
    >>> table.precisions[0, 0].tolist(), table.flat.tolist(), table.num_components
    ([[1.0, 0.0], [0.0, 1.0]], [False, True], 1)
    >>> prior_table([lambda x: -x @ x], 2)                   # a log density without mixture_form
    Traceback (most recent call last):
        ...
    ValueError: prior: sampler='tree_gibbs' needs a prior whose conditionals it can draw exactly, ...
    """
    parts = [_one_prior(prior, dim, what) for prior in priors]
    num_components = max(part.means.shape[0] for part in parts)
    shared = all(part.precisions.shape[0] == 1 for part in parts)
    num_precisions = 1 if shared else num_components
    count = len(parts)
    log_weights = np.full((count, num_components), -np.inf)
    means = np.zeros((count, num_components, dim))
    precisions = np.zeros((count, num_precisions, dim, dim))
    log_det = np.zeros((count, num_precisions))
    for p, part in enumerate(parts):
        m = part.means.shape[0]
        log_weights[p, :m], means[p, :m] = part.log_weights, part.means
        q = part.precisions.shape[0]
        # A shared precision is repeated when other priors need one per component; padding components
        # (weight 0) repeat the first.
        precisions[p], log_det[p] = part.precisions[0], part.log_det_precisions[0]
        precisions[p, :q], log_det[p, :q] = part.precisions, part.log_det_precisions
    flat = np.array([bool(part.flat) for part in parts])
    choleskys = np.zeros_like(precisions)
    for p in np.flatnonzero(~flat):
        choleskys[p] = np.linalg.cholesky(np.linalg.inv(precisions[p]))
    return PriorTable(log_weights=log_weights, means=means, precisions=precisions, log_det_precisions=log_det,
                      flat=flat, low=np.stack([np.asarray(part.low, np.float64) for part in parts]),
                      high=np.stack([np.asarray(part.high, np.float64) for part in parts]), choleskys=choleskys)


def _threshold_union(ensembles: Sequence[Any], dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The sorted union of the ensembles' thresholds per feature: ``(d, M)`` float32 (+inf padded), counts."""
    per_feature = []
    for j in range(dim):  # d small unions on the host, once per target
        values = [e.split_thresholds[j, :e.split_counts[j]] for e in ensembles]
        per_feature.append(np.unique(np.concatenate(values)) if values else np.zeros(0, np.float32))
    counts = np.array([v.size for v in per_feature], np.int32)
    table = np.full((dim, max(1, int(counts.max(initial=0)))), np.inf, np.float32)
    for j, values in enumerate(per_feature):
        table[j, :values.size] = values
    return table, counts


@dataclasses.dataclass(frozen=True, eq=False)
class TreeGibbsTarget:
    """A target of the form the module docstring states, with everything a sweep needs precomputed.

    Positions are ``(B, d)`` per chain. Build one with :func:`target_from_question` or
    :func:`reconstruction_target`; the constructor checks only shapes.

    Attributes
    ----------
    ensembles
        The distinct :class:`~jaxprobe.models.trees.TreeEnsembleModel` objects G depends on.
    energy
        ``energy(outputs, block) -> G_b``: ``outputs`` a tuple with one output per ensemble (``(K,)`` or
        ``()``, as ``ensemble(x_b)`` gives), ``block`` an int32 scalar (traced).
    temperature
        τ > 0.
    num_blocks, dim
        B and d.
    prior
        The :class:`PriorTable` of the P distinct priors.
    prior_index
        ``(B,)`` int: the prior of each block.
    low, high
        ``(P, d)`` bounds per prior and feature: the prior's own box intersected with Box constraints.
    free
        ``(d,)`` bool: the features the sweeps update (the others keep their initial values).
    thresholds, threshold_counts
        ``(d, M)`` and ``(d,)``: the union over ``ensembles`` of the split thresholds per feature.
    logdensity_fn
        log p of one chain's flattened position ``(B·d,)`` (the question's own formula), for the kept draws.
    description
        For messages.

    Notes
    -----
    Derived on construction: ``free_indices`` and ``groups`` (:class:`FeatureGroup`: the free features in
    at most :data:`MAX_GROUPS` groups of similar interval and tree counts, so that an update pads the
    ensemble evaluation to its group's largest counts rather than the largest overall).

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from jaxprobe import models, priors, probes
    >>> tree = models.from_sklearn(DecisionTreeClassifier(max_depth=1).fit([[-1.0, 0.0], [1.0, 0.0]], [0, 1]))
    >>> question = jaxprobe.Question(probes.fixed_label(tree, 1), 1.0, priors.StandardNormal(), dim=2)  # class 1: x₀>0
    >>> target = target_from_question(question)
    >>> target                                                # one split, at x₀ = 0: 2 + 1 intervals per sweep
    TreeGibbsTarget(fixed_label[cross_entropy], blocks=1, dim=2, free=2, thresholds=1, evaluations/sweep=3)
    >>> target.thresholds[0].tolist(), target.threshold_counts.tolist(), target.supports_prior_moves
    ([0.0], [1, 0], True)
    """

    ensembles: tuple
    energy: Callable[[tuple, Array], Array]
    temperature: float
    num_blocks: int
    dim: int
    prior: PriorTable
    prior_index: np.ndarray
    low: np.ndarray
    high: np.ndarray
    free: np.ndarray
    thresholds: np.ndarray
    threshold_counts: np.ndarray
    logdensity_fn: Callable[[Array], Array]
    description: str = "tree ensembles"

    def __post_init__(self):
        dim, count = self.dim, self.prior.log_weights.shape[0]
        index = self.prior_index
        if index.shape != (self.num_blocks,) or index.min() < 0 or index.max() >= count:
            raise ValueError(f"prior_index must be ({self.num_blocks},) ints in [0, {count})")
        for name in ("low", "high"):
            if getattr(self, name).shape != (count, dim):
                raise ValueError(f"{name} must have shape ({count}, {dim}), got {getattr(self, name).shape}")
        if self.free.shape != (dim,) or not self.free.any():
            raise ValueError(f"free must be a ({dim},) bool mask with at least one True")
        # Interval tables (d, I), I = M + 1: interval i of feature j is (lower, upper], evaluated at `point`.
        thresholds, counts = self.thresholds.astype(np.float32), self.threshold_counts
        num_intervals = thresholds.shape[1] + 1
        index = np.arange(num_intervals)[None, :]
        padded = np.concatenate([thresholds, np.full((dim, 1), np.inf, np.float32)], axis=1)
        lower = np.concatenate([np.full((dim, 1), -np.inf, np.float32), thresholds], axis=1)
        upper = np.where(index < counts[:, None], padded, np.inf).astype(np.float32)
        # Interval i < m is evaluated at its upper end t_i (included: x <= t_i goes left); the last one well
        # above t_m (not at nextafter(t_m): for t_m = 0 that is a subnormal, which XLA flushes to 0 on CPU).
        last = thresholds[np.arange(dim), np.maximum(counts - 1, 0)]
        with np.errstate(over="ignore"):
            above_last = np.where(counts > 0, last + np.maximum(np.abs(last), np.float32(1.0)), np.float32(0.0))
        point = np.where(index < counts[:, None], padded, above_last[:, None]).astype(np.float32)
        object.__setattr__(self, "_interval_lower", np.where(index <= counts[:, None], lower, np.inf))
        object.__setattr__(self, "_interval_upper", upper)
        object.__setattr__(self, "_interval_point", point)
        object.__setattr__(self, "_interval_valid", index <= counts[:, None])
        object.__setattr__(self, "free_indices", np.flatnonzero(self.free).astype(np.int32))
        object.__setattr__(self, "groups", _feature_groups(self, MAX_GROUPS))

    @property
    def supports_prior_moves(self) -> bool:
        """Whether :func:`build_kernel` can add prior moves: every prior Gaussian (or a mixture) and no feature
        fixed (a move redraws all d coordinates of a block)."""
        return bool(not self.prior.flat.any() and self.free.all())

    @property
    def default_prior_moves(self) -> tuple:
        """:data:`DEFAULT_PRIOR_MOVES` where they are supported, else none."""
        return DEFAULT_PRIOR_MOVES if self.supports_prior_moves else ()

    @property
    def num_intervals(self) -> int:
        """I: intervals evaluated per coordinate update (padded to the feature with most thresholds, + 1)."""
        return int(self.thresholds.shape[1] + 1)

    @property
    def evaluations_per_sweep(self) -> int:
        """Ensemble evaluations per chain made by a systematic sweep's coordinate updates: B · Σ_{free j}
        (m_j + 1), one per interval (each walks only the trees that test feature j; a random-scan sweep makes
        this many on average). Prior moves add B full evaluations each."""
        return int(self.num_blocks * np.sum(self.threshold_counts[self.free] + 1))

    @property
    def padded_evaluations_per_sweep(self) -> int:
        """What a systematic sweep computes, the intervals padded to each group's largest count (see
        :func:`_feature_groups`): B · Σ_groups (features in it) · (its intervals)."""
        return int(self.num_blocks * sum(group.features.size * group.num_intervals for group in self.groups))

    def __repr__(self) -> str:
        return (f"TreeGibbsTarget({self.description}, blocks={self.num_blocks}, dim={self.dim}, "
                f"free={int(self.free.sum())}, thresholds={int(self.threshold_counts.sum())}, "
                f"evaluations/sweep={self.evaluations_per_sweep})")


MAX_GROUPS = 4
"""At most this many feature groups (each one more branch of the update to compile)."""


class FeatureGroup(NamedTuple):
    """Free features whose updates share one padding of the ensemble evaluation: ``features`` ``(n,)`` int32
    (ascending), the intervals evaluated per update (the largest ``m_j + 1`` in the group) and, per ensemble,
    the trees walked per interval (the largest count of trees testing a feature of the group).

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from jaxprobe import models, priors, probes
    >>> tree = models.from_sklearn(DecisionTreeClassifier(max_depth=1).fit([[-1.0, 0.0], [1.0, 0.0]], [0, 1]))
    >>> question = jaxprobe.Question(probes.fixed_label(tree, 1), 1.0, priors.StandardNormal(), dim=2)  # class 1: x₀>0
    >>> [(group.features.tolist(), group.num_intervals) for group in target_from_question(question).groups]
    [([1], 1), ([0], 2)]
    """

    features: np.ndarray
    num_intervals: int
    widths: tuple


def _feature_groups(target: "TreeGibbsTarget", max_groups: int) -> tuple:
    """Split the free features into at most ``max_groups`` groups so that padding each group's updates to its
    largest interval and tree counts wastes little: features sorted by their cost I_j · (U_j + 1)
    (I_j = m_j + 1 intervals, U_j trees testing j over all ensembles), cut into contiguous runs by dynamic
    programming on the padded cost Σ_g n_g · max I · (max U + 1); the fewest groups within 15 % of the best
    are kept (every group is one more branch to compile)."""
    features = target.free_indices
    intervals = target.threshold_counts[features].astype(np.int64) + 1
    per_ensemble = np.stack([e.feature_tree_counts[features] for e in target.ensembles], axis=1)  # (n, E)
    trees = per_ensemble.sum(axis=1)
    order = np.lexsort((trees, intervals, intervals * (trees + 1)))
    count = order.size
    # cost[a, b]: the padded cost of one group holding the sorted features a..b-1 (b > a).
    cost = np.full((count + 1, count + 1), np.inf)
    for a in range(count):
        top_i = np.maximum.accumulate(intervals[order[a:]])
        top_u = np.maximum.accumulate(trees[order[a:]])
        cost[a, a + 1:] = np.arange(1, count - a + 1) * top_i * (top_u + 1)
    best = [cost[0]]  # best[g - 1][b]: the first b sorted features in g groups
    cuts = [np.zeros(count + 1, np.int64)]
    for _ in range(1, max_groups):
        total = best[-1][:, None] + cost  # (a, b)
        cuts.append(np.argmin(total, axis=0))
        best.append(np.min(total, axis=0))
    totals = np.array([b[count] for b in best])
    groups_needed = int(np.flatnonzero(totals <= 1.15 * totals.min())[0]) + 1
    bounds, end = [], count
    for g in range(groups_needed - 1, -1, -1):
        start = int(cuts[g][end]) if g else 0
        bounds.append((start, end))
        end = start
    result = []
    for start, end in reversed(bounds):
        if end <= start:
            continue
        chosen = np.sort(order[start:end])
        result.append(FeatureGroup(features[chosen].astype(np.int32), int(intervals[chosen].max()),
                                   tuple(int(w) for w in per_ensemble[chosen].max(axis=0))))
    return tuple(result)


def _check_ensembles(models: Sequence[Any], dim: int, what: str) -> tuple[tuple, list[int]]:
    """Distinct tree ensembles of ``models`` and each model's slot among them; ValueError naming ``what``."""
    ensembles = []
    for model in models:
        ensemble = as_tree_ensemble(model)
        if ensemble is None:
            name = getattr(model, "estimator_name", None) or getattr(model, "name", None) or type(model).__name__
            raise ValueError(f"{what}: sampler={NAME!r} needs every model to be an imported tree ensemble "
                             f"(from_sklearn of a DecisionTree, RandomForest, ExtraTrees, GradientBoosting or "
                             f"an XGBoost model); {name} is not (a differentiable model: use sampler='mala' or "
                             "'nuts'; another black box: 'rwmh')")
        if ensemble.num_features != dim:
            raise ValueError(f"{what}: {ensemble.estimator_name} takes {ensemble.num_features} features, the target "
                             f"has {dim}")
        ensembles.append(ensemble)
    distinct, slots = _distinct_by_identity(ensembles)
    return tuple(distinct), slots


def _distinct_by_identity(items: Sequence[Any]) -> tuple[list, list[int]]:
    """The distinct objects of ``items`` (by identity, in first-seen order) and each item's index among them."""
    distinct, slots = [], []
    for item in items:
        slot = next((index for index, known in enumerate(distinct) if known is item), len(distinct))
        if slot == len(distinct):
            distinct.append(item)
        slots.append(slot)
    return distinct, slots


def _check_temperature(temperature: Any) -> float:
    if isinstance(temperature, jax.core.Tracer):
        raise ValueError(f"temperature: sampler={NAME!r} needs a concrete temperature, not a traced one "
                         "(a compiled sweep over temperatures); run one tree_gibbs call per temperature")
    return float(temperature)


def target_from_question(question: Any) -> TreeGibbsTarget:
    """The :class:`TreeGibbsTarget` of a :class:`jaxprobe.Question` (one block), or a ValueError naming what
    breaks the form: ``probe`` (a part not built from tree ensembles: ``localize``, ``parameter_sensitive``,
    ``fixed_label`` with ``param_dist``, a plain function, a differentiable model), ``prior`` (not one of
    those listed in the module notes; with no prior every free feature needs finite bounds),
    ``constraints`` (OneHot groups), ``temperature`` (traced).

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from jaxprobe import models, priors, probes
    >>> tree = models.from_sklearn(DecisionTreeClassifier(max_depth=1).fit([[-1.0, 0.0], [1.0, 0.0]], [0, 1]))
    >>> question = jaxprobe.Question(probes.fixed_label(tree, 1), 1.0, priors.StandardNormal(), dim=2)  # class 1: x₀>0
    >>> target = target_from_question(question)
    >>> target.num_blocks, target.evaluations_per_sweep
    (1, 3)
    >>> target_from_question(jaxprobe.Question(probes.localize(jnp.zeros(2)), 1.0, dim=2))   # not of the tree form
    Traceback (most recent call last):
        ...
    ValueError: probe: sampler='tree_gibbs' needs a probe built only from imported tree ensembles ...
    """
    probe, dim = question.probe, question.dim
    if probe.models is None or probe.head is None:
        raise ValueError(f"probe: sampler={NAME!r} needs a probe built only from imported tree ensembles "
                         f"(prediction_risky, fixed_label without param_dist, model_contrast, and sums and "
                         f"multiples of them); {probe.name} has a part it cannot see through (localize, "
                         "parameter_sensitive, fixed_label with param_dist or a plain function)")
    if not probe.models:
        raise ValueError(f"probe: {probe.name} depends on no model: nothing for sampler={NAME!r} to sample")
    ensembles, slots = _check_ensembles(probe.models, dim, "probe")
    tau = _check_temperature(question.temperature)
    restricted = question.restriction
    if restricted.groups:
        raise ValueError(f"constraints: sampler={NAME!r} does not sample OneHot groups (their simplex "
                         "relaxation is not coordinate-wise); use sampler='rwmh' or 'mala'")
    table = prior_table([question.prior], dim, "prior")
    low = np.maximum(table.low, restricted.low[None])
    high = np.minimum(table.high, restricted.high[None])
    free = ~restricted.is_fixed
    if np.any(low[0, free] >= high[0, free]):
        raise ValueError("prior: its box and the Box constraints leave no room for features "
                         f"{np.flatnonzero(free & (low[0] >= high[0])).tolist()}")
    if table.flat[0] and not (np.all(np.isfinite(low[0, free])) and np.all(np.isfinite(high[0, free]))):
        unbounded = np.flatnonzero(free & ~(np.isfinite(low[0]) & np.isfinite(high[0])))
        raise ValueError(f"prior: with no prior (or a flat one) sampler={NAME!r} needs finite Box bounds on "
                         f"every free feature (else the conditional is improper); features {unbounded[:10].tolist()} "
                         "have none: pass a prior or Box constraints")
    head = probe.head

    def energy(outputs, block):
        return head(*(outputs[slot] for slot in slots))

    logdensity = gibbs(probe.fn, tau, question.prior)  # the question's formula, in data space
    thresholds, counts = _threshold_union(ensembles, dim)
    return TreeGibbsTarget(ensembles=ensembles, energy=energy, temperature=tau, num_blocks=1, dim=dim, prior=table,
                           prior_index=np.zeros(1, np.int64), low=low, high=high, free=free, thresholds=thresholds,
                           threshold_counts=counts, logdensity_fn=logdensity, description=probe.name)


def reconstruction_target(question: Any, classifiers: Sequence[Any], priors: Sequence[Any], num_classes: int,
                          dim: int) -> TreeGibbsTarget:
    """The :class:`TreeGibbsTarget` of an all-classes reconstruction (:func:`jaxprobe.reconstruct`).

    Blocks ``b = s·K + k`` for S settings ``(classifiers[s], priors[s])`` and K classes, with
    ``G_b(x) = −log p_s(k | x)``; positions ``(S·K, d)`` in feature units (no whitening). ``question`` is the
    reconstruction's :class:`jaxprobe.Question` (with identity whitening), whose log density is reported.
    A ValueError names ``model`` (not a tree ensemble) or ``prior`` (unsupported).

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from jaxprobe.reconstruct import as_classifier
    >>> from jaxprobe.reconstruct.posterior import reconstruction_question
    >>> model = as_classifier(jaxprobe.models.from_sklearn(
    ...     DecisionTreeClassifier(max_depth=1).fit([[-1.0, 0.0], [1.0, 0.0]], [0, 1])))
    >>> prior = jaxprobe.priors.DiagonalGaussian(jnp.zeros(2), jnp.ones(2))
    >>> question = reconstruction_question([(model, prior, np.zeros(2), np.eye(2))], 1.0)   # identity whitening
    >>> reconstruction_target(question, [model], [prior], num_classes=2, dim=2).num_blocks   # S·K blocks
    2
    """
    ensembles, slots = _check_ensembles(classifiers, dim, "model")
    tau = _check_temperature(question.temperature)
    distinct, prior_slots = _distinct_by_identity(priors)
    table = prior_table(distinct, dim, "prior")
    bounded = np.isfinite(table.low) & np.isfinite(table.high)
    if np.any(table.flat & ~bounded.all(axis=1)):
        raise ValueError(f"prior: sampler={NAME!r} needs a proper prior (Gaussian, mixture or a bounded "
                         "UniformBox) for reconstruction")
    num_settings = len(classifiers)
    model_of_block = np.repeat(np.asarray(slots, np.int32), num_classes)  # (S·K,)
    class_of_block = np.tile(np.arange(num_classes, dtype=np.int32), num_settings)

    def energy(outputs, block):
        probabilities = jnp.stack([jnp.asarray(output) for output in outputs])  # (distinct models, K)
        return -jnp.log(probabilities[jnp.asarray(model_of_block)[block], jnp.asarray(class_of_block)[block]])

    thresholds, counts = _threshold_union(ensembles, dim)
    return TreeGibbsTarget(ensembles=ensembles, energy=energy, temperature=tau, num_blocks=num_settings * num_classes,
                           dim=dim, prior=table, prior_index=np.repeat(np.asarray(prior_slots), num_classes),
                           low=table.low, high=table.high, free=np.ones(dim, bool), thresholds=thresholds,
                           threshold_counts=counts, logdensity_fn=question.logdensity,
                           description=f"reconstruction of {ensembles[0].estimator_name}")

