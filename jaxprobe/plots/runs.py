"""The figure of ``jaxprobe sweep``: a column of the sweep's table against one grid axis.

(``jaxprobe run`` draws its per-feature figure with :func:`jaxprobe.plots.tabular.feature_distributions`.)
"""

from __future__ import annotations

from typing import Any

from jaxprobe._io import atomic_write

__all__ = ["plot_sweep"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_sweep(path: str, rows: list[dict[str, Any]], x_axis: str, y: str = "probe_mean",
               group_by: str | None = None) -> None:
    """``y`` (a table column, default the mean probe value) against the numeric axis ``x_axis``, one line
    per value of ``group_by``; failed cells are left out. Where the table has ``y``'s Monte-Carlo standard error
    (``probe_mean`` → ``probe_mcse``; any column ``c`` → ``c_mcse``), error bars of ±1.96 MCSE (95%) are drawn.
    Written atomically as PNG.

    Examples
    --------
    >>> rows = [{"temperature": t, "sampler": sampler, "status": "ok", "probe_mean": 2 * t, "probe_mcse": 0.01}
    ...         for t in (0.1, 0.3, 1.0) for sampler in ("mala", "rwmh")]        # a sweep's table
    >>> plot_sweep("sweep.png", rows, x_axis="temperature", group_by="sampler")
    >>> with open("sweep.png", "rb") as stream:
    ...     stream.read(4)
    b'\x89PNG'
    """
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(5, 3.5))
    # Unconverged cells have values too: drawn, as hollow markers (their answers are not to be trusted).
    ok = [r for r in rows if r.get("status") in ("ok", "unconverged")]
    groups = sorted({r.get(group_by) for r in ok}, key=str) if group_by else [None]
    for group in groups:
        members = sorted((r for r in ok if group_by is None or r.get(group_by) == group), key=lambda r: r[x_axis])
        line, = axis.plot([r[x_axis] for r in members], [r[y] for r in members],
                          label=f"{group_by}={group}" if group_by else None)
        for status, fill in (("ok", line.get_color()), ("unconverged", "none")):
            marked = [r for r in members if r["status"] == status]
            axis.plot([r[x_axis] for r in marked], [r[y] for r in marked], "o", color=line.get_color(),
                      markerfacecolor=fill)
        error = "probe_mcse" if y == "probe_mean" else f"{y}_mcse"
        shown = [r for r in members if isinstance(r.get(error), (int, float)) and r[error] == r[error]]
        if shown:  # the 95% intervals of the estimates (cells without an error estimate have none)
            axis.errorbar([r[x_axis] for r in shown], [r[y] for r in shown],
                          yerr=[1.96 * r[error] for r in shown], fmt="none", ecolor=line.get_color(), capsize=2)
    axis.set_xlabel(x_axis)
    axis.set_ylabel(y)
    if ok and all(r[x_axis] > 0 for r in ok):
        axis.set_xscale("log")
    if group_by and ok:
        axis.legend(fontsize=7)
    if any(r["status"] == "unconverged" for r in ok):
        axis.set_title("hollow: cells that did not converge", fontsize=8)
    figure.tight_layout()
    try:
        atomic_write(path, lambda stream: figure.savefig(stream, format="png", dpi=100))
    finally:
        plt.close(figure)
