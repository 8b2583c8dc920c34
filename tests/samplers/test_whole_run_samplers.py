"""Whole-run samplers plug in: the tree-ensemble Gibbs sampler is registered through the WholeRunSampler protocol,
reached by generate, sweep and configuration files like any sampler, and reads priors through their declared
mixture form (jaxprobe.priors.MixtureFormPrior)."""

import dataclasses
import pathlib
import re
import textwrap

import numpy as np
import pytest

import jax
import jax.numpy as jnp

import jaxprobe
from jaxprobe import priors, probes
from jaxprobe.engine import registry
from jaxprobe.engine.protocols import WholeRunSampler
from jaxprobe.samplers import tree_gibbs
from tests.samplers.ensembles import stump_ensemble

KEY = jax.random.key(20261125)
PACKAGE = pathlib.Path(jaxprobe.__file__).parent


MODEL = stump_ensemble([(0, -0.5, 0.2, 0.7), (1, 0.3, 0.6, 0.1), (0, 1.0, 0.4, 0.9)], 2)
PRIOR = priors.DiagonalGaussian([0.1, -0.2], [1.0, 1.5])


# ------------------------------------------------------------------ the registry and the layers


def test_the_registry_lists_tree_gibbs_as_a_whole_run_sampler():
    sampler = registry.whole_run_sampler("tree_gibbs")
    assert sampler is tree_gibbs.TREE_GIBBS and isinstance(sampler, WholeRunSampler)
    assert "tree_gibbs" in registry.known_samplers(whole_run=True)
    assert "tree_gibbs" in jaxprobe.engine.known_samplers(whole_run=True)
    # known_samplers() lists what jaxprobe.sample takes (engine kernels), as it always did
    assert "tree_gibbs" not in jaxprobe.engine.known_samplers()
    assert "tree_gibbs" not in registry.known_kernels() and registry.whole_run_sampler("mala") is None
    assert sampler.supports(jaxprobe.Question(probes.fixed_label(MODEL, 1), 1.0, PRIOR, dim=2)) is None
    reason = sampler.supports(jaxprobe.Question(probes.localize(np.zeros(2)), 1.0, PRIOR, dim=2))
    assert reason.startswith("probe: ")
    with pytest.raises(ValueError, match="whole-run sampler"):
        jaxprobe.register_sampler("tree_gibbs", jaxprobe.engine.MALA)
    with pytest.raises(TypeError, match="WholeRunSampler protocol"):
        registry.register_whole_run_sampler(object())


def test_a_registered_whole_run_sampler_is_reached_through_the_protocol():
    """generate hands the question to whatever is registered under the name: a wrapper of tree_gibbs under
    another name gives tree_gibbs's draws."""
    calls = []

    @dataclasses.dataclass(frozen=True)
    class Counting(tree_gibbs.TreeGibbs):
        name: str = "counting_gibbs"

        def sample_question(self, rng_key, question, **kwargs):
            calls.append(question)
            return super().sample_question(rng_key, question, **kwargs)

    registry.register_whole_run_sampler(Counting())
    try:
        settings = dict(temperature=1.0, num_chains=4, num_samples=10, num_warmup=2, prior=PRIOR,
                        convergence="ignore")
        mine = jaxprobe.generate(KEY, probes.fixed_label(MODEL, 1), sampler="counting_gibbs", **settings)
        reference = jaxprobe.generate(KEY, probes.fixed_label(MODEL, 1), sampler="tree_gibbs", **settings)
    finally:
        registry.unregister_whole_run_sampler("counting_gibbs")
    assert len(calls) == 1 and "counting_gibbs" not in registry.known_samplers(whole_run=True)
    np.testing.assert_array_equal(mine.positions, reference.positions)


def test_only_jaxprobe_samplers_names_tree_gibbs():
    """The engine, the front ends and the applications reach it through the registry; only jaxprobe/samplers
    names it. The benchmark scripts (jaxprobe/bench, the layer above the applications) call the public API as a
    user does, with ``sampler="tree_gibbs"``: they are clients, not library code that branches on a name."""
    offending = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(("samplers/", "bench/")):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"tree_gibbs|_Progress\b", line):
                offending.append(f"{relative}:{number}: {line.strip()}")
    assert not offending, "\n".join(offending)


# ------------------------------------------------------------------ priors declare their support


class _LaplacePrior:
    """A prior without a mixture form (callable with .sample, like the supported ones)."""

    def __call__(self, x):
        return -jnp.sum(jnp.abs(x))

    def sample(self, rng_key, num, dtype=jnp.float32):
        return jax.random.laplace(rng_key, (num, 2), dtype)


@dataclasses.dataclass(frozen=True)
class _Delegating:
    """A prior class of one's own that declares its mixture form (here: a DiagonalGaussian's)."""

    inner: priors.DiagonalGaussian

    def __call__(self, x):
        return self.inner(x)

    def sample(self, rng_key, num_chains, dtype=jnp.float32):
        return self.inner.sample(rng_key, num_chains, dtype)

    def mixture_form(self, dim):
        return self.inner.mixture_form(dim)


def test_a_prior_without_the_protocol_is_refused_by_class_and_protocol_before_compiling(compile_counter):
    from jaxprobe import reconstruct as R

    jaxprobe.engine.canonicalize_key(0)
    settings = dict(temperature=1.0, num_chains=4, num_samples=10, num_warmup=2, sampler="tree_gibbs")
    with compile_counter:
        with pytest.raises(ValueError, match=r"^prior: .*jaxprobe\.priors\.MixtureFormPrior.*_LaplacePrior does not"):
            jaxprobe.generate(0, probes.fixed_label(MODEL, 1), prior=_LaplacePrior(), dim=2, **settings)
        with pytest.raises(ValueError, match=r"^prior: .*MixtureFormPrior.*_LaplacePrior does not"):
            R.reconstruct(0, MODEL, _LaplacePrior(), sampler="tree_gibbs")
    assert compile_counter.count == 0
    assert isinstance(PRIOR, priors.MixtureFormPrior) and not isinstance(_LaplacePrior(), priors.MixtureFormPrior)


@pytest.mark.slow  # 11-13 s of compiles: the default run stays under 10 minutes
def test_a_prior_class_that_declares_its_mixture_form_is_sampled():
    settings = dict(temperature=1.0, num_chains=4, num_samples=20, num_warmup=3, sampler="tree_gibbs",
                    convergence="ignore")
    mine = jaxprobe.generate(KEY, probes.fixed_label(MODEL, 1), prior=_Delegating(PRIOR), **settings)
    reference = jaxprobe.generate(KEY, probes.fixed_label(MODEL, 1), prior=PRIOR, **settings)
    np.testing.assert_array_equal(mine.positions, reference.positions)


@pytest.mark.parametrize("prior, kind", [(priors.StandardNormal(), "gaussian"), (PRIOR, "gaussian"),
                                         (priors.Gaussian([0.0, 1.0], [[1.0, 0.3], [0.3, 2.0]]), "gaussian"),
                                         (priors.UniformBox([-1.0, -2.0], [1.0, 2.0]), "flat"),
                                         (priors.NoPrior(), "flat")])
def test_builtin_priors_declare_their_mixture_form(prior, kind):
    form = prior.mixture_form(2)
    assert isinstance(form, priors.GaussianMixtureForm) and form.flat == (kind == "flat")
    assert form.means.shape == (1, 2) and form.precisions.shape == (1, 2, 2) and form.low.shape == (2,)
    if kind == "gaussian":  # the precision is the inverse covariance; its log det matches
        covariance = np.linalg.inv(form.precisions[0])
        np.testing.assert_allclose(form.log_det_precisions[0], -np.linalg.slogdet(covariance)[1], atol=1e-10)
    with pytest.raises(ValueError):
        priors.DiagonalGaussian([0.0, 0.0, 0.0], [1.0, 1.0, 1.0]).mixture_form(2)


# ------------------------------------------------------------------ sweeps and configuration files


@pytest.mark.slow  # ~20 s of compiling (CI's slow pass runs it)
def test_sweep_cells_are_generate_runs_with_tree_gibbs():
    """A cell of sampler="tree_gibbs" is generate(fold_in(key, seed), ...), as the sweep promises."""
    settings = dict(num_chains=4, num_samples=15, num_warmup=3, prior=PRIOR)
    result = jaxprobe.sweep(KEY, probes.fixed_label(MODEL, 1), {"temperature": [0.5, 1.0]}, sampler="tree_gibbs",
                            seed=3, progress=False, convergence="ignore", **settings)
    assert [row["status"] for row in result.rows] in (["ok", "ok"], ["ok", "unconverged"], ["unconverged", "ok"],
                                                      ["unconverged", "unconverged"])
    for row, samples in zip(result.rows, result.samples):
        expected = jaxprobe.generate(jax.random.fold_in(KEY, 3), probes.fixed_label(MODEL, 1),
                                     temperature=row["temperature"], sampler="tree_gibbs", convergence="ignore",
                                     **settings)
        assert samples.sampler == "tree_gibbs"
        np.testing.assert_array_equal(samples.positions, expected.positions)
        values = np.asarray(jax.vmap(jax.vmap(probes.fixed_label(MODEL, 1).fn))(jnp.asarray(samples.positions)))
        np.testing.assert_allclose(row["probe_mean"], values.mean(), rtol=1e-5)


def test_sweep_refuses_engine_options_tree_gibbs_has_no_use_for():
    with pytest.raises(ValueError, match="^step_size: not used by sampler='tree_gibbs'"):
        jaxprobe.sweep(KEY, probes.fixed_label(MODEL, 1), {"temperature": [1.0]}, sampler="tree_gibbs",
                       step_size=0.1, num_chains=2, num_samples=2, prior=PRIOR, progress=False)


CONFIG = textwrap.dedent("""\
    [data]
    name = "breast_cancer"

    [model]
    kind = "gradient_boosting"
    options = { n_estimators = 3, max_depth = 2 }

    [probe]
    type = "fixed_label"
    target = 1

    [sampler]
    name = "tree_gibbs"
    num_chains = 4
    num_samples = 10
    num_warmup = 2
    temperature = 1.0
    options = { prior_moves = [0.0, 0.5] }
""")


@pytest.mark.slow  # 11-13 s of compiles: the default run stays under 10 minutes
def test_a_configuration_runs_tree_gibbs(tmp_path):
    from jaxprobe.config import ConfigError, parse_config
    from jaxprobe.engine.samples import Samples
    from jaxprobe.sweeps.from_config import run_config

    config = parse_config(CONFIG)
    assert config.get("sampler.name") == "tree_gibbs"
    summary = run_config(config, out=str(tmp_path), progress=False)
    samples = Samples.load(str(tmp_path / "samples.npz"))
    assert samples.sampler == "tree_gibbs" and samples.positions.shape == (4, 10, 30)
    assert np.all(np.isfinite(samples.logdensity)) and isinstance(summary, dict)
    with pytest.raises(ConfigError, match=r"\[sampler\] options: .*scan"):
        parse_config(CONFIG.replace("prior_moves = [0.0, 0.5]", 'scan = "diagonal"'))


# ------------------------------------------------------------------ observables, as jaxprobe.sample takes them


def test_tree_gibbs_folds_observables_in_and_checks_them_as_sample_does(compile_counter):
    """generate(sampler="tree_gibbs", observables=...) estimates each observable with the engine's batch means
    (its MCSE from them), with the draws kept or not; a bad observable is named before anything compiles, with
    the message jaxprobe.sample gives (one check for every sampler)."""
    from sklearn.tree import DecisionTreeClassifier

    from jaxprobe import models

    tree = models.from_sklearn(DecisionTreeClassifier(max_depth=1).fit([[-1.0, 0.0], [1.0, 0.0]], [0, 1]))
    probe = probes.fixed_label(tree, 1)  # class 1 where x₀ > 0: x₀ half-normal under N(0, I), mean √(2/π)
    options = dict(temperature=1.0, prior=priors.StandardNormal(), dim=2, num_chains=64, num_samples=200,
                   num_warmup=50, sampler="tree_gibbs", progress=False)
    kept = jaxprobe.generate(KEY, probe, observables={"x0": lambda x: x[0], "x": lambda x: x}, **options)
    x0 = kept.observables["x0"]
    assert abs(float(x0.mean) - np.sqrt(2 / np.pi)) < 4 * float(x0.mcse)
    np.testing.assert_allclose(kept.observables["x"].mean, kept.positions.mean(axis=(0, 1)), rtol=1e-5)
    assert kept.observables["x"].per_chain_mean.shape == (64, 2)
    dropped = jaxprobe.generate(KEY, probe, observables={"x0": lambda x: x[0]}, keep_draws=False, **options)
    assert dropped.positions is None and float(dropped.observables["x0"].mean) == float(x0.mean)
    observables = {"x0": lambda x: x[0]}
    jaxprobe.generate(KEY, probe, observables=observables, **options)
    with compile_counter:  # asked again (a new, equal prior) with the same functions: every program is reused
        again = jaxprobe.generate(KEY, probe, observables=observables, **dict(options, prior=priors.StandardNormal()))
    assert compile_counter.count == 0 and float(again.observables["x0"].mean) == float(x0.mean)
    for observables, error, match in (({"x0": 3.0}, TypeError, r"observables\['x0'\] must be a function"),
                                      ({"x0": lambda x: "text"}, TypeError, r"observables\['x0'\] must return"),
                                      ({"x0": lambda x: x @ jnp.ones(5)}, ValueError, r"observables\['x0'\] failed"),
                                      ([lambda x: x], TypeError, "observables must be a dict")):
        with compile_counter, pytest.raises(error, match=match):
            jaxprobe.generate(KEY, probe, observables=observables, **options)
        assert compile_counter.count == 0, observables
