"""Configuration files: every example validates; every kind of mistake is named with its key, expected form
and line, before anything runs."""

import glob
import os
import textwrap

import pytest

from jaxprobe.config import ConfigError, load_config, parse_config

EXAMPLES = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "examples", "*.toml")))

BASE = textwrap.dedent("""\
    [data]
    name = "breast_cancer"

    [model]
    kind = "logistic_regression"

    [probe]
    type = "prediction_risky"
    alpha = 0.5

    [sampler]
    num_chains = 8
    temperature = 0.1
""")


def test_every_probe_type_of_the_paper_has_an_example():
    assert EXAMPLES, "no examples/*.toml"
    types = set()
    for path in EXAMPLES:
        config = load_config(path, sweep="sweep_" in os.path.basename(path))
        types.add(config.get("probe.type"))
        if "localize" in config.sections:
            types.add("localize")
    assert types >= {"model_contrast", "prediction_risky", "parameter_sensitive", "fixed_label", "localize"}


def test_defaults_are_filled_in():
    config = parse_config(BASE)
    assert config.get("sampler.name") == "mala" and config.get("sampler.num_samples") == 200
    assert config.get("sampler.num_chains") == 8 and config.get("prior.kind") == "standard_normal"
    assert config.get("constraints.bounds") == "none" and config.grid == {}


@pytest.mark.parametrize(
    "edit, match",
    [
        # unknown key, with its line (line 9 is "alpha = 0.5" in BASE; the typo replaces it)
        (lambda t: t.replace("alpha = 0.5", "alpah = 0.5"), r"<config>:9: \[probe\] alpah: unknown key; expected one "
                                                            r"of type, alpha"),
        (lambda t: t + "\n[sampling]\nx = 1\n", r"<config>:15: \[sampling\]: unknown section"),
        # wrong type
        (lambda t: t.replace("num_chains = 8", 'num_chains = "8"'),
         r"<config>:12: \[sampler\] num_chains: must be an int >= 1, got '8'"),
        (lambda t: t.replace("alpha = 0.5", "alpha = true"), r"\[probe\] alpha: must be a number"),
        # impossible values
        (lambda t: t.replace("temperature = 0.1", "temperature = -1.0"), r":13: \[sampler\] temperature: must be "
                                                                         r"a number > 0, got -1.0"),
        (lambda t: t.replace("num_chains = 8", "num_chains = 0"), r"num_chains: must be an int >= 1, got 0"),
        (lambda t: t.replace('kind = "logistic_regression"', 'kind = "transformer"'),
         r"\[model\] kind: must be one of logistic_regression"),
        # missing data set, missing pieces
        (lambda t: t.replace('"breast_cancer"', '"mnist_full"'), r":2: \[data\] name: unknown data set 'mnist_full'; "
                                                                  r"expected one of breast_cancer"),
        (lambda t: t.replace("temperature = 0.1", ""), r"\[sampler\]: missing key 'temperature'"),
        (lambda t: t.replace('type = "prediction_risky"', 'type = "model_contrast"'), r"needs a \[compare\] section"),
        (lambda t: t.replace('type = "prediction_risky"', 'type = "fixed_label"'), r"fixed_label needs target"),
        (lambda t: t + '\n[constraints]\nfixed = ["mean radius"]\n', r"add a \[localize\] section"),
        (lambda t: t.replace('kind = "logistic_regression"', 'kind = "random_forest"'), r"piecewise constant"),
        (lambda t: t.replace('kind = "logistic_regression"', 'path = "model.pkl"\noutput = "sigmoid"'),
         r"\.npz or \.msgpack \(pickle files are never loaded\)"),
        (lambda t: t.replace("[data]", "[data\n"), r"not valid TOML"),
        # no warmup and no step size: every run (cell) would fail after the models are fitted; said before
        (lambda t: t.replace("num_chains = 8", "num_chains = 8\nnum_warmup = 0"),
         r"\[sampler\] num_warmup: num_warmup=0 needs an explicit step_size .*set \[sampler\] step_size"),
    ],
)
def test_mistakes_are_named_with_key_expected_form_and_line(edit, match):
    with pytest.raises(ConfigError, match=match):
        parse_config(edit(BASE))


def test_sweep_grid_is_validated():
    grid = lambda body: BASE + "\n[sweep.grid]\n" + body  # noqa: E731
    config = parse_config(grid('"sampler.temperature" = [0.1, 1.0]\n"probe.alpha" = [0.2, 0.8]\n'), sweep=True)
    assert config.grid == {"sampler.temperature": [0.1, 1.0], "probe.alpha": [0.2, 0.8]}
    with pytest.raises(ConfigError, match=r":16: \[sweep.grid\] sampler.temperature: value 1 must be a number > 0"):
        parse_config(grid('"sampler.temperature" = [0.1, 0.0]\n'), sweep=True)
    with pytest.raises(ConfigError, match=r"\[sweep.grid\] probe.alfa: names no configurable key"):
        parse_config(grid('"probe.alfa" = [0.1]\n'), sweep=True)
    with pytest.raises(ConfigError, match=r"must be a non-empty list"):
        parse_config(grid('"probe.alpha" = 0.3\n'), sweep=True)
    with pytest.raises(ConfigError, match=r"missing section \[sweep\]"):
        parse_config(BASE, sweep=True)
    with pytest.raises(ConfigError, match=r"`jaxprobe run` runs one probe"):
        parse_config(grid('"probe.alpha" = [0.3]\n'))


def test_grid_axes_that_no_cell_reads_are_refused():
    """An axis over a key its cells never read would give identical cells under different labels (as string axes
    did before they were applied): refused, naming who reads the key. BASE is a prediction_risky probe."""
    grid = lambda body: BASE + "\n[sweep.grid]\n" + body  # noqa: E731
    with pytest.raises(ConfigError, match=r"\[sweep.grid\] probe.target: only fixed_label probes read target, and "
                                          r"these cells are prediction_risky"):
        parse_config(grid('"probe.target" = [0, 1]\n'), sweep=True)
    with pytest.raises(ConfigError, match=r"probe.sigma: only parameter_sensitive probes read sigma"):
        parse_config(grid('"probe.sigma" = [0.1, 1.0]\n'), sweep=True)
    with pytest.raises(ConfigError, match=r"\[sweep.grid\] compare.kind: only model_contrast reads \[compare\]"):
        parse_config(grid('"compare.kind" = ["mlp", "svm_rbf"]\n'), sweep=True)
    with pytest.raises(ConfigError, match=r"model.activation: activation is read for a saved network"):
        parse_config(grid('"model.activation" = ["relu", "tanh"]\n'), sweep=True)
    with pytest.raises(ConfigError, match=r"model.options: options tables are not a grid axis"):
        parse_config(grid('"model.options" = [{ C = 1.0 }, { C = 0.1 }]\n'), sweep=True)
    # Read by some cells of the grid: accepted (alpha by the prediction_risky cells of a probe.type axis).
    config = parse_config(grid('"probe.type" = ["prediction_risky", "fixed_label"]\n"probe.alpha" = [0.2, 0.8]\n'
                               '"probe.target" = [1]\n'), sweep=True)
    assert config.grid["probe.alpha"] == [0.2, 0.8]


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "nope.toml")


def test_precision_is_validated_with_its_key_named():
    """[precision] asks for an error bar instead of a run size (jaxprobe run only): a target the run estimates with
    an error, an mcse > 0, a budget of whole runs; each mistake named with its key and line."""
    with_precision = lambda body, base=BASE: base + "\n[precision]\n" + body  # noqa: E731
    config = parse_config(with_precision("target = \"probe\"\nmcse = 0.01\nmax_chains = 32\n"))
    assert config.sections["precision"] == {"target": "probe", "mcse": 0.01, "max_chains": 32}
    listed = BASE + "\n[output]\nobservables = [\"within_0.1_of_alpha\"]\n"
    for target in ("within_0.1_of_alpha", "fraction_within_0.1_of_alpha"):  # the observable, or its answer field
        assert parse_config(with_precision(f"target = \"{target}\"\nmcse = 0.02\n", listed)).get(
            "precision.max_chains") is None
    smc = BASE.replace("num_chains = 8", "name = \"smc\"\nnum_chains = 8")
    assert parse_config(with_precision("target = \"log_evidence\"\nmcse = 0.1\n", smc)).get("precision.mcse") == 0.1
    mistakes = [
        ("mcse = 0.01\n", r"\[precision\]: missing key 'target'"),
        ("target = \"probe\"\nmcse = 0.0\n", r":17: \[precision\] mcse: must be a number > 0: .*, got 0.0"),
        ("target = \"probe\"\nmcse = 0.01\nmax_chains = 12\n",
         r":18: \[precision\] max_chains: must be a multiple of \[sampler\] num_chains = 8"),
        ("target = \"probe\"\nmcse = 0.01\nrounds = 3\n", r"\[precision\] rounds: unknown key"),
        ("target = \"log_evidence\"\nmcse = 0.1\n", r"\[precision\] target: \"log_evidence\" is estimated by sampler "
                                                    r"\"smc\" only, and \[sampler\] name is 'mala'"),
        ("target = \"within_0.1_of_alpha\"\nmcse = 0.1\n",
         r"\[precision\] target: 'within_0.1_of_alpha' is not estimated by this run \(add 'within_0.1_of_alpha' to "
         r"\[output\] observables\)"),
        ("target = \"share\"\nmcse = 0.1\n", r"'share' is not estimated by this run: expected \"probe\""),
    ]
    for body, match in mistakes:
        with pytest.raises(ConfigError, match=match):
            parse_config(with_precision(body))
    sweep = with_precision("target = \"probe\"\nmcse = 0.01\n") + "\n[sweep.grid]\n\"probe.alpha\" = [0.3, 0.7]\n"
    with pytest.raises(ConfigError, match=r"\[precision\]: \[precision\] is for `jaxprobe run`"):
        parse_config(sweep, sweep=True)
    with pytest.raises(ConfigError, match=r"precision.mcse: names no configurable key"):
        parse_config(BASE + "\n[sweep.grid]\n\"precision.mcse\" = [0.1]\n", sweep=True)


def test_the_precision_section_shown_in_an_example_validates():
    """examples/model_contrast.toml shows a commented-out [precision] section: uncommented, it is valid."""
    text = open(os.path.join(os.path.dirname(__file__), "..", "examples", "model_contrast.toml")).read()
    shown = "\n".join(line[2:] if line.startswith(("# [precision]", "# target", "# mcse", "# max_chains")) else line
                      for line in text.splitlines())
    assert parse_config(shown).sections["precision"]["target"] == "fraction_of_samples_where_models_disagree"
