"""The :class:`Dataset` and :class:`Feature` records and the code that builds them.

Standardization convention (shared by every loader): ``mean`` and ``scale`` are
the mean and the population standard deviation (``ddof=0``) of each numeric
column over all rows of the loaded data; a constant numeric column gets scale 1.
One-hot columns get mean 0 and scale 1, so they stay exactly 0/1 in
standardized units and a one-hot group still sums to 1 there: constraints on
one-hot groups, and :meth:`Dataset.decode`, mean the same thing in both units.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from jaxprobe._inputs import check_int

__all__ = ["Dataset", "Feature", "FeatureKind", "Task", "one_hot_groups"]

FeatureKind = Literal["continuous", "integer", "categorical"]
Task = Literal["binary", "multiclass", "regression"]

_KINDS = ("continuous", "integer", "categorical")
_TASKS = ("binary", "multiclass", "regression")


@dataclasses.dataclass(frozen=True)
class Feature:
    """One ORIGINAL feature and where it lives in ``Dataset.x``.

    Attributes:
        name: the feature's name in the source data.
        kind: ``"continuous"``, ``"integer"`` or ``"categorical"``.
        columns: indices into the columns of ``x``: one for a numeric feature,
            the one-hot group (one column per category, in ``categories`` order)
            for a categorical one.
        categories: category names (categorical only, else ``None``).
        range: observed ``(min, max)`` of the feature's (float32) column over all
            loaded rows (numeric only, else ``None``).

    Examples
    --------
    >>> from jaxprobe import datasets
    >>> datasets.credit().features[-1]                       # doctest: +ELLIPSIS
    Feature(name='Ethnicity', kind='categorical', columns=(12, 13, 14), categories=(...), range=None)
    """

    name: str
    kind: FeatureKind
    columns: tuple[int, ...]
    categories: tuple[str, ...] | None = None
    range: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}, got {self.kind!r}")
        if self.kind == "categorical":
            if self.categories is None or len(self.categories) != len(self.columns):
                raise ValueError(f"categories must name each of the {len(self.columns)} "
                                 f"one-hot columns of {self.name!r}")
        elif len(self.columns) != 1 or self.range is None:
            raise ValueError(f"numeric feature {self.name!r} needs one column and a range")

    @property
    def is_categorical(self) -> bool:
        return self.kind == "categorical"

    @property
    def column(self) -> int:
        """The single column index of a numeric feature (ValueError for a categorical one)."""
        if self.is_categorical:
            raise ValueError(f"feature {self.name!r} is categorical: use .columns (its one-hot group)")
        return self.columns[0]


def _readonly(a: Any, dtype: Any) -> np.ndarray:
    out = np.array(a, dtype=dtype, copy=True)
    out.setflags(write=False)
    return out


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Dataset:
    """A loaded table, ready for a model: numeric features as is, categoricals one-hot.

    Attributes:
        name: short name of the data set (``"wage"``, ``"breast_cancer"``, ...).
        x: ``(n, d)`` float32 features in original units (read-only).
        y: ``(n,)`` int64 class labels ``0..k-1`` for classification, float32
            targets for regression (read-only).
        feature_names: ``d`` column names; one-hot columns are ``"name=category"``.
        features: the original features (:class:`Feature`), in column order.
        target_name: name of the target (for ``wage``: ``"wage > 100"``).
        task: ``"binary"``, ``"multiclass"`` or ``"regression"``.
        class_names: name of each label value (``None`` for regression).
        mean, scale: ``(d,)`` float64 standardization; see the module docstring
            (numeric: mean and population sd over all rows, one-hot: 0 and 1).
        description: provenance and notes.

    Splits made by :meth:`train_test_split` or :meth:`subset` keep the parent's
    ``features`` (ranges included), ``mean`` and ``scale``, so one transform
    serves every split.

    Examples
    --------
    >>> from jaxprobe import datasets
    >>> data = datasets.credit()                            # numeric features as is, categoricals one-hot
    >>> data.x.shape, data.feature_names[:2], data.features[-1].kind
    ((400, 15), ('Income', 'Limit'), 'categorical')
    >>> z = data.standardize(data.x)                         # what a model (and a prior N(0, I)) sees
    >>> bool(np.allclose(data.unstandardize(z), data.x))
    True
    >>> train, test = data.train_test_split(seed=0)
    >>> len(train.y) + len(test.y)
    400
    """

    name: str
    x: np.ndarray
    y: np.ndarray
    feature_names: tuple[str, ...]
    features: tuple[Feature, ...]
    target_name: str
    task: Task
    class_names: tuple[str, ...] | None
    mean: np.ndarray
    scale: np.ndarray
    description: str = ""

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: store the checked, read-only copies
        if self.task not in _TASKS:
            raise ValueError(f"task must be one of {_TASKS}, got {self.task!r}")
        x = _readonly(self.x, np.float32)
        if x.ndim != 2:
            raise ValueError(f"x must be 2-D (n, d), got shape {x.shape}")
        n, d = x.shape
        y = _readonly(self.y, np.float32 if self.task == "regression" else np.int64)
        if self.task != "regression" and not np.array_equal(y, np.asarray(self.y)):
            raise ValueError("y must hold integer class labels for a classification task")
        if y.shape != (n,):
            raise ValueError(f"y must have shape ({n},), got {y.shape}")
        set_(self, "x", x)
        set_(self, "y", y)
        set_(self, "feature_names", tuple(self.feature_names))
        set_(self, "features", tuple(self.features))
        if len(self.feature_names) != d:
            raise ValueError(f"feature_names must have {d} entries, got {len(self.feature_names)}")
        used = sorted(c for f in self.features for c in f.columns)
        if used != list(range(d)):
            raise ValueError("the features' columns must cover the columns of x exactly once")
        for key in ("mean", "scale"):
            value = _readonly(getattr(self, key), np.float64)
            if value.shape != (d,):
                raise ValueError(f"{key} must have shape ({d},), got {value.shape}")
            set_(self, key, value)
        if not np.all(self.scale > 0):
            raise ValueError("scale must be positive")
        if self.task == "regression":
            if self.class_names is not None:
                raise ValueError("class_names must be None for regression")
        else:
            if self.class_names is None:
                raise ValueError(f"class_names is required for task {self.task!r}")
            set_(self, "class_names", tuple(self.class_names))
            k = len(self.class_names)
            if (self.task == "binary") != (k == 2) or k < 2:
                raise ValueError(f"task {self.task!r} does not fit {k} class names")
            if n and (y.min() < 0 or y.max() >= k):
                raise ValueError(f"labels must lie in 0..{k - 1}")

    def __repr__(self) -> str:
        n, d = self.x.shape
        return (f"Dataset(name={self.name!r}, n={n}, d={d}, features={len(self.features)}, "
                f"task={self.task!r}, target={self.target_name!r})")

    def __len__(self) -> int:
        return self.x.shape[0]

    # ------------------------------------------------------------ metadata

    @property
    def one_hot_groups(self) -> dict[str, tuple[int, ...]]:
        """Column indices of each categorical feature's one-hot group, by feature name.

        Examples
        --------
        >>> from jaxprobe.datasets import credit
        >>> credit().one_hot_groups
        {'Gender': (6, 7), 'Student': (8, 9), 'Married': (10, 11), 'Ethnicity': (12, 13, 14)}
        """
        return one_hot_groups(self)

    @property
    def numeric_columns(self) -> tuple[int, ...]:
        """Indices of the numeric (continuous and integer) columns of ``x``."""
        return tuple(f.columns[0] for f in self.features if not f.is_categorical)

    def feature(self, name: str) -> Feature:
        """The :class:`Feature` called ``name`` (ValueError if there is none)."""
        for f in self.features:
            if f.name == name:
                return f
        raise ValueError(f"name: no feature {name!r} in {self.name!r}; "
                         f"features are {[f.name for f in self.features]}")

    def columns_of(self, *names: str) -> tuple[int, ...]:
        """Column indices of the named original features (a one-hot group counts whole),
        e.g. to hold immutable features fixed: ``ds.columns_of("age", "race")``."""
        return tuple(c for name in names for c in self.feature(name).columns)

    # ------------------------------------------------------------ transforms

    def _check_last_axis(self, a: np.ndarray, arg: str) -> None:
        d = self.x.shape[1]
        if a.ndim == 0 or a.shape[-1] != d:
            raise ValueError(f"{arg} must have shape (..., {d}), got {a.shape}")

    def standardize(self, x: Any) -> np.ndarray:
        """``(x − mean) / scale`` for ``x`` of shape ``(..., d)`` in original units.

        Computed in float64; the result is float32 for float32 (or integer) input and
        float64 for float64 input, so a float64 round trip with :meth:`unstandardize`
        is exact to rounding (~1e-15 relative).
        """
        a = np.asarray(x)
        self._check_last_axis(a, "x")
        return ((a - self.mean) / self.scale).astype(_out_dtype(a))

    def unstandardize(self, z: Any) -> np.ndarray:
        """``z · scale + mean``: standardized ``(..., d)`` back to original units.

        Computed in float64 (one temporary, added to in place: a block of draws converts at twice the speed of
        ``(z * scale + mean)``); the result's dtype as :meth:`standardize`'s.
        """
        a = np.asarray(z)
        self._check_last_axis(a, "z")
        x = np.multiply(a, self.scale, dtype=np.float64)
        x += self.mean
        return x.astype(_out_dtype(a), copy=False)

    def decode(self, x: Any, *, standardized: bool = False) -> dict[str, Any]:
        """Report rows feature by feature, one-hot blocks turned back into category names.

        Args:
            x: ``(n, d)`` or ``(d,)`` in original units (or standardized units
                with ``standardized=True``).

        Returns:
            ``{feature name: values}`` in feature order: for a categorical feature the
            category with the largest entry in its block (argmax; a tie goes to the
            first category), as an ``(n,)`` array of str; for a numeric feature its
            ``(n,)`` float64 values in original units. A ``(d,)`` input gives a str
            or float per feature.
        """
        a = np.asarray(x, dtype=np.float64)
        self._check_last_axis(a, "x")
        if a.ndim > 2:
            raise ValueError(f"x must have shape (n, {a.shape[-1]}) or ({a.shape[-1]},), got {a.shape}")
        if standardized:
            a = self.unstandardize(a)
        rows = np.atleast_2d(a)
        out: dict[str, Any] = {}
        for f in self.features:
            if f.is_categorical:
                assert f.categories is not None
                values: np.ndarray = np.asarray(f.categories)[np.argmax(rows[:, list(f.columns)], axis=1)]
            else:
                values = rows[:, f.columns[0]]
            out[f.name] = values if a.ndim == 2 else values[0].item()
        return out

    # ------------------------------------------------------------ splits

    def subset(self, index: Any) -> Dataset:
        """The rows ``index`` (integer indices or a boolean mask of length n), metadata kept."""
        idx = np.asarray(index)
        if idx.dtype == bool:
            if idx.shape != (len(self),):
                raise ValueError(f"index: a boolean mask must have shape ({len(self)},), got {idx.shape}")
        elif idx.ndim == 1 and idx.size == 0:
            idx = idx.astype(np.intp)
        elif idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
            raise ValueError("index must be a 1-D array of integer indices or a boolean mask")
        return dataclasses.replace(self, x=self.x[idx], y=self.y[idx])

    def train_test_split(self, seed: int = 0, test_fraction: float = 0.25, *,
                         stratify: bool | None = None) -> tuple[Dataset, Dataset]:
        """Deterministic split into ``(train, test)`` datasets.

        Args:
            seed: non-negative int for ``numpy.random.default_rng``.
            test_fraction: share of rows in the test set, in (0, 1).
            stratify: split each class separately so both parts keep the class
                proportions (default: True for classification; regression cannot
                be stratified).

        Each class (or, unstratified, the whole table) of m rows puts
        ``round(test_fraction · m)`` rows, at least 1 and at most m − 1, into the test
        set. Rows come out shuffled; the same seed gives the same split.
        """
        _check_seed(seed)
        test_fraction = _check_real(test_fraction, "test_fraction")
        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"test_fraction must lie strictly between 0 and 1, got {test_fraction}")
        if stratify is None:
            stratify = self.task != "regression"
        elif not isinstance(stratify, bool):
            raise ValueError(f"stratify must be True, False or None, got {stratify!r}")
        if stratify and self.task == "regression":
            raise ValueError("stratify=True needs a classification task; this one is regression")
        rng = np.random.default_rng(seed)
        if stratify:
            strata = [np.flatnonzero(self.y == label) for label in np.unique(self.y)]
        else:
            strata = [np.arange(len(self))]
        train, test = [], []
        for rows in strata:
            m = len(rows)
            if m < 2:
                raise ValueError("cannot split: a class (or the table) has fewer than 2 rows")
            k = min(max(math.floor(test_fraction * m + 0.5), 1), m - 1)
            perm = rng.permutation(rows)
            test.append(perm[:k])
            train.append(perm[k:])
        train_idx = rng.permutation(np.concatenate(train))
        test_idx = rng.permutation(np.concatenate(test))
        return self.subset(train_idx), self.subset(test_idx)


def one_hot_groups(dataset: Dataset) -> dict[str, tuple[int, ...]]:
    """``{categorical feature name: column indices of its one-hot group}``, in feature order.

    Each group's columns sum to exactly 1 in every row of ``dataset.x``.

    Examples
    --------
    >>> from jaxprobe.datasets import credit
    >>> data = credit()
    >>> one_hot_groups(data)
    {'Gender': (6, 7), 'Student': (8, 9), 'Married': (10, 11), 'Ethnicity': (12, 13, 14)}
    >>> bool(np.all(data.x[:, [12, 13, 14]].sum(axis=1) == 1))        # one category per row
    True
    """
    return {f.name: f.columns for f in dataset.features if f.is_categorical}


def _out_dtype(a: np.ndarray) -> type[np.floating]:
    return np.float64 if a.dtype == np.float64 else np.float32


# ---------------------------------------------------------------- argument checks


def _check_real(value: Any, arg: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{arg} must be a finite real number, got {value!r}")
    return float(value)


def _check_seed(seed: Any) -> int:
    return check_int(seed, "seed", minimum=0)


# ---------------------------------------------------------------- building


@dataclasses.dataclass(frozen=True)
class Column:
    """A raw column before encoding: numeric ``values`` (float) or categorical (str).

    ``categories`` fixes the category order (default: sorted unique values).
    """

    name: str
    kind: FeatureKind
    values: np.ndarray
    categories: tuple[str, ...] | None = None


def build(name: str, columns: Sequence[Column], y: Any, *, target_name: str, task: Task,
          class_names: Sequence[str] | None, description: str) -> Dataset:
    """Encode raw columns into a :class:`Dataset` (one-hot for categoricals).

    A categorical column with a single level carries no information and is dropped
    (noted in the description).
    """
    blocks: list[np.ndarray] = []
    names: list[str] = []
    features: list[Feature] = []
    dropped: list[str] = []
    numeric: list[int] = []
    col = 0
    for c in columns:
        if c.kind == "categorical":
            values = np.asarray(c.values, dtype=str)
            cats = c.categories if c.categories is not None else tuple(sorted(set(values.tolist())))
            unknown = set(values.tolist()) - set(cats)
            if unknown:
                raise ValueError(f"column {c.name!r} has values outside its categories: {sorted(unknown)}")
            if len(cats) < 2:
                dropped.append(f"{c.name} (single level {cats[0]!r})" if cats else c.name)
                continue
            onehot = (values[:, None] == np.asarray(cats)[None, :]).astype(np.float64)
            blocks.append(onehot)
            names.extend(f"{c.name}={cat}" for cat in cats)
            features.append(Feature(c.name, "categorical", tuple(range(col, col + len(cats))), tuple(cats)))
            col += len(cats)
        else:
            values = np.asarray(c.values, dtype=np.float64)
            if c.kind == "integer" and not np.all(values == np.round(values)):
                raise ValueError(f"column {c.name!r} is declared integer but has fractional values")
            blocks.append(values[:, None])
            names.append(c.name)
            stored = values.astype(np.float32)  # the range of the values x holds
            rng = (float(stored.min()), float(stored.max()))
            features.append(Feature(c.name, c.kind, (col,), None, rng))
            numeric.append(col)
            col += 1
    x = np.concatenate(blocks, axis=1).astype(np.float32)
    mean = np.zeros(col)
    scale = np.ones(col)
    if numeric:
        xn = x[:, numeric].astype(np.float64)  # statistics of the float32 data actually stored
        sd = xn.std(axis=0)
        mean[numeric] = xn.mean(axis=0)
        scale[numeric] = np.where(sd > 0, sd, 1.0)
    if dropped:
        description += f" Dropped (one level only): {', '.join(dropped)}."
    return Dataset(name=name, x=x, y=y, feature_names=tuple(names), features=tuple(features),
                   target_name=target_name, task=task,
                   class_names=None if class_names is None else tuple(class_names),
                   mean=mean, scale=scale, description=description)
