"""Tree-ensemble reconstruction: exact coordinate-wise Gibbs (``sampler="tree_gibbs"``) vs random-walk Metropolis.

Part 1, mixing per second and per ensemble evaluation, both samplers side by side in one process. For
breast_cancer (30 standardized features, 2 classes) and digits (61 features, 10 classes), as prepared by
:func:`jaxprobe.reconstruct.sweep.prepare_data` (stratified 2,000-row subset, 70 % train), the sweep's gradient
boosting victim (30 stages, depth 2) and the correct prior (a Ledoit–Wolf Gaussian fitted to the training
features), :func:`jaxprobe.reconstruct` draws every class's posterior p̂(x | y) ∝ p(y | x) prior(x) with

* ``rwmh``: ``num_warmup`` adapted steps, then ``samples × thin`` steps (whitened coordinates);
* ``tree_gibbs``: ``num_warmup`` burn-in sweeps, then ``samples × thin`` sweeps (feature units).

Both start from the same importance-resampled prior draws (``reconstruct``'s own). A first call compiles,
warms up and samples; a second call continues every chain from the first call's last draw without warmup
(RWMH with its adapted step sizes), and that second call alone is timed and assessed (pure sampling,
compiled programs reused). ESS: bulk ESS (rank-normalized, all chains pooled; BlackJAX) of every feature
coordinate of the timed run (RWMH's whitened draws mapped back, x = m + L z), median and minimum, with the
largest R-hat; and the within-chain ESS (each chain's own bulk ESS, summed over chains; median
over coordinates), which does not count the spread of the starting points: chains that never move have a
pooled ESS near the number of distinct starting points but a within-chain ESS near 0. Ensemble
evaluations: RWMH evaluates the model once per class block per step (K per chain and step), tree_gibbs
``TreeGibbsTarget.evaluations_per_sweep`` per chain and sweep for its coordinate updates (B · Σ_j (m_j + 1),
m_j the thresholds on feature j; each walks only the trees that test j) plus B per prior move (six by
default: ``tree_gibbs.DEFAULT_PRIOR_MOVES``). A row ``tree_gibbs (no prior moves)`` runs pure Gibbs sweeps.
The full run adds digits with the sweep's six prior levels in one program (``reconstruct_many``, as
``run_sweep`` calls it). Target (issue 17): tree_gibbs ≥ 50× RWMH's ESS/s on digits.

Part 2, synthetic models from the digits reconstructions of part 1 (correct prior, all training rows): a
gradient boosting model of the same settings trained on ``n`` reconstructed rows in the training class
proportions, scored on the held-out rows; synthetic / base accuracy for several ``n``, two draws of the
synthetic set each.

Part 3, the real-data reconstruction sweep for digits with tree models on tree_gibbs
(:func:`jaxprobe.reconstruct.sweep.run_sweep`: gradient boosting and a decision tree of depth 4, trained on
20 % and 100 % of the training rows, six prior levels (mean shift, covariance scale) from the correct prior, all
six in one program as ``run_sweep`` runs them; 10,000-row synthetic sets), beside gradient boosting on RWMH
with the recorded sweep's sampler settings and the same synthetic set size, and the RWMH records of
``results/reconstruction.sweep.json`` (digits gradient boosting, the only tree model there; 1258-row synthetic
sets). Target (issue 17): synthetic / base accuracy ≥ 0.9 for digits gradient boosting with the correct prior
(recorded RWMH: 0.57).

Run: ``python -m jaxprobe.bench.tree_gibbs [--quick [--record]] [--out DIR] [--skip-sweep]``, or the same
through ``jaxprobe/bench/reconstruction.py tree-gibbs [...]``.
Default: full sizes, writes ``benchmarks/results/tree_gibbs.{json,md}`` (or ``$JAXPROBE_BENCH_RESULTS``);
``--quick`` (small sizes) writes to a scratch folder unless ``--record``. The machine may be shared: the load
average is recorded; compare the ratios, measured side by side.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import sys
import tempfile
import time
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from blackjax import diagnostics

import jaxprobe
from jaxprobe import reconstruct as R
from jaxprobe._io import atomic_write
from jaxprobe.bench import code_state, load_note, results_dir
from jaxprobe.benchmark.report import machine
from jaxprobe.samplers import tree_gibbs
from jaxprobe.models import from_sklearn
from jaxprobe.reconstruct.posterior import reconstruction_question
from jaxprobe.reconstruct.sweep import make_model, prepare_data, run_sweep, spearman_summary
from jaxprobe.reconstruct.synthetic import synthetic_accuracy

# `jaxprobe bench` points this at a scratch folder unless --record is given.
RESULTS = results_dir()
FULL = {"chains": 64, "datasets": ("breast_cancer", "digits"), "joint": True,
        "rwmh": {"num_warmup": 1000, "samples": 400, "thin": 10},
        "tree_gibbs": {"num_warmup": 20, "samples": 100, "thin": 1},
        "synthetic_sizes": (1258, 2500, 5000, 10000),
        "sweep": {"num_chains": 32, "num_warmup": 50, "num_samples": 100, "thin": 2, "train_fractions": (0.2, 1.0),
                  "synthetic_size": 10000},
        "sweep_rwmh": {"num_warmup": 300, "num_samples": 100, "thin": 5}}
QUICK = {"chains": 16, "datasets": ("breast_cancer", "digits"), "joint": False,
         "rwmh": {"num_warmup": 200, "samples": 40, "thin": 5},
         "tree_gibbs": {"num_warmup": 5, "samples": 20, "thin": 1},
         "synthetic_sizes": (1258,),
         "sweep": {"num_chains": 8, "num_warmup": 5, "num_samples": 10, "thin": 1, "train_fractions": (1.0,),
                   "synthetic_size": 1000},
         "sweep_rwmh": {"num_warmup": 20, "num_samples": 10, "thin": 2}}
PRIOR_LEVELS = ((0.0, 1.0), (0.5, 1.0), (1.0, 1.0), (2.0, 1.0), (0.0, 2.0), (0.0, 4.0))  # as the RWMH sweep
ESS_TARGET, ACCURACY_TARGET = 50.0, 0.9


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _ess(samples) -> dict:
    """Pooled bulk ESS (median, min), within-chain ESS (median over coordinates), max R-hat of all coordinates."""
    flat, _ = samples.flat_positions()  # (C, N, K·D)
    draws = jnp.asarray(flat, jnp.float32)
    pooled = np.asarray(jax.vmap(diagnostics.ess_bulk, in_axes=2)(draws))
    rhat = np.asarray(jax.vmap(diagnostics.rhat, in_axes=2)(draws))
    # Each chain alone (split in halves by ess_bulk itself), summed over chains.
    per_chain = jax.vmap(jax.vmap(lambda chain: diagnostics.ess_bulk(chain[None]), in_axes=0), in_axes=2)(draws)
    within = np.nansum(np.asarray(per_chain), axis=1)
    return {"ess_median": float(np.median(pooled)), "ess_min": float(np.min(pooled)),
            "within_chain_ess_median": float(np.median(within)), "rhat_max": float(np.nanmax(rhat))}


VARIANTS = ("rwmh", "tree_gibbs", "tree_gibbs (no prior moves)")


@dataclasses.dataclass(frozen=True)
class _Problem:
    """One data set's reconstruction problem of part 1, shared by every variant: the data, the victim, the
    priors with their moments, the common starting points and both samplers' targets."""

    dataset: str
    joint: bool
    data: dict
    chains: int
    num_settings: int
    num_classes: int
    dim: int
    moments: list
    choleskys: list
    start: np.ndarray  # (C, S, K, D) in feature units
    class_weights: Any
    target: Any  # tree_gibbs's target, feature units
    whitened: Any  # RWMH's target, the prior's whitened coordinates


def _prepare_problem(dataset: str, sizes: dict, joint: bool) -> _Problem:
    """The victim, the prior(s) and reconstruct's own importance-resampled starting points for one data set, so
    that every variant starts from the same draws and samples the same posterior."""
    from jaxprobe.reconstruct.posterior import initial_positions  # reconstruct's own starting points

    x_train, y_train, x_test, y_test, _ = prepare_data(dataset, 0, max_rows=2000)
    base = make_model("gradient_boosting").fit(x_train, y_train)
    correct = R.fit_gaussian(x_train)
    priors = [R.misspecify(correct, shift, scale) for shift, scale in PRIOR_LEVELS] if joint else [correct]
    priors[0] = correct
    num_settings = len(priors)
    num_classes, dim = len(base.classes_), x_train.shape[1]
    classifier = R.as_classifier(from_sklearn(base))
    chains = sizes["chains"]
    moments = [R.prior_moments(prior) for prior in priors]
    choleskys = [np.linalg.cholesky(covariance) for _, covariance in moments]
    starts, class_weights = [], None
    for index, prior in enumerate(priors):
        start, weights = initial_positions(jax.random.fold_in(jax.random.key(1), index),
                                            jax.jit(classifier.probabilities), prior, chains,
                                            max(1024, 16 * chains), 1.0, jnp.float32)
        starts.append(np.asarray(start, np.float64))  # (C, K, D) in feature units
        class_weights = weights if class_weights is None else class_weights
    start = np.stack(starts, axis=1)  # (C, S, K, D)
    identity = reconstruction_question([(classifier, prior, np.zeros(dim), np.eye(dim)) for prior in priors], 1.0)
    target = tree_gibbs.reconstruction_target(identity, [classifier] * num_settings, priors, num_classes, dim)
    whitened = reconstruction_question([(classifier, prior, mean, cholesky)
                                        for prior, (mean, _), cholesky in zip(priors, moments, choleskys)], 1.0)
    data = {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test, "base": base}
    return _Problem(dataset, joint, data, chains, num_settings, num_classes, dim, moments, choleskys, start,
                    class_weights, target, whitened)


@dataclasses.dataclass(frozen=True)
class _VariantRun:
    """A variant's two calls: the first (compiles, warms up) and the timed continuation, its feature-unit draws
    of the correct prior, and the ensemble evaluations one transition costs."""

    first_seconds: float
    second: Any  # the timed call's Samples
    seconds: float
    draws: np.ndarray  # (C, N, K, D), feature units, setting 0
    per_transition: int


def _sample_rwmh(problem: _Problem, settings: dict) -> _VariantRun:
    """RWMH as ``reconstruct`` runs it (whitened coordinates), started from the common draws; the second call
    continues the first's chains with its adapted step sizes and no warmup."""
    chains, dim, num_classes = problem.chains, problem.dim, problem.num_classes
    samples, thin, warmup = settings["samples"], settings["thin"], settings["num_warmup"]
    chunk = max(1, samples // 4)
    moments, choleskys, start = problem.moments, problem.choleskys, problem.start
    z0 = np.stack([np.linalg.solve(cholesky, (start[:, s] - mean).reshape(-1, dim).T).T.reshape(
        chains, num_classes, dim) for s, ((mean, _), cholesky) in enumerate(zip(moments, choleskys))], axis=1)

    def run(key: jax.Array, z: np.ndarray, warmup_steps: int, step_size: Any = None) -> jaxprobe.Samples:
        """One ``jaxprobe.sample`` call from whitened positions ``z``."""
        return jaxprobe.sample(key, problem.whitened.logdensity, z.reshape(chains, -1).astype(np.float32),
                               sampler="rwmh", num_samples=samples, num_warmup=warmup_steps, thin=thin,
                               chunk_size=chunk, step_size=step_size, progress=False, convergence="ignore")

    tic = time.perf_counter()
    first = run(jax.random.key(2), z0, warmup)
    first_seconds = time.perf_counter() - tic
    tic = time.perf_counter()
    second = run(jax.random.key(3), first.positions[:, -1], 0, first.step_size)
    seconds = time.perf_counter() - tic
    z = second.positions.reshape(chains, samples, problem.num_settings, num_classes, dim)[:, :, 0]
    draws = moments[0][0] + z @ choleskys[0].T
    return _VariantRun(first_seconds, second, seconds, draws, problem.num_settings * num_classes)


def _sample_tree_gibbs(problem: _Problem, settings: dict, moves: tuple | None) -> _VariantRun:
    """tree_gibbs sweeps in feature units from the common draws (``moves=()``: no prior moves, ``None``: the
    default ones); the second call continues the first's chains with no burn-in."""
    chains, dim, target = problem.chains, problem.dim, problem.target
    samples, thin, warmup = settings["samples"], settings["thin"], settings["num_warmup"]
    chunk = max(1, samples // 4)

    def run(key: jax.Array, x: np.ndarray, warmup_sweeps: int, moves: tuple | None = moves) -> jaxprobe.Samples:
        """One ``tree_gibbs.sample`` call from feature-unit positions ``x``."""
        return tree_gibbs.sample(key, target, x.reshape(chains, -1, dim).astype(np.float32),
                                 num_samples=samples, num_warmup=warmup_sweeps, thin=thin, chunk_size=chunk,
                                 prior_moves=moves, convergence="ignore")

    tic = time.perf_counter()
    first = run(jax.random.key(2), problem.start, warmup)
    first_seconds = time.perf_counter() - tic
    tic = time.perf_counter()
    second = run(jax.random.key(3), first.positions[:, -1], 0)
    seconds = time.perf_counter() - tic
    draws = second.positions.reshape(chains, samples, problem.num_settings, problem.num_classes, dim)[:, :, 0]
    draws = draws.astype(np.float64)
    used_moves = target.default_prior_moves if moves is None else moves
    per_transition = target.evaluations_per_sweep + target.num_blocks * len(used_moves)
    return _VariantRun(first_seconds, second, seconds, draws, per_transition)


def _run_variant(problem: _Problem, variant: str, sizes: dict) -> tuple[dict, Any]:
    """One variant of :data:`VARIANTS`: its row (sizes, times, ESS of the features, cost in ensemble
    evaluations) and its reconstruction (for part 2)."""
    settings = sizes["rwmh" if variant == "rwmh" else "tree_gibbs"]
    samples, thin, warmup = settings["samples"], settings["thin"], settings["num_warmup"]
    if variant == "rwmh":
        done = _sample_rwmh(problem, settings)
    else:
        done = _sample_tree_gibbs(problem, settings, () if "no prior moves" in variant else None)
    chains, seconds = problem.chains, done.seconds
    in_features = dataclasses.replace(done.second, positions=done.draws)  # ESS of the features for every variant
    transitions = chains * samples * thin  # steps (rwmh) or sweeps (tree_gibbs), over all chains
    row = {"dataset": problem.dataset + (" (6 priors jointly)" if problem.joint else ""), "sampler": variant,
           "features": problem.dim, "classes": problem.num_classes, "settings": problem.num_settings,
           "chains": chains, "num_warmup": warmup, "samples": samples, "thin": thin,
           "seconds_first_call": done.first_seconds, "seconds_sampling": seconds,
           "ensemble_evaluations": int(transitions * done.per_transition),
           "evaluations_per_transition": int(done.per_transition), **_ess(in_features)}
    for name in ("ess_median", "ess_min", "within_chain_ess_median"):
        row[f"{name}_per_second"] = row[name] / seconds
        row[f"{name}_per_million_evaluations"] = row[name] / row["ensemble_evaluations"] * 1e6
    reconstruction = R.Reconstruction(in_features, done.draws, problem.class_weights, problem.moments[0][0],
                                      problem.choleskys[0])
    _log(f"{row['dataset']} {variant}: ESS median {row['ess_median']:.0f} (within-chain "
         f"{row['within_chain_ess_median']:.0f}), R-hat {row['rhat_max']:.3f}, sampling {seconds:.1f} s, "
         f"first call {done.first_seconds:.1f} s")
    return row, reconstruction


def compare_samplers(dataset: str, sizes: dict, joint: bool = False) -> tuple[dict, dict]:
    """Part 1 on one data set: a row per variant (:data:`VARIANTS`) and the reconstructions (for part 2).

    All run on the reconstruction's own target (:func:`reconstruction_question`; RWMH in the prior's
    whitened coordinates as ``reconstruct`` runs it, tree_gibbs in feature units) from the same
    importance-resampled starting points. Call 1 compiles, warms up and samples; call 2 continues every chain
    from call 1's last draw with no warmup (RWMH keeps its adapted step sizes) and is the one timed and
    assessed: pure sampling, compiled programs reused. ``joint``: the six prior levels of the sweep in one
    program (``reconstruct_many``, as ``run_sweep`` calls it); the ESS is then that of the correct prior's
    draws (setting 0), the cost that of the whole program.
    """
    problem = _prepare_problem(dataset, sizes, joint)
    rows, reconstructions = {}, {}
    for variant in VARIANTS:
        rows[variant], reconstructions[variant] = _run_variant(problem, variant, sizes)
    for variant in VARIANTS[1:]:
        for name in ("ess_median", "ess_min", "within_chain_ess_median"):
            for unit in ("per_second", "per_million_evaluations"):
                key = f"{name}_{unit}"
                rows[variant][f"{key}_ratio"] = rows[variant][key] / max(rows["rwmh"][key], 1e-12)
    target = problem.target
    rows["tree_gibbs"]["padded_evaluations_per_sweep"] = target.padded_evaluations_per_sweep
    rows["tree_gibbs"]["feature_groups"] = [[int(g.features.size), g.num_intervals, list(g.widths)]
                                            for g in target.groups]
    return rows, {"reconstructions": reconstructions, "data": problem.data}


def synthetic_rows(part1: dict, sizes: dict) -> list[dict]:
    """Part 2: synthetic / base accuracy of the digits reconstructions for several synthetic set sizes."""
    data = part1["data"]
    proportions = np.bincount(data["y_train"], minlength=10) / data["y_train"].size
    rows = []
    for sampler, reconstruction in part1["reconstructions"].items():
        for size in sizes["synthetic_sizes"]:
            ratios = []
            for seed in range(2):
                x_syn, y_syn = reconstruction.synthetic_dataset(seed, int(size), proportions)
                ratios.append(synthetic_accuracy(data["base"], x_syn, y_syn, data["x_test"], data["y_test"]))
            rows.append({"sampler": sampler, "synthetic_rows": int(size),
                         "base_accuracy": ratios[0]["base_accuracy"],
                         "synthetic_accuracy": [r["synthetic_accuracy"] for r in ratios],
                         "ratio": [r["ratio"] for r in ratios], "ratio_mean": float(np.mean([r["ratio"] for r in ratios]))})
            _log(f"digits synthetic {sampler} {size} rows: ratio {rows[-1]['ratio']}")
    return rows


def sweep_part(sizes: dict) -> dict:
    """Part 3: the digits sweep with tree models on tree_gibbs, and gradient boosting on RWMH with the settings
    of the recorded RWMH sweep (``results/reconstruction.sweep.md``: 300 warmup steps, 100 draws × thin 5), the
    same chains and synthetic set size, side by side; the recorded RWMH records are kept too."""
    settings = dict(sizes["sweep"])
    fractions = settings.pop("train_fractions")
    levels = PRIOR_LEVELS if len(fractions) > 1 else PRIOR_LEVELS[:2]
    result = run_sweep("digits", model_kinds=("gradient_boosting", "decision_tree"), train_fractions=fractions,
                       prior_levels=levels, sampler="tree_gibbs", ridge=1e-2, verbose=True, **settings)
    rwmh_settings = dict(settings, **sizes["sweep_rwmh"])
    # The decision tree stays out: its pure leaves leave some classes no prior draw to start from, and
    # reconstruct refuses them for every sampler but tree_gibbs.
    live = run_sweep("digits", model_kinds=("gradient_boosting",), train_fractions=fractions, prior_levels=levels,
                     sampler="rwmh", ridge=1e-2, verbose=True, **rwmh_settings)
    recorded_rwmh = {}
    recorded = os.path.join(results_dir(), "reconstruction.sweep.json")
    if os.path.exists(recorded):
        with open(recorded) as stream:
            records = json.load(stream)["results"].get("digits", {}).get("records", [])
        trees = [r for r in records if r["model"] in ("gradient_boosting", "decision_tree")]
        if trees:
            recorded_rwmh = {"records": trees, "correlations": spearman_summary(trees)}
    gb = [r for r in result.records if r["model"] == "gradient_boosting"]
    return {"settings": {**sizes["sweep"], "prior_levels": levels}, "rwmh_settings": rwmh_settings,
            "tree_gibbs": {"records": result.records, "correlations": spearman_summary(result.records)},
            "rwmh": {"records": live.records, "correlations": spearman_summary(live.records)},
            "rwmh_recorded": recorded_rwmh, "seconds": result.seconds, "rwmh_seconds": live.seconds,
            "gradient_boosting_only": {"correlations": spearman_summary(gb)} if gb else {}}


def _header(result: dict) -> list[str]:
    """Title and the run's circumstances (command, date, machine, load): the times only mean something with them."""
    quick = " **--quick: smoke run, numbers not meaningful**" if result["quick"] else ""
    return ["# Tree-ensemble reconstruction: tree_gibbs vs RWMH", "",
            f"Command: `{result['command']}`; {result['date']}; {result['machine']}, "
            f"{result.get('cpu_model', 'CPU not recorded')}; jax {result['jax']}; jaxprobe at commit "
            f"{result.get('code', {}).get('commit', 'not recorded')}"
            f"{' (with uncommitted changes)' if result.get('code', {}).get('changed') else ''}; load average at the "
            f"start {result['load_average_start']}, at the end {result['load_average_end']}. "
            f"{load_note(result['load_average_start'][0])}{quick}", ""]


def _mixing_table(result: dict) -> list[str]:
    """Part 1's table: every variant's sizes, times, ESS and cost in ensemble evaluations, per data set."""
    lines = ["## 1. Mixing per second and per ensemble evaluation (correct prior, gradient boosting victim)", "",
             "Sampling time: a second call that continues the chains of a first (compiled, warmed-up) one "
             "without warmup. ESS (of the features, x = m + L z for RWMH's whitened chains): pooled bulk ESS over all K·D coordinates "
             "(median, min), within-chain ESS (each chain's own, summed; median), max R-hat. A transition is an "
             "RWMH step or a Gibbs sweep; ensemble evaluations = chains × transitions × evaluations per "
             "transition (RWMH: K class blocks per step; tree_gibbs: B · Σ_j (m_j + 1) per sweep for the coordinate "
             "updates, m_j the thresholds on feature j, each touching only the trees that test j, plus B per prior "
             "move).", "",
             "| data set | sampler | chains × draws × thin | warmup | sampling (s) | ESS median (min) | within-chain ESS "
             "| R-hat max | ESS/s | within-chain ESS/s | ensemble evaluations per transition (step / sweep) | ESS per 10⁶ evaluations |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for dataset, rows in result["part1"].items():
        for sampler, r in rows.items():
            lines.append(f"| {dataset} | {sampler} | {r['chains']} × {r['samples']} × {r['thin']} | {r['num_warmup']} | "
                         f"{r['seconds_sampling']:.1f} | {r['ess_median']:.0f} ({r['ess_min']:.0f}) | "
                         f"{r['within_chain_ess_median']:.0f} | {r['rhat_max']:.3f} | {r['ess_median_per_second']:.1f} | "
                         f"{r['within_chain_ess_median_per_second']:.1f} | {r['evaluations_per_transition']:,} | "
                         f"{r['ess_median_per_million_evaluations']:.2f} |")
    return lines


def _ratios_table(result: dict) -> list[str]:
    """Part 1 over RWMH: each tree_gibbs variant's ESS per second and per evaluation as a multiple of RWMH's."""
    lines = ["", "Over RWMH:", "", "| data set | variant | ESS/s (median) | ESS/s (min) | within-chain ESS/s | "
             "ESS per evaluation (median) | within-chain ESS per evaluation |", "|---|---|---:|---:|---:|---:|---:|"]
    for dataset, rows in result["part1"].items():
        for variant in VARIANTS[1:]:
            g = rows[variant]
            lines.append(f"| {dataset} | {variant} | {g['ess_median_per_second_ratio']:.1f} | "
                         f"{g['ess_min_per_second_ratio']:.1f} | {g['within_chain_ess_median_per_second_ratio']:.1f} | "
                         f"{g['ess_median_per_million_evaluations_ratio']:.2f} | "
                         f"{g['within_chain_ess_median_per_million_evaluations_ratio']:.2f} |")
    return lines


def _ess_target_note(result: dict) -> list[str]:
    """The issue's ESS/s target on digits, met or not, with the feature groups behind tree_gibbs's cost (empty
    without a digits row)."""
    digits = result["part1"].get("digits", {}).get("tree_gibbs")
    if not digits:
        return []
    joint = result["part1"].get("digits (6 priors jointly)", {}).get("tree_gibbs")
    joint_text = (f"; with the sweep's six priors in one program {joint['ess_median_per_second_ratio']:.1f}× "
                  f"(within-chain {joint['within_chain_ess_median_per_second_ratio']:.1f}×)") if joint else ""
    return ["", f"Issue target (tree_gibbs ≥ {ESS_TARGET:.0f}× RWMH's ESS/s on digits): pooled median ESS/s "
            f"{digits['ess_median_per_second_ratio']:.1f}×, within-chain "
            f"{digits['within_chain_ess_median_per_second_ratio']:.1f}× for one prior{joint_text} — "
            f"**{'met' if digits['ess_median_per_second_ratio'] >= ESS_TARGET else 'not met'}** for one prior "
            "(RWMH's pooled ESS counts its starting points' spread, see above). Feature groups "
            f"(features, intervals, trees walked): {digits['feature_groups']}; the coordinate updates of a "
            f"sweep compute {digits['padded_evaluations_per_sweep']:,} (padded) interval evaluations for "
            f"{digits['evaluations_per_transition'] - 6 * digits['classes']:,} needed.", ""]


def _synthetic_section(result: dict) -> list[str]:
    """Part 2: synthetic / base accuracy per sampler and synthetic set size (empty when part 2 did not run)."""
    if not result.get("part2"):
        return []
    lines = ["## 2. Digits synthetic models (correct prior, all training rows)", "",
             "Synthetic / base test accuracy of a gradient boosting model (same settings) trained on n "
             "reconstructed rows (training class proportions); two synthetic draws each.", "",
             "| sampler | synthetic rows | base accuracy | synthetic accuracy | ratio | mean ratio |",
             "|---|---:|---:|---|---|---:|"]
    for r in result["part2"]:
        lines.append(f"| {r['sampler']} | {r['synthetic_rows']} | {r['base_accuracy']:.3f} | "
                     f"{', '.join(f'{v:.3f}' for v in r['synthetic_accuracy'])} | "
                     f"{', '.join(f'{v:.3f}' for v in r['ratio'])} | {r['ratio_mean']:.3f} |")
    lines.append("")
    return lines


def _spearman_cell(correlations: dict, key: str) -> str:
    """One Spearman table cell, ``ρ (p, n)``; nan where the correlation is missing."""
    value = correlations.get(key, {})
    return f"{value.get('rho', float('nan')):.2f} ({value.get('p', float('nan')):.1g}, {value.get('n', '')})"


def _sweep_records_table(sweep: dict) -> list[str]:
    """Part 3's correct-prior records of tree_gibbs, live RWMH and recorded RWMH, with the settings they ran."""
    lines = ["## 3. Digits reconstruction sweep with tree models on tree_gibbs", "",
             f"`run_sweep('digits', model_kinds=('gradient_boosting', 'decision_tree'), sampler='tree_gibbs', "
             f"ridge=0.01, ...)` with {json.dumps(sweep['settings'])} ({sweep['seconds']:.0f} s); beside it "
             f"gradient boosting on RWMH with {json.dumps(sweep['rwmh_settings'])} ({sweep['rwmh_seconds']:.0f} s: "
             "the recorded sweep's sampler settings, this run's chains and synthetic set size), and the records "
             "of `results/reconstruction.sweep.json` (RWMH, 1258-row synthetic sets). All six prior levels of "
             "a model are sampled in one program (`reconstruct_many`).", "",
             "| model | sampler | train fraction (rows) | synthetic rows | base acc. | synthetic acc. | ratio | "
             "kl_gaussian | kl_knn |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for sampler, label in (("tree_gibbs", "tree_gibbs"), ("rwmh", "rwmh"), ("rwmh_recorded", "rwmh (recorded)")):
        for r in sweep.get(sampler, {}).get("records", []):
            if r["prior_error"] == 0.0:
                lines.append(f"| {r['model']} | {label} | {r['train_fraction']} ({r['num_train']}) | "
                             f"{r.get('num_synthetic', '')} | {r['base_accuracy']:.3f} | "
                             f"{r['synthetic_accuracy']:.3f} | {r['accuracy_ratio']:.3f} | {r['kl_gaussian']:.2f} | "
                             f"{r['kl_knn']:.2f} |")
    return lines


def _sweep_correlations_table(sweep: dict) -> list[str]:
    """Part 3's Spearman correlations (KL estimates against prior and model error) for each set of runs."""
    lines = ["", "Spearman ρ (p, n):", "", "| runs | kl_gaussian vs prior error | kl_knn vs prior error | "
             "kl_gaussian_marginal_mean vs prior error | kl_knn vs model error | synthetic vs base accuracy |",
             "|---|---|---|---|---|---|"]
    keys = ("kl_gaussian_vs_prior_error", "kl_knn_vs_prior_error", "kl_gaussian_marginal_mean_vs_prior_error",
            "kl_knn_vs_model_error", "synthetic_vs_base_accuracy")
    for label, c in (("tree_gibbs: gradient boosting + decision tree", sweep["tree_gibbs"]["correlations"]),
                     ("tree_gibbs: gradient boosting", sweep["gradient_boosting_only"].get("correlations", {})),
                     ("rwmh: gradient boosting (this run)", sweep.get("rwmh", {}).get("correlations", {})),
                     ("rwmh: gradient boosting (recorded)", sweep.get("rwmh_recorded", {}).get("correlations", {}))):
        if c:
            lines.append(f"| {label} | " + " | ".join(_spearman_cell(c, key) for key in keys) + " |")
    return lines


def _accuracy_target_note(sweep: dict) -> list[str]:
    """The issue's accuracy target (digits gradient boosting, correct prior), met or not (empty without rows)."""
    gb = [r for r in sweep["tree_gibbs"]["records"] if r["model"] == "gradient_boosting" and r["prior_error"] == 0.0]
    if not gb:
        return []
    worst = min(r["accuracy_ratio"] for r in gb)
    return ["", f"Issue target (digits gradient boosting synthetic / base ≥ {ACCURACY_TARGET}, correct prior): "
            f"smallest ratio {worst:.3f} with {gb[0].get('num_synthetic')} synthetic rows — "
            f"**{'met' if worst >= ACCURACY_TARGET else 'not met'}**."]


def _sweep_section(result: dict) -> list[str]:
    """Part 3: records, correlations and the accuracy target (empty when the sweep was skipped)."""
    sweep = result.get("part3")
    if not sweep:
        return []
    return _sweep_records_table(sweep) + _sweep_correlations_table(sweep) + _accuracy_target_note(sweep) + [""]


def markdown(result: dict) -> str:
    """The report of a run: one section per part, from the results JSON alone (so it can be rendered again)."""
    lines = (_header(result) + _mixing_table(result) + _ratios_table(result) + _ess_target_note(result)
             + _synthetic_section(result) + _sweep_section(result))
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke run (scratch output)")
    parser.add_argument("--record", action="store_true", help="with --quick: write into --out anyway")
    parser.add_argument("--out", default=None, help=f"output folder (default {RESULTS})")
    parser.add_argument("--skip-sweep", action="store_true", help="parts 1 and 2 only")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    out = args.out or (RESULTS if (not args.quick or args.record) else tempfile.mkdtemp(prefix="tree-gibbs-bench-"))
    warnings.simplefilter("ignore", jaxprobe.ConvergenceWarning)  # short runs on purpose; the ESS says how they did
    arguments = argv if argv is not None else sys.argv[1:]
    result = {
        # As launched: jaxprobe/bench/tree_gibbs.py, or jaxprobe/bench/reconstruction.py tree-gibbs (which calls main).
        "command": ("python -m jaxprobe.bench." + " ".join([os.path.splitext(os.path.basename(sys.argv[0]))[0]] + sys.argv[1:])
                    if sys.argv and sys.argv[0].endswith(".py") else
                    "python -m jaxprobe.bench.tree_gibbs" + (" " + " ".join(arguments) if arguments else "")),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {jax.devices()[0].platform}",
        "cpu_model": machine()["cpu_model"], "code": code_state(),
        "jax": jax.__version__, "quick": args.quick, "load_average_start": tuple(round(v, 1) for v in os.getloadavg()),
        "sizes": {key: value for key, value in sizes.items()},
    }
    started = time.perf_counter()
    part1, kept = {}, {}
    for dataset in sizes["datasets"]:
        part1[dataset], kept[dataset] = compare_samplers(dataset, sizes)
    if sizes.get("joint"):  # the sweep's setting: six prior levels in one program
        part1["digits (6 priors jointly)"] = compare_samplers("digits", sizes, joint=True)[0]
    result["part1"] = part1
    result["part2"] = synthetic_rows(kept["digits"], sizes) if "digits" in kept else []
    result["part3"] = None if args.skip_sweep else sweep_part(sizes)
    result["total_seconds"] = time.perf_counter() - started
    result["load_average_end"] = tuple(round(v, 1) for v in os.getloadavg())
    os.makedirs(out, exist_ok=True)
    atomic_write(os.path.join(out, "tree_gibbs.json"),
                 lambda f: f.write(json.dumps(result, indent=1, default=float) + "\n"), binary=False)
    atomic_write(os.path.join(out, "tree_gibbs.md"), lambda f: f.write(markdown(result)), binary=False)
    _log(f"wrote {out}/tree_gibbs.json and tree_gibbs.md ({result['total_seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
