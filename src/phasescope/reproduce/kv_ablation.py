"""KV-head ablation of a reproduction model (issue #23, rule C of docs/reproduction.md).

``phasescope ablate --component kv-entries`` with the settings fixed before the runs: 200 contents,
offsets 0..7, seed 0, top-1 KV head per phase in the held-out check. The result is kept at
``OUT/runs/RECIPE-sSEED-kventries/ablation.json`` and reused when present (a reproduction that
is run again does not ablate again), and summarised for the verdict.
"""

from __future__ import annotations

import json
from pathlib import Path

from phasescope.reproduce.matrix import Entry
from phasescope.rundir import ABLATION
from phasescope.rundir.files import atomic_write_text

SETTINGS = {"samples": 200, "offsets": list(range(8)), "seed": 0, "top_k": 1, "component": "kv-entries"}
ALPHA = 0.05


def kv_ablation(entry: Entry, seed: int, model_dir: Path, out: Path) -> dict:
    path = out / "runs" / f"{entry.recipe}-s{seed}-kventries" / ABLATION
    if path.exists():
        result = json.loads(path.read_text())
    else:
        from phasescope.inspect.ablation import ablation_matrix

        settings = dict(SETTINGS)
        result = ablation_matrix(str(model_dir), "kv-retrieval", mode="zero", **settings)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(result, indent=1, allow_nan=False))
    return summarise(result, str(path))


def summarise(result: dict, path: str = "") -> dict:
    """Per seed: specialized (some phase's held-out contrast > 0 with Holm p < alpha), the held-out
    contrasts, and per KV head its index, preferred phase, Holm p and mean drop over phases."""
    causal = [
        {
            "phase": c["phase"],
            "kv_heads": c["heads"],
            "contrast_pp": None if c["contrast"] is None else 100 * c["contrast"],
            "ci_pp": None if c["ci_low"] is None else [100 * c["ci_low"], 100 * c["ci_high"]],
            "p_holm": c["p_holm"],
        }
        for c in result["causal"]
    ]
    heads = []
    for r in result["heads"]:
        acc = r["accuracy"]
        changes = [c["mean"] for c in acc["change_by_phase"] if c["mean"] is not None]
        heads.append(
            {
                "layer": r["layer"],
                "kv_head": r["head"],
                "index_pp": None if acc["index"] is None else 100 * acc["index"],
                "preferred_phase": acc["preferred_phase"],
                "p_holm": acc["p_holm"],
                "specialized": acc["specialized"],
                "mean_drop_pp": -100 * sum(changes) / len(changes) if changes else None,
            }
        )
    specialized = any(
        c["contrast_pp"] is not None and c["contrast_pp"] > 0 and c["p_holm"] is not None and c["p_holm"] < ALPHA
        for c in causal
    )
    return {"specialized": specialized, "causal": causal, "heads": heads, "path": path}
