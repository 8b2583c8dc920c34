#!/usr/bin/env python
"""XLA's CPU cliff and what jaxprobe does about it: one vmap against :func:`jaxprobe._pointwise.map_points`, in
one process, with XLA's flag beside them in a child process.

On the CPU (jaxlib 0.10.2) XLA hands a reduction fused with what feeds it to YNNPACK, which falls off a cliff past
about 2^24 values in between (jax-ml/jax#37465, openxla/xla#46351). jaxprobe evaluates every function of one point
at all chains through ``map_points``, which stays one vmap where no intermediate is that large and otherwise maps
over contiguous batches on a CPU.

Task: Figure 2's cubic SVM (circles, 600 points, seed 0; 443 support vectors) imported with ``from_sklearn``, its
``fixed_label`` probe for class 1 (``from_logits=True``), ``log p(x) = −G(x)/τ − ½|x|²`` (τ = 0.05), float32,
points drawn from N(0, I).

- **Evaluations** over N points (30,000: below the cliff; 45,000; 65,536): the probe's value and the log
  density's value and gradient (what MALA's step computes), each as ``jit(vmap(f))`` (one vmap, the code before
  map_points), as ``jit(map_points(f))`` (as shipped) and as one vmap in a child process run with
  ``XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=-reduce`` (YNNPACK's reduction fusion off). Times are of the
  second and later calls (minimum over the repetitions, compile excluded); the largest relative difference between
  one vmap's and map_points's outputs is recorded.
- **End to end**: ``jaxprobe.sample(..., sampler="mala", num_chains=C)`` at C = 65,536 (first call, then the
  second with another key), as shipped and with map_points's batching turned off (``MAX_BATCHED_VALUES`` raised
  past any intermediate: every evaluation one vmap, as before map_points).

Target: map_points within 1.2x of the better of one vmap and XLA's flag at every size (it removes the cliff without
costing where there is none).

    python -m jaxprobe.bench.cpu_cliff [--quick [--record]] [--out DIR] [--repetitions K]

``--quick`` uses small sizes (mostly compiling; figures not meaningful) with batching forced at 512 points, and
writes into a scratch folder unless ``--record``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import jaxprobe
from jaxprobe import _pointwise, datasets, probes
from jaxprobe.bench import results_dir, write_results
from jaxprobe.benchmark.report import environment
from jaxprobe.models.sklearn import from_sklearn

FLAG = "--xla_cpu_experimental_ynn_fusion_type=-reduce"
TEMPERATURE = 0.05
FULL = {"points": [30_000, 45_000, 65_536], "chains": 65_536, "warmup": 5, "samples": 5, "repetitions": 3,
        "max_values": None, "min_points": None}
QUICK = {"points": [1_024], "chains": 512, "warmup": 3, "samples": 3, "repetitions": 1,
         "max_values": 512 * 443, "min_points": 0}
TARGET_RATIO = 1.2
OPERATIONS = ("probe value", "log density value and gradient")


def cubic_svm_probe() -> tuple[probes.Probe, int]:
    """Figure 2's cubic SVM (tests/test_generation_figure2.py, jaxprobe.bench.smc), its fixed_label probe for class
    1 (the decision function read as the logit, as in Fig. 2), and its number of support vectors."""
    from sklearn.svm import SVC

    train, _ = datasets.circles(600, noise=0.1, factor=0.4, seed=0).train_test_split(0)
    cubic = SVC(kernel="poly", degree=3).fit(train.x, train.y)
    return probes.fixed_label(from_sklearn(cubic), 1, from_logits=True), int(cubic.support_vectors_.shape[0])


def operations(probe):
    """{name: f(x) of one point}: what the table times."""
    def logdensity(x):
        return -probe(x) / TEMPERATURE - 0.5 * jnp.sum(x * x)

    return {"probe value": probe, "log density value and gradient": jax.value_and_grad(logdensity)}


def _time(call, points, repetitions: int) -> tuple[float, object]:
    """Minimum over ``repetitions`` of a call after the first (which compiles), and the output."""
    out = jax.block_until_ready(call(points))
    best = math.inf
    for _ in range(repetitions):
        start = time.perf_counter()
        out = jax.block_until_ready(call(points))
        best = min(best, time.perf_counter() - start)
    return best, out


def _points(num_points: int) -> jax.Array:
    return jax.random.normal(jax.random.key(1), (num_points, 2))


def evaluations(sizes: dict, mode: str) -> list[dict]:
    """Rows of the evaluation table for ``mode``: "one vmap" or "map_points" (this process) or "flag" (run in a
    child process with FLAG set, as one vmap)."""
    probe, _ = cubic_svm_probe()
    rows = []
    for num_points in sizes["points"]:
        points = _points(num_points)
        for name, fn in operations(probe).items():
            if mode == "map_points":
                call = jax.jit(lambda p, fn=fn: _pointwise.map_points(fn, p, sizes["max_values"], sizes["min_points"]))
                plan = _pointwise.batch_plan(fn, points, sizes["max_values"], sizes["min_points"])
            else:
                call, plan = jax.jit(jax.vmap(fn)), None
            seconds, out = _time(call, points, sizes["repetitions"])
            row = {"points": num_points, "operation": name, "mode": mode, "seconds": seconds,
                   "batches": None if plan is None else {"num_batches": plan[0], "batch_size": plan[1]}}
            if mode == "map_points":  # the same numbers as one vmap (float rounding apart)
                reference = jax.jit(jax.vmap(fn))(points)
                row["max_relative_difference"] = max(  # normwise: |a − b|∞ / |b|∞, per output
                    float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b)))
                    for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(reference)))
            rows.append(row)
    return rows


def flag_rows(sizes: dict) -> list[dict] | str:
    """The evaluation rows with XLA's flag, from a child process (XLA reads its flags once per process)."""
    with tempfile.TemporaryDirectory() as scratch:
        spec = os.path.join(scratch, "spec.json")
        with open(spec, "w") as fh:
            json.dump(sizes, fh)
        env = dict(os.environ, XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " " + FLAG).strip(), JAX_PLATFORMS="cpu")
        done = subprocess.run([sys.executable, "-m", "jaxprobe.bench.cpu_cliff", "--child-flag", spec],
                              capture_output=True, text=True, env=env)
        if done.returncode != 0:
            return f"the child process failed ({done.returncode}): {done.stderr[-2000:]}"
        return json.loads(done.stdout.strip().splitlines()[-1])


def end_to_end(sizes: dict, batching: bool) -> dict:
    """``jaxprobe.sample`` with MALA at ``sizes["chains"]`` chains: first and second call, as shipped
    (``batching``) or with every evaluation one vmap."""
    probe, _ = cubic_svm_probe()

    def logdensity(x):  # a new function per call of end_to_end: its programs are compiled afresh
        return -probe(x) / TEMPERATURE - 0.5 * jnp.sum(x * x)

    saved = (_pointwise.MAX_BATCHED_VALUES, _pointwise.MIN_POINTS_TO_BATCH)
    if batching:
        _pointwise.MAX_BATCHED_VALUES = sizes["max_values"] or saved[0]
        _pointwise.MIN_POINTS_TO_BATCH = saved[1] if sizes["min_points"] is None else sizes["min_points"]
    else:
        _pointwise.MAX_BATCHED_VALUES = 2**62
    try:
        times = []
        for seed in (0, 1):
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a 5-step run has not converged, and says so: not what is timed
                samples = jaxprobe.sample(jax.random.key(seed), logdensity, _points(sizes["chains"]), sampler="mala",
                                          num_warmup=sizes["warmup"], num_samples=sizes["samples"], progress=False)
            jax.block_until_ready(samples.positions)
            times.append(time.perf_counter() - start)
    finally:
        _pointwise.MAX_BATCHED_VALUES, _pointwise.MIN_POINTS_TO_BATCH = saved
    return {"mode": "map_points" if batching else "one vmap", "chains": sizes["chains"],
            "first_call_seconds": times[0], "second_call_seconds": times[1],
            "finite": bool(np.all(np.isfinite(np.asarray(samples.positions))))}


def summarize(rows: list[dict]) -> list[dict]:
    """Per (points, operation): each mode's seconds, map_points's ratio to the better of one vmap and the flag, and
    whether it is within TARGET_RATIO."""
    table = []
    for num_points in sorted({row["points"] for row in rows}):
        for name in OPERATIONS:
            seconds = {row["mode"]: row["seconds"] for row in rows
                       if row["points"] == num_points and row["operation"] == name}
            others = [seconds[mode] for mode in ("one vmap", "flag") if mode in seconds]
            ratio = seconds["map_points"] / min(others)
            table.append({"points": num_points, "operation": name, **{f"{m} seconds": s for m, s in seconds.items()},
                          "one vmap / map_points": seconds["one vmap"] / seconds["map_points"],
                          "map_points / best other": ratio, "within_target": ratio <= TARGET_RATIO})
    return table


def markdown(result: dict) -> str:
    lines = [f"# XLA's CPU cliff: one vmap, map_points, XLA's flag ({result['date']})", "",
             f"{result['machine']['cpu_model']}, {result['machine']['cpu_count']} CPUs; jax "
             f"{result['versions']['jax']}, jaxlib {result['versions']['jaxlib']}; commit {result['commit']}; load "
             f"average at the start {result['load_average']}.", "",
             f"Figure 2's cubic SVM ({result['support_vectors']} support vectors), `fixed_label` probe, τ = "
             f"{TEMPERATURE}, float32. Seconds per call after the first (minimum of {result['settings']['repetitions']});"
             f" flag: `XLA_FLAGS={FLAG}`, one vmap, in a child process. Target: map_points ≤ {TARGET_RATIO}× the "
             "better of the other two.", "",
             "| points | evaluation | one vmap | flag | map_points (batches) | one vmap / map_points | map_points / "
             "best other | max rel. difference |", "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    detail = {(r["points"], r["operation"]): r for r in result["evaluations"] if r["mode"] == "map_points"}
    for row in result["table"]:
        mp = detail[(row["points"], row["operation"])]
        batches = "1 vmap" if mp["batches"] is None else f"{mp['batches']['num_batches']} × {mp['batches']['batch_size']}"
        flag = row.get("flag seconds")
        lines.append(f"| {row['points']:,} | {row['operation']} | {row['one vmap seconds']:.3f} | "
                     f"{'—' if flag is None else f'{flag:.3f}'} | {row['map_points seconds']:.3f} ({batches}) | "
                     f"{row['one vmap / map_points']:.1f} | {row['map_points / best other']:.2f}"
                     f"{'' if row['within_target'] else ' (missed)'} | {mp['max_relative_difference']:.1e} |")
    if isinstance(result["flag"], str):
        lines += ["", f"The flag's child process: {result['flag']}"]
    lines += ["", f"End to end: `jaxprobe.sample(..., sampler=\"mala\", num_chains={result['settings']['chains']:,}, "
              f"num_warmup={result['settings']['warmup']}, num_samples={result['settings']['samples']})`.", "",
              "| evaluations | first call (s) | second call (s) | finite |", "| --- | ---: | ---: | --- |"]
    for row in result["end_to_end"]:
        lines.append(f"| {row['mode']} | {row['first_call_seconds']:.1f} | {row['second_call_seconds']:.1f} | "
                     f"{row['finite']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (figures not meaningful)")
    parser.add_argument("--record", action="store_true", help="with --quick: write into --out all the same")
    parser.add_argument("--out", default=None)
    parser.add_argument("--repetitions", type=int, default=None)
    parser.add_argument("--child-flag", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_flag:  # the child: one vmap with XLA's flag set by the parent
        with open(args.child_flag) as fh:
            print(json.dumps(evaluations(json.load(fh), "flag")))
        return None
    sizes = dict(QUICK if args.quick else FULL)
    if args.repetitions:
        sizes["repetitions"] = args.repetitions
    out = args.out or (results_dir() if not args.quick or args.record else tempfile.mkdtemp(prefix="cpu_cliff-"))
    command = " ".join(["python -m jaxprobe.bench.cpu_cliff", *(sys.argv[1:] if argv is None else argv)])
    result = {"command": command, "date": datetime.date.today().isoformat(), **environment(sizes),
              "load_average": round(os.getloadavg()[0], 1), "support_vectors": cubic_svm_probe()[1],
              "target_ratio": TARGET_RATIO}
    rows = evaluations(sizes, "one vmap") + evaluations(sizes, "map_points")
    flag = flag_rows(sizes)
    result["flag"] = flag if isinstance(flag, str) else "ran"
    rows += [] if isinstance(flag, str) else flag
    result["evaluations"], result["table"] = rows, summarize(rows)
    result["end_to_end"] = [end_to_end(sizes, batching=False), end_to_end(sizes, batching=True)]
    write_results(out, "cpu_cliff", result, markdown(result))
    print(markdown(result))
    print(f"written to {out}")
    return result


if __name__ == "__main__":
    main()
