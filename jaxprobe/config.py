"""Run and sweep configuration files (TOML, read with :mod:`tomllib`: data, never code).

A file describes one probe (``jaxprobe run``) or a grid of them (``jaxprobe sweep``)::

    [data]                         # a bundled data set (jaxprobe.datasets)
    name = "breast_cancer"

    [model]                        # the model to question: a kind fitted here, or a saved network
    kind = "mlp"                   # or: path = "model.npz", activation = "tanh", output = "sigmoid"

    [probe]
    type = "prediction_risky"      # model_contrast | prediction_risky | parameter_sensitive | fixed_label
    alpha = 0.5

    [sampler]
    name = "mala"                  # a registered sampler (jaxprobe.engine.known_samplers(whole_run=True))
    num_chains = 64
    num_samples = 200
    temperature = 0.05
    options = {}                   # the sampler's options, e.g. { num_integration_steps = 20 } for hmc
    numerics = "reproducible"      # or "fast"; leave it out for the platform's default (jaxprobe.engine.numerics)

    [output]
    dir = "runs/risky"
    keep_draws = true              # false: keep no draw (memory O(chains x d)); the answer uses the observables
    observables = ["predicted_class", "features"]   # built-ins, averaged as the chains run
    checkpoint_min_seconds = 60    # jaxprobe run: checkpoint runs projected to sample this long (0: every run)

    [precision]                    # optional, `jaxprobe run` only: ask for an error bar, not a run size
    target = "disagree"            # "probe", "log_evidence" (smc) or one of [output] observables (or its answer field)
    mcse = 0.01                    # runs of num_chains chains are added until the target's MCSE is at most this
    max_chains = 1024              # the budget (a multiple of num_chains; default 16 x num_chains)

    [sweep.grid]                   # only for `jaxprobe sweep`: "section.key" = [values]
    "sampler.temperature" = [0.01, 0.1, 1.0]
    "probe.alpha" = [0.3, 0.5, 0.7]

Observables are named built-ins (a file is data, never code): see
:data:`jaxprobe.sweeps.from_config.OBSERVABLES` for each one and the probes and tasks it is defined for.

``[precision]`` is ``generate(..., precision=...)`` (:func:`jaxprobe.generate`) for ``jaxprobe run``: independent
runs of ``num_chains`` chains (independent SMC systems or MCMC runs) are pooled until the target's Monte-Carlo
standard error is at most ``mcse`` or ``max_chains`` chains are spent (then a ``PrecisionWarning`` names the
budget that would reach it); the summary's ``precision`` says what was spent and reached. Such a run is not
checkpointed.

Every key is checked before anything runs: an unknown key, a wrong type, a
missing data set or an impossible value raises :class:`ConfigError` naming the
key, the expected form, and the line of the file where it was found.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any, Callable

from jaxprobe._inputs import check_int, check_number

try:
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10: the same parser as the tomli package
    try:
        import tomli as tomllib
    except ImportError:
        tomllib = None

__all__ = ["ConfigError", "Config", "load_config", "parse_config", "SCHEMA", "BATCHED_KEYS", "PROBE_TYPES",
           "MODEL_KINDS", "OBSERVABLES", "BuiltinObservable", "observables_for", "precision_observable"]

PROBE_TYPES = ("model_contrast", "prediction_risky", "parameter_sensitive", "fixed_label")
#: Model kinds fitted with scikit-learn on the training split (trees are piecewise constant:
#: use them as the [compare] model of model_contrast, or with sampler "rwmh").
MODEL_KINDS = ("logistic_regression", "linear_regression", "ridge", "mlp", "svm_rbf", "svm_poly",
               "decision_tree", "random_forest", "gradient_boosting")
TREE_KINDS = ("decision_tree", "random_forest", "gradient_boosting")
CLASSIFIER_ONLY = ("logistic_regression",)
REGRESSOR_ONLY = ("linear_regression", "ridge")
ACTIVATIONS = ("relu", "tanh", "sigmoid", "identity")
OUTPUTS = ("sigmoid", "softmax", "identity")
#: Sweep axes that become a batched (vmapped) cell axis of one compiled program; others compile per value.
BATCHED_KEYS = ("sampler.temperature", "sampler.seed", "sampler.step_size", "probe.alpha", "probe.target",
                "localize.weight", "localize.anchor")


# ------------------------------------------------------------------ built-in observables ([output] observables)


CLASSIFIER_TASKS = ("binary", "multiclass")
ALL_TASKS = ("binary", "multiclass", "regression")


@dataclass(frozen=True)
class BuiltinObservable:
    """A named observable a configuration file can ask for (``[output] observables``): files are data, never code.

    ``doc``: what it is (one line); ``tasks`` / ``probes``: the data sets' tasks and the probe types it is
    defined for; ``reads``: configuration keys (``"section.key"``, or ``"section."`` for all of a section)
    its function depends on, which a sweep's grid may not vary; ``answer``: the summary's answer field it
    gives when the draws are not kept. Its function of x is :data:`jaxprobe.sweeps.from_config.MAKERS`'s.

    Examples
    --------
    >>> disagree = OBSERVABLES["disagree"]                  # `observables = ["disagree"]` in a file's [output]
    >>> disagree.probes, disagree.depends_on("compare.kind"), disagree.depends_on("sampler.name")
    (('model_contrast',), True, False)
    >>> BuiltinObservable("the first feature", reads=("data.name",)).tasks     # defined for every task
    ('binary', 'multiclass', 'regression')
    """

    doc: str
    tasks: tuple[str, ...] = ALL_TASKS
    probes: tuple[str, ...] = PROBE_TYPES
    reads: tuple[str, ...] = ()
    answer: str | None = None

    def depends_on(self, dotted: str) -> bool:
        """Whether the function changes with the configuration key ``dotted`` (a sweep may not vary it)."""
        return any(dotted == read or (read.endswith(".") and dotted.startswith(read)) for read in self.reads)


#: The observables a configuration can name, each a function of one input x, averaged over every chain and kept
#: draw as the run goes (``samples.observables[name]``: mean and its Monte-Carlo standard error), so that the answer
#: needs no kept draws (``[output] keep_draws = false``). Each but ``"probe"`` is evaluated on x as the draws are
#: reported (one-hot groups as their category, integer features rounded), so its mean is the kept draws' fraction or
#: mean exactly.
OBSERVABLES: dict[str, BuiltinObservable] = {
    "probe": BuiltinObservable("G(x) at the sampled point (every run folds it in: probe_mean and probe_mcse)"),
    "features": BuiltinObservable("x in original units, shape (d,): its mean is the feature means",
                                  reads=("data.name", "data.options"), answer="features_original_units"),
    "predicted_class": BuiltinObservable("one-hot of the model's predicted class, shape (K,): its mean is the class "
                                         "fractions", tasks=CLASSIFIER_TASKS, reads=("data.", "model."),
                                         answer="predicted_class_fractions"),
    "model_output": BuiltinObservable("the model's output: a regression value, or a classifier's class "
                                      "probabilities (K,)", reads=("data.", "model."), answer="mean_model_output"),
    "disagree": BuiltinObservable("1 where the [model] and [compare] predicted classes differ", tasks=CLASSIFIER_TASKS,
                                  probes=("model_contrast",), reads=("data.", "model.", "compare."),
                                  answer="fraction_of_samples_where_models_disagree"),
    "within_0.1_of_alpha": BuiltinObservable("1 where |P(class 1 | x) - alpha| < 0.1", tasks=("binary",),
                                             probes=("prediction_risky",), reads=("data.", "model.", "probe.alpha"),
                                             answer="fraction_within_0.1_of_alpha"),
    "target_prediction": BuiltinObservable("1 where the model predicts the target class",
                                           tasks=CLASSIFIER_TASKS, probes=("fixed_label",),
                                           reads=("data.", "model.", "probe.target"),
                                           answer="fraction_with_target_prediction"),
}


def observables_for(probe_type: str, task: str) -> tuple[str, ...]:
    """The built-in observable names defined for a ``probe_type`` probe of a model of ``task``.

    Parameters
    ----------
    probe_type
        One of :data:`jaxprobe.config.PROBE_TYPES`.
    task
        The data set's task: ``"binary"``, ``"multiclass"`` or ``"regression"``.

    Returns
    -------
    tuple of str
        Names of :data:`OBSERVABLES`, in its order.

    Examples
    --------
    >>> observables_for("model_contrast", "binary")
    ('probe', 'features', 'predicted_class', 'model_output', 'disagree')
    """
    return tuple(name for name, spec in OBSERVABLES.items() if probe_type in spec.probes and task in spec.tasks)


class ConfigError(ValueError):
    """A configuration file that cannot run, with the key, the expected form and the line.

    Examples
    --------
    >>> try:
    ...     parse_config('[data]' + chr(10) + 'name = "iris"')
    ... except ConfigError as error:
    ...     print(error)
    <config>: file: missing section [model]
    """


@dataclass(frozen=True)
class Key:
    """One configuration key: the expected form (for messages), a check, and a default."""

    expected: str
    check: Callable[[Any], bool]
    default: Any = None
    required: bool = False


def _accepted_by(check: Callable[..., Any], **bounds: Any) -> Callable[[Any], bool]:
    """A key's check made of a shared validator (:func:`jaxprobe._inputs.check_int` / ``check_number``): whether
    it accepts the value. A file's mistakes stay ConfigErrors naming the key's expected form."""

    def accepts(value: Any) -> bool:
        try:
            check(value, "value", **bounds)
        except (TypeError, ValueError):
            return False
        return True

    return accepts


def _int_at_least(minimum: int) -> Callable[[Any], bool]:
    return _accepted_by(check_int, minimum=minimum)


_is_number = _accepted_by(check_number)  # a finite real number (not a bool)
_positive = _accepted_by(check_number, minimum=0, exclusive_minimum=True)
_nonnegative = _accepted_by(check_number, minimum=0)


def _one_of(choices: tuple[str, ...]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, str) and v in choices


def _string(v: Any) -> bool:
    return isinstance(v, str) and bool(v)


# Keys whose values the engine names (a sampler of its registry, a numerics mode) are strings in the schema and
# checked against the engine by _check_engine_names, after every JAX-free check: the schema checks import no JAX,
# so `jaxprobe validate` answers a typo at once (tests/test_cli_startup.py).
_ENGINE_NAMED = ("sampler.name", "sampler.numerics")


def _table(v: Any) -> bool:
    return isinstance(v, dict)


def _string_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(item, str) for item in v)


def _model_section(kind_required: bool = False) -> dict[str, Key]:
    return {
        "kind": Key(f"one of {', '.join(MODEL_KINDS)}", _one_of(MODEL_KINDS)),
        "path": Key("a path to a saved network: .npz (arrays w0, b0, w1, b1, ...) or .msgpack (flax)", _string),
        "activation": Key(f"one of {', '.join(ACTIVATIONS)} (hidden layers of a saved network)",
                          _one_of(ACTIVATIONS), "relu"),
        "output": Key(f"one of {', '.join(OUTPUTS)} (last layer of a saved network)", _one_of(OUTPUTS)),
        "options": Key("a table of estimator options, e.g. { hidden_layer_sizes = [16], max_iter = 300 }", _table, {}),
        # scikit-learn's random_state takes [0, 2**32 - 1]
        "seed": Key("an int in [0, 2**32 - 1]", _accepted_by(check_int, minimum=0, maximum=2**32 - 1), 0),
    }


SCHEMA: dict[str, dict[str, Key]] = {
    "data": {
        "name": Key("a bundled data set name (jaxprobe.datasets.available())", _string, required=True),
        "options": Key("a table of loader options, e.g. { threshold = 100 }", _table, {}),
        "test_fraction": Key("a number in (0, 1)", _accepted_by(check_number, minimum=0, maximum=1,
                                                            exclusive_minimum=True, exclusive_maximum=True), 0.25),
        "split_seed": Key("an int >= 0", _int_at_least(0), 0),
    },
    "model": _model_section(),
    "compare": _model_section(),
    "probe": {
        "type": Key(f"one of {', '.join(PROBE_TYPES)}", _one_of(PROBE_TYPES), required=True),
        "alpha": Key("a number (prediction_risky: the output value to be undecided about)", _is_number, 0.5),
        "r": Key("a number >= 1 (prediction_risky exponent)", _accepted_by(check_number, minimum=1), 2),
        "target": Key("a class index (int >= 0), or a number for regression (fixed_label)", _is_number),
        "loss": Key("one of cross_entropy, squared, similarity", _one_of(("cross_entropy", "squared", "similarity"))),
        "sigma": Key("a number > 0 (parameter_sensitive: q(θ) = N(θ*, σ² I))", _positive, 0.1),
        "num_draws": Key("an int >= 1 (parameter_sensitive: draws of θ)", _int_at_least(1), 16),
    },
    "localize": {
        "anchor": Key("an int >= 0: a row of the test split", _int_at_least(0), required=True),
        "weight": Key("a number >= 0", _accepted_by(check_number, minimum=0), 1.0),
        "r": Key("a number >= 1", _accepted_by(check_number, minimum=1), 2),
    },
    "constraints": {
        "fixed": Key("a list of feature names held at the anchor's values, e.g. [\"race\"]", _string_list, []),
        "bounds": Key("\"data\" (each feature inside its observed range) or \"none\"", _one_of(("data", "none")),
                      "none"),
    },
    "prior": {
        "kind": Key("\"standard_normal\" (in standardized units) or \"none\"",
                    _one_of(("standard_normal", "none")), "standard_normal"),
    },
    "sampler": {
        "name": Key("a registered sampler (jaxprobe.engine.known_samplers(whole_run=True)) or one added by "
                    "jaxprobe.register_sampler", _string, "mala"),
        "num_chains": Key("an int >= 1", _int_at_least(1), 64),
        "num_samples": Key("an int >= 1", _int_at_least(1), 200),
        "num_warmup": Key("an int >= 0", _int_at_least(0), 200),
        "thin": Key("an int >= 1", _int_at_least(1), 1),
        "temperature": Key("a number > 0", _positive, required=True),
        # the run's rng_key (jaxprobe.sample); a [sweep.grid] axis of seeds is checked per cell (< 2**31)
        "seed": Key("an int in [0, 2**64 - 1]", _accepted_by(check_int, minimum=0, maximum=2**64 - 1), 0),
        "step_size": Key("a number > 0 (fixed: no adaptation)", _positive),
        "step_size_mode": Key("\"per_chain\" or \"shared\"", _one_of(("per_chain", "shared")), "per_chain"),
        "options": Key("a table of the sampler's options, e.g. { num_integration_steps = 20 } for hmc", _table, {}),
        "numerics": Key("\"reproducible\" (bit-identical across device counts) or \"fast\" (plain jax.random and "
                        "reductions); default: reproducible on CPU, fast on GPU/TPU",
                        _string),
    },
    "output": {
        "dir": Key("a folder path", _string, "jaxprobe-out"),
        "plots": Key("true or false (jaxprobe run: features.png, which needs the draws; left out with "
                     "keep_draws = false)", lambda v: isinstance(v, bool), True),
        "keep_draws": Key("true or false (false: no draw is kept, only the verdict's statistics and the "
                          "observables; no samples_original_units.npz)", lambda v: isinstance(v, bool), True),
        "observables": Key("a list of built-in observable names (jaxprobe.sweeps.from_config.OBSERVABLES), e.g. "
                           "[\"disagree\", \"predicted_class\"]", _string_list, []),
        "checkpoint_min_seconds": Key("a number >= 0 (jaxprobe run checkpoints into the output folder a run whose "
                                      "sampling, projected from the warmup's speed, takes at least this many "
                                      "seconds; 0: every run)", _nonnegative, 60.0),
    },
    "precision": {
        "target": Key("\"probe\" (G(x)), \"log_evidence\" (sampler smc) or a name of [output] observables (or "
                      "its answer field, e.g. \"fraction_of_samples_where_models_disagree\" for \"disagree\")",
                      _string, required=True),
        "mcse": Key("a number > 0: the Monte-Carlo standard error to reach", _positive, required=True),
        "max_chains": Key("an int >= 1: the most chains to spend, a multiple of [sampler] num_chains (default 16 x "
                          "num_chains)", _int_at_least(1)),
    },
    "sweep": {
        "grid": Key("a table of \"section.key\" = [values]", _table, required=True),
        "cells_per_batch": Key("an int >= 1", _int_at_least(1)),
        "static": Key("a list of \"section.key\" axes to compile per value", _string_list, []),
    },
}

#: Which probe types read each [probe] key (sweeps/from_config.build_problem).
_PROBE_KEY_READERS = {"alpha": ("prediction_risky",), "r": ("prediction_risky",), "target": ("fixed_label",),
                      "loss": ("fixed_label", "model_contrast", "parameter_sensitive"),
                      "sigma": ("parameter_sensitive",), "num_draws": ("parameter_sensitive",)}

_DEFAULT_LOSS = {"model_contrast": "cross_entropy", "parameter_sensitive": "cross_entropy",
                 "fixed_label": "cross_entropy"}


class _Lines:
    """Find the line of ``[section]`` ``key = ...`` in a TOML text (best effort, for messages)."""

    def __init__(self, text: str):
        self.lines = text.splitlines()

    def find(self, section: str | None, key: str | None = None) -> int | None:
        current = None
        header = re.compile(r"^\s*\[+\s*([^\]]+?)\s*\]+\s*(#.*)?$")
        for number, line in enumerate(self.lines, 1):
            match = header.match(line)
            if match:
                current = match.group(1).replace('"', "").replace(" ", "")
                if key is None and current == section:
                    return number
                continue
            if key is None:
                continue
            if current == section and re.match(rf'^\s*"?{re.escape(key)}"?\s*=', line):
                return number
            if current is None and re.match(rf'^\s*"?{re.escape(section)}\.{re.escape(key)}"?\s*=', line):
                return number
        return None


@dataclass(frozen=True)
class Config:
    """A validated configuration: ``sections`` (defaults filled in), the sweep ``grid`` (``{"section.key":
    [values]}``, empty for a single run), and where it came from.

    Examples
    --------
    >>> text = '''
    ... [data]
    ... name = "iris"
    ... [model]
    ... kind = "logistic_regression"
    ... [probe]
    ... type = "prediction_risky"
    ... alpha = 0.5
    ... [sampler]
    ... num_chains = 8
    ... num_samples = 100
    ... temperature = 0.1
    ... '''
    >>> config = parse_config(text)
    >>> sorted(config.sections)[:4], config.grid                     # a single run: no grid
    (['constraints', 'data', 'model', 'output'], {})
    """

    sections: dict[str, dict[str, Any]]
    grid: dict[str, list[Any]]
    path: str | None

    def get(self, dotted: str) -> Any:
        section, key = dotted.split(".", 1)
        return self.sections.get(section, {}).get(key)

    def with_values(self, values: dict[str, Any]) -> "Config":
        """A copy with ``{"section.key": value}`` replaced (one sweep cell)."""
        sections = {name: dict(content) for name, content in self.sections.items()}
        for dotted, value in values.items():
            section, key = dotted.split(".", 1)
            sections.setdefault(section, {})[key] = value
        return Config(sections, {}, self.path)


def _memory_bytes() -> float:
    """Physical memory of this machine (inf where it cannot be read)."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return math.inf


def load_config(path: str | os.PathLike, *, sweep: bool | None = False) -> Config:
    """Read and validate a TOML file; ``sweep=True`` requires a ``[sweep.grid]`` table, ``False`` refuses one,
    ``None`` takes the file as it is (a sweep when it has a ``[sweep]`` section).

    Examples
    --------
    >>> text = '''
    ... [data]
    ... name = "iris"
    ... [model]
    ... kind = "logistic_regression"
    ... [probe]
    ... type = "prediction_risky"
    ... alpha = 0.5
    ... [sampler]
    ... num_chains = 8
    ... num_samples = 100
    ... temperature = 0.1
    ... '''
    >>> with open("run.toml", "w") as file:
    ...     _ = file.write(text + '[sweep.grid]' + chr(10) + '"sampler.temperature" = [0.01, 0.1]' + chr(10))
    >>> config = load_config("run.toml", sweep=True)                 # jaxprobe sweep run.toml
    >>> config.grid, config.path
    ({'sampler.temperature': [0.01, 0.1]}, 'run.toml')
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ConfigError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ConfigError(f"{path}: is a folder, not a configuration file (pass a .toml file, e.g. "
                          "examples/prediction_risky.toml)")
    try:
        with open(path, "rb") as stream:
            raw = stream.read()
    except OSError as error:
        raise ConfigError(f"{path}: cannot be read ({error.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text ({error})") from None
    return parse_config(text, path=path, sweep=sweep)


def parse_config(text: str, *, path: str | None = None, sweep: bool | None = False) -> Config:
    """Validate the TOML ``text`` (see the module docstring; ``sweep`` as for :func:`load_config`); raises
    :class:`ConfigError`.

    Examples
    --------
    >>> text = '''
    ... [data]
    ... name = "iris"
    ... [model]
    ... kind = "logistic_regression"
    ... [probe]
    ... type = "prediction_risky"
    ... alpha = 0.5
    ... [sampler]
    ... num_chains = 8
    ... num_samples = 100
    ... temperature = 0.1
    ... '''
    >>> config = parse_config(text)
    >>> config.sections["sampler"]["name"], config.sections["sampler"]["num_warmup"]   # defaults filled in
    ('mala', 200)
    >>> parse_config(text.replace("num_chains", "num_chain"))        # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    jaxprobe.config.ConfigError: <config>:10: [sampler] num_chain: unknown key; expected one of name, num_chains, ...
    """
    where = path or "<config>"
    if tomllib is None:  # pragma: no cover - Python 3.10 without tomli
        raise ConfigError("reading configuration files needs Python >= 3.11 (tomllib) or `pip install tomli`")
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{where}: not valid TOML: {error}") from None
    fail = _failure_at(_Lines(text), where)
    if sweep is None:
        sweep = "sweep" in document
    _check_section_names(document, sweep, fail)
    sections = _checked_sections(document, fail)
    grid = _checked_grid(sections, fail) if sweep else {}

    output = sections["output"]
    if not output["keep_draws"] and not sweep:  # a sweep's plot is of its table, which needs no draws
        if "plots" in document.get("output", {}) and output["plots"]:
            raise fail("output", "plots", "plots need the draws: set keep_draws = true or plots = false")
        output["plots"] = False  # left at its default: no features.png without draws

    if sweep and "precision" in sections:
        raise fail("precision", None, "[precision] is for `jaxprobe run` (one probe, runs added until the error is "
                                      "reached); a sweep's cells have the run size [sampler] gives")
    _check_meaning(sections, grid, fail)
    return Config(sections, grid, path)


#: ``fail(section, key, message)``: the :class:`ConfigError` to raise, naming the file, line and key.
_Fail = Callable[..., ConfigError]


def _failure_at(lines: _Lines, where: str) -> _Fail:
    """The ``fail`` of the file ``where``: each error names the file, the line of ``[section] key`` and the key."""

    def fail(section: str | None, key: str | None, message: str) -> ConfigError:
        number = lines.find(section, key) if section else None
        location = f"{where}:{number}" if number else where
        name = f"[{section}] {key}" if key else f"[{section}]" if section else "file"
        return ConfigError(f"{location}: {name}: {message}")

    return fail


def _check_section_names(document: dict[str, Any], sweep: bool, fail: _Fail) -> None:
    """Only known sections, the required ones present, and a [sweep] section exactly when a sweep is read."""
    unknown = sorted(set(document) - set(SCHEMA))
    if unknown:
        raise fail(unknown[0], None, f"unknown section; expected one of {', '.join(f'[{s}]' for s in SCHEMA)}")
    for required in ("data", "model", "probe", "sampler"):
        if required not in document:
            raise fail(None, None, f"missing section [{required}]")
    if sweep and "sweep" not in document:
        raise fail(None, None, "missing section [sweep] with a [sweep.grid] table of \"section.key\" = [values]")
    if not sweep and "sweep" in document:
        raise fail("sweep", None, "a [sweep] section is for `jaxprobe sweep`; `jaxprobe run` runs one probe")


def _checked_sections(document: dict[str, Any], fail: _Fail) -> dict[str, dict[str, Any]]:
    """Every section's keys checked against :data:`SCHEMA`, defaults filled in (optional sections: all defaults)."""
    sections: dict[str, dict[str, Any]] = {}
    for section, content in document.items():
        if not isinstance(content, dict):
            raise fail(section, None, "must be a table ([section] followed by key = value lines)")
        sections[section] = _checked_keys(section, content, fail)
    for section in ("constraints", "prior", "output"):  # optional sections: all defaults
        sections.setdefault(section, {key: spec.default for key, spec in SCHEMA[section].items()})
    return sections


def _checked_keys(section: str, content: dict[str, Any], fail: _Fail) -> dict[str, Any]:
    """One section's keys: each known and of its expected form; a missing one is required or takes its default."""
    schema = SCHEMA[section]
    checked = {}
    for key, value in content.items():
        if key not in schema:
            if section == "sweep" and isinstance(value, dict):
                raise fail(section, key, "unknown table; the grid goes in [sweep.grid]")
            raise fail(section, key, f"unknown key; expected one of {', '.join(schema)}")
        if not schema[key].check(value):
            raise fail(section, key, f"must be {schema[key].expected}, got {value!r}")
        checked[key] = value
    for key, spec in schema.items():
        if key not in checked:
            if spec.required:
                raise fail(section, None, f"missing key {key!r} ({spec.expected})")
            checked[key] = spec.default
    return checked


def _checked_grid(sections: dict[str, dict[str, Any]], fail: _Fail) -> dict[str, list[Any]]:
    """The [sweep.grid] axes: each a configurable ``"section.key"`` with a non-empty list of values of its key's
    form (an axis of an optional section adds the section, with its defaults); [sweep] static names axes."""
    grid: dict[str, list[Any]] = {}
    for dotted, values in sections["sweep"]["grid"].items():
        section_key = ("sweep.grid", dotted)
        if "." not in dotted:
            raise fail(*section_key, "an axis is named \"section.key\", e.g. \"sampler.temperature\"")
        section, key = dotted.split(".", 1)
        if section in ("sweep", "output", "precision") or section not in SCHEMA or key not in SCHEMA[section]:
            raise fail(*section_key, "names no configurable key; axes are \"section.key\" of "
                                     "[data], [model], [compare], [probe], [localize], [constraints], [prior] "
                                     "or [sampler]")
        if not isinstance(values, list) or not values:
            raise fail(*section_key, "must be a non-empty list of values")
        spec = SCHEMA[section][key]
        for index, value in enumerate(values):
            if not spec.check(value):
                raise fail(*section_key, f"value {index} must be {spec.expected}, got {value!r}")
        if section not in sections:  # an axis may introduce an optional section, e.g. localize.weight
            if any(v.required and k != key for k, v in SCHEMA[section].items()):
                missing = [k for k, v in SCHEMA[section].items() if v.required and k != key]
                raise fail(*section_key, f"needs a [{section}] section with {', '.join(missing)}")
            sections[section] = {k: v.default for k, v in SCHEMA[section].items()}
        grid[dotted] = values
    for axis in sections["sweep"]["static"]:
        if axis not in grid:
            raise fail("sweep", "static", f"{axis!r} is not an axis of [sweep.grid]")
    return grid


def _check_meaning(sections: dict[str, dict[str, Any]], grid: dict[str, list[Any]], fail: _Fail) -> None:
    """Checks across keys: data set names, models for each probe type, anchors, fixed features."""
    from jaxprobe import datasets

    def values(dotted: str) -> list[Any]:  # every value a key takes in the run or the sweep
        section, key = dotted.split(".", 1)
        return grid.get(dotted, [sections.get(section, {}).get(key)])

    for name in values("data.name"):  # a data.name axis names data sets too
        if name not in datasets.available():
            where = ("sweep.grid", "data.name") if "data.name" in grid else ("data", "name")
            raise fail(*where, f"unknown data set {name!r}; expected one of {', '.join(datasets.available())}")
    for section in ("model", "compare"):
        if section in sections:
            _check_model(section, sections[section], values(f"{section}.kind"), fail)
    _check_probe_types(sections, grid, values, fail)
    _check_grid_axes_are_read(sections, grid, values, fail)
    _check_loss(sections["probe"], values, fail)
    _check_grid_has_no_tables(grid, fail)
    _check_engine_names(sections, grid, values, fail)
    _check_samplers(sections, values, fail)
    widest = _check_fixed_features(sections, values, fail)
    _check_observables(sections, grid, fail, values)
    _check_precision(sections, fail)
    _check_draws_fit_in_memory(sections, values, widest, fail)
    if sections["constraints"]["fixed"] and "localize" not in sections:
        raise fail("constraints", "fixed", "fixed features are held at the anchor's values: add a [localize] "
                                           "section with anchor = <row of the test split>")


def _check_model(section: str, model: dict[str, Any], kinds: list[Any], fail: _Fail) -> None:
    """[model] / [compare]: a kind fitted here (``kinds``: every value of its kind) or a readable saved network
    (.npz / .msgpack, never a pickle) with its output layer, not both."""
    kinds = [k for k in kinds if k is not None]
    if kinds and model.get("path"):
        raise fail(section, "path", "give either kind or path, not both")
    if not kinds and not model.get("path"):
        raise fail(section, None, "needs kind = \"...\" (fitted here) or path = \"...\" (a saved network)")
    if model.get("path"):
        if not model["path"].endswith((".npz", ".msgpack")):
            raise fail(section, "path", "must end in .npz or .msgpack (pickle files are never loaded)")
        if model.get("output") is None:
            raise fail(section, "output", f"a saved network needs output = one of {', '.join(OUTPUTS)}")
        if not os.path.isfile(model["path"]) or not os.access(model["path"], os.R_OK):
            raise fail(section, "path", f"{model['path']!r} is not a readable file (paths are relative to the "
                                        f"folder jaxprobe runs in, {os.getcwd()})")


def _check_probe_types(sections: dict[str, dict[str, Any]], grid: dict[str, list[Any]],
                       values: Callable[[str], list[Any]], fail: _Fail) -> None:
    """What each probe type needs: a [compare] model, a target label, a model with parameters θ."""
    probe = sections["probe"]
    for probe_type in values("probe.type"):
        if probe_type == "model_contrast" and "compare" not in sections:
            raise fail("probe", "type", "model_contrast needs a [compare] section: the second model ŷ")
        if probe_type == "fixed_label" and probe.get("target") is None and "probe.target" not in grid:
            raise fail("probe", "target", "fixed_label needs target = a class index (or a regression value)")
        if probe_type == "parameter_sensitive":
            for kind in values("model.kind"):
                if kind is not None and kind not in ("logistic_regression", "mlp"):
                    raise fail("model", "kind", "parameter_sensitive needs a model with parameters θ: "
                                                "logistic_regression, mlp or a saved network (path)")


def _check_grid_axes_are_read(sections: dict[str, dict[str, Any]], grid: dict[str, list[Any]],
                              values: Callable[[str], list[Any]], fail: _Fail) -> None:
    """A grid axis over a key that none of its cells reads would give identical cells under different labels
    (what string axes did before they were applied): refused, naming who reads the key."""
    types = set(values("probe.type"))
    for dotted in grid:
        section, key = dotted.split(".", 1)
        readers = _PROBE_KEY_READERS.get(key, ()) if section == "probe" else ()
        if readers and not types & set(readers):
            raise fail("sweep.grid", dotted, f"only {' and '.join(readers)} probes read {key}, and these cells are "
                                             f"{', '.join(sorted(types))}: every cell would be the same")
        if section == "compare" and "model_contrast" not in types:
            raise fail("sweep.grid", dotted, "only model_contrast reads [compare]: every cell would be the same")
        if section in ("model", "compare") and key in ("activation", "output") and not sections[section].get("path"):
            raise fail("sweep.grid", dotted, f"{key} is read for a saved network (path = ...) only: every cell "
                                             "would be the same")


def _check_loss(probe: dict[str, Any], values: Callable[[str], list[Any]], fail: _Fail) -> None:
    """The [probe] loss fits every probe type; left out, it becomes the probe type's default."""
    for probe_type in values("probe.type"):
        loss = probe.get("loss")
        if loss == "similarity" and probe_type in ("fixed_label",):
            raise fail("probe", "loss", "fixed_label takes loss cross_entropy or squared")
    if probe.get("loss") is None:
        probe["loss"] = _DEFAULT_LOSS.get(probe["type"], "cross_entropy")


def _check_grid_has_no_tables(grid: dict[str, list[Any]], fail: _Fail) -> None:
    """Options tables and the numerics mode are set once per sweep, never a grid axis."""
    for dotted in ("sampler.options", "model.options", "compare.options", "data.options"):
        if dotted in grid:  # tables are no grid values (cell ids, the results table): one sweep per table
            raise fail("sweep.grid", dotted, f"options tables are not a grid axis: set them once in "
                                             f"[{dotted.split('.')[0]}] options (one sweep per table)")
    if "sampler.numerics" in grid:
        raise fail("sweep.grid", "sampler.numerics", "numerics is not a grid axis: set it once in [sampler] numerics")


def _check_engine_names(sections: dict[str, dict[str, Any]], grid: dict[str, list[Any]],
                        values: Callable[[str], list[Any]], fail: _Fail) -> None:
    """[sampler] name: a sampler of the engine's registry (read now, so registered samplers count); numerics: one of
    the engine's modes. The first check that imports JAX (see _ENGINE_NAMED)."""
    from jaxprobe import samplers  # noqa: F401  registers the whole-run samplers
    from jaxprobe.engine.numerics import MODES
    from jaxprobe.engine.registry import known_samplers

    known = {"sampler.name": (known_samplers(whole_run=True), "a registered sampler: {} or one added by "
                                                              "jaxprobe.register_sampler"),
             "sampler.numerics": (MODES, "one of {}")}
    for dotted in _ENGINE_NAMED:
        names, expected = known[dotted]
        for index, value in enumerate(values(dotted)):
            if value is not None and value not in names:
                where = ("sweep.grid", dotted) if dotted in grid else tuple(dotted.split("."))
                what = f"value {index} must be" if dotted in grid else "must be"
                raise fail(*where, f"{what} {expected.format(', '.join(names))}, got {value!r}")


def _check_samplers(sections: dict[str, dict[str, Any]], values: Callable[[str], list[Any]], fail: _Fail) -> None:
    """Each sampler takes the [sampler] options, and no gradient-based sampler meets a piecewise constant model."""
    from jaxprobe.engine.registry import make_kernel, whole_run_sampler

    for name in values("sampler.name"):  # each sampler's options, checked as sample() checks sampler_options
        try:
            if whole_run_sampler(name) is not None:  # a whole-run sampler (jaxprobe.samplers) checks its own
                whole_run_sampler(name).check_options({"sampler_options": sections["sampler"]["options"]})
            else:
                make_kernel(name, sections["sampler"]["options"])
        except (TypeError, ValueError) as error:
            raise fail("sampler", "options", str(error)) from None
    from jaxprobe.engine.api import check_settings

    for name in values("sampler.name"):  # num_warmup = 0 with nothing to adapt the step size: every cell would fail
        for num_warmup in values("sampler.num_warmup"):
            for step_size in values("sampler.step_size"):
                try:
                    check_settings(num_samples=1, num_warmup=num_warmup, step_size=step_size,
                                   needs_step_size=whole_run_sampler(name) is None)
                except (TypeError, ValueError) as error:
                    raise fail("sampler", "num_warmup", f"{error} (sampler {name!r}: set [sampler] step_size)") from None
    for kind in values("model.kind"):
        if kind in TREE_KINDS and any(whole_run_sampler(s) is None and make_kernel(s).uses_gradient
                                      for s in values("sampler.name")):
            raise fail("model", "kind", f"{kind} is piecewise constant (zero gradient): use it as the [compare] "
                                        "model, or sampler name = \"rwmh\"")


def _check_fixed_features(sections: dict[str, dict[str, Any]], values: Callable[[str], list[Any]],
                          fail: _Fail) -> int:
    """The [constraints] fixed features are features of every data set used; returns the widest data set's
    number of features (what a kept draw holds)."""
    from jaxprobe import datasets

    widest = 0
    for data_name in values("data.name"):
        dataset = datasets.load(data_name)
        widest = max(widest, dataset.x.shape[1])
        names = [feature.name for feature in dataset.features]
        unknown = [name for name in sections["constraints"]["fixed"] if name not in names]
        if unknown:
            raise fail("constraints", "fixed", f"no feature(s) {unknown} in {data_name!r}; its features are {names}")
    return widest


def _check_draws_fit_in_memory(sections: dict[str, dict[str, Any]], values: Callable[[str], list[Any]], widest: int,
                               fail: _Fail) -> None:
    """Memory the kept draws take on the host (positions, float32): refuse what cannot fit, before sampling."""
    for chains in values("sampler.num_chains") if sections["output"]["keep_draws"] else ():
        for draws in values("sampler.num_samples"):
            if chains is None or draws is None:
                continue
            # float32 positions and log density, kept on the host and written once more in original units
            needed = 2 * 4.0 * chains * draws * (widest + 1)
            if needed > _memory_bytes():
                raise fail("sampler", "num_chains", f"{chains} chains x {draws} draws need about {needed / 2**30:.3g} "
                                                    f"GiB for the draws alone, more than this machine's "
                                                    f"{_memory_bytes() / 2**30:.3g} GiB")


def _check_observables(sections, grid, fail, values) -> None:
    """``[output] observables``: built-in names, each once, defined for every probe type and task the run or
    sweep has, and (in a sweep) depending on no key the grid varies: a sweep's observables are one function of x
    for all of its cells."""
    requested = sections["output"]["observables"]
    if not requested:
        return
    from jaxprobe import datasets

    seen = set()
    for name in requested:
        if name in seen:
            raise fail("output", "observables", f"lists {name!r} twice")
        seen.add(name)
    tasks = sorted({datasets.load(data_name).task for data_name in values("data.name")})
    for probe_type in values("probe.type"):
        for task in tasks:
            valid = observables_for(probe_type, task)
            for name in requested:
                if name not in OBSERVABLES:
                    raise fail("output", "observables", f"unknown observable {name!r}; the built-ins for a "
                                                        f"{probe_type} probe of a {task} model are "
                                                        f"{', '.join(valid)}")
                if name not in valid:
                    raise fail("output", "observables", f"{name!r} ({OBSERVABLES[name].doc}) is not defined for a "
                                                        f"{probe_type} probe of a {task} model; the built-ins "
                                                        f"there are {', '.join(valid)}")
    for name in requested:
        for dotted in grid:
            if OBSERVABLES[name].depends_on(dotted):
                raise fail("output", "observables", f"{name!r} depends on {dotted}, which [sweep.grid] varies: a "
                                                    f"sweep's observables are one function of x for every cell "
                                                    f"(leave {name!r} out, or run one sweep per {dotted}); "
                                                    f"\"probe\" is folded in per cell")


def precision_observable(target: str) -> str:
    """The observable a ``[precision] target`` names: itself (``"probe"``, ``"log_evidence"``, an observable name),
    or the built-in observable whose answer field it is (``"fraction_of_samples_where_models_disagree"`` →
    ``"disagree"``, :data:`OBSERVABLES`).

    Examples
    --------
    >>> precision_observable("fraction_of_samples_where_models_disagree"), precision_observable("probe")
    ('disagree', 'probe')
    """
    fields = {spec.answer: name for name, spec in OBSERVABLES.items() if spec.answer}
    return fields.get(target, target)


def _check_precision(sections: dict[str, dict[str, Any]], fail: _Fail) -> None:
    """``[precision]``: a target the run estimates with an error (G(x), log Z after SMC, a listed observable or its
    answer field) and a budget of whole runs of ``[sampler] num_chains`` chains, as ``generate`` checks it."""
    precision = sections.get("precision")
    if precision is None:
        return
    from jaxprobe.engine.registry import known_sampler_starts_at_target

    sampler = sections["sampler"]
    target = precision_observable(precision["target"])
    listed = sections["output"]["observables"]
    if target == "log_evidence":
        if not known_sampler_starts_at_target(sampler["name"]):
            raise fail("precision", "target", f"\"log_evidence\" is estimated by sampler \"smc\" only, and [sampler] "
                                              f"name is {sampler['name']!r}")
    elif target != "probe" and target not in listed:
        hint = f" (add {target!r} to [output] observables)" if target in OBSERVABLES else ""
        raise fail("precision", "target", f"{precision['target']!r} is not estimated by this run{hint}: expected "
                                          f"\"probe\", \"log_evidence\" or one of [output] observables {listed}")
    max_chains = precision.get("max_chains")
    if max_chains is not None and (max_chains < sampler["num_chains"] or max_chains % sampler["num_chains"]):
        raise fail("precision", "max_chains", f"must be a multiple of [sampler] num_chains = {sampler['num_chains']} "
                                              f"(whole runs are added), got {max_chains}")

