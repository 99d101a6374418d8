"""Two runs on identical items, record by record: where does B depart from A? (``phasescope
compare --paired A B``; docs/sweeps.md, 'Paired comparison').

The main use: a reference (an ``hf:`` model, a trusted endpoint) against a served stack on the
same prompts. The items must be identical token for token: each record carries its prompt's
digest (the prompt ids, every candidate's ids and the target: ``run.orchestrator.prompt_digest``),
and two records with the same (content, offset, variant) must carry the same digest; the first
that differs is named and nothing is compared.

Each pair is a *departure* when the two disagree: B wrong where A is right, or B right where A is
wrong. The departures are counted per cell of the needle's phase and the prompt end's phase, and
``B's correct - A's correct`` is read by factor with the statistics of ``analysis/factors.py``
(each factor where it moves within contents; a factor held within contents between them), the
tests under one Holm adjustment; contents are the clusters.

Shape legend: N paired records, s the step.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from phasescope.analysis.factors import describe_phase, factor_phases, factor_statistics, group_words
from phasescope.analysis.pvalue import p_text
from phasescope.analysis.records import RecordArrays
from phasescope.analysis.verdict import ALPHA, holm
from phasescope.errors import InputError
from phasescope.rundir.records import Record


def pair_records(a: list[Record], b: list[Record], names: tuple[str, str] = ("A", "B")) -> list[tuple[Record, Record]]:
    """The records of both runs with the same (content, offset, variant), checked identical."""
    for records, name in ((a, names[0]), (b, names[1])):
        lacking = next((r for r in records if r.prompt_digest is None), None)
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
            f"{names[0]} and {names[1]} share no (content, offset, variant): they are not the same sweep; pair runs of "
            "one sweep command on two models"
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
    pairs: list[tuple[Record, Record]], names: tuple[str, str] = ("A", "B"), seed: int = 0, n_resamples: int = 2000
) -> dict:
    """Departures per cell and by factor, and the one sentence that says where B departs from A."""
    a = RecordArrays.from_records([x for x, _ in pairs])
    b_correct = np.array([float(y.correct) for _, y in pairs])
    worse, better = (a.correct == 1) & (b_correct == 0), (a.correct == 0) & (b_correct == 1)
    step = a.step
    cells = _cells(a, worse, better)
    factors = None
    if a.end_phase is not None and (worse.any() or better.any()):
        diff = replace(a, correct=b_correct - a.correct)
        factors = factor_statistics(diff, 1, np.random.default_rng(seed), n_resamples)
    tests = {f"factor:{t['name']}": t["p_value"] for t in (factors or {}).get("tests", [])}
    adjusted = holm(tests)
    return {
        "names": list(names),
        "step": step,
        "n_pairs": len(pairs),
        "n_contents": a.n_contents,
        "b_wrong_a_right": int(worse.sum()),
        "b_right_a_wrong": int(better.sum()),
        "cells": cells,
        "factors": factors,
        "adjusted_p": adjusted,
        "sentence": _sentence(a, worse, better, names, factors, adjusted),
    }


def _cells(a: RecordArrays, worse: np.ndarray, better: np.ndarray) -> list[dict]:
    """Per (needle phase, prompt-end phase): records, A right, B wrong where A right, B right where A wrong."""
    end = a.end_phase if a.end_phase is not None else np.full(len(a.phase), -1)
    rows = []
    for n in range(a.step):
        for m in np.unique(end):
            mask = (a.phase == n) & (end == m)
            if mask.any():
                rows.append(
                    {"needle_phase": n, "end_phase": None if m < 0 else int(m), "n": int(mask.sum()),
                     "a_right": int(a.correct[mask].sum()), "b_wrong_a_right": int(worse[mask].sum()),
                     "b_right_a_wrong": int(better[mask].sum())}
                )  # fmt: skip
    return rows


def _where(a: RecordArrays, departed: np.ndarray, base: np.ndarray) -> tuple[str, int, int, int] | None:
    """(factor, phase, departures there, base records there) of a phase holding every departure,
    the one whose base records are fewest (the tightest description); None when no phase does."""
    best = None
    for factor, labels in (factor_phases(a) or {"needle": a.phase}).items():
        values = np.unique(labels[departed])
        if len(values) == 1:
            v = int(values[0])
            there = int((base & (labels == v)).sum())
            if best is None or there < best[3]:
                best = (factor, v, int(departed.sum()), there)
    return best


def _most(a: RecordArrays, departed: np.ndarray, base: np.ndarray) -> str:
    """'most where the prompt length ≡ 3 mod 4 (40 of 120)': the phase with the highest departure rate."""
    best = None
    for factor, labels in (factor_phases(a) or {"needle": a.phase}).items():
        for v in np.unique(labels):
            here = labels == v
            rate = departed[here].sum() / max(base[here].sum(), 1)
            if best is None or rate > best[0]:
                best = (rate, factor, int(v), int(departed[here].sum()), int(base[here].sum()))
    _, factor, v, k, n = best
    return f"most where the {describe_phase(factor, v, a.step, a.align)} ({k} of {n})"


def _sentence(a, worse, better, names, factors, adjusted) -> str:
    first, second = names
    if not worse.any() and not better.any():
        return f"{second} agrees with {first} on every one of {len(worse)} records"
    parts = []
    for departed, base, what in (
        (worse, a.correct == 1, f"{second} is wrong where {first} is right"),
        (better, a.correct == 0, f"{second} is right where {first} is wrong"),
    ):
        if not departed.any():
            continue
        found = _where(a, departed, base)
        if found is not None and found[2] >= 2:
            factor, v, k, n = found
            parts.append(
                f"{what} on {k} of {n} records whose {describe_phase(factor, v, a.step, a.align)}, and nowhere else"
            )
        else:
            parts.append(f"{what} on {int(departed.sum())} records, spread over the phases; {_most(a, departed, base)}")
    text = "; ".join(parts)
    claimed = [t for t in (factors or {}).get("tests", []) if adjusted.get(f"factor:{t['name']}", 1.0) < ALPHA]
    tested = [t for t in (factors or {}).get("tests", []) if t["p_value"] is not None]
    if claimed:
        text += " (the departures follow " + " and ".join(
            f"{group_words(t['members'])}: {p_text(t['p_value'])}" for t in claimed
        )
        text += ", Holm over the factors tested)"
    elif tested:
        text += (
            " (no factor's phase explains the departures: "
            + ", ".join(f"{group_words(t['members'])} {p_text(t['p_value'])}" for t in tested)
            + ")"
        )
    return text


__all__ = ["pair_records", "paired_statistics"]
