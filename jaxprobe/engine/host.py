"""Arrays between the devices and the host: ``to_host`` (gathered from every process) and ``to_device``
(a host array placed with its chain axis sharded). Used by the run driver (:mod:`jaxprobe.engine.api`) and by
the checkpoints (:mod:`jaxprobe.engine.checkpoint`)."""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

__all__ = ["to_host", "to_device", "on_accelerator"]


def on_accelerator(array: object) -> bool:
    """Whether ``array`` is a JAX array held off the host (a GPU's or TPU's memory): work on it there, since
    bringing it over costs a transfer (on a CPU, ``np.asarray`` of it is a free view).

    Examples
    --------
    >>> on_accelerator(np.zeros(3)), on_accelerator(jax.device_put(np.zeros(3), jax.devices("cpu")[0]))
    (False, False)
    """
    if not isinstance(array, jax.Array) or isinstance(array, jax.core.Tracer):
        return False
    return any(device.platform != "cpu" for device in array.devices())


def to_device(array: np.ndarray | jax.Array, sharding: NamedSharding) -> jax.Array:
    """Place an array (a host array, or a JAX array: moved between devices only) with the chain axis sharded
    (scalars are replicated).

    Examples
    --------
    >>> from jaxprobe.engine import chain_sharding
    >>> sharding = chain_sharding(4)                               # the chain axis over every device
    >>> positions = to_device(np.zeros((4, 2), np.float32), sharding)
    >>> positions.shape, positions.sharding.spec[0], tuple(to_device(np.float32(1.0), sharding).sharding.spec)
    ((4, 2), 'chains', ())
    >>> to_device(jnp.ones((4, 2)), sharding).sharding.spec[0]        # a device array stays off the host
    'chains'
    """
    if array.ndim == 0:
        sharding = NamedSharding(sharding.mesh, PartitionSpec())
    if isinstance(array, jax.Array) and jax.process_count() == 1:
        # Already on a device (a GPU user's starting points): moved or resharded there, never through the host
        # (a round trip cost ~0.1 s per 126 MB on an H100 machine).
        return jax.device_put(array, sharding)
    array = np.asarray(array)
    return jax.make_array_from_callback(array.shape, sharding, lambda index: array[index])


def to_host(array: jax.Array) -> np.ndarray:
    """``array`` as one NumPy array on this host: gathered from every process when chains are sharded over
    several hosts (``jax.distributed``), else a (zero-copy on CPU) view.

    Examples
    --------
    >>> to_host(jnp.arange(3.0))                                      # a NumPy array on this host
    array([0., 1., 2.], dtype=float32)
    """
    if jax.process_count() > 1:  # pragma: no cover - needs several hosts
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(array, tiled=True))
    return np.asarray(array)
