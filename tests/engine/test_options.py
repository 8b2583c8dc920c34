"""Sampler options are validated like keyword arguments (issue 15): every option of every kernel is checked
for its type and range, and unknown keys are refused naming the known ones, before anything compiles, by
sample, generate, sweep, configuration files and the command line alike.

The bad values are derived from each kernel's declared options (jaxprobe.engine.options), so a new option
is covered as soon as it is declared; the cases the issue reports are listed explicitly too.
"""

import math
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprobe
from jaxprobe.engine.kernels import BUILTIN_KERNELS
from jaxprobe.engine.options import option_specs
from jaxprobe.engine.registry import make_kernel

KEY = jax.random.key(0)  # made once, outside the compile counters
INIT = np.zeros((8, 2), np.float32)


def _logdensity(x):
    return -0.5 * jnp.sum(x ** 2)


def _bad_values(spec):
    """(label, value, exception type) for every way a value can violate ``spec``."""
    if spec.kind == "choice":
        return [("unknown choice", "nope", ValueError), ("wrong type", 1, ValueError)]
    bad = [("bool", True, TypeError), ("string", "1", TypeError)]
    if not spec.allow_none:
        bad.append(("None", None, TypeError))
    if spec.kind == "int":
        bad += [("non-integer", 2.5, TypeError), ("integral float", 2.0, TypeError)]
        step = 1
    else:
        bad += [("nan", math.nan, ValueError), ("inf", math.inf, ValueError)]
        step = 0.5
    if spec.minimum is not None:
        bad.append(("below minimum", spec.minimum if spec.exclusive_minimum else spec.minimum - step, ValueError))
        bad.append(("far below minimum", spec.minimum - 1000, ValueError))
    if spec.maximum is not None:
        bad.append(("above maximum", spec.maximum if spec.exclusive_maximum else spec.maximum + step, ValueError))
    return bad


CASES = [pytest.param(cls.name, option, value, error, id=f"{cls.name}-{option}-{label}")
         for cls in BUILTIN_KERNELS
         for option, spec in option_specs(cls).items()
         for label, value, error in _bad_values(spec)]

# The reports of issue 15, each with what it did before.
ISSUE_CASES = [
    ("hmc", {"num_integration_steps": 0}, ValueError),  # ran with 1 distinct draw
    ("hmc", {"target_acceptance_rate": 5}, ValueError),  # adapted the step size to 0, froze every chain
    ("mala", {"target_acceptance_rate": 5}, ValueError),
    ("nuts", {"max_num_doublings": 0}, ValueError),  # crashed inside JAX
    ("nuts", {"max_num_doublings": -1}, ValueError),
    ("hmc", {"num_integration_steps": 2.5}, TypeError),  # non-integer step counts crashed inside JAX
    ("chees", {"max_leapfrog_steps": 10.5}, TypeError),
    ("smc", {"num_mcmc_steps": 2.5}, TypeError),
]


def test_every_kernel_declares_every_option():
    for cls in BUILTIN_KERNELS:
        specs = option_specs(cls)  # raises for a field declared without its form
        assert "target_acceptance_rate" in specs or cls.name == "smc"


@pytest.mark.parametrize("sampler, option, value, error", CASES)
def test_every_bad_option_of_every_kernel_is_refused_before_compiling(sampler, option, value, error,
                                                                      compile_counter):
    message = rf"sampler_options\['{option}'\] for '{sampler}' must be "
    with pytest.raises(error, match=message):
        make_kernel(sampler, {option: value})
    with compile_counter as counter, pytest.raises(error, match=message):
        jaxprobe.sample(KEY, _logdensity, INIT, sampler=sampler, num_samples=5, num_warmup=5, progress=False,
                        sampler_options={option: value})
    assert counter.count == 0


@pytest.mark.parametrize("sampler", [cls.name for cls in BUILTIN_KERNELS])
def test_unknown_options_are_refused_naming_the_known_ones(sampler, compile_counter):
    with compile_counter as counter, pytest.raises(TypeError) as info:
        jaxprobe.sample(KEY, _logdensity, INIT, sampler=sampler, num_samples=5, num_warmup=5, progress=False,
                        sampler_options={"num_steps": 3})
    assert counter.count == 0
    text = str(info.value)
    assert f"sampler_options for '{sampler}': unknown option(s) 'num_steps'" in text
    for option in option_specs(type(make_kernel(sampler))):
        assert option in text


@pytest.mark.parametrize("options", [[("num_integration_steps", 3)], "num_integration_steps=3", {3: 1}])
def test_options_that_are_not_a_dict_of_names(options):
    with pytest.raises(TypeError, match="sampler_options"):
        jaxprobe.sample(KEY, _logdensity, INIT, sampler="hmc", num_samples=5, num_warmup=5, progress=False,
                        sampler_options=options)


def test_good_options_are_stored_in_their_canonical_type():
    kernel = make_kernel("hmc", {"num_integration_steps": np.int32(5), "divergence_threshold": 500})
    assert kernel == make_kernel("hmc", num_integration_steps=5, divergence_threshold=500.0)
    assert type(kernel.num_integration_steps) is int and type(kernel.divergence_threshold) is float
    assert hash(kernel) == hash(make_kernel("hmc", num_integration_steps=5, divergence_threshold=500.0))
    assert make_kernel("smc", {"num_groups": None}).num_groups is None
    assert make_kernel("hmc", {"num_integration_steps": np.array(5)}) == make_kernel("hmc", num_integration_steps=5)


@pytest.mark.parametrize("sampler, options, error", ISSUE_CASES)
def test_issue_cases_through_generate_and_sweep_before_compiling(sampler, options, error, compile_counter):
    name = next(iter(options))
    probe = jaxprobe.probes.Probe(lambda x: jnp.sum(x ** 2))
    common = dict(num_chains=8, num_samples=5, num_warmup=5, dim=2, sampler=sampler, progress=False,
                  sampler_options=options, prior=jaxprobe.priors.StandardNormal())
    with compile_counter as counter:
        with pytest.raises(error, match=rf"sampler_options\['{name}'\] for '{sampler}'"):
            jaxprobe.sample(KEY, _logdensity, INIT, sampler=sampler, num_samples=5, num_warmup=5, progress=False,
                            sampler_options=options)
        with pytest.raises(error, match=rf"sampler_options\['{name}'\] for '{sampler}'"):
            jaxprobe.generate(KEY, probe, temperature=1.0, **common)
        with pytest.raises(error, match=rf"sampler_options\['{name}'\] for '{sampler}'"):
            jaxprobe.sweep(KEY, probe, {"temperature": [1.0, 2.0]}, **common)
    assert counter.count == 0


CONFIG = textwrap.dedent("""\
    [data]
    name = "breast_cancer"

    [model]
    kind = "logistic_regression"

    [probe]
    type = "prediction_risky"
    alpha = 0.5

    [sampler]
    name = "{sampler}"
    num_chains = 8
    temperature = 0.1
    options = {options}
""")


@pytest.mark.parametrize("sampler, options, match", [
    ("hmc", "{ num_integration_steps = 0 }", r"must be an int >= 1, got 0"),
    ("nuts", "{ max_num_doublings = -1 }", r"must be an int in \[1, 30\], got -1"),
    ("mala", "{ target_acceptance_rate = 5 }", r"must be a number in \(0, 1\), got 5"),
    ("hmc", "{ num_integration_steps = 2.5 }", r"must be an int >= 1, got 2.5"),
    ("hmc", "{ num_integration_step = 5 }", r"unknown option\(s\) 'num_integration_step'; 'hmc' takes "
                                            r"num_integration_steps"),
    ("hmc", "3", r"must be a table"),
])
def test_configuration_files_and_the_command_line_check_sampler_options(sampler, options, match, tmp_path,
                                                                         capsys):
    from jaxprobe.cli import EXIT_USAGE, main
    from jaxprobe.config import ConfigError, parse_config

    text = CONFIG.format(sampler=sampler, options=options)
    with pytest.raises(ConfigError, match=r"<config>:15: \[sampler\] options: .*" + match):
        parse_config(text)
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert main(["validate", str(path)]) == EXIT_USAGE
    assert main(["run", str(path), "--quiet"]) == EXIT_USAGE  # refused before anything runs
    assert "[sampler] options" in capsys.readouterr().err


def test_configuration_options_reach_the_sampler(tmp_path, monkeypatch):
    """A file's [sampler] options are the sweep's sampler_options (checked above, used here)."""
    from jaxprobe.config import parse_config
    from jaxprobe.sweeps import from_config

    config = parse_config(CONFIG.format(sampler="hmc", options="{ num_integration_steps = 4 }"))
    assert config.get("sampler.options") == {"num_integration_steps": 4}
    assert parse_config(CONFIG.format(sampler="hmc", options="{}")).get("sampler.options") == {}
    seen = {}

    class Stop(Exception):
        pass

    def fake_sweep(*args, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(from_config, "sweep", fake_sweep)
    with pytest.raises(Stop):
        from_config.run_config(config, out=str(tmp_path), progress=False)
    assert seen["sampler_options"] == {"num_integration_steps": 4} and seen["sampler"] == "hmc"


def test_a_grid_over_sampler_options_is_refused():
    from jaxprobe.config import ConfigError, parse_config

    text = CONFIG.format(sampler="hmc", options="{}") + textwrap.dedent("""
        [sweep.grid]
        "sampler.options" = [{ num_integration_steps = 4 }]
    """)
    with pytest.raises(ConfigError, match=r"sampler.options: options tables are not a grid axis: set them once in "
                                          r"\[sampler\] options"):
        parse_config(text, sweep=True)
