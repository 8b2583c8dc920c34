"""The jaxprobe command: run / sweep / validate / bench, exit codes, saved networks, and every example
config run end to end with small sizes (slow)."""

import json
import warnings
import os
import re
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprobe
from tests.conftest import ctrl_c_in_chunk
from jaxprobe.cli import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, find_benchmarks, main
from jaxprobe.sweeps import read_table
from jaxprobe.sweeps.from_config import dense_apply, load_network

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def test_validate_accepts_examples_and_names_the_broken_key(tmp_path, capsys):
    assert main(["validate", os.path.join(EXAMPLES, "counterfactual.toml")]) == EXIT_OK
    assert "valid (one run)" in capsys.readouterr().out
    assert main(["validate", os.path.join(EXAMPLES, "sweep_temperature.toml")]) == EXIT_OK
    assert "sweep of 48 cells" in capsys.readouterr().out
    broken = tmp_path / "broken.toml"
    text = re.sub(r"num_chains = \d+", "num_chains = -4", open(os.path.join(EXAMPLES, "prediction_risky.toml")).read())
    broken.write_text(text)
    line = 1 + text.splitlines().index("num_chains = -4")
    assert main(["run", str(broken)]) == EXIT_USAGE  # nothing runs
    error = capsys.readouterr().err
    assert f"broken.toml:{line}: [sampler] num_chains: must be an int >= 1, got -4" in error
    assert main(["run", str(tmp_path / "missing.toml")]) == EXIT_USAGE
    assert "no such file" in capsys.readouterr().err


def test_cli_edges_exit_2_with_a_message_before_sampling(tmp_path, capsys):
    """A folder or unreadable file as the config, an output path that is a file: exit 2 and a message, nothing
    sampled (before: a raw traceback, or a failure after sampling that lost the results). --version works."""
    assert main(["run", str(tmp_path)]) == EXIT_USAGE
    assert "is a folder, not a configuration file" in capsys.readouterr().err
    unreadable = tmp_path / "secret.toml"
    unreadable.write_text("[data]\n")
    unreadable.chmod(0)
    if not os.access(unreadable, os.R_OK):  # root reads everything
        assert main(["validate", str(unreadable)]) == EXIT_USAGE
        assert "cannot be read" in capsys.readouterr().err
    taken = tmp_path / "taken"
    taken.write_text("a file")
    config = os.path.join(EXAMPLES, "prediction_risky.toml")
    assert main(["run", config, "--out", str(taken), "--quiet"]) == EXIT_USAGE
    assert "exists and is not a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.startswith("jaxprobe ")


def test_files_are_written_with_the_users_umask(tmp_path):
    from jaxprobe._io import atomic_write

    previous = os.umask(0o022)
    try:
        atomic_write(tmp_path / "out.txt", lambda stream: stream.write(b"x"))
    finally:
        os.umask(previous)
    assert (tmp_path / "out.txt").stat().st_mode & 0o777 == 0o644  # mkstemp alone gave 0600
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def _benchmark_tree(tmp_path):
    bench = tmp_path / "benchmarks"
    (bench / "results").mkdir(parents=True)
    (bench / "fast.py").write_text(textwrap.dedent("""
        import os, sys
        here = os.path.dirname(os.path.abspath(__file__))
        results = os.environ.get("JAXPROBE_BENCH_RESULTS") or os.path.join(here, "results")
        with open(os.path.join(results, "fast.md"), "w") as f:
            f.write("| case | ratio |\\n|---|---:|\\n| fast | " + " ".join(sys.argv[1:]) + " |\\n")
    """))
    (bench / "broken.py").write_text("raise SystemExit(3)\n")
    (bench / "results" / "broken.md").write_text("old table\n")
    return tmp_path


def test_bench_discovers_runs_and_prints_tables(tmp_path, capsys):
    root = str(_benchmark_tree(tmp_path))
    assert set(find_benchmarks(root)) == {"fast", "broken"}
    assert main(["bench", "--root", root, "--list"]) == EXIT_OK
    assert sorted(line.split("\t")[0] for line in capsys.readouterr().out.split("\n") if line) == ["broken", "fast"]
    assert main(["bench", "fast", "--root", root, "--quiet", "--", "1.5x"]) == EXIT_OK
    assert "| fast | 1.5x |" in capsys.readouterr().out
    assert not (tmp_path / "benchmarks" / "results" / "fast.md").exists()  # a scratch folder unless --record
    assert main(["bench", "fast", "--root", root, "--quiet", "--record", "--", "2x"]) == EXIT_OK
    assert "| fast | 2x |" in (tmp_path / "benchmarks" / "results" / "fast.md").read_text()
    capsys.readouterr()
    assert main(["bench", "--root", root, "--quiet"]) == EXIT_FAILED  # broken.py exits 3
    assert main(["bench", "nope", "--root", root]) == EXIT_USAGE
    assert main(["bench", "broken", "--root", root, "--show"]) == EXIT_OK
    assert "old table" in capsys.readouterr().out


def test_package_benchmarks_are_found_without_a_source_tree(tmp_path, monkeypatch):
    """The benchmark scripts ship inside the package (jaxprobe.bench): found from any folder, and an installed
    package (no source checkout) records into ./jaxprobe-bench-results."""
    import jaxprobe.bench

    monkeypatch.chdir(tmp_path)
    names = find_benchmarks()
    assert {"throughput", "sweep", "answer_speed", "gpu"} <= set(names)
    package = os.path.dirname(os.path.abspath(jaxprobe.bench.__file__))
    assert all(os.path.dirname(path) == package for path in names.values())
    monkeypatch.delenv("JAXPROBE_BENCH_RESULTS", raising=False)
    monkeypatch.setattr(jaxprobe.bench, "source_root", lambda: None)
    assert jaxprobe.bench.results_dir() == str(tmp_path / "jaxprobe-bench-results")
    monkeypatch.setenv("JAXPROBE_BENCH_RESULTS", str(tmp_path / "scratch"))
    assert jaxprobe.bench.results_dir() == str(tmp_path / "scratch")


def test_saved_network_matches_sklearn_predictions(tmp_path):
    """An sklearn MLP saved as .npz and as flax msgpack, loaded back: the same probabilities (1e-5)."""
    from flax import serialization
    from sklearn.neural_network import MLPClassifier

    ds = jaxprobe.datasets.breast_cancer()
    z = ds.standardize(ds.x).astype(np.float32)
    mlp = MLPClassifier(hidden_layer_sizes=(8,), activation="tanh", max_iter=300, random_state=0).fit(z, ds.y)
    arrays = {}
    for i, (w, b) in enumerate(zip(mlp.coefs_, mlp.intercepts_)):
        arrays[f"w{i}"], arrays[f"b{i}"] = w.astype(np.float32), b.astype(np.float32)
    np.savez(tmp_path / "mlp.npz", **arrays)
    flax_tree = {"params": {f"Dense_{i}": {"kernel": arrays[f"w{i}"], "bias": arrays[f"b{i}"]} for i in range(2)}}
    (tmp_path / "mlp.msgpack").write_bytes(serialization.msgpack_serialize(flax_tree))
    apply = dense_apply("tanh", "sigmoid")
    expected = mlp.predict_proba(z[:50])
    for name in ("mlp.npz", "mlp.msgpack"):
        layers = jax.tree.map(jnp.asarray, load_network(str(tmp_path / name)))
        got = np.asarray(jax.vmap(lambda x: apply(layers, x))(jnp.asarray(z[:50])))
        np.testing.assert_allclose(got, expected, atol=1e-5)
    np.savez(tmp_path / "bad.npz", w0=arrays["w0"], b0=arrays["b0"], w1=arrays["w1"][:3], b1=arrays["b1"])
    with pytest.raises(ValueError, match="layer 0 has 8 outputs but layer 1 takes 3 inputs"):
        load_network(str(tmp_path / "bad.npz"))


def test_nonfinite_or_malformed_weights_are_named_with_the_file_and_layer(tmp_path, capsys):
    """A saved network with NaN or inf weights: validate and run (CLI and Python) exit before sampling, naming
    the file, the layer and the array (before: "logdensity_fn is not finite at initial_positions" from run and
    nothing from validate). Arrays of the wrong rank or size and non-numbers are named the same way."""
    from flax import serialization

    from jaxprobe.config import ConfigError, load_config
    from jaxprobe.sweeps.from_config import check_config, run_config

    rng = np.random.default_rng(0)
    good = {"w0": rng.normal(size=(30, 4)), "b0": np.zeros(4), "w1": rng.normal(size=(4, 1)), "b1": np.zeros(1)}
    nan_w1 = dict(good, w1=np.where(np.arange(4)[:, None] == 2, np.nan, good["w1"]))
    np.savez(tmp_path / "nan.npz", **nan_w1)
    inf_bias = {"params": {"Dense_0": {"kernel": good["w0"], "bias": np.array([0.0, np.inf, 0.0, 0.0])},
                           "Dense_1": {"kernel": good["w1"], "bias": good["b1"]}}}
    (tmp_path / "inf.msgpack").write_bytes(serialization.msgpack_serialize(inf_bias))
    base = open(os.path.join(EXAMPLES, "prediction_risky.toml")).read()
    for name, message in (("nan.npz", "layer 1 weights w1 holds NaN or inf (1 of 4 entries, the first at index "
                                      "(2, 0))"),
                          ("inf.msgpack", "layer 0 bias params/Dense_0/bias holds NaN or inf (1 of 4 entries")):
        weights = str(tmp_path / name)
        config = tmp_path / f"{name}.toml"
        config.write_text(base.replace('kind = "logistic_regression"', f'path = "{weights}"\noutput = "sigmoid"'))
        for command in ("validate", "run"):
            assert main([command, str(config), "--quiet", "--out", str(tmp_path / "out")]) == EXIT_USAGE
            error = capsys.readouterr().err
            assert f"[model] path: cannot load {weights!r}: {weights}: {message}" in error, (command, error)
        with pytest.raises(ConfigError, match=re.escape(message)):
            check_config(load_config(config))
        with pytest.raises(ConfigError, match=re.escape(message)):
            run_config(load_config(config), out=str(tmp_path / "out"), progress=False)
        with pytest.raises(ValueError, match=re.escape(message)):
            load_network(weights)
    assert not (tmp_path / "out").exists()  # nothing ran
    for arrays, message in (
            (dict(good, w0=np.ones(30)), "layer 0 weights w0 must have 2 dimension(s), got shape (30,)"),
            (dict(good, b1=np.zeros(2)), "layer 1 has 1 outputs but its bias b1 has 2 entries"),
            (dict(good, w0=np.full((30, 4), "1")), "layer 0 weights w0 must hold numbers, got dtype <U1"),
            (dict(good, b0=np.full(4, 1e300)), "layer 0 bias b0 holds values beyond float32's range")):
        np.savez(tmp_path / "bad.npz", **arrays)
        with pytest.raises(ValueError, match=re.escape(f"bad.npz: {message}")):
            load_network(str(tmp_path / "bad.npz"))


# ------------------------------------------------------------------ examples end to end (slow)


def _small(name, tmp_path, chains=32, samples=150, warmup=150, extra=None):
    text = open(os.path.join(EXAMPLES, name)).read()
    text = re.sub(r"num_chains = \d+", f"num_chains = {chains}", text)
    text = re.sub(r"num_samples = \d+", f"num_samples = {samples}", text)
    text = re.sub(r"num_warmup = \d+", f"num_warmup = {warmup}", text)
    for old, new in (extra or {}).items():
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _run_example(name, out):
    """``jaxprobe run`` on an example exactly as shipped (its own sizes and sampler): it must end without a
    convergence warning, with a converged verdict in summary.json (--strict turns a failed verdict into exit 1)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", jaxprobe.ConvergenceWarning)
        status = main(["run", os.path.join(EXAMPLES, name), "--out", str(out), "--quiet", "--strict"])
    assert json.loads((out / "summary.json").read_text())["verdict"]["converged"]
    return status


@pytest.mark.slow
def test_example_prediction_risky(tmp_path, capsys):
    out = tmp_path / "out"
    assert _run_example("prediction_risky.toml", out) == EXIT_OK
    assert sorted(p.name for p in out.iterdir()) == ["features.png", "samples.npz", "samples_original_units.npz",
                                                     "summary.json"]
    summary = json.loads((out / "summary.json").read_text())
    # Samples sit at the decision boundary: most have |P(malignant) − ½| < 0.1, unlike the data.
    assert summary["answer"]["fraction_within_0.1_of_alpha"] > 0.6
    assert summary["answer"]["model_test_accuracy"] > 0.9
    samples = jaxprobe.Samples.load(out / "samples.npz")
    original = np.load(out / "samples_original_units.npz", allow_pickle=False)["x"]
    ds = jaxprobe.datasets.breast_cancer()
    np.testing.assert_allclose(original, ds.unstandardize(samples.positions), rtol=1e-5)


@pytest.mark.slow
def test_example_model_contrast(tmp_path):
    out = tmp_path / "out"
    assert _run_example("model_contrast.toml", out) == EXIT_OK
    answer = json.loads((out / "summary.json").read_text())["answer"]
    # Fig. 2 setting: the two SVMs agree on the whole test set, yet most contrast samples are inputs where they
    # disagree (0.70 measured with the example's SMC run; the disagreement regions are disjoint pockets).
    assert answer["test_set_disagreement_rate"] < 0.02
    assert answer["fraction_of_samples_where_models_disagree"] > 0.5


@pytest.mark.slow
def test_example_parameter_sensitive(tmp_path):
    out = tmp_path / "out"
    assert _run_example("parameter_sensitive.toml", out) == EXIT_OK
    summary = json.loads((out / "summary.json").read_text())
    ds = jaxprobe.datasets.default()
    x = np.load(out / "samples_original_units.npz")["x"].reshape(-1, ds.x.shape[1])
    # bounds = "data": every sample inside the box constraints.from_dataset(bounds="range") documents: each
    # continuous feature's observed range widened by 0.1 % of it (the bijection maps onto the open box, and an
    # anchor may sit at an end), up to float32 rounding in original units (income reaches 73,554, where one float32
    # step is 0.0078). Draws do reach into the margin: under other compile options a chain went 25 below income's
    # observed minimum of 772, inside its margin of 73.
    low, high = ds.x.min(axis=0), ds.x.max(axis=0)
    margin = 1e-3 * (high - low) + 4 * np.spacing(np.maximum(np.abs(low), np.abs(high)).astype(np.float32))
    assert np.all(x >= low - margin) and np.all(x <= high + margin), (x.min(axis=0) - low, x.max(axis=0) - high)
    assert summary["acceptance_rate"] > 0.2


@pytest.mark.slow
def test_example_counterfactual(tmp_path):
    out = tmp_path / "out"
    assert _run_example("counterfactual.toml", out) == EXIT_OK
    summary = json.loads((out / "summary.json").read_text())
    assert summary["answer"]["fraction_with_target_prediction"] > 0.9
    ds = jaxprobe.datasets.wage()
    _, test = ds.train_test_split(seed=0, test_fraction=0.25)
    x = np.load(out / "samples_original_units.npz")["x"].reshape(-1, ds.x.shape[1])
    fixed = list(ds.columns_of("race", "maritl"))
    np.testing.assert_allclose(x[:, fixed], np.broadcast_to(test.x[0, fixed], (len(x), len(fixed))), atol=1e-4)
    # The data set's metadata as constraints.from_dataset reads it: every one-hot group a valid category (rows
    # summed to 0.9-3.8 with per-column boxes), integer features integral (year was 2003.0002), inside the range.
    for feature in ds.features:
        columns = x[:, list(feature.columns)]
        if feature.is_categorical:
            assert np.all(np.isin(columns, (0.0, 1.0))) and np.allclose(columns.sum(axis=1), 1.0)
        elif feature.kind == "integer":
            np.testing.assert_allclose(columns, np.round(columns), atol=1e-3)
            assert columns.min() >= feature.range[0] - 1e-3 and columns.max() <= feature.range[1] + 1e-3


@pytest.mark.slow
def test_one_question_through_four_front_ends_is_one_answer(tmp_path):
    """The counterfactual example's question (one-hot groups, integers, immutable features, bounds) through
    Python generate, Python sweep, jaxprobe run and jaxprobe sweep: bit-identical draws."""
    from jaxprobe.config import load_config
    from jaxprobe.sweeps.from_config import Prepared, build_problem

    path = _small("counterfactual.toml", tmp_path, chains=16, samples=20, warmup=20)
    config = load_config(path, sweep=False)
    problem = build_problem(Prepared(config), config.sections, {})
    sampler = config.sections["sampler"]
    options = dict(prior=problem.prior, constraints=problem.constraints, dim=problem.dim, sampler=sampler["name"],
                   num_chains=sampler["num_chains"], num_samples=sampler["num_samples"],
                   num_warmup=sampler["num_warmup"], progress=False, convergence="ignore")
    key = jax.random.key(sampler["seed"])
    direct = jaxprobe.generate(jax.random.fold_in(key, 0), problem.probe, temperature=sampler["temperature"],
                               **options)
    swept = jaxprobe.sweep(key, problem.probe, {"temperature": [sampler["temperature"]]}, **options)
    assert main(["run", path, "--out", str(tmp_path / "run"), "--quiet"]) == EXIT_OK
    grid_path = tmp_path / "one_cell_sweep.toml"
    grid_path.write_text(open(path).read() + '\n[sweep.grid]\n"sampler.temperature" = [%r]\n'
                         % sampler["temperature"])
    assert main(["sweep", str(grid_path), "--out", str(tmp_path / "sweep"), "--quiet"]) == EXIT_OK
    cli_run = jaxprobe.Samples.load(tmp_path / "run" / "samples.npz")
    cli_sweep = jaxprobe.Samples.load(tmp_path / "sweep" / read_table(tmp_path / "sweep" / "results.csv")[0]["samples"])
    for other in (swept.samples[0], cli_run, cli_sweep):
        np.testing.assert_array_equal(other.positions, direct.positions)


def _sweep_example_as_shipped(name, out):
    """``jaxprobe sweep`` on an example exactly as shipped (its own grid, sizes and sampler): every cell has a
    converged verdict (--strict exits 1 otherwise) and no ConvergenceWarning is raised. Returns results.csv's rows."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", jaxprobe.ConvergenceWarning)
        status = main(["sweep", os.path.join(EXAMPLES, name), "--out", str(out), "--strict"])
    assert status == EXIT_OK
    rows = read_table(out / "results.csv")
    assert all(row["status"] == "ok" for row in rows)
    return rows


@pytest.mark.slow
def test_sweep_temperature_example_converges_answers_and_resumes(tmp_path, capsys):
    out = tmp_path / "out"
    rows = _sweep_example_as_shipped("sweep_temperature.toml", out)
    assert len(rows) == 48
    # The probe value grows with τ (samples spread away from the boundary as the temperature rises).
    for alpha in (0.25, 0.5, 0.75):
        means = [r["probe_mean"] for r in rows if r["probe.alpha"] == alpha and r["seed"] == 0]
        assert means[-1] > 3 * means[0]
    assert (out / "probe_mean.png").exists()
    capsys.readouterr()
    assert main(["sweep", os.path.join(EXAMPLES, "sweep_temperature.toml"), "--out", str(out)]) == EXIT_OK
    assert "48 cells (0 failed), 0 compiled program(s)" in capsys.readouterr().out  # all on disk: nothing to run


@pytest.mark.slow
def test_sweep_counterfactual_example_converges_and_each_model_kind_answers_its_own_model(tmp_path, capsys):
    out = tmp_path / "counterfactuals"
    rows = _sweep_example_as_shipped("sweep_counterfactual.toml", out)
    assert "128 cells (0 failed), 2 compiled program(s)" in capsys.readouterr().out  # one per model kind
    assert len(rows) == 128 and {r["model.kind"] for r in rows} == {"logistic_regression", "mlp"}
    # Each model.kind cell answers its own model: the two kinds' cells differ (they were bit-identical when string
    # axes were dropped), and a cell equals the single run of its question (same key) up to float32 rounding.
    by_kind = {kind: {(r["localize.anchor"], r["localize.weight"]): r["probe_mean"] for r in rows
                      if r["model.kind"] == kind} for kind in ("logistic_regression", "mlp")}
    assert all(by_kind["logistic_regression"][k] != by_kind["mlp"][k] for k in by_kind["mlp"])
    cell = next(r for r in rows if r["model.kind"] == "mlp" and r["localize.anchor"] == 2
                and r["localize.weight"] == 0.3)
    single = tmp_path / "single.toml"
    single.write_text(open(os.path.join(EXAMPLES, "sweep_counterfactual.toml")).read()
                      .replace('kind = "logistic_regression"', 'kind = "mlp"')
                      .replace("anchor = 0", "anchor = 2").replace("weight = 0.1", "weight = 0.3")
                      .split("[sweep]")[0] + '[output]\ndir = "unused"\n')
    assert main(["run", str(single), "--out", str(tmp_path / "single"), "--quiet"]) == EXIT_OK
    one = jaxprobe.Samples.load(tmp_path / "single" / "samples.npz")
    swept = jaxprobe.Samples.load(out / cell["samples"])
    # Same key, starting points and target, but another compiled program (a batched cell vs one run): rounding
    # differences grow along the chains (ChEES adapts across chains, so one chain's rounding moves them all), so
    # the draws are not equal; their distributions are: per-feature means within a quarter of the spread.
    spread = one.positions.reshape(-1, one.positions.shape[-1]).std(axis=0) + 1e-3
    gap = np.abs(swept.positions.mean(axis=(0, 1)) - one.positions.mean(axis=(0, 1)))
    assert np.all(gap < 0.25 * spread), gap / spread


def test_validate_catches_what_run_would_reject(tmp_path, capsys):
    """Before anything is sampled: a saved network that is not there, an unknown feature name, a size that
    cannot fit in memory (10^11 chains used to pass validate and then hang in run)."""
    base = open(os.path.join(EXAMPLES, "counterfactual.toml")).read()
    cases = {
        "missing_model": (base.replace('kind = "logistic_regression"', 'path = "nowhere.npz"\noutput = "softmax"'),
                          "is not a readable file"),
        "unknown_feature": (base.replace('fixed = ["race", "maritl"]', 'fixed = ["race", "colour"]'),
                            "no feature(s) ['colour']"),
        "too_big": (re.sub(r"num_chains = \d+", "num_chains = 100000000000", base), "GiB for the draws alone"),
    }
    for name, (text, message) in cases.items():
        path = tmp_path / f"{name}.toml"
        path.write_text(text)
        for command in ("validate", "run"):
            assert main([command, str(path), "--quiet"]) == EXIT_USAGE, (name, command)
            assert message in capsys.readouterr().err, (name, command)


@pytest.mark.slow
def test_run_is_checkpointed_and_resumes_after_an_interruption(tmp_path, monkeypatch, capsys):
    """jaxprobe run checkpoints into its output folder (every run with checkpoint_min_seconds = 0): Ctrl-C exits
    130 saying how to resume, the same command resumes and gives the uninterrupted run's draws, and nothing is left
    behind afterwards."""
    config = _small("prediction_risky.toml", tmp_path, chains=16, samples=40, warmup=20,
                    extra={'name = "smc"': 'name = "mala"', "[output]": "[output]\ncheckpoint_min_seconds = 0"})
    assert main(["run", config, "--out", str(tmp_path / "whole"), "--quiet"]) == EXIT_OK
    ctrl_c_in_chunk(monkeypatch, 4)
    out = tmp_path / "resumed"
    assert main(["run", config, "--out", str(out), "--quiet"]) == EXIT_INTERRUPTED
    assert "run the same command again to resume" in capsys.readouterr().err
    assert (out / "checkpoint.npz").exists()
    monkeypatch.undo()
    assert main(["run", config, "--out", str(out)]) == EXIT_OK
    assert f"found an unfinished run in {out / 'checkpoint.npz'}: resuming it" in capsys.readouterr().out
    whole = jaxprobe.Samples.load(tmp_path / "whole" / "samples.npz")
    resumed = jaxprobe.Samples.load(out / "samples.npz")
    np.testing.assert_array_equal(resumed.positions, whole.positions)
    assert sorted(p.name for p in out.iterdir()) == ["features.png", "samples.npz", "samples_original_units.npz",
                                                     "summary.json"]


def test_validate_checks_what_run_and_sweep_check_before_sampling(tmp_path, capsys):
    """validate takes the file as it is (run or sweep), fits/loads what run and sweep would, and checks the output
    folder: each case passed validate before and failed in run or sweep (or gave a traceback)."""
    base = open(os.path.join(EXAMPLES, "prediction_risky.toml")).read()
    taken = tmp_path / "taken"
    taken.write_text("a file")
    cases = {
        "folder": (None, "is a folder, not a configuration file"),
        "output_file": (base.replace('dir = "runs/prediction_risky"', f'dir = "{taken}"'),
                        "exists and is not a folder"),
        "output_unwritable": (base.replace('dir = "runs/prediction_risky"', 'dir = "/proc/jaxprobe/out"'),
                              "is not writable"),
        "grid_data_set": (base + '\n[sweep.grid]\n"data.name" = ["breast_cancer", "nope"]\n',
                          "[sweep.grid] data.name: unknown data set 'nope'"),
        "grid_class_index": (base.replace('type = "prediction_risky"', 'type = "fixed_label"\ntarget = 0') +
                             '\n[sweep.grid]\n"data.name" = ["wine", "breast_cancer"]\n"probe.target" = [2]\n',
                             "must be a class index in 0..1 for breast_cancer, got 2"),
    }
    for name, (text, message) in cases.items():
        path = tmp_path / f"{name}.toml"
        if text is None:
            path.mkdir()
        else:
            path.write_text(text)
        command = "sweep" if "[sweep.grid]" in (text or "") else "run"
        for argv in (["validate", str(path)], [command, str(path), "--quiet"]):
            assert main(argv) == EXIT_USAGE, (name, argv)
            assert message in capsys.readouterr().err, (name, argv)
    # --out is checked as run would check it; a valid file passes and nothing is created.
    config = os.path.join(EXAMPLES, "prediction_risky.toml")
    assert main(["validate", config, "--out", str(taken)]) == EXIT_USAGE
    assert main(["validate", config, "--out", str(tmp_path / "new" / "deeper")]) == EXIT_OK
    assert not (tmp_path / "new").exists()


def test_run_draws_a_step_level_progress_bar(tmp_path, capsys):
    """jaxprobe run shows the sampler's steps (warmup, sampling, acceptance), not a sweep's '0/1 cell' bar."""
    config = _small("prediction_risky.toml", tmp_path, chains=8, samples=20, warmup=20,
                    extra={'name = "smc"': 'name = "mala"'})
    assert main(["run", config, "--out", str(tmp_path / "out")]) == EXIT_OK
    bar = capsys.readouterr().err
    assert "mala x8" in bar and "40/40" in bar and "step/s" in bar and "sampling acc=" in bar
    assert "cell/s" not in bar and "0/1" not in bar


@pytest.mark.slow
def test_run_refuses_a_checkpoint_of_another_question(tmp_path, capsys):
    """An interrupted run's checkpoint is not resumed by a run of another question (here another temperature):
    exit 2 saying what differs and what to do; the checkpoint is left as it was."""
    config = _small("prediction_risky.toml", tmp_path, chains=8, samples=40, warmup=10,
                    extra={'name = "smc"': 'name = "mala"', "[output]": "[output]\ncheckpoint_min_seconds = 0"})
    out = tmp_path / "out"
    with pytest.MonkeyPatch.context() as patch:
        ctrl_c_in_chunk(patch, 4)
        assert main(["run", config, "--out", str(out), "--quiet"]) == EXIT_INTERRUPTED
    saved = sorted(p.name for p in (out / "checkpoint.npz.draws").iterdir())
    other = tmp_path / "other.toml"
    other.write_text(open(config).read().replace("temperature = 0.01", "temperature = 0.02"))
    capsys.readouterr()
    assert main(["run", str(other), "--out", str(out), "--quiet"]) == EXIT_USAGE
    error = capsys.readouterr().err
    assert "holds an unfinished run of another question (it differs in target)" in error and "--out" in error
    assert sorted(p.name for p in (out / "checkpoint.npz.draws").iterdir()) == saved
    assert not (out / "samples.npz").exists()


@pytest.mark.slow
def test_run_resumes_after_sigkill_and_leaves_no_temporary_files(tmp_path):
    """A real kill -9 in the middle of sampling (a separate process): the same command resumes from the chunks
    on disk, gives the uninterrupted run's draws bit for bit, and leaves only the results behind."""
    import signal
    import subprocess
    import sys
    import time

    config = _small("prediction_risky.toml", tmp_path, chains=64, samples=3000, warmup=50,
                    extra={'name = "smc"': 'name = "mala"',
                           "[output]": "[output]\nplots = false\ncheckpoint_min_seconds = 0"})
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "jaxprobe.cli", "run", config, "--out", str(out), "--quiet"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = out / "checkpoint.npz"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None:  # until 3 of the 20 chunks are saved
        try:
            with np.load(state, allow_pickle=False) as saved:
                if int(saved["num_draws_saved"]) >= 3 * 3000 // 20:
                    break
        except (OSError, ValueError, KeyError):  # not written yet
            pass
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be killed: make it longer"
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (out / "samples.npz").exists() and (out / "checkpoint.npz").exists()
    assert subprocess.run(command, timeout=600).returncode == EXIT_OK
    assert main(["run", config, "--out", str(tmp_path / "whole"), "--quiet"]) == EXIT_OK
    resumed = jaxprobe.Samples.load(out / "samples.npz")
    whole = jaxprobe.Samples.load(tmp_path / "whole" / "samples.npz")
    np.testing.assert_array_equal(resumed.positions, whole.positions)
    assert sorted(p.name for p in out.iterdir()) == ["samples.npz", "samples_original_units.npz", "summary.json"]


@pytest.mark.slow
def test_cli_sweep_rerun_for_another_model_recomputes_its_cells(tmp_path, capsys):
    """jaxprobe sweep into a folder whose cells answered another question (the model was refitted with other
    options) recomputes them; the same configuration again reuses every cell."""
    config = _small("sweep_temperature.toml", tmp_path, chains=8, samples=10, warmup=10)
    text = open(config).read()
    text = re.sub(r'^"probe.alpha" = \[.*\]$', '"probe.alpha" = [0.5]', text, flags=re.M)
    text = re.sub(r'^"sampler.seed" = \[.*\]$', '"sampler.seed" = [0]', text, flags=re.M)
    path = tmp_path / "grid.toml"
    path.write_text(text)
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--quiet"]) == EXIT_OK
    first = read_table(out / "results.csv")
    assert 'kind = "logistic_regression"' in text
    path.write_text(text.replace("[model]\n", "[model]\noptions = { C = 0.01 }\n"))  # a more regularized fit
    capsys.readouterr()
    assert main(["sweep", str(path), "--out", str(out)]) == EXIT_OK
    assert f"{len(first)} cells (0 failed), 1 compiled program(s)" in capsys.readouterr().out
    second = read_table(out / "results.csv")
    assert {r["cell"] for r in first}.isdisjoint({r["cell"] for r in second})
    assert all(a["probe_mean"] != b["probe_mean"] for a, b in zip(first, second))
    assert main(["sweep", str(path), "--out", str(out)]) == EXIT_OK
    assert f"{len(first)} cells (0 failed), 0 compiled program(s)" in capsys.readouterr().out


@pytest.mark.slow
def test_cli_sweep_interrupted_says_how_to_resume_and_resumes(tmp_path, monkeypatch, capsys):
    """Ctrl-C in jaxprobe sweep: exit 130 naming the folder that holds the finished cells; the same command runs
    only the cells that were not written, and the table is the uninterrupted sweep's: the cell written before the
    interruption bit for bit, the others up to float32 rounding (they ran as a smaller batch, another program)."""
    config = _small("sweep_temperature.toml", tmp_path, chains=8, samples=10, warmup=10,
                    extra={"[0.25, 0.5, 0.75]": "[0.5]", '"sampler.seed" = [0, 1]': '"sampler.seed" = [0]'})
    assert main(["sweep", config, "--out", str(tmp_path / "whole"), "--quiet"]) == EXIT_OK
    whole = read_table(tmp_path / "whole" / "results.csv")
    original, saves = jaxprobe.Samples.save, []

    def interrupted_save(self, path):
        saves.append(path)
        if len(saves) == 2:
            raise KeyboardInterrupt
        return original(self, path)

    monkeypatch.setattr(jaxprobe.Samples, "save", interrupted_save)
    out = tmp_path / "out"
    assert main(["sweep", config, "--out", str(out), "--quiet"]) == EXIT_INTERRUPTED
    assert f"the finished cells are in {out}: run the same command again to resume" in capsys.readouterr().err
    monkeypatch.setattr(jaxprobe.Samples, "save", original)
    assert main(["sweep", config, "--out", str(out)]) == EXIT_OK
    assert f"{len(whole)} cells (0 failed)" in capsys.readouterr().out
    resumed = read_table(out / "results.csv")
    assert [r["cell"] for r in resumed] == [r["cell"] for r in whole]
    assert resumed[0]["probe_mean"] == whole[0]["probe_mean"]
    np.testing.assert_allclose([r["probe_mean"] for r in resumed], [r["probe_mean"] for r in whole], rtol=1e-4)


def test_a_full_disk_during_run_exits_1_with_the_message(tmp_path, capsys, monkeypatch):
    """An OSError from the run (a full disk: the engine's message names the folder and the bytes) is printed
    with exit 1, not a traceback."""
    import errno

    from jaxprobe.sweeps import from_config

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, f"no space left in {tmp_path}: 1000 bytes needed, 10 free")

    monkeypatch.setattr(from_config, "run_config", full_disk)
    code = main(["run", "examples/model_contrast.toml", "--out", str(tmp_path / "out"), "--quiet"])
    assert code == EXIT_FAILED
    err = capsys.readouterr().err
    assert "no space left in" in err and "1000 bytes needed" in err and "Traceback" not in err


def test_run_prints_its_precision_and_says_when_its_errors_cannot_be_trusted(tmp_path, monkeypatch, capsys):
    """``jaxprobe run`` prints what a [precision] run spent and reached, and, even with --quiet, a warning on
    stderr when the verdict says the ± errors cannot be trusted (too few SMC groups); run_config stubbed."""
    from jaxprobe.engine.verdict import groups_warning
    from jaxprobe.sweeps import from_config

    note = "precision: MCSE 0.009 ≤ target 0.01 after 3 run(s) of 128 chains (384 chains, 1,000 gradient evaluations)"
    summary = {"probe": "model_contrast", "data": "circles", "num_chains": 384, "num_samples_per_chain": 10,
               "acceptance_rate": 0.6, "max_rhat": 1.2, "rhat_is_criterion": False, "min_ess_bulk": 900.0,
               "answer": {"fraction_of_samples_where_models_disagree": 0.697,
                          "fraction_of_samples_where_models_disagree_mcse": 0.009},
               "log_evidence": -3.0, "log_evidence_se": 0.1, "precision": {"note": note}, "verdict_checks": None,
               "verdict": {"converged": True, "problems": [], "mcse_warning": groups_warning(2)},
               "keep_draws": False, "seconds": 1.0}
    monkeypatch.setattr(from_config, "run_config", lambda *args, **kwargs: summary)
    assert main(["run", os.path.join(EXAMPLES, "model_contrast.toml"), "--out", str(tmp_path / "out")]) == EXIT_OK
    captured = capsys.readouterr()
    assert "fraction_of_samples_where_models_disagree: 0.697 ± 0.009" in captured.out and note in captured.out
    assert "warning: the ± errors cannot be trusted" in captured.err and "2 independent SMC" in captured.err
    summary["verdict"]["mcse_warning"] = None
    assert main(["run", os.path.join(EXAMPLES, "model_contrast.toml"), "--out", str(tmp_path / "out"),
                 "--quiet"]) == EXIT_OK
    assert "warning" not in capsys.readouterr().err


def test_sweep_plots_each_observable_with_error_bars_and_warns_about_untrusted_errors(tmp_path, monkeypatch,
                                                                                     capsys):
    """``jaxprobe sweep`` draws observable_<name>.png for each scalar observable of the table (its error bars from
    observable_<name>_mcse) and says on stderr how many cells' errors cannot be trusted; sweep_config stubbed."""
    from jaxprobe.sweeps import from_config
    from jaxprobe.sweeps.core import SweepResult

    text = re.sub(r'^"probe.alpha" = .*\n', "", open(os.path.join(EXAMPLES, "sweep_temperature.toml")).read(),
                  flags=re.M) + 'observables = ["within_0.1_of_alpha", "features"]\n'
    (tmp_path / "sweep.toml").write_text(text)
    rows = [{"cell": f"c{i}", "index": i, "temperature": t, "seed": 0, "status": "ok",
             "probe_mean": 0.1 * t, "probe_mcse": 0.01, "observable_within_0.1_of_alpha": 0.2 + 0.1 * i,
             "observable_within_0.1_of_alpha_mcse": 0.02, "observable_features": (0.0, 1.0),
             "mcse_warning": "too few groups" if i else None} for i, t in enumerate([0.01, 0.1, 1.0])]
    result = SweepResult(rows=rows, samples=None, out=str(tmp_path / "out"), num_compilations=1, compile_seconds=0.0,
                         seconds=1.0)
    monkeypatch.setattr(from_config, "sweep_config", lambda *args, **kwargs: result)
    assert main(["sweep", str(tmp_path / "sweep.toml"), "--out", str(tmp_path / "out"), "--quiet"]) == EXIT_OK
    assert sorted(os.listdir(tmp_path / "out")) == ["observable_within_0.1_of_alpha.png", "probe_mean.png"]
    assert "the ± errors of 2 of 3 cells cannot be trusted (column 'mcse_warning'" in capsys.readouterr().err
