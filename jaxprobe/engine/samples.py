"""``Samples``: the result of a sampling run, its diagnostics and its file format."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from blackjax import diagnostics as blackjax_diagnostics

from jaxprobe._io import atomic_write, float_from_json, float_to_json
from jaxprobe.engine.streaming import Observed
from jaxprobe.engine.verdict import Verdict, assess
from jaxprobe.types import ArrayTree

__all__ = ["Samples", "Summary"]

_FORMAT_VERSION = 2
_READABLE_VERSIONS = (1, 2)  # 1: before verdict, chains_start_at_target and the evidence fields


@dataclasses.dataclass(frozen=True)
class Summary:
    """Per-coordinate posterior summary; every array has shape ``(K,)`` for K coordinates.

    ``rhat`` is BlackJAX's rank-normalized split R̂ (Vehtari et al. 2021),
    ``ess_bulk`` / ``ess_tail`` the bulk and tail effective sample sizes and
    ``mcse_mean = sd / √ess_bulk`` the Monte-Carlo standard error of the mean.
    """

    names: tuple[str, ...]
    mean: np.ndarray
    sd: np.ndarray
    mcse_mean: np.ndarray
    rhat: np.ndarray
    ess_bulk: np.ndarray
    ess_tail: np.ndarray

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``{name: {mean, sd, mcse_mean, rhat, ess_bulk, ess_tail}}``."""
        fields = ("mean", "sd", "mcse_mean", "rhat", "ess_bulk", "ess_tail")
        return {
            name: {field: float(getattr(self, field)[i]) for field in fields}
            for i, name in enumerate(self.names)
        }

    def __str__(self) -> str:
        header = f"{'':>12} {'mean':>10} {'sd':>10} {'mcse':>9} {'r_hat':>7} {'ess_bulk':>9} {'ess_tail':>9}"
        rows = [header]
        for i, name in enumerate(self.names):
            rows.append(
                f"{name:>12} {self.mean[i]:>10.4g} {self.sd[i]:>10.4g} {self.mcse_mean[i]:>9.3g} "
                f"{self.rhat[i]:>7.3f} {self.ess_bulk[i]:>9.0f} {self.ess_tail[i]:>9.0f}"
            )
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
    return leaves[spec["leaf"]]


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
        with other thresholds: ``samples.diagnostics(rhat_threshold=1.01)``.
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
        Monte-Carlo standard error, batch means over chains and draws) and
        ``.per_chain_mean`` ``(C, ...)``, accumulated on the device as the run went; or ``None``.
    particle_observables
        For chains started by sequential Monte Carlo (``sampler="smc"``): the same observables over the
        SMC run's final particles (before the chains move on): ``.mean``, ``.mcse`` from the independent
        particle groups (``.num_batches`` of them) and ``.per_chain_mean``, each particle's value; else
        ``None``.
    numerics
        The numerics policy of the run, ``"reproducible"`` or ``"fast"``
        (:mod:`jaxprobe.engine.numerics`), or ``None`` where none applies
        (a whole-run sampler) or the file predates the field.

    :meth:`save` / :meth:`load` keep every field (format version 2; files of
    version 1, and version-2 files written before ``numerics`` existed, still
    load, with the defaults of the newer fields).
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
        """All coordinates as one ``(chain, draw, K)`` array and their names, e.g. ``x[3]``."""
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
        """Mean, sd, MCSE, split R̂, bulk and tail ESS per coordinate (BlackJAX's diagnostics).

        ``max_coordinates`` limits the work for very high-dimensional positions
        (images): only the first K coordinates are summarized.
        """
        flat, names = self.flat_positions()
        if max_coordinates is not None:
            flat, names = flat[..., :max_coordinates], names[:max_coordinates]
        if self.num_draws < 4:
            raise ValueError(f"summary needs at least 4 draws per chain, got {self.num_draws}")
        x = jnp.asarray(flat, jnp.float64 if flat.dtype == np.float64 else jnp.float32)
        per_coordinate = lambda fn: np.asarray(jax.vmap(fn, in_axes=2)(x))
        mean = flat.mean(axis=(0, 1))
        sd = flat.reshape(-1, flat.shape[-1]).std(axis=0, ddof=1)
        ess_bulk = per_coordinate(blackjax_diagnostics.ess_bulk)
        return Summary(
            names=names,
            mean=mean,
            sd=sd,
            mcse_mean=sd / np.sqrt(ess_bulk),
            rhat=per_coordinate(blackjax_diagnostics.rhat),
            ess_bulk=ess_bulk,
            ess_tail=per_coordinate(blackjax_diagnostics.ess_tail),
        )

    def diagnostics(self, **options: Any) -> Verdict:
        """A fresh :class:`~jaxprobe.engine.verdict.Verdict` of these draws: :func:`~jaxprobe.engine.verdict.assess`
        with ``options`` (``rhat_threshold``, ``min_ess``, ``max_coordinates``). ``samples.verdict`` holds the
        one computed when the run finished."""
        self._draws("diagnostics()")
        return assess(self, **options)

    def to_numpy(self) -> dict[str, Any]:
        """All fields as a dict of NumPy arrays (``positions`` keeps its pytree structure)."""
        out = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        out["positions"] = jax.tree.map(np.asarray, self.positions)
        return out

    def save(self, path: str | os.PathLike) -> None:
        """Write to a ``.npz`` file, atomically (a temporary file renamed into place).

        The format holds arrays and a JSON header only (no pickle), and
        :meth:`load` restores every field exactly.
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
            "observables": {name: int(value.num_batches) for name, value in (self.observables or {}).items()},
            "particle_observables": {name: int(value.num_batches)
                                     for name, value in (self.particle_observables or {}).items()},
        }
        arrays = {f"position_{i}": leaf for i, leaf in enumerate(leaves)}
        for name in ("logdensity", "acceptance_rate", "step_size", "num_divergent", "num_nonfinite",
                     "num_gradient_evaluations"):
            if getattr(self, name) is not None:
                arrays[name] = np.asarray(getattr(self, name))
        for prefix, estimates in (("observable", self.observables), ("particle_observable",
                                                                      self.particle_observables)):
            for i, value in enumerate((estimates or {}).values()):
                for field in ("mean", "mcse", "per_chain_mean"):
                    arrays[f"{prefix}_{i}.{field}"] = np.asarray(getattr(value, field))
        if self.inverse_mass_matrix is not None:
            arrays["inverse_mass_matrix"] = np.asarray(self.inverse_mass_matrix)
        for i, key in enumerate(self.evidence_path or {}):
            if not isinstance(key, str):
                raise TypeError(f"Samples.save: evidence_path keys must be strings, got {key!r}")
            arrays[f"evidence_path_{i}"] = np.asarray(self.evidence_path[key])
        arrays["header"] = np.asarray(json.dumps(header))
        atomic_write(path, lambda stream: np.savez(stream, **arrays))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Samples":
        """Read a file written by :meth:`save`, format version 2 or 1 (``allow_pickle=False``: data, never code)."""
        with np.load(os.fspath(path), allow_pickle=False) as data:
            header = json.loads(str(data["header"]))
            if header.get("format_version") not in _READABLE_VERSIONS:
                raise ValueError(f"{path}: unsupported jaxprobe samples format {header.get('format_version')!r}")
            count = sum(1 for key in data.files if key.startswith("position_"))
            leaves = [data[f"position_{i}"] for i in range(count)]
            path_keys = header.get("evidence_path")
            verdict = header.get("verdict")
            observables, particle_observables = (
                {name: Observed(*(data[f"{prefix}_{i}.{field}"] for field in ("mean", "mcse", "per_chain_mean")),
                                num_batches)
                 for i, (name, num_batches) in enumerate(header.get(key, {}).items())} or None
                for prefix, key in (("observable", "observables"), ("particle_observable", "particle_observables")))
            return cls(
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
                observables=observables,
                particle_observables=particle_observables,
            )

    def to_arviz(self):
        """An ``arviz.InferenceData`` (needs the optional ``arviz`` package)."""
        self._draws("to_arviz")
        try:
            import arviz
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise ImportError("to_arviz needs arviz: pip install 'jaxprobe[notebooks]' or pip install arviz") from error
        posterior = {}
        for path, leaf in _leaf_paths(self.positions):
            name = path.strip("[]'\"").replace("']['", ".").replace("][", ".") or "x"
            posterior[name] = np.asarray(leaf)
        sample_stats = {"lp": np.asarray(self.logdensity)}
        return arviz.from_dict(posterior=posterior, sample_stats=sample_stats)
