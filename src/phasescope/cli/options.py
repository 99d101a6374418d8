"""Options several commands share (one definition each: `sweep` and `ablate` read them alike; the
model options are the backends' own, cli/sweep.backend_option)."""

from __future__ import annotations

import typer

STEP = (
    int,
    typer.Option(
        None, min=1, metavar="S", rich_help_panel="Geometry", help="Compression step (default: the model's config)."
    ),
)
