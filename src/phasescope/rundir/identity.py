"""Whether a run directory holds this sweep (issue #45). Its spec.json, of any schema, is upgraded
to today's layout (``upgrade_spec``: an option added since reads as its default, a value renamed
since as its new name), read back as the typed ``specs.SweepIdentity`` and compared with this
sweep's: the typed identity is the only thing that decides. spec.json's top-level ``probe``
(``Probe.spec``) describes the probe and is not compared: ``RunDir.open_for_sweep`` checks that
each kept record was scored on the prompt this sweep builds, by its prompt digest."""

from __future__ import annotations

import copy

from phasescope.rundir.files import differences, differing_keys
from phasescope.specs import IDENTITY_KEYS, SweepIdentity, SweepSpec

# sweep.probe and sweep.backend as spec.json held them before each probe and backend owned its
# options (issue #31): every probe's option, at these defaults when the probe did not read it; the
# three measured model options, whichever backend loaded the model
LEGACY_PROBE_DEFAULTS = {
    "design": "shift-needle",
    "depth": 0.5,
    "kv_gaps": [0],
    "context_tokens": None,
    "pair_format": "auto",
    "filler": None,
    "chat_template": False,
    "probe_file": None,
    "include_path": None,
    "same_phase": True,
}
LEGACY_BACKEND_KEYS = ("dtype", "compress", "tokenizer")
# values renamed since (the same behaviour under its new name): the text probe's "words" pair format
# is "pieces" (single-token vocabulary pieces, which on a multilingual vocabulary are often not words)
RENAMED_VALUES = {"pair_format": {"words": "pieces"}, "pair_format_used": {"words": "pieces"}}


def upgrade_spec(saved: dict, probe: dict | None = None, backend: dict | None = None) -> dict:
    """A spec.json written before some option existed, read as this version would have written
    it: a missing option of the sweep (``sweep``, its ``probe``, ``geometry``, ``remedies``,
    ``backend`` sections) reads as its default -- what the run did, since the option did not
    exist -- except where the default changed what is measured: ``same_phase`` (the text probe
    did not move its contents to one phase; the id-level probe has one phase per offset either
    way). ``probe`` / ``backend``: the sweep's probe's and backend's own options at their
    defaults (JSON). Another probe's option that the old layout recorded at its default is
    dropped, and so is a model option the backend does not have (it did not act: a phasescope
    model refused --compress, a served one ignored --dtype). So adding an option never stops an
    old run from resuming. A value renamed since (``RENAMED_VALUES``) reads as its name now."""
    saved = copy.deepcopy(saved)
    top = saved.get("probe") if isinstance(saved.get("probe"), dict) else {}
    sweep_probe = saved.get("sweep", {}).get("probe") if isinstance(saved.get("sweep"), dict) else None
    for section in (top, sweep_probe if isinstance(sweep_probe, dict) else {}):
        for key, renamed in RENAMED_VALUES.items():
            if isinstance(section.get(key), str) and section[key] in renamed:
                section[key] = renamed[section[key]]
    text_probe = str(top.get("probe", "")).endswith("(text)")
    if text_probe and "same_phase" not in top:
        top["same_phase"] = False  # before --same-phase the text probe did not align contents
    sweep = saved.get("sweep")
    if not isinstance(sweep, dict):
        return saved
    defaults = SweepSpec(str(sweep.get("model", ""))).to_json()
    if probe is not None:
        defaults["probe"] |= probe
        if "same_phase" in probe:
            defaults["probe"]["same_phase"] = not text_probe
        if isinstance(sweep.get("probe"), dict):
            sweep["probe"] = {
                k: v
                for k, v in sweep["probe"].items()
                if k == "name" or k in probe or k not in LEGACY_PROBE_DEFAULTS or v != LEGACY_PROBE_DEFAULTS[k]
            }
    if backend is not None:
        defaults["backend"] = dict(backend)
        if isinstance(sweep.get("backend"), dict):
            sweep["backend"] = {
                k: v for k, v in sweep["backend"].items() if k in backend or k not in LEGACY_BACKEND_KEYS
            }
    for key, value in defaults.items():
        if isinstance(value, dict) and isinstance(sweep.get(key), dict):
            sweep[key] = value | sweep[key]
        elif key not in sweep:
            sweep[key] = value
    return saved


def saved_identity(saved: dict, now: dict, probe_defaults: dict) -> dict:
    """The identity an upgraded spec.json records, in ``SweepIdentity.to_json``'s layout (``now``:
    this sweep's). Schema 1 recorded no typed sweep: its probe's options are read from its
    description (one it lacks: its default, ``probe_defaults``) and its offsets and seed from the
    top level; what it did not record at all (the geometry and remedies asked for, the model
    options, the samples asked for) is taken as now's, so it is not compared."""
    out = {k: saved.get(k) for k in IDENTITY_KEYS}
    if "sweep" in saved:  # schema 2 (a section that is not an object stays as it is: it differs)
        sweep = saved["sweep"]
        return out | {"sweep": {k: v for k, v in sweep.items() if k != "model"} if isinstance(sweep, dict) else sweep}
    described = saved.get("probe") if isinstance(saved.get("probe"), dict) else {}
    probe = now["sweep"]["probe"]
    kind = str(described.get("probe", "")).removesuffix(" (text)")
    name = probe["name"] if kind == probe["name"].split(":", 1)[0] else kind
    options = {k: described.get(k, default) for k, default in probe_defaults.items()}
    recorded = {"probe": {"name": name} | options, "offsets": saved.get("offsets"), "seed": saved.get("seed")}
    return out | {"sweep": now["sweep"] | recorded}


def differences_from(saved: dict, identity: SweepIdentity) -> str:
    """'' when spec.json (``saved``, any schema) holds ``identity``'s sweep; else what differs,
    "sweep.probe.kv_gaps: [0] in the run, [0, 1] now; ..." (the typed identities decide; their
    JSON names the difference)."""
    probe_options, backend_options = type(identity.sweep.probe.options), type(identity.sweep.backend)
    now, probe_defaults = identity.to_json(), probe_options().to_json()
    before = saved_identity(upgrade_spec(saved, probe_defaults, backend_options().to_json()), now, probe_defaults)
    try:
        if SweepIdentity.from_json(before, probe_options, backend_options) == identity:
            return ""
        refused = None
    except (ValueError, TypeError, KeyError, AttributeError) as error:  # an option this version lacks or refuses
        refused = error
    keys = differing_keys(before, now)
    return differences(before, now, keys) if keys else f"{refused or 'its typed sweep differs'}"
