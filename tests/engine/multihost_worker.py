"""One process of the multi-process test (tests/engine/test_api_multihost.py): ``python multihost_worker.py PROCESS_ID
NUM_PROCESSES PORT OUT``. Each process sees 4 / NUM_PROCESSES CPU devices; with more than one process they join
through ``jax.distributed.initialize`` over gloo on localhost. Every process runs the same calls, unchanged, and
saves what it got to ``OUT/result-<process id>.npz`` (the test's own file; jaxprobe writes only from process 0)."""

import os
import sys

process_id, num_processes, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")  # CI's compile options carry over
                           + f" --xla_force_host_platform_device_count={4 // num_processes}").strip()

import jax  # noqa: E402

jax.config.update("jax_cpu_collectives_implementation", "gloo")
if num_processes > 1:
    jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=num_processes,
                               process_id=process_id)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxprobe  # noqa: E402
import jaxprobe._io  # noqa: E402

renames = []  # every file jaxprobe writes ends in an os.replace (atomic_write): count this process's
_replace = jaxprobe._io.os.replace
jaxprobe._io.os.replace = lambda source, target: (renames.append(target), _replace(source, target))[1]

assert jax.device_count() == 4 and jax.process_count() == num_processes


def standard_normal(x):
    return -0.5 * jnp.sum(x**2)


init = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)
checkpoint = os.path.join(out, "shared", "sample.npz")
options = dict(num_samples=40, num_warmup=40, progress=False, convergence="ignore")
sampled = jaxprobe.sample(0, standard_normal, init, sampler="mala", checkpoint=checkpoint, chunk_size=10, **options)
resumed = jaxprobe.sample(0, standard_normal, init, sampler="mala", checkpoint=checkpoint, chunk_size=10, **options)
bowl = jaxprobe.probes.Probe(lambda x: jnp.sum((x - 1.0) ** 2))
generated = jaxprobe.generate(1, bowl, temperature=1.0, dim=3, num_chains=8, sampler="chees", **options)
swept = jaxprobe.sweep(2, lambda weight: weight * bowl, {"weight": [0.5, 1.0, 2.0]}, temperature=1.0, dim=3,
                       num_chains=8, out=os.path.join(out, "shared", "sweep"), **options)
np.savez(os.path.join(out, f"result-{process_id}.npz"), sample=sampled.positions, resumed=resumed.positions,
         generate=generated.positions, sweep=np.stack([s.positions for s in swept.samples]),
         statuses=np.asarray([row["status"] for row in swept.rows]), renames=np.asarray(len(renames)))
