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


def test_an_executed_copy_is_shown_only_while_it_matches_its_source(tmp_path, monkeypatch):
    # CI's docs step exports the strict mode; this test sets it itself where it wants it.
    monkeypatch.delenv("JAXPROBE_DOCS_REQUIRE_EXECUTED", raising=False)
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


# ------------------------------------------------------------------------------ figures drawn from the results
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import jaxprobe_figures  # noqa: E402

sys.path.pop(0)

_WHERE = {"date": "2026-01-02T03:04:05+00:00", "machine": {"cpu_model": "Toy CPU", "cpu_count": 2}}
_SMC_ROW = {"ratio_share": 0.9, "ratio_log_z": 1.2, "ratio_share_90": [0.7, 1.1], "ratio_log_z_90": [0.9, 1.6]}
_TOY_RESULTS = {
    "throughput": {"throughput": {
        "rows": [{"num_chains": c, "limit_chain_steps_per_s": 1e5 * c ** 0.5,
                  "thin1": {"chain_steps_per_s": 2e5 * c ** 0.5}, "thin10": {"chain_steps_per_s": 2.2e5 * c ** 0.5}}
                 for c in (1, 64, 1024)],
        "peers": [{"name": "blackjax mala", "num_chains": c, "chain_steps_per_s": 5e4 * c ** 0.6} for c in (1, 64)],
        "numpyro_mcmc": []}},
    "answer_speed": {"mala": [{"num_chains": 256, "thin": 1, "ratio": 1.1, "median_paired_ratio": 1.05, "target": 1.15},
                              {"num_chains": 2048, "thin": 10, "ratio": 1.3, "target": 1.15}],
                     "samplers": [{"sampler": "hmc", "num_chains": 256, "against": "blackjax hmc", "ratio": 0.98,
                                   "median_paired_ratio": 1.0, "target": 1.15}]},
    "calibration": {"rows": [{"case": "mala: mean x0", "method": "ess", "runs": 200, "coverage": 0.94, "low": 0.90,
                              "high": 0.97, "in_target": True},
                             {"case": "hmc: mean x1", "method": "batch_means", "runs": 200, "coverage": 0.875,
                              "low": 0.82, "high": 0.92, "in_target": False}]},
    "smc_peers": {"questions": {q: {"samplers": {"jaxprobe:default": dict(_SMC_ROW),
                                                 "blackjax:1x5": dict(_SMC_ROW, ratio_share=1.0, ratio_log_z=1.0)}}
                                for q in ("mix2d", "three4d")}},
    "smc_settings": {"questions": {"mix2d": {"samplers": {"jaxprobe:5-steps": {"ratio_share": 0.95, "ratio_log_z": 1.0},
                                                         "blackjax:1x5": {"ratio_share": 1.0, "ratio_log_z": 1.1}}}}},
    "smc_acceptance": {"tolerance": {"share": 0.03, "log_z": 0.1},
                       "plain": {"rows": [{"seed": s, "chains": 2048, "share_error_max_abs": 0.01 * (s + 1),
                                           "log_z_error": 0.04 * (s - 1)} for s in range(3)]},
                       "precision": [{"mcse": 0.015, "rows": [{"seed": s, "share_error_max_abs": 0.005,
                                                               "log_z_error": -0.01} for s in range(3)]}]},
    "compile": {"libraries": ["jaxprobe", "blackjax"], "targets": {
        "gaussian": {"title": "10-D Gaussian", "samplers": {
            "mala": {"jaxprobe": {"first_seconds": 1.8, "compile_seconds": 1.5},
                     "blackjax": {"first_seconds": 3.0, "compile_seconds": 2.7}, "ratio": 0.6},
            "nuts": {"jaxprobe": {"first_seconds": 5.9, "compile_seconds": 5.0}}}}}},
}


@pytest.mark.parametrize("stem", sorted(_TOY_RESULTS))
def test_the_build_draws_each_results_figure_and_shows_it_above_the_tables(tmp_path, stem):
    root = _checkout(tmp_path)
    (root / f"benchmarks/results/{stem}.json").write_text(json.dumps(dict(_WHERE, **_TOY_RESULTS[stem])))
    jaxprobe_docs.generate_results(root / "docs", root)
    png = root / "docs/performance/_generated" / f"{stem}.png"
    assert png.read_bytes().startswith(b"\x89PNG") and png.stat().st_size > 1000
    page = (root / f"docs/performance/results-{stem}.md").read_text()
    embed = page.index(f"```{{figure}} _generated/{stem}.png")
    assert embed < page.index("## Numbers")
    assert "(recorded 2026-01-02 on Toy CPU, 2 cores.)" in page[embed:] and jaxprobe_figures.caption(stem) in page
    # The results file goes: its figure goes with its page.
    (root / f"benchmarks/results/{stem}.json").unlink()
    jaxprobe_docs.generate_results(root / "docs", root)
    assert not png.exists()


def test_figures_plot_the_files_numbers():
    figure = jaxprobe_figures.calibration.__wrapped__(dict(_WHERE, **_TOY_RESULTS["calibration"]))
    ax = figure.axes[0]
    points = next(c for c in ax.collections if c.get_offsets().shape == (2, 2)).get_offsets()
    assert points[:, 0].tolist() == [0.94, 0.875]                       # rows top to bottom
    assert ax.patches[0].get_x() == pytest.approx(0.90) and ax.patches[0].get_width() == pytest.approx(0.08)
    figure = jaxprobe_figures.throughput.__wrapped__(dict(_WHERE, **_TOY_RESULTS["throughput"]))
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    assert lines["limit (hand-written)"].get_ydata().tolist() == pytest.approx([1e5, 8e5, 1e5 * 32])
    assert lines["blackjax mala"].get_xdata().tolist() == [1, 64] and figure.axes[0].get_xscale() == "log"
    figure = jaxprobe_figures.smc_peers.__wrapped__(dict(_WHERE, **_TOY_RESULTS["smc_peers"]))
    bars = figure.axes[0].collections[0].get_segments()              # the 90 % intervals, row by row
    assert [(s[0][0], s[1][0]) for s in bars] == [(0.7, 1.1)] * 4


@pytest.mark.parametrize("stem, broken", [
    ("throughput", {"throughput": {"rows": []}}),                                 # no rows
    ("answer_speed", {"mala": [{"num_chains": 256, "thin": 1, "ratio": "fast", "target": 1.15}]}),   # not a number
    ("calibration", {"rows": [dict(_TOY_RESULTS["calibration"]["rows"][0], coverage=float("nan"))]}),
    ("calibration", {"rows": [dict(_TOY_RESULTS["calibration"]["rows"][0], in_target=False)]}),  # another band
    ("smc_peers", {"questions": {"mix2d": {"samplers": {"jaxprobe:default": {"ratio_share": 1.0}}}}}),
    ("compile", {"libraries": ["jaxprobe"], "targets": {"gaussian": {"samplers": {"mala": {"jaxprobe": {}}}}}}),
])
def test_a_file_without_the_layout_gets_no_figure_and_the_page_says_so(tmp_path, stem, broken):
    root = _checkout(tmp_path)
    (root / f"benchmarks/results/{stem}.json").write_text(json.dumps(dict(_WHERE, **broken)))
    assert jaxprobe_figures.drawer(stem)(dict(_WHERE, **broken), tmp_path / "x.png") is False
    assert not (tmp_path / "x.png").exists()
    jaxprobe_docs.generate_results(root / "docs", root)
    assert not (root / "docs/performance/_generated" / f"{stem}.png").exists()
    page = (root / f"docs/performance/results-{stem}.md").read_text()
    assert "No figure: the file does not have the layout that" in page and "{figure}" not in page


def test_a_figure_that_raises_fails_the_build_naming_the_file(tmp_path, monkeypatch):
    root = _checkout(tmp_path)
    (root / "benchmarks/results/calibration.json").write_text(json.dumps(dict(_WHERE, **_TOY_RESULTS["calibration"])))

    def broken(data, path):
        raise ZeroDivisionError("a bug in the drawing code")

    monkeypatch.setitem(jaxprobe_figures.FIGURES, "calibration", broken)
    with pytest.raises(RuntimeError, match=r"benchmarks/results/calibration.json: drawing its figure \(broken in "
                                           r"docs/_ext/jaxprobe_figures.py\) failed: ZeroDivisionError"):
        jaxprobe_docs.generate_results(root / "docs", root)


def test_every_registered_figure_draws_from_the_recorded_results(tmp_path):
    """The repository's own benchmarks/results/*.json: a benchmark whose layout changed breaks this, not the page."""
    drawn = []
    for path in sorted((ROOT / "benchmarks/results").glob("*.json")):
        draw = jaxprobe_figures.drawer(path.stem)
        if draw is not None:
            png = tmp_path / f"{path.stem}.png"
            assert draw(json.loads(path.read_text()), png) is True, path.name
            assert png.read_bytes().startswith(b"\x89PNG") and png.stat().st_size > 1000
            drawn.append(path.stem)
    assert set(jaxprobe_figures.FIGURES) <= {stem.split(".")[0] for stem in drawn}, drawn   # each kind has a file


def test_the_calibration_band_is_the_benchmarks_own():
    import ast

    tree = ast.parse((ROOT / "jaxprobe/bench/calibration.py").read_text())
    target = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                  and any(getattr(t, "id", None) == "TARGET" for t in node.targets))
    assert ast.literal_eval(target) == jaxprobe_figures.CALIBRATION_BAND
