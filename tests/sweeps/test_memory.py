"""A batched sweep holds its draws once and, without them, little per cell (issue 23's bounded memory), read from
XLA's own memory analysis of the compiled program (``Compiled.memory_analysis``): deterministic, where a process's
peak resident memory (benchmarks/results/sweep_memory.md, ``python -m jaxprobe.bench.sweep_memory``) is not."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprobe
from jaxprobe.probes import Probe
from jaxprobe.sweeps import core

CELLS, CHAINS, SAMPLES, DIM, HIDDEN = 8, 64, 400, 10, 32
_W1 = np.random.default_rng(0).normal(size=(DIM, HIDDEN)).astype(np.float32) / np.sqrt(DIM)
_W2 = np.random.default_rng(1).normal(size=HIDDEN).astype(np.float32) / np.sqrt(HIDDEN)
RISKY = Probe(lambda x: (jax.nn.sigmoid(jnp.tanh(x @ _W1) @ _W2) - 0.5) ** 2, "risky")   # a d = 10 MLP's G(x)


def _program_memory(keep_samples: bool, cells: int = CELLS):
    """The sweep's result and the memory analysis of the one program it compiled."""
    core._PROGRAM_CACHE.clear()
    result = jaxprobe.sweep(0, RISKY, {"temperature": np.geomspace(0.05, 1.0, cells).tolist()},
                            num_chains=CHAINS, num_samples=SAMPLES, num_warmup=10, dim=DIM,
                            prior=jaxprobe.priors.StandardNormal(), keep_samples=keep_samples, progress=False,
                            convergence="ignore")
    (compiled, _), = [entry[0] for entry in core._PROGRAM_CACHE.values()]
    return result, compiled.memory_analysis()


def test_kept_draws_leave_the_program_as_the_loop_wrote_them():
    """The draws are the program's output buffer, not copied at its end into cells-first order (that copy was a
    second set of the draws at the peak: 1.76× the draws against issue 23's 1.25×)."""
    result, memory = _program_memory(keep_samples=True)
    draws_bytes = CELLS * CHAINS * SAMPLES * (DIM + 2) * 4             # positions, log density and G(x)
    assert memory.output_size_in_bytes >= draws_bytes
    assert memory.temp_size_in_bytes < 0.25 * draws_bytes, (memory.temp_size_in_bytes, draws_bytes)
    positions = result.samples[3].positions
    assert positions.shape == (CHAINS, SAMPLES, DIM) and np.all(np.isfinite(positions))


@pytest.mark.slow
@pytest.mark.skipif(jax.devices()[0].platform != "cpu", reason="on a CPU the statistics are finished on the host")
def test_without_draws_a_cell_needs_a_small_constant():
    """Without kept draws the program's memory per cell is a few arrays of its chains (C·d) and of the verdict's
    subset, not several copies of the subset or the probe's hidden layer at every subset draw at once."""
    _, small = _program_memory(keep_samples=False, cells=2)
    _, large = _program_memory(keep_samples=False, cells=2 + CELLS)
    per_cell = ((large.temp_size_in_bytes + large.output_size_in_bytes)
                - (small.temp_size_in_bytes + small.output_size_in_bytes)) / CELLS
    subset_bytes = CHAINS * 64 * (DIM + 1) * 4        # the subset: up to 4,096 values per quantity (here 64 draws)
    chain_state_bytes = CHAINS * DIM * 4
    # 0.49 MB here (the subset folded, returned, and G at its draws; the chains' states); 1.22 MB before
    assert per_cell < 3 * subset_bytes + 64 * chain_state_bytes, (per_cell, subset_bytes, chain_state_bytes)


def test_the_finite_check_of_kept_draws_reads_them_a_block_at_a_time():
    """A cell whose kept draws hold a NaN or an inf anywhere is an error row; the check walks blocks of draws (no
    temporary of the whole draws' size) and misses none, the last, short block included."""
    from jaxprobe.sweeps.core import _all_finite

    draws = np.zeros((7, 100, 3), np.float32)
    assert _all_finite(draws, block_values=50)
    for where, value in (((3, 97, 1), np.nan), ((0, 0, 0), np.inf), ((6, 99, 2), -np.inf)):
        bad = draws.copy()
        bad[where] = value
        assert not _all_finite(bad, block_values=50), where


def test_g_at_every_kept_draw_is_evaluated_in_blocks_sized_by_the_run(monkeypatch):
    """G (or jaxprobe run's model) at every kept draw after a run, a block of draws at a time: blocks of a quarter of
    PROBE_BLOCK_VALUES for a small run (its scratch a small share of its draws), of the full size once a run has
    PROBE_MIN_BLOCKS of them; the values are G's at each draw whatever the blocks (the last block padded)."""
    positions = np.random.default_rng(2).normal(size=(6, 37, DIM)).astype(np.float32)
    expected = np.asarray(jax.vmap(jax.vmap(RISKY.fn))(positions))
    per_point = HIDDEN  # the MLP's largest intermediate per point
    blocks = []
    real = core._probe_values

    def counted(piece, probe_fn):
        blocks.append(piece.shape[1])
        return real(piece, probe_fn)

    monkeypatch.setattr(core, "_probe_values", counted)
    monkeypatch.setattr(core, "PROBE_BLOCK_VALUES", 4 * 6 * per_point)  # full blocks of 24 points, quarter of 6
    # 6 chains × 37 draws = 222 points: quarter blocks (1 draw), 222 // 15 = 14 points (2 draws), full (4 draws)
    for min_blocks, draws_per_block in ((10**6, 1), (15, 2), (1, 4)):
        monkeypatch.setattr(core, "PROBE_MIN_BLOCKS", min_blocks)
        blocks.clear()
        np.testing.assert_allclose(core._probe_values_by_block(positions, RISKY.fn), expected, rtol=2e-6, atol=1e-7)
        assert set(blocks) == {draws_per_block} and len(blocks) == -(-37 // draws_per_block), (min_blocks, blocks)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_spread_of_g_reads_a_strided_column_and_gives_numpys_quantiles_to_the_bit(dtype):
    """A cell's G spread reads G's column of the draws' buffer as a strided view, a block at a time, without
    copying all of it (the copy was a quarter of the kept bytes at d = 2) and without changing it; its quantiles
    are ``np.quantile``'s to the bit (radix selection on the floats' ordered bits, NumPy's interpolation), with
    negative values, both zeros, ties and infinities, for any block size; NaN where a value is NaN. The same read
    gives the per-chain sums over the run's batches of draws (G's mean and MCSE)."""
    from jaxprobe.engine.streaming import sums_of_values
    from jaxprobe.sweeps.core import _order_statistics, _probe_pass

    rng = np.random.default_rng(3)
    for shape in [(1, 1), (1, 2), (3, 7), (5, 33), (64, 500)]:
        buffer = (rng.normal(size=shape + (3,)) * 3).astype(dtype)
        column = buffer[..., -1]
        column[rng.random(shape) < 0.2] = 0.0
        column[rng.random(shape) < 0.1] = -0.0
        column[rng.random(shape) < 0.1] = 2.5                      # ties
        if column.size > 100:
            column[0, 1], column[2, 3] = np.inf, -np.inf
        before = column.copy()
        flat = before.reshape(-1)
        want = np.quantile(flat, [0.05, 0.5, 0.95])
        for block_values, copy_values in ((1, 0), (7, 0), (2**18, 0), (7, 2**20), (2**18, 2**20)):  # selection; copies
            got, sums = _probe_pass(column, min(3, column.shape[1]), block_values=block_values,
                                    copy_values=copy_values)
            np.testing.assert_equal((got, None), _probe_pass(column, None, block_values=block_values,
                                                             copy_values=copy_values))
            if np.all(np.isfinite(flat)):  # the batch sums in the same read: sums_of_values' (in float64)
                want_sums = sums_of_values(column.astype(np.float64), min(3, column.shape[1]))
                np.testing.assert_allclose(sums.sums, want_sums.sums, rtol=1e-12, atol=1e-9)
                np.testing.assert_array_equal(sums.counts, want_sums.counts)
            assert [got["probe_q05"], got["probe_median"], got["probe_q95"]] == [float(value) for value in want]
            assert (got["probe_min"], got["probe_max"]) == (float(flat.min()), float(flat.max()))
            if np.all(np.isfinite(flat)):
                assert got["probe_sd"] == pytest.approx(float(np.std(flat.astype(np.float64), ddof=1)) if flat.size > 1
                                                        else 0.0, rel=1e-9)
        np.testing.assert_array_equal(column, before)              # read, never reordered or flipped in place
        if column.size <= 200:
            every_rank = _order_statistics(column, list(range(column.size)), block_values=5)
            np.testing.assert_array_equal(every_rank, np.sort(flat))
    column[1, 1] = np.nan
    assert all(np.isnan(value) for value in _probe_pass(column, None)[0].values())
