"""Greedy generation and a probe's own grading of scored records (lm-eval tasks).

An item may ask for greedy generation after its prompt (``ProbeItem.generate``: at most N
tokens, a stop test) and for its record to be graded by the probe (``ProbeItem.grade``: record
and generated ids -> fields merged into the record, e.g. the task's own metrics). Generation is
plain greedy decoding, one token per step, through whatever the backend offers:

* a logits backend (hf:, a phasescope model, a callable, the phase ensemble): argmax of the
  last position, the batch right-padded (positions never shift), one forward pass per step;
* a served model (openai:): one completions request per item, ``temperature 0``, the
  generated tokens read back as ids.
"""

from __future__ import annotations

from phasescope.probes.base import ProbeItem
from phasescope.rundir.records import Record


def grade_records(model, items: list[ProbeItem], records: list[Record]) -> None:
    """Generate where asked, then set each item's grade in its record (the list is updated in place)."""
    asked = [i for i, item in enumerate(items) if item.generate is not None]
    generated: dict[int, list[int]] = {}
    if asked:
        outputs = generate(model, [items[i] for i in asked])
        generated = dict(zip(asked, outputs, strict=True))
    for i, (item, record) in enumerate(zip(items, records, strict=True)):
        if item.grade is not None:
            records[i] = record.with_fields(item.grade(record, generated.get(i)))


def generate(model, items: list[ProbeItem]) -> list[list[int]]:
    """Greedy continuation ids of every item (its ``generate``: most tokens, stop test): the
    backend's own ``generate``."""
    return model.generate(items)
