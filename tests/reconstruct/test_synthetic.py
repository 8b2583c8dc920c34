"""synthetic_accuracy: test-set accuracies of the base and synthetic models with standard errors that cover.

Known answer: two classes, x | y ~ N(±1, 1) in 1-D with equal weights. A fitted logistic regression is a
threshold t on x, so its accuracy over the population is exactly ½(Φ(t + 1) + 1 − Φ(t − 1)); fresh test sets give
accuracies that the reported standard errors (the test set's sampling, binomial; the ratio's paired) must cover.
"""

import numpy as np
import pytest
from scipy.stats import binom, norm
from sklearn.linear_model import LogisticRegression

from jaxprobe.reconstruct import synthetic_accuracy


def _draw(rng, n):
    y = rng.integers(0, 2, n)
    return (2.0 * y - 1.0 + rng.normal(size=n))[:, None], y


def _accuracy(model):
    threshold = -model.intercept_[0] / model.coef_[0, 0]
    return 0.5 * (norm.cdf(threshold + 1.0) + 1.0 - norm.cdf(threshold - 1.0))


def test_accuracy_errors_cover_fresh_test_sets():
    rng = np.random.default_rng(0)
    base = LogisticRegression().fit(*_draw(rng, 60))
    x_syn, y_syn = _draw(rng, 30)
    x_syn = x_syn + 0.8  # a shifted synthetic set: a worse threshold, ratio below 1
    synthetic = LogisticRegression().fit(x_syn, y_syn)
    truth = {"base_accuracy": _accuracy(base), "synthetic_accuracy": _accuracy(synthetic)}
    truth["ratio"] = truth["synthetic_accuracy"] / truth["base_accuracy"]
    assert truth["ratio"] < 0.97
    runs, num_test = 100, 150
    covered = {key: 0 for key in truth}
    for _ in range(runs):
        x_test, y_test = _draw(rng, num_test)
        found = synthetic_accuracy(base, x_syn, y_syn, x_test, y_test)
        assert found["num_test"] == num_test
        assert found["base_accuracy"] == pytest.approx(base.score(x_test, y_test))
        p = found["synthetic_accuracy"]
        assert found["synthetic_accuracy_se"] == pytest.approx(np.sqrt(p * (1 - p) / num_test))
        for key in truth:
            covered[key] += abs(found[key] - truth[key]) <= 1.959964 * found[key.replace("accuracy", "accuracy_se")
                                                                               if key != "ratio" else "ratio_se"]
    # Binomial(100, 0.95) is below 88 with probability 0.01 and 100 with 0.006; an error half as large as it
    # should be covers ~68% (about 68 of 100), one twice too large ~99.99% (all 100).
    assert binom.cdf(87, runs, 0.95) < 0.011 and binom.pmf(100, runs, 0.95) < 0.006
    assert all(88 <= count <= 99 for count in covered.values()), covered


def test_bad_test_sets_are_refused():
    rng = np.random.default_rng(1)
    base = LogisticRegression().fit(*_draw(rng, 40))
    x_syn, y_syn = _draw(rng, 20)
    with pytest.raises(ValueError, match="y_test"):
        synthetic_accuracy(base, x_syn, y_syn, np.zeros((3, 1)), np.zeros(2))
    with pytest.raises(ValueError, match="single class"):
        synthetic_accuracy(base, x_syn, np.zeros(20), np.zeros((3, 1)), np.zeros(3))
