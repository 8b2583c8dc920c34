"""from_sklearn's categorical inputs: OrdinalEncoder against sklearn, the metadata generate builds constraints from,
the codes read by cells, and predict_batch on every DataFrame sklearn's predict_proba accepts."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

from jaxprobe.models.sklearn import from_sklearn

RNG = np.random.default_rng(1)
N = 300


def _frame(n=N):
    frame = pd.DataFrame({"age": RNG.normal(40, 10, n), "city": RNG.choice(["lille", "lyon", "nice", "paris"], n),
                          "grade": RNG.choice([1.0, 2.0, 3.0, 4.0], n), "note": RNG.choice(["ok", "late"], n)})
    label = (((frame.city == "lyon") + (frame.grade - 2.5) / 2 + (frame.age - 40) / 10
              + RNG.normal(0, 0.5, n)) > 0.3).astype(int)
    return frame, label


FRAME, LABEL = _frame()
TEST = _frame(60)[0]


def _fit(encoder, frame=FRAME):
    columns = ColumnTransformer([("encode", encoder, ["city", "grade"]), ("scale", StandardScaler(), ["age"])],
                                remainder="drop")  # "note" (strings) is dropped
    return make_pipeline(columns, StandardScaler(), LogisticRegression()).fit(frame, LABEL)


@pytest.mark.parametrize("encoder", [
    OrdinalEncoder(),
    OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1, encoded_missing_value=-2),
    OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=9, min_frequency=70, encoded_missing_value=5),
    OrdinalEncoder(max_categories=2, encoded_missing_value=-2),
], ids=str)
def test_ordinal_encoder_matches_sklearn_on_valid_missing_and_unknown_values(encoder):
    frame, test = FRAME.copy(), TEST.copy()
    if not np.isnan(encoder.encoded_missing_value):  # a missing category the estimator can read
        frame.loc[frame.index[::9], "city"] = None
        test.loc[test.index[::4], "city"] = None
    pipeline = _fit(encoder, frame)
    model = from_sklearn(pipeline)
    np.testing.assert_allclose(model.predict_batch(test), pipeline.predict_proba(test), atol=1e-5)
    assert [(r.column, r.name, r.kind, r.coded, r.reading) for r in model.categorical] == [
        (1, "city", "ordinal", True, "cells"), (2, "grade", "ordinal", False, "exact")]
    unknown = TEST.assign(city="rome", grade=7.0)
    if encoder.handle_unknown == "error":  # sklearn raises; the import gives NaN, never a silent category
        assert np.isnan(model.predict_batch(unknown)).all()
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = pipeline.predict_proba(unknown)
        np.testing.assert_allclose(model.predict_batch(unknown), reference, atol=1e-5)


def test_predict_batch_takes_what_predict_proba_takes_dropped_strings_and_any_column_order():
    """A string column the ColumnTransformer drops (remainder='drop'), columns in another order, extra columns:
    as sklearn's predict_proba; the raw row keeps the dropped column (read_inputs says which are read)."""
    pipeline = _fit(OneHotEncoder(handle_unknown="ignore"))
    model = from_sklearn(pipeline)
    assert model.read_inputs == (0, 1, 2) and model.n_features_in_ == 4  # note (3) is not read
    for frame in (TEST, TEST[["note", "grade", "city", "age"]], TEST.assign(extra="zz")):  # sklearn takes each
        np.testing.assert_allclose(model.predict_batch(frame), pipeline.predict_proba(frame), atol=1e-5)
    with pytest.raises(ValueError, match=r"input column 0 \('age'\) must hold numbers"):
        model.predict_batch(TEST.assign(age="old"))


def test_codes_are_read_by_cells_and_numeric_arrays_hold_codes():
    """A coded (string) column reads v in (k − ½, k + ½] as category k (what a relaxed Integer visits), values
    outside (−½, K − ½] as unknown; a float array holds codes (as generate's draws do), a frame strings."""
    pipeline = _fit(OneHotEncoder(handle_unknown="ignore"))
    model = from_sklearn(pipeline)
    record = model.categorical[0]
    assert (record.column, record.kind, record.coded, record.reading, record.read_as_number) == (
        1, "one-hot", True, "cells", False)
    np.testing.assert_array_equal(record.values, [0.0, 1.0, 2.0, 3.0])
    codes = model.to_inputs(TEST)
    expected = pipeline.predict_proba(TEST)
    np.testing.assert_allclose(model.predict_batch(codes), expected, atol=1e-5)
    relaxed = codes.copy()
    relaxed[:, 1] += RNG.uniform(-0.49, 0.5, len(relaxed))
    np.testing.assert_allclose(model.predict_batch(relaxed), expected, atol=1e-5)
    outside = codes.copy()
    outside[:, 1] = np.where(RNG.random(len(codes)) < 0.5, -0.51, 3.51)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        unknown = pipeline.predict_proba(TEST.assign(city="rome"))
    np.testing.assert_allclose(model.predict_batch(outside), unknown, atol=1e-5)
