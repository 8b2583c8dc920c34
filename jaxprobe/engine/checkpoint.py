"""Checkpoints of :func:`jaxprobe.sample`: files that prove themselves, and a resume from the last verified chunk.

``sample(..., checkpoint="run.npz")`` writes

* ``run.npz``, the **state file** (:func:`jaxprobe._io.write_checked_npz`: one header with every array's shape,
  dtype and CRC32, and a CRC32 of the header): the run's identity and the table of saved chunks of draws, for
  each the row where it ends and the CRC32 of its rows in each draws file. Replaced atomically after every chunk.
* ``run.npz.draws/position.npy`` ``(N, C, D)`` and ``logdensity.npy`` ``(N, C)``: the kept draws, each chunk's
  rows written into them (at the rows' offsets, checksummed in the same pass) by the checkpoint's
  thread while the next chunk samples. Their whole size is reserved before anything compiles
  (``os.posix_fallocate``; else a ``shutil.disk_usage`` check): a full disk is an ``OSError`` naming the folder,
  the bytes needed and the bytes free, before anything is computed.
* ``run.npz.draws/state.<n>.npz``: the engine state, the run's statistics and the verdict's and observables'
  statistics folded in on the device, after the first ``n`` draws of each chain: one checked file per chunk
  boundary (``n = 0``: after the warmup), written once. Each is ``O(C·D)`` (plus the observables' batch sums),
  far smaller than a chunk of draws; keeping one per boundary is what lets a resume rewind to any verified chunk
  (replaying from the warmup instead would lose every chunk before the damage). Without kept draws
  (``keep_draws=False``) there is no chunk of draws to rewind past, and the states are the whole checkpoint (at
  2^20 chains × d = 30, over 250 MB each): only the last two boundaries are kept, the earlier one for a damaged
  last.

**Resume.** The state file is verified first, before anything compiles: a damaged one is refused with
:class:`~jaxprobe._io.CorruptFileError` (a ``ValueError``) naming it and what to do. Then the draws are verified
chunk by chunk against the table; at the first chunk that does not verify (or whose boundary state does not),
the run rewinds to the last verified boundary and redoes the draws after it, with a
:class:`~jaxprobe._io.CorruptFileWarning` naming the file and the draws redone. A damaged ``.npy`` header is
rewritten from the run's known shapes, a truncated file extended (its missing rows fail their checksums). The
answer equals the undamaged run's bit for bit: each draw's random numbers depend on its index, not on the chunks.
CRC32, not a cryptographic hash: see :mod:`jaxprobe._io`.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
import warnings
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe._inputs import check_number
from jaxprobe._io import (CorruptFileError, CorruptFileWarning, c_order_bytes, crc32, free_bytes, is_writer,
                          no_space_error, npy_header, read_checked_npz, write_checked_npz)
from jaxprobe.engine import core
from jaxprobe.engine.compiled import values_at
from jaxprobe.engine.host import to_device, to_host
from jaxprobe.types import PRNGKey

# The rest (HostDraws, CheckpointWriter, Checkpoint, prepare, resume, discard_unsaved, run_identity,
# remove_stale_partials) is the run driver's plumbing (engine/api.py): importable, not public API.
__all__ = ["CheckpointMismatchError", "CheckpointIfLong", "draws_folder", "STAT_FIELDS"]

STAT_FIELDS = ("acceptance_rate_sum", "num_divergent", "num_nonfinite", "num_gradient_evaluations")
# 2: the identity includes the target, initial positions and inverse mass matrix; 3: .npy draws files per chunk;
# 4: two mapped draws files filled in place; 5: the verdict's and observables' statistics folded in on the device;
# 6: checked files: CRC32 per chunk of draws, one state file per chunk boundary, draws reserved before the run
CHECKPOINT_VERSION = 6
_DRAWS_FILES = ("position", "logdensity")
_KIND, _BOUNDARY_KIND = "jaxprobe checkpoint", "jaxprobe checkpoint boundary"


class CheckpointMismatchError(ValueError):
    """``sample(checkpoint=path)`` found a checkpoint of another run at ``path``: resuming it would mix two
    runs' draws. ``differing`` names what differs (``"target"``, ``"initial_positions"``, ``"key"``, a setting).

    Examples
    --------
    >>> prior = jaxprobe.priors.StandardNormal()
    >>> init = prior.sample(jax.random.key(0), 4, (2,))
    >>> kwargs = dict(num_samples=500, num_warmup=200, progress=False, checkpoint="run.npz")
    >>> _ = jaxprobe.sample(jax.random.key(1), prior, init, **kwargs)
    >>> try:
    ...     jaxprobe.sample(jax.random.key(2), prior, init, **kwargs)    # another key, the same path
    ... except CheckpointMismatchError as error:
    ...     print(error.differing, isinstance(error, ValueError))
    ['key'] True
    """

    def __init__(self, path: str, differing: list[str]):
        self.path, self.differing = path, list(differing)
        super().__init__(f"checkpoint {path!r} belongs to another run (differs in {', '.join(differing)}); "
                         "pass the same arguments or another path")


# ------------------------------------------------------------------ the run's identity


def run_identity(rng_key: PRNGKey, run: Any, placed: Any) -> dict[str, Any]:
    """What a checkpoint must agree on to be resumed (JSON-able): the settings, and what the run starts from
    and samples (its initial positions, inverse mass matrix and the target's values at fixed points). ``run``,
    ``placed``: the driver's ``_Run`` and ``_Placed`` (:mod:`jaxprobe.engine.api`)."""
    layout, dtype = run.layout, run.dtype
    identity = {
        "version": CHECKPOINT_VERSION,
        "key": np.asarray(jax.random.key_data(rng_key)).tolist(),
        "sampler": run.sampler,
        "kernel": repr(placed.kernel),
        "num_chains": run.num_chains,
        "event_shapes": [list(shape) for shape in layout.event_shapes],
        "dtype": str(np.dtype(dtype)),
        "num_samples": run.num_samples,
        "num_warmup": run.num_warmup,
        "thin": run.thin,
        "step_size_mode": run.step_size_mode,
        "target_acceptance_rate": run.target_acceptance_rate,
        "step_size": None if run.step_size is None else np.asarray(run.step_size).tolist(),
        "initial_positions": fingerprint(layout.flatten_chains(run.initial_positions).astype(dtype)),
        "inverse_mass_matrix": None if run.inverse_mass_matrix is None else fingerprint(run.inverse_mass_matrix),
        "target": target_fingerprint(run.logdensity, layout.dim, dtype),
        "keep_draws": run.keep_draws,
        "observables": [name for name, _ in run.monitor.observables],
    }
    if run.smc is not None:  # SMC chains start at particles tempered from the reference: another one, other draws
        identity["reference"] = target_fingerprint(run.smc_reference, layout.dim, dtype)
    if run.record is not None:  # draws files of what record stores (absent without one: older checkpoints resume)
        identity["record"] = target_fingerprint(run.record.fn, layout.dim, dtype)
    return identity


def fingerprint(array: Any) -> str:
    """A short hash of an array's values, dtype and shape (for a checkpoint's identity)."""
    array = np.ascontiguousarray(array)
    digest = hashlib.sha256(f"{array.dtype}{array.shape}".encode() + array.tobytes())
    return digest.hexdigest()[:20]


def target_fingerprint(logdensity_fn: Any, dim: int, dtype: Any) -> str:
    """A function of one position (the log density; ``sample``'s ``record``) at 8 fixed points (standard normals
    from a constant seed): a different target gives different values, so a checkpoint of another target is
    refused whatever its settings."""
    points = np.random.default_rng(20261123).standard_normal((8, dim)).astype(dtype)
    return fingerprint(to_host(values_at(logdensity_fn, jnp.asarray(points))))


def _identity_hash(run_id: dict[str, Any]) -> str:
    """The identity in a boundary file: a stale one of another run at the same path is never taken."""
    return fingerprint(np.frombuffer(json.dumps(run_id, sort_keys=True).encode(), np.uint8))


# ------------------------------------------------------------------ paths and disk space


def draws_folder(path: str) -> str:
    """Where a checkpoint keeps its draws and its boundary states, beside the state file.

    Examples
    --------
    >>> draws_folder("runs/chain.npz")                                # position.npy, logdensity.npy, state.<n>.npz
    'runs/chain.npz.draws'
    """
    return os.fspath(path) + ".draws"


@dataclasses.dataclass(frozen=True)
class CheckpointIfLong:
    """``checkpoint=`` for a run that is checkpointed only when it is long enough to be worth resuming.

    A new run is checkpointed into ``path`` (as ``checkpoint=path`` would) when its sampling, projected from the
    warmup's speed (compiling excluded), takes at least ``min_seconds``; a shorter one writes no checkpoint, so an
    interruption loses less than ``min_seconds`` of sampling and the warmup. A checkpoint of this run already at
    ``path`` is always resumed. Without warmup steps there is no speed to project from: the run is checkpointed.
    With several processes, always (each process would time its own warmup, and all must agree).

    Why: on a CPU the checkpoint's copy of every chunk into its mapped files competes with the sampling for the
    same cores. ``jaxprobe run`` of 16,384 chains × 1,000 draws (d = 30, 2 cores) took 10.1-15 s checkpointed
    against 7.2-8.5 s not (``benchmarks/README.md``); ``jaxprobe run`` uses this with ``[output]
    checkpoint_min_seconds`` (default 60).

    Examples
    --------
    >>> prior = jaxprobe.priors.StandardNormal()
    >>> init = prior.sample(jax.random.key(0), 4, (2,))
    >>> samples = jaxprobe.sample(jax.random.key(1), prior, init, num_samples=500, num_warmup=200, progress=False,
    ...                           checkpoint=CheckpointIfLong("short.npz", min_seconds=3600))
    >>> import os; os.path.exists("short.npz"), os.path.exists("short.npz.draws")    # a short run: none written
    (False, False)
    >>> CheckpointIfLong("run.npz", min_seconds=-1)
    Traceback (most recent call last):
        ...
    ValueError: CheckpointIfLong min_seconds must be finite and >= 0, got -1
    """

    path: str | os.PathLike
    min_seconds: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "min_seconds", check_number(self.min_seconds, "CheckpointIfLong min_seconds",
                                                             minimum=0))

    def worth_checkpointing(self, warmup_seconds: float, num_warmup: int, num_steps: int) -> bool:
        """Whether ``num_steps`` sampling steps, at the speed of ``num_warmup`` warmup steps that took
        ``warmup_seconds`` (compiling excluded), take at least :attr:`min_seconds` (no warmup steps: True)."""
        if num_warmup == 0 or jax.process_count() > 1:
            return True
        return max(warmup_seconds, 0.0) / num_warmup * num_steps >= self.min_seconds


def _boundary_path(path: str, count: int) -> str:
    return os.path.join(draws_folder(path), f"state.{count}.npz")


def check_path(checkpoint: Any) -> str:
    """``checkpoint`` as a path whose folder exists (made if needed) and can be written: a TypeError or
    ValueError naming ``checkpoint`` otherwise, before anything compiles."""
    if not isinstance(checkpoint, (str, os.PathLike)) or isinstance(os.fspath(checkpoint), bytes):
        raise TypeError(f"checkpoint must be a path (str or os.PathLike), got {type(checkpoint).__name__}")
    path = os.fspath(checkpoint)
    if not path or path.endswith(os.sep) or os.path.isdir(path):
        raise ValueError(f"checkpoint must be a file path (e.g. 'run.npz'), got {path!r}, a folder")
    if not is_writer():  # with several processes, process 0 writes
        return path
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        handle, probe = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".partial")
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise ValueError(f"checkpoint={path!r}: its folder {folder} cannot be written ({error.strerror or error}); "
                         "pass a path in a folder you can write") from None
    return path


def _reserve(handle: int, size: int, folder: str, needed: int) -> None:
    """Make the file ``handle`` ``size`` bytes long with its blocks allocated (``os.posix_fallocate``), so that
    writing its rows later cannot run out of space; where the file system cannot allocate ahead, check the free
    space and extend it sparse. ``OSError(ENOSPC)`` naming the folder, ``needed`` and the bytes free."""
    remedy = "Free space or pass a checkpoint path on another disk; nothing was computed yet"
    try:
        os.posix_fallocate(handle, 0, size)
        return
    except AttributeError:  # no posix_fallocate on this platform (macOS, Windows)
        pass
    except OSError as error:
        if error.errno == errno.ENOSPC:
            raise no_space_error(folder, needed, "the checkpoint's draws files", remedy) from None
        if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL, getattr(errno, "ENOSYS", -1)):
            raise
    free = free_bytes(folder)
    if free is not None and free < size - os.fstat(handle).st_size:
        raise no_space_error(folder, needed, "the checkpoint's draws files", remedy)
    os.ftruncate(handle, size)


# ------------------------------------------------------------------ the draws


def _write_all(stream: Any, block: np.ndarray) -> None:
    """Write all of ``block``'s bytes at ``stream``'s position (a raw file's ``write`` may write part of them)."""
    view = memoryview(block)
    while len(view):
        view = view[stream.write(view):]


class HostDraws:
    """Host arrays for all kept draws, ``position`` ``(N, C, D)`` and ``logdensity`` ``(N, C)``, filled in order.

    With a checkpoint the arrays stay in memory and each saved chunk's rows are also written into the
    checkpoint's ``.npy`` draws files (:meth:`create_files`, :meth:`attach`, :meth:`write_rows`: written into the
    page cache, which the kernel writes back; a killed process loses nothing written). Their blocks are reserved
    when they are made, so a full disk is found before the run.

    Until 2026-11-29 the draws were the files themselves, memory-mapped and copied into, and the result mapped
    them again copy-on-write. As fast (A/B on a 2-core AMD EPYC, 9 runs each in alternating processes:
    ``sample(checkpoint=)`` of 4,096 × 20,000 × 3 in 2.89 / 3.03 s min / median against 2.79 / 2.95 mapped; a
    checkpointed 16,384-chain ``jaxprobe run`` in 8.47 / 9.65 s against 8.73 / 10.0), but a result that maps the
    files breaks when they go: ``jaxprobe run`` removes its checkpoint once its answer is written, which a
    platform that cannot delete a mapped file refuses, and a file truncated under a live result is a SIGBUS on
    the next read of it.
    """

    def __init__(self, num_samples: int, num_chains: int, dim: int, dtype: Any, keep: bool = True):
        self.keep = keep  # False: nothing is stored, only counted (keep_draws=False)
        shape = (num_samples if keep else 0, num_chains)
        self.position = np.empty(shape + (dim,), dtype)
        self.logdensity = np.empty(shape, dtype)
        self.count = 0
        self.files_folder = None  # the checkpoint's draws folder, whose files the saved chunks' rows go into
        self.shapes = {name: (getattr(self, name).shape, getattr(self, name).dtype) for name in _DRAWS_FILES}

    def append(self, num_draws: int, trace: "core.Trace | None") -> None:
        """Count ``num_draws`` more draws and copy them from ``trace`` (None: they are in the whole-run buffer
        that :meth:`hold` receives at the end)."""
        end = self.count + num_draws
        if self.keep and trace is not None:
            self.position[self.count:end] = to_host(trace.position)
            self.logdensity[self.count:end] = to_host(trace.logdensity)
        self.count = end

    def hold(self, trace: "core.Trace") -> None:
        """Take a whole run's device buffer as the draws: on a CPU device NumPy views its memory, no copy.

        (Off a CPU the copy is made here. Starting it asynchronously and collecting it after the verdict was
        tried on an H100 and did not pay: 1.16× / 1.16× / 1.06× the limit against 1.12× / 1.11× / 1.08×,
        ``benchmarks/results/answer_speed.h100.held-draws.md``.)"""
        self.position, self.logdensity = to_host(trace.position), to_host(trace.logdensity)

    def write_rows(self, start: int, end: int) -> list[int]:
        """Write rows ``[start, end)`` of each draws array into its checkpoint file (at the rows' offset after the
        ``.npy`` header) and return their CRC32, computed on the same blocks as they are written (0 without kept
        draws). ``OSError(ENOSPC)`` where the disk is full (the caller names the folder)."""
        if not self.keep:
            return [0 for _ in _DRAWS_FILES]
        checksums = []
        for name in _DRAWS_FILES:
            path, shape, dtype, header, _ = self._file(self.files_folder, name)
            offset = len(header) + start * int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
            checksum = 0
            with open(path, "r+b", buffering=0) as stream:  # unbuffered: each block is one write of its own bytes
                stream.seek(offset)
                for block in c_order_bytes(getattr(self, name)[start:end]):
                    checksum = zlib.crc32(block, checksum)
                    _write_all(stream, block)
            checksums.append(checksum)
        return checksums

    def _file(self, folder: str, name: str) -> tuple[str, tuple[int, ...], np.dtype, bytes, int]:
        shape, dtype = self.shapes[name]
        header = npy_header(shape, dtype)
        return (os.path.join(folder, f"{name}.npy"), shape, dtype, header,
                len(header) + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)

    def create_files(self, folder: str) -> None:
        """New draws files in ``folder`` (a new run, before anything compiles), their whole size reserved."""
        os.makedirs(folder, exist_ok=True)
        if not self.keep:
            return
        files = [self._file(folder, name) for name in _DRAWS_FILES]
        for path, *_ in files:  # the old files' blocks are free again before the new ones are counted
            if os.path.exists(path):
                os.unlink(path)
        needed = sum(size for *_, size in files)
        try:
            for path, shape, dtype, header, size in files:
                with open(path, "wb") as stream:
                    stream.write(header)
                    stream.flush()
                    _reserve(stream.fileno(), size, folder, needed)
        except BaseException:
            for path, *_ in files:
                if os.path.exists(path):
                    os.unlink(path)
            raise
        self.files_folder = folder

    def verified_chunks(self, folder: str, chunks: list[list[int]]) -> tuple[int, list[str]]:
        """How many of the saved ``chunks`` (``[end, crc of each file's rows]``) verify, read from the files at
        the offsets the run's shapes give (a damaged header does not matter here), and what is wrong."""
        if not self.keep:
            return len(chunks), []
        maps, problems = {}, []
        for name in _DRAWS_FILES:
            path, shape, dtype, header, size = self._file(folder, name)
            if not os.path.exists(path):
                problems.append(f"{path} is missing")
                maps[name] = np.empty((0,) + shape[1:], dtype)
                continue
            with open(path, "rb") as stream:
                if stream.read(len(header)) != header:
                    problems.append(f"the .npy header of {path} is damaged (it is rewritten from the run's shapes)")
            row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
            rows = int(min(shape[0], max(0, os.path.getsize(path) - len(header)) // row_bytes))
            maps[name] = (np.memmap(path, dtype, mode="r", offset=len(header), shape=(rows,) + shape[1:]) if rows
                          else np.empty((0,) + shape[1:], dtype))
        start = 0
        for index, (end, *crcs) in enumerate(chunks):
            for name, expected in zip(_DRAWS_FILES, crcs):
                rows = maps[name]
                if rows.shape[0] < end or crc32(rows[start:end]) != expected:
                    what = "are missing (the file is truncated)" if rows.shape[0] < end else "do not match their checksum"
                    problems.append(f"draws {start} to {end} in {self._file(folder, name)[0]} {what}")
                    return index, problems
            start = end
        return len(chunks), problems

    def attach(self, folder: str, count: int) -> None:
        """Resume on the draws files in ``folder``, whose first ``count`` rows verified: every process reads the
        verified rows; the writing process repairs the files (the header rewritten from the run's shapes, the
        size restored and reserved; a missing file made again) and writes the later chunks into them."""
        self.count = count
        if not self.keep:
            return
        for name in _DRAWS_FILES:
            path, shape, dtype, header, _ = self._file(folder, name)
            if count:
                getattr(self, name)[:count] = np.memmap(path, dtype, mode="r", offset=len(header),
                                                        shape=(count,) + shape[1:])
        if not is_writer():
            return
        files = [self._file(folder, name) for name in _DRAWS_FILES]
        needed = sum(size for *_, size in files)
        for path, shape, dtype, header, size in files:
            with open(path, "r+b" if os.path.exists(path) else "w+b") as stream:
                if stream.read(len(header)) != header:
                    stream.seek(0)
                    stream.write(header)
                    stream.flush()
                if os.fstat(stream.fileno()).st_size > size:
                    os.ftruncate(stream.fileno(), size)
                _reserve(stream.fileno(), size, folder, needed)
        self.files_folder = folder

    def finished(self) -> tuple[np.ndarray, np.ndarray]:
        """(position, logdensity) for the result (None, None without kept draws): the host arrays, never the
        checkpoint's files (writing into the result does not change them). The files are not synced: their
        durability is not the result's (a resume verifies each chunk by its CRC32 and redoes what does not)."""
        if not self.keep:
            return None, None
        return self.position, self.logdensity


# ------------------------------------------------------------------ state files


@dataclasses.dataclass
class Checkpoint:
    """A checkpoint path checked before anything compiles (:func:`prepare`): ``saved``, the verified state
    file's header (None: a new run), ``created``: whether this call made new draws files."""

    path: str
    saved: dict[str, Any] | None
    created: bool


def _remedy(path: str) -> str:
    return f"Delete {path} and {draws_folder(path)} to start the run again (or pass another checkpoint path)"


def _read_state(path: str) -> dict[str, Any] | None:
    """The verified header of the state file at ``path`` (None if there is none): its checksums, its kind and
    its chunk table checked; damaged → :class:`CorruptFileError`, an older version → mismatch on ``version``."""
    remove_stale_partials(path)
    if not os.path.exists(path):
        return None
    header, arrays = read_checked_npz(path, _remedy(path), legacy=lambda h: "version" in h and "kind" not in h)
    if "kind" not in header:  # a checkpoint of jaxprobe before checksums: another version of the run
        raise CheckpointMismatchError(path, ["version"])
    chunks, count = header.get("chunks"), arrays.get("num_draws_saved")
    ends = [chunk[0] for chunk in chunks] if isinstance(chunks, list) and all(
        isinstance(chunk, list) and len(chunk) == 3 and all(isinstance(v, int) for v in chunk) for chunk in chunks) else None
    total = (header.get("run") or {}).get("num_samples") if isinstance(header.get("run"), dict) else None
    if (header["kind"] != _KIND or ends is None or count is None or count.shape != () or not isinstance(total, int)
            or any(b <= a for a, b in zip([0] + ends, ends)) or (ends and ends[-1] > total)
            or int(count) != (ends[-1] if ends else 0)):
        raise CorruptFileError(path, "its chunk table and its count of draws saved disagree", _remedy(path))
    return header


def prepare(checkpoint: Any, draws: HostDraws) -> Checkpoint:
    """Before anything compiles: ``checkpoint`` checked (:func:`check_path`), its state file verified, and for
    a new run the draws files made with their whole size reserved (a full disk: ``OSError(ENOSPC)``)."""
    path = check_path(checkpoint)
    saved = _read_state(path)
    if saved is not None or not is_writer():
        return Checkpoint(path, saved, False)
    folder = draws_folder(path)
    if os.path.isdir(folder):
        ours = [name for name in os.listdir(folder)
                if name in ("position.npy", "logdensity.npy") or re.fullmatch(r"state\.\d+\.npz", name)]
        if ours:
            warnings.warn(f"{folder} holds a checkpoint's files but its state file {path} is missing (a run stopped "
                          "before its first save, or the file was deleted): the run starts over",
                          CorruptFileWarning, stacklevel=3)
        for name in ours:
            os.unlink(os.path.join(folder, name))
    try:
        draws.create_files(folder)
    except BaseException:
        if os.path.isdir(folder) and not os.listdir(folder):
            os.rmdir(folder)  # a refused run leaves nothing behind
        raise
    return Checkpoint(path, None, True)


def discard_unsaved(checkpoint: Checkpoint) -> None:
    """Remove the draws files a new run made when it stopped before saving any state (nothing to resume)."""
    if checkpoint.created and is_writer() and not os.path.exists(checkpoint.path):
        shutil.rmtree(draws_folder(checkpoint.path), ignore_errors=True)


def _read_boundary(path: str, count: int, run_hash: str) -> dict[str, np.ndarray]:
    """The verified arrays of the boundary state after ``count`` draws (raises if missing or damaged)."""
    boundary = _boundary_path(path, count)
    header, arrays = read_checked_npz(boundary, _remedy(path))
    if header.get("kind") != _BOUNDARY_KIND or header.get("run") != run_hash or header.get("num_draws_saved") != count:
        raise CorruptFileError(boundary, "it belongs to another run, or to another point of this one", _remedy(path))
    return arrays


def _boundary_state(path, count, run_hash, template_state, template_monitored, sharding):
    """``(state, stats_sum, monitored)`` from the boundary file after ``count`` draws, placed like the
    templates; every array must have its template's shape."""
    arrays = _read_boundary(path, count, run_hash)
    leaves, treedef = jax.tree_util.tree_flatten(template_monitored)
    expected = {f"state.{name}": np.shape(value) for name, value in template_state.kernel_state._asdict().items()}
    expected.update({f"param.{name}": None for name in template_state.parameters})  # adapted: shapes may change
    expected.update({f"monitor.{i}": leaf.shape for i, leaf in enumerate(leaves)}, step=())
    num_chains = np.shape(template_state.kernel_state.logdensity)[0]
    expected.update({f"stats.{name}": (num_chains,) for name in STAT_FIELDS} if count else {})
    wrong = [name for name, shape in expected.items()
             if name not in arrays or (shape is not None and arrays[name].shape != tuple(shape))]
    if wrong:
        raise CorruptFileError(_boundary_path(path, count), f"its arrays {wrong[:5]} are missing or of another "
                               "shape than the run's", _remedy(path))
    kernel_state = template_state.kernel_state._replace(**{
        name: to_device(arrays[f"state.{name}"], sharding) for name in template_state.kernel_state._fields})
    parameters = {name: to_device(arrays[f"param.{name}"], sharding) for name in template_state.parameters}
    state = core.EngineState(kernel_state, parameters, jnp.asarray(arrays["step"]))
    stats_sum = {name: arrays[f"stats.{name}"] for name in STAT_FIELDS} if count else None
    monitored = jax.tree_util.tree_unflatten(treedef, [
        jax.make_array_from_callback(leaf.shape, leaf.sharding, lambda index, host=arrays[f"monitor.{i}"]: host[index])
        for i, leaf in enumerate(leaves)])
    return state, stats_sum, monitored


def resume(checkpoint: Checkpoint, run_id, draws: HostDraws, writer: "CheckpointWriter", template_state,
           template_monitored, sharding):
    """``(state, stats_sum, monitored)`` to go on from when ``checkpoint`` holds a saved state of this run, else
    None. The draws are verified chunk by chunk; the run rewinds to the last boundary whose draws and state
    verify (a :class:`CorruptFileWarning` names the files and the draws redone); ``draws`` becomes the
    checkpoint's files and ``writer`` continues its chunk table."""
    saved, path = checkpoint.saved, checkpoint.path
    if saved is None:
        return None
    if saved["run"] != run_id:
        differing = sorted(k for k in set(saved["run"]) | set(run_id) if saved["run"].get(k) != run_id.get(k))
        raise CheckpointMismatchError(path, differing)
    chunks, run_hash = saved["chunks"], _identity_hash(run_id)
    verified, problems = draws.verified_chunks(draws_folder(path), chunks)
    for index in range(verified, -1, -1):
        count = chunks[index - 1][0] if index else 0
        try:
            resumed = _boundary_state(path, count, run_hash, template_state, template_monitored, sharding)
            break
        except (CorruptFileError, FileNotFoundError) as error:
            problems.append(f"{_boundary_path(path, count)} is missing" if isinstance(error, FileNotFoundError)
                            else f"{error.path}: {error.problem}")
    else:
        raise CorruptFileError(path, "no saved state of its chunk boundaries verifies (" + "; ".join(problems) + ")",
                               _remedy(path))
    if problems:
        saved_count = chunks[-1][0] if chunks else 0
        redone = (f"draws {count} to {saved_count} of every chain are redone, the {count} before them verify"
                  if count < saved_count else "every saved chunk verifies, nothing is redone")
        warnings.warn(f"checkpoint {path}: {'; '.join(problems)}: {redone}", CorruptFileWarning, stacklevel=4)
    draws.attach(draws_folder(path), count)
    writer.start_from(chunks[:index], count)
    return resumed


def remove_stale_partials(path: str | os.PathLike) -> None:
    """Remove temporary files a killed write left beside ``path`` and in its draws folder (``.*.partial``)."""
    if not is_writer():  # with several processes, process 0 owns the files
        return
    path = os.fspath(path)
    for folder, prefix in ((os.path.dirname(os.path.abspath(path)), "." + os.path.basename(path)),
                           (draws_folder(path), ".")):
        if os.path.isdir(folder):
            for name in os.listdir(folder):
                if name.startswith(prefix) and name.endswith(".partial"):
                    os.unlink(os.path.join(folder, name))


class CheckpointWriter:
    """Writes a checkpoint's boundary states and state file in a background thread while the next chunk samples.

    A save writes the chunk's rows into the draws files (:meth:`HostDraws.write_rows`, with their CRC32), then
    the boundary state (engine state, statistics, folded statistics) and then the state file with the chunk table
    (atomically, both). One worker thread writes the saves in order, so the state file only lists chunks whose rows
    and boundary are on file. A failed write is re-raised by the next :meth:`save` or by :meth:`close`; a full disk
    as ``OSError(ENOSPC)`` naming the folder, the bytes needed and free (the chunks saved before are kept).
    """

    def __init__(self, path: str | os.PathLike, run_id: dict[str, Any]):
        self.path, self.run_id, self.run_hash = os.fspath(path), run_id, _identity_hash(run_id)
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jaxprobe-checkpoint")
        self.futures = []
        self.chunks: list[list[int]] = []  # [end, crc32 of position rows, crc32 of logdensity rows] per saved chunk
        self.saved_count = 0  # draws saved (queued) so far
        # Set by the worker when a write fails: the saves queued after it are not written (their chunk would start
        # where the failed one did and be listed with the wrong rows' checksum); the failure is raised to the caller.
        self.failed = False

    def start_from(self, chunks: list[list[int]], count: int) -> None:
        """Continue a resumed checkpoint's table, rewound to ``count`` draws (later boundaries removed)."""
        self.chunks, self.saved_count = [list(chunk) for chunk in chunks], count
        folder = draws_folder(self.path)
        if is_writer() and os.path.isdir(folder):
            for name in os.listdir(folder):
                match = re.fullmatch(r"state\.(\d+)\.npz", name)
                if match and int(match.group(1)) > count:
                    os.unlink(os.path.join(folder, name))

    def _raise_failures(self) -> None:
        done = [future for future in self.futures if future.done()]
        self.futures = [future for future in self.futures if not future.done()]
        for future in done:
            future.result()

    def save(self, run_id, state, draws: HostDraws, stats_sum, monitored) -> None:
        """Queue the boundary after ``draws.count`` draws: ``state`` and ``monitored`` (device) gathered here."""
        self._raise_failures()
        stats = None if stats_sum is None else dict(stats_sum)
        # The state to the host here, in the calling thread: with several processes that is a collective
        # (every process gathers every chain), which must run in the same order on all of them.
        host_state = {f"state.{name}": to_host(value) for name, value in state.kernel_state._asdict().items()}
        host_state.update({f"param.{name}": to_host(value) for name, value in state.parameters.items()})
        host_state["step"] = to_host(state.step)
        host_state.update({f"monitor.{i}": to_host(leaf) for i, leaf in enumerate(jax.tree_util.tree_leaves(monitored))})
        start, self.saved_count = self.saved_count, draws.count
        if not is_writer():  # only process 0 writes
            return
        self.futures.append(self.executor.submit(self._write, host_state, start, draws.count, draws, stats))

    def _write(self, host_state, start: int, count: int, draws: HostDraws, stats) -> None:
        """The worker: rows ``[start, count)`` written with their CRC32, the boundary file, then the state file.
        Nothing after a failed write (:attr:`failed`): the state file keeps the chunks saved before it."""
        if self.failed:
            return
        try:
            self._write_save(host_state, start, count, draws, stats)
        except BaseException:
            self.failed = True
            raise

    def _write_save(self, host_state, start: int, count: int, draws: HostDraws, stats) -> None:
        arrays = dict(host_state, num_draws_saved=np.asarray(count))
        if stats is not None:
            arrays.update({f"stats.{name}": value for name, value in stats.items()})
        try:
            if count > start:
                crcs = draws.write_rows(start, count)
            write_checked_npz(_boundary_path(self.path, count), arrays,
                              {"kind": _BOUNDARY_KIND, "run": self.run_hash, "num_draws_saved": count})
            chunks = self.chunks + ([[count, *crcs]] if count > start else [])
            write_checked_npz(self.path, {"num_draws_saved": np.asarray(count)},
                              {"kind": _KIND, "run": self.run_id, "chunks": chunks})
            self.chunks = chunks
            if not draws.keep and len(chunks) >= 2:  # no draws to rewind past: the last two boundaries are kept
                stale = _boundary_path(self.path, chunks[-3][0] if len(chunks) >= 3 else 0)
                if os.path.exists(stale):
                    os.unlink(stale)
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise
            needed = sum(np.asarray(value).nbytes for value in arrays.values())
            raise no_space_error(os.path.dirname(os.path.abspath(self.path)), needed, f"checkpoint {self.path}",
                                 f"The {self.chunks[-1][0] if self.chunks else 0} draws per chain saved before are "
                                 "kept and verify: free space and call again with the same arguments to resume"
                                 ) from error

    def close(self) -> None:
        try:
            for future in self.futures:
                future.result()
        finally:
            self.futures = []
            self.executor.shutdown(wait=True)
