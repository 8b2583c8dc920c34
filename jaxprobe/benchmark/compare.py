"""``compare``: every sampler on every target at every chain count, all seeds of one in one compiled program.

One run (sampler × target × chain count) is one ``jax.jit`` of the sampler's :class:`~jaxprobe.benchmark.samplers.
Program` vmapped over the seeds: seed ``s`` draws its starting points and its keys from ``fold_in(key, s)``, the
same for every sampler (paired comparisons: same keys, same starts). It is compiled first (``compile_seconds``),
then timed once (``wall_seconds``); the limit (:func:`limit_chain_steps_per_second`) is timed for the same
target and the same number of chains in one batch (seeds × chains). Statistics: :mod:`jaxprobe.benchmark.measure`.

Many devices: the starting points' chain axis is split over every device JAX sees, as the engine splits it
(:func:`jaxprobe.engine.api.chain_sharding`: the largest device count that divides the chain count), and the
compiled program runs partitioned (the row's ``num_devices``). On CPU with the reproducible numerics the rows equal
the one-device rows (tested on 4 forced host devices); with the fast numerics (GPU) they need not be
bit-identical, only draws of the same law.
"""

from __future__ import annotations

import math
import time
import traceback
from types import SimpleNamespace
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from jaxprobe._inputs import check_int, check_number
from jaxprobe.benchmark import measure
from jaxprobe.benchmark.report import Report, environment
from jaxprobe.benchmark.samplers import MakeError, Program, resolve
from jaxprobe.benchmark.targets import get_target
from jaxprobe.benchmark.targets import targets as builtin_targets
from jaxprobe.engine import kernels
from jaxprobe.engine.api import chain_sharding
from jaxprobe.engine.core import canonicalize_key
from jaxprobe.engine.verdict import assess, default_thresholds

__all__ = ["compare", "judge_row", "limit_chain_steps_per_second", "limit_step", "run_program"]

#: Step size of the limit's unadjusted Langevin update (its value does not change the cost of a step).
LIMIT_STEP_SIZE = 1e-3
#: Each timed call of the limit lasts about this long.
LIMIT_SECONDS = 0.2


# ------------------------------------------------------------------ inputs


def _check_target(target: Any, where: str) -> Any:
    """A Target (or an object with its fields) whose truth has the shapes the contract says."""
    for field in ("name", "logdensity_fn", "dim"):
        if not hasattr(target, field):
            raise TypeError(f"{where} must be a built-in target name or a jaxprobe.benchmark.Target, got "
                            f"{type(target).__name__}")
    dim = check_int(target.dim, f"{where}.dim", minimum=1)
    if not callable(target.logdensity_fn):
        raise TypeError(f"{where}.logdensity_fn must be callable (one position (dim,) -> scalar)")
    for field in ("mean", "var", "mean_se", "var_se"):
        value = getattr(target, field, None)
        if value is not None and np.shape(value) != (dim,):
            raise ValueError(f"{where}.{field} must have shape ({dim},) (dim,), got {np.shape(value)}")
    return target


def _targets(targets: Any) -> list[Any]:
    if isinstance(targets, str) or not isinstance(targets, Sequence):
        targets = [targets]
    if len(targets) == 0:
        raise ValueError("targets must name at least one target")
    resolved = []
    for index, target in enumerate(targets):
        if isinstance(target, str) and target == "all":
            resolved.extend(builtin_targets().values())
        elif isinstance(target, str):
            resolved.append(get_target(target))
        else:
            resolved.append(_check_target(target, f"targets[{index}]"))
    return resolved


def _samplers(samplers: Any) -> dict[str, Any]:
    if not isinstance(samplers, Mapping) or not samplers:
        raise TypeError(f"samplers must be a non-empty dict of row name -> sampler, got {type(samplers).__name__}")
    for name in samplers:
        if not isinstance(name, str):
            raise TypeError(f"samplers' keys must be row names (str), got {name!r}")
    return {name: resolve(name, spec) for name, spec in samplers.items()}


def _chain_counts(num_chains: Any) -> list[int]:
    counts = [num_chains] if not isinstance(num_chains, (list, tuple)) else list(num_chains)
    if not counts:
        raise ValueError("num_chains must be an int >= 1 or a non-empty list of them")
    return [check_int(count, "num_chains", minimum=1) for count in counts]


# ------------------------------------------------------------------ one run


def _initial_positions(target: Any, key: jax.Array, seeds: int, num_chains: int) -> jax.Array:
    """``(S, C, D)``: seed s starts from ``init(split(fold_in(key, s))[0], C)`` (standard normal draws if None)."""
    starts = []
    for seed in range(seeds):
        init_key = jax.random.split(jax.random.fold_in(key, seed))[0]
        if hasattr(target, "initial_positions"):
            x0 = target.initial_positions(init_key, num_chains)
        elif target.init is None:
            x0 = jax.random.normal(init_key, (num_chains, target.dim))
        else:
            x0 = jnp.asarray(target.init(init_key, num_chains))
        if x0.shape != (num_chains, target.dim):
            raise ValueError(f"target {target.name!r}: init(key, {num_chains}) returned shape {x0.shape}, expected "
                             f"({num_chains}, {target.dim})")
        starts.append(x0)
    return jnp.stack(starts)


def _chain_placement(num_chains: int) -> NamedSharding:
    """How ``(S, C, D)`` starting points are placed: the chain axis split over every device as the engine
    splits it (:func:`jaxprobe.engine.api.chain_sharding`: the largest device count that divides C), seeds and
    coordinates not split."""
    sharding = chain_sharding(num_chains)
    return NamedSharding(sharding.mesh, PartitionSpec(None, *sharding.spec))


def _seed_program(program: Program, num_samples: int, keep: int) -> Callable:
    """One seed's run: warmup, then ``num_samples`` steps, keeping the draws of the first ``keep`` chains."""
    def run(key, x0):
        warm_key, run_key = jax.random.split(jax.random.split(key)[1])
        state, warm_gradients = program.warmup(warm_key, x0)
        adapted = jnp.array(True) if program.adapted is None else program.adapted(state)
        num_chains = x0.shape[0]
        zeros = jnp.zeros((num_chains,), jnp.float32)
        sums0 = (zeros, jnp.zeros((num_chains,), jnp.int32), jnp.zeros((num_chains,), jnp.int32),
                 jnp.ones((num_chains,), bool))

        def body(carry, t):
            state, (acceptance, divergent, gradients, finite) = carry
            state, out = program.step(jax.random.fold_in(run_key, t), state)
            sums = (acceptance + out.acceptance.astype(jnp.float32), divergent + out.divergent.astype(jnp.int32),
                    gradients + out.gradients.astype(jnp.int32),
                    finite & jnp.all(jnp.isfinite(out.position), axis=-1))
            return (state, sums), (out.position[:keep], out.logdensity[:keep])

        (_, sums), (draws, logdensity) = jax.lax.scan(body, (state, sums0), jnp.arange(num_samples))
        acceptance, divergent, gradients, finite = sums
        return {"draws": draws, "logdensity": logdensity, "acceptance": acceptance / num_samples,
                "divergent": divergent, "gradients": gradients, "warmup_gradients": warm_gradients,
                "finite": finite, "adapted": adapted}

    return run


def run_program(program: Program, keys: jax.Array, x0: jax.Array, num_samples: int, keep: int
                ) -> tuple[dict[str, np.ndarray], float, float]:
    """Compile and run ``program`` on all seeds at once (vmapped); ``keys`` ``(S,)``, ``x0`` ``(S, C, D)``.
    Returns ``(outputs as NumPy, compile seconds, wall seconds)``; draws ``(S, N, keep, D)``.

    Examples
    --------
    >>> from jaxprobe.benchmark.samplers import resolve
    >>> program = resolve("mala", "mala").program(lambda x: -0.5 * jnp.sum(x ** 2), 2, 10)   # 10 warmup steps
    >>> keys = jax.random.split(jax.random.key(0), 2)                                     # 2 seeds
    >>> out, compile_seconds, wall_seconds = run_program(program, keys, jnp.zeros((2, 4, 2)), 20, keep=4)
    >>> out["draws"].shape, out["gradients"].tolist()         # one gradient per MALA step: 20 per chain
    ((2, 20, 4, 2), [[20, 20, 20, 20], [20, 20, 20, 20]])
    """
    function = jax.jit(jax.vmap(_seed_program(program, num_samples, keep)))
    start = time.perf_counter()
    compiled = function.lower(keys, x0).compile()
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(keys, x0))
    wall_seconds = time.perf_counter() - start
    return jax.tree.map(np.asarray, out), compile_seconds, wall_seconds


def limit_step(logdensity_fn: Callable, num_chains: int, dim: int, step_size: float = LIMIT_STEP_SIZE,
               generator: str = "jax") -> Callable[[jax.Array, jax.Array, jax.Array], jax.Array]:
    """One step of the limit, the one definition every harness times (``compare``'s rows and the
    ``jaxprobe bench`` throughput scripts): ``step(key, x (C, D), t) -> x``, one vmapped ``value_and_grad`` and
    an unadjusted Langevin update ``x + ε ∇log p(x) + √(2ε) ξ`` per chain, ξ drawn from ``fold_in(key, t)``.

    ``generator="jax"``: ξ from ``jax.random.normal``, one flat batched call (about 1.5× cheaper than a shaped one
    on CPU); ``"jaxprobe"``: from jaxprobe's generator (:func:`jaxprobe.engine.kernels.normal_and_uniform`, the
    one jaxprobe's MALA draws with; a diagnostic of how much a cheaper generator buys). The step size does not
    change the cost of a step. Wrap it in a jitted ``lax.scan`` to time it.

    Examples
    --------
    >>> step = limit_step(lambda x: -0.5 * jnp.sum(x ** 2), num_chains=4, dim=2, step_size=0.1)
    >>> x = step(jax.random.key(0), jnp.ones((4, 2)), 0)                   # one step of 4 chains
    >>> x.shape, bool(jnp.all(jnp.isfinite(x)))
    ((4, 2), True)
    """
    num_chains, dim = check_int(num_chains, "num_chains", minimum=1), check_int(dim, "dim", minimum=1)
    step_size = check_number(step_size, "step_size", minimum=0.0)
    if generator not in ("jax", "jaxprobe"):
        raise ValueError(f"generator must be 'jax' or 'jaxprobe', got {generator!r}")
    value_and_grad = jax.vmap(jax.value_and_grad(logdensity_fn))
    noise_scale = math.sqrt(2.0 * step_size)

    def step(key: jax.Array, x: jax.Array, t: jax.Array) -> jax.Array:
        _, grad = value_and_grad(x)
        if generator == "jaxprobe":
            noise, _ = kernels.normal_and_uniform(jax.random.fold_in(key, t), num_chains, dim, x.dtype)
        else:
            noise = jax.random.normal(jax.random.fold_in(key, t), (num_chains * dim,)).reshape(num_chains, dim)
        return x + step_size * grad + noise_scale * noise

    return step


def limit_chain_steps_per_second(logdensity_fn: Callable, x0: jax.Array) -> float:
    """The limit for these chains ``x0`` ``(C, D)``: a jitted scan of :func:`limit_step` (one vmapped
    ``value_and_grad`` and an unadjusted Langevin update per chain per step); chain-steps per second, best of
    three calls of about ``LIMIT_SECONDS`` each.

    Examples
    --------
    >>> rate = limit_chain_steps_per_second(lambda x: -0.5 * jnp.sum(x ** 2), jnp.zeros((8, 2)))
    >>> bool(rate > 1e3)                                         # chain-steps per second of 8 chains, 2-D
    True
    """
    num_chains, dim = x0.shape
    step = limit_step(logdensity_fn, num_chains, dim)

    @jax.jit
    def run(key, x, steps_array):
        return jax.lax.scan(lambda x, t: (step(key, x, t), None), x, steps_array)[0]

    def timed(steps: int) -> float:
        steps_array = jnp.arange(steps)
        jax.block_until_ready(run(jax.random.key(2), x0, steps_array))  # compile for this length
        best = math.inf
        for _ in range(3):
            start = time.perf_counter()
            jax.block_until_ready(run(jax.random.key(2), x0, steps_array))
            best = min(best, time.perf_counter() - start)
        return best

    probe = 10
    seconds = timed(probe)
    steps = int(min(10_000, max(probe, math.ceil(LIMIT_SECONDS / max(seconds / probe, 1e-9)))))
    if steps > 2 * probe:
        seconds, probe = timed(steps), steps
    return num_chains * probe / seconds


# ------------------------------------------------------------------ rows


def _spread(values: np.ndarray) -> dict[str, Any]:
    """Median and [min, max] over seeds (NaN-free values; None if there are none)."""
    values = np.asarray(values, np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return {"median": None, "range": None}
    return {"median": float(np.median(values)), "range": [float(values.min()), float(values.max())]}


def _verdicts(out: dict[str, np.ndarray], seeds: np.ndarray) -> str:
    """jaxprobe's verdict of each seed's kept chains: ``"k/S converged"`` and the first problem of one that is not."""
    converged, problem = 0, None
    for seed in seeds:
        kept = out["draws"].shape[2]
        verdict = assess(SimpleNamespace(
            positions=np.swapaxes(out["draws"][seed], 0, 1), logdensity=np.swapaxes(out["logdensity"][seed], 0, 1),
            acceptance_rate=out["acceptance"][seed, :kept], num_divergent=out["divergent"][seed, :kept],
            num_nonfinite=np.zeros(kept, np.int64)))
        converged += bool(verdict.converged)
        if not verdict.converged and problem is None:
            problem = verdict.problems[0]
    return f"{converged}/{len(seeds)} converged" + (f"; e.g. {problem}" if problem else "")


def _peak_memory() -> int | None:
    """Peak bytes in use on the first device, where the platform reports it (GPUs), else None."""
    try:
        stats = jax.devices()[0].memory_stats() or {}
    except Exception:  # noqa: BLE001 - platforms without memory statistics
        return None
    peak = stats.get("peak_bytes_in_use")
    return None if peak is None else int(peak)


def _measured_row(row: dict[str, Any], target: Any, out: dict[str, np.ndarray], timing: dict[str, float],
                  min_ess: float, family: str) -> dict[str, Any]:
    """``row`` (names and settings) with every measurement of one run of S seeds (``timing``: compile, wall,
    limit)."""
    seeds, num_samples, _, _ = out["draws"].shape
    num_chains, num_warmup = row["num_chains"], row["num_warmup"]
    wall = timing["wall"]
    adapted = np.asarray(out["adapted"], bool)
    finite = out["finite"].all(axis=1) & np.isfinite(out["draws"]).all(axis=(1, 2, 3))
    good = np.nonzero(finite & adapted)[0]
    if not adapted.all():
        row["failure"] = f"adaptation returned non-finite parameters in {seeds - int(adapted.sum())} of {seeds} seeds"
    elif good.size < seeds:
        row["failure"] = f"non-finite positions in {seeds - good.size} of {seeds} seeds"
    sampling_gradients = out["gradients"].sum(axis=1).astype(np.float64)
    total_gradients = float(sampling_gradients.sum() + out["warmup_gradients"].sum())
    chain_steps = seeds * num_chains * (num_warmup + num_samples)
    row.update(compile_seconds=timing["compile"], wall_seconds=wall, chain_steps_per_second=chain_steps / wall,
               gradients_per_second=total_gradients / wall,
               kept_draws_per_second=seeds * num_chains * num_samples / wall,
               limit_chain_steps_per_second=timing["limit"], ratio_to_limit=chain_steps / wall / timing["limit"],
               gradient_ratio_to_limit=total_gradients / wall / timing["limit"],  # the limit: 1 gradient a step
               gradients_per_step=float(sampling_gradients.sum() / (seeds * num_chains * num_samples)),
               acceptance=float(out["acceptance"].mean()), divergences=float(out["divergent"].sum(axis=1).mean()),
               min_ess_threshold=min_ess, peak_memory_bytes=_peak_memory())
    if good.size == 0:
        row.update(poor_runs=seeds, poor_rate=1.0, poor_rate_ci=list(measure.wilson_interval(seeds, seeds)))
        return row
    stats = measure.seed_statistics(out["draws"][good], target, num_chains, min_ess)
    ess_per_gradient = stats["min_ess_bulk"] / np.maximum(sampling_gradients[good], 1.0)
    ess_per_second = stats["min_ess_bulk"] / (wall / seeds)
    for name, values in (("ess_bulk", stats["min_ess_bulk"]), ("ess_tail", stats["min_ess_tail"]),
                         ("ess_per_gradient", ess_per_gradient), ("ess_per_second", ess_per_second)):
        spread = _spread(values)
        row[name], row[f"{name}_range"] = spread["median"], spread["range"]
    row.update(judge_row(stats, seeds))
    if family == "jaxprobe":
        row["verdict"] = _verdicts(out, good)
    row["per_seed"] = {
        "seed": good.tolist(), "min_ess_bulk": stats["min_ess_bulk"].tolist(),
        "min_ess_tail": stats["min_ess_tail"].tolist(), "ess_per_gradient": ess_per_gradient.tolist(),
        "max_abs_z": [None if np.isnan(v) else float(v) for v in stats["max_abs_z"]],
        "biased": stats["biased"].tolist(), "judged": stats["judged"].tolist(), "poor": stats["poor"].tolist(),
        "gradients": sampling_gradients[good].tolist(), "acceptance": out["acceptance"][good].mean(axis=1).tolist(),
        "divergences": out["divergent"][good].sum(axis=1).tolist(), "z_mean": _json_array(stats["z_mean"]),
        "z_var": _json_array(stats["z_var"])}
    return row


def judge_row(stats: dict[str, np.ndarray], seeds: int) -> dict[str, Any]:
    """A row's bias and poor-run fields from its seeds' judgement (:func:`jaxprobe.benchmark.measure.judge_seeds`:
    ``judged``, ``biased``, ``poor`` ``(S',)`` and ``z_mean``, ``z_var`` ``(S', D)`` of the S' of ``seeds`` seeds
    that finished; the others count as poor): the z's of the judged seeds pooled (Σz/√S) against the threshold.

    Examples
    --------
    >>> stats = {"judged": np.array([True, True]), "biased": np.array([False, False]),
    ...          "poor": np.array([False, False]), "z_mean": np.array([[0.5, -0.2], [0.1, 0.3]]),
    ...          "z_var": np.array([[1.0, 0.0], [-1.0, 0.2]])}
    >>> row = judge_row(stats, seeds=3)                   # the third seed did not finish: it counts as poor
    >>> round(row["max_abs_z"], 3), row["biased"], row["poor_runs"]
    (0.424, False, 1)
    """
    z = np.concatenate([np.asarray(stats["z_mean"], np.float64), np.asarray(stats["z_var"], np.float64)],
                       axis=1)[np.asarray(stats["judged"], bool)]
    checked = ~np.isnan(z[0]) if len(z) else np.zeros(0, bool)
    pooled = measure.pooled_z(z[:, checked]) if checked.any() else np.zeros(0)
    threshold = measure.z_threshold(int(checked.sum()))
    poor = int(np.sum(stats["poor"])) + (seeds - len(stats["poor"]))
    return {"max_abs_z": float(np.max(np.abs(pooled))) if pooled.size else None, "z_threshold": threshold,
            "biased": bool(np.max(np.abs(pooled)) > threshold) if pooled.size else None,
            "judged_seeds": int(np.sum(stats["judged"])), "biased_runs": int(np.sum(stats["biased"])),
            "poor_runs": poor, "poor_rate": poor / seeds, "poor_rate_ci": list(measure.wilson_interval(poor, seeds))}


def _json_array(values: np.ndarray) -> list:
    return [[None if np.isnan(v) else float(v) for v in row] for row in values]


def _failure(error: BaseException) -> str:
    """A run's failure by name: out of memory, or the exception's type and first line."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if "RESOURCE_EXHAUSTED" in str(error) or isinstance(error, MemoryError):
        return f"out of memory ({type(error).__name__}: {text[:200]})"
    return f"{type(error).__name__}: {text[:300]}"


def _one_run(name: str, sampler: Any, target: Any, num_chains: int, settings: dict[str, Any],
             limits: dict[tuple[int, int], float]) -> dict[str, Any]:
    """The row of ``sampler`` on ``target`` at ``num_chains`` over all seeds; a failure is recorded, not raised
    (except bad input: :class:`~jaxprobe.benchmark.samplers.MakeError`, and KeyboardInterrupt)."""
    row = {"sampler": name, "family": getattr(sampler, "family", "none"), "target": target.name,
           "num_chains": num_chains, "num_seeds": settings["seeds"], "num_warmup": settings["num_warmup"],
           "num_samples": settings["num_samples"], "failure": None}
    if isinstance(sampler, str):  # "not installed"
        row["failure"] = sampler
        return row
    reason = sampler.applies(target) if hasattr(sampler, "applies") else None
    if reason is not None:
        row["failure"] = reason
        return row
    min_ess = settings["min_ess"] if settings["min_ess"] is not None else default_thresholds(num_chains)[1]
    try:
        seeds, key = settings["seeds"], settings["key"]
        placement = _chain_placement(num_chains)
        x0 = jax.device_put(_initial_positions(target, key, seeds, num_chains), placement)
        row["num_devices"] = int(placement.mesh.size)
        keys = jax.vmap(lambda s: jax.random.fold_in(key, s))(jnp.arange(seeds))
        program = sampler.program(target.logdensity_fn, target.dim, settings["num_warmup"])
        keep = min(num_chains, settings["keep_chains"])
        out, compile_seconds, wall_seconds = run_program(program, keys, x0, settings["num_samples"], keep)
        limit_key = (id(target), seeds * num_chains)
        if limit_key not in limits:
            flat = jax.device_put(x0.reshape(-1, target.dim), chain_sharding(seeds * num_chains))
            limits[limit_key] = limit_chain_steps_per_second(target.logdensity_fn, flat)
        timing = {"compile": compile_seconds, "wall": wall_seconds, "limit": limits[limit_key]}
        return _measured_row(row, target, out, timing, min_ess, row["family"])
    except MakeError:
        raise
    except Exception as error:  # noqa: BLE001 - a failing sampler is a row, the rest goes on
        row["failure"] = _failure(error)
        row["traceback"] = traceback.format_exc(limit=-3)
        return row


def compare(samplers: Mapping[str, Any], targets: Any, *, num_chains: int | Sequence[int] = 4,
            num_warmup: int = 500, num_samples: int = 500, seeds: int = 5, key: Any = 0, progress: bool = True,
            min_ess: float | None = None, keep_chains: int = measure.KEEP_CHAINS) -> Report:
    """Run every sampler on every target at every chain count for every seed; a :class:`Report` of the rows.

    Parameters
    ----------
    samplers
        ``{row name: sampler}``; a sampler is a jaxprobe sampler name (``"mala"``, ``"hmc"``, ``"nuts"``,
        ``"chees"``, ``"smc"``, ...), ``(name, options dict)``, a jaxprobe ``Kernel``,
        :func:`~jaxprobe.benchmark.from_blackjax`, or a built-in peer ``"blackjax-nuts"`` / ``"numpyro-nuts"``
        (a row saying "not installed" without NumPyro).
    targets
        Built-in target names (``"all"`` for every one, :func:`~jaxprobe.benchmark.targets`) or ``Target``
        objects, or one of them.
    num_chains
        An int or a list: chains per seed (C).
    num_warmup, num_samples
        Warmup steps (each sampler's own adaptation, or burn-in) and kept draws per chain (every step kept).
    seeds
        S independent runs per row, all in one compiled program (vmapped); seed s uses ``fold_in(key, s)``
        for its starts and its keys, the same for every sampler (paired).
    key
        An int seed or a ``jax.random.key``.
    progress
        A tqdm bar over the runs.
    min_ess
        Minimum bulk ESS under which a seed is a poor run (default: the verdict's, 100 per chain up to 400).
    keep_chains
        Chains per seed whose draws are kept for the statistics (the ESS of all C chains is scaled from them).

    Returns
    -------
    Report
        ``rows``: one dict per sampler × target × chain count (keys in :mod:`jaxprobe.benchmark.report`). A run
        that raises, returns non-finite positions or runs out of memory has ``failure`` set; the others go on.
        Ctrl-C returns the rows measured so far (``report.interrupted`` True).

    Raises
    ------
    TypeError, ValueError
        Before anything runs: an unknown sampler or target name (the message lists the accepted ones), a
        target's truth of the wrong shape, a ``make`` that does not return a BlackJAX ``SamplingAlgorithm``.

    Examples
    --------
    >>> from jaxprobe.benchmark import Target
    >>> target = Target("normal", lambda x: -0.5 * jnp.sum(x ** 2), 2, mean=np.zeros(2), var=np.ones(2))
    >>> report = compare({"mala": "mala"}, [target], num_chains=4, num_warmup=50, num_samples=100, seeds=2,
    ...                  key=0, progress=False)
    >>> row = report.row("mala", "normal")
    >>> row["failure"], row["biased"], row["num_devices"], bool(row["ess_bulk"] > 50)
    (None, False, 1, True)
    """
    resolved = _samplers(samplers)
    target_list = _targets(targets)
    counts = _chain_counts(num_chains)
    settings = {"num_warmup": check_int(num_warmup, "num_warmup", minimum=0),
                "num_samples": check_int(num_samples, "num_samples", minimum=4),
                "seeds": check_int(seeds, "seeds", minimum=1),
                "keep_chains": check_int(keep_chains, "keep_chains", minimum=1),
                "min_ess": None if min_ess is None else check_number(min_ess, "min_ess", minimum=0.0)}
    for sampler in resolved.values():
        for target in target_list:
            if hasattr(sampler, "check"):
                sampler.check(target.logdensity_fn, counts[0])
    settings["key"] = canonicalize_key(key)
    runs = [(name, sampler, target, count) for target in target_list for count in counts
            for name, sampler in resolved.items()]
    report = Report([], environment(settings_of(settings, key)))
    limits: dict[tuple[int, int], float] = {}
    bar = _bar(progress, len(runs))
    try:
        for name, sampler, target, count in runs:
            if bar is not None:
                bar.set_postfix_str(f"{name} on {target.name}, {count} chains", refresh=True)
            report.rows.append(_one_run(name, sampler, target, count, settings, limits))
            if bar is not None:
                bar.update(1)
    except KeyboardInterrupt:
        report.interrupted = True
    finally:
        if bar is not None:
            bar.close()
    return report


def settings_of(settings: dict[str, Any], key: Any) -> dict[str, Any]:
    """The run settings as JSON (the key as given when it is an int)."""
    out = {name: value for name, value in settings.items() if name != "key"}
    out["key"] = int(key) if isinstance(key, (int, np.integer)) else str(jax.random.key_data(settings["key"]))
    return out


def _bar(enabled: bool, total: int) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="benchmark", unit="run", dynamic_ncols=True)
