#!/usr/bin/env python
"""Peak resident memory of a whole ``jaxprobe.sweep`` against the draws it keeps (issue 23's sweep rows).

Task: the prediction-risky probe of a fixed random MLP with d = 10 inputs (10 → 32 → 1, tanh, sigmoid output),
``G(x) = (f(x) − 0.5)²``, N(0, I) prior, MALA, float32; the grid is ``--cells`` temperatures log-spaced in
[1e-2, 1], every cell ``--chains`` chains × ``--samples`` kept draws after ``--warmup`` warmup steps, all cells in
one batch (the default ``cells_per_batch``). Each figure is one fresh child process (``ru_maxrss`` at its end,
through a small launcher so the child does not inherit this process's peak):

- ``keep``: ``sweep(..., keep_samples=True)``: every cell's draws in the result;
- ``no_samples``: the same sweep with ``keep_samples=False`` (no ``out``): the cells' programs keep no draws;
- ``no_samples_small``: ``keep_samples=False`` with 16 cells.

Targets: ``keep`` − ``no_samples`` ≤ 1.25 × the kept draws' bytes (cells × C × N × (d + 2) × 4: positions, log
density and G(x)); ``no_samples`` within 200 MB of ``no_samples_small``.

    python -m jaxprobe.bench.sweep_memory [--cells 256] [--chains 256] [--samples 200] [--warmup 100]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import subprocess
import sys

from jaxprobe.bench import results_dir


MB = 1024.0 ** 2
DIM = 10
HIDDEN = 32
DRAWS_TARGET = 1.25
SMALL_SWEEP_TARGET_MB = 200.0
LAUNCHER = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"


def child_main(spec: dict) -> None:
    """One sweep in this fresh process, then its peak resident memory."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxprobe

    keys = jax.random.split(jax.random.key(0), 2)
    w1 = jax.random.normal(keys[0], (DIM, HIDDEN)) / np.sqrt(DIM)
    w2 = jax.random.normal(keys[1], (HIDDEN,)) / np.sqrt(HIDDEN)

    def risky(x):
        return (jax.nn.sigmoid(jnp.tanh(x @ w1) @ w2) - 0.5) ** 2

    probe = jaxprobe.probes.Probe(risky, "prediction_risky")  # a Probe: a bare function would be build_probe()

    temperatures = np.geomspace(1e-2, 1.0, spec["cells"]).tolist()
    result = jaxprobe.sweep(0, probe, {"temperature": temperatures}, num_chains=spec["chains"],
                            num_samples=spec["samples"], num_warmup=spec["warmup"], dim=DIM,
                            prior=jaxprobe.priors.StandardNormal(), keep_samples=spec["keep_samples"],
                            progress=False, convergence="ignore")
    failed = [row["error"] for row in result.rows if row["status"] == "error"]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(result.rows)} cells failed, e.g. {failed[0]}")
    kept = sum(s.positions.nbytes for s in result.samples if s is not None) if spec["keep_samples"] else 0
    print("RESULT " + json.dumps({"ru_maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                                  "positions_bytes": kept, "rows": len(result.rows)}), flush=True)


def run_child(spec: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", LAUNCHER, sys.executable, "-m", "jaxprobe.bench.sweep_memory", "--child",
                           json.dumps(spec)], capture_output=True, text=True, timeout=3600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        raise RuntimeError(f"child {spec} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=256)
    parser.add_argument("--small-cells", type=int, default=16)
    parser.add_argument("--chains", type=int, default=256)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--out", default=results_dir())
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child_main(json.loads(args.child))
        return {}
    from jaxprobe.bench import throughput  # machine and versions helpers, atomic writes

    base = {"chains": args.chains, "samples": args.samples, "warmup": args.warmup}
    figures = {}
    for name, spec in (("keep", {"cells": args.cells, "keep_samples": True}),
                       ("no_samples", {"cells": args.cells, "keep_samples": False}),
                       ("no_samples_small", {"cells": args.small_cells, "keep_samples": False})):
        figures[name] = run_child(base | spec)
        throughput.log(f"{name}: peak {figures[name]['ru_maxrss_kb'] / 1024:.0f} MB")
    draws_bytes = args.cells * args.chains * args.samples * (DIM + 2) * 4
    extra = (figures["keep"]["ru_maxrss_kb"] - figures["no_samples"]["ru_maxrss_kb"]) * 1024.0
    small_difference_mb = (figures["no_samples"]["ru_maxrss_kb"] - figures["no_samples_small"]["ru_maxrss_kb"]) / 1024
    results = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "machine": throughput.machine(), "versions": throughput.versions(), "load_average": list(os.getloadavg()),
        "config": vars(args) | {"dim": DIM, "hidden": HIDDEN}, "figures": figures, "draws_bytes": draws_bytes,
        "draws_ratio": extra / draws_bytes, "draws_pass": extra / draws_bytes <= DRAWS_TARGET,
        "small_difference_mb": small_difference_mb, "small_pass": small_difference_mb <= SMALL_SWEEP_TARGET_MB,
    }
    peak = {name: figure["ru_maxrss_kb"] / 1024 for name, figure in figures.items()}
    table = "\n".join([
        "# Sweep memory: peak resident memory against the kept draws", "",
        f"{results['date']} · {results['machine']['cpu_model']} ({results['machine']['cpu_count']} cores) · "
        f"jax {results['versions']['jax']} · load average {results['load_average'][0]:.2f}", "",
        f"`jaxprobe.sweep` over {args.cells} temperatures × {args.chains} chains × {args.samples} kept draws "
        f"({args.warmup} warmup), d = {DIM} MLP probe, MALA, float32, all cells in one batch; one fresh process "
        "per figure (`ru_maxrss`).", "",
        "| sweep | peak MB |", "|---|---:|",
        f"| {args.cells} cells, `keep_samples=True` | {peak['keep']:.0f} |",
        f"| {args.cells} cells, `keep_samples=False` | {peak['no_samples']:.0f} |",
        f"| {args.small_cells} cells, `keep_samples=False` | {peak['no_samples_small']:.0f} |", "",
        f"- Positions held by the result: {figures['keep']['positions_bytes'] / MB:.0f} MB.",
        f"- Kept draws (positions, log density, G(x)): {draws_bytes / MB:.0f} MB; kept − not kept = "
        f"{extra / MB:.0f} MB = **{results['draws_ratio']:.2f}×** the draws (target ≤ {DRAWS_TARGET}×): "
        f"**{'PASS' if results['draws_pass'] else 'FAIL'}**.",
        f"- `keep_samples=False`, {args.cells} cells vs {args.small_cells}: **{small_difference_mb:+.0f} MB** "
        f"(target ≤ {SMALL_SWEEP_TARGET_MB:.0f} MB): **{'PASS' if results['small_pass'] else 'FAIL'}**.", "",
        f"Command: `{results['command']}`", ""])
    os.makedirs(args.out, exist_ok=True)
    throughput.write_atomically(os.path.join(args.out, "sweep_memory.json"), json.dumps(results, indent=2) + "\n")
    throughput.write_atomically(os.path.join(args.out, "sweep_memory.md"), table)
    print(table)
    return results


if __name__ == "__main__":
    main()
