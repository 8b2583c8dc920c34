"""First-call (compile) time of every jaxprobe sampler against BlackJAX's own and NumPyro's, in one process.

What is timed: the *first call* of a whole run — warmup (adaptation) of C chains for W steps, then N kept draws
per chain — on a target no program of that pipeline has seen: JAX's persistent compilation cache is off and
``jax.clear_caches()`` empties every in-memory cache (jit, tracing, lowering, eager-op programs) before each
measurement, so each first call traces, lowers and compiles everything it runs, then runs it once. The same
pipeline is then called again with another seed (the *warm* call: no compiling expected), so
first − warm ≈ the cost of compiling. JAX's own monitoring events (``jax.monitoring``) time each program's
tracing, lowering to MLIR and XLA compile, by program name; they give the per-program tables and the
duplicates (a program compiled more than once in one call).

Same work on every side: C chains, W warmup steps, N draws, float32, the same starting points, the same log
density function, the step-size/mass-matrix adaptation each sampler's defaults call for:

- jaxprobe: ``jaxprobe.sample(seed, logdensity, init, sampler=S, num_warmup=W, num_samples=N, progress=False)``
  (the registry's samplers, ``known_kernels()``; SMC with ``reference=`` the standard-normal prior). It compiles
  an init program, the adaptation's init / update (one per warmup chunk length) / final programs, one sampling
  program per chunk length, and small eager programs (key splits, parameter broadcasts, buffers).
- BlackJAX (its own pieces, each side jitted as a BlackJAX user would, warmup and sampling as two
  ``jax.jit`` programs over all chains: the fewest it can be run with short of fusing both phases):
  mala / rwmh: ``blackjax.mala`` / ``additive_step_random_walk.normal_random_walk`` steps vmapped over chains,
  with ``blackjax.adaptation.step_size.dual_averaging_adaptation`` per chain during warmup (BlackJAX's window
  adaptation needs a mass matrix, which these kernels lack; jaxprobe's warmup of them is the same per-chain
  dual averaging); hmc / nuts: ``blackjax.window_adaptation(blackjax.hmc | blackjax.nuts)`` vmapped over chains
  (Stan's windows, diagonal mass matrix, as jaxprobe), then the kernel's ``step`` in a ``lax.scan``; chees:
  ``blackjax.chees_adaptation(..., mass_matrix_estimation="diagonal")`` with ``optax.adam(0.025)`` (jaxprobe's
  ChEES re-implements exactly this), then ``blackjax.dynamic_hmc`` with the adapted parameters; smc:
  ``blackjax.adaptive_tempered_smc`` (MALA moves, 10 per stage, target ESS 0.5, systematic resampling, in a
  ``lax.while_loop`` to λ = 1) then its particles as MALA chains as in the mala row (jaxprobe's SMC adds
  particle groups and per-stage tuning; both then run W + N MALA steps).
- jaxprobe fast: the same call with ``numerics="fast"`` (plain ``jax.random``, ``jnp.sum`` and BlackJAX's
  pieces instead of the batch-invariance devices; the default on GPUs), where this version has the switch.
- NumPyro: ``MCMC(NUTS | HMC(num_steps=10, trajectory_length=None), num_warmup=W, num_samples=N, num_chains=C,
  chain_method="vectorized")`` on ``potential_fn = −logdensity`` (its own windowed adaptation; one program for
  warmup and sampling, which it compiles again on every ``run``).

Reported per sampler: the minimum over repetitions (the order of the libraries rotates every repetition) of the
first-call wall time and process CPU time (all threads: on a shared machine it counts the work done, not the
waiting for a core), the warm-call time, XLA compile seconds, tracing and lowering seconds (union of the
events' time spans) and the programs compiled; ratio = jaxprobe first call / BlackJAX first call (target ≤ 1.2).
Then, for jaxprobe only (``--no-investigate`` skips it): every program compiled more than once in one call with
JAX's explanation of the cache miss (``jax_explain_cache_misses``), and what a second call compiles when the
seed, or the number of draws / warmup steps, changes.

Run: python -m jaxprobe.bench.compile [--quick [--record]] [--out DIR] [--repetitions K]
                                                [--samplers mala,nuts] [--targets gaussian,logistic]
Default: full sizes, both targets, every sampler, 4 repetitions, writes benchmarks/results/compile.{json,md}
(or ``$JAXPROBE_BENCH_RESULTS``); ``--quick`` (mala and rwmh on the Gaussian, tiny sizes, one repetition, no
NumPyro, no investigation) writes to a scratch folder unless ``--record``. The machine may be shared: the load
average is recorded; compare the ratios, measured side by side.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import gc
import importlib.metadata
import inspect
import json
import logging
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.bench import results_dir
import jaxprobe
from jaxprobe._compiles import STAGES  # JAX's compile events, named by stage
from jaxprobe._io import atomic_write
from jaxprobe.engine.api import compiled_program_count
from jaxprobe.engine.registry import known_kernels

try:  # which engine is measured: the commit when the modules were imported, and whether the tree had changes
    GIT_AT_IMPORT = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                                   cwd=os.path.dirname(os.path.abspath(__file__)), timeout=10).stdout.strip() or None
except (OSError, subprocess.SubprocessError):
    GIT_AT_IMPORT = None
from jaxprobe.priors import StandardNormal

# `jaxprobe bench` points this at a scratch folder unless --record is given.
RESULTS = results_dir()
FULL = {"chains": 16, "warmup": 200, "samples": 200, "repetitions": 4}
QUICK = {"chains": 8, "warmup": 20, "samples": 20, "repetitions": 1}
QUICK_SAMPLERS = ("mala", "rwmh")
TARGET_RATIO = 1.2
SMC_OPTIONS = {"num_mcmc_steps": 10, "target_ess": 0.5}
NUMPYRO_SAMPLERS = ("nuts", "hmc")
HMC_STEPS = 10
CHEES_LEARNING_RATE = 0.025


# ------------------------------------------------------------------ targets (module-level: hashable, reusable)

GAUSSIAN_DIM = 10
GAUSSIAN_MEAN = np.linspace(-1.0, 1.0, GAUSSIAN_DIM).astype(np.float32)
GAUSSIAN_SCALE = np.geomspace(0.5, 2.0, GAUSSIAN_DIM).astype(np.float32)


def gaussian_logdensity(x):
    """N(m, diag(s²)), m = linspace(−1, 1, 10), s = geomspace(0.5, 2, 10)."""
    z = (x - GAUSSIAN_MEAN) / GAUSSIAN_SCALE
    return -0.5 * jnp.sum(z * z)


_rng = np.random.default_rng(20260501)
LOGISTIC_FEATURES = _rng.standard_normal((200, 5)).astype(np.float32)
_LOGISTIC_TRUE = np.array([0.5, -1.0, 0.8, 0.0, 1.5, -0.3], np.float32)
LOGISTIC_LABELS = (_rng.uniform(size=200) < 1 / (1 + np.exp(-(LOGISTIC_FEATURES @ _LOGISTIC_TRUE[1:]
                                                              + _LOGISTIC_TRUE[0])))).astype(np.float32)


def logistic_logdensity(w):
    """Bayesian logistic regression, 200 × 5 synthetic features + intercept (D = 6), N(0, I) prior."""
    logits = w[0] + jnp.sum(LOGISTIC_FEATURES * w[1:], axis=1)
    return (jnp.sum(LOGISTIC_LABELS * logits - jax.nn.softplus(logits)) - 0.5 * jnp.sum(w * w))


TARGETS = {
    "gaussian": {"logdensity": gaussian_logdensity, "dim": GAUSSIAN_DIM,
                 "title": "10-D Gaussian N(m, diag(s²)), m = linspace(−1, 1), s = geomspace(0.5, 2)"},
    "logistic": {"logdensity": logistic_logdensity, "dim": 6,
                 "title": "logistic regression posterior, 200 synthetic points × 5 features + intercept (D = 6), "
                          "N(0, I) prior"},
}


def standard_normal_logpdf(x):
    return -0.5 * jnp.sum(x * x) - 0.5 * x.shape[-1] * math.log(2 * math.pi)


# ------------------------------------------------------------------ compile accounting (jax.monitoring)


class _Recorder:
    """Collects JAX's compile events (tracing, lowering, XLA compile) with their program names and time spans."""

    def __init__(self):
        self.events = []
        jax.monitoring.register_event_time_span_listener(self._span)

    def _span(self, event, start, end, **kwargs):
        kind = STAGES.get(event)
        if kind is not None:
            self.events.append((kind, str(kwargs.get("fun_name", "?")), start, end))

    def mark(self) -> int:
        return len(self.events)

    def summary(self, mark: int) -> dict:
        events = self.events[mark:]
        out = {}
        for kind in ("tracing", "lowering", "compile"):
            spans = sorted((s, e) for k, _, s, e in events if k == kind)
            total, end = 0.0, -math.inf  # union of spans: nested traces are not counted twice
            for s, e in spans:
                if e > end:
                    total += e - max(s, end)
                    end = e
            out[f"{kind}_seconds"] = total
        programs = collections.defaultdict(lambda: {"count": 0, "compile_seconds": 0.0, "lowering_seconds": 0.0})
        for kind, name, s, e in events:
            name = name[4:-1] if name.startswith("jit(") and name.endswith(")") else name
            if kind == "compile":
                programs[name]["count"] += 1
                programs[name]["compile_seconds"] += e - s
            elif kind == "lowering":
                programs[name]["lowering_seconds"] += e - s
        out["programs"] = sum(p["count"] for p in programs.values())
        out["program_list"] = dict(sorted(programs.items(), key=lambda item: -item[1]["compile_seconds"]))
        return out


RECORDER = None


def _fresh():
    """Empty every in-memory JAX cache, so the next call compiles everything it runs."""
    jax.clear_caches()
    gc.collect()


def measure(build, seed_first=0, seed_warm=1) -> dict:
    """First call (compiles) and warm call of ``build()``'s pipeline, with the compile events of each."""
    _fresh()
    call = build()
    mark = RECORDER.mark()
    start, cpu_start = time.perf_counter(), time.process_time()
    call(seed_first)
    first, first_cpu = time.perf_counter() - start, time.process_time() - cpu_start
    first_events = RECORDER.summary(mark)
    mark = RECORDER.mark()
    start, cpu_start = time.perf_counter(), time.process_time()
    call(seed_warm)
    warm, warm_cpu = time.perf_counter() - start, time.process_time() - cpu_start
    warm_events = RECORDER.summary(mark)
    row = {"first_seconds": first, "warm_seconds": warm, "first_minus_warm_seconds": first - warm,
           "first_cpu_seconds": first_cpu, "warm_cpu_seconds": warm_cpu,
           **{key: value for key, value in first_events.items()},
           "warm_programs": warm_events["programs"], "warm_compile_seconds": warm_events["compile_seconds"]}
    if warm_events["programs"]:
        row["warm_program_list"] = warm_events["program_list"]
    return row


# ------------------------------------------------------------------ the pipelines


def jaxprobe_pipeline(target, sampler, sizes, init, numerics=None):
    def build():
        kwargs = dict(sampler=sampler, num_samples=sizes["samples"], num_warmup=sizes["warmup"], progress=False,
                      convergence="ignore")
        if numerics is not None:
            kwargs["numerics"] = numerics
        if sampler == "smc":
            kwargs.update(reference=StandardNormal(event_shape=(target["dim"],)), sampler_options=dict(SMC_OPTIONS))

        def call(seed):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = jaxprobe.sample(seed, target["logdensity"], init, **kwargs)
            assert np.all(np.isfinite(result.positions))
        return call
    return build


def _dual_averaging_pipeline(target, sizes, init, make_step, make_init, step_size0, acceptance_target):
    """BlackJAX kernel + BlackJAX's dual averaging per chain (warmup), then the kernel (sampling)."""
    from blackjax.adaptation.step_size import dual_averaging_adaptation

    logdensity = target["logdensity"]
    num_warmup, num_samples = sizes["warmup"], sizes["samples"]
    da_init, da_update, da_final = dual_averaging_adaptation(acceptance_target)

    @jax.jit
    def warmup(key, positions):
        states = jax.vmap(lambda p: make_init(p, logdensity))(positions)
        da = jax.vmap(da_init)(jnp.full((positions.shape[0],), step_size0, positions.dtype))

        def body(carry, key):
            states, da = carry
            step_size = jnp.exp(da.log_step_size)
            keys = jax.random.split(key, positions.shape[0])
            states, info = jax.vmap(lambda k, s, e: make_step(e)(k, s, logdensity))(keys, states, step_size)
            da = jax.vmap(da_update)(da, info.acceptance_rate)
            return (states, da), None

        (states, da), _ = jax.lax.scan(body, (states, da), jax.random.split(key, num_warmup))
        return states, jax.vmap(da_final)(da)

    @jax.jit
    def sample(key, states, step_size):
        def body(states, key):
            keys = jax.random.split(key, step_size.shape[0])
            states, _ = jax.vmap(lambda k, s, e: make_step(e)(k, s, logdensity))(keys, states, step_size)
            return states, (states.position, states.logdensity)
        return jax.lax.scan(body, states, jax.random.split(key, num_samples))[1]

    def run(seed, positions):
        key_warmup, key_sample = jax.random.split(jax.random.key(seed))
        states, step_size = warmup(key_warmup, positions)
        return jax.block_until_ready(sample(key_sample, states, step_size))
    return run


def blackjax_mala_run(target, sizes, init):
    import blackjax
    kernel = blackjax.mala.build_kernel()
    return _dual_averaging_pipeline(
        target, sizes, init, lambda step_size: (lambda k, s, f: kernel(k, s, f, step_size)), blackjax.mala.init,
        0.1 * target["dim"] ** (-1.0 / 3.0), 0.574)


def blackjax_rwmh_run(target, sizes, init):
    import blackjax
    walk = blackjax.additive_step_random_walk

    def make_step(sigma):
        return lambda k, s, f: walk.normal_random_walk(f, sigma).step(k, s)
    return _dual_averaging_pipeline(target, sizes, init, make_step, lambda p, f: walk.init(p, f),
                                    2.38 / target["dim"] ** 0.5 * 0.5, 0.234)


def blackjax_window_run(target, sizes, init, algorithm):
    import blackjax
    logdensity = target["logdensity"]
    extra = {"num_integration_steps": HMC_STEPS} if algorithm == "hmc" else {}
    family = getattr(blackjax, algorithm)
    adaptation = blackjax.window_adaptation(family, logdensity, target_acceptance_rate=0.8, initial_step_size=0.1,
                                            **extra)

    @jax.jit
    def warmup(keys, positions):
        (states, parameters), _ = jax.vmap(lambda k, p: adaptation.run(k, p, num_steps=sizes["warmup"]))(
            keys, positions)
        return states, parameters

    @jax.jit
    def sample(key, states, parameters):
        def one_chain(key, state, params):
            step = family(logdensity, **params).step  # params: step size, mass matrix (and hmc's step count)

            def body(state, key):
                state, _ = step(key, state)
                return state, (state.position, state.logdensity)
            return jax.lax.scan(body, state, jax.random.split(key, sizes["samples"]))[1]
        return jax.vmap(one_chain)(jax.random.split(key, init.shape[0]), states, parameters)

    def run(seed, positions):
        key_warmup, key_sample = jax.random.split(jax.random.key(seed))
        states, parameters = warmup(jax.random.split(key_warmup, positions.shape[0]), positions)
        return jax.block_until_ready(sample(key_sample, states, parameters))
    return run


def blackjax_chees_run(target, sizes, init):
    import blackjax
    import optax
    logdensity = target["logdensity"]
    num_chains = init.shape[0]
    adaptation = blackjax.chees_adaptation(logdensity, num_chains, mass_matrix_estimation="diagonal")
    functions = {}

    @jax.jit
    def warmup(key, positions):
        (states, parameters), _ = adaptation.run(key, positions, 0.1, optax.adam(CHEES_LEARNING_RATE),
                                                 num_steps=sizes["warmup"], max_sampling_steps=sizes["samples"])
        # The jitter and step-count functions are plain Python closures (no traced values): kept for sampling.
        functions.update(next_random_arg_fn=parameters["next_random_arg_fn"],
                         integration_steps_fn=parameters["integration_steps_fn"])
        return states, parameters["step_size"], parameters["inverse_mass_matrix"], \
            parameters["integration_steps_params"]

    @jax.jit
    def sample(key, states, step_size, inverse_mass_matrix, steps_params):
        step = blackjax.dynamic_hmc(logdensity, step_size, inverse_mass_matrix, integration_steps_params=steps_params,
                                    **functions).step

        def body(states, key):
            states, _ = jax.vmap(step)(jax.random.split(key, num_chains), states)
            return states, (states.position, states.logdensity)
        return jax.lax.scan(body, states, jax.random.split(key, sizes["samples"]))[1]

    def run(seed, positions):
        key_warmup, key_sample = jax.random.split(jax.random.key(seed))
        warmed = warmup(key_warmup, positions)
        return jax.block_until_ready(sample(key_sample, *warmed))
    return run


def blackjax_smc_run(target, sizes, init):
    import blackjax
    from blackjax.smc import resampling
    from blackjax.smc.base import extend_params

    logdensity = target["logdensity"]
    dim = target["dim"]

    def tilt(x):
        return logdensity(x) - standard_normal_logpdf(x)

    smc = blackjax.adaptive_tempered_smc(standard_normal_logpdf, tilt, blackjax.mala.build_kernel(),
                                         blackjax.mala.init, extend_params({"step_size": dim ** (-1.0 / 3.0)}),
                                         resampling.systematic, target_ess=SMC_OPTIONS["target_ess"],
                                         num_mcmc_steps=SMC_OPTIONS["num_mcmc_steps"])

    @jax.jit
    def tempering(key, particles):
        def not_done(carry):
            return (carry[1].tempering_param < 1.0) & (carry[2] < 200)

        def stage(carry):
            key, state, count = carry
            key, subkey = jax.random.split(key)
            state, _ = smc.step(subkey, state)
            return key, state, count + 1
        _, state, _ = jax.lax.while_loop(not_done, stage, (key, smc.init(particles), jnp.zeros((), jnp.int32)))
        return state.particles

    chains = blackjax_mala_run(target, sizes, init)

    def run(seed, positions):
        key_reference, key_tempering = jax.random.split(jax.random.key(seed + 1000))
        particles = jax.random.normal(key_reference, positions.shape, positions.dtype)
        return chains(seed, tempering(key_tempering, particles))
    return run


def blackjax_pipeline(target, sampler, sizes, init):
    makers = {"mala": blackjax_mala_run, "rwmh": blackjax_rwmh_run, "chees": blackjax_chees_run,
              "smc": blackjax_smc_run,
              "hmc": lambda t, s, i: blackjax_window_run(t, s, i, "hmc"),
              "nuts": lambda t, s, i: blackjax_window_run(t, s, i, "nuts")}
    if sampler not in makers:
        return None

    def build():
        run = makers[sampler](target, sizes, init)
        positions = jnp.asarray(init)
        return lambda seed: run(seed, positions)
    return build


def numpyro_pipeline(target, sampler, sizes, init):
    if sampler not in NUMPYRO_SAMPLERS:
        return None
    try:
        from numpyro.infer import HMC, MCMC, NUTS
    except ImportError:
        return None
    logdensity = target["logdensity"]

    def build():
        def potential(x):
            return -logdensity(x)
        # HMC: a fixed number of leapfrog steps and an adapted step size (trajectory_length=None: with both
        # given NumPyro would not adapt the step size).
        kernel = (NUTS(potential_fn=potential) if sampler == "nuts" else
                  HMC(potential_fn=potential, num_steps=HMC_STEPS, trajectory_length=None))
        mcmc = MCMC(kernel, num_warmup=sizes["warmup"], num_samples=sizes["samples"], num_chains=init.shape[0],
                    chain_method="vectorized", progress_bar=False)
        positions = jnp.asarray(init)

        def call(seed):
            mcmc.run(jax.random.key(seed), init_params=positions)
            jax.block_until_ready(mcmc.get_samples())
        return call
    return build


LIBRARIES = {"jaxprobe": jaxprobe_pipeline, "blackjax": blackjax_pipeline, "numpyro": numpyro_pipeline}
# jaxprobe with numerics="fast" (plain JAX and BlackJAX pieces, no batch-invariance devices) where this version
# has the switch; the "jaxprobe" row runs the platform's default (reproducible on CPU).
HAS_NUMERICS = "numerics" in inspect.signature(jaxprobe.sample).parameters
if HAS_NUMERICS:
    LIBRARIES["jaxprobe-fast"] = lambda target, sampler, sizes, init: jaxprobe_pipeline(target, sampler, sizes, init,
                                                                                         numerics="fast")


# ------------------------------------------------------------------ the investigation (jaxprobe only)


class _MissLog(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        message = record.getMessage()
        if "CACHE MISS" in message:
            self.messages.append(message)


def _duplicates(program_list: dict) -> dict:
    return {name: row for name, row in program_list.items() if row["count"] > 1}


def _miss_reasons(messages: list[str], names: list[str]) -> dict:
    """JAX's explanation of each cache miss of a program compiled more than once (the 'differ' lines)."""
    reasons = {}
    for name in names:
        for message in messages:
            if f"for {name} defined" in message and "differ" in message:
                lines = [line.strip() for line in message.splitlines() if line.strip().startswith("*")
                         or "differ" in line]
                reasons.setdefault(name, []).append(" ".join(lines)[:600])
    return reasons


def investigate(targets, samplers, sizes, init_for, log) -> dict:
    """Per sampler: the programs of a first call with explanations of repeated compiles; then what further
    calls compile (same settings and a new seed; a draw count / warmup length that does not split evenly)."""
    handler = _MissLog()
    logger = logging.getLogger("jax")
    logger.addHandler(handler)
    found = {}
    try:
        jax.config.update("jax_explain_cache_misses", True)
        for target_name in targets:
            target = TARGETS[target_name]
            for sampler in samplers:
                handler.messages.clear()
                row = measure(jaxprobe_pipeline(target, sampler, sizes, init_for(target)))
                duplicates = _duplicates(row["program_list"])
                reasons = _miss_reasons(handler.messages, list(duplicates))
                # A name compiled again with JAX's explanation of the miss is one function recompiled; eager
                # operations (broadcast_in_dim, convert_element_type, …) share a name across shapes.
                recompiled = {name: d for name, d in duplicates.items() if name in reasons}
                found[f"{target_name}/{sampler}"] = {
                    "programs": row["programs"], "compile_seconds": row["compile_seconds"],
                    "first_seconds": row["first_seconds"], "duplicates": duplicates, "recompiled": recompiled,
                    "eager_programs_sharing_a_name": {name: d["count"] for name, d in duplicates.items()
                                                      if name not in reasons},
                    "duplicate_compile_seconds": sum(d["compile_seconds"] * (d["count"] - 1) / d["count"]
                                                     for d in recompiled.values()),
                    "reasons": reasons,
                    "engine_programs_after_first_call": compiled_program_count(),
                    "warm_programs": row["warm_programs"]}
                log(f"  investigate {target_name}/{sampler}: {row['programs']} programs, duplicates "
                    f"{ {k: v['count'] for k, v in duplicates.items()} }")
        # Chunk lengths are static: a draw count or warmup length that is not a multiple of the chunk adds programs.
        target = TARGETS[targets[0]]
        scenarios = {}
        for label, samples, warmup in (("divisible", sizes["samples"], sizes["warmup"]),
                                       ("uneven", sizes["samples"] + 7, sizes["warmup"] + 7)):
            row = measure(jaxprobe_pipeline(target, "mala", dict(sizes, samples=samples, warmup=warmup),
                                            init_for(target)))
            scenarios[label] = {"num_samples": samples, "num_warmup": warmup, "first_seconds": row["first_seconds"],
                                "programs": row["programs"], "compile_seconds": row["compile_seconds"],
                                "chunk_programs": {name: p["count"] for name, p in row["program_list"].items()
                                                   if name.startswith(("_run_chunk", "_adapt_update"))}}
        # A second call that changes only the number of draws: its chunk programs compile again.
        _fresh()
        jaxprobe_pipeline(target, "mala", sizes, init_for(target))()(0)
        mark = RECORDER.mark()
        start = time.perf_counter()
        jaxprobe_pipeline(target, "mala", dict(sizes, samples=2 * sizes["samples"]), init_for(target))()(1)
        seconds = time.perf_counter() - start
        summary = RECORDER.summary(mark)
        scenarios["second_call_twice_the_draws"] = {
            "seconds": seconds, "programs": summary["programs"], "compile_seconds": summary["compile_seconds"],
            "program_list": {name: p["count"] for name, p in summary["program_list"].items()}}
        log(f"  scenarios: { {k: v.get('programs') for k, v in scenarios.items()} }")
    finally:
        jax.config.update("jax_explain_cache_misses", False)
        logger.removeHandler(handler)
    return {"samplers": found, "scenarios": scenarios}


# ------------------------------------------------------------------ report


def _fmt(value, digits=2):
    return "–" if value is None else f"{value:.{digits}f}"


def _header_lines(result: dict) -> list[str]:
    """The title and the paragraph saying what was run where and what each column means."""
    sizes = result["sizes"]
    return ["# First-call (compile) time: jaxprobe vs BlackJAX and NumPyro", "",
            f"Command: `{result['command']}`; {result['date']}; {result['machine']}; jaxprobe {result.get('git')} "
            f"(default numerics on this platform: {result.get('jaxprobe_numerics')}); jax {result['jax']}, "
            f"BlackJAX {result['versions'].get('blackjax')}, NumPyro {result['versions'].get('numpyro')}; "
            f"load average at the start {result['load_average_start']}, at the end {result['load_average_end']}."
            + (" **--quick: smoke run**" if result["quick"] else ""), "",
            f"Every pipeline: {sizes['chains']} chains, {sizes['warmup']} warmup (adaptation) steps, "
            f"{sizes['samples']} kept draws per chain, float32, the same starting points and log density. "
            f"*first*: wall time of the first call with every JAX cache emptied (trace + lower + compile + one "
            f"run); *CPU*: the process CPU time of that call (all threads; on a shared machine it counts the work "
            f"done, not the time spent waiting for a core, and scatters far less); *warm*: the same call again "
            f"with another seed; *XLA*: seconds in XLA's compiler "
            f"(jax.monitoring); *programs*: programs compiled by the first call (eager-op programs included). "
            f"Minimum over {sizes['repetitions']} repetition(s), libraries in rotating order. "
            f"Ratio = jaxprobe first / BlackJAX first, CPU ratio the same in CPU time (target ≤ {TARGET_RATIO}). "
            f"What each side compiles: "
            "see the script's docstring.", ""]


def _sampler_row(sampler: str, rows: dict) -> str:
    """One sampler's row of a target's table: every library's first-call, CPU, warm, XLA and program figures."""
    jp, bj, npy = rows.get("jaxprobe"), rows.get("blackjax"), rows.get("numpyro")
    ratio, cpu_ratio = rows.get("ratio"), rows.get("cpu_ratio")
    fast = rows.get("jaxprobe-fast")
    verdict = "–" if ratio is None else " / ".join("yes" if r <= TARGET_RATIO else "**no**"
                                                     for r in (ratio, cpu_ratio))
    return (
        f"| {sampler} | {_fmt(jp and jp['first_seconds'])} | {_fmt(bj and bj['first_seconds'])} | "
        f"{_fmt(ratio)} | {_fmt(jp and jp['first_cpu_seconds'])} | {_fmt(bj and bj['first_cpu_seconds'])} | "
        f"{_fmt(cpu_ratio)} | {verdict} | "
        + (f"{_fmt(fast['first_seconds'])} / {_fmt(fast['first_cpu_seconds'])} / "
           f"{_fmt(rows.get('fast_cpu_ratio'))}" if fast else "–") + " | "
        + (f"{_fmt(npy['first_seconds'])} / {_fmt(npy['first_cpu_seconds'])}" if npy else "–") + " | "
        f"{_fmt(jp and jp['warm_seconds'])} / {_fmt(bj and bj['warm_seconds'])} | "
        f"{_fmt(jp and jp['compile_seconds'])} / {_fmt(bj and bj['compile_seconds'])} / "
        f"{_fmt(npy and npy['compile_seconds'])} | "
        f"{jp['programs'] if jp else '–'} / {bj['programs'] if bj else '–'} / "
        f"{npy['programs'] if npy else '–'} |")


def _target_table(target: dict) -> list[str]:
    """A target's section heading and its table of the libraries side by side, one row per sampler."""
    lines = [f"## {target['title']}", "",
             "| sampler | jaxprobe first (s) | BlackJAX first (s) | ratio | jaxprobe CPU (s) | BlackJAX CPU (s) "
             "| CPU ratio | ≤ 1.2× (wall / CPU) | jaxprobe fast: first (s) / CPU (s) / CPU ratio "
             "| NumPyro first (s) / CPU (s) | warm (s) jaxprobe / BlackJAX "
             "| XLA (s) jaxprobe / BlackJAX / NumPyro "
             "| programs jaxprobe / BlackJAX / NumPyro |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for sampler, rows in target["samplers"].items():
        lines.append(_sampler_row(sampler, rows))
    lines.append("")
    return lines


def _program_lines(target: dict) -> list[str]:
    """The list of jaxprobe's programs per sampler of a target: the slow ones by name, the small ones summed."""
    lines = ["jaxprobe's programs (first call of the fastest repetition; XLA seconds, × times compiled):", ""]
    for sampler, rows in target["samplers"].items():
        if rows.get("jaxprobe"):
            programs = rows["jaxprobe"]["program_list"]
            big = [f"`{name}` {p['compile_seconds']:.2f}" + (f" (×{p['count']})" if p["count"] > 1 else "")
                   for name, p in programs.items() if p["compile_seconds"] >= 0.1]
            small = [p for p in programs.values() if p["compile_seconds"] < 0.1]
            lines.append(f"- {sampler}: " + ", ".join(big)
                         + (f"; {sum(p['count'] for p in small)} small programs "
                            f"{sum(p['compile_seconds'] for p in small):.2f} s" if small else ""))
    lines.append("")
    return lines


def _duplicates_table(investigation: dict) -> list[str]:
    """The investigation's table of the programs jaxprobe compiles more than once in one call, with JAX's reason."""
    lines = ["## Programs jaxprobe compiles more than once in one call", "",
             "A separate first call per sampler with `jax_explain_cache_misses` on. *Recompiled*: the same "
             "jitted function compiled again (JAX's reason quoted); eager operations that share a name across "
             "shapes (`broadcast_in_dim`, `convert_element_type`, `stage`, …) are counted apart.", "",
             "| target/sampler | programs | recompiled (× times) | XLA seconds of the extra compiles | "
             "eager ops sharing a name | JAX's reason |",
             "| --- | ---: | --- | ---: | --- | --- |"]
    for key, row in investigation["samplers"].items():
        recompiled = ", ".join(f"`{n}` ×{d['count']}" for n, d in row["recompiled"].items()) or "none"
        eager = ", ".join(f"{n} ×{c}" for n, c in row["eager_programs_sharing_a_name"].items()) or "–"
        reasons = "; ".join(r[0] for r in row["reasons"].values())[:260] or "–"
        lines.append(f"| {key} | {row['programs']} | {recompiled} | {row['duplicate_compile_seconds']:.2f} | "
                     f"{eager} | {reasons.replace('|', '/')} |")
    return lines


def _chunk_scenario_lines(scenarios: dict) -> list[str]:
    """The investigation's chunk-program scenarios: an uneven draw count or warmup length, then twice the draws."""
    lines = ["", "Chunk programs (mala, first target): chunk lengths are static arguments, so a draw count or "
             "warmup length that is not a multiple of the chunk length compiles one more program each:", "",
             "| num_samples / num_warmup | first call (s) | programs | XLA (s) | chunk programs |",
             "| --- | ---: | ---: | ---: | --- |"]
    for label in ("divisible", "uneven"):
        s = scenarios[label]
        lines.append(f"| {s['num_samples']} / {s['num_warmup']} | {s['first_seconds']:.2f} | {s['programs']} | "
                     f"{s['compile_seconds']:.2f} | {json.dumps(s['chunk_programs'])} |")
    s = scenarios["second_call_twice_the_draws"]
    lines += ["", f"A second call with twice the draws (same target, sampler and chains) compiled "
              f"{s['programs']} program(s), {s['compile_seconds']:.2f} s of XLA ({s['seconds']:.2f} s in all): "
              f"{json.dumps(s['program_list'])}.", ""]
    return lines


def markdown(result: dict) -> str:
    """compile.md from the results: the header, each target's table and program list, then the investigation
    (when it ran)."""
    lines = _header_lines(result)
    for target in result["targets"].values():
        lines += _target_table(target) + _program_lines(target)
    investigation = result.get("investigation")
    if investigation:
        lines += _duplicates_table(investigation) + _chunk_scenario_lines(investigation["scenarios"])
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ main


def _log(message: str) -> None:
    """Progress on stderr, flushed at once (a run takes minutes)."""
    print(message, file=sys.stderr, flush=True)


def _argument_parser() -> argparse.ArgumentParser:
    """The command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="mala and rwmh, tiny sizes, a smoke run (scratch output)")
    parser.add_argument("--record", action="store_true", help="with --quick: write into --out anyway")
    parser.add_argument("--out", default=None, help=f"output folder (default {RESULTS})")
    parser.add_argument("--repetitions", type=int, default=None)
    parser.add_argument("--samplers", default=None, help="comma-separated (default: every registered sampler)")
    parser.add_argument("--targets", default=None, help=f"comma-separated of {', '.join(TARGETS)}")
    parser.add_argument("--no-investigate", action="store_true", help="skip the duplicate/chunk investigation")
    parser.add_argument("--no-numpyro", action="store_true")
    return parser


def _plan(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[dict, list[str], list[str], list[str]]:
    """Sizes, samplers, targets and libraries the options ask for; a usage error for an unknown sampler or
    target, before anything is timed."""
    sizes = dict(QUICK if args.quick else FULL)
    if args.repetitions:
        sizes["repetitions"] = args.repetitions
    samplers = (args.samplers.split(",") if args.samplers
                else list(QUICK_SAMPLERS if args.quick else known_kernels()))
    unknown = [s for s in samplers if s not in known_kernels()]
    if unknown:
        parser.error(f"unknown sampler(s) {unknown}; known: {', '.join(known_kernels())}")
    targets = args.targets.split(",") if args.targets else (["gaussian"] if args.quick else list(TARGETS))
    if any(t not in TARGETS for t in targets):
        parser.error(f"targets must be among {', '.join(TARGETS)}")
    libraries = [name for name in LIBRARIES if not (name == "numpyro" and (args.no_numpyro or args.quick))]
    return sizes, samplers, targets, libraries


def _time_pipelines(targets: list[str], samplers: list[str], libraries: list[str], sizes: dict,
                    init_for: Callable[[dict], np.ndarray]) -> dict:
    """Every library's pipeline per target and sampler, each repetition in a rotated library order (so that no
    library always runs first): ``{target: {sampler: {library: [measured row per repetition]}}}``."""
    # One throwaway first call, so that no row pays the process's one-time costs (imports, first dispatch).
    measure(jaxprobe_pipeline(TARGETS["gaussian"], "mala", dict(sizes, warmup=2, samples=2),
                              init_for(TARGETS["gaussian"])))
    raw = {t: {s: {lib: [] for lib in libraries} for s in samplers} for t in targets}
    for repetition in range(sizes["repetitions"]):
        for target_name in targets:
            target = TARGETS[target_name]
            init = init_for(target)
            for index, sampler in enumerate(samplers):
                order = libraries[(repetition + index) % len(libraries):] + libraries[:(repetition + index)
                                                                                    % len(libraries)]
                for library in order:
                    build = LIBRARIES[library](target, sampler, sizes, init)
                    if build is None:
                        continue
                    row = measure(build)
                    row["load_average"] = round(os.getloadavg()[0], 1)
                    raw[target_name][sampler][library].append(row)
                    _log(f"rep {repetition} {target_name} {sampler:5s} {library:8s}: "
                         f"first {row['first_seconds']:6.2f} s "
                         f"(CPU {row['first_cpu_seconds']:6.2f} s),"
                         f" warm {row['warm_seconds']:5.2f} s, XLA {row['compile_seconds']:5.2f} s, "
                         f"{row['programs']} programs (warm call: {row['warm_programs']}), load {row['load_average']}")
    return raw


def _best_of_runs(runs_by_library: dict) -> dict:
    """One sampler's cell: per library the best repetition's figures (minimum over repetitions, the program
    list of the fastest first call), then the jaxprobe / BlackJAX ratios and whether they meet the target."""
    cell = {}
    for library, runs in runs_by_library.items():
        if not runs:
            continue
        best = min(runs, key=lambda r: r["first_seconds"])
        cell[library] = {
            "first_seconds": best["first_seconds"],
            "first_cpu_seconds": min(r["first_cpu_seconds"] for r in runs),
            "warm_seconds": min(r["warm_seconds"] for r in runs),
            "compile_seconds": min(r["compile_seconds"] for r in runs),
            "lowering_seconds": min(r["lowering_seconds"] for r in runs),
            "tracing_seconds": min(r["tracing_seconds"] for r in runs),
            "programs": best["programs"], "warm_programs": max(r["warm_programs"] for r in runs),
            "program_list": best["program_list"], "runs": runs}
    if "jaxprobe-fast" in cell and "blackjax" in cell:
        cell["fast_ratio"] = cell["jaxprobe-fast"]["first_seconds"] / cell["blackjax"]["first_seconds"]
        cell["fast_cpu_ratio"] = (cell["jaxprobe-fast"]["first_cpu_seconds"]
                                  / cell["blackjax"]["first_cpu_seconds"])
    if "jaxprobe" in cell and "blackjax" in cell:
        cell["ratio"] = cell["jaxprobe"]["first_seconds"] / cell["blackjax"]["first_seconds"]
        cell["cpu_ratio"] = cell["jaxprobe"]["first_cpu_seconds"] / cell["blackjax"]["first_cpu_seconds"]
        cell["compile_ratio"] = cell["jaxprobe"]["compile_seconds"] / cell["blackjax"]["compile_seconds"]
        cell["target_met"] = bool(cell["ratio"] <= TARGET_RATIO)
        cell["target_met_cpu"] = bool(cell["cpu_ratio"] <= TARGET_RATIO)
    return cell


def _summarise(raw: dict, targets: list[str], samplers: list[str]) -> dict:
    """The recorded ``targets`` part of the results: per target its title, dimension and sampler cells."""
    record = {}
    for target_name in targets:
        rows = {}
        for sampler in samplers:
            rows[sampler] = _best_of_runs(raw[target_name][sampler])
        record[target_name] = {"title": TARGETS[target_name]["title"], "dim": TARGETS[target_name]["dim"],
                               "samplers": rows}
    return record


def _package_versions() -> dict:
    """Installed versions of the peers and of jaxlib (None where one is not installed)."""
    versions = {}
    for package in ("jaxlib", "blackjax", "numpyro", "optax"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def _default_numerics_mode() -> str | None:
    """jaxprobe's default numerics on this platform, or None for a version without the switch."""
    try:
        from jaxprobe.engine.numerics import default_numerics
        return default_numerics()
    except ImportError:
        return None


def _write(result: dict, out: str) -> None:
    """compile.json and compile.md into ``out``, each written atomically."""
    os.makedirs(out, exist_ok=True)
    atomic_write(os.path.join(out, "compile.json"), lambda f: f.write(json.dumps(result, indent=1) + "\n"),
                 binary=False)
    atomic_write(os.path.join(out, "compile.md"), lambda f: f.write(markdown(result)), binary=False)
    _log(f"wrote {out}/compile.json and compile.md ({result['total_seconds']:.0f} s)")


def main(argv=None) -> dict:
    """Run the benchmark the options ask for, write compile.{json,md} and return the results."""
    global RECORDER
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _argument_parser()
    args = parser.parse_args(argv)
    sizes, samplers, targets, libraries = _plan(parser, args)
    investigate_too = not (args.quick or args.no_investigate)
    # A smoke run writes to a scratch folder, unless asked (--record) or given one ($JAXPROBE_BENCH_RESULTS, as
    # `jaxprobe bench` and the tests set it).
    scratch = args.quick and not args.record and not os.environ.get("JAXPROBE_BENCH_RESULTS")
    out = args.out or (tempfile.mkdtemp(prefix="compile-bench-") if scratch else RESULTS)

    jax.config.update("jax_enable_compilation_cache", False)  # no persistent cache: every first call compiles
    RECORDER = RECORDER or _Recorder()
    load_start = tuple(round(v, 1) for v in os.getloadavg())
    started = time.perf_counter()

    def init_for(target: dict) -> np.ndarray:
        """The same starting points for every library: C standard-normal rows of the target's dimension."""
        return np.random.default_rng(7).standard_normal((sizes["chains"], target["dim"])).astype(np.float32)

    raw = _time_pipelines(targets, samplers, libraries, sizes, init_for)
    record = _summarise(raw, targets, samplers)
    investigation = None
    if investigate_too:
        _log("investigating jaxprobe's programs")
        investigation = investigate(targets, samplers, sizes, init_for, _log)

    versions = _package_versions()
    device = jax.devices()[0]
    git = GIT_AT_IMPORT
    default_mode = _default_numerics_mode()
    result = {
        "command": "python -m jaxprobe.bench.compile" + (" " + " ".join(argv) if argv else ""),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
                   f"{device.platform} ({getattr(device, 'device_kind', '?')})",
        "jax": jax.__version__, "jaxprobe": jaxprobe.__version__, "git": git, "jaxprobe_numerics": default_mode,
        "versions": versions, "quick": args.quick,
        "sizes": sizes, "samplers": samplers, "libraries": libraries, "target_ratio": TARGET_RATIO,
        "smc_options": SMC_OPTIONS, "total_seconds": time.perf_counter() - started,
        "load_average_start": load_start, "load_average_end": tuple(round(v, 1) for v in os.getloadavg()),
        "targets": record, "investigation": investigation,
    }
    _write(result, out)
    return result


if __name__ == "__main__":
    main()
