"""The pages the documentation build generates (docs/_ext/jaxprobe_docs.py): results pages name their recording,
executed notebooks are used only when they match their source, the API reference covers every public name once.
The strict build itself (``sphinx-build -W``) runs in .ci/run."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import jaxprobe_docs  # noqa: E402

sys.path.pop(0)


def _checkout(tmp_path: pathlib.Path) -> pathlib.Path:
    """A folder laid out like the repository: docs/, benchmarks/results/, notebooks/."""
    for folder in ("docs/performance", "docs/tutorials", "benchmarks/results", "notebooks"):
        (tmp_path / folder).mkdir(parents=True)
    return tmp_path


def _notebook(path: pathlib.Path, source: str, outputs: list | None = None) -> None:
    cell = {"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {}, "outputs": outputs or [],
            "source": source}
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))


def test_a_results_page_names_command_date_machine_and_its_rows(tmp_path):
    root = _checkout(tmp_path)
    record = {"command": "python -m jaxprobe.bench.toy", "date": "2026-01-02T03:04:05+00:00",
              "machine": {"cpu_model": "Toy CPU", "cpu_count": 2}, "git": "abc1234",
              "rows": [{"chains": 64, "ratio": 1.23456}, {"chains": 1024, "ratio": 0.9}]}
    (root / "benchmarks/results/toy.json").write_text(json.dumps(record))
    (root / "benchmarks/results/toy_curve.png").write_bytes(b"\x89PNG")
    assert jaxprobe_docs.generate_results(root / "docs", root) == ["results-toy"]
    page = (root / "docs/performance/results-toy.md").read_text()
    assert "`python -m jaxprobe.bench.toy`" in page and "2026-01-02T03:04:05+00:00" in page
    assert "cpu_model: Toy CPU; cpu_count: 2" in page and "| code measured | abc1234 |" in page
    assert "| file last committed | not in git history |" in page       # tmp_path is no git checkout
    assert "| chains | ratio |" in page and "| 1,024 | 0.9 |" in page and "| 64 | 1.235 |" in page
    assert "toy_curve.png" in page
    # A results file removed from the checkout takes its page with it.
    (root / "benchmarks/results/toy.json").unlink()
    assert jaxprobe_docs.generate_results(root / "docs", root) == []
    assert not (root / "docs/performance/results-toy.md").exists()


def test_an_executed_copy_is_shown_only_while_it_matches_its_source(tmp_path):
    root = _checkout(tmp_path)
    docs = root / "docs"
    _notebook(root / "notebooks/01_a.ipynb", "print(1)")
    assert jaxprobe_docs.stage_notebooks(docs, root) == {"01_a.ipynb": "source, executed by this build"}
    executed = docs / jaxprobe_docs.EXECUTED_DIR / "01_a.ipynb"
    executed.parent.mkdir(parents=True)
    _notebook(executed, "print(1)", outputs=[{"output_type": "stream", "name": "stdout", "text": "1\n"}])
    notebook = json.loads(executed.read_text())
    notebook["metadata"][jaxprobe_docs.HASH_KEY] = jaxprobe_docs.source_hash(root / "notebooks/01_a.ipynb")
    executed.write_text(json.dumps(notebook))
    assert jaxprobe_docs.stage_notebooks(docs, root) == {"01_a.ipynb": "executed copy"}
    staged = json.loads((docs / "tutorials/01_a.ipynb").read_text())
    assert staged["cells"][0]["outputs"] and staged["metadata"]["mystnb"]["execution_mode"] == "off"
    # The notebook changes: its old outputs are not shown; CI's strict mode refuses to execute it a second time.
    _notebook(root / "notebooks/01_a.ipynb", "print(2)")
    assert jaxprobe_docs.stage_notebooks(docs, root) == {"01_a.ipynb": "source, executed by this build"}
    staged = json.loads((docs / "tutorials/01_a.ipynb").read_text())
    assert not staged["cells"][0]["outputs"] and "mystnb" not in staged["metadata"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JAXPROBE_DOCS_REQUIRE_EXECUTED", "1")
        with pytest.raises(RuntimeError, match="no executed copy of notebooks/01_a.ipynb"):
            jaxprobe_docs.stage_notebooks(docs, root)


def test_docstring_bars_are_absolute_values_not_substitutions():
    assert jaxprobe_docs._escape_bars("|x| > 1e6, ``a | b``") == "\\|x\\| > 1e6, ``a | b``"
    assert jaxprobe_docs._escape_bars("| a line block") == "| a line block"
    lines = [":param x: one", "   more", "Free text after the fields."]
    jaxprobe_docs.process_docstring(None, "function", "f", lambda: 0, {}, lines)
    assert lines == [":param x: one", "   more", "", "Free text after the fields."]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="reads pyproject.toml with tomllib")
def test_every_public_name_has_one_home_in_the_api_reference():
    import importlib

    modules = [importlib.import_module("jaxprobe")]
    for layer in jaxprobe_docs._layers(ROOT):
        for name in layer:
            modules += jaxprobe_docs._public_modules(name)
    home_names, listed = jaxprobe_docs._collect(modules)
    for module in modules:
        for name in module.__all__:
            if hasattr(module, name) and not isinstance(getattr(module, name), type(sys)):
                homes = [home for item, home in listed[module.__name__] if item == name]
                assert len(homes) == 1 and name in home_names[homes[0]], (module.__name__, name, homes)
    assert "sample" in home_names["jaxprobe.engine.api"] and "generate" in home_names["jaxprobe.generation"]
