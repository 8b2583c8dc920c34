"""Benchmark any sampler: throughput and correctness on targets with known answers, one call, CPU to GPU.

``compare(samplers, targets, *, num_chains, num_warmup, num_samples, seeds, key) -> Report`` runs every sampler
(a jaxprobe sampler name or ``Kernel``, a BlackJAX algorithm through :func:`from_blackjax`, the built-in peers
``"blackjax-nuts"`` and ``"numpyro-nuts"``) on every target (:func:`targets`, or a :class:`Target` of your own) at
every chain count, all seeds of one sampler in one compiled program, and reports throughput against the limit,
ESS per gradient and per second, bias against the truth and the rate of poor runs (:mod:`.compare`,
:mod:`.measure`, :mod:`.report`). ``jaxprobe benchmark`` is the same from the command line.
"""

from jaxprobe.benchmark.compare import compare
from jaxprobe.benchmark.report import Report
from jaxprobe.benchmark.samplers import from_blackjax
from jaxprobe.benchmark.targets import Target, get_target, targets

__all__ = ["compare", "Report", "from_blackjax", "Target", "targets", "get_target"]
