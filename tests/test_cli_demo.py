"""The jaxprobe command end to end: the demo writes samples, a summary and a plot."""

import json
import numpy as np
import pytest
import jaxprobe


@pytest.mark.slow
def test_cli_demo_writes_samples_summary_and_plot(tmp_path, capsys, monkeypatch):
    from jaxprobe.cli import main

    out = tmp_path / "demo"
    code = main(["demo", "--out", str(out), "--chains", "32", "--samples", "60", "--warmup", "150"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "decision boundary" in printed and "summary.json" in printed
    assert sorted(p.name for p in out.iterdir()) == ["plot.png", "samples.npz", "summary.json"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["num_chains"] == 32 and summary["num_samples_per_chain"] == 60
    # The prediction-risky probe concentrates samples at the decision boundary, unlike the data.
    probe = summary["probe_output"]
    assert probe["fraction_within_0.1_of_boundary"] > 0.5 > probe["data_fraction_within_0.1_of_boundary"]
    # each number with its Monte-Carlo standard error: at least the iid error of all 32 x 60 draws' mean, at most
    # the error of 32 independent draws (every chain's draws one value)
    share = probe["fraction_within_0.1_of_boundary"]
    assert (np.sqrt(share * (1 - share) / (32 * 60)) * 0.5 < probe["fraction_within_0.1_of_boundary_mcse"]
            < np.sqrt(share * (1 - share) / 32) * 2)
    assert 0 < probe["mean_probability_mcse"] < 0.1 and "±" in printed
    assert summary["test_accuracy"] > 0.9
    samples = jaxprobe.Samples.load(out / "samples.npz")
    assert samples.positions.shape == (32, 60, 30)
    assert (out / "plot.png").read_bytes()[:4] == b"\x89PNG"

    # --quiet (as in run, sweep and validate): the same run passes progress=False and prints nothing.
    # The run itself is replayed from its summary rather than sampled a second time.
    from jaxprobe import demo as demo_module

    calls = []

    def replay(*args, **kwargs):
        calls.append(kwargs)
        return {**summary, "seconds": 0.0}

    monkeypatch.setattr(demo_module, "run_demo", replay)
    assert main(["demo", "--out", str(out), "--chains", "32", "--samples", "60", "--warmup", "150",
                 "--quiet"]) == 0
    assert calls and calls[0]["progress"] is False
    assert capsys.readouterr().out == ""
