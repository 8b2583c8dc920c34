"""Atomic file writes: a temporary file in the target directory, then ``os.replace``.

An interrupted write leaves the previous file (or none) in place, never a truncated one.
"""

from __future__ import annotations

import math
import os
import tempfile
from typing import IO, Any, Callable

__all__ = ["atomic_write", "is_writer", "float_to_json", "float_from_json"]


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
    # (jaxprobe.engine.api.remove_stale_partials clears a checkpoint's on resume).
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".partial")
    try:
        with os.fdopen(handle, "wb" if binary else "w") as stream:
            write(stream)
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes 0600: give the file the user's usual mode
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


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
