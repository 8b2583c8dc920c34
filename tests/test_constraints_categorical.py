"""One-hot groups and integer features in constraints: bijection, reporting, and exact samples."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.conftest import mc_check_mean

import jaxprobe
from jaxprobe import constraints as C
from jaxprobe.constraints import Box, Fixed, Integer, OneHot, restriction


def test_simplex_bijection_log_jacobian_inverse_and_report():
    r = restriction([OneHot([1, 2, 3]), Box(0.0, 1.0, indices=[0]), Integer([4]), Fixed([5, 6], [0.0, 1.0]),
                     OneHot([5, 6])], 7)
    assert r.num_free == 4 and r.free_indices.tolist() == [0, 4] and [g.tolist() for g in r.groups] == [[1, 2, 3]]
    z = jnp.array([0.2, 0.3, -0.5, 1.0])
    x = r.forward(z)
    np.testing.assert_allclose(np.asarray(x[1:4]), np.asarray(jax.nn.softmax(jnp.array([-0.5, 1.0, 0.0]))),
                               rtol=1e-6)
    assert float(x[5]) == 0.0 and float(x[6]) == 1.0
    jacobian = jax.jacfwd(lambda v: r.forward(v)[jnp.array([0, 4, 1, 2])])(z)  # free coordinates, K − 1 per group
    np.testing.assert_allclose(float(r.log_det_jacobian(z)), np.log(abs(np.linalg.det(jacobian))), rtol=1e-5)
    np.testing.assert_allclose(r.inverse(np.asarray(x)), np.asarray(z), rtol=1e-5, atol=1e-5)
    reported = r.report(np.array([[0.4, 0.2, 0.5, 0.3, 2.6, 0.0, 1.0]]))
    np.testing.assert_array_equal(reported, [[0.4, 0.0, 1.0, 0.0, 3.0, 0.0, 1.0]])
    # a one-hot init is moved inside the simplex: (1 − ε)·e_k + ε/K
    z_one_hot = r.inverse(np.array([0.5, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]))
    relaxed = np.asarray(r.forward(jnp.asarray(z_one_hot, jnp.float32)))[1:4]
    eps = C.ONE_HOT_INIT_SMOOTHING
    np.testing.assert_allclose(relaxed, [eps / 3, 1 - eps + eps / 3, eps / 3], rtol=1e-5)


def test_integer_rounding_in_original_units_stays_inside_bounds():
    # standardized column: original = 10 + 2·x_std; bounds 3..17 in original units → 3.5..16.5 reachable ints 4..16
    r = restriction([Integer([0], mean=10.0, scale=2.0), Box([-3.25], [3.25], indices=[0])], 1)
    x = np.array([[-3.24], [0.26], [3.24], [0.24]])
    np.testing.assert_allclose(r.report(x)[:, 0], (np.array([4.0, 11.0, 16.0, 10.0]) - 10.0) / 2.0)


@pytest.mark.parametrize(
    "constraints, error, match",
    [
        ([OneHot([0])], ValueError, ">= 2 distinct"),
        ([OneHot([0, 1]), OneHot([1, 2])], ValueError, "already belong"),
        ([OneHot([0, 1], concentration=0.0)], ValueError, "concentration must be finite and > 0"),
        ([OneHot([0, 1]), Box(0.0, 1.0, indices=[0])], ValueError, "bounded by its simplex"),
        ([OneHot([0, 1]), Fixed([0], [1.0])], ValueError, "only part of the OneHot group"),
        ([OneHot([0, 1]), Fixed([0, 1], [0.5, 0.5])], ValueError, "not a one-hot vector"),
        ([OneHot([0, 1]), Integer([1])], ValueError, "both OneHot and Integer"),
        ([Integer([2]), Box([0.2], [0.8], indices=[2])], ValueError, "no integer value"),
        ([Integer([2], scale=0.0)], ValueError, "scale finite and > 0"),
        (["box"], TypeError, "Box, Fixed, OneHot or Integer"),
    ],
)
def test_bad_categorical_constraints(constraints, error, match):
    with pytest.raises(error, match=match):
        restriction(constraints, 3)


def test_init_must_put_groups_on_the_simplex():
    with pytest.raises(ValueError, match="must hold probability vectors"):
        jaxprobe.generate(0, lambda x: jnp.zeros(()), temperature=1.0, num_chains=2, num_samples=5,
                          init=np.array([[0.5, 0.7, 0.0]] * 2, np.float32), constraints=OneHot([0, 1, 2]))
    with pytest.raises(ValueError, match="report must be 'valid' or 'relaxed'"):
        jaxprobe.generate(0, lambda x: jnp.zeros(()), temperature=1.0, num_chains=2, num_samples=5, dim=3,
                          report="argmax")


ALPHA = np.array([2.0, 1.0, 0.5])
# features: 0..2 a flat 3-way group, 3..5 a Dirichlet(ALPHA) group, 6 an integer in (−0.5, 4.5),
# 7..8 an immutable group, 9 a Box(0, 1) feature
CONSTRAINTS = [OneHot([0, 1, 2]), OneHot([3, 4, 5], concentration=ALPHA), Integer([6]),
               Box([-0.5, 0.0], [4.5, 1.0], indices=[6, 9]), OneHot([7, 8]), Fixed([7, 8], [1.0, 0.0])]


def _flat_target_series(result, extra=()):
    """Series whose means are known for the flat target, with their true means, for ONE
    ESS-based check (one compilation of the ESS code). ``extra``: more (series, truth) pairs."""
    relaxed = result.positions[..., :10].astype(np.float64)
    a0 = ALPHA.sum()
    mean = ALPHA / a0
    variance = ALPHA * (a0 - ALPHA) / (a0 ** 2 * (a0 + 1))
    reported = restriction(CONSTRAINTS, 10).report(relaxed)
    # valid categories; the immutable group untouched
    assert np.all(reported[..., 0:3].sum(-1) == 1) and set(np.unique(reported[..., 0:3])) <= {0.0, 1.0}
    integers = reported[..., 6]
    assert set(np.unique(integers)) <= {0.0, 1.0, 2.0, 3.0, 4.0}
    assert np.all(relaxed[..., 7] == 1.0) and np.all(relaxed[..., 8] == 0.0)
    # Dirichlet(1,1,1) on the flat group (mean 1/3, variance 1/18), Dirichlet(α) on the second, U(0, 1)
    first = relaxed[..., [0, 1, 3, 4, 5, 9]]
    first_truth = np.r_[1 / 3, 1 / 3, mean, 0.5]
    centre = np.r_[1 / 3, mean[0], mean[2], 0.5]
    second = (relaxed[..., [0, 3, 5, 9]] - centre) ** 2
    second_truth = np.r_[1 / 18, variance[0], variance[2], 1 / 12]
    # reported: a flat simplex gives each category with probability 1/K; the rounded U(−0.5, 4.5)
    # integer each of 0..4 with probability 1/5
    categories = reported[..., 0:2]
    counts = np.stack([integers == k for k in range(4)], axis=-1).astype(np.float64)
    series = [first, second, categories, counts] + [s for s, _ in extra]
    truth = [first_truth, second_truth, np.full(2, 1 / 3), np.full(4, 0.2)] + [t for _, t in extra]
    return np.concatenate(series, axis=-1), np.concatenate(truth)


S_OVER_TAU = 6.0


def _rewarded_category_probability():
    """P(x_1 is the largest) for x ~ Dirichlet(1,1,1)·exp(s·x_1/τ), by quadrature on the simplex."""
    grid = np.linspace(0, 1, 801)
    a, b = np.meshgrid(grid, grid, indexing="ij")
    weight = np.exp(S_OVER_TAU * b) * (a + b <= 1)
    wins = (b >= a) & (b >= 1 - a - b)
    return (weight * wins).sum() / weight.sum()


@pytest.mark.slow
def test_generate_flat_target_over_simplex_relaxations_is_exact(compile_counter):
    """A zero probe on features 0..9: the relaxed groups are Dirichlet(α) (flat: uniform on the
    simplex), so reported categories of a flat group are uniform and the rounded uniform integer is
    uniform on 0..4. Features 10..12, an independent group with G = −s·x_11: the reported category
    11 has the probability computed by quadrature (one compiled run checks both). Asking again with
    the same probe compiles nothing and reports exactly the valid version of the relaxed draws."""
    constraints = CONSTRAINTS + [OneHot([10, 11, 12])]

    def probe(x):
        return -S_OVER_TAU * x[11]

    options = dict(temperature=1.0, num_chains=64, num_samples=300, num_warmup=300, dim=13, constraints=constraints,
                   progress=False)
    result = jaxprobe.generate(3, probe, report="relaxed", **options)
    reported = restriction(constraints, 13).report(result.positions)
    series, truth = _flat_target_series(result, [(reported[..., 11:12], np.array([_rewarded_category_probability()]))])
    mc_check_mean(series, truth)
    with compile_counter as counter:
        valid = jaxprobe.generate(3, probe, **options)
    assert counter.count == 0
    np.testing.assert_array_equal(valid.positions, reported)


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["rwmh", "hmc", "nuts", "chees"])
def test_flat_target_over_simplex_relaxations_every_sampler(sampler):
    result = jaxprobe.generate(4, lambda x: jnp.zeros(()), temperature=1.0, num_chains=64,
                               num_samples=1500 if sampler == "rwmh" else 300, num_warmup=300, dim=10,
                               constraints=CONSTRAINTS, report="relaxed", sampler=sampler, progress=False)
    mc_check_mean(*_flat_target_series(result))
