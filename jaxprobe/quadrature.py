"""Exact answers of 2-D questions by quadrature: the reference that samplers are checked against.

For a probe G on a square ``[low, high]²`` with a flat prior (uniform on the square), the target
p(x) ∝ exp(−G(x)/τ) is integrated by the midpoint rule on ``num × num`` points. From one evaluation of G
on the grid come ``log Z(τ) = log E_uniform[exp(−G/τ)]`` at any τ (the evidence curve) and the target's
mass on a coarser grid of cells, to compare with the share of a sampler's draws in each cell by total
variation (with the Monte-Carlo floor of that distance for independent exact draws).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe._pointwise import map_points

__all__ = ["SquareGrid", "total_variation", "total_variation_floor"]


class SquareGrid:
    """G on the midpoint grid of ``[low, high]²``: ``loss`` ``(num², )`` in x-major order (float64).

    Examples
    --------
    >>> grid = SquareGrid(lambda x: x @ x, -2.0, 2.0, num=20)   # G(x) = |x|² on [−2, 2]²
    >>> grid.points.shape, grid.loss.shape
    ((400, 2), (400,))
    >>> mass = grid.cell_mass(1.0, 4)                          # exp(−G/τ)'s mass on 4 × 4 cells, τ = 1
    >>> mass.shape, round(float(mass.sum()), 6), bool(mass[5] > mass[0])   # inner cells hold more
    ((16,), 1.0, True)
    >>> import math
    >>> exact = 2 * math.log(math.sqrt(math.pi) * math.erf(2.0) / 4)   # log of the mean of exp(−G) on the square
    >>> round(grid.log_evidence(1.0), 2), round(exact, 2)
    (-1.64, -1.64)
    """

    def __init__(self, probe: Callable, low: float, high: float, num: int = 300):
        if not high > low or num < 2:
            raise ValueError(f"need high > low and num >= 2, got low={low}, high={high}, num={num}")
        self.low, self.high, self.num = float(low), float(high), int(num)
        width = (self.high - self.low) / self.num
        axis = self.low + width * (np.arange(self.num) + 0.5)
        self.points = np.stack(np.meshgrid(axis, axis, indexing="ij"), -1).reshape(-1, 2)
        # in batches on a CPU: one vmap over 90,000 points fell off XLA's CPU cliff (jaxprobe._pointwise)
        evaluate = jax.jit(lambda points: map_points(probe, points))
        self.loss = np.asarray(evaluate(jnp.asarray(self.points, jnp.float32)), np.float64)

    def log_evidence(self, temperature: float, stride: int = 1) -> float:
        """log E_uniform[exp(−G/τ)] by the midpoint rule (``stride`` 2: every other point, to bound the rule's error)."""
        loss = self.loss.reshape(self.num, self.num)[::stride, ::stride].ravel()
        log_weight = -loss / temperature
        top = log_weight.max()
        return float(top + np.log(np.mean(np.exp(log_weight - top))))

    def cell_mass(self, temperature: float, cells: int) -> np.ndarray:
        """The target's mass on ``cells × cells`` equal cells (``(cells²,)``, x-major; ``num`` divisible by it)."""
        if self.num % cells:
            raise ValueError(f"cells={cells} must divide the grid's num={self.num}")
        weight = np.exp(-(self.loss - self.loss.min()) / temperature).reshape(self.num, self.num)
        per = self.num // cells
        mass = weight.reshape(cells, per, cells, per).sum(axis=(1, 3)).ravel()
        return mass / mass.sum()

    def draws_mass(self, x: np.ndarray, cells: int) -> np.ndarray:
        """The share of draws ``(n, 2)`` in each of the same cells."""
        edges = np.linspace(self.low, self.high, cells + 1)
        counts, _, _ = np.histogram2d(x[:, 0], x[:, 1], bins=[edges, edges])
        return counts.ravel() / len(x)


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    """½ Σ |p − q| of two mass vectors.

    Examples
    --------
    >>> total_variation(np.array([0.5, 0.5]), np.array([1.0, 0.0]))
    0.5
    """
    return 0.5 * float(np.abs(np.asarray(p) - np.asarray(q)).sum())


def total_variation_floor(mass: np.ndarray, num_draws: int, repeats: int = 20, seed: int = 0) -> float:
    """The expected total variation between the cell shares of ``num_draws`` independent exact draws and ``mass``:
    what a perfect sampler of that many draws would score (correlated draws score worse).

    Examples
    --------
    >>> uniform = np.full(16, 1 / 16)
    >>> floor = total_variation_floor(uniform, 1000)           # a perfect sampler's score with 1000 draws
    >>> bool(0.02 < floor < 0.1), total_variation_floor(uniform, 100_000) < floor
    (True, True)
    """
    rng = np.random.default_rng(seed)
    mass = np.asarray(mass, np.float64) / np.sum(mass)
    return float(np.mean([total_variation(rng.multinomial(num_draws, mass) / num_draws, mass)
                          for _ in range(repeats)]))
