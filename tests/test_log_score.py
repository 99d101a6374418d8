"""The phase statistics in the log-prob margin (``analysis.log_score``) and the verdict
(``analysis.verdict``): at the ceiling, where accuracy cannot move, a planted margin effect is
found with its period and a drift with uneven, heavy-tailed contents is not; the verdict says
what the numbers support and nothing else."""

import numpy as np
import pytest

from phasescope.analysis.intervals import cluster_mean
from phasescope.analysis.log_score import log_score
from phasescope.analysis.records import RecordArrays
from phasescope.analysis.simulate import binomial_bound, simulate_ceiling_margins
from phasescope.analysis.stats import analyze_arrays
from phasescope.analysis.verdict import verdict

STEP, OFFSETS = 4, np.arange(24)


def ceiling_run(rng, n_contents=60, effect=None, drift=3.0, records=1) -> RecordArrays:
    return simulate_ceiling_margins(rng, n_contents, len(OFFSETS), STEP, effect, drift, records)


def test_a_planted_margin_effect_at_the_ceiling_is_found_with_its_period_and_worst_phase():
    r = ceiling_run(np.random.default_rng(0), effect=[0.0, 0.2, 0.3, -0.8])
    m = analyze_arrays(r, n_resamples=199)
    s = m["log_score"]
    assert s["outcome"] == "margin" and s["gap_p_value"] < 0.01
    assert s["gap_ci"][0] <= 1.1 <= s["gap_ci"][1] and s["period"]["detected"] == STEP
    v = m["verdict"]
    assert v["kind"] == "ceiling" and v["outcome"] == "margin" and v["unit"] == "nats"
    assert v["worst_phase"] == 3 and v["best_phase"] == 2 and v["period"] == STEP
    assert "accuracy cannot show a phase effect" in v["sentence"] and "worst phase 3" in v["sentence"]


@pytest.mark.parametrize("n_contents", [40, 12])
def test_a_steep_margin_drift_with_uneven_contents_is_not_a_phase_effect(n_contents):
    """No phase effect, a 3-nat logistic drift, gamma-distributed content levels, t(4) noise:
    the margin gap and period tests reject at about alpha (alpha + 3 s.e. over 150 datasets)."""
    n, rng = 150, np.random.default_rng(1)
    gap = period = 0
    for i in range(n):
        s = log_score(ceiling_run(rng, n_contents=n_contents), np.random.default_rng(i), 99)
        gap += s["gap_p_value"] is not None and s["gap_p_value"] < 0.05
        period += bool(s["period"].get("detected"))
    limit = 0.05 + 1.5 * (binomial_bound(0.05, n) - 0.05)
    assert gap / n <= limit and period / n <= limit, (gap, period)


def test_the_per_phase_margin_interval_covers_the_population_mean():
    """Contents differ a lot (cluster correlation): the clustered interval still covers."""
    rng, covered, n = np.random.default_rng(2), 0, 300
    for _ in range(n):
        level = rng.gamma(2.0, 1.5, 30)  # population mean 3.0
        per_content = rng.integers(1, 6, 30)
        values = [lv + rng.normal(0, 0.5, k) for lv, k in zip(level, per_content, strict=True)]
        low, high = cluster_mean(np.array([v.sum() for v in values]), per_content.astype(float))
        covered += low <= 3.0 <= high
    assert covered / n >= 0.92


def test_under_ten_contents_the_margin_has_no_interval():
    s = log_score(
        ceiling_run(np.random.default_rng(3), n_contents=6, effect=[0, 0, 0, -1]), np.random.default_rng(0), 99
    )
    assert all(row["ci"] is None for row in s["phases"]) and s["gap_p_value"] is None and s["note"]


def test_records_without_log_probs_have_no_log_score_and_the_verdict_says_so():
    r = RecordArrays.from_arrays(
        STEP, np.repeat(np.arange(20), 24), np.tile(OFFSETS, 20), np.tile(OFFSETS % 4, 20), np.ones(480)
    )
    m = analyze_arrays(r, n_resamples=49)
    assert m["log_score"] is None
    assert m["verdict"]["kind"] == "ceiling" and "no log-prob" in m["verdict"]["sentence"]


def _metrics(**changes) -> dict:
    phases = [
        {"phase": p, "accuracy": a, "effect_pp": e}
        for p, a, e in zip(range(4), [0.60, 0.65, 0.70, 0.58], [-4.0, 0.5, 5.0, -1.5], strict=True)
    ]
    base = {
        "step": 4,
        "overall_accuracy": 0.63,
        "phases": phases,
        "gap_pp": 9.0,
        "gap_ci_pp": [6.8, 11.5],
        "gap_p_value": 0.001,
        "gap_raw_pp": 12.0,
        "period": {"detected": 4, "p_value": 0.001, "kind": "step"},
        "n_informative_contents": 50,
        "inference_note": None,
    }
    return base | changes


def test_the_verdict_reads_an_effect_on_the_drift_adjusted_scale_and_says_when_raw_disagrees():
    v = verdict(_metrics())
    assert v["kind"] == "effect" and (v["worst_phase"], v["best_phase"]) == (0, 2)
    assert v["phase_basis"] == "drift-adjusted" and v["effect_ci"] == [6.8, 11.5]
    assert v["sentence"].startswith("phase effect at step 4: gap 9.0 pp [6.8, 11.5] (p = 0.001); worst phase 0")
    assert "raw accuracy is lowest at phase 3 (0.580; phase 0: 0.600), before the drift" in v["sentence"]


@pytest.mark.parametrize(
    ("changes", "kind", "words"),
    [
        (
            {"gap_p_value": 0.4, "gap_ci_pp": [0.0, 4.1], "gap_pp": 1.0, "period": {"detected": None, "p_value": 0.3}},
            "no effect",
            "an effect above 4.1 pp is unlikely",
        ),
        ({"period": {"detected": 3, "p_value": 0.002, "kind": "other"}}, "other period", "a period-3 pattern"),
        ({"gap_pp": None, "inference_note": "fewer than 3 windows"}, "withheld", "not tested at step 4: fewer"),
        ({"gap_p_value": None, "gap_ci_pp": None, "n_informative_contents": 6}, "few contents", "under 10 contents"),
    ],
)
def test_the_verdict_never_claims_more_than_the_test(changes, kind, words):
    v = verdict(_metrics(**changes))
    assert v["kind"] == kind and words in v["sentence"]
    assert not v["sentence"].startswith("phase effect at step")  # the claim's words


@pytest.mark.parametrize("right", [True, False])
def test_the_ceiling_and_the_floor_get_their_own_advice(right):
    """Every record right: a harder task; every record wrong: an easier one (never 'harder' at the floor)."""
    r = ceiling_run(np.random.default_rng(0))
    r.correct[:] = right
    notes = " ".join(str(v) for v in analyze_arrays(r, 0, 99).values() if isinstance(v, str))
    assert ("harder task" in notes) == right and ("easier task" in notes) == (not right)
