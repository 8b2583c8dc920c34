"""Counterfactuals on breast_cancer with an MLP: jaxprobe vs DiCE (random and genetic), in one run.

20 test instances × 5 counterfactuals each, target = the opposite of the MLP's prediction.
Metrics (all in standardized units, the model's input space):
- validity: share of counterfactuals whose prediction is the target class;
- proximity: mean L1 distance between a counterfactual and its instance (lower is better);
- diversity: mean pairwise L1 distance among an instance's 5 counterfactuals;
- time: wall seconds for all 20 instances. jaxprobe's compile time is measured separately
  (first call = compile + run; identical later calls reuse the compiled programs; the median of
  5 such calls, the last one's samples scored). DiCE runs once per method.

jaxprobe answers all 20 questions in ONE compiled run: the 20 instances are independent blocks of a
600-dimensional target, G(x) = Σ_i [CE(f(x_i), y'_i) + λ‖x_i − a_i‖²], each block inside the data's
observed range (exact Box bijection); its 5 chains give 5 counterfactuals per instance (the last draw
of each chain, no selection). Chain c starts instance i at its c-th nearest training point that the
model puts in the target class, moved 70 % of the way to the instance (a nearest-neighbour start, as
DiCE's own KD-tree initialisation), with an L1 localizer (r = 1) for sparse, close changes.

Run: python -m jaxprobe.bench.counterfactuals [--dice-random-instances N] [--no-dice]
Writes benchmarks/results/counterfactuals.{json,md}.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import time
import warnings
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.bench import code_state, load_note, results_dir
from jaxprobe.benchmark.report import machine
import jaxprobe
from jaxprobe import datasets, probes
from jaxprobe._io import atomic_write
from jaxprobe.constraints import Box
from jaxprobe.models import ImportedModel, from_sklearn

NUM_INSTANCES, NUM_COUNTERFACTUALS = 20, 5
REPEATS = 5  # jaxprobe's time is the median of 5 full runs (one 0.1 s run is at the mercy of the scheduler)
LOCALIZER_WEIGHT, LOCALIZER_POWER, TEMPERATURE, NUM_WARMUP, START_FRACTION = 0.2, 1, 0.003, 50, 0.3
# `jaxprobe bench` points this at a scratch folder unless --record is given.
RESULTS = results_dir()
JAXPROBE_ROW = "jaxprobe (mala, one compiled run)"


def metrics(counterfactuals: np.ndarray, anchors: np.ndarray, predict, targets: np.ndarray) -> dict:
    """counterfactuals (instances, k, d) and anchors (instances, d) in standardized units."""
    valid = predict(counterfactuals.reshape(-1, anchors.shape[1])).reshape(counterfactuals.shape[:2]) == targets[:, None]
    proximity = np.abs(counterfactuals - anchors[:, None, :]).sum(-1)
    pairwise = np.abs(counterfactuals[:, :, None, :] - counterfactuals[:, None, :, :]).sum(-1)
    k = counterfactuals.shape[1]
    diversity = pairwise.sum(axis=(1, 2)) / (k * (k - 1))
    return {"validity": float(valid.mean()), "proximity_l1": float(proximity.mean()),
            "diversity_l1": float(diversity.mean()), "num_counterfactuals": int(valid.size)}


@dataclasses.dataclass(frozen=True)
class _Problem:
    """What every method is asked, in standardized units: the fitted MLP, its training data, the instances to
    explain with their target classes, and the data's observed range (widened by ``margin``)."""

    mlp: Any
    accuracy: float
    x_train: np.ndarray
    y_train: np.ndarray
    anchors: np.ndarray
    targets: np.ndarray
    low: np.ndarray
    high: np.ndarray
    margin: np.ndarray

    @property
    def dim(self) -> int:
        """Number of input features."""
        return self.anchors.shape[1]


def _parse_arguments() -> argparse.Namespace:
    """The command-line options: DiCE's share of the run and jaxprobe's settings (defaults: the module's)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dice-random-instances", type=int, default=NUM_INSTANCES,
                        help="instances for DiCE random (slow); its time is scaled to 20 if fewer")
    parser.add_argument("--no-dice", action="store_true")
    parser.add_argument("--weight", type=float, default=LOCALIZER_WEIGHT)
    parser.add_argument("--power", type=float, default=LOCALIZER_POWER)
    parser.add_argument("--temperature", type=float, default=TEMPERATURE)
    parser.add_argument("--warmup", type=int, default=NUM_WARMUP)
    parser.add_argument("--start-fraction", type=float, default=START_FRACTION)
    return parser.parse_args()


def _problem() -> _Problem:
    """breast_cancer standardized, the MLP fitted on its training part, the first test instances with the
    opposite of the MLP's prediction as their targets, and the features' observed range."""
    from sklearn.neural_network import MLPClassifier

    data = datasets.breast_cancer()
    train, test = data.train_test_split(0)
    x_train, x_test = train.standardize(train.x).astype(np.float64), test.standardize(test.x).astype(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mlp = MLPClassifier((32,), max_iter=1000, random_state=0).fit(x_train, train.y)
    accuracy = float(mlp.score(x_test, test.y))
    anchors = x_test[:NUM_INSTANCES]
    targets = 1 - mlp.predict(anchors)
    low = (np.array([f.range[0] for f in data.features]) - data.mean) / data.scale
    high = (np.array([f.range[1] for f in data.features]) - data.mean) / data.scale
    margin = 1e-3 * (high - low)
    low, high = low - margin, high + margin
    assert np.all(anchors > low) and np.all(anchors < high)
    return _Problem(mlp, accuracy, x_train, train.y, anchors, targets, low, high, margin)


def _joint_probe(problem: _Problem, model: ImportedModel) -> Callable[[jax.Array], jax.Array]:
    """G = Σ_i [fixed_label(model, t_i) + w·localize(a_i, r)](x_i) on the concatenated instances, the blocks
    evaluated as one vmap; checked equal to the sum of the library's own probes."""
    d = problem.dim
    wanted = jax.nn.one_hot(problem.targets, 2)
    anchor_rows = jnp.asarray(problem.anchors, jnp.float32)

    def probe(x):
        """The joint probe's value at the concatenated positions ``x`` of all instances."""
        rows = x.reshape(NUM_INSTANCES, d)
        probabilities = jax.vmap(model.fn)(rows)
        cross_entropy = -jnp.sum(wanted * jnp.log(jnp.maximum(probabilities, 1e-12)))
        return cross_entropy + LOCALIZER_WEIGHT * jnp.sum(jnp.abs(rows - anchor_rows) ** LOCALIZER_POWER)

    blocks = [probes.fixed_label(model, int(t)) + LOCALIZER_WEIGHT * probes.localize(a, r=LOCALIZER_POWER)
              for a, t in zip(problem.anchors, problem.targets)]
    check_point = jnp.asarray(problem.anchors.reshape(-1) + 0.1, jnp.float32)
    np.testing.assert_allclose(float(probe(check_point)),
                               sum(float(b(check_point[i * d:(i + 1) * d])) for i, b in enumerate(blocks)), rtol=1e-5)
    return probe


def _starting_points(problem: _Problem) -> np.ndarray:
    """(chains, instances · d) starts: chain c starts instance i at its c-th nearest (L1) training point that the
    model puts in the target class, moved towards the instance (inside the box; a valid-side start)."""
    train_predictions = problem.mlp.predict(problem.x_train)
    init = np.empty((NUM_COUNTERFACTUALS, NUM_INSTANCES, problem.dim))
    for i, (anchor, target) in enumerate(zip(problem.anchors, problem.targets)):
        candidates = problem.x_train[train_predictions == target]
        nearest = candidates[np.argsort(np.abs(candidates - anchor).sum(axis=1))[:NUM_COUNTERFACTUALS]]
        init[:, i] = np.clip(anchor + START_FRACTION * (nearest - anchor), problem.low + problem.margin,
                             problem.high - problem.margin)
    return init.reshape(NUM_COUNTERFACTUALS, -1).astype(np.float32)


def _run_jaxprobe(problem: _Problem) -> dict:
    """jaxprobe's row: one compiled run answers all instances; the first call (compile + run) apart, then the
    median of REPEATS identical calls, the last one's counterfactuals scored."""
    probe = _joint_probe(problem, from_sklearn(problem.mlp))
    options = dict(temperature=TEMPERATURE, num_chains=NUM_COUNTERFACTUALS, num_samples=1, num_warmup=NUM_WARMUP,
                   init=_starting_points(problem),
                   constraints=Box(np.tile(problem.low, NUM_INSTANCES), np.tile(problem.high, NUM_INSTANCES)),
                   sampler="mala", progress=False)
    start = time.perf_counter()
    jaxprobe.generate(0, probe, **options)
    first_call = time.perf_counter() - start
    times = []
    for repeat in range(REPEATS):  # the compiled programs are reused: each repeat is a full answer
        start = time.perf_counter()
        result = jaxprobe.generate(1 + repeat, probe, **options)
        times.append(time.perf_counter() - start)
    jaxprobe_time = float(np.median(times))
    counterfactuals = result.positions[:, -1, :].reshape(NUM_COUNTERFACTUALS, NUM_INSTANCES,
                                                         problem.dim).swapaxes(0, 1)
    return {**metrics(counterfactuals, problem.anchors, problem.mlp.predict, problem.targets), "time_s": jaxprobe_time,
            "compile_s": first_call - jaxprobe_time, "instances_timed": NUM_INSTANCES, "repeat_times_s": times}


def _dice_row(explainer: Any, problem: _Problem, names: list[str], method: str, count: int) -> dict:
    """One DiCE method's row on the first ``count`` instances (a missing counterfactual counts invalid; the
    time scaled to all instances)."""
    import pandas as pd

    query = pd.DataFrame(problem.anchors[:count], columns=names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        found = explainer.generate_counterfactuals(query, total_CFs=NUM_COUNTERFACTUALS,
                                                   desired_class="opposite", verbose=False,
                                                   **({"random_seed": 0} if method == "random" else {}))
        elapsed = time.perf_counter() - start
    cfs = np.full((count, NUM_COUNTERFACTUALS, problem.dim), np.nan)
    for i, example in enumerate(found.cf_examples_list):
        table = example.final_cfs_df
        if table is not None and len(table):
            values = table[names].to_numpy(np.float64)[:NUM_COUNTERFACTUALS]
            cfs[i, :len(values)] = values
    missing = np.isnan(cfs[..., 0])
    filled = np.where(missing[..., None], problem.anchors[:count, None, :], cfs)  # a missing CF counts invalid
    row = metrics(filled, problem.anchors[:count], problem.mlp.predict, problem.targets[:count])
    row.update(time_s=elapsed * NUM_INSTANCES / count, instances_timed=count, missing=int(missing.sum()))
    return row


def _run_dice(problem: _Problem, random_instances: int) -> dict:
    """DiCE's rows (genetic on every instance, random on ``random_instances``), by name; none when dice-ml is
    not installed."""
    try:
        import dice_ml
    except ImportError:
        print("dice-ml is not installed: pip install dice-ml (the bench extra)")
        return {}
    import pandas as pd

    rows = {}
    names = [f"f{j}" for j in range(problem.dim)]  # DiCE works on a DataFrame of the same standardized inputs
    frame = pd.DataFrame(problem.x_train, columns=names).assign(target=problem.y_train)
    dice_data = dice_ml.Data(dataframe=frame, continuous_features=names, outcome_name="target")
    dice_model = dice_ml.Model(model=problem.mlp, backend="sklearn")
    for method in ("genetic", "random"):
        count = NUM_INSTANCES if method == "genetic" else max(1, min(random_instances, NUM_INSTANCES))
        explainer = dice_ml.Dice(dice_data, dice_model, method=method)
        row = _dice_row(explainer, problem, names, method, count)
        rows[f"DiCE {method} (sklearn backend)"] = row
        print(method, row, flush=True)
    return rows


def _report(rows: dict, accuracy: float, load_at_start: tuple[float, ...]) -> dict:
    """counterfactuals.json: the machine, the code measured, the setup and every method's row."""
    return {
        "command": "python -m jaxprobe.bench.counterfactuals",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "cpu_model": machine()["cpu_model"],
        "code": code_state(),
        "load_average_at_start": list(load_at_start),
        "load_average_at_end": os.getloadavg(),
        "jax": jax.__version__, "backend": jax.default_backend(),
        "setup": {"data": "breast_cancer (sklearn), standardized; 75/25 stratified split, seed 0",
                  "model": f"sklearn MLPClassifier((32,)), test accuracy {accuracy:.3f}",
                  "instances": NUM_INSTANCES, "counterfactuals_per_instance": NUM_COUNTERFACTUALS,
                  "jaxprobe": f"fixed_label + {LOCALIZER_WEIGHT}*localize(r={LOCALIZER_POWER}) per instance, "
                              f"tau={TEMPERATURE}, mala, {NUM_WARMUP} warmup steps, last draw of each of 5 chains; chain c "
                              f"starts at the c-th nearest training point predicted as the target, moved "
                              f"{1 - START_FRACTION:g} of the way to the instance"},
        "rows": rows,
    }


def _markdown(report: dict) -> str:
    """counterfactuals.md: the methods' table, jaxprobe's compile time and the setup."""
    rows = report["rows"]
    ours = rows[JAXPROBE_ROW]
    start = report.get("load_average_at_start")
    code = report.get("code", {})
    lines = ["# Counterfactuals: jaxprobe vs DiCE (breast_cancer, MLP)", "",
             f"Command: `{report['command']}`; {report['date']}; {report['machine']}, "
             f"{report.get('cpu_model', 'CPU not recorded')}; jaxprobe at commit "
             f"{code.get('commit', 'unknown')}{' (with uncommitted changes)' if code.get('changed') else ''}; "
             f"load average at the end {tuple(round(v, 1) for v in report['load_average_at_end'])}.", "",
             (load_note(start[0]) if start else "Load at the start not recorded.")
             + " Both libraries ran in the same process.", "",
             "| method | validity | proximity (L1, std. units) | diversity (L1) | time for 20 instances (s) | "
             "jaxprobe speed-up |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, row in rows.items():
        note = "" if row["instances_timed"] == NUM_INSTANCES else f" ({row['instances_timed']} timed, scaled)"
        lines.append(f"| {name} | {row['validity']:.3f} | {row['proximity_l1']:.2f} | {row['diversity_l1']:.2f} | "
                     f"{row['time_s']:.3g}{note} | {row['speedup_of_jaxprobe']:.0f}x |")
    lines += ["", f"jaxprobe compile time (excluded above): {ours['compile_s']:.1f} s.",
              "", f"Setup: {json.dumps(report['setup'])}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Run jaxprobe (and DiCE unless --no-dice) on the same instances; write counterfactuals.{json,md}."""
    global LOCALIZER_WEIGHT, LOCALIZER_POWER, TEMPERATURE, NUM_WARMUP, START_FRACTION
    args = _parse_arguments()
    LOCALIZER_WEIGHT, LOCALIZER_POWER, TEMPERATURE, NUM_WARMUP = args.weight, args.power, args.temperature, args.warmup
    START_FRACTION = args.start_fraction

    load_at_start = os.getloadavg()
    problem = _problem()
    rows = {JAXPROBE_ROW: _run_jaxprobe(problem)}
    print("jaxprobe", rows[JAXPROBE_ROW], flush=True)
    if not args.no_dice:
        rows.update(_run_dice(problem, args.dice_random_instances))

    ours = rows[JAXPROBE_ROW]
    for name, row in rows.items():
        row["speedup_of_jaxprobe"] = row["time_s"] / ours["time_s"]
    report = _report(rows, problem.accuracy, load_at_start)
    os.makedirs(RESULTS, exist_ok=True)
    text = json.dumps(report, indent=2)
    atomic_write(os.path.join(RESULTS, "counterfactuals.json"), lambda stream: stream.write(text), binary=False)
    markdown = _markdown(report)
    atomic_write(os.path.join(RESULTS, "counterfactuals.md"), lambda stream: stream.write(markdown), binary=False)
    print(markdown, end="")


if __name__ == "__main__":
    main()
