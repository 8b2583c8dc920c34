"""Paired tests of two rows of a benchmark report, and the report's figures."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from jaxprobe._io import atomic_write

__all__ = ["paired_tests", "plot_report"]


def _per_seed(row: dict[str, Any]) -> dict[int, tuple[float, bool]]:
    """``{seed: (log ESS per gradient, poor)}`` of a row (a failed seed: −inf, poor)."""
    per_seed = row.get("per_seed")
    if not per_seed:
        raise ValueError(f"row {row['sampler']} on {row['target']} has no per-seed results "
                         f"(failure: {row.get('failure')})")
    out = {}
    for seed, value, poor in zip(per_seed["seed"], per_seed["ess_per_gradient"], per_seed["poor"]):
        out[int(seed)] = (float(np.log(value)) if value and value > 0 else -np.inf, bool(poor))
    return out


def paired_tests(row_a: dict[str, Any], row_b: dict[str, Any]) -> dict[str, Any]:
    """Wilcoxon signed-rank test of the per-seed log ESS per gradient (a − b) and McNemar's exact test of the
    poor-run flags, over the seeds both rows measured (see :meth:`jaxprobe.benchmark.Report.paired`).

    Examples
    --------
    >>> a = {"sampler": "a", "target": "t", "per_seed": {"seed": [0, 1, 2, 3, 4, 5],
    ...      "ess_per_gradient": [0.2, 0.3, 0.25, 0.2, 0.3, 0.22], "poor": [False] * 6}}
    >>> b = {"sampler": "b", "target": "t", "per_seed": {"seed": [0, 1, 2, 3, 4, 5],
    ...      "ess_per_gradient": [0.1, 0.1, 0.1, 0.1, 0.1, 0.1], "poor": [True, False, False, False, False, False]}}
    >>> test = paired_tests(a, b)                        # a beats b on all 6 seeds: the smallest p for 6
    >>> test["seeds"], round(test["wilcoxon_p"], 4), test["poor_a"], test["poor_b"], test["mcnemar_p"]
    (6, 0.0312, 0, 1, 1.0)
    """
    from scipy import stats

    a, b = _per_seed(row_a), _per_seed(row_b)
    seeds = sorted(set(a) & set(b))
    if not seeds:
        raise ValueError("the two rows share no seed: run them in one compare call (same key and seeds)")
    difference = np.array([a[s][0] - b[s][0] for s in seeds])
    finite = np.isfinite(difference)
    nonzero = difference[finite][difference[finite] != 0]
    if nonzero.size == 0:
        wilcoxon_p = 1.0
    else:
        wilcoxon_p = float(stats.wilcoxon(nonzero, zero_method="wilcox", alternative="two-sided").pvalue)
    only_a = sum(a[s][1] and not b[s][1] for s in seeds)
    only_b = sum(b[s][1] and not a[s][1] for s in seeds)
    discordant = only_a + only_b
    mcnemar_p = 1.0 if discordant == 0 else float(stats.binomtest(only_a, discordant, 0.5).pvalue)
    return {"seeds": len(seeds), "median_log_ratio": float(np.median(difference[finite])) if finite.any() else None,
            "wilcoxon_p": wilcoxon_p, "poor_a": sum(a[s][1] for s in seeds), "poor_b": sum(b[s][1] for s in seeds),
            "mcnemar_p": mcnemar_p}


def _save_figure(figure: Any, path: str) -> None:
    atomic_write(path, lambda stream: figure.savefig(stream, format="png", dpi=110, bbox_inches="tight"))


def _throughput_panels(plt: Any, measured: list[dict[str, Any]], samplers: list[str], targets: list[str]) -> Any:
    """One panel per target: each sampler's chain-steps per second against chain count, the limit in black."""
    columns = min(4, max(len(targets), 1))
    panels = max(1, -(-len(targets) // columns))
    figure, axes = plt.subplots(panels, columns, figsize=(3.2 * columns, 2.6 * panels), squeeze=False)
    for index, target in enumerate(targets):
        axis = axes[index // columns][index % columns]
        limit = {}
        for sampler in samplers:
            points = sorted((row["num_chains"], row["chain_steps_per_second"]) for row in measured
                            if row["sampler"] == sampler and row["target"] == target)
            limit.update({row["num_chains"]: row["limit_chain_steps_per_second"] for row in measured
                          if row["sampler"] == sampler and row["target"] == target})
            if points:
                axis.plot(*zip(*points), "o-", label=sampler)
        if limit:
            axis.plot(*zip(*sorted(limit.items())), "kx:", label="limit")
        axis.set(xscale="log", yscale="log", title=target, xlabel="chains per seed")
        axis.title.set_fontsize(8)
    for index in range(len(targets), panels * columns):
        axes[index // columns][index % columns].axis("off")
    axes[0][0].set_ylabel("chain-steps / s")
    axes[0][0].legend(fontsize=6)
    figure.tight_layout()
    return figure


def plot_report(rows: list[dict[str, Any]], folder: str, name: str) -> list[str]:
    """The two figures of :meth:`jaxprobe.benchmark.Report.plot`; returns their paths.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> rows = [{"sampler": "mala", "target": "normal", "num_chains": c, "ess_per_second": 100.0 * c,
    ...          "chain_steps_per_second": 1e4 * c, "limit_chain_steps_per_second": 2e4 * c} for c in (4, 64)]
    >>> [os.path.basename(path) for path in plot_report(rows, "figures", "samplers")]
    ['samplers.ess_per_second.png', 'samplers.chain_steps.png']
    >>> os.path.getsize("figures/samplers.chain_steps.png") > 0
    True
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    os.makedirs(folder, exist_ok=True)
    measured = [row for row in rows if row.get("ess_per_second") is not None]
    samplers = list(dict.fromkeys(row["sampler"] for row in rows))
    targets = list(dict.fromkeys(row["target"] for row in rows))
    largest = {}
    for row in measured:  # the largest chain count of each sampler × target for the bar chart
        key = (row["sampler"], row["target"])
        if key not in largest or row["num_chains"] > largest[key]["num_chains"]:
            largest[key] = row
    figure, axes = plt.subplots(figsize=(max(6, 1.2 * len(targets)), 4))
    width = 0.8 / max(len(samplers), 1)
    for index, sampler in enumerate(samplers):
        values = [largest[(sampler, t)]["ess_per_second"] if (sampler, t) in largest else np.nan for t in targets]
        axes.bar(np.arange(len(targets)) + index * width, values, width, label=sampler)
    axes.set_xticks(np.arange(len(targets)) + 0.4 - width / 2, targets, rotation=30, ha="right")
    axes.set_yscale("log")
    axes.set_ylabel("min bulk ESS per second (median over seeds)")
    axes.legend(fontsize=8)
    paths = [os.path.join(folder, f"{name}.ess_per_second.png"), os.path.join(folder, f"{name}.chain_steps.png")]
    _save_figure(figure, paths[0])
    plt.close(figure)
    figure = _throughput_panels(plt, measured, samplers, targets)
    _save_figure(figure, paths[1])
    plt.close(figure)
    return paths
