"""from_sklearn(Pipeline): transformers + estimator as ONE JAX function of the raw row, against sklearn itself.

Every import is checked against the pipeline's own ``predict_proba`` (``predict`` for regressors) on
held-out rows to 1e-5, and as a pure JAX function: one row under ``jit``, a batch under ``vmap``,
finite gradients.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.compose import ColumnTransformer
from sklearn.decomposition import PCA
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import (FunctionTransformer, MaxAbsScaler, MinMaxScaler, OneHotEncoder,
                                   PolynomialFeatures, RobustScaler, StandardScaler)

import jaxprobe
from jaxprobe import probes
from jaxprobe.constraints import Box
from jaxprobe.models.sklearn import UnsupportedStepError, from_sklearn

RNG = np.random.default_rng(0)
NUM_ROWS = 400


def _numeric_data():
    """Five numeric features on different scales and offsets (as raw data are), a binary label."""
    x = RNG.normal(size=(NUM_ROWS, 5)) * np.array([1.0, 10.0, 0.1, 3.0, 50.0]) + np.array([0, 100, -2, 5, 0])
    y = (x[:, 0] + (x[:, 1] - 100) / 10 - x[:, 3] / 3 + RNG.normal(size=NUM_ROWS) > 0).astype(int)
    return x[:300], x[300:], y[:300]


def _mixed_frame():
    """A DataFrame of numeric columns, a string category, an integer-coded category and a 3-class label."""
    n = NUM_ROWS
    frame = pd.DataFrame({
        "age": RNG.normal(40, 12, n),
        "city": RNG.choice(["paris", "lyon", "nice", "lille"], n, p=[0.4, 0.3, 0.25, 0.05]),
        "income": RNG.lognormal(3, 0.5, n),
        "grade": RNG.integers(1, 5, n).astype(float),
        "score": RNG.normal(0, 1, n),
    })
    signal = (frame.age - 40) / 12 + (frame.city == "paris") - (frame.grade - 2.5) / 2 + RNG.normal(0, 0.5, n)
    label = np.digitize(signal, [-0.5, 0.5])
    return frame[:300], frame[300:], label[:300]


NUMERIC = _numeric_data()
MIXED = _mixed_frame()


def _fit(estimator, x, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MLP convergence warnings at small max_iter
        return estimator.fit(x, y)


def _check(pipeline, x_test, *, differentiable=True, atol=1e-5):
    """The import matches the pipeline on ``x_test`` and is a pure, jit/vmap/grad-able function of one row."""
    model = from_sklearn(pipeline)
    is_classifier = hasattr(pipeline, "predict_proba")
    reference = pipeline.predict_proba(x_test) if is_classifier else pipeline.predict(x_test)
    ours = model.predict_batch(x_test)
    assert ours.shape == reference.shape
    assert np.abs(ours - reference).max() <= atol * max(1.0, np.abs(reference).max()), np.abs(ours - reference).max()
    inputs = jnp.asarray(model.to_inputs(x_test))
    assert model.n_features_in_ == inputs.shape[1] == model.num_features
    # one row under jit, a batch under vmap, and a finite gradient of the raw row
    np.testing.assert_allclose(np.asarray(jax.jit(model)(inputs[0])), reference[0], atol=atol * 10)
    np.testing.assert_allclose(np.asarray(jax.vmap(model.fn)(inputs[:7])), ours[:7], atol=1e-6)
    gradient = jax.grad(lambda x: jnp.sum(model(x) * jnp.arange(1.0, 1.0 + np.size(reference[0]))))(inputs[0])
    assert gradient.shape == inputs[0].shape and np.all(np.isfinite(np.asarray(gradient)))
    assert model.differentiable == differentiable
    if differentiable:  # a continuous column moves the output
        assert np.abs(np.asarray(gradient)).max() > 0
    return model


# ---------------------------------------------------------------- each transformer, then LogisticRegression

TRANSFORMERS = [
    StandardScaler(),
    StandardScaler(with_mean=False),
    StandardScaler(with_std=False),
    MinMaxScaler(),
    MinMaxScaler(feature_range=(-1, 2), clip=True),
    RobustScaler(),
    RobustScaler(with_centering=False, quantile_range=(10, 90)),
    MaxAbsScaler(),
    PCA(n_components=3),
    PCA(n_components=4, whiten=True),
    FunctionTransformer(),
    "passthrough",
]


@pytest.mark.parametrize("transformer", TRANSFORMERS, ids=lambda t: repr(t) if isinstance(t, str) else str(t))
def test_each_transformer_before_logistic_regression(transformer):
    x_train, x_test, y_train = NUMERIC
    steps = [("scale", StandardScaler()), ("step", transformer)] if isinstance(transformer, PCA) \
        else [("step", transformer)]
    pipeline = _fit(Pipeline(steps + [("model", LogisticRegression(max_iter=2000))]), x_train, y_train)
    # held-out rows and rows outside the training range (MinMaxScaler's clip acts there)
    model = _check(pipeline, np.concatenate([x_test, 3 * x_test[:20]]))
    assert model.is_classifier and list(model.classes) == [0, 1] and model.feature_names_in_ is None


def test_pca_directly_on_raw_data_whitened():
    """PCA first (no scaler): centring before projecting keeps float32 within 1e-5 on offset data."""
    x_train, x_test, y_train = NUMERIC
    pipeline = _fit(make_pipeline(PCA(4, whiten=True), LogisticRegression(max_iter=2000)), x_train, y_train)
    _check(pipeline, x_test)


# ---------------------------------------------------------------- OneHotEncoder semantics

def _categorical_data():
    """Column 0 numeric, columns 1 and 2 integer-valued categories (one rare value), a binary label."""
    n = 500
    x = np.column_stack([RNG.normal(size=n), RNG.choice([0.0, 1.0, 2.0, 5.0], n, p=[0.4, 0.3, 0.27, 0.03]),
                         RNG.choice([10.0, 20.0], n)])
    y = (x[:, 0] + (x[:, 1] == 1) - (x[:, 2] == 20) + RNG.normal(scale=0.5, size=n) > 0).astype(int)
    return x[:350], x[350:], y[:350]


CATEGORICAL = _categorical_data()

ENCODERS = [
    OneHotEncoder(),
    OneHotEncoder(handle_unknown="ignore", sparse_output=False),
    OneHotEncoder(drop="first"),
    OneHotEncoder(drop="if_binary", handle_unknown="ignore"),
    OneHotEncoder(drop=[2.0, 20.0]),
    OneHotEncoder(min_frequency=30, handle_unknown="infrequent_if_exist"),
    OneHotEncoder(max_categories=2, handle_unknown="infrequent_if_exist", drop="first"),
    OneHotEncoder(min_frequency=30, handle_unknown="ignore"),
]


@pytest.mark.parametrize("encoder", ENCODERS, ids=str)
def test_one_hot_encoder_options_match_on_valid_and_unknown_categories(encoder):
    x_train, x_test, y_train = CATEGORICAL
    pipeline = _fit(make_pipeline(ColumnTransformer([("onehot", encoder, [1, 2])], remainder="passthrough"),
                                  LogisticRegression(max_iter=2000)), x_train, y_train)
    model = _check(pipeline, x_test)
    assert set(model.categorical_inputs) == {1, 2} and model.coded_inputs == ()
    np.testing.assert_array_equal(model.categorical_inputs[1], [0.0, 1.0, 2.0, 5.0])
    unknown = x_test[:10].copy()
    unknown[:, 1] = 3.0  # a value the encoder never saw
    if encoder.handle_unknown == "error":  # sklearn raises; the import gives zeros (tested below)
        with pytest.raises(ValueError, match="unknown categories"):
            pipeline.predict_proba(unknown)
        assert np.all(np.isfinite(model.predict_batch(unknown)))
    else:  # sklearn's own unknown-category encoding: zeros, or the infrequent category
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = pipeline.predict_proba(unknown)
        np.testing.assert_allclose(model.predict_batch(unknown), reference, atol=1e-5)


def test_handle_unknown_error_gives_zeros_on_values_outside_the_categories():
    """Where sklearn raises, the import encodes the unknown value as all zeros ('ignore'), documented."""
    x_train, x_test, y_train = CATEGORICAL
    strict = _fit(make_pipeline(ColumnTransformer([("onehot", OneHotEncoder(), [1])], remainder="passthrough"),
                                LogisticRegression()), x_train, y_train)
    lenient = make_pipeline(ColumnTransformer([("onehot", OneHotEncoder(handle_unknown="ignore"), [1])],
                                              remainder="passthrough"), LogisticRegression())
    lenient = _fit(lenient, x_train, y_train)
    unknown = x_test[:10].copy()
    unknown[:, 1] = 1.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = lenient.predict_proba(unknown)  # the same fit, sklearn's all-zeros encoding
    np.testing.assert_allclose(from_sklearn(strict).predict_batch(unknown), expected, atol=1e-5)


def test_missing_values_are_a_category():
    x_train, x_test, y_train = (array.copy() for array in CATEGORICAL)
    x_train[::7, 1] = np.nan
    x_test[::5, 1] = np.nan
    pipeline = _fit(make_pipeline(ColumnTransformer([("onehot", OneHotEncoder(), [1])], remainder="passthrough"),
                                  LogisticRegression()), x_train, y_train)
    model = _check(pipeline, x_test)
    assert np.isnan(model.categorical_inputs[1][-1])


def test_one_hot_nearest_reads_every_real_value_as_its_nearest_category():
    x_train, x_test, y_train = CATEGORICAL
    pipeline = _fit(make_pipeline(ColumnTransformer([("onehot", OneHotEncoder(), [1, 2])], remainder="passthrough"),
                                  LogisticRegression()), x_train, y_train)
    exact, nearest = from_sklearn(pipeline), from_sklearn(pipeline, one_hot="nearest")
    np.testing.assert_allclose(nearest.predict_batch(x_test), pipeline.predict_proba(x_test), atol=1e-5)
    relaxed = x_test.copy()
    relaxed[:, 1] += RNG.uniform(-0.45, 0.45, len(relaxed))  # categories 0, 1, 2, 5: these stay nearest
    relaxed[:, 2] += RNG.uniform(-4.9, 4.9, len(relaxed))   # categories 10, 20
    np.testing.assert_allclose(nearest.predict_batch(relaxed), pipeline.predict_proba(x_test), atol=1e-5)
    # exact: a value between categories is unknown (zeros), not the nearest category
    assert np.abs(exact.predict_batch(relaxed) - pipeline.predict_proba(x_test)).max() > 1e-3
    far = x_test[:3].copy()
    far[:, 1], far[:, 2] = [-7.0, 3.6, 40.0], [15.0, 15.0001, 1e6]  # a tie (15) goes to the lower category
    expected = x_test[:3].copy()
    expected[:, 1], expected[:, 2] = [0.0, 5.0, 5.0], [10.0, 20.0, 20.0]
    np.testing.assert_allclose(nearest.predict_batch(far), pipeline.predict_proba(expected), atol=1e-5)
    with pytest.raises(ValueError, match="one_hot must be one of"):
        from_sklearn(pipeline, one_hot="round")


# ---------------------------------------------------------------- ColumnTransformer on a DataFrame, by name

def test_column_transformer_by_name_on_a_dataframe_with_string_categories():
    frame_train, frame_test, y_train = MIXED
    columns = ColumnTransformer([
        ("numeric", StandardScaler(), ["age", "income"]),
        ("city", OneHotEncoder(handle_unknown="ignore"), ["city"]),
        ("grade", OneHotEncoder(drop="first"), ["grade"]),
    ], remainder="passthrough")
    pipeline = _fit(make_pipeline(columns, LogisticRegression(max_iter=2000)), frame_train, y_train)
    model = _check(pipeline, frame_test)
    assert list(model.feature_names_in_) == list(frame_train.columns) and model.n_features_in_ == 5
    assert model.coded_inputs == (1,)  # strings: the raw column holds the category's code
    np.testing.assert_array_equal(model.categorical_inputs[1], ["lille", "lyon", "nice", "paris"])
    codes = model.to_inputs(frame_test)
    assert set(np.unique(codes[:, 1])) <= {0.0, 1.0, 2.0, 3.0}
    # the DataFrame's column order does not matter (sklearn selects by name too), unknown cities are unknown
    shuffled = frame_test[list(reversed(frame_test.columns))].copy()
    shuffled.loc[shuffled.index[:5], "city"] = "rome"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = pipeline.predict_proba(shuffled)
    np.testing.assert_allclose(model.predict_batch(shuffled), reference, atol=1e-5)
    assert np.isnan(model.to_inputs(shuffled)[:5, 1]).all()


@pytest.mark.parametrize("selection", ["indices", "mask", "slice", "names-drop"])
def test_column_selections_and_remainders(selection):
    frame_train, frame_test, y_train = MIXED
    numeric = ["age", "income", "grade", "score"]
    x_train, x_test = frame_train[numeric].to_numpy(), frame_test[numeric].to_numpy()
    if selection == "indices":
        columns = ColumnTransformer([("scale", RobustScaler(), [3, 0]), ("onehot", OneHotEncoder(), [2])],
                                    remainder="passthrough")
    elif selection == "mask":
        columns = ColumnTransformer([("scale", MinMaxScaler(), np.array([True, True, False, False])),
                                     ("onehot", OneHotEncoder(), np.array([False, False, True, False]))],
                                    remainder=StandardScaler())
    elif selection == "slice":
        columns = ColumnTransformer([("scale", StandardScaler(), slice(0, 2)), ("skip", "drop", [2]),
                                     ("keep", "passthrough", [3])], transformer_weights={"scale": 2.0})
    else:
        x_train, x_test = frame_train[numeric], frame_test[numeric]
        columns = ColumnTransformer([("scale", StandardScaler(), ["score", "age"]),
                                     ("grade", make_pipeline(OneHotEncoder(), FunctionTransformer()), ["grade"]),
                                     ("empty", StandardScaler(), [])], remainder="drop")
    pipeline = _fit(make_pipeline(columns, LogisticRegression(max_iter=2000)), x_train, y_train)
    model = _check(pipeline, x_test)
    if selection != "slice":
        assert 2 in model.categorical_inputs


def test_column_selection_fallback_resolves_as_sklearn_does():
    """Without sklearn's recorded indices, selections resolve as sklearn's own _get_column_indices."""
    from sklearn.utils._indexing import _get_column_indices

    from jaxprobe.models.sklearn import _column_indices

    frame = MIXED[0]
    for spec in [0, -1, [3, 0], slice(1, 3), slice("city", "grade"), np.array([True, False, True, False, True]),
                 "age", ["score", "city"], []]:
        assert _column_indices(spec, 5, frame.columns) == list(_get_column_indices(frame, spec)), spec


# ---------------------------------------------------------------- chains and other final estimators

def _mixed_columns():
    return ColumnTransformer([("numeric", StandardScaler(), ["age", "income", "score"]),
                              ("categories", OneHotEncoder(handle_unknown="ignore"), ["city", "grade"])])


def test_chain_of_several_steps_into_an_mlp():
    frame_train, frame_test, y_train = MIXED
    pipeline = Pipeline([("columns", _mixed_columns()), ("identity", FunctionTransformer()),
                         ("scale", StandardScaler()), ("pca", PCA(6, whiten=True)),
                         ("mlp", MLPClassifier((16,), max_iter=300, random_state=0))])
    pipeline = _fit(pipeline, frame_train, y_train)
    model = _check(pipeline, frame_test)
    assert model.classes.tolist() == [0, 1, 2] and "pca: PCA" in model.estimator_name


def test_nested_pipelines_flatten():
    x_train, x_test, y_train = NUMERIC
    inner = make_pipeline(StandardScaler(), PCA(3))
    pipeline = _fit(Pipeline([("prep", inner), ("model", Pipeline([("scale", MaxAbsScaler()),
                                                                   ("clf", LogisticRegression())]))]),
                    x_train, y_train)
    _check(pipeline, x_test)


def test_gradient_boosting_after_a_column_transformer():
    """Trees read float32 features, as sklearn does; piecewise constant, so not differentiable (grad 0)."""
    frame_train, frame_test, y_train = MIXED
    pipeline = _fit(make_pipeline(_mixed_columns(), GradientBoostingClassifier(n_estimators=30, max_depth=3,
                                                                              random_state=0)),
                    frame_train, y_train)
    _check(pipeline, frame_test, differentiable=False)


@pytest.mark.parametrize("regressor", [Ridge(alpha=1.0),
                                       MLPRegressor(hidden_layer_sizes=(16,), max_iter=400, random_state=0)],
                         ids=lambda r: type(r).__name__)
def test_regressors_match_predict(regressor):
    frame_train, frame_test, _ = MIXED
    target = frame_train.age / 10 + (frame_train.city == "nice") * 2 + frame_train.score
    pipeline = _fit(make_pipeline(_mixed_columns(), PCA(5), regressor), frame_train, target)
    model = _check(pipeline, frame_test)
    assert not model.is_classifier and model.output == "prediction"
    assert model(jnp.asarray(model.to_inputs(frame_test)[0])).shape == ()


# ---------------------------------------------------------------- refusals name the step

class Doubler(TransformerMixin, BaseEstimator):
    """A custom transformer: arbitrary Python, which from_sklearn cannot copy."""

    def fit(self, x, y=None):
        self.n_features_in_ = np.shape(x)[1]
        return self

    def transform(self, x):
        return 2 * np.asarray(x)


class Unstated(TransformerMixin, BaseEstimator):
    """A custom transformer that records no n_features_in_."""

    def fit(self, x, y=None):
        self.fitted_ = True
        return self

    def transform(self, x):
        return np.asarray(x)


class ShiftedScaler(StandardScaler):
    """A StandardScaler whose transform is not StandardScaler's."""

    def transform(self, x, copy=None):
        return super().transform(x, copy=copy) + 1.0


@pytest.mark.parametrize("step,message", [
    (("poly", PolynomialFeatures(2)), r"step 'poly' \(PolynomialFeatures\)"),
    (("double", Doubler()), r"step 'double' \(Doubler\)"),
    (("unstated", Unstated()), r"step 'unstated' \(Unstated\)"),
    (("shifted", ShiftedScaler()), r"step 'shifted' \(ShiftedScaler\)"),
    (("log", FunctionTransformer(np.log1p)), r"step 'log' \(FunctionTransformer\).*arbitrary Python"),
    (("prep", ColumnTransformer([("poly", PolynomialFeatures(2), [0, 1])], remainder="passthrough")),
     r"step 'prep' → 'poly' \(PolynomialFeatures\)"),
], ids=["PolynomialFeatures", "custom", "custom-without-n_features_in_", "overridden-transform",
        "FunctionTransformer-func", "inside-columns"])
def test_unsupported_steps_are_refused_by_name(step, message):
    x_train, _, y_train = NUMERIC
    pipeline = _fit(Pipeline([step, ("model", LogisticRegression(max_iter=2000))]), np.abs(x_train), y_train)
    with pytest.raises(UnsupportedStepError, match=message):
        from_sklearn(pipeline)
    with pytest.raises(ValueError, match=message):  # a ValueError, and a TypeError as from_sklearn raises
        from_sklearn(pipeline)


def test_unsupported_final_estimator_and_unfitted_pipeline():
    x_train, _, y_train = NUMERIC
    pipeline = _fit(Pipeline([("scale", StandardScaler()), ("knn", KNeighborsClassifier())]), x_train, y_train)
    with pytest.raises(UnsupportedStepError, match=r"final step 'knn' \(KNeighborsClassifier\)"):
        from_sklearn(pipeline)
    transformers_only = _fit(Pipeline([("scale", StandardScaler()), ("pca", PCA(2))]), x_train, y_train)
    with pytest.raises(TypeError, match=r"end in an estimator.*step 'pca' \(PCA\)"):
        from_sklearn(transformers_only)
    with pytest.raises(TypeError, match="is not fitted"):
        from_sklearn(make_pipeline(StandardScaler(), LogisticRegression()))


# ---------------------------------------------------------------- end to end through jaxprobe.generate

def test_pipeline_through_generate_infers_the_raw_dimension():
    """A counterfactual probe on a Pipeline: d comes from the imported model (n_features_in_), not dim/init."""
    x_train, x_test, y_train = NUMERIC
    pipeline = _fit(make_pipeline(StandardScaler(), PCA(4), LogisticRegression(max_iter=2000)), x_train, y_train)
    model = from_sklearn(pipeline)
    assert model.n_features_in_ == 5
    result = jaxprobe.generate(0, probes.fixed_label(model, 1), temperature=0.5, num_chains=4, num_samples=30,
                               num_warmup=30, constraints=[Box(-200.0, 200.0)], convergence="ignore")
    assert result.positions.shape == (4, 30, 5)
    inside = result.positions.reshape(-1, 5)
    assert np.all(np.isfinite(inside)) and np.all(np.abs(inside) <= 200.0)
    np.testing.assert_allclose(model.predict_batch(inside), pipeline.predict_proba(inside), atol=1e-5)
