"""Every notebook in notebooks/ runs top to bottom (they use small settings).

The executed notebook is written to docs/_build/executed/ with the hash of its source cells: the documentation
build (docs/_ext/jaxprobe_docs.py) shows that copy instead of executing the notebook again, so CI executes each
notebook once (this slow test, then `sphinx-build` in .ci/run)."""

import json
import os
import pathlib
import re
import sys

import pytest

from tests.conftest import JAXPROBE_WARNINGS

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
EXECUTED = ROOT / "docs" / "_build" / "executed"


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ is empty"


def _source_hash(path: pathlib.Path) -> tuple[str, str]:
    """(metadata key, hash) exactly as the documentation build computes them."""
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        import jaxprobe_docs
    finally:
        sys.path.pop(0)
    return jaxprobe_docs.HASH_KEY, jaxprobe_docs.source_hash(path)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    # A notebook ends without a warning of jaxprobe's, issued or printed in a verdict: its answers and their error
    # bars are ones to trust (or it reads the verdict itself).
    for number, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            text = (output.get("text", "") if output.get("output_type") == "stream"          # print, warnings
                    else "".join(output.get("data", {}).get("text/plain", "")))            # a cell's value
            warned = ([name for name in JAXPROBE_WARNINGS if name in text]
                      + re.findall(r"^ +warning: .*", text, flags=re.M))
            assert not warned, f"cell {number} of {path.name} warns: {warned} in {text[:500]}"
    key, digest = _source_hash(path)
    notebook.metadata[key] = digest
    EXECUTED.mkdir(parents=True, exist_ok=True)
    partial = EXECUTED / (path.name + f".{os.getpid()}.partial")
    nbformat.write(notebook, str(partial))
    os.replace(partial, EXECUTED / path.name)      # atomic: the docs build never reads half a notebook
    assert json.loads((EXECUTED / path.name).read_text())["metadata"][key] == digest
