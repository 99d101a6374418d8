"""Sweep records as aligned arrays (one row per record) and as cells (one row per content,
offset and phase): the only input the statistics read.

Shape legend: N records, M cells.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

REQUIRED = ("content_id", "offset", "phase", "step", "correct", "logprob_target", "logprobs")


@dataclass
class Cells:
    """Records pooled per (content, offset, phase): n records, k of them correct."""

    content: np.ndarray  # [M] content index
    offset: np.ndarray  # [M]
    phase: np.ndarray  # [M]
    n: np.ndarray  # [M] records
    k: np.ndarray  # [M] correct records
    n_contents: int

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

    @classmethod
    def from_records(cls, records: list[dict]) -> RecordArrays:
        check_records(records)
        step = int(records[0]["step"])
        ids = sorted({r["content_id"] for r in records}, key=lambda c: (type(c).__name__, c))
        index = {c: i for i, c in enumerate(ids)}
        phase = np.array([r["phase"] for r in records])
        if not np.issubdtype(phase.dtype, np.integer) or phase.min() < 0 or phase.max() >= step:
            bad = next(r for r in records if not (isinstance(r["phase"], int) and 0 <= r["phase"] < step))
            raise ValueError(
                f"record content_id={bad['content_id']!r} offset={bad['offset']!r} has phase {bad['phase']!r}; "
                f"a phase is an integer in [0, step={step})"
            )
        return cls(
            step=step,
            content=np.array([index[r["content_id"]] for r in records], dtype=np.int64),
            content_ids=ids,
            offset=np.array([r["offset"] for r in records], dtype=np.int64),
            phase=phase.astype(np.int64),
            correct=np.array([float(bool(r["correct"])) for r in records]),
            logprob=np.array([_number(r["logprob_target"]) for r in records]),
            margin=np.array([_margin(r) for r in records]),
            same_window=np.array(
                [np.nan if r.get("same_window") is None else float(r["same_window"]) for r in records]
            ),
            variant=np.array([int(r.get("variant") or 0) for r in records], dtype=np.int64),
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
        return cls(step=parts[0].step, content_ids=parts[0].content_ids, **joined)

    @property
    def n_contents(self) -> int:
        return len(self.content_ids)

    def cells(self) -> Cells:
        keys = np.stack([self.content, self.offset, self.phase], axis=1)
        unique, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        return Cells(
            content=unique[:, 0],
            offset=unique[:, 1],
            phase=unique[:, 2],
            n=np.bincount(inverse).astype(float),
            k=np.bincount(inverse, weights=self.correct),
            n_contents=self.n_contents,
        )

    def offset_means(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct offsets [D] and the accuracy over all records at each [D]."""
        offsets, inverse = np.unique(self.offset, return_inverse=True)
        return offsets, np.bincount(inverse, weights=self.correct) / np.bincount(inverse)

    def phase_by_offset(self) -> list[int | None]:
        """The phase at each distinct offset when every record there has the same one, else None."""
        offsets = np.unique(self.offset)
        out = []
        for d in offsets:
            phases = np.unique(self.phase[self.offset == d])
            out.append(int(phases[0]) if len(phases) == 1 else None)
        return out


def check_records(records: list[dict]) -> None:
    if not records:
        raise ValueError("no records to analyze (records.jsonl is empty)")
    for name in REQUIRED:
        missing = sum(name not in r for r in records)
        if missing:
            raise ValueError(
                f"{missing} of {len(records)} records lack the field {name!r}; every record needs {REQUIRED}"
            )
    steps = {r["step"] for r in records}
    if len(steps) != 1:
        raise ValueError(f"records mix compression steps {sorted(steps)}; analyze one step at a time")
    step = next(iter(steps))
    if not isinstance(step, int) or step < 1:
        raise ValueError(f"records have step {step!r}; a step is an integer >= 1")


def _flag(value) -> float:
    return float("nan") if value is None else float(bool(value))


def _number(value) -> float:
    return float("nan") if value is None else float(value)


def _margin(record: dict) -> float:
    target = record.get("target", "right")
    others = [v for k, v in record["logprobs"].items() if v is not None and k != target]
    if not others or record["logprob_target"] is None:
        return float("nan")
    return float(record["logprob_target"]) - max(others)
