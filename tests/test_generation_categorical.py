"""Categorical inputs of imported sklearn Pipelines are sampled exactly: every front end builds the exact
constraint from the model's metadata (``Question`` → ``categorical_constraints``) or refuses naming the column."""

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler
from tests.conftest import mc_check_mean

import jaxprobe
from jaxprobe import priors, probes
from jaxprobe.constraints import Box, Fixed, Integer, restriction
from jaxprobe.models import from_sklearn
from jaxprobe.question import Question, categorical_constraints

CITIES = np.array(["lille", "lyon", "nice", "paris"])  # sklearn's sorted categories: codes 0..3


def _frame(n=300, seed=0):
    """Numeric x0, x1, a string category (4 cities), a numeric category (10/20/30) and a free-text note."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"x0": rng.normal(size=n), "city": rng.choice(CITIES, n),
                          "grade": rng.choice([10.0, 20.0, 30.0], n), "x1": rng.normal(size=n),
                          "note": rng.choice(["ok", "late", "?"], n)})
    signal = 2.0 * (frame.city == "lyon") - (frame.city == "paris") + frame.x0 + (frame.grade - 20) / 10
    return frame, (signal + rng.normal(size=n) * 0.5 > 0.3).astype(int)


FRAME, LABEL = _frame()


def _pipeline(encoder, columns=("city",), numeric=("x0", "x1"), remainder="drop"):
    """ColumnTransformer(encoder on ``columns``, numerics passed through; ``note`` dropped) → LogisticRegression."""
    transformer = ColumnTransformer([("categories", encoder, list(columns)), ("numeric", "passthrough", list(numeric))],
                                    remainder=remainder)
    return make_pipeline(transformer, LogisticRegression()).fit(FRAME, LABEL)


def _decode(x):
    """Draws (n, 5) in the model's input convention → the raw DataFrame sklearn reads (city codes → names)."""
    return pd.DataFrame({"x0": x[:, 0], "city": CITIES[x[:, 1].astype(int)], "grade": x[:, 2], "x1": x[:, 3],
                         "note": "ok"})


@pytest.mark.slow  # 17 s
def test_generate_samples_a_one_hot_string_column_exactly():
    """The issue's case: Pipeline(ColumnTransformer(OneHotEncoder on a string column, passthrough numerics),
    LogisticRegression), a Gaussian prior and no constraint on the column. generate adds Integer + Box(−½, 3½)
    on the codes; every draw is a code; the model's probability on the draws is sklearn's on the decoded rows;
    and the categories follow the exact discrete target: with the numerics fixed and G = −log p₁ at τ = 1,
    P(k) ∝ p₁(k) · N(0, 1)-mass of (k − ½, k + ½]."""
    pipeline = _pipeline(OneHotEncoder())
    model = from_sklearn(pipeline)
    fixed = [Fixed([0, 2, 3, 4], [0.2, 20.0, -0.3, 0.0])]  # x0, grade (not read), x1, note (not read)
    result = jaxprobe.generate(0, probes.fixed_label(model, 1), temperature=1.0, num_chains=32, num_samples=200,
                               num_warmup=200, prior=priors.DiagonalGaussian(np.zeros(5), np.ones(5)),
                               constraints=fixed, progress=False)
    x = result.positions.reshape(-1, 5)
    assert set(np.unique(x[:, 1])) <= {0.0, 1.0, 2.0, 3.0}
    np.testing.assert_allclose(model.predict_batch(x), pipeline.predict_proba(_decode(x)), atol=1e-5)
    rows = _decode(np.array([[0.2, k, 20.0, -0.3, 0.0] for k in range(4)], dtype=np.float64))
    weight = pipeline.predict_proba(rows)[:, 1] * (norm.cdf(np.arange(4) + 0.5) - norm.cdf(np.arange(4) - 0.5))
    indicators = (result.positions[..., 1:2] == np.arange(3)).astype(np.float64)
    mc_check_mean(indicators, (weight / weight.sum())[:3])


def _added(probe, constraints, dim=5):
    """The constraints Question adds for ``probe``'s categorical inputs (those beyond ``constraints``)."""
    completed = categorical_constraints(probe, constraints, dim)
    return completed[len(constraints or []):] if completed is not constraints else []


def test_defaults_for_ordinal_and_numeric_categories_and_every_wrapper():
    """OrdinalEncoder on strings: codes 0..3; numeric categories 10/20/30 read nearest: Integer on the
    10-grid (mean −1, scale 0.1) and Box(5, 35). Found whatever wraps the model (a lambda of a cached jit)."""
    ordinal = from_sklearn(_pipeline(OrdinalEncoder()))
    added = _added(probes.fixed_label(ordinal, 1), None)
    assert added == [Integer([1], mean=0.0, scale=1.0), Box([-0.5], [3.5], indices=[1])]
    numeric = from_sklearn(_pipeline(OneHotEncoder(), columns=("grade",)), one_hot="nearest")
    assert _added(probes.fixed_label(numeric, 1), None) == [Integer([2], mean=-1.0, scale=0.1),
                                                            Box([5.0], [35.0], indices=[2])]
    jitted = jax.jit(lambda x: ordinal(x)[1])
    jitted(jnp.zeros(5))  # cached now: its Python does not run again when traced
    wrapped = lambda x: -jnp.log(jitted(x))  # noqa: E731 - a probe of the user's own
    for _ in range(2):
        question = Question(wrapped, 1.0, constraints=[Fixed([0], [0.0])], dim=5)
        assert question.restriction.integer_indices.tolist() == [1]
        np.testing.assert_array_equal(question.restriction.high[1], 3.5)
    # wide bounds over every feature still get the defaults; exact constraints of the user's are kept
    assert _added(probes.fixed_label(ordinal, 1), [Box(-9.0, 9.0)])[0] == Integer([1], mean=0.0, scale=1.0)
    for kept in ([Fixed([1], [2.0])], [Integer([1]), Box([0.5], [2.5], indices=[1])]):
        assert _added(probes.fixed_label(ordinal, 1), kept) == []


@pytest.mark.parametrize("case, match", [
    ("exact numeric", r"input column 2 \('grade'\).*one_hot='nearest'.*Fixed\(\[2\], \[value\]\)"),
    ("uneven", r"input column 2 \('grade'\).*not evenly spaced.*Fixed\(\[2\]"),
    ("read as number", r"input column 2 \('grade'\).*reads the same value as a number.*Fixed\(\[2\]"),
    ("box inside", r"input column 1 \('city'\).*do not keep it on its categories.*Integer\(indices=\[1\]"),
    ("fixed between", r"input column 1 \('city'\).*fixed to 1.5, which is none"),
])
def test_refusals_name_the_column_and_the_constraint_to_pass(case, match):
    """Before anything compiles: no category is ever sampled as a real number."""
    if case == "exact numeric":
        model, constraints = from_sklearn(_pipeline(OneHotEncoder(), columns=("grade",))), None
    elif case == "uneven":
        frame = FRAME.assign(grade=FRAME.grade.replace(30.0, 50.0))
        transformer = ColumnTransformer([("categories", OneHotEncoder(), ["grade"]), ("n", "passthrough", ["x0"])])
        model = from_sklearn(make_pipeline(transformer, LogisticRegression()).fit(frame, LABEL), one_hot="nearest")
        constraints = None
    elif case == "read as number":
        transformer = ColumnTransformer([("categories", OneHotEncoder(), ["grade"]),
                                         ("numeric", StandardScaler(), ["x0", "grade"])])
        model = from_sklearn(make_pipeline(transformer, LogisticRegression()).fit(FRAME, LABEL), one_hot="nearest")
        constraints = None
    else:
        model = from_sklearn(_pipeline(OneHotEncoder()))
        constraints = [Box(-3.0, 3.0)] if case == "box inside" else [Fixed([1], [1.5])]
    with pytest.raises(ValueError, match=match):
        jaxprobe.generate(0, probes.fixed_label(model, 1), temperature=1.0, num_chains=2, num_samples=5,
                          constraints=constraints, progress=False)


def test_a_prebuilt_restriction_without_them_is_refused():
    model = from_sklearn(_pipeline(OneHotEncoder()))
    with pytest.raises(ValueError, match="Restriction without the categorical constraints"):
        Question(probes.fixed_label(model, 1), 1.0, constraints=restriction([Box(-9.0, 9.0)], 5))


@pytest.mark.slow
def test_a_batched_sweep_adds_the_same_constraints():
    """Another front end (jaxprobe.sweep, which `jaxprobe run` configurations also go through): its batched
    cells get the codes' Integer + Box from the model's metadata too, so every reported draw is a code and the
    model's probability on it is sklearn's on the decoded row."""
    pipeline = _pipeline(OneHotEncoder())
    model = from_sklearn(pipeline)
    result = jaxprobe.sweep(0, lambda weight: weight * probes.fixed_label(model, 1), {"weight": [1.0, 3.0]},
                            num_chains=8, num_samples=50, num_warmup=50, temperature=1.0,
                            prior=priors.DiagonalGaussian(np.zeros(5), np.ones(5)),
                            constraints=[Fixed([0, 2, 3, 4], [0.2, 20.0, -0.3, 0.0])], progress=False,
                            convergence="ignore")
    for samples in result.samples:
        x = samples.positions.reshape(-1, 5)
        assert set(np.unique(x[:, 1])) <= {0.0, 1.0, 2.0, 3.0} and len(np.unique(x[:, 1])) >= 2
        np.testing.assert_allclose(model.predict_batch(x), pipeline.predict_proba(_decode(x)), atol=1e-5)
