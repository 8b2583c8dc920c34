"""Which SMC settings spend their gradients best: a grid of jaxprobe's and BlackJAX's, at many seeds.

The three questions of :mod:`jaxprobe.bench.smc_peers` (closed-form mode shares and log Z), each answered with N
particles for S seeds (vmapped, one compiled program per setting and question) by

- jaxprobe's tempered SMC (:func:`jaxprobe.engine.smc.tempered_smc`, MALA, Fisher mass matrix, 16 groups) for
  every ``(num_mcmc_steps, target_ess)`` of :data:`JAXPROBE_GRID`;
- BlackJAX's ``adaptive_tempered_smc`` with HMC (fixed step ``smc_peers.HMC_STEP``, identity mass) for every
  ``(HMC steps per stage, leapfrog steps, target_ess)`` of :data:`BLACKJAX_GRID`.

Reported per setting: gradient evaluations per seed, the spread over seeds of the shares (``√Σ_j var_j``) and of
log Z, and the *cost-normalized spread* ``spread·√grads`` (the spread at one gradient evaluation, under the
usual variance ∝ 1/cost; smaller is better) with a 90 % bootstrap interval over seeds, its ratio to the best
BlackJAX setting of the question (the issue's acceptance: ≤ 1 for jaxprobe's default), the mean bias and the
seeds within the issue's tolerance (shares 0.03, log Z 0.1). With S = 60 seeds a spread is known to about ±9 %
(±16 % with the 20 seeds of smc_peers); settings whose spreads differ by less than that are not ranked by it.

Run: python -m jaxprobe.bench.smc_settings [--seeds S] [--particles N] [--only mix2d,...] [--out DIR]
     python -m jaxprobe.bench.smc_settings --render benchmarks/results/smc_settings.json   # markdown only
Default: 60 seeds of 2,048 particles (about 25 minutes on 2 CPU cores), writes
benchmarks/results/smc_settings.{json,md}; --quick: 8 seeds of 256 particles, two settings of each, into a scratch
folder.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import tempfile
import time

import blackjax
import jax
import numpy as np

import jaxprobe
from jaxprobe.bench import results_dir, write_results
from jaxprobe.bench.smc_peers import (HMC_STEP, QUESTIONS, _timed, closed_form, run_blackjax, run_jaxprobe,
                                      summarize)
from jaxprobe.engine.kernels import SMC

RESULTS = results_dir()
#: jaxprobe's settings: (MALA steps per stage, target ESS).
JAXPROBE_GRID = [(4, 0.7), (5, 0.5), (10, 0.5), (2, 0.8), (3, 0.8), (5, 0.8)]
#: BlackJAX's settings: (HMC steps per stage, leapfrog steps per HMC step, target ESS).
BLACKJAX_GRID = [(2, 5, 0.5), (1, 5, 0.5), (1, 3, 0.8)]
QUICK_GRID = ([(4, 0.7), (5, 0.5)], [(1, 5, 0.5), (1, 3, 0.8)])


def _cost_normalized(shares: np.ndarray, log_z: np.ndarray, grads: float) -> np.ndarray:
    """(share spread, log Z sd) × √grads of per-seed values ``(..., S, K)`` and ``(..., S)``."""
    spreads = np.stack([np.sqrt(np.sum(shares.var(axis=-2, ddof=1), axis=-1)), log_z.std(axis=-1, ddof=1)])
    return spreads * math.sqrt(grads)


def _with_interval(row: dict, resamples: int = 2000) -> dict:
    """The row's cost-normalized spreads with 90 % bootstrap intervals over seeds."""
    shares, log_z = np.asarray(row["per_seed"]["shares"]), np.asarray(row["per_seed"]["log_z"])
    point = _cost_normalized(shares, log_z, row["gradient_evaluations"])
    pick = np.random.default_rng(0).integers(0, len(log_z), (resamples, len(log_z)))
    boot = _cost_normalized(shares[pick], log_z[pick], row["gradient_evaluations"])
    low, high = np.percentile(boot, [5, 95], axis=1)
    return {"cost_normalized_share": float(point[0]), "cost_normalized_log_z": float(point[1]),
            "cost_normalized_share_90": [float(low[0]), float(high[0])],
            "cost_normalized_log_z_90": [float(low[1]), float(high[1])]}


def measure(question: dict, seeds: int, num_particles: int, grids: tuple[list, list], log) -> dict:
    """Every setting of both grids on one question: its summary (smc_peers.summarize) and cost-normalized
    spreads, then each one's ratio to the best BlackJAX setting of each quantity."""
    truth, log_z_true = closed_form(question)
    keys = jax.random.split(jax.random.key(0), seeds)
    rows = {}
    for steps, ess in grids[0]:
        options = {"kernel": "mala", "num_mcmc_steps": steps, "target_ess": ess, "num_groups": 16}
        (shares, log_z, grads, share_se, log_z_se), seconds = _timed(run_jaxprobe, question, keys, num_particles,
                                                                     options)
        rows[f"jaxprobe:{steps}-steps-ess{ess}"] = summarize(shares, log_z, grads, truth, log_z_true, seconds,
                                                             share_se, log_z_se) | {"settings": options}
    for steps, leapfrog, ess in grids[1]:
        out, seconds = _timed(run_blackjax, question, keys, num_particles, steps, leapfrog, ess)
        rows[f"blackjax:{steps}x{leapfrog}-ess{ess}"] = summarize(*out, truth, log_z_true, seconds) | {
            "settings": {"num_mcmc_steps": steps, "num_integration_steps": leapfrog, "target_ess": ess,
                         "step_size": HMC_STEP}}
    for row in rows.values():
        row.update(_with_interval(row))
    peers = [name for name in rows if name.startswith("blackjax")]
    best = {quantity: min(peers, key=lambda name: rows[name][f"cost_normalized_{quantity}"])
            for quantity in ("share", "log_z")}
    for name, row in rows.items():
        for quantity in ("share", "log_z"):
            row[f"ratio_{quantity}"] = row[f"cost_normalized_{quantity}"] / rows[best[quantity]][
                f"cost_normalized_{quantity}"]
        log(f"  {name:26s} grads/particle {row['gradient_evaluations'] / num_particles:6.1f} share spread "
            f"{row['share_spread']:.4f} log Z sd {row['log_z_sd']:.4f} | ×√grads {row['cost_normalized_share']:.3f} "
            f"{row['cost_normalized_log_z']:.3f} | ratio {row['ratio_share']:.2f} {row['ratio_log_z']:.2f} | within "
            f"{row['seeds_within_tolerance']}/{seeds} ({row['seconds']:.1f} s)")
        del row["per_seed"]  # S × K numbers per row: the JSON keeps the summaries
    return {"shares": truth.tolist(), "log_z": log_z_true, "best_peer": best, "samplers": rows}


def markdown(result: dict) -> str:
    """The tables of ``smc_settings.md``."""
    default = f"jaxprobe:{result['default']['num_mcmc_steps']}-steps-ess{result['default']['target_ess']}"
    lines = ["# SMC settings at equal gradient evaluations: jaxprobe's grid and BlackJAX's", "",
             f"Command: `{result['command']}`; {result['date']}; {result['machine']}; jax {result['jax']}, "
             f"blackjax {result['blackjax']}; {result['particles']} particles, {result['seeds']} seeds per row "
             f"(vmapped); {result['total_seconds']:.0f} s in all.", "",
             "Per setting: gradient evaluations per particle (all stages), the spread over seeds of the mode shares "
             "(√Σ_j var_j) and of log Z, and spread·√grads (smaller is better; [90 % bootstrap interval over "
             "seeds]); ratio = spread·√grads over that of the best BlackJAX setting of the question (≤ 1: no more "
             "spread than BlackJAX at equal gradient evaluations). Within tol.: seeds with every share within 0.03 "
             f"and log Z within 0.1. jaxprobe: MALA, Fisher mass matrix, 16 groups; its default is `{default}`. "
             f"BlackJAX: HMC steps × leapfrog steps per stage, step {HMC_STEP}, identity mass."
             + (f" Note: {result['note']}" if result.get("note") else ""), ""]
    for name, question in result["questions"].items():
        lines += [f"## {name}: {QUESTIONS[name]['title']}", "",
                  f"Closed form: shares {np.round(question['shares'], 4).tolist()}, log Z {question['log_z']:.4f}. "
                  f"Best BlackJAX: `{question['best_peer']['share']}` (shares), `{question['best_peer']['log_z']}` "
                  "(log Z).", "",
                  "| setting | grads / particle | share spread | log Z sd | share spread·√grads | log Z sd·√grads | "
                  "ratio shares | ratio log Z | share bias (first mode) | within tol. |",
                  "| --- | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: |"]
        for setting, row in question["samplers"].items():
            mark = " (default)" if setting == default else ""
            lines.append(
                f"| {setting}{mark} | {row['gradient_evaluations'] / result['particles']:.1f} | "
                f"{row['share_spread']:.4f} | {row['log_z_sd']:.4f} | {row['cost_normalized_share']:.3f} "
                f"[{row['cost_normalized_share_90'][0]:.3f}, {row['cost_normalized_share_90'][1]:.3f}] | "
                f"{row['cost_normalized_log_z']:.3f} [{row['cost_normalized_log_z_90'][0]:.3f}, "
                f"{row['cost_normalized_log_z_90'][1]:.3f}] | {row['ratio_share']:.2f} | {row['ratio_log_z']:.2f} | "
                f"{row['share_bias'][0]:+.4f} | {row['seeds_within_tolerance']}/{result['seeds']} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 seeds of 256 particles, two settings each, scratch")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--particles", type=int, default=None)
    parser.add_argument("--only", default=None, help="comma-separated question names")
    parser.add_argument("--out", default=None)
    parser.add_argument("--render", default=None, help="a smc_settings.json: write its markdown beside it, run nothing")
    args = parser.parse_args(argv)
    if args.render:
        with open(args.render) as handle:
            result = json.load(handle)
        write_results(os.path.dirname(os.path.abspath(args.render)), "smc_settings", result, markdown(result))
        return result
    seeds = args.seeds or (8 if args.quick else 60)
    num_particles = args.particles or (256 if args.quick else 2048)
    grids = QUICK_GRID if args.quick else (JAXPROBE_GRID, BLACKJAX_GRID)
    out = args.out or (tempfile.mkdtemp(prefix="smc-settings-") if args.quick else RESULTS)

    def log(message):
        print(message, file=sys.stderr, flush=True)

    started = time.perf_counter()
    device = jax.devices()[0]
    result = {"command": "python -m jaxprobe.bench.smc_settings " + " ".join(argv if argv is not None
                                                                            else sys.argv[1:]),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": f"{platform.machine()}, {os.cpu_count()}-core CPU" if device.platform == "cpu"
              else f"{platform.machine()}, {device.device_kind}",
              "jax": jax.__version__, "blackjax": blackjax.__version__, "jaxprobe": jaxprobe.__version__,
              "seeds": seeds, "particles": num_particles,
              "default": {"num_mcmc_steps": SMC().num_mcmc_steps, "target_ess": SMC().target_ess},
              "questions": {}}
    for name in (args.only.split(",") if args.only else list(QUESTIONS)):
        log(f"{name}:")
        result["questions"][name] = measure(QUESTIONS[name], seeds, num_particles, grids, log)
        result["total_seconds"] = time.perf_counter() - started
        write_results(out, "smc_settings", result, markdown(result))  # after each question: a partial run counts
    log(f"wrote {out}/smc_settings.json ({result['total_seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
