"""The run's spec as a short table (report.html): what was swept, in a reader's words; spec.json
itself stays on the page, folded, for whoever needs every field."""

from __future__ import annotations

from phasescope.rundir.saved import SavedSweep
from phasescope.specs import offsets_text


def spec_rows(spec: SavedSweep) -> list[tuple[str, str]]:
    """(what, value) rows from spec.json (any schema: a field it lacks is left out)."""
    rows = [("model", spec.model_spec or spec.model or "not recorded")]
    name = spec.probe_options.get("name") or spec.probe_name
    if name:
        options = spec.probe_options.items()
        shown = ", ".join(f"{k} {_text(v)}" for k, v in options if k != "name" and v not in (None, False))
        rows.append(("probe", f"{name}" + (f" ({shown})" if shown else "")))
    if spec.offsets:
        rows.append(("offsets", f"{offsets_text(spec.offsets)} ({len(spec.offsets)} offsets)"))
    if spec.samples is not None:
        rows.append(("contents", f"{spec.samples} (seed {spec.seed})"))
    if spec.step is not None:
        raw = "unknown" if spec.local is None else spec.local
        geometry = f"step {spec.step}, window {spec.window}, align {spec.align}, raw window L {raw}"
        rows.append(("geometry", geometry + (f" ({spec.geometry_source})" if spec.geometry_source else "")))
    backend = spec.model_options.items()
    loading = ", ".join(f"{k} {_text(v)}" for k, v in backend if v not in (None, "none", "float32"))
    if loading:
        rows.append(("model options", loading))
    if spec.remedies.get("phase_ensemble"):
        rows.append(("remedy", "phase ensemble" + _pad(spec.remedies.get("ensemble_pad_id"))))
    return rows


def _text(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def _pad(pad_id) -> str:
    return "" if pad_id is None else f" (pad token {pad_id})"
