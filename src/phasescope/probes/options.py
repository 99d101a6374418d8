"""A probe's own options: each probe module declares ``Options``, a ``ProbeOptions`` whose fields
are its `phasescope sweep` options (``option(default, help, ...)``, phasescope/options.py),
checked in its ``check()``. An option shared by several probes is declared once here
(``filler``, ``chat_template``) and used by each.
"""

from __future__ import annotations

from dataclasses import dataclass

from phasescope.errors import ProbeError
from phasescope.options import Options, as_text, flag, given_flag, option

__all__ = ["NoOptions", "ProbeOptions", "as_text", "chat_template_option", "filler_option", "flag", "given_flag"]
__all__ += ["option", "parse_gaps"]


def parse_gaps(text: str) -> tuple[int, ...]:
    """'0,1' -> (0, 1)."""
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ProbeError(f"--kv-gaps {text!r}: use integers separated by commas, e.g. 0,1") from None


def filler_option():
    return option(
        None,
        "prompts:, lm-eval: and text kv-retrieval: the padding unit, its token count measured in place. Default: the "
        "first that fills cleanly of newline, space, '.', ... (prompts) or ' .', ' -', ... (haystack).",
        metavar="TEXT",
    )


def chat_template_option():
    return option(
        False,
        "Wrap text prompts in the tokenizer's chat template (its tokens count in every position).",
        panel="Model",
    )


@dataclass(frozen=True)
class ProbeOptions(Options):
    """The base of every probe's ``Options`` (``check`` raises ``ProbeError`` naming the flag)."""


@dataclass(frozen=True)
class NoOptions(ProbeOptions):
    """A probe without options of its own."""
