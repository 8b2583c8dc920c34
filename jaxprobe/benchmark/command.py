"""``jaxprobe benchmark``: :func:`jaxprobe.benchmark.compare` from the command line (``jaxprobe.cli`` parses the
options, without importing JAX, and calls :func:`run`)."""

from __future__ import annotations

import argparse
import os

from jaxprobe.benchmark.compare import compare

__all__ = ["run"]


def _names(text: str, what: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise ValueError(f"--{what} must name at least one, comma-separated, got {text!r}")
    return names


def _counts(text: str) -> list[int]:
    try:
        return [int(value) for value in _names(text, "chains")]
    except ValueError:
        raise ValueError(f"--chains must be comma-separated ints >= 1, e.g. 64,4096, got {text!r}") from None


def run(arguments: argparse.Namespace) -> tuple[int, str]:
    """Run the comparison the arguments describe and save its report (an interrupted one too) in ``--out``.
    Returns ``(exit status: 0, or 130 when interrupted, markdown table)``.

    Examples
    --------
    >>> arguments = argparse.Namespace(samplers="mala", targets="banana", chains="4,lots", warmup=20,
    ...                                samples=40, seeds=1, key=0, quiet=True, no_plot=True, out="results",
    ...                                name="samplers")
    >>> run(arguments)                  # as `jaxprobe benchmark ... --chains 4,lots`: refused before anything runs
    Traceback (most recent call last):
    ...
    ValueError: --chains must be comma-separated ints >= 1, e.g. 64,4096, got '4,lots'
    """
    if not arguments.name or os.sep in arguments.name or arguments.name.startswith("."):
        raise ValueError(f"--name must be a file name without a folder (OUT/NAME.json), got {arguments.name!r}")
    samplers = {name: name for name in _names(arguments.samplers, "samplers")}
    targets = _names(arguments.targets, "targets")
    report = compare(samplers, targets if targets != ["all"] else "all", num_chains=_counts(arguments.chains),
                     num_warmup=arguments.warmup, num_samples=arguments.samples, seeds=arguments.seeds,
                     key=arguments.key, progress=not arguments.quiet)
    os.makedirs(arguments.out, exist_ok=True)
    report.save(arguments.out, arguments.name)
    if not arguments.no_plot and report.rows:
        report.plot(arguments.out, arguments.name)
    return (130 if report.interrupted else 0), report.to_markdown()
