"""From a validated :class:`jaxprobe.config.Config` to data, models, probes, and a run or a sweep.

Everything happens in the data set's standardized units (the models are fitted
there); samples are reported in original units through the data set's
standardization. Numeric hyperparameters (α, target label, localizer weight,
anchor index, temperature, seed, step size) enter the probe as traced values,
so a sweep over them is one compiled program.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import time
import warnings
import weakref
import zipfile
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe import constraints as constraints_module
from jaxprobe import datasets, priors, probes
from jaxprobe._inputs import check_int
from jaxprobe._io import atomic_write, is_writer, write_npz_member
from jaxprobe._pointwise import map_points
from jaxprobe._values import Identity, Keyed, value_key
from jaxprobe.config import OBSERVABLES, TREE_KINDS, ConfigError, Config, observables_for, precision_observable
from jaxprobe.engine.api import CheckpointMismatchError
from jaxprobe.engine.checkpoint import CheckpointIfLong
from jaxprobe.engine.compiled import jit_bounded
from jaxprobe.models import GaussianPerturbation, from_sklearn
from jaxprobe.sweeps.core import FINISHED, SweepProblem, SweepResult, sweep

__all__ = ["Prepared", "build_problem", "check_config", "run_config", "sweep_config", "load_network", "ENGINE_KEYS",
           "OBSERVABLES", "MAKERS", "observables_for", "make_observables"]

#: Config keys the sweep engine takes directly (the rest are probe parameters).
ENGINE_KEYS = {"sampler.temperature": "temperature", "sampler.seed": "seed", "sampler.step_size": "step_size",
               "sampler.name": "sampler", "sampler.num_chains": "num_chains", "sampler.num_samples": "num_samples",
               "sampler.num_warmup": "num_warmup", "sampler.thin": "thin", "sampler.step_size_mode": "step_size_mode"}

_ACTIVATION_FUNCTIONS = {"relu": jax.nn.relu, "tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid, "logistic": jax.nn.sigmoid,
                         "identity": lambda h: h}


# ------------------------------------------------------------------ models


class Model:
    """A model on standardized inputs: ``fn(x)`` → class probabilities ``(K,)`` or a regression value;
    ``apply_fn(params, x)`` and ``params`` when it has parameters θ (dense networks)."""

    def __init__(self, fn, *, differentiable=True, apply_fn=None, params=None, name=""):
        self.fn, self.differentiable, self.apply_fn, self.params, self.name = fn, differentiable, apply_fn, params, name


def dense_apply(activation: str, output: str):
    """``apply(params, x)`` of a dense network ``params = [{"w": (n_in, n_out), "b": (n_out,)}, ...]``.

    ``output``: ``"sigmoid"`` (one logit → ``[1 − p, p]``), ``"softmax"`` (class
    probabilities) or ``"identity"`` (a regression value; scalar for one output).
    """
    hidden = _ACTIVATION_FUNCTIONS[activation]

    def apply(params, x):
        h = x
        for layer in params[:-1]:
            h = hidden(h @ layer["w"] + layer["b"])
        out = h @ params[-1]["w"] + params[-1]["b"]
        if output == "sigmoid":
            p = jax.nn.sigmoid(out.reshape(-1)[0])
            return jnp.stack([1.0 - p, p])
        if output == "softmax":
            return jax.nn.softmax(out)
        return out.reshape(()) if out.shape == (1,) else out

    return apply


def _network_arrays(path: str) -> dict[str, tuple[np.ndarray, str]]:
    """The arrays of a saved network by their ``w{i}``/``b{i}`` name, each with the name it has in the file
    (``w0``; ``Dense_0/kernel`` for Flax linen's layout)."""
    if path.endswith(".npz"):
        with np.load(path, allow_pickle=False) as data:
            return {name: (np.asarray(data[name]), name) for name in data.files}
    from flax import serialization

    with open(path, "rb") as stream:
        tree = serialization.msgpack_restore(stream.read())
    root = "params/" if isinstance(tree, dict) and "params" in tree else ""
    tree = tree.get("params", tree) if isinstance(tree, dict) else tree
    if not isinstance(tree, dict):
        raise ValueError(f"{path}: expected a table of arrays (w0, b0, ... or flax params), got "
                         f"{type(tree).__name__}")
    arrays = {}
    for name, value in tree.items():
        if isinstance(value, dict) and name.startswith("Dense_") and {"kernel", "bias"} <= set(value):
            index = name.split("_", 1)[1]
            arrays[f"w{index}"] = (np.asarray(value["kernel"]), f"{root}{name}/kernel")
            arrays[f"b{index}"] = (np.asarray(value["bias"]), f"{root}{name}/bias")
        elif not isinstance(value, dict):
            arrays[name] = (np.asarray(value), f"{root}{name}")
    return arrays


def _network_layer(path: str, index: int, arrays: dict[str, tuple[np.ndarray, str]]) -> dict[str, np.ndarray]:
    """Layer ``index`` as float32 ``{"w": (n_in, n_out), "b": (n_out,)}``, or a ValueError naming the file, the
    layer and the array: not numbers, wrong shapes, NaN or inf."""
    if f"b{index}" not in arrays:
        raise ValueError(f"{path}: w{index} has no bias b{index}")
    layer = {}
    for key, name, ndim in (("w", f"w{index}", 2), ("b", f"b{index}", 1)):
        array, label = arrays[name]
        what = f"{path}: layer {index} {'weights' if key == 'w' else 'bias'} {label}"
        if array.dtype.kind not in "iuf":
            raise ValueError(f"{what} must hold numbers, got dtype {array.dtype}")
        if array.ndim != ndim:
            raise ValueError(f"{what} must have {ndim} dimension(s), got shape {array.shape}")
        with np.errstate(over="ignore"):  # an overflow is reported below, by name
            single = array.astype(np.float32)
        for values, problem in ((array, "NaN or inf"), (single, "values beyond float32's range")):
            if not np.all(np.isfinite(values)):
                bad = np.argwhere(~np.isfinite(values))
                raise ValueError(f"{what} holds {problem} ({len(bad)} of {array.size} entries, the first at "
                                 f"index {tuple(int(i) for i in bad[0])}); a network's weights must be finite")
        layer[key] = single
    if layer["b"].shape[0] != layer["w"].shape[1]:
        raise ValueError(f"{path}: layer {index} has {layer['w'].shape[1]} outputs but its bias "
                         f"{arrays[f'b{index}'][1]} has {layer['b'].shape[0]} entries")
    return layer


def load_network(path: str) -> list[dict[str, np.ndarray]]:
    """Dense-network weights from ``.npz`` (arrays ``w0, b0, w1, b1, ...``, no pickle) or flax ``.msgpack``
    (``{"w0": ..., "b0": ...}``, or Flax linen's ``{"params": {"Dense_0": {"kernel", "bias"}, ...}}``).

    Returns one ``{"w": (n_in, n_out), "b": (n_out,)}`` float32 dict per layer. Raises a ValueError naming
    the file and the layer for a missing bias, arrays of the wrong rank or size, non-numbers and NaN/inf
    entries (found here, when the file is read, rather than as a non-finite log density while sampling).

    Examples
    --------
    >>> np.savez("network.npz", w0=np.ones((2, 3)), b0=np.zeros(3), w1=np.ones((3, 1)), b1=np.zeros(1))
    >>> [(layer["w"].shape, layer["b"].dtype) for layer in load_network("network.npz")]   # 2 → 3 → 1
    [((2, 3), dtype('float32')), ((3, 1), dtype('float32'))]
    >>> np.savez("broken.npz", w0=np.ones((2, 3)), b0=np.zeros(2))
    >>> load_network("broken.npz")
    Traceback (most recent call last):
        ...
    ValueError: broken.npz: layer 0 has 3 outputs but its bias b0 has 2 entries
    """
    arrays = _network_arrays(path)
    layers, index = [], 0
    while f"w{index}" in arrays:
        layers.append(_network_layer(path, index, arrays))
        index += 1
    if not layers:
        raise ValueError(f"{path}: no dense layers found (expected arrays w0, b0, w1, b1, ... or flax Dense_i)")
    for i, (a, b) in enumerate(zip(layers[:-1], layers[1:])):
        if a["w"].shape[1] != b["w"].shape[0]:
            raise ValueError(f"{path}: layer {i} has {a['w'].shape[1]} outputs but layer {i + 1} takes "
                             f"{b['w'].shape[0]} inputs")
    return layers


def _probabilistic_svc(options: dict):
    """An SVC with probabilities: libsvm's Platt scaling while scikit-learn has ``probability=True``
    (deprecated in 1.9, removed in 1.11), else its replacement ``CalibratedClassifierCV(SVC(), ensemble=False)``
    (sigmoid calibration on 5-fold cross-validated decision values, as libsvm does). Both import with
    ``from_sklearn``."""
    from sklearn import svm

    if "probability" in svm.SVC().get_params():
        return svm.SVC(**{"probability": True, **options})
    from sklearn.calibration import CalibratedClassifierCV

    return CalibratedClassifierCV(svm.SVC(**options), ensemble=False)


def _estimator(kind: str, task: str, options: dict, seed: int):
    from sklearn import ensemble, linear_model, neural_network, svm, tree

    classify = task != "regression"
    options = {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
    if kind == "logistic_regression":
        return linear_model.LogisticRegression(**{"max_iter": 2000, **options})
    if kind == "linear_regression":
        return linear_model.LinearRegression(**options)
    if kind == "ridge":
        return linear_model.Ridge(**options)
    if kind == "mlp":
        cls = neural_network.MLPClassifier if classify else neural_network.MLPRegressor
        return cls(**{"hidden_layer_sizes": (16,), "max_iter": 500, "random_state": seed, **options})
    if kind in ("svm_rbf", "svm_poly"):
        kernel = {"kernel": kind.split("_")[1]}
        if classify:
            return _probabilistic_svc({**kernel, "random_state": seed, **options})
        return svm.SVR(**{**kernel, **options})
    if kind == "decision_tree":
        cls = tree.DecisionTreeClassifier if classify else tree.DecisionTreeRegressor
        return cls(**{"max_depth": 5, "random_state": seed, **options})
    if kind == "random_forest":
        cls = ensemble.RandomForestClassifier if classify else ensemble.RandomForestRegressor
        return cls(**{"n_estimators": 50, "max_depth": 6, "random_state": seed, **options})
    cls = ensemble.GradientBoostingClassifier if classify else ensemble.GradientBoostingRegressor
    return cls(**{"n_estimators": 50, "max_depth": 3, "random_state": seed, **options})


def _dense_from_sklearn(estimator) -> tuple[list[dict[str, np.ndarray]], str, str] | None:
    """θ of a logistic regression or an MLP as dense layers, for parameter_sensitive."""
    name = type(estimator).__name__
    if name == "LogisticRegression":
        coef, intercept = np.asarray(estimator.coef_, np.float32), np.asarray(estimator.intercept_, np.float32)
        output = "sigmoid" if coef.shape[0] == 1 else "softmax"
        return [{"w": coef.T, "b": intercept}], "identity", output
    if name in ("MLPClassifier", "MLPRegressor"):
        layers = [{"w": np.asarray(w, np.float32), "b": np.asarray(b, np.float32)}
                  for w, b in zip(estimator.coefs_, estimator.intercepts_)]
        output = {"logistic": "sigmoid", "softmax": "softmax", "identity": "identity"}[estimator.out_activation_]
        return layers, estimator.activation, output
    return None


_CACHE: OrderedDict[str, Any] = OrderedDict()
_CACHE_SIZE = 64  # data sets, splits and fitted models of recent configurations (a long-lived process keeps no more)


def _cached(key: Any, make):
    text = json.dumps(key, sort_keys=True, default=str)
    if text in _CACHE:
        _CACHE.move_to_end(text)
        return _CACHE[text]
    value = _CACHE[text] = make()
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return value


# ------------------------------------------------------------------ data and models of one configuration


class Prepared:
    """Data, standardized splits, the fitted model(s), anchors and feature columns of one static configuration.

    Examples
    --------
    >>> from jaxprobe.config import parse_config
    >>> config = parse_config('''
    ... [data]
    ... name = "moons"
    ... [model]
    ... kind = "logistic_regression"
    ... [probe]
    ... type = "prediction_risky"
    ... alpha = 0.5
    ... [sampler]
    ... temperature = 0.1
    ... ''')
    >>> prepared = Prepared(config)                          # moons split and standardized; the model fitted
    >>> prepared.task, prepared.num_classes, prepared.z_train.shape
    ('binary', 2, (750, 2))
    >>> bool(np.allclose(prepared.z_train.mean(axis=0), 0.0, atol=0.1))   # standardized units
    True
    >>> prepared.model_outputs(prepared.model, prepared.z_test[:3]).shape   # class probabilities
    (3, 2)
    """

    def __init__(self, config: Config):
        data = config.sections["data"]
        self.config = config
        self.dataset = _cached(("data", data["name"], data["options"]), lambda: _load(data))
        self.train, self.test = _cached(("split", data), lambda: self.dataset.train_test_split(
            seed=data["split_seed"], test_fraction=data["test_fraction"]))
        self.z_train = self.dataset.standardize(self.train.x).astype(np.float32)
        self.z_test = self.dataset.standardize(self.test.x).astype(np.float32)
        self.task = self.dataset.task
        self.num_features = self.z_train.shape[1]
        self.num_classes = None if self.task == "regression" else len(self.dataset.class_names)
        self.model = self._model("model")
        self.compare = self._model("compare") if "compare" in config.sections else None

    def _model(self, section: str) -> Model:
        settings = self.config.sections[section]
        data = self.config.sections["data"]
        if settings.get("path"):
            def make():
                try:
                    layers = load_network(settings["path"])
                except (OSError, ValueError, KeyError) as error:
                    raise ConfigError(f"[{section}] path: cannot load {settings['path']!r}: {error}") from None
                if layers[0]["w"].shape[0] != self.num_features:
                    raise ConfigError(f"[{section}] path: the network takes {layers[0]['w'].shape[0]} inputs but "
                                      f"{data['name']} has {self.num_features} features")
                apply = dense_apply(settings["activation"], settings["output"])
                params = jax.tree.map(jnp.asarray, layers)
                return Model(lambda x: apply(params, x), apply_fn=apply, params=params, name=settings["path"])

            return _cached((section, "path", settings, os.path.getmtime(settings["path"])
                            if os.path.exists(settings["path"]) else None), make)

        def fit():
            estimator = _estimator(settings["kind"], self.task, settings["options"], settings["seed"])
            try:
                with warnings.catch_warnings():
                    # sklearn 1.9 deprecates SVC(probability=True): the config chose it (see _probabilistic_svc),
                    # not the user's code, so the FutureWarning would only be noise.
                    warnings.filterwarnings("ignore", message=".*probability.*deprecated", category=FutureWarning)
                    estimator.fit(self.z_train, self.train.y)
            except (TypeError, ValueError) as error:
                raise ConfigError(f"[{section}] options: {settings['kind']} cannot be fitted with "
                                  f"{settings['options']}: {error}") from None
            imported = from_sklearn(estimator)
            dense = _dense_from_sklearn(estimator)
            apply_fn = params = None
            if dense is not None:
                layers, activation, output = dense
                apply_fn, params = dense_apply(activation, output), jax.tree.map(jnp.asarray, layers)
            model = Model(imported, differentiable=settings["kind"] not in TREE_KINDS, apply_fn=apply_fn,
                          params=params, name=settings["kind"])
            model.estimator = estimator
            return model

        try:
            return _cached((section, settings, data), fit)
        except TypeError as error:  # an unknown estimator option
            raise ConfigError(f"[{section}] options: {error}") from None

    def model_outputs(self, model: Model, z: np.ndarray) -> np.ndarray:
        """Model outputs for rows of standardized inputs ``(n, d)``: one compiled program per model and row count,
        kept for the next run of the same file (a fresh ``jax.jit`` compiled it on every run), in blocks of rows
        where the model's hidden layers over every draw at once would not fit (:func:`jaxprobe._pointwise.map_points`)."""
        return np.asarray(_outputs_at(model.fn, jnp.asarray(z, jnp.float32)))

    def test_outputs(self, model: Model) -> np.ndarray:
        """:meth:`model_outputs` at the test split's rows, computed once per fitted model (models are cached per
        process: a file run again scores its model on the same rows; ~4 ms a run, a tenth of a small run's
        overhead)."""
        known = _TEST_OUTPUTS.get(model)
        if known is None or not np.array_equal(known[0], self.z_test):
            known = _TEST_OUTPUTS[model] = (self.z_test, self.model_outputs(model, self.z_test))
        return known[1]


#: A fitted model's outputs at the rows of its test split (:meth:`Prepared.test_outputs`), forgotten with the model.
_TEST_OUTPUTS: "weakref.WeakKeyDictionary[Model, tuple[np.ndarray, np.ndarray]]" = weakref.WeakKeyDictionary()


@jit_bounded(static_argnames=("fn",))
def _outputs_at(fn: Callable, z: jax.Array) -> jax.Array:
    """``fn`` at every row of ``z`` ``(n, d)``."""
    return map_points(fn, z)


def _load(data: dict):
    try:
        return datasets.load(data["name"], **data["options"])
    except (TypeError, ValueError) as error:
        raise ConfigError(f"[data] options: {error}") from None


# ------------------------------------------------------------------ the probe of one cell


def build_problem(prepared: Prepared, settings: dict[str, dict[str, Any]], values: dict[str, Any]) -> SweepProblem:
    """The probe, prior and constraints of one cell. ``values`` holds the cell's numeric probe parameters
    (``"probe.alpha"``, ``"probe.target"``, ``"localize.weight"``, ``"localize.anchor"``), possibly traced.

    Examples
    --------
    >>> from jaxprobe.config import parse_config
    >>> config = parse_config('''
    ... [data]
    ... name = "moons"
    ... [model]
    ... kind = "logistic_regression"
    ... [probe]
    ... type = "prediction_risky"
    ... alpha = 0.5
    ... [sampler]
    ... temperature = 0.1
    ... ''')
    >>> problem = build_problem(Prepared(config), config.sections, {})
    >>> problem.probe, problem.prior, problem.dim
    (Probe(prediction_risky[r=2]), DiagonalGaussian(mean=array([0., 0.]), scale=array([1., 1.])), 2)
    >>> cell = build_problem(Prepared(config), config.sections, {"probe.alpha": 0.9})   # a sweep cell's α
    >>> bool(cell.probe(jnp.zeros(2)) != problem.probe(jnp.zeros(2)))
    True
    """
    get = lambda dotted, default=None: values.get(dotted, settings.get(dotted.split(".")[0], {}).get(  # noqa: E731
        dotted.split(".", 1)[1], default))
    probe_settings = settings["probe"]
    probe_type = probe_settings["type"]
    model = prepared.model
    regression = prepared.task == "regression"
    loss = probe_settings["loss"]
    if regression and loss == "cross_entropy":
        loss = "squared" if probe_type == "fixed_label" else "similarity"

    if probe_type == "prediction_risky":
        alpha = get("probe.alpha")
        binary = prepared.task == "binary"
        # P(class 1) for a binary classifier, keyed by the (cached) model: the same file run again in one process
        # builds an equal probe and reuses its compiled programs (a bare lambda made every run compile again)
        output = Keyed(lambda x: model.fn(x)[1], "class 1 of", model.fn) if binary else model.fn
        probe = probes.prediction_risky(output, alpha=alpha, r=probe_settings["r"])  # α may be traced
    elif probe_type == "model_contrast":
        probe = probes.model_contrast(model.fn, prepared.compare.fn, loss=loss)
    elif probe_type == "parameter_sensitive":
        distribution = GaussianPerturbation(model.params, probe_settings["sigma"], probe_settings["num_draws"],
                                            jax.random.key(settings["model"]["seed"]))
        probe = probes.parameter_sensitive(model.apply_fn, distribution, loss=loss)
    else:  # fixed_label
        target = get("probe.target")
        if regression:
            probe = probes.fixed_label(Keyed(lambda x: model.fn(x) - target, "residual of", model.fn, target), 0.0,
                                       loss="squared")
        else:
            probe = probes.fixed_label(model.fn, target, loss=loss)  # the target class may be traced

    fixed_names, anchor_row = (), None
    if "localize" in settings:
        anchor = get("localize.anchor")
        weight = get("localize.weight")
        anchors = jnp.asarray(prepared.z_test)
        probe = probe + weight * probes.localize(anchors[anchor], r=settings["localize"]["r"])  # both may be traced
        fixed_names = tuple(settings["constraints"]["fixed"])
        if fixed_names:  # fixed features take the anchor's values: the anchor is a static axis then
            anchor_row = prepared.z_test[int(anchor)]
    # The data set's metadata, exactly as the Python API reads it (constraints.from_dataset): one-hot groups on
    # the simplex, integers reported integral, immutable features fixed, bounds = "data": the observed ranges.
    constraints = constraints_module.from_dataset(
        prepared.dataset, standardized=True, immutable=fixed_names, anchor=anchor_row,
        bounds="range" if settings["constraints"]["bounds"] == "data" else None)
    prior = None
    if settings["prior"]["kind"] == "standard_normal":
        prior = priors.DiagonalGaussian(np.zeros(prepared.num_features), np.ones(prepared.num_features))
    return SweepProblem(probe, prior, constraints or None, prepared.num_features)


class _ConfigProblem:
    """``build_probe`` of a file's one cell: ``build_problem(prepared, sections, {})``. Equal for equal sections and
    the same fitted models (:class:`Prepared` caches them per process, a model file per modification time), so the
    same file run again in one process reuses the sweep's compiled programs; another model is another question."""

    def __init__(self, prepared: Prepared, sections: dict[str, dict[str, Any]]):
        self.prepared, self.sections = prepared, sections
        self._key = value_key((sections, Identity(prepared.model), Identity(prepared.compare)))

    def __call__(self) -> SweepProblem:
        return build_problem(self.prepared, self.sections, {})

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _ConfigProblem) and self._key == other._key


def _is_index(value: Any, size: int) -> bool:
    """Whether ``value`` is an int in ``0..size - 1`` (the shared :func:`jaxprobe._inputs.check_int`; a file's
    mistakes stay ConfigErrors naming the key)."""
    try:
        check_int(value, "index", minimum=0, maximum=size - 1)
    except (TypeError, ValueError):
        return False
    return True


def _check_values(prepared: Prepared, config: Config, grid: dict[str, list]) -> None:
    """Range checks that need the data: class indices and anchor rows."""
    values = lambda dotted: grid.get(dotted, [config.get(dotted)])  # noqa: E731
    if config.get("probe.type") == "fixed_label" and prepared.num_classes is not None:
        for target in values("probe.target"):
            if not _is_index(target, prepared.num_classes):
                raise ConfigError(f"[probe] target: must be a class index in 0..{prepared.num_classes - 1} for "
                                  f"{config.get('data.name')}, got {target!r}")
    if "localize" in config.sections:
        for anchor in values("localize.anchor"):
            if not _is_index(anchor, len(prepared.z_test)):
                raise ConfigError(f"[localize] anchor: must be a row of the test split, 0..{len(prepared.z_test) - 1}"
                                  f", got {anchor}")
    if config.get("probe.type") == "parameter_sensitive" and prepared.model.params is None:
        raise ConfigError("[model]: parameter_sensitive needs a model with parameters θ (logistic_regression, mlp "
                          "or a saved network)")


# ------------------------------------------------------------------ built-in observables ([output] observables)


def _predicted_class(prepared: "Prepared", sections: dict) -> Callable:
    model, num_classes = prepared.model.fn, prepared.num_classes
    return lambda x: jax.nn.one_hot(jnp.argmax(model(x)), num_classes, dtype=x.dtype)


def _disagree(prepared: "Prepared", sections: dict) -> Callable:
    model, other = prepared.model.fn, prepared.compare.fn
    return lambda x: (jnp.argmax(model(x)) != jnp.argmax(other(x))).astype(x.dtype)


def _within_alpha(prepared: "Prepared", sections: dict) -> Callable:
    model, alpha = prepared.model.fn, sections["probe"]["alpha"]
    return lambda x: (jnp.abs(model(x)[1] - alpha) < 0.1).astype(x.dtype)


def _target_prediction(prepared: "Prepared", sections: dict) -> Callable:
    model, target = prepared.model.fn, sections["probe"]["target"]
    return lambda x: (jnp.argmax(model(x)) == target).astype(x.dtype)


def _model_output(prepared: "Prepared", sections: dict) -> Callable:
    model = prepared.model.fn
    return lambda x: jnp.asarray(model(x), x.dtype)


def _features(prepared: "Prepared", sections: dict) -> Callable:
    scale = np.asarray(prepared.dataset.scale, np.float32)
    mean = np.asarray(prepared.dataset.mean, np.float32)
    return lambda x: x * scale + mean


#: The function of x of each built-in observable (:data:`jaxprobe.config.OBSERVABLES`) but ``"probe"`` (G(x),
#: folded in by every run): ``make(prepared, sections)`` → a function of ONE x ``(d,)`` in the models' input
#: (standardized) space.
MAKERS: dict[str, Callable[["Prepared", dict], Callable]] = {
    "features": _features, "predicted_class": _predicted_class, "model_output": _model_output,
    "disagree": _disagree, "within_0.1_of_alpha": _within_alpha, "target_prediction": _target_prediction,
}


def _feature_moments(prepared: "Prepared", sections: dict) -> Callable:
    return lambda x: jnp.concatenate([x, x * x])


#: Observables ``jaxprobe run`` folds in for its summary when the draws are kept (not built-ins a file names;
#: left out of ``samples.npz`` and of ``answer["observables"]``): z and z² of each standardized feature, (2d,),
#: whose means give the features' means, MCSEs and sds in original units (:func:`_feature_summary`).
_SUMMARY_MAKERS: dict[str, Callable[["Prepared", dict], Callable]] = {"_feature_moments": _feature_moments}


class _Observable:
    """A built-in observable's function, equal to another for the same name, models and values (so a
    configuration run again in one process reuses its compiled program)."""

    def __init__(self, name: str, fn: Callable, report: Callable | None, key: tuple):
        self.name, self.fn, self.report, self.key = name, fn, report, key

    def __call__(self, x: Any) -> Any:
        return self.fn(x if self.report is None else self.report(x))

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _Observable) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


def _report_of(restriction: constraints_module.Restriction | None) -> Callable | None:
    """The restriction's :meth:`~jaxprobe.constraints.Restriction.report_point` (JAX, one point), or ``None``
    when reporting changes nothing."""
    if restriction is None or not restriction.is_relaxed:
        return None
    return restriction.report_point


def make_observables(prepared: Prepared, sections: dict[str, dict[str, Any]], names: Sequence[str],
                     constraints: Any = None) -> dict[str, Callable]:
    """The built-in observables ``names`` of a configuration as ``{name: fn}`` for :func:`jaxprobe.sweep`.

    Parameters
    ----------
    prepared
        The configuration's data and fitted models (their own JAX functions, the ones its probe calls).
    sections
        The configuration's sections (``probe.alpha``, ``probe.target``).
    names
        Names of :data:`OBSERVABLES` (checked by :func:`jaxprobe.config.parse_config`); ``"probe"`` is
        left out: every run folds G(x) in already.
    constraints
        The question's constraints (:func:`build_problem`), so that each function sees x as the draws are
        reported (one-hot groups as categories, integers rounded), as the answer computed from kept draws does.

    Returns
    -------
    dict
        ``{name: fn}``, each ``fn`` a JAX function of one x ``(d,)`` in the models' input (standardized) space.

    Examples
    --------
    >>> from jaxprobe.config import parse_config
    >>> config = parse_config('''
    ... [data]
    ... name = "moons"
    ... [model]
    ... kind = "logistic_regression"
    ... [probe]
    ... type = "prediction_risky"
    ... alpha = 0.5
    ... [sampler]
    ... temperature = 0.1
    ... ''')
    >>> observables = make_observables(Prepared(config), config.sections, ["predicted_class", "probe"])
    >>> sorted(observables)                                   # "probe": every run folds G(x) in already
    ['predicted_class']
    >>> observables["predicted_class"](jnp.zeros(2)).tolist()  # one-hot of the model's class at x = 0
    [0.0, 1.0]
    """
    restriction = None if constraints is None else constraints_module.restriction(constraints,
                                                                                prepared.num_features)
    report = _report_of(restriction)
    dataset = prepared.dataset
    out = {}
    for name in names:
        make = MAKERS.get(name) or _SUMMARY_MAKERS.get(name)
        if make is None:  # "probe": folded in by the run itself
            continue
        key = (name, prepared.model, prepared.compare, repr(sections["probe"].get("alpha")),
               repr(sections["probe"].get("target")), restriction if report is not None else None,
               dataset.mean.tobytes(), dataset.scale.tobytes())
        out[name] = _Observable(name, make(prepared, sections), report, key)
    return out


# ------------------------------------------------------------------ sweep and run


_STATIC_SECTIONS = ("data", "model", "compare", "probe", "localize", "constraints", "prior", "sampler")


def _split_grid(config: Config) -> tuple[dict[str, list], list[str]]:
    """The sweep grid with engine keys renamed for :func:`jaxprobe.sweep`, and its static axes."""
    from jaxprobe.config import BATCHED_KEYS

    static_names = set(config.sections.get("sweep", {}).get("static", []))
    if config.sections["constraints"]["fixed"] and "localize.anchor" in config.grid:
        static_names.add("localize.anchor")  # fixed features take the anchor's values: concrete
    grid, static = {}, []
    for dotted, values in config.grid.items():
        name = ENGINE_KEYS.get(dotted, dotted)
        grid[name] = values
        # Every axis that is not a batched (traced) input is applied to the configuration of its cells: numbers,
        # strings (model kind, data set, probe type) and lists alike. Before, string axes were dropped here and
        # every model.kind cell answered the configuration's own model.
        if dotted in static_names or dotted not in BATCHED_KEYS:
            static.append(name)
    return grid, static


def sweep_config(config: Config, *, out: str | None = None, progress: bool = True, keep_samples: bool = False
                 ) -> SweepResult:
    """Run the sweep a configuration describes (``jaxprobe sweep``); results in ``out`` (default ``[output] dir``).

    ``[output] observables`` are folded into every cell (``cells/<id>.npz``: ``Samples.load(...).observables``;
    ``"probe"`` is the table's ``probe_mean`` / ``probe_mcse``); ``[output] keep_draws = false`` keeps no draw.

    Examples
    --------
    >>> from jaxprobe.config import parse_config
    >>> config = parse_config('''
    ... [data]
    ... name = "moons"
    ... [model]
    ... kind = "logistic_regression"
    ... [probe]
    ... type = "prediction_risky"
    ... alpha = 0.5
    ... [sampler]
    ... temperature = 0.1
    ... num_chains = 8
    ... num_samples = 20
    ... num_warmup = 20
    ... [sweep.grid]
    ... "sampler.temperature" = [0.01, 1.0]
    ... ''', sweep=True)
    >>> result = sweep_config(config, out="sweep", progress=False)
    >>> [row["temperature"] for row in result.rows], result.num_compilations   # both cells in one program
    ([0.01, 1.0], 1)
    >>> cold, hot = result.rows
    >>> bool(cold["probe_mean"] < hot["probe_mean"])          # E[G] grows with τ
    True
    """
    check_config(config)  # every model fitted and every value checked before the first cell runs
    grid, static = _split_grid(config)
    if not grid:
        grid = {"temperature": [config.get("sampler.temperature")]}

    def build_probe(**params):
        static_values = {k: v for k, v in params.items() if k in static}
        cell_config = config.with_values(static_values)
        prepared = Prepared(cell_config)
        traced = {k: v for k, v in params.items() if k not in static}
        return build_problem(prepared, cell_config.sections, traced)

    sampler = config.sections["sampler"]
    options = {key: sampler[key] for key in ("num_chains", "num_samples", "num_warmup", "thin", "step_size_mode")}
    output = config.sections["output"]
    observables = None
    if any(name in MAKERS for name in output["observables"]):
        # One function of x for every cell (parse_config refused grids over the keys it reads), made with the
        # first cell's data, models and constraints.
        first = config.with_values({dotted: values[0] for dotted, values in config.grid.items()})
        prepared = Prepared(first)
        observables = make_observables(prepared, first.sections, output["observables"],
                                       build_problem(prepared, first.sections, {}).constraints)
    return sweep(sampler["seed"], build_probe, grid, temperature=sampler["temperature"], sampler=sampler["name"],
                 step_size=sampler["step_size"], static=static, sampler_options=sampler["options"] or None,
                 cells_per_batch=config.sections.get("sweep", {}).get("cells_per_batch"),
                 out=out or output["dir"], progress=progress, keep_samples=keep_samples,
                 numerics=sampler.get("numerics"), observables=observables, keep_draws=output["keep_draws"],
                 **options)


def check_config(config: Config) -> None:
    """Everything ``jaxprobe run`` / ``sweep`` check before sampling, beyond what :func:`load_config` checks
    from the file alone: each static combination of the grid's probe axes (data set, model kind, probe type,
    anchors with fixed features, ...) gets its data split and its models fitted or loaded (a saved network's
    input width), and its class indices and anchor rows checked. Raises :class:`ConfigError`. ``jaxprobe
    validate`` runs it too, so that it passes exactly the configurations run and sweep accept.

    Examples
    --------
    >>> from jaxprobe.config import parse_config
    >>> config = parse_config('''
    ... [data]
    ... name = "moons"
    ... [model]
    ... kind = "logistic_regression"
    ... [probe]
    ... type = "fixed_label"
    ... target = 2
    ... [sampler]
    ... temperature = 0.1
    ... ''')                                                  # a valid file, but moons has 2 classes
    >>> check_config(config)
    Traceback (most recent call last):
        ...
    jaxprobe.config.ConfigError: [probe] target: must be a class index in 0..1 for moons, got 2
    """
    import itertools

    grid, static = _split_grid(config)
    static_probe_axes = [name for name in grid if name in static and name not in set(ENGINE_KEYS.values())]
    for combo in itertools.product(*(grid[name] for name in static_probe_axes)):
        cell_config = config.with_values(dict(zip(static_probe_axes, combo)))
        _check_values(Prepared(cell_config), cell_config, config.grid)


def run_config(config: Config, *, out: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Run the one probe a configuration describes (``jaxprobe run``).

    Writes ``samples.npz`` (standardized units, the models' input space),
    ``samples_original_units.npz`` (``x``: ``(chain, draw, d)`` in original units),
    ``summary.json`` and, with ``[output] plots = true``, ``features.png``.
    ``[output] observables`` (built-ins, :data:`OBSERVABLES`) are averaged as the
    chains run: ``summary["answer"]["observables"][name]`` holds their mean and
    MCSE. With ``[output] keep_draws = false`` no draw is kept: ``samples.npz``
    holds the verdict and the observables, there is no ``samples_original_units.npz``
    (one left in ``out`` by an earlier run is removed), and the answer's fields that
    need draws come from the observables; a field whose observable was not asked for
    is left out, and ``answer["notes"]`` says which observable gives it. With a
    ``[precision]`` section, runs of ``num_chains`` chains are pooled until its target's
    MCSE is reached (``generate(..., precision=...)``; not checkpointed): ``summary["precision"]``
    says what was asked, spent and reached.

    Parameters
    ----------
    config
        A validated configuration (:func:`jaxprobe.config.load_config`).
    out
        The output folder (default ``[output] dir``).
    progress
        Draw the run's progress bar.

    Returns
    -------
    dict
        The summary written to ``summary.json``.

    Examples
    --------
    >>> import os
    >>> from jaxprobe.config import parse_config
    >>> config = parse_config('''
    ... [data]
    ... name = "moons"
    ... [model]
    ... kind = "logistic_regression"
    ... [probe]
    ... type = "prediction_risky"
    ... alpha = 0.5
    ... [sampler]
    ... temperature = 0.1
    ... num_chains = 8
    ... num_samples = 20
    ... num_warmup = 20
    ... [output]
    ... plots = false
    ... ''')
    >>> summary = run_config(config, out="run", progress=False)    # a tiny run: 8 chains of 20 draws
    >>> sorted(os.listdir("run")), summary["sampler"], summary["answer"]["model_test_accuracy"]
    (['samples.npz', 'samples_original_units.npz', 'summary.json'], 'mala', 0.904)
    """
    started = time.perf_counter()
    out = out or config.sections["output"]["dir"]
    check_config(config)
    prepared = Prepared(config)  # fitted once: Prepared caches the fitted models per process
    sampler = config.sections["sampler"]
    output = config.sections["output"]
    keep_draws = output["keep_draws"]
    requested = output["observables"]
    # With the draws kept, the summary's fields about the model's outputs and the features' moments are folded in
    # as observables too, as the chains run: where the model is already evaluated for G (XLA computes it once per
    # draw for both: no slower at 2,048 and 16,384 chains, d = 30), not again over every kept draw afterwards (2.5 s of
    # one thread's time at 16,384 chains × 1,000 draws, beside the files' writes). The same estimator as before
    # (batch means over chains and draws), now the same numbers with the draws kept or not.
    names = list(requested)
    if keep_draws:
        names += [name for name in [name for _, name, _ in _answer_fields(prepared, config)] + ["_feature_moments"]
                  if name not in names]
    observables = None
    if any(name in MAKERS or name in _SUMMARY_MAKERS for name in names):
        observables = make_observables(prepared, config.sections, names,
                                       build_problem(prepared, config.sections, {}).constraints)
    # Checkpointed into the output folder when the sampling, projected from the warmup's speed, takes at least
    # [output] checkpoint_min_seconds (CheckpointIfLong; 0: always): an interrupted or killed run resumes when
    # started again (each chunk's draws are written into its files as the run goes); the checkpoint is removed once the
    # results are written. A shorter run is not: on a CPU the checkpoint's copies compete with the sampling for the
    # cores (16,384 chains × 1,000 draws at d = 30 on 2 cores: 10-15 s checkpointed, 7.2-8.5 s not), and an
    # interruption loses less than the threshold. A checkpoint already in the folder is resumed whatever its length.
    # A run to a precision is several runs pooled: not checkpointed.
    precision = _precision(config)
    checkpoint = os.path.join(out, "checkpoint.npz")
    min_seconds = output["checkpoint_min_seconds"]
    if precision is None and os.path.exists(checkpoint) and progress:
        print(f"found an unfinished run in {checkpoint}: resuming it")
    try:
        result = sweep(sampler["seed"], _ConfigProblem(prepared, config.sections),
                       {"temperature": [sampler["temperature"]]}, sampler=sampler["name"],
                       step_size=sampler["step_size"], num_chains=sampler["num_chains"],
                       num_samples=sampler["num_samples"], num_warmup=sampler["num_warmup"], thin=sampler["thin"],
                       step_size_mode=sampler["step_size_mode"], sampler_options=sampler["options"] or None,
                       progress=progress, seed=0, convergence="ignore",
                       checkpoint=None if precision is not None else CheckpointIfLong(checkpoint, min_seconds)
                       if min_seconds > 0 else checkpoint, numerics=sampler.get("numerics"),
                       observables=observables, keep_draws=keep_draws, precision=precision)
    except CheckpointMismatchError as error:  # never mixes two questions' draws; says what to do instead
        raise ConfigError(f"{checkpoint} holds an unfinished run of another question (it differs in "
                          f"{', '.join(error.differing)}): finish it with the configuration that started it, or "
                          f"delete {checkpoint} and {checkpoint}.draws, or pass another --out") from None
    row = result.rows[0]
    if row["status"] not in FINISHED:
        raise RuntimeError(f"the run failed: {row['error']}")
    samples = result.samples[0]
    # samples.npz holds the observables the file asked for; those added for the summary are read from `samples`
    saved = dataclasses.replace(samples, observables={
        name: value for name, value in (samples.observables or {}).items() if name in requested} or None)
    os.makedirs(out, exist_ok=True)
    original_units = os.path.join(out, "samples_original_units.npz")
    if not keep_draws and is_writer() and os.path.exists(original_units):  # an earlier run's draws: not this answer's
        os.unlink(original_units)

    # The two draws' files are written each in its own thread (checksums, copies, the file system's work: NumPy,
    # zlib and the writes let go of the GIL) while the summary is computed (NumPy and the model on the draws):
    # each is mostly one thread's work, so they overlap. All only read the draws. A failed write raises here; the
    # summary, written last, never describes missing files.
    with ThreadPoolExecutor(max_workers=2) as writer:
        written = [writer.submit(saved.save, os.path.join(out, "samples.npz"))]
        if keep_draws:
            written.append(writer.submit(atomic_write, original_units, lambda stream: _write_original_units(
                stream, samples.positions, prepared.dataset)))
        summary = _summary(prepared, config, samples, row, keep_draws)
        for future in written:
            future.result()
    x = None
    if keep_draws and output["plots"]:  # the figure's histograms need x in memory (a block at a time)
        z = samples.positions
        x = np.empty(z.shape, z.dtype)
        block = _chain_block(z)
        for start in range(0, len(z), block):
            x[start:start + block] = prepared.dataset.unstandardize(z[start:start + block])
    summary["seconds"] = time.perf_counter() - started
    atomic_write(os.path.join(out, "summary.json"), lambda stream: json.dump(summary, stream, indent=2),
                 binary=False)
    if is_writer():  # the results are on file: the checkpoint is spent (process 0 wrote it, it removes it)
        shutil.rmtree(checkpoint + ".draws", ignore_errors=True)
        if os.path.exists(checkpoint):
            os.unlink(checkpoint)
    if output["plots"] and x is not None:  # parse_config refuses plots = true with keep_draws = false
        from jaxprobe.plots.tabular import feature_distributions

        anchor = None
        if "localize" in config.sections:
            anchor = prepared.test.x[config.get("localize.anchor")]
        figure = feature_distributions(x.reshape(-1, x.shape[-1]), prepared.dataset, reference=prepared.train.x,
                                       factual=anchor, labels=("samples", "training data"),
                                       title=f"{config.get('probe.type')} samples vs {config.get('data.name')} "
                                             "training data (original units)")
        atomic_write(os.path.join(out, "features.png"), lambda stream: figure.savefig(stream, format="png", dpi=100))
    return summary


def _precision(config: Config) -> dict[str, Any] | None:
    """The ``[precision]`` section as ``generate``'s ``precision`` (its target an observable's name: an answer field
    names its observable, :func:`jaxprobe.config.precision_observable`), or None."""
    section = config.sections.get("precision")
    if section is None:
        return None
    precision = {"target": precision_observable(section["target"]), "mcse": section["mcse"]}
    if section.get("max_chains") is not None:
        precision["max_chains"] = section["max_chains"]
    return precision


def _precision_summary(config: Config, samples) -> dict[str, Any] | None:
    """``summary["precision"]``: the section as written, the chains spent and the verdict's note saying what the
    MCSE reached (``generate``'s), or None without a ``[precision]`` section."""
    if config.sections.get("precision") is None:
        return None
    notes = [note for note in (samples.verdict.notes if samples.verdict else ()) if note.startswith("precision:")]
    return {**{key: value for key, value in config.sections["precision"].items() if value is not None},
            "num_chains_spent": samples.num_chains, "reached": bool(notes) and " ≤ target " in notes[-1],
            "note": notes[-1] if notes else None}


def _json_value(value: Any) -> Any:
    """A float, or a (nested) list for an array; non-finite values as None (JSON has no NaN)."""
    array = np.asarray(value, np.float64)
    if array.ndim == 0:
        return float(array) if np.isfinite(array) else None
    return [_json_value(item) for item in array]


def _observed(samples, row: dict, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``{name: {"mean", "mcse"}}`` of the requested observables (``"probe"``: the run's own G(x) estimate), with
    ``"note"`` where the error cannot be trusted (too few batches or SMC groups)."""
    found = dict(samples.observables or {})
    out = {}
    for name in names:
        if name == "probe":
            out[name] = {"mean": row["probe_mean"], "mcse": row["probe_mcse"]}
            note = row.get("probe_mcse_note")
        else:
            out[name] = {"mean": _json_value(found[name].mean), "mcse": _json_value(found[name].mcse)}
            note = found[name].note
        if note:
            out[name]["note"] = note
    return out


def _with_nones(value: Any) -> Any:
    """``value`` (a float, or a dict or list of them) with NaN and inf as None (JSON has no NaN)."""
    if isinstance(value, dict):
        return {key: _with_nones(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_with_nones(item) for item in value]
    return value if value is None or np.isfinite(value) else None


_DRAWS_ONLY_PROBE_VALUES = ("sd", "min", "q05", "median", "q95", "max")


def _summary(prepared: Prepared, config: Config, samples, row: dict, keep_draws: bool) -> dict[str, Any]:
    """The run's summary. The answer's fields and the features' moments come from observables folded in as the
    chains ran (on the device, in the run's batches): with the draws kept, from those :func:`run_config` adds for
    them (:func:`_answer_fields`, ``_feature_moments``); without, from those the file asked for
    (``answer["notes"]`` names the ones it did not)."""
    observed = _observed(samples, row, config.sections["output"]["observables"])
    notes: list[str] = []
    answer = _answer(prepared, config, samples, observed, notes)
    features = _feature_summary(prepared, observed, samples, notes)
    probe_value = {k[len("probe_"):]: row[k] for k in row if k.startswith("probe_")}
    if not keep_draws:
        probe_value = {k: v for k, v in probe_value.items() if k not in _DRAWS_ONLY_PROBE_VALUES}
        notes.append(f"probe_value {', '.join(_DRAWS_ONLY_PROBE_VALUES)} need the draws (keep_draws = true); its "
                     "mean and mcse do not")
    if notes:
        answer["notes"] = notes
    return {
        "config": config.path,
        "data": config.get("data.name"),
        "probe": config.get("probe.type"),
        "temperature": config.get("sampler.temperature"),
        "sampler": samples.sampler,
        "num_chains": samples.num_chains,
        "num_samples_per_chain": samples.num_draws,
        "keep_draws": keep_draws,
        "acceptance_rate": row["acceptance_rate"],
        "max_rhat": samples.verdict.max_rhat,  # the verdict's: the coordinates it judges, ESS as it counts it
        "rhat_is_criterion": bool(samples.verdict.checks_rhat),
        "min_ess_bulk": samples.verdict.min_ess_bulk,
        "verdict_checks": samples.smc_checks(),  # after SMC: what was checked instead of R-hat
        "probe_value": probe_value,
        "answer": answer,
        "features_original_units": features,
        "compile_seconds": row["compile_seconds"],
        "log_evidence": samples.log_evidence,
        "log_evidence_se": samples.log_evidence_se,
        "precision": _precision_summary(config, samples),
        "verdict": samples.verdict.to_dict(),
    }


def _answer_fields(prepared: Prepared, config: Config) -> list[tuple[str, str, Callable]]:
    """``(field, observable, present)`` of each answer field about the model's outputs at the draws, for this
    probe and task: the field is the observable's mean (and ``field + "_mcse"`` its error), shaped by
    ``present``."""
    if prepared.task == "regression":
        # a vector output's mean of means: the mean of the elements' errors bounds its error (sd is subadditive)
        return [("mean_model_output", "model_output", lambda value: float(np.mean(value)))]
    class_names = prepared.dataset.class_names
    fields = [("predicted_class_fractions", "predicted_class",
               lambda value: {name: float(value[k]) for k, name in enumerate(class_names)})]
    probe_type = config.get("probe.type")
    if probe_type == "fixed_label":
        fields.append(("fraction_with_target_prediction", "target_prediction", float))
    if probe_type == "prediction_risky" and prepared.task == "binary":
        fields.append(("fraction_within_0.1_of_alpha", "within_0.1_of_alpha", float))
    if probe_type == "model_contrast":
        fields.append(("fraction_of_samples_where_models_disagree", "disagree", float))
    return fields


def _answer(prepared: Prepared, config: Config, samples, observed: dict[str, dict[str, Any]],
            notes: list[str]) -> dict[str, Any]:
    """The summary's answer: the model's test score, and what the draws say about its outputs, each field the
    mean and MCSE of its observable (batch means over chains and draws, the SMC groups' spread after SMC); a field
    whose observable the run did not fold in goes to ``notes``."""
    test_outputs = prepared.test_outputs(prepared.model)
    found = samples.observables or {}
    answer: dict[str, Any] = {}
    if prepared.task == "regression":
        residual = test_outputs - prepared.test.y
        answer["model_test_r2"] = float(1 - np.mean(residual**2) / np.var(prepared.test.y))
    else:
        answer["model_test_accuracy"] = float(np.mean(test_outputs.argmax(axis=-1) == prepared.test.y))
    for field, name, present in _answer_fields(prepared, config):
        if name not in found:
            notes.append(f"{field} needs the draws: add \"{name}\" to [output] observables (or set keep_draws "
                         "= true)")
            continue
        estimate = found[name]
        answer[field] = present(np.asarray(estimate.mean, np.float64))
        answer[field + "_mcse"] = _with_nones(present(np.asarray(estimate.mcse, np.float64)))
        if estimate.note:
            notes.append(f"{field}: {estimate.note}")
    if config.get("probe.type") == "model_contrast":
        other_test = prepared.test_outputs(prepared.compare).argmax(axis=-1)
        answer["test_set_disagreement_rate"] = float(np.mean(test_outputs.argmax(axis=-1) != other_test))
    if observed:
        answer["observables"] = observed
    return answer


def _write_original_units(stream: Any, z: np.ndarray, dataset: Any) -> None:
    """``samples_original_units.npz`` (``x`` ``(C, N, d)`` in original units, ``feature_names``) written into
    ``stream`` a block of chains at a time, as ``np.savez`` lays it out (``np.load`` reads it): x in memory beside
    the draws held them twice over."""
    block = _chain_block(z)
    blocks = (dataset.unstandardize(z[start:start + block]).astype(z.dtype, copy=False)
              for start in range(0, len(z), block))
    names = np.asarray(dataset.feature_names)
    with zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        write_npz_member(archive, "x", z.shape, z.dtype, blocks)
        write_npz_member(archive, "feature_names", names.shape, names.dtype, [names])


#: Values per block when the kept draws are mapped to original units (the file, the figure): the float64
#: temporaries stay cache-sized (512 KB), not the draws' size. A whole number of chains per block, at least one.
#: Blocks of 8 chains (1.9 MB at 1,000 draws × 30 features, and more with more draws) raised a 256-chain run's
#: peak by 5 MB over its 31 MB of draws, at no gain in speed (16,384 chains: 0.96 s either way).
_BLOCK_VALUES = 2**16


def _chain_block(z: np.ndarray) -> int:
    """Chains per block of ``z`` ``(C, N, d)`` mapped at a time (:data:`_BLOCK_VALUES`)."""
    return max(1, _BLOCK_VALUES // max(1, math.prod(z.shape[1:])))


def _feature_summary(prepared: Prepared, observed: dict[str, dict[str, Any]], samples: Any,
                     notes: list[str]) -> dict[str, dict[str, float]]:
    """Each feature's mean (with its Monte-Carlo standard error) and sd over the draws, next to the training
    data's mean, in original units. With the draws kept, from ``_feature_moments`` (z and z² in standardized units,
    folded in as the chains ran: the map to original units is affine, so the moments map exactly, and in
    standardized units E[z²] − E[z]² loses no digits to a feature's offset); without, the mean of the
    ``"features"`` observable if asked for (what is missing goes to ``notes``)."""
    names = prepared.dataset.feature_names
    moments = (samples.observables or {}).get("_feature_moments")
    if moments is not None:
        dim = len(names)
        first, second = np.split(np.asarray(moments.mean, np.float64), [dim])
        scale = np.asarray(prepared.dataset.scale, np.float64)
        mean = prepared.dataset.unstandardize(first)
        mcse = scale * np.asarray(moments.mcse, np.float64)[:dim]
        sd = scale * np.sqrt(np.maximum(second - first**2, 0.0))
        if moments.note:
            notes.append(f"features_original_units mcse: {moments.note}")
        return {name: {"mean": float(mean[i]), "mcse": _with_nones(float(mcse[i])),
                       "sd": float(sd[i]), "data_mean": float(prepared.train.x[:, i].mean())}
                for i, name in enumerate(names)}
    means = observed.get("features", {}).get("mean")
    errors = observed.get("features", {}).get("mcse")
    features = {}
    for i, name in enumerate(names):
        features[name] = {} if means is None else {"mean": means[i], "mcse": errors[i]}
        features[name]["data_mean"] = float(prepared.train.x[:, i].mean())
    if means is None:
        notes.append("features_original_units mean needs the draws: add \"features\" to [output] observables "
                     "(or set keep_draws = true)")
    notes.append("features_original_units sd needs the draws (keep_draws = true)")
    return features
