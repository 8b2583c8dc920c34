"""The SMC benchmarks' own bookkeeping: ``jaxprobe.bench.smc_acceptance`` and ``jaxprobe.bench.smc_settings`` in
their --quick modes, each record checked against the closed form it claims to compare with (the verdicts, counts
and ratios are recomputed here from the recorded numbers, so a wrong tolerance, flag or ratio fails)."""

import json
import math

import numpy as np
import pytest

from jaxprobe.bench import smc_acceptance, smc_settings
from jaxprobe.bench.smc_peers import LOG_Z_TOLERANCE, QUESTIONS, SHARE_TOLERANCE, closed_form


@pytest.mark.slow  # ~20 s: 4 seeds of 1,024 particles, then two precision stages (CI's slow pass runs it)
def test_smc_acceptance_records_each_seed_against_the_closed_form(tmp_path):
    smc_acceptance.main(["--quick", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "smc_acceptance.json").read_text())
    assert (tmp_path / "smc_acceptance.md").read_text().startswith("# ")
    truth, log_z = closed_form(QUESTIONS["three4d"])
    np.testing.assert_allclose(truth, [0.6, 0.3, 0.1], atol=1e-3)  # equidistant bumps: the weights
    stages = [result["plain"]] + (result["precision"] or [])
    for stage in stages:
        for row in stage["rows"]:
            shares, mcse = np.array(row["shares"]), np.array(row["share_mcse"])
            assert shares.sum() == pytest.approx(1.0, abs=1e-6) and np.all(mcse > 0) and row["log_z_se"] > 0
            within = np.max(np.abs(shares - truth)) <= SHARE_TOLERANCE and abs(row["log_z"] - log_z) <= LOG_Z_TOLERANCE
            assert row["within_tolerance"] == within
            assert row["flagged"] == (1.96 * mcse.max() > SHARE_TOLERANCE or 1.96 * row["log_z_se"] > LOG_Z_TOLERANCE)
            # the answer is the question's: within 5 of its own error bars (and a t-like 8-group error's slack)
            assert np.all(np.abs(shares - truth) <= 5 * mcse + 0.02), (shares, mcse)
            assert abs(row["log_z"] - log_z) <= 5 * row["log_z_se"] + 0.05
        summary = stage["summary"]
        assert summary["within_tolerance"] == sum(r["within_tolerance"] for r in stage["rows"])
        assert summary["missed_not_flagged"] == sum(not r["within_tolerance"] and not r["flagged"]
                                                    for r in stage["rows"])
    # precision stages run exactly when fewer than 19 in 20 seeds are within; each stops at its target or budget
    assert bool(result["precision"]) == (result["plain"]["summary"]["within_tolerance"] < 19 * 4 / 20)
    for stage in result["precision"] or []:
        assert stage["mcse"] == pytest.approx(SHARE_TOLERANCE / stage["z"])
        for row in stage["rows"]:
            assert row["chains"] % 1024 == 0 and row["groups"] == 8 * row["chains"] // 1024
            assert max(row["share_mcse"]) <= stage["mcse"] or row["chains"] == stage["max_chains"]


@pytest.mark.slow  # ~25 s: two jaxprobe and two BlackJAX settings on one question (CI's slow pass runs it)
def test_smc_settings_ratios_are_spreads_per_gradient_against_the_best_peer(tmp_path):
    smc_settings.main(["--quick", "--only", "mix2d", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "smc_settings.json").read_text())
    question = result["questions"]["mix2d"]
    rows = question["samplers"]
    assert {"jaxprobe:4-steps-ess0.7", "jaxprobe:5-steps-ess0.5", "blackjax:1x5-ess0.5",
            "blackjax:1x3-ess0.8"} == set(rows)
    for quantity, spread in (("share", "share_spread"), ("log_z", "log_z_sd")):
        best = question["best_peer"][quantity]
        peers = {name: row[spread] * math.sqrt(row["gradient_evaluations"]) for name, row in rows.items()
                 if name.startswith("blackjax")}
        assert best == min(peers, key=peers.get) and rows[best][f"ratio_{quantity}"] == pytest.approx(1.0)
        for row in rows.values():
            normalized = row[spread] * math.sqrt(row["gradient_evaluations"])
            assert row[f"cost_normalized_{quantity}"] == pytest.approx(normalized, rel=1e-9)
            assert row[f"ratio_{quantity}"] == pytest.approx(normalized / peers[best], rel=1e-9)
            low, high = row[f"cost_normalized_{quantity}_90"]
            assert low <= normalized * 1.5 and high >= normalized / 1.5 and low < high
    # jaxprobe counts 1 + steps gradients per particle and stage (mean over seeds: between 1 and 20 stages here)
    for name, row in rows.items():
        if name.startswith("jaxprobe"):
            stages = row["gradient_evaluations"] / 256 / (1 + row["settings"]["num_mcmc_steps"])
            assert 1 <= stages <= 20, (name, stages)
    smc_settings.main(["--render", str(tmp_path / "smc_settings.json")])
    assert "(default)" in (tmp_path / "smc_settings.md").read_text()


@pytest.mark.slow  # ~20 s: 4 seeds of 512 particles, two jaxprobe settings and one BlackJAX setting on one question
def test_smc_peers_measures_the_settings_named_on_the_command_line(tmp_path):
    from jaxprobe.bench import smc_peers
    variant = {"kernel": "mala", "num_mcmc_steps": 2, "target_ess": 0.6, "num_groups": 4}
    result = smc_peers.main(["--quick", "--seeds", "4", "--only", "mix2d", "--blackjax", "1x5-ess0.5",
                             "--variant", "two-steps=" + json.dumps(variant), "--out", str(tmp_path)])
    rows = result["questions"]["mix2d"]["samplers"]
    assert sorted(rows) == ["blackjax:1x5-ess0.5", "jaxprobe:default", "jaxprobe:two-steps"]
    assert result["variants"]["two-steps"] == variant
    # Its gradient evaluations are its own: 2 MALA steps per stage, fewer than the default's 5.
    assert rows["jaxprobe:two-steps"]["gradient_evaluations"] < rows["jaxprobe:default"]["gradient_evaluations"]
    saved = json.loads((tmp_path / "smc_peers.json").read_text())
    assert saved["blackjax_settings"] == {"1x5-ess0.5": smc_peers.BLACKJAX_SETTINGS["1x5-ess0.5"]}
    with pytest.raises(SystemExit):
        smc_peers.main(["--quick", "--blackjax", "2x9-ess0.1", "--out", str(tmp_path)])
