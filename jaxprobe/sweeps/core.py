"""``jaxprobe.sweep``: a grid of probes × temperatures × seeds as one compiled program per shape.

Every cell of a grid is an independent run of :func:`jaxprobe.generate`: its own
key, initial positions, warmup (step-size adaptation) and draws. The cells that
share array shapes (same sampler, chains, draws, probe structure) are stacked on a
leading *cell* axis and run by ONE compiled program, ``vmap`` over cells of the
engine's pure core (:func:`jaxprobe.engine.init` → ``warmup`` → ``run``), with the
numeric hyperparameters (temperature, seed, step size, α, localizer weight,
target label, anchor index, ...) as traced inputs. A 64-cell temperature grid
therefore costs one compilation; an axis that changes shapes or the program (the
sampler, the number of chains, a model kind) compiles once per value. The cells of a
whole-run sampler (:mod:`jaxprobe.samplers`, e.g. the tree-ensemble Gibbs sampler) run
one at a time, each as the single run ``generate`` makes.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import math
import os
import time
import warnings
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from jaxprobe._compiles import Compiles
from jaxprobe._inputs import check_int, check_number
from jaxprobe._io import CorruptFileError, CorruptFileWarning, atomic_write, json_checksum_ok, json_with_checksum
from jaxprobe._pointwise import batch_plan, map_points
from jaxprobe._values import ByValue, value_key
from jaxprobe.constraints import restriction
from jaxprobe.engine import core
from jaxprobe.engine.checkpoint import CheckpointIfLong
from jaxprobe.engine.api import (CheckpointMismatchError, canonicalize_key, chain_sharding, to_host,
                                 compiled_program_count, make_kernel)
from jaxprobe.engine.compiled import jit_bounded
from jaxprobe.engine.numerics import check_numerics, resolve_numerics, with_numerics
from jaxprobe.engine.registry import whole_run_sampler
from jaxprobe.engine.samples import Samples
from jaxprobe.engine import estimates, streaming
from jaxprobe.engine.diagnostics import rank_diagnostics
from jaxprobe.engine.estimates import MCSEWarning
from jaxprobe.engine.verdict import (ConvergenceError, ConvergenceWarning, CoordinateNames, Tempering, check_policy,
                                     start_range, verdict_from_statistics)
from jaxprobe.generation import _answer_to_precision, _check_precision, answer
from jaxprobe.probes import Probe, as_probe
from jaxprobe.question import Question, categorical_constraints, infer_dim
from jaxprobe.sweeps.grid import ENGINE_BATCHED_AXES, ENGINE_STATIC_AXES, Axis, cell_id, cells_of, check_cells, \
    classify_axes

__all__ = ["sweep", "SweepProblem", "SweepResult", "read_table", "TABLE_COLUMNS", "OBSERVABLE_COLUMNS"]

#: Columns of the results table after the grid's own axis columns.
TABLE_COLUMNS = (
    "status", "error", "acceptance_rate", "step_size", "max_rhat", "min_ess_bulk",
    "probe_mean", "probe_mcse", "probe_mcse_note", "mcse_warning", "probe_sd", "probe_min", "probe_q05",
    "probe_median", "probe_q95",
    "probe_max",
    "probe_rhat", "probe_ess_bulk", "num_nonfinite", "num_divergent", "seconds", "compile_seconds",
    "group", "samples", "log_evidence", "log_evidence_se", "problems",
)
#: After :data:`TABLE_COLUMNS`, each observable's columns: ``observable_<name>`` (its mean: a number, or a list for
#: a vector observable, JSON in the CSV), ``observable_<name>_mcse`` (its Monte-Carlo standard error, beside it; the
#: sweep plot's error bars) and ``observable_<name>_note`` (why that error cannot be trusted, or empty).
OBSERVABLE_COLUMNS = ("observable_{}", "observable_{}_mcse", "observable_{}_note")
#: Statuses of cells that finished (their samples are on file): "unconverged" cells carry their verdict's
#: problems in the "problems" column.
FINISHED = ("ok", "unconverged")

_SPEC_FILE = "sweep.json"
_CELLS_DIR = "cells"


class SweepProblem(NamedTuple):
    """What ``build_probe(**params)`` may return instead of a bare probe.

    ``probe`` G(x); ``prior`` a log density on data space (or None, flat);
    ``constraints`` a ``Box``/``Fixed`` or a list (must not depend on batched,
    i.e. traced, parameters); ``dim`` the number of features d when neither the
    constraints nor the prior's mean gives it; ``transform`` an optional
    ``x -> features`` map applied to each draw when the probe statistics and
    the table are made (e.g. a model output); unused by the sampler.

    Examples
    --------
    >>> from jaxprobe import constraints, priors, probes
    >>> def build_probe(centre):                        # a sweep axis "centre" → the question of one cell
    ...     return SweepProblem(probes.localize(jnp.full(2, centre)), prior=priors.StandardNormal(),
    ...                         constraints=constraints.Box(-3.0, 3.0))
    >>> build_probe(1.0).dim is None, type(build_probe(1.0).constraints).__name__   # d from the constraints
    (True, 'Box')
    """

    probe: Callable
    prior: Callable | None = None
    constraints: Any = None
    dim: int | None = None


@dataclasses.dataclass
class SweepResult:
    """What :func:`sweep` returns.

    Attributes
    ----------
    rows
        One dict per cell, in grid order: the cell's parameters, then
        :data:`TABLE_COLUMNS` (acceptance, R̂, ESS, probe value statistics, times).
    samples
        The :class:`jaxprobe.Samples` of each cell (positions ``(chain, draw, d)``
        in data space), ``None`` for failed cells, when ``keep_samples=True``;
        otherwise ``None``. With ``out`` set, they are also in ``out/cells/*.npz``.
    out
        The output folder, or None.
    num_compilations
        Programs compiled by this call: one per group of cells that share shapes.
    compile_seconds, seconds
        Time spent compiling, and the whole call.

    Examples
    --------
    >>> from jaxprobe import priors, probes
    >>> result = jaxprobe.sweep(0, lambda centre: probes.localize(jnp.full(2, centre)),
    ...                         {"centre": [0.0, 1.0], "temperature": [1.0]}, prior=priors.StandardNormal(), dim=2,
    ...                         num_chains=4, num_samples=50, num_warmup=50, progress=False, convergence="ignore")
    >>> [row["centre"] for row in result.rows], result.num_compilations   # two cells, one compiled program
    ([0.0, 1.0], 1)
    >>> result.samples[1].positions.shape
    (4, 50, 2)
    """

    rows: list[dict[str, Any]]
    samples: list[Samples | None] | None
    out: str | None
    num_compilations: int
    compile_seconds: float
    seconds: float

    def load_samples(self, index: int) -> Samples:
        """The samples of cell ``index`` (from memory, or from the output folder)."""
        if self.samples is not None and self.samples[index] is not None:
            return self.samples[index]
        row = self.rows[index]
        if row.get("status") not in FINISHED or self.out is None:
            raise ValueError(f"cell {index} has no samples (status {row.get('status')!r}: {row.get('error')})")
        return Samples.load(os.path.join(self.out, row["samples"]))

    def to_pandas(self):
        """The table as a ``pandas.DataFrame`` (needs pandas)."""
        import pandas

        return pandas.DataFrame(self.rows)


# ------------------------------------------------------------------ validation helpers


def _resolve_dim(problem: SweepProblem) -> int:
    return infer_dim(dim=problem.dim, prior=problem.prior, constraints=problem.constraints, probe=problem.probe)


def _check_shared_constraints(constraints: Any, prior: Any, dim: Any, build_probe: Any) -> None:
    """``constraints`` given to :func:`sweep` hold for every cell: a bad one (a wrong-length bound, a
    string) is refused before anything runs, not recorded as every cell's error. Skipped when d is
    not known yet (a builder's :class:`SweepProblem` states it): each cell then says what is wrong."""
    if constraints is None:
        return
    probe = build_probe.probe if isinstance(build_probe, _FixedProbe) else None
    try:
        number = infer_dim(dim=dim, prior=prior, constraints=constraints, probe=probe)
    except ValueError:
        return
    restriction(constraints, number)


def _as_problem(value: Any, prior: Any, constraints: Any, dim: Any) -> SweepProblem:
    if isinstance(value, SweepProblem):
        return SweepProblem(as_probe(value.probe), value.prior if value.prior is not None else prior,
                            value.constraints if value.constraints is not None else constraints,
                            value.dim if value.dim is not None else dim)
    return SweepProblem(as_probe(value, "build_probe(...) result"), prior, constraints, dim)


_TRACER_ERRORS = (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
                  jax.errors.TracerBoolConversionError, jax.errors.TracerIntegerConversionError)


# ------------------------------------------------------------------ the compiled program of one group


class _FixedProbe:
    """``build_probe`` for a fixed probe: equal for the same probe object, so a second sweep of the same probe
    (e.g. a resumed one) reuses the compiled program instead of compiling again."""

    def __init__(self, probe: Probe):
        self.probe = probe

    def __call__(self) -> Probe:
        return self.probe

    def __hash__(self) -> int:
        return hash(self.probe)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _FixedProbe) and other.probe == self.probe


class _Group(NamedTuple):
    static: tuple[tuple[str, Any], ...]  # static axis values shared by the group
    indices: list[int]  # grid indices of the group's pending cells


#: Axis of the batched program's kept draws that indexes the cells: 1, after the draw axis. The scan of each cell
#: stacks its draws first; vmapped over cells, XLA's loop buffer is (N, cells, C, ...) in memory, and asking for
#: cells first (out_axes 0) copied the whole batch's draws into that order at the end of the program: two copies of
#: the draws at the peak (benchmarks/results/sweep_memory.md: 1.76× the draws, target 1.25×).
DRAWS_AXIS = 1


def _cell_program(build_probe, static_params, batched_axes, settings, problem0, restricted, kernel, dtype, mesh,
                  keep_samples, observables=(), finalize_on_device=True):
    """The function of ONE cell's traced inputs → ``(its statistics, its draws)``, vmapped over cells by the
    caller (the draws at axis :data:`DRAWS_AXIS`): the run of :func:`jaxprobe.sample` in one piece (init → warmup →
    :func:`jaxprobe.engine.core.run_monitored` → :func:`jaxprobe.engine.streaming.finalize`), with G(x) as
    an observable folded in on the device. The draws are ``{}`` unless ``keep_samples``: without them a cell holds
    ``O(C·d)`` whatever its draws. ``finalize_on_device=False`` (CPUs) returns the folded statistics unfinished, for
    :func:`_cell_row` to finish in NumPy one cell at a time, as :func:`jaxprobe.sample` does on a CPU."""
    num_chains = settings["num_chains"]
    num_samples, num_warmup, thin = settings["num_samples"], settings["num_warmup"], settings["thin"]
    fixed_step = settings["fixed_step_size"]
    shared = settings["step_size_mode"] == "shared"
    target = settings["target_acceptance_rate"]
    num_free = restricted.num_free
    smc = kernel if kernel.starts_at_target else None
    if smc is not None:  # chains start at the particles of a tempered SMC run, then continue with its kernel
        kernel = smc.chains()
    num_subset = streaming.subset_plan(num_chains, num_samples)[2]

    def one_cell(base_key, seed, temperature, step_size, values):
        problem = _as_problem(build_probe(**static_params, **values), problem0.prior, problem0.constraints,
                              problem0.dim)
        question = Question(problem.probe, temperature, problem.prior, restricted)
        # The keys of generate(fold_in(base_key, seed), ...): init, then sample's warmup / sampling split.
        key = jax.random.fold_in(base_key, seed)
        key_init, key_sample = jax.random.split(key)
        key_warmup, key_sampling = jax.random.split(key_sample)
        z0, out = _cell_start(question, smc, key_init, key_sample, num_chains, dtype, mesh)
        logdensity = question.logdensity

        parameters = core.default_parameters(kernel, num_chains, num_free, dtype,
                                             step_size if fixed_step else None)
        state = core.init(kernel, logdensity, z0, parameters)
        initial_logdensity = state.kernel_state.logdensity
        state = core.prepare(key_warmup, state, kernel, logdensity, num_warmup, not fixed_step, target, shared)
        probe_of_z, in_data_space, monitor = _cell_monitor(question, observables, num_chains, num_free, num_samples,
                                                           fold_probe=not keep_samples)
        if smc is not None:  # the particle groups (for every error bar) and the observables at the particles
            out["particle_groups"] = jnp.asarray(smc.groups(num_chains), jnp.int32)
            if in_data_space:
                out["particle_values"] = {name: map_points(fn, z0) for name, fn in in_data_space}
        monitored = streaming.init_stats(monitor, dtype)
        state, trace, stats, (draw_stats, folded) = core.run_monitored(
            key_sampling, state, kernel, logdensity, num_samples, thin, monitor, monitored,
            jnp.zeros((), jnp.int32), keep_draws=keep_samples,
            record=_draw_recorder(question) if keep_samples else None,
            carried=lambda z: {"probe": probe_of_z(z)})  # G from each step's own evaluation (MALA, RWMH)
        # On a CPU, finished on the host per cell (_cell_row): in the program, vmapped over cells, XLA held
        # several copies of every cell's subset at once (~1 MB a cell of 256 chains).
        statistics = streaming.finalize(draw_stats, monitor) if finalize_on_device else draw_stats
        # G at the verdict's subset draws (S, C_sub, d): one subset draw at a time (lax.map), so the probe's hidden
        # layers hold cells × C_sub points at once, as each step of the run does, not cells × C_sub × S (all at
        # once they were most of a 256-cell sweep's memory without draws: benchmarks/results/sweep_memory.md).
        probe_subset = jax.lax.map(jax.vmap(probe_of_z), draw_stats.subset[:num_subset, :, :num_free])
        steps = num_samples * thin
        out = {
            **out,
            "statistics": statistics,
            "observable_sums": folded,
            "probe_subset": jnp.swapaxes(probe_subset, 0, 1),                      # (C_sub, S)
            "initial_logdensity": initial_logdensity,
            "acceptance_rate": stats.acceptance_rate_sum / steps,
            "num_divergent": stats.num_divergent,
            "num_nonfinite": stats.num_nonfinite,
            "num_gradient_evaluations": stats.num_gradient_evaluations,
            "step_size": jnp.broadcast_to(state.parameters["step_size"], (num_chains,)),
        }
        if smc is None:  # the range of the chains' own starts, for the verdict (after SMC: its tempering path)
            out["start_range"] = start_range(z0, jnp)
        draws = {}
        if keep_samples:  # draw-major (N, C, ...) as the scan stacked them, in data space (one-hot groups
            # relaxed): one copy of the draws on the device; the host swaps the axes as a view (_cell_row)
            draws["positions"], draws["probe"] = trace.position
            draws["logdensity"] = trace.logdensity
        if "inverse_mass_matrix" in state.parameters:
            out["inverse_mass_matrix"] = state.parameters["inverse_mass_matrix"]
        return out, draws

    return one_cell


def _cell_start(question: Question, smc: Any, key_init: Any, key_sample: Any, num_chains: int, dtype: Any,
                mesh: Any) -> tuple[Any, dict[str, Any]]:
    """A cell's initial positions (traced), as :func:`jaxprobe.sample` starts: the question's initial draws,
    sharded over the ``chains`` mesh; with an SMC kernel ``smc``, the particles of its tempered run instead,
    with its evidence and tempering path as the cell's first outputs."""
    z0 = question.initial_positions(key_init, num_chains, dtype)
    if mesh is not None:
        z0 = jax.lax.with_sharding_constraint(z0, NamedSharding(mesh, PartitionSpec("chains")))
    if smc is None:
        return z0, {}
    # the keys of sample(): fold_in(its key, 1) → (reference draws, tempering)
    key_reference, key_tempering = jax.random.split(jax.random.fold_in(key_sample, 1))
    result = smc.start(key_tempering, question.reference, question.logdensity.tilt,
                       question.reference.sample(key_reference, num_chains, dtype))
    return result.particles, {"log_evidence": result.log_evidence, "log_evidence_se": result.log_evidence_se,
                              "group_log_evidence": result.group_log_evidence,
                              "smc_reached_target": result.info.reached_target,
                              "smc_num_stages": result.info.num_stages,
                              "smc_inverse_temperature": result.info.lambdas,
                              "smc_log_evidence": result.info.log_evidence_path,
                              "smc_log_evidence_se": result.info.log_evidence_path_se,
                              "smc_gradient_evaluations": result.info.num_gradient_evaluations}


def _cell_monitor(question: Question, observables: Sequence[tuple[str, Callable]], num_chains: int, num_free: int,
                  num_samples: int, fold_probe: bool = True
                  ) -> tuple[Callable, tuple[tuple[str, Callable], ...], streaming.Monitor]:
    """G and the ``observables`` (functions of x) as functions of the unconstrained z, and the streaming monitor
    that folds them in as the chains run: ``(probe_of_z, observables_of_z, monitor)``. G is folded in as the
    observable ``"probe"`` only if ``fold_probe``: a cell that keeps its draws stores G beside each of them
    (:func:`_draw_recorder`) and sums those values after the run (:func:`_cell_row`), evaluating G once a draw.
    Either way the run carries G (``run_monitored(carried=...)``), from each MALA or RWMH step's own evaluation."""
    probe_of_z = lambda z: question.probe.fn(question.to_data(z))  # noqa: E731 - G(x) as sample() folds it
    in_data_space = tuple((name, lambda z, fn=fn: fn(question.to_data(z))) for name, fn in observables)
    folded = (("probe", probe_of_z),) if fold_probe else ()
    monitor = streaming.Monitor(num_chains, num_free, num_samples, folded + in_data_space)
    return probe_of_z, in_data_space, monitor


def _draw_recorder(question: Question) -> Callable:
    """``record(z, values)`` of the kept draws: each stored once, in data space, with G(x) as the run carries it
    (``values["probe"]``: computed beside the log density by MALA and RWMH, else at the kept draw; over all draws
    at once afterwards, the probe's hidden layers would take several times the draws)."""
    to_data = jax.vmap(question.to_data)

    def record(z, values):
        return to_data(z), values["probe"]

    return record


def _batch_inputs(cells: list[dict], indices: list[int], batch: int, batched_axes: list[Axis], defaults: dict,
                  dtype) -> tuple:
    """Per-cell inputs stacked on the cell axis; the last batch is padded by repeating its last cell."""
    padded = indices + [indices[-1]] * (batch - len(indices))
    value = lambda cell, name: cell.get(name, defaults.get(name))  # noqa: E731
    seeds = np.asarray([value(cells[i], "seed") for i in padded], np.int32)
    temperatures = np.asarray([value(cells[i], "temperature") for i in padded], dtype)
    step_sizes = np.asarray([value(cells[i], "step_size") or 1.0 for i in padded], dtype)
    values = {axis.name: np.asarray([cells[i][axis.name] for i in padded], np.int32 if axis.integer else dtype)
              for axis in batched_axes}
    return seeds, temperatures, step_sizes, values


# ------------------------------------------------------------------ output folder


def _write_json(path: str, payload: Any, checksum: bool = False) -> None:
    """``payload`` as JSON, atomically; ``checksum``: with a ``"crc32"`` key that reading it back verifies (a
    cell's row, :func:`_load_done`)."""
    if checksum:
        payload = json_with_checksum(payload, default=_json_default)
    atomic_write(path, lambda stream: json.dump(payload, stream, indent=1, default=_json_default), binary=False)


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def _finite_or_none(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _nan_reduce(reduce, values: np.ndarray) -> float | None:
    values = np.asarray(values, np.float64)
    return _finite_or_none(reduce(values)) if np.any(np.isfinite(values)) else None


def read_table(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows of a sweep's ``results.csv`` (numbers parsed back; empty fields are None).

    Examples
    --------
    >>> with open("results.csv", "w") as stream:
    ...     _ = stream.write("cell,temperature,acceptance_rate,error\\n0,0.1,0.61,\\n")
    >>> read_table("results.csv")
    [{'cell': 0, 'temperature': 0.1, 'acceptance_rate': 0.61, 'error': None}]
    """
    with open(path, newline="") as stream:
        rows = list(csv.DictReader(stream))
    for row in rows:
        for key, text in row.items():
            if text == "":
                row[key] = None
                continue
            try:
                number = float(text)
                row[key] = int(number) if text.lstrip("-").isdigit() else number
            except ValueError:
                pass
    return rows


def _write_table(out: str, rows: list[dict[str, Any]], axis_names: list[str],
                 observable_names: Sequence[str] = ()) -> None:
    """``results.csv`` (and ``results.parquet`` with pyarrow): the axes, :data:`TABLE_COLUMNS`, then each
    observable's :data:`OBSERVABLE_COLUMNS`; lists and tuples (vector observables, list axes) as JSON."""
    columns = ["cell", "index"] + axis_names + list(TABLE_COLUMNS) + [
        column.format(name) for name in observable_names for column in OBSERVABLE_COLUMNS]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else (json.dumps(list(v)) if isinstance(v, (tuple, list)) else v))
                         for k, v in row.items()})
    atomic_write(os.path.join(out, "results.csv"), lambda stream: stream.write(buffer.getvalue()), binary=False)
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        return
    cell_value = lambda v: json.dumps(list(v)) if isinstance(v, (tuple, list)) else v  # noqa: E731
    table = pyarrow.table({c: [cell_value(r.get(c)) for r in rows] for c in columns})
    atomic_write(os.path.join(out, "results.parquet"), lambda stream: pyarrow.parquet.write_table(table, stream))


def _read_row(row_path: str, identifier: str) -> dict[str, Any]:
    """A cell's row read back, verified (its checksum, its cell): :class:`CorruptFileError` if it is damaged."""
    remedy = "The cell runs again"
    try:
        with open(row_path) as stream:
            row = json.load(stream)
    except (ValueError, UnicodeDecodeError) as error:
        raise CorruptFileError(row_path, f"it is not JSON ({error})", remedy) from None
    if json_checksum_ok(row) is False:
        raise CorruptFileError(row_path, "its contents do not match their checksum", remedy)
    if not isinstance(row, dict) or row.get("cell") != identifier or not isinstance(row.get("samples", ""), str):
        raise CorruptFileError(row_path, f"it is not the row of cell {identifier}", remedy)
    return row


def _load_done(out: str, ids: list[str], keep_samples: bool) -> dict[str, tuple[dict, Samples | None]]:
    """Rows of finished cells found in ``out/cells`` (status ok and samples present), each with its samples
    (None unless ``keep_samples``). Every row and samples file read is verified: a damaged one (or a finished
    row whose samples file is missing) is not taken, and a :class:`CorruptFileWarning` names it: its cell runs
    again."""
    done = {}
    for identifier in ids:
        row_path = os.path.join(out, _CELLS_DIR, identifier + ".json")
        if not os.path.exists(row_path):
            continue
        try:
            row = _read_row(row_path, identifier)
            if row.get("status") not in FINISHED:
                continue
            samples_path = os.path.join(out, row["samples"])
            if not os.path.exists(samples_path):
                raise CorruptFileError(samples_path, f"it is missing, and {row_path} says the cell finished",
                                       "The cell runs again")
            cell_samples = Samples.load(samples_path)  # verified; kept only when the sweep keeps samples
        except CorruptFileError as error:
            warnings.warn(f"{error.path}: {error.problem}: the cell {identifier} runs again", CorruptFileWarning,
                          stacklevel=4)
            continue
        done[identifier] = (row, cell_samples if keep_samples else None)
    return done


# ------------------------------------------------------------------ public entry point


def sweep(
    rng_key: Any,
    build_probe: Callable[..., Any] | Probe,
    grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]],
    *,
    num_chains: int | None = None,
    num_samples: int | None = None,
    temperature: float | None = None,
    num_warmup: int = 500,
    sampler: str = "mala",
    thin: int = 1,
    seed: int = 0,
    step_size: float | None = None,
    step_size_mode: str = "per_chain",
    target_acceptance_rate: float | None = None,
    prior: Callable | None = None,
    constraints: Any = None,
    dim: int | None = None,
    static: Sequence[str] = (),
    sampler_options: dict[str, Any] | None = None,
    cells_per_batch: int | None = None,
    out: str | os.PathLike | None = None,
    keep_samples: bool = True,
    progress: bool = True,
    devices: Any = None,
    dtype: Any = jnp.float32,
    convergence: str = "warn",
    checkpoint: str | os.PathLike | CheckpointIfLong | None = None,
    numerics: str | None = None,
    observables: dict[str, Callable] | None = None,
    keep_draws: bool = True,
    precision: dict[str, Any] | None = None,
) -> SweepResult:
    """Run every cell of ``grid`` as an independent :func:`jaxprobe.generate` run, batched and resumable.

    Cell c samples ``x ~ exp(−G_c(x)/τ_c)·prior(x)`` restricted by ``constraints``
    (probing paper, Eq. 3), with ``G_c = build_probe(**params_c)`` and its own
    key ``fold_in(rng_key, seed_c)``: the same key, initial positions and warmup as
    ``generate(jax.random.fold_in(rng_key, seed_c), G_c, temperature=τ_c, ...)``.
    Cells with the same seed share their random numbers (common random numbers,
    which sharpen comparisons across τ or α); give a ``seed`` axis for
    independent replicates.

    Batching: numeric axes (``temperature``, ``seed``, ``step_size`` and every
    numeric probe axis, e.g. ``alpha``, a localizer ``weight``, a ``target``
    label, an ``anchor`` index) are traced inputs of ONE compiled program that
    runs the cells vmapped, ``(cells, chains, d)``; chains are sharded over the
    engine's ``chains`` device mesh. Axes with strings, bools or lists, the engine's
    shape settings (``sampler``, ``num_chains``, ``num_samples``, ``num_warmup``,
    ``thin``, ...) and the names in ``static`` compile once per distinct value.
    A whole-run sampler's cells (:mod:`jaxprobe.samplers`) run one at a time
    through the single-run path, each exactly as ``generate`` runs it (its runs
    are not checkpointed).

    Parameters
    ----------
    rng_key
        Key or int seed.
    build_probe
        ``build_probe(**params) -> probe`` (or a :class:`SweepProblem`), called
        with each cell's probe parameters (the grid axes other than the engine
        ones). Batched parameters arrive as traced JAX scalars (int32 for integer
        axes, ``dtype`` otherwise): use them in jnp arithmetic or indexing. If
        the grid has no probe axes, a fixed :class:`jaxprobe.probes.Probe` works too.
    grid
        ``{axis: [values]}`` (Cartesian product, in order) or a list of
        ``{axis: value}`` cells.
    num_chains, num_samples, num_warmup, sampler, thin, step_size, step_size_mode, target_acceptance_rate, sampler_options
        As for :func:`jaxprobe.sample`; each may also be a grid axis (``num_chains`` and ``num_samples``
        are required, as keywords or as axes).
    temperature, seed
        Values for cells whose grid has no such axis (``temperature`` is then required).
    prior, constraints, dim
        As for :func:`jaxprobe.generate`, unless ``build_probe`` returns a
        :class:`SweepProblem` giving them. Constraints are part of a program's
        shape: they may differ between static groups, not between batched cells.
    static
        Numeric axes to treat as static anyway (e.g. one a probe constructor
        validates with NumPy and so cannot take traced values).
    cells_per_batch
        At most this many cells per program call (default: all cells of a group).
        Smaller batches use less memory and lose less work on an interruption;
        the last batch is padded to the same size, so each group compiles once.
    out
        Output folder: ``results.csv`` (and ``results.parquet`` with pyarrow), one
        row per cell; ``cells/<id>.npz`` samples and ``cells/<id>.json`` rows, all
        written atomically after each batch. Running the same sweep again skips
        the finished cells found there (resume); cells that failed are retried.
    checkpoint
        For a one-cell sweep: a ``.npz`` path for :func:`jaxprobe.sample`'s checkpoint (resume an
        interrupted single run), or a :class:`jaxprobe.engine.CheckpointIfLong` of one (checkpointed only
        when long: ``jaxprobe run``). Several cells resume from ``out`` instead.
    convergence
        ``"warn"`` (default): one :class:`jaxprobe.ConvergenceWarning` naming the cells
        whose verdict failed (their status is ``"unconverged"``, the ``problems``
        column says why); ``"error"`` raises :class:`jaxprobe.ConvergenceError`
        after the table is written; ``"ignore"`` only marks them.
    keep_samples
        Keep every cell's samples in memory in the result (turn off for big sweeps
        written to ``out``, whose cells' files still hold their draws).
    keep_draws
        ``False``: no cell keeps a draw, in memory or in ``out`` (its file holds the verdict
        and the observables): a cell holds ``O(C·d)`` on the device whatever its number of
        draws. The table's probe mean, its MCSE and R̂ / ESS still come from the statistics
        folded in on the device; the quantiles of G (which need the draws) are empty.
    observables
        ``{"name": fn}`` of one x ``(d,)`` in data space, as for :func:`jaxprobe.generate`:
        every cell's samples carry ``observables["name"]`` (``.mean``, ``.mcse``); G(x)
        itself is always folded in (the table's ``probe_mean`` and ``probe_mcse``), and the table carries each
        observable's mean and MCSE too (``observable_<name>``, ``observable_<name>_mcse``, and
        ``observable_<name>_note`` where the error cannot be trusted).
    precision
        For a one-cell sweep (``jaxprobe run``): ``generate``'s ``precision``, ``{"target", "mcse",
        "max_chains"}``, with ``"target"`` also ``"probe"`` (G(x), always folded in): runs of ``num_chains``
        chains are pooled until the target's MCSE is reached (:func:`jaxprobe.generate`). Not with
        ``checkpoint``.
    progress
        A tqdm bar over cells, with chain-steps/s.
    devices
        Devices for the ``chains`` mesh axis (default all).
    numerics
        ``"reproducible"``, ``"fast"`` or ``None`` (per platform of ``devices``:
        reproducible on CPU, fast on GPU/TPU), as in :func:`jaxprobe.sample`, for
        every cell; checked before anything compiles.

    Returns
    -------
    SweepResult
        Rows in grid order (failed cells have ``status="error"`` and the error
        message; the sweep goes on past them), samples, compile statistics.

    Examples
    --------
    >>> from jaxprobe import priors, probes
    >>> model = lambda x: jax.nn.sigmoid(x @ jnp.array([2.0, -1.0]))
    >>> result = jaxprobe.sweep(jax.random.key(0), lambda alpha: probes.prediction_risky(model, alpha=alpha),
    ...                         {"alpha": [0.2, 0.8]}, temperature=0.01, num_chains=4, num_samples=100,
    ...                         num_warmup=100, prior=priors.StandardNormal(), dim=2, progress=False)
    >>> [row["alpha"] for row in result.rows], result.num_compilations      # two cells, one program
    ([0.2, 0.8], 1)
    >>> result.samples[1].positions.shape
    (4, 100, 2)
    >>> [round(float(jnp.mean(model(s.positions.reshape(-1, 2)))), 1) for s in result.samples]
    [0.2, 0.8]
    """
    started = time.perf_counter()
    plan = _validate_sweep(rng_key, build_probe, grid, num_chains=num_chains, num_samples=num_samples,
                           temperature=temperature, num_warmup=num_warmup, sampler=sampler, thin=thin, seed=seed,
                           step_size=step_size, step_size_mode=step_size_mode,
                           target_acceptance_rate=target_acceptance_rate, prior=prior, constraints=constraints,
                           dim=dim, static=static, sampler_options=sampler_options,
                           cells_per_batch=cells_per_batch, dtype=dtype, convergence=convergence,
                           checkpoint=checkpoint, numerics=numerics, devices=devices, observables=observables,
                           keep_draws=keep_draws, keep_samples=keep_samples, out=out, precision=precision)
    table = _SweepTable(plan, out, keep_samples)  # resumes the finished cells found in out
    groups: dict[tuple, list[int]] = {}  # the cells still to run, by the values of their static axes
    for index, cell in enumerate(plan.cells):
        if table.rows[index] is None:
            groups.setdefault(tuple((a.name, cell[a.name]) for a in plan.static_axes), []).append(index)
    pending = sum(len(v) for v in groups.values())
    # A sweep with one cell left to run (``jaxprobe run`` is one) shows the run's own step-level bar (steps/s,
    # acceptance, phase) instead of a cell bar that would sit at 0/1 for the whole run.
    if progress and pending > 1:
        from tqdm.auto import tqdm

        table.bar = tqdm(total=pending, desc=f"sweep ({len(groups)} program{'s' * (len(groups) != 1)})",
                         unit="cell", dynamic_ncols=True)
    num_compilations, compile_total = 0, 0.0
    try:
        for group_number, (static_key, indices) in enumerate(groups.items()):
            if len(indices) == 1 or _runs_alone(plan, dict(static_key)):
                # A group of one cell, or of a whole-run sampler's cells, runs as single runs, one cell at a
                # time: the very path generate takes.
                for index in indices:
                    compiled_anew, seconds = _run_single_cell(plan, table, dict(static_key), index, group_number,
                                                              progress and table.bar is None, checkpoint)
                    num_compilations += compiled_anew
                    compile_total += seconds
            else:
                compiled_anew, seconds = _run_group(plan, table, dict(static_key), indices, group_number)
                num_compilations += compiled_anew
                compile_total += seconds
    finally:
        if table.bar is not None:
            table.bar.close()
    rows = table.finish()
    _report_unconverged(rows, convergence)
    _report_error_bars(rows, convergence)
    return SweepResult(rows=rows, samples=table.samples, out=table.out, num_compilations=num_compilations,
                       compile_seconds=compile_total, seconds=time.perf_counter() - started)


# ------------------------------------------------------------------ sweep(), step by step


@dataclasses.dataclass(frozen=True)
class _SweepPlan:
    """A sweep's checked arguments (:func:`_validate_sweep`): the cells, how their axes compile, the
    settings shared by every cell, and each cell's identity (what its results are stored under)."""

    rng_key: Any
    build_probe: Any
    cells: list
    axes: list
    axis_names: list
    static_axes: list
    batched_probe_axes: list
    engine_names: set
    defaults: dict
    fixed_settings: dict
    ids: list
    temperature: Any
    step_size: Any
    prior: Any
    constraints: Any
    dim: Any
    sampler_options: Any
    cells_per_batch: Any
    dtype: Any
    numerics: str
    devices: Any
    observables: dict
    keep_draws: bool  # whether the cells' programs keep their draws (for memory or for out)
    precision: dict | None = None  # generate's precision, checked (one-cell sweeps only)


def _validate_sweep(rng_key, build_probe, grid, *, num_chains, num_samples, temperature, num_warmup, sampler, thin,
                    seed, step_size, step_size_mode, target_acceptance_rate, prior, constraints, dim, static,
                    sampler_options, cells_per_batch, dtype, convergence, checkpoint, numerics, devices,
                    observables=None, keep_draws=True, keep_samples=True, out=None, precision=None) -> _SweepPlan:
    """Every argument of :func:`sweep` checked before anything compiles, and each cell's identity: its
    settings, the fixed settings, the key and the question's log density at fixed points (so a changed
    setting or question never reuses old results)."""
    _check_run_options(convergence, numerics, keep_draws, observables, checkpoint, grid)
    cells = cells_of(grid)
    axes = classify_axes(cells, static)
    check_cells(cells)
    axis_names = [axis.name for axis in axes]
    defaults = {"num_chains": num_chains, "num_samples": num_samples, "num_warmup": num_warmup, "sampler": sampler,
                "thin": thin, "seed": seed, "step_size": step_size, "step_size_mode": step_size_mode,
                "target_acceptance_rate": target_acceptance_rate, "temperature": temperature}
    _check_defaults(defaults, axis_names)
    _check_samplers(cells, defaults, sampler_options, devices)
    if cells_per_batch is not None:
        cells_per_batch = check_int(cells_per_batch, "cells_per_batch", minimum=1)
    build_probe = _probe_builder(build_probe, axis_names)
    _check_shared_constraints(constraints, prior, dim, build_probe)
    dtype = np.dtype(dtype)
    if dtype == np.float64 and not jax.config.jax_enable_x64:
        raise TypeError("dtype float64 needs jax_enable_x64")
    engine_names = set(ENGINE_BATCHED_AXES) | set(ENGINE_STATIC_AXES)
    batched_probe_axes = [a for a in axes if a.batched and a.name not in engine_names]
    static_axes = [a for a in axes if not a.batched]

    # An int seed becomes a key only now: making one compiles (threefry's seeding), and a bad grid is refused
    # before anything compiles.
    rng_key = canonicalize_key(rng_key)
    # Fixed settings (not grid axes) name the cells, so a changed setting never reuses old results.
    numerics = resolve_numerics(numerics, jax.devices() if devices is None else devices).mode
    fixed_settings = _fixed_settings(defaults, axis_names, sampler_options, rng_key, dtype, numerics)
    # ...and so does the question itself: its log density at fixed points covers the data, the model's trained
    # parameters, the probe and its parameters, the prior and the constraints (a rerun into a folder whose cells
    # answered another question recomputes them instead of returning them).
    targets = _target_fingerprints(cells, axes, static_axes, batched_probe_axes, engine_names, defaults, build_probe,
                                   prior, constraints, dim, dtype)
    ids = [cell_id(cell, dict(fixed_settings, target=target)) for cell, target in zip(cells, targets)]
    if observables or not keep_draws:  # what a cell's file holds: another identity
        fixed_settings["observables"] = sorted(observables or {})
        fixed_settings["keep_draws"] = bool(keep_draws)
    precision = _sweep_precision(precision, cells, defaults, observables, keep_draws, checkpoint)
    if precision is not None:  # a run to a precision is another run
        fixed_settings["precision"] = dict(precision, target=str(precision["target"]))
    return _SweepPlan(rng_key, build_probe, cells, axes, axis_names, static_axes, batched_probe_axes, engine_names,
                      defaults, fixed_settings, ids, temperature, step_size, prior, constraints, dim, sampler_options,
                      cells_per_batch, dtype, numerics, devices, dict(observables or {}),
                      bool(keep_draws) and (bool(keep_samples) or out is not None), precision)


def _check_run_options(convergence: str, numerics: str | None, keep_draws: Any, observables: Any, checkpoint: Any,
                       grid: Any) -> None:
    """The options of how a sweep runs and what it keeps: the convergence policy, the numerics mode,
    ``keep_draws``, the ``observables`` (never named ``"probe"``), and a checkpoint only for one cell."""
    check_policy(convergence)
    check_numerics(numerics)
    if not isinstance(keep_draws, (bool, np.bool_)):
        raise TypeError(f"keep_draws must be True or False, got {keep_draws!r}")
    if observables is not None and (not isinstance(observables, dict)
                                    or not all(isinstance(k, str) and callable(f) for k, f in observables.items())):
        raise TypeError("observables must be a dict of name -> function of one x in data space, got "
                        f"{observables!r}")
    if observables and "probe" in observables:
        raise ValueError("observables may not be named 'probe': the sweep folds G(x) in under that name")
    if checkpoint is not None and len(cells_of(grid)) != 1:
        raise ValueError("checkpoint is for a one-cell sweep (a single run, as jaxprobe run makes); a sweep of "
                         "several cells resumes from out= instead")


def _sweep_precision(precision: Any, cells: list[dict], defaults: dict[str, Any], observables: Any, keep_draws: Any,
                     checkpoint: Any) -> dict[str, Any] | None:
    """``precision`` checked as ``generate`` checks it (``"probe"``, G(x), is an observable of every cell), for a
    one-cell sweep only: None, or the checked dict with its defaults."""
    if precision is None:
        return None
    if len(cells) != 1:
        raise ValueError("precision is for a one-cell sweep (a single run, as jaxprobe run makes): each cell of a "
                         "grid has the run size num_chains gives")
    setting = lambda name: cells[0].get(name, defaults[name])  # noqa: E731
    options = {"observables": {"probe": None, **(observables or {})}, "keep_draws": keep_draws,
               "checkpoint": checkpoint}
    return _check_precision(precision, check_int(setting("num_chains"), "num_chains", minimum=1),
                            setting("sampler"), options)


def _check_defaults(defaults: dict[str, Any], axis_names: list[str]) -> None:
    """The engine settings given as keywords, for the cells whose grid has no such axis (the grid's own values
    are checked by :func:`jaxprobe.sweeps.grid.check_cells`): numbers, ints, and the required ones present."""
    for name in ("temperature", "step_size"):  # numbers, not bools or strings (the grid's values are checked)
        if defaults[name] is not None:
            check_number(defaults[name], name, minimum=0.0, exclusive_minimum=True)
    if defaults["target_acceptance_rate"] is not None:
        check_number(defaults["target_acceptance_rate"], "target_acceptance_rate", minimum=0.0, maximum=1.0,
                     exclusive_minimum=True, exclusive_maximum=True)
    for name in ("num_chains", "num_samples"):
        if name not in axis_names and defaults[name] is None:
            raise TypeError(f"{name} is required: pass {name}=... or give a {name!r} grid axis")
    for name, minimum in (("num_chains", 1), ("num_samples", 1), ("num_warmup", 0), ("thin", 1), ("seed", 0)):
        if name not in axis_names:
            check_int(defaults[name], name, minimum)
    check_cells([{k: v for k, v in defaults.items() if v is not None and k not in axis_names}])
    if "temperature" not in axis_names and defaults["temperature"] is None:
        raise ValueError("temperature is required: pass temperature=... or give a 'temperature' grid axis")


def _check_samplers(cells: list[dict[str, Any]], defaults: dict[str, Any], sampler_options: Any,
                    devices: Any) -> None:
    """Every cell's sampler with ``sampler_options`` (a whole-run sampler checks its own, as answer() hands them)
    and its step-size mode, before compiling."""
    for name, value in sorted({(n, c.get(n, defaults[n])) for c in cells for n in ("sampler", "step_size_mode")}):
        if name == "sampler" and whole_run_sampler(value) is not None:  # its options, as answer() hands them
            whole_run_sampler(value).check_options({"sampler_options": sampler_options,
                                                    "step_size": defaults["step_size"],
                                                    "target_acceptance_rate": defaults["target_acceptance_rate"],
                                                    "devices": devices})
        elif name == "sampler":
            make_kernel(value, sampler_options)  # the sampler and its options, before compiling
        elif value not in ("per_chain", "shared"):
            raise ValueError(f"step_size_mode must be 'per_chain' or 'shared', got {value!r}")


def _probe_builder(build_probe: Any, axis_names: list[str]) -> Any:
    """``build_probe`` as given, or a fixed probe (a :class:`Probe` or a function of x) as a builder of no
    parameters, which a grid with probe axes cannot use."""
    if isinstance(build_probe, Probe) or not callable(build_probe):
        fixed = as_probe(build_probe, "build_probe")
        if any(name not in ENGINE_BATCHED_AXES + ENGINE_STATIC_AXES for name in axis_names):
            raise ValueError("a fixed probe cannot take probe axes: pass build_probe(**params) -> probe instead")
        return _FixedProbe(fixed)
    return build_probe


def _fixed_settings(defaults: dict[str, Any], axis_names: list[str], sampler_options: Any, rng_key: Any,
                    dtype: np.dtype, numerics: str) -> dict[str, Any]:
    """The settings every cell shares (the keywords that are no grid axis, the sampler's options, the key, the
    dtype, the package version and the numerics mode): part of each cell's identity."""
    fixed_settings = {k: v for k, v in defaults.items() if k not in axis_names}
    fixed_settings["sampler_options"] = sampler_options or {}
    fixed_settings["key"] = np.asarray(jax.random.key_data(rng_key)).tolist()
    fixed_settings["dtype"] = str(dtype)
    fixed_settings["version"] = _package_version()
    if numerics != "reproducible":  # reproducible cells keep the names they had before the switch existed
        fixed_settings["numerics"] = numerics
    return fixed_settings


class _SweepTable:
    """A sweep's rows and samples, in grid order, kept in memory and in ``out`` as cells finish: every
    cell's row and samples are written atomically as soon as it is done, so an interruption loses only
    the batch in flight. Cells already finished in ``out`` (same identity) are loaded, not rerun."""

    def __init__(self, plan: _SweepPlan, out: Any, keep_samples: bool):
        self.plan, self.bar = plan, None
        self.out = None if out is None else os.fspath(out)
        self.rows: list[dict[str, Any] | None] = [None] * len(plan.cells)
        self.samples: list[Samples | None] | None = [None] * len(plan.cells) if keep_samples else None
        if self.out is None:
            return
        os.makedirs(os.path.join(self.out, _CELLS_DIR), exist_ok=True)
        _write_json(os.path.join(self.out, _SPEC_FILE), {
            "axes": plan.axis_names, "settings": plan.fixed_settings,
            "cells": [dict(c, cell=i) for c, i in zip(plan.cells, plan.ids)]})
        done = _load_done(self.out, plan.ids, self.samples is not None)
        for index, identifier in enumerate(plan.ids):
            if identifier in done:
                self.rows[index] = dict(done[identifier][0], index=index)
                if self.samples is not None:
                    self.samples[index] = done[identifier][1]

    def fail(self, failed: list[int], error: Exception, group_number: int) -> None:
        """Record ``error`` as the row of every cell in ``failed`` (and on disk), then move the bar on."""
        message = f"{type(error).__name__}: {error}"
        for index in failed:
            self.rows[index] = _error_row(self.plan.cells[index], self.plan.ids[index], index, message, group_number)
            if self.out is not None:
                _write_json(os.path.join(self.out, _CELLS_DIR, self.plan.ids[index] + ".json"), self.rows[index],
                            checksum=True)
        if self.bar is not None:
            self.bar.update(len(failed))

    def store(self, index: int, row: dict[str, Any], cell_samples: Samples | None) -> None:
        """Keep a finished cell's row and samples, in memory and in ``out``."""
        self.rows[index] = row
        if self.out is not None:
            if cell_samples is not None:
                cell_samples.save(os.path.join(self.out, row["samples"]))
            _write_json(os.path.join(self.out, _CELLS_DIR, self.plan.ids[index] + ".json"), row, checksum=True)
            _write_table(self.out, [r for r in self.rows if r is not None], self.plan.axis_names,
                         list(self.plan.observables))
        if self.samples is not None:
            self.samples[index] = cell_samples

    def finish(self) -> list[dict[str, Any]]:
        """The rows, with the full table written to ``out``."""
        if self.out is not None:
            _write_table(self.out, self.rows, self.plan.axis_names, list(self.plan.observables))
        return self.rows


def _group_settings(plan: _SweepPlan, static_values: dict) -> tuple[dict, dict]:
    """A group's engine settings (its static axes over the defaults) and its static probe parameters."""
    settings = {name: static_values.get(name, plan.defaults[name]) for name in ENGINE_STATIC_AXES}
    settings["fixed_step_size"] = "step_size" in plan.axis_names or plan.step_size is not None
    settings["numerics"] = plan.numerics
    probe_params = {k: v for k, v in static_values.items() if k not in plan.engine_names}
    return settings, probe_params


def _runs_alone(plan: _SweepPlan, static_values: dict) -> bool:
    """Whether a group's cells run one at a time through :func:`jaxprobe.generation.answer`: those of a whole-run
    sampler (:mod:`jaxprobe.samplers`), which runs a whole question in its own program (no batched cells)."""
    return whole_run_sampler(static_values.get("sampler", plan.defaults["sampler"])) is not None


def _run_single_cell(plan: _SweepPlan, table: _SweepTable, static_values: dict, index: int, group_number: int,
                     progress: bool, checkpoint: Any) -> tuple[int, float]:
    """A group of one cell, run as :func:`jaxprobe.generate` runs it. Returns (1 if it compiled a program, the
    seconds spent compiling). A failure is recorded as the cell's row (the sweep goes on); a usage error is
    raised."""
    settings, probe_params = _group_settings(plan, static_values)
    tick = time.perf_counter()
    programs = compiled_program_count()
    try:
        row, cell_samples = _single_run(
            plan.rng_key, plan.build_probe, probe_params, plan.batched_probe_axes, plan.cells[index], plan.defaults,
            settings, plan.prior, plan.constraints, plan.dim, plan.sampler_options, plan.dtype, plan.devices,
            plan.ids[index], index, group_number, progress, checkpoint, plan.keep_draws, plan.observables,
            plan.precision)
    except _SweepUsageError as error:
        raise ValueError(str(error)) from None
    except CheckpointMismatchError:  # a usage error: the checkpoint passed belongs to another run
        raise
    except Exception as error:  # noqa: BLE001 - recorded per cell, the sweep goes on
        table.fail([index], error, group_number)
        return 0, 0.0
    compiled = int(compiled_program_count() > programs)
    row["seconds"] = time.perf_counter() - tick
    table.store(index, row, cell_samples)
    if table.bar is not None:
        table.bar.update(1)
    return compiled, row["compile_seconds"]


def _run_group(plan: _SweepPlan, table: _SweepTable, static_values: dict, indices: list[int],
               group_number: int) -> tuple[int, float]:
    """The cells of one static group in ONE compiled program, ``cells_per_batch`` at a time (the last batch
    padded, so the group compiles once). Returns (1 if the program was compiled anew, compile seconds)."""
    settings, probe_params = _group_settings(plan, static_values)
    batch = min(plan.cells_per_batch or len(indices), len(indices))
    try:
        (compiled, restricted), compile_seconds, is_new = _compiled_program(
            plan.rng_key, plan.build_probe, probe_params, plan.batched_probe_axes, settings, batch, plan.prior,
            plan.constraints, plan.dim, plan.sampler_options, plan.dtype, plan.devices, plan.keep_draws,
            tuple(sorted(plan.observables.items())))
    except _SweepUsageError as error:
        raise ValueError(str(error)) from None
    except Exception as error:  # noqa: BLE001 - a failing group is recorded, the sweep goes on
        table.fail(indices, error, group_number)
        return 0, 0.0
    for start in range(0, len(indices), batch):
        chunk = indices[start:start + batch]
        inputs = _batch_inputs(plan.cells, chunk, batch, plan.batched_probe_axes, plan.defaults, plan.dtype)
        tick = time.perf_counter()
        try:
            result, draws = compiled(plan.rng_key, *inputs)
            # To the host whole: with several processes, each gathers every process's chains.
            result = jax.tree.map(lambda value: to_host(value)[:len(chunk)], result)
            draws = jax.tree.map(lambda value: to_host(value)[:, :len(chunk)], draws)   # (N, cells, C, ...)
        except Exception as error:  # noqa: BLE001 - recorded per cell
            table.fail(chunk, error, group_number)
            continue
        seconds = (time.perf_counter() - tick) / len(chunk)
        for position, index in enumerate(chunk):
            one = {**jax.tree.map(lambda value: value[position], result),
                   **jax.tree.map(lambda value: value[:, position], draws)}
            row, cell_samples = _cell_row(plan.cells[index], plan.ids[index], index, one, settings, seconds,
                                          compile_seconds, group_number, restricted,
                                          plan.cells[index].get("temperature", plan.temperature))
            table.store(index, row, cell_samples)
        if table.bar is not None:
            chain_steps = len(chunk) * settings["num_chains"] * (
                settings["num_warmup"] + settings["num_samples"] * settings["thin"])
            table.bar.set_postfix_str(f"{chain_steps / (seconds * len(chunk)):.3g} chain-steps/s", refresh=False)
            table.bar.update(len(chunk))
    return int(is_new), compile_seconds


def _report_unconverged(rows: list[dict[str, Any]], convergence: str) -> None:
    """One ConvergenceWarning (or ConvergenceError) naming the cells whose verdict failed."""
    unconverged = [row["index"] for row in rows if row["status"] == "unconverged"]
    if unconverged and convergence != "ignore":
        message = (f"{len(unconverged)} of {len(rows)} sweep cells did not converge (status 'unconverged'; cells "
                   f"{unconverged[:10]}{' ...' if len(unconverged) > 10 else ''}); their 'problems' column says "
                   "why and what to do, e.g. sampler='smc' for multimodal targets "
                   "(convergence='ignore' silences this, convergence='error' raises)")
        if convergence == "error":
            raise ConvergenceError(message)
        warnings.warn(message, ConvergenceWarning, stacklevel=3)  # the caller of sweep()


def _report_error_bars(rows: list[dict[str, Any]], convergence: str) -> None:
    """One MCSEWarning naming the cells whose errors cannot be trusted (too few SMC groups: their verdict's
    ``mcse_warning``, the table's column), except under ``convergence="ignore"``."""
    flagged = [row["index"] for row in rows if row.get("mcse_warning")]
    if flagged and convergence != "ignore":
        first = next(row for row in rows if row.get("mcse_warning"))
        warnings.warn(f"the Monte-Carlo standard errors of {len(flagged)} of {len(rows)} sweep cells cannot be trusted "
                      f"(column 'mcse_warning'; cells {flagged[:10]}{' ...' if len(flagged) > 10 else ''}): "
                      f"{first['mcse_warning']}", MCSEWarning, stacklevel=3)  # the caller of sweep()


def _observable_columns(name: str, estimate: Any) -> dict[str, Any]:
    """A finished cell's :data:`OBSERVABLE_COLUMNS` of one observable: its mean and MCSE (a number, or a tuple for a
    vector observable; a non-finite MCSE, e.g. from one SMC group, as None) and the note of an untrusted error."""
    def cell(values: Any) -> Any:
        values = np.asarray(values, np.float64)
        if values.ndim == 0:
            return _finite_or_none(values)
        return tuple(_finite_or_none(v) for v in values.reshape(-1))

    mean, mcse, note = OBSERVABLE_COLUMNS
    return {mean.format(name): cell(estimate.mean), mcse.format(name): cell(estimate.mcse),
            note.format(name): estimate.note}


def _package_version() -> str:
    from jaxprobe._version import __version__

    return __version__


_FINGERPRINT_POINTS = 8


@jit_bounded(static_argnames=("build_probe", "probe_params", "axis_kinds", "prior", "constraints", "dim", "dtype"))
def _logdensity_at_fixed_points(temperatures, values, *, build_probe, probe_params, axis_kinds, prior, constraints,
                                dim, dtype):
    """Each cell's question's log density at the same fixed unconstrained points: ``(cells, points)``."""
    del axis_kinds  # part of the cache key only (integer or float batched axes)

    def one(temperature, cell_values):
        problem = _as_problem(build_probe(**dict(probe_params), **cell_values), prior.value, constraints.value, dim)
        question = Question(problem.probe, temperature, problem.prior, problem.constraints, _resolve_dim(problem))
        points = np.random.default_rng(20261123).standard_normal((_FINGERPRINT_POINTS, question.num_free))
        return jax.vmap(question.logdensity)(jnp.asarray(points, dtype))

    return jax.vmap(one)(temperatures, values)


def _target_fingerprints(cells, axes, static_axes, batched_axes, engine_names, defaults, build_probe, prior,
                         constraints, dim, dtype) -> list[str]:
    """A short hash per cell of its question's log density at fixed points (one small program per static group).

    A group whose probe cannot be built here gets a fingerprint naming the error: the group fails later, with
    the error in its rows, as before.
    """
    groups: dict[tuple, list[int]] = {}
    for index, cell in enumerate(cells):
        groups.setdefault(tuple((a.name, cell[a.name]) for a in static_axes), []).append(index)
    fingerprints = [""] * len(cells)
    for key, indices in groups.items():
        probe_params = tuple(sorted((k, v) for k, v in key if k not in engine_names))
        temperatures = np.asarray([cells[i].get("temperature", defaults["temperature"]) for i in indices], dtype)
        values = {a.name: np.asarray([cells[i][a.name] for i in indices], np.int32 if a.integer else dtype)
                  for a in batched_axes}
        try:
            table = np.asarray(_logdensity_at_fixed_points(
                temperatures, values, build_probe=build_probe, probe_params=probe_params,
                axis_kinds=tuple((a.name, a.integer) for a in batched_axes), prior=ByValue(prior),
                constraints=ByValue(constraints), dim=dim, dtype=np.dtype(dtype)))
            rows = [hashlib.sha256(row.tobytes()).hexdigest()[:16] for row in table]
        except Exception as error:  # noqa: BLE001 - the group's own run reports it
            rows = [f"unavailable: {type(error).__name__}"] * len(indices)
        for index, row in zip(indices, rows):
            fingerprints[index] = row
    return fingerprints


class _SweepUsageError(Exception):
    """A mistake in how sweep was called (not a failing cell): re-raised as ValueError."""


_PROGRAM_CACHE: dict[tuple, Any] = {}
_PROGRAM_CACHE_SIZE = 16


def _cache_key(build_probe, probe_params, batched_axes, settings, batch, prior, constraints, dim, sampler_options,
               dtype, devices, keep_draws, observables):
    """Identity of a group's program: the same builder, priors and shapes reuse one compiled program."""
    return (build_probe, tuple(sorted(probe_params.items())), tuple((a.name, a.integer) for a in batched_axes),
            tuple(sorted(settings.items())), batch, value_key(prior), value_key(constraints), dim,
            json.dumps(sampler_options or {}, sort_keys=True, default=str), str(dtype),
            tuple(jax.devices() if devices is None else devices), keep_draws, observables)


def _compiled_program(*args):
    """A group's compiled program from the cache, or compiled now. Returns (program, compile seconds, is_new)."""
    key = _cache_key(*args[1:])
    if key in _PROGRAM_CACHE:
        return _PROGRAM_CACHE[key][0], 0.0, False
    compiled, seconds = _compile_group(*args)  # compiled: (program, restriction)
    if len(_PROGRAM_CACHE) >= _PROGRAM_CACHE_SIZE:
        _PROGRAM_CACHE.pop(next(iter(_PROGRAM_CACHE)))
    _PROGRAM_CACHE[key] = (compiled, args[1], args[6], args[7])  # keep the objects in the key alive
    return compiled, seconds, True


def _compile_group(rng_key, build_probe, probe_params, batched_axes, settings, batch, prior, constraints, dim,
                   sampler_options, dtype, devices, keep_draws, observables):
    """Check the probe on abstract inputs, then lower and compile the group's program once."""
    kernel = with_numerics(make_kernel(settings["sampler"], sampler_options), settings["numerics"])
    abstract = {axis.name: jax.ShapeDtypeStruct((), np.int32 if axis.integer else dtype) for axis in batched_axes}
    captured = {}

    def probe_check(values):
        problem = _as_problem(build_probe(**probe_params, **values), prior, constraints, dim)
        number = _resolve_dim(problem)
        # the categorical inputs of imported Pipelines get their exact constraints here, as Question adds them
        constraints_with_categories = categorical_constraints(problem.probe, problem.constraints, number)
        captured["problem"] = SweepProblem(None, problem.prior, constraints_with_categories, number)
        return problem.probe(jnp.zeros((number,), dtype))

    try:
        shape = jax.eval_shape(probe_check, abstract)
    except _TRACER_ERRORS as error:
        names = [axis.name for axis in batched_axes]
        raise _SweepUsageError(
            f"build_probe needs concrete values for one of the batched axes {names}: batched axes arrive as "
            "traced JAX scalars. Use them in jnp arithmetic, or list the axis in static=[...] (one compilation "
            f"per value). Original error: {type(error).__name__}: {str(error).splitlines()[0]}") from None
    if getattr(shape, "shape", None) != ():
        raise _SweepUsageError(f"the probe must return a scalar for one input x (d,), got shape "
                               f"{getattr(shape, 'shape', shape)}")
    problem0 = captured["problem"]
    restricted = restriction(problem0.constraints, problem0.dim)
    mesh = None
    device_list = list(jax.devices() if devices is None else devices)
    if len(device_list) > 1:
        mesh = chain_sharding(settings["num_chains"], device_list).mesh
    one_cell = _cell_program(build_probe, probe_params, batched_axes, settings, problem0, restricted, kernel, dtype,
                             mesh, keep_draws, observables,
                             finalize_on_device=not streaming.finishes_on_host(device_list[0]))

    def program(base_key, seeds, temperatures, step_sizes, values):
        return jax.vmap(one_cell, in_axes=(None, 0, 0, 0, 0), out_axes=(0, DRAWS_AXIS))(
            base_key, seeds, temperatures, step_sizes, values)

    example = (rng_key, np.zeros(batch, np.int32), np.ones(batch, dtype), np.ones(batch, dtype),
               {axis.name: np.zeros(batch, np.int32 if axis.integer else dtype) for axis in batched_axes})
    tick = time.perf_counter()
    try:
        compiled = jax.jit(program).lower(*example).compile()
    except _TRACER_ERRORS as error:
        raise _SweepUsageError(f"build_probe cannot take the batched axes as traced values: {error}") from None
    return (compiled, restricted), time.perf_counter() - tick


class _ProbeBeside:
    """``record`` of one x in data space: ``[x, G(x)]`` ``(d + 1,)``, so that a run stores G's value beside each
    kept draw as it is drawn (equal for equal probes: an equal question asked again reuses its compiled run).
    The stored value is G(x) + 0·Σx: G(x) itself for a finite x, NaN where x has a NaN or inf, so that finite
    values of G tell that every draw is finite without reading the draws again."""

    def __init__(self, probe: Probe):
        self.probe = probe

    def __call__(self, x: jax.Array) -> jax.Array:
        value = jnp.reshape(self.probe.fn(x), ()).astype(x.dtype) + 0 * jnp.sum(x)
        return jnp.concatenate([x, value[None]])

    def __hash__(self) -> int:
        return hash(("probe beside x", self.probe))

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _ProbeBeside) and self.probe == other.probe


def _error_row(cell, identifier, index, message, group) -> dict[str, Any]:
    row = {"cell": identifier, "index": index, **cell}
    row.update({column: None for column in TABLE_COLUMNS})
    row.update(status="error", error=message, group=group)
    return row


def _cell_row(cell, identifier, index, one, settings, seconds, compile_seconds, group, restricted,
              cell_temperature):
    """The table row and Samples of one finished cell of a batched program, its verdict from the statistics
    folded in on the device; a cell that cannot be sampled is marked failed."""
    initial = one["initial_logdensity"]
    if not np.all(np.isfinite(initial)):
        bad = np.nonzero(~np.isfinite(initial))[0]
        return _error_row(cell, identifier, index,
                          f"ValueError: log density is not finite at the initial positions of chains "
                          f"{bad[:10].tolist()}: the probe or prior is undefined there", group), None
    gradient_evaluations = one["num_gradient_evaluations"].astype(np.int64)
    evidence = {}
    if "log_evidence" in one:  # sequential Monte Carlo started the chains (as in sample())
        stages = int(one["smc_num_stages"])
        gradient_evaluations = gradient_evaluations + one["smc_gradient_evaluations"].astype(np.int64)
        inverse_temperature = one["smc_inverse_temperature"][:stages].astype(np.float64)
        evidence = dict(
            log_evidence=float(one["log_evidence"]), log_evidence_se=float(one["log_evidence_se"]),
            group_log_evidence=one["group_log_evidence"].astype(np.float64),
            chains_start_at_target=bool(one["smc_reached_target"]),
            evidence_path={"inverse_temperature": inverse_temperature,
                           "log_evidence": one["smc_log_evidence"][:stages].astype(np.float64),
                           "log_evidence_se": one["smc_log_evidence_se"][:stages].astype(np.float64),
                           "temperature": float(cell_temperature) / inverse_temperature})
    monitor = streaming.Monitor(settings["num_chains"], restricted.num_free, settings["num_samples"])
    statistics = one["statistics"]
    if isinstance(statistics, streaming.DrawStats):  # a CPU's program folded them; NumPy finishes them
        statistics = streaming.finalize(statistics, monitor, xp=np)
    # After SMC the chains of one particle group are one independent system: errors from the groups' means, each
    # group weighted by its evidence estimate.
    num_groups = int(one["particle_groups"]) if "particle_groups" in one else None
    group_log_evidence = evidence.get("group_log_evidence")
    verdict = verdict_from_statistics(
        statistics, monitor, CoordinateNames([""], [(restricted.num_free,)]),
        acceptance_rate=one["acceptance_rate"], num_divergent=one["num_divergent"],
        num_nonfinite=one["num_nonfinite"], thin=settings["thin"],
        chains_start_at_target=evidence.get("chains_start_at_target", False),
        tempering=Tempering.of_path(evidence["evidence_path"]["inverse_temperature"]) if evidence else None,
        start_range=one.get("start_range"), num_groups=num_groups)
    observables = {name: estimates.streamed(sums, num_groups, group_log_evidence)
                   for name, sums in one["observable_sums"].items()}
    particle_observables = None
    if "particle_values" in one:
        particle_observables = {name: estimates.particle_observed(values, num_groups, group_log_evidence)
                                for name, values in one["particle_values"].items()}
    chain_major = {name: np.swapaxes(one[name], 0, 1) if name in one else None  # (N, C, ...) → (C, N, ...)
                   for name in ("positions", "logdensity", "probe")}
    probe = observables.pop("probe", None)
    spread = None
    if chain_major["probe"] is not None:  # G stored beside each kept draw: its spread, and its sums when not folded
        # in (the batches the scan would fold them in), in one read of its column
        spread, sums = _probe_pass(chain_major["probe"], monitor.num_batches if probe is None else None)
        if probe is None:
            probe = estimates.streamed(sums, num_groups, group_log_evidence)
    samples = Samples(
        positions=chain_major["positions"], logdensity=chain_major["logdensity"], acceptance_rate=one["acceptance_rate"],
        step_size=one["step_size"], num_divergent=one["num_divergent"].astype(np.int64),
        num_nonfinite=one["num_nonfinite"].astype(np.int64),
        num_gradient_evaluations=gradient_evaluations, sampler=settings["sampler"],
        num_warmup=settings["num_warmup"], thin=settings["thin"], inverse_mass_matrix=one.get("inverse_mass_matrix"),
        numerics=settings["numerics"], verdict=verdict, observables=observables or None,
        particle_observables=particle_observables, num_groups=num_groups, **evidence)
    return _finished_row(cell, identifier, index, samples, probe, spread, one["probe_subset"], seconds,
                         compile_seconds, group, restricted.report if restricted.is_relaxed else None)


def _all_finite(positions: np.ndarray, block_values: int = 2**20) -> bool:
    """Whether every kept draw ``(C, N, ...)`` is finite, a block of draws at a time: ``np.isfinite`` of all of them
    at once made a temporary of a quarter of the draws' bytes."""
    return all(bool(np.isfinite(positions[:, where]).all()) for where in _draw_blocks(positions, block_values))


def _draw_blocks(values: np.ndarray, block_values: int):
    """Slices of the draws' axis of ``values`` ``(C, N, ...)`` of about ``block_values`` values each."""
    step = max(1, block_values // max(1, values[:, :1].size))
    return [slice(start, start + step) for start in range(0, values.shape[1], step)]


def _sortable_keys(owned: np.ndarray) -> np.ndarray:
    """The floats ``owned`` (a contiguous array the caller owns: its bits are changed in place) as flat unsigned
    integers in the same order: negative floats' bits all flipped, the others' sign bit set (-0.0 sorts just below
    0.0; no NaN)."""
    keys = owned.reshape(-1).view(f"u{owned.dtype.itemsize}")
    top = keys.dtype.type(1 << (8 * keys.dtype.itemsize - 1))
    flips = keys >> keys.dtype.type(8 * keys.dtype.itemsize - 1)  # 1 where negative
    np.negative(flips, out=flips)                                  # all ones where negative
    flips |= top
    keys ^= flips
    return keys


def _count_digits(keys: np.ndarray, shift: int, prefixes: np.ndarray | None, counts: np.ndarray) -> None:
    """Adds to ``counts`` ``(R, 65536)`` the 16-bit digits at ``shift`` of ``keys``: of all of them on the first
    pass (``prefixes`` None), else of those whose higher bits equal each rank's prefix."""
    kind = keys.dtype.type
    if prefixes is None:
        counts += np.bincount((keys >> kind(shift)).astype(np.intp), minlength=1 << 16)
        return
    higher = keys >> kind(shift + 16)
    for prefix in np.unique(prefixes):  # ranks that share a prefix (a quantile's two neighbours nearly always) share
        digits = (keys[higher == prefix] >> kind(shift)) & kind(0xFFFF)  # one count
        counts[prefixes == prefix] += np.bincount(digits.astype(np.intp), minlength=1 << 16)


def _order_statistics(values: np.ndarray, ranks: Sequence[int], block_values: int = 2**20,
                      first_counts: np.ndarray | None = None) -> np.ndarray:
    """The values at the 0-based ``ranks`` of all of ``values`` ``(C, N)`` sorted (floats of any strides, no
    NaN), exactly, reading blocks of draws (never a copy of all of them): radix selection on the floats'
    order-preserving unsigned keys (:func:`_sortable_keys`), 16 bits a pass over the draws (2 passes for float32,
    4 for float64), each counting the next 16 bits of the values whose higher bits match a rank's prefix so far.
    ``first_counts``: the first pass's counts of the top 16 bits, when a caller already made them. Memory: a block
    and 65,536 counts per rank."""
    unsigned = np.dtype(f"u{values.dtype.itemsize}")
    bits = 8 * unsigned.itemsize
    tally = np.int32 if values.size < 2**31 else np.int64  # counts of 65,536 digits per rank: 1.5 MB for six ranks
    remaining = np.asarray(ranks, np.int64).copy()  # each rank's rank among the values matching its prefix
    prefixes = np.zeros(len(remaining), unsigned)
    for shift in range(bits - 16, -1, -16):
        first = shift == bits - 16  # the first pass counts every value: one row of counts serves every rank
        if first and first_counts is not None:
            counts = first_counts[None]
        else:
            counts = np.zeros((1 if first else len(remaining), 1 << 16), tally)
            for where in _draw_blocks(values, block_values):
                _count_digits(_sortable_keys(np.array(values[:, where], order="C")), shift,
                              None if first else prefixes, counts)
        for index in range(len(remaining)):
            cumulative = np.cumsum(counts[0 if first else index], dtype=np.int64)
            digit = int(np.searchsorted(cumulative, remaining[index], side="right"))
            remaining[index] -= cumulative[digit - 1] if digit else 0
            prefixes[index] = (prefixes[index] << unsigned.type(16)) | unsigned.type(digit)
    top = unsigned.type(1 << (bits - 1))
    return np.where(prefixes & top, prefixes & ~top, ~prefixes).view(values.dtype)


def _linear_quantiles(count: int, probabilities: Sequence[float], order_statistic: Callable) -> list[float]:
    """``np.quantile``'s default (linear) quantiles of ``count`` values from ``order_statistic(ranks)`` (the values
    at those 0-based ranks of the sorted values), with NumPy's own arithmetic: NumPy interpolates between the two
    order statistics around each virtual index ``(count - 1) · q``."""
    positions = [(count - 1) * float(probability) for probability in probabilities]
    lower = [int(math.floor(position)) for position in positions]
    ranks = sorted({rank for low in lower for rank in (low, min(low + 1, count - 1))})
    ordered = dict(zip(ranks, order_statistic(ranks)))
    return [float(np.quantile(np.array([ordered[low], ordered[min(low + 1, count - 1)]]),
                              np.array([position - low]))[0])  # the fraction as an array: float64, as NumPy's own
            for position, low in zip(positions, lower)]


#: Values converted to float64 at a time for G's sums (:func:`_probe_pass`): the scratch of a small cell's spread
#: was 4 MB over its 4 MB of draws (256 chains × 1,000 draws at d = 2) with a float64 copy of each whole block.
_WIDE_VALUES = 2**14


def _partitioned(values: np.ndarray, ranks: Sequence[int]) -> np.ndarray:
    """The values at 0-based ``ranks`` of the sorted ``values``, partitioning ``values`` in place."""
    values.partition(list(ranks))
    return values[list(ranks)]


def _probe_pass(values: np.ndarray, num_batches: int | None, block_values: int = 2**17,
                copy_values: int = 2**20) -> tuple[dict[str, float], streaming.ObservableSums | None]:
    """G's spread over the kept draws and (``num_batches`` given) the per-chain sums of its values over the run's
    batches of draws (:func:`jaxprobe.engine.streaming.sums_of_values`'s, accumulated in float64), ``values``
    ``(C, N)`` (floats of any strides: a view of G's column in the draws' buffer), in one read of the column:
    each pass over a strided column reads the whole buffer it lies in (2 GB at 16,384 chains × 1,000 draws × d =
    30: 0.3 s for the sums alone, beside 0.22 s for the spread). Neither copied whole nor reordered: one pass over
    blocks of draws, each copied once, for the
    float64 sums of the values and their squares (about the first value), the extremes and the first count of the
    quantiles' selection (:func:`_order_statistics`), then the selection's remaining passes; no more than
    ``copy_values`` values: their blocks' copies, partitioned in place (a constant; the selection's 65,536-bin
    counts cost more there). ``np.quantile`` of all of them needed a contiguous copy of G's values to partition, a
    quarter of the kept bytes at d = 2 (benchmarks/README.md, the d = 2 rows of front_ends). The quantiles are
    NumPy's to the bit; NaN where a value is NaN, as NumPy's."""
    count = values.size
    select = count > copy_values
    shift = np.float64(values[0, 0])
    sums = squares = 0.0
    low, high = np.inf, -np.inf
    first_counts = np.zeros((1, 1 << 16), np.int32 if count < 2**31 else np.int64) if select else None
    has_nan = False
    # Few values: the blocks' copies are kept, one after another, and partitioned in place for the quantiles (no
    # second copy of the strided column); their order is not the draws' (quantiles do not care).
    kept = None if select else np.empty(count, values.dtype)
    filled = 0
    batch_sums = starts = None
    if num_batches is not None:
        starts = np.append(streaming.batch_starts(values.shape[1], num_batches), values.shape[1])
        batch_sums = np.zeros((num_batches, values.shape[0]), np.float64)
    for where in _draw_blocks(values, block_values):
        # the one read of this block of the strided column: into the kept copy where there is one (no scratch)
        if kept is not None:
            block_draws = len(range(*where.indices(values.shape[1])))
            piece = kept[filled:filled + values.shape[0] * block_draws].reshape(values.shape[0], block_draws)
            piece[...] = values[:, where]
            filled += piece.size
        else:
            piece = np.array(values[:, where], order="C")
        if batch_sums is not None:  # the block's draws [first, last) to the batches they fall in
            first, last = where.indices(values.shape[1])[:2]
            for batch in range(num_batches):
                low_draw, high_draw = max(first, starts[batch]), min(last, starts[batch + 1])
                if low_draw < high_draw:
                    batch_sums[batch] += piece[:, low_draw - first:high_draw - first].sum(axis=1, dtype=np.float64)
        piece_low, piece_high = float(piece.min()), float(piece.max())  # NaN if the block holds one
        has_nan = has_nan or math.isnan(piece_low)
        low, high = min(low, piece_low), max(high, piece_high)
        flat = piece.reshape(-1)
        for start in range(0, flat.size, _WIDE_VALUES):  # float64 a slice at a time: 128 KB of scratch, not 1 MB
            wide = flat[start:start + _WIDE_VALUES].astype(np.float64)
            wide -= shift
            sums += float(np.sum(wide))
            squares += float(np.dot(wide, wide))
        if select and not has_nan:
            _count_digits(_sortable_keys(piece), 8 * values.dtype.itemsize - 16, None, first_counts)
    sd = float(np.sqrt(max(squares - sums * sums / count, 0.0) / (count - 1))) if count > 1 else 0.0
    if has_nan:
        quantiles, low, high = [float("nan")] * 3, float("nan"), float("nan")
    elif not select:
        quantiles = _linear_quantiles(count, [0.05, 0.5, 0.95], lambda ranks: _partitioned(kept, ranks))
    else:
        quantiles = _linear_quantiles(count, [0.05, 0.5, 0.95], lambda ranks: _order_statistics(
            values, ranks, block_values, first_counts=first_counts[0]))
    spread = dict(probe_sd=sd, probe_min=low, probe_q05=quantiles[0], probe_median=quantiles[1],
                  probe_q95=quantiles[2], probe_max=high)
    if batch_sums is None:
        return spread, None
    return spread, streaming.ObservableSums(batch_sums, np.diff(starts).astype(np.int32))


def _finished_row(cell, identifier, index, samples, probe, spread, probe_subset, seconds, compile_seconds,
                  group, report=None, positions_finite=False):
    """The row of a finished cell: its verdict's R̂ / ESS, G's mean and MCSE (folded in on the device), G's
    spread and quantiles over the kept draws (``spread``, :func:`_probe_pass`'s; None without kept draws), R̂ and
    ESS of G on the diagnostic subset (``probe_subset`` ``(C_sub, S)``, the draws the verdict's
    rank-normalized statistics use); the stored positions are then ``report``-ed (valid one-hot vectors,
    integers) as generate reports them. ``positions_finite``: already known (no pass over the draws to check)."""
    row = {"cell": identifier, "index": index, **cell}
    row.update({column: None for column in TABLE_COLUMNS})
    row.update(group=group, seconds=seconds, compile_seconds=compile_seconds)
    if samples.positions is not None and not positions_finite and not _all_finite(samples.positions):
        row.update(status="error", error="FloatingPointError: draws contain NaN or inf")
        return row, None
    verdict = samples.verdict
    row.update(
        status="ok", error=None,
        acceptance_rate=float(np.mean(samples.acceptance_rate)),
        step_size=float(np.median(samples.step_size)),
        max_rhat=verdict.max_rhat, min_ess_bulk=verdict.min_ess_bulk,
        probe_mean=float(np.asarray(probe.mean)), probe_mcse=_finite_or_none(np.asarray(probe.mcse)),
        probe_mcse_note=probe.note,  # None, or why the error cannot be trusted (too few batches or SMC groups)
        mcse_warning=verdict.mcse_warning,  # None, or why no error of the cell can be trusted (too few SMC groups)
        num_nonfinite=int(np.sum(samples.num_nonfinite)), num_divergent=int(np.sum(samples.num_divergent)),
        samples=os.path.join(_CELLS_DIR, identifier + ".npz"),
        log_evidence=samples.log_evidence, log_evidence_se=samples.log_evidence_se,
    )
    for name, estimate in (samples.observables or {}).items():  # each observable's value with its error beside it
        row.update(_observable_columns(name, estimate))
    if spread is not None:
        row.update(spread)
    if probe_subset is not None and np.shape(probe_subset)[1] >= 4:
        ranked = rank_diagnostics(np.asarray(probe_subset, np.float64)[None, :, :, None])
        row.update(probe_rhat=_finite_or_none(ranked.rhat[0, 0]), probe_ess_bulk=_finite_or_none(ranked.ess_bulk[0, 0]))
    if not verdict.converged:
        row.update(status="unconverged", problems=" | ".join(verdict.problems))
    if report is not None and samples.positions is not None:
        samples = dataclasses.replace(samples, positions=report(samples.positions))
    return row, samples


@jit_bounded(static_argnames=("probe_fn",))
def _probe_values(positions, probe_fn):
    """``probe_fn`` (G, or any function of one x) at every draw, ``positions`` ``(C, N, d)`` → ``(C, N, *out)``
    (values only: in batches, see :mod:`jaxprobe._pointwise`)."""
    values = map_points(probe_fn, positions.reshape((-1,) + positions.shape[2:]))
    return values.reshape(positions.shape[:2] + values.shape[1:])


#: Values of G's largest intermediate per block when a single-cell run's G is evaluated at every kept draw after the
#: run (16 MB in float32: an MLP with 64 hidden units takes 65,536 points a block).
PROBE_BLOCK_VALUES = 2**22

#: Blocks at least this many per run, down to a quarter of :data:`PROBE_BLOCK_VALUES`: a block's scratch (its
#: layers' outputs, about 5× the block's largest intermediate) stays a small share of a small run's draws (at 2,048
#: chains × 1,000 draws of d = 30, `jaxprobe run`'s peak rose by 391 MB over 250 MB of draws with full blocks, by
#: 352 MB with quarter ones), while large runs keep full blocks (inside a 16,384-chain `jaxprobe run` on a 2-core Xeon,
#: quarter blocks took 2.98 s against 1.93 s; alone on a 2-core EPYC they cost the same: 0.56 vs 0.49 s).
PROBE_MIN_BLOCKS = 128


def _probe_values_by_block(positions: np.ndarray, probe_fn: Callable) -> np.ndarray:
    """:func:`_probe_values` of host draws ``(C, N, d)`` → ``(C, N, *out)``, a block of draws at a time, sized by
    the function's largest intermediate per point (:func:`jaxprobe._pointwise.batch_plan`); every block of one
    shape, the last padded with its own last draw: one compiled program. All the draws at once held the kept draws
    3-4 times over (their copy on the device and G's hidden layers at every draw). Also ``jaxprobe run``'s model
    outputs at its draws. A small run's blocks are smaller (:data:`PROBE_MIN_BLOCKS`)."""
    num_chains, num_draws = positions.shape[:2]
    points = jax.ShapeDtypeStruct((num_chains * num_draws,) + positions.shape[2:], positions.dtype)
    quarter = batch_plan(probe_fn, points, max_values=PROBE_BLOCK_VALUES // 4, min_points=0)
    block = num_draws
    if quarter is not None:  # quarter blocks, larger up to full ones while there are PROBE_MIN_BLOCKS of them
        block_points = max(quarter[1], min(4 * quarter[1], points.shape[0] // PROBE_MIN_BLOCKS))
        block = int(min(num_draws, max(1, block_points // num_chains)))
    out = None
    for start in range(0, num_draws, block):
        stop = min(start + block, num_draws)
        piece = positions[:, start:stop]
        if stop - start < block:
            piece = np.concatenate([piece, np.repeat(piece[:, -1:], block - (stop - start), axis=1)], axis=1)
        values = np.asarray(_probe_values(jnp.asarray(piece), probe_fn))[:, :stop - start]
        if out is None:
            out = np.empty((num_chains, num_draws) + values.shape[2:], values.dtype)
        out[:, start:stop] = values
    return out


def _single_run(rng_key, build_probe, probe_params, batched_axes, cell, defaults, settings, prior, constraints, dim,
                sampler_options, dtype, devices, identifier, index, group, progress, checkpoint=None,
                keep_draws=True, observables=None, precision=None):
    """One cell as ONE run of its question through :func:`jaxprobe.generation.answer` (what generate does), or
    with ``precision`` as many pooled runs as ``generate(..., precision=...)`` makes.

    Batched probe parameters are handed to ``build_probe`` as JAX scalars of the dtype the batched program
    would give them, so both paths build the same probe.
    """
    value = lambda name: cell.get(name, defaults.get(name))  # noqa: E731
    values = {axis.name: jnp.asarray(cell[axis.name], np.int32 if axis.integer else dtype) for axis in batched_axes}
    try:
        built = build_probe(**probe_params, **values)
    except _TRACER_ERRORS as error:  # pragma: no cover - concrete values cannot raise these
        raise _SweepUsageError(str(error)) from None
    problem = _as_problem(built, prior, constraints, dim)
    question = Question(problem.probe, value("temperature"), problem.prior, problem.constraints,
                        _resolve_dim(problem))
    key = jax.random.fold_in(rng_key, value("seed"))
    if whole_run_sampler(settings["sampler"]) is not None:
        checkpoint = None  # a whole-run sampler's run is not checkpointed: an interrupted one starts over
    tick = time.perf_counter()
    options = dict(num_chains=settings["num_chains"], num_samples=settings["num_samples"],
                   num_warmup=settings["num_warmup"], sampler=settings["sampler"], thin=settings["thin"],
                   step_size=value("step_size") if settings["fixed_step_size"] else None,
                   step_size_mode=settings["step_size_mode"], target_acceptance_rate=settings["target_acceptance_rate"],
                   sampler_options=sampler_options, devices=devices, progress=progress, report="relaxed",
                   convergence="ignore", checkpoint=checkpoint, numerics=settings["numerics"], keep_draws=keep_draws,
                   observables=dict(observables or {}))
    # G once per kept draw: stored beside it as it is drawn (record), its mean and MCSE summed from those values.
    # Folded in as an observable too (without draws it must be; with precision, the rule that ends the runs may
    # read it), and evaluated again after the run, it cost 1.3-1.6x the limit (benchmarks/results/front_ends.md).
    recorded = keep_draws and whole_run_sampler(settings["sampler"]) is None
    if recorded:
        options["record"] = _ProbeBeside(question.probe)
    if not recorded or precision is not None:
        options["observables"]["probe"] = question.probe.fn
    with Compiles() as compiling:
        if precision is None:
            samples = answer(key, question, **options)
        else:  # pooled runs of num_chains chains (checkpoint is None: _sweep_precision refused one)
            samples = _answer_to_precision(key, question, precision, options)
    seconds = time.perf_counter() - tick
    observed = dict(samples.observables or {})
    probe_values = probe_subset = None
    if recorded:  # (C, N, d + 1): x, then G(x); both stay views of the buffer (G's values are read a block of
        # draws at a time below: a contiguous copy of them was a quarter of the kept bytes at d = 2)
        probe_values = samples.positions[..., -1]
        samples = dataclasses.replace(samples, positions=samples.positions[..., :-1])
    elif samples.positions is not None:  # a whole-run sampler stores x only
        probe_values = _probe_values_by_block(samples.positions, question.probe.fn)
    probe = observed.pop("probe", None)
    spread = None
    if probe_values is not None:  # G's spread (and its sums, when not folded in) in one read of its column
        num_batches = streaming.Monitor(samples.num_chains, 1, samples.num_draws).num_batches
        spread, sums = _probe_pass(probe_values, num_batches if probe is None else None)
        if probe is None:
            probe = estimates.streamed(sums, samples.num_groups, samples.group_log_evidence)
    particles = {name: value for name, value in (samples.particle_observables or {}).items() if name != "probe"}
    samples = dataclasses.replace(samples, observables=observed or None, particle_observables=particles or None)
    if probe_values is not None:
        chains, stride, num_subset = streaming.subset_plan(samples.num_chains, samples.num_draws)  # pooled runs too
        probe_subset = probe_values[chains][:, np.arange(1, num_subset + 1) * stride - 1]
    report = question.restriction.report if question.restriction.is_relaxed else None
    # G's stored values are NaN wherever a draw is not finite (_ProbeBeside): all finite, the draws are, with no pass
    # over them (it read every draw's row, 400 MB at 2,048 chains × 1,000 draws × d = 50); else the draws are checked.
    # G finite at every draw: its extremes are (NaN in a block makes them NaN; an inf is one)
    positions_finite = recorded and math.isfinite(spread["probe_min"]) and math.isfinite(spread["probe_max"])
    return _finished_row(cell, identifier, index, samples, probe, spread, probe_subset, seconds,
                         compiling.seconds, group, report, positions_finite)
