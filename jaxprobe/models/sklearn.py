"""``from_sklearn``: fitted scikit-learn estimators as pure, jit/vmap/grad-able JAX functions.

The returned :class:`ImportedModel` is called on ONE input ``x`` ``(d,)``:
classifiers give class probabilities ``(K,)`` exactly as ``predict_proba`` does
(binary: ``[p0, p1]``); an SVC fitted without ``probability=True`` gives its
decision function (a scalar, > 0 for ``classes_[1]``), since it has no
probabilities; regressors give ``predict``'s value (a scalar). The fitted arrays
are copied once into JAX constants; no host callback runs at call time.

Supported: LinearRegression, Ridge, LogisticRegression (binary, multinomial, and
liblinear's one-vs-rest), SVC (binary and multi-class one-vs-one) and SVR with linear / rbf / poly /
sigmoid kernels (SVC with ``probability=True`` gives its Platt-scaled
probabilities, coupled pairwise as libsvm does; without it, its decision
function: a scalar for two classes, else in its ``decision_function_shape``),
MLPClassifier and MLPRegressor, CalibratedClassifierCV (sigmoid, isotonic or
temperature calibration of a supported classifier; ``CalibratedClassifierCV(SVC(),
ensemble=False)`` is sklearn 1.9's replacement for ``SVC(probability=True)``); tree ensembles through
:mod:`jaxprobe.models.trees` (piecewise constant: use them as the comparison model
ŷ or with a gradient-free sampler); and Pipelines of scalers, PCA, OneHotEncoder, OrdinalEncoder and
ColumnTransformers of those ending in one of these, as one function of the raw row (see
:func:`from_sklearn` for the list and the categorical semantics; the model records its categorical
inputs, from which ``jaxprobe.generate`` builds exact constraints).
"""

from __future__ import annotations

import contextlib
import dataclasses
import numbers
import re
import warnings
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.types import Array

__all__ = ["ImportedModel", "CategoricalInput", "UnsupportedStepError", "from_sklearn", "categorical_inputs_read_by"]


class ImportedModel:
    """A pure JAX function of one input ``x`` ``(d,)`` made from a fitted estimator.

    Attributes: ``num_features`` (d, also as ``n_features_in_``, the name scikit-learn uses), ``is_classifier``,
    ``classes`` (or None), ``differentiable`` (False for piecewise-constant trees), ``output``
    (``"probabilities"``, ``"decision_function"`` or ``"prediction"``), ``estimator_name``,
    ``feature_names_in_`` (the column names of a DataFrame the estimator was fitted on, or None),
    ``categorical_inputs`` (``{raw column: categories}`` for the columns a Pipeline's OneHotEncoder or
    OrdinalEncoder reads; see :func:`from_sklearn`), ``categorical`` (one :class:`CategoricalInput` per
    encoded feature: column, name, encoder kind, categories, the values the column holds and how the model
    reads them; what ``jaxprobe.generate`` builds exact constraints from) and ``read_inputs`` (the raw
    columns the model reads; others, such as columns a ColumnTransformer drops, may hold anything).
    Columns listed in ``coded_inputs`` hold a category's index (code), not its value.

    Examples
    --------
    >>> from sklearn.linear_model import LinearRegression
    >>> x = np.random.default_rng(0).normal(size=(50, 3))
    >>> model = from_sklearn(LinearRegression().fit(x, x @ np.array([1.0, -2.0, 0.5])))
    >>> model.num_features, model.is_classifier, round(float(model(jnp.array([1.0, 1.0, 1.0]))), 3)
    (3, False, -0.5)
    >>> model.predict_batch(jnp.asarray(x[:4])).shape       # many rows at once
    (4,)
    """

    def __init__(self, fn: Callable[[Array], Array], *, num_features: int, is_classifier: bool, output: str,
                 classes: Any = None, differentiable: bool = True, estimator_name: str = "",
                 feature_names_in: Any = None, categorical_inputs: dict[int, np.ndarray] | None = None,
                 coded_inputs: tuple[int, ...] = (), categorical: tuple = (),
                 read_inputs: tuple[int, ...] | None = None):
        self.fn = fn
        self.num_features = num_features
        self.is_classifier = is_classifier
        self.output = output
        self.classes = None if classes is None else np.asarray(classes)
        self.differentiable = differentiable
        self.estimator_name = estimator_name
        self.feature_names_in_ = None if feature_names_in is None else np.asarray(feature_names_in, dtype=object)
        self.categorical_inputs = dict(categorical_inputs or {})
        self.coded_inputs = tuple(coded_inputs)
        self.categorical = tuple(categorical)
        self.read_inputs = tuple(range(num_features)) if read_inputs is None else tuple(read_inputs)
        self._batch = jax.jit(jax.vmap(fn))

    @property
    def n_features_in_(self) -> int:
        """The raw input dimension d (scikit-learn's name; what ``jaxprobe.generate`` can infer d from)."""
        return self.num_features

    def __call__(self, x: Array) -> Array:
        if jnp.shape(x) != (self.num_features,):
            raise ValueError(f"{self.estimator_name} expects one input of shape ({self.num_features},), "
                             f"got {jnp.shape(x)}; use predict_batch for (n, d)")
        return self.fn(x)

    def to_inputs(self, x: Any) -> np.ndarray:
        """Raw rows ``(n, d)`` (an array, a list or a DataFrame) → the real-valued ``(n, d)`` inputs the model reads.

        A DataFrame's columns are taken by ``feature_names_in_`` when the estimator was fitted on one
        (as scikit-learn selects them, extra columns ignored); the categories of ``coded_inputs`` columns
        (strings, say) become their codes, the index in ``categorical_inputs[column]`` (numbers there are
        codes already, as in the model's inputs or ``generate``'s draws), and an unknown category becomes
        NaN (which the model encodes as an unknown category); a column the model does not read (one a
        ColumnTransformer drops) becomes 0 whatever it holds, as scikit-learn ignores it. Other columns
        are cast to the working dtype (a ValueError names a column that holds no number).
        """
        dtype = np.float64 if jax.config.jax_enable_x64 else np.float32
        if hasattr(x, "columns") and self.feature_names_in_ is not None:
            missing = [name for name in self.feature_names_in_ if name not in x.columns]
            if missing:
                raise ValueError(f"{self.estimator_name}: the DataFrame lacks the columns {missing}")
            x = x[list(self.feature_names_in_)]
        mixed = bool(self.coded_inputs) or len(self.read_inputs) < self.num_features
        columns = np.asarray(x, dtype=object if mixed else None)
        if columns.ndim != 2 or columns.shape[1] != self.num_features:
            raise ValueError(f"expected inputs of shape (n, {self.num_features}), got {columns.shape}")
        if not mixed:
            return columns.astype(dtype)
        out = np.zeros(columns.shape, dtype)
        for j in self.read_inputs:
            if j in self.coded_inputs:
                out[:, j] = [_input_code(value, self.categorical_inputs[j]) for value in columns[:, j]]
                continue
            try:
                out[:, j] = columns[:, j].astype(dtype)
            except (TypeError, ValueError):
                name = "" if self.feature_names_in_ is None else f" ({self.feature_names_in_[j]!r})"
                raise ValueError(f"{self.estimator_name}: input column {j}{name} must hold numbers, got "
                                 f"{columns[:, j][:3].tolist()}...") from None
        return out

    def predict_batch(self, x: Any) -> np.ndarray:
        """``(n, d)`` → ``(n, K)`` or ``(n,)`` as NumPy (jit + vmap); ``x`` goes through :meth:`to_inputs`."""
        if isinstance(x, jax.Array):
            x = jnp.asarray(x, jnp.float32 if not jax.config.jax_enable_x64 else None)
        else:
            x = self.to_inputs(x)
        if x.ndim != 2 or x.shape[1] != self.num_features:
            raise ValueError(f"expected inputs of shape (n, {self.num_features}), got {x.shape}")
        return np.asarray(self._batch(x))

    def __repr__(self) -> str:
        return f"ImportedModel({self.estimator_name}, output={self.output})"


def _const(array: Any) -> np.ndarray:
    """Fitted arrays as float32 (float64 when x64 is on), kept as NumPy constants for tracing."""
    return np.asarray(array, np.float64 if jax.config.jax_enable_x64 else np.float32)


def _binary_columns(p1: Array) -> Array:
    return jnp.stack([1.0 - p1, p1])


def _linear(estimator) -> ImportedModel:
    coef, intercept = _const(estimator.coef_), _const(estimator.intercept_)
    single = coef.ndim == 1

    def predict(x):
        y = x @ coef.T + intercept
        return y.reshape(()) if single else y

    return ImportedModel(predict, num_features=coef.shape[-1], is_classifier=False, output="prediction",
                         estimator_name=type(estimator).__name__)


def _logistic(estimator) -> ImportedModel:
    coef, intercept = _const(estimator.coef_), _const(estimator.intercept_)
    one_vs_rest = getattr(estimator, "solver", "") == "liblinear" and coef.shape[0] > 1

    def proba(x):
        scores = x @ coef.T + intercept
        if coef.shape[0] == 1:
            return _binary_columns(jax.nn.sigmoid(scores[0]))
        if one_vs_rest:  # liblinear: normalized one-vs-rest sigmoids, as sklearn's predict_proba
            p = jax.nn.sigmoid(scores)
            return p / jnp.sum(p)
        return jax.nn.softmax(scores)

    return ImportedModel(proba, num_features=coef.shape[1], is_classifier=True, output="probabilities",
                         classes=estimator.classes_, estimator_name=type(estimator).__name__)


def _kernel(estimator) -> Callable[[Array, Array], Array]:
    kernel = estimator.kernel
    gamma, coef0, degree = float(estimator._gamma), float(estimator.coef0), int(estimator.degree)
    if kernel == "linear":
        return lambda sv, x: sv @ x
    if kernel == "rbf":
        return lambda sv, x: jnp.exp(-gamma * jnp.sum((sv - x) ** 2, axis=-1))
    if kernel == "poly":
        return lambda sv, x: (gamma * (sv @ x) + coef0) ** degree
    if kernel == "sigmoid":
        return lambda sv, x: jnp.tanh(gamma * (sv @ x) + coef0)
    raise ValueError(f"from_sklearn supports SVM kernels linear, rbf, poly and sigmoid, not {kernel!r}")


def _libsvm_two_class_coupling(r: Array) -> Array:
    """libsvm's ``multiclass_probability`` for two classes (Wu, Lin & Weng 2004, method 2).

    libsvm solves the coupling iteratively and stops at a tolerance of 0.005/k,
    so its ``predict_proba`` differs from Platt's ``r`` by up to ~1e-3; this
    replays the same fixed-point iterations (at most 100, frozen once converged)
    to match it to float precision. Returns ``[p0, p1]`` with ``r`` the pairwise
    probability of class 0.
    """
    q = jnp.array([[(1 - r) ** 2, -(1 - r) * r], [-(1 - r) * r, r**2]])
    tolerance = 0.005 / 2

    def iteration(_, carry):
        p, done = carry
        qp = q @ p
        pqp = p @ qp
        done = done | (jnp.max(jnp.abs(qp - pqp)) < tolerance)
        new_p = p
        for t in range(2):  # libsvm updates one coordinate at a time
            qp = q @ new_p
            pqp = new_p @ qp
            diff = (-qp[t] + pqp) / q[t, t]
            new_p = new_p.at[t].add(diff) / (1 + diff)
        return jnp.where(done, p, new_p), done

    p, _ = jax.lax.fori_loop(0, 100, iteration, (jnp.full((2,), 0.5, r.dtype), jnp.asarray(False)))
    return p


def _libsvm_multiclass_probability(r: Array) -> Array:
    """libsvm's ``multiclass_probability`` (Wu, Lin & Weng 2004, method 2) for K classes.

    ``r`` ``(K, K)``: ``r[i, j]`` the pairwise probability of class i against j.
    Replays libsvm's coordinate updates (at most max(100, K) sweeps, stopping at
    a tolerance of 0.005/K, frozen once converged), so the result matches its
    ``predict_proba`` to float precision, not only the exact coupling solution.
    """
    num_classes = r.shape[0]
    off_diagonal = 1.0 - jnp.eye(num_classes, dtype=r.dtype)
    q = -(r.T * r) * off_diagonal  # Q[t, j] = −r[j, t]·r[t, j] for j ≠ t
    q = q + jnp.diag(jnp.sum((r.T ** 2) * off_diagonal, axis=1))  # Q[t, t] = Σ_{j≠t} r[j, t]²
    tolerance = 0.005 / num_classes

    def sweep(_, carry):
        p, done = carry
        qp = q @ p
        pqp = p @ qp
        done = done | (jnp.max(jnp.abs(qp - pqp)) < tolerance)
        new_p, new_qp, new_pqp = p, qp, pqp
        for t in range(num_classes):  # libsvm's incremental updates, one coordinate at a time
            diff = (-new_qp[t] + new_pqp) / q[t, t]
            new_p = new_p.at[t].add(diff)
            new_pqp = (new_pqp + diff * (diff * q[t, t] + 2 * new_qp[t])) / (1 + diff) / (1 + diff)
            new_qp = (new_qp + diff * q[t, :]) / (1 + diff)
            new_p = new_p / (1 + diff)
        return jnp.where(done, p, new_p), done

    p0 = jnp.full((num_classes,), 1.0 / num_classes, r.dtype)
    p, _ = jax.lax.fori_loop(0, max(100, num_classes), sweep, (p0, jnp.asarray(False)))
    return p


def _ovr_from_ovo(ovo: Array, num_classes: int) -> Array:
    """sklearn's ``_ovr_decision_function(ovo < 0, −ovo, K)``: votes plus confidences in (−1/3, 1/3)."""
    votes = jnp.zeros((num_classes,), ovo.dtype)
    confidence = jnp.zeros((num_classes,), ovo.dtype)
    pair = 0
    for i in range(num_classes):
        for j in range(i + 1, num_classes):
            confidence = confidence.at[i].add(ovo[pair]).at[j].add(-ovo[pair])
            votes = votes.at[i].add(jnp.where(ovo[pair] < 0, 0.0, 1.0)).at[j].add(jnp.where(ovo[pair] < 0, 1.0, 0.0))
            pair += 1
    return votes + confidence / (3 * (jnp.abs(confidence) + 1))


def _svm(estimator, is_classifier: bool, probabilities: bool = True) -> ImportedModel:
    if callable(estimator.kernel) or estimator.kernel == "precomputed":
        raise ValueError("from_sklearn cannot import an SVM with a callable or precomputed kernel")
    kernel = _kernel(estimator)
    support = _const(estimator.support_vectors_)
    name = type(estimator).__name__
    if is_classifier and len(estimator.classes_) > 2:
        return _multiclass_svc(estimator, kernel, support, probabilities)
    dual = _const(estimator.dual_coef_)[0]
    intercept = float(estimator.intercept_[0])

    def decision(x):
        return jnp.sum(dual * kernel(support, x)) + intercept

    if not is_classifier:
        return ImportedModel(decision, num_features=support.shape[1], is_classifier=False, output="prediction",
                             estimator_name=name)
    platt_a, platt_b = np.ravel(getattr(estimator, "_probA", [])), np.ravel(getattr(estimator, "_probB", []))
    if platt_a.size and probabilities:  # fitted with probability=True
        prob_a, prob_b = float(platt_a[0]), float(platt_b[0])

        def proba(x):
            # libsvm: Platt's sigmoid on its decision value (minus sklearn's), then its pairwise coupling.
            r = jnp.clip(jax.nn.sigmoid(prob_a * decision(x) - prob_b), 1e-7, 1 - 1e-7)
            return _libsvm_two_class_coupling(r)

        return ImportedModel(proba, num_features=support.shape[1], is_classifier=True, output="probabilities",
                             classes=estimator.classes_, estimator_name=name)
    return ImportedModel(decision, num_features=support.shape[1], is_classifier=True, output="decision_function",
                         classes=estimator.classes_, estimator_name=name)


def _multiclass_svc(estimator, kernel, support, probabilities: bool = True) -> ImportedModel:
    """K > 2 classes: libsvm's one-vs-one machines, one per class pair (i < j).

    Pair (i, j) has decision value ``Σ_{s∈i} dual[j−1, s] K(s, x) + Σ_{s∈j} dual[i, s] K(s, x) + b_ij``
    (> 0 votes for class i). Output: with ``probability=True`` the K probabilities of
    ``predict_proba`` (Platt sigmoid per pair, then libsvm's pairwise coupling);
    otherwise ``decision_function`` in the estimator's ``decision_function_shape``
    (``"ovo"``: the K(K−1)/2 pair values; ``"ovr"``, sklearn's default: votes plus
    confidences, piecewise constant in the votes, as sklearn returns).
    """
    num_classes = len(estimator.classes_)
    dual = _const(estimator.dual_coef_)
    intercept = _const(estimator.intercept_)
    starts = np.concatenate([[0], np.cumsum(estimator.n_support_)])
    pairs = [(i, j) for i in range(num_classes) for j in range(i + 1, num_classes)]
    # one coefficient matrix (pairs, n_SV): class i's SVs weighted by row j−1, class j's by row i
    coefficients = np.zeros((len(pairs), support.shape[0]), dual.dtype)
    for pair, (i, j) in enumerate(pairs):
        coefficients[pair, starts[i]:starts[i + 1]] = dual[j - 1, starts[i]:starts[i + 1]]
        coefficients[pair, starts[j]:starts[j + 1]] = dual[i, starts[j]:starts[j + 1]]

    def ovo(x):
        return coefficients @ kernel(support, x) + intercept

    name = type(estimator).__name__
    platt_a, platt_b = np.ravel(getattr(estimator, "_probA", [])), np.ravel(getattr(estimator, "_probB", []))
    if platt_a.size and probabilities:
        prob_a, prob_b = _const(platt_a), _const(platt_b)
        rows = np.array([i for i, _ in pairs])
        cols = np.array([j for _, j in pairs])

        def proba(x):
            # libsvm's sigmoid_predict: P(i over j) = 1 / (1 + exp(A·dec + B)), clipped to [1e-7, 1 − 1e-7]
            r_pair = jnp.clip(jax.nn.sigmoid(-(prob_a * ovo(x) + prob_b)), 1e-7, 1 - 1e-7)
            r = jnp.zeros((num_classes, num_classes), r_pair.dtype)
            r = r.at[rows, cols].set(r_pair).at[cols, rows].set(1 - r_pair)
            return _libsvm_multiclass_probability(r)

        return ImportedModel(proba, num_features=support.shape[1], is_classifier=True, output="probabilities",
                             classes=estimator.classes_, estimator_name=name)
    if estimator.decision_function_shape == "ovo":
        fn = ovo
    else:
        def fn(x):
            return _ovr_from_ovo(ovo(x), num_classes)
    return ImportedModel(fn, num_features=support.shape[1], is_classifier=True, output="decision_function",
                         classes=estimator.classes_, estimator_name=name)


_ACTIVATIONS = {
    "identity": lambda h: h,
    "relu": jax.nn.relu,
    "tanh": jnp.tanh,
    "logistic": jax.nn.sigmoid,
}


def _mlp(estimator, is_classifier: bool) -> ImportedModel:
    weights = [_const(w) for w in estimator.coefs_]
    biases = [_const(b) for b in estimator.intercepts_]
    hidden = _ACTIVATIONS[estimator.activation]
    out_activation = estimator.out_activation_

    def forward(x):
        h = x
        for w, b in zip(weights[:-1], biases[:-1]):
            h = hidden(h @ w + b)
        return h @ weights[-1] + biases[-1]

    name = type(estimator).__name__
    if not is_classifier:
        def predict(x):
            out = forward(x)
            return out.reshape(()) if out.shape == (1,) else out

        return ImportedModel(predict, num_features=weights[0].shape[0], is_classifier=False, output="prediction",
                             estimator_name=name)
    if out_activation == "logistic" and weights[-1].shape[1] != 1:
        raise ValueError("from_sklearn does not import multi-label MLPClassifier")

    def proba(x):
        out = forward(x)
        if out_activation == "logistic":
            return _binary_columns(jax.nn.sigmoid(out[0]))
        return jax.nn.softmax(out)

    return ImportedModel(proba, num_features=weights[0].shape[0], is_classifier=True, output="probabilities",
                         classes=estimator.classes_, estimator_name=name)


def _calibration_response(estimator) -> tuple[Callable[[Array], Array], bool, bool]:
    """What ``CalibratedClassifierCV`` reads from its fitted base classifier, as a JAX function of one input.

    sklearn's ``_get_response_values(..., ["decision_function", "predict_proba"])``: the decision
    function when the classifier has one, else ``predict_proba``; for two classes the
    positive class's column only. Returns ``(fn, from_probabilities, differentiable)``; ``fn(x)`` is ``(m,)``.
    """
    from sklearn import linear_model, svm

    if hasattr(estimator, "decision_function"):
        if isinstance(estimator, svm.SVC):
            decision = _svm(estimator, True, probabilities=False).fn
        elif isinstance(estimator, linear_model.LogisticRegression):
            coef, intercept = _const(estimator.coef_), _const(estimator.intercept_)

            def decision(x):
                scores = x @ coef.T + intercept
                return scores[0] if coef.shape[0] == 1 else scores
        else:
            raise TypeError(f"from_sklearn cannot calibrate {type(estimator).__name__}: CalibratedClassifierCV reads "
                            "its decision_function, which jaxprobe imports for SVC and LogisticRegression only")
        return (lambda x: jnp.atleast_1d(decision(x))), False, True
    probabilities = from_sklearn(estimator)
    if len(estimator.classes_) == 2:
        return (lambda x: probabilities.fn(x)[1:]), True, probabilities.differentiable
    return probabilities.fn, True, probabilities.differentiable


def _calibrated(estimator) -> ImportedModel:
    """``CalibratedClassifierCV``: the mean over its calibrated classifiers of calibrator(base response).

    Per calibrated classifier (sklearn's ``_CalibratedClassifier.predict_proba``):

    - ``"sigmoid"`` (Platt): class k's probability ``1 / (1 + exp(a_k s_k + b_k))`` of response ``s_k``;
    - ``"isotonic"``: linear interpolation of the fitted thresholds, clipped at the ends (piecewise linear);
    - then two classes: ``p_0 = 1 − p_1``; more: divided by their sum (uniform where the sum is 0: a
      discontinuity, so an isotonic map whose output is 0 in float64 but 1e-7 in float32 lands on the
      other side of it; turn on ``jax_enable_x64`` to follow sklearn there too);
    - ``"temperature"``: ``softmax(β · logits)``, logits being the decision values (two classes:
      ``(−s, s)``) or ``log(p + 1e-12)`` of probabilities. sklearn tells the two apart per batch
      (all rows in [0, 1] summing to 1 are taken as probabilities); here the base's method decides.

    The replacement sklearn 1.9 recommends for ``SVC(probability=True)`` is
    ``CalibratedClassifierCV(SVC(), ensemble=False)``: one calibrated classifier.
    """
    from sklearn.preprocessing import LabelEncoder

    classes = estimator.classes_
    num_classes = len(classes)
    members = []
    differentiable = True
    for calibrated in estimator.calibrated_classifiers_:
        base = calibrated.estimator
        response, from_probabilities, base_differentiable = _calibration_response(base)
        differentiable &= base_differentiable
        if calibrated.method == "temperature":
            beta = float(np.ravel(calibrated.calibrators[0].beta_)[0])

            def member(x, response=response, from_probabilities=from_probabilities, beta=beta):
                values = response(x)
                if from_probabilities:
                    if num_classes == 2:
                        # sklearn's (1 − p, p); a tree ensemble's float32 p can exceed 1 by a rounding
                        # error, which would make log(1 − p + 1e-12) NaN where sklearn has log(1e-12).
                        values = jnp.concatenate([jnp.maximum(1.0 - values, 0.0), values])
                    logits = jnp.log(values + 1e-12)
                else:
                    logits = jnp.concatenate([-values, values]) if values.shape[0] == 1 else values
                return jax.nn.softmax(beta * logits)
        elif calibrated.method in ("sigmoid", "isotonic"):
            class_index = LabelEncoder().fit(calibrated.classes).transform(base.classes_)
            if num_classes == 2:
                class_index = class_index + 1  # the one response is classes_[1]'s
            maps = []
            for calibrator in calibrated.calibrators:
                if calibrated.method == "sigmoid":
                    maps.append(("sigmoid", float(calibrator.a_), float(calibrator.b_)))
                else:
                    maps.append(("isotonic", _const(calibrator.X_thresholds_), _const(calibrator.y_thresholds_)))
                    differentiable = False  # piecewise linear with flat pieces: gradients vanish there

            def member(x, response=response, class_index=class_index, maps=maps):
                values = response(x)
                columns = []
                for value, (kind, first, second) in zip(values, maps):
                    if kind == "sigmoid":
                        columns.append(jax.nn.sigmoid(-(first * value + second)))
                    else:
                        columns.append(jnp.interp(value, first, second))
                proba = jnp.zeros((num_classes,), values.dtype).at[class_index[:len(columns)]].set(
                    jnp.stack(columns))
                if num_classes == 2:
                    return proba.at[0].set(1.0 - proba[1])
                total = jnp.sum(proba)
                safe = jnp.where(total == 0, 1.0, total)
                return jnp.where(total == 0, 1.0 / num_classes, proba / safe)
        else:
            raise TypeError(f"from_sklearn does not support CalibratedClassifierCV(method={calibrated.method!r})")
        members.append(member)

    def proba(x):
        return sum(member(x) for member in members) / len(members)

    num_features = int(estimator.n_features_in_)
    return ImportedModel(proba, num_features=num_features, is_classifier=True, output="probabilities",
                         classes=classes, differentiable=differentiable, estimator_name=type(estimator).__name__)


# ---------------------------------------------------------------- Pipelines
# A Pipeline becomes ONE function of the raw row: each transformer step is a JAX map of one row
# (a _Stage), composed in order, then the final estimator's function. Transformers are matched on
# their class AND their transform method (a subclass overriding transform is refused, since its
# arithmetic is not the one copied here).

_ONE_HOT_MODES = ("exact", "nearest")


@dataclasses.dataclass(frozen=True, eq=False)
class CategoricalInput:
    """A raw input column that a Pipeline's encoder reads as a category (:attr:`ImportedModel.categorical`).

    ``column``: its index in the raw row x (None: the encoder reads a computed value, not a raw column);
    ``name``: its DataFrame column name, or None; ``kind``: ``"one-hot"`` or ``"ordinal"`` (the encoder);
    ``categories``: the encoder's ``categories_`` for it; ``values`` ``(K,)``: what ``x[column]`` holds for
    each category: its code 0..K−1 when ``coded`` (non-numeric categories), else its value (NaN for the
    missing category); ``reading``: how the model reads a real ``v`` there, ``"cells"`` (codes: ``v`` in
    (k − ½, k + ½] is category k, outside (−½, K − ½] unknown), ``"exact"`` (``v`` equal to a value, any other
    value unknown) or ``"nearest"`` (the nearest value); ``read_as_number``: another step reads the same raw
    value as a number too; ``step``: the encoder's step label.

    Examples
    --------
    >>> from sklearn.compose import make_column_transformer
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import OneHotEncoder
    >>> x = np.array([[0.0, 1.2], [1.0, -0.3], [2.0, 0.5], [1.0, 2.0], [0.0, -1.0], [2.0, 0.1]])
    >>> encode = make_column_transformer((OneHotEncoder(), [0]), remainder="passthrough")   # column 0: a category
    >>> pipeline = make_pipeline(encode, LogisticRegression()).fit(x, [0, 1, 1, 0, 0, 1])
    >>> (column,) = from_sklearn(pipeline).categorical              # one CategoricalInput per such column
    >>> column.column, column.kind, column.values.tolist(), column.reading
    (0, 'one-hot', [0.0, 1.0, 2.0], 'exact')
    """

    column: int | None
    name: str | None
    kind: str
    categories: np.ndarray
    values: np.ndarray
    coded: bool
    reading: str
    read_as_number: bool = False
    step: str = ""

    def describe(self) -> str:
        """``input column 1 ('city'), which step 'prep' → 'city' (OneHotEncoder) reads as a category``."""
        where = "a computed value" if self.column is None else f"input column {self.column}" + (
            f" ({self.name!r})" if self.name is not None else "")
        return f"{where}, which {self.step} reads as a category"


# Imported Pipelines with categorical inputs, by the token of the named scope their function runs in: a
# traced program that calls one carries the scope in its equations' name stacks, also inside cached jits.
_CATEGORICAL_SCOPE = "jaxprobe_categorical_inputs_"
_CATEGORICAL_MODELS: dict[int, tuple[int, str, tuple[CategoricalInput, ...]]] = {}


def _categorical_scope(records: tuple[CategoricalInput, ...], num_features: int, name: str) -> Any:
    """A maker of the named scope a Pipeline's function runs in when it has categorical inputs (else of a
    no-op scope); registers the records under the scope's token."""
    if not records:
        return contextlib.nullcontext
    token = len(_CATEGORICAL_MODELS)
    _CATEGORICAL_MODELS[token] = (num_features, name, records)
    return lambda: jax.named_scope(f"{_CATEGORICAL_SCOPE}{token}")


def categorical_inputs_read_by(fn: Callable[[Array], Array], dim: int) -> tuple[tuple[str, CategoricalInput], ...]:
    """The categorical inputs of the imported Pipelines that ``fn`` (one x ``(dim,)`` → anything) calls on x.

    Found in the jaxpr of ``fn`` (one abstract trace, nothing compiled): every Pipeline imported by
    :func:`from_sklearn` with a ``OneHotEncoder``/``OrdinalEncoder`` runs in a named scope, which the
    equations of any program calling it carry, through ``jit`` (cached or not), ``vmap``, ``grad`` and
    control flow. Pipelines whose raw row is not ``dim`` long read something other than x and are left
    out. Returns ``(model name, CategoricalInput)`` pairs; ``()`` at no cost when this process has imported
    no such Pipeline.

    Examples
    --------
    >>> from sklearn.compose import make_column_transformer
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import OneHotEncoder
    >>> x = np.array([[0.0, 1.2], [1.0, -0.3], [2.0, 0.5], [1.0, 2.0], [0.0, -1.0], [2.0, 0.1]])
    >>> encode = make_column_transformer((OneHotEncoder(), [0]), remainder="passthrough")   # column 0: a category
    >>> pipeline = make_pipeline(encode, LogisticRegression()).fit(x, [0, 1, 1, 0, 0, 1])
    >>> model = from_sklearn(pipeline)
    >>> probe = jax.jit(lambda x: 1.0 - model(x)[1])                  # anything that calls the model on x
    >>> [(record.column, record.kind) for _, record in categorical_inputs_read_by(probe, 2)]
    [(0, 'one-hot')]
    >>> categorical_inputs_read_by(lambda x: jnp.sum(x**2), 2)       # a function that calls no such model
    ()
    """
    if not _CATEGORICAL_MODELS:
        return ()
    try:
        jaxpr = jax.make_jaxpr(fn)(jax.ShapeDtypeStruct((dim,), jnp.result_type(float)))
    except Exception:  # noqa: BLE001 - a probe that cannot run on (dim,) fails with its own error when sampled,
        return ()  # as it does in a process that imported no such Pipeline: no error depends on what was imported
    tokens: set[int] = set()
    _scope_tokens(jaxpr.jaxpr, tokens)
    found = []
    for token in sorted(tokens):
        num_features, name, records = _CATEGORICAL_MODELS[token]
        if num_features == dim:
            found.extend((name, record) for record in records)
    return tuple(found)


def _scope_tokens(jaxpr: Any, tokens: set[int]) -> None:
    """Add the tokens of the categorical scopes in ``jaxpr``'s equations (and in its inner jaxprs) to ``tokens``."""
    for equation in jaxpr.eqns:
        tokens.update(int(token) for token in re.findall(_CATEGORICAL_SCOPE + r"(\d+)",
                                                         str(equation.source_info.name_stack)))
        for parameter in equation.params.values():
            for inner in parameter if isinstance(parameter, (tuple, list)) else (parameter,):
                inner = getattr(inner, "jaxpr", inner)  # a ClosedJaxpr's Jaxpr
                if hasattr(inner, "eqns"):
                    _scope_tokens(inner, tokens)


class UnsupportedStepError(ValueError, TypeError):
    """A Pipeline step ``from_sklearn`` cannot import; the message names the step and its class.

    A ``ValueError`` (a value the function cannot take) and a ``TypeError`` (what ``from_sklearn``
    raises for an unsupported estimator), so either ``except`` catches it.

    Examples
    --------
    >>> from sklearn.linear_model import LinearRegression
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import FunctionTransformer
    >>> x = np.random.default_rng(0).uniform(size=(20, 2))
    >>> pipeline = make_pipeline(FunctionTransformer(np.log1p), LinearRegression()).fit(x, x.sum(1))
    >>> try:
    ...     from_sklearn(pipeline)
    ... except UnsupportedStepError as error:                     # also a ValueError and a TypeError
    ...     print(error)
    from_sklearn cannot import step 'functiontransformer' (FunctionTransformer): FunctionTransformer(func=...)
    runs arbitrary Python; only FunctionTransformer() without func (the identity) is imported
    """


@dataclasses.dataclass
class _Stage:
    """A fitted transformer as a JAX map of one row: ``fn`` ``(num_inputs,)`` → ``(num_outputs,)``.

    ``sources[k]``: the raw input column that output ``k`` still equals unchanged, or None once
    transformed (a OneHotEncoder with non-numeric categories needs its column to be a raw one).
    """

    fn: Callable[[Array], Array]
    num_outputs: int
    sources: list[int | None]


@dataclasses.dataclass
class _Collected:
    """What importing a pipeline collects on the way: the ``one_hot`` mode, the raw column names, the raw
    categorical columns (:class:`CategoricalInput` records) and which raw columns are read, and how."""

    one_hot: str
    feature_names: Any = None
    categorical_inputs: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    coded_inputs: set[int] = dataclasses.field(default_factory=set)
    records: list[CategoricalInput] = dataclasses.field(default_factory=list)
    categorical_reads: set[int] = dataclasses.field(default_factory=set)  # raw columns an encoder reads
    numeric_reads: set[int] = dataclasses.field(default_factory=set)  # raw columns read as numbers


def _kind(step: Any) -> str:
    """A step's class name, or ``'passthrough'`` / ``None`` for those markers."""
    return repr(step) if isinstance(step, str) or step is None else type(step).__name__


def _step_label(path: tuple[str, ...], step: Any) -> str:
    """``step 'prep' → 'cat' (OneHotEncoder)``: where a step sits in (nested) pipelines, and its class."""
    return f"step {' → '.join(map(repr, path))} ({_kind(step)})"


def _is(transformer: Any, cls: type) -> bool:
    """``transformer`` is a ``cls`` whose ``transform`` is scikit-learn's own (not overridden)."""
    return isinstance(transformer, cls) and type(transformer).transform is cls.transform


def _is_identity(step: Any) -> bool:
    """``"passthrough"``, ``None`` or ``FunctionTransformer()`` without a ``func``: the identity."""
    from sklearn.preprocessing import FunctionTransformer

    if step is None or (isinstance(step, str) and step == "passthrough"):
        return True
    return _is(step, FunctionTransformer) and step.func is None


def _flat_steps(pipeline: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """A Pipeline's steps with nested Pipelines expanded in place, each with its path of step names."""
    from sklearn.pipeline import Pipeline

    steps = []
    for name, step in pipeline.steps:
        if isinstance(step, Pipeline):
            steps.extend(_flat_steps(step, prefix + (name,)))
        else:
            steps.append((prefix + (name,), step))
    return steps


def _pipeline(pipeline: Any, one_hot: str) -> ImportedModel:
    """A fitted Pipeline ``[transformers..., estimator]`` as one function of the raw row ``x`` ``(d_raw,)``."""
    steps = _flat_steps(pipeline)
    *transformers, (final_path, final) = steps
    if _is_identity(final) or not (hasattr(final, "predict") or hasattr(final, "predict_proba")):
        raise UnsupportedStepError(f"from_sklearn imports Pipelines that end in an estimator; the last "
                                   f"{_step_label(final_path, final)} is not one")
    # The raw dimension and column names: those of the first step that reads the raw input.
    first_path, first = next(((path, step) for path, step in steps if not _is_identity(step)), steps[-1])
    feature_names = getattr(first, "feature_names_in_", None)
    collected = _Collected(one_hot, feature_names)
    if getattr(first, "n_features_in_", None) is None:
        if first is not final:  # a custom transformer: refused by name here
            _transformer(first, first_path, 0, [], collected)
        raise UnsupportedStepError(f"from_sklearn cannot import {_step_label(first_path, first)}: it states no "
                                   "n_features_in_")
    num_raw = int(first.n_features_in_)
    width, sources = num_raw, list(range(num_raw))
    functions = []
    for path, step in transformers:
        stage = _transformer(step, path, width, sources, collected)
        functions.append(stage.fn)
        width, sources = stage.num_outputs, stage.sources
    try:
        model = _estimator(final)
    except (TypeError, ValueError) as error:
        raise UnsupportedStepError(f"from_sklearn cannot import the final {_step_label(final_path, final)}: "
                                   f"{error}") from None
    if model.num_features != width:
        raise ValueError(f"the final {_step_label(final_path, final)} reads {model.num_features} features but "
                         f"the steps before it give {width}")
    final_fn = model.fn
    collected.numeric_reads.update(source for source in sources if source is not None)  # the estimator's
    name = "Pipeline(" + " → ".join(f"{path[-1]}: {_kind(step)}" for path, step in steps) + ")"
    records = tuple(dataclasses.replace(record, read_as_number=record.column in collected.numeric_reads)
                    for record in collected.records)
    scope = _categorical_scope(records, num_raw, name)

    def predict(x: Array) -> Array:
        """One raw row ``(d_raw,)`` → the final estimator's output on the transformed row."""
        with scope():  # names the categorical reads in a traced program (categorical_inputs_read_by)
            for transform in functions:
                x = transform(x)
            return final_fn(x)

    return ImportedModel(predict, num_features=num_raw, is_classifier=model.is_classifier, output=model.output,
                         classes=model.classes, differentiable=model.differentiable, estimator_name=name,
                         feature_names_in=feature_names, categorical_inputs=collected.categorical_inputs,
                         coded_inputs=tuple(sorted(collected.coded_inputs)), categorical=records,
                         read_inputs=tuple(sorted(collected.numeric_reads | collected.categorical_reads)))


def _transformer(step: Any, path: tuple[str, ...], num_inputs: int, sources: list[int | None],
                 collected: _Collected) -> _Stage:
    """A fitted transformer step reading ``num_inputs`` columns (raw columns ``sources``) as a :class:`_Stage`."""
    from sklearn import compose, decomposition, pipeline, preprocessing

    label = _step_label(path, step)
    if _is_identity(step):
        return _Stage(lambda x: x, num_inputs, list(sources))
    if isinstance(step, str):  # "drop" belongs in a ColumnTransformer, not in a Pipeline
        raise UnsupportedStepError(f"from_sklearn cannot import {label}")
    expected = getattr(step, "n_features_in_", None)
    if expected is not None and int(expected) != num_inputs:
        raise ValueError(f"{label} was fitted on {expected} features but receives {num_inputs}")
    if isinstance(step, pipeline.Pipeline):  # a Pipeline of transformers inside a ColumnTransformer
        functions = []
        for inner_path, inner in _flat_steps(step, path):
            stage = _transformer(inner, inner_path, num_inputs, sources, collected)
            functions.append(stage.fn)
            num_inputs, sources = stage.num_outputs, stage.sources

        def chain(x: Array) -> Array:
            for transform in functions:
                x = transform(x)
            return x

        return _Stage(chain, num_inputs, sources)
    if not any(_is(step, cls) for cls in (preprocessing.OneHotEncoder, preprocessing.OrdinalEncoder,
                                           compose.ColumnTransformer)):
        collected.numeric_reads.update(source for source in sources if source is not None)  # read as numbers
    if _is(step, preprocessing.StandardScaler):
        # sklearn: X −= mean_ (with_mean), X /= scale_ (with_std; zero variances have scale 1)
        mean = _const(step.mean_) if step.with_mean else None
        scale = _const(step.scale_) if step.with_std and step.scale_ is not None else None
        return _Stage(lambda x: _shift_scale(x, mean, scale), num_inputs, [None] * num_inputs)
    if _is(step, preprocessing.RobustScaler):
        center = _const(step.center_) if step.with_centering else None
        scale = _const(step.scale_) if step.with_scaling else None
        return _Stage(lambda x: _shift_scale(x, center, scale), num_inputs, [None] * num_inputs)
    if _is(step, preprocessing.MaxAbsScaler):
        scale = _const(step.scale_)
        return _Stage(lambda x: x / scale, num_inputs, [None] * num_inputs)
    if _is(step, preprocessing.MinMaxScaler):
        factor, offset = _const(step.scale_), _const(step.min_)
        low, high = (float(bound) for bound in step.feature_range)
        clip = bool(getattr(step, "clip", False))

        def min_max(x: Array) -> Array:
            x = x * factor + offset  # sklearn: X *= scale_; X += min_; then clip to feature_range
            return jnp.clip(x, low, high) if clip else x

        return _Stage(min_max, num_inputs, [None] * num_inputs)
    if _is(step, decomposition.PCA):
        return _pca(step, num_inputs)
    if _is(step, preprocessing.OneHotEncoder):
        return _one_hot_encoder(step, label, sources, collected)
    if _is(step, preprocessing.OrdinalEncoder):
        return _ordinal_encoder(step, label, sources, collected)
    if _is(step, compose.ColumnTransformer):
        return _column_transformer(step, path, num_inputs, sources, collected)
    if _is(step, preprocessing.FunctionTransformer):
        raise UnsupportedStepError(f"from_sklearn cannot import {label}: FunctionTransformer(func={step.func!r}) "
                                   "runs arbitrary Python; only FunctionTransformer() without func (the "
                                   "identity) is imported")
    raise UnsupportedStepError(
        f"from_sklearn cannot import {label}; supported transformers: StandardScaler, MinMaxScaler, RobustScaler, "
        "MaxAbsScaler, PCA, OneHotEncoder, OrdinalEncoder, ColumnTransformer and Pipelines of these, "
        "'passthrough' and "
        "FunctionTransformer() without func")


def _shift_scale(x: Array, shift: np.ndarray | None, scale: np.ndarray | None) -> Array:
    """``(x − shift) / scale`` with either step left out when None, as sklearn's scalers do it."""
    if shift is not None:
        x = x - shift
    if scale is not None:
        x = x / scale
    return x


def _pca(step: Any, num_inputs: int) -> _Stage:
    """``PCA.transform``: ``(x − mean_) @ components_.T``, divided by ``sqrt(explained_variance_)`` if whitened.

    sklearn computes ``x @ C.T − mean_ @ C.T``; centring first is the same number and loses less to
    float32 cancellation. Whitening clips the scale below at the float eps of its dtype, as sklearn does.
    """
    components, mean = _const(step.components_), _const(step.mean_)
    scale = None
    if step.whiten:
        variance = np.asarray(step.explained_variance_)
        scale = np.sqrt(variance)
        scale = _const(np.where(scale < np.finfo(scale.dtype).eps, np.finfo(scale.dtype).eps, scale))

    def project(x: Array) -> Array:
        y = (x - mean) @ components.T
        return y / scale if scale is not None else y

    return _Stage(project, components.shape[0], [None] * components.shape[0])


def _numeric_categories(categories: np.ndarray) -> np.ndarray | None:
    """A feature's ``categories_`` as float64 values (None/NaN as NaN), or None when they are not all numbers."""
    if categories.dtype.kind in "biuf":
        return categories.astype(np.float64)
    if all(value is None or (isinstance(value, numbers.Real) and not isinstance(value, str)) for value in categories):
        return np.array([np.nan if value is None else float(value) for value in categories], np.float64)
    return None


def _is_missing(value: Any) -> bool:
    """None or a float NaN: what sklearn's encoders treat as the missing category."""
    return value is None or (isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isnan(value))


def _category_code(value: Any, categories: np.ndarray) -> float:
    """The index of ``value`` in ``categories`` (missing values match a missing category), NaN if absent."""
    for code, category in enumerate(categories):
        if (_is_missing(value) and _is_missing(category)) or (not _is_missing(category) and value == category):
            return float(code)
    return float("nan")


def _input_code(value: Any, categories: np.ndarray) -> float:
    """A coded column's entry as the code the model reads: a number (not NaN) is a code already (the
    categories are not numbers), anything else is looked up (:func:`_category_code`)."""
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)) and not np.isnan(value):
        return float(value)
    return _category_code(value, categories)


def _encoder_tables(encoder: Any, widths: Any) -> list[np.ndarray]:
    """Per input feature ``i``, the ``(n_categories_i, widths[i])`` encoding of each of its categories.

    Read off the encoder's own ``transform`` of a design whose row ``k`` holds every feature's ``k``-th
    category (the last one once a feature runs out), so ``drop``, infrequent grouping, the missing
    category's code and the column order are sklearn's, not a re-implementation of them.
    """
    categories = list(encoder.categories_)
    num_rows = max(len(values) for values in categories)
    columns = [values[np.minimum(np.arange(num_rows), len(values) - 1)] for values in categories]
    names = getattr(encoder, "feature_names_in_", None)
    if names is not None:  # fitted on a DataFrame: transform one, with the same column names
        import pandas as pd

        design: Any = pd.DataFrame({name: column for name, column in zip(names, columns)})
    elif all(column.dtype.kind in "biuf" for column in columns):
        design = np.column_stack(columns)
    else:
        design = np.empty((num_rows, len(columns)), dtype=object)
        for i, column in enumerate(columns):
            design[:, i] = column
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        encoded = encoder.transform(design)
    encoded = np.asarray(encoded.toarray() if hasattr(encoded, "toarray") else encoded, np.float64)
    if widths is None:  # pragma: no cover - OneHotEncoder._n_features_outs: present since scikit-learn 1.1
        raise ValueError("from_sklearn needs OneHotEncoder._n_features_outs (scikit-learn >= 1.1)")
    starts = np.concatenate([[0], np.cumsum(widths)])
    return [encoded[:len(values), starts[i]:starts[i + 1]] for i, values in enumerate(categories)]


def _one_hot_encoder(encoder: Any, label: str, sources: list[int | None], collected: _Collected) -> _Stage:
    """``OneHotEncoder.transform`` of one row: per input feature, its category's row of :func:`_encoder_tables`.

    Semantics (see :func:`from_sklearn`): numeric categories are matched by value (in the working
    dtype; NaN by ``isnan``), others by code (the raw column holds the index of the category); values
    matching no category get sklearn's unknown-category encoding, or zeros where it raises
    (``handle_unknown="error"``). ``one_hot="nearest"`` reads the nearest category instead.
    """
    tables = _encoder_tables(encoder, getattr(encoder, "_n_features_outs", None))
    infrequent = getattr(encoder, "infrequent_categories_", None)
    unknowns = []
    for i, categories in enumerate(encoder.categories_):
        unknown = np.zeros(tables[i].shape[1])
        if encoder.handle_unknown in ("infrequent_if_exist", "warn") and infrequent is not None \
                and infrequent[i] is not None:  # unknown values join the infrequent category
            unknown = tables[i][int(_category_code(infrequent[i][0], categories))]
        unknowns.append(unknown)
    return _encoder_stage(encoder, "one-hot", label, sources, collected, tables, unknowns)


def _ordinal_encoder(encoder: Any, label: str, sources: list[int | None], collected: _Collected) -> _Stage:
    """``OrdinalEncoder.transform`` of one row: per input feature, its category's code (one output each).

    The codes are the encoder's own (infrequent categories share one, the missing category gets
    ``encoded_missing_value``); a value matching no category gets ``unknown_value`` with
    ``handle_unknown="use_encoded_value"``, and NaN where sklearn raises (``"error"``), so a prediction
    on it is NaN, never a silent category. Raw-column semantics as for ``OneHotEncoder``.
    """
    tables = _encoder_tables(encoder, [1] * len(encoder.categories_))
    unknown = np.nan
    if encoder.handle_unknown == "use_encoded_value":
        unknown = float(encoder.unknown_value)
    return _encoder_stage(encoder, "ordinal", label, sources, collected, tables, [np.array([unknown])] * len(tables))


def _encoder_stage(encoder: Any, kind: str, label: str, sources: list[int | None], collected: _Collected,
                   tables: list[np.ndarray], unknowns: list[np.ndarray]) -> _Stage:
    """An encoder (``kind`` ``"one-hot"`` or ``"ordinal"``) as a :class:`_Stage`: per input feature ``i``,
    ``tables[i]`` ``(n_categories, n_outputs)`` read by :func:`_category_reader`, ``unknowns[i]`` for other
    values. Records each feature as a :class:`CategoricalInput` of its raw column (``sources[i]``)."""
    names = collected.feature_names
    features = []
    for i, categories in enumerate(encoder.categories_):
        values = _numeric_categories(np.asarray(categories))
        source = sources[i]
        coded = values is None
        if coded:  # strings: the raw column holds the category's code
            if source is None:
                raise UnsupportedStepError(
                    f"from_sklearn cannot import {label}: its feature {i} has non-numeric categories "
                    f"{list(categories[:3])}... and is not a raw input column, so no real input can hold them")
            known = collected.categorical_inputs.get(source)
            if known is not None and (len(known) != len(categories) or any(
                    _category_code(value, categories) != code for code, value in enumerate(known))):
                raise ValueError(f"{label}: raw column {source} is encoded with two different category lists")
            collected.coded_inputs.add(source)
            values = np.arange(len(categories), dtype=np.float64)
        if source is not None:
            collected.categorical_inputs.setdefault(source, np.asarray(categories))
            collected.categorical_reads.add(source)
        # codes are read by cells (k − ½, k + ½]: equal to exact on codes, and exact for a relaxed Integer
        mode = "cells" if coded and collected.one_hot == "exact" else collected.one_hot
        collected.records.append(CategoricalInput(
            column=source, name=None if source is None or names is None else str(names[source]), kind=kind,
            categories=np.asarray(categories), values=values, coded=coded, reading=mode, step=label))
        features.append(_category_reader(values, tables[i], unknowns[i], mode, label, i))

    def encode(x: Array) -> Array:
        return jnp.concatenate([feature(x[i]) for i, feature in enumerate(features)])

    width = sum(table.shape[1] for table in tables)
    return _Stage(encode, width, [None] * width)


def _category_reader(values: np.ndarray, table: np.ndarray, unknown: np.ndarray, mode: str, label: str,
                     feature: int) -> Callable[[Array], Array]:
    """One feature's encoder: a scalar ``v`` → its ``(n_outputs,)`` encoding.

    ``values`` ``(n,)`` the category values (a NaN one matched by ``isnan``), ``table`` ``(n, n_outputs)``
    their encodings, ``unknown`` ``(n_outputs,)`` the encoding of a value matching none; ``mode``:
    ``"exact"`` (``v == value``), ``"nearest"`` (the nearest finite value, ties to the lower one) or
    ``"cells"`` (codes 0..n−1: ``v`` in (k − ½, k + ½] reads category k, ``v`` outside (−½, n − ½] is
    unknown; equal to ``"exact"`` on codes). Rows are gathered, not multiplied, so a NaN in ``table``
    (an ordinal code for the missing category) stays in its row. Piecewise constant in ``v``: gradient 0.
    """
    finite = ~np.isnan(values)
    order = np.argsort(values[finite], kind="stable")
    points = _const(values[finite][order])
    if np.unique(points).size != points.size:
        raise ValueError(f"{label}: categories of feature {feature} coincide in {points.dtype} "
                         f"({values[finite][order]}); enable jax_enable_x64 to tell them apart")
    table_finite = _const(table[finite][order])
    unknown = _const(unknown)
    nan_row = _const(table[~finite][0]) if (~finite).any() else unknown  # NaN's encoding
    midpoints = _const((values[finite][order][1:] + values[finite][order][:-1]) / 2)
    if not points.size:  # only a missing category
        return lambda v: jnp.where(jnp.isnan(v), nan_row, unknown)

    def exact(v: Array) -> Array:
        match = v == points
        row = jnp.take(table_finite, jnp.argmax(match), axis=0)
        return jnp.where(jnp.isnan(v), nan_row, jnp.where(jnp.any(match), row, unknown))

    def nearest(v: Array) -> Array:
        row = jnp.take(table_finite, jnp.searchsorted(midpoints, v, side="left"), axis=0)  # ties: the lower
        return jnp.where(jnp.isnan(v), nan_row, row)

    def cells(v: Array) -> Array:
        inside = (v > points[0] - 0.5) & (v <= points[-1] + 0.5)
        return jnp.where(inside, nearest(v), jnp.where(jnp.isnan(v), nan_row, unknown))

    return {"exact": exact, "nearest": nearest, "cells": cells}[mode]


def _column_indices(columns: Any, num_inputs: int, names: Any) -> list[int]:
    """A fitted ColumnTransformer entry's column selection as input indices (when sklearn did not record them).

    Ints (negative count from the end), a slice (of positions, or of names, inclusive, as pandas
    ``loc``), a boolean mask, a name or a list of names (needs ``feature_names_in_``).
    """
    positions = np.arange(num_inputs)
    name_list = None if names is None else [str(name) for name in names]

    def by_name(name: Any) -> int:
        if name_list is None or str(name) not in name_list:
            raise ValueError(f"column {name!r} is not among the fitted feature names {name_list}")
        return name_list.index(str(name))

    if callable(columns):
        raise ValueError("a callable column selection cannot be resolved without the fitted data")
    if isinstance(columns, (str, numbers.Integral)):
        columns = [columns]
    if isinstance(columns, slice):
        if isinstance(columns.start, str) or isinstance(columns.stop, str):
            start = 0 if columns.start is None else by_name(columns.start)
            stop = num_inputs - 1 if columns.stop is None else by_name(columns.stop)
            return list(range(start, stop + 1))
        return positions[columns].tolist()
    columns = list(np.asarray(columns, dtype=object).ravel())
    if columns and all(isinstance(column, (bool, np.bool_)) for column in columns):
        return np.flatnonzero(np.asarray(columns, bool)).tolist()
    return [by_name(column) if isinstance(column, str) else int(positions[int(column)]) for column in columns]


def _column_transformer(transformer: Any, path: tuple[str, ...], num_inputs: int, sources: list[int | None],
                        collected: _Collected) -> _Stage:
    """``ColumnTransformer.transform`` of one row: its fitted transformers on their columns, concatenated.

    In the order of ``transformers_`` (the remainder last), skipping ``"drop"`` and empty selections, each
    block multiplied by its ``transformer_weights`` entry, as sklearn's ``_hstack`` does. The column
    indices are those sklearn recorded at fit (``_transformer_to_input_indices``: names already resolved
    against ``feature_names_in_``, callables called), else the selection resolved here.
    """
    recorded = getattr(transformer, "_transformer_to_input_indices", None) or {}
    names = getattr(transformer, "feature_names_in_", None)
    weights = transformer.transformer_weights or {}
    blocks = []
    for name, step, columns in transformer.transformers_:
        if isinstance(step, str) and step == "drop":
            continue
        if name in recorded:
            indices = [int(index) for index in recorded[name]]
        else:
            try:
                indices = _column_indices(columns, num_inputs, names)
            except ValueError as error:
                raise UnsupportedStepError(f"from_sklearn cannot import {_step_label(path + (name,), step)}: "
                                           f"{error}") from None
        if not indices:
            continue
        stage = _transformer(step, path + (name,), len(indices), [sources[j] for j in indices], collected)
        weight = weights.get(name)
        if weight not in (None, 1.0):  # a raw column scaled by its weight is read as a number
            collected.numeric_reads.update(source for source in stage.sources if source is not None)
        blocks.append((np.asarray(indices), stage, None if weight is None else float(weight)))

    def transform(x: Array) -> Array:
        outputs = [stage.fn(x[indices]) if weight is None else stage.fn(x[indices]) * weight
                   for indices, stage, weight in blocks]
        return jnp.concatenate(outputs) if outputs else jnp.zeros((0,), x.dtype)

    out_sources = [source if weight in (None, 1.0) else None
                   for _, stage, weight in blocks for source in stage.sources]
    return _Stage(transform, sum(stage.num_outputs for _, stage, _ in blocks), out_sources)


def from_sklearn(estimator: Any, *, one_hot: str = "exact") -> ImportedModel:
    """A fitted scikit-learn estimator or Pipeline (or an xgboost model) as a pure JAX function of one input.

    Parameters
    ----------
    estimator
        A fitted estimator listed in this module's docstring, or a fitted ``Pipeline`` of supported
        transformers followed by one (see "Pipelines" below).
    one_hot
        How a Pipeline's ``OneHotEncoder`` / ``OrdinalEncoder`` reads a real-valued raw column ``x[j]`` of
        numeric categories (ignored otherwise; codes of string categories are read by cells, see below):
        ``"exact"`` (default): ``x[j]`` equal to a category (compared in the working dtype) gives that
        category's encoding, any other value the encoder's unknown-category encoding; ``"nearest"``: the
        nearest category (ties to the lower one), so every real value reads as a valid category, e.g.
        a relaxed ``Integer`` feature while sampling. Both give ``predict_proba`` exactly on valid rows.

    Returns
    -------
    ImportedModel
        ``model(x)`` for one raw input ``x`` ``(d,)``, ``d = model.n_features_in_``.

    Pipelines
    ---------
    Transformer steps: ``StandardScaler``, ``MinMaxScaler`` (``clip`` too), ``RobustScaler``,
    ``MaxAbsScaler``, ``PCA`` (``whiten`` too), ``OneHotEncoder`` (``drop``, ``handle_unknown``,
    infrequent categories), ``OrdinalEncoder`` (``handle_unknown``, ``unknown_value``,
    ``encoded_missing_value``, infrequent categories; an unknown value where sklearn raises gives NaN),
    ``ColumnTransformer`` of these (columns by index, boolean mask, slice or,
    when fitted on a DataFrame, name; ``remainder`` ``"drop"``, ``"passthrough"`` or a transformer;
    ``transformer_weights``), nested Pipelines of these, and identity steps (``"passthrough"``,
    ``None``, ``FunctionTransformer()`` without ``func``); the last step is any estimator above. The
    result is ONE function of the raw row ``x`` ``(d_raw,)``, with ``feature_names_in_`` when the
    pipeline was fitted on a DataFrame (``x`` follows that column order).

    Categorical semantics. The raw column holds the category's value when the categories are numbers
    (NaN included, matched by ``isnan``); when they are not (strings), it holds the category's code,
    its index in ``model.categorical_inputs[j]`` (listed in ``model.coded_inputs``;
    :meth:`ImportedModel.to_inputs` converts DataFrame rows), read by cells: a value in (k − ½, k + ½]
    is category k, one outside (−½, K − ½] unknown. An unknown value is encoded as sklearn encodes an
    unknown category (one-hot ``"ignore"``: zeros; ``"infrequent_if_exist"``/``"warn"``: the infrequent
    category if there is one, else zeros; ordinal: ``unknown_value``); with ``handle_unknown="error"``,
    where sklearn raises, it gets zeros (one-hot) or NaN (ordinal), since a traced function cannot
    raise. The encoding is piecewise constant in ``x[j]``: its gradient there is 0. ``model.categorical``
    records each such column (:class:`CategoricalInput`); ``generate`` (every front end: through
    :class:`jaxprobe.Question`) adds the exact constraint for it (``Integer`` + ``Box`` over the codes
    or evenly spaced values read ``"nearest"``) or refuses naming the column
    (:func:`jaxprobe.question.categorical_constraints`).

    Raises ``TypeError`` for an unsupported or unfitted estimator, and :class:`UnsupportedStepError`
    (a ``ValueError`` and a ``TypeError``) naming the Pipeline step (its name and class) it cannot import.

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression
    >>> from jaxprobe import datasets
    >>> data = datasets.iris()
    >>> estimator = LogisticRegression(max_iter=500).fit(data.x, data.y)
    >>> model = from_sklearn(estimator)                      # one row (4,) -> class probabilities (3,)
    >>> model
    ImportedModel(LogisticRegression, output=probabilities)
    >>> bool(np.allclose(model(jnp.asarray(data.x[0])), estimator.predict_proba(data.x[:1])[0], atol=1e-5))
    True
    """
    try:
        import sklearn  # noqa: F401  (every path below needs it)
    except ImportError as error:  # pragma: no cover
        raise ImportError("from_sklearn needs scikit-learn: pip install scikit-learn") from error
    if not isinstance(one_hot, str) or one_hot not in _ONE_HOT_MODES:
        raise ValueError(f"one_hot must be one of {', '.join(map(repr, _ONE_HOT_MODES))}; got {one_hot!r}")
    from sklearn.pipeline import Pipeline

    if isinstance(estimator, Pipeline):
        _check_fitted(estimator)
        return _pipeline(estimator, one_hot)
    model = _estimator(estimator)
    names = getattr(estimator, "feature_names_in_", None)
    if names is not None and model.feature_names_in_ is None and len(names) == model.num_features:
        model.feature_names_in_ = np.asarray(names, dtype=object)
    return model


def _check_fitted(estimator: Any) -> None:
    """``TypeError`` unless ``estimator`` is a fitted scikit-learn estimator."""
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    try:
        check_is_fitted(estimator)
    except NotFittedError:
        raise TypeError(f"{type(estimator).__name__} is not fitted: call fit first") from None
    except TypeError:
        raise TypeError(f"from_sklearn needs a fitted scikit-learn estimator, got {type(estimator).__name__}") \
            from None


def _estimator(estimator: Any) -> ImportedModel:
    """One fitted estimator (not a Pipeline) as an :class:`ImportedModel`; ``TypeError`` if unsupported."""
    from sklearn.base import is_classifier

    module = type(estimator).__module__
    if module.startswith("xgboost"):
        from jaxprobe.models.trees import tree_ensemble_from_xgboost

        return _wrap_trees(tree_ensemble_from_xgboost(estimator), estimator)
    _check_fitted(estimator)
    from sklearn import calibration, linear_model, neural_network, svm

    classifier = is_classifier(estimator)
    if isinstance(estimator, calibration.CalibratedClassifierCV):
        return _calibrated(estimator)
    if isinstance(estimator, linear_model.LogisticRegression):
        return _logistic(estimator)
    if isinstance(estimator, (linear_model.LinearRegression, linear_model.Ridge)):
        return _linear(estimator)
    if isinstance(estimator, (svm.SVC, svm.SVR)):
        return _svm(estimator, classifier)
    if isinstance(estimator, (neural_network.MLPClassifier, neural_network.MLPRegressor)):
        return _mlp(estimator, classifier)
    if module.startswith("sklearn.tree") or module.startswith("sklearn.ensemble"):
        from jaxprobe.models.trees import tree_ensemble_from_sklearn

        return _wrap_trees(tree_ensemble_from_sklearn(estimator), estimator)
    raise TypeError(f"from_sklearn does not support {type(estimator).__name__}; supported: LinearRegression, "
                    "Ridge, LogisticRegression, SVC, SVR, MLPClassifier, MLPRegressor, DecisionTree*, "
                    "RandomForest*, ExtraTrees*, GradientBoosting*, CalibratedClassifierCV of these, xgboost "
                    "models, and Pipelines of supported transformers ending in one of these")


def _wrap_trees(tree_model: Any, estimator: Any) -> ImportedModel:
    classes = getattr(estimator, "classes_", None)
    return ImportedModel(tree_model, num_features=int(estimator.n_features_in_), is_classifier=classes is not None,
                         output="probabilities" if classes is not None else "prediction", classes=classes,
                         differentiable=False, estimator_name=type(estimator).__name__)
