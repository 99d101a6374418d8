"""Declared options: a probe's or a backend's own `phasescope sweep` options as the fields of a
frozen ``Options`` dataclass, each made with ``option(default, help, ...)`` and checked in the
class's ``check()``. Everything else is derived from those fields: the command line's options
(cli/sweep.py), the reproducing command (``argv``), what spec.json records (``to_json``) and
the Python keywords of ``phasescope.sweep``. probes/options.py and backends/options.py hold the
options several probes or backends share.

A new option is one field in its owner's ``Options``; nothing else names it.
"""

from __future__ import annotations

from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path


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
    measured: bool = True,
    logits: bool = False,
):
    """An option: its default and ``--help`` text; ``metavar`` and ``panel`` as --help shows
    them; ``off_flag`` the flag that turns a default-on boolean off (``--mixed-phase``);
    ``parse`` reads the command line's text (``0,1`` -> (0, 1)); ``minimum``/``maximum`` bound a
    number on the command line; ``measured`` False for an option that changes how, not what, is
    measured (a device, a timeout): spec.json leaves it out, so a resume may change it; ``logits``
    True for a model option that changes the logits the weights give (a dtype, a compression
    scheme): it joins the weights fingerprint (``behaviour``), so it is measured too."""
    if logits and not measured:
        raise ValueError("an option that changes the logits is measured: drop measured=False")
    meta = {"help": help, "metavar": metavar, "panel": panel, "off_flag": off_flag, "parse": parse}
    return field(
        default=default, metadata=meta | {"min": minimum, "max": maximum, "measured": measured, "logits": logits}
    )


def behaviour(options) -> str:
    """What changes a model's logits besides its weights, as the suffix of its weights fingerprint
    (``+dtype:bfloat16+compress:mean:s=4``): every option declared ``logits=True`` off its default,
    in declaration order. A resume with other values is refused as another model's."""
    return "".join(
        f"+{f.name}:{getattr(options, f.name)}"
        for f in fields(options)
        if f.metadata.get("logits") and getattr(options, f.name) != f.default
    )


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def given_flag(declared: Field, value) -> str:
    """The flag that set a declared option to ``value`` (``--mixed-phase`` for same_phase=False)."""
    off = declared.metadata.get("off_flag")
    return off if value is False and off else flag(declared.name)


def as_text(value) -> str:
    """A value as the command line writes it (a tuple as 0,1)."""
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def declared_in(classes) -> dict[str, Field]:
    """Every option of ``classes`` by name (the first declaration of a name several share)."""
    out: dict[str, Field] = {}
    for cls in classes:
        for f in fields(cls):
            out.setdefault(f.name, f)
    return out


def unused_flags(own: type, given: dict, declared: dict[str, Field]) -> str:
    """The flags of ``given`` options that class ``own`` does not declare and that are off the
    default of their declaration elsewhere (the command line passes every option), or ''."""
    names = {f.name for f in fields(own)}
    unused = [n for n, value in given.items() if n not in names and value != declared[n].default]
    return ", ".join(given_flag(declared[n], given[n]) for n in unused)


def drop(flags: str) -> str:
    """The advice that ends a refusal of ``unused_flags``' flags."""
    return "drop them" if "," in flags else "drop it"


@dataclass(frozen=True)
class Options:
    """The base of every ``Options``: lists become tuples and paths text (so options from Python
    equal the command line's), then ``check`` refuses a bad value naming its flag."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, list | range):
                object.__setattr__(self, f.name, tuple(value))
            elif isinstance(value, Path):
                object.__setattr__(self, f.name, str(value))
        self.check()

    def check(self) -> None:
        """Refuse a bad value (an error naming the flag); each ``Options`` says what is bad."""

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

    def measured(self) -> Options:
        """These options with every unmeasured one (a device, a timeout) at its default: what a
        resume compares (``specs.SweepIdentity``)."""
        return replace(self, **{f.name: f.default for f in fields(self) if not f.metadata.get("measured", True)})

    def to_json(self) -> dict:
        """The measured options (what spec.json records and a resume must match)."""
        return {
            f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
            for f in fields(self)
            if f.metadata.get("measured", True)
        }
