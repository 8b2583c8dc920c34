"""The examples in the public docstrings run (issue 28: "every public function's docstring has a short example that
runs, doctest-checked in CI"). Every public name of the API reference (each public module's ``__all__``, the same
collection as docs/_ext/jaxprobe_docs.py) whose docstring has a ``>>>`` example is run with :mod:`doctest`, with
its module's namespace and ``jax``, ``jnp``, ``np`` and ``jaxprobe`` available. Slow pass: some examples sample."""

from __future__ import annotations

import __future__
import doctest
import importlib
import inspect
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _public_objects() -> list[tuple[str, object, object]]:
    """(qualified name, object, home module) of every public name, each once, from the docs' own collection."""
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        import jaxprobe_docs
    finally:
        sys.path.pop(0)
    modules = [importlib.import_module("jaxprobe")]
    for layer in jaxprobe_docs._layers(ROOT):
        for name in layer:
            modules += jaxprobe_docs._public_modules(name)
    home_names, _ = jaxprobe_docs._collect(modules)
    found = []
    for module_name, names in sorted(home_names.items()):
        module = importlib.import_module(module_name)
        found += [(f"{module_name}.{name}", getattr(module, name), module) for name in names]
    return found


def _examples() -> list[tuple[str, str, object]]:
    """(qualified name, docstring, home module) of public names whose docstring (or a method's) has an example."""
    examples = []
    for qualified, obj, module in _public_objects():
        if not (getattr(obj, "__module__", None) or "").startswith("jaxprobe"):
            continue                     # another library's object re-exported (types.Array): its examples are its own
        docs = [(qualified, inspect.getdoc(obj) or "")]
        if inspect.isclass(obj):
            members = {name: getattr(member, "__func__", member) for name, member in vars(obj).items()}  # classmethods
            docs += [(f"{qualified}.{name}", inspect.getdoc(member) or "") for name, member in members.items()
                     if not name.startswith("_") and callable(member)
                     and (getattr(member, "__module__", None) or "").startswith("jaxprobe")]
        examples += [(name, doc, module) for name, doc in docs if ">>>" in doc]
    return examples


try:
    EXAMPLES = _examples() if sys.version_info >= (3, 11) else []   # the collection reads pyproject with tomllib
except ImportError:  # an optional dependency of a public module is missing: the docs build needs it anyway
    EXAMPLES = []


@pytest.mark.slow
@pytest.mark.parametrize("name,docstring,module", EXAMPLES, ids=[name for name, _, _ in EXAMPLES])
def test_docstring_example_runs(name, docstring, module, tmp_path, monkeypatch):
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxprobe

    monkeypatch.chdir(tmp_path)          # an example that writes a file writes it here
    globs = dict(vars(module), jax=jax, jnp=jnp, np=np, jaxprobe=jaxprobe)
    if isinstance(globs.get("annotations"), __future__._Feature):
        del globs["annotations"]         # run as a user types them: not under the module's `from __future__ import`
    test = doctest.DocTestParser().get_doctest(docstring, globs, name, module.__file__, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    write = sys.stdout.write             # bound now: doctest swaps sys.stdout while it runs, and print would follow
    runner.run(test, out=write)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name}'s docstring failed (above)"


def test_there_are_docstring_examples():
    if sys.version_info < (3, 11):
        pytest.skip("the public names are collected from pyproject.toml with tomllib (Python >= 3.11)")
    assert len(EXAMPLES) >= 3, [name for name, _, _ in EXAMPLES]


def _coverage() -> tuple[list[str], dict[str, list[int]]]:
    """(public functions and classes of jaxprobe without a docstring example, {home module: [with, all]})."""
    import collections

    counts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])   # module -> [with example, all]
    missing = []
    for name, obj, module in _public_objects():
        if not ((getattr(obj, "__module__", None) or "").startswith("jaxprobe")
                and (inspect.isfunction(obj) or inspect.isclass(obj))):
            continue
        has_example = ">>>" in (inspect.getdoc(obj) or "")
        counts[module.__name__][0] += has_example
        counts[module.__name__][1] += 1
        if not has_example:
            missing.append(name)
    return missing, counts


def test_every_public_function_and_class_has_an_example():
    """Issue 28: every public name of the API reference shows how it is used (run by the slow test above)."""
    if sys.version_info < (3, 11):
        pytest.skip("the public names are collected from pyproject.toml with tomllib (Python >= 3.11)")
    missing, _ = _coverage()
    assert not missing, f"{len(missing)} public names have no docstring example: {missing}"


if __name__ == "__main__":
    # `python tests/test_docs_doctests.py`: the public functions and classes whose docstring has no example yet,
    # then how many have one, per home module and in all.
    missing, counts = _coverage()
    print("\n".join(missing))
    for module_name, (covered, total) in sorted(counts.items()):
        print(f"{covered:4d} / {total:<4d} {module_name}", file=sys.stderr)
    covered, total = (sum(column) for column in zip(*counts.values()))
    print(f"{covered} of {total} public functions and classes have a docstring example; {len(missing)} have none",
          file=sys.stderr)
