"""The scale-out benchmarks run: ``python -m jaxprobe.bench.gpu --cpu-tiny``, ``jaxprobe.bench.compile --quick`` and
``jaxprobe.bench.sweep`` at a tiny size.

Each runs in a subprocess (they set JAX's global configuration and empty its caches) writing into a temporary
folder through ``$JAXPROBE_BENCH_RESULTS``; the test checks that the JSON has every field and that its numbers
are finite and positive. The figures themselves are not checked (tiny sizes, a shared machine).
"""

import json
import math
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(script: str, arguments: list[str], out, timeout: int) -> dict:
    name = os.path.splitext(script)[0]
    env = dict(os.environ, JAXPROBE_BENCH_RESULTS=str(out))
    completed = subprocess.run([sys.executable, "-m", f"jaxprobe.bench.{name}", *arguments], cwd=out,
                               env=env, capture_output=True, text=True, timeout=timeout)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert (out / f"{name}.md").read_text().startswith("# ")
    return json.loads((out / f"{name}.json").read_text())


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


@pytest.mark.slow  # ~15 s of subprocess benchmark (CI's slow pass runs it)
def test_gpu_benchmark_tiny_mode_records_every_field(tmp_path):
    result = _run("gpu.py", ["--cpu-tiny"], tmp_path, timeout=300)
    assert result["tiny"] is True
    assert isinstance(result["device"], str) and result["device"]
    assert result["platform"] in ("cpu", "gpu", "cuda", "rocm", "tpu")
    rows = result["throughput"]["rows"]
    for name in ("limit", "mala", "chees", "smc"):
        assert rows[name], f"no {name} row"
        for row in rows[name]:
            assert row["num_chains"] >= 1
            for field in ("seconds", "chain_steps_per_second", "gradient_evaluations_per_second", "ratio_to_limit"):
                assert _positive(row[field]), (name, field, row.get(field))
            assert "device_memory" in row  # None on CPU (no statistics), a dict of byte counts on a GPU
    for name in ("mala", "chees"):
        assert all(row["program_bytes"] is None or _positive(row["program_bytes"]) for row in rows[name])
    assert rows["smc"][0]["stages"] >= 1
    assert result["numerics"] in (None, "reproducible", "fast")
    if result["numerics"] is not None:  # the engine has the numerics switch: MALA is timed in the other mode too
        assert [row["numerics"] for row in rows["mala"]] == [result["numerics"]] * len(rows["mala"])
        assert rows["mala_other_numerics"] and rows["mala_other_numerics"][0]["numerics"] != result["numerics"]
        assert _positive(rows["mala_other_numerics"][0]["ratio_to_limit"])
    fit = result["largest_fit"]
    assert _positive(fit["largest_num_chains"]) and fit["stopped_by"]
    assert fit["largest_num_chains"] >= max(row["num_chains"] for row in rows["mala"])
    sampled = result["sample"]  # what users call: sample(keep_draws=False) against the limit
    assert sampled and all(_positive(r["ratio_to_limit"]) and _positive(r["chain_steps_per_second"]) for r in sampled)
    assert all(0.0 < r["acceptance"] <= 1.0 for r in sampled)
    sweep = result["sweep"]
    assert sweep["cells"] >= 2 and sweep["statuses"] and "error" not in sweep["statuses"]
    for field in ("seconds", "chain_steps_per_second", "num_compilations"):
        assert _positive(sweep[field]), field
    assert "device_memory_end" in result and _positive(result["total_seconds"])


@pytest.mark.slow  # 13 s: a benchmark script end to end
def test_compile_benchmark_quick_mode_records_every_field(tmp_path):
    result = _run("compile.py", ["--quick", "--samplers", "mala"], tmp_path, timeout=600)
    assert result["quick"] is True and result["samplers"] == ["mala"]
    cell = result["targets"]["gaussian"]["samplers"]["mala"]
    for library in ("jaxprobe", "blackjax"):
        row = cell[library]
        for field in ("first_seconds", "warm_seconds", "compile_seconds", "programs"):
            assert _positive(row[field]), (library, field, row.get(field))
        assert row["program_list"] and row["runs"]
        assert row["first_seconds"] > row["warm_seconds"]  # the first call compiled, the second did not
        assert row["warm_programs"] == 0
    assert _positive(cell["ratio"]) and isinstance(cell["target_met"], bool)
    assert "_run_chunk" in cell["jaxprobe"]["program_list"]  # the engine's sampling program, by name


@pytest.mark.slow  # ~30 s: a benchmark script end to end
def test_sweep_benchmark_records_both_arms_and_every_cells_status(tmp_path):
    """The documented sweep benchmark runs at any size: cells that do not converge are counted, not fatal (its
    coldest cells never converge in the steps it takes: an assertion on every cell's status failed every run)."""
    result = _run("sweep.py", ["--cells", "2", "--chains", "8", "--warmup", "10", "--samples", "10"], tmp_path,
                  timeout=600)
    assert len(result["mean_probe_batched"]) == len(result["mean_probe_separate"]) == 2
    for arm in ("batched", "separate"):
        assert _positive(result[arm]["seconds"]) and result[arm]["compilations"] >= 1, arm
        assert sum(result[f"statuses_{arm}"].values()) == 2
        assert set(result[f"statuses_{arm}"]) <= {"ok", "unconverged"}
    assert result["batched"]["compilations"] < result["separate"]["compilations"]   # one program for the grid
