"""Samples (jaxprobe.engine.samples): fields, summary, save/load round trip, ArviZ export."""

import json
import jax
import numpy as np
from tests.conftest import mc_check_mean, normal_starts, std_normal
import jaxprobe

_init = normal_starts


def test_pytree_positions_save_load_round_trip(tmp_path):
    init = {"weights": _init(6, 4).reshape(6, 2, 2), "bias": [_init(6, 1)[:, 0], _init(6, 3, seed=2)]}

    def logdensity(tree):
        return std_normal(tree["weights"]) + std_normal(tree["bias"][0]) + std_normal(tree["bias"][1])

    result = jaxprobe.sample(0, logdensity, init, sampler="hmc", num_samples=50, num_warmup=50, progress=False)
    assert result.positions["weights"].shape == (6, 50, 2, 2)
    assert result.positions["bias"][0].shape == (6, 50)
    assert result.positions["bias"][1].shape == (6, 50, 3)
    path = tmp_path / "run" / "samples.npz"
    result.save(path)
    assert [p.name for p in path.parent.iterdir()] == ["samples.npz"]  # no partial file left behind
    loaded = jaxprobe.Samples.load(path)
    for original, restored in zip(jax.tree_util.tree_leaves(result.to_numpy()), jax.tree_util.tree_leaves(loaded.to_numpy())):
        if isinstance(original, np.ndarray):
            assert original.dtype == restored.dtype
            np.testing.assert_array_equal(original, restored)
        else:
            assert original == restored
    assert isinstance(loaded.positions["bias"], list)
    assert loaded.sampler == "hmc" and loaded.thin == 1 and loaded.num_warmup == 50
    with np.load(path, allow_pickle=False) as data:  # plain data: loads without pickle
        assert json.loads(str(data["header"]))["sampler"] == "hmc"


def test_samples_fields_and_summary():
    result = jaxprobe.sample(0, std_normal, _init(8, 3), num_samples=400, num_warmup=200, progress=False)
    assert result.logdensity.shape == (8, 400)
    for field in ("acceptance_rate", "step_size", "num_divergent", "num_nonfinite", "num_gradient_evaluations"):
        assert getattr(result, field).shape == (8,)
    assert np.all((result.acceptance_rate > 0.3) & (result.acceptance_rate < 0.9))
    summary = result.summary()
    assert summary.names == ("x[0]", "x[1]", "x[2]")
    assert np.all(summary.rhat < 1.05)
    assert np.all(summary.ess_bulk > 100) and np.all(summary.ess_tail > 100)
    mc_check_mean(result.positions, np.zeros(3))
    table = str(summary)
    assert "r_hat" in table and "x[2]" in table
    assert set(summary.to_dict()["x[0]"]) == {"mean", "sd", "mcse_mean", "rhat", "ess_bulk", "ess_tail"}


def _observed_samples():
    """Samples of 16 chains carrying observables of every kind of estimate: an ESS-based one with its ess and a
    note, a batch-means one, and particle observables from 2 SMC groups (with the note saying they are too few)."""
    from jaxprobe.engine import estimates
    from tests.engine.test_verdict import make_samples

    rng = np.random.default_rng(0)
    draws = rng.standard_normal((16, 6, 2))
    ess_based = estimates.estimate(np.cumsum(draws[..., :1], axis=1))  # random walks: few effective draws
    assert ess_based.method == "ess" and ess_based.ess is not None and ess_based.note is not None
    batch = estimates.estimate(draws, method="batch_means")
    particles = estimates.particle_observed(draws[:, 0], 2)
    return make_samples(draws, observables={"walk": ess_based, "x": batch}, particle_observables={"x": particles},
                        num_groups=2)


def test_estimates_keep_method_ess_and_note_through_save_and_load(tmp_path):
    samples = _observed_samples()
    samples.save(tmp_path / "s.npz")
    loaded = jaxprobe.Samples.load(tmp_path / "s.npz")
    for field in ("observables", "particle_observables"):
        assert list(getattr(loaded, field)) == list(getattr(samples, field))
        for name, original in getattr(samples, field).items():
            restored = getattr(loaded, field)[name]
            assert (restored.method, restored.note, restored.num_batches) == (
                original.method, original.note, original.num_batches), (field, name)
            for part in ("mean", "mcse", "per_chain_mean", "ess"):
                if getattr(original, part) is None:
                    assert getattr(restored, part) is None, (field, name, part)
                else:
                    np.testing.assert_array_equal(getattr(restored, part), getattr(original, part))
    assert loaded.observables["walk"].method == "ess" and "effective sample size" in loaded.observables["walk"].note
    assert "2 independent SMC particle groups" in loaded.particle_observables["x"].note
    assert not loaded.particle_observables["x"].reliable and "unreliable" in str(loaded.particle_observables["x"])


def test_older_format_3_files_without_the_estimates_method_still_load(tmp_path):
    """A format-3 file as written before method/ess/note were kept (the header holds num_batches alone): it loads,
    the method the run streamed with (SMC groups after SMC), no ess, no note."""
    from jaxprobe._io import read_checked_npz, write_checked_npz

    _observed_samples().save(tmp_path / "new.npz")
    header, arrays = read_checked_npz(tmp_path / "new.npz", "")
    for key in ("observables", "particle_observables"):
        header[key] = {name: about["num_batches"] for name, about in header[key].items()}
    del header["arrays"], arrays["observable_0.ess"]
    write_checked_npz(tmp_path / "old.npz", arrays, header)
    loaded = jaxprobe.Samples.load(tmp_path / "old.npz")
    assert {name: (value.method, value.ess, value.note) for name, value in loaded.observables.items()} == {
        "walk": ("smc_groups", None, None), "x": ("smc_groups", None, None)}
    assert loaded.particle_observables["x"].method == "smc_groups" and loaded.particle_observables["x"].num_batches == 2
    header["num_groups"] = None  # an MCMC run's file: batch means
    write_checked_npz(tmp_path / "old_mcmc.npz", arrays, header)
    assert jaxprobe.Samples.load(tmp_path / "old_mcmc.npz").observables["x"].method == "batch_means"
