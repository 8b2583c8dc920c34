"""Fault injection into every file jaxprobe writes (issue 25): a checkpoint's state file, its draws files and its
boundary states (jaxprobe.engine.checkpoint), a samples file (Samples.save) and a sweep's cell files. Each damage
is either refused with jaxprobe.CorruptFileError naming the file, or worked around with a CorruptFileWarning
naming it and an answer equal, bit for bit, to the undamaged run's: never a silent result. A full disk is an
OSError naming the folder and the bytes, before the run compiles or when a write fails part-way (the rerun
resumes)."""

import errno
import json
import os
import shutil
import struct
import subprocess
import warnings
import zipfile

import jax.numpy as jnp
import numpy as np
import pytest
from tests.conftest import disk_fills_in, normal_starts, std_normal

import jaxprobe
from jaxprobe import _io
from jaxprobe.engine import api
from jaxprobe.probes import Probe

_RUN = dict(num_samples=30, num_warmup=20, chunk_size=10, progress=False, convergence="ignore")
_KEY = 7


def _init():
    return normal_starts(4, 2)


def _sample(checkpoint=None, **options):
    return jaxprobe.sample(_KEY, std_normal, _init(), checkpoint=checkpoint, **dict(_RUN, **options))


@pytest.fixture(scope="module")
def reference():
    """The undamaged answer: the same run without a checkpoint."""
    return _sample()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A finished checkpoint of the run (three chunks of 10 draws) and a samples file of its answer."""
    folder = tmp_path_factory.mktemp("pristine")
    samples = _sample(folder / "ck.npz")
    samples.save(folder / "samples.npz")
    return folder


def _assert_same_answer(result, reference):
    np.testing.assert_array_equal(result.positions, reference.positions)
    np.testing.assert_array_equal(result.logdensity, reference.logdensity)
    np.testing.assert_array_equal(result.num_gradient_evaluations, reference.num_gradient_evaluations)
    np.testing.assert_allclose(result.acceptance_rate, reference.acceptance_rate, rtol=1e-6)
    assert result.verdict.to_dict() == reference.verdict.to_dict()


# ---------------------------------------------------------------- damage


def _npy_data_offset(path):
    with open(path, "rb") as stream:
        np.lib.format.read_magic(stream)
        np.lib.format.read_array_header_1_0(stream)
        return stream.tell()


def _member_span(path, name):
    """(first byte, end) of member ``name``'s .npy bytes inside the .npz at ``path``."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(name + ".npy")
    with open(path, "rb") as stream:
        stream.seek(info.header_offset)
        name_length, extra_length = struct.unpack("<HH", stream.read(30)[26:30])
    start = info.header_offset + 30 + name_length + extra_length
    return start, start + info.compress_size


def _largest_member(path):
    with zipfile.ZipFile(path) as archive:
        infos = [info for info in archive.infolist() if info.filename not in ("header.npy", "header_crc32.npy")]
    return max(infos, key=lambda info: info.file_size).filename[:-4]


def _flip(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40  # the exponent byte of a little-endian float: x becomes ~1e38 or ~1e-38
    path.write_bytes(bytes(data))


def _zero(path, start, end):
    data = bytearray(path.read_bytes())
    data[start:end] = bytes(end - start)
    path.write_bytes(bytes(data))


def _rewrite_npz(path, edit, checked):
    """Read the arrays of ``path``, ``edit`` them, and write them back: with the old header (its checksums no
    longer match), or ``checked``: a new header whose checksums do match (only the consistency checks remain)."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    header = json.loads(str(arrays.pop("header")))
    stored = arrays.pop("header_crc32")
    edit(arrays, header)
    if checked:
        header.pop("arrays")
        _io.write_checked_npz(path, arrays, header)
    else:
        np.savez(path, **arrays, header=np.asarray(json.dumps(header)), header_crc32=stored)


def _damage_npy(path, fault, shape):
    """One fault in a draws file ``(N, C, ...)`` (rows of float32)."""
    offset, row = _npy_data_offset(path), int(np.prod(shape[1:])) * 4
    if fault == "flip_data":
        _flip(path, offset + 15 * row + 3)  # draw 15: the second chunk
    elif fault == "flip_header":
        _flip(path, 20)
    elif fault == "zero_rows":
        _zero(path, offset + 22 * row, offset + 25 * row)  # draws 22-24: the third chunk
    elif fault in ("edit_count", "shape_mismatch"):  # another count of draws, or another shape, in its header
        other = (shape[0] - 5,) + shape[1:] if fault == "edit_count" else (shape[0], 2) + shape[2:]
        header = {"descr": "<f4", "fortran_order": False, "shape": other}
        with open(path, "r+b") as stream:
            np.lib.format.write_array_header_1_0(stream, header)
    else:
        _damage_any(path, fault)


def _damage_any(path, fault):
    if fault.startswith("truncate"):
        size = path.stat().st_size
        with open(path, "r+b") as stream:
            stream.truncate(size * int(fault[len("truncate"):]) // 100)
    elif fault == "deleted":
        path.unlink()
    else:
        raise AssertionError(fault)


def _damage_npz(path, fault, count_member, count_edit, mismatch):
    """One fault in a checked .npz (a state file, a boundary state, a samples file)."""
    if fault == "flip_data":
        _flip(path, _member_span(path, _largest_member(path))[1] - 1)
    elif fault == "flip_header":
        start, end = _member_span(path, "header")
        _flip(path, (start + end) // 2)
    elif fault == "zero_rows":
        start, end = _member_span(path, _largest_member(path))
        _zero(path, (start + end) // 2, end)
    elif fault == "edit_count":
        _rewrite_npz(path, lambda arrays, header: arrays.update({count_member: count_edit(arrays[count_member])}),
                     checked=False)
    elif fault == "shape_mismatch":
        _rewrite_npz(path, mismatch, checked=True)
    else:
        _damage_any(path, fault)


_FAULTS = ["flip_data", "flip_header", "truncate0", "truncate10", "truncate50", "zero_rows", "edit_count",
           "shape_mismatch", "deleted"]


def _mismatched_state(arrays, header):
    arrays["num_draws_saved"] = arrays["num_draws_saved"].reshape(1)


def _mismatched_boundary(arrays, header):
    name = next(name for name in arrays if name.startswith("state."))
    arrays[name] = arrays[name][:2]  # two chains' state beside four


def _mismatched_samples(arrays, header):
    arrays["logdensity"] = arrays["logdensity"][:2]  # a 2-chain logdensity beside 4-chain positions


# ---------------------------------------------------------------- the checkpoint


def _copy(pristine, tmp_path):
    shutil.copy(pristine / "ck.npz", tmp_path / "ck.npz")
    shutil.copytree(pristine / "ck.npz.draws", tmp_path / "ck.npz.draws")
    return tmp_path / "ck.npz"


def _resumed_with_warning(path, reference, match):
    with pytest.warns(jaxprobe.CorruptFileWarning, match=match):
        result = _sample(path)
    _assert_same_answer(result, reference)
    with warnings.catch_warnings():  # the files are whole again: a second resume verifies without a word
        warnings.simplefilter("error", jaxprobe.CorruptFileWarning)
        _assert_same_answer(_sample(path), reference)


@pytest.mark.parametrize("fault", _FAULTS)
def test_damaged_state_file_is_refused(pristine, reference, tmp_path, fault):
    """The state file (the chunk table and its checksums): damaged → CorruptFileError naming it and what to do;
    deleted → the run starts over, saying so."""
    path = _copy(pristine, tmp_path)
    _damage_npz(path, fault, "num_draws_saved", lambda count: count - 10, _mismatched_state)
    if fault == "deleted":
        _resumed_with_warning(path, reference, "state file .*ck.npz is missing")
        return
    with pytest.raises(jaxprobe.CorruptFileError, match=r"ck\.npz is damaged: .* Delete .*ck\.npz and .*draws"):
        _sample(path)


@pytest.mark.parametrize("name, shape", [("position", (30, 4, 2)), ("logdensity", (30, 4))])
@pytest.mark.parametrize("fault", _FAULTS)
def test_damaged_draws_file_resumes_from_the_last_verified_chunk(pristine, reference, tmp_path, fault, name, shape):
    """A draws file: the chunks that verify are kept, the rest redone, with a warning naming the file and the
    draws redone; the answer equals the undamaged run's."""
    path = _copy(pristine, tmp_path)
    _damage_npy(tmp_path / "ck.npz.draws" / f"{name}.npy", fault, shape)
    first_bad = {"flip_data": 10, "zero_rows": 20, "truncate50": 10, "truncate10": 0, "truncate0": 0, "deleted": 0}
    if fault in first_bad:
        match = f"{name}.npy.*draws {first_bad[fault]} to 30 of every chain are redone"
    else:  # the .npy header: rewritten from the run's shapes, every chunk verifies
        match = f"header of .*{name}.npy is damaged.*nothing is redone"
    _resumed_with_warning(path, reference, match)


@pytest.mark.parametrize("fault", _FAULTS)
def test_damaged_boundary_state_rewinds_one_chunk(pristine, reference, tmp_path, fault):
    """The engine state after the last chunk (state.30.npz): the run rewinds to the boundary before it."""
    path = _copy(pristine, tmp_path)
    _damage_npz(tmp_path / "ck.npz.draws" / "state.30.npz", fault, "num_draws_saved", lambda count: count + 1,
                _mismatched_boundary)
    _resumed_with_warning(path, reference, r"state\.30\.npz.*draws 20 to 30 of every chain are redone")


def test_damaged_interrupted_checkpoint_resumes(reference, tmp_path, monkeypatch):
    """An interrupted run (two chunks saved) with a flipped byte in its first chunk: redone from draw 0."""
    original, calls = api._run_chunk, []

    def interrupted(*args, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original(*args, **kw)

    monkeypatch.setattr(api, "_run_chunk", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _sample(tmp_path / "ck.npz")
    monkeypatch.setattr(api, "_run_chunk", original)
    _damage_npy(tmp_path / "ck.npz.draws" / "position.npy", "flip_data", (30, 4, 2))
    _flip(tmp_path / "ck.npz.draws" / "position.npy", _npy_data_offset(tmp_path / "ck.npz.draws" / "position.npy") + 3)
    _resumed_with_warning(tmp_path / "ck.npz", reference, "draws 0 to 20 of every chain are redone")


def test_checkpoint_of_an_older_version_is_another_run(tmp_path):
    """A checkpoint written before checksums (version 5, no chunk table) is refused as another run's."""
    np.savez(tmp_path / "ck.npz", header=np.asarray('{"version": 5}'), num_draws_saved=np.asarray(10))
    with pytest.raises(jaxprobe.engine.CheckpointMismatchError, match="differs in version"):
        _sample(tmp_path / "ck.npz")


# ---------------------------------------------------------------- samples files


@pytest.mark.parametrize("fault", _FAULTS)
def test_damaged_samples_file_is_refused(pristine, tmp_path, fault):
    """Samples.load never returns arrays from a file that does not verify."""
    path = tmp_path / "samples.npz"
    shutil.copy(pristine / "samples.npz", path)
    _damage_npz(path, fault, "num_divergent", lambda counts: counts + 1, _mismatched_samples)
    if fault == "deleted":
        with pytest.raises(FileNotFoundError, match="samples.npz"):
            jaxprobe.Samples.load(path)
        return
    with pytest.raises(jaxprobe.CorruptFileError, match=r"samples\.npz is damaged: .*Nothing was loaded"):
        jaxprobe.Samples.load(path)


@pytest.mark.parametrize("edit, match", [
    (lambda arrays, header: header.update(structure={"dict": [["a", {"leaf": -1}]]}), "position leaf -1"),
    (lambda arrays, header: header.update(structure={"tuple": [{"leaf": 0}, {"leaf": 0}]}), "leaf twice"),
    (lambda arrays, header: arrays.update(step_size=arrays["step_size"][:3]), r"step_size has shape \(3,\)"),
    (lambda arrays, header: arrays.update(position_0=arrays["position_0"][:, :29]), "a position leaf has shape"),
])
def test_samples_file_whose_contents_disagree_is_refused(pristine, tmp_path, edit, match):
    """Checksums that verify, contents that do not fit together (a leaf index out of range, two chain counts):
    refused too, naming what disagrees."""
    path = tmp_path / "samples.npz"
    shutil.copy(pristine / "samples.npz", path)
    _rewrite_npz(path, edit, checked=True)
    with pytest.raises(jaxprobe.CorruptFileError, match=match):
        jaxprobe.Samples.load(path)


def test_samples_file_of_other_bytes_is_refused(tmp_path):
    for content in (b"", b"not a zip file at all", b"PK\x03\x04" + bytes(100)):
        (tmp_path / "x.npz").write_bytes(content)
        with pytest.raises(jaxprobe.CorruptFileError, match=r"x\.npz is damaged: it cannot be read"):
            jaxprobe.Samples.load(tmp_path / "x.npz")


# ---------------------------------------------------------------- disk space and paths


def test_too_little_disk_is_refused_before_compiling(tmp_path, monkeypatch):
    """The draws files' space is reserved before anything compiles: ENOSPC names the folder and the bytes."""
    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full, raising=False)
    monkeypatch.setattr(api, "_place", lambda *a, **k: pytest.fail("compiled before refusing"))
    with pytest.raises(OSError, match=rf"no space left in {tmp_path}/ck.npz.draws for the checkpoint's draws files "
                                      r"\(needs 1,696 bytes, [\d,]+ bytes free\)") as error:
        _sample(tmp_path / "ck.npz")
    assert error.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path) == []  # nothing left behind


def test_disk_full_mid_run_raises_and_the_rerun_resumes(reference, tmp_path, monkeypatch):
    """A state write that fails part-way with ENOSPC (after two chunks are saved): OSError naming the folder,
    the bytes and what to do; the verified chunks stay, and the rerun resumes to the undamaged answer."""
    original, calls = _io.atomic_write, []

    def seventh(path):  # warmup: boundary + state; each chunk: boundary + state; the third chunk's boundary
        calls.append(path)
        return len(calls) == 7

    monkeypatch.setattr(_io, "atomic_write", disk_fills_in(original, seventh))
    with pytest.raises(OSError, match=r"no space left in .* for checkpoint .*needs [\d,]+ bytes.*The 20 draws per "
                                      r"chain saved before are kept") as error:
        _sample(tmp_path / "ck.npz")
    assert error.value.errno == errno.ENOSPC
    monkeypatch.setattr(_io, "atomic_write", original)
    assert not any(name.endswith(".partial") for name in os.listdir(tmp_path / "ck.npz.draws"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", jaxprobe.CorruptFileWarning)
        _assert_same_answer(_sample(tmp_path / "ck.npz"), reference)


def test_disk_full_while_writing_draws_rows_raises_and_the_rerun_resumes(reference, tmp_path, monkeypatch):
    """The checkpoint's thread writes each saved chunk's rows into the draws files (where a file system without
    posix_fallocate can still run out of space): a failed write of the second chunk's rows raises OSError(ENOSPC)
    naming the checkpoint, the chunk before stays verified, and the rerun resumes to the undamaged answer."""
    from jaxprobe.engine import checkpoint as checkpoint_module

    original, calls = checkpoint_module._write_all, []

    def write_all(stream, block):
        calls.append(len(block))
        if len(calls) == 3:  # the first chunk: position then log density; then the second chunk's position
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(stream, block)

    monkeypatch.setattr(checkpoint_module, "_write_all", write_all)
    with pytest.raises(OSError, match=r"no space left in .* for checkpoint .*The 10 draws per chain saved before are "
                                      r"kept") as error:
        _sample(tmp_path / "ck.npz")
    assert error.value.errno == errno.ENOSPC
    monkeypatch.setattr(checkpoint_module, "_write_all", original)
    with warnings.catch_warnings():
        warnings.simplefilter("error", jaxprobe.CorruptFileWarning)
        _assert_same_answer(_sample(tmp_path / "ck.npz"), reference)


def test_full_disk_while_saving_samples_keeps_the_old_file(pristine, tmp_path, monkeypatch):
    """Samples.save (and every atomic write: sweep cells and rows) on a full disk: OSError(ENOSPC) naming the
    folder and the bytes free; the previous file is whole and nothing partial is left."""
    path = tmp_path / "samples.npz"
    shutil.copy(pristine / "samples.npz", path)
    samples = jaxprobe.Samples.load(path)
    original = _io.atomic_write

    def full(target, write, binary=True):
        def part(stream):
            stream.write(b"\0" * 64)
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(target, part, binary)

    monkeypatch.setattr(_io, "atomic_write", full)
    with pytest.raises(OSError, match=rf"no space left in {tmp_path} for writing .*samples.npz \([\d,]+ bytes free\)"):
        samples.save(path)
    assert os.listdir(tmp_path) == ["samples.npz"]
    np.testing.assert_array_equal(jaxprobe.Samples.load(path).positions, samples.positions)


def test_checkpoint_in_a_folder_that_cannot_be_written_is_refused_before_compiling(tmp_path, monkeypatch):
    monkeypatch.setattr(api, "_place", lambda *a, **k: pytest.fail("compiled before refusing"))
    with pytest.raises(ValueError, match=r"checkpoint='/proc/ck.npz': its folder /proc cannot be written"):
        _sample("/proc/ck.npz")
    with pytest.raises(ValueError, match="checkpoint must be a file path"):
        _sample(tmp_path)
    with pytest.raises(TypeError, match="checkpoint must be a path"):
        _sample(3)


@pytest.mark.slow
def test_small_tmpfs_refuses_the_run(tmp_path):
    """A real full disk: a 64 KiB tmpfs (needs root and mount) cannot hold the draws: refused, no SIGBUS."""
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root and permission to mount")
    try:
        with pytest.raises(OSError, match=rf"no space left in {mount}/ck.npz.draws .*needs [\d,]+ bytes"):
            jaxprobe.sample(_KEY, std_normal, normal_starts(64, 2), checkpoint=mount / "ck.npz",
                            **dict(_RUN, num_samples=2000))
        assert os.listdir(mount) == []
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


# ---------------------------------------------------------------- sweep cells


@pytest.mark.slow
def test_damaged_sweep_cell_runs_again(tmp_path):
    """A sweep's cell (its samples file or its row JSON), damaged: the resumed sweep runs that cell again, saying
    which file, and its rows and samples equal the undamaged sweep's (one sweep, damaged five ways)."""
    options = dict(num_chains=4, num_samples=20, num_warmup=20, progress=False, convergence="ignore",
                   keep_samples=True, cells_per_batch=1, dim=2)
    probe = Probe(lambda x: 0.5 * jnp.sum(x**2))
    grid = {"temperature": [1.0, 2.0]}
    whole = jaxprobe.sweep(3, probe, grid, out=tmp_path / "whole", **options)
    cell = whole.rows[1]["cell"]
    for fault in ["flip_data", "truncate50", "deleted", "row_flip", "row_truncate"]:
        out = tmp_path / fault
        shutil.copytree(tmp_path / "whole", out)
        samples_path, row_path = out / whole.rows[1]["samples"], out / "cells" / f"{cell}.json"
        if fault.startswith("row_"):
            _flip(row_path, 40) if fault == "row_flip" else _damage_any(row_path, "truncate50")
            match = f"{cell}.json"
        else:
            _damage_npz(samples_path, fault, None, None, None)
            match = f"{cell}.npz"
        with pytest.warns(jaxprobe.CorruptFileWarning, match=match + f".*the cell {cell} runs again"):
            again = jaxprobe.sweep(3, probe, grid, out=out, **options)
        for a, b in zip(whole.rows, again.rows):
            assert (a["status"], a["probe_mean"]) == (b["status"], b["probe_mean"])
        for a, b in zip(whole.samples, again.samples):
            np.testing.assert_array_equal(a.positions, b.positions)
        jaxprobe.Samples.load(samples_path)  # the cell's file is whole again


def test_crc32_of_a_view_is_that_of_its_bytes_in_c_order(monkeypatch):
    """Draws that are a view of a wider buffer (x beside G(x)) are checksummed a block of rows at a time, to the
    same CRC32 as their contiguous bytes, whatever the block (a block smaller than one row included)."""
    import zlib

    wide = np.random.default_rng(3).normal(size=(7, 5, 4)).astype(np.float32)
    view = wide[..., :3]
    expected = zlib.crc32(np.ascontiguousarray(view).tobytes())
    for block_bytes in (1, 60, 130, 2**24):
        monkeypatch.setattr(_io, "_BLOCK_BYTES", block_bytes)
        assert _io.crc32(view) == expected
    assert _io.crc32(wide) == zlib.crc32(wide.tobytes()) and _io.crc32(np.zeros((0, 3))) == 0


def test_crc32_combine_and_its_inverse_agree_with_zlib_on_the_joined_bytes():
    """crc32(a + b) from the parts' CRCs (zlib's crc32_combine), and crc32(b) from crc32(a + b) and crc32(a) (how
    write_npz_member gets its values' CRC from zipfile's member CRC): every length from 0 to 70 (each bit of the
    length's low byte), a zip member's npy header before 10 MB of values, and lengths up to 2^40 against the
    combination's algebra (an XOR: combining with b's CRC and removing it again gives a back)."""
    import zlib

    rng = np.random.default_rng(11)
    for first_length, second_length in [(0, 0), (3, 0), (0, 5)] + [(int(rng.integers(0, 40)), n) for n in range(71)]:
        a, b = rng.bytes(first_length), rng.bytes(second_length)
        assert _io.crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)
        assert _io.crc32_without_prefix(zlib.crc32(a + b), zlib.crc32(a), len(b)) == zlib.crc32(b)
    header, values = _io.npy_header((10, 2**18), np.float32), rng.bytes(10 * 2**20)
    assert _io.crc32_without_prefix(zlib.crc32(header + values), zlib.crc32(header), len(values)) == zlib.crc32(values)
    for length in (2**32 - 1, 2**32 + 7, 2**40 + 3):
        joined = _io.crc32_combine(0x1234ABCD, 0x0BADF00D, length)
        assert _io.crc32_without_prefix(joined, 0x1234ABCD, length) == 0x0BADF00D
        assert _io.crc32_combine(0, 0, length) == 0 and joined != 0x0BADF00D


def test_npz_members_are_written_as_numpy_saves_them_with_their_checksum(tmp_path):
    """``write_npz_member`` writes, a block at a time and without a ``tobytes`` copy, the member ``np.savez``
    would write (the same bytes for a C-ordered array; a strided view in C order), returns its values' CRC32, and
    refuses objects (no pickle) and blocks that do not fill the shape."""
    import io
    import zlib

    rng = np.random.default_rng(5)
    wide = rng.normal(size=(6, 4, 5)).astype(np.float32)
    arrays = {"draws": wide, "view": wide[..., :3], "text": np.asarray("naïve"), "empty": np.zeros((0, 3)),
              "count": np.asarray(7, np.int64), "fortran": np.asfortranarray(rng.normal(size=(3, 4)))}
    path = tmp_path / "members.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        checksums = {name: _io.write_npz_member(archive, name, value.shape, value.dtype, [value])
                     for name, value in arrays.items()}
        # one array from blocks of rows, as jaxprobe run writes x a few chains at a time
        checksums["blocks"] = _io.write_npz_member(archive, "blocks", wide.shape, wide.dtype,
                                                   [wide[:2], wide[2:5], wide[5:]])
    with np.load(path, allow_pickle=False) as loaded, zipfile.ZipFile(path) as archive:
        for name, value in dict(arrays, blocks=wide).items():
            np.testing.assert_array_equal(loaded[name], value)
            assert loaded[name].dtype == value.dtype
            assert checksums[name] == zlib.crc32(np.ascontiguousarray(value).tobytes()) == _io.crc32(value)
            if value.flags.c_contiguous:
                saved = io.BytesIO()
                np.save(saved, value)
                assert archive.read(name + ".npy") == saved.getvalue()
    with zipfile.ZipFile(tmp_path / "bad.npz", "w") as archive:
        with pytest.raises(TypeError, match="'objects' holds Python objects"):
            _io.write_npz_member(archive, "objects", (2,), object, [np.asarray([1, "a"], object)])
        with pytest.raises(ValueError, match=r"'short': 80 bytes written for shape \(6, 4, 5\)"):
            _io.write_npz_member(archive, "short", wide.shape, wide.dtype, [wide[:1]])
        with pytest.raises(ValueError, match="'cast': a block of float64 in an array of float32"):
            _io.write_npz_member(archive, "cast", wide.shape, wide.dtype, [wide.astype(np.float64)])
