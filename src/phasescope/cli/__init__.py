"""The ``phasescope`` command line. Commands import their heavy dependencies lazily; each module
registers its commands on ``app`` when imported, in the order ``phasescope --help`` lists them."""

# the order commands are listed in `phasescope --help`
from phasescope.cli import info, train, sweep, results, study, ablate  # noqa: F401, I001  (registers the commands)
from phasescope.cli.app import app, console

__all__ = ["app", "console", "main"]


def main() -> None:
    app()
