"""The sampler registry (jaxprobe.engine.registry): register/unregister round trip, refusals, no branching on sampler names outside it."""

import dataclasses
import pathlib
import re
from typing import ClassVar
import pytest
import jaxprobe
from jaxprobe.engine import registry
from jaxprobe.engine.kernels import MALA, GradientKernel


PACKAGE = pathlib.Path(jaxprobe.__file__).parent


@dataclasses.dataclass(frozen=True)
class _Renamed(MALA):
    name: ClassVar[str] = "renamed_mala"


def _sources():
    return sorted(path for path in PACKAGE.rglob("*.py"))


def test_registry_round_trip():
    assert registry.known_kernels()[:6] == ("mala", "rwmh", "hmc", "nuts", "chees", "smc")
    assert jaxprobe.register_sampler is registry.register_sampler
    registered = jaxprobe.register_sampler("renamed_mala", _Renamed)
    try:
        assert registered is _Renamed
        assert "renamed_mala" in registry.known_kernels() and "renamed_mala" in jaxprobe.engine.known_samplers()
        assert registry.sampler_class("renamed_mala") is _Renamed
        kernel = registry.make_kernel("renamed_mala", {"target_acceptance_rate": 0.5})
        assert isinstance(kernel, _Renamed) and kernel.target_acceptance_rate == 0.5
        assert not registry.known_sampler_starts_at_target("renamed_mala")
        with pytest.raises(ValueError, match="already registered"):
            jaxprobe.register_sampler("renamed_mala", _Renamed)
        jaxprobe.register_sampler("renamed_mala", _Renamed, replace=True)
        # The configuration files read the same registry.
        from jaxprobe.config import parse_config
        config = parse_config('[data]\nname = "breast_cancer"\n[model]\nkind = "logistic_regression"\n'
                              '[probe]\ntype = "prediction_risky"\nalpha = 0.5\n'
                              '[sampler]\nname = "renamed_mala"\ntemperature = 0.1\n')
        assert config.get("sampler.name") == "renamed_mala"
    finally:
        registry.unregister_sampler("renamed_mala")
    assert "renamed_mala" not in registry.known_kernels()
    with pytest.raises(ValueError, match="sampler must be one of 'mala'"):
        registry.make_kernel("renamed_mala")


def test_register_sampler_refuses_what_cannot_run():
    with pytest.raises(ValueError, match="built-in sampler"):
        jaxprobe.register_sampler("mala", MALA)
    with pytest.raises(ValueError, match="kernel_class.name must be the registered name 'other'"):
        jaxprobe.register_sampler("other", _Renamed)
    with pytest.raises(ValueError, match="name must be a sampler name"):
        jaxprobe.register_sampler("two words", _Renamed)

    @dataclasses.dataclass
    class Mutable(GradientKernel):  # not frozen
        name: ClassVar[str] = "mutable"

    with pytest.raises(TypeError, match="frozen dataclass"):
        jaxprobe.register_sampler("mutable", Mutable)

    @dataclasses.dataclass(frozen=True)
    class Undeclared(GradientKernel):
        name: ClassVar[str] = "undeclared"
        steps: int = 3  # not declared with an option helper

    with pytest.raises(TypeError, match="Undeclared.steps must be declared with int_option"):
        jaxprobe.register_sampler("undeclared", Undeclared)

    @dataclasses.dataclass(frozen=True)
    class NoStep:
        name: ClassVar[str] = "nostep"

    with pytest.raises(TypeError, match="does not implement the Kernel protocol"):
        jaxprobe.register_sampler("nostep", NoStep)
    assert not {"mutable", "undeclared", "nostep", "other"} & set(registry.known_kernels())


def test_no_branching_on_sampler_names_outside_the_registry():
    """Samplers are told apart by their kernel's members (uses_gradient, starts_at_target, adaptation, ...),
    never by comparing names, anywhere in the package but the registry (and the benchmark scripts, which call the
    public API with sampler names as users do)."""
    names = "|".join(registry.known_kernels())
    patterns = [
        re.compile(r"\b(kernel|sampler|smc)\w*\.name\s*(==|!=)"),  # kernel.name == ...
        re.compile(rf"(==|!=)\s*['\"]({names})['\"]"),  # ... == "chees"
        re.compile(rf"['\"]({names})['\"]\s*(==|!=)"),
        re.compile(r"cross_chain_warmup"),  # the old ChEES flag the engine branched on
    ]
    offending = []
    for path in _sources():
        if path.name == "registry.py" or path.relative_to(PACKAGE).parts[0] == "bench":
            continue  # the benchmark scripts are clients: they pick samplers by name as users do
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if any(pattern.search(code) for pattern in patterns):
                offending.append(f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}")
    assert not offending, "\n".join(offending)
