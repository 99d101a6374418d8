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
        TimeRemainingColumn,
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
        TimeRemainingColumn(),
        TextColumn("left"),
    )
    bar.add_task("records", total=total, completed=completed)
    bar.start()
    return bar
