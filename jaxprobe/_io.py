"""Files that prove themselves: atomic writes, checksums, and the one error for a damaged file.

* :func:`atomic_write`: a temporary file in the target directory, then ``os.replace``; an interrupted write
  leaves the previous file (or none) in place, never a truncated one. A full disk raises ``OSError(ENOSPC)``
  naming the folder and the bytes free (:func:`no_space_error`).
* :func:`write_checked_npz` / :func:`read_checked_npz`: an ``.npz`` of arrays with one JSON header that
  lists every array's shape, dtype and CRC32, and a CRC32 of the header itself; reading verifies all of it.
* :class:`CorruptFileError` (a ``ValueError``): every damaged file jaxprobe reads back raises it, naming the
  file, what is wrong and what to do; :class:`CorruptFileWarning` where the damage is repaired (a checkpoint
  resumed from its last verified chunk, a sweep cell run again).

Why CRC32 (``zlib.crc32``): it is in the standard library (no new dependency), runs at several GB/s (about
4 GB/s on the 2-core CI machine: 0.3 s for the 1.3 GB checkpoint benchmark) and detects every burst error of
at most 32 bits (any flipped byte, any zeroed word) and all but 2**-32 of the rest. It is not cryptographic
and is not meant to be: it finds damage (disk, copy, truncation, a hand edit), not tampering.
"""

from __future__ import annotations

import errno
import io
import json
import math
import os
import shutil
import tempfile
import zipfile
import zlib
from typing import IO, Any, Callable, Iterable, Iterator

import numpy as np

__all__ = ["atomic_write", "is_writer", "float_to_json", "float_from_json", "CorruptFileError", "CorruptFileWarning",
           "crc32", "crc32_combine", "crc32_without_prefix", "c_order_bytes", "npy_header", "write_npz_member",
           "write_checked_npz", "read_checked_npz", "json_with_checksum", "json_checksum_ok",
           "no_space_error", "free_bytes"]


class CorruptFileError(ValueError):
    """A file jaxprobe wrote does not verify (a checksum, a shape, its header or its format is wrong): it is
    damaged, and nothing read from it is used. ``path``: the file; ``problem``: what is wrong; ``remedy``:
    what to do.

    Examples
    --------
    >>> prior = jaxprobe.priors.StandardNormal()
    >>> samples = jaxprobe.sample(jax.random.key(1), prior, prior.sample(jax.random.key(0), 4, (2,)),
    ...                           num_samples=500, num_warmup=200, progress=False)
    >>> samples.save("draws.npz")
    >>> with open("draws.npz", "wb") as file:                  # damage the file
    ...     _ = file.write(b"not a samples file")
    >>> try:
    ...     jaxprobe.Samples.load("draws.npz")
    ... except jaxprobe.CorruptFileError as error:
    ...     print(error.path, "|", error.remedy)
    draws.npz | Nothing was loaded from it: save the samples again, or rerun what made them
    """

    def __init__(self, path: Any, problem: str, remedy: str):
        self.path, self.problem, self.remedy = os.fspath(path), problem, remedy
        super().__init__(f"{self.path} is damaged: {problem}. {remedy}")


class CorruptFileWarning(UserWarning):
    """A damaged file was found and worked around (draws redone, a sweep cell run again): the result equals
    an undamaged run's; the warning names the file and what was redone.

    Examples
    --------
    >>> import warnings
    >>> prior = jaxprobe.priors.StandardNormal()
    >>> samples = jaxprobe.sample(jax.random.key(1), prior, prior.sample(jax.random.key(0), 4, (2,)),
    ...                           num_samples=500, num_warmup=200, progress=False)
    >>> kwargs = dict(num_samples=500, num_warmup=200, progress=False, checkpoint="run.npz")
    >>> init = prior.sample(jax.random.key(0), 4, (2,))
    >>> first = jaxprobe.sample(jax.random.key(1), prior, init, **kwargs)
    >>> draws = np.load("run.npz.draws/position.npy", mmap_mode="r+")   # (draw, chain, dim), as stored
    >>> draws[0, 0, 0] += 1.0                                             # damage one stored draw
    >>> draws.flush(); del draws
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     again = jaxprobe.sample(jax.random.key(1), prior, init, **kwargs)   # resume: verify, redo
    >>> [w.category.__name__ for w in caught], bool(np.array_equal(again.positions, first.positions))
    (['CorruptFileWarning'], True)
    """


def crc32(array: Any) -> int:
    """CRC32 (``zlib.crc32``) of an array's bytes in C order (its values, not its shape or dtype: those are
    checked beside it). Why CRC32: see this module's docstring."""
    checksum = 0
    for block in c_order_bytes(array):
        checksum = zlib.crc32(block, checksum)
    return checksum


#: CRC-32's polynomial, bit-reflected, as zlib computes it.
_CRC32_POLYNOMIAL = 0xEDB88320


def _crc32_multiply(a: int, b: int) -> int:
    """a(x)·b(x) modulo CRC-32's polynomial, both bit-reflected (zlib's ``multmodp``)."""
    product, bit = 0, 1 << 31
    while bit:
        if a & bit:
            product ^= b
        b = (b >> 1) ^ _CRC32_POLYNOMIAL if b & 1 else b >> 1
        bit >>= 1
    return product


def _crc32_shift(crc: int, length: int) -> int:
    """``crc`` times x^(8·length) modulo the polynomial: what appending ``length`` zero bits' worth of bytes does
    to a CRC before the next bytes' own CRC is added (zlib's ``x2nmodp``, squaring x^8 as the length's bits say)."""
    power = 1 << 23  # x^8, reflected
    while length:
        if length & 1:
            crc = _crc32_multiply(power, crc)
        power = _crc32_multiply(power, power)
        length >>= 1
    return crc


def crc32_combine(first: int, second: int, second_length: int) -> int:
    """``zlib.crc32(a + b)`` from ``zlib.crc32(a)``, ``zlib.crc32(b)`` and ``len(b)``, without reading a byte
    (zlib's ``crc32_combine``, which Python's :mod:`zlib` does not expose).

    Examples
    --------
    >>> a, b = b"jax", b"probe"
    >>> crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)
    True
    """
    return _crc32_shift(first, second_length) ^ second


def crc32_without_prefix(whole: int, prefix: int, rest_length: int) -> int:
    """``zlib.crc32(b)`` from ``zlib.crc32(a + b)``, ``zlib.crc32(a)`` and ``len(b)``: :func:`crc32_combine`
    solved for the second part (the combination is an XOR). A zip member's CRC (zipfile sums it as it writes) gives
    the CRC of the array after its ``.npy`` header without a second pass over its bytes.

    Examples
    --------
    >>> a, b = b"header", b"values"
    >>> crc32_without_prefix(zlib.crc32(a + b), zlib.crc32(a), len(b)) == zlib.crc32(b)
    True
    """
    return _crc32_shift(prefix, rest_length) ^ whole


def c_order_bytes(array: Any) -> Iterator[np.ndarray]:
    """An array's bytes in C order as ``uint8`` views of at most :data:`_BLOCK_BYTES` each (cache-sized: a
    checksum and a write of the same block read it from cache). A non-contiguous array (draws that are a view
    of a wider buffer) is copied a block of leading rows at a time: a contiguous copy of all of it would hold
    its bytes twice."""
    array = np.asarray(array)
    if array.size == 0:
        return
    if array.flags.c_contiguous or array.ndim == 0:
        flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        for start in range(0, len(flat), _BLOCK_BYTES):
            yield flat[start:start + _BLOCK_BYTES]
        return
    rows = max(1, _BLOCK_BYTES // max(1, array[0].nbytes))
    for start in range(0, len(array), rows):  # C order: the leading rows' bytes one after another
        yield from c_order_bytes(np.ascontiguousarray(array[start:start + rows]))


#: Bytes checksummed and written at a time (:func:`c_order_bytes`).
_BLOCK_BYTES = 2**20


def npy_header(shape: tuple[int, ...], dtype: Any) -> bytes:
    """The ``.npy`` header NumPy writes for a C-ordered array of ``shape`` and ``dtype`` (version 1.0, padded)."""
    stream = io.BytesIO()
    np.lib.format.write_array_header_1_0(stream, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                                  "fortran_order": False, "shape": tuple(shape)})
    return stream.getvalue()


def write_npz_member(archive: zipfile.ZipFile, name: str, shape: tuple[int, ...], dtype: Any,
                     blocks: Iterable[Any]) -> int:
    """Write member ``name + ".npy"`` of an ``.npz`` (``np.load`` reads it as ``np.savez`` lays it out): an
    array of ``shape`` and ``dtype`` whose C-order values ``blocks`` yields in order (arrays of ``dtype``, e.g.
    a few chains' draws converted as they are written, so no converted copy of the whole array is held).
    Returns the CRC32 of its values (:func:`crc32`), derived from the member's CRC that zipfile sums as each block
    is written (:func:`crc32_without_prefix`): one pass over the bytes, no ``tobytes`` copy (``np.savez`` copied
    every array twice before writing it). Raises ``ValueError`` if the blocks do not hold exactly ``shape``'s
    values."""
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        raise TypeError(f"array {name!r} holds Python objects ({dtype}): only numbers and strings are written "
                        "(no pickle)")
    expected, written = math.prod(shape) * dtype.itemsize, 0
    header = npy_header(shape, dtype)
    with archive.open(name + ".npy", "w", force_zip64=True) as member:
        member.write(header)
        for block in blocks:
            block = np.asarray(block)
            if block.dtype != dtype:
                raise ValueError(f"array {name!r}: a block of {block.dtype} in an array of {dtype}")
            for chunk in c_order_bytes(block):
                member.write(chunk)
                written += len(chunk)
    if written != expected:
        raise ValueError(f"array {name!r}: {written} bytes written for shape {tuple(shape)} of {dtype} "
                         f"({expected} bytes)")
    # zipfile summed the member's CRC (header and values) as it wrote: the values' CRC follows from it, so the
    # bytes are read once (a CRC pass of its own cost 0.25-0.45 s per GB written)
    return crc32_without_prefix(archive.getinfo(name + ".npy").CRC, zlib.crc32(header), written)


def free_bytes(folder: str) -> int | None:
    """Bytes free for this user in ``folder``'s file system (None where it cannot be asked)."""
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def no_space_error(folder: str, needed: int | None, what: str, remedy: str) -> OSError:
    """``OSError(ENOSPC)`` naming the folder, the bytes needed and the bytes free, and what to do."""
    free = free_bytes(folder)
    needs = "" if needed is None else f"needs {needed:,} bytes, "
    has = "free space unknown" if free is None else f"{free:,} bytes free"
    return OSError(errno.ENOSPC, f"no space left in {folder} for {what} ({needs}{has}). {remedy}")


def _umask() -> int:
    """The process's umask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def is_writer() -> bool:
    """Whether this process writes files: always, except after ``jax.distributed.initialize()``, where only
    process 0 does (every process computes the same full result; one copy goes to disk)."""
    import jax

    return jax.process_index() == 0


def atomic_write(path: str | os.PathLike, write: Callable[[IO], None], binary: bool = True) -> None:
    """Call ``write(stream)`` on a temporary file beside ``path``, then rename it to ``path``.

    In a multi-process run only process 0 writes (:func:`is_writer`); the others return at once.
    """
    if not is_writer():
        return
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    # ".<name>.<random>.partial": a write killed by SIGKILL leaves this behind, recognisably ours
    # (jaxprobe.engine.checkpoint.remove_stale_partials clears a checkpoint's on resume).
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".partial")
    try:
        with os.fdopen(handle, "wb" if binary else "w") as stream:
            write(stream)
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes 0600: give the file the user's usual mode
        os.replace(temporary, path)
    except BaseException as error:
        if os.path.exists(temporary):
            os.unlink(temporary)
        if (isinstance(error, OSError) and error.errno == errno.ENOSPC
                and not (error.strerror or "").startswith("no space left in")):  # not already said so
            raise no_space_error(directory, None, f"writing {path}",
                                 "Free space (or write elsewhere) and run again; the file is as it was before") from error
        raise


def write_checked_npz(path: str | os.PathLike, arrays: dict[str, Any], header: dict[str, Any]) -> None:
    """Write ``arrays`` (name → array, no pickle) and ``header`` (JSON-able) atomically to an ``.npz`` that
    proves itself: the header lists every array as ``{"shape", "dtype", "crc32"}`` under ``"arrays"``, and the
    member ``header_crc32`` holds the CRC32 of the header's text. :func:`read_checked_npz` verifies both. Each
    array is checksummed as it is written (:func:`write_npz_member`); the header, which lists the checksums,
    is the last member."""
    arrays = {name: np.asarray(value) for name, value in arrays.items()}

    def write(stream: IO) -> None:
        listed = {}
        with zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
            for name, value in arrays.items():
                listed[name] = {"shape": list(value.shape), "dtype": value.dtype.str,
                                "crc32": write_npz_member(archive, name, value.shape, value.dtype, [value])}
            text = np.asarray(json.dumps(dict(header, arrays=listed)))
            text_crc = np.asarray(zlib.crc32(str(text).encode()), np.int64)
            for name, value in (("header", text), ("header_crc32", text_crc)):
                write_npz_member(archive, name, value.shape, value.dtype, [value])

    atomic_write(path, write)


def _read_members(path: str) -> tuple[str, dict[str, np.ndarray], int | None]:
    """The header's text, every other member, and the header's stored CRC32 (None if absent)."""
    with np.load(path, allow_pickle=False) as data:
        if not hasattr(data, "files"):
            raise ValueError("not an .npz archive (a single .npy array)")
        if "header" not in data.files:
            raise ValueError(f"no header among its members {sorted(data.files)[:8]}")
        header_array = data["header"]
        if header_array.shape != () or header_array.dtype.kind != "U":
            raise ValueError(f"its header is {header_array.dtype}{list(header_array.shape)}, not one string")
        stored = int(data["header_crc32"]) if "header_crc32" in data.files else None
        members = {name: data[name] for name in data.files if name not in ("header", "header_crc32")}
    return str(header_array), members, stored


def read_checked_npz(path: str | os.PathLike, remedy: str,
                     legacy: Callable[[dict], bool] = lambda header: False) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(header, arrays)`` of a file written by :func:`write_checked_npz`, verified: the header's CRC32,
    then every listed array's shape, dtype and CRC32 (and no member missing or extra). A file whose header
    has no checksums is accepted unverified only when ``legacy(header)`` says so (older formats). Any failure,
    of the archive, the JSON or a check, raises :class:`CorruptFileError` naming the file with ``remedy``;
    a missing file raises ``FileNotFoundError``."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "no such file", path)
    try:
        text, members, stored = _read_members(path)
        header = json.loads(text)
        if not isinstance(header, dict):
            raise ValueError(f"its header is a JSON {type(header).__name__}, not an object")
    except Exception as error:  # noqa: BLE001 - anything that fails to parse is damage, named as such
        raise CorruptFileError(path, f"it cannot be read ({type(error).__name__}: {error})", remedy) from None
    if stored is None and "arrays" not in header and legacy(header):
        return header, members
    if stored is None or zlib.crc32(text.encode()) != stored:
        raise CorruptFileError(path, "its header does not match its checksum" if stored is not None
                               else "its header carries no checksum", remedy)
    listed = header.get("arrays")
    if not isinstance(listed, dict) or set(listed) != set(members):
        raise CorruptFileError(path, f"its members {sorted(members)} are not those its header lists", remedy)
    for name, expected in listed.items():
        value = members[name]
        if (list(value.shape) != expected.get("shape") or value.dtype.str != expected.get("dtype")
                or crc32(value) != expected.get("crc32")):
            raise CorruptFileError(path, f"array {name!r} ({value.dtype.str}{list(value.shape)}) does not match its "
                                   f"shape, dtype or checksum in the header", remedy)
    return header, members


def json_with_checksum(payload: dict[str, Any], default: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """``payload`` as plain JSON values with a ``"crc32"`` key added: the CRC32 of its canonical JSON text
    (sorted keys), which :func:`json_checksum_ok` recomputes after reading it back."""
    plain = json.loads(json.dumps(payload, default=default))
    return dict(plain, crc32=zlib.crc32(json.dumps(plain, sort_keys=True).encode()))


def json_checksum_ok(payload: Any) -> bool | None:
    """For a JSON object read back: True if its ``"crc32"`` matches its other keys (removed from ``payload``),
    False if not, None if it has none (written before checksums)."""
    if not isinstance(payload, dict) or "crc32" not in payload:
        return None
    stored = payload.pop("crc32")
    return stored == zlib.crc32(json.dumps(payload, sort_keys=True).encode())


def float_to_json(value: float | None) -> float | str | None:
    """A JSON-safe float: NaN and ±inf as the strings ``"nan"``, ``"inf"``, ``"-inf"`` (JSON has no such
    numbers); None stays None. :func:`float_from_json` reads it back."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else str(value)


def float_from_json(value: Any) -> float | None:
    """The float written by :func:`float_to_json` (``float("nan")`` reads the strings back)."""
    return None if value is None else float(value)
