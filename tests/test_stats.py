"""Statistics: planted signals are recovered, a drift over offsets is not read as a phase effect
or a period, statistics without data are "not estimable" (never NaN)."""

import json

import numpy as np
import pytest

from phasescope.analysis.records import RecordArrays
from phasescope.analysis.simulate import Scenario, simulate
from phasescope.analysis.stats import analyze_arrays, analyze_records, wilson
from phasescope.rundir.metrics import Metrics


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
    records = planted(np.random.default_rng(6), (0.6,) * 4, offsets=range(0, 24, 2), n_content=30)
    period = analyze_records(records, n_resamples=200)["period"]
    offsets = np.arange(0, 24, 2)
    assert period["tested"] and all(np.bincount(offsets % p).min() >= 3 for p in period["tested"])
    assert 2 not in period["tested"] and all(np.isfinite(v) for v in period["explained"].values())


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


def logistic_drift(size, width=2.5, middle=11.5):
    """A steep fall of ``size`` in accuracy around offset ``middle`` (centred on 0)."""
    return lambda d: size * (0.5 - 1 / (1 + np.exp(-(d - middle) / width)))


def test_two_stage_effects_equal_one_stage_least_squares_on_balanced_sweeps():
    """Equivalence: stage 1 (offset effects within contents) + stage 2 (trend + phases) gives the
    same phase effects as one regression of the records on content, trend and phase indicators."""
    from phasescope.analysis.offset_effects import fit_offset_effects
    from phasescope.analysis.phase_effects import fit_phase_effects
    from phasescope.analysis.trend import legendre

    r = simulate(Scenario(n_contents=20, records_per_cell=(2, 2), effects_pp=(0, 8, 0, -4)), np.random.default_rng(0))
    effects = fit_phase_effects(fit_offset_effects(r.cells(), np.random.default_rng(0), 0), fixed_degree=3).effects
    content = (r.content[:, None] == np.arange(20)).astype(float)
    phase = (r.phase[:, None] == np.arange(1, 4)).astype(float)
    x = np.concatenate([content, legendre(r.offset.astype(float), 3), phase], axis=1)
    gamma = np.r_[0.0, np.linalg.lstsq(x, r.correct, rcond=None)[0][-3:]]
    assert np.allclose(effects, gamma - gamma.mean(), atol=1e-10)


def test_fast_bootstrap_draws_equal_an_explicit_refit():
    """Equivalence: each wild-bootstrap draw (closed form, matrix products) equals refitting the
    model on y* = fit + v_c * residual and computing its cluster-robust covariance from scratch."""
    from phasescope.analysis.cluster_ols import WEBB, fit

    rng = np.random.default_rng(1)
    n_clusters, x = 7, rng.normal(size=(60, 3))
    cluster, weight = rng.integers(0, n_clusters, 60), rng.integers(1, 4, 60).astype(float)
    y = x @ [0.5, -1.0, 0.2] + rng.normal(size=60)
    model = fit(x, y, weight, cluster, n_clusters)
    delta, cov = next(model.draws(np.random.default_rng(5), 4))
    v = np.random.default_rng(5).choice(WEBB, size=(4, n_clusters))
    resid = y - x @ model.beta
    for b in range(4):
        refit = fit(x, x @ model.beta + v[b, cluster] * resid, weight, cluster, n_clusters)
        assert np.allclose(delta[b], refit.beta - model.beta) and np.allclose(cov[b], refit.covariance)


def test_stage_two_draws_equal_the_product_in_the_full_column_space():
    """Equivalence: a stage-2 map of the draws, computed on the free columns only with two large
    matrix products (``linear``/``sandwich``), equals a @ cov* @ aᵀ over every column, the
    components' reference columns at zero -- contents starting at different phases, so there
    are several components."""
    from phasescope.analysis.offset_effects import fit_offset_effects, linear

    scenario = Scenario(n_contents=24, starts="uniform", offsets=tuple(range(12)), effects_pp=(0, 10, 0, 0))
    fx = fit_offset_effects(simulate(scenario, np.random.default_rng(3)).cells(), np.random.default_rng(4), 50)
    assert fx.n_components > 1 and fx.inference
    delta, cov = fx.draws()
    free, n_cols = np.flatnonzero(fx.estimated), len(fx.offset)
    full_delta = np.zeros((50, n_cols))
    full_delta[:, free] = delta
    full_cov = np.zeros((50, n_cols, n_cols))
    full_cov[:, free[:, None], free[None, :]] = cov
    a = np.random.default_rng(5).normal(size=(5, n_cols))
    mapped = linear(fx, a)
    assert np.allclose(mapped.boot, full_delta @ a.T, rtol=1e-12, atol=1e-14)
    assert np.allclose(mapped.boot_cov, a @ full_cov @ a.T, rtol=1e-10, atol=1e-14)
    assert np.allclose(linear(fx, a, with_cov=False).boot, mapped.boot) and linear(fx, a, False).boot_cov is None


@pytest.mark.parametrize("accuracy", [(0, 1, 1, 0), (1, 0, 0, 0)])
def test_a_noiseless_step_pattern_is_read_as_the_steps_period(accuracy):
    """Every content answers by phase alone (accuracy 0 or 1, no noise): every candidate's p
    underflows and ties, and the period is the step's -- the tie goes to the candidate that
    explains the pattern, not to the shortest (which read 0,1,1,0 as "a period-6 pattern, not a
    step-phase effect")."""
    m = analyze_records(planted(np.random.default_rng(0), accuracy, n_content=16, base=0), n_resamples=400)
    assert [row["accuracy"] for row in sorted(m["phases"], key=lambda r: r["phase"])] == list(accuracy)
    assert m["period"]["detected"] == 4 and m["period"]["kind"] == "step", m["period"]
    assert "not a step-phase effect" not in m["verdict"]["sentence"]


def test_two_windows_or_fewer_withhold_every_drift_adjusted_number():
    """8 offsets at step 4 (two windows) and 4 offsets (one): a drift cannot be told from phase
    effects, so no adjusted gap, interval or p-value is printed -- a pure drift used to read as
    "phase gap 33.3 pp [5.6, 61.7], p = 0.014" with --offsets 0:4."""
    from phasescope.reporting.text import gap_line, period_line

    for offsets in (range(8), range(4)):
        records = planted(
            np.random.default_rng(9), (0.6,) * 4, offsets=offsets, n_content=100, drift=logistic_drift(0.4)
        )
        m = analyze_records(records, n_resamples=200)
        assert m["gap_pp"] is None and m["gap_ci_pp"] is None and m["gap_p_value"] is None
        assert m["homogeneity_p_value"] is None and m["period"]["p_value"] is None
        assert all(row["effect_pp"] is None for row in m["phases"]) and m["gap_raw_pp"] is not None
        assert "cannot be told from a pattern that repeats with fewer than 3 cycles" in m["inference_note"]
        assert "withheld" in gap_line(Metrics.from_json(m)) and "not tested" in period_line(Metrics.from_json(m))
        json.dumps(m, allow_nan=False)


def test_no_interval_or_p_value_below_ten_contents_anywhere():
    """One content, then nine: point estimates only -- per-phase intervals, gap, homogeneity,
    period and phase dependence all withheld, and the output says so."""
    from phasescope.reporting.text import period_line

    for n in (1, 9):
        m = analyze_records(planted(np.random.default_rng(n), (0.9, 0.5, 0.5, 0.2), n_content=n), n_resamples=200)
        assert all(row["ci_low"] is None and row["effect_ci_pp"] is None for row in m["phases"])
        assert m["gap_ci_pp"] is None and m["gap_p_value"] is None and m["homogeneity_p_value"] is None
        assert m["period"]["p_value"] is None and m["period"]["detected"] is None
        assert "not tested" in period_line(Metrics.from_json(m)) and f"only {n} content samples" in m["inference_note"]
        dependence = m["phase_dependence"]
        assert dependence["p_value"] is None and dependence.get("ci_pp") is None
        assert m["gap_pp"] is not None  # the point estimate describes these contents
        json.dumps(m, allow_nan=False)


def test_the_trend_is_chosen_checked_and_follows_a_steep_drift():
    """The degree is the data's choice within the separable range (half the largest separable
    degree and up): a steep logistic fall is followed (checked, no false gap or period); the
    metrics say which degree, with the checks' p-values."""
    steep = analyze_records(planted(np.random.default_rng(10), (0.6,) * 4, n_content=300, drift=logistic_drift(0.6)))
    linear = analyze_records(planted(np.random.default_rng(11), (0.6,) * 4, n_content=300, drift=linear_drift))
    for m in (steep, linear):
        trend = m["trend"]
        assert trend["checked"] and trend["max_separable_degree"] == 9  # 24 offsets at step 4
        assert (trend["max_separable_degree"] + 1) // 2 <= trend["degree"] <= trend["max_separable_degree"]
        assert trend["check_p"] > 0.1 and all(0 < row["lack_of_fit_p"] <= 1 for row in trend["tried"])
    assert steep["gap_p_value"] > 0.01 and steep["period"]["detected"] is None


def test_contents_missing_at_a_phase_do_not_make_it_look_different():
    """The hardest 40% of contents have no records at phase 3: raw phase 3 looks easier, but the
    effects are compared within contents, so no gap and no period appear."""
    scenario = Scenario(family="no-effect", n_contents=400, records_per_cell=(1, 1), missing=(3, 0.4))
    m = analyze_arrays(simulate(scenario, np.random.default_rng(12)), n_resamples=500)
    raw = {row["phase"]: row["accuracy"] for row in m["phases"]}
    assert raw[3] - np.mean([raw[p] for p in (0, 1, 2)]) > 0.05  # pooled means are biased
    assert m["gap_p_value"] > 0.01 and m["period"]["detected"] is None
    assert abs(m["phases"][3]["effect_pp"]) < 2


def test_a_pattern_of_another_period_is_named_and_not_called_a_step_phase_effect():
    """A period-3 pattern at step 4 is named as such, and the gap carries the caveat; a strong
    period-5 pattern is either named or makes the analysis withhold, saying another period may
    be the reason -- never a plain "step-phase effect"."""
    from phasescope.reporting.text import gap_line, period_line

    m = analyze_arrays(simulate(Scenario(n_contents=300, period_pp=(3, 6)), np.random.default_rng(13)))
    assert m["period"]["detected"] == 3 and m["period"]["kind"] == "other"
    assert m["period"]["beyond_step_p"] < 0.05  # named only as it explains the offsets beyond the step's phases
    assert "a period-3 pattern, not a step-phase effect" in m["inference_note"]
    typed = Metrics.from_json(m)
    assert period_line(typed).startswith("a period-3 pattern") and "not a step-phase effect" in gap_line(typed)
    m = analyze_arrays(simulate(Scenario(n_contents=300, period_pp=(5, 25)), np.random.default_rng(13)))
    named = m["period"]["kind"] == "other" and "not a step-phase effect" in m["inference_note"]
    assert named or (m["gap_p_value"] is None and "a pattern of another period" in m["inference_note"]), m


def test_phase_dependence_sees_contents_that_disagree_on_the_bad_phase():
    """Each content has its own phase preferences (sd 20 pp), the average has none: the
    per-content statistic is large, significant and covers the truth, the shared part is small;
    with no phase effect at all it stays small and its interval reaches zero."""
    prefer = Scenario(family="drift", design="pad-prefix", phase_sd_pp=20, n_contents=100, mean_accuracy=0.5)
    r, truth = simulate(prefer, np.random.default_rng(14), truth=True)
    d = analyze_arrays(r, n_resamples=200)["phase_dependence"]
    assert d["p_value"] < 0.001 and d["rms_pp"] > 10 and d["average_rms_pp"] < d["rms_pp"] / 2
    assert d["ci_pp"][0] <= truth.dependence_pp <= d["ci_pp"][1]
    null = analyze_arrays(simulate(Scenario(n_contents=100), np.random.default_rng(15)), n_resamples=200)
    assert null["phase_dependence"]["rms_pp"] >= 0 and null["phase_dependence"]["ci_pp"][0] == 0.0


def test_per_phase_intervals_count_contents_not_records():
    """Ten contents, each right at every record or wrong at every record: the records carry the
    information of ten units, and the interval says so (Wilson over records would be far narrower);
    with every record right, the contents are the units."""
    from phasescope.analysis.intervals import cluster_proportion, wilson

    right, total = np.array([24] * 5 + [0] * 5), np.full(10, 24)
    low, high = cluster_proportion(right, total)
    assert high - low > 2 * (wilson(120, 240)[1] - wilson(120, 240)[0])
    from scipy.stats import t

    assert cluster_proportion(np.full(12, 24), np.full(12, 24)) == wilson(12, 12, t.ppf(0.975, 11))
    assert cluster_proportion(np.full(9, 24), np.full(9, 24)) == (None, None)


def test_a_withheld_p_value_makes_a_verdict_inconclusive_never_failed():
    from phasescope.reproduce.verdicts import entry_verdict

    def row(seed, period_p, period=4):
        return {"recipe": "x", "seed": seed, "step": 4, "learned": True, "period": period, "period_p": period_p}

    assert entry_verdict([row(s, 0.001) for s in range(3)], "period")["verdict"] == "reproduced"
    withheld = entry_verdict([row(0, 0.001), row(1, 0.001), row(2, None, None)], "period")
    assert withheld["verdict"] == "inconclusive" and "not testable" in withheld["why"]
    assert entry_verdict([row(s, None, None) for s in range(3)], "control")["verdict"] == "inconclusive"
    assert entry_verdict([row(s, 0.6, None) for s in range(3)], "control")["verdict"] == "reproduced"
