"""The test suite's shared compilation cache (tests/conftest.py): on for every process, emptied when too big."""

import os
import types

import jax

from tests import conftest


def test_this_process_and_its_subprocesses_use_the_shared_cache():
    assert jax.config.jax_compilation_cache_dir == os.environ["JAX_COMPILATION_CACHE_DIR"]
    assert os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0       # test programs compile in < 1 s


def _start(session_config):
    conftest.pytest_sessionstart(types.SimpleNamespace(config=session_config))


def test_the_cache_is_emptied_past_its_limit_and_kept_below_it(tmp_path, monkeypatch):
    cache = tmp_path / "jax-compilation-cache"
    cache.mkdir()
    (cache / "entry-cache").write_bytes(b"x" * 100)
    monkeypatch.setattr(conftest, "TEST_COMPILATION_CACHE", cache)
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(cache))
    monkeypatch.setattr(conftest, "CACHE_LIMIT_BYTES", 100)
    _start(types.SimpleNamespace())
    assert (cache / "entry-cache").exists()                       # at the limit: kept
    (cache / "other-cache").write_bytes(b"y")
    _start(types.SimpleNamespace(workerinput={}))                 # an xdist worker never empties it
    assert (cache / "other-cache").exists()
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "the-callers-own"))
    _start(types.SimpleNamespace())                               # a cache the caller chose is theirs
    assert (cache / "other-cache").exists()
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(cache))
    _start(types.SimpleNamespace())                               # past the limit: emptied
    assert not cache.exists()
