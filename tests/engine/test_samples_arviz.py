"""Samples.to_arviz (jaxprobe.engine.samples): the draws as ArviZ 0.x (InferenceData) or 1.x (DataTree) reads them."""

import numpy as np
import pytest

from jaxprobe.engine.samples import Samples

arviz = pytest.importorskip("arviz")


def _samples(positions, chains=3, draws=40):
    """A Samples of given draws, built directly: the export is tested, not a sampler (nothing compiles)."""
    ones = np.ones(chains)
    logdensity = -np.arange(chains * draws, dtype=np.float64).reshape(chains, draws)
    return Samples(positions=positions, logdensity=logdensity, acceptance_rate=0.5 * ones, step_size=0.1 * ones,
                   num_divergent=0 * ones, num_nonfinite=0 * ones, num_gradient_evaluations=ones, sampler="mala",
                   num_warmup=0, thin=1)


def test_to_arviz_keeps_chains_draws_and_values():
    rng = np.random.default_rng(0)
    # chain c has mean 10 c in every coordinate: a swapped chain/draw axis would show in the per-chain means
    x = rng.normal(size=(3, 40, 2)) + 10.0 * np.arange(3)[:, None, None]
    result = _samples(x)
    data = result.to_arviz()
    if arviz.__version__.startswith("0."):
        assert isinstance(data, arviz.InferenceData)
    else:
        import xarray

        assert isinstance(data, xarray.DataTree)
    posterior = data["posterior"]["x"]
    assert posterior.dims[:2] == ("chain", "draw") and posterior.shape == (3, 40, 2)
    np.testing.assert_array_equal(posterior.values, x)
    np.testing.assert_allclose(posterior.mean(dim=("draw", posterior.dims[2])).values, x.mean(axis=(1, 2)))
    lp = data["sample_stats"]["lp"]
    assert lp.dims == ("chain", "draw")
    np.testing.assert_array_equal(lp.values, result.logdensity)
    # ArviZ's own diagnostics read it: chains 10 apart cannot have mixed
    assert np.all(np.asarray(arviz.rhat(data)["x"]) > 2)


def test_to_arviz_names_pytree_leaves_by_path():
    rng = np.random.default_rng(1)
    tree = {"weights": rng.normal(size=(3, 40, 2, 2)), "bias": [rng.normal(size=(3, 40)), rng.normal(size=(3, 40, 3))]}
    data = _samples(tree).to_arviz()
    names = set(data["posterior"].data_vars)
    assert names == {"weights", "bias.0", "bias.1"}
    np.testing.assert_array_equal(data["posterior"]["bias.1"].values, tree["bias"][1])
    np.testing.assert_array_equal(data["posterior"]["weights"].values, tree["weights"])


def test_to_arviz_needs_the_draws():
    bare = _samples(None)
    bare = Samples(**{**bare.__dict__, "logdensity": None})
    with pytest.raises(ValueError, match="to_arviz"):
        bare.to_arviz()
