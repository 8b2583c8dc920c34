"""jaxprobe.engine.smc (adaptive tempered SMC) against closed-form answers.

Every comparison is within Monte-Carlo error. The final particles are equally weighted but
not independent (resampling duplicates them), so a particle average's standard error is
taken as the larger of the iid value and the spread of the ``num_groups`` independent
groups' averages (each group is its own SMC sampler, so its particles stay in one
contiguous block: ``particles.reshape(G, N/G, D)``). ``log Z`` is compared within 4 of the
run's own standard errors.

Calibration (100 independent runs per setting, not part of the suite): the reported
``log_evidence_se`` matches the run-to-run spread of ``log_evidence`` (rms se / true sd
0.9–1.1); the z-scores are t-like with G − 1 degrees of freedom because the se is itself
estimated from G groups, so the tests use G = 16 (max |z| ≈ 3.5 in 100 runs) rather than the
default 8. Particle averages carry the O(1/n) bias of an n = N/G particle system (about
−1/n to −2/n on the mode share below), so the mixture test uses N = 4000 (n = 250: a bias of
about 0.3 standard errors).
"""

import inspect
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import log_ndtr, ndtr
from scipy.stats import norm

from jaxprobe.engine.smc import SMCInfo, SMCResult, evidence_curve, tempered_smc

NUM_PARTICLES = 2000
MIX_PARTICLES = 4000
NUM_GROUPS = 16
NUM_SE = 4.0


def group_se(values: np.ndarray, num_groups: int = NUM_GROUPS) -> tuple[np.ndarray, np.ndarray]:
    """Mean over particles of ``values`` (N, ...) and its MC standard error: max(iid, between-group)."""
    values = np.asarray(values, np.float64)
    n = values.shape[0]
    iid = values.std(axis=0, ddof=1) / math.sqrt(n)
    groups = values.reshape(num_groups, n // num_groups, *values.shape[1:]).mean(axis=1)
    between = groups.std(axis=0, ddof=1) / math.sqrt(num_groups)
    return values.mean(axis=0), np.maximum(iid, between)


def standard_normal_reference(z):
    # Unnormalized on purpose: log Z is relative to the normalized reference either way.
    return -0.5 * jnp.sum(z**2) + 3.0


# --- 1. Two well-separated Gaussian bumps: posterior mode shares 0.8 / 0.2 -------------------------
#
# r = N(0, I_2), e^ℓ = Σ_j w_j N(z; μ_j, s_j² I). Then r·e^ℓ = Σ_j w_j c_j N(z; μ_j/(1+s_j²), s_j²/(1+s_j²) I)
# with c_j = N(μ_j; 0, (1+s_j²) I) (product of Gaussians), so Z = Σ_j w_j c_j and the posterior mass of
# component j is w_j c_j / Z. The w_j are chosen so that the masses are exactly 0.8 and 0.2.

MIX_MEANS = np.array([[3.0, 1.0], [-2.5, -2.5]])
MIX_SCALES = np.array([0.5, 0.6])
MIX_SHARES = np.array([0.8, 0.2])
_MIX_C = np.array([norm.pdf(m, scale=math.sqrt(1 + s**2)).prod() for m, s in zip(MIX_MEANS, MIX_SCALES)])
MIX_WEIGHTS = MIX_SHARES / _MIX_C / np.sum(MIX_SHARES / _MIX_C)
MIX_LOG_Z = float(np.log(np.sum(MIX_WEIGHTS * _MIX_C)))
POST_MEANS = MIX_MEANS / (1 + MIX_SCALES[:, None] ** 2)
POST_SDS = MIX_SCALES / np.sqrt(1 + MIX_SCALES**2)


def mixture_tilt(z):
    log_components = (jnp.log(jnp.asarray(MIX_WEIGHTS, jnp.float32))
                      - 0.5 * jnp.sum((z - jnp.asarray(MIX_MEANS, jnp.float32)) ** 2, axis=1)
                      / jnp.asarray(MIX_SCALES, jnp.float32) ** 2
                      - 2 * jnp.log(jnp.asarray(MIX_SCALES, jnp.float32)) - math.log(2 * math.pi))
    return jax.scipy.special.logsumexp(log_components)


def mode_of(particles: np.ndarray) -> np.ndarray:
    """Index of the posterior component with the larger density at each particle."""
    log_dens = [norm.logpdf(particles, POST_MEANS[j], POST_SDS[j]).sum(axis=1) + math.log(MIX_SHARES[j])
                for j in range(2)]
    return np.argmax(np.stack(log_dens, axis=1), axis=1)


@pytest.mark.parametrize("kernel", ["mala", "hmc"])
def test_mixture_mode_shares_and_evidence(kernel):
    x0 = jax.random.normal(jax.random.key(0), (MIX_PARTICLES, 2), jnp.float32)
    result = tempered_smc(jax.random.key(1), standard_normal_reference, mixture_tilt, x0, kernel=kernel,
                          num_mcmc_steps=4, num_groups=NUM_GROUPS)
    info = result.info
    assert bool(info.reached_target)
    particles = np.asarray(result.particles, np.float64)
    modes = mode_of(particles)
    share, se = group_se((modes == 0).astype(np.float64))
    se = max(float(se), math.sqrt(0.8 * 0.2 / MIX_PARTICLES))  # at least the binomial error
    assert abs(share - 0.8) < NUM_SE * se, (share, se)

    log_z, log_z_se = float(result.log_evidence), float(result.log_evidence_se)
    assert 0 < log_z_se < 0.2
    assert abs(log_z - MIX_LOG_Z) < NUM_SE * log_z_se, (log_z, MIX_LOG_Z, log_z_se)

    # Within each mode the particles follow that component's Gaussian: its mean within MC error
    # (between-group spread of the groups' within-mode means, at least the iid error).
    grouped_particles = particles.reshape(NUM_GROUPS, -1, 2)
    grouped_modes = modes.reshape(NUM_GROUPS, -1)
    for j in range(2):
        members = particles[modes == j]
        group_means = np.stack([g[m == j].mean(axis=0) for g, m in zip(grouped_particles, grouped_modes)])
        se_mean = np.maximum(group_means.std(axis=0, ddof=1) / math.sqrt(NUM_GROUPS),
                             POST_SDS[j] / math.sqrt(len(members)))
        assert np.all(np.abs(members.mean(axis=0) - POST_MEANS[j]) < NUM_SE * se_mean), j
    np.testing.assert_allclose(np.asarray(result.logdensity),
                               np.asarray(jax.vmap(lambda z: standard_normal_reference(z) + mixture_tilt(z))(
                                   result.particles)), rtol=1e-5, atol=1e-4)


# --- 2. Conjugate Gaussian in D = 5 -------------------------------------------------------------
#
# r = N(0, I_5), ℓ(z) = −½ Σ_i (z_i − y_i)² / s_i². Then π_λ = Π_i N(λy_i/(s_i² + λ), s_i²/(s_i² + λ)) and
# log Z(λ) = log E_r[e^{λℓ}] = Σ_i [−½ log(1 + λ/s_i²) − λ y_i² / (2(s_i² + λ))].

S2 = np.array([0.1, 0.3, 1.0, 0.05, 2.0])
Y = np.array([1.0, -0.5, 2.0, 0.3, -1.0])


def gaussian_tilt(z):
    return -0.5 * jnp.sum((z - jnp.asarray(Y, jnp.float32)) ** 2 / jnp.asarray(S2, jnp.float32))


def conjugate_log_z(lam: float) -> float:
    return float(np.sum(-0.5 * np.log1p(lam / S2) - lam * Y**2 / (2 * (S2 + lam))))


def conjugate_moments(lam: float) -> tuple[np.ndarray, np.ndarray]:
    return lam * Y / (S2 + lam), S2 / (S2 + lam)


def _conjugate_run(kernel, key=1, **kwargs):
    x0 = jax.random.normal(jax.random.key(0), (NUM_PARTICLES, 5), jnp.float32)
    return tempered_smc(jax.random.key(key), standard_normal_reference, gaussian_tilt, x0, kernel=kernel,
                        num_mcmc_steps=5, num_groups=NUM_GROUPS, **kwargs)


@pytest.mark.parametrize("kernel", ["mala", "hmc"])
def test_conjugate_gaussian_moments_evidence_and_path(kernel):
    result = _conjugate_run(kernel)
    info = result.info
    k = int(info.num_stages)
    assert bool(info.reached_target) and k >= 3
    particles = np.asarray(result.particles, np.float64)
    mean, var = conjugate_moments(1.0)

    got_mean, se_mean = group_se(particles)
    se_mean = np.maximum(se_mean, np.sqrt(var / NUM_PARTICLES))
    assert np.all(np.abs(got_mean - mean) < NUM_SE * se_mean), (got_mean - mean) / se_mean
    got_var, se_var = group_se((particles - mean) ** 2)
    se_var = np.maximum(se_var, var * math.sqrt(2 / NUM_PARTICLES))
    assert np.all(np.abs(got_var - var) < NUM_SE * se_var), (got_var - var) / se_var

    log_z_se = float(result.log_evidence_se)
    assert 0 < log_z_se < 0.2
    assert abs(float(result.log_evidence) - conjugate_log_z(1.0)) < NUM_SE * log_z_se

    # The evidence path at every intermediate λ_k.
    lambdas = np.asarray(info.lambdas)
    path, path_se = np.asarray(info.log_evidence_path), np.asarray(info.log_evidence_path_se)
    truth = np.array([conjugate_log_z(float(lam)) for lam in lambdas[:k]])
    assert np.all(path_se[:k] > 0)
    assert np.all(np.abs(path[:k] - truth) < NUM_SE * path_se[:k]), (path[:k] - truth) / path_se[:k]
    assert path[k - 1] == float(result.log_evidence)

    # The schedule: increasing to exactly 1, each non-final stage at the (default) target ESS, NaN padding after.
    target_ess = inspect.signature(tempered_smc).parameters["target_ess"].default
    assert np.all(np.diff(lambdas[:k]) > 0) and lambdas[k - 1] == 1.0
    ess = np.asarray(info.ess)
    np.testing.assert_allclose(ess[: k - 1], target_ess, atol=2e-3)
    assert ess[k - 1] >= target_ess - 2e-3
    for buffer in (info.lambdas, info.log_evidence_path, info.log_evidence_path_se, info.ess, info.acceptance_rate):
        assert buffer.shape == (200,) and np.all(np.isnan(np.asarray(buffer)[k:]))
    acceptance = np.asarray(info.acceptance_rate)[:k]
    # HMC's acceptance falls off a cliff past its stability limit: the step-size rule, raising ε by
    # exp(ā − 0.65) after each well-accepted stage, can overshoot it for one stage (0.16 here), then recovers.
    floor = 0.2 if kernel == "mala" else 0.1
    assert np.all((acceptance > floor) & (acceptance <= 1.0)), acceptance
    assert np.mean(acceptance) > 0.5 and acceptance[-1] > 0.5, acceptance
    # Tuned from the particles: the last inverse mass matrix is the posterior variance.
    np.testing.assert_allclose(np.asarray(info.inverse_mass_matrix), var, rtol=0.25)
    per_step = 1 if kernel == "mala" else 8
    np.testing.assert_array_equal(np.asarray(info.num_gradient_evaluations),
                                  np.full(NUM_PARTICLES, k * (1 + 5 * per_step)))

    temperatures, curve, curve_se = evidence_curve(info, 0.5)
    np.testing.assert_allclose(temperatures, 0.5 / lambdas[:k].astype(np.float64))
    assert temperatures[-1] == 0.5 and np.all(np.diff(temperatures) < 0)
    np.testing.assert_array_equal(curve, path[:k])
    np.testing.assert_array_equal(curve_se, path_se[:k])


def test_stops_at_max_stages_with_the_evidence_of_the_last_lambda():
    result = _conjugate_run("mala", max_stages=2)
    info = result.info
    assert int(info.num_stages) == 2 and not bool(info.reached_target)
    lam = float(info.lambdas[1])
    assert 0 < lam < 1
    assert abs(float(result.log_evidence) - conjugate_log_z(lam)) < NUM_SE * float(result.log_evidence_se)
    mean, var = conjugate_moments(lam)
    got_mean, se_mean = group_se(np.asarray(result.particles, np.float64))
    assert np.all(np.abs(got_mean - mean) < NUM_SE * np.maximum(se_mean, np.sqrt(var / NUM_PARTICLES)))


# --- NaN / inf log densities are zero density ---------------------------------------------------
#
# ℓ = 0 for z_0 < 1 and NaN beyond: π_1 is N(0, I_2) truncated to z_0 < 1, Z = Φ(1), and
# E[z_0] = −φ(1)/Φ(1).

def truncating_tilt(z):
    return jnp.where(z[0] < 1.0, 0.0, jnp.nan)


def test_non_finite_tilt_is_zero_density():
    x0 = jax.random.normal(jax.random.key(0), (NUM_PARTICLES, 2), jnp.float32)
    result = tempered_smc(jax.random.key(3), standard_normal_reference, truncating_tilt, x0, num_mcmc_steps=3,
                          num_groups=NUM_GROUPS)
    particles = np.asarray(result.particles, np.float64)
    assert np.all(particles[:, 0] < 1.0)
    assert np.all(np.isfinite(np.asarray(result.logdensity)))
    log_z_se = float(result.log_evidence_se)
    assert 0 < log_z_se < 0.2
    assert abs(float(result.log_evidence) - float(log_ndtr(1.0))) < NUM_SE * log_z_se
    got, se = group_se(particles[:, 0])
    truncated_sd = math.sqrt(1 - norm.pdf(1.0) / ndtr(1.0) - (norm.pdf(1.0) / ndtr(1.0)) ** 2)
    assert abs(got - (-norm.pdf(1.0) / ndtr(1.0))) < NUM_SE * max(float(se), truncated_sd / math.sqrt(NUM_PARTICLES))


# --- Bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "particles_shape, kwargs, error, match",
    [
        ((10, 2), {"num_groups": 8}, ValueError, "num_groups"),  # N < 2·G
        ((20, 2), {"num_groups": 8}, ValueError, "divisible"),
        ((16, 2), {"target_ess": 0.0}, ValueError, "target_ess"),
        ((16, 2), {"target_ess": 1.0}, ValueError, "target_ess"),
        ((16, 2), {"target_ess": 1.5}, ValueError, "target_ess"),
        ((16, 2), {"num_mcmc_steps": 0}, ValueError, "num_mcmc_steps"),
        ((16, 2), {"num_mcmc_steps": 2.5}, TypeError, "num_mcmc_steps"),
        ((16, 2), {"kernel": "nuts"}, ValueError, "kernel"),
        ((16, 2), {"max_stages": 0}, ValueError, "max_stages"),
        ((16, 2), {"initial_step_size": -1.0}, ValueError, "initial_step_size"),
        ((16,), {}, ValueError, "particles"),
        ((2, 8, 2), {}, ValueError, "particles"),
    ],
)
def test_bad_input_is_rejected_before_compiling(particles_shape, kwargs, error, match):
    kwargs = {"num_groups": 2, **kwargs}
    with pytest.raises(error, match=match):
        tempered_smc(jax.random.key(0), standard_normal_reference, gaussian_tilt,
                     jnp.zeros(particles_shape, jnp.float32), **kwargs)


def test_bad_particle_values_and_callables_are_rejected():
    x0 = np.zeros((16, 2), np.float32)
    x0[3, 1] = np.nan
    with pytest.raises(ValueError, match="particles.*non-finite"):
        tempered_smc(jax.random.key(0), standard_normal_reference, gaussian_tilt, jnp.asarray(x0), num_groups=2)
    with pytest.raises(TypeError, match="particles"):
        tempered_smc(jax.random.key(0), standard_normal_reference, gaussian_tilt, jnp.zeros((16, 2), jnp.int32),
                     num_groups=2)
    with pytest.raises(TypeError, match="tilt"):
        tempered_smc(jax.random.key(0), standard_normal_reference, 3.0, jnp.zeros((16, 2)), num_groups=2)


# --- One compiled program ------------------------------------------------------------------------

def test_compiles_once_and_jits():
    traces = []

    def counting_tilt(z):  # Python runs this only while tracing
        traces.append(1)
        return gaussian_tilt(z)

    x0 = jax.random.normal(jax.random.key(0), (64, 5), jnp.float32)
    kwargs = dict(kernel="mala", num_mcmc_steps=2, num_groups=4, max_stages=50)
    first = tempered_smc(jax.random.key(1), standard_normal_reference, counting_tilt, x0, **kwargs)
    jax.block_until_ready(first)
    traced = len(traces)
    assert traced > 0
    # Other keys, particles, target ESS and step size: same program, no retrace.
    second = tempered_smc(jax.random.key(2), standard_normal_reference, counting_tilt, x0 + 0.1, target_ess=0.6,
                          initial_step_size=0.3, **kwargs)
    jax.block_until_ready(second)
    assert len(traces) == traced
    assert float(second.info.step_size) != float(first.info.step_size)

    # It is jit-able as a whole with the callables, kernel and ints static.
    jitted = jax.jit(tempered_smc, static_argnames=("reference_logdensity", "tilt", "kernel", "num_mcmc_steps",
                                                     "max_stages", "num_groups", "num_integration_steps"))
    third = jitted(jax.random.key(1), standard_normal_reference, gaussian_tilt, x0, **kwargs)
    assert isinstance(third, SMCResult) and isinstance(third.info, SMCInfo)
    reference = tempered_smc(jax.random.key(1), standard_normal_reference, gaussian_tilt, x0, **kwargs)
    np.testing.assert_allclose(np.asarray(third.particles), np.asarray(reference.particles), rtol=1e-5, atol=1e-5)
    assert int(third.info.num_stages) == int(reference.info.num_stages)
