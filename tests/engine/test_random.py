"""jaxprobe.engine.random: random_bits equals jax.random.bits bit for bit; random_words is the documented
Threefry-2x32 stream (checked against JAX's own threefry_2x32) and the samplers' noise is standard normal."""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxprobe.engine import kernels
from jax.extend.random import threefry_2x32

from jaxprobe.engine.random import random_bits, random_words, uses_unrolled_threefry

KEYS = [jax.random.key(0), jax.random.key(2**31 + 12345), jax.random.fold_in(jax.random.key(7), 123456)]


@pytest.mark.parametrize("num", [1, 2, 31, 1024 * 30 + 1024])
@pytest.mark.parametrize("key_index", range(len(KEYS)))
def test_random_bits_equal_jax_random_bits(num, key_index):
    key = KEYS[key_index]
    assert uses_unrolled_threefry(key)
    ours = jax.jit(random_bits, static_argnums=1)(key, num)
    theirs = jax.random.bits(key, (num,), jnp.uint32)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_random_bits_raw_uint32_key_and_vmap():
    raw = jax.random.PRNGKey(42)  # legacy uint32[2] key
    np.testing.assert_array_equal(np.asarray(random_bits(raw, 100)), np.asarray(jax.random.bits(raw, (100,))))
    keys = jax.random.split(jax.random.key(1), 5)
    ours = jax.vmap(lambda key: random_bits(key, 17))(keys)
    theirs = jax.vmap(lambda key: jax.random.bits(key, (17,)))(keys)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_other_key_implementations_fall_back_to_jax():
    key = jax.random.key(3, impl="rbg")
    assert not uses_unrolled_threefry(key)
    np.testing.assert_array_equal(np.asarray(random_bits(key, 64)), np.asarray(jax.random.bits(key, (64,))))


def _reference_words(key, num_rows, num_words):
    """random_words' documented stream from JAX's own Threefry-2x32 (jax.extend.random.threefry_2x32)."""
    blocks = (num_words + 1) // 2
    counters = np.arange(num_rows * blocks, dtype=np.uint32)
    # threefry_2x32 hashes the pairs (count[:n/2], count[n/2:]): high words 0, low words the counters.
    out = np.asarray(threefry_2x32(jax.random.key_data(key), jnp.concatenate([jnp.zeros_like(counters), counters])))
    first, second = out[: counters.size].reshape(num_rows, blocks), out[counters.size:].reshape(num_rows, blocks)
    return np.concatenate([first, second], axis=1)[:, :num_words]


@pytest.mark.parametrize("num_rows,num_words", [(1, 1), (3, 2), (64, 31), (1024, 30)])
@pytest.mark.parametrize("key_index", range(len(KEYS)))
def test_random_words_equal_reference_threefry(num_rows, num_words, key_index):
    key = KEYS[key_index]
    ours = jax.jit(random_words, static_argnums=(1, 2))(key, num_rows, num_words)
    np.testing.assert_array_equal(np.asarray(ours), _reference_words(key, num_rows, num_words))


def test_random_words_rows_do_not_depend_on_the_number_of_rows():
    """Row r hashes only its own counters: a chain's noise is the same whatever the chain count."""
    key = jax.random.key(9)
    np.testing.assert_array_equal(np.asarray(random_words(key, 8, 31)), np.asarray(random_words(key, 100, 31))[:8])


def test_random_words_fall_back_for_other_key_implementations():
    key = jax.random.key(3, impl="rbg")
    np.testing.assert_array_equal(np.asarray(random_words(key, 4, 7)), np.asarray(jax.random.bits(key, (4, 7))))


def test_normal_and_uniform_are_jax_random_normal_transforms_of_the_words():
    """Normals: √2·erf⁻¹ of a uniform on (−1, 1), as jax.random.normal; the uniform is word D of each row."""
    key = jax.random.key(5)
    normal, uniform = kernels.normal_and_uniform(key, 64, 30, jnp.float32)
    words = _reference_words(key, 64, 31)
    unit = (words >> np.uint32(9) | np.float32(1.0).view(np.uint32)).view(np.float32) - np.float32(1.0)
    low = np.nextafter(np.float32(-1.0), np.float32(0.0))
    expected = np.sqrt(2.0) * np.asarray(jax.scipy.special.erfinv(np.maximum(low, unit[:, :30] * (1 - low) + low)))
    np.testing.assert_allclose(np.asarray(normal), expected, rtol=0, atol=2e-6)
    np.testing.assert_array_equal(np.asarray(uniform), unit[:, 30])


def test_normal_and_uniform_single_words_match_jax_random_normal():
    """both_halves=False (RWMH's layout): jax.random.normal's values of the same key, to float32 rounding."""
    key = jax.random.key(5)
    normal, uniform = kernels.normal_and_uniform(key, 64, 30, jnp.float32, both_halves=False)
    reference = jax.random.normal(key, (64 * 30 + 64,), jnp.float32)[: 64 * 30].reshape(64, 30)
    np.testing.assert_allclose(np.asarray(normal), np.asarray(reference), rtol=0, atol=1e-6)
    assert uniform.shape == (64,) and float(uniform.min()) >= 0.0 and float(uniform.max()) < 1.0


def test_normal_and_uniform_distribution():
    """200,000 normals and 6,250 uniforms from 50 keys: Kolmogorov-Smirnov, moments, and no correlation
    between the two halves of a block (columns j and j + 17 of a row: D + 1 = 33 words, 17 blocks)."""
    from scipy import stats

    keys = jax.random.split(jax.random.key(21), 50)
    normal, uniform = jax.vmap(lambda k: kernels.normal_and_uniform(k, 125, 32, jnp.float32))(keys)
    normal = np.asarray(normal, np.float64).reshape(-1, 32)
    assert stats.kstest(normal.ravel(), "norm").pvalue > 1e-3
    assert stats.kstest(np.asarray(uniform).ravel(), "uniform").pvalue > 1e-3
    n = normal.size
    assert abs(normal.mean()) < 4 / np.sqrt(n) and abs(normal.var() - 1) < 4 * np.sqrt(2 / n)
    pair_correlation = np.mean(normal[:, :15] * normal[:, 17:])  # the two halves of blocks 0..14
    assert abs(pair_correlation) < 4 / np.sqrt(normal[:, :15].size)


def test_random_bits_uint64_under_x64():
    code = textwrap.dedent("""
        import jax, jax.numpy as jnp, numpy as np
        jax.config.update("jax_enable_x64", True)
        from jaxprobe.engine.random import random_bits
        key = jax.random.key(11)
        ours = np.asarray(random_bits(key, 333, jnp.uint64))
        theirs = np.asarray(jax.random.bits(key, (333,), jnp.uint64))
        assert ours.dtype == np.uint64 and (ours == theirs).all()
        # random_words for float64 samplers: one block per word, x0 * 2**32 + x1, counters r * W + j.
        from jax.extend.random import threefry_2x32
        from jaxprobe.engine.random import random_words
        words = np.asarray(random_words(key, 3, 5, jnp.uint64))
        counters = np.arange(15, dtype=np.uint32)
        halves = np.asarray(threefry_2x32(jax.random.key_data(key), np.concatenate([np.zeros(15, np.uint32), counters])))
        expected = (halves[:15].astype(np.uint64) << np.uint64(32)) | halves[15:].astype(np.uint64)
        assert (words == expected.reshape(3, 5)).all()
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout


def test_random_bits_rejects_other_dtypes():
    with pytest.raises(TypeError, match="dtype"):
        random_bits(jax.random.key(0), 4, jnp.int32)
