"""jaxprobe.latent: the Appendix E VAE, its weights, the pushforward of probes and the manifold metrics.

Known answers: Flax's own ConvTranspose, the closed-form Gaussian KL against Monte Carlo, the ELBO recomputed
by hand, a linear decoder whose latent Gibbs distribution is Gaussian in closed form, brute-force nearest
neighbours, and the committed MNIST checkpoints against held-out real digits.
"""

from __future__ import annotations

import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprobe
from jaxprobe import latent
from jaxprobe.latent import data
from jaxprobe.latent.vae import ConvTranspose2x, _train
from tests.conftest import mc_check_mean, mc_check_second_moment


# ------------------------------------------------------------------ shared fixtures


@pytest.fixture(scope="module")
def digits():
    images, labels = data.sklearn_digits()
    return data.split(images, labels)


@pytest.fixture(scope="module")
def digits_vae(digits):
    train_images = digits[0]
    vae, losses = latent.train_vae(0, train_images, latent_dim=4, num_steps=250, batch_size=64, learning_rate=3e-3)
    return vae, losses


@pytest.fixture(scope="module")
def mnist_test():
    images, labels = data.mnist_digits()
    return data.split(images, labels)


# ------------------------------------------------------------------ the VAE


def test_conv_transpose_matches_flax():
    """The matmul form of the stride-2 transposed convolution is Flax's layer, same params, same output."""
    layer = ConvTranspose2x(5)
    x = jax.random.normal(jax.random.key(0), (2, 3, 7, 6, 4))
    params = layer.init(jax.random.key(1), x)
    params = jax.tree_util.tree_map(lambda a: a + jax.random.normal(jax.random.key(2), a.shape), params)
    reference = nn.ConvTranspose(5, (3, 3), strides=(2, 2), padding="SAME")
    assert jax.tree_util.tree_structure(reference.init(jax.random.key(1), x)) == jax.tree_util.tree_structure(params)
    ours, flax_layer = jax.jit(layer.apply), jax.jit(reference.apply)
    np.testing.assert_allclose(ours(params, x), flax_layer(params, x), atol=2e-5)
    np.testing.assert_allclose(ours(params, x[0, 0]), flax_layer(params, x[0, 0]), atol=2e-5)


def test_gaussian_kl_matches_monte_carlo():
    mean, log_variance = np.array([0.5, -1.0, 0.0]), np.array([0.3, -0.7, 0.0])
    draws = mean + np.exp(0.5 * log_variance) * np.random.default_rng(0).standard_normal((400_000, 3))
    log_q = -0.5 * ((draws - mean) ** 2 / np.exp(log_variance) + log_variance)
    log_p = -0.5 * draws**2
    terms = np.sum(log_q - log_p, axis=1)
    kl = float(latent.gaussian_kl(jnp.asarray(mean), jnp.asarray(log_variance)))
    assert abs(kl - terms.mean()) < 4 * terms.std() / np.sqrt(len(terms))
    assert float(latent.gaussian_kl(jnp.zeros(3), jnp.zeros(3))) == 0.0


def test_negative_elbo_is_bernoulli_cross_entropy_plus_kl(digits_vae, digits):
    vae, _ = digits_vae
    images = digits[2][:5]
    key = jax.random.key(3)
    loss = np.asarray(latent.negative_elbo(vae.params, vae.config, key, jnp.asarray(images)), np.float64)
    mean, log_variance = (np.asarray(a, np.float64) for a in vae.encode(images))
    noise = np.asarray(jax.random.normal(key, mean.shape), np.float64)
    z = mean + np.exp(0.5 * log_variance) * noise
    p = np.asarray(vae.decode(z.astype(np.float32)), np.float64)
    x = images.astype(np.float64)
    bce = -np.sum(x * np.log(p) + (1 - x) * np.log1p(-p), axis=(1, 2))
    kl = 0.5 * np.sum(mean**2 + np.exp(log_variance) - log_variance - 1, axis=1)
    np.testing.assert_allclose(loss, bce + kl, rtol=2e-4)


def test_train_vae_learns_digits(digits_vae, digits):
    """Held-out 8×8 digits are reconstructed far better than by the mean image, and the loss fell."""
    vae, losses = digits_vae
    train_images, _, test_images, _ = digits
    assert losses.shape == (250,) and np.all(np.isfinite(losses))
    assert losses[-25:].mean() < 0.75 * losses[:25].mean()
    baseline = np.mean((test_images - train_images.mean(0)) ** 2)
    errors = latent.reconstruction_error(vae, test_images)
    np.testing.assert_allclose(errors, np.mean((np.asarray(vae.reconstruct(test_images)) - test_images) ** 2,
                                               axis=(1, 2)), rtol=1e-4)
    assert errors.mean() < 0.6 * baseline, (errors.mean(), baseline)


@pytest.mark.slow
def test_training_is_one_scan_compiled_once(digits, compile_counter):
    """All steps are one lax.scan (no Python loop), whatever num_steps; a repeat call does not recompile."""
    config = latent.VAEConfig((8, 8), 2, (4, 8))
    images = jnp.asarray(digits[0][:64])
    for num_steps in (3, 7):
        jaxpr = jax.make_jaxpr(_train, static_argnums=(2, 3, 4, 5))(jax.random.key(0), images, config, num_steps,
                                                                    16, 1e-3)
        scans = [eqn for eqn in jaxpr.jaxpr.eqns[0].params["jaxpr"].eqns if eqn.primitive.name == "scan"]
        assert len(scans) == 1 and scans[0].params["length"] == num_steps
    latent.train_vae(0, digits[0][:64], latent_dim=2, features=(4, 8), num_steps=3, batch_size=16)
    with compile_counter:
        latent.train_vae(1, digits[0][:64], latent_dim=2, features=(4, 8), num_steps=3, batch_size=16)
    assert compile_counter.count == 0


@pytest.mark.parametrize("kwargs, error", [
    ({"images": np.full((10, 8, 8), 2.0, np.float32)}, "in \\[0, 1\\]"),
    ({"images": np.zeros((10, 64), np.float32)}, "num_images, H, W"),
    ({"images": np.zeros((10, 6, 6), np.float32)}, "multiples of 4"),
    ({"images": np.zeros((10, 8, 8), np.int32)}, "floating point"),
    ({"batch_size": 11}, "exceeds"),
    ({"num_steps": 0}, "num_steps"),
    ({"latent_dim": 0}, "latent_dim"),
    ({"learning_rate": -1.0}, "learning_rate"),
    ({"learning_rate": "0.1"}, "learning_rate must be a real number, got the string"),
    ({"num_steps": 2.0}, "num_steps must be an int, got float"),
    ({"features": (4, 8.0)}, r"features\[1\] must be an int, got float"),
])
def test_train_vae_rejects_bad_input(kwargs, error):
    arguments = {"images": np.zeros((10, 8, 8), np.float32), "num_steps": 2, "batch_size": 4}
    arguments.update(kwargs)
    with pytest.raises((ValueError, TypeError), match=error):
        latent.train_vae(0, arguments.pop("images"), **arguments)


def test_save_and_load_round_trip(digits_vae, digits, tmp_path):
    vae, _ = digits_vae
    path = tmp_path / "vae.msgpack"
    latent.save_vae(path, vae)
    assert os.listdir(tmp_path) == ["vae.msgpack"]  # atomic: no temporary file left behind
    loaded = latent.load_vae(path)
    assert loaded.config == vae.config
    np.testing.assert_array_equal(loaded.reconstruct(digits[2][:4]), vae.reconstruct(digits[2][:4]))
    with open(path, "rb") as stream:
        assert b"\x80\x04" not in stream.read(2)  # not a pickle

    (tmp_path / "garbage.msgpack").write_bytes(b"\x00 not msgpack at all")
    with pytest.raises(ValueError, match="not a msgpack weights file"):
        latent.load_vae(tmp_path / "garbage.msgpack")
    jaxprobe.models.training.save_params(tmp_path / "other.msgpack", {"w": np.ones(3)})
    with pytest.raises(ValueError, match="not a jaxprobe VAE file"):
        latent.load_vae(tmp_path / "other.msgpack")
    with pytest.raises(TypeError, match="jaxprobe.latent.VAE"):
        latent.save_vae(tmp_path / "x.msgpack", {"params": 1})


# ------------------------------------------------------------------ pushforward


def _linear_gaussian_case():
    """φ(z) = A z + b and G(x) = ½‖x − c‖²: the latent Gibbs law is N(m, P⁻¹), P = I + AᵀA/τ, m = P⁻¹Aᵀ(c − b)/τ."""
    matrix = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, -1.0], [0.3, 0.0, 2.0], [1.0, 1.0, 1.0]], np.float32)
    offset = np.array([0.1, -0.2, 0.3, 0.0], np.float32)
    center = np.array([1.0, 2.0, -1.0, 0.5], np.float32)
    temperature = 2.0
    precision = np.eye(3) + matrix.T @ matrix / temperature
    covariance = np.linalg.inv(precision)
    mean = covariance @ matrix.T @ (center - offset) / temperature
    decoder = lambda z: matrix @ z + offset  # noqa: E731
    probe = jaxprobe.probes.Probe(lambda x: 0.5 * jnp.sum((x - center) ** 2))
    return decoder, probe, temperature, mean, covariance, (matrix, offset)


@pytest.mark.slow
def test_pushforward_linear_decoder_gives_closed_form_gaussian():
    decoder, probe, temperature, mean, covariance, (matrix, offset) = _linear_gaussian_case()
    result = latent.generate(4, probe, decoder, temperature=temperature, latent_dim=3, num_chains=64,
                             num_samples=300, num_warmup=200, progress=False)
    assert result.latents.shape == (64, 300, 3) and result.images.shape == (64, 300, 4)
    np.testing.assert_allclose(result.images, result.latents @ matrix.T + offset, atol=1e-5)
    mc_check_mean(result.latents, mean)
    mc_check_second_moment(result.latents, mean, covariance, pairs=[(0, 0), (1, 1), (2, 2), (0, 2), (1, 2)])


def test_pushforward_composes_with_the_vae_decoder(digits_vae):
    vae, _ = digits_vae
    weights = jnp.linspace(-1.0, 1.0, 64)
    probe = jaxprobe.probes.Probe(lambda x: jnp.sum(weights * x))
    z = jax.random.normal(jax.random.key(0), (4,))
    pushed = latent.pushforward(probe, vae)
    np.testing.assert_allclose(pushed(z), jnp.sum(weights * vae.decode(z).reshape(-1)), rtol=1e-5)
    combined = pushed + 0.5 * jaxprobe.probes.localize(np.zeros(4))
    np.testing.assert_allclose(combined(z), pushed(z) + 0.5 * jnp.sum(z**2), rtol=1e-5)
    logdensity = latent.latent_logdensity(probe, vae, 0.5)
    np.testing.assert_allclose(logdensity(z), -pushed(z) / 0.5 - 0.5 * jnp.sum(z**2) - 2 * np.log(2 * np.pi),
                               rtol=1e-5)


@pytest.mark.slow
def test_latent_walk_starts_at_start_and_decodes_every_state(digits_vae):
    vae, _ = digits_vae
    probe = jaxprobe.probes.Probe(lambda x: jnp.sum(x))
    start = np.array([0.5, -0.5, 1.0, 0.0], np.float32)
    walk = latent.latent_walk(0, probe, vae, start, temperature=1.0, num_steps=12, step_size=0.2, thin=3)
    assert walk.latents.shape == (1, 5, 4) and walk.images.shape == (1, 5, 8, 8)
    assert walk.samples.logdensity.shape == (1, 5)
    np.testing.assert_array_equal(walk.latents[0, 0], start)
    np.testing.assert_allclose(walk.images[0], vae.decode(walk.latents[0]), atol=1e-6)
    np.testing.assert_allclose(walk.samples.logdensity[0, 0], latent.latent_logdensity(probe, vae, 1.0)(start),
                               rtol=1e-5)


def test_generate_rejects_bad_input(digits_vae):
    vae, _ = digits_vae
    probe = jaxprobe.probes.Probe(lambda x: jnp.sum(x))
    options = dict(temperature=1.0, num_chains=2, num_samples=2, progress=False)
    with pytest.raises(ValueError, match="latent dimension is 4"):
        latent.generate(0, probe, vae, latent_dim=3, **options)
    with pytest.raises(ValueError, match="init must have shape"):
        latent.generate(0, probe, vae, init=np.zeros((2, 3)), **options)
    with pytest.raises(ValueError, match="latent_dim"):
        latent.generate(0, probe, lambda z: z, **options)
    with pytest.raises(TypeError, match="decoder must be"):
        latent.pushforward(probe, "decoder")
    with pytest.raises(ValueError, match="temperature"):
        latent.generate(0, probe, vae, **{**options, "temperature": -1.0})
    with pytest.raises(ValueError, match="thin"):
        latent.latent_walk(0, probe, vae, np.zeros(4), temperature=1.0, num_steps=10, step_size=0.1, thin=3)


# ------------------------------------------------------------------ metrics and plots


def test_nearest_neighbour_distance_matches_brute_force():
    rng = np.random.default_rng(0)
    images, reference = rng.random((300, 5, 4)), rng.random((70, 20))
    brute = np.sqrt(((images.reshape(300, 1, 20) - reference[None]) ** 2).sum(-1)).min(1)
    np.testing.assert_allclose(latent.nearest_neighbour_distance(images, reference), brute, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(latent.nearest_neighbour_distance(reference[:5], reference), 0.0, atol=2e-3)
    with pytest.raises(ValueError, match="pixels"):
        latent.nearest_neighbour_distance(images, reference[:, :5])


def test_image_grid_and_walk_strip_write_png(tmp_path, digits):
    import matplotlib.image

    images = digits[2][:10]
    jaxprobe.plots.image_grid(images, tmp_path / "grid.png", num_columns=5, titles=[str(i) for i in range(10)])
    jaxprobe.plots.latent_walk_strip(images.reshape(10, 64), tmp_path / "walk.png", image_shape=(8, 8),
                                     max_images=4)
    for name in ("grid.png", "walk.png"):
        picture = matplotlib.image.imread(tmp_path / name)
        assert picture.ndim == 3 and picture.shape[0] > 20 and picture.shape[1] > 20
    assert sorted(os.listdir(tmp_path)) == ["grid.png", "walk.png"]
    with pytest.raises(ValueError, match="titles"):
        jaxprobe.plots.image_grid(images, tmp_path / "bad.png", titles=["a"])
    with pytest.raises(ValueError, match="image_shape"):
        jaxprobe.plots.image_grid(images.reshape(10, 64), tmp_path / "bad.png")
    with pytest.raises(TypeError, match="num_columns must be an int, got float"):
        jaxprobe.plots.image_grid(images, tmp_path / "bad.png", num_columns=5.0)
    with pytest.raises(ValueError, match="max_images must be >= 2, got 1"):
        jaxprobe.plots.latent_walk_strip(images, tmp_path / "bad.png", max_images=1)


# ------------------------------------------------------------------ the committed MNIST checkpoints


def test_committed_mnist_checkpoints_fit_held_out_digits(mnist_test):
    """The committed VAE reconstructs held-out real digits well enough that LeNet5 still reads them."""
    train_images, _, test_images, test_labels = mnist_test
    vae = latent.mnist_vae()
    assert vae.latent_dim == 10 and vae.image_shape == (28, 28) and vae.config.features == (32, 64)
    cnn, mlp = latent.mnist_classifiers()
    labels = latent.predicted_labels([cnn, mlp], test_images)
    assert np.mean(labels[0] == test_labels) >= 0.95
    assert np.mean(labels[1] == test_labels) >= 0.93
    errors = latent.reconstruction_error(vae, test_images)
    baseline = np.mean((test_images - train_images.mean(0)) ** 2)
    assert errors.mean() < 0.35 * baseline, (errors.mean(), baseline)
    reconstructed = latent.predicted_labels(cnn, np.asarray(vae.reconstruct(test_images)))
    assert np.mean(reconstructed == test_labels) >= 0.85
