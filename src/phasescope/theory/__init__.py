"""A gradient-flow model of training a chunked-KV compressor (issue #12, part 3; docs/theory.md).

``run_theory(step, n_starts, seed, ...)`` integrates the flow of a softmax pooling over the s
offsets of a window and a co-adapting readout, from near-uniform starts, and says when the
uniform pooling breaks into stable per-offset preferences. numpy only; no model, no data.
"""

from phasescope.theory.flow import FlowConfig, critical_capacity, integrate, uniform_curvature
from phasescope.theory.model import gradient, loss, quality, raw_coverage
from phasescope.theory.run import run_theory

__all__ = [
    "FlowConfig",
    "critical_capacity",
    "gradient",
    "integrate",
    "loss",
    "quality",
    "raw_coverage",
    "run_theory",
    "uniform_curvature",
]
