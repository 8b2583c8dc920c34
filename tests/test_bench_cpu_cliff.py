"""jaxprobe.bench.cpu_cliff's bookkeeping in its --quick mode (batching forced at small sizes): every row is the
mode it says, map_points computed the same numbers as one vmap in the batches it reports, and the ratios and
verdicts are recomputed here from the recorded seconds."""

import json

import pytest

from jaxprobe.bench import cpu_cliff


@pytest.mark.slow  # ~16 s idle (48 s loaded), mostly compiling (two sample() runs and a child process): CI's slow pass runs it
def test_cpu_cliff_quick_records_three_modes_and_the_end_to_end_runs(tmp_path):
    cpu_cliff.main(["--quick", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "cpu_cliff.json").read_text())
    assert (tmp_path / "cpu_cliff.md").read_text().startswith("# XLA's CPU cliff")
    assert result["flag"] == "ran" and result["support_vectors"] > 100
    rows = result["evaluations"]
    points = cpu_cliff.QUICK["points"]
    assert {(r["points"], r["operation"], r["mode"]) for r in rows} == {
        (n, op, mode) for n in points for op in cpu_cliff.OPERATIONS for mode in ("one vmap", "map_points", "flag")}
    for row in rows:
        assert row["seconds"] > 0
        if row["mode"] == "map_points":  # forced into batches, each within the bound, covering every point
            batches = row["batches"]
            assert batches["num_batches"] > 1 and batches["num_batches"] * batches["batch_size"] >= row["points"]
            assert row["max_relative_difference"] < 1e-4
        else:
            assert row["batches"] is None
    for line in result["table"]:
        seconds = {mode: line[f"{mode} seconds"] for mode in ("one vmap", "map_points", "flag")}
        ratio = seconds["map_points"] / min(seconds["one vmap"], seconds["flag"])
        assert line["map_points / best other"] == pytest.approx(ratio)
        assert line["within_target"] == (ratio <= cpu_cliff.TARGET_RATIO)
    modes = [row["mode"] for row in result["end_to_end"]]
    assert modes == ["one vmap", "map_points"] and all(row["finite"] for row in result["end_to_end"])
