"""Probing losses G(x) of the probing paper (Eqs. 4–7): each a pure function of one input x → scalar.

A *model* here is any callable ``x -> outputs`` for ONE input ``x`` of shape ``(d,)``:
a scalar (the positive-class probability of a binary classifier, a decision
function, or a regression output) or a vector (class probabilities, or logits
with ``from_logits=True``). Probes compose: ``G = model_contrast(f, g) + 0.1 * localize(x0)``.

Output conventions
------------------
- Binary classifiers may return one probability ``p(y=1|x)`` or two columns
  ``[p0, p1]``; both give the same loss.
- "Disagree" for K classes (``model_contrast``, ``parameter_sensitive``): the
  target distribution for the probed model is ``(1 − q)/(K − 1)`` where ``q`` is
  the reference's class probabilities, i.e. mass moved uniformly off the classes
  the reference believes in. For K = 2 this is exactly the paper's ``1 − ŷ``.
- Cross-entropies take ``log(max(p, 1e-12))`` so that a probability of exactly 0
  (a tree ensemble, a saturated sigmoid) gives a large finite loss, not inf.

Probes are values: the probes below (and their sums and multiples) are equal when built by the same
constructor from the same model objects (compared by identity: a model is the user's own object) and
equal numeric arguments (arrays by dtype, shape and content; a traced argument only to itself). Their
``fn`` is then an equal :class:`jaxprobe._values.Keyed` function, so a question asked again with a probe
written inline reuses its compiled programs. ``Probe(fn)`` of your own function is equal for the same ``fn``.
"""

from __future__ import annotations

import numbers
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe._inputs import as_float_array, check_int, check_number
from jaxprobe._values import Keyed, frozen_array, tree_key, value_key
from jaxprobe.types import Array

__all__ = [
    "Probe",
    "as_probe",
    "model_contrast",
    "prediction_risky",
    "parameter_sensitive",
    "fixed_label",
    "localize",
    "CLASSIFICATION_LOSSES",
]

_LOG_FLOOR = 1e-12


def _is_traced(value: Any) -> bool:
    """Whether ``value`` is a JAX tracer (a hyperparameter vmapped or jitted over, e.g. a sweep's grid axis).

    Traced hyperparameters cannot be checked by value before sampling; their
    shapes and dtypes are still checked, and a bad value makes G(x) NaN so that
    the run (or sweep cell) fails visibly instead of answering a different question.
    """
    return isinstance(value, jax.core.Tracer)
CLASSIFICATION_LOSSES = ("cross_entropy", "squared")
_CONTRAST_LOSSES = ("cross_entropy", "squared", "similarity")


class Probe:
    """A probing loss: callable on one input ``x`` → scalar, closed under ``+`` and scalar ``*``.

    ``Probe(fn, name)`` wraps any function; the probes below return ``Probe`` objects.
    ``dim``: the number of features d of its input when known (the probes below take it from
    their model's ``n_features_in_`` / ``num_features`` or their anchor's length), so that
    :func:`jaxprobe.generate` needs no ``dim``; a sum of probes on different d raises.
    ``models`` and ``head``, when both given, say that G depends on x only through those models:
    ``fn(x) == head(*(model(x) for model in models))`` (``prediction_risky``, ``fixed_label`` without
    ``param_dist`` and ``model_contrast`` set them, sums and multiples keep them); samplers that exploit
    the models' structure (the tree-ensemble Gibbs sampler of :mod:`jaxprobe.samplers`) read them. None: unknown.

    Examples
    --------
    >>> squared_norm = Probe(lambda x: x @ x, "squared_norm")
    >>> float(squared_norm(jnp.ones(2))), float((2.0 * squared_norm + 1.0 * squared_norm)(jnp.ones(2)))
    (2.0, 6.0)
    >>> squared_norm
    Probe(squared_norm)
    """

    def __init__(self, fn: Callable[[Array], Array], name: str = "probe", *, models: Any = None,
                 head: Callable[..., Array] | None = None, dim: int | None = None):
        if not callable(fn):
            raise TypeError(f"a probe must be callable, got {type(fn).__name__}")
        self.fn = fn
        self.name = name
        self.dim: int | None = None if dim is None else check_int(dim, "dim", 1)
        known = models is not None and head is not None
        self.models: tuple | None = tuple(models) if known else None
        self.head: Callable[..., Array] | None = head if known else None

    def __call__(self, x: Array) -> Array:
        return self.fn(x)

    def _value_key(self) -> tuple:
        return ("Probe", value_key(self.fn), self.name, self.dim)

    def __eq__(self, other: Any) -> bool:
        """Equal probes compute the same G (equal ``fn``: see the module notes), with the same name and d."""
        return other is self or (isinstance(other, Probe) and self._value_key() == other._value_key())

    def __hash__(self) -> int:
        return hash(self._value_key())

    def __add__(self, other: Any) -> "Probe":
        other = as_probe(other, "the right operand of +")
        models = head = None
        if self.head is not None and other.head is not None:
            split = len(self.models)
            models = self.models + other.models
            head = lambda *outputs: self.head(*outputs[:split]) + other.head(*outputs[split:])  # noqa: E731
        dim = _same_dim(self.dim, other.dim, f"{self.name} + {other.name}")
        first, second = self.fn, other.fn
        return Probe(Keyed(lambda x: first(x) + second(x), "+", first, second), f"({self.name} + {other.name})",
                     models=models, head=head, dim=dim)

    __radd__ = __add__

    def __mul__(self, scale: Any) -> "Probe":
        if _is_traced(scale):  # a traced real scalar (e.g. a swept weight)
            if jnp.shape(scale) != () or not jnp.issubdtype(jnp.result_type(scale), jnp.number) \
                    or jnp.issubdtype(jnp.result_type(scale), jnp.complexfloating):
                raise TypeError(f"a probe can only be multiplied by a real scalar, got a traced "
                                f"{jnp.result_type(scale)} of shape {jnp.shape(scale)}")
            head = None if self.head is None else (lambda *outputs: scale * self.head(*outputs))
            fn = self.fn
            return Probe(Keyed(lambda x: scale * fn(x), "*", scale, fn), f"(traced) * {self.name}",
                         models=self.models, head=head, dim=self.dim)
        if isinstance(scale, (jax.Array, np.ndarray, np.generic)) and np.shape(scale) == () \
                and np.dtype(scale.dtype).kind in "iuf":  # a concrete 0-d array, e.g. a one-cell sweep's weight
            scale = scale.item()
        if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
            raise TypeError(f"a probe can only be multiplied by a real number, got {type(scale).__name__}")
        scale = float(scale)
        head = None if self.head is None else (lambda *outputs: scale * self.head(*outputs))
        fn = self.fn
        return Probe(Keyed(lambda x: scale * fn(x), "*", scale, fn), f"{scale:g} * {self.name}",
                     models=self.models, head=head, dim=self.dim)

    __rmul__ = __mul__

    def __repr__(self) -> str:
        return f"Probe({self.name})"


def as_probe(value: Any, what: str = "probe") -> Probe:
    """A ``Probe`` from a ``Probe``, a callable, or the number 0 (so ``sum([...])`` works).

    Examples
    --------
    >>> as_probe(lambda x: x @ x)
    Probe(<lambda>)
    >>> as_probe(0)                                           # so that sum([...]) of probes works
    Probe(0)
    """
    if isinstance(value, Probe):
        return value
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and value == 0:
        return Probe(_ZERO, "0", models=(), head=_zero_head)
    if callable(value):
        return Probe(value, getattr(value, "__name__", "probe"), dim=model_dim(value))
    raise TypeError(f"{what} must be a Probe or a callable x -> scalar, got {type(value).__name__}")


def _zero(x: Array) -> Array:
    return jnp.zeros((), jnp.result_type(x))


def _zero_head() -> Array:
    return jnp.zeros((), jnp.float32)


_ZERO = Keyed(_zero, "zero")


def model_dim(model: Any) -> int | None:
    """The number of input features a model states (``n_features_in_``, scikit-learn's name, which
    :func:`jaxprobe.models.from_sklearn` models carry, or ``num_features``), or None."""
    for attribute in ("n_features_in_", "num_features"):
        value = getattr(model, attribute, None)
        if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1:
            return int(value)
    return None


def _same_dim(first: int | None, second: int | None, what: str) -> int | None:
    """The d two parts of a probe agree on (None if neither states it); a ValueError if they differ."""
    if first is not None and second is not None and first != second:
        raise ValueError(f"{what}: the parts take inputs of different lengths ({first} and {second} features)")
    return first if first is not None else second


def _output_range(model: Any) -> tuple[float, float] | None:
    """The range a model's outputs are known to lie in: [0, 1] for class probabilities (a model whose
    ``output`` attribute says ``"probabilities"``, as :func:`jaxprobe.models.from_sklearn` models do),
    else None (unknown)."""
    return (0.0, 1.0) if getattr(model, "output", None) == "probabilities" else None


def _check_model(model: Any, name: str) -> None:
    if not callable(model):
        raise TypeError(f"{name} must be callable (one input x of shape (d,) -> outputs), got {type(model).__name__}")


def _check_output_kind(model: Any, name: str, from_logits: bool) -> None:
    """A model that says what it returns (an imported model's ``output``) agrees with ``from_logits``: read as
    probabilities, a decision function gives a loss without meaning (an SVC's margin of −26 is a "probability"
    whose cross-entropy is negative), and nothing downstream would show it."""
    output = getattr(model, "output", None)
    if output == "decision_function" and not from_logits:
        raise ValueError(f"{name} returns a decision function ({model!r}), not probabilities: pass from_logits=True "
                         "(probabilities σ or softmax of it), or import a classifier that has predict_proba (such as "
                         "SVC(probability=True))")
    if output == "probabilities" and from_logits:
        raise ValueError(f"{name} returns probabilities ({model!r}), not logits: leave from_logits=False")


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")


def _probabilities(output: Array, from_logits: bool) -> Array:
    """Class probabilities ``(K,)`` from a model output: a scalar p(y=1) or a vector."""
    output = jnp.asarray(output)
    if output.ndim == 0 or output.shape == (1,):
        p1 = jax.nn.sigmoid(output.reshape(())) if from_logits else output.reshape(())
        return jnp.stack([1.0 - p1, p1])
    if output.ndim != 1:
        raise ValueError(f"a classifier must return a scalar or a vector of class scores for one input, got shape "
                         f"{output.shape}")
    return jax.nn.softmax(output) if from_logits else output


def _cross_entropy(target: Array, probabilities: Array) -> Array:
    return -jnp.sum(target * jnp.log(jnp.maximum(probabilities, _LOG_FLOOR)))


def _disagreement_target(reference: Array) -> Array:
    """Mass moved off the reference's classes: (1 − q)/(K − 1); equals 1 − q for K = 2."""
    return (1.0 - reference) / (reference.shape[0] - 1)


def _classification_loss(loss: str, target: Array, probabilities: Array) -> Array:
    if loss == "cross_entropy":
        return _cross_entropy(target, probabilities)
    return jnp.sum((probabilities - target) ** 2)


def model_contrast(model: Callable, other: Callable, *, loss: str = "cross_entropy",
                   from_logits: bool = False) -> Probe:
    """Inputs where two models disagree (probing paper, Eq. 5): ``G(x) = ℓ(y(x), 1 − ŷ(x))``.

    Parameters
    ----------
    model, other
        Callables of one input. ``other`` is ŷ, the model compared against; it
        may be non-differentiable (a tree ensemble): its gradient is then zero
        almost everywhere and the gradient flows through ``model``. When both are
        differentiable the full gradient of G is used (sampling exp(−G/τ) needs it).
    loss
        ``"cross_entropy"`` or ``"squared"`` for classifiers (probabilities, see
        the module notes for K > 2); ``"similarity"`` for regressors, the
        paper's ``exp(−(y1 − y2)²)`` (Appendix D, Fig. 8), summed over outputs.
    from_logits
        Model outputs are logits (softmax / sigmoid applied here).

    Examples
    --------
    >>> model = lambda x: jax.nn.sigmoid(x @ jnp.array([2.0, -1.0]))   # P(y = 1 | x), 2 features
    >>> other = lambda x: jax.nn.sigmoid(x @ jnp.array([-1.0, 2.0]))
    >>> disagree = model_contrast(model, other)                 # small where the two models disagree
    >>> bool(disagree(jnp.array([1.0, -1.0])) < disagree(jnp.array([1.0, 1.0])))
    True
    """
    _check_model(model, "model")
    _check_model(other, "other")
    _check_choice("loss", loss, _CONTRAST_LOSSES)
    if loss != "similarity":
        _check_output_kind(model, "model", from_logits)
        _check_output_kind(other, "other", from_logits)

    if loss == "similarity":
        def head(output, other_output):
            return jnp.sum(jnp.exp(-((jnp.asarray(output) - jnp.asarray(other_output)) ** 2)))
    else:
        def head(output, other_output):
            p = _probabilities(output, from_logits)
            q = _probabilities(other_output, from_logits)
            return _classification_loss(loss, _disagreement_target(q), p)

    def contrast(x):
        return head(model(x), other(x))

    return Probe(Keyed(contrast, "model_contrast", model, other, loss, from_logits), f"model_contrast[{loss}]",
                 models=(model, other), head=head,
                 dim=_same_dim(model_dim(model), model_dim(other), "model_contrast(model, other)"))


def prediction_risky(model: Callable, alpha: Any = 0.5, *, r: float = 2,
                     output_range: tuple[float, float] | None = None) -> Probe:
    """Inputs the model is undecided about: ``G(x) = ‖f(x) − α‖_r^r`` (probing paper, Sec. 3).

    ``f`` is whatever ``model`` returns (decision function or probabilities);
    ``alpha`` is a scalar or an array broadcastable to the model's output shape.
    ``output_range``: ``(low, high)`` the model's outputs lie in; α is checked against it
    (an α outside asks for outputs the model never gives: the loss is then smallest on the
    range's edge, not at α). Default: ``(0, 1)`` for a model that says it gives probabilities
    (``model.output == "probabilities"``, as ``from_sklearn`` models do), else unchecked;
    pass ``output_range=(0, 1)`` for a plain function returning probabilities.

    Examples
    --------
    >>> model = lambda x: jax.nn.sigmoid(x @ jnp.array([2.0, -1.0]))   # P(y = 1 | x), 2 features
    >>> risky = prediction_risky(model, alpha=0.5)             # G(x) = (f(x) − ½)²
    >>> float(risky(jnp.array([0.5, 1.0]))), round(float(risky(jnp.array([3.0, 0.0]))), 4)   # undecided; sure
    (0.0, 0.2475)
    """
    _check_model(model, "model")
    check_number(r, "r", minimum=1.0, finite=False)  # checked, not converted: r=2 stays an integer power
    if output_range is None:
        output_range = _output_range(model)
    elif not (isinstance(output_range, (tuple, list)) and len(output_range) == 2):
        raise TypeError(f"output_range must be a (low, high) pair, got {output_range!r}")
    else:
        output_range = (check_number(output_range[0], "output_range[0]", finite=False),
                        check_number(output_range[1], "output_range[1]", finite=False))
        if not output_range[0] < output_range[1]:
            raise ValueError(f"output_range must have low < high, got {output_range}")
    traced = _is_traced(alpha)
    if traced:  # e.g. α as a sweep's grid axis: checked for finiteness when G is evaluated (NaN if not)
        alpha_array = alpha
    else:
        alpha_array = frozen_array(as_float_array(alpha, "alpha"))
        if output_range is not None and np.any((alpha_array < output_range[0]) | (alpha_array > output_range[1])):
            raise ValueError(f"alpha must lie in the model's output range [{output_range[0]:g}, "
                             f"{output_range[1]:g}], got {alpha!r}")

    def head(output):
        output = jnp.asarray(output)
        if alpha_array.ndim > output.ndim or any(
                a not in (1, o) for a, o in zip(alpha_array.shape[::-1], output.shape[::-1])):
            raise ValueError(f"alpha of shape {alpha_array.shape} does not match the model output shape {output.shape}")
        value = jnp.sum(jnp.abs(output - alpha_array.astype(output.dtype)) ** r)
        if traced:
            value = jnp.where(jnp.all(jnp.isfinite(alpha_array)), value, jnp.nan)
        return value

    def risky(x):
        return head(model(x))

    return Probe(Keyed(risky, "prediction_risky", model, alpha_array, r), f"prediction_risky[r={r:g}]",
                 models=(model,), head=head, dim=model_dim(model))


def _stacked_parameter_draws(param_dist: Any) -> tuple[Any, Any]:
    draws = getattr(param_dist, "draws", None)
    if draws is None:
        raise TypeError("param_dist must be a parameter distribution from jaxprobe.models "
                        "(PointMass, GaussianPerturbation, Ensemble, PosteriorSamples) with .draws")
    return draws, getattr(param_dist, "center", None)


def parameter_sensitive(apply_fn: Callable, param_dist: Any, *, loss: str = "cross_entropy",
                        from_logits: bool = False) -> Probe:
    """Inputs whose prediction flips when the parameters move (probing paper, Eq. 6).

    ``G(x) = E_{θ~q} ℓ(y_θ(x), 1 − y_θ*(x))``, the expectation by the K stored draws
    of ``param_dist`` evaluated with ``vmap``. ``apply_fn(params, x)`` gives the
    model output for one input. θ* is ``param_dist.center``; without one (an
    ensemble) the reference is the mean prediction over the draws.
    ``loss``: ``"cross_entropy"`` / ``"squared"`` for classifiers (any K), or
    ``"similarity"`` (``exp(−(y_θ − y_θ*)²)``) for regression outputs.

    Examples
    --------
    >>> from jaxprobe.models import GaussianPerturbation
    >>> apply_fn = lambda params, x: jax.nn.sigmoid(x @ params["w"])       # P(y = 1 | x; θ), 2 features
    >>> q = GaussianPerturbation({"w": jnp.array([2.0, -1.0])}, sigma=0.5, num_draws=8, rng_key=jax.random.key(0))
    >>> sensitive = parameter_sensitive(apply_fn, q)             # small where the draws θ ~ q disagree with θ*
    >>> bool(sensitive(jnp.array([0.5, 1.0])) < sensitive(jnp.array([3.0, 0.0])))   # on θ*'s boundary; far off
    True
    """
    _check_model(apply_fn, "apply_fn")
    _check_choice("loss", loss, _CONTRAST_LOSSES)
    draws, center = _stacked_parameter_draws(param_dist)

    def sensitive(x):
        outputs = jax.vmap(lambda params: jnp.asarray(apply_fn(params, x)))(draws)
        if loss == "similarity":
            reference = jnp.asarray(apply_fn(center, x)) if center is not None else jnp.mean(outputs, axis=0)
            return jnp.mean(jnp.sum(jnp.exp(-((outputs - reference) ** 2)).reshape(outputs.shape[0], -1), axis=1))
        probabilities = jax.vmap(lambda out: _probabilities(out, from_logits))(outputs)
        if center is not None:
            reference = _probabilities(apply_fn(center, x), from_logits)
        else:
            reference = jnp.mean(probabilities, axis=0)
        target = _disagreement_target(reference)
        return jnp.mean(jax.vmap(lambda p: _classification_loss(loss, target, p))(probabilities))

    return Probe(Keyed(sensitive, "parameter_sensitive", apply_fn, tree_key(draws), tree_key(center), loss,
                       from_logits), f"parameter_sensitive[{loss}]")


def fixed_label(model: Callable, target: Any, *, loss: str = "cross_entropy", param_dist: Any = None,
                from_logits: bool = False) -> Probe:
    """Inputs the model gives a chosen prediction y′ (probing paper, Eq. 7): ``G(x) = ℓ(y(x), y′)``.

    ``target``: a class index or a probability vector (``loss="cross_entropy"`` or
    ``"squared"`` on probabilities), or a regression value (``loss="squared"``:
    ``Σ (y(x) − y′)²``). With ``param_dist`` given, ``model`` is ``apply_fn(params, x)``
    and the loss is averaged over the parameter draws (the q(θ) form of Eq. 7).
    Counterfactuals: add ``localize(anchor)`` and ask for the other label.
    ``from_logits=True``: the outputs are logits (σ or softmax gives the probabilities); an imported model that
    declares a decision function (``from_sklearn(SVC())``) needs it, and one that declares probabilities refuses it.

    Examples
    --------
    >>> model = lambda x: jax.nn.sigmoid(x @ jnp.array([2.0, -1.0]))   # P(y = 1 | x), 2 features
    >>> label_one = fixed_label(model, 1)                      # G(x) = cross-entropy of f(x) against y′ = 1
    >>> round(float(label_one(jnp.array([3.0, 0.0]))), 4), round(float(label_one(jnp.array([-3.0, 0.0]))), 4)
    (0.0025, 6.0025)
    """
    _check_model(model, "model")
    _check_choice("loss", loss, CLASSIFICATION_LOSSES)
    traced = _is_traced(target)
    if traced:
        # A traced target (e.g. a sweep's grid axis): shape and dtype are known, values are checked when G is
        # evaluated, where an impossible target (class out of range, not a probability vector) gives NaN.
        target_array = target
        if not jnp.issubdtype(target.dtype, jnp.number) or jnp.issubdtype(target.dtype, jnp.complexfloating):
            raise TypeError(f"target must be real, got a traced {target.dtype}")
        is_class_index = jnp.issubdtype(target.dtype, jnp.integer) and target.ndim == 0
    else:
        target_array = frozen_array(_as_target(target))
        is_class_index = np.issubdtype(target_array.dtype, np.integer) and target_array.ndim == 0
        if is_class_index and target_array < 0:
            raise ValueError(f"target class index must be >= 0, got {int(target_array)}")
        if loss == "cross_entropy" and not is_class_index:
            if target_array.ndim != 1 or np.any(target_array < 0) or not np.isclose(target_array.sum(), 1.0):
                raise ValueError("with loss='cross_entropy', target must be a class index or a probability vector "
                                 f"summing to 1, got {target!r}")
    if param_dist is None and (loss == "cross_entropy" or is_class_index):  # the loss reads class probabilities
        _check_output_kind(model, "model", from_logits)

    def one_model_loss(output):
        if loss == "squared" and not is_class_index and target_array.ndim <= jnp.ndim(output) \
                and (jnp.ndim(output) == 0 or target_array.shape == jnp.shape(output)):
            value = jnp.sum((jnp.asarray(output) - target_array.astype(jnp.result_type(output))) ** 2)
            return jnp.where(jnp.all(jnp.isfinite(target_array)), value, jnp.nan) if traced else value
        probabilities = _probabilities(output, from_logits)
        num_classes = probabilities.shape[0]
        if is_class_index:
            if traced:
                valid = (target_array >= 0) & (target_array < num_classes)
                wanted = jax.nn.one_hot(target_array, num_classes, dtype=probabilities.dtype)
                return jnp.where(valid, _classification_loss(loss, wanted, probabilities), jnp.nan)
            if int(target_array) >= num_classes:
                raise ValueError(f"target class {int(target_array)} is out of range for {num_classes} classes")
            wanted = jax.nn.one_hot(int(target_array), num_classes, dtype=probabilities.dtype)
        else:
            if target_array.shape != (num_classes,):
                raise ValueError(f"target of shape {target_array.shape} does not match {num_classes} classes")
            wanted = target_array.astype(probabilities.dtype)
            if traced:
                valid = jnp.all(jnp.isfinite(wanted))
                if loss == "cross_entropy":
                    valid = valid & jnp.all(wanted >= 0) & (jnp.abs(jnp.sum(wanted) - 1.0) <= 1e-5)
                return jnp.where(valid, _classification_loss(loss, wanted, probabilities), jnp.nan)
        return _classification_loss(loss, wanted, probabilities)

    if param_dist is None:
        def fixed(x):
            return one_model_loss(model(x))

        return Probe(Keyed(fixed, "fixed_label", model, target_array, loss, from_logits), f"fixed_label[{loss}]",
                     models=(model,), head=one_model_loss, dim=model_dim(model))
    draws, _ = _stacked_parameter_draws(param_dist)

    def fixed(x):
        return jnp.mean(jax.vmap(lambda params: one_model_loss(model(params, x)))(draws))

    return Probe(Keyed(fixed, "fixed_label", model, target_array, loss, from_logits, tree_key(draws)),
                 f"fixed_label[{loss}]")


def _as_target(target: Any) -> np.ndarray:
    """A concrete ``fixed_label`` target: a class index (an int or an integer array) as is; anything else (a
    list, a DataFrame row, ...) as finite float64 values; strings and bools are refused, naming ``target``."""
    if isinstance(target, numbers.Integral) and not isinstance(target, (bool, np.bool_)):
        return np.asarray(target)
    if isinstance(target, (np.ndarray, jax.Array)) and np.dtype(target.dtype).kind in "iu":
        return np.asarray(target)
    return as_float_array(target, "target")


def localize(anchor: Any, weights: Any = None, *, r: float = 2) -> Probe:
    """Stay near an anchor point: ``R(x) = Σ_j w_j |x_j − a_j|^r`` (the localizer R_G of Eq. 7).

    ``weights`` ``(d,)`` (default ones) must be ≥ 0: a weight of 0 frees a feature,
    a large weight pins it softly (use ``constraints.Fixed`` to pin it exactly).

    Examples
    --------
    >>> near = localize(jnp.array([1.0, 1.0]))                # R(x) = |x − a|²
    >>> float(near(jnp.array([1.0, 3.0])))
    4.0
    >>> model = lambda x: jax.nn.sigmoid(x @ jnp.array([2.0, -1.0]))
    >>> fixed_label(model, 1) + 0.1 * near                    # a counterfactual near a: a sum of probes
    Probe((fixed_label[cross_entropy] + 0.1 * localize[r=2]))
    """
    # A traced anchor or weights (e.g. a sweep's grid axis) are checked when R is evaluated: NaN if invalid.
    traced_anchor, traced_weights = _is_traced(anchor), _is_traced(weights)
    anchor_array = anchor if traced_anchor else frozen_array(as_float_array(anchor, "anchor", finite=False))
    if anchor_array.ndim != 1 or not (traced_anchor or np.all(np.isfinite(anchor_array))):
        raise ValueError(f"anchor must be a finite vector (d,), got shape {anchor_array.shape}")
    if weights is None:
        weight_array = np.ones(anchor_array.shape)
    else:
        weight_array = weights if traced_weights else frozen_array(as_float_array(weights, "weights", finite=False))
        if weight_array.shape != anchor_array.shape:
            raise ValueError(f"weights must have the anchor's shape {anchor_array.shape}, got {weight_array.shape}")
        if not traced_weights and (not np.all(np.isfinite(weight_array)) or np.any(weight_array < 0)):
            raise ValueError("weights must be finite and >= 0")
    check_number(r, "r", minimum=1.0, finite=False)  # checked, not converted: r=2 stays an integer power

    def localizer(x):
        if x.shape != anchor_array.shape:
            raise ValueError(f"localize: input of shape {x.shape} does not match the anchor's {anchor_array.shape}")
        a = anchor_array.astype(x.dtype)
        value = jnp.sum(weight_array.astype(x.dtype) * jnp.abs(x - a) ** r)
        if traced_anchor or traced_weights:
            valid = jnp.all(jnp.isfinite(anchor_array)) & jnp.all(jnp.isfinite(weight_array)) & jnp.all(
                weight_array >= 0)
            value = jnp.where(valid, value, jnp.nan)
        return value

    return Probe(Keyed(localizer, "localize", anchor_array, weight_array, r), f"localize[r={r:g}]",
                 dim=int(anchor_array.shape[0]))
