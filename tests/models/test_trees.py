"""Tree ensembles as JAX functions: agreement with scikit-learn / xgboost on held-out data,
exact split decisions at thresholds, jit/vmap/grad, deep trees, float64."""

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn import ensemble, tree
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris, load_wine
from sklearn.model_selection import train_test_split

from jaxprobe.models.trees import (
    TreeEnsembleModel,
    tree_ensemble_from_sklearn,
    tree_ensemble_from_xgboost,
)

TOL = 1e-5
LOADERS = {"breast_cancer": load_breast_cancer, "wine": load_wine, "iris": load_iris, "diabetes": load_diabetes}


def split(name, standardize=False):
    """Train/test split of a bundled data set; ``standardize`` scales a regression target to unit
    variance so that float32 outputs can meet an absolute 1e-5 tolerance (diabetes' y is ~300)."""
    X, y = LOADERS[name](return_X_y=True)
    if standardize:
        y = (y - y.mean()) / y.std()
    return train_test_split(X, y, test_size=0.3, random_state=0)


def reference(estimator, X):
    return estimator.predict_proba(X) if hasattr(estimator, "predict_proba") else estimator.predict(X)


SKLEARN_CASES = [
    ("breast_cancer", lambda: tree.DecisionTreeClassifier(max_depth=6, random_state=0)),
    ("wine", lambda: tree.DecisionTreeClassifier(max_depth=6, random_state=0)),
    ("diabetes", lambda: tree.DecisionTreeRegressor(max_depth=6, random_state=0)),
    ("breast_cancer", lambda: ensemble.RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0)),
    ("wine", lambda: ensemble.RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0)),
    ("diabetes", lambda: ensemble.RandomForestRegressor(n_estimators=20, max_depth=6, random_state=0)),
    ("breast_cancer", lambda: ensemble.ExtraTreesClassifier(n_estimators=20, max_depth=6, random_state=0)),
    ("iris", lambda: ensemble.ExtraTreesClassifier(n_estimators=20, max_depth=6, random_state=0)),
    ("diabetes", lambda: ensemble.ExtraTreesRegressor(n_estimators=20, max_depth=6, random_state=0)),
    ("breast_cancer", lambda: ensemble.GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=0)),
    ("breast_cancer", lambda: ensemble.GradientBoostingClassifier(loss="exponential", n_estimators=20, max_depth=3,
                                                                  random_state=0)),
    ("iris", lambda: ensemble.GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=0)),
    ("wine", lambda: ensemble.GradientBoostingClassifier(n_estimators=20, max_depth=3, subsample=0.8,
                                                         random_state=0)),
    ("diabetes", lambda: ensemble.GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=0)),
    ("diabetes", lambda: ensemble.GradientBoostingRegressor(loss="huber", n_estimators=20, max_depth=3,
                                                            random_state=0)),
    ("diabetes", lambda: ensemble.GradientBoostingRegressor(init="zero", n_estimators=20, max_depth=3,
                                                            random_state=0)),
]


@pytest.mark.parametrize("data,make", SKLEARN_CASES,
                         ids=[f"{d}-{type(m()).__name__}-{i}" for i, (d, m) in enumerate(SKLEARN_CASES)])
def test_sklearn_matches_held_out(data, make):
    X_train, X_test, y_train, _ = split(data, standardize=data == "diabetes")
    estimator = make().fit(X_train, y_train)
    model = tree_ensemble_from_sklearn(estimator)
    expected = reference(estimator, X_test)
    got = np.asarray(model.predict_batch(X_test))
    assert got.shape == expected.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOL)
    one = model(jnp.asarray(X_test[0], jnp.float32))  # ONE input: (K,) or a scalar
    assert one.shape == expected.shape[1:]
    np.testing.assert_allclose(one, expected[0], rtol=0, atol=TOL)
    assert model.is_classifier == hasattr(estimator, "predict_proba")
    if model.is_classifier:
        np.testing.assert_array_equal(model.classes, estimator.classes_)
        np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-6)


def test_jit_vmap_and_grad():
    X_train, X_test, y_train, _ = split("breast_cancer")
    estimator = ensemble.GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=0).fit(X_train, y_train)
    model = tree_ensemble_from_sklearn(estimator)
    X = jnp.asarray(X_test, jnp.float32)
    batched = jax.jit(jax.vmap(model))(X)
    np.testing.assert_allclose(batched, estimator.predict_proba(X_test), rtol=0, atol=TOL)
    np.testing.assert_array_equal(batched, model.predict_batch(X))
    # Inside a larger jitted function (a probe-like loss), batched with vmap.
    loss = jax.jit(jax.vmap(lambda x: (model(x)[1] - 0.5) ** 2))(X)
    np.testing.assert_allclose(loss, (estimator.predict_proba(X_test)[:, 1] - 0.5) ** 2, atol=TOL)
    # Piecewise constant: the gradient is zero and finite, for one input and under vmap.
    grad = jax.grad(lambda x: model(x)[1])(X[0])
    assert grad.shape == X[0].shape and np.all(np.isfinite(grad)) and np.all(grad == 0)
    grads = jax.jit(jax.vmap(jax.grad(lambda x: jnp.log(model(x)[0]))))(X)
    assert np.all(np.isfinite(grads)) and np.all(grads == 0)
    jacobian = jax.jacrev(model)(X[0])
    assert jacobian.shape == (2, X.shape[1]) and np.all(jacobian == 0)


def test_grad_of_regressor_is_zero():
    X_train, X_test, y_train, _ = split("diabetes", standardize=True)
    model = tree_ensemble_from_sklearn(ensemble.RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0)
                                       .fit(X_train, y_train))
    grads = jax.vmap(jax.grad(model))(jnp.asarray(X_test, jnp.float32))
    assert np.all(np.isfinite(grads)) and np.all(grads == 0)
    assert model(jnp.asarray(X_test[0], jnp.float32)).shape == ()


def _at_thresholds(X_base, nodes):
    """Copies of rows of ``X_base`` with one feature set to each value in ``nodes`` [(feature, value)]."""
    rows = np.arange(len(nodes)) % len(X_base)
    points = X_base[rows].astype(np.float32)
    for i, (feature, value) in enumerate(nodes):
        points[i, feature] = value
    return points


def _leaf_nodes(model, X):
    """Node index (within its tree) that each input reaches in each tree: (n, T)."""
    return np.asarray(jax.vmap(model.leaves)(jnp.asarray(X, jnp.float32))) % model.max_nodes


@pytest.mark.parametrize("make", [
    lambda: ensemble.RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0),
    lambda: ensemble.GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0),
], ids=["RandomForestClassifier", "GradientBoostingClassifier"])
def test_points_at_sklearn_thresholds_take_sklearns_branch(make):
    X_train, X_test, y_train, _ = split("breast_cancer")
    estimator = make().fit(X_train, y_train)
    model = tree_ensemble_from_sklearn(estimator)
    trees = np.asarray(estimator.estimators_).ravel()
    nodes = []
    for t in trees:
        internal = t.tree_.children_left >= 0
        for feature, threshold in zip(t.tree_.feature[internal], t.tree_.threshold[internal]):
            t32 = np.float32(threshold)  # the float32 nearest the float64 threshold, and its neighbours
            nodes += [(feature, t32), (feature, np.nextafter(t32, np.float32(np.inf))),
                      (feature, np.nextafter(t32, np.float32(-np.inf)))]
    X = _at_thresholds(X_test, nodes)
    expected_leaves = estimator.apply(X).reshape(len(X), -1)
    np.testing.assert_array_equal(_leaf_nodes(model, X), expected_leaves)
    np.testing.assert_allclose(model.predict_batch(X), estimator.predict_proba(X), rtol=0, atol=TOL)


def test_threshold_that_rounds_up_in_float32():
    # Two adjacent float32 values a < b; sklearn's threshold is their float64 midpoint, which
    # rounds (ties to even) UP to b in float32. sklearn compares float32(x) <= float64 threshold,
    # so x = b goes right; a naive float32 comparison would send it left.
    a = np.nextafter(np.float32(4.0), np.float32(5.0))  # odd last mantissa bit; 1 ulp > 1e-7, so sklearn
    b = np.nextafter(a, np.float32(5.0))  # splits between a and b (its FEATURE_THRESHOLD is 1e-7)
    X = np.array([[a]] * 5 + [[b]] * 5, np.float32)
    y = np.array([0] * 5 + [1] * 5)
    estimator = tree.DecisionTreeClassifier().fit(X, y)
    threshold = estimator.tree_.threshold[0]
    assert a < threshold < b and np.float32(threshold) == b  # the case this test is about
    model = tree_ensemble_from_sklearn(estimator)
    points = np.array([[a], [b], [np.nextafter(b, np.float32(5.0))]], np.float32)
    np.testing.assert_array_equal(estimator.predict_proba(points), [[1, 0], [0, 1], [0, 1]])
    np.testing.assert_array_equal(model.predict_batch(points), estimator.predict_proba(points))
    assert model.threshold[0, 0] == a


def test_deep_unbalanced_trees():
    # y = 2^i on a line: the best splits keep peeling off the largest points, so the fully
    # grown tree (one leaf per point) is a long, lopsided chain rather than a balanced tree.
    n = 60
    X = np.arange(n, dtype=np.float64)[:, None]
    y = 2.0 ** np.arange(n)
    chain = tree.DecisionTreeRegressor(max_depth=None).fit(X, y)
    model = tree_ensemble_from_sklearn(chain)
    assert chain.get_n_leaves() == n and chain.get_depth() >= n // 2  # balanced would be depth 6
    assert model.max_depth == chain.get_depth()
    np.testing.assert_allclose(model.predict_batch(X), chain.predict(X), rtol=1e-6, atol=0)
    X_mid = X[:-1] + 0.5  # between training points, right at the thresholds' float32 neighbourhood
    np.testing.assert_allclose(model.predict_batch(X_mid), chain.predict(X_mid), rtol=1e-6, atol=0)
    # Fully grown forest and tree on a small data set: trees of different depths and sizes, padded.
    X_train, X_test, y_train, _ = split("iris")
    forest = ensemble.RandomForestClassifier(n_estimators=20, max_depth=None, random_state=0).fit(X_train, y_train)
    model = tree_ensemble_from_sklearn(forest)
    assert model.max_depth == max(t.get_depth() for t in forest.estimators_)
    np.testing.assert_allclose(model.predict_batch(X_test), forest.predict_proba(X_test), rtol=0, atol=TOL)
    X_train, X_test, y_train, _ = split("wine")
    deep = tree.DecisionTreeClassifier(max_depth=None, random_state=0).fit(X_train, y_train)
    np.testing.assert_allclose(tree_ensemble_from_sklearn(deep).predict_batch(X_test), deep.predict_proba(X_test),
                               rtol=0, atol=TOL)


def test_single_leaf_tree():
    X = np.random.default_rng(0).normal(size=(10, 3))
    estimator = tree.DecisionTreeRegressor().fit(X, np.full(10, 0.25))
    model = tree_ensemble_from_sklearn(estimator)
    assert model.max_depth == 0
    np.testing.assert_allclose(model.predict_batch(X), estimator.predict(X), rtol=0, atol=TOL)


def test_float64_inputs_compute_in_float64():
    # With x64 on, leaf values and sums are float64 (diabetes' unscaled target, ~300, fits), while
    # the split comparisons still use float32(x) as sklearn does.
    X_train, X_test, y_train, _ = split("diabetes")
    boosted = ensemble.GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=0).fit(X_train, y_train)
    forest = ensemble.RandomForestRegressor(n_estimators=10, max_depth=6, random_state=0).fit(X_train, y_train)
    built_in_float32 = tree_ensemble_from_sklearn(boosted)
    with jax.enable_x64(True):
        for estimator, model in [(boosted, built_in_float32), (boosted, tree_ensemble_from_sklearn(boosted)),
                                 (forest, tree_ensemble_from_sklearn(forest))]:
            got = model.predict_batch(jnp.asarray(X_test, jnp.float64))
            assert got.dtype == jnp.float64
            np.testing.assert_allclose(np.asarray(got), estimator.predict(X_test), rtol=1e-12, atol=1e-9)
            grad = jax.grad(model)(jnp.asarray(X_test[0], jnp.float64))
            assert grad.dtype == jnp.float64 and np.all(grad == 0)


def test_errors():
    X_train, _, y_train, _ = split("iris")
    with pytest.raises(TypeError, match="not fitted"):
        tree_ensemble_from_sklearn(ensemble.RandomForestClassifier())
    from sklearn.linear_model import LinearRegression

    with pytest.raises(TypeError, match="does not support LinearRegression"):
        tree_ensemble_from_sklearn(LinearRegression().fit(X_train, y_train))
    multi = tree.DecisionTreeRegressor(max_depth=2).fit(X_train, np.stack([y_train, -y_train], axis=1))
    with pytest.raises(ValueError, match="multi-output"):
        tree_ensemble_from_sklearn(multi)
    custom_init = ensemble.GradientBoostingRegressor(n_estimators=2, init=LinearRegression()).fit(X_train, y_train)
    with pytest.raises(ValueError, match="init"):
        tree_ensemble_from_sklearn(custom_init)
    model = tree_ensemble_from_sklearn(tree.DecisionTreeClassifier(max_depth=2).fit(X_train, y_train))
    with pytest.raises(ValueError, match="shape"):
        model(jnp.zeros((2, 4)))
    with pytest.raises(ValueError, match="shape"):
        model.predict_batch(jnp.zeros((2, 5)))
    assert isinstance(model, TreeEnsembleModel) and "DecisionTreeClassifier" in repr(model)


def test_xgboost_missing_gives_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "xgboost", None)  # makes `import xgboost` raise ImportError
    with pytest.raises(ImportError, match="pip install xgboost"):
        tree_ensemble_from_xgboost(object())


# -- xgboost ---------------------------------------------------------------------------------
def _xgb_cases():
    return [
        ("breast_cancer", {"cls": "XGBClassifier"}),
        ("breast_cancer", {"cls": "XGBClassifier", "base_score": 0.3}),
        ("wine", {"cls": "XGBClassifier"}),
        ("iris", {"cls": "XGBClassifier", "objective": "multi:softmax"}),
        ("diabetes", {"cls": "XGBRegressor"}),
        ("diabetes", {"cls": "XGBRegressor", "objective": "reg:absoluteerror"}),
        ("breast_cancer", {"cls": "XGBRegressor", "objective": "reg:logistic"}),
        ("wine", {"cls": "XGBRFClassifier", "n_estimators": 5}),
    ]


@pytest.mark.parametrize("data,kwargs", _xgb_cases(),
                         ids=[f"{d}-{k['cls']}-{k.get('objective', k.get('base_score', ''))}"
                              for d, k in _xgb_cases()])
def test_xgboost_matches_held_out(data, kwargs):
    xgb = pytest.importorskip("xgboost")
    kwargs = dict(kwargs)
    cls = getattr(xgb, kwargs.pop("cls"))
    kwargs.setdefault("n_estimators", 20)
    X_train, X_test, y_train, _ = split(data, standardize=data == "diabetes")
    estimator = cls(max_depth=4, random_state=0, n_jobs=1, **kwargs).fit(X_train, y_train)
    model = tree_ensemble_from_xgboost(estimator)
    expected = reference(estimator, X_test)
    got = np.asarray(model.predict_batch(X_test))
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOL)
    grad = jax.grad(lambda x: jnp.sum(model(x)))(jnp.asarray(X_test[0], jnp.float32))
    assert np.all(np.isfinite(grad)) and np.all(grad == 0)


def test_xgboost_booster_thresholds_and_early_stopping():
    xgb = pytest.importorskip("xgboost")
    X_train, X_test, y_train, y_test = split("breast_cancer")
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 3, "nthread": 1},
                        xgb.DMatrix(X_train, y_train), num_boost_round=10)
    model = tree_ensemble_from_xgboost(booster)
    assert model.is_classifier and model.classes is None
    np.testing.assert_allclose(model.predict_batch(X_test)[:, 1], booster.predict(xgb.DMatrix(X_test)),
                               rtol=0, atol=TOL)
    # Inputs exactly at every split condition (x < s goes left) and at its float32 neighbours.
    nodes = []
    for tree_json in json.loads(bytes(booster.save_raw(raw_format="json")))["learner"]["gradient_booster"]["model"][
            "trees"]:
        for left, feature, split_condition in zip(tree_json["left_children"], tree_json["split_indices"],
                                                  tree_json["split_conditions"]):
            if left >= 0:
                s = np.float32(split_condition)
                nodes += [(feature, v) for v in (s, np.nextafter(s, np.float32(np.inf)),
                                                  np.nextafter(s, np.float32(-np.inf)))]
    X = _at_thresholds(X_test, nodes)
    expected_leaves = booster.predict(xgb.DMatrix(X), pred_leaf=True)
    np.testing.assert_array_equal(_leaf_nodes(model, X), expected_leaves)
    np.testing.assert_allclose(model.predict_batch(X)[:, 1], booster.predict(xgb.DMatrix(X)), rtol=0, atol=TOL)
    # An sklearn wrapper fitted with early stopping predicts with best_iteration's trees, as here.
    stopped = xgb.XGBClassifier(n_estimators=200, max_depth=3, learning_rate=0.8, early_stopping_rounds=2,
                                n_jobs=1).fit(X_train, y_train, eval_set=[(X_test, y_test)], verbose=False)
    model = tree_ensemble_from_xgboost(stopped)
    assert model.num_trees == stopped.best_iteration + 1
    np.testing.assert_allclose(model.predict_batch(X_test), stopped.predict_proba(X_test), rtol=0, atol=TOL)
    everything = tree_ensemble_from_xgboost(stopped, iteration_range=(0, 0))
    assert everything.num_trees == stopped.get_booster().num_boosted_rounds()


def test_xgboost_unsupported():
    xgb = pytest.importorskip("xgboost")
    X_train, _, y_train, _ = split("breast_cancer")
    linear = xgb.XGBRegressor(booster="gblinear", n_estimators=2, n_jobs=1).fit(X_train, y_train)
    with pytest.raises(ValueError, match="gbtree"):
        tree_ensemble_from_xgboost(linear)
    raw = xgb.XGBRegressor(objective="binary:logitraw", n_estimators=2, n_jobs=1).fit(X_train, y_train)
    with pytest.raises(ValueError, match="objective"):
        tree_ensemble_from_xgboost(raw)
    with pytest.raises(TypeError):
        tree_ensemble_from_xgboost(xgb.XGBClassifier())
