"""Figures the documentation build draws from ``benchmarks/results/*.json`` (called by ``jaxprobe_docs``).

``FIGURES`` maps a results file's stem to a function ``(data, path) -> bool``: it draws from the parsed JSON alone
(matplotlib's Agg canvas; no pyplot, no global backend, no JAX), writes a PNG at ``path`` and returns True, or
returns False and writes nothing when the file does not have the layout it draws (a key missing, a value that is
not a finite number): no figure rather than a wrong one. Any other error propagates; ``jaxprobe_docs`` names the
file and the build fails. ``drawer(stem)`` also serves a recording's variants (``compile.rerun``,
``answer_speed.h200``, ``throughput.limit-rerun``) with the function of the name before the first dot.
The first line of each drawing function's docstring is the figure's caption (``caption(stem)``).
"""

from __future__ import annotations

import functools
import io
import math
import os
import pathlib
import tempfile
import textwrap
from typing import Callable

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator, NullFormatter

# The acceptance band of calibration's coverage: jaxprobe/bench/calibration.py TARGET (a test checks they agree;
# the file records only each row's in_target, and a file whose flags disagree with this band gets no figure).
CALIBRATION_BAND = (0.90, 0.98)
COLORS = {"jaxprobe": "tab:blue", "blackjax": "tab:orange", "numpyro": "tab:green", "jaxprobe-fast": "tab:purple"}
FIGURES: dict[str, Callable[[dict, pathlib.Path], bool]] = {}


class Unfit(Exception):
    """The results file does not have the layout a figure draws."""


# ----------------------------------------------------------------------------------------------------- helpers
def _get(data, *keys):
    """``data[k1][k2]...``; Unfit when a key or index is not there."""
    for key in keys:
        if isinstance(data, dict) and key in data:
            data = data[key]
        elif isinstance(data, list) and isinstance(key, int) and -len(data) <= key < len(data):
            data = data[key]
        else:
            raise Unfit(f"no {'/'.join(map(str, keys))}")
    return data


def _num(value) -> float:
    """A finite number (bool, None, text, NaN and inf are Unfit: nothing is drawn from them)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Unfit(f"{value!r} is not a finite number")
    return float(value)


def _records(data, *keys) -> list[dict]:
    """A non-empty list of dicts at ``keys``."""
    rows = _get(data, *keys)
    if not isinstance(rows, list) or not rows or not all(isinstance(row, dict) for row in rows):
        raise Unfit(f"{'/'.join(map(str, keys))} is not a list of records")
    return rows


def _mapping(data, *keys) -> dict:
    """A non-empty dict at ``keys``."""
    value = _get(data, *keys)
    if not isinstance(value, dict) or not value:
        raise Unfit(f"{'/'.join(map(str, keys))} is not a mapping")
    return value


def recorded(data: dict) -> str:
    """'recorded DATE on MACHINE' from the file's own fields (the page header names the commit)."""
    date = str(data.get("date") or "date not recorded")[:10]
    machine = data.get("machine") or data.get("device") or "machine not recorded"
    if isinstance(machine, dict):
        model, cores = machine.get("cpu_model"), machine.get("cpu_count")
        machine = f"{model}, {cores} cores" if model and cores else ", ".join(
            f"{k}: {v}" for k, v in machine.items() if not isinstance(v, (dict, list)))
    machine = str(machine)
    return f"recorded {date} on {machine if len(machine) <= 80 else machine[:79] + '…'}"


def _canvas(data: dict, title: str, columns: int = 1, size: tuple = (9.0, 4.5), sharey: bool = False):
    """A figure with ``columns`` axes side by side, titled with what it shows and where it was recorded."""
    figure = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, columns, squeeze=False, sharey=sharey)[0]
    figure.suptitle(f"{title}\n{recorded(data)}", fontsize=10)
    return figure, axes


def _save(figure: Figure, path: pathlib.Path) -> None:
    """The PNG, written atomically and only when its bytes changed (Sphinx then copies nothing new)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    png = buffer.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.read_bytes() == png:
        return
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(png)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _figure(*stems: str):
    """Register ``draw(data) -> Figure`` under ``stems`` as ``(data, path) -> bool``."""
    def register(draw: Callable[[dict], Figure]):
        @functools.wraps(draw)
        def run(data: dict, path: pathlib.Path) -> bool:
            try:
                figure = draw(data)
            except Unfit:
                return False
            _save(figure, pathlib.Path(path))
            return True
        for stem in stems:
            FIGURES[stem] = run
        return run
    return register


def drawer(stem: str):
    """The function drawing results file ``stem`` (its own, else its base name's), or None."""
    return FIGURES.get(stem) or FIGURES.get(stem.split(".")[0])


def caption(stem: str) -> str:
    """What ``stem``'s figure shows: the first paragraph of its function's docstring."""
    draw = drawer(stem)
    return " ".join((draw.__doc__ or "").split("\n\n")[0].split()) if draw else ""


def _dot_rows(ax, labels: list[str], values: list[float], intervals: list | None = None, **style) -> None:
    """Points on rows top to bottom, with horizontal interval bars where given."""
    y = list(range(len(labels)))[::-1]
    if intervals is not None:
        low = [v - lo for v, (lo, _) in zip(values, intervals)]
        high = [hi - v for v, (_, hi) in zip(values, intervals)]
        ax.errorbar(values, y, xerr=[low, high], fmt="none", ecolor="0.4", elinewidth=1, capsize=2)
    ax.scatter(values, y, zorder=3, **style)
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_ylim(-0.7, len(labels) - 0.3)
    ax.grid(axis="x", alpha=0.3)


def _log_ratio_axis(ax) -> None:
    """A log x axis of ratios labelled with plain numbers (0.5, 1, 2) rather than powers of ten."""
    ax.set_xscale("log")
    low, high = ax.get_xlim()
    steps = ((0.1, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 5, 7, 10, 20, 30, 50) if high / low > 4 else
             (0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 1.75, 2, 2.5, 3, 4))
    ticks = [t for t in steps if low <= t <= high]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())


# ----------------------------------------------------------------------------------------------------- figures
@_figure("throughput")
def throughput(data: dict) -> Figure:
    """Chain-steps per second against the number of chains (log-log): jaxprobe's compiled MALA core, the
    hand-written limit (a jitted scan of one vmapped gradient and a Langevin update per step) and the peers the
    file holds, on one target at one step size (higher is faster)."""
    rows, section = _records(data, "throughput", "rows"), _mapping(data, "throughput")
    series: dict[str, list] = {}
    kinds = (("thin1", "jaxprobe, thin=1"), ("thin10", "jaxprobe, thin=10"),
             ("fast_thin1", "jaxprobe, thin=1, numerics='fast'"))
    for row in rows:
        chains = _num(_get(row, "num_chains"))
        series.setdefault("limit (hand-written)", []).append((chains, _num(_get(row, "limit_chain_steps_per_s"))))
        for key, label in kinds:
            if key in row:
                series.setdefault(label, []).append((chains, _num(_get(row, key, "chain_steps_per_s"))))
    for key in ("peers", "numpyro_mcmc"):
        for peer in section.get(key) or []:
            series.setdefault(str(_get(peer, "name")), []).append(
                (_num(_get(peer, "num_chains")), _num(_get(peer, "chain_steps_per_s"))))
    figure, (ax,) = _canvas(data, "MALA throughput (chain-steps/s) against the number of chains", size=(10, 5.5))
    for label, points in series.items():
        points.sort()
        own = label.startswith(("jaxprobe", "limit"))
        ax.plot(*zip(*points), marker="o" if own else ".", lw=2.2 if own else 1, ls="--" if "limit" in label else "-",
                color="black" if "limit" in label else None, alpha=1 if own else 0.75, label=label)
    ax.set(xscale="log", yscale="log", xlabel="chains", ylabel="chain-steps per second")
    counts = sorted({chains for points in series.values() for chains, _ in points})
    ax.set_xticks(counts, [f"{c:,.0f}" for c in counts])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return figure


@_figure("answer_speed")
def answer_speed(data: dict) -> Figure:
    """What ``jaxprobe.sample()`` costs end to end, as a ratio to the time of a reference running the same
    transitions (each row names it: the hand-written limit, the engine in one jit, or BlackJAX), per sampler and
    chain count: the ratio of the best times and, where recorded, the median of paired runs; a ratio at or
    below the target (red mark) meets it, 1 is the same time."""
    labels, best, paired, targets = [], [], [], []
    for row in _records(data, "mala"):
        labels.append(f"MALA C={_num(_get(row, 'num_chains')):,.0f} thin={_num(_get(row, 'thin')):.0f} vs limit")
        best.append(_num(_get(row, "ratio")))
        paired.append(_num(row["median_paired_ratio"]) if "median_paired_ratio" in row else None)
        targets.append(_num(_get(row, "target")))
    for row in data.get("samplers") or []:
        labels.append(f"{_get(row, 'sampler')} C={_num(_get(row, 'num_chains')):,.0f} vs {_get(row, 'against')}")
        best.append(_num(_get(row, "ratio")))
        paired.append(_num(row["median_paired_ratio"]) if "median_paired_ratio" in row else None)
        targets.append(_num(_get(row, "target")))
    figure, (ax,) = _canvas(data, "jaxprobe.sample() time relative to a reference running the same transitions",
                            size=(9, 1.5 + 0.32 * len(labels)))
    _dot_rows(ax, labels, best, color="tab:blue", label="ratio of the best times")
    y = list(range(len(labels)))[::-1]
    shown = [(p, yy) for p, yy in zip(paired, y) if p is not None]
    if shown:
        ax.scatter(*zip(*shown), facecolors="none", edgecolors="tab:blue", zorder=3, label="median paired ratio")
    ax.scatter(targets, y, marker="|", s=200, color="tab:red", zorder=2, label="target (at most)")
    ax.axvline(1.0, color="0.3", lw=1, ls=":")
    ax.set_xlabel("time ratio (sample / reference)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return figure


@_figure("calibration")
def calibration(data: dict) -> Figure:
    """Coverage of the nominal 95 % intervals (estimate ± 1.96 reported standard errors) over repeated runs, per
    sampler, quantity and error method, with each coverage's 95 % Clopper–Pearson interval as an error bar and
    the 90–98 % acceptance band shaded; red: outside the band."""
    rows = _records(data, "rows")
    low_band, high_band = CALIBRATION_BAND
    labels, values, intervals, colors = [], [], [], []
    for row in rows:
        coverage = _num(_get(row, "coverage"))
        if bool(_get(row, "in_target")) != (low_band <= coverage <= high_band):
            raise Unfit("the file's in_target flags were set with another band")
        labels.append(f"{_get(row, 'case')} [{_get(row, 'method')}, {_num(_get(row, 'runs')):.0f} runs]")
        values.append(coverage)
        intervals.append((_num(_get(row, "low")), _num(_get(row, "high"))))
        colors.append("tab:blue" if _get(row, "in_target") else "tab:red")
    figure, (ax,) = _canvas(data, "Coverage of the nominal 95 % intervals", size=(9, 1.6 + 0.26 * len(rows)))
    ax.axvspan(low_band, high_band, color="tab:green", alpha=0.15, label=f"accepted {low_band:.0%}–{high_band:.0%}")
    ax.axvline(0.95, color="tab:green", lw=1, ls=":", label="nominal 95 %")
    _dot_rows(ax, labels, values, intervals, c=colors)
    ax.set_xlabel("share of runs whose interval covers the truth")
    ax.legend(fontsize=8, loc="lower left")
    return figure


def _smc_ratios(data: dict, with_interval: bool) -> Figure:
    """The two panels of smc_peers / smc_settings: spread·√grads ratio to the strictest BlackJAX setting."""
    labels, colors, panels, rules = [], [], {"share": ([], []), "log_z": ([], [])}, []
    for question, block in _mapping(data, "questions").items():
        rules.append(len(labels))
        for name, row in _mapping(block, "samplers").items():
            labels.append(f"{question} · {name}")
            colors.append(COLORS.get(name.split(":")[0], "tab:gray"))
            for quantity, (values, intervals) in panels.items():
                values.append(_num(_get(row, f"ratio_{quantity}")))
                band = row.get(f"ratio_{quantity}_90") if with_interval else None
                intervals.append((_num(_get(band, 0)), _num(_get(band, 1))) if band is not None else None)
    figure, axes = _canvas(data, "Spread·√(gradient evaluations) relative to the strictest BlackJAX setting "
                           "(≤ 1: no more spread than BlackJAX at equal cost)", columns=2,
                           size=(11, 1.8 + 0.24 * len(labels)), sharey=True)
    for ax, (quantity, (values, intervals)) in zip(axes, panels.items()):
        shown = intervals if all(i is not None for i in intervals) else None
        _dot_rows(ax, labels, values, shown, c=colors)
        ax.axvline(1.0, color="0.3", lw=1, ls=":")
        _log_ratio_axis(ax)
        ax.set_xlabel(("mode shares" if quantity == "share" else "log Z") + " ratio"
                      + (" [90 % bootstrap interval]" if shown else ""))
        for start in rules[1:]:                              # a rule between questions (rows run top down)
            ax.axhline(len(labels) - start - 0.5, color="0.6", lw=0.8)
    figure.legend(handles=[Line2D([], [], ls="", marker="o", color=COLORS[name], label=name)
                           for name in ("jaxprobe", "blackjax")], fontsize=8, loc="outside lower center", ncols=2)
    return figure


@_figure("smc_peers")
def smc_peers(data: dict) -> Figure:
    """jaxprobe's tempered SMC (its variants) and BlackJAX's adaptive tempered SMC (its settings) per question:
    spread over seeds × √(gradient evaluations), relative to the BlackJAX setting with the least of it, for the
    mode shares and for log Z, with the file's 90 % bootstrap interval over seeds (log scale; 1 = the peer)."""
    return _smc_ratios(data, with_interval=True)


@_figure("smc_settings")
def smc_settings(data: dict) -> Figure:
    """jaxprobe's SMC settings (MCMC steps per stage, target ESS) and BlackJAX's per question: spread over seeds
    × √(gradient evaluations), relative to the BlackJAX setting with the least of it, for the mode shares and
    log Z (log scale; 1 = the peer; the file records no interval for these ratios)."""
    return _smc_ratios(data, with_interval=False)


@_figure("smc_acceptance")
def smc_acceptance(data: dict) -> Figure:
    """Per seed: the largest mode-share error and the log Z error of jaxprobe's SMC against the closed form,
    at the default chain count and in each precision run (chains grown until the reported error is small),
    with the acceptance tolerances."""
    tolerance = (_num(_get(data, "tolerance", "share")), _num(_get(data, "tolerance", "log_z")))
    plain = _records(data, "plain", "rows")
    runs = [(f"{_num(_get(plain, 0, 'chains')):,.0f} chains (default)", plain)]
    for run in data.get("precision") or []:
        runs.append((f"precision run, MCSE target {_num(_get(run, 'mcse')):.3g}", _records(run, "rows")))
    figure, axes = _canvas(data, "SMC acceptance: errors against the closed form per seed", columns=2, size=(11, 4.5))
    for index, (label, rows) in enumerate(runs):
        offset = 0.5 * (index + 0.5) / len(runs) - 0.25          # side by side within a seed
        seeds = [_num(_get(row, "seed")) + offset for row in rows]
        axes[0].scatter(seeds, [_num(_get(row, "share_error_max_abs")) for row in rows], label=label, s=18)
        axes[1].scatter(seeds, [_num(_get(row, "log_z_error")) for row in rows], label=label, s=18)
    axes[0].axhline(tolerance[0], color="tab:red", ls="--", lw=1, label=f"tolerance {tolerance[0]:g}")
    for sign in (-1, 1):
        axes[1].axhline(sign * tolerance[1], color="tab:red", ls="--", lw=1,
                        label=f"tolerance ±{tolerance[1]:g}" if sign > 0 else None)
    axes[0].set(xlabel="seed", ylabel="max |share − truth| over modes", ylim=(0, None))
    axes[1].set(xlabel="seed", ylabel="log Z − truth")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    handles = {label: handle for ax in axes for handle, label in zip(*ax.get_legend_handles_labels())}
    figure.legend(handles.values(), handles.keys(), fontsize=8, loc="outside lower center", ncols=len(handles))
    return figure


@_figure("compile")
def compile_times(data: dict) -> Figure:
    """First call of a whole run (warmup and draws, every cache emptied) per sampler and library, on each
    target: the dark part of a bar is XLA's compile time, the light part the rest of the first call
    (tracing, lowering, running)."""
    targets = _mapping(data, "targets")
    libraries = _get(data, "libraries")
    if not isinstance(libraries, list) or not libraries:
        raise Unfit("libraries is not a list")
    figure, axes = _canvas(data, "First-call seconds per sampler and library (lower is faster)",
                           columns=len(targets), size=(5.5 * len(targets), 4.5), sharey=True)
    width = 0.8 / len(libraries)
    for ax, (name, target) in zip(axes, targets.items()):
        samplers = list(_mapping(target, "samplers"))
        for index, library in enumerate(libraries):
            points = [(x, _get(target, "samplers", s, library)) for x, s in enumerate(samplers)
                      if library in _mapping(target, "samplers", s)]
            x = [p + (index - (len(libraries) - 1) / 2) * width for p, _ in points]
            compiled = [_num(_get(row, "compile_seconds")) for _, row in points]
            first = [_num(_get(row, "first_seconds")) for _, row in points]
            color = COLORS.get(library, "tab:gray")
            ax.bar(x, compiled, width, color=color, label=library)
            ax.bar(x, [f - c for f, c in zip(first, compiled)], width, bottom=compiled, color=color, alpha=0.35)
        ax.set_xticks(range(len(samplers)), samplers)
        ax.set_title(textwrap.fill(f"{name}: {target.get('title', '')}".rstrip(": "), 55), fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("seconds (dark: XLA compile)")
    handles = {label: handle for ax in axes for handle, label in zip(*ax.get_legend_handles_labels())}
    figure.legend(handles.values(), handles.keys(), fontsize=8, loc="outside lower center", ncols=len(handles))
    return figure
