#!/usr/bin/env python
"""Where MALA's time goes on one accelerator, against the limit (issue 23: MALA's core ran at 2.4-3.1x the
Langevin limit from 65,536 chains up on an H200, the gap growing with C).

The target and the limit are ``jaxprobe.bench.gpu``'s (d = 30 MLP probe, float32). For each C, one jitted scan of
``STEPS`` steps per call of each variant, timed as gpu.py times (alternating loops, minimum):

- ``limit``: one vmapped value_and_grad + Langevin update (``compare.limit_step``);
- ``grad_only``: the vmapped value_and_grad alone (no noise): the gradient's own cost;
- ``mala_bare``: ``kernel.step`` of the registry's MALA in a plain scan (no ``core.run``);
- ``mala_core``: ``core.run`` of it (gpu.py's MALA row);
- ``monitored`` / ``monitored_x``: ``core.run_monitored`` keeping no draw (what ``sample(keep_draws=False)`` runs
  per chunk), every draw folded into the verdict's statistics, without / with the observable x;
- ``monitored_barrier`` / ``monitored_x_barrier``: the same with an optimization barrier between the step and
  the fold (does XLA fuse the fold into the accept test's select, as it did MALA's log q ratio?);
- ``mala_always``: MALA's proposal, gradient and log q ratio, always accepted (no select): the Metropolis
  test's cost.

Then a profiler trace of a few calls of the variants in :data:`PROFILED` at the largest C, summarized by GPU kernel
(total time, count), so that the extra kernels are named. Everything goes to ``$OUT`` (``--out``): the table
(``gpu_profile.json``) and ``hlo_*.txt`` (the optimized programs); the kernel summaries are printed.

    python benchmarks/gpu_profile.py --chains 65536,1048576 --out DIR
    python benchmarks/gpu_profile.py --chains 64 --steps 5 --out /tmp/x       # a CPU smoke run
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import sys
import tempfile
import time
import warnings

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jaxprobe.bench import gpu  # noqa: E402
from jaxprobe.benchmark.compare import limit_step  # noqa: E402
from jaxprobe.engine import core, kernels, streaming  # noqa: E402
from jaxprobe.engine.numerics import default_numerics, in_positions_dtype  # noqa: E402


def variants(logdensity, num_chains: int, steps: int, numerics: str):
    """{name: (advance(state) -> state, state)} of the variants above."""
    x0 = gpu.initial_positions(num_chains)
    dim = x0.shape[1]
    eps = gpu.STEP_SIZE
    out = {}

    limit = limit_step(logdensity, num_chains, dim, eps)

    def limit_advance(state):
        key, x, t0 = state
        x, _ = jax.lax.scan(lambda x, t: (limit(key, x, t), None), x, t0 + jnp.arange(steps))
        return key, x, t0 + steps
    out["limit"] = (limit_advance, (jax.random.key(2), x0, jnp.zeros((), jnp.int32)))

    value_and_grad = jax.vmap(jax.value_and_grad(logdensity))

    def grad_advance(x):
        def body(x, _):
            _, g = value_and_grad(x)
            return x + eps * g, None
        return jax.lax.scan(body, x, None, length=steps)[0]
    out["grad_only"] = (grad_advance, x0)

    kernel = gpu.kernel_for("mala", numerics)
    parameters = core.default_parameters(kernel, num_chains, dim, jnp.float32, step_size=eps)
    kernel_state = jax.jit(lambda x: kernel.init(x, logdensity))(x0)

    def bare_advance(state):
        key, ks, t0 = state

        def body(ks, t):
            ks, _ = kernel.step(jax.random.fold_in(key, t), ks, parameters, logdensity)
            return ks, None
        ks, _ = jax.lax.scan(body, ks, t0 + jnp.arange(steps))
        return key, ks, t0 + steps
    out["mala_bare"] = (bare_advance, (jax.random.key(3), kernel_state, jnp.zeros((), jnp.int32)))

    def variant_advance(noise_barrier: bool, ratio_barrier: bool, accept: bool = True):
        """MALA's step written out (as ``kernels.MALA.step``) with optimization barriers on the generated noise
        and/or on the per-chain log q ratio; ``accept=False``: always accept (no Metropolis select)."""
        def advance(state):
            key, ks, t0 = state

            def body(ks, t):
                position, logdensity_value, grad = ks
                noise, uniform = kernel.numerics.normal_and_uniform(jax.random.fold_in(key, t), num_chains, dim,
                                                                    jnp.float32)
                if noise_barrier:
                    noise, uniform = jax.lax.optimization_barrier((noise, uniform))
                proposal = position + eps * grad + jnp.sqrt(2.0 * eps) * noise
                value, proposal_grad = jax.vmap(jax.value_and_grad(in_positions_dtype(logdensity)))(proposal)
                summed = grad + proposal_grad
                log_q = -jnp.sum(summed * (0.25 * eps * summed + jnp.sqrt(0.5 * eps) * noise), axis=-1)
                if ratio_barrier:
                    log_q = jax.lax.optimization_barrier(log_q)
                if not accept:
                    return kernels.GradientState(proposal, value + 0.0 * log_q, proposal_grad), None
                return kernels._metropolis_step(ks, kernels.GradientState(proposal, value, proposal_grad),
                                                jnp.log(uniform), log_q, 1)[0], None
            ks, _ = jax.lax.scan(body, ks, t0 + jnp.arange(steps))
            return key, ks, t0 + steps
        return advance

    for name, flags in {"mala_always": (False, False, False), "mala_v_none": (False, False),
                        "mala_v_noise": (True, False), "mala_v_ratio": (False, True),
                        "mala_v_both": (True, True)}.items():
        out[name] = (variant_advance(*flags), (jax.random.key(4), kernel_state, jnp.zeros((), jnp.int32)))

    engine_state = jax.jit(lambda x, p: core.init(kernel, logdensity, x, p))(x0, parameters)

    def core_advance(state):
        state, _, _ = core.run(jax.random.key(5), state, kernel, logdensity, 1, steps)
        return state
    out["mala_core"] = (core_advance, engine_state)

    # What sample(keep_draws=False) runs per chunk: core.run_monitored keeping no draw, every draw folded into
    # the verdict's statistics, without and with one observable (x itself, as gpu.py's sample row).
    for name, observables in {"monitored": (), "monitored_x": (("x", lambda x: x),)}.items():
        monitor = streaming.Monitor(num_chains=num_chains, dim=dim, num_draws=steps, observables=observables)

        def monitored_advance(carry, monitor=monitor):
            state, monitored = carry
            state, _, _, monitored = core.run_monitored(jax.random.key(6), state, kernel, logdensity, steps, 1,
                                                        monitor, monitored, first_draw=0, keep_draws=False)
            return state, monitored
        out[name] = (monitored_advance, (engine_state, streaming.init_stats(monitor, jnp.float32)))

        def barrier_advance(carry, monitor=monitor):
            """As ``monitored_advance`` with an optimization barrier between the step and the fold, so that XLA
            cannot fuse the fold into the accept test's select (as it fused MALA's log q ratio)."""
            state, monitored = carry

            def on_draw(monitored, draw, ks):
                position, value = jax.lax.optimization_barrier((ks.position, ks.logdensity))
                return streaming.fold_draw(monitor, monitored, draw, position, value), None
            state, monitored, _, _ = core._scan_draws(jax.random.key(6), state, kernel, logdensity, steps, 1,
                                                      on_draw, monitored)
            return state, monitored
        out[name + "_barrier"] = (barrier_advance, (engine_state, streaming.init_stats(monitor, jnp.float32)))
    return out


#: The variants whose optimized program is written and whose kernels are profiled at the largest C.
PROFILED = ("limit", "monitored", "monitored_x", "monitored_x_barrier")


def sample_phases(logdensity, num_chains: int, num_samples: int, repetitions: int, out_dir: str) -> list[dict]:
    """``jaxprobe.sample(keep_draws=False)`` as gpu.py's sample row calls it, split into the steps of
    ``api.sample`` (answer_speed's phase timers), with and without the observable and in one chunk, against the
    limit's time for the same transitions; then one profiled call's device kernels and host events."""
    import jaxprobe
    from jaxprobe.bench import answer_speed
    answer_speed.install_phase_timers()
    x0 = gpu.initial_positions(num_chains)  # on the device, as gpu.py's sample row hands it in
    limit = gpu.limit_row(logdensity, num_chains, num_samples, gpu.initial_positions(num_chains))
    limit.loop(1)
    limit_seconds = min(limit.loop(1) for _ in range(repetitions))
    cases = {"observable_x": dict(observables={"x": lambda x: x}), "no_observable": {},
             "observable_x_one_chunk": dict(observables={"x": lambda x: x}, chunk_size=num_samples)}
    rows = []
    for case, extra in cases.items():
        def call(seed):
            with warnings.catch_warnings():  # the verdict is computed all the same (no warmup: R-hat warns)
                warnings.simplefilter("ignore")
                samples = jaxprobe.sample(seed, logdensity, x0, sampler="mala", num_samples=num_samples, num_warmup=0,
                                          step_size=gpu.STEP_SIZE, keep_draws=False, progress=False, **extra)
            jax.block_until_ready(jax.tree.leaves(samples.observables))
            return samples
        call(0)
        best = None
        for repetition in range(repetitions):
            answer_speed._PHASE_LOG.clear()
            tick = time.perf_counter()
            call(repetition + 1)
            total = time.perf_counter() - tick
            phases = collections.defaultdict(float)
            for name, seconds in answer_speed._PHASE_LOG:
                phases[name] += seconds
            if best is None or total < best["total"]:
                best = {"total": total, **phases}
        best["other"] = best["total"] - sum(v for k, v in best.items() if k != "total")
        rows.append({"case": case, "num_chains": num_chains, "num_samples": num_samples,
                     "limit_seconds": limit_seconds, "ratio": best["total"] / limit_seconds, "phases": best})
        print(f"sample(keep_draws=False) {case} C={num_chains}: {best['total']:.3f} s, limit {limit_seconds:.3f} s, "
              f"ratio {best['total'] / limit_seconds:.2f}; " + ", ".join(f"{k} {v:.3f}" for k, v in best.items()
                                                                       if k != "total"), flush=True)
        if case == "observable_x":
            trace_dir = tempfile.mkdtemp()
            with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
                call(99)
            print(f"--- sample {case} at C={num_chains}, one call\n{kernel_summary(trace_dir, top=20)}"
                  f"host:\n{kernel_summary(trace_dir, top=30, host=True)}", flush=True)
    return rows


def kernel_summary(trace_dir: str, top: int = 25, host: bool = False) -> str:
    """GPU (or, without one, all; ``host``: the host's) events of the perfetto trace in ``trace_dir``, by name:
    total µs and count."""
    paths = glob.glob(os.path.join(trace_dir, "**", "perfetto_trace.json.gz"), recursive=True)
    if not paths:
        return "no perfetto trace written\n"
    data = json.load(gzip.open(paths[0]))
    events = data["traceEvents"] if isinstance(data, dict) else data
    process = {e["pid"]: e.get("args", {}).get("name", "") for e in events
               if e.get("ph") == "M" and e.get("name") == "process_name"}
    on_device = [e for e in events if e.get("ph") == "X" and ("GPU" in process.get(e.get("pid"), "")) != host]
    chosen = on_device or [e for e in events if e.get("ph") == "X"]
    totals, counts = collections.Counter(), collections.Counter()
    for event in chosen:
        totals[event["name"]] += float(event.get("dur", 0.0))
        counts[event["name"]] += 1
    lines = [f"{len(chosen)} events ({'device' if on_device else 'all'}), total {sum(totals.values()):.0f} us; "
             f"processes: {sorted(set(process.values()))}"]
    for name, total in totals.most_common(top):
        lines.append(f"{total:12.0f} us {counts[name]:7d}x  {name[:160]}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", default="65536,1048576")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--out", default=os.environ.get("OUT") or tempfile.mkdtemp())
    parser.add_argument("--profile-calls", type=int, default=3)
    parser.add_argument("--numerics", default=None, help="MALA's numerics mode (default: the platform's)")
    parser.add_argument("--variants", default=None, help="comma-separated variants to run (default: all; the "
                        "limit always runs first, as every ratio's base)")
    parser.add_argument("--sample-chains", default="", help="comma-separated C of the sample(keep_draws=False) "
                        "phase split (default: none)")
    parser.add_argument("--sample-draws", type=int, default=1000)
    args = parser.parse_args()
    args.numerics = args.numerics or default_numerics()
    os.makedirs(args.out, exist_ok=True)
    _, _, logdensity = gpu.make_target()
    config = gpu.Config(**{**gpu.FULL.__dict__, "repetitions": 3})
    print(f"device: {jax.devices()[0].device_kind}; jax {jax.__version__}; numerics {args.numerics}", flush=True)
    table = []
    sample_rows = [row for c in args.sample_chains.split(",") if c
                   for row in sample_phases(logdensity, int(c), args.sample_draws, 3, args.out)]
    chain_counts = [int(c) for c in args.chains.split(",") if c]
    for num_chains in chain_counts:
        rows = []
        for name, (advance, state) in variants(logdensity, num_chains, args.steps, args.numerics).items():
            if args.variants and name != "limit" and name not in args.variants.split(","):
                continue
            state = jax.tree.map(jnp.copy, state)  # each row donates its own buffers
            rows.append(gpu.Row(name, num_chains, args.steps, advance, state, gradients_per_call=1.0))
        gpu.time_rows(rows, config)
        base = min(rows[0].times) / rows[0].calls
        for row in rows:
            per_call = min(row.times) / row.calls
            table.append((num_chains, row.name, per_call / args.steps * 1e3, num_chains * args.steps / per_call,
                          per_call / base, row.compile_seconds))
            print(f"C={num_chains:>8} {row.name:12s} {per_call / args.steps * 1e3:8.4f} ms/step "
                  f"{num_chains * args.steps / per_call:10.3g} chain-steps/s  ratio {per_call / base:5.2f}  "
                  f"compile {row.compile_seconds:.1f}s", flush=True)
        if num_chains == chain_counts[-1]:
            for row in rows:
                if row.name not in PROFILED:
                    continue
                if row.name != "limit":  # the limit's program was recorded (results/gpu_profile.h100.md)
                    with open(os.path.join(args.out, f"hlo_{row.name}.txt"), "w") as handle:
                        handle.write(row.compiled.as_text())
                trace_dir = tempfile.mkdtemp()
                with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
                    row.loop(args.profile_calls)
                summary = kernel_summary(trace_dir)
                print(f"--- {row.name} at C={num_chains}, {args.profile_calls} calls of {args.steps} steps\n"
                      f"{summary}", flush=True)
        del rows
    with open(os.path.join(args.out, "gpu_profile.json"), "w") as handle:
        json.dump({"device": jax.devices()[0].device_kind, "jax": jax.__version__, "steps": args.steps,
                   "rows": [dict(zip(("num_chains", "variant", "ms_per_step", "chain_steps_per_second",
                                      "ratio_to_limit", "compile_seconds"), row)) for row in table],
                   "sample_phases": sample_rows}, handle,
                  indent=1)
    print(f"at {time.strftime('%H:%M:%S')}: wrote {args.out}")


if __name__ == "__main__":
    main()
