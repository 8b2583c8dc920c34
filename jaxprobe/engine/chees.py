"""ChEES warmup: BlackJAX's ``chees_adaptation`` as an :class:`~jaxprobe.engine.protocols.Adaptation`.

ChEES (Hoffman, Radul & Sountsov 2021, "An Adaptive MCMC Scheme for Setting
Trajectory Lengths in Hamiltonian Monte Carlo") tunes jittered HMC from the
ensemble of all chains. :class:`ChEESAdaptation` runs BlackJAX's
``chees_adaptation`` (``blackjax/adaptation/chees_adaptation.py``, version 1.7)
step by step, with jaxprobe's per-step keys ``fold_in(rng_key, t)`` and chunked
warmup, under the kernel's numerics policy (:mod:`jaxprobe.engine.numerics`):

- ``numerics="fast"``: BlackJAX's own pieces: its per-step update (``base``: dual
  averaging, the ChEES gradient, Adam), ``cgl_update_batch`` for the pooled moments,
  and its slow-direction length floor (power iteration, ``_recompute_eig_state``,
  ``_apply_length_floor``). Its sums over chains are ``jnp.sum``/``jnp.mean``/a matmul.
- ``numerics="reproducible"``: the same update written out here (:func:`_update`,
  :func:`_merge`, :func:`_lambda_max`) with one change: every reduction over chains
  is the fixed pairwise tree :meth:`Numerics.chain_sum
  <jaxprobe.engine.numerics.Numerics.chain_sum>`, never ``jnp.sum``/``jnp.mean``/a
  matmul over the chain axis. A plain reduction over a sharded chain axis is split
  into per-device partial sums plus an all-reduce, so its rounding (and, fed back
  through the adaptation, the adapted parameters) depends on the device count; the
  tree gives the same bits on one device or many. The values that enter and leave
  these sums also pass :meth:`~jaxprobe.engine.numerics.Numerics.fma_barrier`, so that
  XLA cannot fuse a multiply into a following add as an FMA in one program and not in
  the other. Result: the adapted parameters, and so the draws, are bit-identical for 1
  and 4 devices (``tests/engine/test_api_devices.py``, 64 chains; with fewer than 2 warmup
  steps XLA folds the scan away and this is not ensured). This re-implementation is
  kept for that promise only; both modes adapt to the same values up to Monte-Carlo
  noise (``tests/engine/test_chees.py``, ``tests/engine/test_numerics.py``). Its price on CPU
  (2 cores, the D = 30 MLP target of ``jaxprobe/bench/throughput.py``, 200 warmup steps,
  min of 6 alternated runs): 1.12x the fast mode's warmup time at C = 128 (0.065 s vs
  0.058 s) and 1.11x at C = 1024 (0.368 s vs 0.330 s).

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
second half of warmup for the pooled covariance of the length floor (reproducible:
computed in row blocks of at most 2^24 elements, so memory stays bounded; fast: one
``(D, C) @ (C, D)`` matmul).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from blackjax.adaptation import chees_adaptation as bj_chees
from blackjax.adaptation.metric_buffers import MomentBlock, cgl_update_batch
from blackjax.optimizers import dual_averaging

from jaxprobe.engine.numerics import Numerics, numerics_of
from jaxprobe.engine.protocols import EngineState, FlatLogDensity, RunStats
from jaxprobe.types import Array, PRNGKey

__all__ = ["ChEESState", "ChEESWarmupState", "ChEESAdaptation", "chees_warmup"]

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


class ChEESState(NamedTuple):
    """Adaptation state (scalars unless noted): BlackJAX's ``ChEESAdaptationState`` (the first eight fields, in
    its order) plus the pooled moments of the mass matrix and of the length floor (BlackJAX's ``MomentBlock``:
    count ``()``, mean ``(D,)``, m2 ``(D,)`` or ``(D, D)``) and the floor's power-iteration state.

    Examples
    --------
    >>> from jaxprobe import engine
    >>> kernel, logdensity = engine.make_kernel("chees"), jaxprobe.priors.StandardNormal()
    >>> parameters = engine.default_parameters(kernel, 4, 2, jnp.float32, step_size=0.5)
    >>> state = engine.init(kernel, logdensity, jnp.zeros((4, 2)), parameters)
    >>> chees = ChEESAdaptation(kernel).init(state, logdensity).adaptation    # a ChEESState
    >>> float(chees.step_size), float(chees.trajectory_length), chees.covariance.m2.shape   # one step long
    (0.5, 0.5, (2, 2))
    """

    step_size: Array
    log_step_size_ma: Array
    trajectory_length: Array
    log_trajectory_length_ma: Array
    dual_averaging: Any
    optimizer: Any
    random_generator_arg: Array
    step: Array  # 1-based, as in BlackJAX
    variance: MomentBlock  # diagonal pooled moments (D,)
    covariance: MomentBlock  # full pooled moments (D, D), for the length floor
    eigenvector: Array  # (D,) warm start of the power iteration
    lambda_max: Array


def _chain_sum_outer(centered: Array, numerics: Numerics, opaque_zero: Array) -> Array:
    """``Σ_c centered[c] ⊗ centered[c]`` ``(D, D)`` by the pairwise tree, in row blocks.

    Every entry is the same tree of elementwise products and adds whatever the
    block size, so the result does not depend on the blocking or the device count.
    """
    num_chains, dim = centered.shape
    block = max(1, min(dim, _BLOCK_ELEMENTS // max(1, num_chains * dim)))
    if block == dim:
        return numerics.chain_sum(centered[:, :, None] * centered[:, None, :], opaque_zero)
    num_blocks = -(-dim // block)
    padded = jnp.pad(centered, ((0, 0), (0, num_blocks * block - dim)))
    rows = jnp.moveaxis(padded.reshape(num_chains, num_blocks, block), 1, 0)  # (B, C, block)
    out = jax.lax.map(lambda r: numerics.chain_sum(r[:, :, None] * centered[:, None, :], opaque_zero), rows)
    return out.reshape(num_blocks * block, dim)[:dim]


def _merge(moments: MomentBlock, batch: Array, full: bool, numerics: Numerics, opaque_zero: Array) -> MomentBlock:
    """Chan–Golub–LeVeque merge of the pooled moments with one ensemble ``(C, D)`` (BlackJAX's
    ``cgl_update_batch``), every cross-chain sum by the pairwise tree (reproducible mode)."""
    n_a, mean_a, m2_a = moments
    n_b = jnp.asarray(batch.shape[0], n_a.dtype)
    exact = lambda values: numerics.fma_barrier(values, opaque_zero)  # noqa: E731
    mean_b = exact(numerics.chain_sum(batch, opaque_zero) / batch.shape[0])
    centered = exact(batch - mean_b)
    m2_b = (_chain_sum_outer(centered, numerics, opaque_zero) if full
            else numerics.chain_sum(centered * centered, opaque_zero))
    n_ab = n_a + n_b
    delta = mean_b - mean_a
    mean_ab = mean_a + delta * (n_b / n_ab)
    outer = delta[:, None] * delta[None, :] if full else delta * delta
    m2_ab = m2_a + m2_b + outer * (n_a * n_b / n_ab)
    return MomentBlock(n_ab, mean_ab, m2_ab)


def _inverse_mass_matrix(variance: MomentBlock, threshold: int) -> Array:
    """The pooled variance once ``threshold`` samples are in, else ones (BlackJAX's engagement gate)."""
    estimate = jnp.maximum(variance.m2 / (variance.count - 1.0), EPS_FLOAT)
    return jnp.where(variance.count >= threshold, estimate, jnp.ones_like(variance.mean))


def _lambda_max(covariance: MomentBlock, inverse_mass_matrix: Array, eigenvector: Array,
                num_iterations: int, numerics: Numerics) -> tuple[Array, Array]:
    """Top eigenvalue of the whitened pooled covariance by warm-started power iteration, and its eigenvector.

    Fast: BlackJAX's ``_recompute_eig_state``. Reproducible: the same iteration with matrix–vector
    products as multiply-and-sum (no ``dot``), as in the engine's HMC metric.
    """
    if not numerics.reproducible:
        eig = bj_chees._recompute_eig_state(covariance, inverse_mass_matrix,
                                            bj_chees._ChEESEigState(eigenvector, jnp.ones((), eigenvector.dtype)),
                                            num_iterations)
        return eig.lambda_max, eig.eigenvector
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
                    max_leapfrog_steps: int, numerics: Numerics) -> Array:
    """BlackJAX 1.7's consumed trajectory length: ``min(max(T, π/2·√λ_max), max_steps·ε)`` (fast: its
    ``_apply_length_floor``; reproducible: the same three elementwise operations, written here so that
    the reproducible programs do not change with BlackJAX's)."""
    if not numerics.reproducible:
        return bj_chees._apply_length_floor(length, lambda_max, engaged, True, max_leapfrog_steps, step_size)[0]
    floor = jnp.where(engaged, LENGTH_FLOOR_FACTOR * jnp.sqrt(lambda_max), 0.0)
    return jnp.minimum(jnp.maximum(length, floor), max_leapfrog_steps * step_size)


def _blackjax_merge(moments: MomentBlock, batch: Array) -> MomentBlock:
    """The fast mode's merge of the pooled moments with one ensemble ``(C, D)``: BlackJAX's ``cgl_update_batch``
    (``jnp.mean`` over chains, and a ``(D, C) @ (C, D)`` matmul for the full covariance)."""
    return MomentBlock(*cgl_update_batch(moments, batch))


def _update(state: ChEESState, proposal_position: Array, proposal_momentum: Array, position: Array,
            acceptance: Array, is_divergent: Array, inverse_mass_matrix: Array, jitter: Array,
            optimizer: optax.GradientTransformation, target: float, max_leapfrog_steps: int,
            numerics: Numerics, opaque_zero: Array) -> ChEESState:
    """One ChEES update from the ensemble (BlackJAX's ``compute_parameters``), tree reductions only
    (the reproducible mode; the fast mode calls BlackJAX's own, ``chees_adaptation.base``)."""
    dtype = position.dtype
    _, da_update, _ = dual_averaging.dual_averaging()

    def tree_sum(values):
        return numerics.chain_sum(values, opaque_zero)

    def exact(values):
        return numerics.fma_barrier(values, opaque_zero)

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


class ChEESWarmupState(NamedTuple):
    """What :class:`ChEESAdaptation` carries between updates: the chains' ``DynamicState``
    (positions ``(C, D)``) and the cross-chain :class:`ChEESState`.

    Examples
    --------
    >>> from jaxprobe import engine
    >>> kernel, logdensity = engine.make_kernel("chees"), jaxprobe.priors.StandardNormal()
    >>> state = engine.init(kernel, logdensity, jnp.zeros((4, 2)))
    >>> warmup_state = ChEESAdaptation(kernel).init(state, logdensity)
    >>> warmup_state.kernel_state.position.shape, type(warmup_state.adaptation).__name__
    ((4, 2), 'ChEESState')
    """

    kernel_state: Any
    adaptation: ChEESState


@dataclasses.dataclass(frozen=True)
class ChEESAdaptation:
    """Cross-chain ChEES adaptation of step size, trajectory length and a diagonal inverse mass matrix,
    as an :class:`jaxprobe.engine.protocols.Adaptation` (the warmup of the ``ChEES`` kernel).

    Step ``t`` moves all chains with ``kernel`` (BlackJAX's dynamic HMC) under the key
    ``fold_in(rng_key, t)``; the adaptation then reads the ensemble, as the kernel's numerics
    policy says (module docstring): with BlackJAX's own update (``"fast"``), or through
    pairwise-tree reductions only (``"reproducible"``), so that the result is bit-identical for
    any number of devices the chains are sharded over. Not ``splittable``: its programs are
    checked bit-identical across device counts as one warmup program (a scan of one step is
    folded away by XLA, see the module docstring), so the host runs the whole warmup in one
    ``update``.

    ``kernel``: a :class:`jaxprobe.engine.kernels.ChEES` (its ``step_with_proposal``, ``jitter``,
    ``learning_rate`` and ``max_leapfrog_steps`` are read). ``target_acceptance_rate``: None for the
    kernel's own.

    Examples
    --------
    >>> from jaxprobe import engine
    >>> adaptation = ChEESAdaptation(engine.make_kernel("chees"))     # what engine.adapt runs for ChEES
    >>> schedule = adaptation.schedule(100)                           # 100 warmup steps
    >>> int(schedule["in_window"].sum()), adaptation.splittable       # mass matrix from the last half; one piece
    (50, False)

    :func:`chees_warmup` runs it (and ``engine.adapt(key, state, adaptation, logdensity, num_steps)``).
    """

    kernel: Any
    target_acceptance_rate: float | None = None
    splittable: ClassVar[bool] = False

    @property
    def _target(self) -> float:
        return self.kernel.target_acceptance_rate if self.target_acceptance_rate is None \
            else self.target_acceptance_rate

    def schedule(self, num_steps: int) -> dict[str, np.ndarray]:
        """Per-step inputs ``(num_steps,)``: the warmup step ``t`` (int32) and whether it lies in the
        mass-matrix window (the last half of warmup)."""
        steps = np.arange(num_steps, dtype=np.int32)
        return {"step": steps, "in_window": steps >= int(MASS_MATRIX_WINDOW_FRACTION * num_steps)}

    def init(self, state: EngineState, logdensity_fn: FlatLogDensity) -> ChEESWarmupState:
        """Start from ``state``'s kernel state and step size (a scalar, or the mean of a ``(C,)`` one);
        the trajectory starts one step long and the inverse mass matrix at ones."""
        del logdensity_fn
        positions = state.kernel_state.position
        dim, dtype = positions.shape[1], positions.dtype
        step_size = jnp.asarray(state.parameters["step_size"])
        if step_size.ndim:  # per chain: their mean
            step_size = numerics_of(self.kernel).chain_mean(step_size)
        step_size0 = jnp.asarray(step_size, dtype)
        da_init, _, _ = dual_averaging.dual_averaging()
        zero = jnp.zeros((), dtype)
        adaptation = ChEESState(
            step_size=step_size0, log_step_size_ma=zero, trajectory_length=step_size0,
            log_trajectory_length_ma=zero,
            dual_averaging=jax.tree.map(lambda x: jnp.asarray(x, dtype) if jnp.issubdtype(jnp.asarray(x).dtype,
                                        jnp.floating) else jnp.asarray(x), da_init(step_size0)),
            optimizer=optax.adam(self.kernel.learning_rate).init(step_size0),
            random_generator_arg=jnp.zeros((), jnp.int32), step=jnp.ones((), jnp.int32),
            variance=MomentBlock(zero, jnp.zeros((dim,), dtype), jnp.zeros((dim,), dtype)),
            covariance=MomentBlock(zero, jnp.zeros((dim,), dtype), jnp.zeros((dim, dim), dtype)),
            eigenvector=jnp.full((dim,), 1.0 / np.sqrt(dim), dtype), lambda_max=jnp.ones((), dtype),
        )
        return ChEESWarmupState(state.kernel_state, adaptation)

    def update(self, rng_key: PRNGKey, adaptation_state: ChEESWarmupState, logdensity_fn: FlatLogDensity,
               schedule: dict[str, Array]) -> tuple[ChEESWarmupState, RunStats]:
        """The warmup steps of ``schedule`` (a slice of :meth:`schedule`): one kernel step of every chain,
        then one ChEES update from the ensemble, per step (BlackJAX's ``chees_adaptation.run`` loop)."""
        kernel = self.kernel
        numerics = numerics_of(kernel)
        chain_state, state = adaptation_state
        num_chains, dim = chain_state.position.shape
        threshold = _engagement_threshold(dim)
        optimizer = optax.adam(kernel.learning_rate)
        target = self._target
        if not numerics.reproducible:  # BlackJAX's update (compute_parameters) as it is
            _, blackjax_update = bj_chees.base(kernel.jitter, lambda i: i + 1, optimizer, target, DECAY_RATE,
                                               kernel.max_leapfrog_steps)

        def one_step(carry, inputs):
            chain_state, state, stats = carry
            t, in_window = inputs["step"], inputs["in_window"]
            inverse_mass_matrix = _inverse_mass_matrix(state.variance, threshold)
            engaged = state.variance.count >= threshold
            length = _floored_length(state.trajectory_length, state.lambda_max, engaged, state.step_size,
                                     kernel.max_leapfrog_steps, numerics)
            parameters = {
                "step_size": state.step_size,
                "inverse_mass_matrix": jnp.broadcast_to(inverse_mass_matrix, (num_chains, dim)),
                "num_leapfrog_steps": jnp.broadcast_to(length / state.step_size, (num_chains,)),
            }
            new_chain_state, info, raw = kernel.step_with_proposal(jax.random.fold_in(rng_key, t), chain_state,
                                                                   parameters, logdensity_fn)
            position = new_chain_state.position
            if numerics.reproducible:
                jitter = kernel.jitter(state.random_generator_arg)
                # A zero the compiler cannot prove (t >= 0 is not known to it): see numerics.materialize.
                opaque_zero = numerics.opaque_zero(t)
                state = _update(state, raw.proposal.position, raw.proposal.momentum, chain_state.position,
                                raw.acceptance_rate, raw.is_divergent, inverse_mass_matrix, jitter, optimizer,
                                target, kernel.max_leapfrog_steps, numerics, opaque_zero)
                merge = lambda moments, full: _merge(moments, position, full, numerics, opaque_zero)  # noqa: E731
            else:
                updated = blackjax_update(bj_chees.ChEESAdaptationState(*state[:8]), raw.proposal.position,
                                          raw.proposal.momentum, chain_state.position, raw.acceptance_rate,
                                          raw.is_divergent, inverse_mass_matrix)
                # BlackJAX's state is the first eight fields of ours; keep the carry's dtypes.
                updated = jax.tree.map(lambda new, old: jnp.asarray(new, old.dtype), tuple(updated), tuple(state[:8]))
                state = state._replace(**dict(zip(ChEESState._fields[:8], updated)))
                merge = lambda moments, full: _blackjax_merge(moments, position)  # noqa: E731

            variance = jax.lax.cond(in_window, lambda m: merge(m, False), lambda m: m, state.variance)
            covariance = jax.lax.cond(in_window, lambda m: merge(m, True), lambda m: m, state.covariance)
            recompute = in_window & (t % LENGTH_FLOOR_RECOMPUTE_INTERVAL == 0)
            lambda_max, eigenvector = jax.lax.cond(
                recompute,
                lambda v: _lambda_max(covariance, inverse_mass_matrix, v, LENGTH_FLOOR_POWER_ITERATIONS, numerics),
                lambda v: (state.lambda_max, v),
                state.eigenvector)
            state = state._replace(variance=variance, covariance=covariance, eigenvector=eigenvector,
                                   lambda_max=lambda_max)
            return (new_chain_state, state, stats.add(info)), None

        stats0 = RunStats.zeros(num_chains, chain_state.position.dtype)
        (chain_state, state, stats), _ = jax.lax.scan(one_step, (chain_state, state, stats0), schedule)
        return ChEESWarmupState(chain_state, state), stats

    def final(self, adaptation_state: ChEESWarmupState) -> EngineState:
        """The engine state to sample from: the moving-average step size and trajectory length (floored,
        with the final power iteration) and the pooled inverse mass matrix, shared by all chains."""
        numerics = numerics_of(self.kernel)
        chain_state, state = adaptation_state
        num_chains, dim = chain_state.position.shape
        dtype = chain_state.position.dtype
        threshold = _engagement_threshold(dim)
        inverse_mass_matrix = _inverse_mass_matrix(state.variance, threshold)
        lambda_max, _ = _lambda_max(state.covariance, inverse_mass_matrix, state.eigenvector,
                                    LENGTH_FLOOR_FINAL_POWER_ITERATIONS, numerics)
        step_size = jnp.exp(state.log_step_size_ma)
        length = _floored_length(jnp.exp(state.log_trajectory_length_ma), lambda_max,
                                 state.variance.count >= threshold, step_size, self.kernel.max_leapfrog_steps,
                                 numerics)
        parameters = {
            "step_size": step_size.astype(dtype),
            "inverse_mass_matrix": jnp.broadcast_to(inverse_mass_matrix.astype(dtype), (num_chains, dim)),
            "num_leapfrog_steps": jnp.broadcast_to((length / step_size).astype(dtype), (num_chains,)),
        }
        # Sampling continues the chains' Halton index; the run's step counter restarts at 0.
        return EngineState(chain_state, parameters, jnp.zeros((), jnp.int32))


def _engagement_threshold(dim: int) -> int:
    """Pooled draws before the estimated inverse mass matrix is used (BlackJAX's gate)."""
    return max(64, int(2 * np.sqrt(dim)))


def chees_warmup(rng_key: PRNGKey, positions: Array, kernel: Any, logdensity_fn: FlatLogDensity, num_steps: int,
                 initial_step_size: float | None = None,
                 target_acceptance_rate: float | None = None,
                 _return_adaptation_state: bool = False) -> tuple[EngineState, Array]:
    """:class:`ChEESAdaptation` in one piece, from positions ``(C, D)``.

    Pure and jit-able (``kernel``, ``logdensity_fn``, ``num_steps`` static). Returns the engine state
    to sample from (shared step size, inverse mass matrix and mean number of leapfrog steps,
    broadcast per chain) and the ``(C,)`` mean acceptance rates over warmup.
    ``_return_adaptation_state=True`` (a diagnostic seam) returns the final :class:`ChEESState` instead.

    Examples
    --------
    >>> from jaxprobe import engine
    >>> kernel, logdensity = engine.make_kernel("chees"), jaxprobe.priors.StandardNormal()
    >>> positions = jax.random.normal(jax.random.key(0), (4, 2))
    >>> state, acceptance = chees_warmup(jax.random.key(1), positions, kernel, logdensity, 50)
    >>> sorted(state.parameters), acceptance.shape                    # shared step size and trajectory length
    (['inverse_mass_matrix', 'num_leapfrog_steps', 'step_size'], (4,))
    """
    dtype = positions.dtype
    step_size0 = kernel.initial_step_size(positions.shape[1]) if initial_step_size is None else initial_step_size
    state = EngineState(kernel.init(positions, logdensity_fn), {"step_size": jnp.asarray(step_size0, dtype)},
                        jnp.zeros((), jnp.int32))
    adaptation = ChEESAdaptation(kernel, target_acceptance_rate)
    adaptation_state = adaptation.init(state, logdensity_fn)
    schedule = jax.tree.map(jnp.asarray, adaptation.schedule(num_steps))
    adaptation_state, stats = adaptation.update(rng_key, adaptation_state, logdensity_fn, schedule)
    if _return_adaptation_state:
        return adaptation_state.adaptation
    acceptance = (stats.acceptance_rate_sum / num_steps if num_steps > 0
                  else jnp.ones((positions.shape[0],), dtype))
    return adaptation.final(adaptation_state), acceptance
