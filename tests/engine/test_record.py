"""sample(record=...): what each kept draw stores, applied as the draw is written (generate stores x = T(z) so).

The draws it stores are the function of the draws sample() would store, through every way the driver writes
them (one chunk, chunks into one whole-run buffer, chunks copied out, a checkpoint's files); the verdict and the
log densities are those of the chains' own positions; bad input is refused by name before anything compiles."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.conftest import ctrl_c_in_chunk, normal_starts, std_normal

import jaxprobe
from jaxprobe.engine import CheckpointMismatchError


def softplus_and_sum(x):
    """One position (3,) → (4,): a map that changes the dimension (module level: one object, one program)."""
    return jnp.concatenate([jax.nn.softplus(x), jnp.sum(x, keepdims=True)])


OPTIONS = dict(num_samples=30, num_warmup=20, progress=False, convergence="ignore")


@pytest.fixture(scope="module")
def plain():
    return jaxprobe.sample(5, std_normal, normal_starts(), **OPTIONS)


@pytest.mark.parametrize("chunking", [{}, {"chunk_size": 7}, {"progress": True}])
def test_each_kept_draw_is_stored_as_record_of_its_position(plain, chunking):
    """One chunk, chunks writing one whole-run buffer (chunk_size), chunks with a progress bar: the stored draws are
    record of the positions, the rest of the answer is the run's without record."""
    recorded = jaxprobe.sample(5, std_normal, normal_starts(), record=softplus_and_sum, **{**OPTIONS, **chunking})
    assert recorded.positions.shape == (8, 30, 4)
    expected = np.asarray(jax.vmap(jax.vmap(softplus_and_sum))(jnp.asarray(plain.positions)))
    np.testing.assert_allclose(recorded.positions, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(recorded.logdensity, plain.logdensity)  # of the chains' own positions
    assert recorded.verdict.max_rhat == plain.verdict.max_rhat
    assert recorded.verdict.min_ess_bulk == plain.verdict.min_ess_bulk


def test_generate_stores_draws_in_data_space_once(compile_counter):
    """generate's draws are x = T(z) stored as they are written (no pass over the draws afterwards): the same as
    mapping sample()'s z draws, bit for bit, and asked again it compiles nothing."""
    from jaxprobe import constraints, priors, probes

    risky = probes.prediction_risky(lambda x: jax.nn.sigmoid(x @ jnp.array([2.0, -1.0, 0.5])), alpha=0.5)

    def ask():
        return jaxprobe.generate(0, risky, temperature=0.05, num_chains=8, prior=priors.StandardNormal(), dim=3,
                                 constraints=[constraints.Box(-1.0, 1.0), constraints.Fixed([2], [0.3])], **OPTIONS)

    answer = ask()
    question = jaxprobe.Question(risky, 0.05, priors.StandardNormal(),
                                 [constraints.Box(-1.0, 1.0), constraints.Fixed([2], [0.3])], 3)
    key_init, key_sample = jax.random.split(jax.random.key(0))  # generate's keys (jaxprobe.generation.answer)
    z = jaxprobe.sample(key_sample, question.logdensity, np.asarray(question.initial_positions(key_init, 8)),
                        **OPTIONS)
    assert z.positions.shape == (8, 30, 2) and answer.positions.shape == (8, 30, 3)
    x = np.asarray(jax.jit(jax.vmap(jax.vmap(question.to_data)))(jnp.asarray(z.positions)))
    np.testing.assert_array_equal(answer.positions, x)
    assert np.all(answer.positions[..., 2] == np.float32(0.3)) and np.all(np.abs(answer.positions) < 1.0)
    with compile_counter:
        again = ask()
    assert compile_counter.count == 0
    np.testing.assert_array_equal(again.positions, answer.positions)


def test_a_recorded_run_resumes_from_its_checkpoint_and_refuses_another_record(tmp_path, monkeypatch):
    """The draws files hold what record stores: an interrupted run resumes to the uninterrupted answer; the same
    checkpoint asked with another record is refused by name (its files hold other values)."""
    options = dict(OPTIONS, chunk_size=10, record=softplus_and_sum)
    reference = jaxprobe.sample(5, std_normal, normal_starts(), **options)
    path = tmp_path / "run.npz"
    with monkeypatch.context() as patch:
        ctrl_c_in_chunk(patch, 2)
        with pytest.raises(KeyboardInterrupt):
            jaxprobe.sample(5, std_normal, normal_starts(), checkpoint=path, **options)
    assert np.load(tmp_path / "run.npz.draws" / "position.npy", mmap_mode="r").shape == (30, 8, 4)
    resumed = jaxprobe.sample(5, std_normal, normal_starts(), checkpoint=path, **options)
    np.testing.assert_array_equal(resumed.positions, reference.positions)
    with pytest.raises(CheckpointMismatchError, match="record"):
        jaxprobe.sample(5, std_normal, normal_starts(), checkpoint=path, **dict(options, record=jnp.exp))


@pytest.mark.parametrize("kwargs, error, match", [
    ({"record": "exp"}, TypeError, "record must be a function of one position"),
    ({"record": lambda x: jnp.outer(x, x)}, TypeError, r"record must return a 1-D numeric array .* \(3, 3\)"),
    ({"record": lambda x: x[7]}, TypeError, "record must return a 1-D numeric array"),
    ({"record": lambda x: x @ jnp.ones(5)}, ValueError, "record failed on one chain's starting point"),
    ({"record": jnp.exp, "keep_draws": False}, ValueError, "record .* needs keep_draws=True"),
])
def test_bad_record_is_refused_by_name_before_compiling(compile_counter, kwargs, error, match):
    starts = normal_starts()
    with compile_counter:
        with pytest.raises(error, match=match):
            jaxprobe.sample(0, std_normal, starts, **dict(OPTIONS, **kwargs))
    assert compile_counter.count == 0


def test_generate_records_a_function_of_x_beside_the_same_answer(compile_counter):
    """generate(record=fn): fn sees x in data space (here in a box), and stores [x, G(x)] of each kept draw: x is
    generate's own answer bit for bit, G(x) its value there; log densities, verdict and observables unchanged; asked
    again it compiles nothing."""
    from jaxprobe import constraints, priors, probes

    risky = probes.prediction_risky(lambda x: jax.nn.sigmoid(x @ jnp.array([2.0, -1.0, 0.5])), alpha=0.5)
    options = dict(temperature=0.05, num_chains=8, prior=priors.StandardNormal(), dim=3,
                   constraints=[constraints.Box(-1.0, 1.0)], observables={"x0": lambda x: x[0]}, **OPTIONS)
    beside = lambda x: jnp.append(x, risky(x))  # noqa: E731

    plain = jaxprobe.generate(0, risky, **options)
    recorded = jaxprobe.generate(0, risky, record=beside, **options)
    assert recorded.positions.shape == (8, 30, 4)
    np.testing.assert_array_equal(recorded.positions[..., :3], plain.positions)
    values = np.asarray(jax.vmap(jax.vmap(risky))(jnp.asarray(plain.positions)))
    np.testing.assert_allclose(recorded.positions[..., 3], values, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(recorded.logdensity, plain.logdensity)
    assert recorded.verdict.max_rhat == plain.verdict.max_rhat
    assert recorded.observables["x0"].mean == plain.observables["x0"].mean
    with compile_counter:
        jaxprobe.generate(0, risky, record=beside, **options)
    assert compile_counter.count == 0


def test_generate_refuses_a_record_it_cannot_honour_by_name(compile_counter):
    """Not callable; with a whole-run sampler (it stores x itself); with a precision target that is a function of
    x (x is not stored): each a clear error before anything compiles."""
    from jaxprobe import priors, probes

    options = dict(temperature=1.0, num_chains=8, prior=priors.StandardNormal(), dim=2, **OPTIONS)
    G = probes.localize(jnp.zeros(2))
    with compile_counter:
        with pytest.raises(TypeError, match="record must be a function"):
            jaxprobe.generate(0, G, record="x", **options)
        with pytest.raises(ValueError, match="record: sampler 'tree_gibbs' runs the whole question"):
            jaxprobe.generate(0, G, record=jnp.exp, **dict(options, sampler="tree_gibbs"))
        with pytest.raises(ValueError, match="precision.*record stores something else"):
            jaxprobe.generate(0, G, record=jnp.exp, precision={"target": lambda x: x, "mcse": 0.1}, **options)
    assert compile_counter.count == 0
