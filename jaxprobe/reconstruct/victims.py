"""The model being reconstructed from (the "victim"), seen as log p_model(y | x) for one point per class.

Two paths:

* :class:`JaxClassifier`: a pure JAX function ``x (D,) -> probabilities (K,)``: any jaxprobe model, a
  :func:`jaxprobe.models.from_sklearn` import (linear, MLP, SVC, trees, XGBoost), a Flax model closed over
  its parameters. Traced into the sampler's compiled program; differentiable unless it says otherwise.
* :class:`BlackBoxClassifier`: an arbitrary Python ``predict_proba`` on NumPy batches ``(n, D) -> (n, K)``
  (a fitted scikit-learn Pipeline, a remote model). It is called through ``jax.pure_callback`` with
  ``vmap_method="expand_dims"`` (or ``"broadcast_all"``), so when the engine vmaps the log density over
  chains the callback receives ALL chains' points in one ``(C, K, D)`` array: ONE host call per MCMC step,
  however many chains and classes. Gradient-free samplers only ("rwmh").

Both expose ``log_class_probabilities(x)``: ``x`` ``(K, D)`` holds one point per class (row k is a
point of class k) and the result ``(K,)`` is ``log p(k | x_k)``, the likelihood term of the
reconstruction posterior (Eq. p̂(x | y) ∝ p_model(y | x) p_prior(x) of the paper).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe._inputs import as_float_array, check_int, check_number
from jaxprobe.types import Array

__all__ = ["JaxClassifier", "BlackBoxClassifier", "as_classifier", "original_errors"]

_VMAP_METHODS = ("expand_dims", "broadcast_all")


@dataclasses.dataclass(frozen=True, eq=False)
class JaxClassifier:
    """A pure JAX classifier ``probability_fn(x (D,)) -> (K,)`` class probabilities.

    ``differentiable=False`` (piecewise-constant trees) restricts reconstruction to "rwmh".

    Examples
    --------
    >>> classifier = JaxClassifier(lambda x: jax.nn.softmax(jnp.stack([x[0], -x[0]])), num_features=2, num_classes=2)
    >>> np.round(np.asarray(classifier.probabilities(jnp.array([[0.0, 1.0], [1.0, 0.0]])), float), 3).tolist()
    [[0.5, 0.5], [0.881, 0.119]]
    >>> np.round(np.asarray(classifier.log_class_probabilities(jnp.zeros((2, 2))), float), 4).tolist()  # log p(k|x_k)
    [-0.6931, -0.6931]
    """

    probability_fn: Callable[[Array], Array]
    num_features: int
    num_classes: int
    differentiable: bool = True
    name: str = "jax"

    black_box: bool = dataclasses.field(default=False, init=False)

    def __post_init__(self):
        if not callable(self.probability_fn):
            raise TypeError(f"probability_fn must be callable, got {type(self.probability_fn).__name__}")
        num_features = check_int(self.num_features, "num_features", minimum=1)
        num_classes = check_int(self.num_classes, "num_classes", minimum=1)
        if num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {num_classes}")
        try:
            out = jax.eval_shape(self.probability_fn, jax.ShapeDtypeStruct((num_features,), jnp.float32))
        except Exception as error:  # noqa: BLE001 - re-raised with the shape that explains it
            raise ValueError(f"probability_fn failed on one input of shape ({num_features},): "
                             f"{type(error).__name__}: {error}") from error
        if getattr(out, "shape", None) != (num_classes,):
            raise ValueError(f"probability_fn must map one input ({num_features},) to class probabilities "
                             f"({num_classes},), got shape {getattr(out, 'shape', type(out).__name__)}")

    def probabilities(self, x: Array) -> Array:
        """``(n, D) -> (n, K)`` (vmapped; traceable)."""
        return jax.vmap(self.probability_fn)(x)

    def log_class_probabilities(self, x: Array) -> Array:
        """``x`` ``(K, D)`` → ``log p(k | x_k)`` ``(K,)``."""
        probabilities = jax.vmap(self.probability_fn)(x)
        return jnp.log(jnp.diagonal(probabilities))


class BlackBoxClassifier:
    """An arbitrary host ``predict_proba`` ``(n, D) NumPy -> (n, K)``, called through ``jax.pure_callback``.

    Parameters
    ----------
    predict_proba
        Python callable on a NumPy ``(n, D)`` float array returning ``(n, K)`` probabilities.
    num_features, num_classes
        D and K.
    vmap_method
        ``"expand_dims"`` (default) or ``"broadcast_all"``: how ``jax.pure_callback`` is batched.
        Either way a vmap over chains becomes ONE call on all chains' points.
    validate
        Call ``predict_proba`` once on a zero input now, so that a function that fails or returns
        something other than probabilities is refused before anything compiles (default True).
    tolerance
        How far an output may be from a probability vector and still count as one (rounding):
        every call's output is checked (:meth:`check_output`) for its shape ``(n, K)``, NaN/inf,
        entries in ``[−tolerance, 1 + tolerance]`` and rows summing to 1 within ``tolerance``; a
        failed check raises ``ValueError`` saying which. Entries within the tolerance outside
        ``[0, 1]`` are read as 0 or 1; rows are not renormalized.

    Attributes
    ----------
    num_calls
        How many times the sampler has called ``predict_proba`` through this object (host counter).

    Examples
    --------
    >>> def predict_proba(rows):                                   # NumPy (n, 2) -> (n, 2) probabilities
    ...     p = 1.0 / (1.0 + np.exp(-rows[:, 0]))
    ...     return np.stack([1.0 - p, p], axis=1)
    >>> classifier = BlackBoxClassifier(predict_proba, num_features=2, num_classes=2)
    >>> classifier.probabilities(np.zeros((3, 2))).tolist(), classifier.num_calls
    ([[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]], 1)
    >>> BlackBoxClassifier(lambda rows: 2.0 * predict_proba(rows), 2, 2)   # refused before anything compiles
    Traceback (most recent call last):
        ...
    ValueError: predict_proba (black-box) returned rows that do not sum to 1 (within 0.0001): ...
    """

    differentiable = False
    black_box = True

    def __init__(self, predict_proba: Callable[[np.ndarray], Any], num_features: int, num_classes: int, *,
                 vmap_method: str = "expand_dims", validate: bool = True, name: str = "black-box",
                 tolerance: float = 1e-4):
        if not callable(predict_proba):
            raise TypeError(f"predict_proba must be callable, got {type(predict_proba).__name__}")
        self.predict_proba = predict_proba
        self.num_features = check_int(num_features, "num_features", minimum=1)
        self.num_classes = check_int(num_classes, "num_classes", minimum=1)
        if self.num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {num_classes}")
        if vmap_method not in _VMAP_METHODS:
            raise ValueError(f"vmap_method must be one of {_VMAP_METHODS}, got {vmap_method!r}")
        self.vmap_method = vmap_method
        self.name = name
        self.tolerance = check_number(tolerance, "tolerance", minimum=0.0, maximum=0.5)
        self.num_calls = 0
        self.failure: BaseException | None = None  # what predict_proba raised inside the last failed callback
        if validate:
            self._call(np.zeros((1, self.num_features)))
            self.num_calls = 0

    def _call(self, rows: np.ndarray) -> np.ndarray:
        self.num_calls += 1
        return self.check_output(self.predict_proba(rows), rows.shape[0])

    def check_output(self, output: Any, num_rows: int) -> np.ndarray:
        """``predict_proba``'s output for ``num_rows`` inputs as ``(n, K)`` float64 probabilities, or a
        ``ValueError`` saying which check failed: shape, NaN/inf, range ``[0, 1]``, row sums (within
        :attr:`tolerance`)."""
        try:
            probabilities = np.asarray(output, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise ValueError(f"predict_proba must return numbers, got {type(output).__name__}: {error}") from None
        where = f"predict_proba ({self.name}) returned"
        expected = (num_rows, self.num_classes)
        if probabilities.shape != expected:
            raise ValueError(f"predict_proba must return {expected} class probabilities for {num_rows} inputs "
                             f"(one row per input), got shape {probabilities.shape} ({self.name})")

        def first(mask: np.ndarray) -> str:  # mask (n, K): how many rows, and the first one
            rows = np.flatnonzero(mask.any(axis=1))
            shown = np.array2string(probabilities[rows[0]], precision=4, threshold=8)
            return f"{rows.size} row(s), e.g. row {rows[0]}: {shown}"

        if not np.all(np.isfinite(probabilities)):
            raise ValueError(f"{where} NaN or inf in {first(~np.isfinite(probabilities))}; it must return class "
                             "probabilities for every input, also outside the range of its training data")
        tolerance = self.tolerance
        if np.any(probabilities < -tolerance):
            raise ValueError(f"{where} negative values in {first(probabilities < -tolerance)}; class probabilities "
                             "lie in [0, 1] (scores or log-probabilities? pass predict_proba)")
        if np.any(probabilities > 1 + tolerance):
            raise ValueError(f"{where} values above 1 in {first(probabilities > 1 + tolerance)}; class "
                             "probabilities lie in [0, 1] (scores or logits? pass predict_proba)")
        sums = probabilities.sum(axis=1)
        off = np.abs(sums - 1.0) > tolerance
        if np.any(off):
            row = int(np.flatnonzero(off)[0])
            raise ValueError(f"{where} rows that do not sum to 1 (within {tolerance:g}): {int(off.sum())} row(s), "
                             f"e.g. row {row} sums to {sums[row]:.6g}; class probabilities of all "
                             f"{self.num_classes} classes must sum to 1 (missing classes? unnormalized scores?)")
        return np.clip(probabilities, 0.0, 1.0)

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """``(n, D) -> (n, K)`` on the host (one call)."""
        x = as_float_array(x, "x", shape=(None, self.num_features))
        return self._call(x)

    def _host_log_class_probabilities(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        lead = x.shape[:-2]
        try:
            probabilities = self._call(x.reshape(-1, self.num_features).astype(np.float64))
        except BaseException as error:  # JAX re-raises it as a JaxRuntimeError: keep it for original_errors
            self.failure = error
            raise
        probabilities = probabilities.reshape(lead + (self.num_classes, self.num_classes))
        with np.errstate(divide="ignore"):  # p = 0 is a legitimate -inf (the class is impossible there)
            return np.log(np.diagonal(probabilities, axis1=-2, axis2=-1)).astype(x.dtype)

    def log_class_probabilities(self, x: Array) -> Array:
        """``x`` ``(K, D)`` → ``log p(k | x_k)`` ``(K,)`` via ONE host callback for all vmapped chains."""
        result = jax.ShapeDtypeStruct((self.num_classes,), x.dtype)
        return jax.pure_callback(self._host_log_class_probabilities, result, x, vmap_method=self.vmap_method)

    def __repr__(self) -> str:
        return f"BlackBoxClassifier({self.name}, D={self.num_features}, K={self.num_classes})"


@contextlib.contextmanager
def original_errors(*classifiers: Any) -> Iterator[None]:
    """Re-raise what a :class:`BlackBoxClassifier`'s ``predict_proba`` raised inside the sampler's host
    callback with its own type (JAX reports any callback failure as a ``JaxRuntimeError``; that error is
    chained as the cause). Wrap the sampling call: ``with original_errors(classifier): answer(...)``.

    Examples
    --------
    >>> def predict_proba(rows):                                   # a black box that fails inside the sampler
    ...     raise KeyError("no column 'age'")
    >>> classifier = BlackBoxClassifier(predict_proba, 2, 2, validate=False)
    >>> logdensity = jax.jit(jax.vmap(classifier.log_class_probabilities))   # chains × (K, D) → (K,)
    >>> with original_errors(classifier):                     # without it: a JaxRuntimeError
    ...     logdensity(jnp.zeros((4, 2, 2))).block_until_ready()
    Traceback (most recent call last):
        ...
    KeyError: "no column 'age'"
    """
    for classifier in classifiers:
        if isinstance(classifier, BlackBoxClassifier):
            classifier.failure = None
    try:
        yield
    except Exception as error:
        for classifier in classifiers:
            failure = getattr(classifier, "failure", None)
            if failure is not None and failure is not error:
                classifier.failure = None
                raise failure.with_traceback(failure.__traceback__) from error
        raise


def as_classifier(model: Any, num_features: int | None = None, num_classes: int | None = None, *,
                  black_box: bool = False) -> JaxClassifier | BlackBoxClassifier:
    """Turn ``model`` into a classifier for reconstruction.

    * :class:`JaxClassifier` / :class:`BlackBoxClassifier`: returned as is.
    * A :class:`jaxprobe.models.ImportedModel` with probabilities: the pure JAX path
      (``differentiable`` taken from it).
    * An object with ``predict_proba`` (scikit-learn estimator, Pipeline, XGBoost): converted with
      :func:`jaxprobe.models.from_sklearn` when it can be and ``black_box`` is False; otherwise
      (``black_box=True``, or from_sklearn rejects it, e.g. a Pipeline with a step it cannot copy) its
      ``predict_proba`` is called through the host callback. ``num_features`` / ``num_classes`` default to ``n_features_in_`` /
      ``len(classes_)``.
    * A plain callable ``x (D,) -> (K,)``: the pure JAX path; needs ``num_features``.

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression
    >>> model = LogisticRegression().fit([[0.0, 1.0], [1.0, 0.0], [2.0, 1.0], [-1.0, 0.0]], [0, 0, 1, 1])
    >>> classifier = as_classifier(model)                     # imported to JAX (from_sklearn): gradients
    >>> type(classifier).__name__, classifier.name, classifier.differentiable
    ('JaxClassifier', 'LogisticRegression', True)
    >>> as_classifier(model, black_box=True)                  # its predict_proba through a host callback
    BlackBoxClassifier(LogisticRegression, D=2, K=2)
    """
    from jaxprobe.models import ImportedModel, from_sklearn

    if isinstance(model, (JaxClassifier, BlackBoxClassifier)):
        return model
    if isinstance(model, ImportedModel):
        if model.output != "probabilities":
            raise ValueError(f"model must give class probabilities; {model!r} gives its {model.output}")
        return JaxClassifier(model.fn, model.num_features, len(model.classes), model.differentiable,
                             model.estimator_name)
    if hasattr(model, "predict_proba"):
        features = num_features if num_features is not None else getattr(model, "n_features_in_", None)
        classes = getattr(model, "classes_", None)
        count = num_classes if num_classes is not None else (len(classes) if classes is not None else None)
        if features is None or count is None:
            raise ValueError("model has no n_features_in_ / classes_: pass num_features and num_classes")
        if not black_box:
            try:
                return as_classifier(from_sklearn(model))
            except (TypeError, ValueError, NotImplementedError, AttributeError):
                pass  # not convertible (a Pipeline, a custom model): the host callback path below
        return BlackBoxClassifier(model.predict_proba, features, count, name=type(model).__name__)
    if callable(model):
        if num_features is None:
            raise ValueError("a plain callable model needs num_features (D)")
        out = jax.eval_shape(model, jax.ShapeDtypeStruct((check_int(num_features, "num_features", minimum=1),),
                                                         jnp.float32))
        count = num_classes if num_classes is not None else (out.shape[0] if out.ndim == 1 else None)
        if count is None:
            raise ValueError(f"model must map (D,) to (K,) probabilities, got output shape {out.shape}")
        return JaxClassifier(model, num_features, count, True, getattr(model, "__name__", "jax"))
    raise TypeError(f"model must be a JAX function, an ImportedModel or have predict_proba; "
                    f"got {type(model).__name__}")
