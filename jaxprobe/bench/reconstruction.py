"""Posterior samples per second of data reconstruction: black-box callback path vs pure-JAX path.

The victim is a logistic regression (and an MLP) trained on breast_cancer (30 standardized features,
2 classes) with a Gaussian prior fitted to the training features. Both paths run the same random-walk
Metropolis chains on the same all-classes target (:func:`jaxprobe.reconstruct.reconstruction_logdensity`):

* callback: scikit-learn's own ``predict_proba`` on NumPy, through ``jax.pure_callback``
  (``vmap_method="expand_dims"``): one host call per step for all chains × classes;
* pure JAX: the same fitted model imported with ``jaxprobe.models.from_sklearn``, traced into the scan.

A "sample" is one transition of one chain (one point per class). Times are measured side by side in one
process after a compile-and-warm call with the same shapes (compile excluded); the best of ``--repeats``.
Run: ``python -m jaxprobe.bench.reconstruction`` (writes benchmarks/results/reconstruction.{json,md}).

``python -m jaxprobe.bench.reconstruction sweep`` runs the paper's real-data experiment in full
(breast_cancer, wine, Default, digits × prior misspecification × model kind and training fraction;
:func:`jaxprobe.reconstruct.sweep.run_sweep`) and writes benchmarks/results/reconstruction.sweep.{json,md}
and one correlation figure per data set, reconstruction.sweep.<dataset>.png.

``python -m jaxprobe.bench.reconstruction tree-gibbs [--quick] [--skip-sweep] ...`` runs the tree-ensemble
comparison of issue 17 (``jaxprobe/bench/tree_gibbs.py``'s ``main`` with the remaining arguments): exact coordinate-wise
Gibbs (``sampler="tree_gibbs"``) vs RWMH on breast_cancer and digits, ESS per second and per ensemble evaluation in
one process, and the digits sweep with tree models; writes benchmarks/results/tree_gibbs.{json,md}.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

import numpy as np

from jaxprobe.bench import results_dir
import jaxprobe
from jaxprobe import reconstruct as R
from jaxprobe._io import atomic_write
from jaxprobe.reconstruct.sweep import make_model, prepare_data



def _time_run(logdensity, start, steps, repeats):
    def once():
        tic = time.perf_counter()
        samples = jaxprobe.sample(0, logdensity, start, sampler="rwmh", num_samples=steps // 10, thin=10,
                                  num_warmup=0, step_size=0.1, chunk_size=steps // 10, progress=False)
        np.asarray(samples.positions)
        return time.perf_counter() - tic

    once()  # compile and warm with identical shapes
    return min(once() for _ in range(repeats))


def _meta(extra_note: str = "") -> dict:
    import jax

    return {
        "command": "python -m jaxprobe.bench.reconstruction " + " ".join(sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {jax.devices()[0].platform}",
        "jax": jax.__version__,
        # The load average as measured when the run ends (it was written here as a fixed "~10-12" before).
        "note": "load average at the end " + ", ".join(f"{v:.1f}" for v in os.getloadavg()) + extra_note,
    }


SWEEP_DATASETS = {
    # name: run_sweep options (digits: 61 features x 10 classes, gradient samplers where the model allows)
    "breast_cancer": {},
    "wine": {},
    "default": {},
    # digits: no decision tree (its pure leaves give p(y | x) = 0 to some classes over all 1024 draws of
    # the shifted priors, and reconstruction refuses to start there); 61 features x 10 classes x 6 levels
    # is 3660 coordinates per chain, where random-walk chains (gradient boosting) barely move.
    "digits": {"sampler": "auto", "ridge": 1e-2, "num_warmup": 300, "num_samples": 100,
               "model_kinds": ("logistic", "mlp", "gradient_boosting")},
}


def sweep_main(argv) -> None:
    from jaxprobe.plots.reconstruct import plot_reconstruction_correlations
    from jaxprobe.reconstruct.sweep import run_sweep

    parser = argparse.ArgumentParser(description="the real-data reconstruction sweep")
    parser.add_argument("--datasets", nargs="*", default=list(SWEEP_DATASETS))
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.2, 1.0])
    parser.add_argument("--chains", type=int, default=64)
    parser.add_argument("--out", default=os.path.join(results_dir(),
                                                     "reconstruction.sweep"))
    parser.add_argument("--merge", nargs="*", default=[],
                        help="earlier sweep .json files whose data sets are kept (this run's override them)")
    args = parser.parse_args(argv)
    levels = ((0.0, 1.0), (0.5, 1.0), (1.0, 1.0), (2.0, 1.0), (0.0, 2.0), (0.0, 4.0))
    results, runs, owner = {}, [], {}
    for path in args.merge:
        with open(path) as stream:
            earlier = json.load(stream)
        results.update(earlier["results"])
        for meta in earlier.get("runs", [earlier.get("meta")]):
            runs.append(meta)
            for dataset in meta.get("datasets") or earlier["results"]:
                if dataset in earlier["results"]:
                    owner[dataset] = len(runs) - 1
    for dataset in args.datasets:
        owner.pop(dataset, None)
    for index, meta in enumerate(runs):  # each earlier run lists the data sets it still contributes
        meta["datasets"] = [d for d, i in owner.items() if i == index]
    runs = [meta for meta in runs if meta["datasets"]]
    if not args.datasets:
        _write_sweep(args.out, results, runs)
    for name in args.datasets:
        options = dict(num_chains=args.chains, num_warmup=400, num_samples=200, thin=5)
        options.update(SWEEP_DATASETS.get(name, {}))
        result = run_sweep(name, train_fractions=tuple(args.fractions), prior_levels=levels, verbose=True,
                           **options)
        results[name] = result.to_dict()
        plot_reconstruction_correlations(result.records, path=f"{args.out}.{name}.png", title=name)
        meta = _meta("; run_sweep options: " + json.dumps({"prior_levels": levels, "fractions": args.fractions,
                                                          **options}))
        meta["datasets"] = list(args.datasets)
        _write_sweep(args.out, results, [m for m in runs if m["command"] != meta["command"]] + [meta])


def _with_se(record: dict, key: str) -> str:
    """``value ± se`` of a record's accuracy (the test set's sampling: synthetic_accuracy), or the value alone for
    records made before the errors were kept."""
    se = record.get(key + "_se")
    return f"{record[key]:.3f}" + ("" if se is None else f" ± {se:.3f}")


def _write_sweep(out, results, runs) -> None:
    from jaxprobe.reconstruct.sweep import KL_KEYS

    atomic_write(out + ".json", lambda f: f.write(json.dumps({"runs": runs, "results": results}, indent=1).encode()))
    lines = ["# Reconstruction sweep: prior misspecification x model accuracy", ""]
    for meta in runs:
        lines += [f"- `{meta['command']}` ({', '.join(meta.get('datasets', []))}) on {meta['machine']}, "
                  f"{meta['date']}; {meta['note']}.", ""]
    lines += ["Spearman ρ (p) per data set. KL estimates: joint Gaussian closed form (`kl_gaussian`), k-NN "
              "(`kl_knn`, k = 5), mean of per-feature Gaussian KLs (`kl_gaussian_marginal_mean`); KL is "
              "KL(true held-out class-conditional ‖ reconstruction), averaged over classes. Prior error = "
              "KL(correct Gaussian prior ‖ misspecified prior), closed form.", "",
              "| data set | runs | " + " | ".join(f"{k} vs prior error (pooled / within model)" for k in KL_KEYS)
              + " | kl_knn vs model error | synthetic vs base accuracy | min synthetic/base, correct prior |",
              "|---|---:|" + "---|" * (len(KL_KEYS) + 3)]
    for dataset, data in results.items():
        c = data["correlations"]
        correct = [r for r in data["records"] if r["prior_error"] == 0.0]
        cells = [f"{c[k + '_vs_prior_error']['rho']:.2f} ({c[k + '_vs_prior_error']['p']:.1g}) / "
                 f"{c[k + '_vs_prior_error_within_model']['rho']:.2f}" for k in KL_KEYS]
        lines.append(f"| {dataset} | {len(data['records'])} | " + " | ".join(cells)
                     + f" | {c['kl_knn_vs_model_error']['rho']:.2f} | "
                     f"{c['synthetic_vs_base_accuracy']['rho']:.2f} | "
                     f"{min(r['accuracy_ratio'] for r in correct):.3f} |")
    lines += ["", "Correct prior (Gaussian fitted to the training features), per model; accuracies ± the standard "
              "error of the test set's sampling (binomial; the ratio's paired on the same test rows), which does not cover "
              "which reconstructed rows were drawn:", "",
              "| data set | model | train fraction (rows) | synthetic rows | base acc. | synthetic acc. | ratio | "
              "kl_gaussian | kl_knn | sampler | acceptance |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for dataset, data in results.items():
        for r in data["records"]:
            if r["prior_error"] == 0.0:
                lines.append(f"| {dataset} | {r['model']} | {r['train_fraction']} ({r['num_train']}) | "
                             f"{r.get('num_synthetic', r['num_train'])} | {_with_se(r, 'base_accuracy')} | "
                             f"{_with_se(r, 'synthetic_accuracy')} | {_with_se(r, 'accuracy_ratio')} | "
                             f"{r['kl_gaussian']:.2f} | "
                             f"{r['kl_knn']:.2f} | {r['sampler']} | {r['acceptance_rate']:.2f} |")
    atomic_write(out + ".md", lambda f: f.write(("\n".join(lines) + "\n").encode()))


def tree_gibbs_main(argv) -> dict:
    """``tree-gibbs``: :mod:`jaxprobe.bench.tree_gibbs`'s ``main`` (one copy of the code)."""
    from jaxprobe.bench import tree_gibbs

    return tree_gibbs.main(list(argv))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "sweep":
        sweep_main(sys.argv[2:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "tree-gibbs":
        tree_gibbs_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, nargs="+", default=[1, 64, 1024])
    parser.add_argument("--steps", type=int, default=1000, help="transitions per timed run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=["logistic", "mlp"])
    parser.add_argument("--out", default=os.path.join(results_dir(),
                                                     "reconstruction"))
    args = parser.parse_args()

    x_train, y_train, _, _, _ = prepare_data("breast_cancer")
    prior = R.fit_gaussian(x_train)
    mean, covariance = R.prior_moments(prior)
    cholesky = np.linalg.cholesky(covariance)
    rows = []
    for kind in args.models:
        fitted = make_model(kind).fit(x_train, y_train)
        jax_path = R.as_classifier(fitted)  # from_sklearn: pure JAX
        callback_path = R.BlackBoxClassifier(fitted.predict_proba, x_train.shape[1], 2, name=kind)
        paths = {"pure_jax": jax_path, "callback": callback_path}
        logdensities = {name: R.reconstruction_logdensity(c, prior, mean=mean, cholesky=cholesky)
                        for name, c in paths.items()}
        for num_chains in args.chains:
            start = np.random.default_rng(0).standard_normal((num_chains, 2, x_train.shape[1])).astype(np.float32) * 0.1
            row = {"model": kind, "num_chains": num_chains, "steps": args.steps}
            for name, logdensity in logdensities.items():
                calls_before = callback_path.num_calls
                seconds = _time_run(logdensity, start, args.steps, args.repeats)
                row[f"{name}_seconds"] = seconds
                row[f"{name}_samples_per_second"] = num_chains * args.steps / seconds
                if name == "callback":
                    # calls per timed run: init + one per transition (checked, never one per chain)
                    row["callback_calls_per_run"] = (callback_path.num_calls - calls_before) / (args.repeats + 1)
            row["jax_over_callback"] = row["pure_jax_samples_per_second"] / row["callback_samples_per_second"]
            rows.append(row)
            print(json.dumps(row), flush=True)

    meta = _meta("; times are measured side by side in one process, compile excluded, best of repeats: on a "
                 "shared machine the ratios are the comparable numbers")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    atomic_write(args.out + ".json", lambda f: f.write(json.dumps({"meta": meta, "rows": rows}, indent=2).encode()))
    lines = ["# Reconstruction throughput: callback vs pure JAX", "",
             f"`{meta['command']}` on {meta['machine']}, {meta['date']} (jax {meta['jax']}).", "",
             meta["note"] + ".", "",
             "A sample = one RWMH transition of one chain (a point for each of the 2 classes, 30 features).", "",
             "| model | chains | pure JAX samples/s | callback samples/s | JAX / callback | callback calls per run |",
             "|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['model']} | {row['num_chains']} | {row['pure_jax_samples_per_second']:,.0f} | "
                     f"{row['callback_samples_per_second']:,.0f} | {row['jax_over_callback']:.1f} | "
                     f"{row['callback_calls_per_run']:.0f} |")
    atomic_write(args.out + ".md", lambda f: f.write(("\n".join(lines) + "\n").encode()))


if __name__ == "__main__":
    main()
