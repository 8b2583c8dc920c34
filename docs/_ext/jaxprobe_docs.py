"""Pages generated when the site builds, so none of them can outlive the code or the data they describe.

- ``api/layer-*.rst``: the API reference, one page per layer of the import-linter contract in ``pyproject.toml``
  (the layers of ``ARCHITECTURE.md``); every name in every public module's ``__all__``, documented once where it
  is defined (autodoc + napoleon) and linked from the modules that re-export it.
- ``performance/results-*.md``: one page per ``benchmarks/results/*.json``: the recording's command, date,
  machine and the commit that recorded the file (from git), then the figure drawn from the JSON by
  ``jaxprobe_figures`` (into ``performance/_generated/``) where one is registered, the PNGs the benchmark script
  wrote beside the file, and its numbers as tables.
- ``tutorials/*.ipynb``: the notebooks of ``notebooks/``; an executed copy written by ``tests/test_notebooks.py``
  (``docs/_build/executed/``) is used when its source hash matches, so CI executes each notebook once. Without
  one, the source is copied and myst-nb executes it during the build (``nb_execution_mode = "auto"``).

Every generated path is listed in ``docs/.gitignore``. ``generate_all(docs_dir)`` is called from ``conf.py``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import pathlib
import pkgutil
import re
import subprocess

import jaxprobe_figures  # docs/_ext beside this module: the figures drawn from the results files

EXECUTED_DIR = pathlib.Path("_build") / "executed"
FIGURE_DIR = pathlib.Path("performance") / "_generated"   # the drawn figures, <results stem>.png
HASH_KEY = "jaxprobe_source_sha256"
MAX_ROWS = 40                            # rows of one table on a results page (the file has them all)


# ----------------------------------------------------------------------------------------------------- helpers
def _write_if_changed(path: pathlib.Path, text: str) -> None:
    """Write only when the text differs (an unchanged file keeps its mtime: no needless rebuild)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def _clean(folder: pathlib.Path, pattern: str, keep: set[str]) -> None:
    """Remove generated files matching ``pattern`` that this build did not write (a renamed module or result)."""
    for old in folder.glob(pattern):
        if old.name not in keep:
            old.unlink()


def source_hash(path: pathlib.Path) -> str:
    """sha256 of a notebook's cell sources: what the executed copy must have been executed from."""
    notebook = json.loads(path.read_text())
    sources = ["".join(cell.get("source", "")) for cell in notebook["cells"]]
    return hashlib.sha256(json.dumps(sources).encode()).hexdigest()


# ----------------------------------------------------------------------------------------------------- API pages
def _layers(root: pathlib.Path) -> list[list[str]]:
    """The import-linter layers (top first), each a list of module names."""
    import tomllib  # Python >= 3.11, as Sphinx 9 (the docs extra); tests/test_notebooks.py imports this module too

    config = tomllib.loads((root / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    return [[name.strip() for name in layer.split("|")] for layer in contract["layers"]]


def _public_modules(name: str) -> list:
    """The module and its public submodules (no ``_private`` part, no ``__main__``), imported."""
    if any(part.startswith("_") for part in name.split(".")):
        return []
    if importlib.util.find_spec(name) is None:
        return []                        # named in the contract before its package exists (lint-imports says so)
    module = importlib.import_module(name)
    modules = [module]
    if hasattr(module, "__path__"):
        for info in pkgutil.walk_packages(module.__path__, prefix=name + "."):
            if any(part.startswith("_") for part in info.name.split(".")):
                continue
            modules.append(importlib.import_module(info.name))
    return [m for m in modules if isinstance(getattr(m, "__all__", None), (list, tuple))]


def _home(obj, listed_in: list[str]) -> str:
    """The module that documents ``obj``: where it is defined if that module lists it, else the deepest lister."""
    defined = getattr(obj, "__module__", None) if (inspect.isclass(obj) or callable(obj)) else None
    if defined in listed_in:
        return defined
    return max(listed_in, key=lambda m: (m.count("."), m))


def _key(obj, name: str) -> tuple:
    """One key per public name of an object: (identity, name); small ints and strings are shared objects."""
    return (id(obj), name)  # an alias (``Estimate = Observed``) is its own entry, documented as an alias


def _collect(modules: list) -> tuple[dict, dict]:
    """(home module -> names documented there, module -> [(name, home)] of everything it lists)."""
    listers: dict[tuple, list[str]] = {}
    for module in modules:
        for name in module.__all__:
            if not hasattr(module, name):
                continue
            obj = getattr(module, name)
            if inspect.ismodule(obj):
                continue
            key = _key(obj, name)
            listers.setdefault(key, []).append(module.__name__)
    home_names: dict[str, list[str]] = {}
    listed: dict[str, list[tuple[str, str]]] = {}
    for module in modules:
        for name in module.__all__:
            if not hasattr(module, name) or inspect.ismodule(getattr(module, name)):
                continue
            obj = getattr(module, name)
            key = _key(obj, name)
            home = _home(obj, listers[key])
            listed.setdefault(module.__name__, []).append((name, home))
            if home == module.__name__:
                home_names.setdefault(home, []).append(name)
    return home_names, listed


def _directive(module, name: str) -> str:
    """The autodoc directive for one public name of its home module."""
    obj = getattr(module, name)
    origin = getattr(obj, "__module__", None) or ""
    if (inspect.isclass(obj) or callable(obj)) and not origin.startswith("jaxprobe"):
        # A re-exported name of another library (a type alias such as ``types.Array``): named, not documented again.
        return f".. py:data:: {module.__name__}.{name}\n\n   Alias of ``{origin}.{getattr(obj, '__qualname__', name)}``.\n"
    if (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__name__ != name:
        return (f".. py:data:: {module.__name__}.{name}\n\n"
                f"   Alias of :py:obj:`{origin}.{obj.__qualname__}`.\n")
    if inspect.isclass(obj):
        kind = "exception" if issubclass(obj, BaseException) else "class"
        options = "   :members:\n   :show-inheritance:\n" if kind == "class" else "   :show-inheritance:\n"
        return f".. auto{kind}:: {module.__name__}.{name}\n{options}"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return f".. autofunction:: {module.__name__}.{name}\n"
    if callable(obj) and not isinstance(obj, (int, float, str, tuple, list, dict, frozenset)):
        return f".. autofunction:: {module.__name__}.{name}\n"
    return f".. autodata:: {module.__name__}.{name}\n   :no-value:\n"


def _summary(obj) -> str:
    """The first sentence of an object's own docstring (data shows none: its docstring is its type's)."""
    if not (inspect.isclass(obj) or callable(obj)):
        return ""
    doc = (inspect.getdoc(obj) or "").split("\n\n")[0].replace("\n", " ")
    sentence = re.split(r"(?<=[.!?])\s", doc, maxsplit=1)[0]
    return " ".join(_escape_bars(sentence).split()) if sentence.count("``") % 2 == 0 else ""


def _module_section(module, home_names: dict, listed: dict) -> str:
    """One module's section: its summary line, a table of what it lists, the full entries of what it defines."""
    name = module.__name__
    title = f"``{name}``"
    lines = [title, "-" * len(title), "", f".. py:module:: {name}", ""]
    doc = inspect.getdoc(module) or ""
    if doc:
        lines += [doc.split("\n\n")[0].replace("\n", " "), ""]
    entries = listed.get(name, [])
    if entries:
        lines += [".. list-table::", "   :widths: 35 65", ""]
        for item, home in entries:
            where = "" if home == name else f" (from ``{home}``)"
            lines += [f"   * - :py:obj:`{item} <{home}.{item}>`", f"     - {_summary(getattr(module, item))}{where}"]
        lines.append("")
    for item in home_names.get(name, []):
        lines += [_directive(module, item), ""]
    return "\n".join(lines)


def generate_api(docs: pathlib.Path, root: pathlib.Path) -> list[str]:
    """Write ``api/layer-NN-*.rst`` (one per layer, top layer first); return the page names."""
    layers = _layers(root)
    modules_per_layer = [[m for name in layer for m in _public_modules(name)] for layer in layers]
    all_modules = [importlib.import_module("jaxprobe")] + [m for ms in modules_per_layer for m in ms]
    home_names, listed = _collect(all_modules)
    pages = []
    top = ["jaxprobe"]
    for number, (layer, modules) in enumerate([(top, [all_modules[0]])] + list(zip(layers, modules_per_layer))):
        if not modules:
            continue
        page = f"layer-{number:02d}-{layer[0].split('.')[-1].strip('_')}"
        heading = " | ".join(layer)
        text = [heading, "=" * len(heading), ""]
        if number == 0:
            text += ["The public face: what ``import jaxprobe`` gives (each name links to where it is documented).", ""]
        text += [_module_section(m, home_names, listed) for m in modules]
        _write_if_changed(docs / "api" / f"{page}.rst", "\n".join(text))
        pages.append(page)
    _clean(docs / "api", "layer-*.rst", {p + ".rst" for p in pages})
    return pages


# ------------------------------------------------------------------------------------------- performance pages
def _git(root: pathlib.Path, *args: str) -> str:
    """A git command's output in the checkout, or '' when git or the history is not there."""
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _find(data, keys: tuple[str, ...], depth: int = 2):
    """The first value under one of ``keys`` at most ``depth`` dicts deep (breadth first), else None."""
    layer = [data]
    for _ in range(depth + 1):
        for item in layer:
            if isinstance(item, dict):
                for key in keys:
                    if key in item and item[key] not in (None, "", {}):
                        return item[key]
        layer = [v for item in layer if isinstance(item, dict) for v in item.values()]
        layer += [v for item in layer if isinstance(item, list) for v in item[:1]]
    return None


def _cell(value) -> str:
    """A table cell: numbers to 4 significant digits, short lists inline, anything long summarized."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list) and len(value) <= 8 and all(not isinstance(v, (list, dict)) for v in value):
        return ", ".join(_cell(v) for v in value)
    if isinstance(value, (list, dict)):
        return f"({len(value)} {'entries' if isinstance(value, dict) else 'values'})"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _brief(value, limit: int = 400) -> str:
    """A header cell: a dict as ``key: value`` pairs (one level deep), anything else as a table cell."""
    if isinstance(value, dict):
        text = "; ".join(f"{k}: ({_brief(v, limit)})" if isinstance(v, dict) else f"{k}: {_cell(v)}"
                         for k, v in value.items())
        return text if len(text) <= limit else text[:limit] + " …"
    return _cell(value)


def _is_record_list(value) -> bool:
    return isinstance(value, list) and value and all(isinstance(v, dict) for v in value)


def _tables(data, title: str, level: int, out: list[str]) -> None:
    """Markdown of a JSON value: scalars as a key/value table, lists of records as tables, dicts recursed."""
    if _is_record_list(data):
        columns = list(dict.fromkeys(k for row in data for k in row))
        out += [f"{'#' * level} {title}", "", "| " + " | ".join(columns) + " |",
                "| " + " | ".join("---" for _ in columns) + " |"]
        out += ["| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |" for row in data[:MAX_ROWS]]
        out += ["", f"({len(data) - MAX_ROWS} more rows in the file.)"] if len(data) > MAX_ROWS else []
        out.append("")
        return
    if not isinstance(data, dict):
        return
    scalars = {k: v for k, v in data.items() if not isinstance(v, (dict, list)) or (
        isinstance(v, list) and not _is_record_list(v) and not any(isinstance(x, (dict, list)) for x in v))}
    nested = {k: v for k, v in data.items() if k not in scalars}
    out += [f"{'#' * level} {title}", ""]
    if scalars:
        out += ["| key | value |", "| --- | --- |"]
        out += [f"| {k} | {_cell(v)} |" for k, v in scalars.items()]
        out.append("")
    for key, value in nested.items():
        # Below the fourth heading level the path goes into the title instead (Markdown has few levels).
        _tables(value, f"{title} / {key}" if level >= 4 else str(key), min(level + 1, 4), out)


def _draw_figure(path: pathlib.Path, root: pathlib.Path, docs: pathlib.Path) -> tuple[pathlib.Path | None, str]:
    """Draw the figure of results file ``path`` (``jaxprobe_figures``) into ``docs/FIGURE_DIR``.

    Returns (the PNG, its caption), (None, why there is none) when the file lacks the layout its figure draws,
    or (None, "") when no figure is registered for it. A drawing error fails the build, naming the file."""
    draw = jaxprobe_figures.drawer(path.stem)
    if draw is None:
        return None, ""
    png = docs / FIGURE_DIR / f"{path.stem}.png"
    data = json.loads(path.read_text())
    try:
        drawn = draw(data, png)
    except Exception as error:
        raise RuntimeError(f"{path.relative_to(root).as_posix()}: drawing its figure ({draw.__name__} in "
                           f"docs/_ext/jaxprobe_figures.py) failed: {error!r}") from error
    if not drawn:
        return None, (f"No figure: the file does not have the layout that `{draw.__name__}` in "
                      "`docs/_ext/jaxprobe_figures.py` draws.")
    return png, f"{jaxprobe_figures.caption(path.stem)} ({jaxprobe_figures.recorded(data)}.)"


def _result_page(path: pathlib.Path, root: pathlib.Path, docs: pathlib.Path, figures: list,
                 drawn: tuple[pathlib.Path | None, str] = (None, "")) -> str:
    """The Markdown of one results file's page: header, the drawn figure (``_draw_figure``), the script's
    figures, the tables."""
    data = json.loads(path.read_text())
    relative = path.relative_to(root).as_posix()
    commit = _git(root, "log", "-1", "--format=%h (%cs)", "--", relative) or "not in git history"
    recorded = _find(data, ("code", "git", "commit"))
    lines = [f"# {path.stem}", "",
             f"Generated from `{relative}` when this site was built"
             + (f"; the script's own report is `{path.stem}.md` beside it." if path.with_suffix(".md").exists()
                else "."), "",
             "| | |", "| --- | --- |",
             f"| command | `{_cell(_find(data, ('command',)) or 'not recorded')}` |",
             f"| date | {_brief(_find(data, ('date',)) or 'not recorded')} |",
             f"| machine | {_brief(_find(data, ('machine', 'device')) or 'not recorded')} |",
             f"| code measured | {_brief(recorded) if recorded is not None else 'not recorded in the file'} |",
             f"| file last committed | {commit} |", ""]
    png, text = drawn
    if png is not None:
        target = os.path.relpath(png, docs / "performance")
        lines += [f"```{{figure}} {target}", f":alt: {png.name}", ":width: 100%", "", text, "```", ""]
    elif text:
        lines += [f"*{text}*", ""]
    for figure in figures:
        target = os.path.relpath(figure, docs / "performance")
        lines += [f"```{{image}} {target}", f":alt: {figure.name}", ":width: 90%", "```", ""]
    _tables(data, "Numbers", 2, lines)
    return "\n".join(lines)


def generate_results(docs: pathlib.Path, root: pathlib.Path) -> list[str]:
    """Write ``performance/results-<name>.md`` for every ``benchmarks/results/*.json``; return the page names."""
    pages = []
    paths = sorted((root / "benchmarks" / "results").glob("*.json"))
    figures: dict[str, list] = {path.stem: [] for path in paths}
    for png in sorted((root / "benchmarks" / "results").glob("*.png")):
        # A figure belongs to the results file with the longest name it starts with (NAME_x.png, NAME.x.png).
        owners = [stem for stem in figures if png.name.startswith((stem + "_", stem + "."))]
        if owners:
            figures[max(owners, key=len)].append(png)
    drawn_pngs = set()
    for path in paths:
        page = "results-" + re.sub(r"[^A-Za-z0-9_-]", "-", path.stem)
        drawn = _draw_figure(path, root, docs)
        drawn_pngs.add(drawn[0].name if drawn[0] is not None else "")
        _write_if_changed(docs / "performance" / f"{page}.md",
                          _result_page(path, root, docs, figures[path.stem], drawn))
        pages.append(page)
    _clean(docs / "performance", "results-*.md", {p + ".md" for p in pages})
    _clean(docs / FIGURE_DIR, "*.png", drawn_pngs)   # a figure whose file went (or no longer draws) goes too
    return pages


# ----------------------------------------------------------------------------------------------- tutorials
def stage_notebooks(docs: pathlib.Path, root: pathlib.Path) -> dict[str, str]:
    """Copy each notebook (its executed copy when that matches the source) to ``tutorials/``.

    Returns {notebook name: "executed copy" | "source, executed by this build"}."""
    staged = {}
    for source in sorted((root / "notebooks").glob("*.ipynb")):
        executed = docs / EXECUTED_DIR / source.name
        use = source
        if executed.exists():
            metadata = json.loads(executed.read_text()).get("metadata", {})
            if metadata.get(HASH_KEY) == source_hash(source):
                use = executed
        target = docs / "tutorials" / source.name
        notebook = json.loads(use.read_text())
        if use is executed:
            # Shown as executed: myst-nb's "auto" mode would run a notebook again for any cell without output.
            notebook["metadata"].setdefault("mystnb", {})["execution_mode"] = "off"
        text = json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
        staged[source.name] = "executed copy" if use is executed else "source, executed by this build"
        if use is source and os.environ.get("JAXPROBE_DOCS_REQUIRE_EXECUTED") == "1":
            raise RuntimeError(f"no executed copy of notebooks/{source.name} matching its source in "
                               f"docs/{EXECUTED_DIR}: run `pytest -m slow tests/test_notebooks.py` first (CI "
                               "executes each notebook once, in that test)")
    _clean(docs / "tutorials", "*.ipynb", set(staged))
    return staged


# ------------------------------------------------------------------------------------------- docstring fixes
_LITERAL = re.compile(r"(``.*?``)")
_FIELD = re.compile(r"^:(param|type|ivar|var|cvar|vartype|raises?|returns?|rtype|yields?|keyword|kwtype)\b")


def _escape_bars(line: str) -> str:
    """``|x|`` in prose is an absolute value, not a reST substitution: escape bars outside ``literals``."""
    if line.lstrip().startswith(("| ", "+-", "+=")):
        return line                      # a line block or a grid table
    parts = _LITERAL.split(line)
    return "".join(p if p.startswith("``") else re.sub(r"(?<!\\)\|", r"\\|", p) for p in parts)


def process_docstring(app, what, name, obj, options, lines) -> None:
    """autodoc hook: data without a docstring of its own shows none (not its type's), and bars are escaped."""
    if what in ("data", "attribute") and "\n".join(lines).strip() == (inspect.getdoc(type(obj)) or "").strip():
        lines[:] = []
        return
    fixed = []
    in_fields = False
    for line in lines:
        line = _escape_bars(line).replace("``²", "``\\ ²")   # a literal ends only before a space or punctuation
        field = _FIELD.match(line) is not None
        if in_fields and line and not line[0].isspace() and not field:
            fixed.append("")                 # napoleon's field lists can end without the blank line reST needs
        in_fields = field or (in_fields and line[:1].isspace())
        fixed.append(line)
    lines[:] = fixed


def setup(app) -> dict:
    """Sphinx extension entry point (``extensions`` in conf.py)."""
    app.connect("autodoc-process-docstring", process_docstring)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def generate_all(docs: pathlib.Path) -> dict:
    """Every generated page; returns what was staged (printed by conf.py)."""
    root = docs.parent
    return {"api": generate_api(docs, root), "results": generate_results(docs, root),
            "tutorials": stage_notebooks(docs, root)}
