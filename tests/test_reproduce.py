"""phasescope reproduce: the verdict rules on planted rows, and the whole path on shipped models."""

import csv
from pathlib import Path

import phasescope
from phasescope.reproduce.matrix import Entry, final_eval, learned
from phasescope.reproduce.run import geometry, run_reproduce
from phasescope.reproduce.verdicts import entry_verdict, judge

ASSETS = Path(phasescope.__file__).parent / "assets" / "demo"


def seed_row(recipe="tiny-s4", seed=0, step=4, period=4, period_p=0.001, learned=True, **extra):
    return {
        "recipe": recipe,
        "seed": seed,
        "variant": "plain",
        "step": step,
        "learned": learned,
        "mean_accuracy": 0.7,
        "gap_pp": 10.0,
        "gap_ci_pp": [5.0, 15.0],
        "gap_p": 0.001,
        "period": period,
        "period_p": period_p,
        **extra,
    }


def test_three_periodic_seeds_reproduce_and_disagreeing_seeds_do_not():
    assert entry_verdict([seed_row(seed=s) for s in range(3)], "period")["verdict"] == "reproduced"
    none = [seed_row(seed=s, period=None, period_p=0.4) for s in range(3)]
    assert entry_verdict(none, "period")["verdict"] == "not reproduced"
    mixed = [seed_row(seed=0), seed_row(seed=1), seed_row(seed=2, period=8)]
    v = entry_verdict(mixed, "period")
    assert v["verdict"] == "inconclusive" and "2 of 3 seeds" in v["why"]


def test_a_model_that_did_not_learn_never_carries_a_verdict():
    rows = [seed_row(seed=0), seed_row(seed=1), seed_row(seed=2, learned=False)]
    v = entry_verdict(rows, "period")
    assert v["verdict"] == "inconclusive" and "2 of 3 seeds learned" in v["why"]


def test_the_control_is_reproduced_only_without_a_period():
    flat = [seed_row("tiny-full-matched", s, period=None, period_p=0.6) for s in range(3)]
    assert entry_verdict(flat, "control")["verdict"] == "reproduced"
    periodic = [seed_row("tiny-full-matched", s) for s in range(3)]
    assert entry_verdict(periodic, "control")["verdict"] == "not reproduced"


def test_a_claim_over_several_steps_needs_every_step():
    matrix = (Entry("a", ("period",)), Entry("b", ("period",)))
    rows = [seed_row("a", s) for s in range(3)]
    rows += [seed_row("b", s, step=8, period=None, period_p=0.3) for s in range(3)]
    verdicts = judge(rows, matrix)
    assert verdicts["period"]["verdict"] == "not reproduced"
    assert verdicts["period"]["entries"]["a"]["verdict"] == "reproduced"
    assert verdicts["nope"]["verdict"] == "inconclusive"  # no model tests it


def test_learned_band_and_final_eval_of_a_shipped_model():
    assert learned(final_eval(ASSETS / "tiny-s4"))  # 73% held out
    assert not learned(final_eval(ASSETS / "tiny-full"))  # 100%: the ceiling, not the middle band
    assert not learned(None)


def test_geometry_of_a_transformers_checkpoint():
    geo = geometry(ASSETS / "deepseek-v4-tiny", Entry("hf-deepseek-v4-tiny", hf=True))
    assert (geo["step"], geo["window"], geo["local"], geo["pooler"]) == (4, 8, 8, "channel_gate (V4)")
    assert geometry(ASSETS / "tiny-full", Entry("tiny-full"))["step"] is None  # full attention


def test_reproduce_end_to_end_on_shipped_models(tmp_path):
    checkpoints = tmp_path / "ckpt"
    checkpoints.mkdir()
    (checkpoints / "tiny-s4-s0").symlink_to(ASSETS / "tiny-s4")
    matrix = (
        Entry("tiny-s4", ("period", "same_window"), mitigation="baseline", same_window=True, ensemble=True),
        Entry("tiny-s8", ("period",)),  # no checkpoint: said, not hidden
    )
    out = tmp_path / "out"
    result = run_reproduce(out, seeds=1, samples=8, checkpoints=checkpoints, matrix=matrix, resamples=200)
    rows = {(r["recipe"], r["variant"]): r for r in result["rows"]}
    assert rows[("tiny-s4", "plain")]["step"] == 4 and rows[("tiny-s4", "plain")]["learned"]
    assert rows[("tiny-s4", "kv-gaps")]["same_window_phases"] == [1, 2, 3]  # phase 0 splits key and value
    assert rows[("tiny-s4", "phase-ensemble")]["forward_passes"] == 4
    assert rows[("tiny-s8", "plain")].get("missing")
    assert -1 <= rows[("tiny-s4", "plain")]["preference_rho"] <= 1  # a learned scalar gate
    text = (out / "RESULTS.md").read_text()
    assert "### period: **inconclusive**" in text and "1 of 1 seeds learned" in text
    assert "(e) phase ensemble (test time)" in text and "no checkpoint" in text
    assert "## Learned pooling weights vs accuracy" in text
    with (out / "results.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 4  # plain, kv-gaps, phase-ensemble, the missing tiny-s8
    assert (out / "figures" / "gaps.png").exists() and (out / "compare" / "compare.html").exists()


def fake_training(monkeypatch, fail: str = ""):
    """Stands in for the training processes of --retrain: each writes its final weights and
    exits 0 (1 for a target named ``fail``); returns the launched argv (after ``python -m``)."""
    from phasescope.reproduce import run as reproduce_run

    launched = []

    class FakeProcess:
        def __init__(self, argv, stdout, stderr, env):
            assert env["OMP_NUM_THREADS"] == "1"
            launched.append(argv[2:])
            out = Path(argv[argv.index("--out") + 1])
            self.returncode = int(out.name == fail)
            if not self.returncode:
                (out / "model.safetensors").write_bytes(b"")

        def poll(self):
            return self.returncode

    monkeypatch.setattr(reproduce_run.subprocess, "Popen", FakeProcess)
    monkeypatch.setattr(reproduce_run.time, "sleep", lambda s: None)
    return launched


RETRAIN_MATRIX = (
    Entry("tiny-s4-nope"),  # listed first: it must still wait for tiny-full, whose weights it starts from
    Entry("tiny-s4"),
    Entry("tiny-full-matched"),
    Entry("tiny-full", max_seeds=1),
)


def test_retrain_trains_what_is_missing_in_dependency_order_and_skips_the_rest(tmp_path, monkeypatch):
    from rich.console import Console

    from phasescope.reproduce import run as reproduce_run

    launched = fake_training(monkeypatch)
    (tmp_path / "tiny-s4-s0").mkdir()
    (tmp_path / "tiny-s4-s0" / "model.safetensors").write_bytes(b"")  # done already: skipped
    reproduce_run.train_matrix(tmp_path, RETRAIN_MATRIX, seeds=2, jobs=2, console=Console(quiet=True))
    names = [a[a.index("--out") + 1].split("/")[-1] for a in launched]
    assert sorted(names) == [
        "tiny-full-matched-s0",
        "tiny-full-matched-s1",
        "tiny-full-s0",
        "tiny-s4-nope-s0",
        "tiny-s4-nope-s1",
        "tiny-s4-s1",
    ]
    assert names.index("tiny-s4-nope-s0") > names.index("tiny-full-s0")
    nope0, nope1 = (launched[names.index(f"tiny-s4-nope-s{s}")] for s in (0, 1))
    assert f"init_from={tmp_path / 'tiny-full-s0'}" in nope0  # the retrained source of the same seed
    assert not any(a.startswith("init_from") for a in nope1)  # tiny-full-s1 is not retrained: the shipped one
    matched = launched[names.index("tiny-full-matched-s1")]
    assert matched[:3] == ["phasescope.reproduce.matched", "--seed", "1"]
    assert all("threads=1" in a for a in launched if a[0] == "phasescope")


def test_retrain_does_not_start_what_a_failed_run_was_to_start_from(tmp_path, monkeypatch):
    import pytest
    from rich.console import Console

    from phasescope.errors import InputError
    from phasescope.reproduce import run as reproduce_run

    launched = fake_training(monkeypatch, fail="tiny-full-s0")
    with pytest.raises(InputError, match=r"training failed for .*tiny-full-s0.*tiny-s4-nope-s0"):
        reproduce_run.train_matrix(tmp_path, RETRAIN_MATRIX, seeds=1, jobs=1, console=Console(quiet=True))
    names = [a[a.index("--out") + 1].split("/")[-1] for a in launched]
    assert "tiny-s4-nope-s0" not in names and "tiny-s4-s0" in names


def test_a_checkpoint_directory_without_the_matrix_is_refused(tmp_path):
    import pytest

    from phasescope.errors import InputError

    with pytest.raises(InputError, match="no checkpoint of the matrix under"):
        run_reproduce(tmp_path / "out", seeds=1, samples=8, checkpoints=tmp_path / "nowhere")
    assert not (tmp_path / "out" / "RESULTS.md").exists()


def eval_log(path: Path, points) -> Path:
    import json

    path.write_text("".join(json.dumps({"step": s - 1, "loss": 1.0, "eval_accuracy": a}) + "\n" for s, a in points))
    return path


def test_matched_step_interpolates_the_first_crossing_of_the_target(tmp_path):
    import pytest

    from phasescope.errors import InputError
    from phasescope.reproduce.matched import crossing_step

    log = eval_log(tmp_path / "log.jsonl", [(25, 0.1), (50, 0.5), (75, 0.9), (100, 0.6), (125, 1.0)])
    assert crossing_step(log, 0.8) == 69  # between 50 (50%) and 75 (90%); the later dip is ignored
    assert crossing_step(log, 0.5) == 50
    assert crossing_step(log, 0.05) == 12  # before the first evaluation: from (0, 0%)
    with pytest.raises(InputError, match=r"never reached 99% within 125 steps \(best 50.0%\)"):
        crossing_step(eval_log(tmp_path / "flat.jsonl", [(25, 0.2), (125, 0.5)]), 0.99)


def test_matched_control_refuses_a_target_outside_0_1_before_training(tmp_path):
    import pytest

    from phasescope.errors import InputError
    from phasescope.reproduce.matched import train_matched

    with pytest.raises(InputError, match="strictly between 0 and 1"):
        train_matched(tmp_path / "m", seed=0, target=1.5)
    assert not (tmp_path / "m").exists()


def test_matched_control_second_pass_replays_the_first_up_to_the_chosen_step(tmp_path):
    import json

    from phasescope.model.load import load_model_dir
    from phasescope.reproduce.matched import train_matched

    edits = ("batch_size=8", "warmup_steps=1", "eval_every=2", "eval_batches=8", "checkpoint_every=2", "steps=40")
    first = train_matched(tmp_path / "m", seed=0, target=0.001, pass1_steps=6, edits=edits)
    step = first["final_eval"]["step"]
    assert 1 <= step <= 2  # the first evaluation (step 2) is above 0.1%
    pass1 = [json.loads(x) for x in (tmp_path / "m" / "pass1" / "log.jsonl").read_text().splitlines()]
    pass2 = [json.loads(x) for x in (tmp_path / "m" / f"pass2-at{step}" / "log.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in pass2] == [r["loss"] for r in pass1[:step]]  # bit-identical replay
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    assert f"--stop-after {step}" in manifest["command"] and manifest["seed"] == 0
    load_model_dir(str(tmp_path / "m"))  # a model directory the sweep loads
    again = train_matched(tmp_path / "m", seed=0, target=0.001, pass1_steps=6, edits=edits)  # resumed: nothing to do
    assert again["final_eval"] == first["final_eval"]


def test_mitigation_table_compares_each_mitigation_with_its_own_baseline():
    from phasescope.reproduce.results import mitigation_table

    def seeds(recipe, gaps, variant="plain", held_out=0.7):
        return [
            {
                "recipe": recipe,
                "seed": i,
                "variant": variant,
                "eval_accuracy": held_out,
                "gap_pp": g,
                "mean_accuracy": 0.6,
                "forward_passes": 4 if variant == "phase-ensemble" else 1,
            }
            for i, g in enumerate(gaps)
        ]

    rows = seeds("tiny-s4", [10, 11, 12]) + seeds("tiny-s4", [1, 2, 1.5], "phase-ensemble")
    rows += seeds("tiny-s4-kv4", [20, 22, 24]) + seeds("tiny-s4-stagger", [20, 21, 25], held_out=0.98)
    rows += [{"recipe": "tiny-s4-w8", "seed": 0, "variant": "plain", "eval_accuracy": 0.1}]
    for row, accuracy in zip(rows[-4:-1], (0.3, 0.95, 0.99), strict=True):  # the stagger seeds
        row["mean_accuracy"] = accuracy
    matrix = (
        Entry("tiny-s4", mitigation="baseline", ensemble=True),
        Entry("tiny-s4-w8", mitigation="(a)"),
        Entry("tiny-s4-kv4", mitigation="kv4"),
        Entry("tiny-s4-stagger", mitigation="(b)", baseline="tiny-s4-kv4"),
    )
    table = {line.split(" | ")[0].strip("| "): line for line in mitigation_table(rows, matrix)[2:]}
    assert "| — |" in table["baseline"]
    assert "| 0 of 1 | n/a | n/a | — |" in table["(a)"]  # did not learn: nothing to compare
    assert "+11.0 [" in table["kv4"] and "vs `tiny-s4`" in table["kv4"]
    assert "+0.0 [" in table["(b)"] and "vs `tiny-s4-kv4`" in table["(b)"]  # against 4 KV heads, not tiny-s4
    assert "| 3 of 3 (3 above 95%) |" in table["(b)"]  # a mitigation at the ceiling still counts
    assert "| 74.7 [" in table["(b)"] and ", 100.0] |" in table["(b)"]  # the t interval clipped at 100%
    assert "-9.5 [" in table["(e) phase ensemble (test time)"]
    assert "(paired t over 3 shared seeds, p" in table["(e) phase ensemble (test time)"]  # the same models


def test_welch_difference_matches_the_textbook_formula():
    import numpy as np
    from scipy.stats import t

    from phasescope.analysis.intervals import welch_difference

    a, b = np.array([1.0, 2.0, 4.0]), np.array([5.0, 9.0, 7.0, 8.0])
    va, vb = a.var(ddof=1) / 3, b.var(ddof=1) / 4
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 3)
    half = t.ppf(0.975, df) * np.sqrt(va + vb)
    d = welch_difference(a, b)
    assert d["diff"] == a.mean() - b.mean()
    assert np.isclose(d["ci_low"], d["diff"] - half) and np.isclose(d["ci_high"], d["diff"] + half)
    assert welch_difference([1.0], b)["ci_low"] is None and welch_difference([], b)["diff"] is None


def test_every_shipped_checkpoint_is_what_its_manifest_command_trains():
    """A recipe changed after its checkpoint shipped would make `--retrain` and the shipped numbers
    disagree: every shipped run's saved config must equal its recipe with the manifest's --set edits."""
    import json

    from phasescope.reproduce.matrix import ASSETS as SHIPPED
    from phasescope.train.config import TrainConfig, apply_overrides
    from phasescope.train.recipes import get_recipe

    checked = 0
    for directory in sorted(p for p in SHIPPED.iterdir() if p.is_dir()) + [ASSETS / "tiny-s4", ASSETS / "tiny-full"]:
        manifest = json.loads((directory / "manifest.json").read_text())
        if directory.parent == SHIPPED:
            assert directory.name == f"{manifest['recipe']}-s{manifest['seed']}"
        if not (directory / "train_config.json").exists():
            continue  # a transformers directory: its phasescope.json holds the geometry
        saved = TrainConfig.from_dict(json.loads((directory / "train_config.json").read_text()))
        expected = apply_overrides(get_recipe(manifest["recipe"]), manifest["set"])
        same = {"threads": 1, "about": ""}  # the thread count and the description do not change the run
        assert saved.to_dict() | same == expected.to_dict() | same, directory.name
        checked += 1
    assert checked >= 40


# --- the rest of the study (issue #23): reproduce/extended.py on planted rows ---


def gap_rows(recipe, gaps, accuracy=0.6, period=4, step=4, learned=True):
    return [
        seed_row(recipe, s, step=step, period=period, gap_pp=g, mean_accuracy=accuracy, learned=learned)
        for s, g in enumerate(gaps)
    ]


def test_post_training_narrowing_is_judged_paired_over_seeds():
    from phasescope.reproduce.extended import post_training

    before = gap_rows("tiny-s4", [10.0, 12.0, 11.0])
    narrowed = post_training(before + gap_rows("tiny-s4-post", [5.0, 6.5, 5.5]), "tiny-s4-post", "tiny-s4")
    assert narrowed["verdict"] == "reproduced" and narrowed["delta_gap_ci_pp"][1] < 0
    assert [p["delta_gap_pp"] for p in narrowed["per_seed"]] == [-5.0, -5.5, -5.5]
    wider = post_training(before + gap_rows("tiny-s4-post", [12.0, 13.0, 12.5]), "tiny-s4-post", "tiny-s4")
    assert wider["verdict"] == "not reproduced"
    lost_period = post_training(before + gap_rows("tiny-s4-post", [5.0, 6.5, 5.5], period=8), "tiny-s4-post", "tiny-s4")
    assert lost_period["verdict"] == "not reproduced" and "period" in lost_period["why"]
    two = post_training(before + gap_rows("tiny-s4-post", [5.0, 6.5]), "tiny-s4-post", "tiny-s4")
    assert two["verdict"] == "inconclusive" and two["paired_seeds"] == 2


def test_post_training_narrowing_that_only_comes_from_the_ceiling_does_not_count():
    from phasescope.reproduce.extended import post_training

    before = gap_rows("tiny-s4", [10.0, 12.0, 11.0], accuracy=0.6)  # 40 pp of headroom
    # gaps halve while the headroom shrinks to a tenth: per pp of headroom the gap grew
    ceiling = post_training(
        before + gap_rows("tiny-s4-post", [5.0, 6.0, 5.5], accuracy=0.94), "tiny-s4-post", "tiny-s4"
    )
    assert ceiling["verdict"] == "inconclusive" and "ceiling" in ceiling["why"]
    assert ceiling["delta_headroom_gap"] > 0


def test_theory_predictions_are_confirmed_refuted_or_inconclusive():
    from phasescope.reproduce.extended import theory

    base = gap_rows("tiny-s4", [10.0, 12.0, 11.0])
    confirmed = theory(base + gap_rows("tiny-s2", [2.0, 3.0, 2.5], step=2, period=2))["T1"]
    assert confirmed["verdict"] == "confirmed" and confirmed["ci_pp"][1] < 0
    refuted = theory(base + gap_rows("tiny-s2", [20.0, 25.0, 22.0], step=2, period=2))["T1"]
    assert refuted["verdict"] == "refuted" and refuted["diff_pp"] > 0
    noisy = theory(base + gap_rows("tiny-s4-d64", [1.0, 20.0, 9.0]))["T2"]
    assert noisy["verdict"] == "inconclusive" and noisy["diff_pp"] < 0
    unlearned = theory(base + gap_rows("tiny-s4-d64", [1.0, 2.0, 1.5], learned=False))["T2"]
    assert unlearned["verdict"] == "inconclusive"  # a model that did not learn never decides a prediction


def test_step_two_period_and_gap_verdicts():
    from phasescope.reproduce.extended import period_verdict, step2_gap

    rows = gap_rows("tiny-v4.1", [3.0, 4.0, 3.5], step=2, period=2)
    rows += gap_rows("hf-deepseek-v4-tiny-s2", [20.0, 22.0, 21.0], step=2, period=2)
    rows += gap_rows("tiny-s4-channel", [8.0, 9.0, 10.0]) + gap_rows("hf-deepseek-v4-tiny", [56.0, 60.0, 59.0])
    assert period_verdict(rows, ("tiny-v4.1", "hf-deepseek-v4-tiny-s2"), "x")["verdict"] == "reproduced"
    assert step2_gap(rows)["verdict"] == "smaller"
    rows[0] = {**rows[0], "period": 4}  # one seed of tiny-v4.1 periodic at 4, not 2
    assert period_verdict(rows, ("tiny-v4.1", "hf-deepseek-v4-tiny-s2"), "x")["verdict"] == "inconclusive"


def planted_ablation(specialist_phase=None):
    """An ablation.json-like result: 2 layers x 4 KV heads; with ``specialist_phase`` layer 0's KV
    head 1 alone costs that phase 40 pp, and the held-out contrast for it is significant."""
    heads = []
    for layer in (0, 1):
        for h in range(4):
            special = specialist_phase is not None and (layer, h) == (0, 1)
            change = [-0.4 if special and p == specialist_phase else -0.02 for p in range(4)]
            heads.append(
                {
                    "layer": layer,
                    "head": h,
                    "accuracy": {
                        "change_by_phase": [{"phase": p, "mean": c} for p, c in enumerate(change)],
                        "index": 0.38 if special else 0.0,
                        "preferred_phase": specialist_phase if special else 0,
                        "p_holm": 0.01 if special else 1.0,
                        "specialized": special,
                    },
                }
            )
    causal = [
        {
            "phase": p,
            "heads": [[0, 1]],
            "contrast": 0.35 if p == specialist_phase else 0.01,
            "ci_low": 0.25 if p == specialist_phase else -0.05,
            "ci_high": 0.45 if p == specialist_phase else 0.07,
            "p_holm": 0.001 if p == specialist_phase else 0.8,
        }
        for p in range(4)
    ]
    return {"heads": heads, "causal": causal}


def test_kv_specialization_needs_a_significant_held_out_contrast_on_every_learned_seed():
    from phasescope.reproduce.extended import kv_specialization, stagger_own_phases
    from phasescope.reproduce.kv_ablation import summarise

    found, null = summarise(planted_ablation(2)), summarise(planted_ablation(None))
    assert found["specialized"] and not null["specialized"]
    assert found["heads"][1]["mean_drop_pp"] == 11.5 and found["heads"][1]["preferred_phase"] == 2
    rows = [seed_row("tiny-s4-stagger", s, kv=found) for s in range(3)]
    rows += [seed_row("tiny-s4-kv4", s, kv=found if s else null) for s in range(3)]
    verdict = kv_specialization(rows, ["tiny-s4-kv4", "tiny-s4-stagger"])
    assert verdict["entries"]["tiny-s4-stagger"]["verdict"] == "reproduced"
    assert verdict["entries"]["tiny-s4-kv4"]["verdict"] == "inconclusive"  # 2 of 3 seeds
    assert verdict["verdict"] == "reproduced"  # the division of labour exists in one recipe
    # KV head 1 (align 1): its own easy phases are 2 and 3; it prefers 2 on all 3 seeds
    own = stagger_own_phases(rows)
    assert (own["count"], own["of"]) == (3, 3) and own["heads"][0]["easy_phases"] == [2, 3]
    nulls = [seed_row("tiny-s4-stagger", s, kv=null) for s in range(3)]
    assert kv_specialization(nulls, ["tiny-s4-stagger"])["verdict"] == "not reproduced"


def test_retrain_starts_the_new_recipes_from_the_runs_they_need(tmp_path, monkeypatch):
    from rich.console import Console

    from phasescope.reproduce import run as reproduce_run

    launched = fake_training(monkeypatch)
    matrix = (
        Entry("hf-deepseek-v4-tiny-post", hf=True, post_of="hf-deepseek-v4-tiny"),
        Entry("tiny-s4-long"),
        Entry("hf-deepseek-v4-tiny", hf=True),
        Entry("tiny-full-v64", swept=False),
    )
    reproduce_run.train_matrix(tmp_path, matrix, seeds=1, jobs=1, console=Console(quiet=True))
    names = [a[a.index("--out") + 1].split("/")[-1] for a in launched]
    assert names.index("hf-deepseek-v4-tiny-post-s0") > names.index("hf-deepseek-v4-tiny-s0")
    assert names.index("tiny-s4-long-s0") > names.index("tiny-full-v64-s0")
    post = launched[names.index("hf-deepseek-v4-tiny-post-s0")]
    assert f"init_from={tmp_path / 'hf-deepseek-v4-tiny-s0'}" in post
    assert f"init_from={tmp_path / 'tiny-full-v64-s0'}" in launched[names.index("tiny-s4-long-s0")]


def test_the_margin_verdict_judges_only_seeds_above_the_band():
    """B''' (amendment 4): seeds above the learned band, margin period = step with p < 0.05 on
    every one (3 needed); a seed inside the band does not count, a missing p fails the seed."""
    from phasescope.reproduce.extended import margin_period_verdict

    def row(recipe, seed, acc, period, p):
        return {"recipe": recipe, "seed": seed, "step": 2, "eval_accuracy": acc, "margin_period": period,
                "margin_period_p": p}  # fmt: skip

    rows = [row("a", s, 1.0, 2, 0.001) for s in range(3)] + [row("a", 3, 0.8, None, None)]
    rows += [row("b", 0, 1.0, 2, 0.001), row("b", 1, 1.0, 2, None), row("b", 2, 0.99, 2, 0.01)]
    rows += [row("c", 0, 1.0, 2, 0.001)]
    v = margin_period_verdict(rows, ("a", "b", "c"))
    assert [v["entries"][r]["verdict"] for r in "abc"] == ["reproduced", "not reproduced", "inconclusive"]
    assert v["verdict"] == "not reproduced" and v["entries"]["a"]["eval_accuracy"] == [100.0] * 3


def test_every_seed_trained_is_counted_beside_the_rules_seeds():
    """Issue #60 item 1: seeds trained after the rules (12 on) leave the rules' verdicts alone but
    appear beside them, in the seed table (mean, sd, range, held-out accuracy) and in the
    mitigations' baseline."""
    from phasescope.reproduce.results import mitigation_table, seed_table, verdict_section

    rules = [seed_row(seed=s, eval_accuracy=0.6, gap_pp=g) for s, g in zip((0, 1, 2), (8.0, 9.0, 10.0), strict=True)]
    later = [
        seed_row(seed=12, eval_accuracy=0.62, gap_pp=4.0, held_out=True),
        seed_row(seed=13, eval_accuracy=0.1, learned=False, gap_pp=1.0, held_out=True),
        seed_row(seed=14, period=None, period_p=0.4, eval_accuracy=0.6, gap_pp=12.5, held_out=True),
    ]
    matrix = (Entry("tiny-s4", ("period",), mitigation="baseline"), Entry("tiny-s4-w8", mitigation="(a)"))
    verdicts, every = judge(rules, matrix), judge(rules + later, matrix)
    assert verdicts["period"]["verdict"] == "reproduced" and every["period"]["verdict"] == "inconclusive"
    text = "\n".join(verdict_section(verdicts, every))
    assert "* `tiny-s4`: reproduced — period = step, or a multiple" in text
    assert "  * every seed trained (6 swept, 12 on included): inconclusive — period = step" in text
    assert "on 4 of 5" in text
    assert "gap 8.7 ± 3.1, range 4.0–12.5 (seeds: 8.0, 9.0, 10.0, 4.0, 12.5) pp" in text
    table = "\n".join(seed_table(rules + later))
    assert "| `tiny-s4` | 6 (5) | 8.7 ± 3.1 | 4.0–12.5 |" in table
    assert "s12* 4.0 (62.0%)" in table and "s13* 1.0 (10.0%, not learned)" in table and "s0 8.0 (60.0%)" in table

    mitigation = [seed_row("tiny-s4-w8", seed=s, eval_accuracy=0.6, gap_pp=20.0 + s) for s in (0, 1, 2)]
    for row in rules + later + mitigation:
        row["forward_passes"] = 1
    line = mitigation_table(rules + later + mitigation, matrix)[-1]
    assert "(Welch, 3 vs 5 seeds, p" in line  # the baseline's five learned seeds, 12 and 14 included
    missing = {"recipe": "tiny-s4", "seed": 15, "variant": "plain", "learned": False, "missing": True}
    every = judge(rules + later + [missing], matrix)
    assert "(6 swept, 12 on included, 1 without a checkpoint)" in "\n".join(verdict_section(verdicts, every))
    assert "every seed trained" not in "\n".join(verdict_section(verdicts, judge(rules + [missing], matrix)))
