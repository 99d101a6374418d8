"""Amendment 6 (docs/reproduction.md, committed before its sweeps): step 8 understood, alignment
or distance. ``tiny-s8`` is swept a second time over offsets 0..47 with ``--design pad-prefix``
(variant ``pad-prefix-48``: the whole prompt moves, so only the alignment changes), beside 5f's
shift-needle sweep (variant ``offsets-48``: the needle also moves towards the question).

* **6a** step 8 at constant distance: 5f's rule on the pad-prefix sweeps;
* **6b** per counted seed whose shift-needle sweep reads a multiple of the step: *distance* when
  pad-prefix reads the step itself, *alignment* when it reads the same multiple, else *neither*;
* **6c** per counted seed whose shift-needle sweep reads a proper divisor of the step: *the model*
  when pad-prefix reads the same divisor, *the design* when it reads the step, else *neither*.
"""

from __future__ import annotations

from phasescope.reproduce.amendment5 import on_sweep_accuracy
from phasescope.reproduce.extended import period_verdict
from phasescope.reproduce.verdicts import ALPHA

RECIPE = "tiny-s8"
SHIFT, PAD = "offsets-48", "pad-prefix-48"


def _detected(row: dict) -> int | None:
    """The detected period when the test found one (p < alpha), else None."""
    p = row.get("period_p")
    return row.get("period") if p is not None and p < ALPHA else None


def source_of_multiple(shift: dict, pad: dict) -> str:
    """6b: where a multiple of the step read with the needle moving comes from."""
    step, found = pad["step"], _detected(pad)
    if found == step and pad.get("period_kind") == "step":
        return "distance"
    if found == shift.get("period") and pad.get("period_kind") == "multiple":
        return "alignment"
    return "neither"


def source_of_divisor(shift: dict, pad: dict) -> str:
    """6c: where a proper divisor of the step read with the needle moving comes from."""
    found = _detected(pad)
    if found == shift.get("period"):
        return "the model"
    return "the design" if found == pad["step"] else "neither"


def _reading(shift: dict, pad: dict) -> dict:
    period, step = _detected(shift), shift["step"]
    if period is None or period == step:
        question, answer = None, None
    elif shift.get("period_kind") == "multiple":
        question, answer = "6b", source_of_multiple(shift, pad)
    elif step % period == 0:
        question, answer = "6c", source_of_divisor(shift, pad)
    else:
        question, answer = None, None
    return {
        "seed": shift["seed"],
        "shift_needle": {"period": shift.get("period"), "kind": shift.get("period_kind"), "p": shift.get("period_p")},
        "pad_prefix": {"period": pad.get("period"), "kind": pad.get("period_kind"), "p": pad.get("period_p")},
        "gap_shift_pp": shift.get("gap_pp"),
        "gap_pad_pp": pad.get("gap_pp"),
        "question": question,
        "reading": answer,
    }


def judge_amendment6(rows: list[dict], recipe: str = RECIPE) -> dict:
    swept = [r for r in on_sweep_accuracy(rows) if r["recipe"] == recipe]
    pad = {r["seed"]: r for r in swept if r.get("variant") == PAD}
    shift = {r["seed"]: r for r in swept if r.get("variant") == SHIFT}
    seeds = sorted(s for s in set(pad) & set(shift) if pad[s]["learned"] and shift[s]["learned"])
    return {
        "step8_pad_prefix": period_verdict(
            [r | {"variant": "plain"} for r in pad.values()],
            (recipe,),
            "6a: at constant distance (pad-prefix, 48 offsets) a step-8 compressor has period 8",
        ),
        "per_seed": [_reading(shift[s], pad[s]) for s in seeds],
    }
