"""Loaders for scikit-learn's bundled data (``load_*``) and its 2-D toy generators (``make_*``).

scikit-learn is an optional dependency (``pip install 'jaxprobe[demo]'``); it is
imported when a loader here is called. Only ``load_*``/``make_*`` are used: the
``fetch_*`` loaders download and do not work offline.

A numeric feature is of kind ``"integer"`` when all its values are whole numbers
(wine: magnesium, proline; diabetes: age, s1, s6; digits: all 64 pixels), else
``"continuous"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from jaxprobe._inputs import check_int
from jaxprobe.datasets._core import (
    Column,
    Dataset,
    Task,
    _check_real,
    _check_seed,
    build,
)

__all__ = ["breast_cancer", "circles", "diabetes", "digits", "iris", "moons", "wine"]


def _sklearn_datasets() -> ModuleType:
    try:
        from sklearn import datasets
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("this loader needs scikit-learn: pip install 'jaxprobe[demo]'") from err
    return datasets


def _numeric(name: str, values: np.ndarray) -> Column:
    whole = bool(np.all(values == np.round(values)))
    return Column(name, "integer" if whole else "continuous", values)


def _from_bunch(name: str, bunch: Any, y: np.ndarray, *, task: Task, target_name: str,
                class_names: Sequence[str] | None, description: str,
                categorical: Sequence[str] = ()) -> Dataset:
    columns = []
    for j, feature in enumerate(bunch.feature_names):
        values = np.asarray(bunch.data[:, j], dtype=np.float64)
        if feature in categorical:
            columns.append(Column(str(feature), "categorical", np.array([f"{v:g}" for v in values])))
        else:
            columns.append(_numeric(str(feature), values))
    return build(name, columns, y, target_name=target_name, task=task, class_names=class_names,
                 description=description + " scikit-learn bundled data.")


def _names(values: Any) -> list[str]:
    return [str(v) for v in values]


def breast_cancer() -> Dataset:
    """Wisconsin diagnostic breast cancer: x (569, 30) continuous; binary label.

    Label 1 = malignant (212 of 569), 0 = benign: the reverse of scikit-learn's
    coding, matching ``jaxprobe demo``; ``class_names == ("benign", "malignant")``.

    Examples
    --------
    >>> data = breast_cancer()
    >>> data.x.shape, data.task, data.class_names
    ((569, 30), 'binary', ('benign', 'malignant'))
    """
    bunch = _sklearn_datasets().load_breast_cancer()
    return _from_bunch("breast_cancer", bunch, 1 - np.asarray(bunch.target), task="binary",
                       target_name="malignant", class_names=("benign", "malignant"),
                       description="Wisconsin diagnostic breast cancer; label 1 = malignant.")


def wine() -> Dataset:
    """UCI wine recognition: x (178, 13) (magnesium, proline integer); 3 cultivars.

    Examples
    --------
    >>> data = wine()
    >>> data.x.shape, data.task, len(data.class_names)
    ((178, 13), 'multiclass', 3)
    """
    bunch = _sklearn_datasets().load_wine()
    return _from_bunch("wine", bunch, bunch.target, task="multiclass", target_name="cultivar",
                       class_names=_names(bunch.target_names), description="UCI wine recognition.")


def iris() -> Dataset:
    """Fisher's iris: x (150, 4) continuous (cm); 3 species.

    Examples
    --------
    >>> data = iris()
    >>> data.x.shape, data.class_names
    ((150, 4), ('setosa', 'versicolor', 'virginica'))
    >>> data.feature_names[0]
    'sepal length (cm)'
    """
    bunch = _sklearn_datasets().load_iris()
    return _from_bunch("iris", bunch, bunch.target, task="multiclass", target_name="species",
                       class_names=_names(bunch.target_names), description="Fisher's iris.")


def diabetes() -> Dataset:
    """Efron et al. diabetes, in original units (``load_diabetes(scaled=False)``); regression.

    Features age, bmi, bp, s1..s6 numeric (age, s1, s6 integer) and sex categorical
    with categories ``"1"``, ``"2"`` (the source's codes), so x is (442, 11); the
    target is a disease-progression score one year after baseline.

    Examples
    --------
    >>> data = diabetes()
    >>> data.x.shape, data.task, data.class_names
    ((442, 11), 'regression', None)
    """
    bunch = _sklearn_datasets().load_diabetes(scaled=False)
    return _from_bunch("diabetes", bunch, bunch.target, task="regression", target_name="progression",
                       class_names=None, categorical=("sex",),
                       description="Efron et al. (2004) diabetes in original units; target: disease "
                                   "progression one year after baseline.")


def digits() -> Dataset:
    """UCI optical digits: 8x8 images flattened row by row to x (1797, 64); 10 classes.

    Each pixel ``pixel_<row>_<col>`` is an integer count 0..16 (kind ``"integer"``;
    a few border pixels are always 0 there and get scale 1).

    Examples
    --------
    >>> data = digits()
    >>> data.x.shape, data.class_names[:3]
    ((1797, 64), ('0', '1', '2'))
    """
    bunch = _sklearn_datasets().load_digits()
    return _from_bunch("digits", bunch, bunch.target, task="multiclass", target_name="digit",
                       class_names=_names(bunch.target_names),
                       description="UCI optical recognition of handwritten digits, 8x8 images.")


def circles(n: int = 1000, noise: float = 0.1, factor: float = 0.5, seed: int = 0) -> Dataset:
    """``sklearn.datasets.make_circles``: x (n, 2); label 0 = outer circle, 1 = inner.

    Args:
        n: number of points (>= 2), split evenly between the circles.
        noise: sd of Gaussian noise added to the points (>= 0).
        factor: inner radius over outer radius, in [0, 1).
        seed: non-negative int; the same seed gives the same points.

    Examples
    --------
    >>> data = circles(n=200, seed=1)
    >>> data.x.shape, data.class_names
    ((200, 2), ('outer', 'inner'))
    """
    n = check_int(n, "n", minimum=2)
    noise = _check_nonnegative(noise, "noise")
    factor = _check_real(factor, "factor")
    if not 0.0 <= factor < 1.0:
        raise ValueError(f"factor must lie in [0, 1), got {factor}")
    x, y = _sklearn_datasets().make_circles(n_samples=n, noise=noise, factor=factor,
                                            random_state=_check_seed(seed))
    return _toy("circles", x, y, ("outer", "inner"),
                f"make_circles(n_samples={n}, noise={noise:g}, factor={factor:g}, random_state={seed}).")


def moons(n: int = 1000, noise: float = 0.1, seed: int = 0) -> Dataset:
    """``sklearn.datasets.make_moons``: x (n, 2); label 0 = upper moon, 1 = lower.

    Args:
        n: number of points (>= 2), split evenly between the moons.
        noise: sd of Gaussian noise added to the points (>= 0).
        seed: non-negative int; the same seed gives the same points.

    Examples
    --------
    >>> data = moons(n=200)
    >>> data.x.shape, data.class_names, sorted(set(data.y.tolist()))
    ((200, 2), ('upper', 'lower'), [0, 1])
    """
    n = check_int(n, "n", minimum=2)
    noise = _check_nonnegative(noise, "noise")
    x, y = _sklearn_datasets().make_moons(n_samples=n, noise=noise, random_state=_check_seed(seed))
    return _toy("moons", x, y, ("upper", "lower"),
                f"make_moons(n_samples={n}, noise={noise:g}, random_state={seed}).")


def _check_nonnegative(value: Any, arg: str) -> float:
    value = _check_real(value, arg)
    if value < 0:
        raise ValueError(f"{arg} must be >= 0, got {value}")
    return value


def _toy(name: str, x: np.ndarray, y: np.ndarray, class_names: tuple[str, str], description: str) -> Dataset:
    columns = [Column(f"x{j}", "continuous", x[:, j]) for j in range(2)]
    return build(name, columns, y, target_name="label", task="binary", class_names=class_names,
                 description=description)

