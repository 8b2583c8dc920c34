"""sample, generate and sweep after ``jax.distributed.initialize()``: two processes on localhost (gloo, two CPU
devices each) give every process the full result, equal bit for bit to one process with four devices; only
process 0 writes files; a checkpoint written by the two resumes in both (the launch recipe is in the README)."""

import os
import socket
import subprocess
import sys

import numpy as np
import pytest

WORKER = os.path.join(os.path.dirname(__file__), "multihost_worker.py")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def _launch(num_processes: int, out) -> list[dict]:
    out.mkdir()
    port = str(_free_port())
    processes = [subprocess.Popen([sys.executable, WORKER, str(i), str(num_processes), port, str(out)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for i in range(num_processes)]
    logs = [process.communicate(timeout=600)[0] for process in processes]
    for process, log in zip(processes, logs):
        assert process.returncode == 0, log[-3000:]
    return [dict(np.load(out / f"result-{i}.npz", allow_pickle=False)) for i in range(num_processes)]


@pytest.mark.slow
def test_two_processes_equal_one_process_with_four_devices(tmp_path):
    (single,) = _launch(1, tmp_path / "one")
    pair = _launch(2, tmp_path / "two")
    assert all(single["statuses"] != "error")
    for name in ("sample", "resumed", "generate", "sweep"):
        for process, result in enumerate(pair):  # every process holds the whole result
            np.testing.assert_array_equal(result[name], single[name], err_msg=f"{name}, process {process}")
    np.testing.assert_array_equal(single["resumed"], single["sample"])  # a finished checkpoint returns its draws
    assert int(pair[0]["renames"]) == int(single["renames"]) > 0 and int(pair[1]["renames"]) == 0
    shared = sorted(str(p.relative_to(tmp_path / "two" / "shared")) for p in (tmp_path / "two" / "shared").rglob("*"))
    assert shared == sorted(str(p.relative_to(tmp_path / "one" / "shared"))
                            for p in (tmp_path / "one" / "shared").rglob("*"))
    assert not [name for name in shared if name.endswith(".partial")]
