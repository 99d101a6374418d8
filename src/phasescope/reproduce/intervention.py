"""The pre-registered intervention of amendment 5d (docs/reproduction.md, issue #34): do the KV
heads the held-out contrast names explain the phase gap?

Per seed of a model with shared window boundaries (``tiny-s4-kv4``):

* the *named* KV heads are the top KV head of each phase in rule C's held-out check
  (``kv_ablation.py``: chosen on one half of the contents), all hidden together;
* the same number of KV heads, drawn at random from every compressed (layer, KV head), 20 times
  (seeded by the model's seed; a set may repeat, as random draws do);
* for each set, a paired sweep (the same items unablated and with those entries hidden) and the
  drift-adjusted phase gap (``analyze``'s gap) on the *other* half of the content ids, the half the
  heads were not chosen on; ``lowered_pp`` = unablated gap − ablated gap on that half.

The sweep is rule C's (200 contents, seed 0) over the reproduction's offsets 0..23, not rule C's
0..7: the amendment did not fix the offsets, and over two windows the analysis withholds the
drift-adjusted gap (a drift cannot be told from a pattern of fewer than three cycles). Fixed when
the intervention was first run, before any of its results was seen (docs/reproduction.md).

The seed's result: how many random sets the named heads lower the gap more than (ties do not
count). Kept at ``OUT/runs/RECIPE-sSEED-intervention/intervention.json`` and reused when present.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from phasescope.reproduce.kv_ablation import SETTINGS
from phasescope.reproduce.matrix import Entry
from phasescope.rundir.files import atomic_write_text

RANDOM_SETS = 20
NEEDED_BEATEN = 19  # the named heads must lower the gap more than at least this many random sets
RESAMPLES = 1000  # the gap's bootstrap, as the reproduction's sweeps
OFFSETS = list(range(24))  # three windows of 4 and more: the drift-adjusted gap exists


def named_kv_heads(kv: dict) -> list[tuple[int, int]]:
    """The union of each phase's top KV head in rule C's held-out check (a summarised ablation)."""
    return sorted({(int(layer), int(head)) for c in kv["causal"] for layer, head in c["kv_heads"]})


def random_sets(units: list[tuple[int, int]], size: int, seed: int, n: int = RANDOM_SETS) -> list[list]:
    """``n`` sets of ``size`` distinct units, each drawn uniformly at random (seeded by ``seed``)."""
    rng = np.random.default_rng([seed, 34])
    return [sorted(units[i] for i in rng.choice(len(units), size=size, replace=False)) for _ in range(n)]


def tested_gap(records, tested: set) -> float | None:
    """The drift-adjusted phase gap (pp) of the records of the tested contents."""
    from phasescope.analysis.stats import analyze_records

    rows = [r.to_json() for r in records if r.content_id in tested]
    return analyze_records(rows, n_resamples=RESAMPLES)["gap_pp"]


def run_intervention(
    model_dir: Path,
    seed: int,
    kv: dict,
    progress: bool = False,
    samples: int = SETTINGS["samples"],
    offsets: list[int] = OFFSETS,
    n_random: int = RANDOM_SETS,
) -> dict:
    """The intervention on one model; ``kv``: its summarised rule-C ablation (``kv_ablation``).
    ``samples``, ``offsets`` and ``n_random`` are the amendment's unless a test makes them small."""
    from phasescope.analysis.heads import split_contents
    from phasescope.backends import resolve_model
    from phasescope.inspect.ablation import PairedSweep, _progress

    loaded = resolve_model(str(model_dir))
    kwargs = {"offsets": list(offsets), "samples": samples, "seed": SETTINGS["seed"]}
    paired = PairedSweep(loaded, "kv-retrieval", kwargs, "zero", samples, component="kv-entries")
    base = paired.baseline()
    _, tested = split_contents(np.array([r.content_id for r in base]), SETTINGS["seed"])
    tested = set(tested.tolist())
    base_gap = tested_gap(base, tested)
    named = named_kv_heads(kv)
    units = sorted({(h["layer"], h["kv_head"]) for h in kv["heads"]})
    drawn = random_sets(units, len(named), seed, n_random)
    gaps: dict[tuple, float | None] = {}
    for heads in _progress([named, *drawn], progress, "hiding KV-head sets"):
        key = tuple(map(tuple, heads))
        if key not in gaps:
            gaps[key] = tested_gap(paired.run([tuple(h) for h in heads]), tested)

    def lowered(heads) -> float | None:
        gap = gaps[tuple(map(tuple, heads))]
        return None if gap is None or base_gap is None else base_gap - gap

    return {
        "settings": SETTINGS
        | {"samples": samples, "offsets": list(offsets), "random_sets": n_random}
        | {"tested_contents": len(tested)},
        "gap_unablated_pp": base_gap,
        "named": [list(h) for h in named],
        "named_lowered_pp": lowered(named),
        "random": [{"kv_heads": [list(h) for h in s], "lowered_pp": lowered(s)} for s in drawn],
    }


def intervention(entry: Entry, seed: int, model_dir: Path, out: Path, kv: dict) -> dict:
    path = out / "runs" / f"{entry.recipe}-s{seed}-intervention" / "intervention.json"
    if path.exists():
        return json.loads(path.read_text())
    result = run_intervention(model_dir, seed, kv)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(result, indent=1, allow_nan=False))
    return result


def beaten(result: dict) -> int | None:
    """How many random sets the named heads lower the gap more than (None: a gap withheld)."""
    named = result["named_lowered_pp"]
    lows = [r["lowered_pp"] for r in result["random"]]
    if named is None or None in lows:
        return None
    return sum(named > low for low in lows)
