"""``jaxprobe benchmark``: the command line of jaxprobe.benchmark.compare."""

from __future__ import annotations

from jaxprobe.benchmark import Report
from jaxprobe.cli import main


def test_benchmark_command_writes_its_report(tmp_path, capsys):
    out = tmp_path / "run"
    status = main(["benchmark", "--samplers", "mala", "--targets", "banana", "--chains", "2", "--seeds", "2",
                   "--warmup", "20", "--samples", "30", "--out", str(out), "--no-plot"])
    assert status == 0
    printed = capsys.readouterr().out
    assert "| mala | banana | 2 |" in printed and f"report in {out}" in printed
    report = Report.load(out / "samplers.json")
    row = report.row("mala", "banana")
    assert row["failure"] is None and row["num_seeds"] == 2 and len(row["per_seed"]["seed"]) == 2
    assert (out / "samplers.md").read_text().startswith("# Sampler benchmark")


def test_benchmark_command_names_its_files(tmp_path):
    """--name writes OUT/NAME.json and OUT/NAME.md (a second report beside samplers.json); a path is refused."""
    assert main(["benchmark", "--samplers", "mala", "--targets", "banana", "--chains", "2", "--seeds", "1",
                 "--warmup", "10", "--samples", "10", "--out", str(tmp_path), "--name", "eight", "--no-plot",
                 "--quiet"]) == 0
    assert Report.load(tmp_path / "eight.json").row("mala", "banana")["failure"] is None
    assert (tmp_path / "eight.md").exists() and not (tmp_path / "samplers.json").exists()
    assert main(["benchmark", "--samplers", "mala", "--out", str(tmp_path), "--name", "../elsewhere"]) == 2


def test_benchmark_command_refuses_unknown_names(tmp_path, capsys):
    assert main(["benchmark", "--samplers", "mala,nope", "--out", str(tmp_path), "--quiet"]) == 2
    assert "'nope' is not a known sampler" in capsys.readouterr().err
    assert main(["benchmark", "--samplers", "mala", "--targets", "nowhere", "--out", str(tmp_path)]) == 2
    assert "unknown target 'nowhere'" in capsys.readouterr().err
    assert main(["benchmark", "--chains", "4,x", "--out", str(tmp_path)]) == 2
    assert not (tmp_path / "samplers.json").exists()
