"""The README's examples run as written (issue 15: plain NumPy data, float64 included) and end without a
convergence warning (an example's answer must be trustworthy). Every complete ```python block (one that
starts with its imports; fragments continuing an earlier example are skipped) runs in a fresh process in an
empty folder, with jaxprobe's ConvergenceWarning turned into an error."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
ROOT = README.parent


def _examples() -> list[tuple[int, str]]:
    """(line, code) of every complete python block of the README."""
    text = README.read_text()
    blocks = []
    for match in re.finditer(r"```python\n(.*?)```", text, flags=re.S):
        code = match.group(1)
        if re.match(r"(import|from) ", code):
            blocks.append((text[:match.start()].count("\n") + 1, code))
    return blocks


EXAMPLES = _examples()
PRELUDE = ("import warnings, jaxprobe\n"
           "warnings.simplefilter('error', jaxprobe.ConvergenceWarning)\n")


def test_the_readme_has_complete_examples():
    assert len(EXAMPLES) >= 6, [line for line, _ in EXAMPLES]


@pytest.mark.slow
@pytest.mark.parametrize("line,code", EXAMPLES, ids=[f"line{line}" for line, _ in EXAMPLES])
def test_readme_example_runs_as_written(line, code, tmp_path):
    environment = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                       MPLBACKEND="Agg")
    out = subprocess.run([sys.executable, "-c", PRELUDE + code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=900, env=environment)
    assert out.returncode == 0, f"README example at line {line} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
    assert "ConvergenceWarning" not in out.stderr, out.stderr[-2000:]
