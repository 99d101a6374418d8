"""Calibration of the statistics on simulated sweeps (DESIGN.md §3): under no phase effect, with
a drift over offsets, a bump no polynomial fits, uneven content difficulty and 1-3 records per
(content, offset), in both designs, the gap, homogeneity, period and flip tests reject at about
alpha, and the gap interval covers the true gap (zero included); a 5 pp effect is found at the
demo's size. The full table (4000 datasets per row, rates against alpha + 2 s.e.) is
`experiments/calibration.py`, written to docs/sweeps.md.

Tolerance: alpha + 3 binomial s.e. per check. These tests make ~30 such checks; at 2 s.e. a
perfectly calibrated procedure (true rate exactly 5 %) would fail one of them about half the
time, so 2 s.e. would make the suite a coin flip, while a real miscalibration (ignoring the
drift: 22 % and more) fails every check by far."""

import pytest

from phasescope.analysis.simulate import DESIGNS, FAMILIES, Scenario, binomial_bound, calibrate

N_DATASETS = 1000
ALPHA = 0.05


def bound(n: int, alpha: float = ALPHA) -> float:
    """alpha + 3 binomial standard errors (see the module docstring)."""
    return alpha + 3 * (binomial_bound(alpha, n) - alpha) / 2


@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("family", FAMILIES)
def test_false_positive_rates_stay_at_alpha(family, design):
    rates = calibrate(Scenario(family=family, design=design), N_DATASETS, seed=11, n_boot=199)
    limit = bound(N_DATASETS)
    assert rates["gap_rejects"] <= limit, rates
    assert rates["homogeneity_rejects"] <= limit, rates
    assert rates["period_detected"] <= limit, rates
    assert rates["flips_positive"] <= bound(N_DATASETS, ALPHA / 2), rates  # the 95% interval lies above zero
    assert rates["gap_ci_covers"] >= 1 - limit, rates  # the true gap is 0: the interval contains zero


def test_few_contents_stay_calibrated():
    rates = calibrate(Scenario(family="drift+bump", n_contents=10), N_DATASETS, seed=12, n_boot=199)
    assert rates["gap_rejects"] <= bound(N_DATASETS), rates
    assert rates["period_detected"] <= bound(N_DATASETS), rates


@pytest.mark.parametrize("effects", [(6, 0, 0, -6), (0, 10, 0, 0, 0, 0, -4, 0)], ids=["step4-12pp", "step8-14pp"])
def test_gap_interval_covers_a_planted_gap(effects):
    scenario = Scenario(family="drift+bump", effects_pp=effects, step=len(effects))
    rates = calibrate(scenario, 200, seed=13, n_boot=199)
    assert rates["gap_ci_covers"] >= 1 - bound(200), rates


def test_five_pp_at_the_demo_size_is_detected_most_of_the_time():
    """The demo sweeps 256 contents x 24 offsets, one record each."""
    scenario = Scenario(family="drift", n_contents=256, records_per_cell=(1, 1), effects_pp=(0, 0, 0, -5))
    rates = calibrate(scenario, 100, seed=14, n_boot=199)
    assert rates["gap_rejects"] >= 0.7, rates  # measured 0.86 over 600 datasets (docs/sweeps.md)


def test_same_window_contrast_is_calibrated_under_phase_and_format_effects():
    """No window effect, but a phase effect and a format effect of the gapped rendering: the
    same-window test at equal value phase must not fire more than alpha + 2 s.e."""
    scenario = Scenario(family="drift+bump", kv_gaps=(0, 1), effects_pp=(-8, 0, 0, 4), format_pp=-6)
    rates = calibrate(scenario, N_DATASETS, seed=15, n_boot=199)
    assert rates["window_rejects"] <= bound(N_DATASETS), rates
    assert rates["window_ci_covers"] >= 1 - bound(N_DATASETS), rates


def test_contents_with_their_own_phase_preferences_flip_but_have_no_average_gap():
    """Each content prefers its own phases (sd 30 pp, mean zero): answers depend on the phase,
    the average over contents does not. The gap test stays at alpha; the flip rate sees it."""
    rates = calibrate(Scenario(family="drift", design="pad-prefix", phase_sd_pp=30), 400, seed=16, n_boot=199)
    assert rates["gap_rejects"] <= bound(400), rates
    assert rates["flips_positive"] >= 0.95, rates
