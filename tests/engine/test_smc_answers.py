"""sampler="smc": exact answers on multimodal questions, through every front end, with the evidence and a verdict.

Known answer: a mixture of two separated Gaussian bumps under a standard-normal prior. With
``exp(−G(x)) = Σ_j w_j exp(−|x − a_j|²/(2s²))`` and prior N(0, I) in d dimensions, each component's
evidence is ``w_j (s²/(1+s²))^{d/2} exp(−|a_j|²/(2(1+s²)))``: log Z and the posterior mode shares are
closed forms. Chains started from the prior keep the shares of their starting points (about 1/2 each
here); SMC's particles get them right, and MCMC's verdict says it cannot be trusted.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprobe
from jaxprobe.probes import Probe
from tests.conftest import host_devices_environment

CENTRES = np.array([[3.0, 0.0], [-3.0, 0.0]])
WEIGHTS = np.array([0.8, 0.2])
WIDTH = 0.5


def _mixture_loss(x):
    log_bumps = -jnp.sum((x - jnp.asarray(CENTRES, x.dtype)) ** 2, axis=-1) / (2 * WIDTH**2)
    return -jax.nn.logsumexp(log_bumps + jnp.log(jnp.asarray(WEIGHTS, x.dtype)))


MIXTURE = Probe(_mixture_loss, "two_bumps")


def _closed_form(temperature=1.0):
    """log Z and the mode shares for τ = 1 (the bumps' exponent is −G/τ; only τ = 1 is used here)."""
    assert temperature == 1.0
    shrink = WIDTH**2 / (1 + WIDTH**2)
    evidence = WEIGHTS * shrink * np.exp(-np.sum(CENTRES**2, axis=1) / (2 * (1 + WIDTH**2)))
    return np.log(evidence.sum()), evidence / evidence.sum()


def _share_and_se(positions):
    """Share of draws in the first mode and its Monte-Carlo standard error from each chain's mean (chains
    start at SMC particles: their means are the independent-ish replicates)."""
    in_first = (positions[..., 0] > 0).astype(np.float64)
    per_chain = in_first.mean(axis=1)
    return in_first.mean(), per_chain.std(ddof=1) / np.sqrt(per_chain.size)


@pytest.mark.slow
def test_smc_gets_mode_shares_and_log_evidence_right():
    log_z, shares = _closed_form()
    with warnings.catch_warnings():
        warnings.simplefilter("error", jaxprobe.ConvergenceWarning)  # a trusted answer ends without a warning
        result = jaxprobe.generate(0, MIXTURE, temperature=1.0, prior=jaxprobe.priors.StandardNormal(), dim=2,
                                   num_chains=2048, num_samples=40, num_warmup=20, sampler="smc", progress=False)
    share, se = _share_and_se(result.positions)
    # The O(1/n) bias of n = N/G particles per group (jaxprobe.engine.smc) is ~1/256 here: inside the band.
    assert abs(share - shares[0]) < 4 * se + 2 / 256, (share, shares[0], se)
    assert result.verdict.converged and result.chains_start_at_target
    assert abs(result.log_evidence - log_z) < 4 * result.log_evidence_se, (result.log_evidence, log_z)
    path = result.evidence_path
    assert path["temperature"][-1] == 1.0 and np.all(np.diff(path["temperature"]) < 0)
    np.testing.assert_allclose(path["log_evidence"][-1], result.log_evidence)


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["mala", "chees", "nuts"])
def test_mcmc_from_the_prior_is_flagged_on_the_same_question(sampler):
    log_z, shares = _closed_form()
    with pytest.warns(jaxprobe.ConvergenceWarning, match="sampler='smc'"):
        result = jaxprobe.generate(0, MIXTURE, temperature=1.0, prior=jaxprobe.priors.StandardNormal(), dim=2,
                                   num_chains=64, num_samples=100, num_warmup=100, sampler=sampler, progress=False)
    assert not result.verdict.converged
    share, _ = _share_and_se(result.positions)
    assert abs(share - shares[0]) > 0.1  # the starting points' proportions, not the target's


@pytest.mark.slow  # ~30 s: three front ends' SMC runs (CI's slow pass runs it)
def test_smc_through_sample_generate_and_sweep_is_one_answer():
    """The same question and key through generate and a one-cell sweep: bit-identical; a batched sweep cell
    (vmapped SMC) gives the same log Z up to float32 rounding; sample() with reference= works on its own."""
    options = dict(prior=jaxprobe.priors.StandardNormal(), dim=2, num_chains=256, num_samples=10, num_warmup=10,
                   sampler="smc", progress=False, convergence="ignore")
    key = jax.random.key(5)
    direct = jaxprobe.generate(jax.random.fold_in(key, 0), MIXTURE, temperature=1.0, **options)
    one = jaxprobe.sweep(key, MIXTURE, {"temperature": [1.0]}, **options)
    np.testing.assert_array_equal(one.samples[0].positions, direct.positions)
    assert one.rows[0]["log_evidence"] == direct.log_evidence
    batched = jaxprobe.sweep(key, MIXTURE, {"temperature": [1.0, 2.0]}, **options)
    np.testing.assert_allclose(batched.rows[0]["log_evidence"], direct.log_evidence, rtol=1e-4)
    assert batched.rows[1]["log_evidence"] > batched.rows[0]["log_evidence"]  # a hotter question is easier

    prior = jaxprobe.priors.StandardNormal(event_shape=(2,))
    target = jaxprobe.gibbs(MIXTURE, 1.0, prior)
    # 8 groups (not the 2 that 256 particles get by default): an error estimated from two groups can be
    # arbitrarily small by luck (0.003 for an error of 0.08 in one run), so it cannot bound the answer.
    samples = jaxprobe.sample(1, target, np.zeros((256, 2), np.float32), sampler="smc", reference=prior,
                              num_samples=10, num_warmup=10, progress=False, convergence="ignore",
                              sampler_options={"num_groups": 8})
    log_z, _ = _closed_form()
    assert samples.num_groups == 8
    assert abs(samples.log_evidence - log_z) < 4 * samples.log_evidence_se + 0.05


def test_smc_needs_a_reference_it_can_draw_before_compiling(compile_counter):
    jax.random.split(jax.random.key(0))  # the key programs themselves, compiled once per process
    with compile_counter as counter:
        with pytest.raises(ValueError, match="improper"):
            jaxprobe.generate(0, MIXTURE, temperature=1.0, dim=2, num_chains=16, num_samples=5, sampler="smc",
                              progress=False)
        with pytest.raises(ValueError, match="needs a reference"):
            jaxprobe.sample(0, lambda x: -jnp.sum(x**2), np.zeros((16, 2), np.float32), sampler="smc",
                            progress=False)
        with pytest.raises(TypeError, match=r"\.sample"):
            jaxprobe.sample(0, lambda x: -jnp.sum(x**2), np.zeros((16, 2), np.float32), sampler="smc",
                            reference=lambda x: 0.0, progress=False)
        with pytest.raises(ValueError, match="reference is only used by sampler='smc'"):
            jaxprobe.sample(0, lambda x: -jnp.sum(x**2), np.zeros((16, 2), np.float32), sampler="mala",
                            reference=jaxprobe.priors.StandardNormal((2,)), progress=False)
        with pytest.raises(ValueError, match="target_ess"):
            jaxprobe.generate(0, MIXTURE, temperature=1.0, dim=2, num_chains=16, num_samples=5, sampler="smc",
                              prior=jaxprobe.priors.StandardNormal(), sampler_options={"target_ess": 2.0})
        with pytest.raises(ValueError, match="convergence must be one of"):
            jaxprobe.generate(0, MIXTURE, temperature=1.0, dim=2, num_chains=16, num_samples=5,
                              convergence="loud")
    assert counter.count == 0

# The reconstruction path through SMC is checked on tests/reconstruct/test_posterior.py's ground truth (the jax-smc run).


@pytest.mark.slow
def test_smc_particles_are_sharded_over_four_devices(tmp_path):
    """Four simulated CPU devices (a subprocess): the particles run sharded like chains and give the same answer
    as one device up to rounding (resampling gathers across devices, so bit-identity is not promised)."""
    import os
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import sys, numpy as np, jax, jaxprobe
        sys.path.insert(0, sys.argv[2])
        from test_smc_answers import MIXTURE
        r = jaxprobe.generate(0, MIXTURE, temperature=1.0, prior=jaxprobe.priors.StandardNormal(), dim=2,
                              num_chains=512, num_samples=10, num_warmup=10, sampler="smc", progress=False,
                              convergence="ignore")
        np.save(sys.argv[1], np.array([r.log_evidence, r.log_evidence_se, np.mean(r.positions[..., 0] > 0)]))
        print("devices", jax.device_count())
    """)
    results = {}
    for count in (1, 4):
        env = host_devices_environment(count)
        path = tmp_path / f"{count}.npy"
        completed = subprocess.run([sys.executable, "-c", script, str(path), os.path.dirname(__file__)], env=env,
                                   capture_output=True, text=True, timeout=600)
        assert completed.returncode == 0, completed.stderr[-2000:]
        assert f"devices {count}" in completed.stdout
        results[count] = np.load(path)
    one, four = results[1], results[4]
    assert abs(one[0] - four[0]) < 4 * one[1]  # log Z
    assert abs(one[2] - four[2]) < 0.05  # share of the 0.8 mode
