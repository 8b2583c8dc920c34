"""``jaxprobe.bench.answer_speed`` at another probe dimension (``--dim``): its own files, its d in the record; how
its memory children measure a call."""

import json
import sys

import numpy as np
import pytest

from jaxprobe.bench import answer_speed


@pytest.mark.slow  # ~30 s: section 1 at C = 16 on a d = 3 probe, quick sizes (CI's slow pass runs it)
def test_answer_speed_at_another_dimension_writes_its_own_record(tmp_path, monkeypatch):
    monkeypatch.setattr(answer_speed, "DIM", answer_speed.DIM)  # --dim sets the module's d: restored after
    answer_speed.main(["--quick", "--dim", "3", "--chains", "16", "--sections", "mala", "--no-memory",
                       "--repetitions", "2", "--out", str(tmp_path)])
    record = json.loads((tmp_path / "answer_speed.d3.json").read_text())
    assert record["config"]["dim"] == 3 and record["keep_draws"] is None
    (row,) = [row for row in record["mala"] if row["thin"] == 1]
    assert row["num_chains"] == 16 and row["ratio"] > 0 and row["same_work"]["identical_draw_fraction"] == 1.0
    assert "MLP probe 3→" in (tmp_path / "answer_speed.d3.md").read_text()
    assert not (tmp_path / "answer_speed.json").exists()  # the default d's record is not overwritten
    # the phase timers are gone with main(): this process's sample() is the engine's own again
    assert not any(getattr(getattr(answer_speed.api, name), "_answer_speed_timer", False)
                   for name in answer_speed.PHASES)
    with pytest.raises(SystemExit, match="--dim must be a positive integer"):
        answer_speed.main(["--quick", "--dim", "0", "--out", str(tmp_path)])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM and clear_refs are Linux's")
def test_memory_children_measure_what_a_call_adds_from_a_reset_peak():
    """The memory rows' rise: after ``_reset_peak`` the peak is the resident size, and 64 MB written raise it by
    about 64 MB (freed again, they do not lower it)."""
    if not answer_speed._reset_peak():
        pytest.skip("the peak cannot be reset here (not glibc, or /proc/self/clear_refs not writable)")
    before = answer_speed._status_kb("VmRSS")
    assert abs(answer_speed._status_kb("VmHWM") - before) < 4096
    block = np.ones(64 * 2 ** 20, np.uint8)  # every page written
    del block
    rise_mb = (answer_speed._status_kb("VmHWM") - before) / 1024
    assert 60 < rise_mb < 80
