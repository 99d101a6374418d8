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
    from rich.table import Column
    from rich.text import Text

    class RateColumn(ProgressColumn):
        """Records scored per second (rich's own speed column counts bytes)."""

        def render(self, task) -> Text:
            return Text("" if task.speed is None else f"{rate_text(task.speed)} rec/s")

    return RateColumn(table_column=Column(no_wrap=True))


def rate_text(speed: float) -> str:
    """A rate in at most five characters (the line must fit 80 columns): 15.0, 123, 12.3k."""
    if speed >= 10_000:
        return f"{speed / 1000:.0f}k" if speed >= 100_000 else f"{speed / 1000:.1f}k"
    return f"{speed:.0f}" if speed >= 100 else f"{speed:.1f}"


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


def scoring_columns() -> list:
    """The scoring bar's columns: 'sweep [bar] 320/320 records 100% 15.0 rec/s 0:00:22 elapsed,
    0:00:00 left'. The bar takes what the terminal leaves (at most 40 cells), so the line fits 80
    columns at any rate and count instead of wrapping."""
    from rich.progress import BarColumn, MofNCompleteColumn, TaskProgressColumn, TextColumn, TimeElapsedColumn
    from rich.table import Column

    def whole() -> Column:  # a column that is never cut: the bar gives way instead
        return Column(no_wrap=True, overflow="ignore")

    return [
        TextColumn("sweep", table_column=whole()),
        BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=4)),
        MofNCompleteColumn(table_column=whole()),
        TextColumn("records", table_column=whole()),
        TaskProgressColumn(table_column=whole()),
        rate_column(),
        TimeElapsedColumn(table_column=whole()),
        TextColumn("elapsed,", table_column=whole()),
        eta_column(),
        TextColumn("left", table_column=whole()),
    ]


def scoring_bar(enabled: bool, total: int, completed: int):
    if not enabled:
        return None
    from rich.progress import Progress

    bar = Progress(*scoring_columns())
    bar.add_task("records", total=total, completed=completed, resumed_from=completed)  # not counted in the rate
    bar.start()
    return bar
