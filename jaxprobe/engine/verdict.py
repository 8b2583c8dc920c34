"""A verdict on every run: did the chains converge, and if not, what to do next.

:func:`assess` looks at a :class:`~jaxprobe.engine.samples.Samples` on the host
(NumPy, no compilation) and returns a :class:`Verdict`; :func:`report` turns a
verdict into a :class:`ConvergenceWarning`, a :class:`ConvergenceError` or
nothing, following the ``convergence="warn" | "error" | "ignore"`` policy of the
public calls.

The checks
----------
R̂ (cross-chain agreement)
    Rank-normalized split R̂, the larger of the bulk and folded versions (Vehtari,
    Gelman, Simpson, Carpenter & Bürkner 2021), of up to ``max_coordinates``
    position coordinates and of the log density, computed by
    :func:`jaxprobe.engine.diagnostics.rhat_ess_bulk`. Its default threshold
    depends on the number of chains C (see "Thresholds").
Bulk ESS
    The smallest bulk effective sample size over the same coordinates must reach
    ``min_ess`` (default ``100 · min(C, 4)``).
Frozen chains
    Chains whose acceptance rate is exactly 0 never moved.
Divergences
    Any divergent transition (HMC family) is a problem: its draws are biased.
Non-finite proposals
    More than 1 % (:data:`MAX_NONFINITE_FRACTION`) of proposals with a NaN or
    infinite log density is a problem (each was rejected, so the draws are still
    valid, but that much usually means numerical trouble in the model).
Non-finite draws
    Any kept draw with a NaN or infinite coordinate or log density.
Drift
    Chains running away without bound, as on an improper target (see "Drift").

Coordinates with the same value in every draw of every chain (fixed pixels, a
flat log density) carry no information and are left out of R̂ and ESS.

Thresholds
----------
Stan's rule (Vehtari et al. 2021) is R̂ ≤ 1.01 with a bulk ESS of at least 100 per
chain, i.e. 400 for its default 4 chains. The two are one rule in two forms: for
chains that have forgotten their start, R̂² ≈ 1 + 2C / ESS (Vats & Knudson 2021,
"Revisiting the Gelman–Rubin diagnostic", with the C chains split into 2C halves),
so 4 chains with ESS 400 give R̂ ≈ 1.01, and R̂ ≤ 1.01 asks every chain for about 100
effective draws. That does not fit many short chains: with ``jaxprobe.sample``
(MALA, ``step_size_mode="shared"``, 200 warmup steps), 128 chains × 300 draws of a
10-d standard Gaussian had R̂ 1.012–1.014 at bulk ESS 8,400–9,000, and 64 chains ×
200 draws of a 5-d one R̂ 1.012–1.018 at ESS 3,200–3,700 (3 seeds each): excellent
runs that 1.01 rejects. So:

* ``min_ess = 100 · min(C, 4)``: Stan's 100 per chain up to 4 chains, then a total
  of 400 (a Monte-Carlo standard error of a mean of sd/20) however many chains.
* ``rhat_threshold = √(1 + 2C / min_ess)``, clipped to [1.01, 1.1]: the R̂ that
  chains with that ESS would show. Up to 4 chains that is Stan's 1.01; it grows
  with C (8 chains 1.02, 16 chains 1.039, 32 chains 1.077) and stops at 1.1 (the
  older rule of Gelman et al.) from 42 chains on. R̂ = 1.1 still asks each chain for
  about 10 effective draws (2 / (1.1² − 1)): each has forgotten its start many
  times over. Chains stuck in separate modes give R̂ well above 1.1: with two
  modes 8 sd apart and 64 × 200 draws, 1.22 when 6 chains sit in the other mode,
  1.47 when 16 do.

Pass ``rhat_threshold=1.01`` to apply Stan's rule as published. With fewer than 4
draws per chain R̂ and ESS cannot be computed: neither is checked and the verdict's
``notes`` say so. When the chains start at draws of the target
(``Samples.chains_start_at_target``, set by sequential Monte Carlo) they need not
mix between modes, so R̂ is recorded but is not a criterion (``checks_rhat`` False).

Drift
-----
A coordinate drifts when either

* some draw in the last quarter of the run has ``|x| > 1e6``
  (:data:`RUNAWAY_BOUND`; an improper flat target with an adapted step size
  reached |x| = 2e21 with acceptance 1.0; no target jaxprobe samples (inputs,
  latents, images on their natural scale) lives there, and float32 resolves
  nothing finer than 0.06 at 1e6), or
* the chains keep moving away like a random walk (or faster) and nothing confines
  them: with N ≥ 16 draws, the mean squared displacement over N/2 draws is at least
  3 × the one over N/8 draws (:data:`DIFFUSION_RATIO`; a random walk gives 4, a
  ballistic run 16, and any stationary chain whose autocorrelation time is below
  about N/8 gives 1, since its displacement saturates at twice the variance), AND
  either the log density is the same at every draw (a flat target) or the spread
  of the coordinate over all chains grew at least 2× (:data:`SPREAD_GROWTH`) from
  the first quarter of the draws to the last (impossible for chains at
  stationarity, whose distribution does not change with time; judged only with at
  least 16 chains, :data:`MIN_CHAINS_FOR_SPREAD`, as the spread of fewer slowly
  moving chains is too noisy).

A well-mixed chain never passes the displacement test. Chains of a proper target
that move so slowly that they still diffuse outward from a tight start at the end
of the run (autocorrelation time above about N) can pass it; the message then says
that the steps may be far too small. A target that is improper in one direction
but informative in others, sampled with a fixed step size, keeps a varying log
density and a constant spread and is not reported as drifting (its R̂ is).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from jaxprobe.engine.diagnostics import rhat_ess_bulk, split_gelman_rubin

if TYPE_CHECKING:  # pragma: no cover
    from jaxprobe.engine.samples import Samples

__all__ = [
    "ConvergenceError",
    "ConvergenceWarning",
    "POLICIES",
    "Verdict",
    "assess",
    "check_policy",
    "default_thresholds",
    "report",
]

POLICIES = ("warn", "error", "ignore")
"""Accepted values of ``convergence=``: warn (default), raise, or say nothing."""

MIN_RHAT_THRESHOLD = 1.01
MAX_RHAT_THRESHOLD = 1.1
ESS_PER_CHAIN = 100
ESS_CHAINS_CAP = 4
MAX_NONFINITE_FRACTION = 0.01
RUNAWAY_BOUND = 1e6
DIFFUSION_RATIO = 3.0
SPREAD_GROWTH = 2.0
MIN_DRAWS_FOR_RHAT = 4
MIN_DRAWS_FOR_DIFFUSION = 16
MIN_CHAINS_FOR_SPREAD = 16
MAX_DIAGNOSTIC_VALUES = 2**21  # draws per coordinate that R-hat, ESS and drift look at (see assess)
DEFAULT_MAX_COORDINATES = 64
_FLAT_TOLERANCE = 1e-6


class ConvergenceWarning(UserWarning):
    """The chains did not converge; the message lists each problem with its next step."""


class ConvergenceError(RuntimeError):
    """Raised instead of a :class:`ConvergenceWarning` under ``convergence="error"``.

    ``error.verdict`` holds the :class:`Verdict`.
    """

    def __init__(self, message: str, verdict: "Verdict | None" = None):
        super().__init__(message)
        self.verdict = verdict


def _encode_float(value: float | None) -> float | str | None:
    """JSON-safe float: NaN and ±inf as the strings ``"nan"``, ``"inf"``, ``"-inf"``."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else str(value)


def _decode_float(value: Any) -> float | None:
    return None if value is None else float(value)


_FLOAT_FIELDS = ("max_rhat", "rhat_threshold", "min_ess_bulk", "min_ess_threshold", "nonfinite_fraction",
                 "max_abs_position")


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Whether a run converged, and each problem found with its next step.

    Attributes
    ----------
    converged
        No problem found (``problems`` is empty).
    problems
        Human-readable problems, each ending with what to do about it.
    max_rhat, rhat_threshold
        Largest rank-normalized split R̂ over the checked coordinates (None with
        fewer than 4 draws per chain) and the threshold it is held to.
    checks_rhat
        Whether R̂ was a criterion: False with fewer than 4 draws per chain and when
        the chains start at draws of the target (sequential Monte Carlo).
    min_ess_bulk, min_ess_threshold
        Smallest bulk ESS over the checked coordinates (None with fewer than 4
        draws) and the threshold.
    num_frozen_chains
        Chains whose acceptance rate is exactly 0 (they never moved).
    num_divergent, num_nonfinite
        Divergent transitions and proposals with a NaN or infinite log density,
        summed over chains; ``nonfinite_fraction`` is the latter per transition.
    drifting
        Chains run away without bound (an improper target); see the module docs.
    num_chains, num_draws
        The shape of the run.
    num_coordinates_checked
        Position coordinates in R̂ / ESS / drift (the log density is one more).
    worst_rhat_coordinate, worst_ess_coordinate
        Names (as in ``Samples.summary``, e.g. ``x[3]``, or ``logdensity``) of the
        coordinates with the largest R̂ and the smallest ESS.
    max_abs_position
        Largest |x| in the last quarter of the draws over all coordinates (NaN ignored).
    notes
        What was not checked and why (not problems).
    """

    converged: bool
    problems: tuple[str, ...]
    max_rhat: float | None
    rhat_threshold: float
    min_ess_bulk: float | None
    min_ess_threshold: float
    num_frozen_chains: int
    num_divergent: int
    num_nonfinite: int
    drifting: bool
    checks_rhat: bool
    num_chains: int = 0
    num_draws: int = 0
    nonfinite_fraction: float = 0.0
    num_coordinates_checked: int = 0
    worst_rhat_coordinate: str | None = None
    worst_ess_coordinate: str | None = None
    max_abs_position: float | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (non-finite floats as ``"nan"`` / ``"inf"`` strings); :meth:`from_dict` inverts it."""
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in _FLOAT_FIELDS:
                value = _encode_float(value)
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, (bool, np.bool_)):
                value = bool(value)
            elif isinstance(value, (int, np.integer)):
                value = int(value)
            out[field.name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Verdict":
        """Rebuild a verdict from :meth:`to_dict`'s output (keys it does not know are ignored)."""
        names = {field.name for field in dataclasses.fields(cls)}
        values = {}
        for name, value in data.items():
            if name not in names:
                continue
            if name in _FLOAT_FIELDS:
                value = _decode_float(value)
            elif name in ("problems", "notes"):
                value = tuple(value)
            values[name] = value
        return cls(**values)

    def __str__(self) -> str:
        head = "converged" if self.converged else f"NOT converged ({len(self.problems)} problem" + (
            "s)" if len(self.problems) != 1 else ")")
        shape = f"{self.num_chains} chains x {self.num_draws} draws"
        facts = []
        if self.max_rhat is not None:
            criterion = f"(threshold {self.rhat_threshold:.3g})" if self.checks_rhat else "(not a criterion)"
            facts.append(f"max R-hat {self.max_rhat:.4g} {criterion}")
        if self.min_ess_bulk is not None:
            facts.append(f"min bulk ESS {self.min_ess_bulk:.0f} (threshold {self.min_ess_threshold:.0f})")
        lines = [f"Verdict: {head}: {shape}" + (f"; {', '.join(facts)}" if facts else "")]
        lines += [f"  - {problem}" for problem in self.problems]
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)


# ------------------------------------------------------------------ thresholds and policies


def default_thresholds(num_chains: int, min_ess: float | None = None) -> tuple[float, float]:
    """``(rhat_threshold, min_ess)`` used by :func:`assess` for ``num_chains`` chains (see the module docs)."""
    if min_ess is None:
        min_ess = float(ESS_PER_CHAIN * min(max(int(num_chains), 1), ESS_CHAINS_CAP))
    implied = math.sqrt(1.0 + 2.0 * num_chains / min_ess) if min_ess > 0 else math.inf
    return float(min(max(implied, MIN_RHAT_THRESHOLD), MAX_RHAT_THRESHOLD)), float(min_ess)


def check_policy(policy: Any) -> str:
    """Return ``policy`` if it is one of :data:`POLICIES`, else raise ``ValueError`` naming ``convergence``."""
    if not isinstance(policy, str) or policy not in POLICIES:
        raise ValueError(f"convergence must be one of {', '.join(map(repr, POLICIES))}; got {policy!r}")
    return policy


def report(verdict: Verdict, policy: str = "warn", stacklevel: int = 2) -> Verdict:
    """Act on a verdict: ``"warn"`` issues one :class:`ConvergenceWarning` listing every problem, ``"error"``
    raises :class:`ConvergenceError`, ``"ignore"`` does nothing. A converged verdict passes silently.

    ``stacklevel`` is counted from the caller of ``report`` as in :func:`warnings.warn`: 1 points at the
    line calling ``report``, 2 (default) at that function's caller. Returns ``verdict``.
    """
    check_policy(policy)
    if verdict.converged or policy == "ignore":
        return verdict
    message = ("the chains did not converge:\n" + "\n".join(f"  - {problem}" for problem in verdict.problems)
               + "\n(convergence='ignore' silences this, convergence='error' raises instead; "
               "samples.verdict holds the details)")
    if policy == "error":
        raise ConvergenceError(message, verdict)
    warnings.warn(message, ConvergenceWarning, stacklevel=stacklevel + 1)
    return verdict


# ------------------------------------------------------------------ coordinates


class _Columns:
    """The position leaves as ``(chain, draw, size)`` views, with coordinate names like ``Samples.summary``."""

    def __init__(self, positions: Any, num_chains: int, num_draws: int):
        self.leaves, self.bases, self.shapes, self.starts = [], [], [], []
        start = 0
        for path, leaf in jax.tree_util.tree_flatten_with_path(positions)[0]:
            leaf = np.asarray(leaf)
            if leaf.shape[:2] != (num_chains, num_draws):
                raise ValueError(f"position leaf {jax.tree_util.keystr(path) or 'x'} has shape {leaf.shape}; "
                                 f"expected ({num_chains}, {num_draws}, ...) like logdensity")
            self.leaves.append(leaf.reshape(num_chains, num_draws, -1))
            self.bases.append(jax.tree_util.keystr(path) or "x")
            self.shapes.append(leaf.shape[2:])
            self.starts.append(start)
            start += self.leaves[-1].shape[2]
        self.dim = start

    def name(self, index: int) -> str:
        leaf = int(np.searchsorted(self.starts, index, side="right")) - 1
        shape = self.shapes[leaf]
        if not shape:
            return self.bases[leaf]
        within = np.unravel_index(index - self.starts[leaf], shape)
        return f"{self.bases[leaf]}[{','.join(str(int(i)) for i in within)}]"

    def blocks(self, size: int = 4096):
        """``(first coordinate index, (C, N, k) block)`` over all coordinates, at most ``size`` at a time."""
        for start, leaf in zip(self.starts, self.leaves):
            for offset in range(0, leaf.shape[2], size):
                yield start + offset, leaf[:, :, offset:offset + size]

    def gather(self, indices: np.ndarray) -> np.ndarray:
        """``(C, N, len(indices))`` float64 copy of the chosen coordinates."""
        columns = []
        for index in indices:
            leaf = int(np.searchsorted(self.starts, index, side="right")) - 1
            columns.append(self.leaves[leaf][:, :, index - self.starts[leaf]])
        return np.stack(columns, axis=-1).astype(np.float64)


def _choose_coordinates(columns: _Columns, max_coordinates: int, num_draws: int) -> np.ndarray:
    """All coordinates if there are few; else half with the largest plain split R̂ (a sort-free screen
    over every coordinate) and half evenly spaced over the rest."""
    dim = columns.dim
    if dim <= max_coordinates:
        return np.arange(dim)
    chosen: list[int] = []
    if num_draws >= MIN_DRAWS_FOR_RHAT and max_coordinates >= 2:
        screen = np.empty(dim)
        for start, block in columns.blocks(256):
            screen[start:start + block.shape[2]] = split_gelman_rubin(block)
        screen = np.where(np.isnan(screen), -np.inf, screen)
        chosen = list(np.argsort(-screen, kind="stable")[:max_coordinates // 2])
    taken = set(int(i) for i in chosen)
    rest = np.setdiff1d(np.arange(dim), np.asarray(sorted(taken), dtype=int))
    spaced = rest[np.unique(np.linspace(0, len(rest) - 1, max_coordinates - len(chosen)).round().astype(int))]
    return np.sort(np.concatenate([np.asarray(chosen, dtype=int), spaced]).astype(int))


# ------------------------------------------------------------------ drift


def _drift(x: np.ndarray, logdensity: np.ndarray) -> tuple[np.ndarray, bool]:
    """Per coordinate of ``x`` (C, N, K): whether it drifts like an unconfined random walk (N >= 16), and
    whether the log density is flat (see the module docs)."""
    num_draws = x.shape[1]
    finite_ld = logdensity[np.isfinite(logdensity)]
    flat = bool(finite_ld.size) and float(np.ptp(finite_ld)) <= _FLAT_TOLERANCE * max(
        1.0, float(np.abs(np.median(finite_ld))))
    if num_draws < MIN_DRAWS_FOR_DIFFUSION:
        return np.zeros(x.shape[2], bool), flat
    short, long = num_draws // 8, num_draws // 2
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN coordinates: reported as non-finite draws
        msd_short = np.nanmean((x[:, short:] - x[:, :-short]) ** 2, axis=(0, 1))
        msd_long = np.nanmean((x[:, long:] - x[:, :-long]) ** 2, axis=(0, 1))
        moving = (msd_short > 0) & (msd_long >= DIFFUSION_RATIO * msd_short)
        quarter = num_draws // 4
        spread_first = np.nanstd(x[:, :quarter], axis=(0, 1))
        spread_last = np.nanstd(x[:, -quarter:], axis=(0, 1))
        growing = (spread_last >= SPREAD_GROWTH * spread_first) & (x.shape[0] >= MIN_CHAINS_FOR_SPREAD)
    return moving & (flat | growing), flat


# ------------------------------------------------------------------ assess


def _finite_or_none(values: np.ndarray, pick) -> tuple[float | None, int | None]:
    valid = np.nonzero(~np.isnan(values))[0]
    if valid.size == 0:
        return None, None
    best = valid[pick(values[valid])]
    return float(values[best]), int(best)


def assess(samples: "Samples", *, rhat_threshold: float | None = None, min_ess: float | None = None,
           max_coordinates: int = DEFAULT_MAX_COORDINATES) -> Verdict:
    """Judge a run on the host: R̂, bulk ESS, frozen chains, divergences, non-finite values and drift.

    Parameters
    ----------
    samples
        A :class:`~jaxprobe.engine.samples.Samples`: positions ``(chain, draw, ...)``
        (a pytree is fine), logdensity ``(chain, draw)``, per-chain acceptance_rate,
        num_divergent, num_nonfinite.
    rhat_threshold, min_ess
        Override the defaults of :func:`default_thresholds` (see the module docs:
        ``100 · min(C, 4)`` and ``√(1 + 2C / min_ess)`` clipped to [1.01, 1.1]).
    max_coordinates
        At most this many position coordinates enter R̂, ESS and the drift test
        (images have thousands): if there are more, half are the ones with the
        largest plain split R̂ over all coordinates (a cheap screen) and half are
        evenly spaced. The log density is always checked as one more coordinate.

    Returns
    -------
    Verdict
    """
    logdensity = np.asarray(samples.logdensity)
    if logdensity.ndim != 2:
        raise ValueError(f"samples.logdensity must have shape (chain, draw), got {logdensity.shape}")
    if isinstance(max_coordinates, bool) or not isinstance(max_coordinates, (int, np.integer)) or max_coordinates < 1:
        raise ValueError(f"max_coordinates must be an int >= 1, got {max_coordinates!r}")
    num_chains, num_draws = logdensity.shape
    if rhat_threshold is not None and not float(rhat_threshold) >= 1.0:
        raise ValueError(f"rhat_threshold must be >= 1, got {rhat_threshold!r}")
    if min_ess is not None and not float(min_ess) >= 0.0:
        raise ValueError(f"min_ess must be >= 0, got {min_ess!r}")
    default_rhat, min_ess = default_thresholds(num_chains, None if min_ess is None else float(min_ess))
    rhat_threshold = default_rhat if rhat_threshold is None else float(rhat_threshold)
    start_at_target = bool(getattr(samples, "chains_start_at_target", False))
    problems: list[str] = []
    notes: list[str] = []
    all_draws = num_draws
    transitions = num_chains * num_draws * max(int(getattr(samples, "thin", 1) or 1), 1)
    positions = samples.positions
    # Memory stays bounded for long runs (4096 chains x 20,000 draws took 24 GB in rank normalization): the
    # statistics use every stride-th draw, at most MAX_DIAGNOSTIC_VALUES per coordinate. An ESS of a subset
    # is a lower bound of the run's, so the verdict only errs on the side of caution.
    stride = max(1, math.ceil(num_chains * num_draws / MAX_DIAGNOSTIC_VALUES))
    if stride > 1:
        positions = jax.tree.map(lambda leaf: np.asarray(leaf)[:, ::stride], positions)
        logdensity = logdensity[:, ::stride]
        num_draws = logdensity.shape[1]
        notes.append(f"R-hat, ESS and drift use every {stride}-th draw ({num_draws} of {all_draws} per chain, "
                     "to bound memory): the ESS counts those draws only, a lower bound")
    columns = _Columns(positions, num_chains, num_draws)

    acceptance = np.asarray(samples.acceptance_rate, np.float64).reshape(-1)
    num_frozen = int(np.sum(acceptance == 0.0))
    divergent_per_chain = np.asarray(samples.num_divergent).reshape(-1)
    num_divergent = int(np.sum(divergent_per_chain))
    num_nonfinite = int(np.sum(np.asarray(samples.num_nonfinite)))
    nonfinite_fraction = num_nonfinite / transitions if transitions else 0.0

    # Non-finite kept draws and the largest |x| late in the run, over every coordinate.
    bad_draws = ~np.isfinite(logdensity)
    quarter = max(1, num_draws // 4)
    max_abs = 0.0
    runaway_index = None
    for start, block in columns.blocks():
        bad_draws |= ~np.isfinite(block).all(axis=2)
        late = block[:, -quarter:]
        with np.errstate(invalid="ignore"):  # fmax / fmin skip NaN
            late = np.fmax(np.fmax.reduce(late, axis=(0, 1)), -np.fmin.reduce(late, axis=(0, 1)))
        late = np.where(np.isnan(late), 0.0, late).astype(np.float64)
        if late.size and late.max() > max_abs:
            max_abs = float(late.max())
            runaway_index = start + int(np.argmax(late))
    num_bad_draws = int(bad_draws.sum())
    runaway = max_abs > RUNAWAY_BOUND

    # The coordinates to check, and the log density as one more.
    indices = _choose_coordinates(columns, int(max_coordinates), num_draws)
    names = [columns.name(int(i)) for i in indices] + ["logdensity"]
    x = columns.gather(indices) if indices.size else np.empty((num_chains, num_draws, 0))
    if columns.dim > indices.size:
        notes.append(f"R-hat, ESS and drift were checked on {indices.size} of {columns.dim} position coordinates "
                     f"(max_coordinates={max_coordinates}) and the log density")

    diffusing, flat = _drift(x, logdensity.astype(np.float64))
    drifting = bool(runaway or diffusing.any())

    max_rhat = min_ess_bulk = None
    worst_rhat = worst_ess = None
    if num_draws >= MIN_DRAWS_FOR_RHAT:
        stacked = np.concatenate([x, logdensity.astype(np.float64)[..., None]], axis=2)
        rhat, ess = rhat_ess_bulk(stacked[None])
        rhat, ess = rhat[0], ess[0]
        if start_at_target:
            # Chains that start at draws of the target need not mix between modes, so the pooled bulk ESS
            # (which counts between-chain variance) undercounts them: each chain is its own stationary run,
            # and the ESS is the sum of the chains' own (split) ESS. Chains that share an SMC ancestor are
            # correlated at first; the inner moves of the SMC stages and the warmup decorrelate them.
            ess = np.nansum(rhat_ess_bulk(stacked[:, None])[1], axis=0)
        finite = np.all(np.isfinite(stacked), axis=(0, 1))
        constant = finite & np.all(stacked == stacked[:1, :1], axis=(0, 1))
        informative = finite & ~constant
        rhat = np.where(informative, rhat, np.nan)
        ess = np.where(informative, ess, np.nan)
        max_rhat, worst = _finite_or_none(rhat, np.argmax)
        worst_rhat = None if worst is None else names[worst]
        min_ess_bulk, worst = _finite_or_none(ess, np.argmin)
        worst_ess = None if worst is None else names[worst]
        if constant.any():
            notes.append(f"{int(constant.sum())} coordinate(s) never changed in any draw "
                         f"({', '.join(n for n, c in zip(names, constant) if c)[:200]}): left out of R-hat and ESS")
        if not informative.any():
            notes.append("no coordinate varies: R-hat and ESS could not be computed")
    else:
        notes.append(f"R-hat and ESS not checked: {num_draws} draw(s) per chain, they need at least "
                     f"{MIN_DRAWS_FOR_RHAT}")
    checks_rhat = num_draws >= MIN_DRAWS_FOR_RHAT and not start_at_target
    if start_at_target:
        notes.append("R-hat is not a criterion: the chains start at draws of the target (sequential Monte "
                     "Carlo), so they need not mix between modes")

    # Problems, each with its next step.
    if num_bad_draws:
        problems.append(f"{num_bad_draws} kept draw(s) hold NaN or inf (position or log density): the log density "
                        "or the model overflows where the chains go: check it there, or bound the inputs with a "
                        "prior or Box constraints")
    if runaway:
        problems.append(f"chains drift without bound: |x| reached {max_abs:.3g} ({columns.name(runaway_index)}) "
                        "with no sign of a mode: the target looks improper: add a prior or Box constraints (if "
                        "values this large are legitimate, rescale the parameters to order 1)")
    elif drifting:
        which = names[int(np.argmax(diffusing))]
        problems.append(f"chains drift without settling: {which} keeps spreading like a random walk"
                        + (" on a flat log density" if flat else "")
                        + ": the target looks improper: add a prior or Box constraints (if it is proper, the steps "
                        "are far too small to explore it: let warmup adapt step_size or increase num_warmup)")
    if num_frozen:
        problems.append(f"{num_frozen} of {num_chains} chain(s) never moved (acceptance rate exactly 0): start "
                        "every chain inside the support of the target, or use a smaller step_size (or "
                        "step_size=None to adapt it during warmup)")
    if num_divergent:
        chains = int(np.sum(divergent_per_chain > 0))
        problems.append(f"{num_divergent} divergent transition(s) in {chains} chain(s): the step size is too "
                        "large for the target's curvature and these draws are biased: raise "
                        "target_acceptance_rate (e.g. 0.9) or reparameterize the target")
    if nonfinite_fraction > MAX_NONFINITE_FRACTION:
        problems.append(f"{nonfinite_fraction:.1%} of proposals had a NaN or infinite log density (each "
                        f"rejected; more than {MAX_NONFINITE_FRACTION:.0%} means numerical trouble): check the "
                        "log density for overflow or log(0) where the chains go, or use Box constraints "
                        "instead of returning -inf outside the support")
    if checks_rhat and max_rhat is not None and not max_rhat <= rhat_threshold:
        if drifting:
            cause = "the drift above makes the chains disagree: fix that first"
        else:
            cause = ("chains stuck in different modes or not yet mixed: use sampler='smc' for multimodal "
                     "targets, or increase num_warmup and num_samples")
            if num_frozen:
                cause = "the frozen chains above count; otherwise " + cause
        problems.append(f"max R-hat {max_rhat:.4g} > {rhat_threshold:.4g} ({worst_rhat}): the chains disagree "
                        f"about the distribution: {cause}")
    if min_ess_bulk is not None and not min_ess_bulk >= min_ess:
        problems.append(f"min bulk ESS {min_ess_bulk:.0f} < {min_ess:.0f} ({worst_ess}): too few effective "
                        "draws: increase num_samples (or the number of chains), or use a sampler that mixes "
                        "faster (nuts, chees)")

    return Verdict(
        converged=not problems,
        problems=tuple(problems),
        max_rhat=max_rhat,
        rhat_threshold=rhat_threshold,
        min_ess_bulk=min_ess_bulk,
        min_ess_threshold=min_ess,
        num_frozen_chains=num_frozen,
        num_divergent=num_divergent,
        num_nonfinite=num_nonfinite,
        drifting=drifting,
        checks_rhat=checks_rhat,
        num_chains=num_chains,
        num_draws=all_draws,
        nonfinite_fraction=float(nonfinite_fraction),
        num_coordinates_checked=int(indices.size),
        worst_rhat_coordinate=worst_rhat,
        worst_ess_coordinate=worst_ess,
        max_abs_position=float(max_abs),
        notes=tuple(notes),
    )
