"""The exact answer of ``examples/model_contrast.toml`` by quadrature, and what tempered SMC's particles give.

The example (issues 26/28): circles data, an RBF SVM against a cubic SVM, the model_contrast probe with
cross-entropy loss, a standard-normal prior, τ = 0.01, no constraints, so the target is
``p(x) ∝ N(x; 0, I) · exp(−G(x)/τ)`` on the standardized plane (the space the sampler works in: no Jacobian).
The question is built exactly as ``jaxprobe run`` builds it (:class:`jaxprobe.sweeps.from_config.Prepared`,
:func:`~jaxprobe.sweeps.from_config.build_problem`, :func:`~jaxprobe.sweeps.from_config.make_observables`: the
same fitted models, probe, prior and ``disagree`` / ``predicted_class`` observables the answer fields use).

Quadrature: the midpoint rule on ``[−L, L]²`` with ``n × n`` points, evaluated in float32 as the sampler does
and summed in float64, refined (``n`` doubled) until the answer fields move by less than 1e-3. The grid's
coverage is checked twice: the mass on the grid's edge rows, and the largest log density in rings out to
radius ``WIDE`` on a coarser wide grid (the mass is a thin ring at r ≈ 1.33; everything beyond r = 1.5 is
below the peak by > 150 nats). Beyond the wide grid G does not fall below its ring value until r > 30, where
the prior alone is < e^-450.

SMC: ``seeds`` runs of :func:`jaxprobe.engine.smc.tempered_smc` (the ``sampler="smc"`` start, 8 groups) with
``n`` particles per group: the mean over seeds of the final particles' answers, its bias against the quadrature
and the bias in standard errors of that mean, for two estimators: the groups weighted by their evidence
estimates (what jaxprobe reports) and the plain particle mean, which carries the O(1/n) bias of n-particle
systems (:mod:`jaxprobe.engine.smc`, "The price of the groups").

Run: python -m jaxprobe.bench.contrast_exact [--quick] [--out DIR]
Default: grids n = 800, 1600, 3200 on [−1.6, 1.6]², 100 SMC seeds of 8 × 128 particles and 40 of 8 × 512, writes
contrast_exact.{json,md} into :func:`jaxprobe.bench.results_dir` (benchmarks/results); --quick: n up to 800,
5 seeds, into a scratch folder.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.bench import results_dir, write_results

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "model_contrast.toml")
#: Half-width of the wide coverage grid, and of the fine grids (the ring of mass lies at r ≈ 1.33).
WIDE, FINE = 12.0, 1.6
FIELDS = ("fraction_of_samples_where_models_disagree", "predicted_class_fractions.inner")


def question(path: str = EXAMPLE) -> dict[str, Any]:
    """The example's question as ``jaxprobe run`` builds it: ``logdensity`` (x ``(2,)`` → −G/τ + log prior),
    ``values`` (x → the two answer fields' indicators ``(2,)``), and the parts."""
    from jaxprobe.config import load_config
    from jaxprobe.sweeps.from_config import Prepared, build_problem, make_observables

    config = load_config(path)
    prepared = Prepared(config)
    problem = build_problem(prepared, config.sections, {})
    if problem.constraints is not None:
        raise ValueError(f"{path}: the quadrature here assumes no constraints (x is the sampler's space)")
    tau = float(config.get("sampler.temperature"))
    found = make_observables(prepared, config.sections, ["disagree", "predicted_class"], problem.constraints)
    inner = prepared.dataset.class_names.index("inner")

    def values(x):
        return jnp.stack([found["disagree"](x), found["predicted_class"](x)[inner]])

    return {"logdensity": lambda x: -problem.probe(x) / tau + problem.prior(x), "values": values,
            "probe": problem.probe, "prior": problem.prior, "tau": tau}


def grid_answer(q: dict[str, Any], half: float, num: int, chunk: int = 1 << 16) -> dict[str, Any]:
    """Midpoint rule on ``[−half, half]²`` with ``num²`` points: log Z (relative to the normalized prior, as
    SMC reports it), the answer fields, the mass on the edge rows and the largest log density by ring."""
    width = 2 * half / num
    axis = -half + width * (np.arange(num) + 0.5)
    xx, yy = np.meshgrid(axis, axis, indexing="ij")
    points = np.stack([xx.ravel(), yy.ravel()], -1).astype(np.float32)
    fn = jax.jit(jax.vmap(lambda x: (q["logdensity"](x), q["values"](x))))
    logp, vals = np.empty(len(points)), np.empty((len(points), 2))
    for start in range(0, len(points), chunk):
        a, b = fn(jnp.asarray(points[start:start + chunk]))
        logp[start:start + len(a)], vals[start:start + len(a)] = np.asarray(a), np.asarray(b)
    top = logp.max()
    weight = np.exp(logp - top)
    mass = weight / weight.sum()
    edge = mass.reshape(num, num)
    radius = np.hypot(xx.ravel(), yy.ravel())
    rings = {}
    for low, high in ((0, 1), (1, 1.5), (1.5, 2), (2, 3), (3, 6), (6, WIDE)):
        inside = (radius >= low) & (radius < high)
        if inside.any():
            rings[f"{low}-{high}"] = float(logp[inside].max() - top)
    return {"half_width": half, "num": num, "spacing": width,
            "log_evidence": float(top + np.log(weight.sum() * width**2)),
            FIELDS[0]: float(mass @ vals[:, 0]), FIELDS[1]: float(mass @ vals[:, 1]),
            "edge_mass": float(edge[0].sum() + edge[-1].sum() + edge[:, 0].sum() + edge[:, -1].sum()),
            "max_logdensity_below_peak_by_ring": rings}


def smc_bias(q: dict[str, Any], exact: dict[str, float], seeds: int, group_size: int, num_groups: int = 8,
             num_mcmc_steps: int = 5) -> dict[str, Any]:
    """``seeds`` tempered SMC runs (``num_groups`` groups of ``group_size`` particles) from N(0, I): per field
    and estimator the mean over seeds of the particles' answer, its standard error, and the bias. Estimators:
    ``"weighted"``, the groups' means weighted by their evidence estimates (what ``generate`` and ``jaxprobe run``
    report: :func:`jaxprobe.engine.estimates.particle_observed`), and ``"equal"``, the plain particle mean
    (before the weighting; its O(1/n) bias is what the weighting removes)."""
    from jaxprobe.engine import estimates
    from jaxprobe.engine.smc import tempered_smc

    values = jax.jit(jax.vmap(q["values"]))
    reference = q["prior"]

    def tilt(x):
        return -q["probe"](x) / q["tau"]

    rows = []
    for seed in range(seeds):
        key = jax.random.key(1000 + seed)
        start = jax.random.normal(jax.random.fold_in(key, 1), (num_groups * group_size, 2))
        result = tempered_smc(key, reference, tilt, start, num_groups=num_groups, num_mcmc_steps=num_mcmc_steps)
        per_particle = np.asarray(values(result.particles), np.float64)
        weighted = estimates.particle_observed(per_particle, num_groups, result.group_log_evidence).mean
        equal = per_particle.mean(axis=0)
        rows.append([weighted[0], weighted[1], equal[0], equal[1], float(result.log_evidence)])
    rows = np.asarray(rows)
    out = {"seeds": seeds, "group_size": group_size, "num_groups": num_groups, "num_mcmc_steps": num_mcmc_steps}
    columns = [(name, "weighted") for name in FIELDS] + [(name, "equal") for name in FIELDS] + [
        ("log_evidence", "groups' mean evidence")]
    for i, (name, estimator) in enumerate(columns):
        mean, se = float(rows[:, i].mean()), float(rows[:, i].std(ddof=1) / np.sqrt(seeds))
        out.setdefault(name, {})[estimator] = {"mean": mean, "se": se, "sd_per_run": float(rows[:, i].std(ddof=1)),
                                               "bias": mean - exact[name], "bias_in_se": (mean - exact[name]) / se}
    return out


def markdown(result: dict[str, Any]) -> str:
    """The tables of ``contrast_exact.md``."""
    lines = ["# Exact answer of examples/model_contrast.toml (quadrature) and SMC particles' bias", "",
             "| grid | spacing | log Z | disagree | inner | edge mass |", "|---|---|---|---|---|---|"]
    for g in result["grids"]:
        lines.append(f"| [−{g['half_width']}, {g['half_width']}]², n = {g['num']} | {g['spacing']:.4f} | "
                     f"{g['log_evidence']:.4f} | {g[FIELDS[0]]:.4f} | {g[FIELDS[1]]:.4f} | {g['edge_mass']:.1e} |")
    wide = result["wide"]
    lines += ["", f"Wide grid [−{WIDE}, {WIDE}]², n = {wide['num']}: largest log density below the peak by ring "
              f"(radius: nats) {wide['max_logdensity_below_peak_by_ring']}", "",
              f"Exact (finest grid): {result['exact']}", "",
              "| SMC groups × particles | MCMC steps | seeds | field | estimator | mean ± se | bias | bias / se |",
              "|---|---|---|---|---|---|---|---|"]
    for run in result["smc"]:
        for name in FIELDS + ("log_evidence",):
            for estimator, v in run[name].items():
                lines.append(f"| {run['num_groups']} × {run['group_size']} | {run['num_mcmc_steps']} | "
                             f"{run['seeds']} | {name} | {estimator} | {v['mean']:.4f} ± {v['se']:.4f} | "
                             f"{v['bias']:+.4f} | {v['bias_in_se']:+.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="coarse grids and 5 seeds, into a scratch folder")
    parser.add_argument("--out", help="results folder (default jaxprobe.bench.results_dir(); --quick: a scratch "
                                      "folder)")
    args = parser.parse_args(argv)
    out = args.out or (tempfile.mkdtemp(prefix="contrast_exact_") if args.quick else results_dir())
    started = time.perf_counter()
    q = question()
    sizes = (200, 400, 800) if args.quick else (800, 1600, 3200)
    grids = [grid_answer(q, FINE, num) for num in sizes]
    for g in grids:
        print({k: v for k, v in g.items() if k != "max_logdensity_below_peak_by_ring"}, flush=True)
    wide = grid_answer(q, WIDE, 240 if args.quick else 2400)
    exact = {name: grids[-1][name] for name in FIELDS + ("log_evidence",)}
    change = max(abs(grids[-1][name] - grids[-2][name]) for name in FIELDS)
    plans = [(5, 128)] if args.quick else [(100, 128), (40, 512)]
    smc = [smc_bias(q, exact, seeds, size) for seeds, size in plans]
    result = {"exact": exact, "last_refinement_change": change, "grids": grids, "wide": wide, "smc": smc,
              "seconds": time.perf_counter() - started}
    write_results(out, "contrast_exact", result, markdown(result))
    print(markdown(result))
    print(f"written to {out}")
    return result


if __name__ == "__main__":
    main()
