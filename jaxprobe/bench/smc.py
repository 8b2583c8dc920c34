"""SMC vs ChEES and MALA on multimodal questions, side by side in one process.

Two questions, each answered by every sampler with the same number of chains C, draws N and warmup W:

(a) *Two bumps*: a 2-D standard-normal prior tilted by exp(−G) = 0.8·N(x; (3, 0), 0.5²I) + 0.2·N(x; (−3, 0),
    0.5²I), τ = 1. Closed form: the posterior is a mixture of N(±3/1.25, 0.5²/1.25 I) with shares exactly 0.8 and
    0.2 (the bumps are equidistant from the prior's mean), log Z = log E_prior[exp(−G)] = log N((3, 0); 0, 1.25 I).
    Reported: share of draws with x₀ > 0 minus 0.8, log Z − closed form (SMC only), and TV on a 30×30 grid
    of cells over [−5, 5]² (closed-form cell masses; draws outside the square form a 901st cell).
(b) *Figure 2*: model-contrast probe of an RBF vs a cubic SVM on circles (as tests/test_generation_figure2.py),
    Box [−1.5, 1.5]², flat prior, τ = 0.1 (the target's mass sits on the disjoint regions where the two SVMs
    disagree; ChEES's R-hat flags the chains as stuck). Exact target by a 300×300 midpoint rule of exp(−G/τ)
    over the box; reported: TV between the draws' and the exact mass on 30×30 cells, log Z − quadrature
    (SMC; flat prior on the box = uniform reference, log Z = log mean of exp(−G/τ)), and the Monte-Carlo
    floor of the TV (expected TV of C·N independent exact draws).

Cost: gradient evaluations summed over chains. ``Samples.num_gradient_evaluations`` counts the sampling
phase (for SMC also its tempering stages); the warmup is added here: W per chain for MALA and for the
MALA steps that continue SMC's particles (one gradient per step), and for ChEES *estimated* as W × the
mean gradients per sampling step (its warmup trajectory lengths are not reported). Wall time: a first call
compiles (its extra time is reported as compile), then each seed's call is timed; time = the minimum.

Target (issue): SMC reaches TV ≤ 0.05 for at most 20× the gradient evaluations of a ChEES run with the same
C and N.

(c) *Figure 2 at 2,048 particles* (the issue's acceptance, TV ≤ 0.06): question (b) asked through
``generate(seed, ..., sampler="smc", num_chains=2048, num_samples=200, num_warmup=100)`` with the sampler's
default options for 5 seeds; TV of all draws to the quadrature on the issue's 8×8 cells (exact mass by a 240²
midpoint rule, 30² points a cell) and on the 30×30 cells above, each with its Monte-Carlo floor, and the TV of
the chains' first draws alone (2,048 points, about the particles), log Z error and gradient evaluations.

SMC runs with the sampler's default options (:class:`jaxprobe.engine.kernels.SMC`, recorded in the results).

Run: python -m jaxprobe.bench.smc [--quick [--record]] [--out DIR] [--seeds K]
Default: full sizes, writes benchmarks/results/smc.{json,md}; --quick writes to a scratch dir unless --record.
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
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import ndtr
from scipy.stats import norm

from jaxprobe.bench import results_dir, write_results
import jaxprobe
from jaxprobe import datasets, probes
from jaxprobe.constraints import Box
from jaxprobe.models import from_sklearn
from jaxprobe.quadrature import SquareGrid, total_variation, total_variation_floor

# `jaxprobe bench` points this at a scratch folder unless --record is given.
RESULTS = results_dir()
FULL = {"chains": 1024, "samples": 200, "warmup": 200, "seeds": 3}
QUICK = {"chains": 256, "samples": 50, "warmup": 50, "seeds": 1}
SAMPLERS = ("smc", "chees", "mala")
SMC_OPTIONS: dict = {}  # the sampler's defaults (recorded as ``smc_defaults``)
TV_TARGET, COST_TARGET = 0.05, 20.0
# (c) Figure 2 at 2,048 particles: sizes, the 8×8 cells (by a 240² rule: 8 divides it) and its target
FIG2_ACCEPTANCE = {"chains": 2048, "samples": 200, "warmup": 100, "seeds": 5}
FIG2_ACCEPTANCE_QUICK = {"chains": 256, "samples": 20, "warmup": 20, "seeds": 1}
COARSE_CELLS, COARSE_QUADRATURE, FIG2_TV_TARGET = 8, 240, 0.06

# (a) two bumps
BUMP_CENTRES = np.array([[3.0, 0.0], [-3.0, 0.0]])
BUMP_WEIGHTS = np.array([0.8, 0.2])
BUMP_WIDTH = 0.5
BUMP_LOG_Z = float(np.log(np.sum(BUMP_WEIGHTS * norm.pdf(BUMP_CENTRES, scale=math.sqrt(1 + BUMP_WIDTH**2)).prod(1))))
POST_MEANS = BUMP_CENTRES / (1 + BUMP_WIDTH**2)
POST_SD = BUMP_WIDTH / math.sqrt(1 + BUMP_WIDTH**2)
MIX_SQUARE, CELLS = 5.0, 30

# (b) Figure 2
BOX, FIG2_TEMPERATURE, QUADRATURE = 1.5, 0.1, 300


def bumps_loss(x):
    """G(x) = −log(0.8·N(x; a, 0.25 I) + 0.2·N(x; b, 0.25 I))."""
    log_components = (jnp.log(jnp.asarray(BUMP_WEIGHTS, jnp.float32))
                      - 0.5 * jnp.sum((x - jnp.asarray(BUMP_CENTRES, jnp.float32)) ** 2, axis=1) / BUMP_WIDTH**2
                      - 2 * math.log(BUMP_WIDTH) - math.log(2 * math.pi))
    return -jax.scipy.special.logsumexp(log_components)


def bumps_cell_mass() -> np.ndarray:
    """Closed-form posterior mass of the CELLS² cells of [−5, 5]², plus the outside mass last."""
    edges = np.linspace(-MIX_SQUARE, MIX_SQUARE, CELLS + 1)
    mass = np.zeros((CELLS, CELLS))
    for share, mean in zip(BUMP_WEIGHTS, POST_MEANS):  # equal c_j: the posterior shares are the weights
        px, py = (np.diff(ndtr((edges - m) / POST_SD)) for m in mean)
        mass += share * np.outer(px, py)
    mass = mass.ravel()
    return np.append(mass, max(0.0, 1.0 - mass.sum()))


def draws_cell_mass(x: np.ndarray, half_width: float, outside: bool) -> np.ndarray:
    edges = np.linspace(-half_width, half_width, CELLS + 1)
    counts, _, _ = np.histogram2d(x[:, 0], x[:, 1], bins=[edges, edges])
    counts = counts.ravel()
    if outside:
        counts = np.append(counts, len(x) - counts.sum())
    return counts / len(x)


def figure2_question():
    """Figure 2's probe and its exact answer by quadrature (:class:`jaxprobe.quadrature.SquareGrid`)."""
    from sklearn.svm import SVC

    data = datasets.circles(600, noise=0.1, factor=0.4, seed=0)
    train, _ = data.train_test_split(0)
    rbf = SVC(kernel="rbf").fit(train.x, train.y)
    cubic = SVC(kernel="poly", degree=3).fit(train.x, train.y)
    probe = probes.model_contrast(from_sklearn(rbf), from_sklearn(cubic), from_logits=True)
    grid = SquareGrid(probe, -BOX, BOX, QUADRATURE)
    return probe, grid, grid.cell_mass(FIG2_TEMPERATURE, CELLS), grid.log_evidence(FIG2_TEMPERATURE)


def figure2_acceptance(probe, grid: SquareGrid, sizes: dict, log) -> dict:
    """(c): Figure 2's contrast through ``generate(..., sampler="smc")`` at ``sizes["chains"]`` particles with the
    default options, ``sizes["seeds"]`` seeds: TV of the draws on 8×8 and 30×30 cells, of the first draws alone,
    their floors, log Z error and gradient evaluations per seed."""
    coarse = SquareGrid(probe, -BOX, BOX, COARSE_QUADRATURE).cell_mass(FIG2_TEMPERATURE, COARSE_CELLS)
    fine, log_z = grid.cell_mass(FIG2_TEMPERATURE, CELLS), grid.log_evidence(FIG2_TEMPERATURE)
    num_draws = sizes["chains"] * sizes["samples"]
    runs = []
    for seed in range(sizes["seeds"]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = jaxprobe.generate(seed, probe, temperature=FIG2_TEMPERATURE, dim=2, constraints=Box(-BOX, BOX),
                                       num_chains=sizes["chains"], num_samples=sizes["samples"],
                                       num_warmup=sizes["warmup"], sampler="smc", progress=False,
                                       convergence="ignore")
        x, first = result.positions.reshape(-1, 2), result.positions[:, 0]
        row = {"seed": seed, "tv_8x8": total_variation(grid.draws_mass(x, COARSE_CELLS), coarse),
               "tv_30x30": total_variation(grid.draws_mass(x, CELLS), fine),
               "tv_8x8_first_draws": total_variation(grid.draws_mass(first, COARSE_CELLS), coarse),
               "log_evidence_error": float(result.log_evidence) - log_z,
               "log_evidence_se": float(result.log_evidence_se),
               "gradient_evaluations": int(result.num_gradient_evaluations.sum())}
        runs.append(row)
        log(f"  figure 2 at {sizes['chains']} particles, seed {seed}: TV 8x8 {row['tv_8x8']:.4f}, 30x30 "
            f"{row['tv_30x30']:.4f}, first draws 8x8 {row['tv_8x8_first_draws']:.4f}; log Z error "
            f"{row['log_evidence_error']:+.4f} (se {row['log_evidence_se']:.4f})")
    summary = {key: {"mean": float(np.mean([r[key] for r in runs])), "max": float(max(r[key] for r in runs))}
               for key in ("tv_8x8", "tv_30x30", "tv_8x8_first_draws")}
    return {"sizes": sizes, "runs": runs, "summary": summary,
            "floors": {"tv_8x8": total_variation_floor(coarse, num_draws),
                       "tv_30x30": total_variation_floor(fine, num_draws),
                       "tv_8x8_first_draws": total_variation_floor(coarse, sizes["chains"])},
            "target": FIG2_TV_TARGET, "target_met": bool(summary["tv_8x8"]["max"] <= FIG2_TV_TARGET)}


def run_sampler(question: dict, sampler: str, sizes: dict, log) -> dict:
    kwargs = dict(temperature=question["temperature"], dim=2, num_chains=sizes["chains"],
                  num_samples=sizes["samples"], num_warmup=sizes["warmup"], sampler=sampler, progress=False,
                  convergence="ignore", **question["kwargs"])
    if sampler == "smc":
        kwargs["sampler_options"] = dict(SMC_OPTIONS)

    def call(seed):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            result = jaxprobe.generate(seed, question["probe"], **kwargs)
            return result, time.perf_counter() - start

    _, first = call(1000)  # compiles
    runs = []
    for seed in range(sizes["seeds"]):
        result, seconds = call(seed)
        x = result.positions.reshape(-1, 2)
        sampling = int(result.num_gradient_evaluations.sum())
        steps = sizes["chains"] * sizes["samples"]
        if sampler == "chees":  # estimate: W × mean gradients per sampling step
            warmup = int(round(sizes["warmup"] * sizes["chains"] * sampling / steps))
        else:  # MALA steps (SMC's particles continue as MALA chains)
            warmup = sizes["warmup"] * sizes["chains"]
        row = {"seed": seed, "seconds": seconds, "tv": total_variation(draws_cell_mass(x, question["half_width"],
                                                                           question["outside"]), question["mass"]),
               "gradient_evaluations_reported": sampling, "gradient_evaluations_warmup": warmup,
               "gradient_evaluations": sampling + warmup,
               "acceptance_rate": float(np.mean(result.acceptance_rate))}
        if question["mode_share"] is not None:
            row["mode_share"] = float(np.mean(x[:, 0] > 0))
            row["mode_share_error"] = row["mode_share"] - question["mode_share"]
        if result.log_evidence is not None:
            row.update(log_evidence=float(result.log_evidence), log_evidence_se=float(result.log_evidence_se),
                       log_evidence_error=float(result.log_evidence) - question["log_z"],
                       num_stages=int(len(result.evidence_path["inverse_temperature"])))
        runs.append(row)
        log(f"  {question['name']} {sampler} seed {seed}: tv {row['tv']:.4f}"
            + (f", mode share error {row['mode_share_error']:+.4f}" if "mode_share" in row else "")
            + (f", log Z error {row['log_evidence_error']:+.4f} (se {row['log_evidence_se']:.4f})"
               if "log_evidence" in row else "")
            + f", {row['gradient_evaluations']} grads, {seconds:.2f} s")
    best = min(r["seconds"] for r in runs)
    summary = {"runs": runs, "seconds": best, "compile_seconds": max(0.0, first - best),
               "tv_mean": float(np.mean([r["tv"] for r in runs])), "tv_max": float(max(r["tv"] for r in runs)),
               "gradient_evaluations": int(np.mean([r["gradient_evaluations"] for r in runs])),
               "gradient_evaluations_reported": int(np.mean([r["gradient_evaluations_reported"] for r in runs]))}
    if question["mode_share"] is not None:
        summary["mode_share_error_max_abs"] = float(max(abs(r["mode_share_error"]) for r in runs))
    if sampler == "smc":
        summary["log_evidence_error_max_abs"] = float(max(abs(r["log_evidence_error"]) for r in runs))
        summary["log_evidence_z_max_abs"] = float(max(abs(r["log_evidence_error"]) / r["log_evidence_se"]
                                                      for r in runs))
    return summary


def _smc_defaults() -> dict:
    """The SMC options the runs used: the sampler's defaults (:class:`jaxprobe.engine.kernels.SMC`)."""
    from jaxprobe.engine.kernels import SMC

    defaults = SMC(**SMC_OPTIONS)
    return {"kernel": defaults.kernel, "num_mcmc_steps": defaults.num_mcmc_steps, "target_ess": defaults.target_ess,
            "num_groups": "N/128 in [2, 16]" if defaults.num_groups is None else defaults.num_groups}


def _acceptance_markdown(acceptance: dict) -> list[str]:
    """Section (c) of ``smc.md``."""
    sizes, summary, floors = acceptance["sizes"], acceptance["summary"], acceptance["floors"]
    lines = [f"## (c) Figure 2 at {sizes['chains']:,} particles (the issue's acceptance: TV ≤ {acceptance['target']})",
             "", f"`generate(seed, ..., sampler=\"smc\", num_chains={sizes['chains']}, num_samples={sizes['samples']}, "
             f"num_warmup={sizes['warmup']})`, default options, {sizes['seeds']} seeds. TV to the quadrature on "
             f"{COARSE_CELLS}×{COARSE_CELLS} cells (the issue's grid; {COARSE_QUADRATURE}² midpoint rule) and on "
             f"{CELLS}×{CELLS} cells; first draws: the chains' first kept draws alone ({sizes['chains']:,} points); "
             "gradient evaluations: the SMC stages and the kept draws (warmup not counted).", "",
             "| seed | TV 8×8 | TV 30×30 | TV 8×8, first draws | log Z error (se) | gradient evals |",
             "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in acceptance["runs"]:
        lines.append(f"| {r['seed']} | {r['tv_8x8']:.4f} | {r['tv_30x30']:.4f} | {r['tv_8x8_first_draws']:.4f} | "
                     f"{r['log_evidence_error']:+.4f} ({r['log_evidence_se']:.4f}) | {r['gradient_evaluations']:,} |")
    lines.append(f"| mean (max) | {summary['tv_8x8']['mean']:.4f} ({summary['tv_8x8']['max']:.4f}) | "
                 f"{summary['tv_30x30']['mean']:.4f} ({summary['tv_30x30']['max']:.4f}) | "
                 f"{summary['tv_8x8_first_draws']['mean']:.4f} ({summary['tv_8x8_first_draws']['max']:.4f}) | | |")
    lines += ["", f"Monte-Carlo floors (independent exact draws): 8×8 {floors['tv_8x8']:.4f}, 30×30 "
              f"{floors['tv_30x30']:.4f}, 8×8 of {sizes['chains']:,} draws {floors['tv_8x8_first_draws']:.4f}. "
              f"Target (TV 8×8 ≤ {acceptance['target']} in every seed): "
              f"**{'met' if acceptance['target_met'] else 'not met'}**.", ""]
    return lines


def markdown(result: dict) -> str:
    lines = ["# SMC vs ChEES and MALA on multimodal questions", "",
             f"Command: `{result['command']}`; {result['date']}; {result['machine']}; jax {result['jax']}; "
             f"load average at the end {result['load_average']}." + (" **--quick: smoke run**" if result["quick"]
                                                                    else ""), "",
             f"Sizes: {result['sizes']['chains']} chains × {result['sizes']['samples']} draws, "
             f"{result['sizes']['warmup']} warmup steps, {result['sizes']['seeds']} seed(s) per cell; SMC options "
             f"(the sampler's defaults) {json.dumps(result['smc_defaults'])}. TV on 30×30 cells; TV / mode-share / log Z columns are the worst over "
             f"seeds, TV mean beside it; gradient evaluations = mean over seeds, summed over chains, warmup "
             f"included (ChEES warmup estimated, see the script's docstring); time = fastest seed, compile "
             f"separate. The machine may be shared: compare ratios, measured side by side.", ""]
    for name, question in result["questions"].items():
        lines += [f"## {question['title']}", "", question["exact"], "",
                  "| sampler | TV (max) | TV (mean) | mode-share error (max abs) | log Z error (max abs, max z) | "
                  "gradient evals | × ChEES | time (s) | compile (s) |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        chees = question["samplers"]["chees"]["gradient_evaluations"]
        for sampler, row in question["samplers"].items():
            share = f"{row['mode_share_error_max_abs']:.4f}" if "mode_share_error_max_abs" in row else "–"
            log_z = (f"{row['log_evidence_error_max_abs']:.4f} ({row['log_evidence_z_max_abs']:.1f} se)"
                     if "log_evidence_error_max_abs" in row else "–")
            lines.append(f"| {sampler} | {row['tv_max']:.4f} | {row['tv_mean']:.4f} | {share} | {log_z} | "
                         f"{row['gradient_evaluations']:,} | {row['gradient_evaluations'] / chees:.2f} | "
                         f"{row['seconds']:.2f} | {row['compile_seconds']:.1f} |")
        lines += ["", f"Monte-Carlo floor of the TV (C·N independent exact draws): {question['tv_floor']:.4f}. "
                  f"Issue target (TV ≤ {TV_TARGET} at ≤ {COST_TARGET:.0f}× ChEES's gradient evaluations): "
                  f"**{'met' if question['target_met'] else 'not met'}** (SMC TV max {question['samplers']['smc']['tv_max']:.4f}, "
                  f"{question['smc_cost_ratio']:.2f}× ChEES).", ""]
    if "figure2_acceptance" in result:
        lines += _acceptance_markdown(result["figure2_acceptance"])
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke run (scratch output)")
    parser.add_argument("--record", action="store_true", help="with --quick: write into --out anyway")
    parser.add_argument("--out", default=None, help=f"output folder (default {RESULTS})")
    parser.add_argument("--seeds", type=int, default=None, help="timed seeds per sampler")
    args = parser.parse_args(argv)
    sizes = dict(QUICK if args.quick else FULL)
    if args.seeds:
        sizes["seeds"] = args.seeds
    out = args.out or (RESULTS if (not args.quick or args.record) else tempfile.mkdtemp(prefix="smc-bench-"))

    def log(message):
        print(message, file=sys.stderr, flush=True)

    bump_mass = bumps_cell_mass()
    fig2_probe, fig2_grid, fig2_mass, fig2_log_z = figure2_question()
    questions = {
        "bumps": {"name": "bumps", "title": "(a) Two bumps under a standard-normal prior (2-D)",
                  "exact": f"Closed form: mode shares 0.8 / 0.2, log Z = {BUMP_LOG_Z:.4f}; TV cells over [−5, 5]² "
                           "plus an outside cell.",
                  "probe": bumps_loss, "temperature": 1.0, "mass": bump_mass, "log_z": BUMP_LOG_Z,
                  "mode_share": 0.8, "half_width": MIX_SQUARE, "outside": True,
                  "kwargs": {"prior": jaxprobe.priors.StandardNormal()}},
        "figure2": {"name": "figure2", "title": f"(b) Figure 2 model contrast (RBF vs cubic SVM, circles), "
                                               f"Box [−1.5, 1.5]², flat prior, τ = {FIG2_TEMPERATURE}",
                    "exact": f"Quadrature ({QUADRATURE}² midpoint rule): log Z = {fig2_log_z:.4f}.",
                    "probe": fig2_probe, "temperature": FIG2_TEMPERATURE, "mass": fig2_mass, "log_z": fig2_log_z,
                    "mode_share": None, "half_width": BOX, "outside": False,
                    "kwargs": {"constraints": Box(-BOX, BOX)}},
    }
    started = time.perf_counter()
    record = {}
    for name, question in questions.items():
        rows = {sampler: run_sampler(question, sampler, sizes, log) for sampler in SAMPLERS}
        ratio = rows["smc"]["gradient_evaluations"] / rows["chees"]["gradient_evaluations"]
        record[name] = {"title": question["title"], "exact": question["exact"], "log_z": question["log_z"],
                        "tv_floor": total_variation_floor(question["mass"], sizes["chains"] * sizes["samples"]),
                        "samplers": rows, "smc_cost_ratio": ratio,
                        "target_met": bool(rows["smc"]["tv_max"] <= TV_TARGET and ratio <= COST_TARGET)}
    acceptance = figure2_acceptance(fig2_probe, fig2_grid, dict(FIG2_ACCEPTANCE_QUICK if args.quick
                                                                else FIG2_ACCEPTANCE), log)
    result = {
        "command": "python -m jaxprobe.bench.smc" + (" " + " ".join(argv if argv is not None else sys.argv[1:])
                                                              if (argv if argv is not None else sys.argv[1:]) else ""),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
                   f"{jax.devices()[0].platform}",
        "jax": jax.__version__, "jaxprobe": jaxprobe.__version__, "quick": args.quick, "sizes": sizes,
        "smc_options": SMC_OPTIONS, "smc_defaults": _smc_defaults(), "figure2_acceptance": acceptance,
        "total_seconds": time.perf_counter() - started,
        "load_average": tuple(round(v, 1) for v in os.getloadavg()), "questions": record,
    }
    write_results(out, "smc", result, markdown(result))
    log(f"wrote {out}/smc.json and smc.md ({result['total_seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
