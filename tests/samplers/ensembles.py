"""Hand-built tree ensembles shared by the tree-ensemble Gibbs tests."""

import numpy as np

from jaxprobe.models.trees import TreeEnsembleModel


def stump_ensemble(stumps, num_features):
    """Stumps ``(feature, threshold, p1_left, p1_right)`` averaged into a binary classifier (like a forest)."""
    count = len(stumps)
    leaf_values = np.zeros((count, 3, 2))
    for t, (_, _, left, right) in enumerate(stumps):
        leaf_values[t, 1] = [1 - left, left]
        leaf_values[t, 2] = [1 - right, right]
    return TreeEnsembleModel(
        feature=[[f, 0, 0] for f, *_ in stumps], threshold=[[t, 0, 0] for _, t, *_ in stumps],
        left=[[1, 1, 2]] * count, right=[[2, 1, 2]] * count, leaf_values=leaf_values / count,
        base_score=np.zeros(2), link="identity", num_features=num_features, is_classifier=True)
