"""jaxprobe.datasets: real tables, one-hot encoding, standardization, splits (NumPy only, no JAX)."""

import csv
import dataclasses
import io
from importlib import resources

import numpy as np
import pytest

from jaxprobe import datasets
from jaxprobe.datasets import Dataset, Feature, one_hot_groups

ISLP_FILES = ("Wage.csv", "Default.csv", "Credit.csv", "LICENSE-ISLP.txt")


def raw_csv(filename):
    """The packaged CSV as a list of dicts, read independently of the loaders."""
    text = (resources.files("jaxprobe.datasets") / "data" / filename).read_text(encoding="utf-8")
    return list(csv.DictReader(io.StringIO(text)))


@pytest.fixture(scope="module")
def loaded():
    """Every data set once, with default options (keeps the file fast)."""
    return {name: datasets.load(name) for name in datasets.available()}


# ---------------------------------------------------------------- sizes and metadata

SHAPES = {
    "breast_cancer": (569, 30, "binary"),
    "wine": (178, 13, "multiclass"),
    "iris": (150, 4, "multiclass"),
    "digits": (1797, 64, "multiclass"),
    "diabetes": (442, 11, "regression"),
    "circles": (1000, 2, "binary"),
    "moons": (1000, 2, "binary"),
    "wage": (3000, 22, "binary"),
    "default": (10000, 4, "binary"),
    "credit": (400, 15, "regression"),
}


def test_available_names():
    assert set(datasets.available()) == set(SHAPES)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shapes_dtypes_and_metadata(loaded, name):
    ds = loaded[name]
    n, d, task = SHAPES[name]
    assert ds.x.shape == (n, d) and ds.x.dtype == np.float32
    assert ds.y.shape == (n,) and len(ds) == n
    assert ds.task == task
    if task == "regression":
        assert ds.y.dtype == np.float32 and ds.class_names is None
    else:
        assert ds.y.dtype == np.int64
        assert set(np.unique(ds.y)) == set(range(len(ds.class_names)))
    assert len(ds.feature_names) == d and len(set(ds.feature_names)) == d
    assert sorted(c for f in ds.features for c in f.columns) == list(range(d))
    assert ds.mean.shape == ds.scale.shape == (d,)
    for f in ds.features:
        if f.is_categorical:
            assert [ds.feature_names[c] for c in f.columns] == [f"{f.name}={cat}" for cat in f.categories]
            assert f.range is None
        else:
            assert ds.feature_names[f.column] == f.name and f.categories is None
    assert np.isfinite(ds.x).all() and np.isfinite(ds.y).all()
    assert name in repr(ds)


def test_wage_features(loaded):
    ds = loaded["wage"]
    assert [f.name for f in ds.features] == ["year", "age", "maritl", "race", "education", "jobclass",
                                             "health", "health_ins"]
    assert [f.kind for f in ds.features[:2]] == ["integer", "integer"]
    assert not any("wage" in name for name in ds.feature_names)  # wage and logwage would leak the label
    assert "region" not in [f.name for f in ds.features] and "region" in ds.description  # one level only
    assert "race=2. Black" in ds.feature_names
    assert ds.feature("education").categories == ("1. < HS Grad", "2. HS Grad", "3. Some College",
                                                   "4. College Grad", "5. Advanced Degree")
    assert ds.columns_of("age", "race") == (1, 7, 8, 9, 10)
    with pytest.raises(ValueError, match="name: no feature 'region'"):
        ds.feature("region")


def test_default_and_credit_features(loaded):
    dflt, cred = loaded["default"], loaded["credit"]
    assert dflt.feature_names == ("student=No", "student=Yes", "balance", "income")
    assert [f.kind for f in dflt.features] == ["categorical", "continuous", "continuous"]
    assert cred.target_name == "Balance"
    kinds = {f.name: f.kind for f in cred.features}
    assert kinds == {"Income": "continuous", "Limit": "integer", "Rating": "integer", "Cards": "integer",
                     "Age": "integer", "Education": "integer", "Gender": "categorical",
                     "Student": "categorical", "Married": "categorical", "Ethnicity": "categorical"}
    assert cred.feature("Gender").categories == ("Female", "Male")  # the CSV's " Male" is stripped
    assert cred.feature("Ethnicity").categories == ("African American", "Asian", "Caucasian")


def test_sklearn_data_match_sklearn(loaded):
    from sklearn import datasets as skd

    bc = skd.load_breast_cancer()
    np.testing.assert_array_equal(loaded["breast_cancer"].x, bc.data.astype(np.float32))
    np.testing.assert_array_equal(loaded["breast_cancer"].y, 1 - bc.target)  # 1 = malignant
    assert loaded["breast_cancer"].class_names == ("benign", "malignant")
    assert loaded["breast_cancer"].y.sum() == 212

    raw = skd.load_diabetes(scaled=False)
    ds = loaded["diabetes"]
    sex = ds.feature("sex")
    assert sex.categories == ("1", "2")
    np.testing.assert_array_equal(ds.x[:, sex.columns[1]], raw.data[:, 1] == 2)
    np.testing.assert_array_equal(ds.x[:, ds.feature("bmi").column], raw.data[:, 2].astype(np.float32))
    np.testing.assert_allclose(ds.y, raw.target)
    assert {f.name for f in ds.features if f.kind == "integer"} == {"age", "s1", "s6"}

    digits = loaded["digits"]
    assert all(f.kind == "integer" for f in digits.features)
    assert digits.x.min() == 0 and digits.x.max() == 16 and np.all(digits.x == np.round(digits.x))
    assert digits.feature_names[9] == "pixel_1_1"
    np.testing.assert_array_equal(digits.x[5].reshape(8, 8), skd.load_digits().images[5])
    wine = loaded["wine"]
    assert {f.name for f in wine.features if f.kind == "integer"} == {"magnesium", "proline"}


# ---------------------------------------------------------------- one-hot groups and decoding


@pytest.mark.parametrize("name", ["wage", "default", "credit", "diabetes"])
def test_one_hot_groups_sum_to_one(loaded, name):
    ds = loaded[name]
    groups = one_hot_groups(ds)
    assert groups == ds.one_hot_groups and groups
    for cols in groups.values():
        block = ds.x[:, list(cols)]
        assert set(np.unique(block)) <= {0.0, 1.0}
        np.testing.assert_array_equal(block.sum(axis=1), 1.0)
        assert np.all(block.sum(axis=0) > 0)  # every category occurs
    grouped = {c for cols in groups.values() for c in cols}
    assert grouped.isdisjoint(ds.numeric_columns) and len(grouped) + len(ds.numeric_columns) == ds.x.shape[1]


def test_no_one_hot_groups_for_numeric_tables(loaded):
    assert one_hot_groups(loaded["breast_cancer"]) == {}
    assert loaded["digits"].numeric_columns == tuple(range(64))


ROWS = [0, 1, 2, 57, 399]


@pytest.mark.parametrize(("name", "filename", "categorical"), [
    ("wage", "Wage.csv", ["maritl", "race", "education", "jobclass", "health", "health_ins"]),
    ("default", "Default.csv", ["student"]),
    ("credit", "Credit.csv", ["Gender", "Student", "Married", "Ethnicity"]),
])
def test_decode_gives_the_csv_strings(loaded, name, filename, categorical):
    ds, raw = loaded[name], raw_csv(filename)
    decoded = ds.decode(ds.x[ROWS])
    assert list(decoded) == [f.name for f in ds.features]
    for column in categorical:
        assert list(decoded[column]) == [raw[i][column].strip() for i in ROWS]
    for f in ds.features:
        if not f.is_categorical:
            np.testing.assert_allclose(decoded[f.name], [float(raw[i][f.name]) for i in ROWS], rtol=1e-6)
    one = ds.decode(ds.x[ROWS[1]])  # a single row gives scalars
    assert one[categorical[0]] == raw[ROWS[1]][categorical[0]].strip()
    # decoding standardized rows gives the same report
    z = ds.standardize(ds.x[ROWS].astype(np.float64))
    again = ds.decode(z, standardized=True)
    for column in categorical:
        assert list(again[column]) == list(decoded[column])


def test_decode_uses_argmax_for_relaxed_one_hot(loaded):
    ds = loaded["wage"]
    row = np.array(ds.x[0], dtype=np.float64)
    race = ds.feature("race").columns
    row[list(race)] = [0.1, 0.2, 0.6, 0.1]
    assert ds.decode(row)["race"] == "3. Asian"
    assert ds.decode(row)["age"] == 18.0
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., 22\)"):
        ds.decode(np.zeros(5))


# ---------------------------------------------------------------- standardization


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_standardize_round_trip_and_moments(loaded, name):
    ds = loaded[name]
    x64 = ds.x.astype(np.float64)
    z = ds.standardize(x64)
    assert z.dtype == np.float64
    assert np.all(np.abs(ds.unstandardize(z) - x64) <= 1e-12 * (np.abs(x64) + ds.scale))
    z32 = ds.standardize(ds.x)
    assert z32.dtype == np.float32
    back = ds.unstandardize(z32)
    assert back.dtype == np.float32
    assert np.all(np.abs(back - x64) <= 1e-6 * (np.abs(x64) + ds.scale))
    num = list(ds.numeric_columns)
    varying = [c for c in num if ds.x[:, c].std() > 0]
    np.testing.assert_allclose(z[:, num].mean(axis=0), 0.0, atol=1e-9)
    np.testing.assert_allclose(z[:, varying].std(axis=0), 1.0, rtol=1e-9)
    onehot = [c for cols in ds.one_hot_groups.values() for c in cols]
    np.testing.assert_array_equal(ds.mean[onehot], 0.0)
    np.testing.assert_array_equal(ds.scale[onehot], 1.0)
    np.testing.assert_array_equal(z[:, onehot], x64[:, onehot])  # one-hot columns stay 0/1


def test_constant_columns_get_scale_one(loaded):
    digits = loaded["digits"]
    constant = [c for c in range(64) if digits.x[:, c].std() == 0]
    assert constant  # pixel_0_0 is always blank
    np.testing.assert_array_equal(digits.scale[constant], 1.0)


def test_standardize_shapes(loaded):
    ds = loaded["default"]
    assert ds.standardize(ds.x[0]).shape == (4,)
    assert ds.standardize(ds.x[:6].reshape(2, 3, 4)).shape == (2, 3, 4)
    np.testing.assert_allclose(ds.unstandardize(np.zeros(4)), ds.mean)
    with pytest.raises(ValueError, match=r"z must have shape \(\.\.\., 4\)"):
        ds.unstandardize(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="x must have shape"):
        ds.standardize(1.0)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_ranges_contain_the_data(loaded, name):
    ds = loaded[name]
    for f in ds.features:
        if f.is_categorical:
            continue
        col = ds.x[:, f.column]
        assert f.range == (float(col.min()), float(col.max()))
        if f.kind == "integer":
            assert np.all(col == np.round(col))


def test_islp_ranges_match_the_csv(loaded):
    raw = raw_csv("Wage.csv")
    assert loaded["wage"].feature("age").range == (18.0, 80.0)
    assert loaded["wage"].feature("year").range == (2003.0, 2009.0)
    assert loaded["wage"].feature("age").range == (min(float(r["age"]) for r in raw),
                                                   max(float(r["age"]) for r in raw))
    assert loaded["credit"].feature("Cards").range == (1.0, 9.0)
    low, high = loaded["default"].feature("balance").range
    assert low == 0.0 and high == pytest.approx(2654.3226, rel=1e-6)


# ---------------------------------------------------------------- labels


def test_label_balance_matches_the_csv(loaded):
    wage_raw = np.array([float(r["wage"]) for r in raw_csv("Wage.csv")])
    assert loaded["wage"].y.sum() == np.sum(wage_raw > 100) == 1657
    assert loaded["wage"].target_name == "wage > 100" and datasets.WAGE_THRESHOLD == 100
    ninety = datasets.wage(threshold=90)
    assert ninety.y.sum() == np.sum(wage_raw > 90) and ninety.class_names == ("wage <= 90", "wage > 90")
    np.testing.assert_array_equal(ninety.x, loaded["wage"].x)

    default_raw = [r["default"] for r in raw_csv("Default.csv")]
    assert loaded["default"].y.sum() == default_raw.count("Yes") == 333
    np.testing.assert_array_equal(loaded["default"].y, [v == "Yes" for v in default_raw])

    balance = [float(r["Balance"]) for r in raw_csv("Credit.csv")]
    np.testing.assert_array_equal(loaded["credit"].y, balance)


def test_toy_generators(loaded):
    circles, moons = loaded["circles"], loaded["moons"]
    assert np.bincount(circles.y).tolist() == [500, 500] and np.bincount(moons.y).tolist() == [500, 500]
    exact = datasets.circles(n=200, noise=0.0, factor=0.3, seed=1)
    radius = np.linalg.norm(exact.x, axis=1)
    np.testing.assert_allclose(radius[exact.y == 0], 1.0, rtol=1e-6)
    np.testing.assert_allclose(radius[exact.y == 1], 0.3, rtol=1e-6)
    moon = datasets.moons(n=200, noise=0.0, seed=1)
    assert np.all(moon.x[moon.y == 0, 1] >= -1e-6) and np.all(moon.x[moon.y == 1, 1] <= 0.5 + 1e-6)
    np.testing.assert_array_equal(datasets.moons(n=50, seed=3).x, datasets.moons(n=50, seed=3).x)
    assert not np.array_equal(datasets.moons(n=50, seed=3).x, datasets.moons(n=50, seed=4).x)


# ---------------------------------------------------------------- splits


def _sorted_rows(ds):
    rows = np.column_stack([ds.x, ds.y])
    return rows[np.lexsort(rows.T[::-1])]


@pytest.mark.parametrize(("name", "fraction"), [("wage", 0.25), ("default", 0.2), ("iris", 0.3),
                                                ("digits", 0.5)])
def test_stratified_split_keeps_class_proportions(loaded, name, fraction):
    ds = loaded[name]
    train, test = ds.train_test_split(seed=7, test_fraction=fraction)
    assert len(train) + len(test) == len(ds)
    assert abs(len(test) - fraction * len(ds)) <= len(ds.class_names)
    np.testing.assert_array_equal(
        _sorted_rows(dataclasses.replace(ds, x=np.concatenate([train.x, test.x]),
                                         y=np.concatenate([train.y, test.y]))),
        _sorted_rows(ds))  # the two parts are a partition of the rows
    full, tr, te = (np.bincount(part.y, minlength=len(ds.class_names)) for part in (ds, train, test))
    assert np.all(np.abs(te - fraction * full) <= 0.5 + 1e-9)  # per class: rounded share
    np.testing.assert_array_equal(tr + te, full)
    for part in (train, test):  # metadata and standardization are the parent's
        assert part.features == ds.features and part.feature_names == ds.feature_names
        np.testing.assert_array_equal(part.mean, ds.mean)
        np.testing.assert_array_equal(part.scale, ds.scale)


def test_split_is_deterministic(loaded):
    ds = loaded["default"]
    a_train, a_test = ds.train_test_split(seed=3, test_fraction=0.1)
    b_train, b_test = ds.train_test_split(seed=3, test_fraction=0.1)
    np.testing.assert_array_equal(a_test.x, b_test.x)
    np.testing.assert_array_equal(a_train.y, b_train.y)
    c_test = ds.train_test_split(seed=4, test_fraction=0.1)[1]
    assert not np.array_equal(a_test.x, c_test.x)
    assert a_test.y.sum() == 33  # 333 defaults, 10 % of them


def test_regression_split(loaded):
    ds = loaded["credit"]
    train, test = ds.train_test_split(seed=0, test_fraction=0.25)
    assert (len(train), len(test)) == (300, 100)
    assert sorted(np.concatenate([train.y, test.y]).tolist()) == sorted(ds.y.tolist())
    with pytest.raises(ValueError, match="stratify=True needs a classification task"):
        ds.train_test_split(stratify=True)
    unstratified = loaded["wage"].train_test_split(seed=0, test_fraction=0.5, stratify=False)[1]
    assert len(unstratified) == 1500


def test_subset(loaded):
    ds = loaded["iris"]
    part = ds.subset(ds.y == 2)
    assert len(part) == 50 and set(part.y.tolist()) == {2}
    assert len(ds.subset([0, 5, 5])) == 3
    assert len(ds.subset([])) == 0
    with pytest.raises(ValueError, match="index"):
        ds.subset(np.array([True, False]))
    with pytest.raises(ValueError, match="index"):
        ds.subset([0.5, 1.5])


# ---------------------------------------------------------------- immutability and package data


def test_datasets_are_immutable(loaded):
    ds = loaded["wage"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        ds.x = ds.x
    for array in (ds.x, ds.y, ds.mean, ds.scale):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 0


def test_package_data_is_found_via_importlib_resources():
    folder = resources.files("jaxprobe.datasets") / "data"
    for filename in ISLP_FILES:
        assert (folder / filename).is_file(), filename
        assert datasets.data_file(filename).read_bytes() == (folder / filename).read_bytes()
    assert "Redistribution and use" in (folder / "LICENSE-ISLP.txt").read_text(encoding="utf-8")
    header = (folder / "Wage.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header == "year,age,maritl,race,education,region,jobclass,health,health_ins,logwage,wage"
    assert len(raw_csv("Wage.csv")) == 3000 and len(raw_csv("Default.csv")) == 10000
    assert len(raw_csv("Credit.csv")) == 400
    table = datasets.read_csv("Credit.csv")
    assert table["Gender"][0] == "Male" and table["ID"][-1] == "400"


def test_csv_loaders_need_no_pandas():
    import subprocess
    import sys

    code = ("import sys; sys.modules['pandas'] = None\n"
            "from jaxprobe.datasets import wage, default, credit\n"
            "print(len(wage()), len(default()), len(credit()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["3000", "10000", "400"]


# ---------------------------------------------------------------- bad arguments


@pytest.mark.parametrize("fraction", [0, 1, 1.5, -0.1, float("nan"), "0.2", True, None])
def test_bad_test_fraction(loaded, fraction):
    with pytest.raises(ValueError, match="test_fraction"):
        loaded["iris"].train_test_split(seed=0, test_fraction=fraction)


@pytest.mark.parametrize(("call", "arg", "error"), [
    (lambda ds: ds.train_test_split(seed=-1), "seed", ValueError),
    (lambda ds: ds.train_test_split(seed=1.5), "seed", TypeError),
    (lambda ds: ds.train_test_split(stratify="yes"), "stratify", ValueError),
    (lambda ds: datasets.circles(n=-5), "n", ValueError),
    (lambda ds: datasets.circles(n=1), "n", ValueError),
    (lambda ds: datasets.circles(n=10.0), "n", TypeError),
    (lambda ds: datasets.circles(noise=-0.1), "noise", ValueError),
    (lambda ds: datasets.circles(factor=1.0), "factor", ValueError),
    (lambda ds: datasets.circles(seed=-3), "seed", ValueError),
    (lambda ds: datasets.moons(n=0), "n", ValueError),
    (lambda ds: datasets.moons(noise=float("inf")), "noise", ValueError),
    (lambda ds: datasets.wage(threshold=1000), "threshold", ValueError),
    (lambda ds: datasets.wage(threshold="100"), "threshold", ValueError),
    (lambda ds: datasets.load("adult"), "name", ValueError),
    (lambda ds: datasets.load("wage", thresh=90), "thresh", ValueError),
    (lambda ds: datasets.load("default", seed=0), "seed", ValueError),
])
def test_bad_arguments_name_the_argument(loaded, call, arg, error):
    """A wrong value raises ValueError, a wrong type (seed=1.5, n=10.0) TypeError; each names the argument."""
    with pytest.raises(error, match=rf"\b{arg}\b"):
        call(loaded["iris"])


def test_load_passes_options():
    assert datasets.load("wage", threshold=90).target_name == "wage > 90"
    assert len(datasets.load("moons", n=10, seed=2)) == 10


def test_dataset_validates_its_fields(loaded):
    ds = loaded["iris"]
    with pytest.raises(ValueError, match="y must have shape"):
        dataclasses.replace(ds, y=ds.y[:-1])
    with pytest.raises(ValueError, match="integer class labels"):
        dataclasses.replace(ds, y=ds.y + 0.5)
    with pytest.raises(ValueError, match="labels must lie in 0..2"):
        dataclasses.replace(ds, y=ds.y + 1)
    with pytest.raises(ValueError, match="scale must be positive"):
        dataclasses.replace(ds, scale=np.zeros(4))
    with pytest.raises(ValueError, match="task"):
        dataclasses.replace(ds, task="ranking")
    with pytest.raises(ValueError, match="cover the columns"):
        dataclasses.replace(ds, features=ds.features[:3])
    with pytest.raises(ValueError, match="kind"):
        Feature("a", "ordinal", (0,), None, (0.0, 1.0))
    with pytest.raises(ValueError, match="categorical"):
        _ = loaded["wage"].feature("race").column
    assert isinstance(ds, Dataset) and ds.feature("sepal width (cm)").column == 1
