"""The d = 4 three-mode question through ``jaxprobe.generate(..., sampler="smc")``: the issue's acceptance, per seed.

The question is ``three4d`` of :mod:`jaxprobe.bench.smc_peers`: a standard-normal prior in d = 4 tilted by
``exp(−G(x)) = Σ_j w_j N(x; a_j, s² I)`` with weights 0.6 / 0.3 / 0.1 at 3.3·e₁, 3.3·e₂, −3.3·e₁, s = 0.2, τ = 1;
closed-form mode shares [0.6, 0.3, 0.1] and log Z = −8.9898 relative to the prior. It is asked as a user asks it,
``jaxprobe.generate(seed, G, temperature=1, prior=StandardNormal(), dim=4, sampler="smc", num_chains=2048, ...)``
with the sampler's default options, and answered with the result's own numbers: the mode shares
``result.expectation(one_hot_mode)`` (mean and MCSE from the independent particle groups) and
``result.log_evidence`` ± ``result.log_evidence_se``.

The issue's acceptance: shares within ``SHARE_TOLERANCE`` = 0.03 of the truth and log Z within
``LOG_Z_TOLERANCE`` = 0.1 nats in at least 19 of 20 seeds, *or* the result's own MCSE says it cannot
(``1.96·MCSE > tolerance`` for a share or for log Z: the error bar does not promise the tolerance), and a
precision target then reaches it. Recorded per seed: shares, their MCSE, log Z, its se, within tolerance or not,
flagged or not; and the seeds that missed the tolerance *without* being flagged (the ones the error bar hid).

Then, if fewer than 19 seeds are within the tolerance, every seed is asked again with
``precision={"target": one_hot_mode, "mcse": SHARE_TOLERANCE / z, "max_chains": 16·2048}`` (independent runs of
2,048 chains added until the largest share MCSE is at most the target, :func:`jaxprobe.generate`) for each z of
:data:`PRECISION_Z`, and recorded the same way, with the chains and gradient evaluations spent: z = 1.96 promises
each share within the tolerance at 95 % (so all three together less often), z = 2.5 all of them and log Z together
(Bonferroni over four quantities, Φ⁻¹(1 − 0.05/8) = 2.50). The pooled log Z's se is recorded beside it (runs
pooled for the shares also shrink it); 1.96·se ≤ 0.1 is checked, not targeted.

Run: python -m jaxprobe.bench.smc_acceptance [--quick] [--seeds K] [--out DIR]
Default: 20 seeds, 2,048 chains × 20 draws after 20 warmup steps (the draws only continue the particles),
writes benchmarks/results/smc_acceptance.{json,md}; about a minute on 2 idle CPU cores. --quick: 4 seeds of
1,024 chains (8 groups) into a scratch folder.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import tempfile
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import jaxprobe
from jaxprobe.bench import results_dir, write_results
from jaxprobe.bench.smc_peers import LOG_Z_TOLERANCE, QUESTIONS, SHARE_TOLERANCE, _functions, closed_form
from jaxprobe.engine.kernels import SMC
from jaxprobe.probes import Probe

RESULTS = results_dir()
QUESTION = QUESTIONS["three4d"]
TRUTH, LOG_Z = closed_form(QUESTION)
Z95 = 1.96  # a nominal 95 % interval: the error bar promises the tolerance when 1.96·MCSE ≤ tolerance
#: The precision targets asked for: MCSE = tolerance / z (module docstring).
PRECISION_Z = (1.96, 2.5)
FULL = {"seeds": 20, "chains": 2048, "samples": 20, "warmup": 20, "max_runs": 16}
QUICK = {"seeds": 4, "chains": 1024, "samples": 4, "warmup": 4, "max_runs": 4}  # 8 groups: a trusted MCSE

_PRIOR, _TILT, _MODE = _functions(QUESTION)
#: G(x) = −log Σ_j w_j N(x; a_j, s² I): the tilt of smc_peers as a probe (τ = 1).
PROBE = Probe(lambda x: -_TILT(x), "three_bumps_d4")


def mode_indicator(x):
    """One x ``(4,)`` → ``(3,)`` one-hot of the mode whose posterior mean is nearest (its expectation: the shares)."""
    return jax.nn.one_hot(_MODE(x), len(QUESTION["weights"]), dtype=jnp.float32)


def _ask(seed: int, sizes: dict, precision: dict | None = None) -> dict:
    """One answer of the question: its shares, their MCSE, log Z and its se, as the result reports them."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # what the result says is read from it, not from its warnings
        result = jaxprobe.generate(seed, PROBE, temperature=1.0, prior=jaxprobe.priors.StandardNormal(), dim=4,
                                   num_chains=sizes["chains"], num_samples=sizes["samples"],
                                   num_warmup=sizes["warmup"], sampler="smc", progress=False, convergence="ignore",
                                   precision=precision)
        shares = result.expectation(mode_indicator)
    share_error = np.asarray(shares.mean, np.float64) - TRUTH
    log_z_error = float(result.log_evidence) - LOG_Z
    row = {"seed": seed, "shares": np.asarray(shares.mean, np.float64).tolist(),
           "share_mcse": np.asarray(shares.mcse, np.float64).tolist(), "share_note": shares.note,
           "log_z": float(result.log_evidence), "log_z_se": float(result.log_evidence_se),
           "share_error_max_abs": float(np.max(np.abs(share_error))), "log_z_error": log_z_error,
           "chains": int(result.num_chains), "groups": int(result.num_groups),
           "gradient_evaluations": int(np.sum(result.num_gradient_evaluations)),
           "seconds": time.perf_counter() - start}
    row["within_tolerance"] = bool(row["share_error_max_abs"] <= SHARE_TOLERANCE
                                   and abs(log_z_error) <= LOG_Z_TOLERANCE)
    row["flagged"] = bool(Z95 * max(row["share_mcse"]) > SHARE_TOLERANCE or Z95 * row["log_z_se"] > LOG_Z_TOLERANCE)
    # |error| / MCSE: about N(0, 1) when the error bars are right
    row["share_z_max_abs"] = float(np.max(np.abs(share_error) / np.asarray(row["share_mcse"])))
    row["log_z_z"] = log_z_error / row["log_z_se"]
    return row


def summarize(rows: list[dict]) -> dict:
    """Counts over seeds: within the tolerance, flagged by their own MCSE, missed and not flagged."""
    return {"seeds": len(rows), "within_tolerance": sum(r["within_tolerance"] for r in rows),
            "flagged": sum(r["flagged"] for r in rows),
            "missed_not_flagged": sum(not r["within_tolerance"] and not r["flagged"] for r in rows),
            "within_or_flagged": sum(r["within_tolerance"] or r["flagged"] for r in rows),
            "share_mcse_max_median": float(np.median([max(r["share_mcse"]) for r in rows])),
            "log_z_se_median": float(np.median([r["log_z_se"] for r in rows])),
            "share_covered_95": sum(r["share_z_max_abs"] <= Z95 for r in rows),
            "log_z_covered_95": sum(abs(r["log_z_z"]) <= Z95 for r in rows),
            "chains_mean": float(np.mean([r["chains"] for r in rows])),
            "chains_max": int(max(r["chains"] for r in rows)),
            "gradient_evaluations_mean": float(np.mean([r["gradient_evaluations"] for r in rows])),
            "seconds": float(sum(r["seconds"] for r in rows))}


def _table(rows: list[dict]) -> list[str]:
    lines = ["| seed | shares | share MCSE | log Z ± se | max share error | log Z error | within tol. | "
             "flagged (1.96·MCSE > tol.) | chains | grads |", "| ---: | --- | --- | --- | ---: | ---: | --- | --- | "
             "---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['seed']} | {', '.join(f'{v:.4f}' for v in r['shares'])} | "
                     f"{', '.join(f'{v:.4f}' for v in r['share_mcse'])} | {r['log_z']:.4f} ± {r['log_z_se']:.4f} | "
                     f"{r['share_error_max_abs']:.4f} | {r['log_z_error']:+.4f} | "
                     f"{'yes' if r['within_tolerance'] else '**no**'} | {'yes' if r['flagged'] else 'no'} | "
                     f"{r['chains']:,} | {r['gradient_evaluations']:,} |")
    return lines


def _counts(summary: dict) -> str:
    return (f"Within the tolerance: **{summary['within_tolerance']}/{summary['seeds']}**; flagged by their own "
            f"MCSE: {summary['flagged']}/{summary['seeds']}; missed *and* not flagged: "
            f"**{summary['missed_not_flagged']}**; within or flagged: {summary['within_or_flagged']}/"
            f"{summary['seeds']}. Median largest share MCSE {summary['share_mcse_max_median']:.4f}, median log Z se "
            f"{summary['log_z_se_median']:.4f}; every share within 1.96·MCSE in {summary['share_covered_95']}, "
            f"log Z within 1.96·se in {summary['log_z_covered_95']} seeds. Chains per answer: mean "
            f"{summary['chains_mean']:,.0f}, max {summary['chains_max']:,}; gradient evaluations per answer: mean "
            f"{summary['gradient_evaluations_mean']:,.0f}; {summary['seconds']:.0f} s in all.")


def markdown(result: dict) -> str:
    """The tables of ``smc_acceptance.md``."""
    sizes = result["sizes"]
    lines = ["# The d = 4 three-mode question through `generate(..., sampler=\"smc\")`: the issue's acceptance", "",
             f"Command: `{result['command']}`; {result['date']}; {result['machine']}; jax {result['jax']}; "
             f"{result['total_seconds']:.0f} s in all.", "",
             f"Question: `three4d` of smc_peers (d = 4, modes 0.6 / 0.3 / 0.1, s = 0.2, standard-normal prior, τ = 1); "
             f"closed form: shares {np.round(TRUTH, 4).tolist()}, log Z {LOG_Z:.4f}. Each answer: "
             f"`generate(seed, G, sampler=\"smc\", num_chains={sizes['chains']}, num_samples={sizes['samples']}, "
             f"num_warmup={sizes['warmup']})` with the sampler's default options {result['smc_defaults']}; shares = "
             "`result.expectation(one_hot_mode)` (MCSE from the independent particle groups), log Z = "
             "`result.log_evidence` ± `log_evidence_se`. Tolerance: every share within "
             f"{SHARE_TOLERANCE}, log Z within {LOG_Z_TOLERANCE}. Flagged: the result's own error bar does not "
             f"promise it (1.96·MCSE > {SHARE_TOLERANCE} for a share, or 1.96·se > {LOG_Z_TOLERANCE} for log Z).", "",
             f"## {sizes['chains']:,} chains, default options", "", _counts(result["plain"]["summary"]), ""]
    lines += _table(result["plain"]["rows"]) + [""]
    for precision in result.get("precision") or []:
        lines += [f"## With a precision target: `precision={{\"target\": one_hot_mode, \"mcse\": "
                  f"{precision['mcse']:.4f}, \"max_chains\": {precision['max_chains']}}}`", "",
                  f"MCSE target = {SHARE_TOLERANCE} / {precision['z']}: "
                  + ("each share's error bar then promises the tolerance at 95 %. " if precision["z"] == Z95 else
                     "the shares' and log Z's error bars then promise the tolerance together at 95 % (Bonferroni). ")
                  + f"Runs of {sizes['chains']:,} chains are added until it is reached. "
                  + _counts(precision["summary"]), ""]
        lines += _table(precision["rows"]) + [""]
    lines += [result["verdict"], ""]
    return "\n".join(lines) + "\n"


def _verdict(plain: dict, precisions: list[dict], chains: int) -> str:
    """The acceptance in words, from the counts."""
    text = (f"Acceptance: {plain['within_tolerance']}/{plain['seeds']} seeds within the tolerance at "
            f"{chains:,} chains ({'met' if plain['within_tolerance'] >= 19 else 'not met'} as '19 of 20'); "
            f"{plain['within_or_flagged']}/{plain['seeds']} within or flagged by their own MCSE, "
            f"{plain['missed_not_flagged']} missed without being flagged.")
    for precision in precisions:
        counts = precision["summary"]
        text += (f" With the precision target MCSE ≤ {SHARE_TOLERANCE}/{precision['z']}: {counts['within_tolerance']}/"
                 f"{counts['seeds']} within the tolerance at a mean {counts['chains_mean']:,.0f} chains (max "
                 f"{counts['chains_max']:,}).")
    return text


def _precision_stage(sizes: dict, z: float, log) -> dict:
    """Every seed asked again with ``precision`` MCSE = tolerance / z on the shares."""
    target = {"target": mode_indicator, "mcse": SHARE_TOLERANCE / z, "max_chains": sizes["max_runs"] * sizes["chains"]}
    rows = []
    for seed in range(sizes["seeds"]):
        rows.append(_ask(seed, sizes, target))
        r = rows[-1]
        log(f"seed {seed} with precision (z {z}): max share error {r['share_error_max_abs']:.4f} (MCSE "
            f"{max(r['share_mcse']):.4f}), log Z error {r['log_z_error']:+.4f} (se {r['log_z_se']:.4f}); "
            f"within {r['within_tolerance']}, {r['chains']} chains ({r['seconds']:.1f} s)")
    return {"z": z, "mcse": target["mcse"], "max_chains": target["max_chains"], "rows": rows,
            "summary": summarize(rows)}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 seeds of 1,024 chains, scratch output")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    sizes = dict(QUICK if args.quick else FULL)
    if args.seeds:
        sizes["seeds"] = args.seeds
    out = args.out or (tempfile.mkdtemp(prefix="smc-acceptance-") if args.quick else RESULTS)

    def log(message):
        print(message, file=sys.stderr, flush=True)

    started = time.perf_counter()
    plain_rows = []
    for seed in range(sizes["seeds"]):
        plain_rows.append(_ask(seed, sizes))
        r = plain_rows[-1]
        log(f"seed {seed}: max share error {r['share_error_max_abs']:.4f} (MCSE {max(r['share_mcse']):.4f}), log Z "
            f"error {r['log_z_error']:+.4f} (se {r['log_z_se']:.4f}); within {r['within_tolerance']}, flagged "
            f"{r['flagged']} ({r['seconds']:.1f} s)")
    plain = summarize(plain_rows)
    precisions = ([_precision_stage(sizes, z, log) for z in PRECISION_Z]
                  if plain["within_tolerance"] < 19 * sizes["seeds"] / 20 else [])
    device = jax.devices()[0]
    result = {"command": "python -m jaxprobe.bench.smc_acceptance " + " ".join(argv if argv is not None
                                                                              else sys.argv[1:]),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": f"{platform.machine()}, {os.cpu_count()}-core CPU" if device.platform == "cpu"
              else f"{platform.machine()}, {device.device_kind}",
              "jax": jax.__version__, "jaxprobe": jaxprobe.__version__, "sizes": sizes,
              "smc_defaults": {"num_mcmc_steps": SMC().num_mcmc_steps, "target_ess": SMC().target_ess,
                               "num_groups": SMC().groups(sizes["chains"])},
              "truth": {"shares": TRUTH.tolist(), "log_z": LOG_Z},
              "tolerance": {"share": SHARE_TOLERANCE, "log_z": LOG_Z_TOLERANCE},
              "plain": {"rows": plain_rows, "summary": plain}, "precision": precisions,
              "verdict": _verdict(plain, precisions, sizes["chains"]),
              "total_seconds": time.perf_counter() - started}
    write_results(out, "smc_acceptance", result, markdown(result))
    log(result["verdict"])
    log(f"wrote {out}/smc_acceptance.json ({result['total_seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
