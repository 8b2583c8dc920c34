"""Sweeps at scale: a grid of probe hyperparameters × temperatures × seeds, one compiled program per shape.

``jaxprobe.sweep(key, build_probe, grid, ...)`` runs every cell of the grid as an
independent :func:`jaxprobe.generate` run; the numeric axes are a vmapped cell
axis of one compiled program. Results: a tidy table (CSV, Parquet with pyarrow; every
estimate with its Monte-Carlo standard error beside it) and per-cell samples, written
atomically and resumable.
"""

from jaxprobe.sweeps.core import OBSERVABLE_COLUMNS, TABLE_COLUMNS, SweepProblem, SweepResult, read_table, sweep
from jaxprobe.sweeps.grid import ENGINE_BATCHED_AXES, ENGINE_STATIC_AXES, cells_of, classify_axes

__all__ = ["sweep", "SweepProblem", "SweepResult", "read_table", "TABLE_COLUMNS", "OBSERVABLE_COLUMNS",
           "ENGINE_BATCHED_AXES", "ENGINE_STATIC_AXES", "cells_of", "classify_axes"]
