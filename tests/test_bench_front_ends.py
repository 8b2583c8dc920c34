"""``jaxprobe.bench.front_ends``: generate, generate in a box, a sweep cell and jaxprobe run (run_config) each timed
against a limit that makes the same transitions (their draws compared), and each memory child measuring what its
call adds."""

import json

import pytest

from jaxprobe.bench import front_ends


@pytest.mark.slow  # ~1.5 min: every row at C = 16 on a d = 3 probe, quick sizes, one memory figure per front end
def test_every_front_end_is_timed_against_the_limit_of_its_own_transitions(tmp_path):
    front_ends.main(["--quick", "--dim", "3", "--chains", "16", "--out", str(tmp_path)])
    record = json.loads((tmp_path / "front_ends.d3.json").read_text())
    assert record["config"]["dim"] == 3
    rows = {(row["kind"], row["thin"]): row for row in record["timing"]}
    assert set(rows) == {("generate", 1), ("generate", 10), ("generate_box", 1), ("sweep_cell", 1), ("run", 1),
                         ("run_checkpointed", 1)}
    for row in rows.values():  # the same starts, keys and kernel: the limit is the front end's own run
        assert row["same_work"]["identical_draw_fraction"] == 1.0 and row["ratio"] > 0, row["kind"]
    for kind in front_ends.RUN_KINDS:  # jaxprobe run also against the limit and its files
        assert rows[(kind, 1)]["ratio_to_limit_with_files"] > 0
    memory = {(row["kind"], row["limit"]) for row in record["memory"]}
    assert memory == {(kind, limit) for kind in front_ends.KINDS for limit in (False, True)}
    assert all(row["rise_kb"] is not None for row in record["memory"])
    text = (tmp_path / "front_ends.d3.md").read_text()
    assert "MLP probe 3→" in text and "generate, Box(−5, 5)" in text and "sweep, one cell" in text
    assert "jaxprobe run (run_config)" in text and "checkpoint_min_seconds = 0" in text and "breast-cancer" in text and "against the limit with its files" in text
    with pytest.raises(SystemExit, match="--dim must be a positive integer"):
        front_ends.main(["--quick", "--dim", "0", "--out", str(tmp_path)])
