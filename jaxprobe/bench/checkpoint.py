"""Checkpoint overhead: ``sample(checkpoint=...)`` against the same run without, side by side in one process.

The run of the issue that measured 4.7× (11.2 s → 53.1 s, a 1.3 GB file): 4096 chains × 20,000 kept draws of a
3-D standard normal with MALA (fixed step size, 100 burn-in steps, the default 20 chunks). A checkpoint writes
each chunk's rows of the kept draws into two ``.npy`` files (in a background thread, checksummed in the same
pass) and replaces a small state file after every chunk. Until 2026-11-29 the draws were the files themselves,
memory-mapped and copied into (as fast, in an A/B on one machine). Before: every draw so far rewritten each chunk
(quadratic in the run's length, 4.7×), then ``.npz`` chunks (zip CRC, 1.24×), then ``np.save`` per chunk (1.03-1.30×, 1.2 s of
CPU for 1.25 GB). Target: ≤ 1.1×.

A checkpointed run does not sync its draws files (their durability is checked by CRC32 on resume); the table
reports ``os.sync()`` right after each checkpointed run: what the kernel still had to write, and the CPU seconds
spent checksumming (CRC32) and writing every chunk's rows of the draws (:mod:`jaxprobe.engine.checkpoint`), as a
share of the run's CPU time (robust to other load on the machine; they run in the writer's background thread).

    python -m jaxprobe.bench.checkpoint            # the full size, about 2 minutes on 2 cores
    python -m jaxprobe.bench.checkpoint --quick    # 512 x 2000, into a scratch folder

Writes ``results/checkpoint.{json,md}`` (or ``$JAXPROBE_BENCH_RESULTS``; ``--quick`` to a scratch folder
unless ``--record``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import tempfile
import time
import types

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe.bench import results_dir
import jaxprobe
from jaxprobe._io import atomic_write
from jaxprobe.engine import checkpoint as checkpoint_module

# `jaxprobe bench` points this at a scratch folder unless --record is given.
RESULTS = results_dir()


def standard_normal(x):
    return -0.5 * jnp.sum(x**2)


class _TimedRows:
    """``HostDraws.write_rows`` counting the CPU seconds spent in it, and in its CRC32s (``time.thread_time`` of
    the thread calling it: the checkpoint writer's, so other threads' and processes' load does not count): every
    chunk's rows of the draws are checksummed and written there (the state files' arrays, a few kB, are
    checksummed as they are written, uncounted). Installed by :meth:`install`, removed by :meth:`remove`."""

    def __init__(self):
        self.seconds = self.checksum_seconds = 0.0
        self.original, self.zlib = checkpoint_module.HostDraws.write_rows, checkpoint_module.zlib

    def __get__(self, draws, owner=None):
        def write_rows(start, end):
            tick = time.thread_time()
            try:
                return self.original(draws, start, end)
            finally:
                self.seconds += time.thread_time() - tick
        return write_rows

    def crc32(self, data, value=0):
        tick = time.thread_time()
        try:
            return self.zlib.crc32(data, value)
        finally:
            self.checksum_seconds += time.thread_time() - tick

    def install(self) -> None:
        checkpoint_module.HostDraws.write_rows = self
        checkpoint_module.zlib = types.SimpleNamespace(crc32=self.crc32)

    def remove(self) -> None:
        checkpoint_module.HostDraws.write_rows, checkpoint_module.zlib = self.original, self.zlib


def timed_run(num_chains: int, num_samples: int,
              checkpoint: str | None) -> tuple[float, int, float, float, float, float]:
    """(seconds, bytes on disk, seconds of os.sync() after it, CPU seconds checksumming the draws' rows, CPU
    seconds checksumming and writing them, CPU seconds of the whole process during the run)."""
    init = np.asarray(jax.random.normal(jax.random.key(0), (num_chains, 3)), np.float32)
    timed = _TimedRows()
    timed.install()
    tick, cpu = time.perf_counter(), time.process_time()
    try:
        samples = jaxprobe.sample(1, standard_normal, init, sampler="mala", num_samples=num_samples, num_warmup=100,
                                  step_size=0.5, progress=False, checkpoint=checkpoint, convergence="ignore")
    finally:
        timed.remove()
    seconds, cpu = time.perf_counter() - tick, time.process_time() - cpu
    del samples
    tick = time.perf_counter()
    os.sync()
    sync_seconds = time.perf_counter() - tick
    size = 0
    if checkpoint is not None:
        size = os.path.getsize(checkpoint) + sum(
            os.path.getsize(os.path.join(checkpoint + ".draws", name)) for name in os.listdir(checkpoint + ".draws"))
    return seconds, size, sync_seconds, timed.checksum_seconds, timed.seconds, cpu


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="512 chains x 2000 draws, into a scratch folder")
    parser.add_argument("--record", action="store_true", help="with --quick: write into the results folder anyway")
    parser.add_argument("--repetitions", type=int, default=3)
    arguments = parser.parse_args(argv)
    num_chains, num_samples = (512, 2000) if arguments.quick else (4096, 20000)
    out = tempfile.mkdtemp(prefix="checkpoint-bench-") if arguments.quick and not arguments.record else RESULTS
    scratch = tempfile.mkdtemp(prefix="checkpoint-files-")
    # Untimed first runs compile each run's programs (the chunks' lengths are static: a plain run is one chunk
    # of every draw, a checkpointed one 20): the first repetition had timed a compile, 1.4-1.6x the others.
    timed_run(num_chains, num_samples, None)
    warm = os.path.join(scratch, "warm.npz")
    timed_run(num_chains, num_samples, warm)
    shutil.rmtree(warm + ".draws", ignore_errors=True)
    os.unlink(warm)
    plain, checkpointed, sizes, syncs, checksums, writes, cpus = [], [], [], [], [], [], []
    try:
        for repetition in range(arguments.repetitions):  # alternate, so drifts of the machine hit both
            plain.append(timed_run(num_chains, num_samples, None)[0])
            path = os.path.join(scratch, f"run{repetition}.npz")
            seconds, size, sync_seconds, checksum_seconds, write_seconds, cpu = timed_run(num_chains, num_samples,
                                                                                         path)
            checkpointed.append(seconds)
            sizes.append(size)
            syncs.append(sync_seconds)
            checksums.append(checksum_seconds)
            writes.append(write_seconds)
            cpus.append(cpu)
            print(f"repetition {repetition}: plain {plain[-1]:.2f} s, checkpointed {seconds:.2f} s "
                  f"({size / 2**20:.0f} MiB on disk, os.sync() after it {sync_seconds:.2f} s; CPU: CRC32 "
                  f"{checksum_seconds:.2f} s, CRC32 and writes {write_seconds:.2f} s of the run's {cpu:.2f} s)")
            shutil.rmtree(path + ".draws", ignore_errors=True)
            os.unlink(path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    ratio = min(checkpointed) / min(plain)
    paired = sorted(c / p for c, p in zip(checkpointed, plain))  # each repetition's pair ran back to back
    median_paired = paired[len(paired) // 2]
    result = {
        "command": "python -m jaxprobe.bench.checkpoint" + (" --quick" if arguments.quick else ""),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {jax.devices()[0].platform}",
        "jax": jax.__version__, "num_chains": num_chains, "num_samples": num_samples, "dim": 3,
        "plain_seconds": plain, "checkpoint_seconds": checkpointed, "checkpoint_bytes": sizes[-1],
        "sync_after_checkpoint_seconds": syncs, "checksum_seconds": checksums,
        "checkpoint_cpu_seconds": cpus, "checksum_cpu_share": [c / t for c, t in zip(checksums, cpus)],
        "checksum_target": 0.05, "rows_write_seconds": writes,
        "rows_write_cpu_share": [w / t for w, t in zip(writes, cpus)],
        "ratio_of_minimum_times": ratio, "median_paired_ratio": median_paired, "target": 1.1, "load_average": os.getloadavg(),
    }
    os.makedirs(out, exist_ok=True)
    atomic_write(os.path.join(out, "checkpoint.json"), lambda s: s.write(json.dumps(result, indent=1)), binary=False)
    table = (f"# Checkpoint overhead\n\nCommand: `{result['command']}`; {result['date']}; {result['machine']}; "
             f"jax {result['jax']}; load average at the end {tuple(round(v, 1) for v in result['load_average'])}.\n\n"
             f"{num_chains} chains x {num_samples} kept draws of a 3-D standard normal (MALA, fixed step, 20 "
             f"chunks), {arguments.repetitions} alternating repetitions, minimum times.\n\n"
             "| run | time (s) | on disk |\n| --- | ---: | ---: |\n"
             f"| no checkpoint | {min(plain):.2f} | – |\n"
             f"| checkpoint (draws files written chunk by chunk) | {min(checkpointed):.2f} | "
             f"{sizes[-1] / 2**20:.0f} MiB |\n\n"
             f"All times: plain {', '.join(f'{t:.2f}' for t in plain)} s; checkpointed "
             f"{', '.join(f'{t:.2f}' for t in checkpointed)} s; os.sync() right after each checkpointed run "
             f"(what was still to be written) "
             f"{', '.join(f'{t:.2f}' for t in syncs)} s. CPU seconds of the CRC32 checksums of every chunk's "
             f"rows of the draws (in the writer's background thread): "
             f"{', '.join(f'{c:.2f}' for c in checksums)}, of the "
             f"checkpointed run's {', '.join(f'{c:.2f}' for c in cpus)}: at most "
             f"{max(result['checksum_cpu_share']):.1%} of its CPU time (target ≤ 5% of the run); checksums and "
             f"writes of the rows together {', '.join(f'{w:.2f}' for w in writes)} s, at most "
             f"{max(result['rows_write_cpu_share']):.1%} (the writes were page faults of the main thread before)."
             f"\n\nRatio of minimum times {ratio:.2f}, median of the paired ratios {median_paired:.2f} (target ≤ "
             "1.10; before: 4.7×, 11.2 s → 53.1 s, rewriting every draw each chunk; then 1.03-1.30× writing each "
             "chunk with np.save; 1.11× recorded on another machine with the draws in memory-mapped files copied "
             "into, as fast as writing them in an A/B on one machine).\n")
    atomic_write(os.path.join(out, "checkpoint.md"), lambda s: s.write(table), binary=False)
    print(table)
    print(f"wrote {out}/checkpoint.json and checkpoint.md")
    return result


if __name__ == "__main__":
    main()
