"""Task metrics per phase, in lm-evaluation-harness's language (records only, no torch).

Records of the ``lm-eval:`` probe carry ``task`` and ``task_metrics`` (``{"acc,none": 1.0,
"acc_norm,none": 0.0, ...}``: the task's own per-document values, keys as in lm-eval's results
table). For every task and metric this gives:

* ``offset_0``: the mean over documents at offset 0 -- lm-eval's own number (offset 0 is its
  rendering, unpadded);
* ``phases``: per phase of the answer position, the mean with a 95% interval clustered by
  document (each document's records in the phase are averaged first; a t interval over those
  document means; none with fewer than ``MIN_CONTENTS`` documents);
* ``gap_raw_pp``: largest minus smallest phase mean (raw: the drift over offsets is not removed;
  the drift-adjusted gap of ``correct`` is the run's main analysis);
* ``by_offset``: the mean at each offset.

Only metrics lm-eval aggregates by a mean are per-document numbers; others (f1, bleu, ...)
never reach the records and are listed by the probe's spec.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from phasescope.analysis.intervals import t_quantile
from phasescope.rundir.records import Record

MIN_CONTENTS = 10  # as candidate probabilities: fewer documents give no interval


def task_metrics(records: list[Record]) -> dict | None:
    """{task: {metric: summary}} from records with ``task_metrics``; None when no record has them."""
    values: dict = defaultdict(lambda: defaultdict(list))  # task -> metric -> [(content, offset, phase, value)]
    for r in records:
        for metric, value in (r.task_metrics or {}).items():
            values[r.task or "task"][metric].append((r.content_id, r.offset, r.phase, float(value)))
    if not values:
        return None
    step = records[0].step
    return {task: {m: summarize(rows, step) for m, rows in metrics.items()} for task, metrics in values.items()}


def summarize(rows: list[tuple], step: int) -> dict:
    by_offset: dict[int, list[float]] = defaultdict(list)
    for _, offset, _, value in rows:
        by_offset[offset].append(value)
    phases = [phase_row(rows, p) for p in range(step)]
    means = [p["value"] for p in phases if p["value"] is not None]
    return {
        "offset_0": _mean(by_offset.get(0, [])),
        "overall": _mean([v for *_, v in rows]),
        "phases": phases,
        "gap_raw_pp": 100 * (max(means) - min(means)) if len(means) >= 2 else None,
        "by_offset": {str(d): _mean(v) for d, v in sorted(by_offset.items())},
    }


def phase_row(rows: list[tuple], phase: int) -> dict:
    per_content: dict = defaultdict(list)
    for content, _, p, value in rows:
        if p == phase:
            per_content[content].append(value)
    means = np.array([np.mean(v) for v in per_content.values()])
    n_records = sum(len(v) for v in per_content.values())
    row = {"phase": phase, "n": n_records, "contents": len(means), "value": None, "ci": None}
    if len(means) == 0:
        return row
    row["value"] = float(means.mean())
    if len(means) >= MIN_CONTENTS:
        sem = means.std(ddof=1) / np.sqrt(len(means))
        half = float(t_quantile(0.975, len(means) - 1) * sem)
        low, high = row["value"] - half, row["value"] + half
        if means.min() >= 0 and means.max() <= 1:  # a rate: the interval stays in [0, 1]
            low, high = max(0.0, low), min(1.0, high)
        row["ci"] = [low, high]
    return row


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None
