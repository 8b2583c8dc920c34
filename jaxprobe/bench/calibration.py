"""Calibration of jaxprobe's error bars: how often nominal 95% intervals ``mean ± 1.96·MCSE`` cover the truth.

Every case is a question with a known answer, answered by R >= 100 independent runs; a run's interval covers
when ``|estimate − truth| <= 1.96·mcse``. Coverage is reported with its 95% Clopper–Pearson interval; the
target is 90–98%. The runs are batched, not compiled one by one:

* **MCMC** (MALA, HMC, ChEES, NUTS): one ``jaxprobe.sample`` call with R·C chains of a 2-D Gaussian
  N((1, −2), diag(1, 3²)) (``step_size_mode="per_chain"``: each chain adapts its own step size, so the chains
  are independent; ChEES always adapts one step size from all chains, a coupling through that one number
  only), split into R runs of C chains. Each run's estimate is :func:`jaxprobe.engine.estimates.estimate` of
  the values of ``fn`` at its draws (what ``Samples.expectation`` computes, ``"ess"``: sd/√ESS), with
  ``"batch_means"`` (what the streamed observables use) beside it for comparison. Quantities: E[x₀] = 1,
  E[x₁] = −2 and the probability P(x₀ > 2) = 1 − Φ(1) (an indicator's mean). A last MALA row uses runs too
  short for a trusted error (ESS < 100): it reports how many runs said so (``note``).
* **SMC** (``sampler="smc"``): a sweep over R seeds (cells batched into one program) of the two-bumps question
  of :mod:`jaxprobe.bench.smc`: a 2-D standard-normal prior tilted by 0.8·N((3, 0), 0.5²I) + 0.2·N((−3, 0),
  0.5²I), whose posterior puts exactly 0.8 of its mass on x₀ > 0, with log Z in closed form. Per cell: the
  share x₀ > 0 at the SMC particles (``particle_observables``, the spread of the G group means), the share
  over the chains that continue them (``observables``, the same groups' means), and log Z ± its standard
  error (``log_evidence_se``, the delta method on the same G groups).

Run: python -m jaxprobe.bench.calibration [--quick] [--runs R] [--out DIR]
Default: writes benchmarks/results/calibration.{json,md} (:func:`jaxprobe.bench.results_dir`); --quick: fewer
runs and draws, into a scratch folder.
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
from scipy.stats import beta, norm

import jaxprobe
from jaxprobe.bench import results_dir, write_results
from jaxprobe.bench.smc import BUMP_LOG_Z, bumps_loss
from jaxprobe.engine import estimates
from jaxprobe.probes import Probe

RESULTS = results_dir()
FULL = {"runs": 200, "chains": 4, "samples": 1000, "warmup": 300, "short_samples": 12, "smc_runs": 200,
        "smc_chains": 4096, "smc_groups": 16, "smc_samples": 10, "smc_warmup": 10}
QUICK = {"runs": 100, "chains": 4, "samples": 200, "warmup": 200, "short_samples": 12, "smc_runs": 100,
         "smc_chains": 512, "smc_groups": 16, "smc_samples": 4, "smc_warmup": 4}
MCMC_SAMPLERS = ("mala", "hmc", "chees", "nuts")
MEAN, SCALE = np.array([1.0, -2.0]), np.array([1.0, 3.0])
THRESHOLD = 2.0  # P(x0 > 2) = 1 − Φ(1)
Z95 = 1.959964
TARGET = (0.90, 0.98)


def gaussian_logdensity(x):
    return -0.5 * jnp.sum(((x - jnp.asarray(MEAN, x.dtype)) / jnp.asarray(SCALE, x.dtype)) ** 2)


def quantities(x):
    """The estimated functions of one position: x₀, x₁ and the indicator x₀ > 2."""
    return jnp.stack([x[0], x[1], (x[0] > THRESHOLD).astype(x.dtype)])


TRUTH = np.array([MEAN[0], MEAN[1], 1.0 - norm.cdf((THRESHOLD - MEAN[0]) / SCALE[0])])
NAMES = ("mean x0", "mean x1", "P(x0 > 2)")


def binomial_interval(k: int, n: int) -> tuple[float, float]:
    """95% Clopper–Pearson interval of a proportion k/n."""
    return (0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1)),
            1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k)))


def coverage(errors: np.ndarray, mcse: np.ndarray, noted: np.ndarray | None = None) -> dict:
    """Coverage of ``|error| <= 1.96·mcse`` over runs (NaN mcse: not covered) with its Clopper–Pearson interval;
    also over the runs whose estimate carried no note (``noted`` False), those whose error jaxprobe trusts."""
    hits = np.abs(errors) <= Z95 * np.nan_to_num(mcse, nan=-1.0)
    n, k = hits.size, int(hits.sum())
    low, high = binomial_interval(k, n)
    z = errors / np.where(mcse > 0, mcse, np.nan)
    trusted = np.ones(n, bool) if noted is None else ~np.asarray(noted)
    n_trusted, k_trusted = int(trusted.sum()), int(hits[trusted].sum())
    return {"runs": n, "covered": k, "coverage": k / n, "low": low, "high": high,
            "in_target": bool(TARGET[0] <= k / n <= TARGET[1]), "sd_of_z": float(np.nanstd(z)),
            "mean_z": float(np.nanmean(z)), "median_mcse": float(np.median(mcse)),
            "trusted_runs": n_trusted, "trusted_coverage": k_trusted / n_trusted if n_trusted else None,
            "runs_with_note": n - n_trusted}


def mcmc_case(sampler: str, sizes: dict, num_samples: int, seed: int) -> list[dict]:
    """R runs of C chains of ``sampler`` in one call; per run and quantity: estimates by "ess" and "batch_means"."""
    runs, chains = sizes["runs"], sizes["chains"]
    start = np.random.default_rng(seed).normal(size=(runs * chains, 2)) * SCALE + MEAN
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tick = time.perf_counter()
        samples = jaxprobe.sample(seed, gaussian_logdensity, start.astype(np.float32), sampler=sampler,
                                  num_samples=num_samples, num_warmup=sizes["warmup"], progress=False,
                                  convergence="ignore", step_size_mode="per_chain")
        seconds = time.perf_counter() - tick
    values = estimates.evaluate(quantities, samples.positions)  # (R·C, N, 3)
    rows = []
    for method in ("ess", "batch_means"):
        found = [estimates.estimate(values[r * chains:(r + 1) * chains], method=method) for r in range(runs)]
        mean = np.stack([f.mean for f in found])
        mcse = np.stack([f.mcse for f in found])
        noted = np.array([f.note is not None for f in found])
        for q, name in enumerate(NAMES):
            row = coverage(mean[:, q] - TRUTH[q], mcse[:, q], noted)
            row.update(case=f"{sampler}: {name}", sampler=sampler, quantity=name, method=method,
                       chains=chains, draws=num_samples, seconds=seconds,
                       median_ess=None if found[0].ess is None else float(np.median([f.ess[q] for f in found])))
            rows.append(row)
    return rows


def smc_case(sizes: dict, seed: int) -> list[dict]:
    """R seeds of the two-bumps question under sampler="smc", batched as one sweep."""
    runs = sizes["smc_runs"]
    share = {"share x0 > 0": lambda x: (x[0] > 0).astype(x.dtype)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tick = time.perf_counter()
        result = jaxprobe.sweep(seed, Probe(bumps_loss, "two_bumps"), {"seed": list(range(runs))}, temperature=1.0,
                                prior=jaxprobe.priors.StandardNormal(), dim=2, num_chains=sizes["smc_chains"],
                                num_samples=sizes["smc_samples"], num_warmup=sizes["smc_warmup"], sampler="smc",
                                sampler_options={"num_groups": sizes["smc_groups"]}, observables=share,
                                progress=False, convergence="ignore", keep_samples=True)
        seconds = time.perf_counter() - tick
    cells = [s for s in result.samples if s is not None]
    if not cells:
        raise RuntimeError(f"every SMC cell failed: {result.rows[0]['error']}")
    common = dict(sampler="smc", chains=sizes["smc_chains"], draws=sizes["smc_samples"], seconds=seconds,
                  groups=sizes["smc_groups"])
    rows = []
    for label, field in (("particles", "particle_observables"), ("chains after SMC", "observables")):
        found = [getattr(s, field)["share x0 > 0"] for s in cells]
        row = coverage(np.array([float(f.mean) for f in found]) - 0.8, np.array([float(f.mcse) for f in found]),
                       np.array([f.note is not None for f in found]))
        row.update(case=f"smc: mode share x0 > 0 ({label})", quantity="mode share", method="smc_groups",
                   median_ess=None, **common)
        rows.append(row)
    log_z = np.array([s.log_evidence for s in cells])
    row = coverage(log_z - BUMP_LOG_Z, np.array([s.log_evidence_se for s in cells]))
    row.update(case="smc: log Z", quantity="log Z", method="smc_groups (delta method)", median_ess=None, **common)
    rows.append(row)
    return rows


FINDINGS = """Reading the table. The `ess` method (what `Samples.expectation` and `Samples.summary` use for MCMC) is
within the target for every sampler at 4 chains × 1000 draws, and so is `batch_means` (the streamed
observables: 16 batches of 250 draws). With 32 batches of 125 draws HMC's rows covered 0.895 and 0.875 (sd(z) up
to 1.28): its fixed-length trajectories give autocorrelations that 125-draw batches do not contain; 8 batches of
500 were worse again (an error estimated from 8 values: five rows below 0.90). At 4 × 400 draws (an earlier run of this script) HMC's indicator P(x0 > 2) covered only
86% with `ess` as well (sd(z) 1.3): the estimated ESS of an indicator under HMC is too large in short runs; at
1600 draws it covered 93.5%. The short MALA runs (4 × 12 draws, ESS 7–45) cover 82–90%, and every one of those
estimates carried its note (ESS below 100): an error jaxprobe does not trust is reported as such. After SMC the
errors come from 16 independent particle groups (a t statistic with 15 degrees of freedom covers 93% at best);
particle averages carry the O(1/n) bias of n = N/G particles per group (here n = 256, mean(z) ≈ −0.1; at N = 512,
n = 32 it was mean(z) ≈ −0.6, coverage 92%), so keep N/G in the hundreds."""


def markdown(result: dict) -> str:
    lines = ["# Calibration of the Monte-Carlo standard errors", "",
             f"Command: `{result['command']}`; {result['date']}; {result['machine']}; jax {result['jax']}; "
             f"{result['total_seconds']:.0f} s in all.", "",
             "Each row: R independent runs on a question with a known answer; coverage = share of runs whose "
             "nominal 95% interval mean ± 1.96·MCSE holds the truth, with its 95% Clopper–Pearson interval; "
             f"target {TARGET[0]:.0%}–{TARGET[1]:.0%}. `sd(z)` is the spread of (estimate − truth)/MCSE (1 when "
             "the MCSE is right), `mean(z)` its bias. Method `ess` is what `Samples.expectation` and "
             "`Samples.summary` use for MCMC (sd/√ESS of the function's own values), `batch_means` what the "
             "streamed observables use, `smc_groups` the spread of the independent SMC particle groups. "
             "`noted`: runs whose estimate carried a note (an error it does not trust). See the module "
             "docstring of `jaxprobe.bench.calibration` for the questions.", "",
             "| case | method | chains × draws | runs | coverage | 95% interval | in target | sd(z) | mean(z) "
             "| median MCSE | median ESS | noted | coverage without note |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        shape = f"{row['chains']} × {row['draws']}" + (f" ({row['groups']} groups)" if row.get("groups") else "")
        ess = "" if row["median_ess"] is None else f"{row['median_ess']:.0f}"
        trusted = "" if row["trusted_coverage"] is None else \
            f"{row['trusted_coverage']:.3f} of {row['trusted_runs']}"
        lines.append(f"| {row['case']} | {row['method']} | {shape} | {row['runs']} | {row['coverage']:.3f} | "
                     f"[{row['low']:.3f}, {row['high']:.3f}] | {'yes' if row['in_target'] else 'NO'} | "
                     f"{row['sd_of_z']:.2f} | {row['mean_z']:+.2f} | {row['median_mcse']:.3g} | {ess} | "
                     f"{row['runs_with_note']} | {trusted} |")
    missed = [f"{row['case']} ({row['method']}, {row['coverage']:.3f})" for row in result["rows"]
              if not row["in_target"]]
    lines += ["", "Outside the target: " + ("; ".join(missed) if missed else "none") + ".", "", FINDINGS, ""]
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer draws (a smoke run, scratch output)")
    parser.add_argument("--runs", type=int, default=None, help="independent runs per MCMC case")
    parser.add_argument("--out", default=None, help=f"output folder (default {RESULTS})")
    parser.add_argument("--cases", default="mcmc,smc", help="comma-separated: mcmc, short, smc")
    args = parser.parse_args(argv)
    sizes = dict(QUICK if args.quick else FULL)
    if args.runs:
        sizes["runs"] = args.runs
    out = args.out or (tempfile.mkdtemp(prefix="calibration-") if args.quick else RESULTS)
    cases = set(args.cases.split(","))
    started = time.perf_counter()
    rows = []

    def log(message):
        print(message, file=sys.stderr, flush=True)

    if "mcmc" in cases:
        for i, sampler in enumerate(MCMC_SAMPLERS):
            rows += mcmc_case(sampler, sizes, sizes["samples"], seed=i)
            log(f"{sampler}: {rows[-1]['seconds']:.0f} s")
    if "short" in cases or "mcmc" in cases:
        short = [r for r in mcmc_case("mala", sizes, sizes["short_samples"], seed=10) if r["method"] == "ess"]
        for row in short:
            row["case"] += " (short runs)"
        rows += short
        log("short runs done")
    if "smc" in cases:
        rows += smc_case(sizes, seed=20)
        log(f"smc: {rows[-1]['seconds']:.0f} s")
    argv_list = argv if argv is not None else sys.argv[1:]
    result = {
        "command": "python -m jaxprobe.bench.calibration" + (" " + " ".join(argv_list) if argv_list else ""),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
                   f"{jax.devices()[0].platform}",
        "jax": jax.__version__, "jaxprobe": jaxprobe.__version__, "quick": args.quick, "sizes": sizes,
        "truth": {"mcmc": dict(zip(NAMES, TRUTH.tolist())), "smc_share": 0.8, "smc_log_z": BUMP_LOG_Z},
        "total_seconds": time.perf_counter() - started, "rows": rows,
    }
    write_results(out, "calibration", result, markdown(result))
    log(f"wrote {out}/calibration.json and calibration.md ({result['total_seconds']:.0f} s)")
    return result


if __name__ == "__main__":  # pragma: no cover
    main()
