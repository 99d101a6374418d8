"""Option names -> the typed sweep: the one mapping for the command line and ``phasescope.sweep``
alike. The sweep's own sections (geometry, remedies, how to run) are fields of the specs in
``phasescope.specs``; the probe's options are fields of the probe's own ``Options``
(probes/options.py) and the model's of its backend's (backends/options.py), so a probe's or a
backend's new option needs no line here."""

from __future__ import annotations

import difflib
from dataclasses import fields

from phasescope.backends import backend_options, spec_kind
from phasescope.backends import declared_options as backend_declared
from phasescope.errors import InputError
from phasescope.options import drop, given_flag
from phasescope.probes import declared_options as probe_declared
from phasescope.probes import probe_spec
from phasescope.specs import GeometryOverrides, Remedies, RunOptions, SweepSpec

SECTIONS = (("geometry", GeometryOverrides), ("remedies", Remedies), ("run", RunOptions))


def option_sections() -> dict[str, str]:
    """option name -> the spec it belongs to ("probe" for every probe's own options and --probe,
    "backend" for every backend's)."""
    table = {"offsets": "sweep", "samples": "sweep", "seed": "sweep", "probe": "probe"}
    for section, cls in SECTIONS:
        table |= {f.name: section for f in fields(cls)}
    table |= {name: "backend" for name in backend_declared()}
    return table | {name: "probe" for name in probe_declared()}


def sweep_settings(
    model: str, kind: str | None = None, explicit: set[str] | None = None, **options
) -> tuple[SweepSpec, RunOptions]:
    """The typed sweep and how to run it from options named as `phasescope sweep`'s (``kv_gaps``,
    ``step``, ``batch_size``, ...; ``probe`` is the probe's name). ``kind``: the backend whose
    options apply (default: the one ``model``'s spec names); ``backend`` (that backend's
    ``Options``) may stand for the model options. An unknown name is refused with the closest
    known one; an option of another probe or backend, with the flag that gave it. ``explicit``:
    the options the user gave (the command line passes every option at its default too): one of
    another probe or backend among them is refused whatever its value (``--probe copy --depth
    0.5`` passed silently; ``--depth 0.3`` was refused)."""
    table = option_sections()
    sections: dict[str, dict] = {name: {} for name in ("sweep", "probe", "geometry", "remedies", "backend", "run")}
    base = options.pop("backend", None)
    for name, value in options.items():
        if name not in table:
            close = difflib.get_close_matches(name, table, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise InputError(f"{name!r} is not a sweep option; {hint}the options are {', '.join(sorted(table))}")
        sections[table[name]][name] = value
    probe_name, kind = sections["probe"].pop("probe", "kv-retrieval"), kind or spec_kind(model)
    _refuse_foreign({n: options[n] for n in explicit or () if n in options}, table, probe_name, kind)
    probe = probe_spec(probe_name, _parsed(sections["probe"]))
    backend = backend_options(kind, sections["backend"], base)
    spec = SweepSpec(
        model,
        probe,
        GeometryOverrides(**sections["geometry"]),
        remedies=Remedies(**sections["remedies"]),
        backend=backend,
        **sections["sweep"],
    )
    return spec, RunOptions(**sections["run"])


def _refuse_foreign(explicit: dict, table: dict[str, str], probe: str, kind: str) -> None:
    """An option the user gave (``explicit``: name -> value) that the sweep's probe or backend does
    not read, named by the flag that gave it (the messages ``probe_spec`` and ``backend_options``
    give for one off its default)."""
    from phasescope.backends import described
    from phasescope.backends import options_class as backend_class
    from phasescope.probes import options_class as probe_class
    from phasescope.probes import probe_module
    from phasescope.specs import ProbeSpec

    declared = probe_declared() | backend_declared()
    owners = (("probe", probe_class(probe_module(probe))), ("backend", backend_class(kind)))
    for section, cls in owners:
        own = {f.name for f in fields(cls)}
        foreign = sorted(n for n in explicit if table.get(n) == section and n != "probe" and n not in own)
        if not foreign:
            continue
        flags = ", ".join(given_flag(declared[n], explicit[n]) for n in foreign)
        whose = (
            f"used by the {ProbeSpec(probe).kind} probe" if section == "probe" else f"an option of {described(kind)}"
        )
        raise InputError(f"{flags}: not {whose}; {drop(flags)}")


def model_options(model: str, given: dict, explicit: set[str] | None = None):
    """The options of the backend ``model``'s spec names, from option name -> value, read as a
    sweep reads them (commands that load a model without sweeping it: preferences): an option of
    another backend is refused when given (``explicit``) or off its default."""
    spec, _ = sweep_settings(model, explicit=explicit, **given)
    return spec.backend


def _parsed(options: dict) -> dict:
    """A probe option given from Python as the command line's text (``kv_gaps="0,1"``) read as the
    command line reads it (its declared parser), not refused as "invalid"."""
    from phasescope.probes import declared_options

    declared = declared_options()
    out = dict(options)
    for name, value in options.items():
        parse = declared[name].metadata.get("parse") if name in declared else None
        if parse is not None and isinstance(value, str):
            out[name] = parse(value)
    return out
