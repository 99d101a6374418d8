"""``records.jsonl``: one JSON object per scored (content, offset, variant), appended as a sweep
goes. The one schema for a record and the one reader of the file, shared by the sweep (which
resumes from it) and the analysis (which trusts nothing else).

A record is checked field by field; a bad line is never skipped: its line number and the
fix are in the error. The only damage repaired silently is the one a crash leaves: a last
line cut short (no final newline), which the sweep drops and rescores and ``analyze``
leaves out, saying so.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from phasescope.errors import InputError
from phasescope.rundir.files import DuplicateKey, unique_keys
from phasescope.rundir.saved import SavedSweep

REQUIRED = ("content_id", "offset", "phase", "step", "correct", "logprob_target", "logprobs")
OPTIONAL_INTS = ("align", "anchor_pos", "key_pos", "value_pos", "answer_pos", "end_phase", "context_tokens")


@dataclass(frozen=True)
class Record:
    """One scored (content, offset, variant): where the probe put things, which phase that is,
    and what the model answered. Built from JSON by ``from_json`` (checked field by field);
    ``to_json`` is the line records.jsonl holds. Fields this version does not know (written by
    another tool or by hand) are kept in ``extra`` and written back."""

    content_id: int | str
    offset: int  # d: how far the probe shifted the content
    phase: int  # (anchor_pos - align) mod step
    step: int
    correct: bool
    logprob_target: float  # log p of the right answer (summed over its tokens)
    logprobs: dict[str, float | None]  # candidate name -> log p (None: not scored)
    align: int | None = None
    anchor_pos: int | None = None
    key_pos: int | None = None
    value_pos: int | None = None
    answer_pos: int | None = None
    same_window: bool | None = None  # one compression entry covers key and value (None: no key)
    variant: int = 0  # the probe's rendering of the content (kv-gaps, formats)
    target: str = "right"  # the candidate that is the right answer
    padding: dict | None = None  # what moved the anchor, as measured (text, chars, units, tokens)
    task: str | None = None  # lm-eval: the task
    doc_id: int | None = None  # lm-eval: the document
    generation: str | None = None  # lm-eval generate_until: the graded text
    task_metrics: dict[str, float] | None = None  # lm-eval: the task's own per-document metrics
    # the prompt end's phase, (answer_pos - align) mod step: where the prompt ends in its compression
    # window (a serving stack's last, partial window), beside the needle's ``phase``
    end_phase: int | None = None
    prompt_digest: str | None = None  # sha256 (16 hex) of the prompt ids, candidates and target: runs pair on it
    request_lengths: list[int] | None = None  # served: the prompt lengths of the requests that scored the record
    answer_from: str | None = None  # served: "generation" when one greedy request decided ``correct``
    # what the model answered: the tokens greedy decoding gives after the prompt, as many as the target
    # has at most, read along the target up to the first that differs (``backends.base.greedy_along``;
    # a served --answers generation run: the tokens generated); its text where the model has a tokenizer
    answer_ids: list[int] | None = None
    answer_text: str | None = None
    target_text: str | None = None  # the right answer's text where the model has a tokenizer (" Paris", not "3")
    # the prompt length asked for (--context-tokens A,B,...: one length band per value); None: the default length
    context_tokens: int | None = None
    # a multi-token target, each token teacher-forced (one request each on a served model, of length
    # answer_pos + j): its log-prob, and whether greedy decoding's token there is the target's; the paired
    # comparison reads a departure at the request that departed (docs/serving.md)
    token_logprobs: list[float] | None = None
    token_correct: list[bool] | None = None
    extra: dict = field(default_factory=dict)  # fields this version does not know, kept as they were

    @classmethod
    def from_json(cls, data, where: str = "record") -> Record:
        """The record ``data`` (a JSON object) holds; InputError naming ``where`` and the field at fault."""
        if isinstance(data, Record):
            return data
        check_record(data, where)
        known = {k: v for k, v in data.items() if k in _FIELDS}
        return cls(**known, extra={k: v for k, v in data.items() if k not in _FIELDS})

    def to_json(self) -> dict:
        """The JSON object of records.jsonl (fields in the order a sweep writes them; optional
        lm-eval fields only when set)."""
        data = {name: getattr(self, name) for name in _JSON_ORDER}
        data |= {name: getattr(self, name) for name in _SET_ONLY if getattr(self, name) is not None}
        return data | self.extra

    def line(self) -> str:
        """The record's line in records.jsonl, newline included (never a NaN: the file is strict JSON)."""
        return json.dumps(self.to_json(), allow_nan=False) + "\n"

    @property
    def key(self) -> tuple:
        """What identifies a record in a run: content, offset and variant."""
        return (self.content_id, self.offset, self.variant)

    def with_fields(self, fields_: dict) -> Record:
        """This record with ``fields_`` set (a probe's grade); unknown names go to ``extra``."""
        known = {k: v for k, v in fields_.items() if k in _FIELDS}
        return replace(self, **known, extra=self.extra | {k: v for k, v in fields_.items() if k not in _FIELDS})


_JSON_ORDER = (
    "content_id", "offset", "phase", "step", "align", "anchor_pos", "key_pos", "value_pos", "answer_pos",
    "same_window", "variant", "target", "correct", "logprob_target", "logprobs",
)  # fmt: skip
_SET_ONLY = (
    "padding", "task", "doc_id", "generation", "task_metrics", "end_phase", "prompt_digest", "request_lengths",
    "answer_from", "answer_ids", "answer_text", "target_text", "context_tokens",
    "token_logprobs", "token_correct",
)  # fmt: skip
_FIELDS = {f.name for f in fields(Record)} - {"extra"}


@dataclass
class RecordFile:
    records: list[Record]
    truncated_tail: bool  # the last line was cut short (an interrupted write) and is left out
    unterminated: bool = False  # the file does not end with a newline (an append would join two records)


def same_window(key_first: int, value_last: int, step: int, window: int, align: int) -> bool:
    """A record's ``same_window``: one compression entry covers the whole key and value (the first
    entry ending at or after the value's last token starts at or before the key's first token)."""
    end = value_last + (align - 1 - value_last) % step
    return end - window + 1 <= key_first


HALF = math.log(0.5)  # a target above it is what greedy decoding answers, whatever else is scored
CORRECT_SLACK = 0.02  # nats: a served model's log-probs and its greedy answer may differ by rounding


def as_records(items, where=lambda i: f"record {i}") -> list[Record]:
    """``Record``s from records or JSON objects (the Python API takes either), each checked."""
    return [Record.from_json(item, where(i)) for i, item in enumerate(items)]


def _is_int(value) -> bool:
    """An integer JSON and numpy carry exactly (|value| < 2^53): larger ones are not positions or offsets."""
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**53


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


LOWEST_LOGPROB = -1e6  # nats: far below any real log-prob (float32 softmax ends near -100), far above -1e308
LOGPROB_SLACK = 1e-4  # a log-softmax rounds a probability of 1 to a few 1e-7 above 0
LOGPROB_RANGE = f"a log-probability: a number in [{LOWEST_LOGPROB:g}, 0] (a probability in (0, 1])"


def _is_logprob(value) -> bool:
    """A log-probability as a model could give it: finite, at most 0 (up to rounding), not absurdly low
    (-1e308 would overflow every sum the statistics take)."""
    return _is_number(value) and LOWEST_LOGPROB <= value <= LOGPROB_SLACK


def check_record(record, where: str) -> None:
    """InputError naming ``where`` (file and line, or record index) and the field at fault."""
    if not isinstance(record, dict):
        raise InputError(f"{where}: a record must be a JSON object, not {type(record).__name__}")
    missing = [name for name in REQUIRED if name not in record]
    if missing:
        raise InputError(f"{where}: the record lacks {missing}; every record needs {list(REQUIRED)}")
    checks = [
        ("content_id", (_is_int(record["content_id"]) or isinstance(record["content_id"], str)), "an integer or text"),
        ("step", _is_int(record["step"]) and record["step"] >= 1, "an integer >= 1"),
        ("offset", _is_int(record["offset"]) and record["offset"] >= 0, "an integer >= 0"),
        ("correct", isinstance(record["correct"], bool), "true or false"),
        ("logprob_target", _is_logprob(record["logprob_target"]), LOGPROB_RANGE),
        (
            "logprobs",
            isinstance(record["logprobs"], dict)
            and all(isinstance(k, str) and (v is None or _is_logprob(v)) for k, v in record["logprobs"].items()),
            f"an object of candidate name -> {LOGPROB_RANGE}",
        ),
        ("variant", _is_int(record.get("variant", 0)) and record.get("variant", 0) >= 0, "an integer >= 0"),
        (
            "same_window",
            record.get("same_window") is None or isinstance(record["same_window"], bool),
            "true, false or null",
        ),
        ("target", isinstance(record.get("target", ""), str), "a candidate name"),
    ]
    checks += [(name, record.get(name) is None or _is_int(record[name]), "an integer") for name in OPTIONAL_INTS]
    for name, ok, expected in checks:
        if not ok:
            raise InputError(f"{where}: field {name!r} must be {expected}, got {record.get(name)!r}")
    step = record["step"]
    if not (_is_int(record["phase"]) and 0 <= record["phase"] < step):
        raise InputError(
            f"{where}: record content_id={record['content_id']!r} offset={record['offset']!r} has phase "
            f"{record['phase']!r}; a phase is an integer in [0, step={step})"
        )
    anchor, align = record.get("anchor_pos"), record.get("align")
    if anchor is not None and align is not None and record["phase"] != (anchor - align) % step:
        raise InputError(
            f"{where}: record content_id={record['content_id']!r} offset={record['offset']!r} has phase "
            f"{record['phase']}, but its anchor_pos {anchor} and align {align} give phase {(anchor - align) % step} at "
            f"step {step}; the record was edited: fix or delete that line"
        )
    _check_end(record, where)
    _check_target(record, where)
    _check_correct(record, where)


def _check_correct(record: dict, where: str) -> None:
    """``correct`` against the record's own log-probs, where both rules a probe judges by agree
    (greedy: the target's tokens are what greedy decoding gives; choice: the target is strictly
    the most likely candidate): a target more likely than 1/2 and than every other candidate is
    right, and a target beside another candidate more likely than 1/2 and than it is wrong (greedy
    decoding gives that candidate; a target that is its prefix would be as likely). lm-eval records
    are judged by their task's metric, and ``--answers generation`` records by what the server
    decoded, which its scoring requests may contradict (the fault a paired comparison looks for):
    neither is checked."""
    if record.get("task") is not None or record.get("answer_from") == "generation":
        return
    target = record.get("target", "right")
    mine = record["logprob_target"]
    others = [v for name, v in record["logprobs"].items() if name != target and v is not None]
    key = f"record content_id={record['content_id']!r} offset={record['offset']!r}"
    if not record["correct"] and mine > HALF + CORRECT_SLACK and all(mine > v for v in others):
        raise InputError(
            f"{where}: {key} has correct false, but its target's log-prob {mine:.4g} (p = {math.exp(mine):.2f}) is "
            "above log 1/2 and the highest of its candidates, which every probe judges right; the record was edited: "
            "fix or delete that line"
        )
    # greedy decoding gives a candidate above 1/2; the target is its prefix at best, then at least as likely
    if record["correct"] and any(v > HALF + CORRECT_SLACK and v > mine + CORRECT_SLACK for v in others):
        raise InputError(
            f"{where}: {key} has correct true, but another candidate is more likely than 1/2 and than the target "
            f"(log-probs {record['logprobs']}), which every probe judges wrong; the record was edited: fix or delete "
            "that line"
        )


def _check_target(record: dict, where: str) -> None:
    """The target is a scored candidate and ``logprob_target`` is its log-prob (every backend writes
    them so; an edit that changes one and not the other would be analyzed silently)."""
    logprobs, target = record["logprobs"], record.get("target", "right")
    key = f"record content_id={record['content_id']!r} offset={record['offset']!r}"
    if not logprobs:
        raise InputError(f"{where}: {key} has no candidate log-probs (logprobs is empty); fix or delete that line")
    if target not in logprobs:
        raise InputError(
            f"{where}: {key} names target {target!r}, which is not among its candidates {sorted(logprobs)}; the record "
            "was edited: fix or delete that line"
        )
    value = logprobs[target]
    if value is not None and abs(value - record["logprob_target"]) > 1e-6 * max(1.0, abs(value)):
        raise InputError(
            f"{where}: {key} has logprob_target {record['logprob_target']!r} but logprobs[{target!r}] = {value!r}; "
            "they are the same number in every record a sweep writes: the record was edited, fix or delete that line"
        )


def check_against_spec(records: list[Record], spec: SavedSweep, path: str) -> None:
    """Records against the sweep that wrote them (spec.json): offsets it swept, contents it drew,
    renderings it made. A record outside them was edited or belongs to another sweep. ``path``: the
    records file, whose line i + 1 holds ``records[i]``."""
    offsets, samples = spec.offsets, spec.samples
    swept = set(offsets) if offsets is not None else None  # a set: every record is looked up
    gaps, by_sample, bands = spec.kv_gaps, spec.contents_by_sample, spec.bands
    for i, r in enumerate(records):
        where, key = f"{path} line {i + 1}", f"record content_id={r.content_id!r} offset={r.offset}"
        if swept is not None and r.offset not in swept:
            raise InputError(
                f"{where}: {key} is at an offset the sweep did not sweep (its offsets: {_span(offsets)}); the record "
                "was edited or belongs to another sweep: delete that line"
            )
        if isinstance(samples, int) and by_sample and isinstance(r.content_id, int) and not 0 <= r.content_id < samples:
            raise InputError(
                f"{where}: {key} names a content the sweep did not draw (contents 0..{samples - 1}); the record was "
                "edited or belongs to another sweep: delete that line"
            )
        _check_same_window(r, spec, where, key)
        renderings = len(gaps) * max(len(bands), 1) if isinstance(gaps, list) else None
        if renderings is not None and not r.variant < renderings:
            per_band = f" at each of {len(bands)} lengths" if bands else ""
            raise InputError(
                f"{where}: {key} is rendering {r.variant}, but the sweep made {renderings} (--kv-gaps "
                f"{','.join(map(str, gaps))}{per_band}); the record was edited: delete that line"
            )
        if bands and r.context_tokens not in bands:
            raise InputError(
                f"{where}: {key} is at length {r.context_tokens}, not one of the sweep's bands {bands}; the record was "
                "edited: delete that line"
            )


def _check_same_window(r: Record, spec: SavedSweep, where: str, key: str) -> None:
    """A record saying one entry covers key and value when the sweep's windows (spec.json) cannot
    cover even the value's first token with the key was edited (a multi-token value's last token,
    which decides it, is not recorded, so the other direction cannot be checked)."""
    window, align = spec.window, r.align
    if r.same_window is not True or window is None or None in (r.key_pos, r.value_pos, align):
        return
    if not same_window(r.key_pos, r.value_pos, r.step, window, align):
        raise InputError(
            f"{where}: {key} has same_window true, but its key at {r.key_pos} and value at {r.value_pos} share no "
            f"compression entry (window {window}, step {r.step}, align {align}); the record was edited: fix or delete "
            "that line"
        )


def _span(offsets: list) -> str:
    return f"{offsets[0]}..{offsets[-1]}" if offsets == list(range(offsets[0], offsets[-1] + 1)) else str(offsets)


def _check_end(record: dict, where: str) -> None:
    """The prompt end's phase agrees with answer_pos; digest and request lengths have their types."""
    end, answer, align, step = record.get("end_phase"), record.get("answer_pos"), record.get("align"), record["step"]
    if end is not None and _is_int(step) and not (_is_int(end) and 0 <= end < step):
        raise InputError(
            f"{where}: record content_id={record['content_id']!r} offset={record['offset']!r} has end_phase {end!r}; "
            f"a phase is an integer in [0, step={step})"
        )
    if end is not None and answer is not None and align is not None and end != (answer - align) % step:
        raise InputError(
            f"{where}: record content_id={record['content_id']!r} offset={record['offset']!r} has end_phase {end}, "
            f"but its answer_pos {answer} and align {align} give {(answer - align) % step} at step {step}; the record "
            "was edited: fix or delete that line"
        )
    digest, lengths = record.get("prompt_digest"), record.get("request_lengths")
    if digest is not None and not isinstance(digest, str):
        raise InputError(f"{where}: field 'prompt_digest' must be text, got {digest!r}")
    if lengths is not None and not (isinstance(lengths, list) and all(_is_int(n) and n > 0 for n in lengths)):
        raise InputError(f"{where}: field 'request_lengths' must be a list of prompt lengths, got {lengths!r}")
    answer = record.get("answer_ids")
    if answer is not None and not (isinstance(answer, list) and all(_is_int(t) and t >= 0 for t in answer)):
        raise InputError(f"{where}: field 'answer_ids' must be a list of token ids, got {answer!r}")
    logprobs, flags = record.get("token_logprobs"), record.get("token_correct")
    if logprobs is not None and not (isinstance(logprobs, list) and all(_is_logprob(v) for v in logprobs)):
        raise InputError(f"{where}: field 'token_logprobs' must be a list of {LOGPROB_RANGE}, got {logprobs!r}")
    if flags is not None and not (isinstance(flags, list) and all(isinstance(v, bool) for v in flags)):
        raise InputError(f"{where}: field 'token_correct' must be a list of true/false, got {flags!r}")
    for name in ("answer_text", "target_text"):
        if record.get(name) is not None and not isinstance(record[name], str):
            raise InputError(f"{where}: field {name!r} must be text, got {record[name]!r}")
    if record.get("answer_from") not in (None, "generation", "teacher-forced"):
        raise InputError(
            f"{where}: field 'answer_from' must be generation or teacher-forced, got {record['answer_from']!r}"
        )
    said, right = record.get("answer_text"), record.get("target_text")
    decided = record.get("answer_from") == "generation" and record.get("task") is None
    if decided and record["correct"] and said is not None and right is not None and said != right:
        raise InputError(
            f"{where}: record content_id={record['content_id']!r} offset={record['offset']!r} has correct true, but "
            f"the answer it generated ({said!r}) is not the right answer ({right!r}), and a generated answer is right "
            "only when it is the right answer's tokens: the record was edited, fix or delete that line"
        )


def check_records(records: list[Record], where=lambda i: f"record {i}") -> None:
    """One step; one type of content id; no (content, offset, variant) twice (each record was
    checked when it was built)."""
    if not records:
        raise InputError("no records to analyze (records.jsonl is empty); run `phasescope sweep` first")
    seen: dict[tuple, int] = {}
    for i, record in enumerate(records):
        key = record.key
        if key in seen:
            raise InputError(
                f"{where(i)} repeats {where(seen[key])} (content {key[0]!r}, offset {key[1]}, variant {key[2]}); "
                "delete one of them"
            )
        seen[key] = i
    steps = {r.step for r in records}
    if len(steps) != 1:
        raise InputError(f"records mix compression steps {sorted(steps)}; analyze one step at a time")
    kinds = {type(r.content_id).__name__ for r in records}
    if len(kinds) != 1:
        raise InputError(f"records mix content ids of types {sorted(kinds)}; use one type (all integers or all text)")
    for name in ("answer_pos", "anchor_pos", "align"):  # a sweep writes each on every record or on none
        present = [getattr(r, name) is not None for r in records]
        if any(present) and not all(present):
            i = present.index(False)
            raise InputError(
                f"{where(i)} lacks {name}, which the run's other records carry: the line was edited (without it the "
                "prompt end's and the distance's phase, and the statistics by factor, would silently go); restore it "
                "or delete that line"
            )


def read_records(path: Path) -> RecordFile:
    """Parse and check ``records.jsonl`` (a missing file holds no records)."""
    path = Path(path)
    if not path.exists():
        return RecordFile([], False)
    if not path.is_file():  # a FIFO would block, /dev/zero would fill memory
        raise InputError(f"{path} is not a regular file; records.jsonl must be the file a sweep wrote")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        number = data[: err.start].count(b"\n") + 1
        raise InputError(
            f"{path} line {number} is not UTF-8 text (byte {err.start}); the file was damaged: fix or delete that line"
        ) from None
    lines = text.split("\n")
    truncated = False
    if lines and lines[-1] == "":
        lines.pop()  # the file ends with a newline, as every complete write does
    elif lines:
        truncated = _unparseable(lines[-1])  # a last line without its newline: complete or cut by a kill
        if truncated:
            lines.pop()
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise InputError(f"{path} line {number} is empty; delete it (a sweep never writes empty lines)")
        try:
            data = json.loads(line, object_pairs_hook=unique_keys)
        except (json.JSONDecodeError, RecursionError, DuplicateKey) as err:
            why = {json.JSONDecodeError: getattr(err, "msg", ""), RecursionError: "nested too deeply"}.get(
                type(err), str(err)
            )
            raise InputError(
                f"{path} line {number} is not valid JSON ({why}); the file was edited or damaged: fix or delete "
                "that line (rerunning the sweep rescores deleted records)"
            ) from None
        records.append(Record.from_json(data, f"{path} line {number}"))
    check_records_in_file(records, path)
    return RecordFile(records, truncated, unterminated=bool(text) and not text.endswith("\n"))


def check_records_in_file(records: list[Record], path: Path) -> None:
    if records:
        check_records(records, where=lambda i: f"{path} line {i + 1}")


def _unparseable(line: str) -> bool:
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return True
    return False


def plan_digest(planned: dict[tuple, str]) -> str:
    """One digest of a sweep's planned records (key -> prompt digest), in an order that does not
    depend on who computes it: a part of a split sweep saves it, merge checks the joined records."""
    lines = sorted(json.dumps([list(key), digest]) for key, digest in planned.items())
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()
