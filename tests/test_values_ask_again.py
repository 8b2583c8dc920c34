"""A question asked again with new but equal objects written inline compiles nothing.

The engine jits with the question as a static argument, so priors, constraints, probes and questions must
compare and hash by value (arrays by dtype, shape and content; models by identity; tracers only to
themselves). Each ``generate`` test asks one README-style question three times, every object built anew,
and counts XLA backend compiles: the second and third calls compile none. A changed value compiles again,
so the counts cannot pass vacuously.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

import jaxprobe
from jaxprobe import probes
from jaxprobe._compiles import Compiles
from jaxprobe._values import ByValue, Keyed, value_key
from jaxprobe.constraints import Box, ConstraintList, Fixed, Integer, OneHot, restriction
from jaxprobe.models import from_sklearn
from jaxprobe.priors import DiagonalGaussian, Gaussian, NoPrior, StandardNormal, UniformBox
from jaxprobe.question import Question


def _compiles_per_call(ask, calls=3):
    counts = []
    for _ in range(calls):
        with Compiles() as compiles:
            ask()
        counts.append(compiles.count)
    return counts


_SMALL = dict(temperature=0.1, num_chains=4, num_samples=8, num_warmup=8, progress=False, convergence="ignore")
_QUICK = dict(_SMALL, sampler="rwmh")  # compiles in about half the time of MALA: for the tests after the README's


def _fit_model():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return from_sklearn(LogisticRegression().fit(x, (x[:, 0] + x[:, 1] > 0).astype(int)))


MODEL = _fit_model()  # the user's own model object: asked again, the same object


def _readme_question(mean=(0.0, 0.0), bound=3.0, anchor=(0.5, -0.5), options=_SMALL):
    """generate's README example with everything written inline: a new prior, Box and probe per call."""
    probe = probes.fixed_label(MODEL, 1) + 0.1 * probes.localize(np.asarray(anchor))
    return jaxprobe.generate(0, probe, prior=DiagonalGaussian(np.array(mean), np.ones(2)),
                             constraints=[Box(-bound, bound)], **options)


def test_readme_question_with_an_sklearn_model_written_inline_compiles_once():
    counts = _compiles_per_call(_readme_question)
    assert counts[0] > 0 and counts[1:] == [0, 0], counts


@pytest.mark.slow
@pytest.mark.parametrize("change", [dict(mean=(0.5, 0.0)), dict(bound=2.0), dict(anchor=(0.5, 0.5))],
                         ids=["prior mean", "box bound", "localize anchor"])
def test_a_changed_value_is_another_question_and_compiles(change):
    _readme_question(options=_QUICK)  # the unchanged question, asked (and compiled) before
    with Compiles() as compiles:
        changed = _readme_question(**change, options=_QUICK)
    assert compiles.count > 0
    with Compiles() as compiles:
        again = _readme_question(**change, options=_QUICK)
    assert compiles.count == 0
    np.testing.assert_array_equal(changed.positions, again.positions)


_RISKY = lambda x: jax.nn.sigmoid(x @ jnp.array([2.0, -1.0, 0.5]))  # noqa: E731 - the README's "ten lines" model


def test_uniform_box_prior_compiles_once():
    def ask():
        return jaxprobe.generate(1, probes.prediction_risky(_RISKY, alpha=0.5),
                                 prior=UniformBox([-2.0, -2.0, -2.0], [2.0, 2.0, 2.0]), dim=3, **_QUICK)

    counts = _compiles_per_call(ask)
    assert counts[0] > 0 and counts[1:] == [0, 0], counts


def test_fixed_one_hot_and_integer_constraints_with_a_full_gaussian_compile_once():
    def ask():
        rules = [Box(np.array([-2.0, -3.0]), [2.0, 3.0], indices=[0, 1]), Integer([1]), Fixed([2], [0.25]),
                 OneHot([3, 4, 5], concentration=0.5)]
        probe = probes.localize([0.5, 1.0, 0.25, 0.2, 0.3, 0.5], weights=np.array([1.0, 1.0, 0.0, 1.0, 1.0, 1.0]))
        return jaxprobe.generate(2, probe, prior=Gaussian(np.zeros(6), np.eye(6) + 0.1), constraints=rules,
                                 **_QUICK)

    counts = _compiles_per_call(ask)
    assert counts[0] > 0 and counts[1:] == [0, 0], counts


# ---------------------------------------------------------------- equality by value, without compiling


def test_priors_are_equal_by_value():
    assert DiagonalGaussian(np.zeros(2), np.ones(2)) == DiagonalGaussian([0.0, 0.0], 1.0)
    assert hash(DiagonalGaussian(np.zeros(2), np.ones(2))) == hash(DiagonalGaussian([0, 0], [1, 1]))
    assert DiagonalGaussian(np.zeros(2), np.ones(2)) != DiagonalGaussian(np.ones(2), np.ones(2))
    assert DiagonalGaussian(np.zeros(2), np.ones(2)) != DiagonalGaussian(np.zeros(3), np.ones(3))
    assert Gaussian(np.zeros(2), np.eye(2)) == Gaussian(np.zeros(2), np.eye(2))
    assert Gaussian(np.zeros(2), np.eye(2)) != Gaussian(np.zeros(2), 2 * np.eye(2))
    assert UniformBox(-1.0, 1.0) == UniformBox(-1, 1) != UniformBox(-1.0, 2.0)
    assert StandardNormal([2]) == StandardNormal([2]) and hash(StandardNormal([2])) == hash(StandardNormal([2]))
    assert NoPrior() == NoPrior() and StandardNormal() != NoPrior()
    assert DiagonalGaussian(np.zeros(2), np.ones(2)) != Gaussian(np.zeros(2), np.eye(2))  # another family
    mean = np.zeros(2)
    prior = DiagonalGaussian(mean, 1.0)
    mean[0] = 5.0  # the prior kept its own (read-only) copy
    assert prior == DiagonalGaussian(np.zeros(2), 1.0) and not prior.mean.flags.writeable


def test_constraints_and_restrictions_are_equal_by_value():
    assert Box(-3.0, 3.0) == Box(-3.0, 3.0) and hash(Box(-3.0, 3.0)) == hash(Box(-3.0, 3.0))
    assert Box(np.zeros(2), [1.0, 1.0]) == Box(np.zeros(2), [1.0, 1.0]) != Box(np.zeros(2), [1.0, 2.0])
    assert Fixed([1], [0.5]) == Fixed([1], [0.5]) != Fixed([1], [0.25])
    assert OneHot([0, 1, 2], 0.3) == OneHot([0, 1, 2], 0.3) != OneHot([0, 1, 2])
    assert Integer([0], 1.0, 2.0) == Integer([0], 1.0, 2.0) != Integer([0])
    assert Box(-3.0, 3.0) != Fixed(-3.0, 3.0)
    assert restriction([Box(-3.0, 3.0), Integer([0])], 2) == restriction([Box(-3.0, 3.0), Integer([0])], 2)
    assert restriction([Box(-3.0, 3.0), Integer([0])], 2) != restriction([Box(-3.0, 3.0)], 2)  # reports differ
    assert hash(restriction([Box(-3.0, 3.0)], 2)) == hash(restriction([Box(-3.0, 3.0)], 2))
    listed = ConstraintList([Box(-1.0, 1.0)], dim=2)
    assert ByValue(listed) == ByValue(ConstraintList([Box(-1.0, 1.0)], dim=2)) != ByValue(ConstraintList(
        [Box(-1.0, 1.0)], dim=3))
    assert ByValue([Box(-1.0, 1.0)]) == ByValue([Box(-1.0, 1.0)])


def test_probes_are_equal_by_value_and_models_by_identity():
    model = lambda x: jax.nn.sigmoid(jnp.sum(x))  # noqa: E731
    assert probes.fixed_label(model, 1) == probes.fixed_label(model, 1) != probes.fixed_label(model, 0)
    assert probes.fixed_label(model, 1) != probes.fixed_label(lambda x: jax.nn.sigmoid(jnp.sum(x)), 1)
    assert probes.localize([1.0, 2.0]) == probes.localize(np.array([1.0, 2.0]))
    assert probes.localize([1.0, 2.0]) != probes.localize([1.0, 2.5])
    assert probes.localize([1.0, 2.0], r=2) != probes.localize([1.0, 2.0], r=2.0)  # x**2 and x**2.0 trace apart
    combined = lambda: probes.fixed_label(model, 1) + 0.1 * probes.localize([0.0, 0.0])  # noqa: E731
    assert combined() == combined() and hash(combined()) == hash(combined())
    assert combined() != probes.fixed_label(model, 1) + 0.2 * probes.localize([0.0, 0.0])
    assert probes.prediction_risky(model, 0.5) == probes.prediction_risky(model, 0.5)
    assert probes.prediction_risky(model, 0.5) != probes.prediction_risky(model, 0.4)
    assert probes.model_contrast(model, MODEL) == probes.model_contrast(model, MODEL)
    assert probes.model_contrast(model, MODEL) != probes.model_contrast(MODEL, model)
    assert sum([probes.localize([0.0])]) == sum([probes.localize([0.0])])
    own = lambda x: jnp.sum(x**2)  # noqa: E731 - a function of the user's own: by identity
    assert probes.Probe(own) == probes.Probe(own) != probes.Probe(lambda x: jnp.sum(x**2))


def test_questions_are_equal_by_value():
    def ask(mean=0.0, temperature=0.25):
        return Question(probes.localize(np.zeros(3)), temperature, DiagonalGaussian(np.full(3, mean), 1.0),
                        [Box(-1.0, 1.0, indices=[0]), OneHot([1, 2])])

    assert ask() == ask() and hash(ask()) == hash(ask())
    assert ask().logdensity == ask().logdensity and ask().reference == ask().reference
    assert ask() != ask(mean=0.5) and ask() != ask(temperature=0.5)


def test_values_are_keyed_by_content_dtype_and_shape():
    assert value_key(np.zeros(2)) == value_key(np.zeros(2))
    assert value_key(np.zeros(2, np.float32)) == value_key(jnp.zeros(2, jnp.float32))  # NumPy or JAX alike
    assert value_key(np.zeros(2)) != value_key(np.zeros(2, np.float32))
    assert value_key(np.zeros(2)) != value_key(np.zeros((1, 2)))
    assert value_key(np.zeros(2)) != value_key(np.array([0.0, 1e-300]))
    assert value_key(1) != value_key(1.0) != value_key(True)
    assert value_key(float("nan")) == value_key(float("nan"))
    assert value_key({"a": np.ones(1)}) == value_key({"a": np.ones(1)}) != value_key({"a": np.zeros(1)})
    assert Keyed(np.sum, "sum", np.ones(2)) == Keyed(np.sum, "sum", np.ones(2)) != Keyed(np.sum, "sum", np.ones(3))


def test_tracers_are_never_hashed_by_value():
    seen = {}

    @jax.jit
    def build(anchor, other):
        # Reading a tracer's value would raise here; equality falls back to the tracer's identity.
        first, second = probes.localize(anchor), probes.localize(anchor)
        seen["same"] = first == second and hash(first) == hash(second)
        seen["other"] = first == probes.localize(other)
        low = anchor[0]
        seen["box"] = Box(low, 1.0) == Box(low, 1.0) and hash(Box(low, 1.0)) == hash(Box(low, 1.0))
        seen["other box"] = Box(low, 1.0) == Box(anchor[0], 1.0)
        seen["scaled"] = anchor[0] * first == anchor[0] * first
        return first(jnp.zeros(2))

    build(jnp.ones(2), jnp.ones(2))
    assert seen == {"same": True, "other": False, "box": True, "other box": False, "scaled": False}
