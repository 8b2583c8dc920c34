"""The benchmark scripts, shipped with the package: ``jaxprobe bench NAME`` (or ``python -m jaxprobe.bench.NAME``)
runs one from a source checkout or an installed package alike.

Each script times what users call, side by side in one process, and writes ``NAME.json`` (every number, the
machine, the versions) and ``NAME.md`` (the tables) into :func:`results_dir`. The recorded figures live in the
source repository's ``benchmarks/results/`` (data, not code); ``benchmarks/README.md`` says what each measures.
This is the top layer below the command line: the scripts use the package as users do, through ``import jaxprobe``.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
import subprocess
from typing import Any

__all__ = ["results_dir", "source_root", "scripts", "write_results", "code_state", "load_note"]


def source_root() -> pathlib.Path | None:
    """The jaxprobe source checkout this package runs from (the folder holding ``benchmarks/results``), or None
    for an installed package.

    Examples
    --------
    >>> root = source_root()
    >>> root is None or ((root / "benchmarks" / "results").is_dir() and (root / "jaxprobe").is_dir())
    True
    """
    root = pathlib.Path(__file__).resolve().parents[2]
    return root if (root / "benchmarks" / "results").is_dir() and (root / "jaxprobe").is_dir() else None


def code_state() -> dict[str, Any]:
    """The jaxprobe code a benchmark measures: ``commit`` (short hash, "unknown" outside a git checkout),
    ``changed`` (``git status --short`` lines of ``jaxprobe/``: uncommitted changes) and ``jaxprobe_sha256`` (a
    hash of every ``jaxprobe/*.py``, which tells two uncommitted states apart).

    Examples
    --------
    >>> state = code_state()
    >>> sorted(state) in (["changed", "commit", "jaxprobe_sha256"], ["commit", "jaxprobe_sha256"])
    True
    """
    root = pathlib.Path(__file__).resolve().parents[2]  # the folder holding the jaxprobe package
    digest = hashlib.sha256()
    for folder, _, files in sorted(os.walk(root / "jaxprobe")):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                digest.update(os.path.relpath(path, root).encode())
                with open(path, "rb") as stream:
                    digest.update(stream.read())
    from jaxprobe.benchmark.report import commit

    state: dict[str, Any] = {"jaxprobe_sha256": digest.hexdigest()[:16]}
    full = commit()
    if not re.fullmatch(r"[0-9a-f]{40}", full):  # not a git checkout: commit() gave the package version
        state["commit"] = "unknown"
        return state
    state["commit"] = full[:7]
    try:
        changed = subprocess.run(["git", "status", "--short", "--", "jaxprobe"], cwd=root, capture_output=True,
                                 text=True, check=True).stdout.split("\n")
        state["changed"] = [line for line in changed if line.strip()]
    except (OSError, subprocess.CalledProcessError):
        pass
    return state


def load_note(load_at_start: float, cores: int | None = None) -> str:
    """What a benchmark's record says of the machine's load: other jobs shared it when the one-minute load average
    at the start (before the benchmark's own work) exceeded half its cores, and only then are the absolute times
    called inflated. (Three scripts had written "a shared machine" into every record, idle or not.)

    Examples
    --------
    >>> load_note(0.3, cores=2)
    'Load average 0.3 at the start on 2 cores: the machine was otherwise idle; the ratios are measured side by side in one process.'
    >>> load_note(4.7, cores=2).split(":")[1]
    ' other jobs shared the machine, so absolute times are inflated; the ratios are measured side by side in one process.'
    """
    cores = cores or os.cpu_count() or 1
    state = ("other jobs shared the machine, so absolute times are inflated" if load_at_start > 0.5 * cores
             else "the machine was otherwise idle")
    return f"Load average {load_at_start:.1f} at the start on {cores} cores: {state}; the ratios are measured side " \
           "by side in one process."


def results_dir() -> str:
    """Where a benchmark writes its results unless given ``--out``: ``$JAXPROBE_BENCH_RESULTS`` (``jaxprobe
    bench`` points it at a scratch folder unless ``--record``), else the checkout's ``benchmarks/results``, else
    ``./jaxprobe-bench-results`` (an installed package).

    Examples
    --------
    >>> from unittest import mock
    >>> with mock.patch.dict("os.environ", {"JAXPROBE_BENCH_RESULTS": "scratch"}):   # as `jaxprobe bench` sets it
    ...     results_dir()
    'scratch'
    >>> with mock.patch.dict("os.environ", clear=True):       # unset: the checkout's, or ./jaxprobe-bench-results
    ...     results_dir().endswith(("benchmarks/results", "jaxprobe-bench-results"))
    True
    """
    if os.environ.get("JAXPROBE_BENCH_RESULTS"):
        return os.environ["JAXPROBE_BENCH_RESULTS"]
    root = source_root()
    return str(root / "benchmarks" / "results") if root is not None else os.path.join(os.getcwd(),
                                                                                      "jaxprobe-bench-results")


def write_results(out: str, name: str, result: dict, markdown: str) -> None:
    """Write ``out/NAME.json`` (``result``, every number) and ``out/NAME.md`` (``markdown``, the tables), each
    atomically, creating ``out`` if needed.

    Examples
    --------
    >>> import json
    >>> write_results("my-results", "speed", {"draws_per_second": 1500.0}, "| draws/s |")
    >>> sorted(os.listdir("my-results")), json.load(open("my-results/speed.json"))
    (['speed.json', 'speed.md'], {'draws_per_second': 1500.0})
    """
    import json

    from jaxprobe._io import atomic_write

    os.makedirs(out, exist_ok=True)
    atomic_write(os.path.join(out, f"{name}.json"), lambda f: f.write(json.dumps(result, indent=2) + "\n"),
                 binary=False)
    atomic_write(os.path.join(out, f"{name}.md"), lambda f: f.write(markdown), binary=False)


def scripts() -> dict[str, str]:
    """``{name: path}`` of the benchmark scripts of this package (``jaxprobe bench --list``).

    Examples
    --------
    >>> found = scripts()
    >>> "throughput" in found, found["throughput"].endswith("throughput.py")   # `jaxprobe bench throughput`
    (True, True)
    """
    here = pathlib.Path(__file__).resolve().parent
    return {path.stem: str(path) for path in sorted(here.glob("*.py")) if not path.name.startswith("_")}
