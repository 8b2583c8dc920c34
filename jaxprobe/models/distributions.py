"""Parameter distributions q(θ) for the probes (probing paper, Eqs. 2, 4, 6, 7).

Each holds K parameter draws as ONE stacked pytree (leading axis K), so a probe
evaluates all of them with a single ``vmap``, and an optional ``center`` θ*.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe._inputs import check_int, check_number
from jaxprobe.types import ArrayTree, PRNGKey

__all__ = ["PointMass", "GaussianPerturbation", "Ensemble", "PosteriorSamples", "num_draws"]


def num_draws(draws: ArrayTree) -> int:
    """K, the leading axis shared by every leaf of stacked draws.

    Examples
    --------
    >>> num_draws({"w": jnp.zeros((5, 3)), "b": jnp.zeros(5)})   # 5 draws of {"w": (3,), "b": ()}
    5
    >>> num_draws({"w": jnp.zeros((5, 3)), "b": jnp.zeros(4)})   # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: stacked parameter draws must share one leading axis, got sizes [4, 5]
    """
    sizes = {np.shape(leaf)[0] for leaf in jax.tree_util.tree_leaves(draws)}
    if len(sizes) != 1:
        raise ValueError(f"stacked parameter draws must share one leading axis, got sizes {sorted(sizes)}")
    return sizes.pop()


def _check_params(params: ArrayTree, name: str = "params") -> None:
    leaves = jax.tree_util.tree_leaves(params)
    if not leaves:
        raise ValueError(f"{name} is empty")
    for leaf in leaves:
        if not jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.floating):
            raise TypeError(f"{name} leaves must be floating-point arrays, got {jnp.asarray(leaf).dtype}")
        if not np.all(np.isfinite(np.asarray(leaf))):
            raise ValueError(f"{name} contains NaN or inf")


@dataclasses.dataclass(frozen=True, eq=False)
class PointMass:
    """q(θ) = δ(θ − θ*): one draw, the trained parameters themselves.

    Examples
    --------
    >>> q = PointMass({"w": jnp.ones(2)})                    # e.g. a trained model's parameters
    >>> jax.tree_util.tree_map(jnp.shape, q.draws)           # one draw, a leading K axis
    {'w': (1, 2)}
    """

    params: ArrayTree

    def __post_init__(self):
        _check_params(self.params)

    @property
    def center(self) -> ArrayTree:
        return self.params

    @property
    def draws(self) -> ArrayTree:
        return jax.tree.map(lambda leaf: jnp.asarray(leaf)[None], self.params)


@dataclasses.dataclass(frozen=True, eq=False)
class GaussianPerturbation:
    """q(θ) = N(θ*, σ² I): K fixed draws ``θ* + σ ε_k``, ε_k ~ N(0, I), drawn once from ``rng_key``.

    The draws are fixed at construction so the probe is a deterministic function
    of x (a Monte-Carlo estimate of the integral in Eq. 6 with common random numbers).

    Examples
    --------
    >>> q = GaussianPerturbation({"w": jnp.ones(2)}, sigma=0.1, num_draws=5, rng_key=jax.random.key(0))
    >>> jax.tree_util.tree_map(jnp.shape, q.draws), q.center["w"].tolist()
    ({'w': (5, 2)}, [1.0, 1.0])
    >>> bool(jnp.all(jnp.abs(q.draws["w"] - 1.0) < 1.0))      # θ* + σε, σ = 0.1
    True
    """

    params: ArrayTree
    sigma: float
    num_draws: int
    rng_key: PRNGKey

    def __post_init__(self):
        _check_params(self.params)
        check_number(self.sigma, "sigma", minimum=0.0, exclusive_minimum=True)
        object.__setattr__(self, "num_draws", check_int(self.num_draws, "num_draws", minimum=1))
        leaves, treedef = jax.tree_util.tree_flatten(self.params)
        keys = jax.random.split(self.rng_key, len(leaves))
        draws = [
            jnp.asarray(leaf) + self.sigma * jax.random.normal(key, (self.num_draws, *jnp.shape(leaf)),
                                                                 jnp.asarray(leaf).dtype)
            for key, leaf in zip(keys, leaves)
        ]
        object.__setattr__(self, "_draws", jax.tree_util.tree_unflatten(treedef, draws))

    @property
    def center(self) -> ArrayTree:
        return self.params

    @property
    def draws(self) -> ArrayTree:
        return self._draws


@dataclasses.dataclass(frozen=True, eq=False)
class Ensemble:
    """q(θ) = the uniform distribution over K trained parameter sets (e.g. different seeds).

    ``members``: a sequence of parameter pytrees of one structure, or one stacked
    pytree (``stacked=True``). ``center``: optional θ*; without it probes compare
    with the ensemble's mean prediction.

    Examples
    --------
    >>> q = Ensemble([{"w": jnp.ones(2)}, {"w": jnp.zeros(2)}])   # e.g. two seeds' trained parameters
    >>> q.draws["w"].shape, num_draws(q.draws)
    ((2, 2), 2)
    """

    members: Any
    center: ArrayTree | None = None
    stacked: bool = False

    def __post_init__(self):
        if self.stacked:
            draws = self.members
        else:
            if not isinstance(self.members, Sequence) or len(self.members) < 1:
                raise ValueError("members must be a non-empty sequence of parameter pytrees")
            structures = {jax.tree_util.tree_structure(member) for member in self.members}
            if len(structures) != 1:
                raise ValueError("ensemble members must share one pytree structure")
            draws = jax.tree.map(lambda *leaves: jnp.stack([jnp.asarray(leaf) for leaf in leaves]), *self.members)
        _check_params(draws, "members")
        num_draws(draws)
        if self.center is not None:
            _check_params(self.center, "center")
        object.__setattr__(self, "_draws", draws)

    @property
    def draws(self) -> ArrayTree:
        return self._draws


@dataclasses.dataclass(frozen=True, eq=False)
class PosteriorSamples:
    """q(θ) from posterior samples of θ drawn by the engine from exp(−F(θ)/τ) (Eq. 2).

    Build with :meth:`from_samples` from a ``jaxprobe.Samples`` whose positions are
    parameter pytrees; ``num_draws`` draws are taken evenly from all chains and draws.

    Examples
    --------
    >>> q = PosteriorSamples({"w": jnp.ones((7, 2))})        # 7 draws of θ (usually from_samples(samples, K))
    >>> num_draws(q.draws)
    7
    """

    draws: ArrayTree
    center: ArrayTree | None = None

    def __post_init__(self):
        _check_params(self.draws, "draws")
        num_draws(self.draws)

    @classmethod
    def from_samples(cls, samples: Any, num_draws: int, center: ArrayTree | None = None) -> "PosteriorSamples":
        num_draws = check_int(num_draws, "num_draws", minimum=1)
        total = samples.num_chains * samples.num_draws
        if num_draws > total:
            raise ValueError(f"num_draws={num_draws} exceeds the {total} draws in samples")
        index = np.linspace(0, total - 1, num_draws).round().astype(int)
        flat = jax.tree.map(lambda leaf: jnp.asarray(np.asarray(leaf).reshape(total, *np.shape(leaf)[2:])[index]),
                            samples.positions)
        return cls(flat, center)
