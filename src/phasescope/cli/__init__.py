"""The ``phasescope`` command line. Commands import their heavy dependencies lazily; each module
registers its commands on ``app`` when imported (``phasescope --help`` lists them by
``cli.app.WORKFLOW``)."""

from phasescope.cli import info, train, sweep, results, check, study, ablate  # noqa: F401, I001  (registers the commands)
from phasescope.cli.app import app, console

__all__ = ["app", "console", "main"]


def main() -> None:
    app()
