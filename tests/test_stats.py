"""Statistics: planted signals are recovered, a drift over offsets is not read as a phase effect
or a period, statistics without data are "not estimable" (never NaN)."""

import json

import numpy as np
import pytest

from phasescope.analysis.period import detect_period
from phasescope.analysis.records import RecordArrays
from phasescope.analysis.simulate import Scenario, simulate
from phasescope.analysis.stats import analyze_arrays, analyze_records, wilson


def planted(rng, accuracy_by_phase, step=4, n_content=80, offsets=range(24), base=5, drift=None):
    """Records with a known accuracy per phase, plus an optional accuracy drift(offset)."""
    records = []
    for c in range(n_content):
        for d in offsets:
            phase = (base + d) % step
            p = accuracy_by_phase[phase] + (drift(d) if drift else 0.0)
            records.append(
                dict(
                    content_id=c,
                    offset=d,
                    phase=phase,
                    step=step,
                    correct=bool(rng.random() < p),
                    logprob_target=-1.0,
                    logprobs={"right": -1.0, "other": -2.0},
                    target="right",
                )
            )
    return records


def linear_drift(d):
    return 0.5 * d / 23 - 0.25  # accuracy 0.35 -> 0.85 over offsets 0..23 around 0.6


def test_wilson_interval_matches_the_textbook_value():
    low, high = wilson(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-4) and high == pytest.approx(0.7634, abs=1e-4)
    assert wilson(0, 0) == (None, None)


def test_planted_period_four_and_gap_are_recovered():
    acc = (0.9, 0.8, 0.8, 0.5)
    metrics = analyze_records(planted(np.random.default_rng(0), acc), n_resamples=500)
    assert metrics["period"]["detected"] == 4
    assert metrics["gap_ci_pp"][0] <= 40 <= metrics["gap_ci_pp"][1]
    assert metrics["gap_p_value"] < 0.01 and metrics["homogeneity_p_value"] < 0.01
    assert [r["phase"] for r in metrics["phases"]] == [0, 1, 2, 3]
    assert all(r["ci_low"] <= acc[r["phase"]] <= r["ci_high"] for r in metrics["phases"])
    effects = np.array(acc) - np.mean(acc)
    for r in metrics["phases"]:
        low, high = r["effect_ci_pp"]
        assert low <= 100 * effects[r["phase"]] <= high


def test_planted_gap_is_recovered_under_a_strong_drift():
    acc = (0.6, 0.6, 0.6, 0.4)  # 20 pp at phase 3, on top of a 50 pp drift
    metrics = analyze_records(planted(np.random.default_rng(3), acc, drift=linear_drift), n_resamples=500)
    assert metrics["gap_ci_pp"][0] <= 20 <= metrics["gap_ci_pp"][1]
    assert metrics["gap_p_value"] < 0.01 and metrics["period"]["detected"] == 4
    assert min(metrics["phases"], key=lambda r: r["adjusted_accuracy"])["phase"] == 3


def test_planted_period_two_is_not_reported_as_four():
    records = planted(np.random.default_rng(1), (0.9, 0.4, 0.9, 0.4))
    assert analyze_records(records, n_resamples=500)["period"]["detected"] == 2


def test_a_pure_drift_is_neither_a_gap_nor_a_period():
    """The issue's case: accuracy 0.35 -> 0.85 over 24 offsets, 300 contents, no phase effect.
    Without the trend (degree 0) this reads as a phase effect; with it, it does not."""
    records = planted(np.random.default_rng(0), (0.6,) * 4, n_content=300, drift=linear_drift)
    metrics = analyze_records(records, n_resamples=1000)
    assert metrics["gap_p_value"] > 0.05 and metrics["homogeneity_p_value"] > 0.05
    assert metrics["gap_ci_pp"][0] == 0.0  # the interval contains zero
    assert metrics["period"]["detected"] is None
    naive = analyze_records(records, n_resamples=1000, trend_degree=0)
    assert naive["gap_p_value"] < 0.05  # the confound is real: ignoring the drift finds a "gap"


def test_intervals_are_unavailable_with_few_contents():
    metrics = analyze_records(planted(np.random.default_rng(2), (0.9, 0.5, 0.5, 0.5), n_content=4), n_resamples=200)
    assert metrics["gap_ci_pp"] is None and metrics["gap_p_value"] is None
    assert "only 4 content samples" in metrics["inference_note"]
    assert metrics["gap_pp"] > 0  # the point estimate is still reported


def test_a_phase_without_records_is_not_estimable_and_no_nan_reaches_the_output():
    records = [r for r in planted(np.random.default_rng(4), (0.7,) * 4, n_content=20) if r["phase"] != 2]
    metrics = analyze_records(records, n_resamples=200)
    row = metrics["phases"][2]
    assert row["n"] == 0 and row["accuracy"] is None and row["adjusted_accuracy"] is None
    json.dumps(metrics, allow_nan=False)  # raises on NaN / inf


def test_offsets_covering_one_phase_give_no_gap_and_no_period():
    records = planted(np.random.default_rng(5), (0.7,) * 4, offsets=range(0, 24, 4), n_content=20)
    metrics = analyze_records(records, n_resamples=200)
    assert metrics["gap_pp"] is None and "phase effects need records at two phases" in metrics["inference_note"]
    assert metrics["period"]["detected"] is None
    json.dumps(metrics, allow_nan=False)


def test_even_offsets_only_test_periods_the_offsets_identify():
    """Offsets 0, 2, ..., 22: odd periods and period 2 have empty or single residue classes."""
    offsets = np.arange(0, 24, 2)
    rng = np.random.default_rng(6)
    result = detect_period(offsets, 0.6 + 0.05 * rng.standard_normal(len(offsets)), rng, n_perm=200)
    assert all(np.bincount(offsets % p).min() >= 2 for p in map(int, result["explained"]))
    assert 2 not in result["explained"] and all(np.isfinite(v) for v in result["explained"].values())


def test_bump_without_phase_effect_is_not_a_period_but_a_planted_effect_on_top_is():
    null = Scenario(family="drift+bump", n_contents=200, bump_pp=20)
    rng = np.random.default_rng(7)
    metrics = analyze_arrays(simulate(null, rng), n_resamples=500)
    assert metrics["gap_p_value"] > 0.05 and metrics["period"]["detected"] is None
    planted_effect = Scenario(family="drift+bump", n_contents=200, bump_pp=20, effects_pp=(0, 0, 0, -10))
    metrics = analyze_arrays(simulate(planted_effect, rng), n_resamples=500)
    assert metrics["gap_p_value"] < 0.01 and metrics["period"]["detected"] == 4
    assert metrics["gap_ci_pp"][0] <= 10 <= metrics["gap_ci_pp"][1]


def test_records_of_several_variants_per_content_and_offset_are_pooled_but_duplicates_refused():
    rng = np.random.default_rng(8)
    second = [r | {"variant": 1} for r in planted(rng, (0.8, 0.8, 0.8, 0.4), n_content=30)]
    records = planted(rng, (0.8, 0.8, 0.8, 0.4), n_content=30) + second
    metrics = analyze_records(records, n_resamples=300)
    assert metrics["n_records"] == 2 * 30 * 24 and metrics["n_contents"] == 30
    assert metrics["gap_p_value"] < 0.01
    with pytest.raises(ValueError, match="record 720 repeats record 0"):
        analyze_records(records[:720] + records[:1])


def test_missing_fields_and_bad_phases_are_named():
    records = planted(np.random.default_rng(0), (0.5,) * 4)
    bad_phase = [dict(r) for r in records]
    bad_phase[7]["phase"] = 4
    with pytest.raises(ValueError, match="has phase 4"):
        RecordArrays.from_records(bad_phase)
    for r in records:
        del r["logprobs"]
    with pytest.raises(ValueError, match=r"record 0: the record lacks \['logprobs'\]"):
        analyze_records(records)


@pytest.mark.parametrize("n_boot", [199, 500, 2000])
def test_interval_excludes_a_value_exactly_when_the_bootstrap_test_rejects_it(n_boot):
    from phasescope.analysis.cluster_ols import bootstrap_p, critical_value

    null = np.random.default_rng(n_boot).random(n_boot)
    crit = critical_value(null)
    for observed in np.linspace(0.85, 1.0, 3001):
        assert (observed > crit) == (bootstrap_p(null, observed) < 0.05)


def _probability_records(rng, p_right, n_content, offsets=range(24), step=4, spread=0.05):
    """Records whose right candidate has probability p_right[phase] + a content's own shift."""
    records = []
    for c in range(n_content):
        shift = rng.uniform(-spread, spread)
        for d in offsets:
            p = p_right[d % step] + shift
            logprobs = {"right": float(np.log(p)), "wrong": float(np.log(1 - p)), f"pair{c % 3:+d}": -5.0}
            records.append(
                dict(
                    content_id=c, offset=d, phase=d % step, step=step, correct=p > 0.5, logprob_target=logprobs["right"]
                )
                | {"logprobs": logprobs, "target": "right"}
            )
    return records


def test_candidate_probabilities_per_phase_recover_planted_values_with_content_intervals():
    p_right = (0.264, 0.915, 0.6, 0.4)
    metrics = analyze_records(_probability_records(np.random.default_rng(0), p_right, 30), n_resamples=200)
    table = metrics["candidate_probabilities"]
    assert table["candidates"] == ["right", "wrong"], "names in every record only, in the probe's order"
    assert "pair+0" in table["note"] and "left out" in table["note"]
    for row in table["phases"]:
        truth = p_right[row["phase"]]
        low, high = row["ci"]["right"]
        assert low < truth < high and high - low > 0 and row["n_contents"] == 30
        assert row["mean"]["right"] + row["mean"]["wrong"] == pytest.approx(1.0)
        assert row["ci"]["wrong"][0] < 1 - truth < row["ci"]["wrong"][1]


def test_candidate_probabilities_without_enough_contents_or_data_say_so_and_carry_no_nan():
    records = [r for r in _probability_records(np.random.default_rng(1), (0.5,) * 4, 5) if r["phase"] != 2]
    metrics = analyze_records(records, n_resamples=200)
    table = metrics["candidate_probabilities"]
    assert "only 5 content samples: intervals need at least 10" in table["note"]
    assert table["phases"][0]["ci"]["right"] is None and table["phases"][0]["mean"]["right"] is not None
    assert table["phases"][2] == {
        "phase": 2,
        "n_contents": 0,
        "mean": {"right": None, "wrong": None},
        "ci": {"right": None, "wrong": None},
    }
    json.dumps(metrics, allow_nan=False)


def test_candidate_probabilities_skip_records_without_a_score_for_a_candidate():
    records = _probability_records(np.random.default_rng(2), (0.5,) * 4, 12)
    records[0]["logprobs"]["wrong"] = None  # a candidate the backend could not score
    table = analyze_records(records, n_resamples=200)["candidate_probabilities"]
    assert table["phases"][0]["mean"]["wrong"] is not None
    json.dumps(table, allow_nan=False)
