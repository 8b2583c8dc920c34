#!/usr/bin/env python
"""Throughput and ESS benchmark of jaxprobe against a hand-written limit and peer libraries.

One process, one target for every row: a prediction-risky probe of a fixed
random MLP (30 → 64 → 64 → 1, tanh hidden, sigmoid output),
``G(x) = (f(x) − 0.5)²``, ``log p(x) = −G(x)/τ − ½|x|²`` with τ = 0.01, float32,
fixed step size for the throughput rows. Compile time is excluded everywhere
it can be (see the notes written into the results for where it cannot).

Sections
--------
1. Throughput (chain-steps/s) of jaxprobe MALA (the public ``core.run`` jitted as
   ``sample`` runs a chunk, ``RUN_CHUNK``), thin = 1 and thin = 10, same number of transitions, draws
   written into a donated trace buffer reused from call to call as ``sample`` reuses
   it from chunk to chunk; ``numerics="reproducible"``, the CPU default, and beside it
   thin = 1 in ``numerics="fast"``, plain ``jax.random`` and reductions) against
   "the limit": a jitted ``lax.scan`` doing one vmapped ``value_and_grad`` per
   chain per step plus the unadjusted Langevin update, noise drawn as one flat
   batched call per step.
2. Peers at the same C, step size and target: BlackJAX MALA, NumPyro HMC with one
   leapfrog step (its vectorized kernel in our own jitted scan, and
   ``MCMC.run(chain_method="vectorized")``), a hand-written PyTorch MALA, and
   "paper-style" MALA with two gradients per step.
3. ESS per second and per gradient evaluation of the adaptive samplers
   (``jaxprobe.sample``) against NumPyro NUTS, for ``x[0]`` and the probe output f(x).

One way to time a sampler: the limit is :func:`jaxprobe.benchmark.compare.limit_step` (the one
``jaxprobe.benchmark.compare`` times), the target is :func:`jaxprobe.benchmark.targets.mlp_probe`,
NumPyro's NUTS kernel runs through ``jaxprobe.benchmark``'s own harness
(:class:`~jaxprobe.benchmark.samplers.NumPyroNUTS` by :func:`~jaxprobe.benchmark.compare.run_program`),
ESS is jaxprobe's rank-normalized estimator (:func:`jaxprobe.engine.diagnostics.rank_diagnostics`), and
the machine and versions come from :mod:`jaxprobe.benchmark.report`. What stays here is what
``jaxprobe.benchmark`` does not measure: interleaved min-of-repetitions timing of fixed-step-size
programs side by side, the diagnostic rows, eager PyTorch, NumPyro's ``MCMC.run`` and
``jaxprobe.sample`` end to end (host copies included).

Timing protocol: all candidates of one C are built and compiled first, then
called in interleaved loops (the order rotates every repetition) and the
minimum over repetitions is kept, because the machine is shared and noisy:
one loop for jaxprobe, the limit and the diagnostic rows, then one for the
peers with jaxprobe thin=1 timed again beside them (PyTorch's spinning
threads and allocations would perturb the first). Ratios are always of times
measured side by side in one loop.

Usage::

    python -m jaxprobe.bench.throughput            # full run, several minutes
    python -m jaxprobe.bench.throughput --quick    # smoke run, small sizes
    python -m jaxprobe.bench.throughput --out DIR  # write results elsewhere
    python -m jaxprobe.bench.throughput --limit-only --chains 1024,8192 --repetitions 15
        # section 1 alone with CPU-time ratios and diagnostics -> results/throughput.limit.{json,md}
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import platform
import resource
import sys
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

import jaxprobe
from jaxprobe._compiles import Compiles
from jaxprobe._io import atomic_write
from jaxprobe.bench import results_dir
from jaxprobe.benchmark.compare import limit_step, run_program  # the one limit and harness every script times
from jaxprobe.benchmark.samplers import NumPyroNUTS
from jaxprobe.benchmark.report import environment, library_versions
from jaxprobe.benchmark.report import machine as report_machine
from jaxprobe.benchmark.targets import mlp_probe  # the benchmarks' one target model (a fixed random MLP)
from jaxprobe.engine import core, kernels
from jaxprobe.engine.diagnostics import rank_diagnostics

# ------------------------------------------------------------------ configuration

DIM = 30  # input dimension d of the MLP = dimension of the sampled position
HIDDEN = 64
TEMPERATURE = 0.01
STEP_SIZE = 0.05  # MALA step size ε of every throughput row
TARGET_SECONDS = 0.25  # each timed call of the limit lasts about this long (so ≥ ~0.2 s)
FAST_MODE = "jaxprobe mala thin=1, numerics=fast"
ACCEPT_ONLY = "mala, accept step only"
NOISE_AFTER_GRADIENT = "limit, noise after gradient"
LIMIT_UNROLLED = "limit, jaxprobe's generator"
DIAGNOSTICS = (ACCEPT_ONLY, NOISE_AFTER_GRADIENT, LIMIT_UNROLLED)
# Ratio targets jaxprobe-MALA-time / limit-time, by the smallest C they apply to.
RATIO_TARGETS = ((1024, 1.10), (64, 1.15), (1, 1.30))


@dataclasses.dataclass(frozen=True)
class Config:
    chain_counts: tuple[int, ...]
    repetitions: int
    target_seconds: float | None  # each calibrated call lasts about this long; None: small fixed step counts
    ess_warmup: int
    ess_samples: int
    ess_chains: int  # chains of the ESS rows compared with NumPyro (64 in the full run)
    ess_chains_large: int | None  # chains of the large ChEES row (None: no such row)


FULL = Config((1, 64, 1024, 8192), 9, TARGET_SECONDS, 500, 1000, 64, 512)
QUICK = Config((1, 64), 3, None, 100, 100, 16, None)  # smoke run: no calibration compiles


def ratio_target(num_chains: int) -> float:
    return next(limit for smallest, limit in RATIO_TARGETS if num_chains >= smallest)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ the target


# mlp_probe (imported above from jaxprobe.benchmark.targets): the benchmarks' one target model, defined once
# beside the benchmark targets built on it (mlp_probe_2d, mlp_probe_50d).


def make_target(seed: int = 0) -> tuple[dict[str, np.ndarray], Callable, Callable]:
    """``(weights, probe, logdensity)`` of :func:`mlp_probe` at d = ``DIM``, τ = ``TEMPERATURE``, N(0, I) prior.
    The same ``logdensity`` object is used by every JAX row, so that ``jaxprobe.sample`` reuses its compiled
    programs on a second call."""
    weights, probe, G = mlp_probe(DIM, HIDDEN, seed)
    return weights, probe, jaxprobe.gibbs(G, TEMPERATURE, jaxprobe.priors.StandardNormal())


def initial_positions(num_chains: int, seed: int = 1) -> jax.Array:
    """Draws from the standard-normal prior, shared by every row with this C."""
    return jax.random.normal(jax.random.key(seed), (num_chains, DIM), jnp.float32)


# ------------------------------------------------------------------ timing helpers


@dataclasses.dataclass
class Candidate:
    """One timed row: ``call()`` does ``steps`` transitions of C chains and blocks until done."""

    name: str
    num_chains: int
    steps: int
    call: Callable[[], Any]
    acceptance: Callable[[Any], float] | None = None  # from call()'s result, where it reports one
    times: list[float] = dataclasses.field(default_factory=list)
    cpu_times: list[float] = dataclasses.field(default_factory=list)  # process CPU time of the same calls
    acceptance_rate: float | None = None

    @property
    def seconds_per_step(self) -> float:
        return min(self.times) / self.steps

    @property
    def chain_steps_per_second(self) -> float:
        return self.num_chains / self.seconds_per_step


def measure_once(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def calibrate(build: Callable[[int], Callable[[], Any]], probe_steps: int, target_seconds: float | None,
              multiple: int = 10) -> int:
    """Number of steps (a multiple of ``multiple``) for which one call takes about ``target_seconds``.

    Builds the program at ``probe_steps`` (compiling it), times the second and third
    calls and scales. Rough on purpose: the final timing is the interleaved loop.
    """
    if target_seconds is None:  # smoke run: no calibration, a small fixed count
        return max(multiple, probe_steps // 10 // multiple * multiple)
    call = build(probe_steps)
    call()  # compile
    seconds = min(measure_once(call) for _ in range(2))
    steps = target_seconds / max(seconds / probe_steps, 1e-9)
    return max(multiple, int(math.ceil(steps / multiple)) * multiple)


def median_paired_ratio(candidate: Candidate, reference: Candidate, cpu: bool = False) -> float:
    """Median over repetitions of the per-step time ratio within one repetition: a noise check on the min ratio.

    ``cpu=True`` uses process CPU time instead of wall time: on a machine shared with
    other work, CPU time counts the work a call did and not the time it waited for a
    core, so its ratios scatter far less (but a program that overlaps work on several
    idle cores is not credited for it).
    """
    mine, theirs = (candidate.cpu_times, reference.cpu_times) if cpu else (candidate.times, reference.times)
    return float(np.median([(a / candidate.steps) / (b / reference.steps) for a, b in zip(mine, theirs)]))


def time_interleaved(candidates: list[Candidate], repetitions: int,
                     before_each: Callable[[], Any] | None = None) -> None:
    """Warm every candidate, then time them in one loop, rotating the order each repetition; ``before_each`` (untimed)
    runs before every timed call (``os.sync``: calls that write gigabytes each start with none of the previous
    calls' pages still to write back)."""
    for candidate in candidates:
        result = candidate.call()  # compile / warm caches outside the timed loop
        if candidate.acceptance is not None:
            candidate.acceptance_rate = float(candidate.acceptance(result))
        del result  # freed before the next candidate runs: one result at a time (65,536 chains' draws are 13 GB)
    for repetition in range(repetitions):
        shift = repetition % len(candidates)
        for candidate in candidates[shift:] + candidates[:shift]:
            if before_each is not None:
                before_each()
            cpu_start = time.process_time()
            candidate.times.append(measure_once(candidate.call))
            candidate.cpu_times.append(time.process_time() - cpu_start)


# ------------------------------------------------------------------ JAX candidates (all jitted lax.scan)


def build_limit(logdensity, x0, step_size, jaxprobe_generator: bool = False):
    """The limit: :func:`jaxprobe.benchmark.compare.limit_step` (the one definition ``jaxprobe.benchmark``
    times too: one vmapped value_and_grad per chain per step + the unadjusted Langevin update) in a jitted scan.

    Its noise is ``jax.random.normal`` (as the issue defines the limit), whose Threefry
    JAX lowers on CPU as a rolled loop. ``jaxprobe_generator=True`` is a diagnostic row:
    the same limit drawing its noise with jaxprobe's generator (``kernels.normal_and_uniform``:
    Threefry unrolled, two words per block, as jaxprobe's MALA draws them), so a reader
    can see how much of jaxprobe's ratio comes from the cheaper generator.
    """
    num_chains, dim = x0.shape
    limit = limit_step(logdensity, num_chains, dim, step_size, "jaxprobe" if jaxprobe_generator else "jax")

    def build(steps):
        @jax.jit
        def run(key, x):
            x, _ = jax.lax.scan(lambda x, t: (limit(key, x, t), None), x, jnp.arange(steps))
            return x

        key = jax.random.key(2)
        return lambda: jax.block_until_ready(run(key, x0))

    return build


def build_limit_noise_after_gradient(logdensity, x0, step_size):
    """Diagnostic: the limit with its noise draw made to wait for the gradient (same values).

    In the limit the noise of a step does not depend on its gradient, so XLA:CPU may
    run the two concurrently on two idle cores; in MALA the proposal needs the noise
    before its gradient. This row measures what that ordering costs the limit.
    """
    num_chains, dim = x0.shape
    value_and_grad = jax.vmap(jax.value_and_grad(logdensity))
    noise_scale = math.sqrt(2.0 * step_size)

    def build(steps):
        @jax.jit
        def run(key, x):
            def step(x, t):
                _, grad = value_and_grad(x)
                t_after = t + (grad[0, 0] > jnp.inf).astype(t.dtype)  # always t, known only after the gradient
                noise = jax.random.normal(jax.random.fold_in(key, t_after), (num_chains * dim,)).reshape(num_chains, dim)
                return x + step_size * grad + noise_scale * noise, None

            x, _ = jax.lax.scan(step, x, jnp.arange(steps))
            return x

        key = jax.random.key(2)
        return lambda: jax.block_until_ready(run(key, x0))

    return build


def build_accept_only_mala(logdensity, x0, step_size):
    """Diagnostic: exact MALA and nothing else (no stored draws, no statistics, no non-finite handling).

    The limit plus the Metropolis correction: the carried log density and gradient,
    one random-words call per step for the noise and the uniforms (jaxprobe's
    ``normal_and_uniform``), the proposal-density ratio (one reduction, as in
    ``kernels.MALA``) and three selects. Its
    ratio to the limit is the minimum cost of exactness in this implementation.
    """
    num_chains, dim = x0.shape
    value_and_grad = jax.vmap(jax.value_and_grad(logdensity))
    noise_scale = math.sqrt(2.0 * step_size)
    logdensity0, grad0 = jax.block_until_ready(value_and_grad(x0))

    def build(steps):
        @jax.jit
        def run(key, x, value, grad):
            def step(carry, t):
                x, value, grad = carry
                noise, uniform = kernels.normal_and_uniform(jax.random.fold_in(key, t), num_chains, dim, x.dtype)
                proposal = x + step_size * grad + noise_scale * noise
                proposal_value, proposal_grad = value_and_grad(proposal)
                summed_grad = grad + proposal_grad
                log_ratio = proposal_value - value - jnp.sum(
                    summed_grad * (0.25 * step_size * summed_grad + math.sqrt(0.5 * step_size) * noise), axis=-1)
                accept = jnp.log(uniform) < log_ratio
                keep = accept[:, None]
                return (jnp.where(keep, proposal, x), jnp.where(accept, proposal_value, value),
                        jnp.where(keep, proposal_grad, grad)), accept

            carry, accepted = jax.lax.scan(step, (x, value, grad), jnp.arange(steps))
            return carry, jnp.mean(accepted)

        key = jax.random.key(2)
        return lambda: jax.block_until_ready(run(key, x0, logdensity0, grad0))

    return build, lambda result: result[1]


#: One chunk of jaxprobe.sample as the user embeds it: core.run jitted, shapes static, the trace buffers donated.
RUN_CHUNK = jax.jit(core.run, static_argnames=("kernel", "logdensity_fn", "num_draws", "thin"),
                    donate_argnames=("trace",))


def build_jaxprobe_mala(logdensity, x0, step_size, thin, numerics="reproducible"):
    """jaxprobe MALA through the public functional core: ``jax.jit(core.run)`` with the trace donated (the
    program ``sample`` compiles for a chunk); every call starts from the same state.

    Each call writes its draws into the trace buffer the previous call returned (donated),
    as ``jaxprobe.sample`` does between chunks once a chunk's draws are copied out.
    ``numerics``: the kernel's numerics policy (:mod:`jaxprobe.engine.numerics`).
    """
    kernel = kernels.MALA(numerics=numerics)
    num_chains, dim = x0.shape
    parameters = core.default_parameters(kernel, num_chains, dim, jnp.float32, step_size=step_size)
    state0 = jax.block_until_ready(jax.jit(core.init, static_argnums=(0, 1))(kernel, logdensity, x0, parameters))

    def build(steps):
        if steps % thin:
            raise ValueError(f"steps={steps} is not a multiple of thin={thin}")
        key = jax.random.key(2)
        num_draws = steps // thin
        buffers = [core.Trace(jnp.zeros((num_draws, num_chains, dim), jnp.float32),
                              jnp.zeros((num_draws, num_chains), jnp.float32))]

        def call():
            result = jax.block_until_ready(
                RUN_CHUNK(key, state0, kernel, logdensity, num_draws, thin, buffers.pop()))
            buffers.append(result[1])
            return result

        return call

    def acceptance(result):
        _, _, stats = result
        return float(jnp.mean(stats.acceptance_rate_sum) / stats.num_steps)

    return build, acceptance


def build_blackjax_mala(logdensity, x0, step_size):
    """BlackJAX's MALA step vmapped over chains with per-chain keys (split per step) in a jitted scan."""
    import blackjax

    algorithm = blackjax.mala(logdensity, step_size)
    num_chains = x0.shape[0]
    state0 = jax.block_until_ready(jax.vmap(algorithm.init)(x0))
    vmapped_step = jax.vmap(algorithm.step)

    def build(steps):
        @jax.jit
        def run(key, state):
            def step(carry, _):
                key, state, acceptance_sum = carry
                key, subkey = jax.random.split(key)
                state, info = vmapped_step(jax.random.split(subkey, num_chains), state)
                return (key, state, acceptance_sum + info.acceptance_rate), None

            carry0 = (key, state, jnp.zeros((num_chains,), jnp.float32))
            (_, state, acceptance_sum), _ = jax.lax.scan(step, carry0, None, length=steps)
            return state, jnp.mean(acceptance_sum) / steps

        key = jax.random.key(2)
        return lambda: jax.block_until_ready(run(key, state0))

    return build, lambda result: result[1]


def build_paper_style(logdensity, x0, step_size):
    """MALA as the probing paper's code writes it: two gradients per step.

    Single chain (vmapped over chains for C > 1, for reference): each step
    recomputes value_and_grad at the current point, then at the proposal; keys
    are split per step from a key carried in the scan.
    """
    value_and_grad = jax.value_and_grad(logdensity)
    dim = x0.shape[1]

    def one_chain(key, x, steps):
        def log_q(to, frm, grad_frm):  # log q(to | from) up to a constant
            return -jnp.sum((to - frm - step_size * grad_frm) ** 2) / (4.0 * step_size)

        def step(carry, _):
            key, x, acceptance_sum = carry
            key, key_noise, key_accept = jax.random.split(key, 3)
            value, grad = value_and_grad(x)  # recomputed every step (the second gradient)
            proposal = x + step_size * grad + jnp.sqrt(2.0 * step_size) * jax.random.normal(key_noise, (dim,))
            proposal_value, proposal_grad = value_and_grad(proposal)
            log_ratio = proposal_value - value + log_q(x, proposal, proposal_grad) - log_q(proposal, x, grad)
            accept = jnp.log(jax.random.uniform(key_accept)) < log_ratio
            acceptance = jnp.exp(jnp.minimum(log_ratio, 0.0))
            return (key, jnp.where(accept, proposal, x), acceptance_sum + acceptance), None

        (_, x, acceptance_sum), _ = jax.lax.scan(step, (key, x, jnp.zeros(())), None, length=steps)
        return x, acceptance_sum / steps

    def build(steps):
        run = jax.jit(jax.vmap(lambda key, x: one_chain(key, x, steps)))
        keys = jax.random.split(jax.random.key(2), x0.shape[0])
        return lambda: jax.block_until_ready(run(keys, x0))

    return build, lambda result: jnp.mean(result[1])


def numpyro_potential(logdensity):
    return lambda x: -logdensity(x)


def make_numpyro_hmc(logdensity, step_size):
    """NumPyro HMC with ONE leapfrog step and no adaptation (= MALA with ε = h²/2).

    ``trajectory_length=None`` is needed: the default 2π trajectory would make
    the single step 2π long and nothing would be accepted.
    """
    from numpyro.infer import HMC

    return HMC(potential_fn=numpyro_potential(logdensity), step_size=step_size, num_steps=1,
               adapt_step_size=False, adapt_mass_matrix=False, trajectory_length=None)


def build_numpyro_kernel(logdensity, x0, leapfrog_step):
    """NumPyro's vectorized HMC kernel (batched ``init``, vmapped ``sample``) in our own jitted scan."""
    num_chains = x0.shape[0]
    hmc = make_numpyro_hmc(logdensity, leapfrog_step)  # a fresh object: batched init wraps sample in vmap
    # Batched (legacy uint32) keys make HMC.init vmap the init and the sample function over chains.
    state0 = jax.block_until_ready(
        hmc.init(jax.random.split(jax.random.PRNGKey(3), num_chains), num_warmup=0, init_params=x0,
                 model_args=(), model_kwargs={}))

    def build(steps):
        @jax.jit
        def run(state):
            state, _ = jax.lax.scan(lambda s, _: (hmc.sample(s, (), {}), None), state, None, length=steps)
            return state

        return lambda: jax.block_until_ready(run(state0))

    # mean_accept_prob is NumPyro's running mean over post-warmup iterations (all of them here).
    return build, lambda state: jnp.mean(state.mean_accept_prob)


def run_numpyro_mcmc(logdensity, x0, leapfrog_step, steps):
    """``numpyro.infer.MCMC(..., chain_method="vectorized").run`` wall time, first and second call.

    MCMC.run builds and compiles its program on every call, so the second call's
    wall time includes compilation; we count the backend compilations to show it.
    """
    from numpyro.infer import MCMC

    num_chains = x0.shape[0]
    mcmc = MCMC(make_numpyro_hmc(logdensity, leapfrog_step), num_warmup=0, num_samples=steps,
                num_chains=num_chains, chain_method="vectorized", progress_bar=False)
    walls, compiles = [], []
    for call in range(2):
        with Compiles() as compiling:
            start = time.perf_counter()
            # With one chain NumPyro expects unbatched initial parameters.
            mcmc.run(jax.random.PRNGKey(4 + call), init_params=x0 if num_chains > 1 else x0[0],
                     extra_fields=("accept_prob",))
            jax.block_until_ready(mcmc.get_samples())
            walls.append(time.perf_counter() - start)
        compiles.append((compiling.count, compiling.compile_seconds))
    return {
        "name": "numpyro MCMC.run (vectorized)",
        "num_chains": num_chains,
        "steps": steps,
        "first_call_s": walls[0],
        "second_call_s": walls[1],
        "second_call_compilations": compiles[1][0],
        "second_call_compile_s": compiles[1][1],
        "chain_steps_per_s": num_chains * steps / walls[1],
        "acceptance_rate": float(np.mean(mcmc.get_extra_fields()["accept_prob"])),
    }


# ------------------------------------------------------------------ PyTorch candidate


def build_torch_mala(weights, x0, step_size, num_threads):
    """Hand-written batched MALA in PyTorch (CPU, eager): one autograd gradient per step.

    The gradient at the current state is carried, like jaxprobe. Eager PyTorch
    has no compiled loop, so the steps are a Python loop — the way a PyTorch
    user would write it. ``num_threads`` is set at the start of every call: two
    rows (2 threads, as asked, and 1 thread) share the process, because on a
    loaded 2-core machine PyTorch's 2-thread OpenMP/MKL runs can slow down
    10-30x while the 1-thread runs stay stable.
    """
    import torch

    w = {name: torch.from_numpy(np.array(value)) for name, value in weights.items()}
    const = 0.5 * DIM * math.log(2.0 * math.pi)  # the normalizing constant of StandardNormal, for parity

    def logdensity(x):  # (C, D) -> (C,)
        h = torch.tanh(x @ w["w0"] + w["b0"])
        h = torch.tanh(h @ w["w1"] + w["b1"])
        f = torch.sigmoid(h @ w["w2"] + w["b2"])[:, 0]
        return -((f - 0.5) ** 2) / TEMPERATURE - 0.5 * (x * x).sum(-1) - const

    def value_and_grad(x):
        x = x.detach().requires_grad_(True)
        with torch.enable_grad():
            value = logdensity(x)
            (grad,) = torch.autograd.grad(value.sum(), x)
        return value.detach(), grad

    x_init = torch.from_numpy(np.array(x0))
    value_init, grad_init = value_and_grad(x_init)
    num_chains, dim = x_init.shape
    noise_scale = math.sqrt(2.0 * step_size)

    def build(steps):
        def run():
            torch.set_num_threads(num_threads)
            generator = torch.Generator().manual_seed(5)
            x, value, grad = x_init, value_init, grad_init
            acceptance_sum = torch.zeros(num_chains)
            with torch.no_grad():
                for _ in range(steps):
                    noise = torch.randn(num_chains, dim, generator=generator)
                    log_uniform = torch.rand(num_chains, generator=generator).log()
                    proposal = x + step_size * grad + noise_scale * noise
                    proposal_value, proposal_grad = value_and_grad(proposal)
                    reverse = x - proposal - step_size * proposal_grad
                    log_ratio = (proposal_value - value - (reverse * reverse).sum(-1) / (4.0 * step_size)
                                 + 0.5 * (noise * noise).sum(-1))
                    accept = log_uniform < log_ratio
                    acceptance_sum += torch.exp(torch.clamp(log_ratio, max=0.0))
                    keep = accept[:, None]
                    x = torch.where(keep, proposal, x)
                    value = torch.where(accept, proposal_value, value)
                    grad = torch.where(keep, proposal_grad, grad)
            return float(acceptance_sum.mean()) / steps

        return run

    return build, lambda result: result


# ------------------------------------------------------------------ section 1 + 2: throughput


def optional(name: str):
    """Import an optional peer; ``None`` (recorded as "not installed") when it is missing."""
    try:
        return __import__(name)
    except Exception as error:  # noqa: BLE001 - any import failure means the row is skipped
        log(f"{name} not available: {type(error).__name__}: {error}")
        return None


def probe_steps_for(num_chains: int) -> int:
    """Steps of the calibration call: long enough that dispatch overhead does not dominate."""
    return max(10, min(2000, 200_000 // num_chains))


def _own_candidates(logdensity: Callable, x0: jax.Array, num_chains: int, probe_steps: int,
                    target_seconds: float | None) -> list[Candidate]:
    """Section 1's rows at one C, all at the step count calibrated on the limit: the limit, jaxprobe MALA
    thin=1 and thin=10, thin=1 in numerics="fast", then the diagnostic rows."""
    limit_build = build_limit(logdensity, x0, STEP_SIZE)
    steps = calibrate(limit_build, probe_steps, target_seconds)
    candidates = [Candidate("limit", num_chains, steps, limit_build(steps))]
    for thin in (1, 10):
        build, acceptance = build_jaxprobe_mala(logdensity, x0, STEP_SIZE, thin)
        candidates.append(Candidate(f"jaxprobe mala thin={thin}", num_chains, steps, build(steps), acceptance))
    build, acceptance = build_jaxprobe_mala(logdensity, x0, STEP_SIZE, 1, numerics="fast")
    candidates.append(Candidate(FAST_MODE, num_chains, steps, build(steps), acceptance))
    build, acceptance = build_accept_only_mala(logdensity, x0, STEP_SIZE)
    candidates.append(Candidate(ACCEPT_ONLY, num_chains, steps, build(steps), acceptance))
    candidates.append(Candidate(NOISE_AFTER_GRADIENT, num_chains, steps,
                                build_limit_noise_after_gradient(logdensity, x0, STEP_SIZE)(steps)))
    candidates.append(Candidate(LIMIT_UNROLLED, num_chains, steps,
                                build_limit(logdensity, x0, STEP_SIZE, jaxprobe_generator=True)(steps)))
    return candidates


def _peer_builders(weights: dict[str, np.ndarray], logdensity: Callable, x0: jax.Array, num_chains: int,
                   leapfrog_step: float, have: dict[str, bool]) -> list[tuple[str, Any]]:
    """Section 2's ``(name, (build, acceptance))`` at one C: the installed peers, and paper-style MALA at
    C = 1 and 64."""
    peer_builders: list[tuple[str, Any]] = []
    if have["blackjax"]:
        peer_builders.append(("blackjax mala", build_blackjax_mala(logdensity, x0, STEP_SIZE)))
    if have["numpyro"]:
        peer_builders.append(("numpyro hmc(1 leapfrog) kernel",
                              build_numpyro_kernel(logdensity, x0, leapfrog_step)))
    if have["torch"]:
        for threads in (2, 1):
            peer_builders.append((f"pytorch mala (eager, {threads} thread{'s' if threads > 1 else ''})",
                                  build_torch_mala(weights, x0, STEP_SIZE, threads)))
    if num_chains in (1, 64):
        peer_builders.append(("paper-style mala (2 grads/step)" + (" vmapped" if num_chains > 1 else ""),
                              build_paper_style(logdensity, x0, STEP_SIZE)))
    return peer_builders


def _peer_candidates(peer_builders: list[tuple[str, Any]], num_chains: int, probe_steps: int,
                     target_seconds: float | None) -> tuple[list[Candidate], int | None]:
    """The peers as candidates, each with its own calibrated step count (so each call also lasts about
    ``target_seconds``), and NumPyro's step count (None without NumPyro), which its MCMC.run row reuses."""
    candidates, numpyro_steps = [], None
    for name, (build, acceptance) in peer_builders:
        peer_steps = calibrate(build, max(10, probe_steps // 4), target_seconds)
        if name.startswith("numpyro"):
            numpyro_steps = peer_steps
        candidates.append(Candidate(name, num_chains, peer_steps, build(peer_steps), acceptance))
    return candidates, numpyro_steps


def _time_own_then_peers(own: list[Candidate], peer_candidates: list[Candidate], num_chains: int, steps: int,
                         repetitions: int) -> tuple[dict[str, Candidate], Candidate]:
    """Time section 1's rows in one loop, then the peers beside a second timing of jaxprobe thin=1; returns
    section 1's candidates by name and the thin=1 timing the peers are compared with."""
    # Two interleaved loops in this process: jaxprobe against the limit (and the diagnostics) alone,
    # then the peers against a second timing of jaxprobe thin=1. Peers in the first loop perturb
    # it: PyTorch's intra-op threads keep spinning after a call, and its allocations change the
    # state of the heap that every JAX call's output buffers come from.
    log(f"throughput C={num_chains}: {steps} steps, timing {len(own)} candidates "
        f"x {repetitions} repetitions, then {len(peer_candidates)} peers")
    time_interleaved(own, repetitions)
    by_name = {candidate.name: candidate for candidate in own}
    reference = by_name["jaxprobe mala thin=1"]
    if peer_candidates:
        reference = Candidate(reference.name, num_chains, steps, reference.call, reference.acceptance)
        time_interleaved(peer_candidates + [reference], repetitions)
        reference.acceptance_rate = by_name["jaxprobe mala thin=1"].acceptance_rate
    return by_name, reference


def _against_limit(candidate: Candidate, limit: Candidate, num_chains: int) -> dict[str, Any]:
    """A jaxprobe thin row's figures: its speed, its time ratio to the limit (min and paired medians) and
    whether it meets the ratio target of this C."""
    ratio = candidate.seconds_per_step / limit.seconds_per_step
    return {"chain_steps_per_s": candidate.chain_steps_per_second, "ratio_to_limit": ratio,
            "median_paired_ratio": median_paired_ratio(candidate, limit),
            "median_paired_cpu_ratio": median_paired_ratio(candidate, limit, cpu=True),
            "pass": ratio <= ratio_target(num_chains), "times_s": candidate.times,
            "cpu_times_s": candidate.cpu_times}


def _fast_against_limit(fast: Candidate, limit: Candidate, reproducible: Candidate) -> dict[str, Any]:
    """The numerics="fast" row's figures: its time ratios to the limit and to the reproducible thin=1 row."""
    return {"chain_steps_per_s": fast.chain_steps_per_second,
            "ratio_to_limit": fast.seconds_per_step / limit.seconds_per_step,
            "median_paired_ratio": median_paired_ratio(fast, limit),
            "ratio_to_reproducible": fast.seconds_per_step / reproducible.seconds_per_step,
            "median_paired_ratio_to_reproducible": median_paired_ratio(fast, reproducible),
            "acceptance_rate": fast.acceptance_rate, "times_s": fast.times,
            "cpu_times_s": fast.cpu_times}


def _diagnostic_against_limit(candidate: Candidate, limit: Candidate) -> dict[str, Any]:
    """A diagnostic row's figures: its time ratios to the limit (min and paired medians, wall and CPU)."""
    return {"ratio_to_limit": candidate.seconds_per_step / limit.seconds_per_step,
            "median_paired_ratio": median_paired_ratio(candidate, limit),
            "median_paired_cpu_ratio": median_paired_ratio(candidate, limit, cpu=True),
            "acceptance_rate": candidate.acceptance_rate, "times_s": candidate.times,
            "cpu_times_s": candidate.cpu_times}


def _limit_row(by_name: dict[str, Candidate], reference: Candidate, num_chains: int, steps: int) -> dict[str, Any]:
    """Section 1's recorded row at one C: the limit's speed and times, and every other own row against it."""
    limit = by_name["limit"]
    row = {"num_chains": num_chains, "steps": steps, "limit_chain_steps_per_s": limit.chain_steps_per_second,
           "target_ratio": ratio_target(num_chains), "acceptance_rate": reference.acceptance_rate}
    for thin in (1, 10):
        row[f"thin{thin}"] = _against_limit(by_name[f"jaxprobe mala thin={thin}"], limit, num_chains)
    row["fast_thin1"] = _fast_against_limit(by_name[FAST_MODE], limit, by_name["jaxprobe mala thin=1"])
    row["diagnostics"] = {}
    for name in DIAGNOSTICS:
        row["diagnostics"][name] = _diagnostic_against_limit(by_name[name], limit)
    row["limit_times_s"] = limit.times
    row["limit_cpu_times_s"] = limit.cpu_times
    row["limit_cpu_per_wall"] = float(np.median(np.array(limit.cpu_times) / np.array(limit.times)))
    return row


def _peer_rows(peer_candidates: list[Candidate], num_chains: int, reference: Candidate) -> list[dict[str, Any]]:
    """Section 2's recorded rows at one C: each peer's speed and its time ratio to jaxprobe thin=1."""
    return [{"name": candidate.name, "num_chains": num_chains, "steps": candidate.steps,
             "chain_steps_per_s": candidate.chain_steps_per_second,
             "time_ratio_to_jaxprobe_thin1": candidate.seconds_per_step / reference.seconds_per_step,
             "acceptance_rate": candidate.acceptance_rate, "times_s": candidate.times}
            for candidate in peer_candidates]


def throughput_section(config: Config, weights: dict[str, np.ndarray], logdensity: Callable,
                       peers_wanted: bool = True) -> dict[str, Any]:
    """Sections 1 and 2 for every chain count of ``config``: build and calibrate the candidates, time them
    (own rows, then the peers), and assemble the rows; NumPyro's MCMC.run beside them where installed.
    ``peers_wanted=False`` (--limit-only) leaves section 2 out."""
    have = {name: optional(name) is not None for name in ("blackjax", "numpyro", "torch")}
    rows, peers, mcmc_rows = [], [], []
    # HMC with one leapfrog step h is MALA with ε = h²/2: the same proposal as our MALA rows.
    leapfrog_step = math.sqrt(2.0 * STEP_SIZE)
    target_seconds = config.target_seconds
    for num_chains in config.chain_counts:
        x0 = initial_positions(num_chains)
        probe_steps = probe_steps_for(num_chains)
        log(f"throughput C={num_chains}: calibrating")
        own = _own_candidates(logdensity, x0, num_chains, probe_steps, target_seconds)
        steps = own[0].steps
        peer_builders = (_peer_builders(weights, logdensity, x0, num_chains, leapfrog_step, have)
                         if peers_wanted else [])
        peer_candidates, numpyro_steps = _peer_candidates(peer_builders, num_chains, probe_steps, target_seconds)
        by_name, reference = _time_own_then_peers(own, peer_candidates, num_chains, steps, config.repetitions)
        limit = by_name["limit"]
        row = _limit_row(by_name, reference, num_chains, steps)
        rows.append(row)
        peers.extend(_peer_rows(peer_candidates, num_chains, reference))
        log(f"  limit {limit.chain_steps_per_second:,.0f}/s; jaxprobe thin=1 ratio {row['thin1']['ratio_to_limit']:.3f}, "
            f"thin=10 ratio {row['thin10']['ratio_to_limit']:.3f}, fast thin=1 ratio "
            f"{row['fast_thin1']['ratio_to_limit']:.3f}")
        if have["numpyro"] and peers_wanted:
            log(f"throughput C={num_chains}: numpyro MCMC.run")
            mcmc_rows.append(run_numpyro_mcmc(logdensity, x0, leapfrog_step, numpyro_steps))
            mcmc_rows[-1]["time_ratio_to_jaxprobe_thin1"] = (
                num_chains / mcmc_rows[-1]["chain_steps_per_s"] / reference.seconds_per_step)
    return {"rows": rows, "peers": peers, "numpyro_mcmc": mcmc_rows,
            "installed": {name: ("yes" if ok else "not installed") for name, ok in have.items()},
            "numpyro_leapfrog_step": leapfrog_step}


# ------------------------------------------------------------------ section 3: ESS


def ess_of(positions: np.ndarray, probe) -> tuple[float, float]:
    """Bulk ESS of x[0] and of the probe output f(x), positions ``(C, N, D)``: rank-normalized split-chain ESS
    (:func:`jaxprobe.engine.diagnostics.rank_diagnostics`, the estimator ``jaxprobe.benchmark`` reports)."""
    outputs = np.asarray(jax.jit(jax.vmap(jax.vmap(probe)))(jnp.asarray(positions)), np.float64)
    quantities = np.stack([np.asarray(positions[:, :, 0], np.float64), outputs], axis=-1)  # (C, N, 2)
    ess = rank_diagnostics(quantities[None]).ess_bulk[0]
    return float(ess[0]), float(ess[1])


def ess_jaxprobe(sampler, num_chains, config, logdensity, probe) -> dict[str, Any]:
    """Two identical ``jaxprobe.sample`` calls (new key); the second is timed (programs cached)."""
    x0 = initial_positions(num_chains)
    walls, samples = [], None
    for call in range(2):
        with Compiles() as compiling:
            start = time.perf_counter()
            samples = jaxprobe.sample(10 + call, logdensity, x0, sampler=sampler, num_samples=config.ess_samples,
                                      num_warmup=config.ess_warmup, progress=False)
            walls.append(time.perf_counter() - start)
        compilations = compiling.count
    ess_x0, ess_f = ess_of(samples.positions, probe)
    return {"name": f"jaxprobe {sampler}", "num_chains": num_chains, "first_call_s": walls[0],
            "wall_s": walls[1], "second_call_compilations": compilations,
            "gradient_evaluations": int(np.sum(samples.num_gradient_evaluations)),
            "acceptance_rate": float(np.mean(samples.acceptance_rate)),
            "step_size": float(np.mean(samples.step_size)), "ess_x0": ess_x0, "ess_f": ess_f}


def ess_numpyro_nuts(num_chains, config, logdensity, probe) -> dict[str, Any]:
    """NumPyro NUTS (chain_method="vectorized"), ``mcmc.run`` twice; the second is timed."""
    from numpyro.infer import MCMC, NUTS

    x0 = initial_positions(num_chains)
    mcmc = MCMC(NUTS(potential_fn=numpyro_potential(logdensity)), num_warmup=config.ess_warmup,
                num_samples=config.ess_samples, num_chains=num_chains, chain_method="vectorized",
                progress_bar=False)
    walls = []
    for call in range(2):
        with Compiles() as compiling:
            start = time.perf_counter()
            mcmc.run(jax.random.PRNGKey(20 + call), init_params=x0, extra_fields=("num_steps", "accept_prob"))
            positions = np.asarray(mcmc.get_samples(group_by_chain=True))  # (C, N, D)
            walls.append(time.perf_counter() - start)
        compilations = compiling.count
    extra = mcmc.get_extra_fields(group_by_chain=True)
    ess_x0, ess_f = ess_of(positions, probe)
    return {"name": "numpyro nuts (vectorized)", "num_chains": num_chains, "first_call_s": walls[0],
            "wall_s": walls[1], "second_call_compilations": compilations,
            "gradient_evaluations": int(np.sum(extra["num_steps"])),
            "acceptance_rate": float(np.mean(extra["accept_prob"])),
            "step_size": float(np.mean(mcmc.last_state.adapt_state.step_size)), "ess_x0": ess_x0, "ess_f": ess_f}


def ess_numpyro_nuts_kernel(num_chains, config, logdensity, probe) -> dict[str, Any]:
    """NumPyro's NUTS kernel timed by ``jaxprobe.benchmark``'s harness: :class:`~jaxprobe.benchmark.samplers.
    NumPyroNUTS` (NumPyro's own warmup of step size and diagonal mass matrix, per chain, vmapped) run by
    :func:`~jaxprobe.benchmark.compare.run_program`, compiled once and then timed (one seed).

    The same algorithm as ``MCMC.run(chain_method="vectorized")`` but compiled once, so the timed call measures
    sampling alone: the fairest NumPyro NUTS timing we can make. ``first_call_s`` is compile + run,
    ``second_call_compilations`` 0 by construction; ``step_size`` None (the harness keeps no sampler state).
    """
    x0 = initial_positions(num_chains)
    program = NumPyroNUTS().program(logdensity, DIM, config.ess_warmup)
    out, compile_s, wall_s = run_program(program, jax.random.key(30)[None], x0[None], config.ess_samples,
                                         num_chains)
    positions = np.swapaxes(out["draws"][0], 0, 1)  # (N, C, D) -> (C, N, D)
    ess_x0, ess_f = ess_of(positions, probe)
    return {"name": "numpyro nuts kernel (jitted scan)", "num_chains": num_chains, "first_call_s": compile_s + wall_s,
            "wall_s": wall_s, "second_call_compilations": 0,
            "gradient_evaluations": int(np.sum(out["gradients"])), "acceptance_rate": float(np.mean(out["acceptance"])),
            "step_size": None, "ess_x0": ess_x0, "ess_f": ess_f}


def ess_section(config: Config, logdensity, probe) -> dict[str, Any]:
    rows = []
    plan = [("chees", config.ess_chains), ("chees", config.ess_chains_large), ("nuts", config.ess_chains),
            ("mala", config.ess_chains)]
    plan = [(sampler, num_chains) for sampler, num_chains in plan if num_chains is not None]
    for sampler, num_chains in plan:
        log(f"ESS: jaxprobe {sampler} x{num_chains}")
        rows.append(ess_jaxprobe(sampler, num_chains, config, logdensity, probe))
    if optional("numpyro") is not None:
        log(f"ESS: numpyro nuts x{config.ess_chains}")
        rows.append(ess_numpyro_nuts(config.ess_chains, config, logdensity, probe))
        log(f"ESS: numpyro nuts kernel x{config.ess_chains}")
        rows.append(ess_numpyro_nuts_kernel(config.ess_chains, config, logdensity, probe))
    for row in rows:
        for what in ("x0", "f"):
            row[f"ess_{what}_per_s"] = row[f"ess_{what}"] / row["wall_s"]
            row[f"ess_{what}_per_grad"] = row[f"ess_{what}"] / max(row["gradient_evaluations"], 1)
    # ESS/s relative to both NumPyro rows: MCMC.run (the issue's reference, recompiles on every
    # call) and the kernel in a jitted scan (compiled once: the stricter comparison).
    references = {"numpyro": "numpyro nuts (vectorized)", "numpyro_kernel": "numpyro nuts kernel (jitted scan)"}
    for label, name in references.items():
        reference = next((row for row in rows if row["name"] == name), None)
        if reference is None:
            continue
        for row in rows:
            for what in ("x0", "f"):
                row[f"ess_{what}_per_s_vs_{label}"] = row[f"ess_{what}_per_s"] / reference[f"ess_{what}_per_s"]
    return {"rows": rows, "num_warmup": config.ess_warmup, "num_samples": config.ess_samples}


def chees_targets(rows: list[dict[str, Any]], config: Config) -> list[dict[str, Any]]:
    """The issue's target, ChEES ESS/s ≥ 2× NumPyro NUTS, for each ChEES row against each NumPyro row."""
    references = {"numpyro": "NumPyro NUTS MCMC.run", "numpyro_kernel": "NumPyro NUTS kernel (jitted scan)"}
    checks = []
    for row in rows:
        if row["name"] != "jaxprobe chees":
            continue
        for label, reference in references.items():
            if f"ess_x0_per_s_vs_{label}" in row:
                checks.append({"num_chains": row["num_chains"], "reference": reference,
                               "reference_chains": config.ess_chains,
                               "x0": row[f"ess_x0_per_s_vs_{label}"], "f": row[f"ess_f_per_s_vs_{label}"]})
    return checks


# ------------------------------------------------------------------ output


def versions() -> dict[str, str]:
    """The libraries this script compares (:func:`jaxprobe.benchmark.report.library_versions`), "not installed"
    for a missing one, and Python's version."""
    found = library_versions(("jaxprobe", "jax", "jaxlib", "blackjax", "numpyro", "torch", "numpy"))
    return {"python": platform.python_version()} | {name: version or "not installed" for name, version in found.items()}


def machine() -> dict[str, Any]:
    """:func:`jaxprobe.benchmark.report.machine`: the one record of the machine every benchmark writes."""
    return report_machine()


def _system_busy_seconds() -> float | None:
    """CPU seconds all processes have spent busy since boot (Linux ``/proc/stat``), or None elsewhere."""
    try:
        with open("/proc/stat") as stream:
            fields = [int(value) for value in stream.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    """CPU time of this process and of its finished children (a benchmark's memory measurements run in
    subprocesses: their work is the benchmark's, not other work)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


class OtherWork:
    """How much CPU other processes used while this benchmark ran: system busy time minus our own (this process's
    and its finished subprocesses').

    The 1-minute load average cannot tell: on 2 cores this benchmark's own threads
    alone put it above 1. Reported in cores (0 = the machine was ours alone).
    """

    def __init__(self):
        self.wall, self.own, self.system = time.perf_counter(), _own_cpu_seconds(), _system_busy_seconds()

    def cores(self) -> float | None:
        system = _system_busy_seconds()
        if system is None or self.system is None:
            return None
        others = (system - self.system) - (_own_cpu_seconds() - self.own)
        return max(0.0, others) / (time.perf_counter() - self.wall)


def load_banner(results: dict[str, Any]) -> str:
    """One line on whether other work shared the machine during the run (from ``OtherWork``)."""
    cores = results.get("other_work_cores")
    count = results["machine"]["cpu_count"]
    if cores is None:
        return "Other work on the machine during the run: not measured (no /proc/stat)."
    if cores < 0.15:
        return (f"Other work on the machine during the run: {cores:.2f} of {count} cores on average, i.e. the "
                "machine was idle apart from this benchmark.")
    return (f"**Machine shared with other work**: other processes used {cores:.2f} of {count} cores on average "
            "during the run. Wall-time ratios scatter by tens of percent under such load; CPU-time ratios are the "
            "stable figure (see below).")


def fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def section1_diagnostics(results: dict[str, Any]) -> list[str]:
    """CPU-time ratios and the two diagnostic rows (present in results from this version on)."""
    rows = [row for row in results["throughput"]["rows"] if "diagnostics" in row]
    if not rows:
        return []
    lines = ["Median paired ratios to the limit, wall time and (CPU) process CPU time. CPU time counts the work "
             "done, not the time spent waiting for a core, so it is the stable figure on a shared machine; it does "
             f"not credit work overlapped on two idle cores. Diagnostics: *{ACCEPT_ONLY}* = exact MALA with no "
             "stored draws, statistics or non-finite handling (the cost of the Metropolis correction alone); "
             f"*{NOISE_AFTER_GRADIENT}* = the limit with its noise draw ordered after its gradient, as MALA's "
             "proposal must be (the cost of losing the limit's RNG/gradient overlap); "
             f"*{LIMIT_UNROLLED}* = the limit drawing its noise with jaxprobe's generator "
             "(`kernels.normal_and_uniform`: Threefry-2x32 written out unrolled, two words per block) instead of "
             "`jax.random.normal`, whose CPU lowering is a rolled loop that uses one block per word: the part of "
             "jaxprobe's ratio that comes from the generator.", "",
             f"| C | jaxprobe thin=1 | (CPU) | jaxprobe thin=10 | (CPU) | {ACCEPT_ONLY} | (CPU) | "
             f"{NOISE_AFTER_GRADIENT} | (CPU) | {LIMIT_UNROLLED} | (CPU) | limit CPU/wall |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        cells = [row["thin1"], row["thin10"]] + [row["diagnostics"][name] for name in DIAGNOSTICS
                                                 if name in row["diagnostics"]]
        lines.append(f"| {row['num_chains']} | " + " | ".join(
            f"{cell['median_paired_ratio']:.3f} | {cell['median_paired_cpu_ratio']:.3f}" for cell in cells)
            + f" | {row['limit_cpu_per_wall']:.2f} |")
    return lines + [""]


def numerics_table(results: dict[str, Any]) -> list[str]:
    """jaxprobe MALA thin=1 in both numerics modes, timed in the same interleaved loop (rows from this version on)."""
    rows = [row for row in results["throughput"]["rows"] if "fast_thin1" in row]
    if not rows:
        return []
    lines = ["Numerics modes of jaxprobe MALA, thin=1 (`jaxprobe.engine.numerics`): *reproducible* (the CPU default, "
             "the rows above: bit-identical across device counts, unrolled Threefry) and *fast* (the GPU/TPU "
             "default: plain `jax.random`, `jnp.sum`), timed in the same interleaved loop. Time ratio "
             "fast / reproducible: min times (median paired ratio in brackets); > 1 means fast is slower here.", "",
             "| C | reproducible chain-steps/s | fast chain-steps/s | fast ratio to limit | fast / reproducible | "
             "fast acceptance |", "|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        fast = row["fast_thin1"]
        lines.append(f"| {row['num_chains']} | {fmt(row['thin1']['chain_steps_per_s'])} | "
                     f"{fmt(fast['chain_steps_per_s'])} | {fast['ratio_to_limit']:.3f} | "
                     f"{fast['ratio_to_reproducible']:.3f} ({fast['median_paired_ratio_to_reproducible']:.3f}) | "
                     f"{fmt(fast['acceptance_rate'])} |")
    return lines + [""]


def markdown_limit_only(results: dict[str, Any]) -> str:
    """Section 1 alone (``--limit-only``): the ratios to the limit and the diagnostic rows."""
    lines = ["# jaxprobe MALA vs the limit (section 1 of jaxprobe/bench/throughput.py alone)", "",
             f"{results['date']} · {results['machine']['cpu_model']} ({results['machine']['cpu_count']} cores) · "
             f"jax {results['versions']['jax']}", "",
             load_banner(results), "",
             f"Target: MLP probe 30→64→64→1, τ = {TEMPERATURE}, float32, MALA step size {STEP_SIZE}; "
             f"{results['config']['repetitions']} interleaved repetitions (order rotated each time), compile "
             "excluded. Ratio = candidate time per step / limit time per step.", "",
             "| C | steps/call | limit chain-steps/s | thin=1 min ratio | thin=10 min ratio | target | acceptance |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for row in results["throughput"]["rows"]:
        lines.append(f"| {row['num_chains']} | {row['steps']} | {fmt(row['limit_chain_steps_per_s'])} | "
                     f"{row['thin1']['ratio_to_limit']:.3f} | {row['thin10']['ratio_to_limit']:.3f} | "
                     f"≤ {row['target_ratio']:.2f} | {row['acceptance_rate']:.3f} |")
    lines += ["", *numerics_table(results), *section1_diagnostics(results), f"Command: `{results['command']}`", ""]
    return "\n".join(lines)


def markdown(results: dict[str, Any]) -> str:
    lines = ["# jaxprobe throughput benchmark", "",
             f"{results['date']} · {results['machine']['cpu_model']} ({results['machine']['cpu_count']} cores) · "
             f"jax {results['versions']['jax']}, blackjax {results['versions']['blackjax']}, "
             f"numpyro {results['versions']['numpyro']}, torch {results['versions']['torch']}"
             + (" · **--quick (smoke run, not representative)**" if results["quick"] else ""), "",
             f"Target: MLP probe 30→64→64→1, G = (f(x) − 0.5)², τ = {TEMPERATURE}, N(0, I) prior, float32, "
             f"MALA step size {STEP_SIZE}. Times: min over {results['config']['repetitions']} interleaved "
             "repetitions, compile excluded.", "",
             load_banner(results) if "other_work_cores" in results else "", "",
             "## 1. jaxprobe MALA vs the limit (chain-steps/s; ratio = jaxprobe time / limit time)", "",
             "PASS/FAIL uses the ratio of min times; (in brackets) the median over repetitions of the ratio within "
             "one repetition, to show how noisy the machine was.", "",
             *section1_diagnostics(results),
             "| C | steps/call | limit | jaxprobe thin=1 | ratio | jaxprobe thin=10 | ratio | target | thin=1 | thin=10 "
             "| acceptance |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|:---:|:---:|---:|"]
    for row in results["throughput"]["rows"]:
        t1, t10 = row["thin1"], row["thin10"]
        lines.append(
            f"| {row['num_chains']} | {row['steps']} | {fmt(row['limit_chain_steps_per_s'])} | "
            f"{fmt(t1['chain_steps_per_s'])} | {t1['ratio_to_limit']:.3f} ({t1['median_paired_ratio']:.3f}) | "
            f"{fmt(t10['chain_steps_per_s'])} | {t10['ratio_to_limit']:.3f} ({t10['median_paired_ratio']:.3f}) | "
            f"≤ {row['target_ratio']:.2f} | {'PASS' if t1['pass'] else 'FAIL'} | "
            f"{'PASS' if t10['pass'] else 'FAIL'} | {row['acceptance_rate']:.3f} |")
    lines += ["", *numerics_table(results)]
    lines += ["## 2. Peers (same C, target and step size; ratio = peer time / jaxprobe MALA thin=1 time, "
                  "> 1 means jaxprobe is faster)", "",
              "| C | peer | steps/call | chain-steps/s | ratio | acceptance |", "|---:|---|---:|---:|---:|---:|"]
    for peer in results["throughput"]["peers"]:
        lines.append(f"| {peer['num_chains']} | {peer['name']} | {peer['steps']} | {fmt(peer['chain_steps_per_s'])} | "
                     f"{peer['time_ratio_to_jaxprobe_thin1']:.2f} | {fmt(peer['acceptance_rate'])} |")
    for mcmc in results["throughput"]["numpyro_mcmc"]:
        lines.append(
            f"| {mcmc['num_chains']} | {mcmc['name']}, 2nd call wall time incl. "
            f"{mcmc['second_call_compilations']} recompilations ({mcmc['second_call_compile_s']:.1f} s) | "
            f"{mcmc['steps']} | {fmt(mcmc['chain_steps_per_s'])} | {mcmc['time_ratio_to_jaxprobe_thin1']:.2f} | "
            f"{fmt(mcmc['acceptance_rate'])} |")
    for name, status in results["throughput"]["installed"].items():
        if status != "yes":
            lines.append(f"| – | {name} | – | not installed | – | – |")
    lines += ["", f"NumPyro HMC uses one leapfrog step h = √(2ε) = {results['throughput']['numpyro_leapfrog_step']:.4f}: "
                  "the same proposal as MALA with ε, so its acceptance should match. Peers store no draws; jaxprobe "
                  "thin=1 stores every draw. PyTorch runs eagerly with a Python loop over steps; its 2-thread row can "
                  "collapse when the 2 cores are shared with other work (OpenMP/MKL threads wait on a busy core), "
                  "the 1-thread row shows the stable figure. NumPyro `MCMC.run` "
                  "builds and compiles its program on every call, so its row is one second call, compile included.", ""]
    ess = results["ess"]
    lines += [f"## 3. ESS (bulk, rank-normalized: jaxprobe.engine.diagnostics) — {ess['num_warmup']} warmup + "
              f"{ess['num_samples']} draws per chain", "",
              "Wall = a second call of the whole run (warmup + sampling + copy to host). Grad evals: sampling phase "
              "only. Last four columns: ESS/s relative to NumPyro NUTS `MCMC.run` (recompiles on every call) and "
              "to NumPyro's NUTS kernel in a jitted scan (compiled once).", "",
              "| sampler | C | wall s | compiles in 2nd call | grad evals | acc. | ESS x[0] | ESS f | ESS/s x[0] | "
              "ESS/s f | ESS/grad x[0] | ESS/grad f | vs MCMC.run x[0] | vs MCMC.run f | vs kernel x[0] | "
              "vs kernel f |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in ess["rows"]:
        lines.append(
            f"| {row['name']} | {row['num_chains']} | {row['wall_s']:.2f} | {row['second_call_compilations']} | "
            f"{row['gradient_evaluations']:,} | {row['acceptance_rate']:.2f} | {fmt(row['ess_x0'])} | "
            f"{fmt(row['ess_f'])} | {fmt(row['ess_x0_per_s'])} | {fmt(row['ess_f_per_s'])} | "
            f"{row['ess_x0_per_grad']:.3f} | {row['ess_f_per_grad']:.3f} | "
            + " | ".join(fmt(row.get(f"ess_{what}_per_s_vs_{label}"), 3)
                         for label in ("numpyro", "numpyro_kernel") for what in ("x0", "f")) + " |")
    for check in ess.get("chees_targets", []):
        verdict = lambda ratio: "PASS" if ratio >= 2 else "FAIL"
        lines += ["", f"Target: jaxprobe ChEES ({check['num_chains']} chains) ≥ 2× ESS/s of {check['reference']} "
                      f"({check['reference_chains']} chains): x[0] {check['x0']:.2f}× {verdict(check['x0'])}, "
                      f"f(x) {check['f']:.2f}× {verdict(check['f'])}."]
    lines += ["", f"Command: `{results['command']}`", ""]
    return "\n".join(lines)


def write_atomically(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically: :func:`jaxprobe._io.atomic_write` (the one way; kept under this
    name for the scripts that import it)."""
    atomic_write(path, lambda stream: stream.write(text), binary=False)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of about a minute")
    # `jaxprobe bench` points JAXPROBE_BENCH_RESULTS at a scratch folder unless --record is given.
    parser.add_argument("--out", default=None,
                        help="output folder (default: jaxprobe.bench.results_dir(), the checkout's benchmarks/results)")
    parser.add_argument("--limit-only", action="store_true",
                        help="section 1 only (jaxprobe MALA, the limit and the diagnostic rows; no peers, no ESS), "
                             "written to throughput.limit.json/.md")
    parser.add_argument("--chains", default=None, help="comma-separated chain counts (default: the config's)")
    parser.add_argument("--repetitions", type=int, default=None, help="interleaved repetitions (default: the config's)")
    args = parser.parse_args(argv)
    args.out = args.out or results_dir()  # was this file's folder + results: jaxprobe/bench/results, nowhere read
    config = QUICK if args.quick else FULL
    if args.chains:
        config = dataclasses.replace(config, chain_counts=tuple(int(c) for c in args.chains.split(",")))
    if args.repetitions:
        config = dataclasses.replace(config, repetitions=args.repetitions)
    started = time.perf_counter()
    weights, probe, logdensity = make_target()

    results: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "quick": args.quick,
        "commit": environment({})["commit"],  # the engine measured
        "machine": machine(),
        "versions": versions(),
        "config": dataclasses.asdict(config) | {"dim": DIM, "hidden": HIDDEN, "temperature": TEMPERATURE,
                                                "step_size": STEP_SIZE, "ratio_targets": dict(RATIO_TARGETS)},
    }
    load_start = os.getloadavg()[0]
    other_work = OtherWork()
    if args.limit_only:
        results["throughput"] = throughput_section(config, weights, logdensity, peers_wanted=False)
        results["load_average"] = {"start": load_start, "end": os.getloadavg()[0]}
        results["other_work_cores"] = other_work.cores()
        results["total_seconds"] = time.perf_counter() - started
        write_atomically(os.path.join(args.out, "throughput.limit.json"), json.dumps(results, indent=2) + "\n")
        table = markdown_limit_only(results)
        write_atomically(os.path.join(args.out, "throughput.limit.md"), table)
        print(table)
        return results
    results["throughput"] = throughput_section(config, weights, logdensity)
    results["load_average"] = {"start": load_start, "end": os.getloadavg()[0]}
    results["other_work_cores"] = other_work.cores()  # during section 1 and the peers (the timed ratios)
    results["ess"] = ess_section(config, logdensity, probe)
    results["ess"]["chees_targets"] = chees_targets(results["ess"]["rows"], config)
    results["total_seconds"] = time.perf_counter() - started

    write_atomically(os.path.join(args.out, "throughput.json"), json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    write_atomically(os.path.join(args.out, "throughput.md"), table)
    print(table)
    log(f"done in {results['total_seconds']:.0f} s; wrote {args.out}/throughput.json and throughput.md")
    return results


if __name__ == "__main__":
    main()
