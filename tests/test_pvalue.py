"""One way to print a p-value (#46 part 10): a verdict mixed a bootstrap's floor (p = 0.0005) with
an analytic test's p = 2.2e-16; every p below 0.001 now reads p < 0.001, the rest two digits."""

import re

import numpy as np

from phasescope.analysis.pvalue import p_cell, p_text
from phasescope.analysis.simulate import Scenario, simulate
from phasescope.analysis.stats import analyze_arrays


def test_p_text_and_p_cell():
    assert [p_text(p) for p in (0.5, 0.034, 0.001, 0.0005, 2.2e-16)] == [
        "p = 0.5",
        "p = 0.034",
        "p = 0.001",
        "p < 0.001",
        "p < 0.001",
    ]
    assert [p_cell(p) for p in (None, 0.76, 0.0005)] == ["-", "0.76", "<0.001"]


def test_a_verdict_with_a_bootstrap_p_and_a_tiny_analytic_p_prints_them_alike():
    """Contents with their own phase preferences and no shared one: the gap's bootstrap p beside the
    per-content dependence's analytic p, far below 0.001 (docs/performance.md printed p = 3.8e-07)."""
    scenario = Scenario(family="drift", phase_sd_pp=40, n_contents=120)
    m = analyze_arrays(simulate(scenario, np.random.default_rng(0)), seed=0, n_resamples=199)
    sentence = m["verdict"]["sentence"]
    printed = re.findall(r"p [=<] [0-9.e+-]+", sentence)
    assert "p < 0.001" in printed, sentence
    assert not any("e-" in p or p.startswith("p = 0.000") for p in printed), sentence
