"""Tree ensembles (scikit-learn trees and forests, gradient boosting, xgboost) as pure JAX functions.

:func:`tree_ensemble_from_sklearn` and :func:`tree_ensemble_from_xgboost` copy a fitted
model's trees once into padded arrays; the returned :class:`TreeEnsembleModel` is called
on ONE input ``x`` ``(d,)`` and gives

* classifiers: class probabilities ``(K,)``, the row ``predict_proba`` gives (binary:
  the 2-vector ``[p0, p1]``);
* regressors: the scalar ``predict`` gives (shape ``()``).

Evaluation is vectorized over all trees and has no data-dependent Python control flow:
ensembles no deeper than :data:`COMPLETE_MAX_DEPTH` are also stored as complete binary trees, whose
decisions are all computed at once and whose leaf is picked by ``D`` levels of selects; deeper ones
take the same fixed number of steps (the ensemble's maximum depth) in a ``lax.fori_loop``, one
gather per step, and leaves point to themselves. Both give the same leaves. The model works
under ``jax.jit``, ``jax.vmap`` and ``jax.grad``; it is piecewise constant in ``x``, so its
gradient is zero (finite, never NaN) wherever it exists, and a gradient-based sampler sees
a flat landscape: use a tree ensemble as the comparison model or with a gradient-free
sampler.

Splits. A node sends ``x`` to its left child iff ``float32(x[feature]) <= threshold``.
scikit-learn casts ``X`` to float32 and compares it with float64 thresholds
(``x <= t``); the float32 threshold stored here is ``t`` rounded toward −∞, which gives
exactly the same decision for every float32 ``x``. xgboost compares float32 ``x`` with
its float32 ``split_condition`` as ``x < s``; the threshold stored here is the float32
just below ``s``, again exactly the same decision. A float64 input (with
``jax_enable_x64``) is rounded to float32 for the comparisons, as both libraries do,
while leaf values and the aggregation are then computed in float64; otherwise they are
float32.

Missing values are not supported: a NaN feature always goes right here, while
scikit-learn (≥ 1.3) and xgboost send it to a learned "missing" child. Feed finite inputs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.types import Array

__all__ = ["TreeEnsembleModel", "tree_ensemble_from_sklearn", "tree_ensemble_from_xgboost"]

#: Output links: the function of the aggregated raw score ``(G,)`` a model returns.
#: ``identity``: the raw score (a scalar when ``G == 1``); ``sigmoid_binary``:
#: ``[1 − σ(r), σ(r)]``; ``half_sigmoid_binary``: ``[1 − σ(2r), σ(2r)]`` (sklearn's
#: exponential loss); ``softmax``: ``softmax(r)``; ``sigmoid``: scalar ``σ(r)``;
#: ``exp``: scalar ``exp(r)``.
LINKS = ("identity", "sigmoid_binary", "half_sigmoid_binary", "softmax", "sigmoid", "exp")
_CLASSIFIER_LINKS = ("sigmoid_binary", "half_sigmoid_binary", "softmax")

COMPLETE_MAX_DEPTH = 6
"""Ensembles no deeper than this are also stored as complete binary trees (:attr:`TreeEnsembleModel.complete_depth`):
every tree padded to ``2^D − 1`` internal nodes in heap order and ``2^D`` leaves, so that evaluating it along a
coordinate is a few dense comparisons and selects rather than ``D`` data-dependent gathers per tree and point
(:meth:`TreeEnsembleModel.scores_along_complete`). Deeper ensembles (a forest grown to purity) keep the walk."""


class TreeEnsembleModel:
    """A tree ensemble as a pure JAX function of one input ``x`` ``(d,)``.

    With ``T`` trees padded to ``N`` nodes each, ``V`` values per leaf and ``G`` raw-score
    columns, the model computes

    * ``leaf[t]`` ``(V,)``: the leaf of tree ``t`` that ``x`` reaches;
    * ``raw`` ``(G,)`` = ``base_score + Σ_t leaf[t]`` when ``tree_group`` is None
      (then ``V == G``), else ``raw[g] = base_score[g] + Σ_{t: tree_group[t] = g} leaf[t, 0]``
      (``V == 1``, one raw-score column per tree, as in boosting);
    * the output ``link(raw)`` (see :data:`LINKS`): ``(K,)`` probabilities or a scalar.

    Weights such as a forest's ``1/T`` or boosting's learning rate are already folded into
    ``leaf_values``.

    Args:
        feature: ``(T, N)`` int, the feature index a node tests (anything at leaves).
        threshold: ``(T, N)`` float32; ``x`` goes left iff ``float32(x[feature]) <= threshold``.
        left, right: ``(T, N)`` int, child indices within the tree; leaves point to themselves.
        leaf_values: ``(T, N, V)`` float (stored as float64), the value of every node (only
            leaves' values are read).
        base_score: ``(G,)`` float, the raw-score baseline.
        link: one of :data:`LINKS`.
        tree_group: None or ``(T,)`` int in ``[0, G)``, the raw-score column of each tree.
        max_depth: number of steps to take, at least the depth of the deepest tree
            (computed from ``left``/``right`` when None).
        num_features: ``d``; inputs must have shape ``(d,)``.
        classes: the class labels of a classifier (or None).
        is_classifier: whether the output is class probabilities; default: the link is one of
            ``sigmoid_binary``, ``half_sigmoid_binary``, ``softmax`` (a forest's averaged
            probabilities use ``identity`` and pass True).
        estimator_name: for messages and ``repr``.

    Attributes: the arguments above (as NumPy arrays), ``num_trees`` ``T``, ``max_nodes``
    ``N``, ``num_outputs`` (``K`` for a classifier, 1 for a scalar output), ``is_classifier``,
    ``differentiable`` (always False: the model is piecewise constant), and the split structure
    per feature, extracted once here:

    * ``split_thresholds`` ``(d, M)`` float32 and ``split_counts`` ``(d,)`` int32: the sorted unique
      thresholds the ensemble tests on each feature (row j holds ``split_counts[j]`` of them, then
      ``+inf`` padding; ``M = max(1, max_j split_counts[j])``). Along coordinate j, with the other
      coordinates fixed, the model is constant on each interval ``(t_{i-1}, t_i]`` of
      ``-inf < t_1 < … < t_m < +inf`` (a split sends ``x`` left iff ``float32(x_j) <= t``);
    * ``feature_trees`` ``(d, U)`` int32 and ``feature_tree_counts`` ``(d,)``: the trees that test
      feature j (row j holds ``feature_tree_counts[j]`` tree indices, then 0 padding). Only they change
      when x_j moves (:meth:`raw_score_along`);
    * ``complete_depth``: ``D = max_depth`` when ``D <= COMPLETE_MAX_DEPTH``, else None; then every tree is also
      stored complete (``complete_feature``/``complete_threshold`` ``(T, 2^D − 1)`` internal nodes in heap order,
      children of node n at 2n + 1 and 2n + 2; ``complete_values`` ``(T, 2^D, V)`` and ``complete_leaves``
      ``(T, 2^D)``, the flat leaf index ``t · N + node`` each complete leaf stands for). A leaf shallower than D
      becomes a subtree whose padding nodes test ``x[0] <= +inf`` and whose leaves all carry its value and index,
      so the complete tree sends every ``x`` to a leaf of the same value and index as the original.

    Examples
    --------
    One stump, ``x[1] <= 0.5`` → −1 else +1 (node 0 tests, nodes 1 and 2 are leaves):

    >>> stump = TreeEnsembleModel(feature=[[1, 0, 0]], threshold=[[0.5, 0.0, 0.0]], left=[[1, 1, 2]],
    ...                           right=[[2, 1, 2]], leaf_values=[[[0.0], [-1.0], [1.0]]], base_score=[0.0],
    ...                           link="identity", num_features=2)
    >>> float(stump(jnp.array([9.0, 0.2]))), float(stump(jnp.array([9.0, 0.7])))
    (-1.0, 1.0)
    >>> stump.split_counts.tolist(), float(stump.split_thresholds[1, 0])   # feature 1 is split once, at 0.5
    ([0, 1], 0.5)
    """

    differentiable = False

    def __init__(self, *, feature: Any, threshold: Any, left: Any, right: Any, leaf_values: Any,
                 base_score: Any, link: str, num_features: int, tree_group: Any = None,
                 max_depth: int | None = None, classes: Any = None, is_classifier: bool | None = None,
                 estimator_name: str = "TreeEnsemble"):
        if link not in LINKS:
            raise ValueError(f"link must be one of {LINKS}, got {link!r}")
        self.feature = np.asarray(feature, np.int32)
        self.threshold = np.asarray(threshold, np.float32)
        self.left = np.asarray(left, np.int32)
        self.right = np.asarray(right, np.int32)
        self.leaf_values = np.asarray(leaf_values, np.float64)
        self.base_score = np.atleast_1d(np.asarray(base_score, np.float64))
        self.tree_group = None if tree_group is None else np.asarray(tree_group, np.int32)
        self.link = link
        self.num_features = int(num_features)
        self.classes = None if classes is None else np.asarray(classes)
        self.estimator_name = estimator_name
        self._check_structure()
        num_trees, max_nodes = self.feature.shape
        num_columns = self.base_score.shape[0]
        self.num_trees, self.max_nodes = num_trees, max_nodes
        self.max_depth = _tree_depth(self.left, self.right) if max_depth is None else int(max_depth)
        self.is_classifier = link in _CLASSIFIER_LINKS if is_classifier is None else bool(is_classifier)
        self.num_outputs = 2 if link in ("sigmoid_binary", "half_sigmoid_binary") else (
            num_columns if link in ("identity", "softmax") else 1)
        # Flattened (T * N,) tables for 1-D gathers; device copies made once (not inside a trace).
        offsets = (np.arange(num_trees, dtype=np.int32) * max_nodes)[:, None]
        self._offsets = jnp.asarray(offsets[:, 0])
        self._feature = jnp.asarray(self.feature.reshape(-1))
        self._threshold = jnp.asarray(self.threshold.reshape(-1))
        self._left = jnp.asarray((self.left + offsets).reshape(-1))
        self._right = jnp.asarray((self.right + offsets).reshape(-1))
        flat_values = self.leaf_values.reshape(num_trees * max_nodes, -1)
        self._values = {np.dtype(np.float32): jnp.asarray(flat_values.astype(np.float32))}
        if jax.config.jax_enable_x64:
            self._values[np.dtype(np.float64)] = jnp.asarray(flat_values)
        self._flat_values64 = flat_values
        if self.tree_group is not None:
            self._onehot = np.eye(num_columns, dtype=np.float64)[self.tree_group]  # (T, G)
        self._batch = jax.jit(jax.vmap(self.__call__))
        # Split structure per feature, extracted once (for coordinate-wise samplers, jaxprobe.samplers).
        self.split_thresholds, self.split_counts = _split_thresholds(self.feature, self.threshold, self.left,
                                                                     self.num_features)
        self.feature_trees, self.feature_tree_counts = _feature_trees(self.feature, self.left, self.num_features)
        self._feature_trees = jnp.asarray(self.feature_trees)
        self._feature_tree_counts = jnp.asarray(self.feature_tree_counts)
        self.complete_depth = self.max_depth if self.max_depth <= COMPLETE_MAX_DEPTH else None
        if self.complete_depth is not None:
            self._store_complete_trees()

    def _check_structure(self) -> None:
        """Refuse arrays that do not make an ensemble: mismatched shapes, child, feature or group indices out of
        range, a leaf that does not point to itself on both sides, a link that needs one raw-score column."""
        num_trees, max_nodes = self.feature.shape
        for name in ("threshold", "left", "right"):
            if getattr(self, name).shape != (num_trees, max_nodes):
                raise ValueError(f"{name} must have shape {(num_trees, max_nodes)}, got {getattr(self, name).shape}")
        if self.leaf_values.ndim != 3 or self.leaf_values.shape[:2] != (num_trees, max_nodes):
            raise ValueError(f"leaf_values must have shape ({num_trees}, {max_nodes}, V), got "
                             f"{self.leaf_values.shape}")
        num_columns = self.base_score.shape[0]
        if self.tree_group is None:
            if self.leaf_values.shape[2] != num_columns:
                raise ValueError("without tree_group, leaf_values' last axis must match base_score")
        else:
            if self.leaf_values.shape[2] != 1 or self.tree_group.shape != (num_trees,):
                raise ValueError("with tree_group, leaf_values must have shape (T, N, 1) and tree_group (T,)")
            if num_trees and (self.tree_group.min() < 0 or self.tree_group.max() >= num_columns):
                raise ValueError(f"tree_group values must lie in [0, {num_columns})")
        for name in ("left", "right"):
            child = getattr(self, name)
            if child.size and (child.min() < 0 or child.max() >= max_nodes):
                raise ValueError(f"{name} child indices must lie in [0, {max_nodes}); leaves point to themselves")
        own_index = np.arange(max_nodes)
        if np.any((self.left == own_index) != (self.right == own_index)):
            raise ValueError("a leaf must point to itself through both left and right")
        if self.feature.size and (self.feature.min() < 0 or self.feature.max() >= self.num_features):
            raise ValueError(f"feature indices must lie in [0, {self.num_features})")
        if self.link in ("sigmoid_binary", "half_sigmoid_binary", "sigmoid", "exp") and num_columns != 1:
            raise ValueError(f"link {self.link!r} needs one raw-score column, got {num_columns}")

    def _store_complete_trees(self) -> None:
        """Every tree as a complete binary tree of depth :attr:`complete_depth` (:func:`_complete`), on the host
        and as device copies (made once, not inside a trace)."""
        (self.complete_feature, self.complete_threshold, self.complete_values,
         self.complete_leaves) = _complete(self.feature, self.threshold, self.left, self.right, self.leaf_values,
                                           self.complete_depth)
        self._complete_feature = jnp.asarray(self.complete_feature)
        self._complete_threshold = jnp.asarray(self.complete_threshold)
        self._complete_leaves = jnp.asarray(self.complete_leaves)
        self._complete_values = {np.dtype(np.float32): jnp.asarray(self.complete_values.astype(np.float32))}
        if jax.config.jax_enable_x64:
            self._complete_values[np.dtype(np.float64)] = jnp.asarray(self.complete_values)

    # -- evaluation ---------------------------------------------------------------------
    def _check(self, x: Any) -> Array:
        x = jnp.asarray(x)
        if x.shape != (self.num_features,):
            raise ValueError(f"{self.estimator_name} expects one input of shape ({self.num_features},), got "
                             f"{x.shape}; use predict_batch (or jax.vmap) for a batch (n, d)")
        return x

    @staticmethod
    def _dtype(x: Array) -> np.dtype:
        return np.dtype(np.float64) if x.dtype == jnp.float64 else np.dtype(np.float32)

    def leaves(self, x: Array) -> Array:
        """The flat leaf index ``t * N + node`` that ``x`` ``(d,)`` reaches in each tree: ``(T,)`` int32."""
        x = self._check(x)
        x32 = jax.lax.stop_gradient(x).astype(jnp.float32)  # both libraries compare in float32
        if self.complete_depth is not None:  # all decisions at once, then D levels of selects (no gather chain)
            bits = x32[self._complete_feature] <= self._complete_threshold  # (T, 2^D − 1)
            return _select_up(bits, self._complete_leaves, self.complete_depth, 0)

        def step(_, node):
            go_left = x32[self._feature[node]] <= self._threshold[node]
            return jnp.where(go_left, self._left[node], self._right[node])

        return jax.lax.fori_loop(0, self.max_depth, step, self._offsets)

    def raw_score(self, x: Array) -> Array:
        """The aggregated raw score (margin) before the link: ``(G,)`` (float32, or float64 for a float64 ``x``)."""
        x = self._check(x)
        return self.raw_score_of_leaves(self.leaves(x), self._dtype(x))

    def raw_score_of_leaves(self, leaves: Array, dtype: Any = jnp.float32) -> Array:
        """The raw score ``(G,)`` of a point whose flat leaves (:meth:`leaves`) are ``leaves`` ``(T,)``."""
        table = self._value_table(dtype)
        return jnp.asarray(self.base_score, table.dtype) + self._sum_trees(table[leaves], None)

    def _value_table(self, dtype: Any) -> Array:
        """Every node's values ``(T·N, V)`` in ``dtype`` (float32, or float64 with x64)."""
        table = self._values.get(np.dtype(dtype))
        if table is None:  # x64 switched on after construction (or an unusual dtype): made here
            table = jnp.asarray(self._flat_values64, np.dtype(dtype))
        return table

    def _sum_trees(self, contributions: Array, trees: Array | None) -> Array:
        """Σ over the tree axis of leaf values ``(..., U, V)`` into raw-score columns ``(..., G)``; ``trees``
        ``(U,)`` says which tree each row is (None: all T in order)."""
        if self.tree_group is None:
            return jnp.sum(contributions, axis=-2)
        # A masked sum rather than a matmul: a float32 dot may run in TF32/bf16 on accelerators.
        onehot = jnp.asarray(self._onehot, contributions.dtype)
        onehot = onehot if trees is None else onehot[trees]
        return jnp.sum(contributions[..., :1] * onehot, axis=-2)

    def __call__(self, x: Array) -> Array:
        """Probabilities ``(K,)`` for a classifier, a scalar ``()`` for a regressor, for ONE ``x`` ``(d,)``."""
        return self.output_from_raw(self.raw_score(x))

    def output_from_raw(self, raw: Array) -> Array:
        """The model's output for an aggregated raw score ``raw`` ``(G,)``: the link (see :data:`LINKS`),
        ``(K,)`` probabilities or a scalar. ``model(x) == model.output_from_raw(model.raw_score(x))``."""
        link = self.link
        if link == "identity":
            return raw[0] if raw.shape[0] == 1 else raw
        if link == "softmax":
            return jax.nn.softmax(raw)
        if link in ("sigmoid_binary", "half_sigmoid_binary"):
            p1 = jax.nn.sigmoid(2.0 * raw[0] if link == "half_sigmoid_binary" else raw[0])
            return jnp.stack([1.0 - p1, p1])
        if link == "sigmoid":
            return jax.nn.sigmoid(raw[0])
        return jnp.exp(raw[0])  # "exp"

    def raw_score_along(self, x: Array, feature: Any, values: Array, width: int | None = None,
                        leaves: Array | None = None) -> Array:
        """Raw scores ``(n, G)`` at the ``n`` points ``x`` with coordinate ``feature`` set to each of ``values``.

        The same numbers as ``vmap(raw_score)`` at those points (up to float rounding of the sum), at a
        fraction of the cost: only the trees that test ``feature`` (``feature_trees[feature]``) are walked
        at each value; every other tree keeps the leaf ``x`` itself reaches. ``feature`` may be traced (an
        int32 scalar), so one compiled program serves every coordinate.

        Args:
            x: ``(d,)`` the current point.
            feature: int in ``[0, d)``, the coordinate that moves.
            values: ``(n,)`` the values it takes.
            width: walk only the first ``width`` entries of ``feature_trees[feature]`` (static; at least
                ``feature_tree_counts[feature]``, e.g. the largest count over a group of features that a
                compiled loop visits): less padding than the ensemble-wide ``U``. None: all ``U``.
            leaves: ``(T,)`` the flat leaves ``x`` reaches (:meth:`leaves`), when the caller has them.
        """
        x = self._check(x)
        leaves = self.leaves(x) if leaves is None else leaves
        raw = self.raw_score_of_leaves(leaves, self._dtype(x))
        return self.scores_along(x, feature, values, leaves, raw, width)[0]

    def scores_along(self, x: Array, feature: Any, values: Array, leaves: Array, raw: Array,
                     width: int | None = None) -> tuple[Array, Array]:
        """:meth:`raw_score_along` for a caller that keeps ``x``'s ``leaves`` ``(T,)`` and raw score ``raw``
        ``(G,)`` up to date (a coordinate-wise sampler): no tree is walked at ``x`` and no sum runs over all
        trees; only the ``U`` trees that test ``feature`` are touched.

        Returns the raw scores ``(n, G)`` (``raw`` minus the moving trees' values at ``x`` plus theirs at each
        value) and those trees' leaves at each value ``(n, U)`` (:meth:`set_leaves` writes a row back).
        """
        x = self._check(x)
        table = self._value_table(raw.dtype)
        x32 = jax.lax.stop_gradient(x).astype(jnp.float32)
        values32 = jax.lax.stop_gradient(jnp.asarray(values)).astype(jnp.float32)
        feature = jnp.asarray(feature, jnp.int32)
        trees, real = self._trees_testing(feature, width)
        mask = real.astype(table.dtype)[:, None]
        before = self._sum_trees(table[leaves[trees]] * mask, trees)  # (G,)
        moved = jax.vmap(lambda value: self._walk(x32, feature, value, trees))(values32)  # (n, U)
        after = self._sum_trees(table[moved] * mask[None], trees)  # (n, G)
        return raw - before + after, moved

    def set_leaves(self, leaves: Array, feature: Any, moved: Array) -> Array:
        """``leaves`` ``(T,)`` with the trees that test ``feature`` sent to ``moved`` ``(U',)`` (a row of
        :meth:`scores_along`'s leaves, in ``feature_trees[feature]`` order; padding entries are ignored)."""
        feature = jnp.asarray(feature, jnp.int32)
        trees, real = self._trees_testing(feature, moved.shape[0])
        # Padding slots scatter out of range (dropped): tree 0 may also be a real entry of the row.
        return leaves.at[jnp.where(real, trees, self.num_trees)].set(moved, mode="drop")

    def output_along(self, x: Array, feature: Any, values: Array, width: int | None = None,
                     leaves: Array | None = None) -> Array:
        """Model outputs at ``x`` with coordinate ``feature`` set to each of ``values`` ``(n,)``: ``(n, K)``
        probabilities or ``(n,)`` scalars (:meth:`raw_score_along` through the link)."""
        return jax.vmap(self.output_from_raw)(self.raw_score_along(x, feature, values, width, leaves))

    def update_leaves(self, leaves: Array, x: Array, feature: Any, width: int | None = None) -> Array:
        """The flat leaves ``(T,)`` of ``x`` ``(d,)`` given ``leaves``, those of a point that differs from ``x``
        in coordinate ``feature`` only: the trees that test ``feature`` are walked again, the others keep
        their leaf. Equals ``leaves(x)``. ``width``: as :meth:`raw_score_along` (at least
        ``feature_tree_counts[feature]``; None: all ``U``)."""
        x = self._check(x)
        x32 = jax.lax.stop_gradient(x).astype(jnp.float32)
        feature = jnp.asarray(feature, jnp.int32)
        trees, _ = self._trees_testing(feature, width)
        return self.set_leaves(leaves, feature, self._walk(x32, feature, x32[feature], trees))

    def scores_along_complete(self, x: Array, feature: Any, values: Array, raw: Array,
                              width: int | None = None) -> Array:
        """The raw scores ``(n, G)`` of :meth:`scores_along` (the same numbers up to the order of the sums)
        without a walk: needs :attr:`complete_depth`. ``raw`` ``(G,)`` is ``x``'s raw score.

        Along coordinate j, a leaf of a tree that tests j is reached iff the decisions on its path that test
        other features go its way (they depend on ``x`` only) and those that test j do (they depend on the
        value only). So with ``w[u, l]`` = leaf l's value if ``x``'s other decisions reach it, else 0 (dense
        comparisons over the complete trees, :attr:`complete_feature`), and ``A[k, u, l]`` = whether value k's
        decisions on j reach it (the same for every ``x``: under ``vmap`` over points it is computed once),
        the trees' sum at value k is ``Σ_{u,l} w[u, l] · A[k, u, l]`` into each tree's raw-score column: one
        matrix product, batched over points as one GEMM. No data-dependent gather per point and value.
        """
        if self.complete_depth is None:
            raise ValueError(f"{self.estimator_name} is deeper than COMPLETE_MAX_DEPTH={COMPLETE_MAX_DEPTH}: use "
                             "scores_along")
        x = self._check(x)
        x32 = jax.lax.stop_gradient(x).astype(jnp.float32)
        values32 = jax.lax.stop_gradient(jnp.asarray(values)).astype(jnp.float32)
        feature = jnp.asarray(feature, jnp.int32)
        depth = self.complete_depth
        trees, real = self._trees_testing(feature, width)
        node_feature = self._complete_feature[trees]  # (U, P)
        node_threshold = self._complete_threshold[trees]
        tests = node_feature == feature
        here = x32[node_feature] <= node_threshold  # (U, P): x's decisions (x_j's included)
        other = _reach(here | tests, ~here | tests, depth)  # (U, L): through the nodes not testing j
        along = values32[:, None, None] <= node_threshold[None]  # (n, U, P)
        reach = _reach(along | ~tests, ~along | ~tests, depth)  # (n, U, L): through the nodes testing j
        at_x = _reach(here | ~tests, ~here | ~tests, depth)  # (U, L): x's own position on j
        table = self._complete_value_table(raw.dtype)[trees]  # (U, L, V)
        weight = jnp.where((other & real[:, None])[..., None], table, 0.0)  # (U, L, V)
        highest = jax.lax.Precision.HIGHEST  # exact float32 products with 0/1 on every backend (no TF32)
        dtype = weight.dtype
        if self.tree_group is None:  # every tree adds V = G values
            after = jnp.einsum("ulv,nul->nv", weight, reach.astype(dtype), precision=highest)
            before = jnp.einsum("ulv,ul->v", weight, at_x.astype(dtype), precision=highest)
        else:  # tree u adds its one value to column tree_group[u]
            onehot = jnp.asarray(self._onehot, dtype)[trees]  # (U, G)
            columns = reach.astype(dtype)[..., None] * onehot[None, :, None, :]  # (n, U, L, G): not batched
            after = jnp.einsum("ul,nulg->ng", weight[..., 0], columns, precision=highest)
            before = jnp.einsum("ul,ul,ug->g", weight[..., 0], at_x.astype(dtype), onehot, precision=highest)
        return raw - before + after

    def _complete_value_table(self, dtype: Any) -> Array:
        """:attr:`complete_values` ``(T, L, V)`` in ``dtype``."""
        table = self._complete_values.get(np.dtype(dtype))
        if table is None:
            table = jnp.asarray(self.complete_values, np.dtype(dtype))
        return table

    def _trees_testing(self, feature: Array, width: int | None) -> tuple[Array, Array]:
        """The trees that test ``feature``: ``(U,)`` indices (the first ``width``) and which are real (not padding)."""
        trees = self._feature_trees[feature]
        if width is not None:
            trees = trees[:int(width)]
        return trees, jnp.arange(trees.shape[0]) < self._feature_tree_counts[feature]

    def _walk(self, x32: Array, feature: Array, value: Array, trees: Array) -> Array:
        """Flat leaves ``(U,)`` that ``trees`` send ``x32`` to, with coordinate ``feature`` read as ``value``
        (complete trees: dense decisions and selects, :meth:`scores_along_complete`; else a walk)."""
        if self.complete_depth is not None:
            node_feature = self._complete_feature[trees]  # (U, P)
            coordinate = jnp.where(node_feature == feature, value, x32[node_feature])
            bits = coordinate <= self._complete_threshold[trees]
            return _select_up(bits, self._complete_leaves[trees], self.complete_depth, 0)

        def step(_, node):
            tested = self._feature[node]
            coordinate = jnp.where(tested == feature, value, x32[tested])
            return jnp.where(coordinate <= self._threshold[node], self._left[node], self._right[node])

        return jax.lax.fori_loop(0, self.max_depth, step, self._offsets[trees])

    def predict_batch(self, x: Any) -> Array:
        """``jit(vmap(model))``: ``(n, d)`` → ``(n, K)`` or ``(n,)``, as a JAX array."""
        x = jnp.asarray(x)
        if x.ndim != 2 or x.shape[1] != self.num_features:
            raise ValueError(f"expected inputs of shape (n, {self.num_features}), got {x.shape}")
        return self._batch(x)

    def __repr__(self) -> str:
        return (f"TreeEnsembleModel({self.estimator_name}, trees={self.num_trees}, max_nodes={self.max_nodes}, "
                f"max_depth={self.max_depth}, link={self.link!r})")


# -- packing ---------------------------------------------------------------------------
def _tree_depth(left: np.ndarray, right: np.ndarray) -> int:
    """Deepest root-to-leaf path over all trees (``left``/``right`` ``(T, N)``, leaves self-loop)."""
    trees = np.arange(left.shape[0])
    nodes = np.zeros(left.shape[0], np.int64)  # the internal-or-leaf nodes reached after `depth` steps
    depth = 0
    while True:
        internal = left[trees, nodes] != nodes
        trees, nodes = trees[internal], nodes[internal]
        if trees.size == 0:
            return depth
        if depth >= left.shape[1]:
            raise ValueError("tree structure has a cycle: follow left/right and a non-leaf node repeats")
        trees, nodes = np.concatenate([trees, trees]), np.concatenate([left[trees, nodes], right[trees, nodes]])
        depth += 1


def _split_thresholds(feature: np.ndarray, threshold: np.ndarray, left: np.ndarray,
                      num_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique thresholds per feature over the internal nodes: ``(d, M)`` float32 padded with
    ``+inf`` (``M >= 1``) and the counts ``(d,)`` int32."""
    internal = left != np.arange(left.shape[1])[None, :]
    pairs = np.unique(np.stack([feature[internal].astype(np.float64), threshold[internal].astype(np.float64)],
                               axis=1), axis=0)  # (feature, threshold) rows sorted by feature, then threshold
    tested = pairs[:, 0].astype(np.int64)
    counts = np.bincount(tested, minlength=num_features).astype(np.int32)
    table = np.full((num_features, max(1, int(counts.max(initial=0)))), np.inf, np.float32)
    slot = np.arange(tested.size) - np.concatenate([[0], np.cumsum(counts)[:-1]])[tested]
    table[tested, slot] = pairs[:, 1]
    return table, counts


def _feature_trees(feature: np.ndarray, left: np.ndarray, num_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the trees that test each feature: ``(d, U)`` int32 padded with 0 (``U >= 1``) and the
    counts ``(d,)`` int32."""
    internal = left != np.arange(left.shape[1])[None, :]
    uses = np.zeros((num_features, left.shape[0]), bool)  # (d, T)
    tree_index = np.broadcast_to(np.arange(left.shape[0])[:, None], left.shape)
    uses[feature[internal], tree_index[internal]] = True
    counts = uses.sum(axis=1).astype(np.int32)
    table = np.zeros((num_features, max(1, int(counts.max(initial=0)))), np.int32)
    rows, trees = np.nonzero(uses)  # row-major: trees ascending within each feature
    slot = np.arange(rows.size) - np.concatenate([[0], np.cumsum(counts)[:-1]])[rows]
    table[rows, slot] = trees
    return table, counts


def _select_up(bits: Array, leaves: Array, depth: int, trailing: int) -> Array:
    """The leaf entry of complete trees of depth ``depth`` that the decisions ``bits`` ``(..., 2^D − 1)`` (True:
    left; internal nodes in heap order) reach: ``leaves`` ``(..., 2^D, *rest)`` with ``trailing = len(rest)``
    (shapes broadcast) → ``(..., *rest)``. Bottom-up: each level selects between sibling subtrees."""
    for level in reversed(range(depth)):
        chosen = bits[..., 2**level - 1:2**(level + 1) - 1]  # (..., 2^level)
        chosen = chosen.reshape(chosen.shape + (1,) * trailing)
        axis = leaves.ndim - 1 - trailing
        left = jax.lax.slice_in_dim(leaves, 0, None, 2, axis)
        right = jax.lax.slice_in_dim(leaves, 1, None, 2, axis)
        leaves = jnp.where(chosen, left, right)
    return jax.lax.index_in_dim(leaves, 0, leaves.ndim - 1 - trailing, keepdims=False)


def _reach(left_ok: Array, right_ok: Array, depth: int) -> Array:
    """Which leaves of complete trees are reached ``(..., 2^D)`` (bool) when internal node n (heap order) lets a
    path through to its left child iff ``left_ok[..., n]`` and to its right child iff ``right_ok[..., n]``.
    Top-down, one level at a time."""
    reach = jnp.ones(left_ok.shape[:-1] + (1,), bool)
    for level in range(depth):
        nodes = slice(2**level - 1, 2**(level + 1) - 1)
        reach = jnp.stack([reach & left_ok[..., nodes], reach & right_ok[..., nodes]], axis=-1)
        reach = reach.reshape(reach.shape[:-2] + (2 ** (level + 1),))
    return reach


def _complete(feature: np.ndarray, threshold: np.ndarray, left: np.ndarray, right: np.ndarray, values: np.ndarray,
              depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every tree as a complete binary tree of depth ``depth`` (see :attr:`TreeEnsembleModel.complete_depth`):
    internal nodes' features and thresholds ``(T, 2^D − 1)``, leaf values ``(T, 2^D, V)`` and flat leaf indices
    ``(T, 2^D)``. Level by level over all trees: a node that is a leaf in the original continues as itself on
    both sides, testing ``x[0] <= +inf``."""
    num_trees, max_nodes = feature.shape
    rows = np.arange(num_trees)[:, None]
    nodes = np.zeros((num_trees, 1), np.int64)
    features, thresholds = [], []
    for _ in range(depth):
        is_leaf = left[rows, nodes] == nodes
        features.append(np.where(is_leaf, 0, feature[rows, nodes]))
        thresholds.append(np.where(is_leaf, np.float32(np.inf), threshold[rows, nodes]))
        nodes = np.stack([left[rows, nodes], right[rows, nodes]], axis=-1).reshape(num_trees, -1)  # leaves loop
    empty = np.zeros((num_trees, 0))
    complete_feature = np.concatenate(features + [empty], axis=1).astype(np.int32)
    complete_threshold = np.concatenate(thresholds + [empty], axis=1).astype(np.float32)
    return (complete_feature, complete_threshold, values[rows, nodes],
            (rows * max_nodes + nodes).astype(np.int32))


def _pack(trees: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]):
    """Pad per-tree ``(children_left, children_right, feature, threshold32, values (n, V))`` to
    ``(T, N)`` arrays; a child ``-1`` marks a leaf, which then points to itself."""
    max_nodes = max(len(t[0]) for t in trees)
    num_values = trees[0][4].shape[1]
    num_trees = len(trees)
    feature = np.zeros((num_trees, max_nodes), np.int32)
    threshold = np.zeros((num_trees, max_nodes), np.float32)
    self_loop = np.broadcast_to(np.arange(max_nodes, dtype=np.int32), (num_trees, max_nodes))
    left, right = self_loop.copy(), self_loop.copy()
    values = np.zeros((num_trees, max_nodes, num_values), np.float64)
    for t, (cl, cr, feat, thr, val) in enumerate(trees):
        n = len(cl)
        leaf = np.asarray(cl) < 0
        left[t, :n] = np.where(leaf, np.arange(n), cl)
        right[t, :n] = np.where(leaf, np.arange(n), cr)
        feature[t, :n] = np.where(leaf, 0, feat)
        threshold[t, :n] = np.where(leaf, 0.0, thr)
        values[t, :n] = val
    return feature, threshold, left, right, values


def _float32_at_most(threshold: Any) -> np.ndarray:
    """The largest float32 ≤ each float64 threshold: ``x32 <= t64`` ⇔ ``x32 <= _float32_at_most(t64)``."""
    t64 = np.asarray(threshold, np.float64)
    with np.errstate(over="ignore"):
        t32 = t64.astype(np.float32)
    above = t32.astype(np.float64) > t64
    return np.where(above, np.nextafter(t32, np.float32(-np.inf)), t32).astype(np.float32)


def _float32_below(split: Any) -> np.ndarray:
    """The largest float32 < each float32 split: ``x32 < s`` ⇔ ``x32 <= _float32_below(s)``."""
    s32 = np.asarray(split, np.float32)
    return np.nextafter(s32, np.float32(-np.inf))


def _build(trees, *, base_score, link, num_features, tree_group=None, classes=None, is_classifier=None,
           name="") -> TreeEnsembleModel:
    feature, threshold, left, right, values = _pack(trees)
    return TreeEnsembleModel(feature=feature, threshold=threshold, left=left, right=right, leaf_values=values,
                             base_score=base_score, link=link, num_features=num_features, tree_group=tree_group,
                             classes=classes, is_classifier=is_classifier, estimator_name=name)


# -- scikit-learn ------------------------------------------------------------------------
def _sklearn_tree(tree: Any, values: np.ndarray):
    t = tree.tree_
    return (np.asarray(t.children_left), np.asarray(t.children_right), np.asarray(t.feature),
            _float32_at_most(t.threshold), values)


def _check_single_output(estimator: Any, tree: Any) -> None:
    if tree.tree_.n_outputs != 1:
        raise ValueError(f"tree_ensemble_from_sklearn does not support multi-output {type(estimator).__name__} "
                         f"({tree.tree_.n_outputs} outputs); fit one estimator per output")


def _classifier_tree_values(estimator: Any, tree: Any, weight: float) -> np.ndarray:
    """Per-node class probabilities ``(n_nodes, K)`` × ``weight``, normalized as ``predict_proba`` does."""
    _check_single_output(estimator, tree)
    num_classes = int(np.atleast_1d(tree.n_classes_)[0])
    value = np.asarray(tree.tree_.value, np.float64)[:, 0, :num_classes]
    normalizer = value.sum(axis=1, keepdims=True)
    normalizer[normalizer == 0.0] = 1.0
    return value / normalizer * weight


def _regressor_tree_values(estimator: Any, tree: Any, weight: float) -> np.ndarray:
    _check_single_output(estimator, tree)
    return np.asarray(tree.tree_.value, np.float64)[:, 0, :1] * weight


def _gradient_boosting(estimator: Any, classifier: bool) -> TreeEnsembleModel:
    from sklearn.dummy import DummyClassifier, DummyRegressor

    name = type(estimator).__name__
    stages = np.asarray(estimator.estimators_)  # (n_stages, G) of DecisionTreeRegressor
    num_features = int(estimator.n_features_in_)
    num_columns = stages.shape[1]
    if isinstance(estimator.init_, str) and estimator.init_ == "zero":
        base = np.zeros(num_columns)
    elif isinstance(estimator.init_, (DummyClassifier, DummyRegressor)):
        # The default init predicts a constant (class priors / mean / quantile): its raw
        # prediction is the same at every x, so evaluate sklearn's own code once.
        base = np.asarray(estimator._raw_predict_init(np.zeros((1, num_features), np.float32)), np.float64)[0]
    else:
        raise ValueError(f"tree_ensemble_from_sklearn supports {name} with init=None (the default), 'zero' or a "
                         f"DummyClassifier/DummyRegressor, not init={type(estimator.init_).__name__}: its raw "
                         "prediction depends on x")
    rate = float(estimator.learning_rate)
    trees, groups = [], []
    for stage in stages:
        for group, tree in enumerate(stage):
            trees.append(_sklearn_tree(tree, _regressor_tree_values(estimator, tree, rate)))
            groups.append(group)
    if not classifier:
        link = "identity"
    elif num_columns > 1:
        link = "softmax"
    else:
        link = "half_sigmoid_binary" if type(estimator._loss).__name__ == "ExponentialLoss" else "sigmoid_binary"
    return _build(trees, base_score=base, link=link, num_features=num_features, tree_group=np.array(groups),
                  classes=getattr(estimator, "classes_", None), name=name)


def tree_ensemble_from_sklearn(estimator: Any) -> TreeEnsembleModel:
    """A fitted scikit-learn tree model as a :class:`TreeEnsembleModel`.

    Supported (single output, fitted without relying on missing values):

    * ``DecisionTreeClassifier`` / ``ExtraTreeClassifier``: the leaf's class fractions,
      normalized (``predict_proba``);
    * ``RandomForestClassifier`` / ``ExtraTreesClassifier``: the mean of the trees'
      normalized class fractions (``predict_proba``);
    * ``DecisionTreeRegressor`` / ``ExtraTreeRegressor``: the leaf value; ``RandomForestRegressor``
      / ``ExtraTreesRegressor``: the mean of the trees' leaf values (``predict``);
    * ``GradientBoostingClassifier`` (binary: ``[1 − σ(r), σ(r)]``, or ``σ(2r)`` for
      ``loss="exponential"``; multiclass: ``softmax(r)``) and ``GradientBoostingRegressor``
      (``r``), with ``r = init raw prediction + learning_rate · Σ trees``, as
      ``predict_proba`` / ``predict``. The init must be the default (or a
      ``DummyClassifier``/``DummyRegressor``) or ``"zero"``.

    Returns a model of ONE input ``(d,)`` giving ``(K,)`` probabilities or a scalar.
    Raises ``TypeError`` for an unfitted or unsupported estimator, ``ValueError`` for an
    unsupported configuration (multi-output, a custom init estimator).

    Examples
    --------
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from jaxprobe import datasets
    >>> data = datasets.iris()
    >>> forest = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0).fit(data.x, data.y)
    >>> model = tree_ensemble_from_sklearn(forest)                 # one row (4,) -> probabilities (3,)
    >>> probabilities = model.predict_batch(data.x)                 # jit(vmap(model)) over rows (n, 4)
    >>> model.num_trees, probabilities.shape
    (5, (150, 3))
    >>> bool(np.allclose(probabilities, forest.predict_proba(data.x), atol=1e-6))   # as sklearn predicts
    True
    """
    try:
        from sklearn import ensemble, tree
        from sklearn.exceptions import NotFittedError
        from sklearn.utils.validation import check_is_fitted
    except ImportError as error:  # pragma: no cover
        raise ImportError("tree_ensemble_from_sklearn needs scikit-learn: pip install scikit-learn") from error
    name = type(estimator).__name__
    try:
        check_is_fitted(estimator)
    except NotFittedError:
        raise TypeError(f"{name} is not fitted: call fit first") from None
    except TypeError:
        raise TypeError(f"tree_ensemble_from_sklearn needs a fitted scikit-learn estimator, got {name}") from None
    num_features = int(estimator.n_features_in_)
    if isinstance(estimator, tree.DecisionTreeClassifier):  # includes ExtraTreeClassifier
        values = _classifier_tree_values(estimator, estimator, 1.0)
        return _build([_sklearn_tree(estimator, values)], base_score=np.zeros(values.shape[1]), link="identity",
                      num_features=num_features, classes=estimator.classes_, is_classifier=True, name=name)
    if isinstance(estimator, tree.DecisionTreeRegressor):  # includes ExtraTreeRegressor
        values = _regressor_tree_values(estimator, estimator, 1.0)
        return _build([_sklearn_tree(estimator, values)], base_score=np.zeros(1), link="identity",
                      num_features=num_features, name=name)
    if isinstance(estimator, (ensemble.RandomForestClassifier, ensemble.ExtraTreesClassifier)):
        weight = 1.0 / len(estimator.estimators_)
        trees = [_sklearn_tree(t, _classifier_tree_values(estimator, t, weight)) for t in estimator.estimators_]
        return _build(trees, base_score=np.zeros(trees[0][4].shape[1]), link="identity", num_features=num_features,
                      classes=estimator.classes_, is_classifier=True, name=name)
    if isinstance(estimator, (ensemble.RandomForestRegressor, ensemble.ExtraTreesRegressor)):
        weight = 1.0 / len(estimator.estimators_)
        trees = [_sklearn_tree(t, _regressor_tree_values(estimator, t, weight)) for t in estimator.estimators_]
        return _build(trees, base_score=np.zeros(1), link="identity", num_features=num_features, name=name)
    if isinstance(estimator, ensemble.GradientBoostingClassifier):
        return _gradient_boosting(estimator, classifier=True)
    if isinstance(estimator, ensemble.GradientBoostingRegressor):
        return _gradient_boosting(estimator, classifier=False)
    raise TypeError(f"tree_ensemble_from_sklearn does not support {name}; supported: DecisionTree*, ExtraTree*, "
                    "RandomForest*, ExtraTrees*, GradientBoosting* (Classifier and Regressor)")


# -- xgboost -----------------------------------------------------------------------------
#: objective → (link, transform of the stored base_score into the margin).
_XGB_OBJECTIVES = {
    "binary:logistic": ("sigmoid_binary", "logit"),
    "reg:logistic": ("sigmoid", "logit"),
    "multi:softprob": ("softmax", "identity"),
    "multi:softmax": ("softmax", "identity"),  # probabilities as XGBClassifier.predict_proba gives them
    "reg:squarederror": ("identity", "identity"),
    "reg:squaredlogerror": ("identity", "identity"),
    "reg:pseudohubererror": ("identity", "identity"),
    "reg:absoluteerror": ("identity", "identity"),
    "reg:quantileerror": ("identity", "identity"),
    "count:poisson": ("exp", "log"),
    "reg:gamma": ("exp", "log"),
    "reg:tweedie": ("exp", "log"),
}


def _parse_floats(text: str) -> np.ndarray:
    return np.array([float(v) for v in str(text).strip("[]").split(",") if v.strip()], np.float64)


def tree_ensemble_from_xgboost(model: Any, iteration_range: tuple[int, int] | None = None) -> TreeEnsembleModel:
    """An xgboost model (``XGBClassifier``, ``XGBRegressor``, ``XGBRF*`` or a ``Booster``) as a
    :class:`TreeEnsembleModel`, parsed from ``booster.save_raw("json")``.

    The margin is ``base_score`` (mapped by the objective's link: logit for
    ``binary:logistic``/``reg:logistic``, log for ``count:poisson``/``reg:gamma``/``reg:tweedie``)
    plus the sum of the leaf values of each output group's trees (the learning rate is already in
    the leaves). Outputs: ``binary:logistic`` → ``[1 − p, p]`` (also for a plain Booster);
    ``multi:softprob``/``multi:softmax`` → ``softmax(margin)`` ``(K,)``, as ``predict_proba``;
    ``reg:logistic`` → scalar ``σ(margin)``; ``count:poisson``/``reg:gamma``/``reg:tweedie`` →
    scalar ``exp(margin)``; ``reg:squarederror`` and the other ``reg:*`` errors → the margin.
    A node sends ``x`` left iff ``x < split_condition`` (in float32), as xgboost does.

    ``iteration_range``: ``(begin, end)`` boosting rounds to use (``end == 0``: all). By default
    an sklearn wrapper uses ``best_iteration`` when fitted with early stopping (as its
    ``predict`` does) and a Booster uses all trees (as ``Booster.predict`` does).

    Not supported (``ValueError``): ``gblinear`` and ``dart`` boosters, categorical splits,
    vector-leaf (multi-target) trees, other objectives (e.g. ``binary:logitraw``, ranking,
    survival), per-row ``base_margin``. Raises ``ImportError`` when xgboost is not installed.

    Examples
    --------
    >>> from xgboost import XGBClassifier
    >>> from jaxprobe import datasets
    >>> data = datasets.breast_cancer()
    >>> booster = XGBClassifier(n_estimators=10, max_depth=2).fit(data.x, data.y)
    >>> model = tree_ensemble_from_xgboost(booster)                # one row (30,) -> [1 − p, p]
    >>> probabilities = model.predict_batch(data.x)                 # jit(vmap(model)) over rows (n, 30)
    >>> model.num_trees, probabilities.shape
    (10, (569, 2))
    >>> bool(np.allclose(probabilities, booster.predict_proba(data.x), atol=1e-5))   # as xgboost predicts
    True
    """
    try:
        import xgboost
    except ImportError as error:
        raise ImportError("tree_ensemble_from_xgboost needs xgboost, which is not installed: "
                          "pip install xgboost") from error
    if isinstance(model, xgboost.Booster):
        booster, wrapper = model, None
    elif hasattr(model, "get_booster"):
        wrapper = model
        try:
            booster = model.get_booster()
        except Exception as error:  # xgboost raises NotFittedError (a ValueError subclass) / XGBoostError
            raise TypeError(f"{type(model).__name__} is not fitted: call fit first") from error
    else:
        raise TypeError(f"tree_ensemble_from_xgboost needs an xgboost Booster or sklearn wrapper, got "
                        f"{type(model).__name__}")
    name = type(model).__name__
    learner = json.loads(bytes(booster.save_raw(raw_format="json")))["learner"]
    booster_name = learner["gradient_booster"]["name"]
    if booster_name != "gbtree":
        raise ValueError(f"tree_ensemble_from_xgboost supports the gbtree booster, not {booster_name!r}")
    objective = learner["objective"]["name"]
    if objective not in _XGB_OBJECTIVES:
        raise ValueError(f"tree_ensemble_from_xgboost does not support objective {objective!r}; supported: "
                         f"{sorted(_XGB_OBJECTIVES)}")
    link, transform = _XGB_OBJECTIVES[objective]
    params = learner["learner_model_param"]
    if int(params.get("num_target", 1)) > 1:
        raise ValueError("tree_ensemble_from_xgboost does not support multi-target models")
    num_columns = max(int(params.get("num_class", 0)), 1)
    num_features = int(params["num_feature"])
    base = _parse_floats(params["base_score"]).astype(np.float32).astype(np.float64)
    base = np.broadcast_to(base, (num_columns,)).copy() if base.size == 1 else base
    if base.shape != (num_columns,):
        raise ValueError(f"unexpected base_score {params['base_score']!r} for {num_columns} output groups")
    if transform == "logit":
        base = np.log(base) - np.log1p(-base)
    elif transform == "log":
        base = np.log(base)

    gbtree = learner["gradient_booster"]["model"]
    trees_json, tree_info = gbtree["trees"], list(gbtree["tree_info"])
    if iteration_range is None:
        iteration_range = (0, 0)
        if wrapper is not None and hasattr(wrapper, "_get_iteration_range"):
            iteration_range = tuple(wrapper._get_iteration_range(None))
    begin, end = (int(v) for v in iteration_range)
    indptr = gbtree.get("iteration_indptr")
    if indptr is None:  # older models: a fixed number of trees per round
        per_round = num_columns * int(gbtree["gbtree_model_param"].get("num_parallel_tree", 1))
        indptr = list(range(0, len(trees_json) + 1, per_round))
    num_rounds = len(indptr) - 1
    if end == 0:
        end = num_rounds
    if not 0 <= begin <= end <= num_rounds:
        raise ValueError(f"iteration_range {iteration_range} is outside the model's {num_rounds} rounds")
    selected = range(indptr[begin], indptr[end])

    trees, groups = [], []
    for index in selected:
        tree = trees_json[index]
        if int(tree["tree_param"].get("size_leaf_vector", 1)) > 1:
            raise ValueError("tree_ensemble_from_xgboost does not support vector-leaf (multi_output_tree) models")
        if any(int(s) != 0 for s in tree.get("split_type", [])):
            raise ValueError("tree_ensemble_from_xgboost does not support categorical splits")
        cl = np.asarray(tree["left_children"], np.int64)
        cr = np.asarray(tree["right_children"], np.int64)
        cond = np.asarray(tree["split_conditions"], np.float64).astype(np.float32)
        leaf = cl < 0
        values = np.where(leaf, cond.astype(np.float64), 0.0)[:, None]
        trees.append((cl, cr, np.asarray(tree["split_indices"], np.int64), _float32_below(cond), values))
        groups.append(int(tree_info[index]))
    if not trees:  # an empty range: the baseline alone
        trees = [(np.array([-1]), np.array([-1]), np.array([0]), np.zeros(1, np.float32), np.zeros((1, 1)))]
        groups = [0]
    classes = getattr(wrapper, "classes_", None) if link in _CLASSIFIER_LINKS and wrapper is not None else None
    return _build(trees, base_score=base, link=link, num_features=num_features, tree_group=np.array(groups),
                  classes=classes, name=name)
