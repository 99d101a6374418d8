"""Per-phase mean probability of each candidate answer, with intervals clustered by content.

The study reported the code probe as probabilities per phase (wrong 71.3% vs right 26.4% at
some phases, right 91.5% at another); accuracy alone hides how close the two answers are.
For every candidate named in every record, p = exp(log p) of each record.

Contents are the independent units (the records of one content at several offsets share its
text), so the records of a content within a phase are first averaged into one value; a
phase's mean is the mean of those content means, and its 95% interval a t interval over
them. Why a t interval: each content mean is bounded in [0, 1] and already averages several
offsets, so their mean is close to normal from about ten contents; a percentile bootstrap of
the same means is too narrow at 10-20 contents.
Limits clipped to [0, 1]. With fewer than ``MIN_CONTENTS`` contents no interval is given.
Descriptive, like raw accuracy: the drift over offsets is not removed.

Shape legend: N records, C contents.
"""

from __future__ import annotations

import numpy as np

from phasescope.analysis.intervals import t_quantile
from phasescope.analysis.offset_effects import MIN_CONTENTS
from phasescope.analysis.records import RecordArrays

METHOD = (
    "mean over contents of each content's mean probability within the phase; 95% t interval over contents "
    "(contents are the independent units); raw, the drift over offsets is not removed"
)


def content_means(values: np.ndarray, content: np.ndarray, n_contents: int) -> np.ndarray:
    """Mean of ``values`` [N] per content, for the contents with at least one value (nan skipped)."""
    ok = ~np.isnan(values)
    sums = np.bincount(content[ok], weights=values[ok], minlength=n_contents)
    counts = np.bincount(content[ok], minlength=n_contents)
    return sums[counts > 0] / counts[counts > 0]


def mean_interval(means: np.ndarray, level: float = 0.95) -> tuple[float | None, list[float] | None]:
    """The mean of per-content means and its t interval (None below MIN_CONTENTS contents)."""
    if not len(means):
        return None, None
    centre = float(means.mean())
    if len(means) < MIN_CONTENTS:
        return centre, None
    half = t_quantile(0.5 + level / 2, len(means) - 1) * means.std(ddof=1) / np.sqrt(len(means))
    return centre, [max(0.0, centre - half), min(1.0, centre + half)]


def candidate_probabilities(r: RecordArrays, level: float = 0.95) -> dict | None:
    """metrics.json's ``candidate_probabilities``: one row per phase, one mean and interval per
    candidate; None when no candidate is named in every record."""
    names = list(r.candidate_logprobs)
    if not names:
        return None
    rows = []
    for p in range(r.step):
        mask = r.phase == p
        row = {"phase": p, "n_contents": len(np.unique(r.content[mask])), "mean": {}, "ci": {}}
        if r.padding_units is not None:  # the code probe's '=' count beside the token phase, as the study gave it
            row["pad_units"] = sorted({int(u) for u in r.padding_units[mask] if np.isfinite(u)})
        for name in names:
            means = content_means(np.exp(r.candidate_logprobs[name][mask]), r.content[mask], r.n_contents)
            row["mean"][name], row["ci"][name] = mean_interval(means, level)
        rows.append(row)
    notes = []
    if r.n_contents < MIN_CONTENTS:
        notes.append(f"only {r.n_contents} content samples: intervals need at least {MIN_CONTENTS} (raise --samples)")
    if r.candidates_left_out:
        notes.append(
            f"candidates not named in every record are left out ({', '.join(r.candidates_left_out[:6])}"
            f"{', ...' if len(r.candidates_left_out) > 6 else ''})"
        )
    return {"candidates": names, "method": METHOD, "note": "; ".join(notes) or None, "phases": rows}


def with_answers(table: dict | None, contents) -> dict | None:
    """``table`` with each candidate's answer text (``answers``: the code probe's '8' and '32')
    and the pad unit, where every content of the probe (``SavedSweep.contents``, spec.json's
    ``probe.contents`` read once) gives the same; a candidate whose text differs between
    contents keeps its name only."""
    if not table or not contents:
        return table
    answers = {}
    for name in table["candidates"]:
        texts = {c.candidates.get(name) for c in contents}
        if len(texts) == 1 and isinstance(text := next(iter(texts)), str):
            answers[name] = text
    units = {c.pad_unit for c in contents}
    unit = next(iter(units)) if len(units) == 1 else None
    return table | {"answers": answers or None, "pad_unit": unit}
