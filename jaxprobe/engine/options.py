"""Kernel options declared with the kernel's fields, validated like keyword arguments.

Every option of a kernel (``sampler_options={...}`` of :func:`jaxprobe.sample`,
:func:`jaxprobe.generate`, :func:`jaxprobe.sweep`, a configuration file's
``[sampler] options`` table) is a field of the kernel's frozen dataclass, declared
with :func:`int_option`, :func:`float_option` or :func:`choice_option`. The
declaration carries the type and range; :func:`validate_options` (called by the
kernels' ``__post_init__``) checks every field when the kernel is built, which is
before anything compiles, and stores the value in its canonical Python type (so
that equal options give equal, equally hashed kernels: one compiled program)::

    @dataclasses.dataclass(frozen=True)
    class MyKernel(GradientKernel):
        name: ClassVar[str] = "mine"
        num_steps: int = int_option(10, minimum=1, doc="leapfrog steps per transition")

Why: ``num_integration_steps=0`` ran a sampler that never moved, a target
acceptance rate of 5 adapted the step size to 0 and froze every chain, and
``max_num_doublings=0`` or a float step count crashed inside JAX.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from jaxprobe._inputs import check_int, check_number

__all__ = ["Option", "int_option", "float_option", "choice_option", "engine_field", "option_specs",
           "validate_options", "check_option_names"]

_KEY = "jaxprobe_option"
_ENGINE_KEY = "jaxprobe_engine_setting"


@dataclasses.dataclass(frozen=True)
class Option:
    """The declared form of one kernel option.

    ``kind``: ``"int"`` (an integer, never a bool or a float such as 10.0), ``"float"``
    (a finite real number, never a bool) or ``"choice"`` (one of ``choices``).
    ``minimum`` / ``maximum``: bounds, exclusive where ``exclusive_minimum`` /
    ``exclusive_maximum``. ``allow_none``: ``None`` is accepted too (e.g. "automatic").

    Examples
    --------
    >>> option = Option("int", minimum=1, allow_none=True)
    >>> option.expected(), option.check("my_kernel", "num_steps", 5), option.check("my_kernel", "num_steps", None)
    ('None or an int >= 1', 5, None)
    >>> option.check("my_kernel", "num_steps", 0)
    Traceback (most recent call last):
        ...
    ValueError: sampler_options['num_steps'] for 'my_kernel' must be None or an int >= 1, got 0
    """

    kind: str
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    choices: tuple[Any, ...] = ()
    allow_none: bool = False
    doc: str = ""

    def expected(self) -> str:
        """The accepted values in words, for error messages (e.g. ``"an int >= 1"``)."""
        if self.kind == "choice":
            text = f"one of {', '.join(map(repr, self.choices))}"
        else:
            noun = "an int" if self.kind == "int" else "a number"
            low, high = self.minimum, self.maximum
            if low is not None and high is not None:
                text = (f"{noun} in {'(' if self.exclusive_minimum else '['}{low:g}, {high:g}"
                        f"{')' if self.exclusive_maximum else ']'}")
            elif low is not None:
                text = f"{noun} {'>' if self.exclusive_minimum else '>='} {low:g}"
            elif high is not None:
                text = f"{noun} {'<' if self.exclusive_maximum else '<='} {high:g}"
            else:
                text = noun if self.kind == "int" else "a finite number"
        return f"None or {text}" if self.allow_none else text

    def check(self, sampler: str, name: str, value: Any) -> Any:
        """``value`` in its canonical type (int, float or the choice itself), or raise.

        Raises ``TypeError`` for a value of the wrong type (a bool or a float where an int
        is expected, a string where a number is) and ``ValueError`` for one out of range;
        both name ``sampler_options[name]``, the sampler and the accepted values.
        """
        if value is None and self.allow_none:
            return None
        where = f"sampler_options[{name!r}] for {sampler!r} must be {self.expected()}, got {value!r}"
        if self.kind == "choice":
            if not any(value == choice and type(value) is type(choice) for choice in self.choices):
                raise ValueError(where)
            return value
        try:  # the type (and finiteness), as every numeric argument is checked; the message says more here
            value = check_int(value, name) if self.kind == "int" else check_number(value, name)
        except TypeError:
            raise TypeError(f"{where} ({type(value).__name__})") from None
        except ValueError:
            raise ValueError(where) from None
        if self.minimum is not None and (value <= self.minimum if self.exclusive_minimum else value < self.minimum):
            raise ValueError(where)
        if self.maximum is not None and (value >= self.maximum if self.exclusive_maximum else value > self.maximum):
            raise ValueError(where)
        return value


def _field(default: Any, spec: Option) -> Any:
    return dataclasses.field(default=default, metadata={_KEY: spec})


def int_option(default: int | None, *, minimum: int | None = None, maximum: int | None = None,
               allow_none: bool = False, doc: str = "") -> Any:
    """A dataclass field holding an integer option in ``[minimum, maximum]``.

    Examples
    --------
    >>> import dataclasses
    >>> from typing import ClassVar
    >>> @dataclasses.dataclass(frozen=True)
    ... class MyKernel:
    ...     name: ClassVar[str] = "my_kernel"                  # a kernel's name (not an option)
    ...     num_steps: int = int_option(10, minimum=1, doc="leapfrog steps")
    ...     def __post_init__(self):
    ...         validate_options(self)
    >>> MyKernel(num_steps=10.0)                              # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    TypeError: ...num_steps...
    """
    return _field(default, Option("int", minimum, maximum, allow_none=allow_none, doc=doc))


def float_option(default: float, *, minimum: float | None = None, maximum: float | None = None,
                 exclusive_minimum: bool = False, exclusive_maximum: bool = False, doc: str = "") -> Any:
    """A dataclass field holding a finite real option between ``minimum`` and ``maximum``.

    Examples
    --------
    >>> import dataclasses
    >>> from typing import ClassVar
    >>> @dataclasses.dataclass(frozen=True)
    ... class MyKernel:
    ...     name: ClassVar[str] = "my_kernel"                  # a kernel's name (not an option)
    ...     scale: float = float_option(1.0, minimum=0.0, exclusive_minimum=True, doc="proposal scale")
    ...     def __post_init__(self):
    ...         validate_options(self)
    >>> MyKernel(scale=0.5).scale
    0.5
    >>> MyKernel(scale=-1.0)                                   # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: ...scale...
    """
    return _field(default, Option("float", minimum, maximum, exclusive_minimum, exclusive_maximum, doc=doc))


def choice_option(default: Any, choices: tuple[Any, ...], *, doc: str = "") -> Any:
    """A dataclass field holding one of ``choices`` (compared by value and type).

    Examples
    --------
    >>> import dataclasses
    >>> from typing import ClassVar
    >>> @dataclasses.dataclass(frozen=True)
    ... class MyKernel:
    ...     name: ClassVar[str] = "my_kernel"                  # a kernel's name (not an option)
    ...     kernel: str = choice_option("mala", ("mala", "hmc"), doc="the move")
    ...     def __post_init__(self):
    ...         validate_options(self)
    >>> MyKernel(kernel="hmc").kernel
    'hmc'
    >>> MyKernel(kernel="nuts")                               # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: ...kernel...
    """
    return _field(default, Option("choice", choices=tuple(choices), doc=doc))


def engine_field(default: Any, *, doc: str = "") -> Any:
    """A keyword-only dataclass field the engine sets (e.g. the numerics policy,
    :func:`jaxprobe.engine.numerics.numerics_field`), not a sampler option: not listed by
    :func:`option_specs`, not accepted in ``sampler_options``.

    Examples
    --------
    >>> import dataclasses
    >>> from typing import ClassVar
    >>> @dataclasses.dataclass(frozen=True)
    ... class MyKernel:
    ...     name: ClassVar[str] = "my_kernel"
    ...     num_steps: int = int_option(10, minimum=1, doc="leapfrog steps")
    ...     precision: str = engine_field("high", doc="set by the engine")
    >>> list(option_specs(MyKernel)), MyKernel(precision="low").precision   # not an option; keyword-only
    (['num_steps'], 'low')
    """
    return dataclasses.field(default=default, kw_only=True, metadata={_ENGINE_KEY: doc or True})


def option_specs(kernel_class: type) -> dict[str, Option]:
    """The declared options of a kernel dataclass, by field name (in field order).

    Raises ``TypeError`` naming a field that was declared without an option helper: every
    field of a kernel is an option and must say what it accepts (fields declared with
    :func:`engine_field` are the engine's, not options, and are left out).

    Examples
    --------
    >>> from jaxprobe.engine import MALA
    >>> spec = option_specs(MALA)["target_acceptance_rate"]
    >>> spec.kind, spec.minimum, spec.maximum, spec.exclusive_minimum
    ('float', 0.0, 1.0, True)
    """
    if not dataclasses.is_dataclass(kernel_class):
        raise TypeError(f"{getattr(kernel_class, '__name__', kernel_class)!r} must be a frozen dataclass "
                        "(its fields are the sampler's options)")
    specs = {}
    for field in dataclasses.fields(kernel_class):
        if field.metadata.get(_ENGINE_KEY):
            continue
        spec = field.metadata.get(_KEY)
        if spec is None:
            raise TypeError(f"{kernel_class.__name__}.{field.name} must be declared with int_option, float_option "
                            "or choice_option (jaxprobe.engine.options), which say what values it accepts")
        specs[field.name] = spec
    return specs


def validate_options(kernel: Any) -> None:
    """Check every option field of ``kernel`` (a frozen dataclass) and store its canonical value.

    Called from the kernels' ``__post_init__``; raises as :meth:`Option.check` does.

    Examples
    --------
    >>> import dataclasses
    >>> from typing import ClassVar
    >>> @dataclasses.dataclass(frozen=True)
    ... class MyKernel:
    ...     name: ClassVar[str] = "my_kernel"
    ...     scale: float = float_option(1.0, minimum=0.0, exclusive_minimum=True, doc="proposal scale")
    ...     def __post_init__(self):
    ...         validate_options(self)
    >>> scale = MyKernel(scale=np.float32(0.5)).scale            # stored in its canonical type
    >>> type(scale).__name__, scale, MyKernel(scale=np.float32(0.5)) == MyKernel(scale=0.5)
    ('float', 0.5, True)
    """
    for name, spec in option_specs(type(kernel)).items():
        object.__setattr__(kernel, name, spec.check(kernel.name, name, getattr(kernel, name)))


def check_option_names(sampler: str, kernel_class: type, options: Mapping[str, Any]) -> None:
    """Reject keys of ``options`` that are not options of ``kernel_class``, naming the known ones.

    Examples
    --------
    >>> from jaxprobe.engine import MALA
    >>> check_option_names("mala", MALA, {"step": 1})         # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    TypeError: sampler_options for 'mala': unknown option(s) 'step'; 'mala' takes target_acceptance_rate ...
    """
    known = option_specs(kernel_class)
    unknown = [key for key in options if key not in known]
    if unknown:
        takes = (f"{sampler!r} takes " + ", ".join(f"{name} ({spec.expected()})" for name, spec in known.items())
                 if known else f"{sampler!r} takes no options")
        raise TypeError(f"sampler_options for {sampler!r}: unknown option(s) {', '.join(map(repr, unknown))}; "
                        f"{takes}")
