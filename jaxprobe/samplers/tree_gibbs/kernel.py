"""One sweep of one chain of :mod:`jaxprobe.samplers.tree_gibbs`: exact coordinate updates over the split
intervals, the mixture components' data augmentation and the prior-preserving Metropolis moves.

:func:`init` (a position → :class:`TreeGibbsState`) and :func:`build_kernel` (target, scan, prior moves →
``kernel(rng_key, state) -> (state, info)``) are the layers; the update's pieces (:func:`_group_energies`,
:func:`_interval_weights`, :func:`_draw_in_interval`, :func:`_move_trees`) are functions of the target and a
:class:`_Layout` of its interval tables, so each reads on its own.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.samplers.tree_gibbs.normal import (_log_masses_from_tails, _tails,
                                                 _truncated_standard_normal_from_tails)
from jaxprobe.samplers.tree_gibbs.target import SCANS, FeatureGroup, TreeGibbsTarget
from jaxprobe.types import Array, PRNGKey

__all__ = ["TreeGibbsState", "TreeGibbsInfo", "init", "build_kernel", "check_prior_moves"]


class TreeGibbsState(NamedTuple):
    """One chain: ``position`` ``(B, d)``, each block's mixture ``component`` ``(B,)`` int32, and per ensemble
    the flat leaves ``(B, T)`` int32 every block's point reaches and its raw score ``(B, G)`` (kept up to
    date by the updates, so that an update touches only the trees that test its feature; the raw scores are
    summed afresh from the leaves at the start of every sweep, so float rounding cannot accumulate).

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from jaxprobe import models, priors, probes
    >>> from jaxprobe.samplers.tree_gibbs import target_from_question
    >>> tree = models.from_sklearn(DecisionTreeClassifier(max_depth=1).fit([[-1.0, 0.0], [1.0, 0.0]], [0, 1]))
    >>> question = jaxprobe.Question(probes.fixed_label(tree, 1), 1.0, priors.StandardNormal(), dim=2)  # class 1: x₀>0
    >>> state = init(target_from_question(question), jnp.array([[-1.0, 0.5]]))   # B = 1 block of d = 2
    >>> state.position.shape, state.component.tolist(), np.asarray(state.raw[0]).tolist()   # the leaf says class 0
    ((1, 2), [0], [[1.0, 0.0]])
    """

    position: Array
    component: Array
    leaves: tuple
    raw: tuple


class TreeGibbsInfo(NamedTuple):
    """One sweep: ``num_fallback`` coordinate updates whose every interval had zero density (the chain was
    outside the support along that line; x_j was then drawn from its prior conditional alone), and
    ``accepted``: the prior moves' acceptance, summed over the sweep's moves (mean over blocks each).

    Examples
    --------
    >>> info = TreeGibbsInfo(num_fallback=jnp.int32(0), accepted=jnp.float32(2.5))   # as a kernel returns it
    >>> int(info.num_fallback), float(info.accepted) / 6       # e.g. the mean acceptance of 6 prior moves
    (0, 0.4166666666666667)
    """

    num_fallback: Array
    accepted: Array


def init(target: TreeGibbsTarget, position: Array) -> TreeGibbsState:
    """The state of one chain at ``position`` ``(B, d)``; components start at 0 (redrawn by every sweep).

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from jaxprobe import models, priors, probes
    >>> from jaxprobe.samplers.tree_gibbs import target_from_question
    >>> tree = models.from_sklearn(DecisionTreeClassifier(max_depth=1).fit([[-1.0, 0.0], [1.0, 0.0]], [0, 1]))
    >>> question = jaxprobe.Question(probes.fixed_label(tree, 1), 1.0, priors.StandardNormal(), dim=2)  # class 1: x₀>0
    >>> state = init(target_from_question(question), jnp.array([[-1.0, 0.5]]))
    >>> state.position.tolist(), [leaves.shape for leaves in state.leaves]   # per ensemble: (B, trees)
    ([[-1.0, 0.5]], [(1, 1)])
    """
    position = jnp.asarray(position)
    leaves = tuple(jax.vmap(ensemble.leaves)(position) for ensemble in target.ensembles)
    return TreeGibbsState(position, jnp.zeros((target.num_blocks,), jnp.int32), leaves,
                          _raw_scores(target, leaves, position.dtype))


def _raw_scores(target: TreeGibbsTarget, leaves: tuple, dtype: Any) -> tuple:
    """Each ensemble's raw score ``(B, G)`` from its leaves ``(B, T)``."""
    return tuple(jax.vmap(lambda leaf, e=ensemble: e.raw_score_of_leaves(leaf, dtype))(block)
                 for ensemble, block in zip(target.ensembles, leaves))


def _component_logits(target: TreeGibbsTarget, x: Array, prior: int) -> Array:
    """log w_c + log N(x; μ_c, Λ_c⁻¹) up to a constant, ``(M,)``, for one block's ``x`` ``(d,)``."""
    table, dtype = target.prior, x.dtype
    means = jnp.asarray(table.means, dtype)[prior]  # (M, d)
    precisions = jnp.asarray(table.precisions, dtype)[prior]  # (Q, d, d)
    centered = x[None, :] - means  # (M, d)
    if table.shared:
        quadratic = jnp.sum((centered @ precisions[0]) * centered, axis=1)
    else:
        quadratic = jnp.einsum("mi,mij,mj->m", centered, precisions, centered)
    log_det = jnp.asarray(table.log_det_precisions, dtype)[prior]
    return jnp.asarray(table.log_weights, dtype)[prior] + 0.5 * log_det - 0.5 * quadratic


def check_prior_moves(target: TreeGibbsTarget, prior_moves: Any) -> tuple:
    """``prior_moves`` as a tuple of floats in [0, 1), or a ValueError naming ``prior_moves``.

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from jaxprobe import models, priors, probes
    >>> from jaxprobe.samplers.tree_gibbs import target_from_question
    >>> tree = models.from_sklearn(DecisionTreeClassifier(max_depth=1).fit([[-1.0, 0.0], [1.0, 0.0]], [0, 1]))
    >>> question = jaxprobe.Question(probes.fixed_label(tree, 1), 1.0, priors.StandardNormal(), dim=2)  # class 1: x₀>0
    >>> target = target_from_question(question)
    >>> check_prior_moves(target, None), check_prior_moves(target, [0.5])    # None: the defaults
    ((0.0, 0.3, 0.6, 0.8, 0.9, 0.95), (0.5,))
    >>> check_prior_moves(target, [1.0])
    Traceback (most recent call last):
        ...
    ValueError: prior_moves must be correlations in [0, 1), got (1.0,)
    """
    if prior_moves is None:
        return target.default_prior_moves
    try:
        moves = tuple(float(value) for value in prior_moves)
    except (TypeError, ValueError):
        raise ValueError(f"prior_moves must be a sequence of correlations in [0, 1), got {prior_moves!r}") from None
    if not all(0.0 <= value < 1.0 for value in moves):
        raise ValueError(f"prior_moves must be correlations in [0, 1), got {moves}")
    if moves and not target.supports_prior_moves:
        raise ValueError("prior_moves need a Gaussian or mixture prior on every block and no fixed feature; "
                         "pass prior_moves=() here")
    return moves


def _inverse_cdf_choice(log_weight: Array, u: Array) -> Array:
    """Index i with probability ∝ exp(log_weight[..., i]) by the inverse CDF at ``u`` ∈ (0, 1) ``(...)``:
    one uniform per draw (a Gumbel argmax needs one per category). Rows need one finite weight."""
    weight = jnp.exp(log_weight - jnp.max(log_weight, axis=-1, keepdims=True))
    cumulative = jnp.cumsum(weight, axis=-1)
    chosen = jnp.sum(cumulative < (u * cumulative[..., -1])[..., None], axis=-1)
    # Rounding can only push the target past the last positive weight: clip to it.
    last = log_weight.shape[-1] - 1 - jnp.argmax(jnp.flip(weight > 0, axis=-1), axis=-1)
    return jnp.minimum(chosen, last)


def build_kernel(target: TreeGibbsTarget, scan: str = "systematic", prior_moves: Sequence[float] = ()) -> Callable:
    """One sweep of one chain: ``kernel(rng_key, state) -> (state, info)``.

    A sweep makes one update per free feature, every block at once (:attr:`TreeGibbsTarget.groups` says
    which features share a padding of the ensemble evaluation): with ``scan="systematic"`` every feature
    once, group after group, in index order within a group; with ``"random"`` each group's slots take
    features of that group drawn uniformly with replacement (the choice never depends on the state, so
    every update leaves p invariant). Mixture priors first redraw each block's component from p(c | x_b).
    The sweep's random numbers are drawn up front (two uniforms per block and update); an update chooses
    its interval by the inverse CDF and its value by :func:`truncated_standard_normal`'s inverse CDF.

    ``prior_moves`` ``(ρ_1, …)``: the sweep ends with one Metropolis move per ρ and block whose proposal keeps
    the block's Gaussian prior (its mixture component's) invariant, x' = μ + ρ (x − μ) + √(1 − ρ²) L ξ with
    L Lᵀ the covariance and ξ ~ N(0, I) (preconditioned Crank–Nicolson; ρ = 0 proposes an independent prior
    draw), accepted with probability min(1, exp(−(G_b(x') − G_b(x))/τ)): the prior ratio cancels against
    the proposal's, so only the likelihood decides. A coordinate-wise sweep moves slowly along directions
    the prior correlates (a ridge at correlation 0.99 takes ~100 sweeps to cross); these moves cross it in
    one step at the price of one full ensemble evaluation per block each. Every move leaves p invariant, so
    the sweep stays exact. Needs :attr:`TreeGibbsTarget.supports_prior_moves`.

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from jaxprobe import models, priors, probes
    >>> from jaxprobe.samplers.tree_gibbs import target_from_question
    >>> tree = models.from_sklearn(DecisionTreeClassifier(max_depth=1).fit([[-1.0, 0.0], [1.0, 0.0]], [0, 1]))
    >>> question = jaxprobe.Question(probes.fixed_label(tree, 1), 1.0, priors.StandardNormal(), dim=2)  # class 1: x₀>0
    >>> target = target_from_question(question)
    >>> kernel = jax.jit(build_kernel(target, prior_moves=()))       # one pure Gibbs sweep of one chain
    >>> state, info = kernel(jax.random.key(0), init(target, jnp.array([[-1.0, 0.5]])))
    >>> bool(state.position[0, 0] > 0.0), int(info.num_fallback)    # x₀ drawn exactly: into the support at once
    (True, 0)
    """
    if scan not in SCANS:
        raise ValueError(f"scan must be one of {SCANS}, got {scan!r}")
    prior_moves = check_prior_moves(target, prior_moves)
    return functools.partial(_sweep, target, _layout(target), scan, prior_moves)


class _Layout(NamedTuple):
    """A target's update tables (NumPy, static): the slots of a sweep (one per free feature, group after
    group: ``slot_group``, ``slot_feature``, ``group_starts``) and per feature its intervals up to the largest
    group's count ``size``: the point each is evaluated at, its lower end (as the trees see it), the
    breakpoints (interval i is ``(breakpoints[j, i], breakpoints[j, i + 1]]``; padding at +inf, empty) and
    which are real."""

    size: int
    blocks: np.ndarray
    slot_group: np.ndarray
    slot_feature: np.ndarray
    group_starts: np.ndarray
    interval_point: np.ndarray
    interval_lower: np.ndarray
    interval_breakpoints: np.ndarray
    interval_valid: np.ndarray


def _layout(target: TreeGibbsTarget) -> _Layout:
    groups = target.groups
    size = max(group.num_intervals for group in groups)  # intervals per update in the draw (padded, masked)
    return _Layout(
        size=size,
        blocks=np.arange(target.num_blocks, dtype=np.int32),
        slot_group=np.concatenate([np.full(g.features.size, i, np.int32) for i, g in enumerate(groups)]),
        slot_feature=np.concatenate([g.features for g in groups]).astype(np.int32),
        group_starts=np.concatenate([[0], np.cumsum([g.features.size for g in groups])[:-1]]),
        interval_point=target._interval_point[:, :size],
        interval_lower=target._interval_lower[:, :size],
        interval_breakpoints=np.concatenate([target._interval_lower[:, :1], target._interval_upper[:, :size]],
                                            axis=1),
        interval_valid=target._interval_valid[:, :size])


def _sweep(target: TreeGibbsTarget, layout: _Layout, scan: str, prior_moves: tuple, rng_key: PRNGKey,
           state: TreeGibbsState) -> tuple[TreeGibbsState, TreeGibbsInfo]:
    """The kernel :func:`build_kernel` returns: components, every slot's update (one scan per group), the
    prior moves."""
    key_component, key_order, key_updates, key_moves = jax.random.split(rng_key, 4)
    dtype = state.position.dtype
    state = state._replace(raw=_raw_scores(target, state.leaves, dtype))  # fresh sums: no drift
    if target.prior.num_components > 1:  # data augmentation: c_b ~ p(c | x_b), exactly
        logits = jax.vmap(lambda x, p: _component_logits(target, x, p))(state.position,
                                                                       jnp.asarray(target.prior_index))
        u = jax.random.uniform(key_component, (target.num_blocks,), dtype, minval=jnp.finfo(dtype).tiny)
        state = state._replace(component=_inverse_cdf_choice(logits, u).astype(jnp.int32))
    features = _slot_features(target, layout, scan, key_order)
    uniforms = jax.random.uniform(key_updates, (layout.slot_feature.size, target.num_blocks, 2), dtype,
                                  minval=jnp.finfo(dtype).tiny)
    # One scan per group (its shapes static), in slot order: no branch on the group inside the loop.
    fallbacks = []
    for index, group in enumerate(target.groups):
        slots = slice(int(layout.group_starts[index]), int(layout.group_starts[index]) + group.features.size)
        state, counts = jax.lax.scan(
            lambda carry, slot, group=group: _update(target, layout, carry, slot[0], group, slot[1]),
            state, (features[slots], uniforms[slots]))
        fallbacks.append(jnp.sum(counts))
    accepted = jnp.zeros((), dtype)
    if prior_moves:  # one compiled move, scanned over the correlations
        state, accepted_each = jax.lax.scan(
            lambda carry, move: _prior_move(target, layout, move[0], carry, move[1]), state,
            (jax.random.split(key_moves, len(prior_moves)), jnp.asarray(prior_moves, dtype)))
        accepted = jnp.sum(accepted_each)
    return state, TreeGibbsInfo(sum(fallbacks), accepted)


def _slot_features(target: TreeGibbsTarget, layout: _Layout, scan: str, rng_key: PRNGKey) -> Array:
    """The feature each slot of a sweep updates ``(slots,)``: the slot's own (systematic), or one of its group's
    drawn uniformly with replacement (random scan)."""
    features = jnp.asarray(layout.slot_feature)
    if scan != "random":
        return features
    groups = target.groups
    starts = np.concatenate([[0], np.cumsum([g.features.size for g in groups])[:-1]])
    sizes = np.array([g.features.size for g in groups])[layout.slot_group]
    pick = jax.random.randint(rng_key, layout.slot_feature.shape, 0, jnp.asarray(sizes))
    return features[jnp.asarray(starts[layout.slot_group]) + pick]


def _group_energies(target: TreeGibbsTarget, layout: _Layout, group: FeatureGroup, x: Array, feature: Array,
                    leaves: tuple, raws: tuple) -> tuple:
    """Every block's G_b with x_j set to each interval's point ``(B, I_g)`` (I_g: the group's intervals;
    padding: +inf), and per ensemble the raw scores ``(B, I_g, G)`` there and, for an ensemble without
    complete trees, the moving trees' leaves ``(B, I_g, U_g)`` (None for complete ones: their leaves are
    recomputed at the drawn point, :meth:`TreeEnsembleModel.update_leaves`)."""
    ensembles, energy = target.ensembles, target.energy
    points = jnp.asarray(layout.interval_point[:, :group.num_intervals])[feature].astype(x.dtype)

    def one_block(x_block: Array, block: Array, block_leaves: tuple, block_raws: tuple) -> tuple:
        raws, moved = [], []
        for ensemble, width, leaf, raw in zip(ensembles, group.widths, block_leaves, block_raws):
            if ensemble.complete_depth is not None:  # dense decisions and one matrix product, no walk
                raws.append(ensemble.scores_along_complete(x_block, feature, points, raw, width))
                moved.append(None)
            else:
                score, walked = ensemble.scores_along(x_block, feature, points, leaf, raw, width)
                raws.append(score)
                moved.append(walked)
        outputs = tuple(jax.vmap(ensemble.output_from_raw)(raw) for ensemble, raw in zip(ensembles, raws))
        energies = jax.vmap(lambda *one: energy(one, block))(*outputs)
        return energies, tuple(raws), tuple(moved)

    energies, raws, moved = jax.vmap(one_block)(x, jnp.asarray(layout.blocks), leaves, raws)
    return energies.astype(x.dtype), raws, moved


class _Weights(NamedTuple):
    """One coordinate update's intervals, every block ``(B, I)``: clipped ends ``a``, ``b``; the prior
    conditional's mean and sd ``(B, 1)`` and flatness ``(B,)``; standardized breakpoints ``z`` and their tails
    ``(B, I + 1)``; the intervals' log weights and the blocks outside the support along the line ``(B,)``."""

    a: Array
    b: Array
    mean: Array
    sd: Array
    is_flat: Array
    z: Array
    tails: Array
    linear: Array
    log_weight: Array
    fallback: Array


def _interval_weights(target: TreeGibbsTarget, layout: _Layout, state: TreeGibbsState, feature: Array,
                      size: int, energies: Array) -> _Weights:
    """The full conditional of x_j over the intervals: log(exp(−G_b/τ) · prior conditional mass), or the prior
    mass alone for a block outside the support along the whole line."""
    x, component = state.position, state.component
    dtype, table = x.dtype, target.prior
    valid = jnp.asarray(layout.interval_valid[:, :size])[feature]
    prior = jnp.asarray(target.prior_index)  # (B,)
    low = jnp.asarray(target.low, dtype)[prior, feature][:, None]  # (B, 1)
    high = jnp.asarray(target.high, dtype)[prior, feature][:, None]
    # Breakpoints of the consecutive intervals, clipped to the bounds: interval i is (c_i, c_{i+1}]
    # (invalid padding intervals lie at +inf, empty).
    ends = jnp.clip(jnp.asarray(layout.interval_breakpoints[:, :size + 1], dtype)[feature][None], low, high)
    a, b = ends[:, :-1], ends[:, 1:]  # (B, I): interval i ∩ bounds is (a_i, b_i]
    usable = valid[None] & (a < b)
    # The prior conditional of x_j given the block's other coordinates (its component's Gaussian).
    precision_row = jnp.asarray(table.precisions, dtype)[prior, component if not table.shared else 0, feature]
    mean = jnp.asarray(table.means, dtype)[prior, component]  # (B, d)
    is_flat = jnp.asarray(table.flat)[prior]
    safe_jj = jnp.where(is_flat, 1.0, precision_row[:, feature])
    shift = jnp.sum(precision_row * (x - mean), axis=1) / safe_jj
    conditional_mean = jnp.where(is_flat, 0.0, x[:, feature] - shift)[:, None]  # (B, 1)
    conditional_sd = jax.lax.rsqrt(safe_jj)[:, None]
    # One tail per breakpoint (I + 1), materialized: fused into its consumers XLA would evaluate the special
    # functions again for every read of every slice.
    z = (ends - conditional_mean) / conditional_sd  # (B, I + 1)
    tails, linear = jax.lax.optimization_barrier(_tails(z))
    gaussian_mass = _log_masses_from_tails(z[:, :-1], z[:, 1:], tails[:, :-1], tails[:, 1:], linear[:, :-1],
                                           linear[:, 1:])
    flat_mass = jnp.log(jnp.where(usable, b - a, 1.0))
    log_mass = jnp.where(usable, jnp.where(is_flat[:, None], flat_mass, gaussian_mass), -jnp.inf)
    log_weight = -energies / target.temperature + log_mass
    log_weight = jnp.where(jnp.isnan(log_weight), -jnp.inf, log_weight)
    # Outside the support along this whole line (a pure leaf of another class, ...): draw x_j from the
    # prior conditional alone; a chain in the support never leaves it (zero-weight intervals stay 0).
    fallback = ~jnp.any(log_weight > -jnp.inf, axis=1)  # (B,)
    log_weight = jnp.where(fallback[:, None], log_mass, log_weight)
    # Materialized once: fused into the draw's max, exp and cumulative sum, XLA would evaluate the masses'
    # special functions again for every read (a cumulative sum reads each entry up to I times).
    log_weight = jax.lax.optimization_barrier(log_weight)
    return _Weights(a, b, conditional_mean, conditional_sd, is_flat, z, tails, linear, log_weight, fallback)


def _draw_in_interval(layout: _Layout, weights: _Weights, feature: Array, size: int, u: Array,
                      dtype: Any) -> tuple[Array, Array]:
    """Choose an interval by the inverse CDF at ``u[:, 0]`` and draw x_j in it at ``u[:, 1]`` (truncated
    Gaussian, or uniform for a flat prior), exactly inside it as the trees see it. Returns the chosen interval
    ``(B, 1)`` and the value ``(B,)``."""
    a, b, z, tails, linear = weights.a, weights.b, weights.z, weights.tails, weights.linear
    chosen = _inverse_cdf_choice(weights.log_weight, u[:, 0])[:, None]  # (B, 1)
    a_i = jnp.take_along_axis(a, chosen, axis=1)[:, 0]
    b_i = jnp.take_along_axis(b, chosen, axis=1)[:, 0]
    m, s = weights.mean[:, 0], weights.sd[:, 0]
    pick_end = lambda table, shift: jnp.take_along_axis(table, chosen + shift, axis=1)[:, 0]  # noqa: E731
    gaussian = m + s * _truncated_standard_normal_from_tails(
        u[:, 1], pick_end(z, 0), pick_end(z, 1), pick_end(tails, 0), pick_end(tails, 1), pick_end(linear, 0),
        pick_end(linear, 1))
    value = jnp.where(weights.is_flat, a_i + u[:, 1] * (b_i - a_i), gaussian)
    # Exactly inside the interval as the trees see it (float32 x > lower, x <= upper) and the bounds.
    lower = jnp.asarray(layout.interval_lower[:, :size], dtype)[feature]
    lower_i = jnp.take_along_axis(jnp.broadcast_to(lower[None], a.shape), chosen, axis=1)[:, 0]
    # (The smallest normal float above a zero or subnormal lower end: subnormals are flushed to 0.)
    lower32 = lower_i.astype(jnp.float32)
    tiny = jnp.finfo(jnp.float32).tiny
    just_above = jnp.where(jnp.abs(lower32) < tiny, tiny, jnp.nextafter(lower32, jnp.float32(jnp.inf)))
    just_above = just_above.astype(dtype)
    return chosen, jnp.clip(value, jnp.maximum(just_above, a_i), b_i)


def _move_trees(target: TreeGibbsTarget, group: FeatureGroup, x: Array, feature: Array, chosen: Array,
                leaves: tuple, interval_raws: tuple, interval_leaves: tuple) -> tuple[tuple, tuple]:
    """The trees see x_j in the chosen interval: its raw scores and leaves are the point's now."""
    pick = lambda table: jnp.take_along_axis(table, chosen[:, :, None], axis=1)[:, 0]  # noqa: E731
    raws = tuple(pick(table) for table in interval_raws)
    leaves = tuple(
        jax.vmap(lambda leaf, point, e=ensemble, w=width: e.update_leaves(leaf, point, feature, w))(block, x)
        if table is None else
        jax.vmap(lambda leaf, row, e=ensemble: e.set_leaves(leaf, feature, row))(block, pick(table))
        for ensemble, width, block, table in zip(target.ensembles, group.widths, leaves, interval_leaves))
    return leaves, raws


def _update(target: TreeGibbsTarget, layout: _Layout, state: TreeGibbsState, feature: Array, group: FeatureGroup,
            u: Array) -> tuple[TreeGibbsState, Array]:
    """Draw x_j (j = ``feature``, traced, a feature of ``group``) of every block from its full conditional;
    ``u`` ``(B, 2)``. Arrays span the group's I_g intervals only (the others are padding for it). Returns the
    state and the number of blocks that fell back to the prior conditional."""
    x, component, leaves, raws = state
    size = group.num_intervals
    energies, interval_raws, interval_leaves = _group_energies(target, layout, group, x, feature, leaves, raws)
    weights = _interval_weights(target, layout, state, feature, size, energies)
    chosen, value = _draw_in_interval(layout, weights, feature, size, u, x.dtype)
    x = x.at[:, feature].set(value)
    leaves, raws = _move_trees(target, group, x, feature, chosen, leaves, interval_raws, interval_leaves)
    return TreeGibbsState(x, component, leaves, raws), jnp.sum(weights.fallback.astype(jnp.int32))


def _current_energies(target: TreeGibbsTarget, layout: _Layout, state: TreeGibbsState) -> Array:
    """G_b of every block ``(B,)`` from the kept raw scores."""
    outputs = [jax.vmap(ensemble.output_from_raw)(raw) for ensemble, raw in zip(target.ensembles, state.raw)]
    return jax.vmap(lambda block, *one: target.energy(one, block))(jnp.asarray(layout.blocks), *outputs)


def _prior_move(target: TreeGibbsTarget, layout: _Layout, rng_key: PRNGKey, state: TreeGibbsState,
                correlation: Array) -> tuple[TreeGibbsState, Array]:
    """A Metropolis move per block that keeps the block's Gaussian prior (component) invariant: the
    preconditioned Crank–Nicolson proposal x' = μ + ρ (x − μ) + √(1 − ρ²) L ξ, accepted with probability
    min(1, exp(−(G_b(x') − G_b(x))/τ)) (the prior cancels) and 0 outside the bounds. ρ = 0 proposes a fresh
    prior draw. Flat priors stay put. Returns the state and the blocks' mean acceptance."""
    table = target.prior
    x, component = state.position, state.component
    dtype = x.dtype
    key_normal, key_accept = jax.random.split(rng_key)
    prior = jnp.asarray(target.prior_index)
    index = component if not table.shared else jnp.zeros_like(component)
    mean = jnp.asarray(table.means, dtype)[prior, component]  # (B, d)
    cholesky = jnp.asarray(table.choleskys, dtype)[prior, index]  # (B, d, d)
    noise = jax.random.normal(key_normal, x.shape, dtype)
    proposal = mean + correlation * (x - mean) + jnp.sqrt(1.0 - correlation**2) * jnp.einsum(
        "bij,bj->bi", cholesky, noise)
    inside = jnp.all((proposal >= jnp.asarray(target.low, dtype)[prior])
                     & (proposal <= jnp.asarray(target.high, dtype)[prior]), axis=1)
    leaves = tuple(jax.vmap(ensemble.leaves)(proposal) for ensemble in target.ensembles)
    moved = TreeGibbsState(proposal, component, leaves, _raw_scores(target, leaves, dtype))
    log_ratio = -(_current_energies(target, layout, moved) - _current_energies(target, layout, state)) \
        / target.temperature
    u = jax.random.uniform(key_accept, (target.num_blocks,), dtype, minval=jnp.finfo(dtype).tiny)
    accept = (jnp.log(u) < jnp.where(jnp.isnan(log_ratio), -jnp.inf, log_ratio)) & inside \
        & ~jnp.asarray(table.flat)[prior]
    keep = lambda new, old: jnp.where(accept.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)  # noqa: E731
    return jax.tree.map(keep, moved, state), jnp.mean(accept.astype(dtype))
