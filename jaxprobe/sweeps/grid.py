"""Sweep grids: cells, which axes are batched and which change shapes, stable cell ids."""

from __future__ import annotations

import hashlib
import itertools
import json
import numbers
from typing import Any, Mapping, Sequence

import numpy as np

from jaxprobe._inputs import check_int, check_number

__all__ = ["ENGINE_BATCHED_AXES", "ENGINE_STATIC_AXES", "Axis", "cells_of", "classify_axes", "cell_id",
           "check_cells"]

#: Engine settings that vary per cell inside ONE compiled program (a vmapped cell axis).
ENGINE_BATCHED_AXES = ("temperature", "seed", "step_size")
#: Engine settings that change array shapes or the program itself: one compilation per value.
ENGINE_STATIC_AXES = ("sampler", "num_chains", "num_samples", "num_warmup", "thin", "step_size_mode",
                      "target_acceptance_rate")


class Axis:
    """One grid axis: its name, whether it is batched (traced) or static, and its dtype kind.

    Examples
    --------
    >>> classify_axes(cells_of({"alpha": [0.1, 0.2]}), static=["alpha"])   # one compile per value instead
    [Axis('alpha', static)]
    """

    def __init__(self, name: str, batched: bool, integer: bool):
        self.name = name
        self.batched = batched
        self.integer = integer

    def __repr__(self) -> str:
        kind = "batched" if self.batched else "static"
        return f"Axis({self.name!r}, {kind}{', int' if self.integer else ''})"


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _plain(value: Any, where: str) -> Any:
    """A JSON-able, hashable version of a grid value (lists become tuples); rejects other types."""
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, (list, tuple)):
        return tuple(_plain(item, where) for item in value)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return _plain(value.item(), where)
    raise TypeError(f"{where} must be a number, a string, a bool or a list of them, got {type(value).__name__}")


def cells_of(grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The cells of a grid: the Cartesian product of a ``{axis: values}`` mapping (in its order),
    or an explicit list of ``{axis: value}`` cells sharing the same axes.

    Examples
    --------
    >>> cells_of({"alpha": [0.1, 0.2], "temperature": [1.0]})          # the Cartesian product, in order
    [{'alpha': 0.1, 'temperature': 1.0}, {'alpha': 0.2, 'temperature': 1.0}]
    """
    if isinstance(grid, Mapping):
        if not grid:
            raise ValueError("grid must name at least one axis, e.g. {'temperature': [0.1, 1.0]}")
        names = list(grid)
        values = []
        for name in names:
            if not isinstance(name, str) or not name:
                raise TypeError(f"grid axis names must be non-empty strings, got {name!r}")
            axis_values = grid[name]
            if isinstance(axis_values, (str, bytes)) or not isinstance(axis_values, (Sequence, np.ndarray)):
                raise TypeError(f"grid[{name!r}] must be a list of values, got {type(axis_values).__name__}")
            if len(axis_values) == 0:
                raise ValueError(f"grid[{name!r}] is empty: give at least one value")
            values.append([_plain(v, f"grid[{name!r}][{i}]") for i, v in enumerate(axis_values)])
        return [dict(zip(names, combination)) for combination in itertools.product(*values)]
    if isinstance(grid, (str, bytes)) or not isinstance(grid, Sequence) or len(grid) == 0:
        raise TypeError("grid must be a mapping {axis: [values]} or a non-empty list of {axis: value} cells")
    cells = []
    for index, cell in enumerate(grid):
        if not isinstance(cell, Mapping):
            raise TypeError(f"grid[{index}] must be a mapping {{axis: value}}, got {type(cell).__name__}")
        if index and set(cell) != set(cells[0]):
            raise ValueError(f"grid[{index}] has axes {sorted(cell)} but grid[0] has {sorted(cells[0])}")
        cells.append({name: _plain(value, f"grid[{index}][{name!r}]") for name, value in cell.items()})
    return cells


def classify_axes(cells: list[dict[str, Any]], static: Sequence[str] = ()) -> list[Axis]:
    """Decide per axis: batched (numbers only, not listed in ``static``, not an engine shape setting)
    or static (strings, bools, lists, engine shape settings, names in ``static``).

    Examples
    --------
    >>> classify_axes(cells_of({"alpha": [0.1, 0.2], "sampler": ["mala"], "temperature": [1.0]}))
    [Axis('alpha', batched), Axis('sampler', static), Axis('temperature', batched)]
    """
    static = set(static)
    unknown = static - set(cells[0])
    if unknown:
        raise ValueError(f"static names axes that are not in the grid: {sorted(unknown)}")
    axes = []
    for name in cells[0]:
        values = [cell[name] for cell in cells]
        numeric = all(_is_number(v) for v in values)
        if name in ENGINE_BATCHED_AXES and not numeric:
            raise TypeError(f"grid[{name!r}] must hold numbers only, got {values!r}")
        batched = numeric and name not in static and name not in ENGINE_STATIC_AXES
        if name in ENGINE_BATCHED_AXES and name in static:
            batched = False
        integer = numeric and all(isinstance(v, int) for v in values)
        axes.append(Axis(name, batched, integer))
    return axes


def check_cells(cells: list[dict[str, Any]]) -> None:
    """Validate engine axes of every cell before anything is compiled: a ``TypeError`` (not a number, not an
    int) or ``ValueError`` (out of range) naming the cell, by the shared :mod:`jaxprobe._inputs` checks.

    Examples
    --------
    >>> check_cells([{"num_chains": 4}, {"num_chains": 2.5}])
    Traceback (most recent call last):
        ...
    TypeError: grid cell 1 (num_chains=2.5): num_chains must be an int, got float
    """
    for index, cell in enumerate(cells):
        where = lambda name: f"grid cell {index} ({name}={cell[name]!r}): {name}"  # noqa: E731
        for name in ("temperature", "step_size"):
            if name in cell:
                check_number(cell[name], where(name), minimum=0.0, exclusive_minimum=True)
        if "seed" in cell:
            check_int(cell["seed"], where("seed"), minimum=0, maximum=2**31 - 1)
        for name, minimum in (("num_chains", 1), ("num_samples", 1), ("num_warmup", 0), ("thin", 1)):
            if name in cell:
                check_int(cell[name], where(name), minimum=minimum)


def cell_id(cell: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    """A stable name for a cell: a hash of its parameters and the sweep's fixed settings.

    The same cell in a reordered or extended grid gets the same id, so a resumed
    sweep finds it; a changed setting (say ``num_samples``) gives new ids.

    Examples
    --------
    >>> cell_id({"alpha": 0.1, "temperature": 1.0}, {"num_samples": 100}) == cell_id(
    ...     {"temperature": 1.0, "alpha": 0.1}, {"num_samples": 100})          # order does not matter
    True
    >>> cell_id({"alpha": 0.1}, {"num_samples": 100}) == cell_id({"alpha": 0.1}, {"num_samples": 200})
    False
    """
    text = json.dumps({"cell": dict(cell), "settings": dict(settings)}, sort_keys=True, default=str)
    return "cell-" + hashlib.sha1(text.encode()).hexdigest()[:12]
