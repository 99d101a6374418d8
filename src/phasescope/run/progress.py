"""The sweep's progress display: a transient bar over the first pass (building and checking
every content) and the scoring bar with records per second."""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def checking_bar(enabled: bool, contents: int):
    """A transient bar over the first pass (every content built and checked before scoring)."""
    if not enabled:
        yield lambda: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("building and checking contents"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        transient=True,
    ) as bar:  # fmt: skip
        task = bar.add_task("contents", total=contents)
        yield lambda: bar.advance(task)


def rate_column():
    from rich.progress import ProgressColumn
    from rich.text import Text

    class RateColumn(ProgressColumn):
        """Records scored per second (rich's own speed column counts bytes)."""

        def render(self, task) -> Text:
            return Text("" if task.speed is None else f"{task.speed:.1f} rec/s")

    return RateColumn()


def eta_column():
    from rich.progress import ProgressColumn
    from rich.text import Text

    class EtaColumn(ProgressColumn):
        """Time left from the mean rate since the bar started (rich's own column waits for a
        rate over several updates: nothing for the first ~30 s of a sweep of slow batches)."""

        def render(self, task) -> Text:
            done = task.completed - task.fields.get("resumed_from", 0)
            if not task.elapsed or done <= 0 or task.total is None:
                return Text("estimating", style="progress.remaining")
            seconds = int(round((task.total - task.completed) * task.elapsed / done))
            return Text(f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}", style="progress.remaining")

    return EtaColumn()


def scoring_bar(enabled: bool, total: int, completed: int):
    if not enabled:
        return None
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    bar = Progress(
        TextColumn("sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("records"),
        TaskProgressColumn(),
        rate_column(),
        TimeElapsedColumn(),
        TextColumn("elapsed,"),
        eta_column(),
        TextColumn("left"),
    )
    bar.add_task("records", total=total, completed=completed, resumed_from=completed)  # not counted in the rate
    bar.start()
    return bar
