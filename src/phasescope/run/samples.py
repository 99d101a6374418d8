"""--log-samples: what each record was scored on, beside records.jsonl (RUN/samples.jsonl, one
JSON object per scored item: its key, the prompt ids and text, the candidates' ids and text, and
what the model answered, ids and text, as lm-eval's --log_samples keeps its ``resps``)."""

from __future__ import annotations

import json
from pathlib import Path

from phasescope.backends.base import Backend
from phasescope.probes.base import ProbeItem
from phasescope.rundir import RunDir
from phasescope.rundir.records import Record


def sample_logger(model: Backend, out: Path):
    """--log-samples: a function writing each item's prompt and candidates (ids, and text when the
    model brings a tokenizer) to RUN/samples.jsonl, as lm-eval's --log_samples does."""
    decode = getattr(model.info.tokenizer, "decode", None)

    def text(ids: list[int]) -> str | None:
        return decode(ids) if decode is not None else None

    def log(scored: list[tuple[ProbeItem, Record]]) -> None:
        lines = []
        for it, record in scored:
            sample = {"content_id": it.content_id, "offset": it.offset, "variant": it.variant, "target": it.target}
            sample["rule"] = it.rule  # how correct was judged: phasescope check sends the prompt again
            sample |= {"prompt_ids": it.input_ids, "prompt_text": text(it.input_ids), "candidates": it.candidates}
            sample["candidate_texts"] = {name: text(ids) for name, ids in it.candidates.items()}
            sample |= {"answer_ids": record.answer_ids, "answer_text": record.answer_text, "correct": record.correct}
            lines.append(json.dumps(sample) + "\n")
        RunDir(out).append_samples("".join(lines))

    return log
