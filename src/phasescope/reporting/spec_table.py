"""The run's spec as a short table (report.html): what was swept, in a reader's words; spec.json
itself stays on the page, folded, for whoever needs every field."""

from __future__ import annotations

from phasescope.specs import offsets_text


def spec_rows(spec: dict) -> list[tuple[str, str]]:
    """(what, value) rows from spec.json (any schema: a field it lacks is left out)."""
    sweep = spec.get("sweep") if isinstance(spec.get("sweep"), dict) else {}
    probe = sweep.get("probe") if isinstance(sweep.get("probe"), dict) else {}
    rows = [("model", str(sweep.get("model") or spec.get("model") or "not recorded"))]
    name = probe.get("name") or (spec.get("probe") or {}).get("probe")
    if name:
        options = ", ".join(f"{k} {_text(v)}" for k, v in probe.items() if k != "name" and v not in (None, False))
        rows.append(("probe", f"{name}" + (f" ({options})" if options else "")))
    if isinstance(spec.get("offsets"), list) and spec["offsets"]:
        rows.append(("offsets", f"{offsets_text(spec['offsets'])} ({len(spec['offsets'])} offsets)"))
    if spec.get("samples") is not None:
        rows.append(("contents", f"{spec['samples']} (seed {spec.get('seed', 0)})"))
    if spec.get("step") is not None:
        raw = "unknown" if spec.get("local") is None else spec["local"]
        geometry = f"step {spec['step']}, window {spec.get('window')}, align {spec.get('align')}, raw window L {raw}"
        rows.append(("geometry", geometry + (f" ({spec['geometry_source']})" if spec.get("geometry_source") else "")))
    backend = sweep.get("backend") if isinstance(sweep.get("backend"), dict) else {}
    loading = ", ".join(f"{k} {_text(v)}" for k, v in backend.items() if v not in (None, "none", "float32"))
    if loading:
        rows.append(("model options", loading))
    remedies = sweep.get("remedies") if isinstance(sweep.get("remedies"), dict) else {}
    if remedies.get("phase_ensemble"):
        rows.append(("remedy", "phase ensemble" + _pad(remedies.get("ensemble_pad_id"))))
    return rows


def _text(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def _pad(pad_id) -> str:
    return "" if pad_id is None else f" (pad token {pad_id})"
