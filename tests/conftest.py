"""Strict JAX settings for the test suite and shared helpers."""

import os
import pathlib
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from blackjax import diagnostics

#: XLA's compiled programs are kept on disk (JAX's persistent compilation cache) and shared by every process of the
#: run: the xdist workers, and the CLI, example and notebook subprocesses that compile what a test in another process
#: compiled already (a test spends ~80% of its time compiling). Set in the environment, which subprocesses inherit,
#: and in jax.config for this process (JAX read the environment when a plugin or the imports above imported it);
#: a cache dir the caller set wins. Every program counts as compiled for the compile_counter fixture
#: (jaxprobe._compiles) whether XLA built it or the cache handed it over (a test that counts compiles asserts what it
#: did with the cache cold or warm).
TEST_COMPILATION_CACHE = pathlib.Path(__file__).resolve().parents[1] / ".pytest_cache" / "jax-compilation-cache"
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(TEST_COMPILATION_CACHE))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")   # test programs compile in < 1 s each
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
# No size bound: with one, JAX stats every entry on each write (tens of seconds a minute at 4,000 entries, under a
# lock the other workers wait on); pytest_sessionstart below empties the cache once it outgrows CACHE_LIMIT_BYTES.
# Unlocked, a process that reads an entry another is still writing gets JAX's "Error reading persistent compilation
# cache entry" warning and compiles the program itself: the same program, only slower.
CACHE_LIMIT_BYTES = 1024**3
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update("jax_persistent_cache_min_compile_time_secs",
                  float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]))
jax.config.update("jax_persistent_cache_min_entry_size_bytes",
                  int(os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"]))

import jaxprobe  # noqa: E402  (after the cache settings: nothing it might compile on import runs without them)
from jaxprobe._compiles import Compiles  # noqa: E402

# Note: jax_numpy_rank_promotion="raise" (as equinox's suite sets) is not used: BlackJAX's
# ChEES adaptation relies on implicit rank promotion internally.


#: Test files that take minutes each: collected first. xdist hands tests out in collection order, so a pass that
#: ends with them leaves one worker running a notebook alone while the other waits.
LONGEST_FIRST = ("tests/test_notebooks.py", "tests/benchmark/")


def pytest_sessionstart(session):
    """Empties the compilation cache when it has outgrown CACHE_LIMIT_BYTES (the controller only, before any
    worker starts): a developer's cache grows with every version of the code compiled."""
    if hasattr(session.config, "workerinput") or not TEST_COMPILATION_CACHE.is_dir():
        return
    if os.environ["JAX_COMPILATION_CACHE_DIR"] != str(TEST_COMPILATION_CACHE):
        return                                                  # the caller's own cache: theirs to manage
    if sum(entry.stat().st_size for entry in TEST_COMPILATION_CACHE.iterdir()) > CACHE_LIMIT_BYTES:
        shutil.rmtree(TEST_COMPILATION_CACHE, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: not item.nodeid.startswith(LONGEST_FIRST))  # stable: the rest keep their order


#: jaxprobe's warning classes by name (ConvergenceWarning, MCSEWarning, PrecisionWarning, ...): an example or a notebook
#: issues none of them (tests/test_readme.py, tests/test_notebooks.py).
JAXPROBE_WARNINGS = tuple(name for name in jaxprobe.__all__ if name.endswith("Warning"))


def host_devices_environment(count: int, **extra: str) -> dict[str, str]:
    """The environment of a subprocess that sees ``count`` CPU devices: this one's, with
    ``--xla_force_host_platform_device_count`` added to any XLA_FLAGS already set (CI's compile options carry
    over) and JAX on the CPU."""
    flags = (os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={count}").strip()
    return dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu", **extra)


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_programs():
    """Each test module leaves no compiled programs behind for the next one in the same worker.

    A test process compiles thousands of programs of distinct shapes (eager ops included, which JAX caches
    up to 8192 entries); every XLA CPU executable holds tens of memory mappings, and past the kernel's limit
    (vm.max_map_count, 65530) XLA's compiler crashes with a segmentation fault. jaxprobe bounds its own
    programs (jaxprobe.engine.compiled); this bounds JAX's caches, which only a test process fills so fast.
    """
    yield
    jax.clear_caches()


@pytest.fixture
def rng_key():
    return jax.random.key(20261122)


def mc_check_mean(draws: np.ndarray, true_mean: np.ndarray, num_se: float = 4.0, min_ess: float = 50.0):
    """Assert per-coordinate means of ``draws`` (C, N, K) lie within ``num_se`` Monte-Carlo
    standard errors of ``true_mean``; the standard error comes from the bulk ESS."""
    draws = np.asarray(draws, np.float64)
    ess = np.asarray(jax.vmap(diagnostics.ess_bulk, in_axes=2)(draws.astype(np.float32)), np.float64)
    assert np.all(ess > min_ess), f"ESS too small for a meaningful check: {ess.min():.1f}"
    mean = draws.mean(axis=(0, 1))
    sd = draws.reshape(-1, draws.shape[-1]).std(axis=0)
    z = (mean - true_mean) / (sd / np.sqrt(ess))
    assert np.all(np.abs(z) < num_se), f"means off by up to {np.abs(z).max():.2f} MC standard errors: {z}"
    return z


def mc_check_second_moment(draws: np.ndarray, true_mean: np.ndarray, true_cov: np.ndarray, pairs=None,
                           num_se: float = 4.0, min_ess: float = 50.0):
    """Assert E[(x_i − μ_i)(x_j − μ_j)] matches ``true_cov[i, j]`` within ``num_se`` MC standard
    errors (ESS of the product series) for the given index pairs (default: the diagonal)."""
    draws = np.asarray(draws, np.float64)
    centered = draws - true_mean
    if pairs is None:
        pairs = [(i, i) for i in range(draws.shape[-1])]
    products = np.stack([centered[..., i] * centered[..., j] for i, j in pairs], axis=-1)
    truth = np.array([true_cov[i, j] for i, j in pairs])
    return mc_check_mean(products, truth, num_se, min_ess)


@pytest.fixture
def compile_counter():
    """Counts the programs compiled inside ``with compile_counter:`` (``.count``; jaxprobe._compiles)."""
    return Compiles()


def disk_fills_in(atomic_write, fills):
    """``atomic_write`` (jaxprobe._io's, or a module's import of it) where the write of each path for which
    ``fills(path)`` is true writes 100 bytes and then fails with ENOSPC, as a disk that fills part-way would."""
    import errno

    def filling(path, write, binary=True):
        if fills(path):
            def half(stream):
                stream.write(b"\0" * 100)
                raise OSError(errno.ENOSPC, "No space left on device")
            return atomic_write(path, half, binary)
        return atomic_write(path, write, binary)

    return filling


def ctrl_c_in_chunk(monkeypatch, number: int) -> None:
    """Make the engine's ``number``-th compiled chunk call raise KeyboardInterrupt (as Ctrl-C there would);
    ``monkeypatch`` restores the engine's own."""
    from jaxprobe.engine import api

    original, calls = api._run_chunk, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == number:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(api, "_run_chunk", interrupted)


def std_normal(x):
    """log N(x; 0, I) up to a constant: the engine tests' reference target."""
    return -0.5 * jnp.sum(x**2)


def normal_starts(num_chains: int = 8, dim: int = 3, seed: int = 0) -> np.ndarray:
    """Starting points ``(num_chains, dim)`` drawn from N(0, I) with a fixed seed."""
    return np.asarray(jax.random.normal(jax.random.key(seed), (num_chains, dim)))
