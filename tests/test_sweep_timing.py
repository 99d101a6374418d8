"""What a sweep says about time: the dry run times one batch and extrapolates (within 2x of the
real sweep on a model whose cost is known), the progress bar shows elapsed, rate and time left."""

import time

import torch

import phasescope
from phasescope.backends import from_callable
from phasescope.run.progress import scoring_bar as _bar
from test_sweep import TASK, Planted

SECONDS_PER_CALL = 0.05


class Slow(Planted):
    """The planted model with a known cost: every forward pass takes SECONDS_PER_CALL."""

    calls = 0

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        Slow.calls += 1
        time.sleep(SECONDS_PER_CALL)
        return super().__call__(ids)


def slow_model():
    return from_callable(Slow(4, 3), vocab_size=TASK.vocab_size, step=4, align=0)


def test_the_dry_run_times_one_batch_and_its_estimate_is_within_2x_of_the_sweep(tmp_path):
    Slow.calls = 0
    plan = phasescope.sweep(
        slow_model(), task=TASK, samples=12, offsets=range(8), local=0, batch_size=4, dry_run=True
    ).plan
    assert Slow.calls == 2 and not list(tmp_path.iterdir())  # one batch scored twice, nothing written
    assert plan["timed_batch"] == 4  # one forward pass of --batch-size sequences
    start = time.perf_counter()
    result = phasescope.sweep(slow_model(), task=TASK, samples=12, offsets=range(8), local=0, batch_size=4)
    real = time.perf_counter() - start
    assert len(result.records) == 96 and 0.5 <= plan["estimated_seconds"] / real <= 2, (plan, real)


def test_the_progress_bar_shows_elapsed_rate_and_time_left():
    bar = _bar(True, total=100, completed=0)
    try:
        bar.advance(bar.task_ids[0], 10)
        time.sleep(0.05)
        bar.advance(bar.task_ids[0], 10)
        text = " ".join(str(column.render(bar.tasks[0])) for column in bar.columns)
    finally:
        bar.stop()
    assert "20/100" in text and "20%" in text and "rec/s" in text and "elapsed," in text and "left" in text


def test_time_left_is_shown_from_the_first_batch():
    """rich's own column waited for a rate over several updates (nothing for ~30 s of a sweep of
    slow batches); the bar's time left comes from the mean rate since it started, so one batch
    is enough: 10 of 100 records in ~0.2 s leaves about 2 s."""
    bar = _bar(True, total=100, completed=0)
    eta = next(c for c in bar.columns if type(c).__name__ == "EtaColumn")
    try:
        assert str(eta.render(bar.tasks[0])) == "estimating"
        time.sleep(0.2)
        bar.advance(bar.task_ids[0], 10)
        left = str(eta.render(bar.tasks[0]))
    finally:
        bar.stop()
    hours, minutes, seconds = (int(x) for x in left.split(":"))
    assert hours == minutes == 0 and 1 <= seconds <= 4, left


def test_a_resumed_sweep_does_not_count_the_records_it_had_as_its_rate():
    bar = _bar(True, total=100, completed=90)
    eta = next(c for c in bar.columns if type(c).__name__ == "EtaColumn")
    try:
        time.sleep(0.2)
        bar.advance(bar.task_ids[0], 5)  # 5 records in ~0.2 s, 5 left: ~0.2 s, not 90 records' rate
        left = str(eta.render(bar.tasks[0]))
    finally:
        bar.stop()
    assert left == "0:00:00", left


def test_the_dry_run_says_its_start_up_and_the_geometry_comes_before_scoring(tmp_path):
    """The estimate includes what the sweep pays before scoring (loading, building and checking
    every content: measured by the dry run itself), and a sweep says its geometry before it scores."""
    from typer.testing import CliRunner

    from phasescope.cli import app
    from phasescope.demo import ASSETS

    model, env = str(ASSETS / "tiny-s4"), {"COLUMNS": "200"}
    dry = CliRunner().invoke(app, ["sweep", "--model", model, "--out", str(tmp_path / "d"), "--dry-run"], env=env)
    assert dry.exit_code == 0, dry.output
    line = next(x for x in dry.output.splitlines() if x.startswith("estimated time here"))
    assert "to load the model and build and check every content (measured now), and" in line and "to score" in line
    args = ["sweep", "--model", model, "--out", str(tmp_path / "r"), "--samples", "2", "--no-progress"]
    real = CliRunner().invoke(app, args, env=env)
    assert real.exit_code == 0 and real.output.index("geometry: ") < real.output.index("scored 48 records")
