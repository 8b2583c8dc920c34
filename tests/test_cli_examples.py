"""Every example config through the command line, checked against the Python API: the same question, composed by
hand from public functions (probes, priors, constraints.from_dataset, generate), with the same key gives the same
draws, the same files in original units and the same reported answer. Small sizes; slow (each run compiles).

Only the fitted models come from the config's own preparation (``Prepared``): they are what the config names,
and refitting them here would test scikit-learn, not jaxprobe.
"""

import json
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprobe
from jaxprobe import constraints, priors, probes
from jaxprobe.cli import EXIT_OK, main
from jaxprobe.engine import estimates
from jaxprobe.config import load_config
from jaxprobe.models.distributions import GaussianPerturbation
from jaxprobe.sweeps import read_table
from jaxprobe.sweeps.from_config import ENGINE_KEYS, Prepared

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")
RUN_EXAMPLES = sorted(name for name in os.listdir(EXAMPLES) if name.endswith(".toml") and not name.startswith("sweep"))
SWEEP_EXAMPLES = sorted(name for name in os.listdir(EXAMPLES) if name.startswith("sweep") and name.endswith(".toml"))
SIZES = {"num_chains": 8, "num_samples": 12, "num_warmup": 12}


def _shrunk(name, tmp_path, grid=None, static=None):
    """The example with SIZES (and for a sweep, a smaller grid, axes made static); every other setting as shipped."""
    text = open(os.path.join(EXAMPLES, name)).read()
    for key, value in SIZES.items():
        text = re.sub(rf"^{key} = \d+", f"{key} = {value}", text, flags=re.M)
    for axis, values in (grid or {}).items():
        text = re.sub(rf'^"{re.escape(axis)}" = \[.*\]$', f'"{axis}" = {json.dumps(values)}', text, flags=re.M)
    if static:  # [sweep] static: these axes compile per value (here: every axis, so each cell is one run)
        text = re.sub(r"^cells_per_batch = \d+\n", "", text, flags=re.M)
        if "[sweep]\n" not in text:
            text = text.replace("[sweep.grid]", "[sweep]\n\n[sweep.grid]")
        text = text.replace("[sweep]\n", f"[sweep]\nstatic = {json.dumps(static)}\n", 1)
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _question(config, prepared, cell=None):
    """(probe, prior, constraints, temperature) of the config's question (one cell's), from public functions only,
    with plain Python numbers as a user would write them."""
    temperature = (cell or {}).get("sampler.temperature", config.get("sampler.temperature"))
    cell = {key: value for key, value in (cell or {}).items() if not key.startswith("sampler.")}
    get = lambda dotted: cell.get(dotted, config.get(dotted))  # noqa: E731
    dataset, model = prepared.dataset, prepared.model
    probe_type = config.get("probe.type")
    if probe_type == "prediction_risky":
        output = (lambda x: model.fn(x)[1]) if prepared.task == "binary" else model.fn  # P(class 1), or all
        probe = probes.prediction_risky(output, alpha=get("probe.alpha"), r=config.get("probe.r"))
    elif probe_type == "model_contrast":
        probe = probes.model_contrast(model.fn, prepared.compare.fn, loss=config.get("probe.loss"))
    elif probe_type == "parameter_sensitive":
        draws = GaussianPerturbation(model.params, config.get("probe.sigma"), config.get("probe.num_draws"),
                                     jax.random.key(config.get("model.seed")))
        probe = probes.parameter_sensitive(model.apply_fn, draws, loss=config.get("probe.loss"))
    else:
        probe = probes.fixed_label(model.fn, get("probe.target"), loss=config.get("probe.loss"))
    anchor, fixed = None, ()
    if "localize" in config.sections:
        anchor = prepared.z_test[get("localize.anchor")]
        probe = probe + get("localize.weight") * probes.localize(jnp.asarray(anchor), r=config.get("localize.r"))
        fixed = tuple(config.get("constraints.fixed"))
    restriction = constraints.from_dataset(dataset, standardized=True, immutable=fixed,
                                           anchor=anchor if fixed else None,
                                           bounds="range" if config.get("constraints.bounds") == "data" else None)
    prior = None
    if config.get("prior.kind") == "standard_normal":
        prior = priors.DiagonalGaussian(np.zeros(prepared.num_features), np.ones(prepared.num_features))
    return probe, prior, restriction or None, temperature


def _generate(config, prepared, cell=None):
    """generate's answer. Keys as documented for sweep: fold_in(key(sampler.seed), the cell's seed axis or 0)."""
    probe, prior, restriction, temperature = _question(config, prepared, cell)
    key = jax.random.fold_in(jax.random.key(config.get("sampler.seed")), (cell or {}).get("sampler.seed", 0))
    return jaxprobe.generate(key, probe, temperature=temperature,
                             prior=prior, constraints=restriction, dim=prepared.num_features,
                             sampler=config.get("sampler.name"), num_chains=config.get("sampler.num_chains"),
                             num_samples=config.get("sampler.num_samples"),
                             num_warmup=config.get("sampler.num_warmup"), step_size=config.get("sampler.step_size"),
                             progress=False, convergence="ignore")


def _as_reported(values, samples) -> np.ndarray:
    """The mean of per-draw ``values`` ``(C·N, ...)`` as jaxprobe reports an answer: after SMC each particle group
    weighted by its evidence estimate (jaxprobe.engine.estimates), else the plain mean."""
    values = np.asarray(values, np.float64)
    per_chain = values.reshape(samples.positions.shape[:2] + values.shape[1:])
    return estimates.estimate(per_chain, num_groups=samples.num_groups,
                              group_log_evidence=samples.group_log_evidence).mean


@pytest.mark.slow
@pytest.mark.parametrize("name", RUN_EXAMPLES)
def test_run_example_is_the_python_answer(name, tmp_path):
    path = _shrunk(name, tmp_path)
    out = tmp_path / "out"
    assert main(["run", path, "--out", str(out), "--quiet"]) == EXIT_OK
    config = load_config(path, sweep=False)
    prepared = Prepared(config)
    expected = _generate(config, prepared)

    cli = jaxprobe.Samples.load(out / "samples.npz")
    np.testing.assert_array_equal(cli.positions, expected.positions)
    np.testing.assert_array_equal(cli.logdensity, expected.logdensity)
    original = np.load(out / "samples_original_units.npz", allow_pickle=False)
    z = expected.positions.reshape(-1, prepared.num_features)
    x = prepared.dataset.unstandardize(z)
    np.testing.assert_allclose(original["x"].reshape(x.shape), x, rtol=1e-6)
    assert list(original["feature_names"]) == list(prepared.dataset.feature_names)

    # The reported answer is computed from these draws (the model's predictions on them, feature means).
    summary = json.loads((out / "summary.json").read_text())
    answer = summary["answer"]
    outputs = np.asarray(jax.vmap(prepared.model.fn)(jnp.asarray(z)))
    if prepared.task == "regression":
        assert answer["mean_model_output"] == pytest.approx(float(_as_reported(outputs, expected).mean()), rel=1e-5)
    else:
        predicted = outputs.argmax(axis=-1)
        for k, class_name in enumerate(prepared.dataset.class_names):
            assert answer["predicted_class_fractions"][class_name] == pytest.approx(
                _as_reported(predicted == k, expected))
        if config.get("probe.type") == "fixed_label":
            assert answer["fraction_with_target_prediction"] == pytest.approx(
                _as_reported(predicted == config.get("probe.target"), expected))
        if config.get("probe.type") == "prediction_risky":
            assert answer["fraction_within_0.1_of_alpha"] == pytest.approx(
                _as_reported(np.abs(outputs[:, 1] - config.get("probe.alpha")) < 0.1, expected))
        if config.get("probe.type") == "model_contrast":
            other = np.asarray(jax.vmap(prepared.compare.fn)(jnp.asarray(z))).argmax(axis=-1)
            assert answer["fraction_of_samples_where_models_disagree"] == pytest.approx(
                _as_reported(predicted != other, expected))
    feature_means = _as_reported(x, expected)
    for i, feature in enumerate(prepared.dataset.feature_names):
        assert summary["features_original_units"][feature]["mean"] == pytest.approx(float(feature_means[i]),
                                                                                      rel=1e-5, abs=1e-6)
    assert summary["verdict"] == expected.verdict.to_dict()
    if expected.log_evidence is not None:
        assert summary["log_evidence"] == pytest.approx(expected.log_evidence)




def test_smc_examples_have_enough_groups_for_trusted_error_bars():
    """Every example that samples with SMC runs, as shipped, enough chains for at least MIN_BATCHES independent
    particle groups: with fewer, every ± of its answer is warned as untrustworthy (128 chains gave 2 groups, and the
    model-contrast example printed 0.937 ± 0.030 against an exact 0.862)."""
    from jaxprobe.engine import SMC
    from jaxprobe.engine.streaming import MIN_BATCHES

    checked = []
    for name in RUN_EXAMPLES + SWEEP_EXAMPLES:
        config = load_config(os.path.join(EXAMPLES, name), sweep=name.startswith("sweep"))
        if config.get("sampler.name") != "smc":
            continue
        options = config.sections["sampler"].get("options") or {}
        groups = SMC(**{k: v for k, v in options.items() if k == "num_groups"}).groups(config.get("sampler.num_chains"))
        assert groups >= MIN_BATCHES, f"{name}: {config.get('sampler.num_chains')} chains give {groups} SMC groups"
        checked.append(name)
    assert "model_contrast.toml" in checked and "sweep_temperature.toml" in checked


SWEEP_GRIDS = {  # four cells of each grid: every kind of axis the example has (numeric, seed, string), with values
    # other than the config's own so that an axis that is not applied shows
    "sweep_temperature.toml": {"sampler.temperature": [0.01, 0.3], "probe.alpha": [0.25, 0.75], "sampler.seed": [1]},
    "sweep_counterfactual.toml": {"localize.anchor": [1, 3], "localize.weight": [1.0],
                                  "model.kind": ["logistic_regression", "mlp"]},
}


def _same(reported, value) -> bool:
    """A results.csv value (as read_table gives it) is a grid value."""
    return reported == value if isinstance(value, str) else float(reported) == float(value)


@pytest.mark.slow
@pytest.mark.parametrize("name", SWEEP_EXAMPLES)
def test_sweep_example_cells_are_the_python_answers(name, tmp_path):
    """Every axis static, so every cell is its own program: then each cell of ``jaxprobe sweep`` is the Python
    generate of its own question, bit for bit (string axes select their model, numeric ones their probe
    parameter, seeds their key). Batched cells equal it in distribution (test_cli.py, sweeps/test_core.py)."""
    assert name in SWEEP_GRIDS, f"{name}: add its grid to SWEEP_GRIDS"
    path = _shrunk(name, tmp_path, SWEEP_GRIDS[name], static=list(SWEEP_GRIDS[name]))
    out = tmp_path / "out"
    assert main(["sweep", path, "--out", str(out), "--quiet"]) == EXIT_OK
    rows = read_table(out / "results.csv")
    assert len(rows) == int(np.prod([len(v) for v in SWEEP_GRIDS[name].values()]))
    # The cells compared with Python: the grid's diagonal (cell k takes value k of every axis, the last one past
    # an axis's end), so that every value of every axis is checked with one Python run per value, not per cell.
    diagonal = [{axis: values[min(k, len(values) - 1)] for axis, values in SWEEP_GRIDS[name].items()}
                for k in range(max(len(values) for values in SWEEP_GRIDS[name].values()))]

    def on_diagonal(row):
        return any(all(_same(row[ENGINE_KEYS.get(axis, axis)], value) for axis, value in point.items())
                   for point in diagonal)
    checked = [row for row in rows if on_diagonal(row)]
    assert len(checked) == len(diagonal), (diagonal, rows)
    for row in checked:
        cell = {axis: row[ENGINE_KEYS.get(axis, axis)] for axis in SWEEP_GRIDS[name]}  # engine axes: short names
        static = {axis: value for axis, value in cell.items() if isinstance(value, str)}
        text = open(path).read().split("[sweep]")[0]
        for axis, value in static.items():
            section, key = axis.split(".")
            text = re.sub(rf"(\[{section}\][^\[]*?^{key} = )\S+", rf'\g<1>"{value}"', text, flags=re.M | re.S)
        single = tmp_path / "single.toml"
        single.write_text(text + '\n[output]\ndir = "unused"\n')
        config = load_config(str(single), sweep=False)
        assert all(config.get(axis) == value for axis, value in static.items())
        expected = _generate(config, Prepared(config), {k: v for k, v in cell.items() if k not in static})
        swept = jaxprobe.Samples.load(out / row["samples"])
        np.testing.assert_array_equal(swept.positions, expected.positions, err_msg=str(cell))
        probe_values = jax.vmap(_question(config, Prepared(config), cell)[0])(jnp.asarray(
            expected.positions.reshape(-1, expected.positions.shape[-1])))
        assert row["probe_mean"] == pytest.approx(float(_as_reported(probe_values, expected)), rel=1e-4, abs=1e-6)


_EVERY_STATIC_AXIS = """
[data]
name = "breast_cancer"

[model]
kind = "logistic_regression"

[probe]
type = "fixed_label"
target = 1
alpha = 0.5

[prior]
kind = "standard_normal"

[sampler]
name = "mala"
num_chains = 8
num_samples = 12
num_warmup = 0
step_size = 0.02
temperature = 0.1

[sweep.grid]
"data.name" = ["breast_cancer", "wine"]
"probe.type" = ["fixed_label", "prediction_risky"]
"sampler.name" = ["mala", "rwmh"]
"""


@pytest.mark.slow
def test_data_set_probe_type_and_sampler_axes_select_what_they_name(tmp_path):
    """The string axes the examples do not have: each data.name, probe.type and sampler.name cell of jaxprobe sweep
    is the Python generate of its own question (that data set's model, that probe, that sampler), bit for bit.
    Without warmup (a fixed step size): which question a cell asks does not need it, and each cell then compiles no
    adaptation programs (the examples' cells above are compared with theirs)."""
    path = tmp_path / "axes.toml"
    path.write_text(_EVERY_STATIC_AXIS)
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--quiet"]) == EXIT_OK
    rows = read_table(out / "results.csv")
    assert len(rows) == 8
    answers = set()
    for row in rows:
        text = _EVERY_STATIC_AXIS.split("[sweep.grid]")[0]
        for section, key, column in (("data", "name", "data.name"), ("probe", "type", "probe.type"),
                                     ("sampler", "name", "sampler")):
            text = re.sub(rf"(\[{section}\][^\[]*?^{key} = )\S+", rf'\g<1>"{row[column]}"', text, flags=re.M | re.S)
        single = tmp_path / "single.toml"
        single.write_text(text)
        config = load_config(str(single), sweep=False)
        prepared = Prepared(config)
        expected = _generate(config, prepared)
        swept = jaxprobe.Samples.load(out / row["samples"])
        assert swept.positions.shape[-1] == prepared.num_features and swept.sampler == row["sampler"]
        np.testing.assert_array_equal(swept.positions, expected.positions, err_msg=str(row))
        answers.add(float(swept.positions.mean()))
    assert len(answers) == 8


_ONE_AXIS_BASE = """
[data]
name = "breast_cancer"

[model]
kind = "{model_kind}"

[compare]
kind = "mlp"

[probe]
type = "{probe_type}"
target = 1

[localize]
anchor = 0
weight = 0.1

[prior]
kind = "standard_normal"

[sampler]
name = "mala"
num_chains = 8
num_samples = 12
{warmup}
temperature = 0.1

[sweep.grid]
"{axis}" = {values}
"""

#: No warmup and a fixed step size: each cell compiles no adaptation programs (half of a cell's compiling; these
#: sweeps test which question a cell asks, not warmup). The axes that act through warmup get one.
_NO_WARMUP = "num_warmup = 0\nstep_size = 0.02"
_WARMUP = "num_warmup = 12"
_ACT_THROUGH_WARMUP = ("sampler.num_warmup", "sampler.step_size_mode")

#: Every key a config accepts as a grid axis, with two values and the probe type / model kind that reads it, but the
#: batched axes of a fixed_label question (_BATCHED_AXES, swept together below); not here: saved-network keys (path,
#: activation, output: test_cli.py).
_EVERY_AXIS = [
    ("data.name", '["breast_cancer", "wine"]', "fixed_label", "logistic_regression"),
    ("data.test_fraction", "[0.25, 0.3]", "fixed_label", "logistic_regression"),
    ("data.split_seed", "[0, 1]", "fixed_label", "logistic_regression"),
    ("model.kind", '["logistic_regression", "mlp"]', "fixed_label", "logistic_regression"),
    ("model.seed", "[0, 1]", "fixed_label", "mlp"),
    ("compare.kind", '["mlp", "svm_rbf"]', "model_contrast", "logistic_regression"),
    ("compare.seed", "[0, 1]", "model_contrast", "logistic_regression"),
    ("probe.type", '["fixed_label", "prediction_risky"]', "fixed_label", "logistic_regression"),
    ("probe.alpha", "[0.3, 0.7]", "prediction_risky", "logistic_regression"),
    ("probe.r", "[2, 4]", "prediction_risky", "logistic_regression"),
    ("probe.loss", '["cross_entropy", "squared"]', "fixed_label", "logistic_regression"),
    ("probe.sigma", "[0.1, 1.0]", "parameter_sensitive", "logistic_regression"),
    ("probe.num_draws", "[4, 8]", "parameter_sensitive", "logistic_regression"),
    ("localize.r", "[2, 4]", "fixed_label", "logistic_regression"),
    ("constraints.fixed", '[[], ["mean radius"]]', "fixed_label", "logistic_regression"),
    ("constraints.bounds", '["none", "data"]', "fixed_label", "logistic_regression"),
    ("prior.kind", '["standard_normal", "none"]', "fixed_label", "logistic_regression"),
    ("sampler.name", '["mala", "hmc"]', "fixed_label", "logistic_regression"),
    ("sampler.num_chains", "[8, 10]", "fixed_label", "logistic_regression"),
    ("sampler.num_samples", "[12, 14]", "fixed_label", "logistic_regression"),
    ("sampler.num_warmup", "[12, 14]", "fixed_label", "logistic_regression"),
    ("sampler.thin", "[1, 2]", "fixed_label", "logistic_regression"),
    ("sampler.step_size_mode", '["per_chain", "shared"]', "fixed_label", "logistic_regression"),
]


def test_every_accepted_grid_axis_is_swept_below():
    """Each key a config accepts as a grid axis is in _EVERY_AXIS (swept by the test below); options and numerics
    are not axes."""
    from jaxprobe.config import SCHEMA

    covered = {axis for axis, *_ in _EVERY_AXIS} | set(_BATCHED_AXES)
    accepted = {f"{section}.{key}" for section, keys in SCHEMA.items() if section not in ("sweep", "output", "precision")
                for key in keys if not key == "options"} - {"sampler.numerics", "model.path", "model.activation",
                                                             "model.output", "compare.path", "compare.activation",
                                                             "compare.output"}  # options, numerics: not axes
    assert accepted <= covered, f"add these axes to _EVERY_AXIS: {sorted(accepted - covered)}"


# One test per axis (23 two-cell CLI sweeps, 5-30 s each): the slow pass spreads them over its workers.
@pytest.mark.slow
@pytest.mark.parametrize("axis, values, probe_type, model_kind", _EVERY_AXIS, ids=[row[0] for row in _EVERY_AXIS])
def test_every_grid_axis_changes_what_is_computed(tmp_path, axis, values, probe_type, model_kind):
    """A key a config accepts as a grid axis, swept over two values: the two cells carry their own values and
    their draws differ (an axis that is not applied gives two identical cells under different labels, as model
    kinds did). Axes that no cell reads are refused (tests/test_config.py), and so is [precision] in a sweep."""
    path = tmp_path / f"{axis}.toml"
    warmup = _WARMUP if axis in _ACT_THROUGH_WARMUP else _NO_WARMUP
    path.write_text(_ONE_AXIS_BASE.format(axis=axis, values=values, probe_type=probe_type, model_kind=model_kind,
                                          warmup=warmup))
    out = tmp_path / axis
    assert main(["sweep", str(path), "--out", str(out), "--quiet"]) == EXIT_OK, axis
    rows = read_table(out / "results.csv")
    assert len(rows) == 2 and all(row["status"] in ("ok", "unconverged") for row in rows), (axis, rows)
    column = ENGINE_KEYS.get(axis, axis)
    assert rows[0][column] != rows[1][column], axis
    # a cell's draws and their log densities: chains that reject every step keep their starts, but not their log
    # densities, when the target changes
    first, second = ((lambda samples: np.concatenate([samples.positions, samples.logdensity[..., None]], -1))(
        jaxprobe.Samples.load(out / row["samples"])) for row in rows)
    assert first.shape != second.shape or not np.array_equal(first, second), f"{axis}: identical cells"


#: The batched (traced) axes a fixed_label question reads, two values each: one compiled program for all 64 cells.
_BATCHED_AXES = {"probe.target": [0, 1], "localize.anchor": [0, 1], "localize.weight": [0.1, 1.0],
                 "sampler.temperature": [0.1, 1.0], "sampler.seed": [0, 1], "sampler.step_size": [0.05, 0.2]}


@pytest.mark.slow
def test_every_batched_grid_axis_changes_what_is_computed(tmp_path, capsys):
    """The batched axes swept together (2^6 cells, one compiled program): for each axis, every pair of cells that
    differ only in it carries its own values and has draws or log densities of its own (an axis that is not applied
    gives identical pairs under different labels, as model kinds did; chains that reject every step at a large fixed
    step size keep their starts, but not their log densities, when the target changes)."""
    from jaxprobe.config import BATCHED_KEYS

    assert set(BATCHED_KEYS) - set(_BATCHED_AXES) == {"probe.alpha"}   # read by prediction_risky: _EVERY_AXIS
    grid = "".join(f'"{axis}" = {json.dumps(values)}\n' for axis, values in _BATCHED_AXES.items())
    path = tmp_path / "batched.toml"
    path.write_text(_ONE_AXIS_BASE.format(axis="sampler.temperature", values="[0.1, 1.0]", probe_type="fixed_label",
                                          model_kind="logistic_regression", warmup=_WARMUP).split("[sweep.grid]")[0]
                    + "[sweep.grid]\n" + grid)
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out)]) == EXIT_OK
    assert "64 cells (0 failed), 1 compiled program(s)" in capsys.readouterr().out
    rows = read_table(out / "results.csv")
    assert len(rows) == 64 and all(row["status"] in ("ok", "unconverged") for row in rows)
    columns = {axis: ENGINE_KEYS.get(axis, axis) for axis in _BATCHED_AXES}
    # a cell's draws and their log densities: chains that reject every step of a cell still differ in the latter
    draws = {row["cell"]: (lambda samples: np.concatenate([samples.positions, samples.logdensity[..., None]], -1))(
        jaxprobe.Samples.load(out / row["samples"])) for row in rows}
    for axis, column in columns.items():
        pairs = {}
        for row in rows:
            others = tuple(float(row[c]) for a, c in columns.items() if a != axis)
            pairs.setdefault(others, []).append(row)
        assert len(pairs) == 32 and all(len(pair) == 2 for pair in pairs.values()), axis
        identical = []
        for first, second in pairs.values():
            assert float(first[column]) != float(second[column]), axis
            if np.array_equal(draws[first["cell"]], draws[second["cell"]]):
                identical.append({a: first[c] for a, c in columns.items() if a != axis})
        assert not identical, f"{axis}: identical cells at {identical}"
