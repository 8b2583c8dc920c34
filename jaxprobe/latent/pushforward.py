"""Probes on a latent space: H = G∘φ with the prior N(z; 0, I), and samples pushed through the decoder φ.

Probing paper, Sec. 3 ("Feature-restricted samples") and the end of Appendix C: for a decoder
φ: Z → X and a probing loss G on X, sample z ~ p(z) ∝ exp(−G(φ(z))/τ)·N(z; 0, I) and report x = φ(z).
The pushed-forward samples lie on the decoder's image (the data manifold a VAE has learned); their
law is the Gibbs distribution of G with respect to the pushforward of the latent prior.

Everything here only builds a log density ``z ↦ −G(φ(z))/τ + log N(z; 0, I)`` and hands it to the
engine, so every sampler, the many-chain runner, chunking, checkpoints and sharding work unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe._inputs import as_float_array, check_int
from jaxprobe.engine import Samples
from jaxprobe.engine.verdict import check_policy
from jaxprobe.engine.verdict import report as verdict_report
from jaxprobe.generation import generate as generate_in_data_space
from jaxprobe.priors import StandardNormal
from jaxprobe.probes import Probe, as_probe
from jaxprobe.target import gibbs
from jaxprobe.types import Array, LogDensityFn
from jaxprobe._values import Keyed

__all__ = ["pushforward", "latent_logdensity", "LatentSamples", "generate", "latent_walk", "decode_draws"]


def _decoder_fn(decoder: Any) -> tuple[Callable[[Array], Array], int | None, tuple[int, ...] | None]:
    """(φ for one latent, latent_dim or None, image shape or None) from a VAE or a callable."""
    from jaxprobe.latent.vae import VAE

    if isinstance(decoder, VAE):
        return decoder.decoder(flatten=True), decoder.latent_dim, decoder.image_shape
    if callable(decoder):
        return decoder, None, None
    raise TypeError(f"decoder must be a jaxprobe.latent.VAE or a callable z -> x for one latent z, "
                    f"got {type(decoder).__name__}")


def pushforward(probe: Callable, decoder: Any) -> Probe:
    """The latent probing loss ``H(z) = G(φ(z))`` (probing paper, Sec. 3; App. C, "H = G∘φ").

    Parameters
    ----------
    probe
        G: a :class:`jaxprobe.probes.Probe` or any callable of one data point x → scalar.
    decoder
        φ: a :class:`jaxprobe.latent.VAE` (its decoder, giving flat images ``(H·W,)`` in [0, 1]) or
        any callable of one latent ``(latent_dim,)`` → x.

    Returns
    -------
    Probe
        H on one latent ``(latent_dim,)``; composable with ``+`` and scalar ``*`` like any probe
        (e.g. ``pushforward(G, vae) + 0.5 * localize(z_anchor)`` localizes in latent space).

    Examples
    --------
    >>> from jaxprobe.probes import localize
    >>> G = localize(jnp.array([1.0, 2.0]))                      # G(x) = ‖x − (1, 2)‖² on data space
    >>> H = pushforward(G, lambda z: 2.0 * z)                    # φ(z) = 2z: H(z) = G(2z)
    >>> float(H(jnp.array([0.5, 1.0]))), float(H(jnp.zeros(2)))
    (0.0, 5.0)
    >>> float((H + 0.5 * localize(jnp.zeros(2)))(jnp.array([0.5, 1.0])))   # plus a localizer on z
    0.625
    """
    probe = as_probe(probe)
    decode, _, _ = _decoder_fn(decoder)
    # Keyed by the probe and the decoder: the same question asked again reuses its compiled programs.
    return Probe(Keyed(lambda z: probe(decode(z)), "pushforward", probe, decoder), f"{probe.name}∘decoder")


def latent_logdensity(probe: Callable, decoder: Any, temperature: float) -> LogDensityFn:
    """``log p(z) = −G(φ(z))/τ + log N(z; 0, I)`` (probing paper, Eq. 3 with G∘φ), for :func:`jaxprobe.sample`.

    Examples
    --------
    >>> logdensity = latent_logdensity(lambda x: jnp.sum(x**2), lambda z: 2.0 * z, temperature=0.5)
    >>> round(float(logdensity(jnp.zeros(2))), 4)                # G = 0: log N(0; 0, I₂) = −log 2π
    -1.8379
    >>> round(float(logdensity(jnp.ones(2))), 4)          # −G(2, 2)/τ − ½‖z‖² − log 2π = −16 − 1 − 1.8379
    -18.8379
    """
    return gibbs(pushforward(probe, decoder), temperature, StandardNormal())


@dataclasses.dataclass(frozen=True)
class LatentSamples:
    """Latent draws and their images under the decoder.

    Attributes
    ----------
    samples
        The engine's :class:`jaxprobe.Samples`; ``samples.positions`` are the latents ``(chain, draw, latent_dim)``.
    images
        φ(z) for every draw: ``(chain, draw, H, W)`` for a VAE, else ``(chain, draw, *decoder output shape)``.

    Examples
    --------
    >>> from jaxprobe.probes import localize
    >>> result = generate(jax.random.key(0), localize(jnp.array([0.5, 0.5])), jnp.tanh, temperature=0.1,
    ...                   latent_dim=2, num_chains=8, num_samples=200, num_warmup=200, sampler="rwmh",
    ...                   progress=False, convergence="ignore")       # what generate returns
    >>> result.latents.shape, result.images.shape, result.flat_images().shape
    ((8, 200, 2), (8, 200, 2), (1600, 2))
    >>> bool(np.allclose(result.images, np.tanh(result.latents), atol=1e-6))   # images = φ(latents)
    True
    """

    samples: Samples
    images: np.ndarray

    @property
    def latents(self) -> np.ndarray:
        """``(chain, draw, latent_dim)``."""
        return np.asarray(self.samples.positions)

    def flat_images(self) -> np.ndarray:
        """All images ``(chain·draw, ...)``, chains first."""
        return self.images.reshape((-1,) + self.images.shape[2:])


def decode_draws(decoder: Any, latents: Any) -> np.ndarray:
    """φ applied to every latent of ``latents`` ``(..., latent_dim)``; a VAE gives images ``(..., H, W)``.

    Examples
    --------
    >>> latents = np.zeros((2, 3, 2)); latents[1] = 1.0                # (chain, draw, latent_dim)
    >>> images = decode_draws(lambda z: jnp.concatenate([z, -z]), latents)     # φ: (2,) -> (4,)
    >>> images.shape, images[1, 0].tolist()
    ((2, 3, 4), [1.0, 1.0, -1.0, -1.0])
    """
    decode, latent_dim, image_shape = _decoder_fn(decoder)
    latents = jnp.asarray(latents)
    if latent_dim is not None and (latents.ndim < 1 or latents.shape[-1] != latent_dim):
        raise ValueError(f"latents must have shape (..., {latent_dim}), got {latents.shape}")
    flat = latents.reshape((-1, latents.shape[-1]))
    decoded = np.asarray(_decode_batch(decode, flat))
    shape = image_shape if image_shape is not None else decoded.shape[1:]
    return decoded.reshape(latents.shape[:-1] + tuple(shape))


def _decode_batch(decode: Callable, flat: Array) -> Array:
    # lax.map over blocks of 256 latents bounds the memory of the decoder's activations.
    block = 256
    count = flat.shape[0]
    padded = -(-count // block) * block
    blocks = jnp.pad(flat, ((0, padded - count), (0, 0))).reshape(-1, block, flat.shape[-1])
    out = jax.jit(lambda b: jax.lax.map(jax.vmap(decode), b))(blocks)
    return out.reshape((padded,) + out.shape[2:])[:count]


def generate(
    rng_key: Any,
    probe: Callable,
    decoder: Any,
    *,
    temperature: float,
    num_chains: int,
    num_samples: int,
    latent_dim: int | None = None,
    init: Any = None,
    latent_probe: Callable | None = None,
    sampler: str = "mala",
    num_warmup: int = 500,
    **sample_options: Any,
) -> LatentSamples:
    """Sample z ~ exp(−G(φ(z))/τ)·N(z; 0, I) with many chains and decode every draw (probing paper, Sec. 3).

    Parameters
    ----------
    probe
        G on data space (one x, as the decoder returns it: flat ``(H·W,)`` images for a VAE).
    decoder
        A :class:`jaxprobe.latent.VAE` or a callable φ of one latent ``(latent_dim,)``.
    temperature
        τ > 0.
    num_chains, num_samples, num_warmup, sampler
        As in :func:`jaxprobe.sample` (every sampler works); other keywords go to it too
        (``thin``, ``step_size``, ``devices``, ``checkpoint``, ``progress``, ...).
    latent_dim
        Needed only when ``decoder`` is a plain callable and ``init`` is not given.
    init
        Initial latents ``(num_chains, latent_dim)``, e.g. encodings of real digits (an array, a DataFrame
        or a nested list, cast to the working dtype as in :func:`jaxprobe.generate`); default: N(0, I) draws.
    latent_probe
        An extra loss on z added to G∘φ, e.g. ``w * localize(z_anchor)`` to stay near the encoding
        of a real digit (a two-norm localizer in latent space).

    Returns
    -------
    LatentSamples
        ``samples`` (latents ``(chain, draw, latent_dim)``, diagnostics) and ``images`` = φ(z) per draw.

    Examples
    --------
    A probe on data space x = φ(z) = tanh(z) ("x near (0.5, 0.5)"), sampled on z and decoded (with a VAE:
    ``generate(key, probe, jaxprobe.latent.mnist_vae(), ...)``, images ``(chain, draw, 28, 28)``):

    >>> from jaxprobe.probes import localize
    >>> result = generate(jax.random.key(0), localize(jnp.array([0.5, 0.5])), jnp.tanh, temperature=0.1,
    ...                   latent_dim=2, num_chains=8, num_samples=200, num_warmup=200, sampler="rwmh",
    ...                   progress=False, convergence="ignore")       # a short demo run: no verdict
    >>> result.latents.shape, result.images.shape
    ((8, 200, 2), (8, 200, 2))
    >>> bool(abs(result.images.mean() - 0.523) < 0.1)    # E[x] = 0.523 by quadrature (the prior pulls z to 0)
    True
    """
    _, vae_latent_dim, _ = _decoder_fn(decoder)
    if latent_dim is not None:
        latent_dim = check_int(latent_dim, "latent_dim", minimum=1)
    if vae_latent_dim is not None:
        if latent_dim is not None and latent_dim != vae_latent_dim:
            raise ValueError(f"latent_dim={latent_dim} but the VAE's latent dimension is {vae_latent_dim}")
        latent_dim = vae_latent_dim
    if init is not None:
        shape = np.shape(init)
        if len(shape) != 2 or (latent_dim is not None and shape[1] != latent_dim):
            raise ValueError(f"init must have shape (num_chains, {latent_dim or 'latent_dim'}), got {shape}")
        latent_dim = shape[1]
    if latent_dim is None:
        raise ValueError("pass latent_dim (or init) when decoder is a plain callable")
    latent_loss = pushforward(probe, decoder)
    if latent_probe is not None:
        latent_loss = latent_loss + as_probe(latent_probe, "latent_probe")
    convergence = check_policy(sample_options.pop("convergence", "warn"))
    samples = generate_in_data_space(
        rng_key, latent_loss, temperature=temperature, num_chains=num_chains,
        num_samples=num_samples, init=init, prior=StandardNormal(event_shape=(latent_dim,)), dim=latent_dim,
        sampler=sampler, num_warmup=num_warmup, convergence="ignore", **sample_options)
    verdict_report(samples.verdict, convergence, stacklevel=2)
    return LatentSamples(samples, decode_draws(decoder, samples.positions))


def latent_walk(
    rng_key: Any,
    probe: Callable,
    decoder: Any,
    start: Any,
    *,
    temperature: float,
    num_steps: int,
    step_size: float,
    thin: int = 1,
    sampler: str = "mala",
) -> LatentSamples:
    """One Langevin chain from ``start`` in latent space, every ``thin``-th state decoded (Fig. 4, left).

    No warmup: the walk starts at ``start`` ``(latent_dim,)`` (e.g. the encoding of a real digit)
    and takes ``num_steps`` MALA steps of the fixed ``step_size`` (Appendix C's update with its
    Metropolis correction) towards the probe's preferred region, e.g. a '3' turning into an '8'.

    Returns
    -------
    LatentSamples
        One chain of ``num_steps // thin + 1`` states, the first being ``start`` itself:
        ``latents[0]`` ``(num_steps // thin + 1, latent_dim)`` and the strip ``images[0]``
        ``(num_steps // thin + 1, H, W)`` starting with φ(start).

    Examples
    --------
    >>> from jaxprobe.probes import localize
    >>> walk = latent_walk(jax.random.key(0), localize(jnp.zeros(2)), jnp.tanh, jnp.array([2.0, -2.0]),
    ...                    temperature=0.1, num_steps=200, step_size=0.05, thin=50)  # x = tanh(z) towards 0
    >>> walk.latents.shape, walk.latents[0, 0].tolist()              # 200 / 50 + 1 states, from start
    ((1, 5, 2), [2.0, -2.0])
    >>> bool(np.abs(walk.images[0, -1]).max() < np.abs(walk.images[0, 0]).max())   # closer to x = 0
    True
    """
    start = as_float_array(start, "start", dtype="positions")  # an array or a list; the working dtype
    if start.ndim != 1:
        raise ValueError(f"start must be one latent (latent_dim,), got shape {start.shape}")
    num_steps = check_int(num_steps, "num_steps", minimum=1)
    thin = check_int(thin, "thin", minimum=1)
    if num_steps % thin:
        raise ValueError(f"thin must divide num_steps={num_steps}, got {thin!r}")
    walk = generate(rng_key, probe, decoder, temperature=temperature, num_chains=1, num_samples=num_steps // thin,
                    init=start[None],
                    sampler=sampler, num_warmup=0, step_size=step_size, thin=thin, progress=False)
    first = decode_draws(decoder, start[None, None])
    images = np.concatenate([first, walk.images], axis=1)
    latents = np.concatenate([start[None, None].astype(walk.latents.dtype), walk.latents], axis=1)
    start_logdensity = np.asarray(latent_logdensity(probe, decoder, temperature)(jnp.asarray(latents[0, 0])))
    logdensity = np.concatenate([start_logdensity.reshape(1, 1).astype(walk.samples.logdensity.dtype),
                                 np.asarray(walk.samples.logdensity)], axis=1)
    return LatentSamples(dataclasses.replace(walk.samples, positions=latents, logdensity=logdensity), images)
