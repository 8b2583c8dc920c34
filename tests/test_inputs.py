"""Issue 15, "The inputs users actually have": NumPy float64, pandas and lists everywhere; real data rows on
the bounds; d inferred; black-box outputs checked; k-NN KL with its uncertainty; numbers that are numbers.

One test (or a few) per item of the issue, through the public API, then a parametrized sweep over every public
entry point: NumPy float64, a DataFrame and a nested list are accepted, and one bad value per argument raises a
TypeError/ValueError naming the argument before anything compiles. (Pipelines and ``sampler_options`` are
tested with their own modules.)
"""

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import jaxprobe
from jaxprobe import constraints as C
from jaxprobe import probes
from jaxprobe import reconstruct as R
from jaxprobe.extract import Oracle, recover_relu
from jaxprobe.reconstruct.victims import original_errors

QUICK = dict(num_samples=3, num_warmup=3, progress=False, convergence="ignore")


def std_normal(x):
    return -0.5 * jnp.sum(x**2)


def _as(kind, array):
    """``array`` as the user has it: NumPy float64, a DataFrame (or Series) or a nested list."""
    array = np.asarray(array, np.float64)
    if kind == "numpy":
        return array
    if kind == "pandas":
        return pd.DataFrame(array) if array.ndim == 2 else pd.Series(array)
    return array.tolist()


KINDS = ["numpy", "pandas", "list"]


@pytest.fixture(scope="module")
def logistic():
    """A from_sklearn logistic regression on 3 features (states n_features_in_ = 3, gives probabilities)."""
    from sklearn.linear_model import LogisticRegression

    from jaxprobe.models import from_sklearn

    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 3))
    y = (x @ np.array([1.0, -1.0, 0.5]) > 0).astype(int)
    return from_sklearn(LogisticRegression().fit(x, y))


# ---------------------------------------------------------------- 1. float64, DataFrames and lists


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16, np.int32])
def test_half_precision_and_integer_positions_are_computed_in_float32(dtype):
    init = np.zeros((4, 2), dtype)
    result = jaxprobe.sample(0, std_normal, init, **QUICK)
    assert result.positions.dtype == np.float32


def test_priors_oracle_and_reconstruction_data_take_dataframes_and_lists():
    rng = np.random.default_rng(1)
    rows = rng.normal(size=(50, 2))
    for kind in KINDS:
        prior = R.fit_gaussian(_as(kind, rows))
        np.testing.assert_allclose(prior.mean, rows.mean(0))
        assert jaxprobe.priors.DiagonalGaussian(_as(kind, [0.0, 1.0]), 1.0).mean.dtype == np.float64
        oracle = Oracle(lambda x: jnp.sum(jnp.maximum(x, 0.0)), input_dim=2)
        np.testing.assert_allclose(oracle.value(_as(kind, rows[:3])), np.maximum(rows[:3], 0).sum(1), rtol=1e-6)
        assert R.knn_kl(_as(kind, rows[:25]), _as(kind, rows[25:])) == R.knn_kl(rows[:25], rows[25:])


# ---------------------------------------------------------------- 2. real data rows on the bounds


@pytest.mark.slow  # 15 s
def test_real_rows_on_every_features_min_and_max_start_inside_a_closed_box():
    data = jaxprobe.datasets.breast_cancer()
    x = data.standardize(data.x).astype(np.float64)
    low, high = x.min(axis=0), x.max(axis=0)
    rows = np.unique(np.concatenate([x.argmin(axis=0), x.argmax(axis=0)]))  # every feature's min and max
    init = pd.DataFrame(x[rows])  # the real rows, as a user holds them
    question = jaxprobe.Question(probes.localize(np.zeros(x.shape[1])), 1.0,
                                 constraints=[C.Box(pd.Series(low), pd.Series(high))])
    z = question.to_unconstrained(init)
    assert np.all(np.isfinite(z))
    back = np.asarray(jax.vmap(question.to_data)(jnp.asarray(z)))
    width = high - low
    # moved inside by BOUND_INIT_OFFSET of the width at most (float64 here; float32 rounding on top below)
    np.testing.assert_allclose(back, x[rows], rtol=0, atol=float(np.max(width)) * 2 * C.BOUND_INIT_OFFSET)
    on_low, on_high = x[rows] == low, x[rows] == high
    assert np.all(back[on_low] > low[np.nonzero(on_low)[1]]) and np.all(back[on_high] < high[np.nonzero(on_high)[1]])
    # ...and the engine runs from them (float32)
    answer = jaxprobe.generate(0, question.probe, temperature=1.0, num_chains=len(rows), init=init,
                               constraints=[C.Box(low, high)], step_size=0.01, **QUICK)
    assert np.all((answer.positions >= low) & (answer.positions <= high))


def test_init_outside_a_bound_names_the_row_and_feature():
    init = np.array([[0.5, 0.5], [0.5, 0.5], [0.5, 1.5]])
    with pytest.raises(ValueError, match=r"outside the Box bounds in 1 row\(s\), e.g. row 2, feature 1: 1.5"):
        jaxprobe.generate(0, probes.localize(np.zeros(2)), temperature=1.0, num_chains=3, init=init,
                          constraints=C.Box(0.0, 1.0), **QUICK)
    with pytest.raises(ValueError, match=r"Fixed constraint .* row 1, feature 0"):
        jaxprobe.generate(0, probes.localize(np.zeros(2)), temperature=1.0, num_chains=2,
                          init=[[1.0, 0.0], [2.0, 0.0]], constraints=C.Fixed([0], [1.0]), **QUICK)


@pytest.mark.parametrize("constraint, match", [
    (C.Box(np.zeros(3), 1.0), r"constraints\[0\] \(Box\) low must be a scalar or have 2 values \(one per feature\)"),
    (C.Box(0.0, [1.0, 1.0, 1.0], indices=[1]), r"constraints\[0\] \(Box\) high .* 1 values \(one per index given\)"),
    (C.Fixed([0, 1], [1.0]), r"constraints\[0\] \(Fixed\) values .* 2 values"),
    (C.Box("0", 1.0), r"constraints\[0\] \(Box\) low must be numeric"),
])
def test_wrong_length_or_type_of_constraint_values_names_the_argument(constraint, match):
    with pytest.raises((ValueError, TypeError), match=match):
        C.restriction([constraint], 2)


# ---------------------------------------------------------------- 3. d is inferred


@pytest.mark.slow  # 11-13 s of compiles: the default run stays under 10 minutes
def test_generate_infers_d_from_the_box_the_model_or_the_data_set(logistic):
    box = [C.Box(-2.0, 2.0)]
    by_model = jaxprobe.generate(0, probes.prediction_risky(logistic), temperature=0.1, num_chains=2,
                                 constraints=box, **QUICK)
    assert by_model.positions.shape[-1] == 3
    assert jaxprobe.Question(lambda x: jnp.sum(x**2), 1.0, constraints=[C.Box(np.zeros(4), np.ones(4))]).dim == 4
    data = jaxprobe.datasets.iris()
    rules = C.from_dataset(data)
    assert rules.dim == data.x.shape[1]
    assert jaxprobe.Question(lambda x: jnp.sum(x**2), 1.0, constraints=rules).dim == data.x.shape[1]
    assert jaxprobe.Question(lambda x: jnp.sum(x**2), 1.0, constraints=rules + [C.Box(-9.0, 9.0)]).dim == 4


def test_disagreeing_or_missing_d_raises(logistic):
    with pytest.raises(ValueError, match=r"disagrees between .*constraints\[0\] \(Box\) low \(4\), probe \(3\)"):
        jaxprobe.Question(probes.prediction_risky(logistic), 1.0, constraints=[C.Box(np.zeros(4), 1.0)])
    with pytest.raises(ValueError, match="different lengths"):
        probes.prediction_risky(logistic) + probes.localize(np.zeros(2))
    with pytest.raises(ValueError, match="number of features is not known"):
        jaxprobe.Question(lambda x: jnp.sum(x**2), 1.0, constraints=[C.Box(0.0, 1.0)])


# ---------------------------------------------------------------- 4. black-box victims


def _softmax_rows(x):
    logits = np.stack([x[:, 0], -x[:, 0]], axis=1)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("predict_proba, match", [
    (lambda x: 2.0 * _softmax_rows(x + 1.0) - 0.5, r"values above 1|negative values"),  # rows sum to 1
    (lambda x: _softmax_rows(x) * 0.7, r"rows that do not sum to 1 \(within 0.0001\): \d+ row\(s\), e.g. row 0 sums to 0.7"),
    (lambda x: _softmax_rows(x + 1.0) - 0.2, "negative values"),
    (lambda x: np.full((len(x), 2), np.nan), "NaN or inf"),
    (lambda x: _softmax_rows(x)[:, :1], r"must return \(\d+, 2\) class probabilities .* got shape \(\d+, 1\)"),
    (lambda x: np.exp(_softmax_rows(x)) * 3, "values above 1"),
])
def test_black_box_outputs_are_checked_and_the_failed_check_is_named(predict_proba, match):
    with pytest.raises(ValueError, match=match):
        R.BlackBoxClassifier(predict_proba, 2, 2)
    with pytest.raises(ValueError, match=match):  # through reconstruct, before anything compiles
        R.reconstruct(0, R.BlackBoxClassifier(predict_proba, 2, 2, validate=False),
                      jaxprobe.priors.DiagonalGaussian(np.zeros(2), np.ones(2)), num_chains=4, **QUICK)


def test_black_box_errors_keep_their_type():
    class Broken(Exception):
        pass

    def fails(x):
        raise Broken("the user's model failed")

    with pytest.raises(Broken):  # the first call (construction, or reconstruct's starting points)
        R.BlackBoxClassifier(fails, 2, 2)
    calls = []

    def fails_later(x):  # fine when checked, then fails inside the sampler's host callback
        calls.append(1)
        if len(calls) > 1:
            raise Broken("the user's model failed later")
        return _softmax_rows(x)

    classifier = R.BlackBoxClassifier(fails_later, 2, 2)
    compiled = jax.jit(classifier.log_class_probabilities)
    with pytest.raises(Broken, match="failed later"):
        with original_errors(classifier):
            compiled(jnp.zeros((2, 2))).block_until_ready()

    # Through reconstruct / reconstruct_many: the starting points are found (calls 1-2), then the sampler's
    # host callback fails; the user sees their own exception, not JAX's JaxRuntimeError.
    calls.clear()

    def fails_in_sampler(x):
        calls.append(1)
        if len(calls) > 2:
            raise Broken("the user's model failed in the sampler")
        return _softmax_rows(x)

    prior = jaxprobe.priors.DiagonalGaussian(np.zeros(2), np.ones(2))
    with pytest.raises(Broken, match="failed in the sampler"):
        R.reconstruct(0, R.BlackBoxClassifier(fails_in_sampler, 2, 2), prior, num_chains=4, **QUICK)
    assert R.original_errors is original_errors


@pytest.mark.parametrize("num_candidates, error, match", [
    ("1024", TypeError, "num_candidates must be an int, got the string"),
    (True, TypeError, "num_candidates must be an int, got the bool"),
    (2.5, TypeError, "num_candidates must be an int, got float"),
    (0, ValueError, "num_candidates must be >= 1, got 0"),
    (-3, ValueError, "num_candidates must be >= 1, got -3"),
])
def test_num_candidates_must_be_a_positive_int(num_candidates, error, match):
    prior = jaxprobe.priors.DiagonalGaussian(np.zeros(2), np.ones(2))
    with pytest.raises(error, match=match):
        R.reconstruct(0, R.BlackBoxClassifier(_softmax_rows, 2, 2), prior, num_chains=4,
                      num_candidates=num_candidates, **QUICK)


# ---------------------------------------------------------------- 5. k-NN KL


def test_knn_kl_on_two_gaussians_with_a_known_kl():
    rng = np.random.default_rng(5)
    p = rng.normal(size=(1000, 2))
    q = rng.normal(size=(1500, 2)) + np.array([1.0, 0.0])  # KL(N(0, I) || N((1, 0), I)) = 0.5
    estimate, se = R.knn_kl(p, q, k=5, return_se=True)
    assert 0 < se < 0.1 and abs(estimate - 0.5) < 4 * se, (estimate, se)
    # One distribution, 13-D, few points of P (the README's reconstruction regime): the fixed-k estimator of
    # Wang et al.'s Eq. 5 is about -1.6 here; the bias-reduced one is near 0 and within its uncertainty.
    estimates = []
    for seed in range(8):
        rng = np.random.default_rng(seed)
        estimate, se = R.knn_kl(rng.normal(size=(20, 13)), rng.normal(size=(2000, 13)), k=5, return_se=True)
        estimates.append(estimate)
        assert abs(estimate) < 4 * 2 * se  # the se ignores dependence: up to ~2x too small with 20 points
    assert abs(np.mean(estimates)) < 0.2, estimates


def test_fidelity_reports_the_knn_standard_error():
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=(200, 2)), np.repeat([0, 1], 100)
    report = R.fidelity(x, y, {0: rng.normal(size=(300, 2)), 1: rng.normal(size=(300, 2))}, marginals=False)
    for result in report:
        assert np.isfinite(result.knn_se) and result.knn_se > 0
        assert "knn_se" in result.to_dict()


# ---------------------------------------------------------------- 6. numbers are numbers


def test_alpha_is_checked_against_a_probability_output(logistic):
    with pytest.raises(ValueError, match=r"alpha must lie in the model's output range \[0, 1\]"):
        probes.prediction_risky(logistic, alpha=1.5)
    with pytest.raises(ValueError, match="alpha must lie"):
        probes.prediction_risky(lambda x: jax.nn.sigmoid(x[0]), alpha=-0.1, output_range=(0, 1))
    probes.prediction_risky(lambda x: x[0], alpha=1.5)  # a decision function: any α
    probes.prediction_risky(logistic, alpha=[0.3, 0.7])
    # A Flax model made probe-ready by as_model states its output the same way.
    from jaxprobe.models import MLP, as_model

    module = MLP(hidden_sizes=(4,), num_outputs=2)
    params = module.init(jax.random.key(0), jnp.zeros((3,)))
    with pytest.raises(ValueError, match=r"alpha must lie in the model's output range \[0, 1\]"):
        probes.prediction_risky(as_model(module, params), alpha=1.5)
    probes.prediction_risky(as_model(module, params, output="logits"), alpha=1.5)  # logits: any α


@pytest.mark.parametrize("call, match", [
    (lambda: jaxprobe.gibbs(std_normal, temperature=True), "temperature must be a real number, got the bool"),
    (lambda: jaxprobe.gibbs(std_normal, temperature="0.1"), "temperature must be a real number, got the string"),
    (lambda: jaxprobe.sample(0, std_normal, np.zeros((2, 2)), step_size="0.1", **QUICK), "step_size must be numeric"),
    (lambda: jaxprobe.sample(0, std_normal, np.zeros((2, 2)), step_size=True, **QUICK), "step_size must be numeric"),
    (lambda: jaxprobe.sample(0, std_normal, np.zeros((2, 2)), thin=2.0, **QUICK), "thin must be an int"),
    (lambda: probes.prediction_risky(lambda x: x[0], alpha="0.5"), "alpha must be numeric"),
    (lambda: probes.localize(np.zeros(2)) * True, "multiplied by a real number"),
])
def test_bools_and_strings_are_not_numbers(call, match):
    with pytest.raises(TypeError, match=match):
        call()


@pytest.mark.parametrize("call, error, match", [
    (lambda: _generate(num_chains=2.0), TypeError, "num_chains must be an int, got float"),
    (lambda: _generate(num_chains=0), ValueError, "num_chains must be >= 1, got 0"),
    (lambda: probes.localize(np.zeros(2), r="2"), TypeError, "r must be a real number, got the string"),
    (lambda: probes.localize(np.zeros(2), r=0.5), ValueError, "r must be >= 1, got 0.5"),
    (lambda: jaxprobe.models.GaussianPerturbation({"w": np.zeros(2)}, 0.1, 4.0, jax.random.key(0)), TypeError,
     "num_draws must be an int, got float"),
    (lambda: jaxprobe.models.GaussianPerturbation({"w": np.zeros(2)}, True, 4, jax.random.key(0)), TypeError,
     "sigma must be a real number, got the bool"),
    (lambda: jaxprobe.models.GaussianPerturbation({"w": np.zeros(2)}, 0.0, 4, jax.random.key(0)), ValueError,
     "sigma must be finite and > 0, got 0.0"),
    (lambda: jaxprobe.latent.VAEConfig(latent_dim=2.0), TypeError, "latent_dim must be an int, got float"),
    (lambda: jaxprobe.latent.VAEConfig(image_shape=(28.0, 28)), TypeError, r"image_shape\[0\] must be an int"),
    (lambda: jaxprobe.latent.VAEConfig(image_shape=(30, 28)), ValueError, "multiples of 4"),
])
def test_a_wrong_type_is_a_type_error_and_a_wrong_value_a_value_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ---------------------------------------------------------------- 7. every entry point, before compiling


def _sweep(**options):
    settings = dict(num_chains=2, num_samples=3, num_warmup=3, dim=2, progress=False, convergence="ignore",
                    temperature=1.0)
    settings.update(options)
    return jaxprobe.sweep(0, ANCHOR, {"thin": [1]}, **settings)


def _generate(**options):
    settings = dict(temperature=1.0, num_chains=2, init=np.zeros((2, 2)), **QUICK)
    settings.update(options)
    return jaxprobe.generate(0, probes.localize(np.zeros(2)), **settings)


def _sample(**options):
    settings = dict(rng_key=0, logdensity_fn=std_normal, initial_positions=np.zeros((2, 2)), **QUICK)
    settings.update(options)
    return jaxprobe.sample(**settings)


def _reconstruct(**options):
    truth = R.GaussianClasses(means=[[1.0, 0.0], [-1.0, 0.5]], covariance=np.eye(2))
    settings = dict(model=truth.bayes_classifier(), prior=truth.prior(), num_chains=2, **QUICK)
    settings.update(options)
    return R.reconstruct(0, **settings)


def _latent(**options):
    settings = dict(temperature=1.0, num_chains=2, latent_dim=2, **QUICK)
    settings.update(options)
    return jaxprobe.latent.generate(0, lambda x: jnp.sum(x**2), lambda z: 2.0 * z, **settings)


def _oracle():
    return Oracle(lambda x: jnp.sum(jnp.maximum(x, 0.0)), input_dim=2)


BAD_VALUES = [
    # (entry point, call with one bad argument, the argument's name in the message)
    ("sample", lambda: _sample(initial_positions=[[0.0, "a"]]), "initial_positions"),
    ("sample", lambda: _sample(initial_positions=pd.DataFrame({"a": ["x", "y"]})), "initial_positions"),
    ("sample", lambda: _sample(step_size="0.1"), "step_size"),
    ("sample", lambda: _sample(num_samples=True), "num_samples"),
    ("sample", lambda: _sample(target_acceptance_rate="0.5"), "target_acceptance_rate"),
    ("sample", lambda: _sample(rng_key=True), "rng_key"),
    ("generate", lambda: _generate(init=[[0.0, 1.0], [0.0]]), "init"),
    ("generate", lambda: _generate(init=np.zeros((3, 2))), "init"),
    ("generate", lambda: _generate(temperature=True), "temperature"),
    ("generate", lambda: _generate(num_chains="2"), "num_chains"),
    ("generate", lambda: _generate(num_samples=0), "num_samples"),
    ("generate", lambda: _generate(step_size="0.1"), "step_size"),
    ("generate", lambda: _generate(dim=0, init=None), "dim"),
    ("generate", lambda: _generate(constraints=C.Box(np.zeros(3), 1.0)), "constraints[0] (Box) low"),
    ("generate", lambda: _generate(prior=jaxprobe.priors.DiagonalGaussian(["0", "0"], 1.0)), "mean"),
    ("sweep", lambda: _sweep(temperature=True), "temperature"),
    ("sweep", lambda: _sweep(step_size="0.1"), "step_size"),
    ("sweep", lambda: _sweep(num_chains=0), "num_chains"),
    ("sweep", lambda: _sweep(seed=-1), "seed"),
    ("sweep", lambda: _sweep(constraints=C.Fixed([0, 1], [1.0, 2.0, 3.0])), "constraints[0] (Fixed) values"),
    ("gibbs", lambda: jaxprobe.gibbs(std_normal, temperature=np.array([1.0, 2.0])), "temperature"),
    ("gibbs", lambda: jaxprobe.gibbs("G", temperature=1.0), "G"),
    ("gibbs", lambda: jaxprobe.gibbs(std_normal, 1.0, prior="flat"), "prior"),
    ("probes", lambda: probes.localize(["a", "b"]), "anchor"),
    ("probes", lambda: probes.localize(np.zeros(2), weights=[1.0, True]), "weights"),
    ("probes", lambda: probes.fixed_label(lambda x: x, target="1"), "target"),
    ("probes", lambda: probes.prediction_risky(lambda x: x, r=True), "r"),
    ("constraints", lambda: C.restriction([C.Box(0.0, pd.Series(["1", "2"]))], 2), "constraints[0] (Box) high"),
    ("constraints", lambda: C.restriction([C.Integer([0], scale=[1.0, 2.0])], 2), "constraints[0] (Integer) scale"),
    ("constraints", lambda: C.restriction([C.OneHot([0, 1], concentration=[1.0])], 2), "concentration"),
    ("from_sklearn", lambda: jaxprobe.models.from_sklearn("model"), "estimator"),
    ("Oracle", lambda: Oracle(lambda x: x[0], input_dim="2"), "input_dim"),
    ("Oracle", lambda: _oracle().value([["a", "b"]]), "x"),
    ("Oracle", lambda: _oracle().value(np.zeros((2, 3))), "x"),
    ("recover_relu", lambda: recover_relu(_oracle(), True), "rng_key"),
    ("recover_relu", lambda: recover_relu(_oracle(), 0, hidden_dim="4"), "hidden_dim"),
    ("recover_relu", lambda: recover_relu("oracle", 0), "oracle"),
    ("reconstruct", lambda: _reconstruct(temperature=True), "temperature"),
    ("reconstruct", lambda: _reconstruct(num_chains=0), "num_chains"),
    ("reconstruct", lambda: _reconstruct(prior=R.fit_gaussian([["a", "b"], ["c", "d"]])), "sample"),
    ("latent.generate", lambda: _latent(latent_dim="2"), "latent_dim"),
    ("latent.generate", lambda: _latent(init=np.zeros((2, 3))), "init"),
    ("latent.generate", lambda: _latent(temperature="1"), "temperature"),
]


@pytest.mark.parametrize("entry, call, name", BAD_VALUES, ids=[f"{e}-{n}-{i}" for i, (e, _, n) in
                                                               enumerate(BAD_VALUES)])
def test_every_bad_value_is_named_before_anything_compiles(entry, call, name, compile_counter):
    with pytest.raises((TypeError, ValueError)) as first:
        call()  # a first call may compile JAX's own small eager helpers (key handling): not counted
    assert name in str(first.value), f"{entry}: {first.value!s} does not name {name!r}"
    with compile_counter as counter, pytest.raises(type(first.value)):
        call()
    assert counter.count == 0, f"{entry}: the bad {name} was caught only after compiling"


# Each entry point with each kind of input. The objects a compiled program depends on (probe, prior, model)
# are shared between kinds, so the engine compiles once per entry point, not once per kind; what a user
# builds from their own data (anchors, priors, targets) is checked against the NumPy-built object.

ANCHOR = probes.localize(np.zeros(2))
ROWS = np.random.default_rng(3).normal(size=(4, 2))


@pytest.mark.parametrize("kind", KINDS)
def test_sample_takes_each_kind(kind):
    result = _sample(initial_positions=_as(kind, ROWS))
    assert result.positions.shape == (4, 3, 2) and result.positions.dtype == np.float32  # the working dtype


@pytest.mark.parametrize("kind", KINDS)
def test_generate_and_sweep_take_each_kind(kind):
    bounds = [C.Box(_as(kind, [-9.0, -9.0]), _as(kind, [9.0, 9.0])), C.Fixed([1], _as(kind, [0.5]))]
    init = _as(kind, np.column_stack([ROWS[:2, 0], [0.5, 0.5]]))
    answer = jaxprobe.generate(0, ANCHOR, temperature=1.0, num_chains=2, init=init, constraints=bounds, **QUICK)
    assert np.all(answer.positions[..., 1] == 0.5) and answer.positions.dtype == np.float32
    table = _sweep(constraints=bounds)
    assert table.rows[0]["status"] in ("ok", "unconverged")


@pytest.mark.parametrize("kind", KINDS)
def test_gibbs_probes_priors_and_constraints_take_each_kind(kind, logistic):
    x = np.random.default_rng(4).normal(size=(20, 2))
    reference = jaxprobe.gibbs(probes.localize([0.5, 0.0], weights=[1.0, 2.0]), 1.0, R.fit_gaussian(x))
    logdensity = jaxprobe.gibbs(probes.localize(_as(kind, [0.5, 0.0]), weights=_as(kind, [1.0, 2.0])), 1.0,
                                R.fit_gaussian(_as(kind, x)))
    point = jnp.asarray([0.3, -0.2])
    np.testing.assert_allclose(float(logdensity(point)), float(reference(point)), rtol=1e-6)
    for prior in (jaxprobe.priors.DiagonalGaussian(_as(kind, [0.0, 1.0]), _as(kind, [1.0, 2.0])),
                  jaxprobe.priors.Gaussian(_as(kind, [0.0, 1.0]), _as(kind, np.eye(2))),
                  jaxprobe.priors.UniformBox(_as(kind, [0.0, 0.0]), _as(kind, [1.0, 1.0])),
                  R.kernel_density(_as(kind, x))):
        assert np.isfinite(float(prior(jnp.asarray([0.5, 0.5]))))
    target = probes.fixed_label(logistic, _as(kind, [0.5, 0.5]))
    assert float(target(jnp.zeros(3))) == pytest.approx(float(probes.fixed_label(logistic, [0.5, 0.5])(jnp.zeros(3))))
    probes.prediction_risky(logistic, alpha=_as(kind, [0.5, 0.5]))
    restricted = C.restriction([C.Box(_as(kind, [-1.0, -1.0]), _as(kind, [1.0, 1.0])),
                                C.Fixed([1], _as(kind, [0.5]))], 2)
    np.testing.assert_allclose(restricted.inverse(_as(kind, [[0.0, 0.5]])), [[0.0]], atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_from_sklearn_takes_each_kind(kind):
    from sklearn.linear_model import LogisticRegression

    from jaxprobe.models import from_sklearn

    rng = np.random.default_rng(5)
    x = rng.normal(size=(60, 2))
    y = (x[:, 0] > 0).astype(int)
    fitted = LogisticRegression().fit(_as(kind, x) if kind != "list" else x.tolist(), y)
    imported = from_sklearn(fitted)
    assert imported.n_features_in_ == 2
    np.testing.assert_allclose(imported.predict_batch(_as(kind, x[:3])), fitted.predict_proba(_as(kind, x[:3])),
                               atol=1e-5)


@pytest.fixture(scope="module")
def recovered():
    return recover_relu(Oracle(lambda z: jnp.maximum(z[0] - z[1], 0.0), input_dim=2), 0, hidden_dim=1)


@pytest.mark.parametrize("kind", KINDS)
def test_oracle_and_recover_relu_take_each_kind(kind, recovered):
    oracle = _oracle()
    np.testing.assert_allclose(oracle.gradient(_as(kind, ROWS)), (ROWS > 0).astype(np.float32))
    np.testing.assert_allclose(recovered(_as(kind, ROWS)), np.maximum(ROWS[:, 0] - ROWS[:, 1], 0), atol=1e-4)


@pytest.fixture(scope="module")
def reconstruction():
    truth = R.GaussianClasses(means=[[1.0, 0.0], [-1.0, 0.5]], covariance=np.eye(2))
    x, y = truth.sample(0, 100)
    x = np.asarray(x, np.float64)
    return x, np.asarray(y), R.fit_gaussian(x), _reconstruct(prior=R.fit_gaussian(x))


@pytest.mark.parametrize("kind", KINDS)
def test_reconstruct_takes_each_kind(kind, reconstruction):
    x, y, prior, result = reconstruction
    fitted = R.fit_gaussian(_as(kind, x))
    np.testing.assert_allclose(fitted.covariance, prior.covariance)
    report = R.fidelity(_as(kind, x), y, result, marginals=False, ridge=0.1)
    assert len(report) == 2 and all(np.isfinite(r.gaussian) for r in report)


LATENT_PROBE, DECODER = (lambda x: jnp.sum(x**2)), (lambda z: 2.0 * z)


@pytest.mark.parametrize("kind", KINDS)
def test_latent_generate_takes_each_kind(kind):
    result = jaxprobe.latent.generate(0, LATENT_PROBE, DECODER, temperature=1.0, num_chains=2,
                                      init=_as(kind, ROWS[:2]), **QUICK)
    assert result.images.shape == (2, 3, 2)
