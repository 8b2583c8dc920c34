"""Sphinx configuration of jaxprobe's site: ``sphinx-build -W -b html docs docs/_build/html`` (README)."""

import os
import pathlib
import sys

DOCS = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(DOCS.parent))

import jaxprobe_docs  # noqa: E402  (docs/_ext: the pages generated at build time)

import jaxprobe  # noqa: E402

project = "jaxprobe"
author = "jaxprobe developers"
copyright = "jaxprobe developers, Apache-2.0"
release = jaxprobe.__version__

extensions = [
    "myst_nb",                      # Markdown pages, notebooks and executed MyST notebooks (getting started)
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",          # the docstrings' numpy sections
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "jaxprobe_docs",                # docs/_ext: docstring fixes at build time
]

# The API, performance and tutorial pages are generated before Sphinx looks for source files.
GENERATED = jaxprobe_docs.generate_all(DOCS)
print("jaxprobe docs: tutorials staged:", GENERATED["tutorials"])

exclude_patterns = ["_build", "_ext", ".jupyter_cache", "jupyter_execute", "**.ipynb_checkpoints"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"

# autodoc / napoleon: numpy docstrings as they are; members in source order; type hints in the description.
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autosummary_generate = False
napoleon_numpy_docstring = True
napoleon_google_docstring = True       # a few classes list their fields Google-style ("Args:")
napoleon_use_ivar = True                # "Attributes" as fields: no second entry beside autodoc's members
napoleon_use_rtype = False
napoleon_preprocess_types = False

# myst-nb: a notebook with outputs (an executed copy from tests/test_notebooks.py) is shown as it is; one
# without (a source notebook, the getting-started page) is executed once by this build; an error fails it.
# JAXPROBE_DOCS_EXECUTION=off builds without executing anything (a quick look at the layout).
nb_execution_mode = os.environ.get("JAXPROBE_DOCS_EXECUTION", "auto")
nb_execution_timeout = 900
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_in_temp = True
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"jaxprobe {release}"
html_static_path = []
html_theme_options = {"navigation_with_keys": True}
