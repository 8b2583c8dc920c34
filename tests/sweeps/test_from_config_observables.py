"""Observables and ``keep_draws = false`` in configuration files: built-in observables named in ``[output]``,
checked before anything runs, and answers without kept draws that equal the answers computed from kept draws of
the same chains (same configuration and seed)."""

import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprobe
from jaxprobe import constraints
from jaxprobe.cli import EXIT_OK, EXIT_USAGE, main
from jaxprobe.config import ConfigError, parse_config
from jaxprobe.sweeps.from_config import MAKERS, OBSERVABLES, Prepared, observables_for, run_config

BASE = """\
[data]
name = "circles"

[model]
kind = "logistic_regression"

[compare]
kind = "mlp"

[probe]
type = "model_contrast"

[prior]
kind = "standard_normal"

[sampler]
name = "mala"
num_chains = 16
num_samples = 40
num_warmup = 40
temperature = 0.1

[output]
plots = false
"""

ALL = ["probe", "features", "predicted_class", "model_output", "disagree"]


def _with_output(text, lines):
    return text.replace("[output]\nplots = false\n", "[output]\n" + "".join(line + "\n" for line in lines))


def _line(text, start):
    """The 1-based line of ``text`` that starts with ``start``."""
    return next(number for number, line in enumerate(text.splitlines(), 1) if line.startswith(start))


# ------------------------------------------------------------------ the schema


def test_defaults_keep_the_draws_and_ask_for_no_observable():
    config = parse_config(BASE)
    assert config.get("output.keep_draws") is True and config.get("output.observables") == []


def test_every_built_in_has_a_doc_line_and_probe_and_task_rules():
    for name, spec in OBSERVABLES.items():
        assert spec.doc and "\n" not in spec.doc, name
    assert observables_for("model_contrast", "binary") == ("probe", "features", "predicted_class", "model_output",
                                                           "disagree")
    assert observables_for("prediction_risky", "binary")[-1] == "within_0.1_of_alpha"
    assert "within_0.1_of_alpha" not in observables_for("prediction_risky", "multiclass")
    assert "target_prediction" in observables_for("fixed_label", "multiclass")
    assert "predicted_class" not in observables_for("fixed_label", "regression")
    assert set(MAKERS) == set(OBSERVABLES) - {"probe"}  # every built-in but G(x) has its function of x


@pytest.mark.parametrize("lines, key, match", [
    (['observables = ["disagre"]'], "observables",
     r"\[output\] observables: unknown observable 'disagre'; the built-ins for a model_contrast probe of a binary "
     r"model are probe, features, predicted_class, model_output, disagree$"),
    (['observables = "disagree"'], "observables",
     r"\[output\] observables: must be a list of built-in observable names .*, got 'disagree'"),
    (["observables = [1]"], "observables", r"\[output\] observables: must be a list of built-in observable names"),
    (['observables = ["within_0.1_of_alpha"]'], "observables",
     r"'within_0.1_of_alpha' .* is not defined for a model_contrast probe of a binary model; the built-ins there are "
     r"probe, features"),
    (['observables = ["disagree", "disagree"]'], "observables", r"\[output\] observables: lists 'disagree' twice"),
    (['keep_draws = "no"'], "keep_draws", r"\[output\] keep_draws: must be true or false .*, got 'no'"),
    (["checkpoint_min_seconds = -1"], "checkpoint_min_seconds",
     r"\[output\] checkpoint_min_seconds: must be a number >= 0 \(jaxprobe run checkpoints .*, got -1"),
    (['checkpoint_min_seconds = "60"'], "checkpoint_min_seconds",
     r"\[output\] checkpoint_min_seconds: must be a number >= 0 .*, got '60'"),
    (["keep_draws = false", "plots = true"], "plots",
     r"\[output\] plots: plots need the draws: set keep_draws = true or plots = false"),
])
def test_mistakes_name_the_key_the_expected_form_and_the_line(lines, key, match):
    text = _with_output(BASE, lines)
    with pytest.raises(ConfigError, match=match) as error:
        parse_config(text)
    assert str(error.value).startswith(f"<config>:{_line(text, key + ' =')}: [output] {key}:")


def test_names_are_checked_against_the_probe_type_and_the_task():
    regression = BASE.replace('"circles"', '"diabetes"').replace('kind = "logistic_regression"', 'kind = "ridge"')
    with pytest.raises(ConfigError, match=r"'predicted_class' .* not defined for a model_contrast probe of a "
                                          r"regression model; the built-ins there are probe, features, model_output$"):
        parse_config(_with_output(regression, ['observables = ["predicted_class"]']))
    parse_config(_with_output(regression, ['observables = ["model_output", "features"]']))
    risky = BASE.replace('type = "model_contrast"', 'type = "prediction_risky"\nalpha = 0.5')
    parse_config(_with_output(risky, ['observables = ["within_0.1_of_alpha", "predicted_class"]']))


def test_without_draws_plots_are_off_unless_asked_for_and_a_sweep_may_plot_its_table():
    config = parse_config(_with_output(BASE, ["keep_draws = false"]))
    assert config.get("output.plots") is False and config.get("output.keep_draws") is False
    sweep = _with_output(BASE, ["keep_draws = false", "plots = true"]) + '\n[sweep.grid]\n"sampler.seed" = [0, 1]\n'
    assert parse_config(sweep, sweep=True).get("output.plots") is True  # probe_mean.png: from the table


def test_a_sweep_refuses_observables_whose_function_its_grid_changes():
    grid = '\n[sweep.grid]\n"model.kind" = ["logistic_regression", "mlp"]\n'
    text = _with_output(BASE, ['observables = ["probe", "features", "predicted_class"]']) + grid
    with pytest.raises(ConfigError, match=r"\[output\] observables: 'predicted_class' depends on model.kind, which "
                                          r"\[sweep.grid\] varies"):
        parse_config(text, sweep=True)
    parse_config(_with_output(BASE, ['observables = ["probe", "features"]']) + grid, sweep=True)
    alpha = (BASE.replace('type = "model_contrast"', 'type = "prediction_risky"')
             + '\n[sweep.grid]\n"probe.alpha" = [0.3, 0.7]\n')
    with pytest.raises(ConfigError, match="'within_0.1_of_alpha' depends on probe.alpha"):
        parse_config(_with_output(alpha, ['observables = ["within_0.1_of_alpha"]']), sweep=True)


def test_the_command_line_refuses_before_running(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text(_with_output(BASE, ['observables = ["disagre"]']))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == EXIT_USAGE
    assert main(["validate", str(path), "--out", str(out), "--quiet"]) == EXIT_USAGE
    assert not out.exists()
    assert "unknown observable 'disagre'" in capsys.readouterr().err


# ------------------------------------------------------------------ the reported point


def test_observables_see_the_point_as_the_draws_are_reported():
    """Restriction.report_point (JAX, inside the run) is Restriction.report (NumPy, on the kept draws): one-hot groups as their
    category, integer features rounded in original units, inside their bounds."""
    dataset = jaxprobe.datasets.wage()
    restriction = constraints.restriction(constraints.from_dataset(dataset, standardized=True, bounds="range"),
                                          dataset.x.shape[1])
    assert restriction.groups and restriction.integer_indices.size
    z = jax.random.normal(jax.random.key(0), (500, restriction.num_free)) * 2.0
    relaxed = np.asarray(jax.vmap(restriction.forward)(z))
    reported = np.asarray(jax.jit(jax.vmap(restriction.report_point))(jnp.asarray(relaxed)))
    np.testing.assert_allclose(reported, restriction.report(relaxed), rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------ runs with and without draws


def _fractions(prepared, positions):
    """Disagreement and predicted-class fractions of kept draws ``(C, N, d)``, computed here from the models."""
    z = positions.reshape(-1, positions.shape[-1])
    predicted = prepared.model_outputs(prepared.model, z).argmax(axis=-1)
    other = prepared.model_outputs(prepared.compare, z).argmax(axis=-1)
    return float(np.mean(predicted != other)), [float(np.mean(predicted == k)) for k in range(prepared.num_classes)]


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """The configuration with every observable, draws kept: (config, summary, samples, x in original units)."""
    out = tmp_path_factory.mktemp("kept")
    config = parse_config(_with_output(BASE, ["plots = false", f"observables = {json.dumps(ALL)}"]))
    summary = run_config(config, out=str(out), progress=False)
    samples = jaxprobe.Samples.load(out / "samples.npz")
    x = np.load(out / "samples_original_units.npz")["x"]
    return config, summary, samples, x


def test_with_draws_the_answer_is_unchanged_and_the_observables_equal_it(kept):
    config, summary, samples, x = kept
    prepared = Prepared(config)
    # samples_original_units.npz, written a block of chains at a time: the kept draws in original units exactly
    np.testing.assert_array_equal(x, prepared.dataset.unstandardize(samples.positions))
    assert x.dtype == samples.positions.dtype
    flat = x.reshape(-1, x.shape[-1])
    for i, feature in enumerate(summary["features_original_units"].values()):  # mapped from standardized units
        assert feature["mean"] == pytest.approx(float(flat[:, i].mean()), rel=1e-5, abs=1e-6)
        assert feature["sd"] == pytest.approx(float(flat[:, i].std()), rel=1e-4)
    answer, observed = summary["answer"], summary["answer"]["observables"]
    assert list(observed) == ALL and summary["keep_draws"] is True and "notes" not in answer
    disagree, classes = _fractions(prepared, samples.positions)
    assert answer["fraction_of_samples_where_models_disagree"] == pytest.approx(disagree, abs=1e-12)
    assert list(answer["predicted_class_fractions"].values()) == pytest.approx(classes, abs=1e-12)
    # The observables, folded in as the chains ran, are the kept draws' fractions and means.
    assert observed["disagree"]["mean"] == pytest.approx(disagree, abs=1e-6)
    assert observed["predicted_class"]["mean"] == pytest.approx(classes, abs=1e-6)
    assert 0 < observed["disagree"]["mcse"] < 0.5 and len(observed["predicted_class"]["mcse"]) == 2
    flat = x.reshape(-1, x.shape[-1])
    assert observed["features"]["mean"] == pytest.approx(flat.mean(axis=0).tolist(), rel=1e-5, abs=1e-6)
    outputs = prepared.model_outputs(prepared.model, samples.positions.reshape(-1, x.shape[-1]))
    assert observed["model_output"]["mean"] == pytest.approx(outputs.mean(axis=0).tolist(), rel=1e-5, abs=1e-6)
    assert observed["probe"] == {"mean": summary["probe_value"]["mean"], "mcse": summary["probe_value"]["mcse"]}
    assert set(samples.observables) == set(ALL) - {"probe"}


def test_without_draws_the_answer_comes_from_the_observables_of_the_same_chains(kept, tmp_path, capsys):
    config, with_draws, samples, x = kept
    path = tmp_path / "run.toml"
    path.write_text(_with_output(BASE, ["keep_draws = false", 'observables = ["disagree", "predicted_class", '
                                                              '"features", "probe"]']))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out)]) == EXIT_OK
    printed = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["samples.npz", "summary.json"]
    summary = json.loads((out / "summary.json").read_text())
    saved = jaxprobe.Samples.load(out / "samples.npz")
    assert saved.positions is None and set(saved.observables) == {"disagree", "predicted_class", "features"}
    assert summary["keep_draws"] is False and summary["num_samples_per_chain"] == 40

    # Same seed, same chains: the observables' means over every draw are the kept draws' fractions and means.
    disagree, classes = _fractions(Prepared(config), samples.positions)
    answer = summary["answer"]
    assert answer["fraction_of_samples_where_models_disagree"] == pytest.approx(disagree, abs=1e-6)
    assert answer["observables"]["disagree"]["mean"] == pytest.approx(disagree, abs=1e-6)
    assert list(answer["predicted_class_fractions"].values()) == pytest.approx(classes, abs=1e-6)
    assert answer["test_set_disagreement_rate"] == with_draws["answer"]["test_set_disagreement_rate"]
    # and their errors: with draws the run folds in the same observables for its summary (no pass over the draws
    # afterwards), so the two answers are the same numbers, error bars included.
    for field in ("fraction_of_samples_where_models_disagree", "predicted_class_fractions"):
        assert answer[field] == with_draws["answer"][field], field
        assert answer[field + "_mcse"] == with_draws["answer"][field + "_mcse"], field
    means = x.reshape(-1, x.shape[-1]).mean(axis=0)
    kept_features = list(with_draws["features_original_units"].values())
    for i, feature in enumerate(summary["features_original_units"].values()):
        assert feature["mean"] == pytest.approx(float(means[i]), rel=1e-5, abs=1e-6)
        assert feature["mcse"] == pytest.approx(kept_features[i]["mcse"], rel=1e-4)
        assert "sd" not in feature
    assert answer["observables"]["probe"]["mean"] == pytest.approx(with_draws["probe_value"]["mean"], rel=1e-6)
    assert summary["verdict"] == with_draws["verdict"]
    # What needs the draws says so, never a silent empty value.
    assert "q05" not in summary["probe_value"]
    assert any("features_original_units sd needs the draws" in note for note in answer["notes"])
    assert any(note.startswith("probe_value sd, min") for note in answer["notes"])

    # The command line prints each observable as mean ± mcse.
    mean, mcse = answer["observables"]["disagree"]["mean"], answer["observables"]["disagree"]["mcse"]
    assert f"disagree: {mean:.3f} ± {mcse:.3f}" in printed
    assert re.search(r"predicted_class: \[\d\.\d{3}, \d\.\d{3}\] ± \[", printed)
    assert f"Wrote {out}/samples.npz, summary.json in" in printed


def test_without_draws_a_field_whose_observable_was_not_asked_for_is_named_in_the_notes(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "samples_original_units.npz").write_bytes(b"an earlier run's draws")
    config = parse_config(_with_output(BASE, ["keep_draws = false"]))
    summary = run_config(config, out=str(out), progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["samples.npz", "summary.json"]  # no stale draws left
    answer = summary["answer"]
    assert "fraction_of_samples_where_models_disagree" not in answer and "predicted_class_fractions" not in answer
    assert "observables" not in answer and 0 <= answer["test_set_disagreement_rate"] <= 1
    notes = "\n".join(answer["notes"])
    assert 'fraction_of_samples_where_models_disagree needs the draws: add "disagree"' in notes
    assert 'predicted_class_fractions needs the draws: add "predicted_class"' in notes
    assert 'features_original_units mean needs the draws: add "features"' in notes
    assert all(set(feature) == {"data_mean"} for feature in summary["features_original_units"].values())


def test_a_run_shorter_than_checkpoint_min_seconds_writes_no_checkpoint(kept, tmp_path, monkeypatch):
    """jaxprobe run's default: a run projected to sample for under [output] checkpoint_min_seconds (60 s) is not
    checkpointed (no state is ever saved), and gives the answer of the same file with every run checkpointed."""
    from jaxprobe.engine.checkpoint import CheckpointWriter

    config, _, _, _ = kept
    assert config.get("output.checkpoint_min_seconds") == 60
    checkpointed = run_config(config.with_values({"output.checkpoint_min_seconds": 0}), out=str(tmp_path / "ck"),
                              progress=False)
    monkeypatch.setattr(CheckpointWriter, "save", lambda *args: pytest.fail("a short run saved a checkpoint"))
    short = run_config(config, out=str(tmp_path / "short"), progress=False)
    assert sorted(p.name for p in (tmp_path / "short").iterdir()) == ["samples.npz", "samples_original_units.npz",
                                                                      "summary.json"]
    assert short["answer"] == checkpointed["answer"] and short["verdict"] == checkpointed["verdict"]


def test_the_same_file_run_again_compiles_nothing(kept, tmp_path, compile_counter):
    """run_config twice in one process (a notebook, a script looping over files): the second run builds an equal
    question (the fitted model cached, P(class 1) and the cell's problem keyed by it) and reuses every program,
    the summary's model outputs included, with the same answer."""
    config, summary, _, _ = kept
    with compile_counter:
        again = run_config(config, out=str(tmp_path), progress=False)
    assert compile_counter.count == 0
    assert again["answer"] == summary["answer"] and again["probe_value"] == summary["probe_value"]


def test_a_failed_write_of_the_draws_raises_and_the_summary_never_describes_it(kept, tmp_path, monkeypatch):
    """jaxprobe run writes samples.npz and samples_original_units.npz in two threads beside the summary: a disk that
    fills while the second is written raises (ENOSPC, naming the folder) after both threads are done, before
    summary.json or the checkpoint's removal; no partial file is left, the earlier run's summary stays as it was, and
    the run asked again resumes from its checkpoint to the same answer."""
    import errno

    from jaxprobe.sweeps import from_config
    from tests.conftest import disk_fills_in

    config, summary, _, _ = kept
    config = config.with_values({"output.checkpoint_min_seconds": 0})  # checkpointed, however short
    out = tmp_path / "out"
    first = run_config(config, out=str(out), progress=False)
    written = (out / "summary.json").read_text()
    original = from_config.atomic_write
    monkeypatch.setattr(from_config, "atomic_write",
                        disk_fills_in(original, lambda path: str(path).endswith("samples_original_units.npz")))
    with pytest.raises(OSError, match="no space left in") as error:
        run_config(config, out=str(out), progress=False)
    assert error.value.errno == errno.ENOSPC
    assert (out / "summary.json").read_text() == written          # not rewritten to describe the failed run
    assert not [name for name in map(str, out.iterdir()) if name.endswith(".partial")]
    assert (out / "checkpoint.npz").exists()                       # kept: the results are not all on file
    monkeypatch.setattr(from_config, "atomic_write", original)
    again = run_config(config, out=str(out), progress=False)
    assert again["answer"] == first["answer"] == summary["answer"]
    assert not (out / "checkpoint.npz").exists()
