#!/usr/bin/env python
"""Every front end's answer at the engine's speed: ``generate`` and a ``sweep`` cell, end to end, against the limit.

:mod:`jaxprobe.bench.answer_speed` times ``jaxprobe.sample``; this script times the front ends built on the same
run driver, on the same target (the d-input MLP probe, G = (f(x) − 0.5)², τ = 0.01, N(0, I) prior, float32) with
the same protocol (candidates interleaved in one process, compile excluded, min times and median paired ratios,
the same transitions on both sides and their draws compared), and their peak memory in fresh subprocesses:

- *generate*: ``jaxprobe.generate(SEED, G, temperature=τ, prior=StandardNormal(), dim=d, num_chains=C,
  sampler="mala", num_samples=1000, num_warmup=200, thin, progress=False, convergence="ignore")`` against the limit
  started where ``generate`` starts (its question's initial positions from the key it derives) with its keys;
- *generate in a box*: the same with ``constraints=[Box(−B, B)]``: the chains move on an unconstrained z and each
  kept draw is stored as x = T(z) as it is written; the limit returns x too (mapped inside its own jit, as a
  user's program returning the answer would);
- *sweep cell*: ``jaxprobe.sweep(SEED, G, {"temperature": [τ]}, ...)`` with its draws kept (one cell: the
  path ``sweep`` takes for a single cell; each cell also evaluates G at every kept draw for its results' probe
  column) against the limit with the cell's key ``fold_in(key, 0)`` that evaluates G at every kept draw too;
- *jaxprobe run*: ``run_config(config, out=folder)``, what ``jaxprobe run`` does once its file is read (a one-cell
  sweep, then ``samples.npz``, ``samples_original_units.npz``, ``summary.json``), on :data:`RUN_CONFIG`'s
  question (breast-cancer data, d = 30, an MLP fitted from the file) against the limit of that question with the
  cell's key, G at every kept draw; the files are part of the answer it times, not of the limit. As configured
  by default (checkpointed only when projected to sample for a minute or more: none of these sizes) and, as
  *checkpointed*, with ``[output] checkpoint_min_seconds = 0`` (what a long run pays);
- *memory*: peak resident memory of each front end's second call against its kept draws' bytes
  (``answer_speed.measure_call_twice``: the rise over the resident size it started from).

Target (issue 23): each ≤ 1.15× the limit; memory ≤ 1.25× the kept draws + a constant.

Usage::

    python -m jaxprobe.bench.front_ends                 # d = 50, C = 256, 2048, 16384 (about 30 minutes on 2 cores)
    python -m jaxprobe.bench.front_ends --dim 2         # writes front_ends.d2.{json,md}
    python -m jaxprobe.bench.front_ends --quick         # smoke run into a scratch folder
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import datetime
import functools
import gc
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Callable

import jax
import numpy as np

import jaxprobe
from jaxprobe import engine
from jaxprobe.bench import answer_speed, code_state, results_dir, throughput
from jaxprobe.bench.answer_speed import (RATIO_TARGET, MEMORY_TARGET, SEED, TEMPERATURE, Stash, as_sample_runs,
                                         engine_limit_call, timing_row)
from jaxprobe.bench.throughput import Candidate, log, time_interleaved, write_atomically
from jaxprobe.benchmark.targets import mlp_probe

#: The box of the constrained rows: wide enough that the answer is the unconstrained one's (|x| ≤ 5 under N(0, I)),
#: so the rows differ only by the map z ↦ x and its log-Jacobian.
BOX = 5.0
KINDS = ("generate", "generate_box", "sweep_cell", "run", "run_checkpointed")
LABELS = {"generate": "generate", "generate_box": f"generate, Box(−{BOX:g}, {BOX:g})",
          "sweep_cell": "sweep, one cell", "run": "jaxprobe run (run_config)",
          "run_checkpointed": "jaxprobe run, checkpointed (checkpoint_min_seconds = 0)"}
#: The rows of ``jaxprobe run``: as configured by default (a run projected to sample for under a minute is not
#: checkpointed), and with every run checkpointed, what a long run pays.
RUN_KINDS = ("run", "run_checkpointed")
#: The ``run`` rows' configuration: what ``jaxprobe run`` reads from a file (its question is the data set's, not the
#: benchmark MLP's: d = 30 standardized features of scikit-learn's bundled breast-cancer data, the classifier an
#: MLP fitted by scikit-learn from the file, G = |P(malignant | x) − 0.5|²).
RUN_CONFIG = """
[data]
name = "breast_cancer"
[model]
kind = "mlp"
[probe]
type = "prediction_risky"
alpha = 0.5
[prior]
kind = "standard_normal"
[sampler]
name = "mala"
temperature = {temperature}
num_chains = {num_chains}
num_samples = {num_samples}
num_warmup = {num_warmup}
thin = {thin}
seed = {seed}
[output]
plots = false
"""


@dataclasses.dataclass(frozen=True)
class Config:
    chains: tuple[int, ...]
    thin10_max_chains: int
    num_samples: int
    num_warmup: int
    repetitions: int
    memory: bool
    kinds: tuple[str, ...] = KINDS
    small_draws_repeats: int = 3  # children per memory figure (full and 20 draws) below SMALL_DRAWS_BYTES of draws


FULL = Config(chains=(256, 2048, 16384), thin10_max_chains=256, num_samples=1000, num_warmup=200, repetitions=5,
              memory=True)
QUICK = Config(chains=(64,), thin10_max_chains=64, num_samples=100, num_warmup=40, repetitions=3, memory=True,
               small_draws_repeats=1)


@functools.lru_cache(maxsize=None)
def risky_probe(dim: int) -> jaxprobe.probes.Probe:
    """G = (f(x) − 0.5)² of the benchmarks' MLP f (:func:`jaxprobe.benchmark.targets.mlp_probe`), one object per d:
    the front ends and their limits ask the same question."""
    _, _, G = mlp_probe(dim, answer_speed.HIDDEN, 0)
    return jaxprobe.probes.Probe(G, "prediction_risky")


def question_and_probe(kind: str, dim: int) -> tuple[Any, Any]:
    """``(question, probe)`` of a row: the target's G at τ, N(0, I) prior, in the box for ``generate_box``."""
    probe = risky_probe(dim)
    box = [jaxprobe.constraints.Box(-BOX, BOX)] if kind == "generate_box" else None
    return jaxprobe.Question(probe, TEMPERATURE, jaxprobe.priors.StandardNormal(), box, dim), probe


@functools.lru_cache(maxsize=None)
def run_setup(num_chains: int, num_samples: int, num_warmup: int, thin: int) -> tuple[Any, Any]:
    """``(config, question)`` of the ``run`` rows: the parsed :data:`RUN_CONFIG` and the question ``jaxprobe run``
    asks of it (its model fitted once per process, as :class:`jaxprobe.sweeps.from_config.Prepared` caches it)."""
    from jaxprobe.config import parse_config
    from jaxprobe.sweeps.from_config import Prepared, build_problem

    config = parse_config(RUN_CONFIG.format(temperature=TEMPERATURE, num_chains=num_chains, num_samples=num_samples,
                                            num_warmup=num_warmup, thin=thin, seed=SEED))
    problem = build_problem(Prepared(config), config.sections, {})
    return config, jaxprobe.Question(problem.probe, TEMPERATURE, problem.prior, problem.constraints, problem.dim)


def _scratch_folder(prefix: str) -> str:
    """A temporary folder for a row's files (gigabytes of draws at 16,384 chains), removed when the process ends."""
    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def kind_dim(kind: str, dim: int) -> int:
    """d of a row's question: the data set's 30 features for ``run``, else ``dim``."""
    return RUN_DIM if kind in RUN_KINDS else dim


def kept_values(kind: str) -> int:
    """Values kept per draw beside its d coordinates: its log density, and for a sweep cell (``run`` too) G's value,
    which the cell keeps with every draw for its table's spread and quantiles (its limit keeps it too)."""
    return 2 if kind in ("sweep_cell", *RUN_KINDS) else 1


#: d of the ``run`` rows' data set (breast cancer).
RUN_DIM = 30


class _RunOutput:
    """What ``run_config`` left in its folder, read only when the benchmark looks (after the untimed first call):
    the ``Samples`` of ``samples.npz``."""

    def __init__(self, out: str):
        self.out = out

    def __getattr__(self, name: str) -> Any:
        return getattr(jaxprobe.Samples.load(os.path.join(self.out, "samples.npz")), name)


def front_end_call(kind: str, dim: int, num_chains: int, num_samples: int, num_warmup: int,
                   thin: int) -> Callable[[], Any]:
    """The user's call, exactly, returning its :class:`jaxprobe.Samples` (draws on the host)."""
    if kind in RUN_KINDS:  # jaxprobe run's work after parsing the file: sample, summarize, write its files
        from jaxprobe.sweeps.from_config import run_config

        config, _ = run_setup(num_chains, num_samples, num_warmup, thin)
        if kind == "run_checkpointed":  # every run checkpointed, as a long one is by default
            config = config.with_values({"output.checkpoint_min_seconds": 0})
        out = _scratch_folder("jaxprobe-bench-run-")

        def call():
            run_config(config, out=out, progress=False)
            return _RunOutput(out)

        return call
    question, probe = question_and_probe(kind, dim)
    options = dict(prior=jaxprobe.priors.StandardNormal(), dim=dim, num_chains=num_chains, sampler="mala",
                   num_samples=num_samples, num_warmup=num_warmup, thin=thin, progress=False, convergence="ignore")
    if kind == "sweep_cell":
        return lambda: jaxprobe.sweep(SEED, probe, {"temperature": [TEMPERATURE]}, **options).samples[0]
    if kind == "generate_box":  # written inline, as users do: an equal question each call (compiled once)
        return lambda: jaxprobe.generate(SEED, probe, temperature=TEMPERATURE,
                                         constraints=[jaxprobe.constraints.Box(-BOX, BOX)], **options)
    return lambda: jaxprobe.generate(SEED, probe, temperature=TEMPERATURE, **options)


def limit_call(kind: str, dim: int, num_chains: int, num_samples: int, num_warmup: int,
               thin: int) -> Callable[[], Any]:
    """The limit doing the front end's transitions: its starting points and keys (``generate``: ``split(key)`` →
    initial positions, the run's key; a sweep cell: the same from ``fold_in(key, 0)``, and G at every kept draw, which
    the cell's results report), draws in data space."""
    if kind in RUN_KINDS:
        _, question = run_setup(num_chains, num_samples, num_warmup, thin)
    else:
        question, _ = question_and_probe(kind, dim)
    key = jax.random.key(SEED)
    if kind in ("sweep_cell", *RUN_KINDS):  # jaxprobe run is a one-cell sweep
        key = jax.random.fold_in(key, 0)
    key_init, key_sample = jax.random.split(key)
    z0 = np.asarray(question.initial_positions(key_init, num_chains))
    to_answer = None if question.restriction.is_identity else question.to_data
    extra = question.probe.fn if kind in ("sweep_cell", *RUN_KINDS) else None  # G at every kept draw, as a cell reports
    return engine_limit_call(as_sample_runs(engine.MALA()), question.logdensity, z0, num_samples, num_warmup, thin,
                             key=key_sample, to_answer=to_answer, extra=extra)


def limit_with_files_call(num_chains: int, num_samples: int, num_warmup: int, thin: int) -> Callable[[], Any]:
    """The ``run`` rows' limit, then what ``jaxprobe run`` must write of its answer: the kept draws in standardized
    units and in original units, each an ``.npz`` member written atomically into a folder (replacing the previous
    call's, as a rerun of the command replaces its files) by the writer the command uses
    (``write_checked_npz`` and ``samples_original_units.npz``'s writer: checksummed as written, x converted a few
    chains at a time), one file after the other. No checkpoint and no summary."""
    from jaxprobe._io import atomic_write, write_checked_npz
    from jaxprobe.sweeps.from_config import Prepared, _write_original_units

    limit = limit_call("run", 0, num_chains, num_samples, num_warmup, thin)
    dataset = Prepared(run_setup(num_chains, num_samples, num_warmup, thin)[0]).dataset
    out = _scratch_folder("jaxprobe-bench-limit-files-")

    def call():
        positions, logdensity, stats = limit()
        write_checked_npz(os.path.join(out, "z.npz"), {"x": positions}, {})
        atomic_write(os.path.join(out, "x.npz"), lambda stream: _write_original_units(stream, positions, dataset))
        return positions, logdensity, stats

    return call


def timing_section(config: Config, dim: int) -> list[dict[str, Any]]:
    rows = []
    for num_chains in config.chains:
        for kind in config.kinds:
            for thin in (1, 10):
                if thin > 1 and (num_chains > config.thin10_max_chains or kind != "generate"):
                    continue
                log(f"{LABELS[kind]} C={num_chains} thin={thin}: vs the limit")
                stash = Stash()
                steps = config.num_warmup + config.num_samples * thin
                limit = Candidate("limit", num_chains, steps,
                                  limit_call(kind, dim, num_chains, config.num_samples, config.num_warmup, thin),
                                  stash.limit("limit"))
                front = Candidate(kind, num_chains, steps,
                                  front_end_call(kind, dim, num_chains, config.num_samples, config.num_warmup, thin),
                                  stash.sample(kind))
                candidates = [limit, front]
                if kind in RUN_KINDS:  # the least a command that writes its answer can cost: the limit, then its files
                    candidates.append(Candidate("limit_files", num_chains, steps, limit_with_files_call(
                        num_chains, config.num_samples, config.num_warmup, thin)))
                # The run rows write 4 GB at 16,384 chains per call: each call starts with the previous calls'
                # files written back (os.sync, untimed), as a command run once does; else a call was throttled by
                # the one before it (the same code took 7.3-12 s back to back).
                time_interleaved(candidates, config.repetitions, os.sync if kind in RUN_KINDS else None)
                extra = {}
                if kind in RUN_KINDS:
                    with_files = timing_row(front, candidates[2])
                    extra = {"files_reference_seconds": with_files["reference_seconds"],
                             "ratio_to_limit_with_files": with_files["ratio"],
                             "median_paired_ratio_to_limit_with_files": with_files["median_paired_ratio"]}
                row = {"kind": kind, "label": LABELS[kind], "num_chains": num_chains, "thin": thin,
                       "num_samples": config.num_samples, "num_warmup": config.num_warmup,
                       **timing_row(front, limit), **extra, "target": RATIO_TARGET,
                       "acceptance": stash.values[kind]["acceptance"],
                       "acceptance_limit": stash.values["limit"]["acceptance"],
                       "converged": stash.values[kind]["converged"], "same_work": stash.compare(kind, "limit")}
                rows.append(row)
                log(f"  limit {row['reference_seconds']:.3f} s, {kind} {row['seconds']:.3f} s: ratio "
                    f"{row['ratio']:.3f} (median paired {row['median_paired_ratio']:.3f}); identical draws "
                    f"{row['same_work']['identical_draw_fraction']:.3f}"
                    + (f"; limit with its files {row['files_reference_seconds']:.3f} s: ratio "
                       f"{row['ratio_to_limit_with_files']:.3f}" if extra else ""))
                del stash, limit, front, candidates
                gc.collect()
    return rows


def child_main(spec: dict[str, Any]) -> None:
    """One memory figure (a fresh process): the front end's call, or its limit's, twice."""
    make = limit_call if spec["limit"] else front_end_call
    answer_speed.measure_call_twice(make(spec["kind"], spec["dim"], spec["num_chains"], spec["num_samples"],
                                         spec["num_warmup"], 1))


#: Kept draws below which a memory figure is the median of ``Config.small_draws_repeats`` children (full and 20
#: draws each). A child's rise scatters by about 10 MB (the 20-draw child of `jaxprobe run` at 2,048 chains: 28-37 MB
#: in four runs of the same code on 2026-11-29, 1.22-1.29x of 250 MB of draws): a single child is enough only where
#: 10 MB is a small share of the draws.
SMALL_DRAWS_BYTES = 512 * answer_speed.MB


def _median_child(children: list[dict[str, Any]]) -> dict[str, Any]:
    """The child whose second call's rise is the median of ``children``'s (an odd number; unknown rises last)."""
    ranked = sorted(children, key=lambda child: (child.get("rise_second_kb") is None, child.get("rise_second_kb") or 0))
    return ranked[len(ranked) // 2]


def memory_section(config: Config, dim: int) -> list[dict[str, Any]]:
    """Each front end's (and at the largest C the limit's) second call's rise of the peak resident memory, less
    the same with 20 draws, against its kept draws' bytes (:func:`kept_values`)."""
    rows = []
    for num_chains in config.chains:
        for kind in config.kinds:
            for limit in (False, True) if num_chains == max(config.chains) else (False,):
                log(f"memory: {'limit of ' if limit else ''}{kind} C={num_chains}")
                spec = {"kind": kind, "limit": limit, "dim": dim, "num_chains": num_chains,
                        "num_warmup": config.num_warmup}
                draws_bytes = num_chains * config.num_samples * (kind_dim(kind, dim) + kept_values(kind)) * 4
                # Small draws: the median of a few children each (a child's rise scatters by about 10 MB, a third
                # of 31 MB of draws: 1.04-1.33x over three runs of one code at d = 2, C = 2,048)
                repeats = config.small_draws_repeats if draws_bytes < SMALL_DRAWS_BYTES else 1
                fulls = [answer_speed.run_child(spec | {"num_samples": config.num_samples}, "jaxprobe.bench.front_ends")
                         for _ in range(repeats)]
                bases = [answer_speed.run_child(spec | {"num_samples": 20}, "jaxprobe.bench.front_ends")
                         for _ in range(repeats)]
                full, base = _median_child(fulls), _median_child(bases)
                rises = full.get("rise_second_kb"), base.get("rise_second_kb")
                ratio = (None if None in rises else (rises[0] - rises[1]) * 1024.0 / draws_bytes)
                rows.append({"kind": kind, "limit": limit, "num_chains": num_chains, "draws_bytes": draws_bytes,
                             "rise_kb": rises[0], "baseline_rise_kb": rises[1], "rise_ratio": ratio,
                             "peak_kb": full["ru_maxrss_kb"], "baseline_kb": base["ru_maxrss_kb"],
                             "target": MEMORY_TARGET, "pass": ratio is not None and ratio <= MEMORY_TARGET,
                             "repeats": repeats, "rises_kb": [child.get("rise_second_kb") for child in fulls],
                             "baseline_rises_kb": [child.get("rise_second_kb") for child in bases],
                             "child": full, "baseline_child": base})
                log(f"  draws {draws_bytes / answer_speed.MB:.0f} MB: rise ratio "
                    + ("unknown" if ratio is None else f"{ratio:.3f}"))
    return rows


def summary(results: dict[str, Any]) -> dict[str, bool]:
    out = {}
    for row in results["timing"]:
        out[f"{row['label']} C={row['num_chains']} thin={row['thin']}: ≤ {RATIO_TARGET}× the limit "
            f"({row['ratio']:.2f})"] = row["ratio"] <= RATIO_TARGET
        if "ratio_to_limit_with_files" in row:  # a command that writes its answer: the limit, then its files
            out[f"{row['label']} C={row['num_chains']} thin={row['thin']}: ≤ {RATIO_TARGET}× the limit followed by "
                f"its files ({row['ratio_to_limit_with_files']:.2f})"] = row["ratio_to_limit_with_files"] <= RATIO_TARGET
    for row in results["memory"]:
        if not row["limit"]:
            ratio = "unknown" if row["rise_ratio"] is None else f"{row['rise_ratio']:.2f}"
            out[f"memory of {LABELS[row['kind']]} C={row['num_chains']}: ≤ {MEMORY_TARGET}× draws + constant "
                f"({ratio})"] = row["pass"]
    return out


def markdown(results: dict[str, Any]) -> str:
    config, dim = results["config"], results["config"]["dim"]
    lines = ["# Every front end's answer at the engine's speed: `generate` and a `sweep` cell vs the limit", "",
             f"{results['date']} · {results['machine']['cpu_model']} ({results['machine']['cpu_count']} cores) · "
             f"jax {results['versions']['jax']} · {answer_speed.code_line(results)}"
             + (" · **--quick (smoke run, not representative)**" if results["quick"] else ""), "",
             throughput.load_banner(results), "",
             f"Target: MLP probe {dim}→{answer_speed.HIDDEN}→{answer_speed.HIDDEN}→1, G = (f(x) − 0.5)², "
             f"τ = {TEMPERATURE}, N(0, I) prior, float32, MALA, {config['num_warmup']} warmup (adapted) + "
             f"{config['num_samples']} kept draws per chain, every draw kept; seed {SEED}. Each front end against "
             "the limit (`jax.jit` of `engine.init` → `engine.warmup` → `engine.run` returning every kept draw, "
             "then `np.asarray`) started where the front end starts, with its keys: the same transitions (the "
             "*identical draws* column compares 32 chains). The box rows store x = T(z) (the limit maps its draws "
             "inside its jit). A sweep cell also evaluates G at every kept draw (its results' probe column), and so "
             "does its limit. *jaxprobe run* rows time `run_config` (what the command does after reading its file) "
             f"on their own question: {RUN_DIM} standardized features of the bundled breast-cancer data, an MLP "
             "classifier fitted from the file (once per process), G = |P(malignant | x) − 0.5|², the same τ, prior, "
             "sampler and sizes, each call of the three after `os.sync()` (untimed: the previous calls' files written "
             "back); the run writes `samples.npz`, `samples_original_units.npz` and `summary.json`, which "
             "the limit does not, and checkpoints its draws as it goes when its sampling, projected from the "
             "warmup's speed, takes at least `[output] checkpoint_min_seconds` (default 60 s: none of the *jaxprobe "
             "run (run_config)* rows here; the *checkpointed* rows set it to 0, as a long run is). "
             f"Interleaved, {config['repetitions']} repetitions after an untimed first call; ratio = min time / "
             "min time (median paired wall and CPU ratios in brackets).", "",
             "| front end | C | thin | limit s | front end s | ratio | (median paired) | (CPU) | target | | "
             "acceptance | identical draws | converged |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|:---:|---:|---:|:---:|"]
    for row in results["timing"]:
        lines.append(f"| {row['label']} | {row['num_chains']} | {row['thin']} | {row['reference_seconds']:.3f} | "
                     f"{row['seconds']:.3f} | {row['ratio']:.3f} | {row['median_paired_ratio']:.3f} | "
                     f"{row['median_paired_cpu_ratio']:.3f} | ≤ {RATIO_TARGET} | "
                     f"{answer_speed.verdict_word(row['ratio'] <= RATIO_TARGET)} | {row['acceptance']:.3f} | "
                     f"{row['same_work']['identical_draw_fraction']:.3f} | {row['converged']} |")
    run_rows = [row for row in results["timing"] if "files_reference_seconds" in row]
    if run_rows:
        lines += ["", "## `jaxprobe run` against the limit with its files", "",
                  "The limit of the `run` rows, then the two files of kept draws `jaxprobe run` writes (standardized "
                  "and original units, each written atomically by the writer `jaxprobe run` uses, replacing the "
                  "previous call's): the least a command that writes its answer can cost. `jaxprobe run` also "
                  "writes `summary.json` (and the checkpointed rows their checkpoint).", "",
                  "| front end | C | limit s | limit + files s | jaxprobe run s | ratio to limit + files | "
                  "(median paired) |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for row in run_rows:
            lines.append(f"| {row['label']} | {row['num_chains']} | {row['reference_seconds']:.3f} | "
                         f"{row['files_reference_seconds']:.3f} | {row['seconds']:.3f} | "
                         f"{row['ratio_to_limit_with_files']:.3f} | "
                         f"{row['median_paired_ratio_to_limit_with_files']:.3f} |")
    if results["memory"]:
        lines += ["", "## Peak resident memory", "",
                  "Each figure from a fresh subprocess that makes the call twice: the second call's rise of the peak "
                  "over the resident size it started from (the heap trimmed, the peak reset), less the same with 20 "
                  "draws, against the kept draws' bytes C × N × (d + 1) × 4: coordinates and log density, and for a "
                  "sweep cell and `jaxprobe run` also G's value, which they keep with each draw for the table's spread "
                  "and quantiles (C × N × (d + 2) × 4; their limit keeps it too). Below "
                  f"{SMALL_DRAWS_BYTES / answer_speed.MB:.0f} MB of draws, the median of "
                  f"{config.get('small_draws_repeats', 1)} "
                  "children each (a child's rise scatters by about 10 MB).", "",
                  "| call | C | draws MB | rise MB | rise with 20 draws MB | (rise − 20-draw rise) / draws | target | |",
                  "|---|---:|---:|---:|---:|---:|---:|:---:|"]
        for row in results["memory"]:
            ratio = "–" if row["rise_ratio"] is None else f"{row['rise_ratio']:.3f}"
            lines.append(f"| {'limit of ' if row['limit'] else ''}{LABELS[row['kind']]} | {row['num_chains']} | "
                         f"{row['draws_bytes'] / answer_speed.MB:.0f} | {(row['rise_kb'] or 0) / 1024:.0f} | "
                         f"{(row['baseline_rise_kb'] or 0) / 1024:.0f} | {ratio} | ≤ {MEMORY_TARGET} | "
                         + ("–" if row["limit"] else answer_speed.verdict_word(row["pass"])) + " |")
    lines += ["", "## Summary", ""] + [f"- {check}: **{answer_speed.verdict_word(ok)}**"
                                       for check, ok in results["summary"].items()]
    lines += ["", f"Total {results['total_seconds'] / 60:.1f} min. Command: `{results['command']}`", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a smoke run into a scratch folder")
    parser.add_argument("--out", default=None, help="output folder (default: benchmarks/results)")
    parser.add_argument("--dim", type=int, default=answer_speed.DIM, help="the probe's input dimension (default 50)")
    parser.add_argument("--chains", default=None, help="comma-separated chain counts (default 256,2048,16384)")
    parser.add_argument("--no-memory", action="store_true", help="skip the subprocess memory figures")
    parser.add_argument("--no-timing", action="store_true", help="skip the timed rows (memory figures only)")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated subset of {','.join(KINDS)}")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child_main(json.loads(args.child))
        return {}
    if args.dim < 1:
        raise SystemExit(f"--dim must be a positive integer, got {args.dim}")
    config = QUICK if args.quick else FULL
    if args.chains:
        config = dataclasses.replace(config, chains=tuple(int(c) for c in args.chains.split(",")))
    if args.no_memory:
        config = dataclasses.replace(config, memory=False)
    kinds = tuple(args.kinds.split(","))
    if not kinds or any(kind not in KINDS for kind in kinds):
        raise SystemExit(f"--kinds must be a comma-separated subset of {','.join(KINDS)}, got {args.kinds!r}")
    config = dataclasses.replace(config, kinds=kinds)
    out_dir = args.out or os.environ.get("JAXPROBE_BENCH_RESULTS") or (
        tempfile.mkdtemp(prefix="front_ends-quick-") if args.quick else results_dir())
    started, other_work = time.perf_counter(), throughput.OtherWork()
    results: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv), "quick": args.quick,
        "machine": throughput.machine(), "versions": throughput.versions(),
        "config": dataclasses.asdict(config) | {"dim": args.dim, "box": BOX, "seed": SEED, "temperature": TEMPERATURE},
        "code": {"start": code_state()}, "load_average": {"before": list(os.getloadavg())}}
    results["memory"] = memory_section(config, args.dim) if config.memory else []  # first: children start small
    results["timing"] = [] if args.no_timing else timing_section(config, args.dim)
    results["load_average"]["after"] = list(os.getloadavg())
    results["code"]["end"] = code_state()
    results["other_work_cores"] = other_work.cores()
    results["total_seconds"] = time.perf_counter() - started
    results["summary"] = summary(results)
    name = "front_ends" if args.dim == answer_speed.DIM else f"front_ends.d{args.dim}"
    # jaxprobe run's rows (their own question, d = 30): front_ends.run; the other front ends' rows: the whole record
    # (front_ends, front_ends.d<dim>); some of them only: a record of their own beside it
    if set(config.kinds) <= set(RUN_KINDS):
        name += ".run"
    elif set(config.kinds) - set(RUN_KINDS) != set(KINDS) - set(RUN_KINDS):
        name += "." + "-".join(config.kinds)
    write_atomically(os.path.join(out_dir, f"{name}.json"), json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    write_atomically(os.path.join(out_dir, f"{name}.md"), table)
    print(table)
    log(f"done in {results['total_seconds']:.0f} s; wrote {out_dir}/{name}.json and {name}.md")
    return results


if __name__ == "__main__":
    main()
