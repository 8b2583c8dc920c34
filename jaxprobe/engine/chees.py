"""ChEES warmup with batch-invariant cross-chain statistics.

ChEES (Hoffman, Radul & Sountsov 2021, "An Adaptive MCMC Scheme for Setting
Trajectory Lengths in Hamiltonian Monte Carlo") tunes jittered HMC from the
ensemble of all chains. This is BlackJAX's ``chees_adaptation``
(``blackjax/adaptation/chees_adaptation.py``, version 1.7) step for step, with
one change: every reduction over chains is the engine's fixed pairwise tree
:func:`jaxprobe.engine.core.chain_sum`, never ``jnp.sum``/``jnp.mean``/a
matmul over the chain axis. A plain reduction over a sharded chain axis is
split into per-device partial sums plus an all-reduce, so its rounding (and,
fed back through the adaptation, the adapted parameters) depends on the device
count; the tree gives the same bits on one device or many. The values that
enter and leave these sums are also materialized (:func:`_materialize`) so that
XLA cannot fuse a multiply into a following add as an FMA in one program and
not in the other. Result: the adapted parameters, and so the draws, are
bit-identical for 1 and 4 devices (``tests/test_engine_devices.py``, 64 chains;
with fewer than 2 warmup steps XLA folds the scan away and this is not ensured).

Per warmup step ``t`` (BlackJAX's ``compute_parameters``):

- step size: dual averaging (Hoffman & Gelman 2014) on ``target − h_t`` with
  ``h_t`` the harmonic mean of the non-divergent chains' acceptance
  probabilities; the sampling step size is the moving average
  ``log ε̄_t = (1 − t^{-κ}) log ε̄_{t−1} + t^{-κ} log ε_t`` (κ = ``decay_rate`` 0.5);
- trajectory length T: Adam on ``log T`` with the ChEES gradient (the paper's
  pathwise estimate of dChEES/dT, acceptance-weighted over chains)
  ``u_t · T · (|x̃' − E x̃'|² − |x̃ − E x̃|²) · ⟨x' − E x', p'⟩``, where ``u_t`` is
  the Halton jitter, ``x̃`` positions whitened by the current diagonal metric,
  updates clipped to ±0.35, and the same moving average;
- diagonal inverse mass matrix: the cross-chain variance of all chains' positions
  pooled over the last half of warmup (Chan et al.'s batched merge of the
  per-step ensemble, mathematically Welford's estimate), used once the pooled
  count reaches ``max(64, 2√D)``;
- BlackJAX 1.7's slow-direction floor on the trajectory length, ``π/2 · √λ_max``
  of the whitened pooled covariance (power iteration every 32 steps), applied
  where the length is consumed.

Costs beyond the HMC steps: O(C·D) per step, plus O(C·D²) per step in the
second half of warmup for the pooled covariance of the length floor (computed
in row blocks of at most 2^24 elements, so memory stays bounded).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from blackjax.optimizers import dual_averaging

from jaxprobe.engine.core import EngineState, chain_sum
from jaxprobe.engine.kernels import DynamicState
from jaxprobe.types import Array, PRNGKey

__all__ = ["ChEESState", "chees_warmup"]

FlatLogDensity = Callable[[Array], Array]

# BlackJAX's constants (chees_adaptation.py).
LOG_UPDATE_CLIP = 0.35
EPS_FLOAT = 1e-20
DECAY_RATE = 0.5
LENGTH_FLOOR_FACTOR = np.pi / 2
LENGTH_FLOOR_RECOMPUTE_INTERVAL = 32
LENGTH_FLOOR_POWER_ITERATIONS = 5
LENGTH_FLOOR_FINAL_POWER_ITERATIONS = 20
LENGTH_FLOOR_LAMBDA_EPS = 1e-6
MASS_MATRIX_WINDOW_FRACTION = 0.5
_BLOCK_ELEMENTS = 1 << 24


class _Moments(NamedTuple):
    """Pooled moments of all chains' positions: count ``()``, mean ``(D,)``, m2 ``(D,)`` or ``(D, D)``."""

    count: Array
    mean: Array
    m2: Array


class ChEESState(NamedTuple):
    """Adaptation state (scalars unless noted), BlackJAX's ``ChEESAdaptationState`` plus the moments."""

    step_size: Array
    log_step_size_ma: Array
    trajectory_length: Array
    log_trajectory_length_ma: Array
    dual_averaging: Any
    optimizer: Any
    random_generator_arg: Array
    step: Array  # 1-based, as in BlackJAX
    variance: _Moments  # diagonal pooled moments (D,)
    covariance: _Moments  # full pooled moments (D, D), for the length floor
    eigenvector: Array  # (D,) warm start of the power iteration
    lambda_max: Array


def _materialize(values: Array, opaque_zero: Array) -> Array:
    """``values`` unchanged, but rounded to their dtype at this point in every compiled program.

    XLA:CPU contracts a multiply that feeds an add into one fused multiply-add
    (openxla/xla#41579) whenever both land in the same fusion, and which ops
    share a fusion differs between the one-device program and the sharded one
    (the partitioner cuts fusions at its collectives): the same sum of products
    then rounds differently. Passing the bits through an integer xor with a zero
    the compiler cannot see (``opaque_zero``, from the scan counter) blocks the
    contraction in both programs; ``optimization_barrier`` and ``reduce_precision``
    do not (XLA removes or ignores them before code generation).
    """
    uint = {4: jnp.uint32, 8: jnp.uint64}[jnp.dtype(values.dtype).itemsize]
    bits = jax.lax.bitcast_convert_type(values, uint) ^ opaque_zero.astype(uint)
    return jax.lax.bitcast_convert_type(bits, values.dtype)


def _tree_sum(values: Array, opaque_zero: Array) -> Array:
    """:func:`chain_sum` with its inputs and result materialized (see :func:`_materialize`)."""
    return _materialize(chain_sum(_materialize(values, opaque_zero)), opaque_zero)


def _chain_sum_outer(centered: Array, opaque_zero: Array) -> Array:
    """``Σ_c centered[c] ⊗ centered[c]`` ``(D, D)`` by the pairwise tree, in row blocks.

    Every entry is the same tree of elementwise products and adds whatever the
    block size, so the result does not depend on the blocking or the device count.
    """
    num_chains, dim = centered.shape
    block = max(1, min(dim, _BLOCK_ELEMENTS // max(1, num_chains * dim)))
    if block == dim:
        return _tree_sum(centered[:, :, None] * centered[:, None, :], opaque_zero)
    num_blocks = -(-dim // block)
    padded = jnp.pad(centered, ((0, 0), (0, num_blocks * block - dim)))
    rows = jnp.moveaxis(padded.reshape(num_chains, num_blocks, block), 1, 0)  # (B, C, block)
    out = jax.lax.map(lambda r: _tree_sum(r[:, :, None] * centered[:, None, :], opaque_zero), rows)
    return out.reshape(num_blocks * block, dim)[:dim]


def _merge(moments: _Moments, batch: Array, full: bool, opaque_zero: Array) -> _Moments:
    """Chan–Golub–LeVeque merge of the pooled moments with one ensemble ``(C, D)`` (BlackJAX's
    ``cgl_update_batch``), every cross-chain sum by the pairwise tree."""
    n_a, mean_a, m2_a = moments
    n_b = jnp.asarray(batch.shape[0], n_a.dtype)
    mean_b = _materialize(_tree_sum(batch, opaque_zero) / batch.shape[0], opaque_zero)
    centered = _materialize(batch - mean_b, opaque_zero)
    m2_b = _chain_sum_outer(centered, opaque_zero) if full else _tree_sum(centered * centered, opaque_zero)
    n_ab = n_a + n_b
    delta = mean_b - mean_a
    mean_ab = mean_a + delta * (n_b / n_ab)
    outer = delta[:, None] * delta[None, :] if full else delta * delta
    m2_ab = m2_a + m2_b + outer * (n_a * n_b / n_ab)
    return _Moments(n_ab, mean_ab, m2_ab)


def _inverse_mass_matrix(variance: _Moments, threshold: int) -> Array:
    """The pooled variance once ``threshold`` samples are in, else ones (BlackJAX's engagement gate)."""
    estimate = jnp.maximum(variance.m2 / (variance.count - 1.0), EPS_FLOAT)
    return jnp.where(variance.count >= threshold, estimate, jnp.ones_like(variance.mean))


def _lambda_max(covariance: _Moments, inverse_mass_matrix: Array, eigenvector: Array,
                num_iterations: int) -> tuple[Array, Array]:
    """Top eigenvalue of the whitened pooled covariance by warm-started power iteration.

    Matrix–vector products as multiply-and-sum (no ``dot``), as in the engine's HMC metric.
    """
    matrix = covariance.m2 / jnp.maximum(covariance.count - 1.0, 1.0)
    inv_sqrt = 1.0 / jnp.sqrt(inverse_mass_matrix)
    matrix = matrix * inv_sqrt[:, None] * inv_sqrt[None, :]

    def matvec(v):
        return jnp.sum(matrix * v[None, :], axis=1)

    def body(_, v):
        w = matvec(v)
        norm = jnp.sqrt(jnp.sum(w * w))
        return w / jnp.where(norm > 0.0, norm, 1.0)

    v = jax.lax.fori_loop(0, num_iterations, body, eigenvector)
    return jnp.maximum(jnp.sum(v * matvec(v)), LENGTH_FLOOR_LAMBDA_EPS), v


def _floored_length(length: Array, lambda_max: Array, engaged: Array, step_size: Array,
                    max_leapfrog_steps: int) -> Array:
    """BlackJAX 1.7's consumed trajectory length: ``min(max(T, π/2·√λ_max), max_steps·ε)``."""
    floor = jnp.where(engaged, LENGTH_FLOOR_FACTOR * jnp.sqrt(lambda_max), 0.0)
    return jnp.minimum(jnp.maximum(length, floor), max_leapfrog_steps * step_size)


def _update(state: ChEESState, proposal_position: Array, proposal_momentum: Array, position: Array,
            acceptance: Array, is_divergent: Array, inverse_mass_matrix: Array, jitter: Array,
            optimizer: optax.GradientTransformation, target: float, max_leapfrog_steps: int,
            opaque_zero: Array) -> ChEESState:
    """One ChEES update from the ensemble (BlackJAX's ``compute_parameters``), tree reductions only."""
    dtype = position.dtype
    _, da_update, _ = dual_averaging.dual_averaging()

    def tree_sum(values):
        return _tree_sum(values, opaque_zero)

    def exact(values):
        return _materialize(values, opaque_zero)

    ok = ~is_divergent
    count_ok = tree_sum(ok.astype(dtype))

    # Dual averaging on the harmonic mean of the acceptance probabilities.
    harmonic_mean = count_ok / tree_sum(jnp.where(ok, 1.0 / acceptance, 0.0))
    harmonic_mean = jnp.where(jnp.isfinite(harmonic_mean), harmonic_mean, 0.0)
    da_new = da_update(state.dual_averaging, target - harmonic_mean)
    finite = jnp.isfinite(jnp.exp(da_new.log_x))
    da_state = jax.tree.map(lambda new, old: jnp.where(finite, new, old), da_new, state.dual_averaging)
    step_size = jnp.exp(da_state.log_x)
    weight = state.step.astype(dtype) ** (-DECAY_RATE)
    log_step_size_ma = (1.0 - weight) * state.log_step_size_ma + weight * da_state.log_x

    # ChEES gradient with respect to log T, centred by the (weighted) ensemble means.
    w = jnp.where(ok, acceptance, 0.0)
    finite_rows = jnp.all(jnp.isfinite(proposal_position), axis=-1)
    w_mean = jnp.where(finite_rows, w, 0.0)
    safe_proposal = jnp.where(jnp.isfinite(proposal_position), proposal_position, 0.0)
    proposal_mean = exact(tree_sum(w_mean[:, None] * safe_proposal) / (tree_sum(w_mean) + EPS_FLOAT))
    not_nan = ~jnp.isnan(position)
    initial_mean = exact(tree_sum(jnp.where(not_nan, position, 0.0)) / tree_sum(not_nan.astype(dtype)))
    inv_sqrt = exact(1.0 / jnp.sqrt(inverse_mass_matrix))
    proposal_centered = exact(exact(proposal_position - proposal_mean) * inv_sqrt)
    initial_centered = exact(exact(position - initial_mean) * inv_sqrt)
    velocity = exact(exact(proposal_momentum * inverse_mass_matrix) * inv_sqrt)
    per_chain = ((jnp.sum(proposal_centered * proposal_centered, axis=-1)
                  - jnp.sum(initial_centered * initial_centered, axis=-1))
                 * jnp.sum(proposal_centered * velocity, axis=-1))
    per_chain = jitter * state.trajectory_length * exact(per_chain)
    gradient = (tree_sum(jnp.where(ok, acceptance * per_chain, 0.0))
                / tree_sum(jnp.where(ok, acceptance + EPS_FLOAT, 0.0)))

    log_length = jnp.log(state.trajectory_length)
    updates, optimizer_new = optimizer.update(gradient, state.optimizer, log_length)
    updates = jnp.clip(updates, -LOG_UPDATE_CLIP, LOG_UPDATE_CLIP)
    log_length_new = optax.apply_updates(log_length, updates)
    finite = jnp.isfinite(log_length_new)
    log_length_new = jnp.where(finite, log_length_new, log_length)
    optimizer_state = jax.tree.map(lambda new, old: jnp.where(finite, new, old), optimizer_new, state.optimizer)
    log_length_ma = (1.0 - weight) * state.log_trajectory_length_ma + weight * log_length_new
    trajectory_length = jnp.clip(jnp.exp(log_length_ma), step_size, max_leapfrog_steps * step_size)
    return state._replace(
        step_size=step_size, log_step_size_ma=log_step_size_ma, trajectory_length=trajectory_length,
        log_trajectory_length_ma=log_length_ma, dual_averaging=da_state, optimizer=optimizer_state,
        random_generator_arg=state.random_generator_arg + 1, step=state.step + 1)


def chees_warmup(rng_key: PRNGKey, positions: Array, kernel: Any, logdensity_fn: FlatLogDensity, num_steps: int,
                 initial_step_size: float | None = None,
                 target_acceptance_rate: float | None = None,
                 _return_adaptation_state: bool = False) -> tuple[EngineState, Array]:
    """Cross-chain ChEES adaptation of step size, trajectory length and a diagonal inverse mass matrix.

    Pure and jit-able (``kernel``, ``logdensity_fn``, ``num_steps`` static). ``positions`` ``(C, D)``.
    Step ``t`` moves all chains with the ``ChEES`` kernel (BlackJAX's dynamic HMC) under the key
    ``fold_in(rng_key, t)``; the adaptation then reads the ensemble through pairwise-tree
    reductions only, so the result is bit-identical for any number of devices the chains are
    sharded over. Returns the engine state to sample from (shared step size, inverse mass
    matrix and mean number of leapfrog steps, broadcast per chain) and the ``(C,)`` mean
    acceptance rates over warmup. ``_return_adaptation_state=True`` (a diagnostic seam)
    returns the final :class:`ChEESState` instead.
    """
    num_chains, dim = positions.shape
    dtype = positions.dtype
    target = kernel.target_acceptance_rate if target_acceptance_rate is None else target_acceptance_rate
    step_size0 = jnp.asarray(kernel.initial_step_size(dim) if initial_step_size is None else initial_step_size, dtype)
    optimizer = optax.adam(kernel.learning_rate)
    da_init, _, _ = dual_averaging.dual_averaging()
    threshold = max(64, int(2 * np.sqrt(dim)))
    window_start = int(MASS_MATRIX_WINDOW_FRACTION * num_steps)
    zero = jnp.zeros((), dtype)

    chain_state = kernel.init(positions, logdensity_fn)
    state = ChEESState(
        step_size=step_size0, log_step_size_ma=zero, trajectory_length=step_size0, log_trajectory_length_ma=zero,
        dual_averaging=jax.tree.map(lambda x: jnp.asarray(x, dtype) if jnp.issubdtype(jnp.asarray(x).dtype,
                                    jnp.floating) else jnp.asarray(x), da_init(step_size0)),
        optimizer=optimizer.init(step_size0),
        random_generator_arg=jnp.zeros((), jnp.int32), step=jnp.ones((), jnp.int32),
        variance=_Moments(zero, jnp.zeros((dim,), dtype), jnp.zeros((dim,), dtype)),
        covariance=_Moments(zero, jnp.zeros((dim,), dtype), jnp.zeros((dim, dim), dtype)),
        eigenvector=jnp.full((dim,), 1.0 / np.sqrt(dim), dtype), lambda_max=jnp.ones((), dtype),
    )

    def one_step(carry, t):
        chain_state, state, acceptance_sum = carry
        inverse_mass_matrix = _inverse_mass_matrix(state.variance, threshold)
        engaged = state.variance.count >= threshold
        length = _floored_length(state.trajectory_length, state.lambda_max, engaged, state.step_size,
                                 kernel.max_leapfrog_steps)
        parameters = {
            "step_size": state.step_size,
            "inverse_mass_matrix": jnp.broadcast_to(inverse_mass_matrix, (num_chains, dim)),
            "num_leapfrog_steps": jnp.broadcast_to(length / state.step_size, (num_chains,)),
        }
        new_chain_state, info, raw = kernel.step_with_proposal(jax.random.fold_in(rng_key, t), chain_state,
                                                               parameters, logdensity_fn)
        jitter = kernel.jitter(state.random_generator_arg)
        # A zero the compiler cannot prove (t >= 0 is not known to it): see _materialize.
        opaque_zero = jnp.minimum(t, 0)
        state = _update(state, raw.proposal.position, raw.proposal.momentum, chain_state.position,
                        raw.acceptance_rate, raw.is_divergent, inverse_mass_matrix, jitter, optimizer, target,
                        kernel.max_leapfrog_steps, opaque_zero)

        in_window = t >= window_start
        position = new_chain_state.position
        variance = jax.lax.cond(in_window, lambda m: _merge(m, position, False, opaque_zero), lambda m: m, state.variance)
        covariance = jax.lax.cond(in_window, lambda m: _merge(m, position, True, opaque_zero), lambda m: m, state.covariance)
        recompute = in_window & (t % LENGTH_FLOOR_RECOMPUTE_INTERVAL == 0)
        lambda_max, eigenvector = jax.lax.cond(
            recompute,
            lambda v: _lambda_max(covariance, inverse_mass_matrix, v, LENGTH_FLOOR_POWER_ITERATIONS),
            lambda v: (state.lambda_max, v),
            state.eigenvector)
        state = state._replace(variance=variance, covariance=covariance, eigenvector=eigenvector,
                               lambda_max=lambda_max)
        return (new_chain_state, state, acceptance_sum + info.acceptance_rate), None

    acceptance0 = jnp.zeros((num_chains,), dtype)
    (chain_state, state, acceptance_sum), _ = jax.lax.scan(
        one_step, (chain_state, state, acceptance0), jnp.arange(num_steps, dtype=jnp.int32))
    if _return_adaptation_state:
        return state

    inverse_mass_matrix = _inverse_mass_matrix(state.variance, threshold)
    lambda_max, _ = _lambda_max(state.covariance, inverse_mass_matrix, state.eigenvector,
                                LENGTH_FLOOR_FINAL_POWER_ITERATIONS)
    step_size = jnp.exp(state.log_step_size_ma)
    length = _floored_length(jnp.exp(state.log_trajectory_length_ma), lambda_max,
                             state.variance.count >= threshold, step_size, kernel.max_leapfrog_steps)
    parameters = {
        "step_size": step_size.astype(dtype),
        "inverse_mass_matrix": jnp.broadcast_to(inverse_mass_matrix.astype(dtype), (num_chains, dim)),
        "num_leapfrog_steps": jnp.broadcast_to((length / step_size).astype(dtype), (num_chains,)),
    }
    # Sampling continues the chains' Halton index; the run's step counter restarts at 0.
    kernel_state = DynamicState(chain_state.position, chain_state.logdensity, chain_state.logdensity_grad,
                                chain_state.random_generator_arg)
    acceptance = acceptance_sum / num_steps if num_steps > 0 else jnp.ones((num_chains,), dtype)
    return EngineState(kernel_state, parameters, jnp.zeros((), jnp.int32)), acceptance
