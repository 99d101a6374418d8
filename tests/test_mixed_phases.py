"""Issue #29: the verdict on every real sweep. With a real tokenizer each content's answer starts at
its own phase; the statistics take the records as they come (contents compared through a shared
drift, each group of columns with its own intercept), the text probe can start every content at
one phase (``--same-phase``, the default), and the verdict claims under one alpha.

Planted-signal and calibration checks on simulated sweeps whose contents start at different
phases, end to end on a tiny DeepSeek-V4 with the real DeepSeek-V4 tokenizer, and one test per
verdict defect the issue lists."""

import json
import shutil

import numpy as np
import pytest

import phasescope
from phasescope.analysis.design import design_check
from phasescope.analysis.offset_effects import fit_offset_effects
from phasescope.analysis.simulate import Scenario, binomial_bound, calibrate, simulate
from phasescope.analysis.stats import analyze_arrays
from phasescope.analysis.verdict import holm, span, verdict
from phasescope.errors import InputError
from phasescope.specs import default_offsets

BOOT = 199


def bound(n: int) -> float:
    """alpha + 3 binomial s.e. (tests/test_calibration.py says why 3)."""
    return 0.05 + 1.5 * (binomial_bound(0.05, n) - 0.05)


def test_contents_that_start_at_different_phases_form_components_compared_through_the_trend():
    r = simulate(Scenario(starts="uniform", n_contents=40), np.random.default_rng(0))
    starts = {int(p) for c, d, p in zip(r.content, r.offset, r.phase, strict=True) if d == 0}
    assert len(starts) == 4, "the simulation puts contents at every start phase"
    fx = fit_offset_effects(r.cells(), np.random.default_rng(0), 0)
    assert fx is not None and fx.n_components == 4 and not fx.aligned()
    assert (fx.effect[~fx.estimated] == 0).all() and (~fx.estimated).sum() == 4, "one reference column per component"


def test_a_planted_effect_in_a_mixed_start_sweep_is_recovered_with_period_step():
    s = Scenario(starts="uniform", n_contents=60, effects_pp=(-30, 0, 0, 0))
    for seed in range(3):
        r, truth = simulate(s, np.random.default_rng(seed), truth=True)
        m = analyze_arrays(r, seed=seed, n_resamples=BOOT)
        assert m["gap_ci_pp"][0] <= truth.gap_pp <= m["gap_ci_pp"][1], m["gap_ci_pp"]
        assert m["period"]["detected"] == 4 and m["verdict"]["claims"][:1] == ["gap"]
        assert m["verdict"]["worst_phase"] == 0 and m["verdict"]["kind"] == "effect"


def test_contents_correlated_with_their_start_phase_stay_calibrated():
    """Longer contents are harder and start later: start phase and difficulty go together."""
    n = 120
    for starts in ("uniform", "harder-later"):
        rates = calibrate(Scenario(family="drift+bump", starts=starts), n, seed=3, n_boot=99)
        for key in ("gap_rejects", "period_detected", "claims_anything"):
            assert rates[key] <= bound(n), (starts, key, rates)
        assert rates["gap_ci_covers"] >= 1 - bound(n) and rates["effect_ci_covers"] >= 1 - bound(n), rates


def test_lm_eval_like_documents_with_one_record_per_offset_are_tested_and_calibrated():
    s = Scenario(starts="uniform", records_per_cell=(1, 1), n_contents=80)
    n = 100
    rates = calibrate(s, n, seed=5, n_boot=99)
    assert rates["gap_withheld"] < 0.05 and rates["claims_anything"] <= bound(n), rates
    planted = calibrate(Scenario(**{**s.__dict__, "effects_pp": (-20, 0, 0, 0)}), 20, seed=6, n_boot=99)
    assert planted["gap_rejects"] >= 0.9 and planted["period_at_step"] >= 0.8, planted


# ---- the verdict's six defects (issue #29, "A held-out calibration audit") ----


def test_defect_1_one_alpha_for_any_claim_with_48_offsets_and_a_steep_drift():
    """The gap and the period test each spend alpha; the verdict claims under Holm's adjustment."""
    assert holm({"gap": 0.03, "period": 0.04, "dependence": None}) == {"gap": 0.06, "period": 0.06}
    assert holm({"gap": 0.01, "period": 0.04}) == {"gap": 0.02, "period": 0.04}
    s = Scenario(drift_shape="logistic", drift_pp=60, records_per_cell=(1, 1), n_contents=200, offsets=tuple(range(48)))
    n = 60
    rates = calibrate(s, n, seed=7, n_boot=99)
    assert rates["claims_effect_or_pattern"] <= bound(n) and rates["claims_anything"] <= bound(n), rates


def test_defect_2_a_period_that_is_a_multiple_of_the_step_is_named_as_such():
    s = Scenario(family="no-effect", offsets=tuple(range(48)), period_pp=(8, 20), n_contents=100)
    named = []
    for seed in range(3):
        m = analyze_arrays(simulate(s, np.random.default_rng(seed)), seed=seed, n_resamples=BOOT)
        named.append((m["period"]["detected"], m["period"]["kind"]))
        assert "period 8 (a multiple of the step" in m["verdict"]["sentence"]
    assert named == [(8, "multiple")] * 3


def test_defect_3_contents_with_their_own_bad_phase_are_reported():
    s = Scenario(family="drift", phase_sd_pp=30, n_contents=80)
    kinds = []
    for seed in range(3):
        m = analyze_arrays(simulate(s, np.random.default_rng(seed)), seed=seed, n_resamples=BOOT)
        kinds.append(m["verdict"]["kind"])
        if m["verdict"]["kind"] == "content-specific":
            assert "each content depends on the phase by" in m["verdict"]["sentence"]
            assert "not on the same phase" in m["verdict"]["sentence"]
    assert kinds.count("content-specific") >= 2, kinds
    assert "no effect" not in kinds, "the dependence test fires; the verdict must not say no effect"


def test_defect_4_at_the_ceiling_margins_are_called_margins():
    m = {
        "step": 4,
        "overall_accuracy": 1.0,
        "phases": [],
        "period": {},
        "log_score": {
            "outcome": "margin",
            "phases": [
                {"phase": p, "mean": mean, "effect": eff}
                for p, mean, eff in zip(range(4), [10.391, 10.52, 10.6, 10.413], [-0.1, 0.1, 0.3, -0.3], strict=True)
            ],
            "gap": 0.6,
            "gap_ci": [0.4, 0.8],
            "gap_p_value": 0.001,
            "period": {"detected": 4, "p_value": 0.001, "kind": "step"},
        },
    }
    v = verdict(m)
    assert "raw accuracy" not in v["sentence"] and "raw mean log-prob margin is lowest at phase 0" in v["sentence"]
    assert "(10.39 nats; phase 3: 10.41 nats)" in v["sentence"]


def test_defect_5_a_printed_interval_always_agrees_with_its_p_value():
    assert span(5.0, [0.03, 9.0], "pp", ".1f") == "5.0 pp [0.03, 9.0]"
    assert span(5.0, [0.0, 9.0], "pp", ".1f") == "5.0 pp [0.0, 9.0]"
    rows = [{"phase": p, "accuracy": 0.6, "effect_pp": e} for p, e in zip(range(4), [-3, 1, 1, 1], strict=True)]
    m = {
        "step": 4,
        "overall_accuracy": 0.6,
        "phases": rows,
        "gap_pp": 4.0,
        "gap_ci_pp": [0.03, 9.0],
        "gap_p_value": 0.046,
        "period": {"detected": None, "p_value": 0.5},
        "phase_dependence": {"p_value": None},
    }
    v = verdict(m)
    assert "[0.03, 9.0]" in v["sentence"] and "[0.0," not in v["sentence"]
    # an interval that excludes 0 is never called "no detectable effect" (#56 item 3): the
    # adjustment is what leaves it unclaimed, and the sentence says so
    assert v["claims"] == [] and v["sentence"].startswith("no phase effect claimed at step 4: gap 4.0 pp [0.03, 9.0]")
    assert "(p = 0.046; 0.092 once the verdict's 2 tests share alpha (Holm))" in v["sentence"]
    held = verdict({**m, "gap_ci_pp": [0.0, 9.0], "gap_p_value": 0.3})
    assert held["sentence"].startswith("no detectable phase effect at step 4: gap 4.0 pp [0.0, 9.0]")
    dependent = verdict({**m, "phase_dependence": {"p_value": 0.001, "rms_pp": 6.0, "ci_pp": [3.0, 9.0]}})
    assert dependent["sentence"].startswith("no shared phase effect claimed at step 4 (gap 4.0 pp [0.03, 9.0]")


def test_tasks_of_one_run_share_alpha_across_their_verdicts():
    """Each lm-eval task's verdict at alpha on its own claims something on some task of a null run of
    T tasks in up to T alpha (#56 item 6): the tasks' tests form one Holm family."""
    from phasescope.analysis.per_task import shared_alpha

    rows = [{"phase": p, "accuracy": 0.6, "effect_pp": e} for p, e in zip(range(4), [-1, 0, 0, 1], strict=True)]
    null = {"step": 4, "overall_accuracy": 0.6, "phases": rows, "gap_pp": 2.0, "gap_ci_pp": [0.0, 8.0],
            "gap_p_value": 0.6, "period": {"detected": 4, "kind": "step", "p_value": 0.7},
            "phase_dependence": {"p_value": 0.8}}  # fmt: skip
    lucky = {**null, "period": {"detected": 4, "kind": "step", "p_value": 0.01}}
    assert verdict(lucky)["claims"] == ["period"]  # alone: Holm over its own 3 tests keeps it (p = 0.03)
    analyses = {"task_a": dict(lucky), "task_b": dict(null), "task_c": dict(null)}
    shared_alpha(analyses, "task")
    a = analyses["task_a"]["verdict"]
    assert a["claims"] == [] and a["adjusted_p"]["period"] == pytest.approx(0.01 * 9)
    assert a["family_words"] == "the 9 tests of the 3 tasks' verdicts"
    strong = {**null, "gap_p_value": 0.0005, "gap_ci_pp": [3.0, 12.0], "gap_pp": 7.0}
    analyses = {"task_a": dict(strong), "task_b": dict(null)}
    shared_alpha(analyses, "task")
    assert analyses["task_a"]["verdict"]["claims"] == ["gap"] and analyses["task_b"]["verdict"]["claims"] == []


def test_defect_6_default_offsets_cover_six_windows_and_the_dry_run_says_what_the_design_can_test():
    assert default_offsets(4) == tuple(range(24)) and default_offsets(8) == tuple(range(48))
    assert len(default_offsets(6)) == 36 and default_offsets(2) == tuple(range(24))
    for step in (2, 4, 6, 8):
        check = design_check(default_offsets(step), step)
        assert check["gap"] == "testable" and check["period"] == "testable" and check["advice"] is None
    short = design_check(range(24), 8)
    assert short["gap"].startswith("linear drift only") and short["advice"] == "use --offsets 0:48 (six windows)"
    assert design_check(range(8), 4)["gap"].startswith("not testable")


# ---- end to end on a tiny DeepSeek-V4 with the real tokenizer ----


@pytest.fixture(scope="module")
def deepseek(tmp_path_factory):
    from hf_models import tiny_deepseek_v4
    from phasescope.backends.tokenizers import named_tokenizer

    return tiny_deepseek_v4(tmp_path_factory.mktemp("v4") / "model", named_tokenizer("deepseek-v4"))


def _start_phases(records) -> dict[int, int]:
    starts: dict[int, int] = {}
    for r in records:
        if r.offset == 0:
            starts[r.phase] = starts.get(r.phase, 0) + 1
    return starts


def _planted(run, out, effect_pp: float, seed: int):
    """A copy of ``run`` whose answers are redrawn: accuracy 0.6 + a falling drift over offsets,
    ``effect_pp`` lower at phase 0 (the positions, phases and contents are the real sweep's)."""
    out.mkdir()
    shutil.copy(run / "spec.json", out / "spec.json")
    rng = np.random.default_rng(seed)
    lines = []
    for line in (run / "records.jsonl").read_text().splitlines():
        record = json.loads(line)
        p = 0.7 - 0.3 * record["offset"] / 24 - effect_pp / 100 * (record["phase"] == 0)
        record["correct"] = bool(rng.random() < p)
        lines.append(json.dumps(record))
    (out / "records.jsonl").write_text("\n".join(lines) + "\n")
    return out


def test_a_real_tokenizer_sweep_gets_a_tested_verdict_mixed_or_same_phase(deepseek, tmp_path):
    """The issue's route: the text kv-retrieval probe on DeepSeek-V4's real tokenizer, then analyze.
    Every content at phase 0 by default; --mixed-phase leaves each where its text puts it; both
    analyze to a tested verdict, and a planted phase-0 deficit in the mixed sweep's records is
    recovered while a drift-only null is not claimed."""
    common = dict(samples=16, batch_size=16)
    same = phasescope.sweep(f"hf:{deepseek}", out=tmp_path / "same", **common)
    assert _start_phases(same.records) == {0: 16} and all("same_phase_shift" in r.padding for r in same.records)
    mixed = phasescope.sweep(f"hf:{deepseek}", same_phase=False, out=tmp_path / "mixed", **common)
    assert len(_start_phases(mixed.records)) >= 3, "the real tokenizer starts contents at their own phases"
    for run in ("same", "mixed"):
        v = phasescope.analyze(tmp_path / run, n_resamples=499).verdict
        assert v.p_value is not None and v.effect_ci is not None, v.sentence
        assert "not tested" not in v.sentence and "not estimable" not in v.sentence
    planted = phasescope.analyze(_planted(tmp_path / "mixed", tmp_path / "planted", 40, seed=1), n_resamples=499)
    assert planted.gap_ci_pp[0] <= 40 <= planted.gap_ci_pp[1], planted.gap_ci_pp  # effects -30, +10, +10, +10
    assert planted.period.detected == 4 and "gap" in planted.verdict.claims and planted.verdict.worst_phase == 0
    null = phasescope.analyze(_planted(tmp_path / "mixed", tmp_path / "null", 0, seed=2), n_resamples=499)
    assert null.verdict.claims == [] and null.verdict.kind == "no effect", null.verdict.sentence


def test_a_run_made_before_same_phase_existed_resumes(tmp_path):
    """Issue #31's rule for a new option: a spec.json of the previous release (no same_phase)
    resumes -- the id-level probe at the default, the text probe with --mixed-phase (what it
    did then) -- and a text run resumed at the new default is refused with the fix."""
    from hf_models import tiny_qwen3, word_tokenizer

    model = tiny_qwen3(tmp_path / "m", word_tokenizer())
    run = tmp_path / "run"
    phasescope.sweep(f"hf:{model}", step=4, samples=2, offsets=range(8), same_phase=False, out=run)
    spec = json.loads((run / "spec.json").read_text())
    del spec["sweep"]["probe"]["same_phase"], spec["probe"]["same_phase"]  # as the previous release wrote it
    (run / "spec.json").write_text(json.dumps(spec))
    again = phasescope.sweep(f"hf:{model}", step=4, samples=2, offsets=range(8), same_phase=False, out=run)
    assert again.scored == 0 and len(again.records) == 16
    with pytest.raises(InputError, match="--mixed-phase"):
        phasescope.sweep(f"hf:{model}", step=4, samples=2, offsets=range(8), out=run)
