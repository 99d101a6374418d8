"""report.html's "What the model answered": a few wrong answers at the run's worst phase (or, in
a run without an effect, its lowest phase), the model's own answer beside the right one, from
the records' ``answer_ids``/``answer_text`` and, when the sweep ran with --log-samples, the
candidates' text."""

from __future__ import annotations

import html

from phasescope.phases import positions
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
        "(samples.jsonl). <i>Prompt</i>: its length in tokens and the phases of the needle, the prompt end and "
        "their distance.</p><table><tr><th>content</th><th>offset</th><th>prompt</th><th>right answer</th>"
        f"<th>model's answer</th><th>chosen</th><th>log p (right)</th></tr>{rows}</table>"
    )


def _row(record: Record, sample: dict | None) -> str:
    sample = sample or {}
    texts = dict(sample.get("candidate_texts") or {})
    if record.target_text is not None:
        texts[record.target] = record.target_text
    right = _candidate(record.target, texts, sample)
    answer = repr(record.answer_text) if record.answer_text is not None else _ids(record.answer_ids)
    scored = {name: v for name, v in record.logprobs.items() if v is not None}
    chosen = max(scored, key=scored.get) if scored else None
    picked = "" if chosen is None else _candidate(chosen, texts, sample)
    if chosen is not None and chosen == record.target:
        picked += " (the right one, by log-prob)"  # a generation run can pick it and still answer wrong
    cells = [str(record.content_id), str(record.offset), _prompt(record), right, answer, picked,
             f"{record.logprob_target:.3f}"]  # fmt: skip
    return "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"


def _candidate(name: str, texts: dict, sample: dict) -> str:
    """A candidate as text where the run kept it, else its token ids, else its name said as one."""
    if texts.get(name) is not None:
        return repr(texts[name])
    ids = (sample.get("candidates") or {}).get(name)
    return _ids(ids) if ids else f"candidate {name!r} (its text: --log-samples)"


def _prompt(record: Record) -> str:
    """'221 tokens; needle 0, end 1, distance 1' (each factor's phase mod the step, ``phases.positions``),
    as far as the record says."""
    if record.answer_pos is None or record.anchor_pos is None:
        return f"needle phase {record.phase}"
    placed = positions(record.anchor_pos, record.answer_pos, record.align or 0)
    at = {name: position % record.step for name, position in placed.items()}
    return f"{record.answer_pos:,} tokens; needle {at['needle']}, end {at['end']}, distance {at['distance']}"


def _ids(ids: list[int]) -> str:
    """Token ids, for a model without a tokenizer."""
    return "ids " + " ".join(map(str, ids))
