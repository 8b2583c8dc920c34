"""The ``jaxprobe`` command."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def _demo(arguments: argparse.Namespace) -> int:
    from jaxprobe.demo import run_demo

    result = run_demo(arguments.out, seed=arguments.seed, num_chains=arguments.chains,
                      num_samples=arguments.samples, num_warmup=arguments.warmup,
                      temperature=arguments.temperature, sampler=arguments.sampler,
                      progress=not arguments.no_progress)
    probe = result["probe_output"]
    print(f"\nTrained MLP on breast_cancer: test accuracy {result['test_accuracy']:.3f}")
    print(f"Sampled {result['num_chains']} chains x {result['num_samples_per_chain']} draws with "
          f"{result['sampler']} (acceptance {result['mean_acceptance_rate']:.2f}, "
          f"max R-hat {result['max_rhat']:.3f}, min bulk ESS {result['min_ess_bulk']:.0f})")
    print(f"Probe samples within 0.1 of the decision boundary: {probe['fraction_within_0.1_of_boundary']:.1%} "
          f"(training data: {probe['data_fraction_within_0.1_of_boundary']:.1%})")
    print(f"Wrote {arguments.out}/samples.npz, summary.json, plot.png in {result['seconds']:.1f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jaxprobe", description="Question trained models by sampling.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="probe a breast_cancer classifier for undecided inputs")
    demo.add_argument("--out", default="jaxprobe-demo", help="output directory (default ./jaxprobe-demo)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--chains", type=int, default=256)
    demo.add_argument("--samples", type=int, default=400, help="kept draws per chain")
    demo.add_argument("--warmup", type=int, default=400)
    demo.add_argument("--temperature", type=float, default=0.01)
    demo.add_argument("--sampler", default="chees", help="mala, hmc, nuts, rwmh or chees (default)")
    demo.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    demo.set_defaults(handler=_demo)
    arguments = parser.parse_args(argv)
    return arguments.handler(arguments)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
