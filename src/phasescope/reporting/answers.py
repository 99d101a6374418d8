"""report.html's "What the model answered": a few wrong answers at the run's worst phase (or, in
a run without an effect, its lowest phase), the model's own answer beside the right one, from
the records' ``answer_ids``/``answer_text`` and, when the sweep ran with --log-samples, the
candidates' text."""

from __future__ import annotations

import html

from phasescope.reporting.text import detected_worst
from phasescope.rundir import RunDir
from phasescope.rundir.metrics import Metrics
from phasescope.rundir.records import Record, read_records

SHOWN = 6  # wrong answers listed


def answers_section(run_dir, metrics: Metrics) -> str:
    """The section's HTML, or '' when the records keep no answer (runs made before they did)."""
    records = [r for r in read_records(RunDir(run_dir).records).records if r.answer_ids is not None]
    if not records:
        return ""
    phase, which = detected_worst(metrics), "worst phase"
    if phase is None:
        rated = [r for r in metrics.phases if r.accuracy is not None]
        if not rated:
            return ""
        phase, which = min(rated, key=lambda r: r.accuracy).phase, "lowest-accuracy phase"
    wrong = [r for r in records if r.phase == phase and not r.correct]
    head = f"<h2>What the model answered</h2><p>Wrong answers at the {which}, {phase}"
    if not wrong:
        return f"{head}: none; every answer there was right.</p>"
    samples = RunDir(run_dir).read_samples()
    rows = "".join(_row(r, samples.get(r.key)) for r in wrong[:SHOWN])
    return (
        f"{head} ({min(len(wrong), SHOWN)} of {len(wrong)}): the model's answer is what greedy decoding gives, "
        "read along the right answer up to the first token that differs; <i>chosen</i> is the candidate with the "
        "highest log-prob (what multiple choice picks). Run the sweep with --log-samples to see the prompts "
        "(samples.jsonl).</p><table><tr><th>content</th><th>offset</th><th>right answer</th><th>model's answer</th>"
        f"<th>chosen</th><th>log p (right)</th></tr>{rows}</table>"
    )


def _row(record: Record, sample: dict | None) -> str:
    sample = sample or {}
    text = (
        record.target_text
        if record.target_text is not None
        else (sample.get("candidate_texts") or {}).get(record.target)
    )
    ids = (sample.get("candidates") or {}).get(record.target)
    right = repr(text) if text is not None else _ids(ids) if ids else record.target
    answer = repr(record.answer_text) if record.answer_text is not None else _ids(record.answer_ids)
    scored = {name: v for name, v in record.logprobs.items() if v is not None}
    chosen = max(scored, key=scored.get) if scored else ""
    cells = [str(record.content_id), str(record.offset), right, answer, chosen, f"{record.logprob_target:.3f}"]
    return "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"


def _ids(ids: list[int]) -> str:
    """Token ids, for a model without a tokenizer."""
    return "ids " + " ".join(map(str, ids))
