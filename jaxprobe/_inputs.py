"""The one place user inputs become arrays and numbers: NumPy, pandas, nested lists, checked by name.

Every public entry point that takes data (initial positions, bounds, anchors, targets, prior
parameters, query rows) reads it through :func:`as_float_array` (or :func:`as_positions` for a pytree
of chain positions), and every numeric argument through :func:`check_number` / :func:`check_int`, so
that the same input is accepted, converted and refused the same way everywhere:

- **Accepted**: NumPy and JAX arrays, pandas DataFrames and Series, nested Python lists/tuples of
  numbers, NumPy/Python scalars; integer and floating dtypes.
- **Cast**: to float64 on the host for parameters (bounds, anchors, ...: the compiled code casts them to
  the positions' dtype), and to the **working dtype** for positions (:func:`position_dtype`): float64
  stays float64 only when ``jax_enable_x64`` is on, else it becomes float32, as ``jnp.asarray`` does;
  float32 stays float32; integers become the working dtype; float16 and bfloat16 are computed in float32
  (the samplers' accept/reject and step-size adaptation need more than half precision's 3 digits).
- **Refused**, with a ``TypeError``/``ValueError`` naming the argument: strings (also numbers written as
  strings, ``"0.1"``), bools (``True`` is not a temperature), complex numbers, object arrays, ragged
  lists, non-numeric DataFrame columns, NaN/inf where finite values are needed, wrong shapes.

Nothing is clipped, dropped or replaced silently.
"""

from __future__ import annotations

import math
import numbers
import sys
from typing import Any

import numpy as np

__all__ = ["working_dtype", "position_dtype", "as_float_array", "as_positions", "check_number", "check_int",
           "is_table"]


# JAX is imported where it is needed, not with this module: jaxprobe.config checks numbers of a file with
# check_int / check_number, and the command line answers schema errors without JAX (tests/test_cli_startup.py).
# A value can be a JAX array or tracer only once JAX was imported, so the checks look for it in sys.modules.


def _jax_array_types() -> tuple[type, ...]:
    """(np.ndarray, jax.Array) once JAX is imported, else (np.ndarray,)."""
    jax = sys.modules.get("jax")
    return (np.ndarray,) if jax is None else (np.ndarray, jax.Array)


def _is_tracer(value: Any) -> bool:
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(value, jax.core.Tracer)


def _is_float_dtype(dtype: Any) -> bool:
    """A floating dtype, including ml_dtypes' bfloat16 and friends (which NumPy's issubdtype does not know)."""
    import jax.numpy as jnp

    return bool(jnp.issubdtype(dtype, jnp.floating))


def working_dtype() -> np.dtype:
    """float64 when ``jax_enable_x64`` is on, else float32: the dtype JAX gives a float64 NumPy array."""
    import jax

    return np.dtype(np.float64 if jax.config.jax_enable_x64 else np.float32)


def position_dtype(dtype: Any) -> np.dtype:
    """The dtype positions of ``dtype`` are sampled in (see the module notes): float32 stays, float64 stays
    under x64 (else float32), half precision and integers become float32 / the working dtype."""
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        return working_dtype()
    if dtype == np.float32:
        return dtype
    if _is_float_dtype(dtype):  # float16, bfloat16: too coarse to sample in
        return np.dtype(np.float32)
    return working_dtype()


def is_table(value: Any) -> bool:
    """Whether ``value`` is a pandas DataFrame or Series (without importing pandas)."""
    module = type(value).__module__ or ""
    return module.startswith("pandas") and hasattr(value, "to_numpy")


def _is_nested_numbers(value: Any) -> bool:
    """A (nested) list/tuple whose leaves are all plain numbers: an array written as a list."""
    if isinstance(value, (list, tuple)):
        return len(value) > 0 and all(_is_nested_numbers(item) for item in value)
    return isinstance(value, (numbers.Number, np.generic)) and not isinstance(value, (bool, np.bool_))


def _holds_bool(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_holds_bool(item) for item in value)
    return isinstance(value, (bool, np.bool_))


def _table_to_numpy(value: Any, name: str) -> np.ndarray:
    import pandas

    frame = value.to_frame() if isinstance(value, pandas.Series) else value
    bad = [column for column, dtype in frame.dtypes.items()
           if not pandas.api.types.is_numeric_dtype(dtype) or pandas.api.types.is_bool_dtype(dtype)]
    if bad:
        kinds = ", ".join(f"{column!r} ({frame.dtypes[column]})" for column in bad[:5])
        raise TypeError(f"{name}: DataFrame columns must be numbers; {kinds} {'is' if len(bad) == 1 else 'are'} "
                        "not (encode categories first, e.g. with jaxprobe.datasets or pandas.get_dummies)")
    try:
        return value.to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name}: could not read the DataFrame as numbers: {error}") from None


def _as_numeric(value: Any, name: str) -> np.ndarray:
    """``value`` as a NumPy array of integers or floats (any float width), or a TypeError naming ``name``."""
    if _is_tracer(value):
        raise TypeError(f"{name} must be a concrete array here, got a traced value (inside jit/vmap)")
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be numeric, got the string {value!r}")
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be numeric, got the bool {value!r}")
    if is_table(value):
        return _table_to_numpy(value, name)
    if isinstance(value, (list, tuple)) and _holds_bool(value):  # np.asarray([1.0, True]) would read 1.0
        raise TypeError(f"{name} must be numeric, got a bool inside the {type(value).__name__}")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as error:  # ragged lists
        raise ValueError(f"{name} must be a rectangular array of numbers: {error}") from None
    dtype = array.dtype
    if dtype.kind in "iu" or (dtype.kind == "f") or _is_float_dtype(dtype):
        return array
    what = {"b": "bools", "c": "complex numbers", "U": "strings", "S": "strings", "O": "Python objects",
            "M": "dates", "m": "time differences"}.get(dtype.kind, f"dtype {dtype}")
    raise TypeError(f"{name} must hold real numbers (ints or floats), got {what} ({type(value).__name__} "
                    f"of dtype {dtype})")


def as_float_array(value: Any, name: str, *, ndim: int | tuple[int, ...] | None = None,
                   shape: tuple[int | None, ...] | None = None, finite: bool = True,
                   dtype: Any = np.float64) -> np.ndarray:
    """``value`` (an array, a DataFrame/Series, a nested list, a scalar) as a float NumPy array.

    ``ndim``: the allowed number(s) of dimensions; ``shape``: the expected shape (``None`` entries match
    anything); ``finite``: refuse NaN/inf; ``dtype``: the result's dtype, float64 by default (host-side
    parameters), or ``"positions"`` for :func:`position_dtype` of the input's dtype. Errors name ``name``.
    """
    array = _as_numeric(value, name)
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if array.ndim not in allowed:
            wanted = " or ".join(f"{n}" for n in allowed)
            raise ValueError(f"{name} must have {wanted} dimension(s), got shape {array.shape}")
    if shape is not None:
        if len(shape) != array.ndim or any(s is not None and s != a for s, a in zip(shape, array.shape)):
            wanted = "(" + ", ".join("n" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "")
            raise ValueError(f"{name} must have shape {wanted}), got {array.shape}")
    target = position_dtype(array.dtype) if isinstance(dtype, str) and dtype == "positions" else np.dtype(dtype)
    array = array.astype(target, copy=False)
    if finite and not np.all(np.isfinite(array)):
        bad = np.argwhere(~np.isfinite(array))
        where = f" at index {tuple(int(i) for i in bad[0])}" if array.ndim else ""
        raise ValueError(f"{name} must be finite, got NaN or inf{where} ({len(bad)} of {array.size} entries)")
    return array


def as_positions(positions: Any, name: str = "initial_positions") -> Any:
    """Chain positions as given to :func:`jaxprobe.sample`: an array ``(C, ...)``, a DataFrame ``(C, d)``,
    a nested list, or a pytree of arrays sharing the chain axis; each leaf becomes a NumPy/JAX array of
    :func:`position_dtype`. Leaves that are not arrays are left for the engine to name; values are not
    checked here (the engine reports non-finite chains by index)."""
    import jax

    if is_table(positions) or _is_nested_numbers(positions):
        return as_float_array(positions, name, finite=False, dtype="positions")

    def leaf(path, value):
        where = f"{name}{jax.tree_util.keystr(path)}"
        if is_table(value) or _is_nested_numbers(value):
            return as_float_array(value, where, finite=False, dtype="positions")
        if not hasattr(value, "shape") or not hasattr(value, "dtype"):
            return value
        if isinstance(value, jax.Array) and value.dtype == position_dtype(value.dtype):
            return value  # already a working JAX array: no host round trip
        return as_float_array(value, where, finite=False, dtype="positions")

    return jax.tree_util.tree_map_with_path(leaf, positions,
                                            is_leaf=lambda value: is_table(value) or _is_nested_numbers(value))


def _real_scalar(value: Any, name: str) -> Any:
    """A Python int/float from a real number or a 0-d numeric array; TypeError for bools, strings, others."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a real number, got the bool {value!r}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, _jax_array_types()) and not _is_tracer(value) \
            and np.shape(value) == () and (np.dtype(value.dtype).kind in "iuf" or _is_float_dtype(value.dtype)):
        item = np.asarray(value).item()
        return int(item) if isinstance(item, numbers.Integral) else float(item)
    shown = f"the string {value!r}" if isinstance(value, (str, bytes)) else type(value).__name__
    raise TypeError(f"{name} must be a real number, got {shown}")


def _range_text(minimum, maximum, exclusive_minimum, exclusive_maximum, finite) -> str:
    if minimum is not None and maximum is not None:
        return f"in {'(' if exclusive_minimum else '['}{minimum:g}, {maximum:g}{')' if exclusive_maximum else ']'}"
    parts = ["finite"] if finite else []
    if minimum is not None:
        parts.append(f"{'>' if exclusive_minimum else '>='} {minimum:g}")
    if maximum is not None:
        parts.append(f"{'<' if exclusive_maximum else '<='} {maximum:g}")
    return " and ".join(parts)


def check_number(value: Any, name: str, *, minimum: float | None = None, maximum: float | None = None,
                 exclusive_minimum: bool = False, exclusive_maximum: bool = False, finite: bool = True) -> float:
    """``value`` as a float, or a ``TypeError`` (not a real number: a bool, a string, None, an array) /
    ``ValueError`` (NaN/inf when ``finite``, or outside the bounds) naming ``name`` and the range."""
    number = float(_real_scalar(value, name))
    bad = (finite and not math.isfinite(number)) or math.isnan(number)
    if minimum is not None:
        bad = bad or (number <= minimum if exclusive_minimum else number < minimum)
    if maximum is not None:
        bad = bad or (number >= maximum if exclusive_maximum else number > maximum)
    if bad:
        text = _range_text(minimum, maximum, exclusive_minimum, exclusive_maximum, finite)
        raise ValueError(f"{name} must be {text}, got {value!r}")
    return number


def check_int(value: Any, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an int, or a ``TypeError`` (not an integer: a bool, a float such as 2.0, a string) /
    ``ValueError`` (below ``minimum`` or above ``maximum``) naming ``name``."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int, got the bool {value!r}")
    if isinstance(value, _jax_array_types()) and np.shape(value) == () \
            and np.dtype(value.dtype).kind in "iu" and not _is_tracer(value):
        value = int(np.asarray(value).item())
    if not isinstance(value, numbers.Integral):
        shown = f"the string {value!r}" if isinstance(value, (str, bytes)) else type(value).__name__
        raise TypeError(f"{name} must be an int, got {shown}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return int(value)
