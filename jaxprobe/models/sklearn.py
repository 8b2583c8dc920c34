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
ŷ or with a gradient-free sampler).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.types import Array

__all__ = ["ImportedModel", "from_sklearn"]


class ImportedModel:
    """A pure JAX function of one input ``x`` ``(d,)`` made from a fitted estimator.

    Attributes: ``num_features``, ``is_classifier``, ``classes`` (or None),
    ``differentiable`` (False for piecewise-constant trees), ``output``
    (``"probabilities"``, ``"decision_function"`` or ``"prediction"``), ``estimator_name``.
    """

    def __init__(self, fn: Callable[[Array], Array], *, num_features: int, is_classifier: bool, output: str,
                 classes: Any = None, differentiable: bool = True, estimator_name: str = ""):
        self.fn = fn
        self.num_features = num_features
        self.is_classifier = is_classifier
        self.output = output
        self.classes = None if classes is None else np.asarray(classes)
        self.differentiable = differentiable
        self.estimator_name = estimator_name
        self._batch = jax.jit(jax.vmap(fn))

    def __call__(self, x: Array) -> Array:
        if jnp.shape(x) != (self.num_features,):
            raise ValueError(f"{self.estimator_name} expects one input of shape ({self.num_features},), "
                             f"got {jnp.shape(x)}; use predict_batch for (n, d)")
        return self.fn(x)

    def predict_batch(self, x: Any) -> np.ndarray:
        """``(n, d)`` → ``(n, K)`` or ``(n,)`` as NumPy (jit + vmap)."""
        x = jnp.asarray(x, jnp.float32 if not jax.config.jax_enable_x64 else None)
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


def from_sklearn(estimator: Any) -> ImportedModel:
    """A fitted scikit-learn estimator (or an xgboost model) as a pure JAX function of one input.

    Raises ``TypeError`` for an unsupported or unfitted estimator.
    """
    try:
        from sklearn.base import is_classifier
        from sklearn.exceptions import NotFittedError
        from sklearn.utils.validation import check_is_fitted
    except ImportError as error:  # pragma: no cover
        raise ImportError("from_sklearn needs scikit-learn: pip install scikit-learn") from error
    module = type(estimator).__module__
    if module.startswith("xgboost"):
        from jaxprobe.models.trees import tree_ensemble_from_xgboost

        return _wrap_trees(tree_ensemble_from_xgboost(estimator), estimator)
    try:
        check_is_fitted(estimator)
    except NotFittedError:
        raise TypeError(f"{type(estimator).__name__} is not fitted: call fit first") from None
    except TypeError:
        raise TypeError(f"from_sklearn needs a fitted scikit-learn estimator, got {type(estimator).__name__}") \
            from None
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
                    "RandomForest*, ExtraTrees*, GradientBoosting*, CalibratedClassifierCV of these, and xgboost "
                    "models")


def _wrap_trees(tree_model: Any, estimator: Any) -> ImportedModel:
    classes = getattr(estimator, "classes_", None)
    return ImportedModel(tree_model, num_features=int(estimator.n_features_in_), is_classifier=classes is not None,
                         output="probabilities" if classes is not None else "prediction", classes=classes,
                         differentiable=False, estimator_name=type(estimator).__name__)
