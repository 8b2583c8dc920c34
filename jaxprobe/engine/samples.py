"""``Samples``: the result of a sampling run, its diagnostics and its file format."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings
from typing import Any, Callable

import jax
import numpy as np

from jaxprobe._io import CorruptFileError, float_from_json, float_to_json, read_checked_npz, write_checked_npz
from jaxprobe.engine import diagnostics, estimates
from jaxprobe.engine.estimates import Estimate
from jaxprobe.engine.streaming import Observed
from jaxprobe.engine.verdict import Verdict, assess
from jaxprobe.types import ArrayTree

__all__ = ["Samples", "Summary"]

_FORMAT_VERSION = 3
# 1: before verdict, chains_start_at_target and the evidence fields; 2: without checksums (read unverified);
# 3: a CRC32 per array and every shape in the header (jaxprobe._io.write_checked_npz), verified on load
_READABLE_VERSIONS = (1, 2, 3)


@dataclasses.dataclass(frozen=True)
class Summary:
    """Per-coordinate posterior summary; every array has shape ``(K,)`` for K coordinates.

    ``rhat`` is BlackJAX's rank-normalized split R̂ (Vehtari et al. 2021),
    ``ess_bulk`` / ``ess_tail`` the bulk and tail effective sample sizes and
    ``mcse_mean`` the Monte-Carlo standard error of the mean, as :meth:`Samples.expectation` estimates it
    (``sd/√ESS`` with the ESS of the coordinate's own values, ArviZ's ``mcse(method="mean")``; after
    sequential Monte Carlo the spread of the independent particle groups' means). ``rhat_is_criterion``:
    False after sequential Monte Carlo (the chains start at draws of the target and need not mix between
    modes; the table marks R̂ so). ``notes``: what was checked and which errors cannot be trusted.

    Examples
    --------
    >>> summary = Summary(names=("x[0]",), mean=np.array([0.1]), sd=np.array([1.0]), mcse_mean=np.array([0.03]),
    ...                   rhat=np.array([1.002]), ess_bulk=np.array([1100.0]), ess_tail=np.array([1000.0]))
    >>> summary.to_dict()["x[0]"]["mean"]                        # what Samples.summary() returns, as a table
    0.1
    """

    names: tuple[str, ...]
    mean: np.ndarray
    sd: np.ndarray
    mcse_mean: np.ndarray
    rhat: np.ndarray
    ess_bulk: np.ndarray
    ess_tail: np.ndarray
    rhat_is_criterion: bool = True
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``{name: {mean, sd, mcse_mean, rhat, ess_bulk, ess_tail}}``."""
        fields = ("mean", "sd", "mcse_mean", "rhat", "ess_bulk", "ess_tail")
        return {
            name: {field: float(getattr(self, field)[i]) for field in fields}
            for i, name in enumerate(self.names)
        }

    def __str__(self) -> str:
        rhat = "r_hat" if self.rhat_is_criterion else "r_hat*"
        header = f"{'':>12} {'mean':>10} {'sd':>10} {'mcse':>9} {rhat:>7} {'ess_bulk':>9} {'ess_tail':>9}"
        rows = [header]
        for i, name in enumerate(self.names):
            rows.append(
                f"{name:>12} {self.mean[i]:>10.4g} {self.sd[i]:>10.4g} {self.mcse_mean[i]:>9.3g} "
                f"{self.rhat[i]:>7.3f} {self.ess_bulk[i]:>9.0f} {self.ess_tail[i]:>9.0f}"
            )
        if not self.rhat_is_criterion:
            rows.append("* R-hat is not a criterion here: the chains started at draws of the target (sequential "
                        "Monte Carlo) and need not mix between modes")
        rows += [f"note: {note}" for note in self.notes]
        return "\n".join(rows)


def _leaf_paths(tree: ArrayTree) -> list[tuple[str, Any]]:
    return [(jax.tree_util.keystr(path), leaf) for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]]


def _encode_structure(tree: Any, counter: list[int]) -> Any:
    """JSON description of a tree of dicts / lists / tuples of arrays (no pickle needed)."""
    if isinstance(tree, dict):
        if not all(isinstance(key, str) for key in tree):
            raise TypeError("Samples.save: dict keys in positions must be strings")
        return {"dict": [[key, _encode_structure(tree[key], counter)] for key in sorted(tree)]}
    if isinstance(tree, (list, tuple)) and not hasattr(tree, "_fields"):
        kind = "list" if isinstance(tree, list) else "tuple"
        return {kind: [_encode_structure(item, counter) for item in tree]}
    if isinstance(tree, (np.ndarray, jax.Array)):
        counter[0] += 1
        return {"leaf": counter[0] - 1}
    raise TypeError(
        "Samples.save supports positions made of arrays, dicts with string keys, lists and tuples; "
        f"got {type(tree).__name__}"
    )


def _decode_structure(spec: Any, leaves: list[np.ndarray]) -> Any:
    if "dict" in spec:
        return {key: _decode_structure(sub, leaves) for key, sub in spec["dict"]}
    if "list" in spec:
        return [_decode_structure(sub, leaves) for sub in spec["list"]]
    if "tuple" in spec:
        return tuple(_decode_structure(sub, leaves) for sub in spec["tuple"])
    index = spec["leaf"]
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(leaves):
        raise ValueError(f"its structure names position leaf {index!r}, and the file holds leaves 0 to {len(leaves) - 1}")
    return leaves[index]


@contextlib.contextmanager
def _verified(path: str):
    """``(header, members)`` of a samples file, verified (:func:`jaxprobe._io.read_checked_npz`; versions 1
    and 2, written before checksums, unverified); anything that fails while the body reads them, and
    :func:`_check_consistent`'s findings, become a :class:`CorruptFileError` naming the file."""
    remedy = "Nothing was loaded from it: save the samples again, or rerun what made them"
    header, members = read_checked_npz(path, remedy, legacy=lambda h: h.get("format_version") != _FORMAT_VERSION)
    if header.get("format_version") not in _READABLE_VERSIONS:
        raise ValueError(f"{path}: unsupported jaxprobe samples format {header.get('format_version')!r}")
    try:
        yield header, _Members(members)
    except CorruptFileError:
        raise
    except Exception as error:  # noqa: BLE001 - a verified file whose contents do not fit together is damaged
        raise CorruptFileError(path, f"its contents do not fit together ({type(error).__name__}: {error})",
                               remedy) from None


class _Members(dict):
    """A file's arrays by name, read like ``np.load``'s ``NpzFile`` (``.files``)."""

    @property
    def files(self) -> list[str]:
        return list(self)


def _check_consistent(samples: "Samples") -> None:
    """Every per-chain field has the same chain count C (that of ``acceptance_rate``), every position leaf and
    ``logdensity`` the same ``(C, N)``, and each position leaf is used once: a ValueError saying which not."""
    num_chains = np.shape(samples.acceptance_rate)[0] if np.ndim(samples.acceptance_rate) == 1 else None
    if num_chains is None:
        raise ValueError(f"acceptance_rate has shape {np.shape(samples.acceptance_rate)}, not (C,)")
    for name in ("step_size", "num_divergent", "num_nonfinite", "num_gradient_evaluations"):
        if np.shape(getattr(samples, name)) != (num_chains,):
            raise ValueError(f"{name} has shape {np.shape(getattr(samples, name))}, not ({num_chains},) chains")
    if (samples.positions is None) != (samples.logdensity is None):
        raise ValueError("it holds positions without log densities, or log densities without positions")
    if samples.logdensity is not None:
        if np.ndim(samples.logdensity) != 2 or np.shape(samples.logdensity)[0] != num_chains:
            raise ValueError(f"logdensity has shape {np.shape(samples.logdensity)}, not ({num_chains}, draws)")
        leaves = jax.tree_util.tree_leaves(samples.positions)
        if len({id(leaf) for leaf in leaves}) != len(leaves):
            raise ValueError("its structure uses a position leaf twice")
        for leaf in leaves:
            if np.shape(leaf)[:2] != np.shape(samples.logdensity):
                raise ValueError(f"a position leaf has shape {np.shape(leaf)}, not {np.shape(samples.logdensity)} "
                                 "(chains, draws) first, as logdensity")
    if samples.inverse_mass_matrix is not None and np.shape(samples.inverse_mass_matrix)[:1] != (num_chains,):
        raise ValueError(f"inverse_mass_matrix has shape {np.shape(samples.inverse_mass_matrix)}, not "
                         f"({num_chains}, dim)")
    if samples.group_log_evidence is not None and np.shape(samples.group_log_evidence) != (samples.num_groups,):
        raise ValueError(f"group_log_evidence has shape {np.shape(samples.group_log_evidence)}, not "
                         f"({samples.num_groups},) groups")
    for name, value in (samples.observables or {}).items():
        if np.shape(value.per_chain_mean)[:1] != (num_chains,):
            raise ValueError(f"observable {name!r} has per-chain means of shape {np.shape(value.per_chain_mean)}")
        if value.ess is not None and np.shape(value.ess) != np.shape(value.mean):
            raise ValueError(f"observable {name!r} has an ess of shape {np.shape(value.ess)}, its mean "
                             f"{np.shape(value.mean)}")


def _estimate_header(value: Observed) -> dict[str, Any]:
    """What a samples file's header holds of an estimate besides its arrays (``mean``, ``mcse``,
    ``per_chain_mean`` and, for an ``"ess"`` estimate, ``ess``): how its error was made and whether to trust it."""
    return {"num_batches": int(value.num_batches), "method": str(value.method), "note": value.note,
            "has_ess": value.ess is not None}


def _estimate_from_file(data: "_Members", prefix: str, about: Any, streamed_method: str) -> Observed:
    """An estimate read back: its arrays under ``prefix`` and the header's :func:`_estimate_header`. Files written
    before it hold the number of batches alone: their method is the one the run streamed them with,
    ``streamed_method`` (``"smc_groups"`` after SMC, else ``"batch_means"``), and their note was not kept."""
    arrays = [data[f"{prefix}.{field}"] for field in ("mean", "mcse", "per_chain_mean")]
    if not isinstance(about, dict):  # an older format-3 (or version 1/2) file: num_batches only
        return Observed(*arrays, int(about), streamed_method)
    if not isinstance(about.get("note"), (str, type(None))) or not isinstance(about.get("method"), str):
        raise ValueError(f"{prefix}: its method or note is not text")
    return Observed(*arrays, int(about["num_batches"]), about["method"],
                    data[f"{prefix}.ess"] if about.get("has_ess") else None, about.get("note"))


@dataclasses.dataclass(frozen=True, eq=False)
class Samples:
    """Draws of all chains and how the run went. NumPy arrays on the host.

    Attributes
    ----------
    positions
        Array or pytree; every leaf has axes ``(chain, draw, *event_shape)``; ``None`` when the
        run kept no draws (``keep_draws=False``).
    logdensity
        ``(chain, draw)`` log density of each kept draw (``None`` without kept draws).
    acceptance_rate
        ``(chain,)`` mean Metropolis acceptance probability over all sampling
        transitions (thinned-away ones included).
    step_size
        ``(chain,)`` step size used for sampling (identical across chains when shared).
    num_divergent, num_nonfinite
        ``(chain,)`` counts over all sampling transitions of divergent trajectories
        and of proposals whose log density was NaN or ±inf (always rejected).
    num_gradient_evaluations
        ``(chain,)`` gradient evaluations spent while sampling (0 for rwmh).
    inverse_mass_matrix
        ``(chain, dim)`` diagonal inverse mass matrix (HMC family) or ``None``.
    sampler, num_warmup, thin
        How the draws were made.
    verdict
        The :class:`~jaxprobe.engine.verdict.Verdict` computed when the run
        finished (``None`` if none was): ``samples.verdict.converged``,
        ``samples.verdict.problems`` (each with its next step),
        ``print(samples.verdict)``. :meth:`diagnostics` computes a fresh one, e.g.
        with other thresholds: ``samples.diagnostics(rhat_threshold=1.01)`` (the draws
        do not hold the chains' starting points: whether they were overdispersed,
        ``verdict.starts_overdispersed``, is carried over from this verdict).
    chains_start_at_target
        True when every chain started at a draw of the target (sequential Monte
        Carlo): the chains need not mix between modes, so R̂ is no criterion of
        the verdict.
    log_evidence, log_evidence_se
        ``log Z`` of the target and its standard error, where the sampler
        estimates it (sequential Monte Carlo), else ``None``.
    evidence_path
        ``{"temperature", "log_evidence", "log_evidence_se"}``, each ``(K,)``:
        ``log Z`` along the tempering path, or ``None``.
    observables
        ``{name: Observed}`` for the ``observables=`` of the run: ``.mean``, ``.mcse`` (the
        Monte-Carlo standard error: batch means over chains and draws, or after SMC the spread of the
        ``num_groups`` groups' means), ``.note`` (None, or why the error cannot be trusted) and
        ``.per_chain_mean`` ``(C, ...)``, accumulated on the device as the run went; or ``None``.
        :meth:`expectation` gives the same kind of estimate for any function of the kept draws.
    particle_observables
        For chains started by sequential Monte Carlo (``sampler="smc"``): the same observables over the
        SMC run's final particles (before the chains move on): ``.mean``, ``.mcse`` from the independent
        particle groups (``.num_batches`` of them) and ``.per_chain_mean``, each particle's value; else
        ``None``.
    num_groups
        For chains started by sequential Monte Carlo (``sampler="smc"``): G, the independent particle groups of
        the SMC run (chain i started at particle i, groups of N/G consecutive chains), which the Monte-Carlo
        standard errors of :meth:`expectation` and the observables come from; else ``None``.
    group_log_evidence
        ``(num_groups,)`` each SMC group's evidence estimate ``log Ẑ_g``: every estimate weights the groups'
        means by ``Ẑ_g / Σ Ẑ`` (:func:`jaxprobe.engine.estimates.group_weights`; equally weighted groups are
        biased by order 1/(particles per group)); ``None`` without SMC (and in files written before it was kept:
        their estimates weight the groups equally).
    numerics
        The numerics policy of the run, ``"reproducible"`` or ``"fast"``
        (:mod:`jaxprobe.engine.numerics`), or ``None`` where none applies
        (a whole-run sampler) or the file predates the field.

    Notes
    -----
    :meth:`save` / :meth:`load` keep every field (format version 3: a CRC32 of
    every array and every shape in one header, verified on load; a damaged file
    raises :class:`jaxprobe.CorruptFileError`), the observables' ``method``, ``ess``
    and ``note`` included (format-3 files written before those were kept load with
    the method the run streamed them with, ``ess=None`` and ``note=None``). Files of versions 1 and 2
    (before checksums) still load, unverified beyond their shapes and chain counts, with
    the defaults of the newer fields.

    Examples
    --------
    >>> prior = jaxprobe.priors.StandardNormal()
    >>> samples = jaxprobe.sample(jax.random.key(1), prior, prior.sample(jax.random.key(0), 4, (2,)),
    ...                           num_samples=500, num_warmup=200, progress=False)
    >>> samples.positions.shape, samples.logdensity.shape, samples.acceptance_rate.shape
    ((4, 500, 2), (4, 500), (4,))
    >>> samples.sampler, samples.num_chains, samples.num_draws
    ('mala', 4, 500)
    >>> print(samples.verdict)                                # doctest: +ELLIPSIS
    Verdict: converged: 4 chains x 500 draws; max R-hat ...
    """

    positions: ArrayTree
    logdensity: np.ndarray
    acceptance_rate: np.ndarray
    step_size: np.ndarray
    num_divergent: np.ndarray
    num_nonfinite: np.ndarray
    num_gradient_evaluations: np.ndarray
    sampler: str
    num_warmup: int
    thin: int
    inverse_mass_matrix: np.ndarray | None = None
    verdict: Verdict | None = None
    chains_start_at_target: bool = False
    log_evidence: float | None = None
    log_evidence_se: float | None = None
    evidence_path: dict[str, np.ndarray] | None = None
    numerics: str | None = None
    observables: dict[str, Observed] | None = None
    particle_observables: dict[str, Observed] | None = None
    num_groups: int | None = None
    group_log_evidence: np.ndarray | None = None

    @property
    def num_chains(self) -> int:
        return int(np.shape(self.acceptance_rate)[0])

    @property
    def num_draws(self) -> int:
        """Kept draws per chain (also without kept draws: the run's, from its verdict)."""
        if self.logdensity is None:
            return int(self.verdict.num_draws) if self.verdict is not None else 0
        return int(self.logdensity.shape[1])

    def _draws(self, what: str) -> None:
        """Refuse ``what`` by name when the run kept no draws (``keep_draws=False``)."""
        if self.positions is None:
            raise ValueError(f"{what} needs the draws, and this run kept none (keep_draws=False): its verdict and "
                             "observables are in samples.verdict and samples.observables; sample again with "
                             "keep_draws=True for the draws")

    def flat_positions(self) -> tuple[np.ndarray, tuple[str, ...]]:
        """All coordinates as one ``(chain, draw, K)`` array and their names, e.g. ``x[3]``.

        Examples
        --------
        >>> prior = jaxprobe.priors.StandardNormal()
        >>> samples = jaxprobe.sample(jax.random.key(1), prior, prior.sample(jax.random.key(0), 4, (2,)),
        ...                           num_samples=500, num_warmup=200, progress=False)
        >>> flat, names = samples.flat_positions()
        >>> flat.shape, names
        ((4, 500, 2), ('x[0]', 'x[1]'))
        """
        self._draws("flat_positions")
        columns, names = [], []
        leaves = _leaf_paths(self.positions)
        for path, leaf in leaves:
            leaf = np.asarray(leaf)
            event_shape = leaf.shape[2:]
            base = path if path else "x"
            columns.append(leaf.reshape(leaf.shape[0], leaf.shape[1], -1))
            for index in np.ndindex(*event_shape) if event_shape else [()]:
                names.append(f"{base}[{','.join(map(str, index))}]" if index else base)
        return np.concatenate(columns, axis=-1), tuple(names)

    def summary(self, max_coordinates: int | None = None) -> Summary:
        """Mean, sd, MCSE, rank-normalized split R̂ (the larger of bulk and folded), bulk and tail ESS per
        coordinate (:func:`jaxprobe.engine.diagnostics.rank_diagnostics`, ArviZ's and BlackJAX's estimators; the
        MCSE as :meth:`expectation` estimates it).

        ``max_coordinates`` limits the work for very high-dimensional positions
        (images): only the first K coordinates are summarized. After sequential Monte Carlo R̂ is marked as no
        criterion and the notes say what was checked (:meth:`smc_checks`); coordinates whose MCSE cannot be
        trusted are named in the notes.

        Examples
        --------
        >>> prior = jaxprobe.priors.StandardNormal()
        >>> samples = jaxprobe.sample(jax.random.key(1), prior, prior.sample(jax.random.key(0), 4, (2,)),
        ...                           num_samples=500, num_warmup=200, progress=False)
        >>> summary = samples.summary()
        >>> summary.names
        ('x[0]', 'x[1]')
        >>> bool(all(abs(summary.mean) < 0.3) and all(abs(summary.sd - 1.0) < 0.2) and all(summary.rhat < 1.01))
        True
        >>> print(summary)                                        # doctest: +ELLIPSIS
                           mean         sd      mcse   r_hat  ess_bulk  ess_tail
                x[0] ...
                x[1] ...
        """
        flat, names = self.flat_positions()
        if max_coordinates is not None:
            flat, names = flat[..., :max_coordinates], names[:max_coordinates]
        if self.num_draws < 4:
            raise ValueError(f"summary needs at least 4 draws per chain, got {self.num_draws}")
        # The verdict's own rank-normalized statistics, in NumPy: nothing to compile (BlackJAX's, run eagerly per
        # coordinate, compiled ~175 one-operation programs: 13 s on a first summary()).
        ranks = diagnostics.rank_diagnostics(flat[None])
        sd = flat.reshape(-1, flat.shape[-1]).std(axis=0, ddof=1)
        finite = np.all(np.isfinite(flat), axis=(0, 1))
        mcse = np.full(flat.shape[-1], np.nan)
        notes = [] if self.smc_checks() is None else [self.smc_checks()]
        if finite.any():
            result = estimates.estimate(flat[..., finite], num_groups=self.num_groups,
                                        group_log_evidence=self.group_log_evidence)
            mcse[finite] = result.mcse
            if result.note is not None:
                notes.append(f"mcse: {result.note}")
        if not finite.all():
            notes.append(f"{int((~finite).sum())} coordinate(s) hold NaN or inf: no mcse")
        return Summary(
            names=names,
            mean=flat.mean(axis=(0, 1)),
            sd=sd,
            mcse_mean=mcse,
            rhat=ranks.rhat[0],
            ess_bulk=ranks.ess_bulk[0],
            ess_tail=ranks.ess_tail[0],
            rhat_is_criterion=not self.chains_start_at_target,
            notes=tuple(notes),
        )

    def smc_checks(self) -> str | None:
        """For chains started by sequential Monte Carlo: what its verdict checked instead of R̂ (the tempering's
        stages and the λ it reached, the chains' ESS, the independent groups behind the error bars); else None."""
        if not self.chains_start_at_target and self.num_groups is None:  # no SMC start
            return None
        parts = []
        path = (self.evidence_path or {}).get("inverse_temperature")
        if path is not None and len(path):
            parts.append(f"tempering reached λ = {float(path[-1]):.3g} in {len(path)} stages")
        if self.verdict is not None and self.verdict.min_ess_bulk is not None:
            parts.append(f"min bulk ESS {self.verdict.min_ess_bulk:.0f} (the sum of the chains' own)")
        if self.num_groups is not None:
            parts.append(f"Monte-Carlo errors from {self.num_groups} independent particle groups")
        return ("after sequential Monte Carlo R-hat is not a criterion (the chains start at draws of the target "
                "and need not mix between modes); checked: " + "; ".join(parts or ["the verdict's problems"]))

    def expectation(self, fn: Callable[[Any], Any], *, method: str = "auto") -> Estimate:
        """The expectation of ``fn`` over the kept draws, with its Monte-Carlo standard error.

        Parameters
        ----------
        fn
            A JAX function of ONE position (a pytree like ``positions`` without the chain and draw axes; for
            ``generate`` / ``reconstruct`` / ``latent`` results, one x in data space, as stored) → a number or
            a numeric array of fixed shape. Checked on one position first (a clear error naming ``fn`` if it
            raises, returns something non-numeric or non-finite, or depends on how many positions it is
            given), then mapped with ``jax.vmap`` over all draws in chunks of
            :data:`jaxprobe.engine.estimates.CHUNK_DRAWS` (bounded memory).
        method
            How the MCSE is estimated (:mod:`jaxprobe.engine.estimates`): ``"auto"`` (default) is ``"ess"``,
            ``sd/√ESS`` with the ESS of ``fn``'s own values (Geyer's initial monotone sequence on the split
            chains, no rank normalization), for independent MCMC chains; and ``"smc_groups"`` for chains
            started by sequential Monte Carlo (``sampler="smc"``): chain i started at particle i and the
            particles form ``num_groups`` independent groups of consecutive particles, so the estimate is the
            groups' means weighted by their evidence estimates (``group_log_evidence``) and the error comes
            from their spread (chains of one group share ancestors and modes, and are not independent). ``"batch_means"``: 16 batches over the chains, as the streamed observables.

        Returns
        -------
        Estimate
            (:class:`jaxprobe.engine.streaming.Observed`) ``.mean`` and ``.mcse`` of ``fn``'s output shape,
            ``.per_chain_mean`` ``(C, ...)``, ``.method``, ``.ess``, ``.num_batches`` and ``.note``: None, or
            why the error cannot be trusted (fewer than 8 groups or batches, an ESS below 100, a value that
            never changed), in which case an :class:`jaxprobe.engine.estimates.MCSEWarning` is issued too.

        Raises
        ------
        ValueError
            If the run kept no draws (``keep_draws=False``: pass ``observables={"name": fn}`` to
            ``sample`` / ``generate`` instead, which averages ``fn`` as the run goes), or ``fn`` fails as above.

        Examples
        --------
        >>> prior = jaxprobe.priors.StandardNormal()
        >>> samples = jaxprobe.sample(jax.random.key(1), prior, prior.sample(jax.random.key(0), 4, (2,)),
        ...                           num_samples=500, num_warmup=200, progress=False)
        >>> estimate = samples.expectation(lambda x: x[0] > 0.0)  # P(x₀ > 0) = 0.5
        >>> bool(abs(estimate.mean - 0.5) < 5 * estimate.mcse), estimate.note is None
        (True, True)
        >>> print(estimate)                                       # doctest: +ELLIPSIS
        0... ± 0.0...
        """
        if self.positions is None:
            raise ValueError("expectation(fn) needs the draws, and this run kept none (keep_draws=False): pass "
                             "observables={\"name\": fn} to the run instead (samples.observables[\"name\"] then has "
                             ".mean and .mcse), or sample again with keep_draws=True")
        if method not in estimates.METHODS:
            raise ValueError(f"method must be one of {estimates.METHODS}, got {method!r}")
        if method == "smc_groups" and self.num_groups is None:
            raise ValueError("method='smc_groups' needs chains started by sequential Monte Carlo (sampler='smc'); "
                             "these samples have no particle groups (num_groups is None)")
        values = estimates.evaluate(fn, self.positions, name="fn")
        groups = self.num_groups if method in ("auto", "smc_groups") else None
        result = estimates.estimate(values, num_groups=groups, method=method,
                                    group_log_evidence=self.group_log_evidence)
        if result.note is not None:
            warnings.warn(f"expectation(fn): {result.note}", estimates.MCSEWarning, stacklevel=2)
        return result

    def diagnostics(self, **options: Any) -> Verdict:
        """A fresh :class:`~jaxprobe.engine.verdict.Verdict` of these draws: :func:`~jaxprobe.engine.verdict.assess`
        with ``options`` (``rhat_threshold``, ``min_ess``, ``max_coordinates``). ``samples.verdict`` holds the
        one computed when the run finished.

        Examples
        --------
        >>> prior = jaxprobe.priors.StandardNormal()
        >>> samples = jaxprobe.sample(jax.random.key(1), prior, prior.sample(jax.random.key(0), 4, (2,)),
        ...                           num_samples=500, num_warmup=200, progress=False)
        >>> samples.diagnostics(rhat_threshold=1.0001).converged  # a stricter R̂ threshold than the default 1.01
        False
        >>> samples.diagnostics().converged
        True
        """
        self._draws("diagnostics()")
        return assess(self, **options)

    def to_numpy(self) -> dict[str, Any]:
        """All fields as a dict of NumPy arrays (``positions`` keeps its pytree structure).

        Examples
        --------
        >>> prior = jaxprobe.priors.StandardNormal()
        >>> samples = jaxprobe.sample(jax.random.key(1), prior, prior.sample(jax.random.key(0), 4, (2,)),
        ...                           num_samples=500, num_warmup=200, progress=False)
        >>> arrays = samples.to_numpy()
        >>> arrays["positions"].shape, arrays["sampler"]
        ((4, 500, 2), 'mala')
        """
        out = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        out["positions"] = jax.tree.map(np.asarray, self.positions)
        return out

    def save(self, path: str | os.PathLike) -> None:
        """Write to a ``.npz`` file, atomically (a temporary file renamed into place).

        The format holds arrays and a JSON header only (no pickle), and
        :meth:`load` restores every field exactly.

        Examples
        --------
        >>> prior = jaxprobe.priors.StandardNormal()
        >>> samples = jaxprobe.sample(jax.random.key(1), prior, prior.sample(jax.random.key(0), 4, (2,)),
        ...                           num_samples=500, num_warmup=200, progress=False)
        >>> samples.save("draws.npz")
        >>> loaded = jaxprobe.Samples.load("draws.npz")
        >>> bool(np.array_equal(loaded.positions, samples.positions)), loaded.verdict.converged
        (True, True)
        """
        path = os.fspath(path)
        leaves = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(self.positions)]
        structure = None if self.positions is None else _encode_structure(self.positions, [0])
        header = {
            "format_version": _FORMAT_VERSION,
            "structure": structure,
            "sampler": self.sampler,
            "num_warmup": int(self.num_warmup),
            "thin": int(self.thin),
            "has_inverse_mass_matrix": self.inverse_mass_matrix is not None,
            "verdict": None if self.verdict is None else self.verdict.to_dict(),
            "chains_start_at_target": bool(self.chains_start_at_target),
            "log_evidence": float_to_json(self.log_evidence),
            "log_evidence_se": float_to_json(self.log_evidence_se),
            "evidence_path": None if self.evidence_path is None else list(self.evidence_path),
            "numerics": self.numerics,
            "num_groups": None if self.num_groups is None else int(self.num_groups),
            "has_group_log_evidence": self.group_log_evidence is not None,
            "observables": {name: _estimate_header(value) for name, value in (self.observables or {}).items()},
            "particle_observables": {name: _estimate_header(value)
                                     for name, value in (self.particle_observables or {}).items()},
        }
        arrays = {f"position_{i}": leaf for i, leaf in enumerate(leaves)}
        for name in ("logdensity", "acceptance_rate", "step_size", "num_divergent", "num_nonfinite",
                     "num_gradient_evaluations"):
            if getattr(self, name) is not None:
                arrays[name] = np.asarray(getattr(self, name))
        for prefix, observed in (("observable", self.observables), ("particle_observable",
                                                                     self.particle_observables)):
            for i, value in enumerate((observed or {}).values()):
                for field in ("mean", "mcse", "per_chain_mean") + ("ess",) * (value.ess is not None):
                    arrays[f"{prefix}_{i}.{field}"] = np.asarray(getattr(value, field))
        if self.inverse_mass_matrix is not None:
            arrays["inverse_mass_matrix"] = np.asarray(self.inverse_mass_matrix)
        if self.group_log_evidence is not None:
            arrays["group_log_evidence"] = np.asarray(self.group_log_evidence, np.float64)
        for i, key in enumerate(self.evidence_path or {}):
            if not isinstance(key, str):
                raise TypeError(f"Samples.save: evidence_path keys must be strings, got {key!r}")
            arrays[f"evidence_path_{i}"] = np.asarray(self.evidence_path[key])
        write_checked_npz(path, arrays, header)  # atomic; a CRC32 per array, the shapes in the header

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Samples":
        """Read a file written by :meth:`save` (``allow_pickle=False``: data, never code), verified: every
        array's CRC32 and shape against the header, the header's own CRC32, the structure's leaf indices, and one
        chain count (and draw count) across the fields. A file that does not verify raises
        :class:`jaxprobe.CorruptFileError` (a ``ValueError``) naming it; nothing is returned from it. Files of
        format versions 1 and 2 carry no checksums: they load unverified beyond the shapes and counts.

        Examples
        --------
        >>> prior = jaxprobe.priors.StandardNormal()
        >>> samples = jaxprobe.sample(jax.random.key(1), prior, prior.sample(jax.random.key(0), 4, (2,)),
        ...                           num_samples=500, num_warmup=200, progress=False)
        >>> samples.save("draws.npz")
        >>> loaded = jaxprobe.Samples.load("draws.npz")
        >>> loaded.positions.shape, loaded.sampler
        ((4, 500, 2), 'mala')
        """
        path = os.fspath(path)
        with _verified(path) as (header, data):
            if header.get("format_version") not in _READABLE_VERSIONS:
                raise ValueError(f"{path}: unsupported jaxprobe samples format {header.get('format_version')!r}")
            count = sum(1 for key in data.files if key.startswith("position_"))
            leaves = [data[f"position_{i}"] for i in range(count)]
            path_keys = header.get("evidence_path")
            verdict = header.get("verdict")
            observables, particle_observables = (
                {name: _estimate_from_file(data, f"{prefix}_{i}", about, method)
                 for i, (name, about) in enumerate(header.get(key, {}).items())} or None
                for prefix, key, method in (
                    ("observable", "observables", "batch_means" if header.get("num_groups") is None else "smc_groups"),
                    ("particle_observable", "particle_observables", "smc_groups")))
            samples = cls(
                positions=None if header["structure"] is None else _decode_structure(header["structure"], leaves),
                logdensity=data["logdensity"] if "logdensity" in data.files else None,
                acceptance_rate=data["acceptance_rate"],
                step_size=data["step_size"],
                num_divergent=data["num_divergent"],
                num_nonfinite=data["num_nonfinite"],
                num_gradient_evaluations=data["num_gradient_evaluations"],
                sampler=header["sampler"],
                num_warmup=header["num_warmup"],
                thin=header["thin"],
                inverse_mass_matrix=data["inverse_mass_matrix"] if header["has_inverse_mass_matrix"] else None,
                verdict=None if verdict is None else Verdict.from_dict(verdict),
                chains_start_at_target=bool(header.get("chains_start_at_target", False)),
                log_evidence=float_from_json(header.get("log_evidence")),
                log_evidence_se=float_from_json(header.get("log_evidence_se")),
                evidence_path=None if path_keys is None else {
                    key: data[f"evidence_path_{i}"] for i, key in enumerate(path_keys)},
                numerics=header.get("numerics"),
                num_groups=header.get("num_groups"),
                group_log_evidence=data["group_log_evidence"] if header.get("has_group_log_evidence") else None,
                observables=observables,
                particle_observables=particle_observables,
            )
            _check_consistent(samples)
        return samples

    def to_arviz(self):
        """The draws for ArviZ (needs the optional ``arviz`` package, 0.x or 1.x).

        Returns
        -------
        arviz.InferenceData (ArviZ 0.x) or xarray.DataTree (ArviZ 1.x)
            Group ``posterior``: one variable per leaf of the positions, shape ``(chains, draws, ...)`` with dims
            ``chain`` and ``draw`` (a bare array is ``x``; a pytree leaf is named by its path, e.g.
            ``bias.0``); group ``sample_stats``: ``lp``, the log density ``(chains, draws)``.
        """
        import inspect

        self._draws("to_arviz")
        try:
            import arviz
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise ImportError("to_arviz needs arviz: pip install 'jaxprobe[notebooks]' or pip install arviz") from error
        posterior = {}
        for path, leaf in jax.tree_util.tree_flatten_with_path(self.positions)[0]:
            name = ".".join(str(getattr(entry, "key", getattr(entry, "idx", getattr(entry, "name", entry))))
                            for entry in path) or "x"
            posterior[name] = np.asarray(leaf)
        groups = {"posterior": posterior, "sample_stats": {"lp": np.asarray(self.logdensity)}}
        # ArviZ 1.x takes one dict of groups (from_dict(data)) and returns a DataTree; 0.x takes each group as a keyword
        if "posterior" in inspect.signature(arviz.from_dict).parameters:
            return arviz.from_dict(**groups)
        return arviz.from_dict(groups)
