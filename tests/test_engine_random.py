"""The unrolled Threefry of jaxprobe.engine.random equals jax.random.bits bit for bit."""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxprobe.engine import kernels
from jaxprobe.engine.random import random_bits, uses_unrolled_threefry

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


def test_normal_and_uniform_matches_jax_random_normal_construction():
    """The normals are jax.random.normal's transform of the same bits: equal to float32 rounding."""
    key = jax.random.key(5)
    normal, uniform = kernels.normal_and_uniform(key, 64, 30, jnp.float32)
    reference = jax.random.normal(key, (64 * 30 + 64,), jnp.float32)[: 64 * 30].reshape(64, 30)
    np.testing.assert_allclose(np.asarray(normal), np.asarray(reference), rtol=0, atol=1e-6)
    assert uniform.shape == (64,) and float(uniform.min()) >= 0.0 and float(uniform.max()) < 1.0


def test_random_bits_uint64_under_x64():
    code = textwrap.dedent("""
        import jax, jax.numpy as jnp, numpy as np
        jax.config.update("jax_enable_x64", True)
        from jaxprobe.engine.random import random_bits
        key = jax.random.key(11)
        ours = np.asarray(random_bits(key, 333, jnp.uint64))
        theirs = np.asarray(jax.random.bits(key, (333,), jnp.uint64))
        assert ours.dtype == np.uint64 and (ours == theirs).all()
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout


def test_random_bits_rejects_other_dtypes():
    with pytest.raises(TypeError, match="dtype"):
        random_bits(jax.random.key(0), 4, jnp.int32)
