"""Throughput on one accelerator: MALA, ChEES and SMC chain-steps/s against the limit, from 1 to 2^20 chains.

Target (as ``throughput.py``): the prediction-risky probe of a fixed random MLP (30 → 64 → 64 → 1, tanh hidden,
sigmoid output, weights N(0, 1/fan_in) from a seeded key), ``G(x) = (f(x) − ½)²``,
``log p(x) = −G(x)/τ − ½|x|²`` (τ = 0.01, :func:`jaxprobe.gibbs` with a standard-normal prior), float32, D = 30.

For every chain count C in 1, 4, 16, …, 2^20 (powers of 4):

- *limit*: one jitted ``lax.scan`` of S steps doing only one vmapped ``value_and_grad`` per chain per step plus
  the unadjusted Langevin update ``x ← x + ε∇ + √(2ε)ξ`` (ξ: one batched ``jax.random.normal`` per step):
  nothing
  a gradient-based sampler can skip;
- *MALA* and *ChEES*: the engine's functional core, ``jaxprobe.engine.core.run`` (kernels from the registry,
  ``make_kernel``), S transitions per call keeping one draw (``thin=S``), fixed parameters (ε = 0.05; ChEES: mean
  trajectory of 10 leapfrog steps, jittered, unit mass matrix), jitted the same way as the limit;
- *SMC*: a whole adaptive tempered SMC run from the standard-normal reference to the target, C particles (the SMC
  kernel's ``start``: MALA moves, 10 per stage, target ESS 0.5), timed on its second call (the first compiles).

Each program is called in a loop of k calls (k calibrated so that a loop lasts about 0.3 s), its state handed from
call to call; loops of the limit, MALA and ChEES alternate, 3 repetitions, minimum time. Reported: chain-steps/s
(C × transitions / s), gradient evaluations/s (the engine's own count), and ratio = seconds per gradient
evaluation / the limit's seconds per chain-step at the same C (MALA: one gradient per step, so its time ratio;
1.0 = as fast as the limit). Then: the largest C that fits (MALA, C doubling past 2^20 until the device runs out of
memory: caught, recorded, not fatal), a 64-cell × 4096-chain ``jaxprobe.sweep`` (a temperature grid, MALA,
100 warmup + 100 draws), and memory: each program's own size (``Compiled.memory_analysis()``: arguments +
outputs + temporaries) and the device's peak (``device.memory_stats()["peak_bytes_in_use"]``, None where the
platform has no statistics, e.g. CPU).

    python -m jaxprobe.bench.gpu               # the full run (below)
    python -m jaxprobe.bench.gpu --cpu-tiny    # tiny sizes, under a minute on a CPU (the test runs it)

The full run has a 420 s budget for the table (rows past it are skipped and listed), then the largest-C search
and the sweep: meant to end within 8 minutes on one GPU (not yet timed on one). Without an accelerator the full
command runs the tiny sizes (``--full-on-cpu`` to force the full ones).

Writes ``results/gpu.{json,md}`` (or ``$JAXPROBE_BENCH_RESULTS``; ``--cpu-tiny`` / ``--quick`` to a scratch folder
unless ``--record`` or ``--out``). Results on a CPU are not GPU figures: the file names the device.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gc
import json
import math
import os
import platform
import sys
import tempfile
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.bench import results_dir
from jaxprobe.benchmark.compare import limit_step
from jaxprobe.benchmark.report import library_versions, machine
from jaxprobe.benchmark.targets import mlp_probe
import jaxprobe
from jaxprobe._io import atomic_write
from jaxprobe.engine import core
from jaxprobe.engine.api import make_kernel

try:  # the numerics switch (jaxprobe.engine.numerics): "fast" by default on GPUs, "reproducible" on CPUs
    from jaxprobe.engine.numerics import default_numerics, numerics_of, with_numerics
except ImportError:  # an engine without the switch: its kernels' own arithmetic
    default_numerics = numerics_of = with_numerics = None

# `jaxprobe bench` points this at a scratch folder unless --record is given.
RESULTS = results_dir()

DIM, HIDDEN, TEMPERATURE, STEP_SIZE = 30, 64, 0.01, 0.05
CHEES_LEAPFROG_STEPS = 10.0
SMC_OPTIONS = {"num_mcmc_steps": 10, "target_ess": 0.5}


@dataclasses.dataclass(frozen=True)
class Config:
    chains: tuple[int, ...]  # C of the limit / MALA / ChEES rows
    smc_chains: tuple[int, ...]  # C of the SMC rows (SMC needs at least 4 particles)
    steps: dict  # transitions per program call, by row
    loop_seconds: float  # a timed loop of calls lasts about this long
    max_calls: int
    repetitions: int
    search_up_to: int  # largest C tried when looking for the largest C that fits
    search_steps: int
    sweep_cells: int
    sweep_chains: int
    sweep_warmup: int
    sweep_samples: int
    time_budget: float  # seconds: rows past it are skipped (recorded as such), so the run ends in time


FULL = Config(chains=tuple(4**k for k in range(11)), smc_chains=tuple(4**k for k in range(2, 11)),
              steps={"limit": 100, "mala": 100, "chees": 10}, loop_seconds=0.3, max_calls=200, repetitions=3,
              search_up_to=2**27, search_steps=5, sweep_cells=64, sweep_chains=4096, sweep_warmup=100,
              sweep_samples=100, time_budget=420.0)
# Tiny: every part once, at sizes that compile fast (the sweep's cells sample with a fixed step size, no warmup).
TINY = Config(chains=(4,), smc_chains=(4,), steps={"limit": 10, "mala": 10, "chees": 2}, loop_seconds=0.0,
              max_calls=2, repetitions=1, search_up_to=8, search_steps=2, sweep_cells=2, sweep_chains=4,
              sweep_warmup=0, sweep_samples=10, time_budget=50.0)


def machine_text() -> str:
    """The machine in one line, from :func:`jaxprobe.benchmark.report.machine` (the one record of it)."""
    record = machine()
    model = record["cpu_model"] if record["cpu_model"] != "unknown" else (record["processor"] or platform.machine())
    return f"{model}, {record['cpu_count']} CPU cores, {record['platform']}"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ the target


def make_target(seed: int = 0):
    """``(probe, G, logdensity)`` of one ``(D,)`` position: :func:`jaxprobe.benchmark.targets.mlp_probe` at
    d = ``DIM``."""
    _, probe, G = mlp_probe(DIM, HIDDEN, seed)
    return probe, G, jaxprobe.gibbs(G, TEMPERATURE, jaxprobe.priors.StandardNormal())


def initial_positions(num_chains: int) -> jax.Array:
    """Draws of the standard-normal prior, made on the device (the same values for every row of this C)."""
    return jax.random.normal(jax.random.key(1), (num_chains, DIM), jnp.float32)


def standard_normal_logpdf(x):
    return -0.5 * jnp.sum(x * x) - 0.5 * x.shape[-1] * math.log(2 * math.pi)


# ------------------------------------------------------------------ memory


def device_memory(device) -> dict | None:
    """The device's memory statistics (bytes), or None where the platform keeps none (CPU)."""
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - not every backend implements it
        return None
    if not stats:
        return None
    return {key: int(stats[key]) for key in ("peak_bytes_in_use", "bytes_in_use", "bytes_limit") if key in stats}


def program_bytes(compiled) -> int | None:
    """Arguments + outputs + temporaries of a compiled program, less donated (aliased) buffers."""
    try:
        analysis = compiled.memory_analysis()
    except Exception:  # noqa: BLE001
        return None
    if analysis is None:
        return None
    return int(analysis.argument_size_in_bytes + analysis.output_size_in_bytes + analysis.temp_size_in_bytes
               - analysis.alias_size_in_bytes)


def is_out_of_memory(error: BaseException) -> bool:
    text = f"{type(error).__name__}: {error}"
    return any(mark in text for mark in ("RESOURCE_EXHAUSTED", "Out of memory", "out of memory", "OOM",
                                         "Failed to allocate", "MemoryError"))


# ------------------------------------------------------------------ the programs


class Row:
    """One program of C chains: ``advance(state) -> state`` runs ``steps`` transitions (compiled ahead of time)."""

    def __init__(self, name, num_chains, steps, function, state, gradients_per_call=None):
        self.name, self.num_chains, self.steps = name, num_chains, steps
        tick = time.perf_counter()
        self.compiled = jax.jit(function, donate_argnums=0).lower(state).compile()
        self.compile_seconds = time.perf_counter() - tick
        self.bytes = program_bytes(self.compiled)
        self.state = state
        self.gradients_per_call = gradients_per_call  # None: read from the state (the engine's count)
        self.times, self.gradients = [], []
        self.calls = 1

    def loop(self, calls: int) -> float:
        start = time.perf_counter()
        for _ in range(calls):
            self.state = self.compiled(self.state)
        jax.block_until_ready(self.state)
        return time.perf_counter() - start


def limit_row(logdensity, num_chains, steps, x0):
    """The limit (:func:`jaxprobe.benchmark.compare.limit_step`, the one every harness times) as a Row: ``steps``
    of it per call, its step counter carried so that every call draws new noise."""
    limit = limit_step(logdensity, num_chains, DIM, STEP_SIZE)

    def advance(state):
        key, x, t0 = state
        x, _ = jax.lax.scan(lambda x, t: (limit(key, x, t), None), x, t0 + jnp.arange(steps))
        return key, x, t0 + steps

    return Row("limit", num_chains, steps, advance, (jax.random.key(2), x0, jnp.zeros((), jnp.int32)),
               gradients_per_call=steps * num_chains)


def kernel_for(name: str, numerics: str | None):
    """The registry's ``name`` kernel in the ``numerics`` mode (None: the kernel's own)."""
    kernel = make_kernel(name)
    if numerics is not None and with_numerics is not None:
        kernel = with_numerics(kernel, numerics)
    return kernel


def mode_of(kernel) -> str | None:
    return None if numerics_of is None else numerics_of(kernel).mode


def engine_row(name, logdensity, num_chains, steps, x0, numerics=None, label=None):
    """``core.run`` of the registry's ``name`` kernel: ``steps`` transitions per call, one kept draw."""
    kernel = kernel_for(name, numerics)
    extra = {"num_leapfrog_steps": CHEES_LEAPFROG_STEPS} if name == "chees" else {}
    parameters = core.default_parameters(kernel, num_chains, DIM, jnp.float32, step_size=STEP_SIZE, **extra)
    state = jax.jit(lambda x, p: core.init(kernel, logdensity, x, p))(x0, parameters)
    key = jax.random.key(3)

    def advance(carry):
        state, gradients = carry
        state, _, stats = core.run(key, state, kernel, logdensity, 1, steps)
        return state, gradients + jnp.sum(stats.num_gradient_evaluations.astype(jnp.float32))

    row = Row(label or name, num_chains, steps, advance, (state, jnp.zeros((), jnp.float32)))
    row.numerics = mode_of(kernel)
    return row


def gradients_of(row: Row) -> float:
    return float(row.state[1])


def time_rows(rows: list[Row], config: Config) -> None:
    """Calibrate k per row, then alternate the rows' loops (rotating order), keeping every time."""
    for row in rows:
        row.loop(1)  # first call: warm (the program is compiled already)
        if config.loop_seconds > 0:
            one = row.loop(1)
            row.calls = int(min(config.max_calls, max(1, math.ceil(config.loop_seconds / max(one, 1e-6)))))
        else:
            row.calls = config.max_calls
    for repetition in range(config.repetitions):
        shift = repetition % len(rows)
        for row in rows[shift:] + rows[:shift]:
            before = gradients_of(row) if row.gradients_per_call is None else 0.0
            row.times.append(row.loop(row.calls))
            row.gradients.append(row.gradients_per_call * row.calls if row.gradients_per_call is not None
                                 else gradients_of(row) - before)


def summarize(row: Row, limit_seconds_per_chain_step: float | None) -> dict:
    best = int(np.argmin(row.times))
    seconds = row.times[best]
    chain_steps = row.num_chains * row.steps * row.calls
    gradients = row.gradients[best]
    out = {"num_chains": row.num_chains, "steps_per_call": row.steps, "calls": row.calls, "seconds": seconds,
           "times": row.times, "chain_steps_per_second": chain_steps / seconds,
           "gradient_evaluations_per_second": gradients / seconds,
           "gradients_per_chain_step": gradients / chain_steps, "compile_seconds": row.compile_seconds,
           "program_bytes": row.bytes, "numerics": getattr(row, "numerics", None)}
    if limit_seconds_per_chain_step is not None:
        out["ratio_to_limit"] = (seconds / gradients) / limit_seconds_per_chain_step
    return out


def smc_run(logdensity, tilt, num_chains: int, numerics: str | None) -> dict:
    """A whole tempered SMC run of C particles (the SMC kernel's ``start``), timed on its second call."""
    smc = make_kernel("smc", dict(SMC_OPTIONS))
    if numerics is not None and with_numerics is not None:
        smc = with_numerics(smc, numerics)
    particles = jax.random.normal(jax.random.key(4), (num_chains, DIM), jnp.float32)

    def run(seed):
        result = smc.start(jax.random.key(seed), standard_normal_logpdf, tilt, particles)
        jax.block_until_ready(result.particles)
        return result

    tick = time.perf_counter()
    run(0)
    first = time.perf_counter() - tick
    tick = time.perf_counter()
    result = run(1)
    seconds = time.perf_counter() - tick
    stages = int(result.info.num_stages)
    gradients = float(np.sum(np.asarray(result.info.num_gradient_evaluations, np.float64)))
    chain_steps = num_chains * stages * SMC_OPTIONS["num_mcmc_steps"]
    return {"num_chains": num_chains, "seconds": seconds, "compile_seconds": max(0.0, first - seconds),
            "stages": stages, "reached_target": bool(result.info.reached_target),
            "chain_steps_per_second": chain_steps / seconds, "gradient_evaluations_per_second": gradients / seconds,
            "gradients_per_chain_step": gradients / chain_steps, "numerics": mode_of(smc)}


# ------------------------------------------------------------------ the parts


def throughput(config: Config, logdensity, tilt, device, deadline: float, numerics: str | None) -> dict:
    """The table: limit, MALA and ChEES (the platform's numerics), MALA in the other numerics mode, SMC."""
    other = None if numerics is None else ("reproducible" if numerics == "fast" else "fast")
    rows_out = {"limit": [], "mala": [], "chees": [], "smc": []}
    if other is not None:
        rows_out["mala_other_numerics"] = []
    skipped, failures = [], {}
    stopped = set()
    for num_chains in config.chains + tuple(c for c in config.smc_chains if c not in config.chains):
        if time.perf_counter() > deadline:
            skipped.append(num_chains)
            continue
        if num_chains in config.chains and "engine" not in stopped:
            try:  # each row its own starting positions (the same values): every program donates its state
                rows = [limit_row(logdensity, num_chains, config.steps["limit"], initial_positions(num_chains))]
                rows += [engine_row(name, logdensity, num_chains, config.steps[name], initial_positions(num_chains),
                                    numerics) for name in ("mala", "chees")]
                if other is not None:
                    rows.append(engine_row("mala", logdensity, num_chains, config.steps["mala"],
                                           initial_positions(num_chains), other, label="mala_other_numerics"))
                time_rows(rows, config)
                limit = summarize(rows[0], None)
                per_step = limit["seconds"] / (num_chains * rows[0].steps * rows[0].calls)
                limit["ratio_to_limit"] = 1.0
                rows_out["limit"].append(limit)
                for row in rows[1:]:
                    rows_out[row.name].append(summarize(row, per_step))
                memory = device_memory(device)
                for row in rows:
                    rows_out[row.name][-1]["device_memory"] = memory
                log(f"C={num_chains:>8}: limit {limit['chain_steps_per_second']:.3g}, "
                    f"mala {rows_out['mala'][-1]['chain_steps_per_second']:.3g} "
                    f"(ratio {rows_out['mala'][-1]['ratio_to_limit']:.2f}), chees "
                    f"{rows_out['chees'][-1]['chain_steps_per_second']:.3g} chain-steps/s "
                    f"(ratio {rows_out['chees'][-1]['ratio_to_limit']:.2f})")
            except Exception as error:  # noqa: BLE001 - out of memory stops this part, anything else is raised
                if not is_out_of_memory(error):
                    raise
                failures[f"engine C={num_chains}"] = f"{type(error).__name__}: {str(error)[:300]}"
                stopped.add("engine")
                log(f"C={num_chains}: out of memory ({str(error)[:120]}); larger C skipped")
            rows = None
            gc.collect()
        if num_chains in config.smc_chains and "smc" not in stopped and time.perf_counter() < deadline:
            try:
                row = smc_run(logdensity, tilt, num_chains, numerics)
                limit = next((r for r in rows_out["limit"] if r["num_chains"] == num_chains), None)
                if limit is not None:
                    per_step = limit["seconds"] / (num_chains * limit["steps_per_call"] * limit["calls"])
                    row["ratio_to_limit"] = (1.0 / row["gradient_evaluations_per_second"]) / per_step
                row["device_memory"] = device_memory(device)
                rows_out["smc"].append(row)
                log(f"C={num_chains:>8}: smc {row['chain_steps_per_second']:.3g} chain-steps/s, {row['stages']} "
                    f"stages" + (f" (ratio {row['ratio_to_limit']:.2f})" if "ratio_to_limit" in row else ""))
            except Exception as error:  # noqa: BLE001
                if not is_out_of_memory(error):
                    raise
                failures[f"smc C={num_chains}"] = f"{type(error).__name__}: {str(error)[:300]}"
                stopped.add("smc")
            gc.collect()
    return {"rows": rows_out, "skipped_for_time": skipped, "out_of_memory": failures}


def largest_fit(config: Config, logdensity, device, start: int, deadline: float, numerics: str | None) -> dict:
    """MALA with C doubling from ``start`` until the device runs out of memory (or ``search_up_to``)."""
    largest, tried, failure = None, [], None
    num_chains = start
    while num_chains <= config.search_up_to:
        if time.perf_counter() > deadline:
            failure = failure or "time budget reached"
            break
        try:
            row = engine_row("mala", logdensity, num_chains, config.search_steps, initial_positions(num_chains),
                             numerics)
            row.loop(1)
            seconds = row.loop(1)
            largest = num_chains
            tried.append({"num_chains": num_chains, "seconds_per_step": seconds / config.search_steps,
                          "chain_steps_per_second": num_chains * config.search_steps / seconds,
                          "program_bytes": row.bytes, "device_memory": device_memory(device)})
            log(f"fits: C={num_chains} ({tried[-1]['chain_steps_per_second']:.3g} chain-steps/s)")
            del row
        except Exception as error:  # noqa: BLE001
            if not is_out_of_memory(error):
                raise
            failure = f"C={num_chains}: {type(error).__name__}: {str(error)[:300]}"
            log(f"out of memory at C={num_chains}")
            break
        finally:
            gc.collect()
        num_chains *= 2
    return {"largest_num_chains": largest, "tried": tried, "stopped_by": failure or
            f"search limit C={config.search_up_to} reached"}


def sweep_part(config: Config, G, device) -> dict:
    """A ``config.sweep_cells``-cell temperature grid × ``config.sweep_chains`` chains through ``jaxprobe.sweep``."""
    from jaxprobe.probes import Probe

    temperatures = np.geomspace(1e-3, 1.0, config.sweep_cells).tolist()
    options = dict(num_chains=config.sweep_chains, num_samples=config.sweep_samples, num_warmup=config.sweep_warmup,
                   prior=jaxprobe.priors.StandardNormal(), dim=DIM, sampler="mala", progress=False,
                   keep_samples=False, convergence="ignore")
    if config.sweep_warmup == 0:
        options["step_size"] = STEP_SIZE
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tick = time.perf_counter()
        result = jaxprobe.sweep(jax.random.key(5), Probe(G, "risky"), {"temperature": temperatures}, **options)
        seconds = time.perf_counter() - tick
    statuses = sorted({row["status"] for row in result.rows})
    chain_steps = config.sweep_cells * config.sweep_chains * (config.sweep_warmup + config.sweep_samples)
    run_seconds = max(seconds - result.compile_seconds, 1e-9)
    return {"cells": config.sweep_cells, "chains_per_cell": config.sweep_chains, "num_warmup": config.sweep_warmup,
            "num_samples": config.sweep_samples, "seconds": seconds, "compile_seconds": result.compile_seconds,
            "num_compilations": result.num_compilations, "statuses": statuses,
            "chain_steps_per_second": chain_steps / run_seconds,
            "chain_steps_per_second_with_compile": chain_steps / seconds, "device_memory": device_memory(device)}


def sample_part(logdensity, device, chain_counts: tuple[int, ...], num_samples: int, repetitions: int) -> list[dict]:
    """What users call at GPU scale: ``jaxprobe.sample(sampler="mala", keep_draws=False, observables={"x": x})``
    end to end (fixed step size, no warmup, the streamed verdict included; second and later calls timed) against
    the limit doing the same ``num_samples`` transitions at the same C, alternating, minimum over repetitions.
    Target of issue 23: ≥ 5·10^8 chain-steps/s at C ≥ 2^20 within 1.10× the limit."""
    out = []
    for num_chains in chain_counts:
        try:
            limit = limit_row(logdensity, num_chains, num_samples, initial_positions(num_chains))
            x0 = initial_positions(num_chains)
            options = dict(sampler="mala", num_samples=num_samples, num_warmup=0, step_size=STEP_SIZE,
                           keep_draws=False, observables={"x": lambda x: x}, progress=False)

            def call(seed):
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    samples = jaxprobe.sample(seed, logdensity, x0, **options)
                    jax.block_until_ready(samples.observables["x"].mean)
                return samples, [str(w.message)[:200] for w in caught]

            tick = time.perf_counter()
            samples, caught = call(0)
            first = time.perf_counter() - tick
            limit.loop(1)
            sample_times, limit_times = [], []
            for repetition in range(repetitions):
                order = (0, 1) if repetition % 2 == 0 else (1, 0)
                for which in order:
                    if which == 0:
                        tick = time.perf_counter()
                        samples, caught = call(repetition + 1)
                        sample_times.append(time.perf_counter() - tick)
                    else:
                        limit_times.append(limit.loop(1))
            chain_steps = num_chains * num_samples
            row = {"num_chains": num_chains, "num_samples": num_samples, "first_call_seconds": first,
                   "sample_seconds": min(sample_times), "limit_seconds": min(limit_times),
                   "sample_times": sample_times, "limit_times": limit_times,
                   "chain_steps_per_second": chain_steps / min(sample_times),
                   "limit_chain_steps_per_second": chain_steps / min(limit_times),
                   "ratio_to_limit": min(sample_times) / min(limit_times),
                   "acceptance": float(np.mean(np.asarray(samples.acceptance_rate))),
                   "verdict_converged": bool(samples.verdict.converged), "warnings": caught,
                   "device_memory": device_memory(device)}
            out.append(row)
            log(f"sample(keep_draws=False) C={num_chains}: {row['chain_steps_per_second']:.3g} chain-steps/s, "
                f"ratio to the limit {row['ratio_to_limit']:.2f}")
            del limit, samples
        except Exception as error:  # noqa: BLE001 - out of memory ends this part, anything else is raised
            if not is_out_of_memory(error):
                raise
            out.append({"num_chains": num_chains, "out_of_memory": f"{type(error).__name__}: {str(error)[:300]}"})
            break
        finally:
            gc.collect()
    return out


# ------------------------------------------------------------------ report


def _g(value, fmt="{:.3g}"):
    return "–" if value is None else fmt.format(value)


def _bytes(value):
    if value is None:
        return "–"
    return f"{value / 2**20:,.0f} MiB" if value >= 2**20 else f"{value / 2**10:,.0f} KiB"


def markdown(result: dict) -> str:
    part = result["throughput"]
    lines = ["# One accelerator: MALA, ChEES and SMC against the limit", "",
             f"Command: `{result['command']}`; {result['date']}; device **{result['device']}** "
             f"({result['platform']}); {result['machine']}; jax {result['jax']}."
             + (" **--cpu-tiny: smoke run, not GPU figures**" if result["tiny"] else ""), "",
             "Target: risky probe of a fixed random 30→64→64→1 MLP, τ = 0.01, standard-normal prior, float32, "
             "D = 30. Chain-steps/s = C × transitions / s; ratio = seconds per gradient evaluation / the limit's "
             "seconds per chain-step (one vmapped value_and_grad + Langevin update) at the same C. Minimum over "
             f"{result['config']['repetitions']} alternating repetitions. Memory: the program's arguments + outputs "
             "+ temporaries (XLA's memory analysis); device peak = `memory_stats()['peak_bytes_in_use']` so far.", "",
             f"Numerics: **{result.get('numerics')}** (the platform's default) for every row but *MALA, "
             f"other mode*.", "",
             "| C | limit chain-steps/s | MALA chain-steps/s | MALA ratio | MALA, other mode: ratio | "
             "ChEES chain-steps/s | ChEES grads/s | ChEES ratio | SMC chain-steps/s | SMC ratio | MALA program | "
             "device peak |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows = part["rows"]
    counts = sorted({r["num_chains"] for name in rows for r in rows[name]})
    for count in counts:
        cell = {name: next((r for r in rows[name] if r["num_chains"] == count), None) for name in rows}
        lim, mala, chees, smc = cell["limit"], cell["mala"], cell["chees"], cell["smc"]
        other = cell.get("mala_other_numerics")
        memory = next((c["device_memory"] for c in (mala, smc) if c and c.get("device_memory")), None)
        lines.append(
            f"| {count:,} | {_g(lim and lim['chain_steps_per_second'])} | "
            f"{_g(mala and mala['chain_steps_per_second'])} | {_g(mala and mala['ratio_to_limit'], '{:.2f}')} | "
            f"{_g(other and other['ratio_to_limit'], '{:.2f}')} | "
            f"{_g(chees and chees['chain_steps_per_second'])} | "
            f"{_g(chees and chees['gradient_evaluations_per_second'])} | "
            f"{_g(chees and chees['ratio_to_limit'], '{:.2f}')} | {_g(smc and smc['chain_steps_per_second'])} | "
            f"{_g(smc and smc.get('ratio_to_limit'), '{:.2f}')} | {_bytes(mala and mala['program_bytes'])} | "
            f"{_bytes(memory and memory.get('peak_bytes_in_use'))} |")
    if part["skipped_for_time"]:
        lines += ["", f"Skipped (time budget): C = {part['skipped_for_time']}."]
    if part["out_of_memory"]:
        lines += ["", "Out of memory: " + "; ".join(f"{k}: {v}" for k, v in part["out_of_memory"].items())]
    fit = result["largest_fit"]
    lines += ["", f"**Largest C that fits** (MALA, C doubling past the table): "
                  f"{_g(fit['largest_num_chains'], '{:,}')} chains; stopped by: {fit['stopped_by']}."]
    if fit["tried"]:
        lines += ["", "| C | chain-steps/s | MALA program | device peak |", "| ---: | ---: | ---: | ---: |"]
        for t in fit["tried"]:
            lines.append(f"| {t['num_chains']:,} | {t['chain_steps_per_second']:.3g} | {_bytes(t['program_bytes'])} | "
                         f"{_bytes(t['device_memory'] and t['device_memory'].get('peak_bytes_in_use'))} |")
    s = result["sweep"]
    if s:
        lines += ["", f"**Sweep**: `jaxprobe.sweep`, {s['cells']} temperatures × {s['chains_per_cell']:,} chains, "
                      f"MALA, "
                      f"{s['num_warmup']} warmup + {s['num_samples']} draws: {s['seconds']:.1f} s in all, "
                      f"{s['compile_seconds']:.1f} s compiling ({s['num_compilations']} program(s)); "
                      f"{s['chain_steps_per_second']:.3g} chain-steps/s without compile "
                      f"({s['chain_steps_per_second_with_compile']:.3g} with); cell statuses {s['statuses']}; device "
                      f"peak {_bytes(s['device_memory'] and s['device_memory'].get('peak_bytes_in_use'))}."]
    sampled = result.get("sample") or []
    if sampled:
        lines += ["", "**What users call**: `jaxprobe.sample(sampler=\"mala\", keep_draws=False, observables={\"x\": x})`"
                      " end to end (fixed step size, no warmup, the streamed verdict included; second and later calls)"
                      " against the limit doing the same transitions, alternating, minimum. Target: ≥ 5·10^8 "
                      "chain-steps/s at C ≥ 2^20 within 1.10× the limit.", "",
                  "| C | draws | sample s | limit s | ratio | sample chain-steps/s | first call s | acceptance | "
                  "verdict converged | device peak |", "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: | ---: |"]
        for r in sampled:
            if "out_of_memory" in r:
                lines.append(f"| {r['num_chains']:,} | out of memory: {r['out_of_memory'][:120]} |||||||||")
                continue
            peak = r["device_memory"] and r["device_memory"].get("peak_bytes_in_use")
            lines.append(f"| {r['num_chains']:,} | {r['num_samples']:,} | {r['sample_seconds']:.3f} | "
                         f"{r['limit_seconds']:.3f} | {r['ratio_to_limit']:.2f} | {r['chain_steps_per_second']:.3g} | "
                         f"{r['first_call_seconds']:.1f} | {r['acceptance']:.3f} | {r['verdict_converged']} | "
                         f"{_bytes(peak)} |")
    memory = result["device_memory_end"]
    lines += ["", f"Device memory at the end: {json.dumps(memory) if memory else 'not reported by this platform'}. "
                  f"Total time {result['total_seconds']:.0f} s.", ""]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ main


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-tiny", "--quick", dest="tiny", action="store_true",
                        help="tiny sizes (under a minute on a CPU), into a scratch folder")
    parser.add_argument("--record", action="store_true", help="with --cpu-tiny: write into the results folder")
    parser.add_argument("--out", default=None, help=f"output folder (default {RESULTS})")
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument("--chains", default=None, help="comma-separated chain counts of the table (default 4^0..4^10)")
    parser.add_argument("--time-budget", type=float, default=None, help="seconds for the table (default 420)")
    parser.add_argument("--search-up-to", type=int, default=None, help="largest C tried by the fit search")
    parser.add_argument("--sample-chains", default=None,
                        help="comma-separated C of the sample(keep_draws=False) part (default 2^18,2^20; tiny: 8)")
    parser.add_argument("--sample-draws", type=int, default=None, help="draws per sample() call (default 1000)")
    parser.add_argument("--full-on-cpu", action="store_true",
                        help="run the full sizes even without an accelerator (default: the tiny sizes on a CPU)")
    args = parser.parse_args(argv)
    if not args.tiny and jax.devices()[0].platform == "cpu" and not args.full_on_cpu:
        # No accelerator: never record CPU figures as gpu.* (e.g. `jaxprobe bench` running every benchmark).
        log("no accelerator (jax.devices() are CPUs): running the --cpu-tiny sizes; --full-on-cpu to override")
        args.tiny = True
    config = TINY if args.tiny else FULL
    if args.chains:
        chains = tuple(int(c) for c in args.chains.split(","))
        config = dataclasses.replace(config, chains=chains, smc_chains=tuple(c for c in chains if c >= 16))
    if args.time_budget is not None:
        config = dataclasses.replace(config, time_budget=args.time_budget)
    if args.search_up_to is not None:
        config = dataclasses.replace(config, search_up_to=args.search_up_to)
    sample_chains = (tuple(int(c) for c in args.sample_chains.split(",")) if args.sample_chains
                     else (8,) if args.tiny else (2**18, 2**20))
    sample_draws = args.sample_draws or (20 if args.tiny else 1000)
    # A smoke run writes to a scratch folder, unless asked (--record) or given one ($JAXPROBE_BENCH_RESULTS, as
    # `jaxprobe bench` and the tests set it).
    scratch = args.tiny and not args.record and not os.environ.get("JAXPROBE_BENCH_RESULTS")
    out = args.out or (tempfile.mkdtemp(prefix="gpu-bench-") if scratch else RESULTS)
    started = time.perf_counter()
    deadline = started + config.time_budget
    device = jax.devices()[0]
    kind = getattr(device, "device_kind", device.platform)
    log(f"device: {kind} ({device.platform}), {jax.device_count()} device(s)")
    _, G, logdensity = make_target()

    def tilt(x):  # the target relative to the standard-normal reference: −G/τ
        return -G(x) / TEMPERATURE

    numerics = None if default_numerics is None else default_numerics([device])
    log(f"numerics: {numerics} (the platform's default; MALA is also timed in the other mode)")
    part = throughput(config, logdensity, tilt, device, deadline, numerics)
    largest_table = max((r["num_chains"] for r in part["rows"]["mala"]), default=None)
    if largest_table is not None and not part["out_of_memory"]:
        fit = largest_fit(config, logdensity, device, 2 * largest_table, started + config.time_budget + 30, numerics)
        if fit["largest_num_chains"] is None:
            fit["largest_num_chains"] = largest_table
    else:
        fit = {"largest_num_chains": largest_table, "tried": [],
               "stopped_by": "out of memory in the table" if part["out_of_memory"] else "no MALA row ran"}
    sampled = sample_part(logdensity, device, sample_chains, sample_draws, config.repetitions)
    sweep = None if args.no_sweep else sweep_part(config, G, device)
    if sweep:
        log(f"sweep: {sweep['seconds']:.1f} s ({sweep['compile_seconds']:.1f} s compiling), "
            f"{sweep['chain_steps_per_second']:.3g} chain-steps/s")
    result = {
        "command": "python -m jaxprobe.bench.gpu" + (" " + " ".join(argv) if argv else ""),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": kind, "platform": device.platform, "device_count": jax.device_count(), "numerics": numerics,
        "machine": machine_text(), "versions": library_versions(),
        "jax": jax.__version__, "jaxprobe": jaxprobe.__version__, "tiny": args.tiny,
        "config": dataclasses.asdict(config), "target": {"dim": DIM, "hidden": HIDDEN, "temperature": TEMPERATURE,
                                                         "step_size": STEP_SIZE},
        "smc_options": SMC_OPTIONS, "throughput": part, "largest_fit": fit, "sample": sampled, "sweep": sweep,
        "device_memory_end": device_memory(device), "total_seconds": time.perf_counter() - started,
        "load_average": tuple(round(v, 1) for v in os.getloadavg()),
    }
    os.makedirs(out, exist_ok=True)
    atomic_write(os.path.join(out, "gpu.json"), lambda f: f.write(json.dumps(result, indent=1) + "\n"), binary=False)
    atomic_write(os.path.join(out, "gpu.md"), lambda f: f.write(markdown(result)), binary=False)
    log(f"wrote {out}/gpu.json and gpu.md ({result['total_seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
