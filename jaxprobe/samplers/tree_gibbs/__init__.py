"""Exact coordinate-wise Gibbs sampling of targets built from tree ensembles (``sampler="tree_gibbs"``).

The target is a product of B independent blocks of d features each,

    log p(x) = Σ_b [ −G_b(x_b)/τ + log prior_b(x_b) ],   x = (x_1, …, x_B),  x_b ∈ R^d,

where every G_b depends on x_b only through imported tree ensembles (:mod:`jaxprobe.models.trees`). A
probing question (:func:`jaxprobe.generate`) is one block; a reconstruction (:func:`jaxprobe.reconstruct`)
has one block per class and prior setting, each G_b = −log p_model(k | x_b).

Why it is exact. Along coordinate j of block b, with everything else fixed, every tree's leaf is constant
between consecutive split thresholds on feature j, so G_b is constant on each interval
``(t_{i−1}, t_i]`` of the sorted union of the thresholds ``−∞ < t_1 < … < t_m < +∞`` that the ensembles
test on feature j. The full conditional of x_j is therefore the mixture of truncated prior conditionals

    p(x_j | x_−j) = Σ_i  w_i · N(x_j; μ, σ²) 1[x_j ∈ I_i] / P_i,   w_i ∝ exp(−G_b(I_i)/τ) · P_i,

with P_i the prior conditional's mass of interval I_i (intersected with the feature's bounds). One
update evaluates the ensembles once per interval (vectorized over intervals, blocks and chains; only
the trees that test feature j are evaluated: for trees no deeper than ``COMPLETE_MAX_DEPTH`` by dense decisions
and one matrix product, :meth:`TreeEnsembleModel.scores_along_complete`, else by walking them,
:meth:`TreeEnsembleModel.raw_score_along`), draws an interval
from w, then x_j from the prior conditional truncated to it. No step size, no rejection: every draw is a
draw of the full conditional, so the chain is exact Gibbs sampling of p.

Priors (per block) are read through :class:`jaxprobe.priors.MixtureFormPrior` (``prior.mixture_form(d)``, a
Gaussian mixture or a flat box); a prior without it is refused, naming its class and the protocol. The
conditional of x_j given the other coordinates is a 1-D Gaussian for
:class:`~jaxprobe.priors.StandardNormal`, :class:`~jaxprobe.priors.DiagonalGaussian` and a full-covariance
:class:`~jaxprobe.priors.Gaussian` (mean ``x_j − Λ_j·(x − μ)/Λ_jj``, variance ``1/Λ_jj``, Λ the precision
matrix); flat for no prior (:class:`~jaxprobe.priors.NoPrior`, every free feature then
needs finite bounds) and :class:`~jaxprobe.priors.UniformBox` (flat on its box). A Gaussian mixture
(:class:`jaxprobe.reconstruct.priors.GaussianMixture`, kernel density estimates) is handled by **data
augmentation**: each block carries a component indicator c, drawn exactly from p(c | x_b) at the start
of every sweep; the coordinate updates then use component c's Gaussian. That is exact Gibbs sampling of
the joint p(x, c), whose x-marginal is the target; it mixes more slowly than the collapsed conditional
when components are far apart (a chain moves between components only where they overlap), but costs
one pass over the M component densities per sweep (O(M·d²)) instead of M truncated Gaussians per interval
and coordinate. Box constraints bound the intervals; fixed features
are never updated; Integer features are sampled continuously and reported rounded, as with every other
sampler. One-hot groups are refused.

Prior moves. A coordinate-wise sweep crawls along directions the prior correlates (image pixels, a
tumour's radius, perimeter and area at correlation 0.99). By default a sweep therefore ends with a few
Metropolis moves per block whose proposals keep the block's Gaussian prior invariant (preconditioned
Crank–Nicolson, x' = μ + ρ(x − μ) + √(1 − ρ²) L ξ, :data:`DEFAULT_PRIOR_MOVES`): the prior cancels in the
acceptance ratio, only the trees' likelihood ratio decides, and each costs one full ensemble evaluation per
block. They leave p invariant, so the chain stays exact; ``prior_moves=()`` gives pure Gibbs sweeps.

Cost: one sweep updates every free coordinate of every block once and makes
:attr:`TreeGibbsTarget.evaluations_per_sweep` ensemble evaluations per chain (Σ_j (m_j + 1) per block,
m_j the thresholds on feature j), each walking only the trees that test j. Random-walk Metropolis makes
one per block per step. The sampler wins where a random walk does not move: many features, deep or
many trees (a sweep's cost grows with the thresholds, RWMH's mixing time with the dimension).

Layers (as BlackJAX): :func:`init` (positions → :class:`TreeGibbsState`), :func:`build_kernel` (target,
scan → ``kernel(rng_key, state) -> (state, info)``, one sweep of one chain), :func:`sample` (all chains in
one compiled program: ``jit`` + ``lax.scan`` over sweeps, ``vmap`` over chains), returning the engine's
:class:`~jaxprobe.engine.samples.Samples` with its verdict. Targets come from a
:class:`jaxprobe.Question` (:func:`target_from_question`) or a reconstruction
(:func:`reconstruction_target`); both refuse a target that is not of this form with a ``ValueError``
naming the argument, before anything compiles. The front ends reach it through :data:`TREE_GIBBS`, a
:class:`~jaxprobe.engine.protocols.WholeRunSampler` that :mod:`jaxprobe.samplers` registers: the engine and
the front ends never name it.

Modules: :mod:`~jaxprobe.samplers.tree_gibbs.normal` (truncated normals), :mod:`~jaxprobe.samplers.tree_gibbs.target`
(targets and prior tables), :mod:`~jaxprobe.samplers.tree_gibbs.kernel` (one sweep),
:mod:`~jaxprobe.samplers.tree_gibbs.run` (all chains, front ends); this package re-exports their public names.
"""

from jaxprobe.samplers.tree_gibbs.kernel import TreeGibbsInfo, TreeGibbsState, build_kernel, check_prior_moves, init
from jaxprobe.samplers.tree_gibbs.normal import log_interval_mass, truncated_standard_normal
from jaxprobe.samplers.tree_gibbs.run import TREE_GIBBS, TreeGibbs, sample, sample_question, split_options
from jaxprobe.samplers.tree_gibbs.target import (DEFAULT_PRIOR_MOVES, MAX_GROUPS, NAME, SCANS, FeatureGroup,
                                                 PriorTable, TreeGibbsTarget, as_tree_ensemble, prior_table,
                                                 reconstruction_target, target_from_question)

__all__ = [
    "NAME",
    "SCANS",
    "MAX_GROUPS",
    "PriorTable",
    "TreeGibbsTarget",
    "TreeGibbsState",
    "TreeGibbsInfo",
    "FeatureGroup",
    "TreeGibbs",
    "TREE_GIBBS",
    "as_tree_ensemble",
    "prior_table",
    "target_from_question",
    "reconstruction_target",
    "init",
    "build_kernel",
    "sample",
    "sample_question",
    "split_options",
    "check_prior_moves",
    "DEFAULT_PRIOR_MOVES",
    "log_interval_mass",
    "truncated_standard_normal",
]
