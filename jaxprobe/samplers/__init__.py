"""Whole-run samplers: samplers that run a whole question themselves, above the engine.

The engine (:mod:`jaxprobe.engine`) knows log densities and positions only; a sampler whose targets have a
structure it exploits (the tree-ensemble Gibbs sampler reads the split thresholds of imported tree
ensembles and the priors' Gaussian-mixture form) lives here and implements
:class:`jaxprobe.engine.protocols.WholeRunSampler`. Importing this package (:mod:`jaxprobe.generation`
and the configuration check do) registers each one (:func:`jaxprobe.engine.registry.register_whole_run_sampler`), so ``sampler="tree_gibbs"``
works in ``generate``, ``sweep``, ``reconstruct``, ``reconstruct_many`` and configuration files, which call
it through the protocol and never by name.

- :mod:`jaxprobe.samplers.tree_gibbs`: exact coordinate-wise Gibbs sampling of targets built from imported tree
  ensembles (``sampler="tree_gibbs"``).
"""

from jaxprobe.engine.registry import register_whole_run_sampler
from jaxprobe.samplers import tree_gibbs
from jaxprobe.samplers.tree_gibbs import TREE_GIBBS

register_whole_run_sampler(TREE_GIBBS)

__all__ = ["tree_gibbs"]
