"""Reproduce the study's from-scratch claims (``phasescope reproduce``): matrix, sweeps, verdicts."""

from phasescope.reproduce.run import run_reproduce

__all__ = ["run_reproduce"]
