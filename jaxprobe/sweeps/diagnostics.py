"""Rank-normalized split R̂ and bulk ESS of many cells at once (moved to :mod:`jaxprobe.engine.diagnostics`).

Re-exported here so that ``from jaxprobe.sweeps.diagnostics import rhat_ess_bulk``
keeps working.
"""

from jaxprobe.engine.diagnostics import rhat_ess_bulk

__all__ = ["rhat_ess_bulk"]
