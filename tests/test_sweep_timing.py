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
