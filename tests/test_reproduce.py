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


def test_retrain_trains_what_is_missing_in_processes_and_skips_the_rest(tmp_path, monkeypatch):
    from rich.console import Console

    from phasescope.reproduce import run as reproduce_run

    launched = []

    class FakeProcess:
        """Stands in for `python -m phasescope train ...`: writes the final weights, exits 0."""

        def __init__(self, argv, stdout, stderr):
            launched.append(argv[3:])
            out = Path(argv[argv.index("--out") + 1])
            (out / "model.safetensors").write_bytes(b"")
            self.returncode = 0

        def poll(self):
            return self.returncode

    monkeypatch.setattr(reproduce_run.subprocess, "Popen", FakeProcess)
    monkeypatch.setattr(reproduce_run.time, "sleep", lambda s: None)
    (tmp_path / "tiny-s4-s0").mkdir()
    (tmp_path / "tiny-s4-s0" / "model.safetensors").write_bytes(b"")  # done already: skipped
    matrix = (Entry("tiny-s4"), Entry("tiny-full-matched", retrain=False), Entry("tiny-full", max_seeds=1))
    reproduce_run.train_matrix(tmp_path, matrix, seeds=2, jobs=2, console=Console(quiet=True))
    assert sorted(a[1] + " " + a[a.index("--out") + 1].split("/")[-1] for a in launched) == [
        "tiny-full tiny-full-s0",
        "tiny-s4 tiny-s4-s1",
    ]
    assert all("threads=1" in a for a in launched)


def test_a_checkpoint_directory_without_the_matrix_is_refused(tmp_path):
    import pytest

    from phasescope.errors import InputError

    with pytest.raises(InputError, match="no checkpoint of the matrix under"):
        run_reproduce(tmp_path / "out", seeds=1, samples=8, checkpoints=tmp_path / "nowhere")
    assert not (tmp_path / "out" / "RESULTS.md").exists()
