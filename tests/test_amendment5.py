"""Amendment 5 (issue #34): the learned band on sweep accuracy, the control by equivalence and
KV-head specialization on shared window boundaries, judged from reproduction rows."""

from phasescope.reproduce.amendment5 import EQUIVALENCE_PP, control_equivalence, judge_amendment5, on_sweep_accuracy


def row(recipe, seed, accuracy, held_out=1.0, **extra):
    base = {"recipe": recipe, "seed": seed, "variant": "plain", "step": 2, "mean_accuracy": accuracy}
    return base | {"eval_accuracy": held_out, "learned": False, "gap_pp": 20.0, "period": 2, "period_p": 0.001} | extra


def test_a_seed_at_the_held_out_ceiling_counts_when_its_sweep_accuracy_is_in_the_band():
    rows = [row("tiny-v4.1", s, 0.9) for s in range(6)] + [row("tiny-v4.1", 6, 0.99)]
    counted = [r["learned"] for r in on_sweep_accuracy(rows)]
    assert counted == [True] * 6 + [False]
    verdict = judge_amendment5(rows)["step2"]["entries"]["tiny-v4.1"]
    assert verdict["verdict"] == "reproduced" and verdict["learned_seeds"] == 6


def test_the_control_is_judged_by_equivalence_not_by_a_failure_to_reject():
    tight = [row("tiny-full-matched", s, 0.74, learned=True, gap_ci_pp=[0.0, 1.9]) for s in range(3)]
    assert control_equivalence(tight)["verdict"] == "reproduced"
    loose = tight[:2] + [row("tiny-full-matched", 2, 0.74, learned=True, gap_ci_pp=[0.0, EQUIVALENCE_PP + 2])]
    assert control_equivalence(loose)["verdict"] == "inconclusive"
    effect = tight[:2] + [row("tiny-full-matched", 2, 0.74, learned=True, gap_ci_pp=[4.0, 9.0])]
    assert control_equivalence(effect)["verdict"] == "not reproduced"


def test_specialization_is_judged_on_shared_boundaries_and_the_staggered_model_only_reported():
    kv = {"specialized": True}
    rows = [row("tiny-s4-stagger", s, 0.6, kv=kv) for s in range(3)]
    rows += [row("tiny-s4-kv4", s, 0.6, kv={"specialized": s == 0}) for s in range(5)]
    a5 = judge_amendment5(rows)
    assert (
        a5["kv_shared"]["verdict"] == "inconclusive" and a5["kv_shared"]["entries"]["tiny-s4-kv4"]["learned_seeds"] == 5
    )
    assert a5["kv_built_in"]["verdict"] == "reproduced"
    assert a5["intervention"]["verdict"] == "inconclusive" and "on 0 of 0 counted seeds" in a5["intervention"]["why"]


def test_same_vs_split_needs_both_value_phases_and_step_8_is_judged_at_48_offsets():
    from phasescope.reproduce.amendment5 import same_vs_split

    def split(seed, ci, phases):
        extra = {"same_minus_split_ci_pp": ci, "discordant_phases": phases, "same_minus_split_pp": 9.0}
        return row("tiny-s4", seed, 0.6, variant="kv-gaps-012", **extra)

    rows = [split(s, [4.0, 14.0], [1, 2]) for s in range(3)]
    assert same_vs_split(on_sweep_accuracy(rows))["verdict"] == "reproduced"
    one_phase = rows[:2] + [split(2, [4.0, 14.0], [1])]
    assert same_vs_split(on_sweep_accuracy(one_phase))["verdict"] == "inconclusive"
    step8 = [row("tiny-s8", s, 0.32, variant="offsets-48", step=8, period=8, period_p=0.001) for s in range(3)]
    step8[2] |= {"period": 16, "period_kind": "multiple", "step_component_p": 0.002}
    assert judge_amendment5(step8)["step8_48"]["verdict"] == "reproduced"
