"""Options several commands share (one definition each: `sweep` and `ablate` read them alike)."""

from __future__ import annotations

import typer

DTYPE = (
    str,
    typer.Option(
        "float32", metavar="DTYPE", rich_help_panel="Model", help="Weights dtype: float32, bfloat16 or float16."
    ),
)
DEVICE = (
    str,
    typer.Option(
        "cpu", metavar="DEVICE", rich_help_panel="Model", help="Torch device for the model: cpu, cuda, cuda:1, mps."
    ),
)
TRUST_REMOTE_CODE = (
    bool,
    typer.Option(
        False,
        "--trust-remote-code",
        metavar="",
        rich_help_panel="Model",
        help="hf: run the model directory's own Python code (only if you trust its author).",
    ),
)
STEP = (
    int,
    typer.Option(
        None, min=1, metavar="S", rich_help_panel="Geometry", help="Compression step (default: the model's config)."
    ),
)
