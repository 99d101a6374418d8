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

from phasescope.errors import InputError
from phasescope.probes.base import ProbeItem
from phasescope.rundir.records import Record

PAD_ID = 0


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
    """Greedy continuation ids of every item (its ``generate``: most tokens, stop test)."""
    from phasescope.backends.logits import LogitsBackend
    from phasescope.backends.served import ServedModel

    if isinstance(model, LogitsBackend):
        return _generate_logits(model.logits_where, items)
    if isinstance(model, ServedModel):
        return [model.generate(item) for item in items]
    raise InputError(
        f"{type(model).__name__} cannot generate text; generation tasks need an hf:, openai: or local model"
    )


def _generate_logits(logits_where, items: list[ProbeItem]) -> list[list[int]]:
    """Greedy decoding, a step for every running item at once: the logits only at each one's last position."""
    import torch

    outputs: list[list[int]] = [[] for _ in items]
    running = list(range(len(items)))
    while running:
        sequences = [items[i].input_ids + outputs[i] for i in running]
        width = max(len(s) for s in sequences)
        ids = torch.full((len(sequences), width), PAD_ID, dtype=torch.long)
        for row, seq in enumerate(sequences):
            ids[row, : len(seq)] = torch.tensor(seq)
        last = sorted({len(s) - 1 for s in sequences})
        with torch.no_grad():
            logits = logits_where(ids, torch.tensor(last))
        for row, i in enumerate(running):
            outputs[i].append(int(logits[row, last.index(len(sequences[row]) - 1)].float().argmax()))
        running = [i for i in running if not _finished(items[i], outputs[i])]
    return outputs


def _finished(item: ProbeItem, generated: list[int]) -> bool:
    return len(generated) >= item.generate.max_tokens or item.generate.done(generated)
