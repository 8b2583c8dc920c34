"""The ``jaxprobe`` command: ``demo``, ``run``, ``sweep``, ``bench``, ``validate``.

Exit codes (for scripts):

- 0: success (``sweep``: every cell finished);
- 1: the command ran but something failed (``sweep``: some cells failed, recorded in the table;
  ``run``: the probe could not be sampled, or a file could not be written, e.g. a full disk; ``bench``: a
  benchmark exited non-zero); with ``--strict``,
  also an answer whose verdict failed (``run``; ``sweep``: a cell with status "unconverged"), which is
  otherwise a warning and a message on stderr;
- 2: bad usage or an invalid configuration file (nothing was run);
- 130: interrupted (Ctrl-C); a sweep resumes where it stopped when started again.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any, Callable

__all__ = ["main", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_INTERRUPTED", "find_benchmarks"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _say(arguments: argparse.Namespace, message: str) -> None:
    if not getattr(arguments, "quiet", False):
        print(message)


def _check_output_folder(out: str) -> None:
    """The output path must be a folder we can write into (or create), checked before anything is sampled."""
    from jaxprobe.config import ConfigError

    if os.path.exists(out) and not os.path.isdir(out):
        raise ConfigError(f"output {out}: exists and is not a folder (pass --out with a folder path)")
    existing = out
    while existing and not os.path.exists(existing):
        existing = os.path.dirname(existing)
    try:  # a real write (removed at once): os.access says yes to root everywhere, even in /proc
        with tempfile.TemporaryFile(dir=existing or "."):
            pass
    except OSError as error:
        raise ConfigError(f"output {out}: {existing or '.'} is not writable ({error.strerror})") from None


def _resumable(command: str, kept: str, work):
    """``work()``; on Ctrl-C say what was kept and how to resume, then re-raise (``main`` exits 130)."""
    try:
        return work()
    except KeyboardInterrupt:
        print(f"jaxprobe {command}: interrupted; {kept}: run the same command again to resume", file=sys.stderr)
        raise


def _demo(arguments: argparse.Namespace) -> int:
    from jaxprobe.demo import run_demo
    from jaxprobe.engine.registry import known_kernels  # the demo's log density suits every engine kernel

    if arguments.sampler not in known_kernels():  # a usage error (exit 2), before the demo trains its model
        raise ValueError(f"argument --sampler: invalid choice {arguments.sampler!r} (choose from "
                         f"{', '.join(known_kernels())})")
    result = run_demo(arguments.out, seed=arguments.seed, num_chains=arguments.chains,
                      num_samples=arguments.samples, num_warmup=arguments.warmup,
                      temperature=arguments.temperature, sampler=arguments.sampler,
                      progress=not arguments.quiet)
    if arguments.quiet:
        return EXIT_OK
    probe = result["probe_output"]
    print(f"\nTrained MLP on breast_cancer: test accuracy {result['test_accuracy']:.3f}")
    print(f"Sampled {result['num_chains']} chains x {result['num_samples_per_chain']} draws with "
          f"{result['sampler']} (acceptance {result['mean_acceptance_rate']:.2f}, "
          f"max R-hat {result['max_rhat']:.3f}, min bulk ESS {result['min_ess_bulk']:.0f})")
    print(f"Probe samples within 0.1 of the decision boundary: {probe['fraction_within_0.1_of_boundary']:.1%} "
          f"± {probe['fraction_within_0.1_of_boundary_mcse']:.1%} "
          f"(training data: {probe['data_fraction_within_0.1_of_boundary']:.1%})")
    print(f"Wrote {arguments.out}/samples.npz, summary.json, plot.png in {result['seconds']:.1f} s")
    return EXIT_OK


def _load(arguments: argparse.Namespace, sweep: bool):
    from jaxprobe.config import load_config

    return load_config(arguments.config, sweep=sweep)


def _validate(arguments: argparse.Namespace) -> int:
    """Every check ``run`` / ``sweep`` make before sampling: the file, its meaning, the data and models of every
    static grid combination, the output folder."""
    from jaxprobe.config import load_config

    config = load_config(arguments.config, sweep=None)
    _check_output_folder(arguments.out or config.sections["output"]["dir"])
    from jaxprobe.sweeps.from_config import check_config  # JAX: after the file's syntax and schema are checked

    check_config(config)
    cells = 1
    for values in config.grid.values():
        cells *= len(values)
    _say(arguments, f"{arguments.config}: valid ({'sweep of ' + str(cells) + ' cells' if config.grid else 'one run'})")
    return EXIT_OK


def _run(arguments: argparse.Namespace) -> int:
    from jaxprobe.engine.verdict import ConvergenceWarning
    from jaxprobe.sweeps.from_config import run_config

    config = _load(arguments, sweep=False)
    out = arguments.out or config.sections["output"]["dir"]
    _check_output_folder(out)
    kept = "draws" if config.sections["output"]["keep_draws"] else "run's statistics"
    summary = _resumable("run", f"the {kept} so far are in {out}/checkpoint.npz",
                         lambda: run_config(config, out=out, progress=not arguments.quiet))
    answer = summary["answer"]
    number = lambda value, form: "n/a" if value is None else format(value, form)  # noqa: E731
    # After SMC R-hat is no criterion (the chains start at draws of the target): said next to the number.
    rhat = f"max R-hat {number(summary['max_rhat'], '.3f')}" + (
        "" if summary.get("rhat_is_criterion", True) else " (not a criterion after SMC)")
    _say(arguments, f"{summary['probe']} on {summary['data']}: {summary['num_chains']} chains x "
                    f"{summary['num_samples_per_chain']} draws, acceptance {summary['acceptance_rate']:.2f}, "
                    f"{rhat}, min ESS {number(summary['min_ess_bulk'], '.0f')}")
    for key, value in answer.items():  # every answer field with its Monte-Carlo standard error, where it has one
        if isinstance(value, (float, dict)) and not key.endswith("_mcse") and key != "observables":
            _say(arguments, f"  {key}: {_answer_field(value, answer.get(key + '_mcse', _NO_ERROR))}")
    for name, value in answer.get("observables", {}).items():
        _say(arguments, f"  {name}: {_estimate(value['mean'], value['mcse'])}")
    for note in summary["answer"].get("notes", []):
        _say(arguments, f"  note: {note}")
    if summary["log_evidence"] is not None:
        _say(arguments, f"log evidence (share of the prior's mass that answers the question, log scale): "
                        f"{summary['log_evidence']:.3f} ± {summary['log_evidence_se']:.3f}")
    if (summary.get("precision") or {}).get("note"):  # what a [precision] run spent and reached
        _say(arguments, summary["precision"]["note"])
    verdict = summary["verdict"]
    if verdict.get("mcse_warning"):  # said even with --quiet: the error bars above cannot be trusted
        print(f"warning: the ± errors cannot be trusted: {verdict['mcse_warning']}", file=sys.stderr)
    if verdict["converged"]:
        checks = summary.get("verdict_checks")
        _say(arguments, "verdict: converged" + (f" ({checks})" if checks else ""))
    elif arguments.strict:
        print("verdict: NOT converged (see summary.json 'verdict'):\n" +
              "\n".join(f"  - {p}" for p in verdict["problems"]), file=sys.stderr)
        return EXIT_FAILED
    else:  # printed and warned even when --quiet: an answer that cannot be trusted says so
        warnings.warn("the answer cannot be trusted:\n" + "\n".join(f"  - {p}" for p in verdict["problems"]),
                      ConvergenceWarning, stacklevel=1)
        print("verdict: NOT converged (see summary.json 'verdict'):\n" +
              "\n".join(f"  - {p}" for p in verdict["problems"]), file=sys.stderr)
    written = ["samples.npz"] + ["samples_original_units.npz"] * bool(summary["keep_draws"]) + ["summary.json"]
    written += ["features.png"] * bool(config.sections["output"]["plots"] and summary["keep_draws"])
    _say(arguments, f"Wrote {out}/{', '.join(written)} in {summary['seconds']:.1f} s")
    return EXIT_OK


_NO_ERROR = object()  # an answer field without an MCSE: a fact of the model (test accuracy), not an estimate


def _answer_field(value: Any, mcse: Any = _NO_ERROR) -> str:
    """An answer field of summary.json: ``0.697 ± 0.012`` where the summary holds its MCSE, else ``0.697``; a
    dict of them (class shares) item by item."""
    if isinstance(value, dict):
        errors = mcse if isinstance(mcse, dict) else {}
        return ", ".join(f"{k} {_answer_field(v, errors.get(k, _NO_ERROR))}" for k, v in value.items())
    if mcse is _NO_ERROR:
        return "n/a" if value is None else f"{value:.3f}"
    return _estimate(value, mcse)


def _estimate(mean: Any, mcse: Any, limit: int = 8) -> str:
    """``mean ± mcse`` of an observable from summary.json: numbers, or lists (vector observables), the first
    ``limit`` values of a longer list shown."""
    def form(value: float | None) -> str:
        if value is None:
            return "n/a"
        return format(value, ".4g" if abs(value) >= 1000 or 0 < abs(value) < 1e-3 else ".3f")

    if not isinstance(mean, list):
        return f"{form(mean)} ± {form(mcse)}"
    shown = lambda values: "[" + ", ".join(form(v) for v in values[:limit]) + (  # noqa: E731
        f", ... ({len(values)} values: summary.json)" if len(values) > limit else "") + "]"
    return f"{shown(mean)} ± {shown(mcse)}"


def _sweep(arguments: argparse.Namespace) -> int:
    from jaxprobe.sweeps.from_config import sweep_config

    config = _load(arguments, sweep=True)
    out = arguments.out or config.sections["output"]["dir"]
    _check_output_folder(out)
    result = _resumable("sweep", f"the finished cells are in {out}",
                        lambda: sweep_config(config, out=out, progress=not arguments.quiet))
    failed = [row for row in result.rows if row["status"] == "error"]
    unconverged = [row for row in result.rows if row["status"] == "unconverged"]
    if config.sections["output"]["plots"]:
        _sweep_plot(config, result, out)
    _say(arguments, f"{len(result.rows)} cells ({len(failed)} failed), {result.num_compilations} compiled "
                    f"program(s) ({result.compile_seconds:.1f} s compiling), {result.seconds:.1f} s in all")
    _say(arguments, f"Table: {out}/results.csv; samples: {out}/cells/")
    for row in failed[:5]:  # said even with --quiet: the exit status alone would not say why
        print(f"  failed {row['cell']}: {row['error']}", file=sys.stderr)
    if unconverged:  # said even with --quiet: these answers cannot be trusted
        print(f"{len(unconverged)} of {len(result.rows)} cells did not converge (status 'unconverged' in "
              f"results.csv; the 'problems' column says why), e.g. {unconverged[0]['cell']}: "
              f"{unconverged[0]['problems']}", file=sys.stderr)
    flagged = [row for row in result.rows if row.get("mcse_warning")]
    if flagged:  # said even with --quiet: the ± errors of these cells cannot be trusted
        print(f"warning: the ± errors of {len(flagged)} of {len(result.rows)} cells cannot be trusted (column "
              f"'mcse_warning' of results.csv): {flagged[0]['mcse_warning']}", file=sys.stderr)
    return EXIT_FAILED if failed or (unconverged and arguments.strict) else EXIT_OK


def _sweep_plot(config, result, out: str) -> None:
    from jaxprobe.plots.runs import plot_sweep
    from jaxprobe.sweeps.from_config import ENGINE_KEYS

    names = [ENGINE_KEYS.get(k, k) for k in config.grid]
    numeric = [n for n in names if all(isinstance(r.get(n), (int, float)) for r in result.rows)]
    if not numeric:
        return
    x_axis = "temperature" if "temperature" in numeric else numeric[0]
    others = [n for n in names if n != x_axis]
    plot_sweep(os.path.join(out, "probe_mean.png"), result.rows, x_axis, group_by=others[0] if others else None)
    finished = [row for row in result.rows if row["status"] != "error"]
    for name in config.sections["output"]["observables"]:  # each scalar observable, with its ±1.96 MCSE error bars
        column = f"observable_{name}"
        if name != "probe" and finished and all(isinstance(row.get(column), (int, float)) for row in finished):
            plot_sweep(os.path.join(out, f"{column}.png"), result.rows, x_axis, y=column,
                       group_by=others[0] if others else None)


def find_benchmarks(root: str | None = None) -> dict[str, str]:
    """``{name: path}`` of the benchmark scripts: jaxprobe's own (:mod:`jaxprobe.bench`, shipped with the package,
    so ``jaxprobe bench`` works from an installed package), or with ``root`` the scripts ``root/benchmarks/*.py``
    of another source tree.

    Examples
    --------
    >>> "throughput" in find_benchmarks()                   # jaxprobe's own, as `jaxprobe bench --list` shows
    True
    >>> os.makedirs("tree/benchmarks")
    >>> open("tree/benchmarks/mine.py", "w").close()
    >>> find_benchmarks(root="tree")                        # another source tree's benchmarks/*.py
    {'mine': 'tree/benchmarks/mine.py'}
    """
    if root is None:
        from jaxprobe.bench import scripts

        return scripts()
    scripts = sorted(glob.glob(os.path.join(root, "benchmarks", "*.py")))
    return {os.path.splitext(os.path.basename(p))[0]: p for p in scripts if not os.path.basename(p).startswith("_")}


def _bench_command(name: str, path: str, arguments: argparse.Namespace) -> tuple[list[str], str, str]:
    """(command line, working folder, results folder) of one benchmark: a package script runs as
    ``python -m jaxprobe.bench.NAME`` and records into :func:`jaxprobe.bench.results_dir`; a ``--root`` script runs
    from its tree and records into ``ROOT/benchmarks/results``."""
    if arguments.root is None:
        from jaxprobe.bench import results_dir

        return [sys.executable, "-m", f"jaxprobe.bench.{name}", *arguments.extra], os.getcwd(), results_dir()
    root = os.path.dirname(os.path.dirname(path))
    return [sys.executable, path, *arguments.extra], root, os.path.join(root, "benchmarks", "results")


def _bench(arguments: argparse.Namespace) -> int:
    scripts = find_benchmarks(arguments.root)
    if not scripts:
        print(f"no benchmarks/*.py found in {arguments.root}", file=sys.stderr)
        return EXIT_USAGE
    if arguments.list:
        for name, path in scripts.items():
            print(f"{name}\t{path}")
        return EXIT_OK
    names = arguments.names or list(scripts)
    unknown = [n for n in names if n not in scripts]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {', '.join(scripts)}", file=sys.stderr)
        return EXIT_USAGE
    status = EXIT_OK
    # Runs write into a scratch folder unless --record: a smoke run (-- --quick) never replaces the committed
    # figures in benchmarks/results.
    scratch = None if arguments.record or arguments.show else tempfile.mkdtemp(prefix="jaxprobe-bench-")
    for name in names:
        command, cwd, recorded = _bench_command(name, scripts[name], arguments)
        table = os.path.join(scratch or recorded, f"{name}.md")
        if not arguments.show:
            env = dict(os.environ)
            if arguments.root is not None:
                env["PYTHONPATH"] = os.pathsep.join([cwd, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
            if scratch is not None:
                env["JAXPROBE_BENCH_RESULTS"] = scratch
            _say(arguments, f"== running {name} ({scripts[name]}) ==")
            tick = time.perf_counter()
            completed = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL if arguments.quiet else None)
            _say(arguments, f"== {name}: exit {completed.returncode} after {time.perf_counter() - tick:.0f} s ==")
            if completed.returncode != 0:
                status = EXIT_FAILED
                continue
        if os.path.exists(table):
            with open(table) as stream:
                print(f"\n{stream.read()}")
        else:
            print(f"{name}: no table at {table}")
            if arguments.show:
                status = EXIT_FAILED
    if scratch is not None:
        _say(arguments, f"results in {scratch} (pass --record to write the recorded results)")
    return status


def _benchmark(arguments: argparse.Namespace) -> int:
    """``jaxprobe benchmark``: samplers on targets with known answers (:func:`jaxprobe.benchmark.compare`), the
    report saved in ``--out`` (also when interrupted: exit 130 after saving)."""
    from jaxprobe.benchmark.command import run

    status, markdown = run(arguments)
    if not arguments.quiet:
        print(markdown)
    _say(arguments, f"report in {arguments.out}" + (" (interrupted: the rows measured so far)" if status else ""))
    return status


def _add_config_command(commands: Any, name: str, handler: Callable[[argparse.Namespace], int], *, help: str,
                        out_help: str) -> None:
    """``jaxprobe run`` / ``jaxprobe sweep``: a TOML file, ``--out``, ``--quiet`` and ``--strict``."""
    command = commands.add_parser(name, help=help)
    command.add_argument("config", help="TOML configuration file")
    command.add_argument("--out", help=out_help)
    command.add_argument("--quiet", action="store_true", help="no progress bar or messages")
    command.add_argument("--strict", action="store_true",
                         help="exit 1 when an answer's verdict fails (default: a warning and a message)")
    command.set_defaults(handler=handler)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jaxprobe", description="Question trained models by sampling.",
        epilog="Exit codes: 0 success, 1 something failed (failed sweep cells, a failed benchmark), "
               "2 bad usage or invalid configuration, 130 interrupted.")
    from jaxprobe._version import __version__

    parser.add_argument("--version", action="version", version=f"jaxprobe {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="probe a breast_cancer classifier for undecided inputs")
    demo.add_argument("--out", default="jaxprobe-demo", help="output directory (default ./jaxprobe-demo)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--chains", type=int, default=256)
    demo.add_argument("--samples", type=int, default=400, help="kept draws per chain")
    demo.add_argument("--warmup", type=int, default=400)
    demo.add_argument("--temperature", type=float, default=0.01)
    # Checked by _demo against the engine's registry (the parser imports no JAX: --help answers at once).
    demo.add_argument("--sampler", default="chees",
                      help="an engine kernel, one of jaxprobe.engine.known_kernels() (default chees)")
    demo.add_argument("--quiet", action="store_true", help="no progress bar or messages (the results are on file)")
    # The spelling before --quiet was shared by every subcommand; still accepted, not advertised.
    demo.add_argument("--no-progress", dest="quiet", action="store_true", help=argparse.SUPPRESS)
    demo.set_defaults(handler=_demo)

    _add_config_command(commands, "run", _run, help="run one probe described in a TOML file (see examples/)",
                        out_help="output directory (default: [output] dir of the file)")
    _add_config_command(commands, "sweep", _sweep,
                        help="run a grid of probes from a TOML file with a [sweep.grid] table",
                        out_help="output directory (default: [output] dir); finished cells there are skipped")

    validate = commands.add_parser("validate", help="check a configuration file without running it")
    validate.add_argument("config", help="TOML configuration file (a run, or a sweep with [sweep.grid])")
    validate.add_argument("--out", help="the output directory run/sweep would be given (default: [output] dir)")
    validate.add_argument("--quiet", action="store_true", help="no message when the file is valid")
    validate.set_defaults(handler=_validate)

    bench = commands.add_parser("bench", help="run the benchmarks (jaxprobe.bench) and print their tables")
    bench.add_argument("names", nargs="*", help="benchmarks to run (default: all; --list names them)")
    bench.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    bench.add_argument("--show", action="store_true", help="print the stored tables without running")
    bench.add_argument("--root", help="run the scripts ROOT/benchmarks/*.py of another tree instead of jaxprobe's own")
    bench.add_argument("--quiet", action="store_true", help="hide the benchmarks' own output")
    bench.add_argument("--record", action="store_true",
                       help="write results into benchmarks/results (the committed figures); default: a scratch "
                            "folder, printed at the end")
    bench.set_defaults(handler=_bench, extra=[])
    bench.epilog = "Arguments after -- go to every benchmark script, e.g. jaxprobe bench sweep -- --cells 16"

    benchmark = commands.add_parser("benchmark", help="compare samplers on targets with known answers: throughput, "
                                                      "ESS, bias (jaxprobe.benchmark.compare)")
    benchmark.add_argument("--samplers", default="mala,hmc,nuts,chees,smc,blackjax-nuts,numpyro-nuts",
                           help="comma-separated jaxprobe sampler names and the peers blackjax-nuts, numpyro-nuts "
                                "(default: all of these)")
    benchmark.add_argument("--targets", default="all", help="comma-separated built-in target names, or all (default)")
    benchmark.add_argument("--chains", default="4", help="comma-separated chain counts per seed, e.g. 64,4096")
    benchmark.add_argument("--seeds", type=int, default=5, help="independent runs per row (default 5)")
    benchmark.add_argument("--warmup", type=int, default=500, help="warmup steps per chain (default 500)")
    benchmark.add_argument("--samples", type=int, default=500, help="kept draws per chain (default 500)")
    benchmark.add_argument("--key", type=int, default=0, help="the seed every run derives its keys from")
    benchmark.add_argument("--out", default="jaxprobe-benchmark", help="folder for samplers.json/.md and the plots")
    benchmark.add_argument("--name", default="samplers",
                           help="file name of the report: OUT/NAME.json, OUT/NAME.md and the plots (default samplers)")
    benchmark.add_argument("--no-plot", action="store_true", help="write no figures")
    benchmark.add_argument("--quiet", action="store_true", help="no progress bar, no table printed")
    benchmark.set_defaults(handler=_benchmark)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``jaxprobe`` command; returns the exit code (see the module docstring).

    Examples
    --------
    >>> import contextlib
    >>> with contextlib.redirect_stderr(sys.stdout):     # the message goes to stderr; shown here
    ...     code = main(["validate", "missing.toml"])
    jaxprobe validate: invalid configuration: missing.toml: no such file
    >>> code == EXIT_USAGE                                 # 2: bad usage, nothing was run
    True
    """
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if argv[:1] == ["bench"] and "--" in argv:  # jaxprobe bench [names] -- <arguments for the scripts>
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    arguments = parser.parse_args(argv)  # --help and usage errors exit here, having imported nothing but argparse
    from jaxprobe.config import ConfigError

    if arguments.command == "bench":
        arguments.extra = extra
    try:
        return arguments.handler(arguments)
    except ConfigError as error:
        print(f"jaxprobe {arguments.command}: invalid configuration: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"jaxprobe {arguments.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except RuntimeError as error:
        print(f"jaxprobe {arguments.command}: {error}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as error:  # e.g. a full disk: the message names the folder, bytes needed and free, draws kept
        print(f"jaxprobe {arguments.command}: {type(error).__name__}: {error}", file=sys.stderr)
        return EXIT_FAILED
    except (ValueError, TypeError) as error:
        print(f"jaxprobe {arguments.command}: {type(error).__name__}: {error}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
