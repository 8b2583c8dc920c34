"""The command line answers at once (jaxprobe/cli.py, jaxprobe/__init__.py, jaxprobe/config.py): ``--help``, usage
errors and ``validate``'s syntax and schema checks import no JAX (4-6 s), and ``import jaxprobe`` is lazy (PEP 562)
while every public name still works. Each check runs in a fresh interpreter, where sys.modules says what was
imported (asserted rather than wall time, which depends on the machine)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import jaxprobe

HEAVY = ("jax", "jaxlib", "blackjax", "flax", "optax", "sklearn", "scipy", "numpy")  # numpy: validate only

# Runs the command line in this interpreter as the `jaxprobe` script does, then reports the exit code, what was
# printed and which heavy packages were imported.
RUNNER = textwrap.dedent("""
    import contextlib, io, json, sys
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            import jaxprobe.cli
            code = jaxprobe.cli.main(sys.argv[1:])
        except SystemExit as exit:
            code = exit.code
    heavy = sorted({name.split(".")[0] for name in sys.modules} & set(%r))
    print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue(), "heavy": heavy}))
""" % (HEAVY,))


def _cli(tmp_path, *arguments):
    completed = subprocess.run([sys.executable, "-c", RUNNER, *arguments], cwd=tmp_path, capture_output=True,
                               text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.splitlines()[-1])


VALID = """\
[data]
name = "breast_cancer"

[model]
kind = "logistic_regression"

[probe]
type = "prediction_risky"

[sampler]
name = "mala"
num_chains = 4
temperature = 0.1
"""


@pytest.mark.parametrize("arguments, code, said", [
    (["--help"], 0, "validate"),
    (["--version"], 0, "jaxprobe"),
    (["demo", "--help"], 0, "--sampler"),
    (["validate", "--help"], 0, "TOML"),
    (["frobnicate"], 2, "invalid choice"),
    (["run"], 2, "the following arguments are required: config"),
])
def test_help_and_usage_errors_import_no_jax(tmp_path, arguments, code, said):
    result = _cli(tmp_path, *arguments)
    assert result["code"] == code
    assert said in result["out"] + result["err"]
    assert result["heavy"] == []  # argparse only: not even NumPy


@pytest.mark.parametrize("edit, message", [
    (lambda text: text.replace("num_chains = 4", "num_chain = 4"), "bad.toml:12: [sampler] num_chain: unknown key"),
    (lambda text: text.replace("num_chains = 4", "num_chains = 0"), "bad.toml:12: [sampler] num_chains: must be an "
                                                                    "int >= 1, got 0"),
    (lambda text: text.replace("temperature = 0.1", "temperature = "), "bad.toml: not valid TOML"),
    (lambda text: text.replace('type = "prediction_risky"', 'type = "risky"'), "[probe] type: must be one of"),
    (lambda text: text + "\n[sweep.grid]\n\"sampler.temperature\" = []\n", "must be a non-empty list"),
])
def test_validate_answers_syntax_and_schema_errors_without_jax(tmp_path, edit, message):
    (tmp_path / "bad.toml").write_text(edit(VALID))
    result = _cli(tmp_path, "validate", "bad.toml")
    assert result["code"] == 2, result
    assert message in result["err"], result["err"]
    assert result["heavy"] == ["numpy"]  # the schema's number checks (jaxprobe._inputs) read NumPy scalars


def test_validate_imports_jax_where_the_engine_must_answer(tmp_path):
    """The control of the tests above (their check can see JAX): a sampler name is the engine registry's, the
    first check that imports JAX, and a typo there is still exit 2 with the registered names."""
    (tmp_path / "bad.toml").write_text(VALID.replace('name = "mala"', 'name = "malla"'))
    result = _cli(tmp_path, "validate", "bad.toml")
    assert result["code"] == 2
    assert "bad.toml:11: [sampler] name: must be a registered sampler: mala, " in result["err"], result["err"]
    assert "tree_gibbs" in result["err"]  # the whole-run samplers are registered without `import jaxprobe`'s help
    assert "jax" in result["heavy"]


def test_lazy_package_keeps_every_public_name():
    assert set(jaxprobe._SOURCES) | {"__version__"} == set(jaxprobe.__all__)
    for name in jaxprobe.__all__:
        assert name in dir(jaxprobe)
        value = getattr(jaxprobe, name)
        source = jaxprobe._SOURCES.get(name, "jaxprobe._version")
        if source is None:
            assert value is sys.modules[f"jaxprobe.{name}"]
        else:
            assert value is getattr(sys.modules[source], name)
    from jaxprobe import Question, generate, priors  # noqa: F401  (from-imports go through __getattr__ too)

    assert jaxprobe.question.Question is Question  # a submodule outside __all__, as an eager __init__ had it
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        jaxprobe.no_such_name  # noqa: B018


def test_whole_run_samplers_are_registered_by_the_modules_that_use_them(tmp_path):
    """`import jaxprobe` no longer imports jaxprobe.samplers: generate (and sweep, reconstruct through it) and the
    configuration check register them themselves."""
    code = textwrap.dedent("""
        import jaxprobe.generation
        from jaxprobe.engine.registry import known_samplers
        print("tree_gibbs" in known_samplers(whole_run=True))
    """)
    completed = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                               timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert completed.stdout.split() == ["True"], completed.stderr


def test_demo_refuses_an_unknown_sampler_before_training(tmp_path, capsys):
    """--sampler is checked against the engine's registry in the handler (the parser imports no JAX): still a
    usage error (exit 2) naming the choices, and nothing is written."""
    from jaxprobe.cli import EXIT_USAGE, main

    assert main(["demo", "--sampler", "bogus", "--out", str(tmp_path / "demo")]) == EXIT_USAGE
    error = capsys.readouterr().err
    assert "argument --sampler: invalid choice 'bogus' (choose from mala, " in error and "chees" in error
    assert not (tmp_path / "demo").exists()
