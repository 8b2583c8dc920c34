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
ŷ or with a gradient-free sampler); and Pipelines of scalers, PCA, OneHotEncoder and
ColumnTransformers of those ending in one of these, as one function of the raw row (see
:func:`from_sklearn` for the list and the one-hot semantics).
"""

from __future__ import annotations

import dataclasses
import numbers
import warnings
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.types import Array

__all__ = ["ImportedModel", "UnsupportedStepError", "from_sklearn"]


class ImportedModel:
    """A pure JAX function of one input ``x`` ``(d,)`` made from a fitted estimator.

    Attributes: ``num_features`` (d, also as ``n_features_in_``, the name scikit-learn uses), ``is_classifier``,
    ``classes`` (or None), ``differentiable`` (False for piecewise-constant trees), ``output``
    (``"probabilities"``, ``"decision_function"`` or ``"prediction"``), ``estimator_name``,
    ``feature_names_in_`` (the column names of a DataFrame the estimator was fitted on, or None) and
    ``categorical_inputs`` (``{raw column: categories}`` for the columns a Pipeline's OneHotEncoder reads;
    see :func:`from_sklearn`). Columns listed in ``coded_inputs`` hold a category's index (code), not its value.
    """

    def __init__(self, fn: Callable[[Array], Array], *, num_features: int, is_classifier: bool, output: str,
                 classes: Any = None, differentiable: bool = True, estimator_name: str = "",
                 feature_names_in: Any = None, categorical_inputs: dict[int, np.ndarray] | None = None,
                 coded_inputs: tuple[int, ...] = ()):
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
        (as scikit-learn selects them); the categories of ``coded_inputs`` columns (strings, say) become
        their codes, the index in ``categorical_inputs[column]``, and an unknown category becomes NaN
        (which the model encodes as an unknown category). Other columns are cast to the working dtype.
        """
        dtype = np.float64 if jax.config.jax_enable_x64 else np.float32
        if hasattr(x, "columns") and self.feature_names_in_ is not None:
            missing = [name for name in self.feature_names_in_ if name not in x.columns]
            if missing:
                raise ValueError(f"{self.estimator_name}: the DataFrame lacks the columns {missing}")
            x = x[list(self.feature_names_in_)]
        columns = np.asarray(x, dtype=object if self.coded_inputs else None)
        if columns.ndim != 2 or columns.shape[1] != self.num_features:
            raise ValueError(f"expected inputs of shape (n, {self.num_features}), got {columns.shape}")
        if not self.coded_inputs:
            return columns.astype(dtype)
        out = np.empty(columns.shape, dtype)
        for j in range(self.num_features):
            if j in self.coded_inputs:
                out[:, j] = [_category_code(value, self.categorical_inputs[j]) for value in columns[:, j]]
            else:
                out[:, j] = columns[:, j].astype(dtype)
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


class UnsupportedStepError(ValueError, TypeError):
    """A Pipeline step ``from_sklearn`` cannot import; the message names the step and its class.

    A ``ValueError`` (a value the function cannot take) and a ``TypeError`` (what ``from_sklearn``
    raises for an unsupported estimator), so either ``except`` catches it.
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
    """What importing a pipeline collects on the way: the ``one_hot`` mode and the raw categorical columns."""

    one_hot: str
    categorical_inputs: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    coded_inputs: set[int] = dataclasses.field(default_factory=set)


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
    collected = _Collected(one_hot)
    if getattr(first, "n_features_in_", None) is None:
        if first is not final:  # a custom transformer: refused by name here
            _transformer(first, first_path, 0, [], collected)
        raise UnsupportedStepError(f"from_sklearn cannot import {_step_label(first_path, first)}: it states no "
                                   "n_features_in_")
    num_raw = int(first.n_features_in_)
    feature_names = getattr(first, "feature_names_in_", None)
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

    def predict(x: Array) -> Array:
        """One raw row ``(d_raw,)`` → the final estimator's output on the transformed row."""
        for transform in functions:
            x = transform(x)
        return final_fn(x)

    name = "Pipeline(" + " → ".join(f"{path[-1]}: {_kind(step)}" for path, step in steps) + ")"
    return ImportedModel(predict, num_features=num_raw, is_classifier=model.is_classifier, output=model.output,
                         classes=model.classes, differentiable=model.differentiable, estimator_name=name,
                         feature_names_in=feature_names, categorical_inputs=collected.categorical_inputs,
                         coded_inputs=tuple(sorted(collected.coded_inputs)))


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
    if _is(step, compose.ColumnTransformer):
        return _column_transformer(step, path, num_inputs, sources, collected)
    if _is(step, preprocessing.FunctionTransformer):
        raise UnsupportedStepError(f"from_sklearn cannot import {label}: FunctionTransformer(func={step.func!r}) "
                                   "runs arbitrary Python; only FunctionTransformer() without func (the "
                                   "identity) is imported")
    raise UnsupportedStepError(
        f"from_sklearn cannot import {label}; supported transformers: StandardScaler, MinMaxScaler, RobustScaler, "
        "MaxAbsScaler, PCA, OneHotEncoder, ColumnTransformer and Pipelines of these, 'passthrough' and "
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


def _one_hot_tables(encoder: Any) -> list[np.ndarray]:
    """Per input feature ``i``, the ``(n_categories_i, n_outputs_i)`` encoding of each of its categories.

    Read off the encoder's own ``transform`` of a design whose row ``k`` holds every feature's ``k``-th
    category (the last one once a feature runs out), so ``drop``, infrequent grouping and the column
    order are sklearn's, not a re-implementation of them.
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
    widths = getattr(encoder, "_n_features_outs", None)
    if widths is None:  # pragma: no cover - present since scikit-learn 1.1
        raise ValueError("from_sklearn needs OneHotEncoder._n_features_outs (scikit-learn >= 1.1)")
    starts = np.concatenate([[0], np.cumsum(widths)])
    return [encoded[:len(values), starts[i]:starts[i + 1]] for i, values in enumerate(categories)]


def _one_hot_encoder(encoder: Any, label: str, sources: list[int | None], collected: _Collected) -> _Stage:
    """``OneHotEncoder.transform`` of one row: per input feature, its category's row of :func:`_one_hot_tables`.

    Semantics (see :func:`from_sklearn`): numeric categories are matched by value (in the working
    dtype; NaN by ``isnan``), others by code (the raw column holds the index of the category); values
    matching no category get sklearn's unknown-category encoding, or zeros where it raises
    (``handle_unknown="error"``). ``one_hot="nearest"`` reads the nearest category instead.
    """
    tables = _one_hot_tables(encoder)
    infrequent = getattr(encoder, "infrequent_categories_", None)
    features = []
    for i, categories in enumerate(encoder.categories_):
        table = tables[i]
        unknown = np.zeros(table.shape[1])
        if encoder.handle_unknown in ("infrequent_if_exist", "warn") and infrequent is not None \
                and infrequent[i] is not None:  # unknown values join the infrequent category
            unknown = table[int(_category_code(infrequent[i][0], categories))]
        values = _numeric_categories(np.asarray(categories))
        source = sources[i]
        if values is None:  # strings: the raw column holds the category's code
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
        features.append(_category_reader(values, table, unknown, collected.one_hot, label, i))

    def encode(x: Array) -> Array:
        return jnp.concatenate([feature(x[i]) for i, feature in enumerate(features)])

    width = sum(table.shape[1] for table in tables)
    return _Stage(encode, width, [None] * width)


def _category_reader(values: np.ndarray, table: np.ndarray, unknown: np.ndarray, mode: str, label: str,
                     feature: int) -> Callable[[Array], Array]:
    """One feature's encoder: a scalar ``v`` → its ``(n_outputs,)`` encoding.

    ``values`` ``(n,)`` the category values (a NaN one matched by ``isnan``), ``table`` ``(n, n_outputs)``
    their encodings, ``unknown`` ``(n_outputs,)`` the encoding of a value matching none; ``mode``:
    ``"exact"`` (``v == value``) or ``"nearest"`` (the nearest finite value, ties to the lower one).
    The output is piecewise constant in ``v``: its gradient is 0.
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
    indices = np.arange(points.size)

    def exact(v: Array) -> Array:
        match = (v == points).astype(table_finite.dtype)
        return match @ table_finite + jnp.where(jnp.isnan(v), nan_row, (1.0 - jnp.sum(match)) * unknown)

    def nearest(v: Array) -> Array:
        index = jnp.searchsorted(midpoints, v, side="left")  # v on a midpoint reads the lower category
        chosen = (indices == index).astype(table_finite.dtype)
        return jnp.where(jnp.isnan(v), nan_row, chosen @ table_finite if points.size else unknown)

    return exact if mode == "exact" else nearest


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
        How a Pipeline's ``OneHotEncoder`` reads its real-valued raw column ``x[j]`` (ignored otherwise):
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
    infrequent categories), ``ColumnTransformer`` of these (columns by index, boolean mask, slice or,
    when fitted on a DataFrame, name; ``remainder`` ``"drop"``, ``"passthrough"`` or a transformer;
    ``transformer_weights``), nested Pipelines of these, and identity steps (``"passthrough"``,
    ``None``, ``FunctionTransformer()`` without ``func``); the last step is any estimator above. The
    result is ONE function of the raw row ``x`` ``(d_raw,)``, with ``feature_names_in_`` when the
    pipeline was fitted on a DataFrame (``x`` follows that column order).

    One-hot semantics. The raw column holds the category's value when the categories are numbers
    (NaN included, matched by ``isnan``); when they are not (strings), it holds the category's code,
    its index in ``model.categorical_inputs[j]`` (listed in ``model.coded_inputs``;
    :meth:`ImportedModel.to_inputs` converts DataFrame rows). An unknown value is encoded as sklearn
    encodes an unknown category (``"ignore"``: zeros; ``"infrequent_if_exist"``/``"warn"``: the
    infrequent category if there is one, else zeros); with ``handle_unknown="error"``, where sklearn
    raises, it gets zeros too (a traced function cannot raise). The encoding is piecewise constant in
    ``x[j]``: its gradient there is 0. For sampling, keep such columns ``Fixed``, or use
    ``one_hot="nearest"`` with an ``Integer`` constraint over the codes/values.

    Raises ``TypeError`` for an unsupported or unfitted estimator, and :class:`UnsupportedStepError`
    (a ``ValueError`` and a ``TypeError``) naming the Pipeline step (its name and class) it cannot import.
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
