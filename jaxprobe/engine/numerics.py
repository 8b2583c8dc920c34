"""The engine's one numerics policy: ``numerics="reproducible"`` or ``numerics="fast"``.

Every measure the engine takes for batch invariance (the same bits for any number of
devices the chains are sharded over) or for speed on one platform lives here, behind
one switch, and nowhere else in the maths. Reproducible / fast:

- per-step noise and uniforms (:meth:`Numerics.normal_and_uniform`,
  :meth:`Numerics.random_words`): Threefry-2x32 written out unrolled, hashed from each
  chain's own counters (:mod:`jaxprobe.engine.random`; two words per block for MALA, one
  for RWMH) / ``jax.random.split``, ``jax.random.normal``, ``jax.random.uniform``;
- sums and means over chains (:meth:`Numerics.chain_sum`, :meth:`Numerics.chain_mean`):
  a fixed pairwise tree of elementwise adds (:func:`pairwise_chain_sum`) / ``jnp.sum``,
  ``jnp.mean`` (XLA's own reductions, one all-reduce when the chains are sharded);
- multiply-add contraction (:meth:`Numerics.fma_barrier`): values passed through an
  integer xor with a zero the compiler cannot see (:func:`materialize`) / nothing;
- the metric of HMC, NUTS and ChEES (:meth:`Numerics.metric`): BlackJAX's diagonal metric
  with ``dot`` replaced by multiply-and-sum (:func:`diagonal_metric`) / BlackJAX's as it is;
- ChEES adaptation (:class:`jaxprobe.engine.chees.ChEESAdaptation`): BlackJAX's update
  with the tree sums and barriers / BlackJAX's ``chees_adaptation`` building blocks.

``"reproducible"`` is the engine as it was before the switch existed, bit for bit (the
same compiled programs): the same key gives the same draws on one CPU device or many
(``tests/engine/test_api_devices.py``), and its unrolled hash is 4.5x faster than JAX's own
rolled Threefry loop on CPU. Both measures are for CPUs: JAX lowers Threefry as a rolled
loop only on CPU (on GPU/TPU the unrolled hash gains nothing), and the trees and barriers
add work where one all-reduce would do. ``"fast"`` is plain JAX and BlackJAX: the same
distribution (tested on known answers, ``tests/engine/test_numerics.py``) and deterministic for a
fixed key on a fixed set of devices, but not bit-identical across device counts.

The default, ``numerics=None`` in :func:`jaxprobe.sample`, ``generate`` and ``sweep``, is
per platform (:func:`default_numerics`): ``"reproducible"`` when the run's devices are
CPUs, ``"fast"`` on GPUs and TPUs.

A :class:`Numerics` is a frozen, hashable value: a field of every built-in kernel
(``MALA(numerics="fast")``, :func:`numerics_field`), so it is part of the static
configuration that ``jax.jit`` compiles for; there is no global state. The engine hands
the run's policy to a kernel with :func:`with_numerics`; a registered kernel that declares
``numerics: Numerics = numerics_field()`` receives it too (one without the field keeps its
own arithmetic, and its warmup sums as ``"reproducible"`` does).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

import jax
import jax.numpy as jnp
from blackjax.mcmc import metrics as bj_metrics

from jaxprobe.engine.options import engine_field
from jaxprobe.engine.random import random_bits_at, random_words, uses_unrolled_threefry
from jaxprobe.types import Array, PRNGKey

__all__ = ["MODES", "Numerics", "REPRODUCIBLE", "FAST", "check_numerics", "default_numerics", "resolve_numerics",
           "as_numerics", "numerics_field", "with_numerics", "numerics_of", "normal_and_uniform",
           "pairwise_chain_sum", "materialize", "diagonal_metric", "in_positions_dtype"]

def in_positions_dtype(logdensity_fn: Any) -> Any:
    """``logdensity_fn`` of one position ``(D,)`` with its value cast to the position's dtype.

    Under ``jax_enable_x64`` a target closing over float64 constants (NumPy arrays, a model's float64
    weights) returns float64 for float32 positions; the samplers' states and loop carries keep the
    positions' dtype, so the value is cast (a no-op when the dtypes agree: draws unchanged).

    Examples
    --------
    >>> logdensity = lambda x: -0.5 * jnp.sum(x.astype(jnp.float32) ** 2)   # computes in float32
    >>> value = in_positions_dtype(logdensity)(jnp.ones(2, jnp.float16))
    >>> value.dtype, float(value)                               # in the positions' dtype
    (dtype('float16'), -1.0)
    """
    def typed(position: Array) -> Array:
        return jnp.asarray(logdensity_fn(position)).astype(position.dtype)

    return typed


#: The accepted values of ``numerics=`` (besides ``None``: per platform).
MODES = ("reproducible", "fast")


def check_numerics(value: Any, name: str = "numerics") -> str | None:
    """``value`` as a mode name, or ``None`` (per platform), checked before anything compiles.

    Accepts ``None``, ``"reproducible"``, ``"fast"`` or a :class:`Numerics`. Raises ``TypeError``
    for anything that is not a string (``numerics=1``) and ``ValueError`` for an unknown name
    (``numerics="quick"``); both messages name ``name`` and the accepted values.

    Examples
    --------
    >>> check_numerics("fast"), check_numerics(None)            # None: decided per platform later
    ('fast', None)
    >>> check_numerics("quick")
    Traceback (most recent call last):
        ...
    ValueError: numerics must be None (per platform), 'reproducible' or 'fast', got 'quick'
    """
    if value is None:
        return None
    if isinstance(value, Numerics):
        return value.mode
    if not isinstance(value, str):
        raise TypeError(f"{name} must be None (per platform), 'reproducible' or 'fast', got "
                        f"{type(value).__name__} {value!r}")
    if value not in MODES:
        raise ValueError(f"{name} must be None (per platform), 'reproducible' or 'fast', got {value!r}")
    return value


def default_numerics(devices: Iterable[Any] | None = None) -> str:
    """The mode of ``numerics=None`` for a run on ``devices`` (default: ``jax.devices()``).

    ``"reproducible"`` when every device is a CPU (the batch-invariant sums and the unrolled
    hash are measures for CPUs), ``"fast"`` on GPUs and TPUs (and on a mix of platforms).

    Examples
    --------
    >>> default_numerics(jax.devices("cpu"))                   # "fast" on GPUs and TPUs
    'reproducible'
    """
    devices = list(jax.devices() if devices is None else devices)
    return "reproducible" if all(device.platform == "cpu" for device in devices) else "fast"


def resolve_numerics(value: Any, devices: Iterable[Any] | None = None) -> "Numerics":
    """The policy of a run: ``value`` checked (:func:`check_numerics`), ``None`` decided by ``devices``.

    Examples
    --------
    >>> resolve_numerics("fast"), resolve_numerics(None, jax.devices("cpu"))
    (Numerics('fast'), Numerics('reproducible'))
    """
    mode = check_numerics(value)
    return Numerics(default_numerics(devices) if mode is None else mode)


def as_numerics(value: Any) -> "Numerics":
    """A :class:`Numerics` from a policy or a mode name (``None`` is refused: a kernel's policy is decided).

    Examples
    --------
    >>> as_numerics("fast") == FAST, as_numerics(REPRODUCIBLE) is REPRODUCIBLE
    (True, True)
    """
    if value is None:
        raise TypeError("numerics must be 'reproducible' or 'fast' (or a Numerics) here, got None; "
                        "sample(numerics=None) decides it from the run's devices")
    return value if isinstance(value, Numerics) else Numerics(check_numerics(value))


# ---------------------------------------------------------------- the reproducible pieces


def normal_and_uniform(rng_key: PRNGKey, num_chains: int, dim: int, dtype: Any,
                       both_halves: bool = True) -> tuple[Array, Array]:
    """The reproducible generator: ``(C, D)`` standard normals and ``(C,)`` uniforms on [0, 1) from ONE
    batched bits call.

    The same transforms as ``jax.random.normal`` (uniform on (−1, 1) mapped by
    √2·erf⁻¹) and ``jax.random.uniform`` (random mantissa bits), applied to
    ``(C, D + 1)`` random words: words ``0..D−1`` of row ``c`` give chain ``c``'s
    noise and word ``D`` its uniform. Each chain's words depend only on the key
    and the chain index, so samples do not depend on the device count. Both
    generators are Threefry-2x32 written out as one elementwise expression
    (JAX's own lowering on CPU is a rolled loop, 4.5x slower):

    - ``both_halves=True``: :func:`jaxprobe.engine.random.random_words`, two
      words per Threefry block (half the hashing; MALA's step is 8% faster at
      C = 1024, D = 30 on CPU);
    - ``both_halves=False``: one block per word, the words of
      ``jax.random.bits(rng_key, (C·D + C,))`` laid out chain-major (word
      ``c·D + d`` is noise ``(c, d)``, word ``C·D + c`` chain ``c``'s uniform).
      RWMH uses this layout: XLA:CPU recomputes the noise inside the fusion that
      evaluates an elementwise log density, and with the paired words that fused
      evaluation differed in the last bit between 1 and 4 devices
      (``tests/engine/test_api_devices.py``); with this layout they agree.

    Examples
    --------
    >>> generate = jax.jit(normal_and_uniform, static_argnums=(1, 2, 3))      # as inside a sampler's step
    >>> normal, uniform = generate(jax.random.key(0), 1000, 3, jnp.float32)  # C = 1000, D = 3
    >>> normal.shape, uniform.shape, bool(jnp.all((uniform >= 0) & (uniform < 1)))
    ((1000, 3), (1000,), True)
    >>> bool(abs(normal.mean()) < 0.1 and abs(normal.std() - 1) < 0.1 and abs(uniform.mean() - 0.5) < 0.05)
    True
    >>> first, _ = generate(jax.random.key(0), 8, 3, jnp.float32)   # 8 chains: the same first rows
    >>> bool(jnp.all(first == normal[:8]))
    True
    """
    dtype = jnp.dtype(dtype)
    finfo = jnp.finfo(dtype)
    bit_width = finfo.bits
    uint = {32: jnp.uint32, 64: jnp.uint64}[bit_width]
    if both_halves:
        bits = random_words(rng_key, num_chains, dim + 1, uint)
    elif uses_unrolled_threefry(rng_key) and num_chains * (dim + 1) < 2**32:
        rows = jax.lax.broadcasted_iota(jnp.uint32, (num_chains, dim + 1), 0)
        cols = jax.lax.broadcasted_iota(jnp.uint32, (num_chains, dim + 1), 1)
        counters = jnp.where(cols < dim, rows * jnp.uint32(dim) + cols, jnp.uint32(num_chains * dim) + rows)
        bits = random_bits_at(rng_key, counters, uint)
    else:
        flat = jax.random.bits(rng_key, (num_chains * (dim + 1),), uint)
        bits = jnp.concatenate([flat[: num_chains * dim].reshape(num_chains, dim),
                                flat[num_chains * dim:, None]], axis=1)
    one = jnp.array(1.0, dtype).view(uint)
    uniform = jax.lax.bitcast_convert_type((bits >> (bit_width - finfo.nmant)) | one, dtype) - 1.0  # (C, D + 1)
    low = jnp.nextafter(jnp.array(-1.0, dtype), jnp.array(0.0, dtype))
    symmetric = jnp.maximum(low, uniform[:, :dim] * (1.0 - low) + low)
    normal = jnp.sqrt(jnp.array(2.0, dtype)) * jax.lax.erf_inv(symmetric)
    return normal, uniform[:, dim]


def pairwise_chain_sum(values: Array) -> Array:
    """Sum over the leading chain axis by a fixed pairwise tree of elementwise adds.

    A plain ``jnp.sum`` over a sharded axis is split into per-device partial sums
    plus an all-reduce, whose rounding depends on the device count. Elementwise
    adds are exact functions of their inputs wherever they run, so this tree
    gives bit-identical cross-chain statistics on one device or many.

    Examples
    --------
    >>> float(pairwise_chain_sum(jnp.arange(5.0)))              # a fixed tree of adds, for any device count
    10.0
    """
    while values.shape[0] > 1:
        if values.shape[0] % 2:
            values = jnp.concatenate([values, jnp.zeros_like(values[:1])], axis=0)
        pairs = values.reshape((values.shape[0] // 2, 2) + values.shape[1:])
        values = pairs[:, 0] + pairs[:, 1]
    return values[0]


def materialize(values: Array, opaque_zero: Array) -> Array:
    """``values`` unchanged, but rounded to their dtype at this point in every compiled program.

    XLA:CPU contracts a multiply that feeds an add into one fused multiply-add
    (openxla/xla#41579) whenever both land in the same fusion, and which ops
    share a fusion differs between the one-device program and the sharded one
    (the partitioner cuts fusions at its collectives): the same sum of products
    then rounds differently. Passing the bits through an integer xor with a zero
    the compiler cannot see (``opaque_zero``, e.g. from a scan counter) blocks the
    contraction in both programs; ``optimization_barrier`` and ``reduce_precision``
    do not (XLA removes or ignores them before code generation).

    Examples
    --------
    >>> scaled = jax.jit(lambda x, step: materialize(x * 3.0, step * 0))   # a zero XLA cannot see through
    >>> scaled(jnp.array([0.5, 2.0]), 7).tolist()                          # the values are unchanged
    [1.5, 6.0]
    """
    uint = {4: jnp.uint32, 8: jnp.uint64}[jnp.dtype(values.dtype).itemsize]
    bits = jax.lax.bitcast_convert_type(values, uint) ^ opaque_zero.astype(uint)
    return jax.lax.bitcast_convert_type(bits, values.dtype)


def diagonal_metric(inverse_mass_matrix: Array) -> bj_metrics.Metric:
    """BlackJAX's diagonal Gaussian-Euclidean metric with ``jnp.dot`` replaced by elementwise sums.

    Under ``vmap`` a ``dot`` becomes a batched matmul whose CPU kernel, and so its
    rounding, depends on how many chains share a device; a multiply-and-sum does
    not. This keeps HMC/NUTS draws bit-identical for any device count.

    Examples
    --------
    >>> metric = diagonal_metric(jnp.array([1.0, 4.0]))          # inverse mass matrix diag(1, 4)
    >>> float(metric.kinetic_energy(jnp.array([1.0, 1.0])))     # ½ Σ M⁻¹ p²
    2.5
    """
    metric = bj_metrics.gaussian_euclidean(inverse_mass_matrix)

    def kinetic_energy(momentum: Array, position: Array | None = None) -> Array:
        del position
        return 0.5 * jnp.sum(inverse_mass_matrix * momentum * momentum)

    def check_turning(momentum_left, momentum_right, momentum_sum, position_left=None, position_right=None):
        del position_left, position_right
        rho = momentum_sum - (momentum_right + momentum_left) / 2
        turning_at_left = jnp.sum(inverse_mass_matrix * momentum_left * rho) <= 0
        turning_at_right = jnp.sum(inverse_mass_matrix * momentum_right * rho) <= 0
        return turning_at_left | turning_at_right

    return metric._replace(kinetic_energy=kinetic_energy, check_turning=check_turning)


# ---------------------------------------------------------------- the policy


@dataclasses.dataclass(frozen=True)
class Numerics:
    """The numerics policy of a run: ``Numerics("reproducible")`` or ``Numerics("fast")`` (module docstring).

    Frozen and hashable: a static part of the kernel (and so of every compiled program).
    Its methods are the only place the engine's maths asks how to draw noise, sum over
    chains or order a multiply-add.

    Examples
    --------
    >>> Numerics("fast"), Numerics("fast") == FAST                # what sample(..., numerics="fast") uses
    (Numerics('fast'), True)
    >>> Numerics("quick")                                       # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: ...
    """

    mode: str = "reproducible"

    def __post_init__(self) -> None:
        mode = check_numerics(self.mode)
        if mode is None:
            raise TypeError("numerics: Numerics(mode) needs 'reproducible' or 'fast', got None")
        object.__setattr__(self, "mode", mode)

    def __repr__(self) -> str:
        return f"Numerics({self.mode!r})"

    @property
    def reproducible(self) -> bool:
        """Whether draws are bit-identical across device counts (the batch-invariant pieces are on)."""
        return self.mode == "reproducible"

    # Random numbers.

    def random_words(self, rng_key: PRNGKey, num_rows: int, num_words: int, dtype: Any = jnp.uint32) -> Array:
        """``(num_rows, num_words)`` random words; reproducible: row r depends only on the key and r
        (:func:`jaxprobe.engine.random.random_words`), fast: ``jax.random.bits``."""
        if self.reproducible:
            return random_words(rng_key, num_rows, num_words, dtype)
        return jax.random.bits(rng_key, (num_rows, num_words), dtype)

    def normal_and_uniform(self, rng_key: PRNGKey, num_chains: int, dim: int, dtype: Any,
                           paired: bool = True) -> tuple[Array, Array]:
        """``(C, D)`` standard normals and ``(C,)`` uniforms on [0, 1) for one step of all chains.

        Reproducible: :func:`normal_and_uniform` (``paired`` is its ``both_halves``: two words
        per Threefry block, or one, the layout RWMH needs for bit-identity). Fast:
        ``jax.random.normal`` (``C·D`` values, reshaped) and ``jax.random.uniform`` of the two
        halves of ``jax.random.split(rng_key)`` (``paired`` has no effect).
        """
        if self.reproducible:
            return normal_and_uniform(rng_key, num_chains, dim, dtype, both_halves=paired)
        key_normal, key_uniform = jax.random.split(rng_key)
        # One flat normal call, reshaped: on CPU 1.3x faster per MALA step than a (C, D) one (C = 1024, D = 30).
        return (jax.random.normal(key_normal, (num_chains * dim,), dtype).reshape(num_chains, dim),
                jax.random.uniform(key_uniform, (num_chains,), dtype))

    # Reductions over chains.

    def opaque_zero(self, counter: Array) -> Array:
        """A zero the compiler cannot prove (from a non-negative counter it cannot see the sign of), for
        :meth:`fma_barrier`."""
        return jnp.minimum(counter, 0)

    def fma_barrier(self, values: Array, opaque_zero: Array) -> Array:
        """Reproducible: :func:`materialize` (no multiply-add contraction across this point); fast: ``values``."""
        return materialize(values, opaque_zero) if self.reproducible else values

    def chain_sum(self, values: Array, opaque_zero: Array | None = None) -> Array:
        """Sum over the leading chain axis. Reproducible: :func:`pairwise_chain_sum` (with its input and
        result behind :meth:`fma_barrier` when ``opaque_zero`` is given); fast: ``jnp.sum(values, axis=0)``."""
        if not self.reproducible:
            return jnp.sum(values, axis=0)
        if opaque_zero is None:
            return pairwise_chain_sum(values)
        return materialize(pairwise_chain_sum(materialize(values, opaque_zero)), opaque_zero)

    def chain_mean(self, values: Array, opaque_zero: Array | None = None) -> Array:
        """Mean over the leading chain axis (:meth:`chain_sum` divided by C; fast: ``jnp.mean``)."""
        if not self.reproducible:
            return jnp.mean(values, axis=0)
        return self.chain_sum(values, opaque_zero) / values.shape[0]

    # Metric of the HMC family.

    def metric(self, inverse_mass_matrix: Array) -> bj_metrics.Metric:
        """BlackJAX's diagonal metric of one chain: reproducible :func:`diagonal_metric` (multiply-and-sum),
        fast ``blackjax.mcmc.metrics.gaussian_euclidean`` as it is."""
        if self.reproducible:
            return diagonal_metric(inverse_mass_matrix)
        return bj_metrics.gaussian_euclidean(inverse_mass_matrix)


#: The two policies.
REPRODUCIBLE = Numerics("reproducible")
FAST = Numerics("fast")


def numerics_field() -> Any:
    """The ``numerics`` field of a kernel dataclass: keyword-only, default :data:`REPRODUCIBLE`, set by the
    engine from the run's ``numerics=`` (:func:`with_numerics`), not a sampler option.

    Examples
    --------
    >>> import dataclasses
    >>> @dataclasses.dataclass(frozen=True)
    ... class MyKernel:
    ...     numerics: Numerics = numerics_field()                 # set by the engine from sample(numerics=...)
    >>> MyKernel().numerics
    Numerics('reproducible')
    """
    return engine_field(REPRODUCIBLE, doc="the numerics policy (jaxprobe.engine.numerics)")


def numerics_of(obj: Any) -> Numerics:
    """The policy of a kernel (or of an adaptation's kernel): its ``numerics`` field, else :data:`REPRODUCIBLE`.

    Examples
    --------
    >>> from jaxprobe.engine import MALA
    >>> numerics_of(MALA()), numerics_of(MALA(numerics=FAST))
    (Numerics('reproducible'), Numerics('fast'))
    """
    value = getattr(obj, "numerics", None)
    if value is None and hasattr(obj, "kernel") and not isinstance(getattr(obj, "kernel"), str):
        value = getattr(obj.kernel, "numerics", None)
    return value if isinstance(value, Numerics) else REPRODUCIBLE


def with_numerics(kernel: Any, numerics: Any) -> Any:
    """``kernel`` with the run's policy: a copy with its ``numerics`` field replaced, or ``kernel`` itself
    when it declares no such field (a registered kernel with its own arithmetic).

    Examples
    --------
    >>> from jaxprobe.engine import MALA
    >>> with_numerics(MALA(), "fast")                          # a copy under the run's policy
    MALA(target_acceptance_rate=0.574, numerics=Numerics('fast'))
    """
    numerics = as_numerics(numerics)
    if not dataclasses.is_dataclass(kernel) or "numerics" not in {f.name for f in dataclasses.fields(kernel)}:
        return kernel
    if kernel.numerics == numerics:
        return kernel
    return dataclasses.replace(kernel, numerics=numerics)
