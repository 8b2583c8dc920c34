"""``[precision]`` in configuration files: ``jaxprobe run`` adds independent runs of ``num_chains`` chains until the
target's Monte-Carlo standard error is reached (``generate(..., precision=...)``), and says what it spent."""

import json

import numpy as np
import pytest

from jaxprobe.cli import EXIT_OK, main
from jaxprobe.config import parse_config
from jaxprobe.sweeps.from_config import run_config

BASE = """\
[data]
name = "circles"

[model]
kind = "logistic_regression"

[compare]
kind = "mlp"

[probe]
type = "model_contrast"

[sampler]
name = "mala"
num_chains = 8
num_samples = 40
num_warmup = 40
temperature = 0.1

[output]
plots = false
observables = ["disagree"]
"""


@pytest.mark.slow
def test_a_run_adds_runs_until_its_answer_reaches_the_precision(tmp_path, capsys):
    """The plain run's MCSE of the disagreement fraction is m; asking for 0.75·m needs about 2 runs (MCSE ∝
    1/√runs): the run pools at least 2 (the first is the plain run: same key), stops once the pooled MCSE is at
    most the target, and summary.json says what it spent and reached."""
    plain = run_config(parse_config(BASE), out=str(tmp_path / "plain"), progress=False)
    first = plain["answer"]["observables"]["disagree"]
    assert first["mcse"] > 0 and "note" not in first
    goal = 0.75 * first["mcse"]
    text = BASE + ("\n[precision]\ntarget = \"fraction_of_samples_where_models_disagree\"\n"
                   f"mcse = {goal}\nmax_chains = 64\n")
    (tmp_path / "run.toml").write_text(text)
    assert main(["run", str(tmp_path / "run.toml"), "--out", str(tmp_path / "out"), "--quiet"]) == EXIT_OK
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    spent = summary["precision"]["num_chains_spent"]
    assert summary["num_chains"] == spent and spent % 8 == 0 and 16 <= spent <= 64
    assert summary["precision"]["reached"] and "≤ target" in summary["precision"]["note"]
    pooled = summary["answer"]["observables"]["disagree"]
    assert pooled["mcse"] <= goal and summary["answer"]["fraction_of_samples_where_models_disagree_mcse"] <= goal * 1.5
    # the first run is the plain run: its chains' draws agree
    first_x = np.load(tmp_path / "plain" / "samples_original_units.npz")["x"]
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "samples_original_units.npz")["x"][:8], first_x)
    assert main(["validate", str(tmp_path / "run.toml")]) == EXIT_OK
    assert "valid (one run)" in capsys.readouterr().out
