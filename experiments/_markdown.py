"""Replace a marked block of a docs page with a generated table (the scripts' shared writer)."""

from __future__ import annotations

from pathlib import Path


def replace_block(path: Path, name: str, text: str) -> None:
    """Put ``text`` between ``<!-- name:start -->`` and ``<!-- name:end -->`` in ``path``."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    page = path.read_text()
    if start not in page or end not in page:
        raise SystemExit(f"{path} has no {start} ... {end} block to fill")
    head, rest = page.split(start, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{start}\n{text.rstrip()}\n{end}{tail}")


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def rate_cells(rates: dict, always: tuple[str, ...], planted_only: tuple[str, ...], planted: bool) -> list[str]:
    """A calibration row's rates as percentages: ``always`` shown for every row, ``planted_only``
    as "-" for a row with nothing planted."""
    cells = [f"{100 * rates[k]:.1f}%" for k in always]
    return cells + [f"{100 * rates[k]:.1f}%" if planted else "-" for k in planted_only]
