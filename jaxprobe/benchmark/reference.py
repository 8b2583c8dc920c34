"""Reference runs: the truth of the built-in targets that have no closed form, made by one command.

``python -m jaxprobe.benchmark.reference [--names logistic_regression,mlp_probe_50d] [--out DIR]`` makes, for each
target of :data:`jaxprobe.benchmark.targets.REFERENCE_TARGETS`, a long run by the method of :data:`SETTINGS` and
writes ``jaxprobe/benchmark/reference/NAME.npz`` (:func:`jaxprobe._io.write_checked_npz`: atomic, every array with
its CRC32): the arrays ``mean``, ``var``, ``mean_se``, ``var_se`` ``(dim,)`` (and the run's own diagnostics) and a
header saying how the run was made (``summary``: one line of it).

- ``"nuts"`` (``logistic_regression``): jaxprobe's NUTS (Stan's window adaptation of the step size and a diagonal
  mass matrix, per chain) on many chains started from standard normal draws. The run must mix: rank-normalized
  split R̂ ≤ :data:`MAX_RHAT`, bulk and tail ESS ≥ :data:`MIN_ESS` in every coordinate, no divergence; else
  nothing is written and a RuntimeError names the worst coordinate. ``mean_se`` is sd/√ESS of x
  (:func:`jaxprobe.engine.estimates.estimate`: Geyer's initial monotone sequence on the split chains), ``var_se``
  the same for (x − mean)², whose mean is the variance (the error of the mean inside it is of second order).
- ``"rejection"`` (``mlp_probe_50d``): exact, independent draws. The target is the N(0, I) prior times
  exp(−G/τ) ≤ 1, so a prior draw kept with probability exp(−G(x)/τ) is a draw of the target (about half are
  kept at d = 50); ``mean_se`` = sd/√n and ``var_se`` = sd((x − mean)²)/√n of the n kept draws, and
  ``log_z`` = log(n / proposals), the prior being normalized (its standard error ``log_z_se`` from the
  binomial count).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
import zlib
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe._io import write_checked_npz
from jaxprobe._version import __version__
# From-imports: the package's name ``targets`` is the registry function (the public contract), not this module.
from jaxprobe.benchmark.targets import (MLP_TEMPERATURE, REFERENCE_DIR, REFERENCE_TARGETS, logistic_data, mlp_loss,
                                       reference_problem)
from jaxprobe.engine import api, estimates

__all__ = ["SETTINGS", "MAX_RHAT", "MIN_ESS", "run_reference", "main"]

#: How each reference run is made (module notes): NUTS with its chains, kept draws per chain and warmup, or
#: rejection from the prior with its number of proposals; and the seed.
SETTINGS: dict[str, dict[str, Any]] = {
    "logistic_regression": {"method": "nuts", "num_chains": 64, "num_samples": 2500, "num_warmup": 1000, "seed": 0},
    "mlp_probe_50d": {"method": "rejection", "num_proposals": 4_000_000, "seed": 0},
}
REJECTION_BATCH = 1 << 16
MAX_RHAT, MIN_ESS = 1.01, 10_000.0


def _data_checksum(name: str) -> int | None:
    """CRC32 of the logistic regression's design and labels (the truth is for these data only), else None."""
    if name != "logistic_regression":
        return None
    design, labels = logistic_data()
    return zlib.crc32(np.ascontiguousarray(design).tobytes() + np.ascontiguousarray(labels).tobytes())


def _checked(name: str, samples: Any) -> dict[str, Any]:
    """R̂, bulk and tail ESS per coordinate, and divergences, or a RuntimeError when the run did not mix."""
    summary = samples.summary()
    rhat, bulk, tail = (np.asarray(a, np.float64) for a in (summary.rhat, summary.ess_bulk, summary.ess_tail))
    divergent = int(np.sum(samples.num_divergent))
    problems = []
    if not np.all(rhat <= MAX_RHAT):
        problems.append(f"R-hat {rhat.max():.4f} > {MAX_RHAT} at {summary.names[int(np.argmax(rhat))]}")
    if not np.all(np.minimum(bulk, tail) >= MIN_ESS):
        worst = int(np.argmin(np.minimum(bulk, tail)))
        problems.append(f"ESS (bulk {bulk[worst]:.0f}, tail {tail[worst]:.0f}) < {MIN_ESS:.0f} at "
                        f"{summary.names[worst]}")
    if divergent:
        problems.append(f"{divergent} divergent transitions")
    if problems:
        raise RuntimeError(f"the reference run of {name!r} did not mix: {'; '.join(problems)}. Nothing was written; "
                           "run longer (see SETTINGS in jaxprobe/benchmark/reference.py)")
    return {"rhat": rhat, "ess_bulk": bulk, "max_rhat": float(rhat.max()), "min_ess_bulk": float(bulk.min()),
            "min_ess_tail": float(tail.min()), "num_divergent": divergent}


def _nuts_reference(name: str, *, num_chains: int, num_samples: int, num_warmup: int,
                    seed: int) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``"nuts"``: estimates from a checked NUTS run (module notes)."""
    logdensity, dim, _ = reference_problem(name)
    key_init, key_run = jax.random.split(jax.random.key(seed))
    samples = api.sample(key_run, logdensity, jax.random.normal(key_init, (num_chains, dim)), sampler="nuts",
                         num_samples=num_samples, num_warmup=num_warmup, progress=False, convergence="ignore")
    checks = _checked(name, samples)
    draws = np.asarray(samples.positions, np.float64)  # (C, N, dim)
    first = estimates.estimate(draws)
    second = estimates.estimate((draws - first.mean) ** 2)
    arrays = {"mean": np.asarray(first.mean), "var": np.asarray(second.mean), "mean_se": np.asarray(first.mcse),
              "var_se": np.asarray(second.mcse), "rhat": checks.pop("rhat"), "ess_bulk": checks.pop("ess_bulk")}
    summary = (f"jaxprobe NUTS, {num_chains} chains x {num_samples} draws after {num_warmup} warmup, max R-hat "
               f"{checks['max_rhat']:.4f}, min bulk ESS {checks['min_ess_bulk']:.0f}")
    return arrays, dict(checks, num_chains=num_chains, num_samples=num_samples, num_warmup=num_warmup,
                        summary=summary)


def _rejection_reference(name: str, *, num_proposals: int, seed: int) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``"rejection"``: moments of exact draws, N(0, I) proposals kept with probability exp(−G/τ) (module notes)."""
    _, dim, _ = reference_problem(name)
    loss = mlp_loss(dim)

    @jax.jit
    def batch(key):  # (kept-or-not (B,), proposals (B, dim))
        key_x, key_u = jax.random.split(key)
        x = jax.random.normal(key_x, (REJECTION_BATCH, dim))
        keep = jax.random.uniform(key_u, (REJECTION_BATCH,)) < jnp.exp(-jax.vmap(loss)(x) / MLP_TEMPERATURE)
        return keep, x

    kept, proposed = [], 0
    for key in jax.random.split(jax.random.key(seed), -(-num_proposals // REJECTION_BATCH)):
        keep, x = (np.asarray(a) for a in batch(key))
        kept.append(x[keep].astype(np.float64))
        proposed += len(keep)
    draws = np.concatenate(kept)
    count = len(draws)
    mean = draws.mean(axis=0)
    centred2 = (draws - mean) ** 2
    share = count / proposed
    arrays = {"mean": mean, "var": centred2.mean(axis=0), "mean_se": draws.std(axis=0, ddof=1) / np.sqrt(count),
              "var_se": centred2.std(axis=0, ddof=1) / np.sqrt(count),
              "log_z": np.asarray(np.log(share)), "log_z_se": np.asarray(np.sqrt((1 - share) / count))}
    summary = f"exact draws by rejection from the N(0, I) prior: {count:,} kept of {proposed:,} proposals"
    return arrays, {"num_proposals": proposed, "num_kept": count, "summary": summary}


def run_reference(name: str, *, method: str, seed: int, **sizes: int) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """One reference run of built-in target ``name`` by ``method`` (``"nuts"`` or ``"rejection"``, with the sizes
    of :data:`SETTINGS`): ``(arrays, header)`` as written to its file (module notes). Raises RuntimeError when a
    NUTS run fails the mixing checks.

    Examples
    --------
    >>> arrays, header = run_reference("mlp_probe_50d", method="rejection", seed=0, num_proposals=65536)  # tiny
    >>> arrays["mean"].shape, header["num_proposals"], 0 < header["num_kept"] < 65536
    ((50,), 65536, True)
    """
    start = time.perf_counter()
    runners = {"nuts": _nuts_reference, "rejection": _rejection_reference}
    if method not in runners:
        raise ValueError(f"method must be one of {sorted(runners)}, got {method!r}")
    arrays, header = runners[method](name, seed=seed, **sizes)
    _, dim, _ = reference_problem(name)
    header.update(name=name, dim=dim, method=method, seed=seed, seconds=round(time.perf_counter() - start, 1),
                  data_crc32=_data_checksum(name), jaxprobe=__version__, jax=jax.__version__,
                  made=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  command=f"python -m jaxprobe.benchmark.reference --names {name}")
    return arrays, header


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (module notes): make the chosen reference runs and write their files; returns 0.

    Examples
    --------
    >>> main(["--names", "nowhere"])          # an unknown name: the usage error (on stderr) lists the known ones
    Traceback (most recent call last):
    ...
    SystemExit: 2
    """
    parser = argparse.ArgumentParser(prog="python -m jaxprobe.benchmark.reference", description=__doc__.split("\n")[0])
    parser.add_argument("--names", default=",".join(REFERENCE_TARGETS),
                        help=f"comma-separated targets (default: all of {', '.join(REFERENCE_TARGETS)})")
    parser.add_argument("--out", default=REFERENCE_DIR, help="folder of the NAME.npz files (default: the "
                        "package's jaxprobe/benchmark/reference)")
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.names.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in SETTINGS]
    if unknown or not chosen:
        parser.error(f"--names must list some of {', '.join(SETTINGS)}; unknown: {unknown or 'none given'}")
    for name in chosen:
        print(f"[{time.strftime('%H:%M:%S')}] {name}: {SETTINGS[name]}", file=sys.stderr, flush=True)
        arrays, header = run_reference(name, **SETTINGS[name])
        path = os.path.join(args.out, f"{name}.npz")
        write_checked_npz(path, arrays, header)
        print(f"[{time.strftime('%H:%M:%S')}] {name}: {header['summary']} ({header['seconds']} s) -> {path}",
              file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
