"""A verdict on every run: did the chains converge, and if not, what to do next.

The numbers come from statistics folded in while the run goes: every kept draw writes its row
of a bounded diagnostic subset, and counts its non-finite log densities, inside the compiled
scan on the device (:mod:`jaxprobe.engine.streaming`); :func:`jaxprobe.engine.streaming.finalize`
and :func:`~jaxprobe.engine.streaming.rank_statistics` turn them into R̂, ESS and the drift test
at the end, so the verdict needs no second copy of the draws and no pass over them.
:func:`verdict_from_statistics` phrases those numbers as a :class:`Verdict` (problems with
their next steps); :func:`assess` does the same for finished draws (``Samples.diagnostics()``);
:func:`report` turns a verdict into a :class:`ConvergenceWarning`, a
:class:`ConvergenceError` or nothing, following the ``convergence="warn" | "error" |
"ignore"`` policy of the public calls.

The checks
----------
R̂ (cross-chain agreement)
    Rank-normalized split R̂, the larger of the bulk and folded versions (Vehtari,
    Gelman, Simpson, Carpenter & Bürkner 2021), of up to ``max_coordinates``
    position coordinates and of the log density (:func:`jaxprobe.engine.diagnostics.rank_diagnostics`).
    Its default threshold depends on the number of chains C (see "Thresholds").
    All of the verdict's statistics but the counts of divergences, frozen chains and
    non-finite values are computed on a bounded subset of the draws: at most
    :data:`~jaxprobe.engine.streaming.DIAGNOSTIC_CHAINS` evenly spaced chains and every
    stride-th draw, at most :data:`~jaxprobe.engine.streaming.DIAGNOSTIC_VALUES` values per
    coordinate (the notes say so when the subset is smaller than the run). It is what keeps
    the verdict within a few percent of the run: per-chain moments of every coordinate of
    every draw cost 17% of a d = 50 MLP probe's MALA step on a CPU, memory-bound, and rank
    normalization sorts every value at once. Beside it, plain split R̂ of every
    coordinate (``max_split_rhat``) chooses which coordinates the rank-normalized
    statistics look at, and nested R̂
    (Margossian, Hoffman, Sountsov, Riou-Durand, Vehtari & Gelman 2022;
    ``nested_rhat``) is reported for runs of at least 64 chains, grouped into up to
    16 superchains of consecutive chains. Nested R̂ is made for many short chains
    that start from a common point per superchain; jaxprobe's chains start
    independently, where it measures the same disagreement as split R̂ with fewer
    degrees of freedom, so the verdict's criterion stays the rank-normalized split R̂
    at every C (with the C-dependent threshold below, which plays the part nested
    R̂'s threshold plays for many chains), and nested R̂ is a number to read beside it.
Bulk and tail ESS
    The smallest bulk effective sample size over the same coordinates must reach
    ``min_ess`` (default ``100 · min(C, 4)``); the smallest tail ESS (of the 5% and
    95% quantiles) is reported as ``min_ess_tail``.
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
Starting points
    R̂ compares chains with each other, so it can only see a mode that some chain visited: chains that
    all start in one small region may agree perfectly while a mode none of them found is missing (see
    "Starting points").
An unfinished tempering path
    Chains started by sequential Monte Carlo whose path stopped before λ = 1 (``max_stages``) start at
    draws of an intermediate distribution, not of the target.

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

Starting points
---------------
R̂ can vouch only for modes some chain visited. Gelman and Rubin's argument needs starting points
*overdispersed* relative to the target: then chains that converged from everywhere and agree have
forgotten where they started. Chains that all start in one small region agree just as well when every
one of them fell into the same mode: MALA on two equal modes at ±4 in 2-D, 64 chains started in one mode,
put every draw there with R̂ < 1.1. So the verdict compares, per coordinate, the spread of the C starting
points with the draws': a window as wide as the starts' range (``max − min``), placed where it holds the
most draws, holds what share of the diagnostic subset's draws (``start_coverage``)? The starts are
*not overdispersed* when

* every chain starts at the same value of a coordinate that varies in the draws (checked in every
  coordinate: a range of width 0 holds no mass of a continuous target), or
* in one of the coordinates the rank-normalized statistics check (all of them up to
  ``max_coordinates``), the share is below ``start_coverage_threshold``: the smaller of
  :data:`STARTS_COVERAGE_FLOOR` (starts whose spread holds less than half of the draws span clearly
  less than the target, however many chains there are) and the count that C starts drawn from the target
  itself give with probability :data:`STARTS_FALSE_ALARM` / D (D the coordinates tested: the share of the
  target inside the range of C of its draws is Beta(C − 1, 2) distributed whatever the target, the count of
  n independent draws inside it Beta-binomial, and the best-placed window of the same width holds at least
  as much; so starts drawn from the target are flagged in at most 1 % of runs, and wider starts, as the
  prior's draws usually are, far less), or
* there is one chain (one point holds no draw: one chain cannot show that its start was overdispersed).

The check is of spread, not of place: starts wider than the target but off to one side of it pass
(Gelman and Rubin ask for overdispersion; on a unimodal target such starts are harmless), and a start
spread widely along a line that misses a mode is not caught. It does not apply when the chains start at
draws of the target (sequential Monte Carlo), and is not made where the starts are unknown (:func:`assess`
of draws made elsewhere: ``starts_overdispersed`` None, and a note says so); a drifting run reports its
drift instead. The problem says that R̂ cannot vouch for modes no chain visited and names the remedies:
start from draws of a distribution wider than the target (the prior's, as :class:`jaxprobe.Question` and
``generate`` make), or ``sampler="smc"``.

Sequential Monte Carlo
----------------------
After SMC (``sampler="smc"``) the chains start at the particles of a tempered path from the reference
(λ = 0) to the target (λ = 1). Each stage moves λ as far as ``target_ess`` allows, and the path stops after
``max_stages`` stages (``sampler_options``) wherever λ is; it is never forced to 1. A path that stopped
before λ = 1 leaves particles that are draws of the target tempered by λ, with its proportions of the
modes: the verdict names the λ reached, ``max_stages`` and the remedy first, and R̂'s message points back
at it (a run that is SMC already is never told to use ``sampler="smc"``).

Every Monte-Carlo standard error of such a run (its observables, ``Samples.expectation``, ``log_evidence_se``)
comes from the spread of its ``num_groups`` independent particle groups (:mod:`jaxprobe.engine.estimates`).
With fewer than :data:`~jaxprobe.engine.streaming.MIN_BATCHES` groups that spread is itself too uncertain to
be an error bar (2 groups: a t statistic with 1 degree of freedom, whose reported error is often several
times too small): the verdict records the groups (``num_groups``) and says so in ``mcse_warning``, which
:func:`report` issues as an :class:`~jaxprobe.engine.estimates.MCSEWarning` (the draws themselves may be
fine, so it is no problem and ``converged`` is untouched).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import numpy as np

from jaxprobe._inputs import check_int, check_number
from jaxprobe._io import float_from_json, float_to_json
from jaxprobe.engine import diagnostics, streaming
from jaxprobe.engine.estimates import SMC_GROUPS, MCSEWarning
from jaxprobe.engine.streaming import (DEFAULT_MAX_COORDINATES, DIFFUSION_RATIO, FLAT_TOLERANCE,  # noqa: F401
                                       MIN_CHAINS_FOR_SPREAD, MIN_DRAWS_FOR_DIFFUSION, MIN_DRAWS_FOR_RHAT,
                                       SPREAD_GROWTH)

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
    "start_coverage_threshold",
]

POLICIES = ("warn", "error", "ignore")
"""Accepted values of ``convergence=``: warn (default), raise, or say nothing."""

MIN_RHAT_THRESHOLD = 1.01
MAX_RHAT_THRESHOLD = 1.1
ESS_PER_CHAIN = 100
ESS_CHAINS_CAP = 4
MAX_NONFINITE_FRACTION = 0.01
RUNAWAY_BOUND = 1e6
#: The most often starting points drawn from the target itself are called not overdispersed (per run).
STARTS_FALSE_ALARM = 0.01
#: Starting points whose spread holds less than this share of the draws (in some coordinate) are never
#: overdispersed.
STARTS_COVERAGE_FLOOR = 0.5


class ConvergenceWarning(UserWarning):
    """The chains did not converge; the message lists each problem with its next step.

    Examples
    --------
    >>> import warnings
    >>> prior = jaxprobe.priors.StandardNormal()
    >>> samples = jaxprobe.sample(jax.random.key(1), prior, prior.sample(jax.random.key(0), 4, (2,)),
    ...                           num_samples=500, num_warmup=200, progress=False)
    >>> verdict = samples.diagnostics(rhat_threshold=1.0001)      # a threshold this short run cannot meet
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = report(verdict, "warn")                         # what sample(..., convergence="warn") does
    >>> caught[0].category.__name__, str(caught[0].message).splitlines()[0]
    ('ConvergenceWarning', 'the chains did not converge:')
    """


class ConvergenceError(RuntimeError):
    """Raised instead of a :class:`ConvergenceWarning` under ``convergence="error"``.

    ``error.verdict`` holds the :class:`Verdict`.

    Examples
    --------
    >>> prior = jaxprobe.priors.StandardNormal()
    >>> samples = jaxprobe.sample(jax.random.key(1), prior, prior.sample(jax.random.key(0), 4, (2,)),
    ...                           num_samples=500, num_warmup=200, progress=False)
    >>> verdict = samples.diagnostics(rhat_threshold=1.0001)      # a threshold this short run cannot meet
    >>> try:
    ...     report(verdict, "error")                            # what sample(..., convergence="error") does
    ... except jaxprobe.ConvergenceError as error:
    ...     print(error.verdict is verdict, str(error).splitlines()[1].split(":")[0])
    True   - max R-hat 1.007 > 1 (x[0])
    """

    def __init__(self, message: str, verdict: "Verdict | None" = None):
        super().__init__(message)
        self.verdict = verdict


_FLOAT_FIELDS = ("max_rhat", "rhat_threshold", "min_ess_bulk", "min_ess_threshold", "nonfinite_fraction",
                 "max_abs_position", "min_ess_tail", "max_split_rhat", "nested_rhat", "start_coverage",
                 "start_coverage_threshold", "tempering_lambda")


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
    min_ess_tail
        Smallest tail ESS (of the 5% and 95% quantiles' indicators) over the checked coordinates.
    max_split_rhat
        Largest plain (not rank-normalized) split R̂ over every coordinate of the diagnostic subset.
    nested_rhat
        Largest nested R̂ (Margossian et al. 2022) over every coordinate, for runs with at least 64
        chains in the subset, grouped into superchains (see the module docs); reported, not a criterion.
    notes
        What was not checked and why (not problems).
    starts_overdispersed
        Whether the chains' starting points spread over the draws' distribution in every coordinate (see
        "Starting points" in the module docs; False is a problem: R̂ cannot vouch for modes no chain
        visited); None where it does not apply or the starts are unknown.
    start_coverage, start_coverage_threshold, worst_start_coordinate
        The smallest share of the draws that a window as wide as the starting points' range holds (placed
        where it holds the most), over the coordinates; the share below which the starts are not
        overdispersed (1 where no share will do: one chain, or every chain at one value of a coordinate);
        the coordinate of the smallest share.
    tempering_finished, tempering_lambda
        For chains started by sequential Monte Carlo: whether its tempering path reached λ = 1 and the λ it
        reached (None otherwise); an unfinished path is a problem.
    num_groups, mcse_warning
        For chains started by sequential Monte Carlo: its independent particle groups, which every Monte-Carlo
        standard error of the run comes from (None otherwise), and, with fewer than
        :data:`~jaxprobe.engine.streaming.MIN_BATCHES` of them, why those errors cannot be trusted and what to do
        (None otherwise): a warning (:func:`report` issues an :class:`~jaxprobe.engine.estimates.MCSEWarning`),
        not a problem.

    Examples
    --------
    >>> prior = jaxprobe.priors.StandardNormal()
    >>> samples = jaxprobe.sample(jax.random.key(1), prior, prior.sample(jax.random.key(0), 4, (2,)),
    ...                           num_samples=500, num_warmup=200, progress=False)
    >>> verdict = samples.verdict
    >>> verdict.converged, verdict.problems, verdict.num_chains, verdict.num_draws
    (True, (), 4, 500)
    >>> bool(verdict.max_rhat < verdict.rhat_threshold), bool(verdict.min_ess_bulk > verdict.min_ess_threshold)
    (True, True)
    >>> strict = samples.diagnostics(rhat_threshold=1.0001)       # a fresh verdict, other thresholds
    >>> strict.converged, len(strict.problems)
    (False, 1)
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
    min_ess_tail: float | None = None
    max_split_rhat: float | None = None
    nested_rhat: float | None = None
    starts_overdispersed: bool | None = None
    start_coverage: float | None = None
    start_coverage_threshold: float | None = None
    worst_start_coordinate: str | None = None
    tempering_finished: bool | None = None
    tempering_lambda: float | None = None
    num_groups: int | None = None
    mcse_warning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (non-finite floats as ``"nan"`` / ``"inf"`` strings); :meth:`from_dict` inverts it."""
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in _FLOAT_FIELDS:
                value = float_to_json(value)
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
                value = float_from_json(value)
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
        lines += [f"  warning: {self.mcse_warning}"] if self.mcse_warning else []
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)


# ------------------------------------------------------------------ thresholds and policies


def default_thresholds(num_chains: int, min_ess: float | None = None) -> tuple[float, float]:
    """``(rhat_threshold, min_ess)`` used by :func:`assess` for ``num_chains`` chains (see the module docs).

    Examples
    --------
    >>> default_thresholds(4), default_thresholds(1000)        # (R̂ threshold, min ESS): looser R̂ for many chains
    ((1.01, 400.0), (1.1, 400.0))
    """
    if min_ess is None:
        min_ess = float(ESS_PER_CHAIN * min(max(int(num_chains), 1), ESS_CHAINS_CAP))
    implied = math.sqrt(1.0 + 2.0 * num_chains / min_ess) if min_ess > 0 else math.inf
    return float(min(max(implied, MIN_RHAT_THRESHOLD), MAX_RHAT_THRESHOLD)), float(min_ess)


def start_coverage_threshold(num_chains: int, num_coordinates: int, num_values: int) -> float:
    """The share of ``num_values`` draws that the spread of ``num_chains`` starting points must hold in each
    of ``num_coordinates`` coordinates (see "Starting points" in the module docs): below it, a count that C
    starts drawn from the target itself and independent draws give with probability at most
    :data:`STARTS_FALSE_ALARM` / D (the Beta-binomial(n, C − 1, 2) distribution of the count inside their
    range), and at most :data:`STARTS_COVERAGE_FLOOR`; 1 for one chain (whose range, one point, holds no
    draw of a continuous target: never overdispersed).

    Examples
    --------
    >>> start_coverage_threshold(4, 2, 400), start_coverage_threshold(8, 2, 400)   # more starts span more
    (0.1075, 0.365)
    >>> start_coverage_threshold(64, 2, 400) == STARTS_COVERAGE_FLOOR, start_coverage_threshold(1, 2, 400)
    (True, 1.0)
    """
    num_chains = check_int(num_chains, "num_chains", minimum=1)
    num_coordinates = check_int(num_coordinates, "num_coordinates", minimum=1)
    num_values = check_int(num_values, "num_values", minimum=1)
    if num_chains == 1:
        return 1.0
    return min(_smallest_usual_count(num_chains, num_coordinates, num_values) / num_values, STARTS_COVERAGE_FLOOR)


@functools.lru_cache(maxsize=64)
def _smallest_usual_count(num_chains: int, num_coordinates: int, num_values: int) -> int:
    """The smallest count k of n draws inside the range of C starts with P(K <= k) > alarm / D, for starts and
    draws independent of one distribution: K ~ Beta-binomial(n, C − 1, 2) (the share of the target between
    the smallest and the largest of C draws is Beta(C − 1, 2))."""
    a, n = num_chains - 1.0, num_values
    lgamma = np.vectorize(math.lgamma, otypes=[np.float64])
    k = np.arange(n + 1, dtype=np.float64)
    log_pmf = (math.lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1) + lgamma(k + a) + lgamma(n - k + 2)
               - math.lgamma(n + a + 2) + math.log(a) + math.log(a + 1))  # + log(1 / B(a, 2)) = log(a (a + 1))
    cdf = np.cumsum(np.exp(log_pmf))
    return int(np.searchsorted(cdf, STARTS_FALSE_ALARM / num_coordinates, side="right"))


def start_range(starts: Any, xp: Any = np) -> Any:
    """The smallest and largest starting point per coordinate, ``(2, D)``, of flat starts ``(C, D)``: what the
    verdict needs of them (``xp``: ``numpy``, or ``jax.numpy`` inside a compiled program)."""
    return xp.stack([xp.min(starts, axis=0), xp.max(starts, axis=0)])


class StartsCheck(NamedTuple):
    """How far the chains' starting points spread over the draws (see "Starting points" in the module docs)."""

    coverage: float  # the share of the draws a window as wide as the starts' range holds in ``coordinate``
    threshold: float  # the share they must hold (1: none will do: one chain, or chains that start at one value)
    coordinate: str | None  # the coordinate of the smallest share (first, one where every start is the same)
    overdispersed: bool

    @classmethod
    def of_verdict(cls, verdict: "Verdict | None") -> "StartsCheck | None":
        """The check a finished run's verdict recorded (None where it made none)."""
        if verdict is None or verdict.starts_overdispersed is None or verdict.start_coverage is None:
            return None
        return cls(float(verdict.start_coverage), float(verdict.start_coverage_threshold),
                   verdict.worst_start_coordinate, bool(verdict.starts_overdispersed))


class Tempering(NamedTuple):
    """The tempering path of the sequential Monte Carlo run the chains started from (see "Sequential Monte
    Carlo" in the module docs): the λ it reached and its number of stages."""

    reached: float
    num_stages: int

    @property
    def finished(self) -> bool:
        return bool(self.reached >= 1.0)

    @classmethod
    def of_path(cls, inverse_temperature: Any) -> "Tempering | None":
        """From λ after each stage, ``(num_stages,)`` (``Samples.evidence_path["inverse_temperature"]``); None
        for an empty or missing path. An unfinished path ran all of its ``max_stages`` stages."""
        if inverse_temperature is None:
            return None
        path = np.asarray(inverse_temperature, np.float64).reshape(-1)
        return cls(float(path[-1]), int(path.size)) if path.size else None


def check_policy(policy: Any) -> str:
    """Return ``policy`` if it is one of :data:`POLICIES`, else raise ``ValueError`` naming ``convergence``.

    Examples
    --------
    >>> check_policy("error")
    'error'
    >>> check_policy("loud")
    Traceback (most recent call last):
        ...
    ValueError: convergence must be one of 'warn', 'error', 'ignore'; got 'loud'
    """
    if not isinstance(policy, str) or policy not in POLICIES:
        raise ValueError(f"convergence must be one of {', '.join(map(repr, POLICIES))}; got {policy!r}")
    return policy


def report(verdict: Verdict, policy: str = "warn", stacklevel: int = 2) -> Verdict:
    """Act on a verdict: ``"warn"`` issues one :class:`ConvergenceWarning` listing every problem, ``"error"``
    raises :class:`ConvergenceError`, ``"ignore"`` does nothing. A converged verdict passes silently. A verdict
    with an ``mcse_warning`` (error bars from too few SMC groups) issues an
    :class:`~jaxprobe.engine.estimates.MCSEWarning` under ``"warn"`` and ``"error"`` (before any error: the
    error bars are no convergence problem).

    ``stacklevel`` is counted from the caller of ``report`` as in :func:`warnings.warn`: 1 points at the
    line calling ``report``, 2 (default) at that function's caller. Returns ``verdict``.

    Examples
    --------
    >>> import warnings
    >>> prior = jaxprobe.priors.StandardNormal()
    >>> samples = jaxprobe.sample(jax.random.key(1), prior, prior.sample(jax.random.key(0), 4, (2,)),
    ...                           num_samples=500, num_warmup=200, progress=False)
    >>> strict = samples.diagnostics(rhat_threshold=1.0001)      # a threshold this short run cannot meet
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = report(samples.verdict)                         # converged: passes silently
    ...     ignored = report(strict, "ignore")                  # silent, and returned as it is
    ...     _ = report(strict)                                  # "warn": one warning listing every problem
    >>> [warning.category.__name__ for warning in caught], ignored is strict
    (['ConvergenceWarning'], True)
    """
    check_policy(policy)
    if verdict.mcse_warning and policy != "ignore":
        warnings.warn(f"the Monte-Carlo standard errors cannot be trusted: {verdict.mcse_warning}", MCSEWarning,
                      stacklevel=stacklevel + 1)
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


class CoordinateNames:
    """Names of the flat coordinates of a position pytree, as ``Samples.summary`` gives them (``x[3]``,
    ``['a'][0,1]``), from the leaves' key paths and event shapes."""

    def __init__(self, paths: list[str], event_shapes: list[tuple[int, ...]]):
        self.bases = [path or "x" for path in paths]
        self.shapes = [tuple(shape) for shape in event_shapes]
        sizes = [int(np.prod(shape, dtype=np.int64)) for shape in self.shapes]
        self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if sizes else np.zeros(0, int)
        self.dim = int(sum(sizes))

    @classmethod
    def of_draws(cls, positions: Any) -> "CoordinateNames":
        """From positions whose leaves have axes ``(chain, draw, *event_shape)``."""
        items = jax.tree_util.tree_flatten_with_path(positions)[0]
        return cls([jax.tree_util.keystr(path) for path, _ in items], [np.shape(leaf)[2:] for _, leaf in items])

    def __call__(self, index: int) -> str:
        if index == self.dim:
            return "logdensity"
        leaf = int(np.searchsorted(self.starts, index, side="right")) - 1
        shape = self.shapes[leaf]
        if not shape:
            return self.bases[leaf]
        within = np.unravel_index(index - self.starts[leaf], shape)
        return f"{self.bases[leaf]}[{','.join(str(int(i)) for i in within)}]"


# ------------------------------------------------------------------ assess


def _finite_or_none(values: np.ndarray, pick) -> tuple[float | None, int | None]:
    valid = np.nonzero(~np.isnan(values))[0]
    if valid.size == 0:
        return None, None
    best = valid[pick(values[valid])]
    return float(values[best]), int(best)


def _check_thresholds(rhat_threshold: Any, min_ess: Any, max_coordinates: Any) -> None:
    """:func:`assess`'s settings, refused by name before any work (inf thresholds stay allowed)."""
    check_int(max_coordinates, "max_coordinates", minimum=1)
    if rhat_threshold is not None:
        check_number(rhat_threshold, "rhat_threshold", minimum=1.0, finite=False)
    if min_ess is not None:
        check_number(min_ess, "min_ess", minimum=0.0, finite=False)


def assess(samples: "Samples", *, rhat_threshold: float | None = None, min_ess: float | None = None,
           max_coordinates: int = DEFAULT_MAX_COORDINATES) -> Verdict:
    """Judge finished draws: R̂, bulk and tail ESS, frozen chains, divergences, non-finite values and drift.

    The statistics a run folds in as it goes (:mod:`jaxprobe.engine.streaming`), computed at once from the
    draws of ``samples`` on the host (:func:`~jaxprobe.engine.streaming.stats_of_draws`), then judged as a
    run's verdict is: ``Samples.diagnostics()`` recomputes a verdict this way, e.g. with other thresholds.
    The draws do not hold the chains' starting points: how far they spread is taken from the run's verdict
    (``samples.verdict``; not checked without one), and the tempering path of a run started by sequential
    Monte Carlo from ``samples.evidence_path``.

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
        At most this many position coordinates enter the rank-normalized R̂, the ESS and the
        drift test: if there are more, half are the ones with the largest plain split R̂
        over all draws (computed for every coordinate) and half are evenly spaced. The log
        density is always checked as one more coordinate.

    Returns
    -------
    Verdict

    Examples
    --------
    >>> prior = jaxprobe.priors.StandardNormal()
    >>> samples = jaxprobe.sample(jax.random.key(1), prior, prior.sample(jax.random.key(0), 4, (2,)),
    ...                           num_samples=500, num_warmup=200, progress=False)
    >>> verdict = assess(samples, rhat_threshold=1.05)         # what samples.diagnostics(...) calls
    >>> verdict.converged, verdict.rhat_threshold
    (True, 1.05)
    """
    logdensity = np.asarray(samples.logdensity)
    if logdensity.ndim != 2:
        raise ValueError(f"samples.logdensity must have shape (chain, draw), got {logdensity.shape}")
    _check_thresholds(rhat_threshold, min_ess, max_coordinates)
    num_chains, num_draws = logdensity.shape
    names = CoordinateNames.of_draws(samples.positions)
    leaves = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(samples.positions)[0]:
        leaf = np.asarray(leaf)
        if leaf.shape[:2] != (num_chains, num_draws):
            raise ValueError(f"position leaf {jax.tree_util.keystr(path) or 'x'} has shape {leaf.shape}; "
                             f"expected ({num_chains}, {num_draws}, ...) like logdensity")
        leaves.append(leaf.reshape(num_chains, num_draws, -1))
    flat = np.concatenate(leaves, axis=2) if leaves else np.zeros((num_chains, num_draws, 0))
    monitor = streaming.Monitor(num_chains, names.dim, num_draws, max_coordinates=int(max_coordinates))
    start_at_target = bool(getattr(samples, "chains_start_at_target", False))
    statistics = streaming.finalize(streaming.stats_of_draws(flat, logdensity, monitor), monitor, xp=np)
    path = (getattr(samples, "evidence_path", None) or {}).get("inverse_temperature")
    return verdict_from_statistics(
        statistics, monitor, names, acceptance_rate=samples.acceptance_rate,
        num_divergent=samples.num_divergent, num_nonfinite=samples.num_nonfinite,
        thin=int(getattr(samples, "thin", 1) or 1), chains_start_at_target=start_at_target,
        rhat_threshold=rhat_threshold, min_ess=min_ess, tempering=Tempering.of_path(path),
        starts=StartsCheck.of_verdict(getattr(samples, "verdict", None)),
        num_groups=getattr(samples, "num_groups", None))


class _Mixing(NamedTuple):
    """What the rank-normalized statistics say of the chains' mixing (each ``None`` where not computed)."""

    max_rhat: float | None
    worst_rhat: str | None
    min_ess_bulk: float | None
    worst_ess: str | None
    min_ess_tail: float | None
    max_split_rhat: float | None
    max_nested_rhat: float | None
    diffusing: np.ndarray  # per checked quantity: spreads like a random walk


def verdict_from_statistics(statistics: "streaming.Statistics", monitor: "streaming.Monitor",
                            names: CoordinateNames, *, acceptance_rate: Any, num_divergent: Any, num_nonfinite: Any,
                            thin: int, chains_start_at_target: bool, rhat_threshold: float | None = None,
                            min_ess: float | None = None, tempering: Tempering | None = None,
                            start_range: Any = None, starts: StartsCheck | None = None,
                            num_groups: int | None = None) -> Verdict:
    """Phrase the device's numbers (:func:`jaxprobe.engine.streaming.finalize`, as NumPy) as a :class:`Verdict`:
    thresholds, problems with their next steps, notes. Host work on ``O(D)`` numbers only.

    ``tempering``: the path of the sequential Monte Carlo run the chains started from (None: no SMC).
    ``start_range``: the smallest and largest starting point per flat coordinate, ``(2, D)``
    (:func:`start_range`), to judge how far the starts spread (see "Starting points" in the module docs);
    ``starts``: that judgement when it was made before (:func:`assess` takes it from the run's verdict).
    With neither (or after SMC) it is not made. ``num_groups``: the independent particle groups of that SMC run
    (too few give the verdict an ``mcse_warning``).
    """
    _check_thresholds(rhat_threshold, min_ess, 1)
    num_chains, num_draws = monitor.num_chains, monitor.num_draws
    default_rhat, min_ess = default_thresholds(num_chains, None if min_ess is None else float(min_ess))
    rhat_threshold = default_rhat if rhat_threshold is None else float(rhat_threshold)
    notes: list[str] = []
    transitions = num_chains * num_draws * max(int(thin), 1)
    acceptance = np.asarray(acceptance_rate, np.float64).reshape(-1)
    divergent_per_chain = np.asarray(num_divergent).reshape(-1)
    counts = dict(num_frozen=int(np.sum(acceptance == 0.0)), num_divergent=int(np.sum(divergent_per_chain)),
                  divergent_chains=int(np.sum(divergent_per_chain > 0)),
                  num_nonfinite=int(np.sum(np.asarray(num_nonfinite))),
                  num_bad_draws=int(statistics.num_nonfinite_draws))
    nonfinite_fraction = counts["num_nonfinite"] / transitions if transitions else 0.0
    late = np.asarray(statistics.late_max_abs, np.float64)
    max_abs = float(late.max()) if late.size else 0.0
    runaway = max_abs > RUNAWAY_BOUND
    coordinates = np.asarray(statistics.coordinates)
    unique = len(set(coordinates.tolist()))
    pending_starts = None
    if starts is None and start_range is not None and not chains_start_at_target and tempering is None:
        # On another core beside the rank statistics (NumPy's sorts release the GIL): after a short run the
        # verdict's host end is its share of the run (C = 256, d = 50, 1000 draws: 12.2 -> 10.9 ms of 0.24 s).
        pending_starts = diagnostics.in_background(_starts_check, statistics, names, monitor, start_range)
    mixing = _mixing(statistics, monitor, names, chains_start_at_target, notes)
    drifting = bool(runaway or mixing.diffusing.any())
    checks_rhat = monitor.plan()[2] >= MIN_DRAWS_FOR_RHAT and not chains_start_at_target
    if pending_starts is not None:
        starts = pending_starts.result()
    if starts is None and not chains_start_at_target and tempering is None:
        notes.append("the chains' starting points are unknown: whether they spread over the target (what R-hat "
                     "needs to vouch for modes no chain visited) was not checked")
    problems = _problems(
        counts, num_chains=num_chains, nonfinite_fraction=nonfinite_fraction, runaway=runaway, max_abs=max_abs,
        runaway_name=names(int(np.argmax(late))) if runaway else "", drifting=drifting,
        drift_name=names(int(coordinates[int(np.argmax(mixing.diffusing))])) if mixing.diffusing.any() else "",
        flat=streaming._is_flat(np.asarray(statistics.logdensity_range, np.float64)), mixing=mixing,
        checks_rhat=checks_rhat, rhat_threshold=rhat_threshold, min_ess=min_ess, tempering=tempering,
        starts=starts)
    return Verdict(
        converged=not problems, problems=tuple(problems), max_rhat=mixing.max_rhat, rhat_threshold=rhat_threshold,
        min_ess_bulk=mixing.min_ess_bulk, min_ess_threshold=min_ess, num_frozen_chains=counts["num_frozen"],
        num_divergent=counts["num_divergent"], num_nonfinite=counts["num_nonfinite"], drifting=drifting,
        checks_rhat=checks_rhat, num_chains=num_chains, num_draws=num_draws,
        nonfinite_fraction=float(nonfinite_fraction), num_coordinates_checked=unique - 1,
        worst_rhat_coordinate=mixing.worst_rhat, worst_ess_coordinate=mixing.worst_ess,
        max_abs_position=float(max_abs), notes=tuple(notes), min_ess_tail=mixing.min_ess_tail,
        max_split_rhat=mixing.max_split_rhat, nested_rhat=mixing.max_nested_rhat,
        starts_overdispersed=None if starts is None else starts.overdispersed,
        start_coverage=None if starts is None else starts.coverage,
        start_coverage_threshold=None if starts is None else starts.threshold,
        worst_start_coordinate=None if starts is None else starts.coordinate,
        tempering_finished=None if tempering is None else tempering.finished,
        tempering_lambda=None if tempering is None else tempering.reached,
        num_groups=None if num_groups is None else int(num_groups), mcse_warning=groups_warning(num_groups))


def groups_warning(num_groups: int | None) -> str | None:
    """Why the Monte-Carlo standard errors of a run started by SMC with ``num_groups`` independent particle groups
    cannot be trusted, and what to do; None with at least :data:`~jaxprobe.engine.streaming.MIN_BATCHES` groups,
    or without SMC (``num_groups`` None). The coverage quoted is that of ±1.96·mcse for a t statistic with
    G − 1 degrees of freedom (the errors are the spread of G group means)."""
    if num_groups is None or int(num_groups) >= streaming.MIN_BATCHES:
        return None
    from scipy.stats import t as student_t

    groups = int(num_groups)
    where = ("every Monte-Carlo standard error of this run (its observables, expectation(), log_evidence_se) comes "
             "from the spread of its " + (f"{groups} {SMC_GROUPS}" if groups > 1 else "one SMC particle group"))
    if groups < 2:
        why = f"{where}: one group has no spread, so no error can be estimated (NaN)"
    else:
        coverage = 2.0 * float(student_t.cdf(1.959964, groups - 1)) - 1.0
        why = (f"{where}, fewer than {streaming.MIN_BATCHES}: that spread is itself too uncertain to be an error "
               f"bar (a t statistic with {groups - 1} degree{'s' * (groups > 2)} of freedom: mean ± 1.96·mcse covers "
               f"the truth in {coverage:.0%} of runs, not 95%, and a single error can be several times too small)")
    return (f"{why}: raise sampler_options['num_groups'] to at least {streaming.MIN_BATCHES} (num_chains divisible "
            "by it, at least two chains per group)")


def _starts_check(statistics: "streaming.Statistics", names: CoordinateNames, monitor: "streaming.Monitor",
                  bounds: Any) -> StartsCheck | None:
    """How far the starts spread (``bounds``: :func:`start_range`, ``(2, D)``) against the draws of the diagnostic
    subset (see "Starting points" in the module docs); None where nothing varies or no draw was kept."""
    bounds = np.asarray(bounds, np.float64).reshape(2, -1)
    varying = ~np.asarray(statistics.constant, bool)[:bounds.shape[1]]
    chains, _, num_subset = monitor.plan()
    num_values = len(chains) * num_subset
    if not varying.any() or num_values == 0:
        return None
    identical = varying & (bounds[0] == bounds[1])  # every chain starts at one value: no mass of the target
    if identical.any() or monitor.num_chains == 1:
        worst = int(np.argmax(identical))
        return StartsCheck(0.0, 1.0, names(worst), False)
    checked = [int(j) for j in dict.fromkeys(np.asarray(statistics.coordinates).tolist()) if j < bounds.shape[1]
               and varying[j]]
    if not checked:
        return None
    position = {int(j): m for m, j in enumerate(np.asarray(statistics.coordinates).tolist())}
    subset = np.asarray(statistics.subset)[:, :, [position[j] for j in checked]]
    counts = _most_in_a_window(subset.reshape(-1, len(checked)).T, bounds[1, checked] - bounds[0, checked])
    threshold = start_coverage_threshold(monitor.num_chains, len(checked), num_values)
    worst = int(np.argmin(counts))
    return StartsCheck(int(counts[worst]) / num_values, threshold, names(checked[worst]),
                       bool(counts[worst] >= round(threshold * num_values)))


def _most_in_a_window(values: np.ndarray, width: np.ndarray) -> np.ndarray:
    """Per row of ``values`` ``(M, n)``: the most of its values (non-finite ones never count) that one closed
    interval of ``width[m]`` holds (float64 arithmetic), ``(M,)`` ints."""
    finite = np.isfinite(values)
    values = np.sort(values if finite.all() else np.where(finite, values, np.nan), axis=-1).astype(np.float64)
    finite = finite.sum(axis=-1)  # the finite values come first, NaN last
    counts = np.zeros(values.shape[0], np.int64)
    for row, (sorted_values, size, span) in enumerate(zip(values, finite, np.asarray(width, np.float64))):
        if size:
            ends = np.searchsorted(sorted_values[:size], sorted_values[:size] + span, side="right")
            counts[row] = np.max(ends - np.arange(size))
    return counts


def _mixing(statistics: "streaming.Statistics", monitor: "streaming.Monitor", names: CoordinateNames,
            chains_start_at_target: bool, notes: list[str]) -> _Mixing:
    """R̂ (rank-normalized, plain split, nested), bulk and tail ESS and the drift test of the statistics, the
    worst coordinates named; what was (not) checked appended to ``notes``."""
    num_chains, num_draws = monitor.num_chains, monitor.num_draws
    coordinates = np.asarray(statistics.coordinates)
    unique = len(set(coordinates.tolist()))
    chain_indices, stride, num_subset = monitor.plan()
    if monitor.dim + 1 > unique:
        notes.append(f"rank-normalized R-hat, ESS and drift were checked on {unique - 1} of {monitor.dim} position "
                     f"coordinates (max_coordinates={monitor.max_coordinates}: those with the largest plain split "
                     "R-hat and evenly spaced ones) and the log density; plain split R-hat covers every coordinate")
    if num_subset < num_draws or len(chain_indices) < num_chains:
        notes.append(f"R-hat, ESS and drift use {len(chain_indices)} of {num_chains} chains "
                     f"(evenly spaced) and every {stride}-th draw ({num_subset} of {num_draws} per chain), at most "
                     f"{streaming.DIAGNOSTIC_VALUES} values per coordinate: the ESS counts those draws only, a "
                     "lower bound of the run's")
    ranked = streaming.rank_statistics(statistics.subset, statistics.logdensity_range, chains_start_at_target)
    max_rhat = min_ess_bulk = min_ess_tail = None
    worst_rhat = worst_ess = None
    constant = np.asarray(statistics.constant)
    informative_all = ~constant
    max_split_rhat, _ = _finite_or_none(np.where(informative_all, np.asarray(statistics.split_rhat, np.float64),
                                                 np.nan), np.argmax)
    max_nested_rhat, _ = _finite_or_none(np.where(informative_all, np.asarray(statistics.nested_rhat, np.float64),
                                                  np.nan), np.argmax)
    if num_subset >= MIN_DRAWS_FOR_RHAT:
        informative = ~constant[coordinates]
        max_rhat, worst = _finite_or_none(np.where(informative, ranked.rhat, np.nan), np.argmax)
        worst_rhat = None if worst is None else names(int(coordinates[worst]))
        min_ess_bulk, worst = _finite_or_none(np.where(informative, ranked.ess_bulk, np.nan), np.argmin)
        worst_ess = None if worst is None else names(int(coordinates[worst]))
        min_ess_tail, _ = _finite_or_none(np.where(informative, ranked.ess_tail, np.nan), np.argmin)
        if constant.any():
            constant_names = ", ".join(names(int(i)) for i in np.nonzero(constant)[0][:20])
            notes.append(f"{int(constant.sum())} coordinate(s) never changed in any draw ({constant_names[:200]}): "
                         "left out of R-hat and ESS")
        if not informative.any():
            notes.append("no coordinate varies: R-hat and ESS could not be computed")
    else:
        notes.append(f"R-hat and ESS not checked: {num_subset} draw(s) per chain, they need at least "
                     f"{MIN_DRAWS_FOR_RHAT}")
    if chains_start_at_target:
        notes.append("R-hat is not a criterion: the chains start at draws of the target (sequential Monte "
                     "Carlo), so they need not mix between modes")
    if max_nested_rhat is not None:
        superchains = streaming._superchains(len(chain_indices))
        notes.append(f"nested R-hat {max_nested_rhat:.4g} ({superchains} superchains of "
                     f"{len(chain_indices) // superchains} chains; reported, not a criterion)")
    return _Mixing(max_rhat, worst_rhat, min_ess_bulk, worst_ess, min_ess_tail, max_split_rhat, max_nested_rhat,
                   ranked.diffusing)


def _problems(counts: dict[str, int], *, num_chains: int, nonfinite_fraction: float, runaway: bool, max_abs: float,
              runaway_name: str, drifting: bool, drift_name: str, flat: bool, mixing: _Mixing, checks_rhat: bool,
              rhat_threshold: float, min_ess: float, tempering: Tempering | None = None,
              starts: StartsCheck | None = None) -> list[str]:
    """The verdict's problems, each with its cause and the next step, in the order a user should fix them."""
    problems = []
    unfinished = tempering is not None and not tempering.finished
    if unfinished:
        problems.append(_tempering_problem(tempering))
    if counts["num_bad_draws"]:
        problems.append(f"{counts['num_bad_draws']} kept draw(s) hold NaN or inf (position or log density): the "
                        "log density or the model overflows where the chains go: check it there, or bound the "
                        "inputs with a prior or Box constraints")
    if runaway:
        problems.append(f"chains drift without bound: |x| reached {max_abs:.3g} ({runaway_name}) "
                        "with no sign of a mode: the target looks improper: add a prior or Box constraints (if "
                        "values this large are legitimate, rescale the parameters to order 1)")
    elif drifting:
        problems.append(f"chains drift without settling: {drift_name} keeps spreading like a random walk"
                        + (" on a flat log density" if flat else "")
                        + ": the target looks improper: add a prior or Box constraints (if it is proper, the steps "
                        "are far too small to explore it: let warmup adapt step_size or increase num_warmup)")
    if counts["num_frozen"]:
        problems.append(f"{counts['num_frozen']} of {num_chains} chain(s) never moved (acceptance rate exactly 0): "
                        "start every chain inside the support of the target, or use a smaller step_size (or "
                        "step_size=None to adapt it during warmup)")
    if counts["num_divergent"]:
        problems.append(f"{counts['num_divergent']} divergent transition(s) in {counts['divergent_chains']} "
                        "chain(s): the step size is too large for the target's curvature and these draws are "
                        "biased: raise target_acceptance_rate (e.g. 0.9) or reparameterize the target")
    if nonfinite_fraction > MAX_NONFINITE_FRACTION:
        problems.append(f"{nonfinite_fraction:.1%} of proposals had a NaN or infinite log density (each "
                        f"rejected; more than {MAX_NONFINITE_FRACTION:.0%} means numerical trouble): check the "
                        "log density for overflow or log(0) where the chains go, or use Box constraints "
                        "instead of returning -inf outside the support")
    if checks_rhat and mixing.max_rhat is not None and not mixing.max_rhat <= rhat_threshold:
        if drifting:
            cause = "the drift above makes the chains disagree: fix that first"
        elif unfinished:
            cause = ("they continue the particles of the unfinished tempering path above, which hold the "
                     "modes in the proportions of an intermediate distribution, not the target's: finish the "
                     "path first")
        else:
            cause = ("chains stuck in different modes or not yet mixed: use sampler='smc' for multimodal "
                     "targets, or increase num_warmup and num_samples")
            if counts["num_frozen"]:
                cause = "the frozen chains above count; otherwise " + cause
        problems.append(f"max R-hat {mixing.max_rhat:.4g} > {rhat_threshold:.4g} ({mixing.worst_rhat}): the chains "
                        f"disagree about the distribution: {cause}")
    if mixing.min_ess_bulk is not None and not mixing.min_ess_bulk >= min_ess:
        problems.append(f"min bulk ESS {mixing.min_ess_bulk:.0f} < {min_ess:.0f} ({mixing.worst_ess}): too few "
                        "effective draws: increase num_samples (or the number of chains), or use a sampler that "
                        "mixes faster (nuts, chees)")
    if starts is not None and not starts.overdispersed and not drifting:
        problems.append(_starts_problem(starts, num_chains))
    return problems


def _tempering_problem(tempering: Tempering) -> str:
    """An SMC path that stopped before λ = 1, named with its λ, ``max_stages`` and the remedy."""
    return (f"sequential Monte Carlo stopped at λ = {tempering.reached:.3g} < 1 after max_stages="
            f"{tempering.num_stages} stage(s): the tempering path from the reference to the target is "
            "unfinished, so the chains start at draws of an intermediate distribution (the target tempered by "
            "λ), not of the target, and keep its proportions of the modes: raise sampler_options['max_stages'] "
            "(or lower sampler_options['target_ess'], which makes each stage's step in λ larger)")


def _starts_problem(starts: StartsCheck, num_chains: int) -> str:
    """Starting points that do not spread over the draws: what R̂ cannot see, and the remedies."""
    remedies = ("start the chains from draws of a distribution wider than the target (the prior's draws, as "
                "jaxprobe.generate and Question.initial_positions make), or use sampler='smc', whose particles "
                "find the modes and their weights")
    if num_chains == 1:
        return ("one chain cannot show that its start was overdispersed: R-hat compares only the chain's two "
                "halves, so it cannot vouch for modes the chain never visited: run several chains, " + remedies)
    if starts.threshold >= 1.0:  # every chain at one value of a coordinate: no share of the draws to quote
        return (f"the chains' starting points are not overdispersed: every chain starts at the same value of "
                f"{starts.coordinate}: R-hat compares chains that all started at one point, so it cannot vouch "
                f"for modes no chain visited: {remedies}")
    return (f"the chains' starting points are not overdispersed: in {starts.coordinate} they spread over a range "
            f"that can hold at most {starts.coverage:.1%} of the draws (at least {starts.threshold:.1%} expected: "
            f"{num_chains} starts drawn from the target itself hold less in at most 1 run of 100): R-hat compares "
            f"chains that all started in one region, so it cannot vouch for modes no chain visited: {remedies}")
