"""Real tabular data, ready for models and probes, with nothing downloaded at run time.

Every loader returns a :class:`Dataset`: ``x`` (n, d) float32 in original units
with categorical features one-hot encoded (columns ``"name=category"``), ``y``
(int labels or float targets), :class:`Feature` records for the original
features (kind, one-hot group or column, categories, observed range), and a
standardization (``mean``/``scale``; one-hot columns get 0 and 1) with
``standardize``/``unstandardize``, ``decode`` and ``train_test_split``.

- scikit-learn bundled data (needs scikit-learn): :func:`breast_cancer`,
  :func:`wine`, :func:`iris`, :func:`digits`, :func:`diabetes` (regression), and
  the generators :func:`circles`, :func:`moons`.
- ISLP tables shipped as package data (NumPy only): :func:`wage`,
  :func:`default`, :func:`credit` (regression).

``load("wage", threshold=90)`` loads by name and rejects unknown names and
options with a ValueError.

Example::

    ds = jaxprobe.datasets.wage()
    train, test = ds.train_test_split(seed=0, test_fraction=0.25)
    z = ds.standardize(train.x)                   # model inputs
    ds.decode(ds.unstandardize(z[:3]))["race"]    # -> array(['1. White', ...])
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from jaxprobe.datasets._core import Dataset, Feature, FeatureKind, Task, one_hot_groups
from jaxprobe.datasets._islp import (
    WAGE_THRESHOLD,
    credit,
    data_file,
    default,
    read_csv,
    wage,
)
from jaxprobe.datasets._sklearn import (
    breast_cancer,
    circles,
    diabetes,
    digits,
    iris,
    moons,
    wine,
)

__all__ = [
    "WAGE_THRESHOLD",
    "Dataset",
    "Feature",
    "FeatureKind",
    "Task",
    "available",
    "breast_cancer",
    "circles",
    "credit",
    "data_file",
    "default",
    "diabetes",
    "digits",
    "iris",
    "load",
    "moons",
    "one_hot_groups",
    "read_csv",
    "wage",
    "wine",
]

_LOADERS: dict[str, Callable[..., Dataset]] = {
    "breast_cancer": breast_cancer,
    "circles": circles,
    "credit": credit,
    "default": default,
    "diabetes": diabetes,
    "digits": digits,
    "iris": iris,
    "moons": moons,
    "wage": wage,
    "wine": wine,
}


def available() -> tuple[str, ...]:
    """Names accepted by :func:`load`.

    Examples
    --------
    >>> "iris" in available(), "moons" in available()
    (True, True)
    """
    return tuple(_LOADERS)


def load(name: str, **options: Any) -> Dataset:
    """Load the data set ``name`` (see :func:`available`) with the loader's keyword options.

    Raises ValueError for an unknown name or an option the loader does not take.

    Examples
    --------
    >>> data = load("moons", n=100, seed=0)                  # the same as moons(n=100, seed=0)
    >>> data.x.shape, data.task
    ((100, 2), 'binary')
    >>> load("mnist")                                        # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: ...
    """
    if name not in _LOADERS:
        raise ValueError(f"name must be one of {available()}, got {name!r}")
    loader = _LOADERS[name]
    accepted = tuple(inspect.signature(loader).parameters)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(f"{name}() got unknown argument(s) {unknown}; it takes {list(accepted) or 'none'}")
    return loader(**options)
