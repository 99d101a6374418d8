"""Sweep records as aligned arrays (one row per record) and as cells (one row per content,
offset and phase): the only input the statistics read.

Shape legend: N records, M cells.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from phasescope.rundir.records import Record, as_records, check_records


def bands_of(records: list[Record]) -> list[int]:
    """The length bands of a run (``--context-tokens A,B,...``; sorted), [] when it was swept at one length."""
    return sorted({r.context_tokens for r in records if r.context_tokens is not None})


def unique_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, axis=0, return_inverse=True)`` for integer keys [N, F]: the same distinct
    rows in the same (lexicographic) order and each row's index among them [N]. Each row is coded as
    one int64 (mixed radix over the columns' ranges), so the sort is a plain one: ``np.unique`` with
    ``axis`` sorts structured rows, ~10x slower, and calibration runs it thousands of times."""
    code = _row_codes(keys)
    if code is None:
        unique, inverse = np.unique(keys, axis=0, return_inverse=True)
        return unique, inverse.reshape(-1)
    _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    return keys[first], inverse.reshape(-1)


def _row_codes(keys: np.ndarray) -> np.ndarray | None:
    """[N] each integer row as one int64 (mixed radix over the columns' ranges), in the rows'
    lexicographic order; None when there are no rows, they are not integers, or a code would
    overflow int64."""
    if len(keys) == 0 or not np.issubdtype(keys.dtype, np.integer):
        return None
    low = keys.min(axis=0)
    spans = [int(v) for v in keys.max(axis=0) - low + 1]
    if np.prod([float(v) for v in spans]) >= 2.0**62:
        return None
    code = np.zeros(len(keys), dtype=np.int64)
    for column, span in enumerate(spans):
        code = code * span + (keys[:, column] - low[column])
    return code


@dataclass
class Cells:
    """Records pooled per (content, offset, phase): n records, k of them correct (or, for a
    ``continuous`` outcome such as the log-prob margin, k the sum of the values)."""

    content: np.ndarray  # [M] content index
    offset: np.ndarray  # [M]
    phase: np.ndarray  # [M]
    n: np.ndarray  # [M] records
    k: np.ndarray  # [M] correct records (continuous: sum of the values)
    n_contents: int
    continuous: bool = False

    @property
    def accuracy(self) -> np.ndarray:
        return self.k / self.n


@dataclass
class RecordArrays:
    step: int
    content: np.ndarray  # [N] index into content_ids
    content_ids: list
    offset: np.ndarray  # [N]
    phase: np.ndarray  # [N] in [0, step)
    correct: np.ndarray  # [N] 0.0 / 1.0
    logprob: np.ndarray  # [N] log-prob of the right answer (nan: not scored)
    margin: np.ndarray  # [N] log p(right) - max log p(other candidates) (nan: no other candidate)
    same_window: np.ndarray  # [N] 1.0 / 0.0, nan when the probe has no key
    variant: np.ndarray  # [N] probe variant (0 unless the probe renders each content several ways)
    # name -> [N] log-prob, for the candidates named in every record (nan: not scored), in the probe's order
    candidate_logprobs: dict[str, np.ndarray] = field(default_factory=dict)
    candidates_left_out: list[str] = field(default_factory=list)  # named in some records only
    padding_units: np.ndarray | None = None  # [N] pad units inserted (the code probe's '=' count); None: no padding
    # [N] the prompt end's phase ((answer_pos - align) mod step) and answer_pos; None when a record lacks them
    end_phase: np.ndarray | None = None
    answer_pos: np.ndarray | None = None
    # [N] the needle's position (anchor_pos); None when a record lacks it (its phase is then known
    # modulo the step only, so the factors are read at the step's divisors only)
    anchor_pos: np.ndarray | None = None
    align: int = 0  # the records' align (the prompt end's phase m is a prompt length of m + align mod step)

    @classmethod
    def from_records(cls, records: list[Record] | list[dict]) -> RecordArrays:
        """From ``Record``s or their JSON objects (each checked), all of one sweep."""
        records = as_records(records)
        check_records(records)
        step = records[0].step
        ids = sorted({r.content_id for r in records})
        index = {c: i for i, c in enumerate(ids)}
        shared, named = _candidate_names(records)
        return cls(
            step=step,
            content=np.array([index[r.content_id] for r in records], dtype=np.int64),
            content_ids=ids,
            offset=np.array([r.offset for r in records], dtype=np.int64),
            phase=np.array([r.phase for r in records], dtype=np.int64),
            correct=np.array([float(r.correct) for r in records]),
            logprob=np.array([float(r.logprob_target) for r in records]),
            margin=np.array([_margin(r) for r in records]),
            same_window=np.array([_flag(r.same_window) for r in records]),
            variant=np.array([r.variant for r in records], dtype=np.int64),
            candidate_logprobs={name: np.array([_number(r.logprobs[name]) for r in records]) for name in shared},
            candidates_left_out=sorted(named - set(shared)),
            padding_units=_padding_units(records),
            **_ends(records),
        )

    @classmethod
    def from_arrays(cls, step: int, content, offset, phase, correct) -> RecordArrays:
        """Bare arrays (simulations): no log-probs, no keys."""
        content = np.asarray(content, dtype=np.int64)
        nan = np.full(len(content), np.nan)
        return cls(
            step=step,
            content=content,
            content_ids=list(range(int(content.max()) + 1)),
            offset=np.asarray(offset, dtype=np.int64),
            phase=np.asarray(phase, dtype=np.int64),
            correct=np.asarray(correct, dtype=float),
            logprob=nan,
            margin=nan,
            same_window=nan,
            variant=np.zeros(len(content), dtype=np.int64),
        )

    @classmethod
    def concat(cls, parts: list[RecordArrays]) -> RecordArrays:
        """Records of several renderings of the same contents (same step and content ids)."""
        fields = ("content", "offset", "phase", "correct", "logprob", "margin", "same_window", "variant")
        joined = {name: np.concatenate([getattr(p, name) for p in parts]) for name in fields}
        for name in ENDS:
            values = [getattr(p, name) for p in parts]
            joined[name] = None if any(v is None for v in values) else np.concatenate(values)
        shared = [n for n in parts[0].candidate_logprobs if all(n in p.candidate_logprobs for p in parts)]
        named = {n for p in parts for n in [*p.candidate_logprobs, *p.candidates_left_out]}
        return cls(
            step=parts[0].step,
            content_ids=parts[0].content_ids,
            **joined,
            candidate_logprobs={n: np.concatenate([p.candidate_logprobs[n] for p in parts]) for n in shared},
            candidates_left_out=sorted(named - set(shared)),
            padding_units=None
            if any(p.padding_units is None for p in parts)
            else np.concatenate([p.padding_units for p in parts]),
            align=parts[0].align,
        )

    @property
    def n_contents(self) -> int:
        return len(self.content_ids)

    def cells(self, continuous: bool = False) -> Cells:
        """``continuous``: ``correct`` holds a real-valued outcome (``with_outcome``)."""
        keys = np.stack([self.content, self.offset, self.phase], axis=1)
        unique, inverse = unique_rows(keys)
        return Cells(
            content=unique[:, 0],
            offset=unique[:, 1],
            phase=unique[:, 2],
            n=np.bincount(inverse).astype(float),
            k=np.bincount(inverse, weights=self.correct),
            n_contents=self.n_contents,
            continuous=continuous,
        )

    def with_outcome(self, values: np.ndarray) -> RecordArrays:
        """The records where ``values`` [N] is finite, with ``values`` in place of ``correct``
        (the statistics then measure it: the log-prob margin of a run at the ceiling)."""
        keep = np.isfinite(values)
        arrays = ("content", "offset", "phase", "logprob", "margin", "same_window", "variant")
        ends = {name: None if getattr(self, name) is None else getattr(self, name)[keep] for name in ENDS}
        return replace(
            self,
            correct=np.asarray(values, dtype=float)[keep],
            **{name: getattr(self, name)[keep] for name in arrays},
            **ends,
            candidate_logprobs={n: v[keep] for n, v in self.candidate_logprobs.items()},
            padding_units=None if self.padding_units is None else self.padding_units[keep],
        )

    def offset_means(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct offsets [D] and the accuracy over all records at each [D]."""
        offsets, inverse = np.unique(self.offset, return_inverse=True)
        return offsets, np.bincount(inverse, weights=self.correct) / np.bincount(inverse)

    def offset_intervals(self, min_units: int) -> list[list[float | None]]:
        """[D] 95% interval of the accuracy at each distinct offset, clustered by content
        (``intervals.cluster_proportion``; [None, None] under ``min_units`` contents)."""
        from phasescope.analysis.intervals import cluster_proportion

        # [D, C] right and total records per (offset, content), one bincount each: every bin adds the same
        # records in the same order as a bincount per offset did, so the sums are the same
        offsets, index = np.unique(self.offset, return_inverse=True)
        shape = (len(offsets), self.n_contents)
        code = index * self.n_contents + self.content
        right = np.bincount(code, weights=self.correct, minlength=shape[0] * shape[1]).reshape(shape)
        total = np.bincount(code, minlength=shape[0] * shape[1]).reshape(shape)
        return [list(cluster_proportion(right[i], total[i], min_units=min_units)) for i in range(len(offsets))]

    def phase_by_offset(self) -> list[int | None]:
        """The phase at each distinct offset when every record there has the same one, else None."""
        offsets, index = np.unique(self.offset, return_inverse=True)
        pairs, _ = unique_rows(np.stack([index, self.phase], axis=1))  # distinct (offset, phase), sorted
        counts = np.bincount(pairs[:, 0], minlength=len(offsets))
        first = np.searchsorted(pairs[:, 0], np.arange(len(offsets)))
        return [int(pairs[f, 1]) if c == 1 else None for f, c in zip(first, counts, strict=True)]


ENDS = ("end_phase", "answer_pos", "anchor_pos")


def _ends(records: list[Record]) -> dict:
    """The prompt end's phase and position of every record (None unless every record has them),
    and the needle's position (None unless every record has it)."""
    if any(r.answer_pos is None or r.align is None for r in records):
        return {"end_phase": None, "answer_pos": None}
    step = records[0].step
    aligns = {r.align for r in records}
    anchors = None
    if all(r.anchor_pos is not None for r in records):
        anchors = np.array([r.anchor_pos for r in records], dtype=np.int64)
    return {
        "end_phase": np.array([(r.answer_pos - r.align) % step for r in records], dtype=np.int64),
        "answer_pos": np.array([r.answer_pos for r in records], dtype=np.int64),
        "anchor_pos": anchors,
        "align": aligns.pop() if len(aligns) == 1 else 0,
    }


def _candidate_names(records: list[Record]) -> tuple[list[str], set[str]]:
    """Candidate names in every record (in the first record's order) and all names seen: a
    per-candidate average only means something for a candidate every record has (kv-retrieval
    names its distractors by their distance to the needle, which varies)."""
    shared = set(records[0].logprobs)
    named = set()
    for r in records:
        shared &= set(r.logprobs)
        named |= set(r.logprobs)
    return [n for n in records[0].logprobs if n in shared], named


def _padding_units(records: list[Record]) -> np.ndarray | None:
    """[N] the pad units each record's prompt holds (nan: none recorded); None when no record has any."""
    units = np.array([_number((r.padding or {}).get("units")) for r in records])
    return None if np.isnan(units).all() else units


def _number(value) -> float:
    return float("nan") if value is None else float(value)


def _flag(value) -> float:
    return float("nan") if value is None else float(bool(value))


def _margin(record: Record) -> float:
    others = [v for k, v in record.logprobs.items() if v is not None and k != record.target]
    if not others:
        return float("nan")
    return float(record.logprob_target) - max(others)
