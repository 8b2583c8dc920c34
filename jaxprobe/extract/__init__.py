"""Model extraction from explanations (Milli et al. 2019): counted oracles, exact two-layer ReLU
recovery, and distillation of a student from value / gradient / SmoothGrad queries."""

from jaxprobe.extract.distill import EXPLANATIONS, distill, logistic_closed_form
from jaxprobe.extract.oracle import Oracle
from jaxprobe.extract.relu import RecoveredReLU, RecoveryError, recover_relu

__all__ = ["Oracle", "recover_relu", "RecoveredReLU", "RecoveryError", "distill", "logistic_closed_form",
           "EXPLANATIONS"]
