"""Samples (jaxprobe.engine.samples): fields, summary, save/load round trip, ArviZ export."""

import json
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.conftest import mc_check_mean, normal_starts, std_normal
import jaxprobe
from jaxprobe.engine import core, kernels

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


def test_to_arviz():
    arviz = pytest.importorskip("arviz")
    result = jaxprobe.sample(0, std_normal, _init(4, 2), num_samples=50, num_warmup=50, progress=False)
    data = result.to_arviz()
    assert isinstance(data, arviz.InferenceData)
    assert data.posterior["x"].shape[:2] == (4, 50)
