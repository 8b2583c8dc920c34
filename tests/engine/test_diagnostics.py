"""The convergence diagnostics of jaxprobe.engine.diagnostics against ArviZ, SciPy and their own formulas."""

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from scipy.special import ndtri

from jaxprobe.engine import diagnostics

# The quantities of every draws array below, one per column.
COLUMNS = ["iid", "iid_shifted", "ar1", "ar1_b", "cauchy", "stuck", "constant", "nan"]
# The ESS of BlackJAX and the NumPy estimators differs from ArviZ's where (1) Geyer's sequence never turns
# non-positive (ArviZ ends it 2 lags before the end of the chains, they at the end), as for chains stuck apart
# (their autocorrelations stay near 1) or, by chance, short AR(1) chains; (2) the even term after the sequence
# exceeds an earlier pair sum (they make it monotone too, ArviZ does not). The comparison with ArviZ takes
# these columns, whose ESS (bulk and tail) meets neither case in the cells of the seeds below.
ESS_LIKE_ARVIZ = ["iid", "iid_shifted", "ar1", "ar1_b", "cauchy", "nan"]
NUM_DRAWS = 1001  # odd: the split drops the last draw


def _ar1_with_repeats(rng, chains, draws, rho=0.9, repeat=0.4):
    """AR(1) chains with N(0, 1) marginals where a fraction ``repeat`` of steps repeat the previous value
    exactly, as the rejected proposals of MCMC do (ties for the ranks)."""
    x = np.empty((chains, draws))
    x[:, 0] = rng.standard_normal(chains)
    for t in range(1, draws):
        step = rho * x[:, t - 1] + np.sqrt(1 - rho**2) * rng.standard_normal(chains)
        x[:, t] = np.where(rng.random(chains) < repeat, x[:, t - 1], step)
    return x


def _draws(seed, chains=8, draws=NUM_DRAWS):
    """``(chains, draws, len(COLUMNS))`` float32, the columns named by COLUMNS."""
    rng = np.random.default_rng(seed)
    stuck = rng.standard_normal((chains, draws)) + np.where(np.arange(chains) < chains // 2, -3.0, 3.0)[:, None]
    nan = rng.standard_normal((chains, draws))
    nan[1, 7] = np.nan
    columns = [rng.standard_normal((chains, draws)), 5.0 + 0.01 * rng.standard_normal((chains, draws)),
               _ar1_with_repeats(rng, chains, draws), _ar1_with_repeats(rng, chains, draws),
               rng.standard_cauchy((chains, draws)), stuck, np.full((chains, draws), 0.3), nan]
    return np.stack(columns, axis=-1).astype(np.float32)


def _columns(*names):
    return [COLUMNS.index(name) for name in names]


VARYING = [j for j, name in enumerate(COLUMNS) if name != "constant"]


@pytest.fixture(scope="module")
def cells():
    return np.stack([_draws(seed=0), _draws(seed=2)])


@pytest.fixture(scope="module")
def diagnosed(cells):
    return diagnostics.rank_diagnostics(cells)


def test_rank_diagnostics_on_hard_columns(diagnosed, cells):
    np.testing.assert_array_equal(diagnosed.rhat, np.maximum(diagnosed.rhat_bulk, diagnosed.rhat_folded))
    constant, nan, stuck = _columns("constant", "nan", "stuck")
    assert np.all(np.isnan(diagnosed.rhat[:, constant]))
    assert np.all(diagnosed.ess_bulk[:, constant] == 0) and np.all(diagnosed.ess_tail[:, constant] == 0)
    assert all(np.all(np.isnan(field[:, nan])) for field in diagnosed)
    assert np.all(diagnosed.rhat[:, stuck] > 1.5)
    rhat, ess = diagnostics.rhat_ess_bulk(cells)
    np.testing.assert_array_equal(rhat, diagnosed.rhat)
    np.testing.assert_array_equal(ess, diagnosed.ess_bulk)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_frozen_chains_have_no_effective_draws(dtype):
    """Chains that never move, each at its own start (a step size that rejects every proposal): the within-chain
    variance W is 0, so ESS 0 and no R̂, not the C draws the chains' spread suggests. One chain that moves once
    gives W > 0; the fast path (no pass over every series) equals the plain one on the bulk scores."""
    rng = np.random.default_rng(3)
    frozen = np.repeat(rng.normal(size=(1, 4, 1, 3)), 200, axis=2)
    moves_once = frozen.copy()
    moves_once[0, 0, 150:] += 1.0  # inside the second half: the split chains are not all constant
    draws = np.concatenate([frozen, moves_once, rng.normal(size=(1, 4, 200, 2))], axis=-1).astype(dtype)
    result = diagnostics.rank_diagnostics(draws)
    assert np.all(np.isnan(result.rhat[:, :3])), result
    assert np.all(result.ess_bulk[:, :3] == 0) and np.all(result.ess_tail[:, :3] == 0), result
    assert np.all(np.isfinite(result.rhat[:, 3:])) and np.all(result.ess_bulk[:, 3:] > 0), result
    scores = diagnostics._rank_normalize(diagnostics._split_chains(draws))  # (1, 8, 100, K)
    ess, rhat = diagnostics._ess_and_rhat(np.moveaxis(scores, 3, 1).astype(np.float64))  # varies found here
    np.testing.assert_array_equal(ess, result.ess_bulk)
    np.testing.assert_array_equal(rhat, result.rhat_bulk)


@pytest.mark.parametrize("cell", [0, 1])
def test_rank_diagnostics_match_arviz(diagnosed, cells, cell):
    # ArviZ splits odd chains around their middle draw, rank_diagnostics drops the last: give it even chains.
    even = diagnostics.rank_diagnostics(cells[cell:cell + 1, :, :NUM_DRAWS - 1])
    dataset = az.convert_to_dataset(cells[cell, :, :NUM_DRAWS - 1].astype(np.float64))
    with np.errstate(invalid="ignore"):  # ArviZ's R̂ of the constant: 0/0
        rhat = az.rhat(dataset, method="rank").x.values
    np.testing.assert_allclose(even.rhat[0, VARYING], rhat[VARYING], atol=1e-3, rtol=0)
    columns = _columns(*ESS_LIKE_ARVIZ)  # and not the constant: ArviZ gives it ESS C·N
    for method in ("bulk", "tail"):
        # the 5% and 95% quantiles of Vehtari et al. (2021), named: ArviZ 1.x's default tail quantiles differ
        tail = {"prob": (0.05, 0.95)} if method == "tail" else {}
        np.testing.assert_allclose(getattr(even, f"ess_{method}")[0, columns],
                                   az.ess(dataset, method=method, **tail).x.values[columns], rtol=1e-3,
                                   err_msg=method)


def test_rank_normalization_is_blom_of_scipys_average_ranks(cells):
    draws = cells[:1]
    z = diagnostics._rank_normalize(draws)[0]
    pooled = draws[0].reshape(-1, draws.shape[-1])
    # float64 ranks: SciPy >= 1.18 returns float32 ranks (and ndtri of them) for float32 draws
    expected = ndtri((scipy.stats.rankdata(pooled.astype(np.float64), axis=0) - 0.375) / (len(pooled) + 0.25))
    varying = [j for j in VARYING if j != COLUMNS.index("nan")]
    np.testing.assert_allclose(z.reshape(pooled.shape)[:, varying], expected[:, varying], atol=1e-12)


def test_sort_rows_of_float32_as_integers_equals_argsort():
    """The float32 sort (values as order-preserving integers) against NumPy's argsort, on ties, signed zeros,
    infinities, subnormals and NaN."""
    rng = np.random.default_rng(3)
    rows = np.round(rng.normal(size=(6, 501)), 1).astype(np.float32)  # many ties
    rows[1] = rng.normal(size=501)  # continuous
    rows[2, ::3] = -0.0
    rows[2, 1::3] = 0.0
    rows[3, :4] = [np.inf, -np.inf, np.finfo(np.float32).tiny / 4, -np.finfo(np.float32).max]
    rows[4, 17] = np.nan
    rows[5] = 7.0  # constant
    order, ordered = diagnostics._sort_rows(rows)
    expected = np.sort(rows, axis=-1)
    finite_rows = [0, 1, 2, 3, 5]
    np.testing.assert_array_equal(ordered[finite_rows], expected[finite_rows])  # -0.0 == 0.0
    np.testing.assert_array_equal(np.sort(order, axis=-1), np.arange(rows.size).reshape(rows.shape))  # a permutation
    np.testing.assert_array_equal(rows.reshape(-1)[order][finite_rows], expected[finite_rows])
    assert np.isnan(ordered[4]).sum() == 1
    fallback_order, fallback_ordered = diagnostics._sort_rows(rows.astype(np.float64))  # argsort
    np.testing.assert_array_equal(fallback_ordered[finite_rows], ordered[finite_rows])


def test_rank_diagnostics_reuse_no_scratch_between_calls(cells):
    """Scratch arrays kept between calls (per thread) never leak into a result, also when the shape changes."""
    first = diagnostics.rank_diagnostics(cells[:1])
    kept = [field.copy() for field in first]
    other = diagnostics.rank_diagnostics(cells[1:, :4, :500])
    again = diagnostics.rank_diagnostics(cells[:1])
    for field, copy, repeat in zip(first, kept, again):
        np.testing.assert_array_equal(field, copy)
        np.testing.assert_array_equal(repeat, copy)
    assert other.rhat.shape == (1, len(COLUMNS))


@pytest.mark.parametrize("xp", [np, jnp], ids=["numpy", "jax"])
def test_rhat_from_moments_is_split_rhat_in_either_namespace(cells, xp):
    draws = cells[0].astype(np.float64)
    half = draws.shape[1] // 2
    halves = np.concatenate([draws[:, :half], draws[:, half:2 * half]])
    rhat = np.asarray(diagnostics.rhat_from_moments(xp.asarray(halves.mean(axis=1)),
                                                    xp.asarray(halves.var(axis=1, ddof=1)), half, xp=xp))
    np.testing.assert_allclose(rhat[VARYING], diagnostics.split_gelman_rubin(draws)[VARYING], rtol=1e-5)
    rhat_cells = diagnostics.rhat_from_moments(halves.mean(axis=1)[None], halves.var(axis=1, ddof=1)[None], half,
                                               xp=np)
    np.testing.assert_allclose(rhat_cells[0, VARYING], rhat[VARYING], rtol=1e-5)


def _nested_rhat_numpy(chain_mean, chain_var, num_draws, num_superchains):
    """nR̂ straight from its formula, superchain by superchain."""
    means, variances = np.split(chain_mean, num_superchains), np.split(chain_var, num_superchains)
    between = np.var([m.mean(axis=0) for m in means], axis=0, ddof=1)
    within = np.mean([(m.var(axis=0, ddof=1) if len(m) > 1 else 0.0) + (v.mean(axis=0) if num_draws > 1 else 0.0)
                      for m, v in zip(means, variances)], axis=0)
    return np.sqrt(1 + between / within)


@pytest.mark.parametrize("num_draws, num_superchains", [(10, 4), (10, 12), (1, 3)])
def test_nested_rhat_matches_its_formula(num_draws, num_superchains):
    rng = np.random.default_rng(5)
    chain_mean, chain_var = rng.standard_normal((12, 3)), rng.gamma(2.0, size=(12, 3))
    expected = _nested_rhat_numpy(chain_mean, chain_var, num_draws, num_superchains)
    for xp in (np, jnp):
        np.testing.assert_allclose(diagnostics.nested_rhat(chain_mean, chain_var, num_draws, num_superchains, xp=xp),
                                   expected, rtol=1e-6)


def test_nested_rhat_flags_a_superchain_in_another_mode():
    draws = np.random.default_rng(6).standard_normal((2, 1024, 10, 3)).astype(np.float32)  # 2 cells of 1024 chains
    draws[1, :128, :, 0] += 3.0  # cell 1: the first of its 8 superchains sits in another mode in quantity 0
    nested = jax.jit(jax.vmap(lambda d: diagnostics.nested_rhat(d.mean(axis=1), d.var(axis=1, ddof=1), 10, 8)))(draws)
    assert np.all(nested[0] < 1.01)
    assert nested[1, 0] > 1.1 and np.all(nested[1, 1:] < 1.01)


def test_nested_rhat_needs_equal_superchains():
    with pytest.raises(ValueError, match="superchains"):
        diagnostics.nested_rhat(np.zeros((10, 2)), np.ones((10, 2)), 5, 4)
