"""A probe's own options: each probe module declares ``Options``, a frozen dataclass whose fields
are its `phasescope sweep` options (``option(default, help, ...)``), checked in its
``check()``. Everything else is derived from those fields: the command line's options
(cli/sweep.py), the reproducing command (``argv``), what spec.json records (``to_json``) and
the Python keywords of ``phasescope.sweep``. An option shared by several probes is declared once
here (``filler``, ``chat_template``) and used by each.

A new option is one field in the probe's ``Options``; nothing else names it.
"""

from __future__ import annotations

from dataclasses import Field, dataclass, field, fields
from pathlib import Path

from phasescope.errors import ProbeError


def option(
    default,
    help: str,
    *,
    metavar: str = "",
    panel: str = "Probe",
    off_flag: str | None = None,
    parse=None,
    minimum: float | None = None,
    maximum: float | None = None,
):
    """A probe option: its default and ``--help`` text; ``metavar`` and ``panel`` as --help shows
    them; ``off_flag`` the flag that turns a default-on boolean off (``--mixed-phase``);
    ``parse`` reads the command line's text (``0,1`` -> (0, 1)); ``minimum``/``maximum`` bound a
    number on the command line."""
    meta = {"help": help, "metavar": metavar, "panel": panel, "off_flag": off_flag, "parse": parse}
    return field(default=default, metadata=meta | {"min": minimum, "max": maximum})


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def given_flag(declared: Field, value) -> str:
    """The flag that set a declared option to ``value`` (``--mixed-phase`` for same_phase=False)."""
    off = declared.metadata.get("off_flag")
    return off if value is False and off else flag(declared.name)


def as_text(value) -> str:
    """A value as the command line writes it (a tuple as 0,1)."""
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


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
class ProbeOptions:
    """The base of every probe's ``Options``: lists become tuples and paths text (so a spec from
    Python equals the command line's), then ``check`` refuses a bad value naming its flag."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, list | range):
                object.__setattr__(self, f.name, tuple(value))
            elif isinstance(value, Path):
                object.__setattr__(self, f.name, str(value))
        self.check()

    def check(self) -> None:
        """Refuse a bad value (ProbeError naming the flag); each probe's Options says what is bad."""

    def argv(self) -> list[str]:
        """The options that differ from their defaults, as command-line arguments."""
        args = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value == f.default:
                continue
            if isinstance(value, bool):
                args.append(given_flag(f, value))
            elif value is not None:
                args += [flag(f.name), as_text(value)]
        return args

    def to_json(self) -> dict:
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)}


@dataclass(frozen=True)
class NoOptions(ProbeOptions):
    """A probe without options of its own."""
