"""Two runs on identical items, record by record: where does B depart from A? (``phasescope
compare --paired A B``; docs/sweeps.md, 'Paired comparison').

The main use: a reference (an ``hf:`` model, a trusted endpoint) against a served stack on the
same prompts. The items must be identical token for token: each record carries its prompt's
digest (the prompt ids, every candidate's ids and the target: ``run.orchestrator.prompt_digest``),
and two records with the same (content, offset, variant) must carry the same digest; the first
that differs is named and nothing is compared.

Each pair is a *departure* when the two disagree: B wrong where A is right, B right where A is
wrong, or the right answer's log-prob moved by more than a tolerance. The departures are counted
per cell of the needle's phase and the prompt end's phase, and tested, each kind on the records it
could happen on, by the permutation tests of ``analysis/departures.py``.

Shape legend: N paired records, s the step.
"""

from __future__ import annotations

import numpy as np

from phasescope.analysis.departures import DEFAULT_TOLERANCE, Pairs, departure_statistics, pairs_from_records
from phasescope.errors import InputError
from phasescope.rundir.records import Record


def pair_records(a: list[Record], b: list[Record], names: tuple[str, str] = ("A", "B")) -> list[tuple[Record, Record]]:
    """The records of both runs with the same (content, offset, variant), checked identical."""
    for records, name in ((a, names[0]), (b, names[1])):
        lacking = next((r for r in records if r.prompt_digest is None), None)
        if lacking is not None and any(r.prompt_digest is not None for r in records):
            line = next(i for i, r in enumerate(records) if r.prompt_digest is None) + 1
            raise InputError(
                f"{name}'s record content {lacking.content_id!r} offset {lacking.offset} (line {line} of its "
                f"records.jsonl) lacks its prompt digest, which the run's other records carry: that line was edited; "
                "restore it, or delete it and rerun the sweep (the record is scored again)"
            )
        if lacking is not None:
            raise InputError(
                f"{name}'s records carry no prompt digest (content {lacking.content_id!r} offset {lacking.offset}: "
                "swept by an earlier phasescope), so identical items cannot be checked; rerun that sweep into a new "
                "--out directory to compare the runs record by record"
            )
    if a[0].step != b[0].step:
        raise InputError(f"{names[0]} is at step {a[0].step} and {names[1]} at step {b[0].step}; pair runs of one step")
    by_key = {r.key: r for r in b}
    pairs = [(r, by_key[r.key]) for r in a if r.key in by_key]
    if not pairs:
        raise InputError(
            f"{names[0]} and {names[1]} share no record (no content, offset and variant in both): two parts of one "
            "sweep, or two sweeps; pair runs of one sweep command on two models, each run whole"
        )
    for x, y in pairs:
        if x.prompt_digest != y.prompt_digest:
            where = f"content {x.content_id!r} offset {x.offset} variant {x.variant}"
            detail = ""
            if (x.answer_pos, x.anchor_pos) != (y.answer_pos, y.anchor_pos):
                detail = (
                    f" (prompt lengths {x.answer_pos} and {y.answer_pos}, needle at {x.anchor_pos} and {y.anchor_pos})"
                )
            raise InputError(
                f"{where}: the two runs' items differ{detail}: {names[0]}'s prompt or candidates are not "
                f"{names[1]}'s token for token (another tokenizer, chat template, seed or probe option), so their "
                "answers cannot be paired; sweep both with the same command and --tokenizer"
            )
    return pairs


def paired_statistics(
    pairs: list[tuple[Record | None, Record]],
    names: tuple[str, str] = ("A", "B"),
    seed: int = 0,
    n_resamples: int = 2000,
    tolerance: float = DEFAULT_TOLERANCE,
) -> dict:
    """Departures per cell and the departure tests (``analysis/departures.py``), and the one
    sentence that says where B departs from A. A pair whose first record is None compares B with
    the known answer (reference-free: every record right)."""
    reference_free = all(x is None for x, _ in pairs)
    arrays = pairs_from_records(pairs)
    result = departure_statistics(arrays, names, tolerance, seed, n_resamples, reference_free)
    worse, base = arrays.departed("wrong", tolerance)
    better, _ = arrays.departed("right", tolerance)
    result |= {
        "step": arrays.step,
        "align": arrays.align,
        "reference_free": reference_free,
        "b_wrong_a_right": int(worse.sum()),
        "b_right_a_wrong": int(better.sum()),
        "cells": _cells(arrays, worse, better),
    }
    return result


def _cells(p: Pairs, worse: np.ndarray, better: np.ndarray) -> list[dict]:
    """Per (needle phase, prompt-end phase) at the step: records, A right, B wrong where A right,
    B right where A wrong."""
    needle, end = p.positions["needle"] % p.step, p.positions["end"] % p.step
    rows = []
    for n in range(p.step):
        for m in np.unique(end):
            mask = (needle == n) & (end == m)
            if mask.any():
                rows.append(
                    {"needle_phase": n, "end_phase": int(m), "n": int(mask.sum()),
                     "a_right": int(p.a_correct[mask].sum()), "b_wrong_a_right": int(worse[mask].sum()),
                     "b_right_a_wrong": int(better[mask].sum())}
                )  # fmt: skip
    return rows


__all__ = ["pair_records", "paired_statistics"]
