"""The engine's declared interfaces: every sampler is a Kernel with an Adaptation, one registry names them,
nothing branches on sampler names, the engine's modules import without cycles, and a kernel registered by
the user (BlackJAX's Barker proposal, not shipped) runs through sample, generate and sweep to known answers."""

import ast
import dataclasses
import pathlib
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.conftest import mc_check_mean, mc_check_second_moment

import jaxprobe
from jaxprobe.engine import core, registry
from jaxprobe.engine.kernels import (GradientKernel, GradientState, StepInfo, per_chain, safe_logdensity, vmap_chains)
from jaxprobe.engine.options import float_option
from jaxprobe.engine.protocols import Adaptation, EngineState, Kernel, RunStats

PACKAGE = pathlib.Path(jaxprobe.__file__).parent


# ---------------------------------------------------------------- protocols


@pytest.mark.parametrize("sampler", registry.known_kernels())
def test_every_registered_sampler_is_a_kernel_with_an_adaptation(sampler):
    kernel = registry.make_kernel(sampler)
    assert isinstance(kernel, Kernel)
    assert kernel.name == sampler
    assert hash(kernel) == hash(registry.make_kernel(sampler))  # a static jit argument: equal kernels, one program
    for shared in (False, True):
        adaptation = kernel.adaptation(None, shared)
        assert isinstance(adaptation, Adaptation)
        hash(adaptation)
    parameters = kernel.default_parameters(4, 3, jnp.float32)
    assert parameters["step_size"].shape == ()
    assert ("inverse_mass_matrix" in parameters) == kernel.adapts_mass_matrix
    if kernel.adapts_mass_matrix:
        assert parameters["inverse_mass_matrix"].shape == (4, 3)
    assert 0.0 < kernel.target_acceptance_rate < 1.0 and kernel.initial_step_size(3) > 0.0


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["mala", "hmc", "chees"])
def test_adaptation_protocol_in_one_piece_and_in_chunks(sampler):
    """init → update → final through the protocol alone; a splittable adaptation gives the same state
    whether its schedule runs in one update or in chunks."""
    kernel = registry.make_kernel(sampler)

    def logdensity(x):
        return -0.5 * jnp.sum(x ** 2)

    positions = jax.random.normal(jax.random.key(0), (8, 3))
    state = core.init(kernel, logdensity, positions)
    adaptation = kernel.adaptation()
    schedule = adaptation.schedule(20)
    assert all(leaf.shape[0] == 20 for leaf in jax.tree.leaves(schedule))

    @jax.jit
    def one_piece(state):
        return core.adapt(jax.random.key(1), state, adaptation, logdensity, 20)

    adapted, stats = one_piece(state)
    assert isinstance(adapted, EngineState) and isinstance(stats, RunStats)
    assert int(adapted.step) == 0 and int(stats.num_steps) == 20
    assert set(adapted.parameters) == set(state.parameters)
    if adaptation.splittable:
        update = jax.jit(lambda a, chunk: adaptation.update(jax.random.key(1), a, logdensity, chunk))
        adaptation_state = jax.jit(lambda s: adaptation.init(s, logdensity))(state)
        for start, stop in ((0, 7), (7, 14), (14, 20)):
            adaptation_state, _ = update(adaptation_state, jax.tree.map(lambda a: a[start:stop], schedule))
        chunked = jax.jit(adaptation.final)(adaptation_state)
        np.testing.assert_array_equal(chunked.kernel_state.position, adapted.kernel_state.position)
        np.testing.assert_array_equal(chunked.parameters["step_size"], adapted.parameters["step_size"])


# ---------------------------------------------------------------- registry


# ---------------------------------------------------------------- structure


def _runtime_nodes(tree):
    """Every node of ``tree`` except those under ``if TYPE_CHECKING:`` (imports for type checkers only)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _engine_imports():
    """Module → the jaxprobe.engine modules it imports at run time (anywhere in the file, lazy imports included)."""
    graph = {}
    for path in sorted((PACKAGE / "engine").glob("*.py")):
        if path.name == "__init__.py":
            continue
        module = f"jaxprobe.engine.{path.stem}"
        targets = set()
        for node in _runtime_nodes(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module == "jaxprobe.engine":
                    targets |= {f"jaxprobe.engine.{alias.name}" for alias in node.names}
                elif node.module.startswith("jaxprobe.engine."):
                    targets.add(node.module)
            elif isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names if alias.name.startswith("jaxprobe.engine.")}
        graph[module] = targets - {module}
    return graph


def test_engine_modules_import_without_cycles():
    graph = _engine_imports()
    assert "jaxprobe.engine.chees" not in graph["jaxprobe.engine.core"]
    assert "jaxprobe.engine.kernels" not in graph["jaxprobe.engine.core"]
    assert graph["jaxprobe.engine.protocols"] == set()  # the interfaces depend on nothing of the engine

    visiting, done = [], set()

    def visit(module):
        if module in done or module not in graph:
            return
        assert module not in visiting, "import cycle: " + " -> ".join(visiting[visiting.index(module):] + [module])
        visiting.append(module)
        for target in sorted(graph[module]):
            visit(target)
        visiting.pop()
        done.add(module)

    for module in graph:
        visit(module)


# ---------------------------------------------------------------- a user's kernel: BlackJAX's Barker proposal


@dataclasses.dataclass(frozen=True)
class Barker(GradientKernel):
    """BlackJAX's Barker proposal (Livingstone & Zanella 2022), vmapped over chains: the recipe of
    :func:`jaxprobe.register_sampler`."""

    name: ClassVar[str] = "barker"
    target_acceptance_rate: float = float_option(0.4, minimum=0.0, maximum=1.0, exclusive_minimum=True,
                                                 exclusive_maximum=True)

    def step(self, rng_key, state, parameters, logdensity_fn):
        from blackjax.mcmc import barker

        kernel = barker.build_kernel()
        safe = safe_logdensity(logdensity_fn)

        def one_chain(key, chain_state, step_size):
            return kernel(key, barker.BarkerState(*chain_state), safe, step_size)

        num_chains = state.position.shape[0]
        new_state, info = vmap_chains(one_chain, rng_key, state, per_chain(parameters["step_size"], num_chains))
        nonfinite = ~jnp.isfinite(info.proposal.logdensity)
        return GradientState(*new_state), StepInfo(
            acceptance_rate=jnp.where(nonfinite, 0.0, info.acceptance_rate),
            is_accepted=info.is_accepted & ~nonfinite,
            is_divergent=jnp.zeros_like(nonfinite),
            is_nonfinite=nonfinite,
            num_gradient_evaluations=jnp.ones((num_chains,), jnp.int32),
        )

    def initial_step_size(self, dim):
        return 0.5


@pytest.fixture
def barker_registered():
    jaxprobe.register_sampler("barker", Barker)
    yield
    registry.unregister_sampler("barker")


MEAN = np.array([1.0, -2.0], np.float32)
SCALE = np.array([0.5, 2.0], np.float32)


def _gaussian(x):
    return -0.5 * jnp.sum(((x - MEAN) / SCALE) ** 2)


def test_barker_registered_by_the_user_samples_a_gaussian(barker_registered):
    """sample: a 2-D Gaussian's mean and variance within 4 Monte-Carlo standard errors (from the ESS)."""
    assert isinstance(registry.make_kernel("barker"), Kernel)
    init = np.asarray(jax.random.normal(jax.random.key(0), (64, 2)), np.float32)
    result = jaxprobe.sample(1, _gaussian, init, sampler="barker", num_samples=400, num_warmup=400, progress=False,
                             convergence="ignore", sampler_options={"target_acceptance_rate": 0.45})
    assert result.sampler == "barker" and result.num_nonfinite.sum() == 0
    assert 0.3 < result.acceptance_rate.mean() < 0.6  # adapted towards 0.45 by the windowed warmup
    mc_check_mean(result.positions, MEAN)
    mc_check_second_moment(result.positions, MEAN, np.diag(SCALE ** 2))
    with pytest.raises(ValueError, match=r"sampler_options\['target_acceptance_rate'\] for 'barker'"):
        jaxprobe.sample(1, _gaussian, init, sampler="barker", progress=False,
                        sampler_options={"target_acceptance_rate": 5})
    with pytest.raises(TypeError, match="'barker' takes target_acceptance_rate"):
        jaxprobe.sample(1, _gaussian, init, sampler="barker", progress=False, sampler_options={"steps": 5})


def _shifted_probe(shift):
    """G(x) = ½|x − shift|²: with a standard normal prior and temperature τ, x ~ N(shift/(1 + τ), τ/(1 + τ))."""
    return jaxprobe.probes.Probe(lambda x: 0.5 * jnp.sum((x - shift) ** 2))


@pytest.mark.slow  # 18 s; the registered kernel's own known answer stays in the default run
def test_barker_through_generate_and_sweep(barker_registered):
    shift = np.array([2.0, -1.0], np.float32)
    prior = jaxprobe.priors.StandardNormal()
    options = dict(num_chains=64, num_samples=300, num_warmup=300, sampler="barker", prior=prior, dim=2,
                   progress=False, convergence="ignore")
    result = jaxprobe.generate(2, _shifted_probe(shift), temperature=1.0, **options)
    mc_check_mean(result.positions, shift / 2)
    mc_check_second_moment(result.positions, shift / 2, np.eye(2) / 2)

    swept = jaxprobe.sweep(3, _shifted_probe(shift), {"temperature": [1.0, 0.5]}, **options)
    assert all(row["status"] != "error" for row in swept.rows), swept.rows
    for row, samples in zip(swept.rows, swept.samples):
        tau = row["temperature"]
        assert samples.sampler == "barker"
        mean, variance = shift / (1 + tau), tau / (1 + tau)
        mc_check_mean(samples.positions, mean)
        mc_check_second_moment(samples.positions, mean, np.eye(2) * variance)
