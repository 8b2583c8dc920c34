"""The README's and the documentation's examples run as written (issue 15: plain NumPy data, float64 included;
issue 28: every Python block in README and docs is complete) and end without a warning of jaxprobe's (an example's
answer and its error bar must be trustworthy). Every ```python block runs in a fresh process in an empty folder,
with jaxprobe's warnings (ConvergenceWarning, MCSEWarning, PrecisionWarning, ...) turned into errors. Pages that are
MyST notebooks (``file_format: mystnb``, e.g. Getting started) are executed by the documentation build instead
(``sphinx-build -W`` in .ci/run fails on an error), and generated pages (docs/.gitignore) are not examples."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.conftest import JAXPROBE_WARNINGS

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
GENERATED = ("_build", "jupyter_execute", ".jupyter_cache")


def _pages() -> list[pathlib.Path]:
    """README.md and every hand-written Markdown page of docs/ that is not executed by the docs build."""
    pages = [README]
    for page in sorted(DOCS.rglob("*.md")):
        relative = page.relative_to(DOCS)
        if relative.parts[0] in GENERATED or re.match(r"results-", page.name):
            continue
        if re.search(r"^file_format:\s*mystnb", page.read_text()[:300], flags=re.M):
            continue
        pages.append(page)
    return pages


def _blocks() -> list[tuple[str, str]]:
    """(page:line, code) of every python block of the pages."""
    blocks = []
    for page in _pages():
        text = page.read_text()
        for match in re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M):
            where = f"{page.relative_to(ROOT)}:{text[:match.start()].count(chr(10)) + 1}"
            blocks.append((where, match.group(1)))
    return blocks


BLOCKS = _blocks()
PRELUDE = ("import warnings, jaxprobe\n"
           f"for name in {JAXPROBE_WARNINGS!r}:\n"
           "    warnings.simplefilter('error', getattr(jaxprobe, name))\n")


def test_the_readme_and_docs_have_examples():
    readme = [where for where, _ in BLOCKS if where.startswith("README.md")]
    assert len(readme) >= 1, readme
    assert len(BLOCKS) >= 10, [where for where, _ in BLOCKS]


def test_every_python_block_is_complete():
    """A block runs as written: it starts with its imports (no fragment continuing an earlier block)."""
    fragments = [where for where, code in BLOCKS if not re.match(r"(import|from) ", code)]
    assert not fragments, f"python blocks that do not start with their imports: {fragments}"


@pytest.mark.slow
@pytest.mark.parametrize("where,code", BLOCKS, ids=[where for where, _ in BLOCKS])
def test_example_runs_as_written(where, code, tmp_path):
    environment = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                       MPLBACKEND="Agg")
    out = subprocess.run([sys.executable, "-c", PRELUDE + code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=900, env=environment)
    assert out.returncode == 0, f"example at {where} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
    assert not any(name in out.stderr for name in JAXPROBE_WARNINGS), out.stderr[-2000:]
