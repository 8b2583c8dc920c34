"""Random bits for the per-step noise of the samplers: ``jax.random.bits``, bit for bit, but unrolled.

The generator of the ``numerics="reproducible"`` mode (:mod:`jaxprobe.engine.numerics`, the
default on CPU); the ``"fast"`` mode calls ``jax.random`` itself, whose Threefry is unrolled
by XLA on GPU/TPU anyway.

JAX lowers its Threefry-2x32 hash on CPU as a rolled ``fori_loop`` of five
iterations (to keep compile times short). Inside a sampler's ``lax.scan`` that
loop runs every step as its own small while-loop with buffer copies between
rounds: for the 31,744 words of one MALA step at C = 1024, D = 30 it measured
165 µs against 36 µs for the same 20 rounds written out as one elementwise
expression, which XLA fuses into a single loop. That is a fifth of a MALA step
on CPU.

:func:`random_bits` returns exactly what ``jax.random.bits(key, (n,), dtype)``
returns (tested for equality), so samples do not depend on which path drew
them. The unrolled path applies to Threefry keys with JAX's default
``jax_threefry_partitionable=True``; any other key implementation (``rbg``,
``unsafe_rbg``, a custom one) or the legacy non-partitionable layout falls back
to ``jax.random.bits``.

:func:`random_words` is the samplers' cheaper stream: the same unrolled hash,
but both 32-bit halves of every block are used (two words per block, so half
the hashing of ``jax.random.bits``), with each row (chain) hashing only its own
counters.

Threefry-2x32 (Salmon et al. 2011, "Parallel random numbers: as easy as 1, 2, 3"):
20 rounds of add / rotate / xor on a pair of 32-bit words, with the key injected
every 4 rounds; the counter of word ``i`` is the 64-bit index ``i`` split into
(high, low) halves, as in JAX's partitionable ``random_bits``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from jaxprobe.types import Array, PRNGKey

__all__ = ["random_bits", "random_bits_at", "random_words", "uses_unrolled_threefry", "uses_threefry"]

# Rotation constants of Threefry-2x32 for rounds 0-3 and 4-7 (then repeating).
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_KEY_SCHEDULE_PARITY = 0x1BD11BDA


def _typed(key: PRNGKey) -> Array:
    """A typed key array: raw ``uint32[2]`` keys are wrapped with the default implementation."""
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    return jax.random.wrap_key_data(key)


def uses_threefry(key: PRNGKey) -> bool:
    """Whether ``key`` is a Threefry-2x32 key, so :func:`random_words` hashes it itself (a trace-time decision).

    Examples
    --------
    >>> uses_threefry(jax.random.key(0)), uses_threefry(jax.random.PRNGKey(0))     # typed or raw: the default
    (True, True)
    >>> uses_threefry(jax.random.key(0, impl="rbg"))                 # another generator: JAX's own bits
    False
    """
    return str(jax.random.key_impl(_typed(key))) == "threefry2x32"


def uses_unrolled_threefry(key: PRNGKey) -> bool:
    """Whether :func:`random_bits` takes the unrolled path for this key (a trace-time decision).

    Examples
    --------
    >>> uses_unrolled_threefry(jax.random.key(0)) == bool(jax.config.jax_threefry_partitionable)
    True
    >>> uses_unrolled_threefry(jax.random.key(0, impl="rbg"))        # not Threefry: never
    False
    """
    return uses_threefry(key) and bool(jax.config.jax_threefry_partitionable)


def _rotate_left(word: Array, distance: int) -> Array:
    return lax.shift_left(word, jnp.uint32(distance)) | lax.shift_right_logical(word, jnp.uint32(32 - distance))


def _threefry2x32(key_words: Array, high: Array, low: Array) -> tuple[Array, Array]:
    """The 20-round Threefry-2x32 hash of counter pairs ``(high, low)`` under ``key_words`` ``uint32[2]``."""
    k0, k1 = key_words[0], key_words[1]
    schedule = (k0, k1, k0 ^ k1 ^ jnp.uint32(_KEY_SCHEDULE_PARITY))
    x0 = high + schedule[0]
    x1 = low + schedule[1]
    for block in range(5):
        for distance in _ROTATIONS[block % 2]:
            x0 = x0 + x1
            x1 = x0 ^ _rotate_left(x1, distance)
        x0 = x0 + schedule[(block + 1) % 3]
        x1 = x1 + schedule[(block + 2) % 3] + jnp.uint32(block + 1)
    return x0, x1


def random_bits_at(rng_key: PRNGKey, counters: Array, dtype: Any = jnp.uint32) -> Array:
    """The words at positions ``counters`` of the stream ``jax.random.bits(rng_key, (N,), dtype)``.

    ``counters`` is a ``uint32`` array of any shape (each entry below 2**32); the
    result has its shape: ``random_bits_at(key, c)[i] == jax.random.bits(key, (N,))[c[i]]``
    for any ``N`` above ``c.max()``. Building the counters in the layout the caller
    needs (e.g. chain-major ``(C, D + 1)``) keeps each device's chains' bits on that
    device when the chain axis is sharded, with no resharding. Only for keys where
    :func:`uses_unrolled_threefry` is true.

    Examples
    --------
    >>> key = jax.random.key(0)
    >>> stream = jax.random.bits(key, (3,))
    >>> bool(jnp.all(random_bits_at(key, jnp.array([2, 0], jnp.uint32)) == stream[jnp.array([2, 0])]))
    True
    """
    dtype = jnp.dtype(dtype)
    if dtype not in (jnp.dtype(jnp.uint32), jnp.dtype(jnp.uint64)):
        raise TypeError(f"dtype must be uint32 or uint64, got {dtype}")
    if not uses_unrolled_threefry(rng_key):
        raise ValueError("random_bits_at needs a threefry2x32 key with jax_threefry_partitionable on; "
                         f"got {jax.random.key_impl(_typed(rng_key))}")
    key_words = jax.random.key_data(_typed(rng_key)).astype(jnp.uint32)
    low = jnp.asarray(counters, jnp.uint32)
    high = jnp.zeros_like(low)  # the high half of a 64-bit index below 2**32
    bits_high, bits_low = _threefry2x32(key_words, high, low)
    if dtype == jnp.dtype(jnp.uint32):
        return bits_high ^ bits_low
    return (bits_high.astype(jnp.uint64) << jnp.uint64(32)) | bits_low.astype(jnp.uint64)


def random_bits(rng_key: PRNGKey, num: int, dtype: Any = jnp.uint32) -> Array:
    """``num`` random words of ``dtype`` (uint32 or uint64): ``jax.random.bits(rng_key, (num,), dtype)``, bit for bit.

    Parameters
    ----------
    rng_key
        A typed key or a raw ``uint32[2]`` key (default implementation).
    num
        Number of words (static).
    dtype
        ``jnp.uint32`` (float32 samplers) or ``jnp.uint64`` (float64, needs ``jax_enable_x64``).

    Examples
    --------
    >>> key = jax.random.key(0)
    >>> bool(jnp.all(random_bits(key, 3) == jax.random.bits(key, (3,))))   # bit for bit
    True
    """
    dtype = jnp.dtype(dtype)
    if dtype not in (jnp.dtype(jnp.uint32), jnp.dtype(jnp.uint64)):
        raise TypeError(f"dtype must be uint32 or uint64, got {dtype}")
    if not uses_unrolled_threefry(rng_key) or num >= 2**32:
        return jax.random.bits(rng_key, (num,), dtype)
    return random_bits_at(rng_key, lax.iota(jnp.uint32, num), dtype)


def random_words(rng_key: PRNGKey, num_rows: int, num_words: int, dtype: Any = jnp.uint32) -> Array:
    """A ``(num_rows, num_words)`` block of random words; row ``r`` depends only on the key and ``r``.

    The samplers' per-step stream (row = chain). Unlike :func:`random_bits` it is
    not ``jax.random.bits``'s stream: it uses both 32-bit halves of every
    Threefry-2x32 block, so a ``uint32`` word costs half a block instead of a
    whole one (``jax.random.bits`` in its partitionable layout XORs the halves
    into one word). For ``uint32`` row ``r`` hashes the counters
    ``r·B + j``, ``j < B = ⌈num_words / 2⌉``, and its words are the first halves
    of those blocks followed by the second halves (``[x0 | x1][:num_words]``).
    For ``uint64`` (float64 samplers) each word is one block, ``x0·2³² + x1``,
    with ``B = num_words``. Because every row hashes its own counters, a chain
    axis sharded over devices computes its words locally, and the words do not
    depend on the device count.

    Other key implementations (``rbg``, ``unsafe_rbg``, custom ones), and
    ``num_rows · B ≥ 2³²``, fall back to ``jax.random.bits(rng_key, (num_rows, num_words))``.

    Examples
    --------
    >>> words = random_words(jax.random.key(0), 4, 3)          # one row per chain
    >>> words.shape, words.dtype
    ((4, 3), dtype('uint32'))
    >>> bool(jnp.all(random_words(jax.random.key(0), 2, 3) == words[:2]))   # row r depends only on key and r
    True
    """
    dtype = jnp.dtype(dtype)
    if dtype not in (jnp.dtype(jnp.uint32), jnp.dtype(jnp.uint64)):
        raise TypeError(f"dtype must be uint32 or uint64, got {dtype}")
    is_uint32 = dtype == jnp.dtype(jnp.uint32)
    blocks_per_row = (num_words + 1) // 2 if is_uint32 else num_words
    if not uses_threefry(rng_key) or num_rows * blocks_per_row >= 2**32:
        return jax.random.bits(rng_key, (num_rows, num_words), dtype)
    key_words = jax.random.key_data(_typed(rng_key)).astype(jnp.uint32)
    rows = lax.broadcasted_iota(jnp.uint32, (num_rows, blocks_per_row), 0)
    cols = lax.broadcasted_iota(jnp.uint32, (num_rows, blocks_per_row), 1)
    first, second = _threefry2x32(key_words, jnp.zeros_like(rows), rows * jnp.uint32(blocks_per_row) + cols)
    if is_uint32:
        return jnp.concatenate([first, second], axis=1)[:, :num_words]
    return (first.astype(jnp.uint64) << jnp.uint64(32)) | second.astype(jnp.uint64)
