"""``python -m phasescope`` = the ``phasescope`` command."""

from phasescope.cli import app

app()
