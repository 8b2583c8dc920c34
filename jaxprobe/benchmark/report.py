"""``Report``: the rows of a benchmark, their table, their file and their figures, and paired tests.

Each row (one sampler × target × chain count, over S seeds) holds:

- ``sampler``, ``family`` (jaxprobe / blackjax / numpyro), ``target``, ``num_chains``, ``num_seeds``,
  ``num_warmup``, ``num_samples``, ``num_devices`` (the devices its chains were split over); ``failure`` (None, or
  what went wrong by name: the exception, "out of memory", "non-finite positions in k of S seeds", "adaptation
  returned non-finite parameters in k of S seeds", "not installed", "not applicable: ...");
- timing of the one compiled program of all seeds: ``compile_seconds``, ``wall_seconds`` (run only),
  ``chain_steps_per_second`` (warmup and sampling steps of every chain of every seed), ``gradients_per_second``,
  ``kept_draws_per_second``, ``limit_chain_steps_per_second`` (the limit for the same target and S·C chains),
  ``ratio_to_limit``, ``gradient_ratio_to_limit`` (gradients per second over the limit's, which makes one per
  chain-step: how close a many-gradient step such as NUTS's comes to the hardware), ``gradients_per_step`` (per chain per sampling step), ``peak_memory_bytes`` (None where the
  platform does not report it);
- over seeds, median and ``_range`` [min, max]: ``ess_bulk`` and ``ess_tail`` (minimum over the coordinates of x
  and x²), ``ess_per_gradient`` (min bulk ESS / sampling gradient evaluations), ``ess_per_second`` (min bulk ESS /
  the seed's share of the wall time); ``acceptance`` (mean), ``divergences`` (mean per seed);
- against the truth: ``max_abs_z`` (largest |z| of the pooled z of each coordinate's mean and variance over the
  judged seeds), ``z_threshold``, ``biased`` (None when no seed was judged), ``judged_seeds`` (seeds with enough
  effective draws to be judged, :data:`jaxprobe.benchmark.measure.MIN_JUDGED_ESS`), ``biased_runs`` (judged seeds
  whose own max |z| passes the threshold);
- ``poor_runs``, ``poor_rate`` and its Wilson 95% interval ``poor_rate_ci`` (a seed is poor when its min bulk ESS
  is below ``min_ess_threshold`` or it is biased, :mod:`jaxprobe.benchmark.measure`);
- ``verdict`` for jaxprobe's rows (how many seeds jaxprobe's own verdict calls converged);
- ``per_seed``: every seed's raw numbers (what :meth:`Report.paired` tests).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import subprocess
from typing import Any

import numpy as np

from jaxprobe._io import atomic_write

__all__ = ["Report", "environment"]

#: Columns of the markdown table: (key, header, format).
COLUMNS = (("sampler", "sampler", "{}"), ("target", "target", "{}"), ("num_chains", "C", "{}"),
           ("ess_bulk", "bulk ESS", "{:.0f}"), ("ess_tail", "tail ESS", "{:.0f}"),
           ("ess_per_gradient", "ESS/grad", "{:.3g}"), ("ess_per_second", "ESS/s", "{:.3g}"),
           ("chain_steps_per_second", "chain-steps/s", "{:.3g}"), ("ratio_to_limit", "x limit", "{:.2f}"),
           ("gradient_ratio_to_limit", "grads x limit", "{:.2f}"),
           ("gradients_per_step", "grads/step", "{:.1f}"), ("acceptance", "acc", "{:.2f}"),
           ("divergences", "div/seed", "{:.1f}"), ("max_abs_z", "max abs z", "{:.2f}"), ("biased", "biased", "{}"),
           ("poor_runs", "poor (95% CI of rate)", "{}"), ("compile_seconds", "compile s", "{:.1f}"),
           ("wall_seconds", "wall s", "{:.1f}"))


def commit() -> str:
    """The checkout's commit (``git rev-parse HEAD``, 40 hex digits), else the package version (the one place a
    benchmark asks git for it: :func:`jaxprobe.bench.code_state` too)."""
    from jaxprobe._version import __version__

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        result = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10)
        if result.returncode == 0 and result.stdout.strip():
            return result.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return f"jaxprobe {__version__}"


#: Libraries whose versions a report records (None where not installed).
LIBRARIES = ("jaxprobe", "jax", "jaxlib", "blackjax", "numpyro", "numpy", "scipy")


def library_versions(packages: tuple[str, ...] = LIBRARIES) -> dict[str, str | None]:
    """``{package: installed version, or None}``, from the installed distributions' metadata."""
    import importlib.metadata

    versions: dict[str, str | None] = {}
    for package in packages:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def machine() -> dict[str, Any]:
    """This machine: ``platform``, ``processor``, ``cpu_model`` (Linux ``/proc/cpuinfo``, else "unknown"),
    ``cpu_count``, ``python`` and ``jax_devices`` (each device as JAX prints it)."""
    import jax

    model = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as stream:
            model = next((line.split(":", 1)[1].strip() for line in stream if line.startswith("model name")), model)
    except OSError:
        pass
    return {"platform": platform.platform(), "processor": platform.processor(), "cpu_model": model,
            "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "jax_devices": [str(device) for device in jax.devices()]}


def environment(settings: dict[str, Any]) -> dict[str, Any]:
    """Machine, device, library versions and commit of this process, with the run ``settings`` (the record of
    every benchmark: :func:`machine`, :func:`library_versions`).

    Examples
    --------
    >>> record = environment({"seeds": 5})
    >>> sorted(record), record["settings"], record["device"]["count"] >= 1, "jax" in record["versions"]
    (['commit', 'device', 'machine', 'settings', 'versions'], {'seeds': 5}, True, True)
    """
    import jax

    devices = jax.devices()
    return {"settings": settings, "machine": machine(),
            "device": {"platform": devices[0].platform, "kind": devices[0].device_kind, "count": len(devices)},
            "versions": library_versions(), "commit": commit()}


def _cell(row: dict[str, Any], key: str, form: str) -> str:
    value = row.get(key)
    if key == "poor_runs" and value is not None:  # k/S and the rate's Wilson 95% interval
        low, high = row["poor_rate_ci"]
        return f"{value}/{row['num_seeds']} [{low:.2f}, {high:.2f}]"
    if value is None:
        return "–"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return form.format(value)


@dataclasses.dataclass
class Report:
    """The result of :func:`jaxprobe.benchmark.compare`: ``rows`` (module docs), ``meta`` (machine, device,
    versions, commit, settings) and ``interrupted`` (Ctrl-C stopped the run; the rows measured are kept).

    Examples
    --------
    >>> row = {"sampler": "mala", "target": "normal", "num_chains": 4, "num_seeds": 1, "ess_bulk": 812.0,
    ...        "failure": None}                                      # as compare() measures it, a few keys
    >>> report = Report([row], environment({"seeds": 1}))
    >>> json_path, md_path = report.save(".")                       # samplers.json and samplers.md
    >>> Report.load(json_path).row("mala", "normal")["ess_bulk"], "| mala | normal | 4 | 812 |" in open(md_path).read()
    (812.0, True)
    """

    rows: list[dict[str, Any]]
    meta: dict[str, Any]
    interrupted: bool = False

    def row(self, sampler: str, target: str, num_chains: int | None = None) -> dict[str, Any]:
        """The row of ``sampler`` on ``target`` (at ``num_chains``; needed when there are several)."""
        found = [row for row in self.rows if row["sampler"] == sampler and row["target"] == target
                 and (num_chains is None or row["num_chains"] == num_chains)]
        if len(found) != 1:
            have = sorted({(row["sampler"], row["target"], row["num_chains"]) for row in self.rows})
            raise ValueError(f"no single row of sampler {sampler!r} on target {target!r}"
                             f"{'' if num_chains is None else f' at {num_chains} chains'} ({len(found)} match); "
                             f"rows: {have}")
        return found[0]

    def to_markdown(self) -> str:
        """A table of the rows, failures listed below it, and how to read them."""
        settings = self.meta.get("settings", {})
        device = self.meta.get("device", {})
        interrupted = " **Interrupted: the rows after the last one were not run.**" if self.interrupted else ""
        lines = ["# Sampler benchmark\n",
                 f"{settings.get('seeds')} seeds × (warmup {settings.get('num_warmup')} + "
                 f"{settings.get('num_samples')} draws) per row; device {device.get('platform')} ({device.get('kind')})"
                 f" × {device.get('count')}; commit {self.meta.get('commit')}.{interrupted}", ""]
        lines.append("| " + " | ".join(header for _, header, _ in COLUMNS) + " |")
        lines.append("|" + "---|" * len(COLUMNS))
        failures = [f"- {row['sampler']} on {row['target']} at {row['num_chains']} chains: {row['failure']}"
                    for row in self.rows if row.get("failure")]
        for row in self.rows:
            if row.get("ess_bulk") is not None:  # a row with no measurement is only listed among the failures
                lines.append("| " + " | ".join(_cell(row, key, form) for key, _, form in COLUMNS) + " |")
        if failures:
            lines += ["", "Failures:", ""] + failures
        verdicts = [f"- {row['sampler']} on {row['target']} ({row['num_chains']} chains): {row['verdict']}"
                    for row in self.rows if row.get("verdict")]
        if verdicts:
            lines += ["", "jaxprobe's verdict per seed:", ""] + verdicts
        lines += self._paired_markdown()
        lines += ["", _LEGEND]
        return "\n".join(lines) + "\n"

    def _paired_markdown(self) -> list[str]:
        """Each jaxprobe row against each peer row (BlackJAX, NumPyro) of the same target and chain count."""
        from jaxprobe.benchmark.stats import paired_tests

        lines = []
        for row in self.rows:
            if row.get("family") != "jaxprobe" or not row.get("per_seed"):
                continue
            for peer in self.rows:
                if (peer.get("family") in ("blackjax", "numpyro") and peer.get("per_seed")
                        and (peer["target"], peer["num_chains"]) == (row["target"], row["num_chains"])):
                    test = paired_tests(row, peer)
                    ratio = "–" if test["median_log_ratio"] is None else f"{math.exp(test['median_log_ratio']):.2f}"
                    lines.append(f"| {row['target']} | {row['num_chains']} | {row['sampler']} | {peer['sampler']} | "
                                 f"{test['seeds']} | {ratio} | {test['wilcoxon_p']:.3g} | {test['poor_a']} / "
                                 f"{test['poor_b']} | {test['mcnemar_p']:.3g} |")
        if not lines:
            return []
        seeds = self.meta.get("settings", {}).get("seeds") or 1
        return ["", "Paired tests (same seeds, same starts): jaxprobe against each peer. ESS/grad ratio: median "
                "over seeds of jaxprobe's over the peer's (> 1: jaxprobe better); Wilcoxon signed-rank p of the "
                "log ratios; poor runs of each; McNemar's exact p of the poor-run flags. With S seeds the smallest "
                f"two-sided Wilcoxon p is 2/2^S ({2 / 2 ** seeds:.3g} here): few seeds cannot show a difference.", "",
                "| target | C | jaxprobe | peer | seeds | ESS/grad ratio | Wilcoxon p | poor | McNemar p |",
                "|---|---|---|---|---|---|---|---|---|"] + lines

    def save(self, folder: str | os.PathLike, name: str = "samplers") -> tuple[str, str]:
        """Write ``folder/NAME.json`` (every number, :meth:`load` reads it) and ``folder/NAME.md`` (the table),
        each atomically. Returns the two paths."""
        folder = os.fspath(folder)
        os.makedirs(folder, exist_ok=True)
        payload = {"format": "jaxprobe.benchmark.report/1", "meta": self.meta, "interrupted": self.interrupted,
                   "rows": self.rows}
        text = json.dumps(payload, indent=1, default=_json_default, allow_nan=True) + "\n"
        json_path, md_path = os.path.join(folder, f"{name}.json"), os.path.join(folder, f"{name}.md")
        atomic_write(json_path, lambda stream: stream.write(text), binary=False)
        markdown = self.to_markdown()
        atomic_write(md_path, lambda stream: stream.write(markdown), binary=False)
        return json_path, md_path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Report":
        """The report :meth:`save` wrote to ``path`` (the ``.json``)."""
        with open(path, encoding="utf-8") as stream:
            payload = json.load(stream)
        if not isinstance(payload, dict) or payload.get("format") != "jaxprobe.benchmark.report/1":
            raise ValueError(f"{os.fspath(path)}: not a jaxprobe benchmark report (no format "
                             "'jaxprobe.benchmark.report/1')")
        return cls(payload["rows"], payload["meta"], bool(payload.get("interrupted", False)))

    def paired(self, a: str, b: str, target: str, num_chains: int | None = None) -> dict[str, Any]:
        """Paired tests of samplers ``a`` and ``b`` on ``target`` over the seeds both ran (same keys, same starts).

        Returns ``{"seeds", "median_log_ratio", "wilcoxon_p", "poor_a", "poor_b", "mcnemar_p"}``:
        the Wilcoxon signed-rank test (two-sided) of the per-seed log ESS per gradient of a minus b, and McNemar's
        exact test of the poor-run flags (binomial on the discordant seeds). A p-value below 0.05 says the two
        differ on this target. All differences zero: p = 1.
        """
        from jaxprobe.benchmark.stats import paired_tests

        return paired_tests(self.row(a, target, num_chains), self.row(b, target, num_chains))

    def plot(self, folder: str | os.PathLike, name: str = "samplers") -> list[str]:
        """Write ``folder/NAME.ess_per_second.png`` (ESS per second by target, one bar per sampler, at each
        row's largest chain count) and ``folder/NAME.chain_steps.png`` (chain-steps per second against chain
        count, the limit dotted beside each sampler). Returns the paths."""
        from jaxprobe.benchmark.stats import plot_report

        return plot_report(self.rows, os.fspath(folder), name)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


_LEGEND = """How to read it: ESS is the minimum over the coordinates of x and x² (rank-normalized bulk and tail ESS of
all chains), the median over seeds; ESS/grad divides by the gradient evaluations of the sampling phase. `x limit`:
chain-steps per second over the limit's (one vmapped value_and_grad + an unadjusted Langevin update per chain per
step, same target, the seeds' chains in one batch as the row ran them); `grads x limit`: gradient evaluations per
second over the limit's (it makes one per chain-step). Chain-steps and gradients count warmup and sampling; wall
time is one run of the compiled program of all seeds, compile time apart. `max abs z`: the largest |z| of each coordinate's mean and variance against the
truth, pooled over the seeds with a min bulk ESS of at least 100 (Σz/√S; fewer effective draws leave the error
bars themselves too uncertain to judge); `biased` when it passes a Bonferroni threshold at a family-wise
false-alarm rate of 1% for a correct sampler (– when no seed could be judged). `poor`: seeds whose min bulk ESS is
below the verdict's threshold or that are biased on their own."""
