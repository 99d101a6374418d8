"""Planted signals are recovered; no effect is not declared periodic."""

import numpy as np
import pytest

from phasescope.analysis.stats import Table, analyze_records, detect_period, wilson


def planted(rng, accuracy_by_phase, step=4, n_content=80, offsets=range(24), base=5):
    records = []
    for c in range(n_content):
        for d in offsets:
            phase = (base + d) % step
            records.append(
                dict(
                    content_id=c,
                    offset=d,
                    phase=phase,
                    step=step,
                    correct=bool(rng.random() < accuracy_by_phase[phase]),
                    logprob_target=-1.0,
                    logprobs={"right": -1.0, "other": -2.0},
                    target="right",
                    same_window=d % 3 == 0,
                )
            )
    return records


def test_wilson_interval_matches_the_textbook_value():
    low, high = wilson(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-4) and high == pytest.approx(0.7634, abs=1e-4)


def test_planted_period_four_and_gap_are_recovered():
    acc = (0.9, 0.8, 0.8, 0.5)
    metrics = analyze_records(planted(np.random.default_rng(0), acc), n_resamples=500)
    assert metrics["period"]["detected"] == 4
    assert metrics["gap_ci_pp"][0] <= 40 <= metrics["gap_ci_pp"][1]
    assert metrics["gap_p_value"] < 0.01 and metrics["homogeneity_p_value"] < 0.01
    assert [r["phase"] for r in metrics["phases"]] == [0, 1, 2, 3]
    assert all(r["ci_low"] <= acc[r["phase"]] <= r["ci_high"] for r in metrics["phases"])


def test_planted_period_two_is_not_reported_as_four():
    records = planted(np.random.default_rng(1), (0.9, 0.4, 0.9, 0.4))
    assert analyze_records(records, n_resamples=500)["period"]["detected"] == 2


def test_no_phase_effect_is_declared_periodic_at_about_the_nominal_rate():
    declared = 0
    for seed in range(60):
        t = Table(planted(np.random.default_rng(100 + seed), (0.6, 0.6, 0.6, 0.6), n_content=30))
        declared += detect_period(t, np.random.default_rng(seed), n_perm=200)["detected"] is not None
    assert declared <= 8  # nominal 5% of 60 = 3; P(X >= 9 | p = 0.05) < 0.01


def test_missing_fields_are_named():
    records = planted(np.random.default_rng(0), (0.5,) * 4)
    for r in records:
        del r["logprobs"]
    with pytest.raises(ValueError, match="lack the field 'logprobs'"):
        analyze_records(records)
