"""The one place values are compared by content: keys that make "the same question asked again" equal.

The engine compiles with the question as a static argument (:mod:`jaxprobe.engine.compiled`), so a question
asked again with new but equal objects (``prior=DiagonalGaussian(mean, sd)``, ``constraints=[Box(-3, 3)]``,
``fixed_label(model, 1)`` written inline, as in every README example) must hash alike and compare equal, or
every call compiles everything again. Everything here serves that:

- :func:`value_key`: a hashable key of a (nested) value that compares by content. Arrays (NumPy, concrete
  JAX, pandas) by dtype, shape and a SHA-256 of their bytes; numbers by type and value (``1`` and ``1.0`` and
  ``True`` differ: they can trace to different programs); lists, tuples, dicts by their items; objects that
  state their own key (:class:`ValueObject`, :class:`Keyed`) by it; other hashable objects with their own
  ``__eq__`` by that; everything else by identity (a model, a function). Tracers are never read: they are
  keyed by identity, so a probe built from a traced parameter (inside a sweep) equals only itself.
- :class:`ValueObject`: a mixin for frozen dataclasses (priors, constraints): equal and hashed by their
  fields' :func:`value_key`, computed once (at construction) and cached.
- :class:`Keyed`: a function with a key (what a probe's closure depends on), equal by that key.
- :class:`ByValue`: any value as a static argument, equal by its :func:`value_key`.
- :func:`frozen_array`: a read-only copy of an array, for values a key was computed from.

A key holds strong references to what it keys by identity, so an identity is never reused by another object
while a key (or a cached program) still names it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping
from typing import Any, Callable, Hashable

import jax
import numpy as np

__all__ = ["value_key", "tree_key", "ValueObject", "Keyed", "ByValue", "frozen_array", "Identity"]


class Identity:
    """A key that compares by the identity of the object it holds (and keeps that object alive)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Identity) and other.value is self.value

    def __repr__(self) -> str:
        return f"Identity({type(self.value).__name__} at {id(self.value):#x})"


def _is_traced(value: Any) -> bool:
    return isinstance(value, jax.core.Tracer)


def _array_key(array: np.ndarray, weak_type: bool = False) -> tuple:
    if array.dtype.kind == "O":  # Python objects: their keys, not their addresses
        return ("array", "object", array.shape, tuple(value_key(item) for item in array.ravel().tolist()))
    digest = hashlib.sha256(np.ascontiguousarray(array).reshape(-1).view(np.uint8)).hexdigest() if array.size else ""
    return ("array", array.dtype.str, array.shape, bool(weak_type), digest)


def _is_table(value: Any) -> bool:
    module = type(value).__module__ or ""
    return module.startswith("pandas") and hasattr(value, "to_numpy")


def value_key(value: Any) -> Hashable:
    """A hashable key of ``value`` that compares by content (see the module notes). Never raises."""
    if value is None or isinstance(value, (str, bytes)):
        return value
    if _is_traced(value):
        return Identity(value)
    if isinstance(value, np.generic):  # before the Python numbers: np.float64 is a float
        return _array_key(np.asarray(value)) + ("scalar",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", type(value), value)
    if isinstance(value, float):
        # float.hex: NaN equals NaN, and 0.0 and -0.0 differ (as they may in a program)
        return ("float", type(value), value.hex() if not math.isnan(value) else "nan")
    if isinstance(value, complex):
        return ("complex", value_key(value.real), value_key(value.imag))
    if isinstance(value, np.ndarray):
        return _array_key(value)
    if isinstance(value, jax.Array):
        try:
            host = np.asarray(value)
        except Exception:  # noqa: BLE001 - not readable here (e.g. not addressable on this host)
            return Identity(value)
        return _array_key(host, getattr(value, "weak_type", False))
    own = getattr(type(value), "_value_key", None)
    if callable(own):  # ValueObject, Keyed, Probe, Restriction, ConstraintList: their own key
        try:
            return own(value)
        except Exception:  # noqa: BLE001
            return Identity(value)
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(value_key(item) for item in value))
    if isinstance(value, (dict, Mapping)):
        try:
            items = sorted(value.items(), key=lambda item: repr(item[0]))
        except Exception:  # noqa: BLE001
            return Identity(value)
        return (type(value), tuple((value_key(k), value_key(v)) for k, v in items))
    if isinstance(value, (set, frozenset)):
        return (type(value), frozenset(value_key(item) for item in value))
    if _is_table(value):  # a pandas Series or DataFrame: values, index and names
        try:
            names = list(value.columns) if hasattr(value, "columns") else [getattr(value, "name", None)]
            return ("table", type(value), value_key(np.asarray(value.to_numpy())), value_key(np.asarray(value.index)),
                    value_key(names))
        except Exception:  # noqa: BLE001
            return Identity(value)
    if isinstance(value, (np.dtype, type)):
        return value
    # Any other object: by its own equality when it defines one and is hashable (a plain frozen dataclass,
    # a functools.partial is not one), else by identity (a model, a function, a module).
    if type(value).__eq__ is not object.__eq__ and type(value).__hash__ is not None:
        try:
            hash(value)
        except Exception:  # noqa: BLE001 - e.g. a frozen dataclass holding a list
            return Identity(value)
        return ("object", type(value), _Equal(value))
    return Identity(value)


class _Equal:
    """An object that brings its own ``__eq__``/``__hash__``, compared with them (a truthy, non-bool answer,
    e.g. an array, counts as not equal)."""

    __slots__ = ("value", "_hash")

    def __init__(self, value: Any):
        self.value = value
        self._hash = hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, _Equal):
            return False
        if other.value is self.value:
            return True
        try:
            answer = self.value == other.value
        except Exception:  # noqa: BLE001
            return False
        return answer is True or (isinstance(answer, (bool, np.bool_)) and bool(answer))


def tree_key(tree: Any) -> Hashable:
    """:func:`value_key` of a pytree (parameters, parameter draws): its structure and each leaf's key."""
    if _is_traced(tree):
        return Identity(tree)
    try:
        leaves, treedef = jax.tree_util.tree_flatten(tree)
    except Exception:  # noqa: BLE001
        return value_key(tree)
    return ("tree", treedef, tuple(value_key(leaf) for leaf in leaves))


def frozen_array(array: np.ndarray) -> np.ndarray:
    """A read-only copy of ``array``: a value a key was computed from must not change behind the key."""
    copy = np.array(array, copy=True)
    copy.setflags(write=False)
    return copy


class ValueObject:
    """Mixin for frozen dataclasses: equal (and hashed) by the :func:`value_key` of their fields.

    Declare the dataclass with ``eq=False`` so that these methods are kept. The key is computed once, at the
    end of construction (:meth:`_freeze_key`, which ``__post_init__`` calls; else at first use) and cached.
    """

    def _freeze_key(self) -> None:
        fields = tuple((field.name, value_key(getattr(self, field.name))) for field in dataclasses.fields(self))
        object.__setattr__(self, "_cached_value_key", (type(self), fields))

    def _value_key(self) -> Hashable:
        key = self.__dict__.get("_cached_value_key")
        if key is None:
            self._freeze_key()
            key = self.__dict__["_cached_value_key"]
        return key

    def __post_init__(self) -> None:
        self._freeze_key()

    def __eq__(self, other: Any) -> bool:
        if other is self:
            return True
        if not isinstance(other, ValueObject) or type(other) is not type(self):
            return NotImplemented
        return self._value_key() == other._value_key()

    def __hash__(self) -> int:
        return hash(self._value_key())


class Keyed:
    """A function with a key: called as ``fn``, equal to another ``Keyed`` with an equal key.

    The key must name everything the function depends on (for a probe: its constructor, its models by
    identity and its numeric arguments by value); two equal ``Keyed`` functions must compute the same thing,
    as compiled programs are shared between them.
    """

    def __init__(self, fn: Callable, *key: Any):
        self.fn = fn
        self.key = value_key(key)
        self._hash = hash(self.key)
        self.__name__ = getattr(fn, "__name__", "keyed")
        self.__wrapped__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def _value_key(self) -> Hashable:
        return ("keyed", self.key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: Any) -> bool:
        return other is self or (isinstance(other, Keyed) and self._hash == other._hash and self.key == other.key)

    def __repr__(self) -> str:
        return f"Keyed({self.__name__})"


class ByValue:
    """Any value as a static argument of a jitted function: hashed and compared by its :func:`value_key`
    (priors, constraint lists, a probe's parameters). ``.value`` is the value itself."""

    __slots__ = ("value", "key", "_hash")

    def __init__(self, value: Any):
        self.value = value
        self.key = value_key(value)
        self._hash = hash(self.key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: Any) -> bool:
        return other is self or (isinstance(other, ByValue) and self._hash == other._hash and self.key == other.key)

    def __repr__(self) -> str:
        return f"ByValue({self.value!r})"
