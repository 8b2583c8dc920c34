#!/usr/bin/env python
"""The answer at the engine's speed: what users call, end to end, against the limit, plus peak memory.

One process for the timings, side by side (the interleaved protocol of ``throughput.py``), and one fresh
subprocess per memory figure. Target: a prediction-risky probe of a fixed random MLP with d = 50 inputs
(50 → 64 → 64 → 1, tanh hidden, sigmoid output), ``log p(x) = −(f(x) − 0.5)²/τ − ½|x|²``, τ = 0.01, float32.

Sections
--------
1. ``jaxprobe.sample(key, logdensity, x0, sampler="mala", num_samples=1000, num_warmup=200, thin=thin,
   progress=False, convergence="ignore")`` end to end (the verdict included, compile excluded: the first
   call is not timed) against *the limit*: ``jax.jit`` of ``engine.init`` → ``engine.warmup(…, 200)`` →
   ``engine.run(…, 1000, thin)`` returning every kept draw, then ``np.asarray`` of the draws (the compiled
   engine inside a user's own jit, its draws on the host). The limit uses the keys ``sample`` derives from
   the same seed, so both do the same transitions (the draws are compared). The verdict's share: the cost
   of folding every draw into the verdict's statistics inside the scan (``RUN_MONITORED_CHUNK``:
   ``core.run_monitored`` jitted with donated buffers, as ``sample`` runs it, against ``core.run`` on the
   same chunk and donated buffers; the median paired difference) plus the host end
   (``api._result``: finalize, rank statistics, the verdict, timed inside the ``sample`` calls).
2. Other samplers: HMC (10 leapfrog steps, fixed step size, identity mass matrix) against BlackJAX's own
   HMC vmapped over chains in a jitted ``lax.scan`` keeping every draw; NUTS likewise against BlackJAX
   NUTS; ChEES and NUTS with adaptation against the engine limit.
3. Peak resident memory of each section-1 configuration in a fresh subprocess (``ru_maxrss`` at the end of
   a child that runs the call twice), against the kept draws' bytes C × N × (d + 1) × 4; baseline = the same
   child with ``num_samples=20``; and the second call's own rise of the peak over the resident size it
   started from (judged: it holds no start-up scatter between processes).
4. ``keep_draws=False``: 4096 chains × 20,000 draws of a 2-D standard normal with observables x and x²:
   peak memory against the same run with 20 draws, the means against the truth in MCSE, and the reported
   MCSE against the spread of the means over 10 independent runs.

Usage::

    python -m jaxprobe.bench.answer_speed            # full run (≤ 15 minutes on 2 idle cores)
    python -m jaxprobe.bench.answer_speed --quick    # smoke run, about a minute, into a scratch folder
    python -m jaxprobe.bench.answer_speed --chains 256,2048,16384,65536   # 65536 needs ~15 GB RAM
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import datetime
import gc
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxprobe.bench import code_state, results_dir  # noqa: E402
import jaxprobe  # noqa: E402
from jaxprobe.bench import throughput  # noqa: E402  (timing protocol, machine and versions helpers)
from jaxprobe.benchmark.targets import mlp_probe  # noqa: E402  (the benchmarks' one target model)
from jaxprobe import engine  # noqa: E402
from jaxprobe.engine import api, core, streaming  # noqa: E402
from jaxprobe._pointwise import map_points  # noqa: E402
from jaxprobe.engine.numerics import default_numerics, with_numerics  # noqa: E402
from jaxprobe.bench.throughput import Candidate, log, median_paired_ratio, time_interleaved, write_atomically  # noqa: E402

# ------------------------------------------------------------------ configuration

DIM = 50
HIDDEN = 64
TEMPERATURE = 0.01
SEED = 7  # every timed call (sample and its references) uses this seed: the same work every repetition
HMC_STEP_SIZE = 0.3  # fixed step size of the HMC and NUTS rows against BlackJAX (identity mass matrix)
HMC_STEPS = 10
RATIO_TARGET = 1.15  # sample / limit, and jaxprobe / BlackJAX
VERDICT_SHARE_TARGET = 0.05
MEMORY_TARGET = 1.25  # (peak − baseline) / kept draws' bytes
FOLD_SECONDS = 30.0  # the fold's measurement per row: up to this long (Config.fold_repetitions at most)
KEEP_DRAWS_FALSE_TARGET_MB = 100.0
MCSE_SIGMAS = 4.0
MCSE_FACTOR = 1.5
MB = 1024.0 * 1024.0


@dataclasses.dataclass(frozen=True)
class Config:
    chains: tuple[int, ...]  # section 1
    thin10_max_chains: int  # thin = 10 rows up to this C (each costs 10x the transitions)
    num_samples: int
    num_warmup: int
    repetitions: int
    fold_repetitions: int
    # Section 2 rows: (sampler, C, "blackjax" | "limit", num_warmup, num_samples).
    samplers: tuple[tuple[str, int, str, int, int], ...]
    memory: bool
    memory_thin10: bool  # also the thin = 10 rows' peaks
    limit_memory: bool  # also the limit's peak at the largest C (thin = 1), for reference
    kd_chains: int
    kd_draws: int
    kd_warmup: int
    spread_runs: int
    spread_chains: int
    spread_draws: int


# Sizes chosen so that the default run takes about 12 minutes on 2 idle cores (twice that when shared): thin = 10
# only up to C = 256 (C = 2048 thin = 10 alone would add 3-4 minutes), HMC and NUTS with shorter runs (an
# adaptive NUTS transition of 256 lockstep chains costs ~50 MALA transitions).
FULL = Config(chains=(256, 2048, 16384), thin10_max_chains=256, num_samples=1000, num_warmup=200, repetitions=5,
              fold_repetitions=41,
              samplers=(("hmc", 256, "blackjax", 100, 300), ("hmc", 2048, "blackjax", 100, 300),
                        ("chees", 256, "limit", 200, 1000), ("nuts", 256, "limit", 100, 200),
                        ("nuts", 256, "blackjax", 100, 200)),
              memory=True, memory_thin10=True, limit_memory=True, kd_chains=4096, kd_draws=20_000, kd_warmup=200,
              spread_runs=10, spread_chains=256, spread_draws=2000)
QUICK = Config(chains=(64,), thin10_max_chains=64, num_samples=100, num_warmup=40, repetitions=5, fold_repetitions=3,
               samplers=(("hmc", 32, "blackjax", 20, 50), ("chees", 16, "limit", 40, 40), ("nuts", 16, "blackjax", 10, 20)),
               memory=True, memory_thin10=False, limit_memory=False, kd_chains=256, kd_draws=2000, kd_warmup=50,
               spread_runs=10, spread_chains=64, spread_draws=200)


class Progress:
    """Finished units of a run (one MALA row, one sampler row, one memory figure, section 4) kept in a JSON
    file (``--resume FILE``): a run stopped part-way (killed on a shared machine) is started again with the
    same command and redoes only the units not yet done. The file belongs to one configuration and one
    jaxprobe code hash; another is ignored (and replaced). Without a file nothing is kept."""

    def __init__(self, path: str | None, identity: dict[str, Any]):
        identity = json.loads(json.dumps(identity))  # as the file holds it (tuples become lists)
        self.path, self.identity, self.units = path, identity, {}
        if path and os.path.exists(path):
            with open(path) as stream:
                saved = json.load(stream)
            if saved.get("identity") == identity:
                self.units = saved["units"]
                log(f"resuming from {path}: {len(self.units)} unit(s) done")
            else:
                log(f"{path} holds another configuration or code: starting afresh")

    def start_segment(self, date: str, other_work: Any) -> None:
        """This process's part of the run (a resumed run has several): its load and the other work on the
        machine, brought up to date with every unit put."""
        self.started, self.other_work = time.perf_counter(), other_work
        self.segment = {"date": date, "pid": os.getpid(), "load_before": list(os.getloadavg())}
        self.units.setdefault("segments", []).append(self.segment)
        self._update_segment()

    def _update_segment(self) -> None:
        self.segment.update(load_after=list(os.getloadavg()), other_work_cores=self.other_work.cores(),
                            seconds=time.perf_counter() - self.started)

    def get(self, key: str) -> Any:
        return self.units.get(key)

    def put(self, key: str, value: Any) -> Any:
        self.units[key] = value
        if hasattr(self, "segment"):
            self._update_segment()
        if self.path:
            write_atomically(self.path, json.dumps({"identity": self.identity, "units": self.units}) + "\n")
        return value


PROGRESS = Progress(None, {})


# ------------------------------------------------------------------ targets


def make_target(dim: int | None = None, seed: int = 0) -> tuple[Callable, Callable]:
    """``(probe, logdensity)`` of the d-input MLP probe (:func:`jaxprobe.benchmark.targets.mlp_probe`),
    ``jaxprobe.gibbs(G, τ, N(0, I))``; d = :data:`DIM` (``--dim``) unless given."""
    dim = DIM if dim is None else dim
    _, probe, G = mlp_probe(dim, HIDDEN, seed)
    return probe, jaxprobe.gibbs(G, TEMPERATURE, jaxprobe.priors.StandardNormal())


def initial_positions(num_chains: int, dim: int | None = None, seed: int = 1) -> jax.Array:
    dim = DIM if dim is None else dim
    return jax.random.normal(jax.random.key(seed), (num_chains, dim), jnp.float32)


def standard_normal(x):  # the 2-D target of section 4 (module level: one object, programs reused)
    return -0.5 * jnp.sum(x * x)


OBSERVABLES = {"x": lambda x: x, "x2": lambda x: x ** 2}
OBSERVABLE_TRUTH = {"x": 0.0, "x2": 1.0}


# ------------------------------------------------------------------ sample()'s phases, timed inside it

#: The steps of ``api.sample`` timed in every call: checks, placing + init, warmup, the sampling chunks (each
#: copied to the host), the host end (``_result``: finalize, rank statistics, the verdict, the Samples).
PHASES = api.SAMPLE_STEPS  # the steps of sample(), named by the engine for profilers
PHASE_LABELS = {"_validate": "checks", "_place": "place + init", "_adapt_or_resume": "warmup",
                "_run_chunks": "sampling chunks", "_result": "host end (verdict)"}
_PHASE_LOG: list[tuple[str, float]] = []


def install_phase_timers() -> Callable[[], None]:
    """Wrap the steps of ``api.sample`` (module attributes it looks up at call time) with timers. Every step ends
    synchronized with the device (warmup and chunks read their statistics back), so a step's wall time is its own.
    Returns the function that puts the engine's own steps back: :func:`main` calls it when its sections end, so a
    process that called ``main()`` (a test, a notebook) is not left with a timed ``sample()`` and a growing log."""
    installed = {}
    for name in PHASES:
        original = getattr(api, name)
        if getattr(original, "_answer_speed_timer", False):
            continue

        def timed(*args, _original=original, _name=name, **kwargs):
            start = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                _PHASE_LOG.append((_name, time.perf_counter() - start))

        timed._answer_speed_timer = True
        installed[name] = original
        setattr(api, name, timed)

    def restore() -> None:
        for name, original in installed.items():
            setattr(api, name, original)
        _PHASE_LOG.clear()

    return restore


# ------------------------------------------------------------------ candidates


def sample_call(logdensity, x0, sampler: str, num_samples: int, num_warmup: int, thin: int = 1,
                step_size: Any = None, sampler_options: dict | None = None, **extra) -> Callable[[], Any]:
    """The user's call, exactly: ``jaxprobe.sample(...)`` returning its ``Samples`` (draws on the host)."""
    x0 = np.asarray(x0)

    def call():
        return jaxprobe.sample(SEED, logdensity, x0, sampler=sampler, num_samples=num_samples,
                               num_warmup=num_warmup, thin=thin, step_size=step_size,
                               sampler_options=sampler_options, progress=False, convergence="ignore", **extra)

    return call


def engine_limit_call(kernel, logdensity, x0, num_samples: int, num_warmup: int, thin: int = 1,
                      parameters: Any = None, adapt: bool = True, key: Any = None,
                      to_answer: Callable | None = None, extra: Callable | None = None) -> Callable[[], Any]:
    """The limit: one ``jax.jit`` of init → warmup → run returning every kept draw, then ``np.asarray`` of them.

    Keys as ``sample`` derives them from the same seed (``split(key)`` → warmup key, sampling key; ``key``
    default ``jax.random.key(SEED)``), so the limit makes the transitions ``sample`` makes. ``adapt=False``:
    warmup is burn-in with fixed parameters (``engine.run`` keeping nothing), as ``sample`` does when given a
    step size. ``to_answer``: a map of one position applied to every kept draw inside the jit (e.g. to data
    space, as a user's own program would return the answer); ``extra``: a function of one stored draw evaluated at
    every kept draw inside the jit and copied to the host too (e.g. the probe's value, which a sweep reports).
    """

    @jax.jit
    def limit(key, positions):
        key_warmup, key_sampling = jax.random.split(key)
        state = engine.init(kernel, logdensity, positions, parameters)
        if num_warmup and adapt:
            state, _ = engine.warmup(key_warmup, state, kernel, logdensity, num_warmup)
        elif num_warmup:
            state, _, _ = engine.run(key_warmup, state, kernel, logdensity, 1, num_warmup)
            state = core.EngineState(state.kernel_state, state.parameters, jnp.zeros((), jnp.int32))
        state, trace, stats = engine.run(key_sampling, state, kernel, logdensity, num_samples, thin)
        if to_answer is not None:
            trace = core.Trace(jax.vmap(jax.vmap(to_answer))(trace.position), trace.logdensity)
        if extra is None:
            return trace, stats, None
        # map_points: in batches where XLA's CPU cliff needs them (G at 16,384 x 1,000 draws in one vmap is past it)
        flat = trace.position.reshape((-1,) + trace.position.shape[2:])
        return trace, stats, map_points(extra, flat).reshape(trace.position.shape[:2])

    key = jax.random.key(SEED) if key is None else key

    def call():
        trace, stats, extra_values = limit(key, x0)
        if extra_values is not None:
            np.asarray(extra_values)
        # Chain-major views of the host draws, as Samples holds them (np.asarray is zero-copy on CPU).
        return (np.swapaxes(np.asarray(trace.position), 0, 1), np.swapaxes(np.asarray(trace.logdensity), 0, 1),
                jax.tree.map(np.asarray, stats))

    return call


def blackjax_call(algorithm_name: str, logdensity, x0, num_samples: int, num_warmup: int, step_size: float,
                  **options) -> Callable[[], Any]:
    """BlackJAX's own kernel vmapped over chains in a jitted ``lax.scan``: ``num_warmup`` burn-in steps (fixed
    parameters, nothing kept), then ``num_samples`` steps keeping every draw (position and log density),
    copied to the host. Per-chain keys ``split(fold_in(key, t), C)`` every step, with the warmup and sampling
    keys ``sample`` derives from the seed: the same random streams as jaxprobe's kernels (which wrap these
    BlackJAX kernels)."""
    import blackjax

    num_chains, dim = x0.shape
    algorithm = getattr(blackjax, algorithm_name)(logdensity, step_size, jnp.ones((dim,), jnp.float32), **options)
    step = jax.vmap(algorithm.step)

    @jax.jit
    def run(key, positions):
        key_warmup, key_sampling = jax.random.split(key)
        state = jax.vmap(algorithm.init)(positions)

        def burn(state, t):
            state, _ = step(jax.random.split(jax.random.fold_in(key_warmup, t), num_chains), state)
            return state, None

        def draw(state, t):
            state, info = step(jax.random.split(jax.random.fold_in(key_sampling, t), num_chains), state)
            return state, (state.position, state.logdensity, info.acceptance_rate, info.num_integration_steps)

        state, _ = jax.lax.scan(burn, state, jnp.arange(num_warmup))
        state, (position, logdensity, acceptance, steps) = jax.lax.scan(draw, state, jnp.arange(num_samples))
        return position, logdensity, jnp.mean(acceptance), jnp.sum(steps.astype(jnp.int32), axis=0)

    key = jax.random.key(SEED)

    def call():
        position, logdensity, acceptance, steps = run(key, x0)
        return (np.swapaxes(np.asarray(position), 0, 1), np.swapaxes(np.asarray(logdensity), 0, 1),
                float(acceptance), np.asarray(steps))

    return call


class Stash:
    """Keeps a little of a candidate's first (untimed) result: acceptance, gradient evaluations and the draws
    of a few chains, to check that the compared programs did the same work."""

    CHAINS = 32

    def __init__(self):
        self.values: dict[str, dict[str, Any]] = {}

    def sample(self, name: str) -> Callable[[Any], float]:
        def keep(samples):
            self.values[name] = {"acceptance": float(np.mean(samples.acceptance_rate)),
                                 "grad_evals": int(np.sum(samples.num_gradient_evaluations)),
                                 "draws": np.array(samples.positions[:self.CHAINS]),
                                 "converged": bool(samples.verdict.converged)}
            return self.values[name]["acceptance"]
        return keep

    def limit(self, name: str) -> Callable[[Any], float]:
        def keep(result):
            position, _, stats = result
            acceptance = float(np.mean(stats.acceptance_rate_sum)) / max(int(stats.num_steps), 1)
            self.values[name] = {"acceptance": acceptance, "grad_evals": int(np.sum(stats.num_gradient_evaluations)),
                                 "draws": np.array(position[:self.CHAINS])}
            return acceptance
        return keep

    def blackjax(self, name: str) -> Callable[[Any], float]:
        def keep(result):
            position, _, acceptance, steps = result
            self.values[name] = {"acceptance": acceptance, "grad_evals": int(np.sum(steps)),
                                 "draws": np.array(position[:self.CHAINS])}
            return acceptance
        return keep

    def compare(self, name: str, reference: str) -> dict[str, Any]:
        a, b = self.values[name]["draws"], self.values[reference]["draws"]
        same = np.all(a == b, axis=-1)
        return {"max_abs_draw_difference": float(np.max(np.abs(a - b))),
                "identical_draw_fraction": float(np.mean(same)), "compared_chains": int(a.shape[0])}


def timing_row(candidate: Candidate, reference: Candidate) -> dict[str, Any]:
    """Min-time ratio, median paired ratio (wall and CPU) of ``candidate`` to ``reference`` (both same steps)."""
    ratio = min(candidate.times) / min(reference.times)
    return {"ratio": ratio, "median_paired_ratio": median_paired_ratio(candidate, reference),
            "median_paired_cpu_ratio": median_paired_ratio(candidate, reference, cpu=True),
            "seconds": min(candidate.times), "reference_seconds": min(reference.times),
            "times_s": candidate.times, "cpu_times_s": candidate.cpu_times,
            "reference_times_s": reference.times, "reference_cpu_times_s": reference.cpu_times}


# ------------------------------------------------------------------ section 1: sample() vs the limit


#: What ``sample`` runs for one chunk: ``core.run_monitored`` jitted with the trace buffers donated.
RUN_MONITORED_CHUNK = jax.jit(
    lambda key, state, monitored, first_draw, kernel, logdensity, num_draws, thin, monitor, keep_draws, trace:
    core.run_monitored(key, state, kernel, logdensity, num_draws, thin, monitor, monitored, first_draw, trace,
                       keep_draws),
    static_argnames=("kernel", "logdensity", "num_draws", "thin", "monitor", "keep_draws"), donate_argnames=("trace",))


def as_sample_runs(kernel):
    """``kernel`` in the numerics mode ``sample`` runs it in here (``numerics=None``: the platform's, "fast" on a
    GPU): the limit must do the same transitions as ``sample``, not the kernel's default mode."""
    return with_numerics(kernel, default_numerics())


def fold_cost(logdensity, x0, num_samples: int, thin: int, repetitions: int) -> dict[str, Any]:
    """The fold's cost: one chunk of the program ``sample`` runs (``RUN_MONITORED_CHUNK``: ``core.run_monitored``,
    every kept draw folded into the verdict's statistics) against ``core.run`` on the same chunk (jitted
    with donated buffers: ``throughput.RUN_CHUNK``), same state, per-chain step sizes as after warmup,
    interleaved. ``sample`` runs ``num_samples / chunk`` such chunks."""
    kernel = as_sample_runs(engine.MALA())
    num_chains, dim = x0.shape
    chunk = max(1, math.ceil(num_samples / 20))  # sample()'s default chunk
    num_chunks = math.ceil(num_samples / chunk)
    parameters = core.default_parameters(kernel, num_chains, dim, jnp.float32,
                                         step_size=jnp.full((num_chains,), 0.05, jnp.float32))
    state = jax.block_until_ready(jax.jit(core.init, static_argnums=(0, 1))(kernel, logdensity, x0, parameters))
    monitor = streaming.Monitor(num_chains, dim, num_samples, ())
    monitored = jax.block_until_ready(streaming.init_stats(monitor, jnp.float32))
    key = jax.random.key(3)
    first_draw = jnp.asarray(0, jnp.int32)

    def buffers():
        return [core.Trace(jnp.zeros((chunk, num_chains, dim), jnp.float32),
                           jnp.zeros((chunk, num_chains), jnp.float32))]

    plain_buffers, monitored_buffers = buffers(), buffers()

    def plain():
        result = jax.block_until_ready(
            throughput.RUN_CHUNK(key, state, kernel, logdensity, chunk, thin, plain_buffers.pop()))
        plain_buffers.append(result[1])

    def folded():
        result = jax.block_until_ready(RUN_MONITORED_CHUNK(key, state, monitored, first_draw, kernel, logdensity, chunk,
                                                      thin, monitor, True, monitored_buffers.pop()))
        monitored_buffers.append(result[1])

    candidates = [Candidate("core.run", num_chains, chunk * thin, plain),
                  Candidate("run_monitored (as sample runs it)", num_chains, chunk * thin, folded)]
    # As many repetitions as fit in about FOLD_SECONDS, at least 9: a 4 s chunk (C = 65,536) scatters by less
    # than the fold costs, a 10 ms one (C = 256) by several times it.
    plain()  # compiles
    start = time.perf_counter()
    plain()
    repetitions = int(np.clip(FOLD_SECONDS / (2 * (time.perf_counter() - start)), 9, repetitions))
    time_interleaved(candidates, repetitions)
    base, mon = candidates
    # The median over repetitions of the two calls' difference within one repetition: a chunk of 10-20 ms
    # scatters by several percent from call to call, and the difference of the two minimum times moved by the
    # fold's whole cost between runs (1.006-1.034 of a chunk over 101 repetitions, against 1.011-1.014 paired).
    per_chunk = float(np.median(np.array(mon.times) - np.array(base.times)))
    per_chunk_cpu = float(np.median(np.array(mon.cpu_times) - np.array(base.cpu_times)))
    return {"chunk_draws": chunk, "num_chunks": num_chunks, "run_chunk_s": min(base.times),
            "monitored_chunk_s": min(mon.times), "fold_per_chunk_s": per_chunk,
            "fold_min_difference_per_chunk_s": min(mon.times) - min(base.times),
            "fold_per_run_s": max(per_chunk, 0.0) * num_chunks,
            "fold_ratio": min(mon.times) / min(base.times), "fold_repetitions": repetitions,
            "fold_median_paired_ratio": median_paired_ratio(mon, base),
            "fold_median_paired_cpu_ratio": median_paired_ratio(mon, base, cpu=True),
            "fold_per_chunk_median_cpu_s": per_chunk_cpu,
            "run_times_s": base.times, "monitored_times_s": mon.times,
            "run_cpu_times_s": base.cpu_times, "monitored_cpu_times_s": mon.cpu_times}


def mala_section(config: Config, logdensity) -> list[dict[str, Any]]:
    rows = []
    for num_chains in config.chains:
        x0 = initial_positions(num_chains)
        for thin in (1, 10):
            if thin > 1 and num_chains > config.thin10_max_chains:
                continue
            unit = f"mala/{num_chains}/{thin}"
            if PROGRESS.get(unit) is not None:
                rows.append(PROGRESS.get(unit))
                continue
            log(f"MALA C={num_chains} thin={thin}: sample vs the limit")
            stash = Stash()
            phases: list[dict[str, float]] = []
            call = sample_call(logdensity, x0, "mala", config.num_samples, config.num_warmup, thin)

            def timed_sample(call=call, phases=phases):
                start = len(_PHASE_LOG)
                begun = time.perf_counter()
                out = call()
                total = time.perf_counter() - begun
                spent = {name: 0.0 for name in PHASES}
                for name, seconds in _PHASE_LOG[start:]:
                    spent[name] += seconds
                spent["other"] = total - sum(spent.values())
                spent["total"] = total
                phases.append(spent)
                return out

            transitions = config.num_warmup + config.num_samples * thin
            limit = Candidate("limit", num_chains, transitions,
                              engine_limit_call(as_sample_runs(engine.MALA()), logdensity, x0, config.num_samples,
                                                config.num_warmup, thin), stash.limit("limit"))
            sample = Candidate("sample", num_chains, transitions, timed_sample, stash.sample("sample"))
            time_interleaved([limit, sample], config.repetitions)
            row = {"num_chains": num_chains, "thin": thin, "num_samples": config.num_samples,
                   "num_warmup": config.num_warmup, "transitions": transitions,
                   **timing_row(sample, limit), "target": RATIO_TARGET,
                   "acceptance_sample": stash.values["sample"]["acceptance"],
                   "acceptance_limit": stash.values["limit"]["acceptance"],
                   "converged": stash.values["sample"]["converged"],
                   "same_work": stash.compare("sample", "limit"),
                   "phases": phases[1:],  # the first was the untimed (compiling) call
                   "result_s": [spent["_result"] for spent in phases[1:]]}
            row["phases_median"] = {name: float(np.median([spent[name] for spent in row["phases"]]))
                                    for name in (*PHASES, "other", "total")}
            # The limit split by transitions (an estimate: a warmup transition costs about a sampling one).
            row["limit_warmup_estimate_s"] = row["reference_seconds"] * config.num_warmup / transitions
            del stash
            gc.collect()
            log(f"  limit {row['reference_seconds']:.2f} s, sample {row['seconds']:.2f} s: ratio {row['ratio']:.3f} "
                f"(median paired {row['median_paired_ratio']:.3f}); draws identical "
                f"{row['same_work']['identical_draw_fraction']:.3f}")
            log(f"MALA C={num_chains} thin={thin}: the fold's cost (run_monitored vs run, one chunk)")
            row["fold"] = fold_cost(logdensity, x0, config.num_samples, thin, config.fold_repetitions)
            result_s = float(np.median(row["result_s"])) if row["result_s"] else float("nan")
            row["verdict_s"] = row["fold"]["fold_per_run_s"] + result_s
            row["verdict_share"] = row["verdict_s"] / row["seconds"]
            row["fold_share"] = row["fold"]["fold_per_run_s"] / row["seconds"]
            row["result_share"] = result_s / row["seconds"]
            log(f"  fold {row['fold']['fold_per_run_s']:.3f} s/run, host end {result_s:.3f} s: verdict share "
                f"{100 * row['verdict_share']:.1f}%")
            rows.append(PROGRESS.put(unit, row))
    return rows


# ------------------------------------------------------------------ section 2: other samplers


def samplers_section(config: Config, logdensity) -> list[dict[str, Any]]:
    rows = []
    for sampler, num_chains, against, num_warmup, num_samples in config.samplers:
        unit = f"samplers/{sampler}/{num_chains}/{against}"
        if PROGRESS.get(unit) is not None:
            rows.append(PROGRESS.get(unit))
            continue
        x0 = initial_positions(num_chains)
        stash = Stash()
        options = {"num_integration_steps": HMC_STEPS} if sampler == "hmc" else None
        if against == "blackjax":  # fixed step size, identity mass matrix: warmup is burn-in on both sides
            step_size, name = HMC_STEP_SIZE, f"blackjax {sampler} (vmapped, jitted scan)"
            extra = {"num_integration_steps": HMC_STEPS} if sampler == "hmc" else {}
            reference = Candidate(name, num_chains, num_samples,
                                  blackjax_call(sampler, logdensity, x0, num_samples, num_warmup, step_size, **extra),
                                  stash.blackjax(name))
        else:  # adaptation on both sides
            step_size, name = None, "limit (engine in one jit)"
            kernel = as_sample_runs(engine.make_kernel(sampler, options))
            reference = Candidate(name, num_chains, num_samples,
                                  engine_limit_call(kernel, logdensity, x0, num_samples, num_warmup),
                                  stash.limit(name))
        log(f"{sampler} C={num_chains}: sample vs {name}")
        candidate = Candidate("sample", num_chains, num_samples,
                              sample_call(logdensity, x0, sampler, num_samples, num_warmup, 1, step_size, options),
                              stash.sample("sample"))
        time_interleaved([reference, candidate], config.repetitions)
        row = {"sampler": sampler, "num_chains": num_chains, "against": name, "num_samples": num_samples,
               "num_warmup": num_warmup, "step_size": step_size, "adapted": step_size is None,
               **timing_row(candidate, reference), "target": RATIO_TARGET,
               "acceptance_sample": stash.values["sample"]["acceptance"],
               "acceptance_reference": stash.values[name]["acceptance"],
               "grad_evals_sample": stash.values["sample"]["grad_evals"],
               "grad_evals_reference": stash.values[name]["grad_evals"],
               "same_work": stash.compare("sample", name)}
        row["time_per_grad_ratio"] = row["ratio"] * row["grad_evals_reference"] / max(row["grad_evals_sample"], 1)
        log(f"  {name} {row['reference_seconds']:.2f} s, sample {row['seconds']:.2f} s: ratio {row['ratio']:.3f}; "
            f"grad evals {row['grad_evals_sample']:,} vs {row['grad_evals_reference']:,}")
        rows.append(PROGRESS.put(unit, row))
        del stash
        gc.collect()
    return rows


# ------------------------------------------------------------------ sections 3 and 4: memory (fresh subprocesses)


def _status_kb(key: str = "VmHWM") -> int | None:
    """A ``kB`` figure of ``/proc/self/status`` (``VmHWM``: the peak resident size; ``VmRSS``: the current one),
    None off Linux."""
    try:
        with open("/proc/self/status") as stream:
            for line in stream:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    """Return the heap's free memory to the system (glibc's ``malloc_trim``) and reset ``VmHWM`` to the current
    resident size (Linux ≥ 4.0, ``/proc/self/clear_refs``): what a call adds from here on is its own. False where
    the peak cannot be reset."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: freed memory may stay resident (the rise then reads low)
        return False
    try:
        with open("/proc/self/clear_refs", "w") as stream:
            stream.write("5")
    except OSError:
        return False
    return True


def child_main(spec: dict[str, Any]) -> None:
    """One memory measurement: the configuration's call twice (the first result freed before the second),
    then the peak resident memory of this process, and how far the second call raised it above the resident
    size it started from (after the first call's freed memory was returned to the system)."""
    global DIM
    DIM = spec.get("dim", DIM)
    if spec["kind"] == "keep_draws_false":
        x0 = np.asarray(jax.random.normal(jax.random.key(1), (spec["num_chains"], 2), jnp.float32))
        call = sample_call(standard_normal, x0, "mala", spec["num_samples"], spec["num_warmup"], 1,
                           keep_draws=False, observables=OBSERVABLES)
    else:
        _, logdensity = make_target()
        x0 = initial_positions(spec["num_chains"])
        if spec["kind"] == "limit":
            call = engine_limit_call(as_sample_runs(engine.MALA()), logdensity, x0, spec["num_samples"],
                                     spec["num_warmup"], spec["thin"])
        else:
            call = sample_call(logdensity, x0, "mala", spec["num_samples"], spec["num_warmup"], spec["thin"])
    measure_call_twice(call)


def measure_call_twice(call: Callable[[], Any]) -> None:
    """``call()`` twice (the first result freed before the second), then print (a ``RESULT`` line) the peak resident
    memory of this process and how far the second call raised it above the resident size it started from (after
    the first call's freed memory was returned to the system): a memory child's figure."""
    times = []
    rss_before_second = reset = None
    for repetition in range(2):
        if repetition == 1:
            reset = _reset_peak()
            rss_before_second = _status_kb("VmRSS")
        start = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - start)
        del out
        gc.collect()
    peak_second = _status_kb("VmHWM") if reset else None
    print("RESULT " + json.dumps({"ru_maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                                  "vm_hwm_kb": _status_kb("VmHWM"), "seconds": times,
                                  "rss_before_second_kb": rss_before_second, "peak_second_kb": peak_second,
                                  "rise_second_kb": None if peak_second is None else peak_second - rss_before_second}),
          flush=True)


#: A small intermediate process between this one and each measuring child. On Linux a process's ``ru_maxrss``
#: starts at its parent's resident size (fork copies the RSS counters; ``exec`` keeps the old peak in the
#: signal struct), so a child spawned directly by this process, which holds gigabytes of draws after section
#: 1, would report at least that. The launcher is a few MB; its child gets a fresh peak.
LAUNCHER = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"


def run_child(spec: dict[str, Any], module: str = "jaxprobe.bench.answer_speed") -> dict[str, Any]:
    """One memory figure: ``python -m module --child spec`` (through :data:`LAUNCHER`), its ``RESULT`` line."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", LAUNCHER, sys.executable, "-m", module,
                           "--child", json.dumps(spec)], capture_output=True, text=True, timeout=3600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        raise RuntimeError(f"memory child {spec} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    out = json.loads(lines[-1][len("RESULT "):])
    out["wall_s"] = time.perf_counter() - started
    if out["vm_hwm_kb"] and out["ru_maxrss_kb"] > 1.05 * out["vm_hwm_kb"]:
        log(f"  warning: ru_maxrss {out['ru_maxrss_kb']} kB > VmHWM {out['vm_hwm_kb']} kB (inherited peak?)")
    return out


def memory_section(config: Config) -> list[dict[str, Any]]:
    rows = []
    for num_chains in config.chains:
        for thin in (1, 10):
            if thin > 1 and (num_chains > config.thin10_max_chains or not config.memory_thin10):
                continue
            largest = num_chains == max(config.chains)
            kinds = ["sample"] + (["limit"] if config.limit_memory and thin == 1 and largest else [])
            for kind in kinds:
                unit = f"memory/{kind}/{num_chains}/{thin}"
                if PROGRESS.get(unit) is not None:
                    rows.append(PROGRESS.get(unit))
                    continue
                log(f"memory: {kind} C={num_chains} thin={thin}")
                spec = {"kind": kind, "num_chains": num_chains, "thin": thin, "num_warmup": config.num_warmup,
                        "dim": DIM}
                full = run_child(spec | {"num_samples": config.num_samples})
                base = run_child(spec | {"num_samples": 20})
                draws_bytes = num_chains * config.num_samples * (DIM + 1) * 4
                extra = (full["ru_maxrss_kb"] - base["ru_maxrss_kb"]) * 1024.0
                # The run's own memory: how far the second call raised the child's resident size, less the same
                # rise with 20 draws (None where the peak cannot be reset: off Linux or glibc).
                rises = full.get("rise_second_kb"), base.get("rise_second_kb")
                rise_ratio = None if None in rises else (rises[0] - rises[1]) * 1024.0 / draws_bytes
                judged = extra / draws_bytes if rise_ratio is None else rise_ratio
                rows.append({"kind": kind, "num_chains": num_chains, "thin": thin, "num_samples": config.num_samples,
                             "draws_bytes": draws_bytes, "peak_kb": full["ru_maxrss_kb"],
                             "baseline_kb": base["ru_maxrss_kb"], "peak_hwm_kb": full["vm_hwm_kb"],
                             "baseline_hwm_kb": base["vm_hwm_kb"], "ratio": extra / draws_bytes,
                             "rise_kb": rises[0], "baseline_rise_kb": rises[1], "rise_ratio": rise_ratio,
                             "target": MEMORY_TARGET, "pass": judged <= MEMORY_TARGET,
                             "child": full, "baseline_child": base})
                PROGRESS.put(unit, rows[-1])
                log(f"  peak {full['ru_maxrss_kb'] / 1024:.0f} MB, baseline {base['ru_maxrss_kb'] / 1024:.0f} MB, "
                    f"draws {draws_bytes / MB:.0f} MB: ratio {rows[-1]['ratio']:.3f}, the second call's rise "
                    + ("unknown" if rise_ratio is None else f"{rises[0] / 1024:.0f} MB vs {rises[1] / 1024:.0f} MB: "
                       f"ratio {rise_ratio:.3f}"))
    return rows


def keep_draws_section(config: Config) -> dict[str, Any]:
    if PROGRESS.get("keep_draws") is not None:
        return PROGRESS.get("keep_draws")
    out: dict[str, Any] = {"num_chains": config.kd_chains, "num_samples": config.kd_draws,
                           "num_warmup": config.kd_warmup}
    if config.memory:
        log(f"keep_draws=False: memory, {config.kd_chains} chains x {config.kd_draws} draws vs 20 draws")
        spec = {"kind": "keep_draws_false", "num_chains": config.kd_chains, "num_warmup": config.kd_warmup}
        full = run_child(spec | {"num_samples": config.kd_draws})
        base = run_child(spec | {"num_samples": 20})
        difference_mb = (full["ru_maxrss_kb"] - base["ru_maxrss_kb"]) / 1024.0
        out["memory"] = {"peak_kb": full["ru_maxrss_kb"], "baseline_kb": base["ru_maxrss_kb"],
                         "peak_hwm_kb": full["vm_hwm_kb"], "baseline_hwm_kb": base["vm_hwm_kb"],
                         "difference_mb": difference_mb, "kept_draws_would_be_mb":
                             config.kd_chains * config.kd_draws * 3 * 4 / MB,
                         "target_mb": KEEP_DRAWS_FALSE_TARGET_MB,
                         "pass": difference_mb <= KEEP_DRAWS_FALSE_TARGET_MB, "child": full, "baseline_child": base}
        log(f"  peak {full['ru_maxrss_kb'] / 1024:.0f} MB vs {base['ru_maxrss_kb'] / 1024:.0f} MB: "
            f"{difference_mb:+.0f} MB")

    log(f"keep_draws=False: accuracy, {config.kd_chains} chains x {config.kd_draws} draws")
    x0 = np.asarray(jax.random.normal(jax.random.key(1), (config.kd_chains, 2), jnp.float32))
    call = sample_call(standard_normal, x0, "mala", config.kd_draws, config.kd_warmup, 1, keep_draws=False,
                       observables=OBSERVABLES)
    start = time.perf_counter()
    samples = call()
    out["first_call_s"] = time.perf_counter() - start
    start = time.perf_counter()
    samples = call()
    out["second_call_s"] = time.perf_counter() - start
    out["positions_is_none"] = samples.positions is None
    out["acceptance"] = float(np.mean(samples.acceptance_rate))
    out["converged"] = bool(samples.verdict.converged)
    accuracy = []
    for name, truth in OBSERVABLE_TRUTH.items():
        observed = samples.observables[name]
        for index in range(2):
            mean, mcse = float(observed.mean[index]), float(observed.mcse[index])
            z = (mean - truth) / mcse
            accuracy.append({"observable": f"{name}[{index}]", "truth": truth, "mean": mean, "mcse": mcse, "z": z,
                             "num_batches": int(observed.num_batches), "pass": abs(z) <= MCSE_SIGMAS})
    out["accuracy"] = accuracy

    log(f"keep_draws=False: MCSE vs the spread of {config.spread_runs} runs of {config.spread_chains} chains x "
        f"{config.spread_draws} draws")
    x0 = np.asarray(jax.random.normal(jax.random.key(2), (config.spread_chains, 2), jnp.float32))
    means = {f"{name}[{i}]": [] for name in OBSERVABLE_TRUTH for i in range(2)}
    mcses = {key: [] for key in means}
    for run in range(config.spread_runs):
        samples = jaxprobe.sample(1000 + run, standard_normal, x0, sampler="mala", num_samples=config.spread_draws,
                                  num_warmup=config.kd_warmup, progress=False, convergence="ignore",
                                  keep_draws=False, observables=OBSERVABLES)
        for name in OBSERVABLE_TRUTH:
            observed = samples.observables[name]
            for i in range(2):
                means[f"{name}[{i}]"].append(float(observed.mean[i]))
                mcses[f"{name}[{i}]"].append(float(observed.mcse[i]))
    spread = []
    for key in means:
        std = float(np.std(means[key], ddof=1))
        rms_mcse = float(np.sqrt(np.mean(np.square(mcses[key]))))
        spread.append({"observable": key, "std_of_means": std, "rms_mcse": rms_mcse, "ratio": std / rms_mcse,
                       "means": means[key], "mcses": mcses[key]})
    pooled = math.sqrt(np.mean([row["std_of_means"] ** 2 for row in spread])
                       / np.mean([row["rms_mcse"] ** 2 for row in spread]))
    out["spread"] = {"rows": spread, "pooled_ratio": pooled, "target_factor": MCSE_FACTOR,
                     "pass": 1 / MCSE_FACTOR <= pooled <= MCSE_FACTOR,
                     "num_runs": config.spread_runs, "num_chains": config.spread_chains,
                     "num_samples": config.spread_draws}
    log(f"  spread/MCSE pooled {pooled:.2f}")
    return PROGRESS.put("keep_draws", out)


# ------------------------------------------------------------------ output


def fastest_phases(row: dict[str, Any]) -> dict[str, float]:
    """The phases of the fastest timed sample() call (the call whose time the min ratio uses)."""
    return min(row["phases"], key=lambda spent: spent["total"])


def verdict_word(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def segments_note(results: dict[str, Any]) -> str:
    segments = results.get("segments") or []
    if len(segments) <= 1:
        return ""
    parts = "; ".join(f"{seg['date']}: {seg.get('seconds', 0) / 60:.1f} min, load {seg['load_before'][0]:.2f} → "
                      f"{seg.get('load_after', [float('nan')])[0]:.2f}" for seg in segments)
    return (f" The run was resumed ({len(segments)} processes, `--resume`: the earlier ones were killed "
            f"part-way; each unit is from one process): {parts}.")


def memory_fit(rows: list[dict[str, Any]]) -> tuple[float, float] | None:
    """Least-squares ``peak = slope × draws + intercept`` over the sample rows with thin = 1 (≥ 2 sizes)."""
    points = [(row["draws_bytes"], row["peak_kb"] * 1024.0) for row in rows if row["kind"] == "sample"
              and row["thin"] == 1]
    if len({x for x, _ in points}) < 2:
        return None
    slope, intercept = np.polyfit(*zip(*points), 1)
    return float(slope), float(intercept)


def code_line(results: dict[str, Any]) -> str:
    code = results.get("code", {})
    start, end = code.get("start", {}), code.get("end", {})
    line = (f"jaxprobe at commit {start.get('commit', '?')}"
            + (f" with uncommitted changes to {len(start['changed'])} file(s)" if start.get("changed") else
               " (no uncommitted changes)")
            + f", code hash {start.get('jaxprobe_sha256', '?')}")
    if end and end.get("jaxprobe_sha256") != start.get("jaxprobe_sha256"):
        line += (f". **The code changed during the run** (hash at the end {end.get('jaxprobe_sha256')}, commit "
                 f"{end.get('commit')}): this process measured the code at the start, the memory children the code "
                 "at the time each started.")
    return line + "."


def _header_section(results: dict[str, Any]) -> list[str]:
    """Title, the run's circumstances (date, machine, versions, code, load) and the timing protocol."""
    config = results["config"]
    load = results["load_average"]
    lines = ["# The answer at the engine's speed: `jaxprobe.sample` end to end vs the limit", "",
             f"{results['date']} · {results['machine']['cpu_model']} ({results['machine']['cpu_count']} cores) · "
             f"jax {results['versions']['jax']}, blackjax {results['versions']['blackjax']}, "
             f"jaxprobe {results['versions']['jaxprobe']}"
             + (" · **--quick (smoke run, not representative)**" if results["quick"] else ""), "",
             code_line(results), "",
             f"Load average (1/5/15 min) before: {' / '.join(f'{v:.2f}' for v in load['before'])}; after: "
             f"{' / '.join(f'{v:.2f}' for v in load['after'])}. "
             + throughput.load_banner(results) + segments_note(results), "",
             f"Target: MLP probe {config['dim']}→{HIDDEN}→{HIDDEN}→1, G = (f(x) − 0.5)², τ = {TEMPERATURE}, "
             f"N(0, I) prior, float32. Every timed call uses seed {SEED}; candidates of one row are called in one loop whose order "
             f"rotates each repetition ({config['repetitions']} repetitions after an untimed first call that "
             "compiles); ratio = min time / min time, (in brackets) the median over repetitions of the ratio "
             "within one repetition, and the same with process CPU time (the stable figure when the machine is "
             "shared).", ""]
    return lines


def _mala_table(results: dict[str, Any]) -> list[str]:
    """Section 1's main table: every MALA row's ``sample`` time against the limit's, with the same-work checks."""
    config = results["config"]
    lines = ["## 1. `sample()` (MALA) vs the limit", "",
             f"*sample*: `jaxprobe.sample(seed, logdensity, x0, sampler=\"mala\", num_samples={config['num_samples']}, "
             f"num_warmup={config['num_warmup']}, thin=thin, progress=False, convergence=\"ignore\")`, end to end: "
             "validation, warmup with adaptation (per-chain step sizes), the chunks, every draw copied to host "
             "arrays, the verdict. *limit*: `jax.jit` of `engine.init` → `engine.warmup(…, "
             f"{config['num_warmup']})` → `engine.run(…, {config['num_samples']}, thin)` returning the trace, then "
             "`np.asarray` of the draws (zero-copy on CPU), with the keys `sample` derives from the same seed: "
             "the same transitions (the *identical draws* column compares the first 32 chains of both). "
             f"Target: ratio ≤ {RATIO_TARGET}.", "",
             "| C | thin | limit s | sample s | ratio | (median paired) | (CPU) | target | | acceptance | identical "
             "draws |", "|---:|---:|---:|---:|---:|---:|---:|---:|:---:|---:|---:|"]
    for row in results["mala"]:
        lines.append(f"| {row['num_chains']} | {row['thin']} | {row['reference_seconds']:.3f} | {row['seconds']:.3f} "
                     f"| {row['ratio']:.3f} | {row['median_paired_ratio']:.3f} | {row['median_paired_cpu_ratio']:.3f} "
                     f"| ≤ {RATIO_TARGET} | {verdict_word(row['ratio'] <= RATIO_TARGET)} | "
                     f"{row['acceptance_sample']:.3f} | {row['same_work']['identical_draw_fraction']:.3f} |")
    return lines


def _phases_table(results: dict[str, Any]) -> list[str]:
    """Where ``sample()``'s time goes: the fastest call split into ``api.sample``'s steps, beside the limit's
    split estimated by transitions."""
    lines = ["", "### Where `sample()`'s time goes", "",
             "The fastest timed call (the one the min ratio uses), seconds, split into the steps of `api.sample` "
             "(each ends synchronized with the device): checks (`_validate`), placing the chains + `init` (`_place`), warmup (`_adapt_or_resume`: "
             "the adaptation; one chunk with progress=False), the sampling (`_run_chunks`: with progress=False on one "
             "CPU device one chunk, its every draw folded into the verdict's statistics, the draws written into the "
             "buffer that becomes the result), the host end (`_result`); *other* = "
             "the rest of the call. The limit's split is an estimate by transitions.", "",
             "| C | thin | checks | place + init | warmup | sampling chunks | host end | other | sample | limit | "
             "limit warmup (est.) | limit sampling (est.) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in results["mala"]:
        phases = fastest_phases(row)
        limit_warmup = row["limit_warmup_estimate_s"]
        lines.append(f"| {row['num_chains']} | {row['thin']} | " + " | ".join(
            f"{phases[name]:.3f}" for name in (*PHASES, "other", "total"))
            + f" | {row['reference_seconds']:.3f} | {limit_warmup:.3f} | "
              f"{row['reference_seconds'] - limit_warmup:.3f} |")
    return lines


def _verdict_share_table(results: dict[str, Any]) -> list[str]:
    """The verdict's share of ``sample()``'s time: the fold inside the scan plus the host end."""
    config = results["config"]
    lines = ["", "### The verdict's share", "",
             "The verdict costs (a) folding every kept draw into its statistics inside the scan and (b) the host "
             "end. (a) is measured on one chunk (`ceil(N/20)` draws, `sample`'s default) of the program `sample` "
             "runs (`core.run_monitored` jitted as `sample` runs it, draws written into donated buffers) against "
             "`core.run` on the same chunk, state and buffers (interleaved, "
             f"up to {config['fold_repetitions']} repetitions, as many as fit in {FOLD_SECONDS:.0f} s, at least 9): "
             "the median over repetitions of the two calls' difference "
             "within one repetition, times the number of chunks. (b) is `api._result` "
             "(finalize, rank statistics of the ≤ 4096-value subset, the verdict, the `Samples`), timed inside "
             "the timed `sample` calls (median). Share = (a + b) / sample time. Target ≤ "
             f"{100 * VERDICT_SHARE_TARGET:.0f}%.", "",
             "| C | thin | chunk run s | chunk run_monitored s | fold ratio of minima (median paired, CPU) | fold s/run | "
             "host end s | verdict s | share | |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|"]
    for row in results["mala"]:
        fold = row["fold"]
        lines.append(f"| {row['num_chains']} | {row['thin']} | {fold['run_chunk_s']:.4f} | "
                     f"{fold['monitored_chunk_s']:.4f} | {fold['fold_ratio']:.3f} "
                     f"({fold['fold_median_paired_ratio']:.3f}, {fold['fold_median_paired_cpu_ratio']:.3f}) | "
                     f"{fold['fold_per_run_s']:.3f} | {np.median(row['result_s']):.4f} | {row['verdict_s']:.3f} | "
                     f"{100 * row['verdict_share']:.1f}% | {verdict_word(row['verdict_share'] <= VERDICT_SHARE_TARGET)} |")
    return lines


def _samplers_section(results: dict[str, Any]) -> list[str]:
    """Section 2: HMC, NUTS and ChEES against BlackJAX or the engine limit."""
    lines = ["", "## 2. Other samplers", "",
             f"HMC ({HMC_STEPS} leapfrog steps) and NUTS against BlackJAX: step size {HMC_STEP_SIZE} fixed on both "
             "sides, identity mass matrix, the warmup is burn-in (nothing adapted, nothing kept); BlackJAX's kernel "
             "`jax.vmap`ped over chains in a jitted `lax.scan` keeping every draw, per-chain keys "
             "`split(fold_in(key, t), C)` from the keys `sample` derives (jaxprobe's kernels wrap the same BlackJAX "
             "kernels, so the trajectories match up to the reproducible metric's rounding). ChEES and NUTS "
             "against the limit: adaptation on both sides (the engine's `warmup` in one jit). *per grad* = ratio "
             "× reference gradient evaluations / jaxprobe's (where the work differs).", "",
             "| sampler | C | against | warmup + draws | reference s | sample s | ratio | (median paired) | (CPU) | "
             "per grad | grad evals (sample / ref) | acceptance (sample / ref) | identical draws | target | |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|"]
    for row in results["samplers"]:
        lines.append(f"| {row['sampler']} | {row['num_chains']} | {row['against']} | {row['num_warmup']} + "
                     f"{row['num_samples']} | {row['reference_seconds']:.3f} | {row['seconds']:.3f} | "
                     f"{row['ratio']:.3f} | {row['median_paired_ratio']:.3f} | {row['median_paired_cpu_ratio']:.3f} | "
                     f"{row['time_per_grad_ratio']:.3f} | {row['grad_evals_sample']:,} / {row['grad_evals_reference']:,} "
                     f"| {row['acceptance_sample']:.3f} / {row['acceptance_reference']:.3f} | "
                     f"{row['same_work']['identical_draw_fraction']:.3f} | ≤ {RATIO_TARGET} | "
                     f"{verdict_word(row['ratio'] <= RATIO_TARGET)} |")
    return lines


def _memory_section(results: dict[str, Any]) -> list[str]:
    """Section 3: each configuration's peak resident memory against its kept draws' bytes, and the fitted cost
    per byte (empty when the memory figures were not measured)."""
    if not results.get("memory"):
        return []
    lines = ["", "## 3. Peak resident memory", "",
             "Each figure in a fresh subprocess that makes the call twice (the first result freed before the "
             "second). *Peak*: `resource.getrusage(RUSAGE_SELF).ru_maxrss` at the end of the child; *baseline*: the "
             "same child with `num_samples=20` (the runtime, the compiled programs). *The second call's rise*: "
             "before the second call the child returns its heap's free memory to the system (glibc's "
             "`malloc_trim`) and resets its peak to its resident size (`/proc/self/clear_refs`), so the rise of "
             "the peak over that size is what the call itself holds at once, with no other process's start-up in "
             "it. Draws = C × N × (d + 1) × 4 bytes. Target: (rise − the 20-draw child's rise) / draws ≤ "
             f"{MEMORY_TARGET}, where the rise is measured (else (peak − baseline) / draws). Why the rise: the "
             "cross-child difference also holds how much two fresh processes differ before any call (the children's "
             "`rss_before_second_kb` in the JSON: repeats of one child differ by 10-20 MB, their rises by less "
             "than 1 MB). *limit* rows are the limit's own "
             "figures (its trace on the device, read zero-copy), for reference. Each child is started through a "
             "small launcher process: on Linux a child spawned directly inherits its parent's resident size into "
             "`ru_maxrss` (this process holds gigabytes after section 1).", "",
             "| call | C | thin | draws MB | peak MB | baseline MB | (peak − baseline) / draws | rise MB "
             "(20 draws) | (rise − 20-draw rise) / draws | target | |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|"]
    for row in results["memory"]:
        rise = "–" if row.get("rise_ratio") is None else (
            f"{row['rise_kb'] / 1024:.0f} ({row['baseline_rise_kb'] / 1024:.1f}) | {row['rise_ratio']:.3f}")
        lines.append(f"| {row['kind']} | {row['num_chains']} | {row['thin']} | {row['draws_bytes'] / MB:.0f} | "
                     f"{row['peak_kb'] / 1024:.0f} | {row['baseline_kb'] / 1024:.0f} | {row['ratio']:.3f} | "
                     f"{rise if row.get('rise_ratio') is not None else '– | –'} | "
                     f"≤ {MEMORY_TARGET} | {verdict_word(row['pass']) if row['kind'] == 'sample' else '–'} |")
    fit = memory_fit(results["memory"])
    if fit is not None:
        lines += ["", f"Fitted over the sample rows with thin = 1: peak = {fit[0]:.3f} × draws + "
                      f"{fit[1] / MB:.0f} MB (the slope is what each byte of kept draws costs; at small C the "
                      "difference to the 20-draw baseline is dominated by the programs compiled for the longer "
                      "run's chunk length, not by the draws)."]
    return lines


def _keep_draws_section(results: dict[str, Any]) -> list[str]:
    """Section 4's run without draws: its memory against the same run with 20 draws, its means against the truth."""
    kd = results["keep_draws"]
    lines = ["", f"## 4. `keep_draws=False`: {kd['num_chains']} chains × {kd['num_samples']:,} draws, 2-D standard "
                 "normal, MALA", "",
             f"`sample(..., num_warmup={kd['num_warmup']}, keep_draws=False, observables={{\"x\": x, \"x2\": x²}})`: "
             f"second call {kd['second_call_s']:.2f} s, acceptance {kd['acceptance']:.3f}, positions None: "
             f"{kd['positions_is_none']}.", ""]
    if "memory" in kd:
        memory = kd["memory"]
        lines += ["| peak MB (N draws) | peak MB (20 draws) | difference MB | draws if kept MB | target | |",
                  "|---:|---:|---:|---:|---:|:---:|",
                  f"| {memory['peak_kb'] / 1024:.0f} | {memory['baseline_kb'] / 1024:.0f} | "
                  f"{memory['difference_mb']:+.0f} | {memory['kept_draws_would_be_mb']:.0f} | ≤ "
                  f"{KEEP_DRAWS_FALSE_TARGET_MB:.0f} MB | {verdict_word(memory['pass'])} |", ""]
    lines += [f"Observables' means against the truth (target |z| ≤ {MCSE_SIGMAS:.0f}, z = (mean − truth) / MCSE):", "",
              "| observable | truth | mean | MCSE | z | batches | |", "|---|---:|---:|---:|---:|---:|:---:|"]
    for row in kd["accuracy"]:
        lines.append(f"| {row['observable']} | {row['truth']:g} | {row['mean']:.5f} | {row['mcse']:.5f} | "
                     f"{row['z']:+.2f} | {row['num_batches']} | {verdict_word(row['pass'])} |")
    return lines


def _mcse_spread_table(results: dict[str, Any]) -> list[str]:
    """Section 4's reported MCSE against the spread of the means over independent runs."""
    spread = results["keep_draws"]["spread"]
    lines = ["", f"Reported MCSE against the spread of the means over {spread['num_runs']} independent runs "
                 f"({spread['num_chains']} chains × {spread['num_samples']:,} draws, seeds 1000…): ratio = standard "
                 f"deviation of the means / RMS of the reported MCSEs (target within a factor {MCSE_FACTOR}, on the "
                 "pooled ratio over the four quantities; each single ratio from 10 runs scatters by about ±24%).", "",
             "| observable | std of means | RMS MCSE | ratio |", "|---|---:|---:|---:|"]
    for row in spread["rows"]:
        lines.append(f"| {row['observable']} | {row['std_of_means']:.5f} | {row['rms_mcse']:.5f} | {row['ratio']:.2f} |")
    lines.append(f"| **pooled** | | | **{spread['pooled_ratio']:.2f}** {verdict_word(spread['pass'])} |")
    return lines


def _summary_section(results: dict[str, Any]) -> list[str]:
    """Every check's verdict, the total time and the command."""
    lines = ["", "## Summary", ""]
    for check, ok in results["summary"].items():
        lines.append(f"- {check}: **{verdict_word(ok)}**")
    lines += ["", f"Total {results['total_seconds'] / 60:.1f} min. Command: `{results['command']}`", ""]
    return lines


def markdown(results: dict[str, Any]) -> str:
    """The report of a run, one part per section, from the results JSON alone (``--render`` writes it again)."""
    sections = (_header_section, _mala_table, _phases_table, _verdict_share_table, _samplers_section,
                _memory_section)
    if results.get("keep_draws") is not None:  # a partial run (e.g. a GPU session cut at its time limit) has none
        sections += (_keep_draws_section, _mcse_spread_table)
    if results.get("summary") is not None:
        sections += (_summary_section,)
    return "\n".join(line for section in sections for line in section(results))


def summary(results: dict[str, Any]) -> dict[str, bool]:
    out = {}
    for row in results["mala"]:
        out[f"MALA C={row['num_chains']} thin={row['thin']}: sample ≤ {RATIO_TARGET}× the limit "
            f"({row['ratio']:.2f})"] = row["ratio"] <= RATIO_TARGET
    for row in results["samplers"]:
        out[f"{row['sampler']} C={row['num_chains']}: sample ≤ {RATIO_TARGET}× {row['against']} "
            f"({row['ratio']:.2f})"] = row["ratio"] <= RATIO_TARGET
    for row in results["mala"]:
        out[f"MALA C={row['num_chains']} thin={row['thin']}: verdict ≤ {100 * VERDICT_SHARE_TARGET:.0f}% of the run "
            f"({100 * row['verdict_share']:.1f}%)"] = row["verdict_share"] <= VERDICT_SHARE_TARGET
    for row in results.get("memory") or []:
        if row["kind"] == "sample":
            judged = (f"{row['ratio']:.2f}" if row.get("rise_ratio") is None else
                      f"{row['rise_ratio']:.2f}: the second call's rise")
            out[f"memory C={row['num_chains']} thin={row['thin']}: ≤ {MEMORY_TARGET}× draws + constant "
                f"({judged})"] = row["pass"]
    kd = results["keep_draws"]
    if kd is None:  # another d: section 4's 2-D target is the default run's
        return out
    if "memory" in kd:
        out[f"keep_draws=False within {KEEP_DRAWS_FALSE_TARGET_MB:.0f} MB of 20 draws "
            f"({kd['memory']['difference_mb']:+.0f} MB)"] = kd["memory"]["pass"]
    out[f"observables within {MCSE_SIGMAS:.0f} MCSE of the truth"] = all(r["pass"] for r in kd["accuracy"])
    out[f"MCSE within {MCSE_FACTOR}× of the runs' spread (pooled)"] = kd["spread"]["pass"]
    return out


def _parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    """The command line: sizes and sections of the run, resuming, re-rendering, and the memory children's entry."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run of about a minute")
    parser.add_argument("--out", default=None, help="output folder (default: benchmarks/results; with --quick a "
                                                    "scratch folder unless --out is given)")
    parser.add_argument("--chains", default=None, help="comma-separated chain counts of section 1 (default "
                                                       "256,2048,16384; 65536 needs about 15 GB of RAM)")
    parser.add_argument("--thin10-max-chains", type=int, default=None,
                        help="thin=10 rows up to this many chains (default 2048: each costs 10x the transitions)")
    parser.add_argument("--repetitions", type=int, default=None, help="interleaved repetitions (default 5)")
    parser.add_argument("--dim", type=int, default=None,
                        help=f"the probe's input dimension (default {DIM}); another writes answer_speed.dD.json/.md")
    parser.add_argument("--no-memory", action="store_true", help="skip the subprocess memory measurements")
    parser.add_argument("--sections", default="mala,samplers,memory,keep_draws",
                        help="comma-separated subset of mala,samplers,memory,keep_draws (development)")
    parser.add_argument("--resume", default=None, metavar="FILE",
                        help="keep finished units in FILE and skip them when the same command is run again (a run "
                             "killed part-way on a shared machine resumes; load averages are kept per segment)")
    parser.add_argument("--render", default=None, metavar="JSON",
                        help="only write the markdown again from a results JSON (beside it)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _render_again(path: str) -> dict[str, Any]:
    """``--render``: the markdown written again beside a results JSON (and printed), nothing measured."""
    with open(path) as stream:
        results = json.load(stream)
    table = markdown(results)
    write_atomically(os.path.splitext(path)[0] + ".md", table)
    print(table)
    return results


def _configure(args: argparse.Namespace) -> tuple[Config, set[str]]:
    """The sizes (:data:`QUICK` or :data:`FULL`, with the command line's overrides) and the sections to run."""
    global DIM
    if args.dim is not None:
        if args.dim < 1:
            raise SystemExit(f"--dim must be a positive integer, got {args.dim}")
        DIM = args.dim
    config = QUICK if args.quick else FULL
    if args.chains:
        config = dataclasses.replace(config, chains=tuple(int(c) for c in args.chains.split(",")))
    if args.thin10_max_chains is not None:
        config = dataclasses.replace(config, thin10_max_chains=args.thin10_max_chains)
    if args.repetitions:
        config = dataclasses.replace(config, repetitions=args.repetitions)
    sections = set(args.sections.split(","))
    if args.no_memory or "memory" not in sections:
        config = dataclasses.replace(config, memory=False)
    return config, sections


def _run_record(args: argparse.Namespace, config: Config) -> dict[str, Any]:
    """The results' opening entries: when, how launched, the machine and versions, the configuration and
    targets, the load and the code measured (so that every figure can be read in its circumstances)."""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "quick": args.quick, "machine": throughput.machine(), "versions": throughput.versions(),
        "config": dataclasses.asdict(config) | {"dim": DIM, "hidden": HIDDEN, "temperature": TEMPERATURE,
                                                "seed": SEED, "hmc_step_size": HMC_STEP_SIZE,
                                                "hmc_integration_steps": HMC_STEPS},
        "targets": {"ratio": RATIO_TARGET, "verdict_share": VERDICT_SHARE_TARGET, "memory": MEMORY_TARGET,
                    "keep_draws_false_mb": KEEP_DRAWS_FALSE_TARGET_MB, "mcse_sigmas": MCSE_SIGMAS,
                    "mcse_factor": MCSE_FACTOR},
        "load_average": {"before": list(os.getloadavg())},
        "code": {"start": code_state()},
    }


def _run_sections(config: Config, sections: set[str], results: dict[str, Any]) -> None:
    """Every section asked for, into ``results``; memory first: a child inherits its parent's peak RSS into
    ru_maxrss at exec, so the children are spawned while this process is small."""
    restore_phases = install_phase_timers()
    try:
        results["memory"] = memory_section(config) if config.memory else []
        _, logdensity = make_target()
        results["mala"] = mala_section(config, logdensity) if "mala" in sections else []
        results["samplers"] = samplers_section(config, logdensity) if "samplers" in sections else []
        results["keep_draws"] = keep_draws_section(config) if "keep_draws" in sections else None
    finally:
        restore_phases()


def _close_segments(results: dict[str, Any], other_work: throughput.OtherWork) -> None:
    """The run's date, load and other work over all its segments (a resumed run has several), and its total
    time, into ``results``."""
    segments = results["segments"] = PROGRESS.get("segments")
    if len(segments) > 1:  # resumed: the whole run's figures over its segments
        results["date"] = segments[0]["date"]
        results["load_average"]["before"] = segments[0]["load_before"]
        busy = sum(seg["other_work_cores"] * seg["seconds"] for seg in segments if seg["other_work_cores"] is not None)
        results["other_work_cores"] = busy / sum(seg["seconds"] for seg in segments)
    if len(segments) == 1:
        results["other_work_cores"] = other_work.cores()
    results["total_seconds"] = sum(seg["seconds"] for seg in segments)


def _write_results(results: dict[str, Any], out_dir: str) -> None:
    """``answer_speed.json`` and ``.md`` (with the summary) into ``out_dir`` (``answer_speed.dD.*`` for another
    d than the default, which needs no section 4: its 2-D target does not depend on d), or only
    ``answer_speed[.dD].partial.json`` when section 1 (or, at the default d, 4) did not run."""
    name = "answer_speed" if results["config"]["dim"] == 50 else f"answer_speed.d{results['config']['dim']}"
    if not results["mala"] or (results["keep_draws"] is None and results["config"]["dim"] == 50):
        write_atomically(os.path.join(out_dir, f"{name}.partial.json"), json.dumps(results, indent=2) + "\n")
        log(f"partial run: wrote {out_dir}/{name}.partial.json only")
        return
    results["summary"] = summary(results)
    write_atomically(os.path.join(out_dir, f"{name}.json"), json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    write_atomically(os.path.join(out_dir, f"{name}.md"), table)
    print(table)
    log(f"done in {results['total_seconds']:.0f} s; wrote {out_dir}/{name}.json and {name}.md")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark (or a memory child, or ``--render``) and write its results; returns them."""
    args = _parse_arguments(argv)
    if args.child is not None:
        child_main(json.loads(args.child))
        return {}
    if args.render is not None:
        return _render_again(args.render)
    config, sections = _configure(args)
    # `jaxprobe bench` points JAXPROBE_BENCH_RESULTS at a scratch folder unless --record is given.
    out_dir = args.out or os.environ.get("JAXPROBE_BENCH_RESULTS") or (
        tempfile.mkdtemp(prefix="answer_speed-quick-") if args.quick else results_dir())
    results = _run_record(args, config)
    other_work = throughput.OtherWork()
    global PROGRESS
    PROGRESS = Progress(args.resume, {"config": results["config"], "code": results["code"]["start"]["jaxprobe_sha256"]})
    PROGRESS.start_segment(results["date"], other_work)
    _run_sections(config, sections, results)
    results["load_average"]["after"] = list(os.getloadavg())
    results["code"]["end"] = code_state()
    PROGRESS.put("finished", True)
    _close_segments(results, other_work)
    _write_results(results, out_dir)
    return results


if __name__ == "__main__":
    main()
