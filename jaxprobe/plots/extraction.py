"""Figures for model extraction (jaxprobe.extract and jaxprobe/bench/extraction.py)."""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["plot_queries_per_unit", "plot_distillation"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_queries_per_unit(rows: Sequence[dict[str, Any]], path: str | None = None):
    """Gradient queries per hidden unit vs h, one line per input dimension d (the paper's claim: flat in d,
    about log h), for recover_relu and, where present, the sequential Algorithm 1.

    ``rows``: the ``relu`` list of ``benchmarks/results/extraction.json`` (keys d, h, bias, jaxprobe,
    sequential_numpy). Returns the matplotlib Figure (saved to ``path`` if given).

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> rows = [{"d": 8, "h": h, "bias": True, "jaxprobe": {"gradient_queries_per_unit": q}}
    ...         for h, q in ((4, 6.5), (16, 7.0), (64, 8.2))]               # as recover_relu's info counts them
    >>> fig = plot_queries_per_unit(rows, path="queries.png")
    >>> len(fig.axes), [line.get_label() for line in fig.axes[0].lines]
    (1, ['recover_relu d=8'])
    >>> plt.close(fig)
    """
    plt = _pyplot()
    if not rows:
        raise ValueError("rows is empty: nothing to plot")
    fig, ax = plt.subplots(figsize=(6, 4))
    for d in sorted({r["d"] for r in rows}):
        for bias, style in ((True, "-"), (False, ":")):
            sel = sorted((r for r in rows if r["d"] == d and r["bias"] == bias), key=lambda r: r["h"])
            if sel:
                ax.plot([r["h"] for r in sel], [r["jaxprobe"]["gradient_queries_per_unit"] for r in sel], style,
                        marker="o", label=f"recover_relu d={d}{'' if bias else ', no bias'}")
            seq = [r for r in sel if "gradient_queries_per_unit" in r.get("sequential_numpy", {})]
            if seq and bias:
                ax.plot([r["h"] for r in seq], [r["sequential_numpy"]["gradient_queries_per_unit"] for r in seq],
                        "--", marker="x", color="grey", alpha=0.6, label=f"sequential Alg. 1 d={d}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("hidden units h")
    ax.set_ylabel("gradient queries per unit")
    ax.legend(fontsize=7)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


def plot_distillation(rows: Sequence[dict[str, Any]], path: str | None = None):
    """Student test accuracy vs number of queries, one panel per (data, victim, student, query source), one
    line per query kind (membership, gradient, SmoothGrad): the paper's Figures 2-4.

    ``rows``: the ``distill`` list of ``benchmarks/results/extraction.json``. Returns the Figure.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> setting = {"dataset": "digits", "victim": "mlp", "student": "mlp", "queries_from": "data",
    ...            "victim_accuracy": 0.97}
    >>> rows = [dict(setting, kind=kind, num_queries=n, student_accuracy=accuracy)
    ...         for kind, n, accuracy in (("membership", 100, 0.6), ("membership", 1000, 0.85),
    ...                                   ("gradient", 100, 0.8), ("gradient", 1000, 0.95))]
    >>> fig = plot_distillation(rows)                               # one panel per setting
    >>> len(fig.axes), [line.get_label() for line in fig.axes[0].lines][:2]
    (1, ['membership', 'gradient'])
    >>> plt.close(fig)
    """
    plt = _pyplot()
    if not rows:
        raise ValueError("rows is empty: nothing to plot")
    settings = sorted({(r["dataset"], r["victim"], r["student"], r["queries_from"]) for r in rows})
    columns = min(4, len(settings))
    lines = (len(settings) + columns - 1) // columns
    fig, axes = plt.subplots(lines, columns, figsize=(3.2 * columns, 2.8 * lines), squeeze=False)
    for ax, setting in zip(axes.flat, settings):
        sel = [r for r in rows if (r["dataset"], r["victim"], r["student"], r["queries_from"]) == setting]
        for kind in ("membership", "gradient", "smoothgrad"):
            points = sorted((r["num_queries"], r["student_accuracy"]) for r in sel if r["kind"] == kind)
            if points:
                ax.plot(*zip(*points), marker="o", label=kind)
        ax.axhline(sel[0]["victim_accuracy"], color="black", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_ylim(0, 1)
        ax.set_title(f"{setting[0]}: {setting[1]} → {setting[2]} ({setting[3]})", fontsize=8)
        ax.set_xlabel("queries")
    for ax in list(axes.flat)[len(settings):]:
        ax.axis("off")
    axes.flat[0].set_ylabel("student accuracy")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
