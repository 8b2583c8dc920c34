"""Loaders for the ISLP tables shipped in ``jaxprobe/datasets/data`` (Wage, Default, Credit).

The CSV files are copied unchanged from the ``ISLP`` package 0.6.0 (license in
``data/LICENSE-ISLP.txt``) and read with the :mod:`csv` module: no pandas, no
download. String fields are stripped of surrounding spaces (Credit.csv writes
``" Male"``); category names are otherwise the CSV's strings, e.g.
``"2. Black"``, and categories are ordered by sorting them (for Wage that is the
order of the numeric prefixes).
"""

from __future__ import annotations

import csv
import io
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np

from jaxprobe.datasets._core import Column, Dataset, _check_real, build

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = ["credit", "data_file", "default", "read_csv", "wage"]

_SOURCE = "ISLP 0.6.0 (An Introduction to Statistical Learning), BSD-style license: data/LICENSE-ISLP.txt."
WAGE_THRESHOLD = 100.0


def data_file(filename: str) -> Traversable:
    """The packaged file ``jaxprobe/datasets/data/<filename>`` (via importlib.resources).

    Examples
    --------
    >>> data_file("Credit.csv").name
    'Credit.csv'
    """
    return resources.files("jaxprobe.datasets") / "data" / filename


def read_csv(filename: str) -> dict[str, np.ndarray]:
    """``{column name: (n,) array of str}`` for a packaged CSV, fields stripped of spaces.

    Examples
    --------
    >>> table = read_csv("Credit.csv")
    >>> table["Balance"].shape, sorted(table)[:3]
    ((400,), ['Age', 'Balance', 'Cards'])
    """
    text = data_file(filename).read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    header = [h.strip() for h in rows[0]]
    body = [r for r in rows[1:] if r]
    if any(len(r) != len(header) for r in body):
        raise ValueError(f"{filename}: rows with a number of fields other than {len(header)}")
    columns = np.array(body, dtype=str).reshape(len(body), len(header))
    return {h: np.char.strip(columns[:, j]) for j, h in enumerate(header)}


def _numbers(table: dict[str, np.ndarray], name: str) -> np.ndarray:
    return table[name].astype(np.float64)


def wage(threshold: float = WAGE_THRESHOLD) -> Dataset:
    """ISLP ``Wage``: 3000 male workers in the Mid-Atlantic region, 2003–2009; binary task.

    Label ``1`` iff ``wage > threshold``; ``wage`` is in thousands of dollars, and the
    default threshold of 100 (i.e. $100k) puts 1657 of the 3000 workers (55.2 %) in
    class 1 (the median wage is about 104.9). ``wage`` and ``logwage`` are left out of
    the features (they give the label away); ``region`` is dropped because every row
    has the same level, ``"2. Middle Atlantic"``.

    Features: ``year``, ``age`` (integer); ``maritl``, ``race``, ``education``,
    ``jobclass``, ``health``, ``health_ins`` (categorical, one-hot): x is (3000, 22).

    Examples
    --------
    >>> data = wage()                                        # label: wage above 100 (thousand dollars)
    >>> data.x.shape, data.class_names
    ((3000, 22), ('wage <= 100', 'wage > 100'))
    >>> data.features[0]
    Feature(name='year', kind='integer', columns=(0,), categories=None, range=(2003.0, 2009.0))
    """
    threshold = _check_real(threshold, "threshold")
    t = read_csv("Wage.csv")
    w = _numbers(t, "wage")
    if not w.min() <= threshold < w.max():
        raise ValueError(f"threshold must lie in [{w.min():.2f}, {w.max():.2f}) so that both classes "
                         f"are present, got {threshold}")
    columns = [Column(n, "integer", _numbers(t, n)) for n in ("year", "age")]
    columns += [Column(n, "categorical", t[n]) for n in
                ("maritl", "race", "education", "region", "jobclass", "health", "health_ins")]
    label = f"wage > {threshold:g}"
    return build("wage", columns, (w > threshold).astype(np.int64), target_name=label, task="binary",
                 class_names=(f"wage <= {threshold:g}", label),
                 description=f"ISLP Wage: 3000 male workers, Mid-Atlantic region, 2003-2009; label "
                             f"{label} (thousands of dollars). {_SOURCE}")


def default() -> Dataset:
    """ISLP ``Default``: 10000 (simulated) credit-card customers; binary task.

    Label ``default`` (``"Yes"`` = 1: 333 of 10000). Features: ``student``
    (categorical, one-hot), ``balance``, ``income`` (continuous): x is (10000, 4).

    Examples
    --------
    >>> data = default()
    >>> data.x.shape, data.class_names, data.features[0].kind
    ((10000, 4), ('No', 'Yes'), 'categorical')
    """
    t = read_csv("Default.csv")
    columns = [Column("student", "categorical", t["student"], ("No", "Yes")),
               Column("balance", "continuous", _numbers(t, "balance")),
               Column("income", "continuous", _numbers(t, "income"))]
    y = _yes_no(t["default"], "default")
    return build("default", columns, y, target_name="default", task="binary", class_names=("No", "Yes"),
                 description=f"ISLP Default: 10000 simulated credit-card customers; label default "
                             f"(Yes = 1). {_SOURCE}")


def credit() -> Dataset:
    """ISLP ``Credit``: 400 credit-card holders; regression of ``Balance``.

    Features: ``Income`` (continuous, thousands of dollars); ``Limit``, ``Rating``,
    ``Cards``, ``Age``, ``Education`` (integer); ``Gender``, ``Student``,
    ``Married``, ``Ethnicity`` (categorical, one-hot): x is (400, 15). The ``ID``
    column is a row index and is dropped.

    Examples
    --------
    >>> data = credit()
    >>> data.x.shape, data.task, data.target_name
    ((400, 15), 'regression', 'Balance')
    >>> one_hot_groups(data)["Ethnicity"]                    # the columns of a categorical feature
    (12, 13, 14)
    """
    t = read_csv("Credit.csv")
    columns = [Column("Income", "continuous", _numbers(t, "Income"))]
    columns += [Column(n, "integer", _numbers(t, n)) for n in ("Limit", "Rating", "Cards", "Age", "Education")]
    columns += [Column(n, "categorical", t[n]) for n in ("Gender", "Student", "Married", "Ethnicity")]
    return build("credit", columns, _numbers(t, "Balance"), target_name="Balance", task="regression",
                 class_names=None,
                 description=f"ISLP Credit: 400 credit-card holders; target Balance (dollars). {_SOURCE}")


def _yes_no(values: np.ndarray, name: str) -> np.ndarray:
    unknown = set(values.tolist()) - {"Yes", "No"}
    if unknown:
        raise ValueError(f"column {name!r} has values other than Yes/No: {sorted(unknown)}")
    return (values == "Yes").astype(np.int64)
