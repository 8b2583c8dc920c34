"""Adaptive tempered sequential Monte Carlo with an evidence estimate and its standard error.

The problem
-----------
In an unconstrained space ``z ∈ R^D`` the target is

.. math::

    π_1(z) ∝ r(z)\\, e^{ℓ(z)},

with ``r`` the *reference* log density (``reference_logdensity``; exact draws of
it are given by the caller, its normalization need not be known) and ``ℓ`` the
*tilt* (``tilt``, e.g. ``ℓ(x) = −G(x)/τ``). The tempering path

.. math::

    π_λ(z) ∝ r(z)\\, e^{λ ℓ(z)}, \\qquad 0 = λ_0 < λ_1 < … < λ_K = 1,

goes from the reference to the target. With ``Z(λ) = E_r[e^{λℓ}]`` (relative to
the normalized reference) the incremental weight of a draw ``z ~ π_{λ_{k-1}}`` is
``w_k(z) = e^{(λ_k − λ_{k-1}) ℓ(z)}`` and ``E_{π_{λ_{k-1}}}[w_k] = Z(λ_k)/Z(λ_{k-1})``,
so the product of the stage averages is an unbiased estimate of ``Z(λ_k)``
(Del Moral, Doucet & Jasra 2006, "Sequential Monte Carlo samplers", JRSS-B 68(3);
the tempering path is one of their sequences of targets, with MCMC moves invariant
for the current target as forward kernels).

One stage ``k`` (N particles, all equally weighted on entry):

1. *Choose λ_k*: the largest increment ``δ ≤ 1 − λ_{k-1}`` such that the effective
   sample size of the incremental weights ``e^{δℓ}`` is ``target_ess · N``
   (Jasra, Stephens, Doucet & Tsagaris 2011; BlackJAX's ``ess.ess_solver`` with
   ``solver.dichotomy``).
   The ESS is that of all N particles pooled (every group is equally weighted on
   entry, so this is the ESS of the pooled incremental weights). The groups share
   the schedule; a pooled choice is less noisy than the minimum over groups.
2. *Reweight*: ``log w = δ ℓ(z)``; the log-evidence of each group grows by
   ``log mean_{group} w``.
3. *Resample* within each group (BlackJAX's ``resampling.systematic``).
4. *Tune* the inner kernel from the particles (see below).
5. *Move*: ``num_mcmc_steps`` steps of a π_{λ_k}-invariant MALA or HMC kernel per
   particle (BlackJAX's ``mcmc.mala`` / ``mcmc.hmc`` kernels, vmapped over the particles, each chain
   starting from the log density and gradient evaluated for step 4, so a stage costs ``1 + num_mcmc_steps``
   MALA gradients as with ``smc.base.update_and_take_last``).

After the stage with λ = 1 the particles are equally weighted draws from π_1.

Inner-kernel tuning (Chopin 2002; Buchholz, Chopin & Jacob 2021 "Adaptive tuning
of Hamiltonian Monte Carlo within sequential Monte Carlo")
--------------------------------------------------------------------------------
- Diagonal inverse mass matrix (``preconditioner="fisher"``, the default): the inverse
  of the resampled particles' mean squared gradient, ``1 / mean_i (∂_d log π_λ(z_i))²``
  (the diagonal Fisher information; for a Gaussian it is the precision, since
  ``E[∇log π ∇log π^T] = Σ⁻¹``). It costs nothing extra (the gradients start the
  kernel's chains) and, unlike the particles' variance, it measures the width of
  each mode and not the distance between separated modes: with the variance, bumps
  3 apart and 0.2 wide made MALA's whitened steps 70 times too long along the modes'
  axis, and doubled the spread of mode shares and log Z over seeds
  (``python -m jaxprobe.bench.smc_peers``; ``benchmarks/results/smc_peers.md``).
  ``preconditioner="variance"``: the particles' per-coordinate variance
  (``smc.tuning.from_particles.particles_stds`` squared), the rule before. A
  coordinate with zero Fisher information falls back to its variance; both are
  floored at ``10·eps·max`` so that no coordinate can freeze the kernel.
- Step size: ``ε_1 = initial_step_size`` (default ``D^{-1/3}`` for MALA, the
  Roberts & Rosenthal 1998 scaling, and ``D^{-1/4}`` for HMC, Beskos et al. 2013,
  both in mass-matrix-whitened units), then
  ``ε_k = ε_{k-1} · exp(ā_{k-1} − a*)`` with ``ā_{k-1}`` the previous stage's mean
  acceptance probability over all particles and steps and ``a* = 0.574`` (MALA) or
  ``0.65`` (HMC): a Robbins–Monro step on ``log ε`` with unit gain, which raises
  the step when the kernel accepts too often and lowers it otherwise.

Parameters are computed from the current particle population (fixed for the
whole stage), so every move is exactly π_{λ_k}-invariant given them.

Standard error of log Z
-----------------------
The N particles are split into ``num_groups`` = G groups of ``n = N/G``; each group
is its own SMC sampler (own weights, resampling within the group, own running
``log Ẑ_g``). The schedule and the kernel parameters are shared, computed from
all particles (a negligible coupling for the error estimate). The reported
estimate is ``log Ẑ = log mean_g Ẑ_g`` (a mean of estimates that are unbiased for a
fixed schedule and fixed kernel parameters; the adaptive choices add a bias that
vanishes as N grows), and its standard error by the delta method
``se(log Ẑ) ≈ sd_g(Ẑ_g) / (√G · mean_g Ẑ_g)``, computed from the ratios
``Ẑ_g / mean Ẑ_g = exp(log Ẑ_g − log Ẑ)`` (stable in log space;
:func:`jaxprobe.engine.estimates.log_mean_and_se`, the group-based error the SMC observables use too). The same
is recorded at every stage, giving the evidence path ``log Z(λ_k)``.

The price of the groups: the standard error is itself estimated from G values (relative
error ≈ 1/√(2(G−1)), 25 % at the default G = 8), so ``(log Ẑ − log Z)/se`` is t-like with
G − 1 degrees of freedom; and a particle average is the mean of G averages over n-particle
systems, so its O(1/n) self-normalization bias is that of n = N/G particles, not N (measured
at about −1/n to −2/n on a two-mode share, ``tests/engine/test_smc.py``), while Ẑ is
not affected. More groups sharpen the error bar, fewer reduce that bias.

Why not ``blackjax.adaptive_tempered_smc`` as it is: its step is "resample with
the previous weights, move at the previous λ, reweight", so its ESS solver looks
at particles that are not the ones reweighted, a run ends on weighted (not moved)
particles, it has no hook between resampling and moving to tune the kernel from
the resampled particles, and it has one weight vector (no independent groups for
the standard error). The stage loop, the group bookkeeping, the step-size rule
and MALA's preconditioning are therefore written here; every other piece is
BlackJAX's.

NaN or ±inf values of ``r + λℓ`` are treated as −inf (zero density): such
proposals are rejected (BlackJAX's ``proposal.safe_energy_diff``) and such
particles get zero weight.
"""

from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.mcmc import hmc, integrators, mala
from blackjax.smc import ess as smc_ess
from blackjax.smc import resampling, solver
from blackjax.smc.tuning import from_particles

from jaxprobe._inputs import check_int
from jaxprobe._pointwise import map_points
from jaxprobe.engine.compiled import jit_bounded
from jaxprobe.engine.estimates import log_mean_and_se as _log_mean_and_se  # the one group-based error
from jaxprobe.engine.numerics import in_positions_dtype
from jaxprobe.types import Array, PRNGKey

__all__ = ["SMCInfo", "SMCResult", "tempered_smc", "evidence_curve", "default_step_size", "KERNELS",
           "TARGET_ACCEPTANCE", "INNER_KERNELS", "InnerKernel"]

LogDensity = Callable[[Array], Array]


def _run_chains(keys: Array, states: NamedTuple, step: Callable, num_mcmc_steps: int) -> tuple[NamedTuple, NamedTuple]:
    """``num_mcmc_steps`` steps of ``step(key, state) -> (state, info)`` from each particle's state (vmapped),
    keeping the last state and every step's info ``(N, num_mcmc_steps)``. The states come in with their log
    density and gradient already evaluated (:func:`_evaluate`), so a stage costs no extra gradient for them."""
    def chain(key: PRNGKey, state: NamedTuple) -> tuple[NamedTuple, NamedTuple]:
        return jax.lax.scan(lambda current, k: step(k, current), state, jax.random.split(key, num_mcmc_steps))
    return map_points(lambda particle: chain(*particle), (keys, states))  # batches on a CPU: jaxprobe._pointwise


def _mala_kernel(rng_key: PRNGKey, state: mala.MALAState, logdensity_fn: LogDensity,
                 step_size: Array) -> tuple[mala.MALAState, mala.MALAInfo]:
    """One MALA step of a single particle, as ``blackjax.mala.build_kernel()`` makes it (same keys, same
    operations, same draws), with the noise in the position's dtype: BlackJAX's ``generate_gaussian_noise``
    returns float64 for float32 positions under ``jax_enable_x64`` and its accept/reject ``lax.cond`` then
    fails to trace."""
    def transition_energy(start, end):  # -log q(start | end) - log π(end), BlackJAX's transition_energy
        theta = start.position - end.position - step_size * end.logdensity_grad
        return -end.logdensity + 0.25 * (1.0 / step_size) * jnp.sum(theta * theta)

    key_integrator, key_rmh = jax.random.split(rng_key)
    noise = jax.random.normal(key_integrator, state.position.shape, state.position.dtype)
    position = state.position + step_size * state.logdensity_grad + jnp.sqrt(2 * step_size) * noise
    new_state = mala.MALAState(position, *jax.value_and_grad(logdensity_fn)(position))
    log_p_accept = transition_energy(new_state, state) - transition_energy(state, new_state)
    log_p_accept = jnp.where(jnp.isnan(log_p_accept), -jnp.inf, log_p_accept)
    p_accept = jnp.clip(jnp.exp(log_p_accept), max=1)
    do_accept = jax.random.bernoulli(key_rmh, p_accept)
    accepted = jax.tree.map(lambda new, old: jnp.where(do_accept, new, old), new_state, state)
    return accepted, mala.MALAInfo(p_accept, do_accept)


def _mala_move(keys: Array, positions: Array, values: Array, grads: Array, logdensity: LogDensity,
               step_size: Array, inverse_mass_matrix: Array, num_mcmc_steps: int,
               num_integration_steps: int) -> tuple[Array, Array, Array]:
    """``num_mcmc_steps`` preconditioned MALA steps per particle (step 5 of :func:`tempered_smc`, see :func:`_move`).

    BlackJAX's MALA has no mass matrix: run it on u = z / s with s = √diag(M⁻¹), whose
    density π_λ(s ⊙ u) has a constant Jacobian. In z this is MALA preconditioned by
    M⁻¹ = diag(s²): z' = z + ε M⁻¹∇log π_λ(z) + √(2ε) s ⊙ ξ. ``values`` (N,) and ``grads`` (N, D) are
    π_λ and its gradient at ``positions`` (in z; the gradient in u is s ⊙ grad).
    """
    del num_integration_steps
    scale = jnp.sqrt(inverse_mass_matrix)
    whitened_logdensity = lambda u: logdensity(scale * u)  # noqa: E731
    kernel = _mala_kernel  # BlackJAX's mala.build_kernel(), typed for float32 under x64
    states = mala.MALAState(positions / scale, values, grads * scale)
    last, info = _run_chains(keys, states, lambda k, state: kernel(k, state, whitened_logdensity, step_size),
                             num_mcmc_steps)
    return last.position * scale, info.acceptance_rate, jnp.full((positions.shape[0],), num_mcmc_steps, jnp.int32)


def _hmc_move(keys: Array, positions: Array, values: Array, grads: Array, logdensity: LogDensity,
              step_size: Array, inverse_mass_matrix: Array, num_mcmc_steps: int,
              num_integration_steps: int) -> tuple[Array, Array, Array]:
    """``num_mcmc_steps`` HMC steps (``num_integration_steps`` leapfrog steps, diagonal M⁻¹) per particle."""
    kernel = hmc.build_kernel(integrator=integrators.velocity_verlet)
    last, info = _run_chains(
        keys, hmc.HMCState(positions, values, grads),
        lambda k, state: kernel(k, state, logdensity, step_size, inverse_mass_matrix, num_integration_steps),
        num_mcmc_steps)
    return last.position, info.acceptance_rate, jnp.sum(info.num_integration_steps, axis=1).astype(jnp.int32)


class InnerKernel(NamedTuple):
    """An inner kernel of :func:`tempered_smc`: the target mean acceptance of the step-size rule, the
    exponent of the first stage's step size ``D^exponent``, and the move of all particles
    ``(keys (N,), positions (N, D), logdensity, step_size, inverse_mass_matrix (D,), num_mcmc_steps,
    num_integration_steps) -> (positions (N, D), acceptance (N, num_mcmc_steps), gradient evaluations (N,))``.

    Examples
    --------
    >>> sorted(INNER_KERNELS), INNER_KERNELS["mala"].target_acceptance   # tempered_smc(..., kernel="hmc")
    (['hmc', 'mala'], 0.574)
    """

    target_acceptance: float
    step_size_exponent: float
    move: Callable[..., tuple[Array, Array, Array]]


#: The inner kernels understood by :func:`tempered_smc`, by name. Targets: Roberts & Rosenthal 1998
#: for MALA, Beskos et al. 2013 for HMC; first step sizes ``D^{-1/3}`` and ``D^{-1/4}`` (same papers).
INNER_KERNELS: dict[str, InnerKernel] = {
    "mala": InnerKernel(0.574, -1.0 / 3.0, _mala_move),
    "hmc": InnerKernel(0.65, -0.25, _hmc_move),
}
KERNELS = tuple(INNER_KERNELS)
#: Target mean acceptance of the step-size rule, by inner kernel.
TARGET_ACCEPTANCE = {name: inner.target_acceptance for name, inner in INNER_KERNELS.items()}
# Floor on the particle variances used as the inverse mass matrix, relative to the largest one
# (in units of the dtype's eps): a coordinate on which the particles collapsed keeps moving.
_VARIANCE_FLOOR_EPS = 10.0


class SMCInfo(NamedTuple):
    """Per-run diagnostics of :func:`tempered_smc` (all jax arrays).

    ``max_stages`` buffers hold one entry per stage, NaN past ``num_stages``.

    Attributes
    ----------
    num_stages: ``()`` int32, the number of stages run.
    lambdas: ``(max_stages,)`` λ_k after stage k.
    log_evidence_path: ``(max_stages,)`` ``log Z(λ_k) = log E_r[exp(λ_k ℓ)]`` after stage k.
    log_evidence_path_se: ``(max_stages,)`` its standard error (group spread, delta method).
    ess: ``(max_stages,)`` ESS of the pooled incremental weights at stage k, as a fraction of N.
    acceptance_rate: ``(max_stages,)`` mean inner-kernel acceptance probability at stage k.
    step_size: ``()`` the inner step size used by the last stage's moves.
    inverse_mass_matrix: ``(D,)`` the diagonal inverse mass matrix of the last stage.
    num_gradient_evaluations: ``(N,)`` int32, gradient evaluations of ``r + λℓ`` per particle
        over the whole run (one per stage to initialize the kernel state, then one per
        MALA step or ``num_integration_steps`` per HMC step).
    reached_target: ``()`` bool, λ reached 1 within ``max_stages``.

    Examples
    --------
    >>> reference = jaxprobe.priors.StandardNormal()                # r = N(0, 1)
    >>> tilt = lambda x: -2.0 * jnp.sum((x - 2.0) ** 2)              # ℓ = −G/τ with G = 2(x − 2)², τ = 1
    >>> result = tempered_smc(jax.random.key(0), reference, tilt, reference.sample(jax.random.key(10), 256, (1,)))
    >>> info = result.info
    >>> stages = int(info.num_stages)
    >>> float(info.lambdas[stages - 1]), bool(np.isnan(info.lambdas[stages]))   # λ reached 1, then NaN
    (1.0, True)
    >>> info.num_gradient_evaluations.shape                                       # per particle
    (256,)
    """

    num_stages: Array
    lambdas: Array
    log_evidence_path: Array
    log_evidence_path_se: Array
    ess: Array
    acceptance_rate: Array
    step_size: Array
    inverse_mass_matrix: Array
    num_gradient_evaluations: Array
    reached_target: Array


class SMCResult(NamedTuple):
    """Result of :func:`tempered_smc`.

    Attributes
    ----------
    particles: ``(N, D)`` equally weighted draws from π_1 (after the last stage's resampling
        and moves; from π_λ with λ = ``info.lambdas`` at the last stage if ``info.reached_target``
        is False).
    logdensity: ``(N,)`` ``r(z) + ℓ(z)`` at the particles (non-finite values as −inf).
    log_evidence: ``()`` ``log Z = log E_r[exp(ℓ)]`` relative to the normalized reference
        (``log ∫ r e^ℓ − log ∫ r`` if ``r`` is unnormalized). At the last λ reached if the
        run stopped early.
    log_evidence_se: ``()`` its standard error (NaN with one group).
    info: :class:`SMCInfo`.
    group_log_evidence: ``(G,)`` each independent group's ``log Ẑ_g`` (``log_evidence`` is the log of their
        mean). An estimate from the particles weights group g by ``Ẑ_g / Σ Ẑ``
        (:func:`jaxprobe.engine.estimates.group_weights`): the equally weighted groups carry a bias of order
        1/(N/G) that does not shrink as groups are added.

    Examples
    --------
    >>> reference = jaxprobe.priors.StandardNormal()                # r = N(0, 1)
    >>> tilt = lambda x: -2.0 * jnp.sum((x - 2.0) ** 2)              # ℓ = −G/τ with G = 2(x − 2)², τ = 1
    >>> result = tempered_smc(jax.random.key(0), reference, tilt, reference.sample(jax.random.key(10), 256, (1,)))
    >>> result.particles.shape, result.group_log_evidence.shape      # 8 independent groups of 32
    ((256, 1), (8,))
    >>> log_mean = jax.scipy.special.logsumexp(result.group_log_evidence) - np.log(8)
    >>> bool(jnp.isclose(result.log_evidence, log_mean))             # log Z: the log of the groups' mean Ẑ_g
    True
    """

    particles: Array
    logdensity: Array
    log_evidence: Array
    log_evidence_se: Array
    info: SMCInfo
    group_log_evidence: Array


class _Carry(NamedTuple):
    rng_key: PRNGKey
    stage: Array  # () int32
    lam: Array  # ()
    particles: Array  # (N, D)
    log_z_groups: Array  # (G,)
    step_size: Array  # () the step size of the next stage (already adapted)
    inverse_mass_matrix: Array  # (D,)
    last_step_size: Array  # () the step size the last stage used
    grad_evals: Array  # (N,) int32
    lambdas: Array
    log_z_path: Array
    log_z_path_se: Array
    ess: Array
    acceptance: Array


def _finite_or_neg_inf(value: Array) -> Array:
    """NaN/±inf → −inf: a non-finite log density is treated as zero density."""
    return jnp.where(jnp.isfinite(value), value, -jnp.inf)


def _concrete_float(value: object) -> float | None:
    """``float(value)``, or None when it is a tracer (inside a caller's ``jax.jit``)."""
    try:
        return float(value)  # type: ignore[arg-type]
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
        return None


def _validate(reference_logdensity: object, tilt: object, particles: object, kernel: object, num_mcmc_steps: object,
              target_ess: object, max_stages: object, num_groups: object, initial_step_size: object,
              num_integration_steps: object) -> None:
    """Raise ValueError/TypeError naming the bad argument, before anything is compiled."""
    if not callable(reference_logdensity):
        raise TypeError(f"reference_logdensity must be callable, got {type(reference_logdensity).__name__}")
    if not callable(tilt):
        raise TypeError(f"tilt must be callable, got {type(tilt).__name__}")
    if not isinstance(kernel, str) or kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    check_int(num_mcmc_steps, "num_mcmc_steps", minimum=1)
    check_int(max_stages, "max_stages", minimum=1)
    check_int(num_groups, "num_groups", minimum=1)
    check_int(num_integration_steps, "num_integration_steps", minimum=1)
    shape = getattr(particles, "shape", None)
    if shape is None:
        raise TypeError(f"particles must be an array of shape (N, D), got {type(particles).__name__}")
    if len(shape) != 2:
        raise ValueError(f"particles must have shape (N, D) (one flat position per row), got shape {tuple(shape)}")
    dtype = getattr(particles, "dtype", None)
    if dtype is None or not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"particles must be a floating-point array, got dtype {dtype}")
    num_particles, dim = shape
    if dim < 1:
        raise ValueError(f"particles must have at least one coordinate, got shape {tuple(shape)}")
    if num_particles < 2 * num_groups:
        raise ValueError(f"particles: N = {num_particles} particles is fewer than 2·num_groups = {2 * num_groups} "
                         f"(at least two particles per group)")
    if num_particles % num_groups:
        raise ValueError(f"particles: N = {num_particles} is not divisible by num_groups = {num_groups}")
    ess_value = _concrete_float(target_ess)
    if ess_value is not None and not 0.0 < ess_value < 1.0:
        raise ValueError(f"target_ess must lie in (0, 1), got {ess_value}")
    if initial_step_size is not None:
        step_value = _concrete_float(initial_step_size)
        if step_value is not None and not (math.isfinite(step_value) and step_value > 0):
            raise ValueError(f"initial_step_size must be a positive finite number, got {step_value}")
    try:
        host = np.asarray(particles)
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
        host = None  # traced inside a caller's jit: cannot be inspected here
    if host is not None and not np.all(np.isfinite(host)):
        bad = int(np.sum(~np.all(np.isfinite(host), axis=1)))
        raise ValueError(f"particles: {bad} initial particle(s) have non-finite coordinates")


def default_step_size(kernel: str, dim: int) -> float:
    """The first stage's step size in mass-matrix-whitened units: ``D^{-1/3}`` (MALA), ``D^{-1/4}`` (HMC).

    BlackJAX's MALA proposes ``z + ε∇log π + √(2ε) ξ`` (so ``ε`` is half the proposal
    variance); its HMC ``ε`` is the leapfrog step.

    Examples
    --------
    >>> round(default_step_size("mala", 8), 3), round(default_step_size("hmc", 16), 3)   # D^(−1/3), D^(−1/4)
    (0.5, 0.5)
    """
    return float(dim) ** INNER_KERNELS[kernel].step_size_exponent


def tempered_smc(
    rng_key: PRNGKey,
    reference_logdensity: LogDensity,
    tilt: LogDensity,
    particles: Array,
    *,
    kernel: str = "mala",
    num_mcmc_steps: int = 4,
    target_ess: float = 0.7,
    max_stages: int = 200,
    num_groups: int = 8,
    initial_step_size: float | None = None,
    num_integration_steps: int = 8,
    preconditioner: str = "fisher",
) -> SMCResult:
    """Adaptive tempered SMC from exact reference draws to ``π_1 ∝ r·e^ℓ``, with ``log Z`` and its error.

    Runs stages ``λ_0 = 0 < λ_1 < … < λ_K = 1`` of the path ``π_λ ∝ r·e^{λℓ}`` (module
    docstring): choose ``λ_k`` so that the ESS of the incremental weights is
    ``target_ess·N``, reweight, resample systematically within each of ``num_groups``
    groups, tune the inner kernel from the particles, then move every particle with
    ``num_mcmc_steps`` π_{λ_k}-invariant MALA or HMC steps. The whole run is one compiled
    program (a ``lax.while_loop`` over stages with ``(max_stages,)`` buffers).

    Parameters
    ----------
    rng_key: a ``jax.random.key`` (or legacy uint32[2] key).
    reference_logdensity: ``r``, the reference log density of one ``(D,)`` point → scalar;
        need not be normalized. Static (hashed by identity for the compile cache).
    tilt: ``ℓ``, the log tilt of one ``(D,)`` point → scalar (e.g. ``−G(x)/τ``). Static.
    particles: ``(N, D)`` float, exact independent draws of ``r`` (λ = 0).
    kernel: ``"mala"`` (preconditioned MALA) or ``"hmc"`` (HMC, ``num_integration_steps``
        leapfrog steps). Static.
    num_mcmc_steps: inner-kernel steps per particle per stage (≥ 1; default 4, as ``sampler="smc"``: with
        ``target_ess`` 0.7, less spread of mode shares and log Z per gradient evaluation than BlackJAX's best
        setting on every question of ``benchmarks/results/smc_peers.md``). Static.
    target_ess: ESS fraction in (0, 1) that fixes each λ increment (default 0.7). Traced (no recompile).
    max_stages: the most stages; ``info.reached_target`` says whether λ got to 1. Static.
    num_groups: independent particle groups for the standard error of ``log Z``; N must be
        divisible by it and N ≥ 2·num_groups. Static.
    initial_step_size: the first stage's step size in whitened units (default
        :func:`default_step_size`). Traced.
    num_integration_steps: leapfrog steps per HMC step. Static.
    preconditioner: the rule of the diagonal inverse mass matrix, one of :data:`PRECONDITIONERS`. Static.

    Returns
    -------
    :class:`SMCResult` with ``particles`` ``(N, D)``, ``logdensity`` ``(N,)``, ``log_evidence``
    ``()``, ``log_evidence_se`` ``()`` and the per-stage :class:`SMCInfo`.

    Raises
    ------
    ValueError, TypeError
        Naming the argument, before compiling, for: N < 2·num_groups,
        N not divisible by num_groups, target_ess outside (0, 1), num_mcmc_steps < 1, an
        unknown kernel, non-finite initial particles (when concrete), particles not of rank 2.

    Notes
    -----
    Under a caller's ``jax.jit`` pass the callables, ``kernel`` and the ints as static
    arguments, e.g. ``jax.jit(tempered_smc, static_argnames=("reference_logdensity", "tilt",
    "kernel", "num_mcmc_steps", "max_stages", "num_groups", "num_integration_steps"))``.

    Examples
    --------
    >>> import math
    >>> reference = jaxprobe.priors.StandardNormal()                # r = N(0, 1), exact draws
    >>> tilt = lambda x: -2.0 * jnp.sum((x - 2.0) ** 2)              # ℓ: a bump N(2, ¼) up to its constant
    >>> result = tempered_smc(jax.random.key(0), reference, tilt, reference.sample(jax.random.key(10), 256, (1,)))
    >>> result.particles.shape, bool(result.info.reached_target)
    ((256, 1), True)
    >>> bool(abs(float(result.particles.mean()) - 1.6) < 0.1)        # the target is N(1.6, 0.2)
    True
    >>> exact = 0.5 * math.log(0.25 / 1.25) - 2.0 / 1.25             # log E_r[e^ℓ]
    >>> bool(abs(float(result.log_evidence) - exact) < 4 * float(result.log_evidence_se))
    True
    """
    _validate(reference_logdensity, tilt, particles, kernel, num_mcmc_steps, target_ess, max_stages,
              num_groups, initial_step_size, num_integration_steps)
    if preconditioner not in PRECONDITIONERS:
        raise ValueError(f"preconditioner must be one of {PRECONDITIONERS}, got {preconditioner!r}")
    particles = jnp.asarray(particles)
    dtype = particles.dtype
    if initial_step_size is None:
        initial_step_size = default_step_size(kernel, particles.shape[1])
    return _tempered_smc_compiled(
        rng_key, particles, jnp.asarray(target_ess, dtype), jnp.asarray(initial_step_size, dtype),
        reference_logdensity=reference_logdensity, tilt=tilt, kernel=kernel,
        num_mcmc_steps=int(num_mcmc_steps), max_stages=int(max_stages), num_groups=int(num_groups),
        num_integration_steps=int(num_integration_steps), preconditioner=preconditioner)


def _tempered_logdensity(reference_logdensity: LogDensity, tilt: LogDensity, lam: Array) -> LogDensity:
    """``z ↦ r(z) + λ ℓ(z)``, the log density of π_λ that the moves of a stage leave invariant."""
    def logdensity(z: Array) -> Array:
        # λ·ℓ with ℓ = −inf and λ > 0 is −inf; any NaN/inf total becomes −inf.
        return _finite_or_neg_inf(reference_logdensity(z) + lam * tilt(z))
    return logdensity


def _next_lambda(tilt_values: Array, particles: Array, lam: Array, target_ess: Array) -> tuple[Array, Array]:
    """Step 1, choose λ_k: the next λ and its increment δ, such that the ESS of the pooled incremental
    weights ``e^{δℓ}`` is ``target_ess·N`` (λ = 1 exactly once the largest increment is reached)."""
    dtype = particles.dtype
    max_delta = 1.0 - lam
    # BlackJAX's dichotomy mixes Python floats (its 0.0 start, its NaN) with our ends in lax.cond, whose
    # branches must agree in type: solve in the default float dtype (float64 under jax_enable_x64, else
    # float32, so float32 runs are unchanged); δ goes back to the particles' dtype below.
    def dichotomy(fun, min_delta, max_delta):
        solve_dtype = jax.dtypes.canonicalize_dtype(jnp.float64)
        return solver.dichotomy(fun, jnp.asarray(min_delta, solve_dtype), jnp.asarray(max_delta, solve_dtype))

    delta = smc_ess.ess_solver(lambda _: tilt_values, particles, target_ess, max_delta, dichotomy)
    delta = jnp.clip(delta, 0.0, max_delta).astype(dtype)
    reached = delta >= max_delta
    next_lam = jnp.where(reached, jnp.ones((), dtype), lam + delta)
    return next_lam, next_lam - lam


def _reweight(tilt_values: Array, delta: Array, log_z_groups: Array) -> tuple[Array, Array, Array]:
    """Step 2, reweight: ``log w = δℓ`` (zero weight where ℓ = −inf) and each group's evidence increment.

    Returns the ESS of the pooled weights as a fraction of N, the updated ``log Ẑ_g`` ``(G,)`` and the
    normalized weights within each group ``(G, N/G)``."""
    num_particles = tilt_values.shape[0]
    num_groups = log_z_groups.shape[0]
    group_size = num_particles // num_groups
    log_weights = jnp.where(tilt_values == -jnp.inf, -jnp.inf, delta * tilt_values)
    ess_fraction = jnp.exp(smc_ess.log_ess(log_weights)) / num_particles
    log_weights = log_weights.reshape(num_groups, group_size)
    log_sums = jax.scipy.special.logsumexp(log_weights, axis=1)  # (G,)
    log_z_groups = log_z_groups + log_sums - math.log(group_size)
    # A group whose particles all have zero weight keeps log Ẑ_g = −inf; resample it uniformly.
    weights = jnp.where(jnp.isfinite(log_sums)[:, None], jnp.exp(log_weights - log_sums[:, None]),
                        1.0 / group_size)
    return ess_fraction, log_z_groups, weights


def _resample_within_groups(rng_key: PRNGKey, particles: Array, weights: Array) -> Array:
    """Step 3, resample: systematic resampling of each group's particles ``(N, D)`` by its weights ``(G, N/G)``."""
    num_groups, group_size = weights.shape
    num_particles, dim = particles.shape
    resample_groups = jax.vmap(lambda key, group_weights: resampling.systematic(key, group_weights, group_size))
    indices = resample_groups(jax.random.split(rng_key, num_groups), weights)
    grouped = particles.reshape(num_groups, group_size, dim)
    return jnp.take_along_axis(grouped, indices[:, :, None], axis=1).reshape(num_particles, dim)


#: The rules for the inner kernel's diagonal inverse mass matrix (step 4), by name: "fisher" (default),
#: ``1 / mean_i (∂_d log π_λ(z_i))²``, the inverse of the particles' Fisher information, which for a Gaussian
#: mode is its variance and which, unlike the variance, does not grow with the distance between separated
#: modes; "variance", the particles' variances (pooled over modes, so too wide when there are several).
PRECONDITIONERS = ("fisher", "variance")


def _evaluate(logdensity: LogDensity, positions: Array) -> tuple[Array, Array]:
    """``log π_λ`` (N,) and its gradient (N, D) at the particles, non-finite values as −inf and zero gradient
    (one gradient evaluation per particle: it tunes the mass matrix and starts the inner kernel's state)."""
    values, grads = map_points(jax.value_and_grad(logdensity), positions)
    grads = jnp.where(jnp.isfinite(values)[:, None] & jnp.isfinite(grads), grads, 0.0)
    return _finite_or_neg_inf(values), grads


def _inverse_mass_matrix_from_particles(particles: Array, values: Array, grads: Array, rule: str) -> Array:
    """Step 4, tune: the diagonal M⁻¹ (D,) from the resampled particles (pooled over groups), by ``rule``
    (:data:`PRECONDITIONERS`); a coordinate whose Fisher information is zero falls back to its variance. Floored
    at ``_VARIANCE_FLOOR_EPS·eps`` times the largest entry so that no coordinate freezes."""
    variance_floor = _VARIANCE_FLOOR_EPS * jnp.finfo(particles.dtype).eps
    variances = from_particles.particles_stds(particles) ** 2
    if rule == "fisher":
        finite = jnp.isfinite(values)[:, None]
        fisher = jnp.sum(jnp.where(finite, grads**2, 0.0), axis=0) / jnp.maximum(jnp.sum(finite), 1)
        variances = jnp.where(fisher > 0, 1.0 / jnp.where(fisher > 0, fisher, 1.0), variances)
    largest = jnp.max(variances)
    floor = variance_floor * jnp.where(largest > 0, largest, 1.0)
    return jnp.maximum(variances, floor)


def _move(rng_key: PRNGKey, positions: Array, values: Array, grads: Array, logdensity: LogDensity, step_size: Array,
          inverse_mass_matrix: Array, kernel: str, num_mcmc_steps: int,
          num_integration_steps: int) -> tuple[Array, Array, Array]:
    """Step 5, move: ``num_mcmc_steps`` π_λ-invariant steps of the inner kernel per particle.

    positions (N, D) with their ``values`` (N,) and ``grads`` (N, D) under π_λ → new positions (N, D), the mean
    acceptance probability over all particles and steps ``()`` (0 if NaN), gradient evaluations of the steps
    (N,) int32 (the one at the start, :func:`_evaluate`, is counted by the caller)."""
    keys = jax.random.split(rng_key, positions.shape[0])
    new_positions, acceptance, steps = INNER_KERNELS[kernel].move(
        keys, positions, values, grads, logdensity, step_size, inverse_mass_matrix, num_mcmc_steps,
        num_integration_steps)
    mean_acceptance = jnp.nan_to_num(jnp.mean(acceptance), nan=0.0).astype(positions.dtype)
    return new_positions, mean_acceptance, steps


def _record_stage(carry: _Carry, rng_key: PRNGKey, lam: Array, particles: Array, log_z_groups: Array,
                  next_step_size: Array, inverse_mass_matrix: Array, steps: Array, ess_fraction: Array,
                  mean_acceptance: Array) -> _Carry:
    """Record stage ``carry.stage``: the new state, and its λ, evidence, ESS and acceptance in the buffers."""
    k = carry.stage
    log_z, log_z_se = _log_mean_and_se(log_z_groups)
    return _Carry(
        rng_key=rng_key,
        stage=k + 1,
        lam=lam,
        particles=particles,
        log_z_groups=log_z_groups,
        step_size=next_step_size,
        inverse_mass_matrix=inverse_mass_matrix,
        last_step_size=carry.step_size,
        grad_evals=carry.grad_evals + 1 + steps,  # + 1: the kernel's init evaluates the gradient
        lambdas=carry.lambdas.at[k].set(lam),
        log_z_path=carry.log_z_path.at[k].set(log_z),
        log_z_path_se=carry.log_z_path_se.at[k].set(log_z_se),
        ess=carry.ess.at[k].set(ess_fraction),
        acceptance=carry.acceptance.at[k].set(mean_acceptance),
    )


def _initial_carry(rng_key: PRNGKey, particles: Array, initial_step_size: Array, max_stages: int,
                   num_groups: int) -> _Carry:
    """The state before the first stage: λ = 0, exact reference draws, ``log Ẑ_g = 0``, NaN buffers."""
    num_particles, dim = particles.shape
    dtype = particles.dtype
    nan_buffer = jnp.full((max_stages,), jnp.nan, dtype)
    return _Carry(
        rng_key=rng_key,
        stage=jnp.zeros((), jnp.int32),
        lam=jnp.zeros((), dtype),
        particles=particles,
        log_z_groups=jnp.zeros((num_groups,), dtype),
        step_size=initial_step_size,
        inverse_mass_matrix=jnp.ones((dim,), dtype),
        last_step_size=initial_step_size,
        grad_evals=jnp.zeros((num_particles,), jnp.int32),
        lambdas=nan_buffer,
        log_z_path=nan_buffer,
        log_z_path_se=nan_buffer,
        ess=nan_buffer,
        acceptance=nan_buffer,
    )


def _result(final: _Carry, reference_logdensity: LogDensity, tilt: LogDensity) -> SMCResult:
    """The :class:`SMCResult` of the last stage's state: the particles' ``r + ℓ``, ``log Ẑ`` and the info."""
    logdensity = map_points(lambda z: _finite_or_neg_inf(reference_logdensity(z) + tilt(z)), final.particles)
    log_z, log_z_se = _log_mean_and_se(final.log_z_groups)
    info = SMCInfo(
        num_stages=final.stage,
        lambdas=final.lambdas,
        log_evidence_path=final.log_z_path,
        log_evidence_path_se=final.log_z_path_se,
        ess=final.ess,
        acceptance_rate=final.acceptance,
        step_size=final.last_step_size,
        inverse_mass_matrix=final.inverse_mass_matrix,
        num_gradient_evaluations=final.grad_evals,
        reached_target=final.lam >= 1.0,
    )
    return SMCResult(final.particles, logdensity, log_z, log_z_se, info, final.log_z_groups)


@jit_bounded(static_argnames=("reference_logdensity", "tilt", "kernel", "num_mcmc_steps", "max_stages",
                               "num_groups", "num_integration_steps", "preconditioner"))
def _tempered_smc_compiled(rng_key: PRNGKey, particles: Array, target_ess: Array, initial_step_size: Array, *,
                           reference_logdensity: LogDensity, tilt: LogDensity, kernel: str, num_mcmc_steps: int,
                           max_stages: int, num_groups: int, num_integration_steps: int,
                           preconditioner: str = "fisher") -> SMCResult:
    """The compiled body of :func:`tempered_smc` (arguments already validated): a ``lax.while_loop`` over
    stages, each one the steps 1-5 of the module docstring and its record."""
    target_acceptance = TARGET_ACCEPTANCE[kernel]
    # in the particles' dtype: a float64 value for float32 particles (x64) would change the loop's types
    reference_logdensity, tilt = in_positions_dtype(reference_logdensity), in_positions_dtype(tilt)
    batched_tilt = functools.partial(map_points, lambda z: _finite_or_neg_inf(tilt(z)))  # values only: _pointwise

    def stage(carry: _Carry) -> _Carry:
        key, key_resample, key_move = jax.random.split(carry.rng_key, 3)
        tilt_values = batched_tilt(carry.particles)
        lam, delta = _next_lambda(tilt_values, carry.particles, carry.lam, target_ess)
        ess_fraction, log_z_groups, weights = _reweight(tilt_values, delta, carry.log_z_groups)
        resampled = _resample_within_groups(key_resample, carry.particles, weights)
        logdensity = _tempered_logdensity(reference_logdensity, tilt, lam)
        values, grads = _evaluate(logdensity, resampled)
        inverse_mass_matrix = _inverse_mass_matrix_from_particles(resampled, values, grads, preconditioner)
        new_particles, mean_acceptance, steps = _move(
            key_move, resampled, values, grads, logdensity, carry.step_size, inverse_mass_matrix, kernel,
            num_mcmc_steps, num_integration_steps)
        # Robbins–Monro step on log ε towards the target acceptance (module docstring).
        next_step_size = carry.step_size * jnp.exp(mean_acceptance - target_acceptance)
        return _record_stage(carry, key, lam, new_particles, log_z_groups, next_step_size, inverse_mass_matrix,
                             steps, ess_fraction, mean_acceptance)

    def not_done(carry: _Carry) -> Array:
        return jnp.logical_and(carry.stage < max_stages, carry.lam < 1.0)

    initial = _initial_carry(rng_key, particles, initial_step_size, max_stages, num_groups)
    final = jax.lax.while_loop(not_done, stage, initial)
    return _result(final, reference_logdensity, tilt)


def evidence_curve(info: SMCInfo, temperature: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The evidence path as a curve over temperatures (host helper).

    With ``ℓ = −G/τ`` the stage target ``π_{λ} ∝ r·e^{−λG/τ}`` is the same question asked at
    temperature ``τ/λ``, so one run gives ``log Z`` at every recorded temperature
    ``τ/λ_1 > … > τ/λ_K = τ``.

    Parameters
    ----------
    info: the :class:`SMCInfo` of a run.
    temperature: the τ of the tilt ``ℓ = −G/τ`` (> 0).

    Returns
    -------
    ``(temperatures, log_evidence, se)``, NumPy arrays of shape ``(num_stages,)``, in stage
    order (decreasing temperature).

    Examples
    --------
    >>> reference = jaxprobe.priors.StandardNormal()                # r = N(0, 1)
    >>> tilt = lambda x: -2.0 * jnp.sum((x - 2.0) ** 2)              # ℓ = −G/τ with G = 2(x − 2)², τ = 1
    >>> result = tempered_smc(jax.random.key(0), reference, tilt, reference.sample(jax.random.key(10), 256, (1,)))
    >>> temperatures, log_z, se = evidence_curve(result.info, temperature=1.0)
    >>> float(temperatures[-1]), bool(np.all(np.diff(temperatures) < 0))   # from hot to τ = 1
    (1.0, True)
    >>> bool(log_z[-1] == result.log_evidence)                             # the last stage is the answer
    True
    """
    temperature = float(temperature)
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a positive finite number, got {temperature}")
    num_stages = int(info.num_stages)
    lambdas = np.asarray(info.lambdas, np.float64)[:num_stages]
    log_z = np.asarray(info.log_evidence_path, np.float64)[:num_stages]
    se = np.asarray(info.log_evidence_path_se, np.float64)[:num_stages]
    return temperature / lambdas, log_z, se
