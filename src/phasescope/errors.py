"""The one family of errors a user can cause (a bad option, file, model or run directory).

``InputError`` messages say what is wrong and how to fix it; the CLI prints them as
``error: ...`` with exit status 2. Any other exception is a bug in phasescope: the CLI says so
and shows the traceback with ``--debug``.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input: the message names the file / option / field, what was expected and the fix."""


class ProbeError(InputError):
    """A probe or a sweep that cannot be built as asked (names the cause and the fix)."""


class CheckpointError(InputError):
    """A checkpoint that cannot be used (missing, corrupt, or from a different config)."""
