"""``jit_bounded``: ``jax.jit`` with static arguments whose compiled programs are freed again.

``jax.jit(f, static_argnames=("logdensity_fn",))`` keeps every static value it was ever called with, and
each one's compiled executables, in JAX's process-wide caches (up to 8192 entries). jaxprobe's questions are
closures: every new question is a new static value, so a notebook or a long-lived service that asks a few
hundred questions kept every program it ever compiled (about 7 per question, ~50 memory mappings each). The
memory grew without bound, and once the kernel's mapping limit was reached (``vm.max_map_count``, 65530 on
Linux) XLA's CPU compiler crashed the process with a segmentation fault.

Here each static configuration gets its own ``jax.jit`` of ``functools.partial(f, **statics)``, held in a
least-recently-used table of ``maxsize`` configurations. Dropping a configuration drops its jitted function,
and JAX frees that function's executables with it (its caches hold the function weakly). The same question
asked again while it is among the ``maxsize`` most recent reuses its programs, as a static argument would.
"""

from __future__ import annotations

import functools
import inspect
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import jax

from jaxprobe._inputs import check_int
from jaxprobe._pointwise import map_points

__all__ = ["jit_bounded", "DEFAULT_MAXSIZE", "values_at"]

DEFAULT_MAXSIZE = 8


class BoundedJit:
    """A function jitted once per static configuration, the ``maxsize`` most recently used kept.

    Called like the function itself; static arguments (by position or name) must be hashable, as for
    ``jax.jit``. ``compiled_count()`` counts the programs compiled so far (monotonic: programs freed with an
    evicted configuration still count), ``live_count()`` those held now.
    """

    def __init__(self, fun: Callable, static_argnames: Sequence[str], donate_argnames: Sequence[str] = (),
                 maxsize: int = DEFAULT_MAXSIZE):
        signature = inspect.signature(fun)
        unknown = [name for name in (*static_argnames, *donate_argnames) if name not in signature.parameters]
        if unknown:
            raise ValueError(f"jit_bounded: {fun.__name__} has no parameter(s) {unknown}")
        maxsize = check_int(maxsize, "maxsize", minimum=1)
        self.fun, self.maxsize = fun, maxsize
        self.static_argnames, self.donate_argnames = tuple(static_argnames), tuple(donate_argnames)
        self._signature = signature
        self._table: OrderedDict[tuple, Any] = OrderedDict()
        self._evicted_programs = 0
        functools.update_wrapper(self, fun)

    def _jitted(self, statics: tuple) -> Any:
        jitted = self._table.get(statics)
        if jitted is not None:
            self._table.move_to_end(statics)
            return jitted
        bound = functools.partial(self.fun, **dict(zip(self.static_argnames, statics)))
        jitted = jax.jit(bound, donate_argnames=self.donate_argnames)
        self._table[statics] = jitted
        while len(self._table) > self.maxsize:
            _, evicted = self._table.popitem(last=False)
            self._evicted_programs += evicted._cache_size()
        return jitted

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        arguments = self._signature.bind(*args, **kwargs)
        arguments.apply_defaults()
        values = arguments.arguments
        statics = tuple(values.pop(name) for name in self.static_argnames)
        try:
            hash(statics)
        except TypeError as error:
            raise TypeError(f"{self.fun.__name__}: static arguments {self.static_argnames} must be hashable "
                            f"({error})") from None
        return self._jitted(statics)(**values)

    def live_count(self) -> int:
        """Programs held now (over the configurations in the table)."""
        return sum(jitted._cache_size() for jitted in self._table.values())

    def compiled_count(self) -> int:
        """Programs compiled so far, freed ones included."""
        return self._evicted_programs + self.live_count()

    _cache_size = compiled_count  # what jax.jit's own objects answer, for code that counts programs

    def clear(self) -> None:
        """Drop every configuration (and so its programs)."""
        self._evicted_programs += self.live_count()
        self._table.clear()


def jit_bounded(fun: Callable | None = None, *, static_argnames: Sequence[str], donate_argnames: Sequence[str] = (),
                maxsize: int = DEFAULT_MAXSIZE) -> Any:
    """``jax.jit(fun, static_argnames=..., donate_argnames=...)`` whose compiled programs are freed once
    ``maxsize`` newer static configurations have been used (see the module docstring for why).

    Usable as ``@jit_bounded(static_argnames=(...))``. Dynamic arguments are passed to the jitted function by
    name, so ``donate_argnames`` applies whether they were given by position or by name.

    Examples
    --------
    >>> @jit_bounded(static_argnames=("fn",), maxsize=2)
    ... def apply(fn, x):
    ...     return fn(x)
    >>> [float(apply(f, 1.0)) for f in (jnp.sin, jnp.cos, jnp.exp)]         # three static configurations
    [0.841..., 0.540..., 2.718...]
    >>> apply.compiled_count(), apply.live_count()               # three compiled; the oldest one freed
    (3, 2)
    """
    if fun is None:
        return functools.partial(jit_bounded, static_argnames=static_argnames, donate_argnames=donate_argnames,
                                 maxsize=maxsize)
    return BoundedJit(fun, static_argnames, donate_argnames, maxsize)


@jit_bounded(static_argnames=("fn",))
def values_at(fn: Callable, points: Any) -> Any:
    """``fn`` of one point at every point ``(N, ...)``, compiled once per function and shapes
    (:func:`jaxprobe._pointwise.map_points` in a bounded jit: a ``jax.jit`` of a new lambda per call compiled
    again every time).

    Examples
    --------
    >>> values_at(jnp.sum, jnp.ones((3, 2))).tolist()
    [2.0, 2.0, 2.0]
    """
    return map_points(fn, points)
