"""Option names -> the typed sweep: the one mapping for the command line and ``phasescope.sweep``
alike. The sweep's own sections (geometry, remedies, backend, how to run) are fields of the specs
in ``phasescope.specs``; the probe's options are fields of the probe's own ``Options``
(probes/options.py), so a probe's new option needs no line here."""

from __future__ import annotations

import difflib
from dataclasses import fields, replace

from phasescope.errors import InputError
from phasescope.probes import declared_options, probe_spec
from phasescope.specs import BackendOptions, GeometryOverrides, Remedies, RunOptions, SweepSpec

SECTIONS = (("geometry", GeometryOverrides), ("remedies", Remedies), ("backend", BackendOptions), ("run", RunOptions))


def option_sections() -> dict[str, str]:
    """option name -> the spec it belongs to ("probe" for every probe's own options and --probe)."""
    table = {"offsets": "sweep", "samples": "sweep", "seed": "sweep", "probe": "probe"}
    for section, cls in SECTIONS:
        table |= {f.name: section for f in fields(cls)}
    return table | {name: "probe" for name in declared_options()}


def sweep_settings(model: str, **options) -> tuple[SweepSpec, RunOptions]:
    """The typed sweep and how to run it from options named as `phasescope sweep`'s (``kv_gaps``,
    ``step``, ``batch_size``, ...; ``probe`` is the probe's name). ``backend`` (a
    ``BackendOptions``) may stand for the model options. An unknown name is refused with the
    closest known one; an option of another probe, with the flag that gave it."""
    table = option_sections()
    sections: dict[str, dict] = {name: {} for name in ("sweep", "probe", "geometry", "remedies", "backend", "run")}
    base = options.pop("backend", None) or BackendOptions()
    for name, value in options.items():
        if name not in table:
            close = difflib.get_close_matches(name, table, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise InputError(f"{name!r} is not a sweep option; {hint}the options are {', '.join(sorted(table))}")
        sections[table[name]][name] = value
    probe = probe_spec(sections["probe"].pop("probe", "kv-retrieval"), sections["probe"])
    spec = SweepSpec(
        model,
        probe,
        GeometryOverrides(**sections["geometry"]),
        remedies=Remedies(**sections["remedies"]),
        backend=replace(base, **sections["backend"]),
        **sections["sweep"],
    )
    return spec, RunOptions(**sections["run"])
